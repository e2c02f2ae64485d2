"""The two entry points: one op on one GPU (`predict_op`), a whole graph scheduled (`predict`).

Op predictions are memoized per (op parameters, hardware object, level) and shared with the
scheduler (perfmodel.schedule.op_entry), so a planner's or a sweep's repeated shapes, and a graph's
identical layers, are predicted once; `clear_cache()` forgets them.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Iterable

from perfmodel import intervals
from perfmodel.demand import LaunchShape
from perfmodel.engine import LEVELS, ROOFLINE_PIPES, Estimate, check_estimate, occupancy, \
    sm_rate_per_clk, sm_rate_per_s, tensor_power_ratio
from perfmodel.errors import InputError, check_result
from perfmodel.graph import OpGraph
from perfmodel.hardware import Hardware, hardware
from perfmodel.ops import Op
from perfmodel.ops.gemm import (FP4_MMA_N, MAX_SPLIT_K, Gemm, fp4_cutlass, operand_bytes,
                                tile_facts)
from perfmodel.units import DTYPE_BYTES, bytes_per_element, tensor_dtype
from perfmodel.schedule import Prediction, op_entry, schedule
from perfmodel.schedule import clear_cache as _clear_schedule_cache


def clear_cache() -> None:
    """Forget every memoized op prediction. The keys already follow the op's parameters, the
    hardware object (a clock-locked or refitted spec is another one), the level and the fitted
    constants an op reads (Op.cache_state); call this after changing anything else a prediction
    reads, such as perfmodel/accuracy.yaml (the prediction bands)."""
    _clear_schedule_cache()
    _GEMM_MEMO.clear()
    _FAMILIES.clear()


def predict_op(op: Op, hw: Hardware | str, level: str = "pipes") -> Estimate:
    """Predict one op's time and bound on one GPU; at the pipes level the Estimate carries the
    80 % band of its op class's cross-validated error (`interval_s`, perfmodel.intervals)."""
    if type(hw) is not Hardware:
        hw = hardware(hw)
    if type(op) is Gemm:
        key = (*op.params.values(), hw, level)  # GEMM_MEMO_KEY
        hit = _GEMM_MEMO.get(key)
        if hit is None:
            hit = gemm_estimate(op, op.kernel_hardware(hw), level)
            if hit is not None:
                check_estimate(hit, op, hw)
                if len(_GEMM_MEMO) >= GEMM_MEMO_SIZE:
                    _GEMM_MEMO.clear()
                _GEMM_MEMO[key] = hit
        if hit is not None:
            return hit
    e = op_entry(op, hw, level)
    if e.banded is None:
        est = e.estimate
        band = intervals.band(op, hw) if level == "pipes" else None
        e.banded = est if band is None else dataclasses.replace(
            est, interval_s=band.around(est.time_s), interval_basis=band.basis)
    return e.banded


def predict_ops(ops: Iterable[Op], hw: Hardware | str, level: str = "pipes") -> list[Estimate]:
    """`predict_op` of each op (the hardware resolved once): a list of Estimates in the order
    of `ops`, the same ones. Cold GEMMs of one family (same dtypes and options), BATCH_MIN or
    more of them, are priced together in one numpy pass first (perfmodel.batch, bit-identical
    to predict_op) and memoized, so a sweep's thousand new shapes cost a few microseconds
    each."""
    if type(hw) is not Hardware:
        hw = hardware(hw)
    ops = list(ops)
    prefetch_gemms(ops, hw, level)
    return [predict_op(o, hw, level) for o in ops]


# Fewer cold GEMMs of one family than this go through the scalar path one by one: the array
# pass costs about as much as ~4 scalar searches however few shapes it holds.
BATCH_MIN = 8
GEMM_FAMILY = ("dtype", "out_dtype", "a_dtype", "b_dtype", "fp8_scaling", "persistent")


def prefetch_gemms(ops: list, hw: Hardware, level: str) -> None:
    """Memoize the Estimates of the not-yet-memoized GEMMs among `ops` through
    perfmodel.batch.gemm_batch, per family of at least BATCH_MIN shapes (predict_ops; the
    sweep, which reads each point's Estimate or error after). Raises nothing: a family the
    array pass refuses is left to predict_op, which gives each shape its own error."""
    if level not in LEVELS:
        return  # predict_op gives the error
    families: dict[tuple, dict] = {}
    for o in ops:
        if type(o) is Gemm:
            key = (*o.params.values(), hw, level)  # GEMM_MEMO_KEY
            if key not in _GEMM_MEMO:
                fam = tuple(o.params[p] for p in GEMM_FAMILY)
                families.setdefault(fam, {})[key] = o
    from perfmodel.batch import gemm_batch
    for fam, cold in families.items():
        if len(cold) < BATCH_MIN:
            continue
        first = next(iter(cold.values()))
        if first.promotes_on_cuda_cores(hw):
            continue  # the engine's path either way
        sizes = {f: [o.params[f] for o in cold.values()] for f in ("m", "n", "k", "batch",
                                                                    "count")}
        try:
            table = gemm_batch(hw, level=level, **sizes,
                               **{p: first.params[p] for p in GEMM_FAMILY})
        except InputError:
            continue  # predict_op raises each shape's own error
        if len(_GEMM_MEMO) + len(cold) > GEMM_MEMO_SIZE:
            _GEMM_MEMO.clear()
        for j, (key, o) in enumerate(cold.items()):
            _GEMM_MEMO[key] = check_estimate(table.estimate(j), o, hw)


def predict(graph: OpGraph, hw: Hardware | str | None = None,
            level: str = "pipes") -> Prediction:
    """Predict and schedule a whole graph on one GPU (`hw` defaults to the graph's own)."""
    target = hw if hw is not None else graph.hardware
    if target is None:
        raise InputError(f"graph '{graph.name}': no hardware given and no `hardware:` key")
    if level not in LEVELS:
        raise InputError(f"unknown level '{level}' (expected one of {', '.join(LEVELS)})")
    pred = schedule(graph, hardware(target), level)
    # every op's estimate was checked when it was first computed (engine.check_estimate); the
    # schedule's totals here
    check_result(f"predict({graph.name!r})", {"total_time_s": pred.total_time_s,
                                              "microbatch_time_s": pred.microbatch_time_s,
                                              "pipeline_bubble_s": pred.pipeline_bubble_s})
    return pred


# ---- the scalar GEMM path -------------------------------------------------------------------
# One cold GEMM's Estimate on Python floats (`gemm_estimate`, which `predict_op` takes for a
# Gemm). A cold GEMM through the engine runs ~100 numpy calls on 6-18-element candidate arrays
# (~1 us of fixed cost each); the same arithmetic on Python floats costs ~25 ns an operation. So
# the tile search (Gemm.kernel_candidates' candidates) and the engine's formulas run here on
# Python floats, in the engine's order of operations, which gives the same doubles: every prediction
# bit-identical to the engine's (tests/ops/test_gemm_scalar.py checks thousands of random shapes
# on every GPU at both levels). Mirrors: engine.candidate_times_s, kernel_resource_times,
# kernel_clock_hz, at_clock, pipes, roofline. A change to those formulas must be made here too
# (the test fails until it is).
#
# What makes one call cheap (a few µs of search for a new shape):
#   * everything no size changes is computed once per GEMM family on a GPU (`_Family`: the
#     dtypes' facts, the GPU's rates, each tile's constant terms, occupancy and label);
#   * the search is pruned by exact lower bounds (`_search`): a candidate is evaluated in full
#     only where a bound on its time, shaved by SPLIT_BOUND against the rounding of the float
#     arithmetic, does not exceed the best time found so far, so it could still win; a twin
#     tile is skipped where its total is its tile's (`_Family`); split-K is skipped whole where
#     a bound on every split exceeds the best unsplit time. Ties go to the first candidate in
#     Gemm.kernel_candidates' order, as the engine's np.argmin keeps them, whatever order the
#     tiles are tried in (short tiles first for a short M: the bounds prune more once a good
#     total is found early). tests/ops/test_gemm_scalar_fast.py checks the pruned search
#     against the full one (`gemm_estimate(..., prune=False)`).
#
# Its Estimates are memoized per (op parameters, hardware, level) like schedule.op_entry's;
# graphs still schedule through op_entry (it keeps the Demand and contention load the
# scheduler needs).
#
# GEMM_MEMO_KEY: a Gemm's parameter values in PARAMS order, the hardware object and the level.
# Complete and exact like Op.cache_key, without its per-object repr of every value (~1.5 us of
# a cold call): Gemm's coerced values are ints (never bools), bools, lower-case or given
# strings and None, one kind per parameter, so equal tuples are equal reprs; Gemm reads no
# fitted constant (Op.cache_state is empty).
GEMM_MEMO_SIZE = 1 << 14
_GEMM_MEMO: dict = {}


# A lower bound on a candidate's time is real arithmetic done in floats (a few roundings of
# ~1e-16 each): shaved by this factor it stays below the candidate's computed total, so no
# winner is pruned (here and in perfmodel.batch._search).
SPLIT_BOUND = 1.0 - 1e-9


@functools.lru_cache(maxsize=64)
def gemm_rates(hw: Hardware) -> tuple[dict, dict, float]:
    """Per-SM per-clock rates of the SM resources, the roofline's device-wide peak rates
    (engine.roofline's) and the L2 bandwidth at the sustained clock."""
    per_clk = {r: sm_rate_per_clk(r, hw) for r in
               [f"tensor:{d}" for d in hw.tensor_flop_per_sm_per_clk]
               + [*hw.pipes_per_sm_per_clk, "issue", "smem"]}
    peak = {f"tensor:{d}": sm_rate_per_s(f"tensor:{d}", hw, sustained=False) * hw.sm_count
            for d in hw.tensor_flop_per_sm_per_clk}
    peak.update({p: sm_rate_per_s(p, hw, sustained=False) * hw.sm_count
                 for p in ROOFLINE_PIPES})
    peak["hbm"] = hw.hbm_peak_bandwidth_bytes_per_s
    return per_clk, peak, hw.l2_bandwidth_at(hw.sustained_sm_clock_hz)


@functools.lru_cache(maxsize=1024)
def tile_ctas_per_sm(hw: Hardware, threads: int, registers: int,
                     smem: int) -> tuple[int, str]:
    """engine.occupancy of a candidate's launch, built as candidate_times_s builds it (integer
    fields: occupancy's cache takes equal launches for one, so the same key gives the same
    result, 2 or 2.0, as the engine)."""
    return occupancy(LaunchShape(1, int(threads), int(registers), int(smem)), hw)


class _Tile:
    """One tile of a family that fits in shared memory (the others are never valid): its
    facts, and the terms of the candidate work that are products of tile constants alone
    (computed as Gemm._work computes them, so the same doubles). `row` holds what
    the search reads, for one unpacking per candidate."""

    __slots__ = ("i", "m", "n", "n_mma", "smem_per_k", "l2_per_k", "r0", "in_flight",
                 "sms_cps", "full_rate", "label", "stages", "smem", "threads", "registers",
                 "occupancy", "twin", "row")

    def __init__(self, f: dict, i: int, hw: Hardware, fam: "_Family") -> None:
        tm, tn = f["m"][i], f["n"][i]
        self.i, self.m, self.n = i, tm, tn
        self.n_mma = max(tn, FP4_MMA_N) if fam.fp4 else tn  # the MMA's N (FP4 granule)
        op_b, a_b, b_b = fam.op_b, fam.a_b, fam.b_b
        self.smem_per_k = tm * op_b + tn * op_b * f["b_share"][i]  # smem bytes per k element
        self.l2_per_k = tm * a_b / f["cluster_n"][i] + tn * b_b / f["cluster"][i]  # L2 bytes
        # hbm_operand_bytes_scalar's raster rows before the tile-count clamp
        self.r0 = max(round(math.sqrt(fam.sms * tn * b_b / (tm * a_b))), 1)
        self.in_flight = f["in_flight"][i]
        self.smem, self.threads, self.registers = f["smem"][i], f["tiles"][i].threads, \
            f["tiles"][i].registers
        # resident CTAs per SM (every tile that fits is a candidate the full search evaluates:
        # found here, it raises where that search would)
        cps = tile_ctas_per_sm(hw, f["threads"][i], f["registers"][i], self.smem)[0]
        self.sms_cps = fam.sms * cps
        # the HBM rate of a launch of at least sms_cps CTAs (min(CTAs, sms_cps) = sms_cps)
        self.full_rate = min(fam.hbm_bw, self.sms_cps * self.in_flight / fam.hbm_lat)
        tile = f["tiles"][i]  # the Demand's tile label (gemm.candidate_launch's)
        self.label = (f"{tile.m}x{tile.n}x{f['kblock']}" + ("x2sm" if tile.cta_pair else "")
                      + (f" cluster {tile.cluster_m}x1" if tile.cluster_m > 1 else ""))
        self.stages = f["stages"][i]
        self.occupancy = None  # the chosen launch's (CTAs per SM, limiter), on first use
        self.twin = None  # an earlier tile that this one never beats (_Family.__init__)


class _Family:
    """What the scalar path reads for every GEMM of one family (dtypes, options, fixed kernel)
    on one GPU that no size changes (`family`)."""

    def __init__(self, op: Gemm, hw: Hardware) -> None:
        compute = tensor_dtype(op.dtype)
        per_clk, peak, l2_rate = gemm_rates(hw)
        self.tensor = tensor = compute != "fp32"
        self.resource = f"tensor:{compute}" if tensor else "fp32"
        self.simt = not tensor
        _, a_b, b_b, c_b = op._dtype_key()
        self.a_b, self.b_b, self.c_b = a_b, b_b, c_b
        self.op_b = op_b = DTYPE_BYTES[compute]
        self.block_scaled = op.block_scaled_fp8
        self.mixed = any(bytes_per_element(x) < op_b for x in (op.a_dtype, op.b_dtype) if x)
        self.narrow_b = bool(op.b_dtype) and b_b < op_b
        self.fp4 = fp4_cutlass(hw, compute)
        fixed = op.fixed_tiles(hw)
        # the NVFP4 kernel and a fixed one have no split-K (Gemm.candidates)
        self.splits_k = not self.fp4 and fixed is None
        self.persistent = op.is_persistent(hw)
        # intervals.band(op, hw) is band_of_classes of these (the op's name, dtype and
        # fp8_scaling choose them; the band itself is looked up per call, so intervals.reload
        # is seen)
        self.band_classes, self.architecture = intervals.band_classes(op), hw.architecture
        f = self.f = tile_facts(hw, compute, a_b, b_b, c_b, fixed)
        self.kblock = f["kblock"]
        self.sms, self.sustained = hw.sm_count, hw.sustained_sm_clock_hz
        hi = self.hi = hw.max_sm_clock_hz
        lo = self.lo = hw.sustained_sm_clock_hz
        self.r_tensor = per_clk[self.resource] * self.sustained if tensor else 0.0
        # narrow MMAs under the power limit (engine.kernel_resource_times: tensor_power_ratio)
        self.power_ratio = tensor_power_ratio(hw, self.resource) if tensor else 1.0
        self.r_fma, self.r_smem = per_clk["fma"] * self.sustained, \
            per_clk["smem"] * self.sustained
        self.l2_rate = l2_rate
        self.hbm_bw, self.hbm_lat = hw.hbm_bandwidth_bytes_per_s, hw.hbm_latency_s
        self.launch_s = hw.kernel_launch_s
        self.l2_capacity = hw.l2_capacity_bytes
        self.peak_tensor = peak[self.resource] if tensor else None
        self.peak_fma, self.peak_hbm = peak["fma"], peak["hbm"]
        # engine.kernel_clock_hz: the sustained clock where the GPU has no faster one, the
        # fastest for a kernel without tensor work, else the utilization rule (None here)
        self.fixed_clock = lo if hi <= lo else None if tensor else hi
        # `_search`'s bound on the clocked times: the utilization rule's g(y) where 2·lo >= hi
        # (g rises with y), else y·lo/hi (the fastest clock)
        self.rising = self.fixed_clock is None and 2 * lo >= hi
        # _time_bound(fam, T, T, 0) / T: a candidate's top time over its MMA time, at least
        self.mma_factor = (self.sustained / self.fixed_clock if self.fixed_clock is not None
                           else 1.0 if self.rising else lo / hi)
        self.tiles = tuple(_Tile(f, i, hw, self) for i in range(len(f["m"])) if f["fits"][i])
        for j, t in enumerate(self.tiles):
            # the same candidate but for more L2 bytes per k element (wgmma's 128x128 tile
            # without the cluster's B multicast): every term of its time but t_l2 is the
            # twin's, so where its t_l2 does not exceed the twin's largest SM-clocked time its
            # total is the twin's, computed by the same operations, and never strictly less
            t.twin = next((u.i for u in self.tiles[:j] if u.l2_per_k <= t.l2_per_k and (
                u.m, u.n, u.n_mma, u.smem_per_k, u.r0, u.in_flight, u.sms_cps, u.full_rate)
                == (t.m, t.n, t.n_mma, t.smem_per_k, t.r0, t.in_flight, t.sms_cps,
                    t.full_rate)), None)
            t.row = (t.i, t.m, t.n, t.n_mma, t.smem_per_k, t.l2_per_k, t.r0, t.in_flight,
                     t.sms_cps, t.full_rate, t, t.twin)
        self.rows = tuple(t.row for t in self.tiles)
        # the order `_search` tries the tiles in where the fewest rows hold M: the pruning
        # skips more once a good total is found early, and a short M runs best on short
        # tiles (their MMAs pad it least). Any order finds the same kernel (ties go to the
        # lower index); a twin still comes after its tile.
        self.rows_short_m = tuple(sorted(self.rows, key=lambda r: (r[1], r[0])))
        self.min_tile_m = min((t.m for t in self.tiles), default=0)
        # math.ceil(sms / r) of the raster rows r a tile can take (hbm_operand_bytes_scalar)
        self.ceil_sms = [0] + [math.ceil(self.sms / r) for r in
                               range(1, max((t.r0 for t in self.tiles), default=1) + 1)]
        # what `_search` reads, for one unpacking per call
        self.constants = (
            tensor, self.sms, self.kblock, self.r_tensor, self.power_ratio, self.l2_rate,
            self.r_fma, self.r_smem, self.launch_s, self.hbm_bw, self.hbm_lat, hi, lo,
            self.sustained, self.fixed_clock, self.rising, self.mma_factor, a_b, b_b, c_b,
            self.ceil_sms,
            self.simt, self.mixed, self.narrow_b)


# Families by (GPU, the Gemm parameters other than sizes that the scalar path reads). The GPU
# is the Hardware object (identity: a clock-locked or refitted spec is another one); after
# Gemm.resolved, dispatch is "best" and swap_ab False, so dtype, a_dtype, b_dtype, out_dtype,
# fp8_scaling, persistent and tile are every parameter besides m, n, k, batch and count that
# `_Family` reads. None marks a family the engine path takes (`family`).
_FAMILIES: dict = {}
FAMILIES_SIZE = 256


def family(op: Gemm, hw: Hardware) -> _Family | None:
    """The family facts of `op` (already resolved) on `hw`, or None where the scalar path does
    not mirror the engine: block-scaled FP8 promoted on the CUDA cores (an overlap), a dtype
    the GPU lacks (the engine's error)."""
    key = (hw, op.dtype, op.a_dtype, op.b_dtype, op.out_dtype, op.fp8_scaling, op.persistent,
           op.tile)
    try:
        return _FAMILIES[key]
    except KeyError:
        pass
    fam = None
    compute = tensor_dtype(op.dtype)
    if not op.promotes_on_cuda_cores(hw) and (compute == "fp32" or (
            hw.supports(compute) and f"tensor:{compute}" in gemm_rates(hw)[0])):
        fam = _Family(op, hw)
    if len(_FAMILIES) >= FAMILIES_SIZE:
        _FAMILIES.clear()
    _FAMILIES[key] = fam
    return fam


def gemm_estimate(op: Gemm, hw: Hardware, level: str, prune: bool = True) -> Estimate | None:
    """The Estimate the engine gives `op` (with its band at the pipes level), on Python floats;
    None where the mirror does not apply (block-scaled FP8 promoted on the CUDA cores: an
    overlap; a dtype the GPU lacks: the engine's error) and the engine path decides. `prune`
    False evaluates every candidate (the reference the pruned search is tested against)."""
    if level not in LEVELS or op.promotes_on_cuda_cores(hw):
        return None
    if op.dispatch != "best" or op.swap_ab:
        op = op.resolved(hw)  # the kernel an engine's table picks, a swap-AB one transposed
    fam = family(op, hw)
    if fam is None:
        return None
    best = _search(fam, op, prune)
    if best is None:
        return None  # nothing fits: the engine's error
    return _estimate(fam, op, hw, level, best)


def _search(fam: _Family, op: Gemm, prune: bool) -> tuple | None:
    """The engine's pick among Gemm.kernel_candidates' candidates (engine.candidate_times_s:
    each candidate's resource times at the sustained clock, moved to its kernel clock, max +
    first load + launches; the first fastest valid candidate, as np.argmin): (_Tile, split,
    w_tensor, w_fma, w_smem, w_l2, w_hbm, CTAs, kernels, A + B + C bytes), None if no tile
    fits.

    The unsplit candidates first, in the full search's order with its strict `<`. Where
    `prune`, a candidate is evaluated in full only where a lower bound on its time
    (`_time_bound` of its MMA and L2 times and its HBM rate, the first load and a launch)
    does not exceed the best total so far: one above it cannot be strictly faster. Then
    split-K (`_split_search`)."""
    m, n, k, batch = op.m, op.n, op.k, op.batch
    if fam.block_scaled:
        a_bytes, b_bytes, c_bytes = operand_bytes(m, n, k, batch, (fam.a_b, fam.b_b, fam.c_b),
                                                  True)
    else:  # operand_bytes without block scales, inline (their 0.0 * batch is 0.0)
        a_bytes, b_bytes, c_bytes = m * k * fam.a_b * batch + 0.0, \
            k * n * fam.b_b * batch + 0.0, m * n * fam.c_b * batch
    ab_bytes = a_bytes + b_bytes
    hbm_floor = ab_bytes + c_bytes  # every candidate's HBM bytes are at least these
    # hbm_operand_bytes: operands that fit in half of L2 are read once
    l2_resident = ab_bytes <= 0.5 * fam.l2_capacity
    (tensor, sms, kblock, r_tensor, power_ratio, l2_rate, r_fma, r_smem, launch_s, hbm_bw,
     hbm_lat, hi, lo, sustained, fixed_clock, rising, mma_factor, a_b, b_b, c_b, ceil_sms,
     simt, mixed, narrow_b) = fam.constants
    ceil = math.ceil
    fixed_s = hbm_lat + launch_s  # the first load (HBM bytes > 0) and one launch
    k_pad = -(-k // kblock) * kblock  # k_split = k
    best, best_t = None, math.inf
    hbm_of = {}  # the unsplit HBM bytes of the tiles evaluated, by tile index
    x_of = {}  # the largest SM-clocked time of the tiles evaluated, by tile index
    short = False  # whether a tile leaves SMs idle
    for i, tm, tn, n_mma, smem_per_k, l2_per_k, r0, in_flight, sms_cps, full_rate, tile, \
            twin in (fam.rows_short_m if prune and m <= fam.min_tile_m else fam.rows):
        tiles_m, tiles_n = -(-m // tm), -(-n // tn)
        ctas = tiles_m * tiles_n * batch
        if ctas < sms:
            short = True  # split-K is offered (for this tile, whether or not evaluated here)
        busiest = ceil(ctas / sms) + 0.0
        if ctas >= sms_cps:
            rate = full_rate
        else:  # min(hbm_bw, min(ctas, sms_cps) * in_flight / hbm_lat), ctas the smaller
            rate = ctas * in_flight / hbm_lat
            if hbm_bw <= rate:
                rate = hbm_bw
        if tensor:
            w_t = ctas * 2.0 * tm * n_mma * k_pad
            # stretched to its power-limited time first, as engine.power_limited
            t_t = busiest * (w_t / ctas) / r_tensor * power_ratio
        else:
            w_t, t_t = None, 0.0
        w_l2 = ctas * l2_per_k * k + c_bytes + 0.0
        t_l2 = w_l2 / l2_rate
        if twin is not None and prune and t_l2 <= x_of.get(twin, -1.0):
            continue  # the twin's total (_Family.__init__), which is no better than the best
        if prune and best is not None:
            # _time_bound(fam, t_t, max(t_t, t_l2), hbm_floor / rate), inline: its MMA and HBM
            # terms first, the L2 one only where they do not prune
            lower = hbm_floor / rate if rate else math.inf
            if t_t * mma_factor > lower:
                lower = t_t * mma_factor
            if (lower + fixed_s) * SPLIT_BOUND > best_t:
                continue  # cannot be strictly faster than the best so far
            if t_l2 > t_t:
                if fixed_clock is not None:
                    lower = t_l2 * (sustained / fixed_clock)
                elif rising:
                    lower = t_l2 * (sustained / (hi - (t_t / t_l2) * (hi - lo)))
                else:
                    lower = t_l2 * (lo / hi)
                if (lower + fixed_s) * SPLIT_BOUND > best_t:
                    continue
        if l2_resident:  # _hbm_bytes, inline
            hbm = hbm_floor
        else:
            r = r0 if r0 < tiles_m else tiles_m
            c = ceil_sms[r]
            if tiles_n < c:
                c = tiles_n
            waves = (tiles_m * tiles_n) / (r * c)
            hbm = waves * (r * tm * a_b + c * tn * b_b) * k * batch
            if hbm < ab_bytes:
                hbm = ab_bytes
            cap = tiles_n * a_bytes + tiles_m * b_bytes
            if cap < hbm:
                hbm = cap
            hbm = hbm + c_bytes
        hbm_of[i] = hbm
        # Gemm._fma_work (_fma, inline)
        w_f = ctas * tm * tn * 1.0
        if simt:
            w_f = w_f + ctas * tm * tn * k_pad * 1.0
        if mixed:
            w_f = w_f + ctas * k_pad * (tn if narrow_b else tm) * 2
        w_s = ctas * k_pad * smem_per_k + ctas * 2.0 * tm * tn * c_b
        w_h = hbm + 0.0
        # _total, inline
        t_f = busiest * (w_f / ctas) / r_fma
        t_s = busiest * (w_s / ctas) / r_smem
        t_h = w_h / rate if rate else math.inf
        x = t_l2 if t_l2 > t_f else t_f
        if t_s > x:
            x = t_s
        if t_t > x:
            x = t_t
        x_of[i] = x
        if fixed_clock is not None:
            clock = fixed_clock
        else:
            busy = t_h if t_h > x else x
            # t_t / busy lies in [0, 1] (busy >= t_t >= 0): the engine's clamp keeps it
            clock = hi - (t_t / busy if busy > 0 else 0.0) * (hi - lo)
        top = x * (sustained / clock)
        if t_h > top:
            top = t_h
        total = top + (hbm_lat if w_h > 0 else 0.0) + launch_s * 1
        # the first of equal totals in the full search's order: the lower tile index
        if total < best_t or (total == best_t and i < best[0].i):
            best, best_t = (tile, 1, w_t, w_f, w_s, w_l2, w_h, ctas, 1, hbm_floor), total
    if fam.splits_k and short and -(-k // 2) > kblock and not (
            prune and _splits_lower_s(fam, m, n, k, batch, hbm_floor) > best_t):
        best = _split_search(fam, op, prune, best, best_t, hbm_of, a_bytes, b_bytes, c_bytes,
                             l2_resident)
    return best


def _splits_lower_s(fam: _Family, m: int, n: int, k: int, batch: int,
                    hbm_floor: float) -> float:
    """A lower bound on every split-K candidate's time, shaved by SPLIT_BOUND: its HBM bytes at
    the full bandwidth (at least the A, B and C bytes), or its MMAs (at least the problem's,
    2·m·n·k·batch, padded tiles and K doing more) spread perfectly over the SMs and clocked as
    `_time_bound` allows; plus the first load and two launches."""
    lower = hbm_floor / fam.hbm_bw
    if fam.tensor:
        t_mma = 2.0 * m * n * k * batch / fam.sms / fam.r_tensor * fam.power_ratio
        lower = max(lower, t_mma * fam.mma_factor)
    return (lower + fam.hbm_lat + 2 * fam.launch_s) * SPLIT_BOUND


def _time_bound(fam: _Family, t_t: float, y: float, t_h_floor: float) -> float:
    """A lower bound on a candidate's top time (`_total`'s max of its clocked times and t_h)
    from t_t <= its MMA time, y with t_t <= y <= x (x: the largest of its SM-clocked times, the
    MMA's among them) and t_h_floor <= t_h. Real arithmetic: the caller shaves it by
    SPLIT_BOUND against the floats' rounding.

    top >= t_h >= t_h_floor. At a fixed clock, top >= x·lo/clock >= y·lo/clock. Under the
    utilization rule (clock = hi - (T / busy)(hi - lo), T the MMA time, busy = max(x, t_h)),
    top >= x·lo/hi >= y·lo/hi; and where 2·lo >= hi, top >= g_T(x) >= g_t_t(y), with
    g_T(x) = x·lo / (hi - (T / x)(hi - lo)): where busy = x, top >= g_T(x), and g_T rises on
    x >= T (its derivative has the sign of hi·x - 2·T·(hi - lo) >= T·(2·lo - hi)) and falls as
    T does; where busy = t_h > x, top >= t_h > x >= g_T(x) (clock >= lo). If y < T, g_t_t(y)
    <= g_y(y) = y < T <= g_T(x)."""
    if y <= 0:
        return t_h_floor
    if fam.fixed_clock is not None:
        lower = y * (fam.sustained / fam.fixed_clock)
    elif fam.rising:
        lower = y * (fam.sustained / (fam.hi - (t_t / y) * (fam.hi - fam.lo)))
    else:
        lower = y * (fam.lo / fam.hi)
    return t_h_floor if t_h_floor > lower else lower


def _split_search(fam: _Family, op: Gemm, prune: bool, best, best_t: float, hbm_of: dict,
                  a_bytes: float, b_bytes: float, c_bytes: float, l2_resident: bool):
    """The split-K candidates after the unsplit ones, in Gemm.kernel_candidates' order (each
    tile that leaves SMs idle, its factors 2..MAX_SPLIT_K that leave every part two k-blocks),
    a candidate kept only where strictly faster than the best so far. A tile's factors are
    skipped where a bound on them all exceeds the best total (perfmodel.batch._search's: the
    unsplit HBM bytes at full bandwidth, or the MMAs spread perfectly over the SMs, clocked as
    `_time_bound` allows, plus the first load and two launches); and a factor where its own
    bound does."""
    m, n, k, batch = op.m, op.n, op.k, op.batch
    sms, kblock, tensor = fam.sms, fam.kblock, fam.tensor
    hbm_bw, hbm_lat = fam.hbm_bw, fam.hbm_lat
    r_tensor, power_ratio = fam.r_tensor, fam.power_ratio
    fixed_s = hbm_lat + 2 * fam.launch_s  # the first load and two launches
    hbm_floor = a_bytes + b_bytes + c_bytes
    splits = None
    ceil = math.ceil
    for t in fam.tiles:
        tiles_m, tiles_n = -(-m // t.m), -(-n // t.n)
        unsplit = tiles_m * tiles_n * batch
        if unsplit >= sms:
            continue  # its tiles fill the SMs: split-K is not offered
        hbm = hbm_of.get(t.i)
        if prune:
            # a split's MMAs, spread perfectly over the SMs, take at least t_mma, and its HBM
            # bytes are at least the unsplit ones (the A, B and C bytes before those are known)
            t_mma = (unsplit * 2.0 * t.m * t.n * k / sms / r_tensor * power_ratio
                     if tensor else 0.0)
            lower = (hbm if hbm is not None else hbm_floor) / hbm_bw
            if (max(lower, t_mma * fam.mma_factor) + fixed_s) * SPLIT_BOUND > best_t:
                continue  # _time_bound(fam, t_mma, t_mma, lower) + fixed_s: none can win
        if hbm is None:
            hbm = _hbm_bytes(fam, t, m, n, k, batch, tiles_m, tiles_n, a_bytes, b_bytes,
                             c_bytes, l2_resident)
            if prune and (_time_bound(fam, t_mma, t_mma, hbm / hbm_bw) + fixed_s) \
                    * SPLIT_BOUND > best_t:
                continue
        if splits is None:
            splits = [s for s in range(2, MAX_SPLIT_K + 1) if -(-k // s) > kblock]
        for split in splits:
            k_split = -(-k // split)
            k_pad = -(-k_split // kblock) * kblock
            ctas = unsplit * split
            busiest = ceil(ctas / sms) + 0.0
            rate = t.full_rate if ctas >= t.sms_cps else \
                min(hbm_bw, min(ctas, t.sms_cps) * t.in_flight / hbm_lat)
            partial = split * m * n * 4.0 * batch
            w_h = hbm + (2 * partial if 2 * partial > fam.l2_capacity else 0.0)
            if tensor:
                w_t = ctas * 2.0 * t.m * t.n_mma * k_pad
                t_t = busiest * (w_t / ctas) / r_tensor * power_ratio
            else:
                w_t, t_t = None, 0.0
            w_l2 = ctas * t.l2_per_k * k_split + c_bytes + 2 * partial
            t_l2 = w_l2 / fam.l2_rate
            t_h = w_h / rate if rate else math.inf
            if prune and (_time_bound(fam, t_t, max(t_t, t_l2), t_h) + fixed_s) \
                    * SPLIT_BOUND > best_t:
                continue
            w_f = _fma(fam, ctas, t.m, t.n, k_pad)
            w_s = ctas * k_pad * t.smem_per_k + ctas * 2.0 * t.m * t.n * fam.c_b
            total = _total(fam, ctas, 2, busiest, rate, t_t, w_f, w_s, w_l2, w_h)
            if total < best_t:
                best, best_t = (t, split, w_t, w_f, w_s, w_l2, w_h, ctas, 2,
                                hbm_floor), total
    return best


def _hbm_bytes(fam: _Family, t: _Tile, m: int, n: int, k: int, batch: int, tiles_m: int,
               tiles_n: int, a_bytes: float, b_bytes: float, c_bytes: float,
               l2_resident: bool) -> float:
    """hbm_operand_bytes_scalar + C (the same operations in the same order)."""
    if l2_resident:
        return a_bytes + b_bytes + c_bytes
    r = t.r0 if t.r0 < tiles_m else tiles_m
    c = fam.ceil_sms[r]
    if tiles_n < c:
        c = tiles_n
    waves = (tiles_m * tiles_n) / (r * c)
    hbm = waves * (r * t.m * fam.a_b + c * t.n * fam.b_b) * k * batch
    return min(max(hbm, a_bytes + b_bytes), tiles_n * a_bytes + tiles_m * b_bytes) + c_bytes


def _fma(fam: _Family, ctas: int, tm: int, tn: int, k_pad: int) -> float:
    """Gemm._fma_work of a candidate (nothing promoted on this path)."""
    w_f = ctas * tm * tn * 1.0  # epilogue alpha/beta scaling and conversion
    if fam.simt:
        w_f = w_f + ctas * tm * tn * k_pad * 1.0
    if fam.mixed:
        w_f = w_f + ctas * k_pad * (tn if fam.narrow_b else tm) * 2
    return w_f


def _total(fam: _Family, ctas: int, kernels: int, busiest: float, rate: float, t_t: float,
           w_f: float, w_s: float, w_l2: float, w_h: float) -> float:
    """One candidate's time (engine.candidate_times_s on floats, module docstring), its MMA
    time t_t (0 without tensor work) and HBM rate found by the caller."""
    t_f = busiest * (w_f / ctas) / fam.r_fma
    t_s = busiest * (w_s / ctas) / fam.r_smem
    t_l2 = w_l2 / fam.l2_rate
    t_h = w_h / rate if rate else math.inf
    hi, lo = fam.hi, fam.lo
    if hi <= lo:
        clock = lo
    elif not fam.tensor:
        clock = hi
    else:
        # any candidate with tensor work puts every candidate on the utilization rule
        busy = max(t_t, t_f, t_s, t_l2, t_h)
        clock = hi - (min(max(t_t / busy, 0.0), 1.0) if busy > 0 else 0.0) * (hi - lo)
    # the engine's max(t_f·s, t_s·s, t_l2·s, t_h, t_t·s): a product by s > 0 keeps the order of
    # its factors (rounding is monotone), so the largest product is the largest factor's
    top = max(max(t_f, t_s, t_l2, t_t) * (fam.sustained / clock), t_h)
    return top + (fam.hbm_lat if w_h > 0 else 0.0) + fam.launch_s * kernels


def _roofline_times(fam: _Family, w_t, useful_fma: float, w_h: float, hbm_bytes: float,
                    flop: float, repeat: int) -> dict:
    """engine.roofline's resource times of the chosen Demand (its peak-rate resources with
    work: the tensor pipe, FMA, HBM; smem and L2 are the pipes level's), times `repeat`."""
    out = {}
    if fam.tensor and not w_t <= 0:  # the tensor resources' work is this one's
        out[fam.resource] = (flop * w_t / w_t if flop else w_t) / fam.peak_tensor * repeat
    if not useful_fma <= 0:
        out["fma"] = useful_fma / fam.peak_fma * repeat
    if not w_h <= 0:
        out["hbm"] = hbm_bytes / fam.peak_hbm * repeat
    return out


def _roofline_s(fam: _Family, w_t, useful_fma: float, w_h: float, hbm_bytes: float,
                flop: float, repeat: int) -> float:
    """max(_roofline_times(...).values(), default=0.0), without the dict."""
    roof = 0.0
    if fam.tensor and not w_t <= 0:
        roof = (flop * w_t / w_t if flop else w_t) / fam.peak_tensor * repeat
    if not useful_fma <= 0:
        x = useful_fma / fam.peak_fma * repeat
        if x > roof:
            roof = x
    if not w_h <= 0:
        x = hbm_bytes / fam.peak_hbm * repeat
        if x > roof:
            roof = x
    return roof


def _estimate(fam: _Family, op: Gemm, hw: Hardware, level: str,
              best: tuple) -> Estimate | None:
    """The chosen candidate's Estimate: engine.roofline of its Demand, and at the pipes level
    engine.pipes at its kernel clock with the op class's band. None where the roofline is 0
    (the engine path decides)."""
    t, split, w_t, w_f, w_s, w_l2, w_h, ctas, kernels, hbm_bytes = best
    flop, repeat = op.flop, op.count
    # engine.roofline of the chosen Demand, the useful FMA work (Gemm.useful_fma: one tile of
    # m x n per batch over the unpadded K) in place of the padded tiles'
    useful_fma = _fma(fam, op.batch, op.m, op.n, op.k)
    if level == "roofline":
        roof_times = _roofline_times(fam, w_t, useful_fma, w_h, hbm_bytes, flop, repeat)
        roof = max(roof_times.values(), default=0.0)
        if roof <= 0:
            return None
        # the details Gemm._demand_at gives the chosen candidate
        return Estimate(roof, max(roof_times, key=roof_times.get), roof_times, flop * repeat,
                        hbm_bytes * repeat, "roofline", roof,
                        {"tile": t.label, "split_k": split, "stages": t.stages, "tiles": ctas,
                         "persistent": fam.persistent})
    roof = _roofline_s(fam, w_t, useful_fma, w_h, hbm_bytes, flop, repeat)
    if roof <= 0:
        return None
    # engine.pipes of the chosen Demand: its resources with work (in the Demand's order:
    # tensor, fma, smem, l2, hbm), at its kernel clock, then the first load and the launches
    cps, limiter = t.occupancy or _launch_occupancy(fam, t, ctas, hw)
    sms, hi, lo = fam.sms, fam.hi, fam.lo
    busiest = math.ceil(ctas / sms) + 0.0
    rate = min(fam.hbm_bw, min(ctas, sms * cps) * t.in_flight / fam.hbm_lat)
    # each time >= 0, and 0.0 for a resource without work: the max below is the one over the
    # resources with work wherever the tensor time is > 0
    tensor = fam.tensor and w_t > 0
    t_t = busiest * (w_t / ctas) / fam.r_tensor * fam.power_ratio if tensor else 0.0
    t_f = busiest * (w_f / ctas) / fam.r_fma if w_f > 0 else 0.0
    t_s = busiest * (w_s / ctas) / fam.r_smem if w_s > 0 else 0.0
    t_l2 = w_l2 / fam.l2_rate if w_l2 > 0 else 0.0
    t_h = w_h / rate if w_h > 0 else 0.0
    t_tensor = 0.0 + t_t  # the sum over the tensor resources (one)
    if hi <= lo or not t_tensor > 0:
        clock = lo if hi <= lo else hi
    else:
        clock = hi - min(1.0, t_tensor / max(t_t, t_f, t_s, t_l2, t_h)) * (hi - lo)
    scale = fam.sustained / clock
    times = {}
    if tensor:  # engine.power_limited, before the clock
        times[fam.resource] = t_t * scale
    if w_f > 0:
        times["fma"] = t_f * scale
    if w_s > 0:
        times["smem"] = t_s * scale
    if w_l2 > 0:
        times["l2"] = t_l2 * scale
    if w_h > 0:
        times["hbm"] = t_h  # HBM keeps its time at any SM clock
    busy = max(times.values(), default=0.0)
    # first load + link latency (none) + CTA round trips (none), as engine._pipes_times adds
    times["latency"] = (fam.hbm_lat if w_h > 0 else 0) + 0 + 0.0
    times["launch"] = fam.launch_s * kernels
    single = busy + times["latency"] + times["launch"]
    bound = max(times, key=times.get)
    # the resources with time, times the repeat (x * 1 is x: no new dict where nothing changes)
    if repeat != 1 or not min(times.values()) > 0:
        times = {r: x * repeat for r, x in times.items() if x > 0}
    details = {"tile": t.label, "split_k": split, "stages": t.stages, "tiles": ctas,
               "persistent": fam.persistent, "ctas_per_sm": cps, "occupancy_limiter": limiter,
               "waves": ctas / (sms * cps), "busiest_sm_ctas": math.ceil(ctas / sms),
               "sm_clock_hz": clock}
    time_s = single * repeat
    band = intervals.band_of_classes(fam.band_classes, fam.architecture)  # intervals.band
    return Estimate(time_s, bound, times, flop * repeat, hbm_bytes * repeat, "pipes", roof,
                    details, *((band.around(time_s), band.basis) if band is not None else ()))


def _launch_occupancy(fam: _Family, t: _Tile, ctas: int, hw: Hardware) -> tuple:
    """engine.occupancy of the chosen launch, as Gemm._demand_at builds it (candidate_launch);
    it reads the tile's threads, registers and shared memory only, so it is kept per tile."""
    t.occupancy = occupancy(LaunchShape(
        ctas=ctas, threads_per_cta=t.threads, registers_per_thread=t.registers,
        smem_per_cta_bytes=int(t.smem), bytes_in_flight_per_cta=float(t.in_flight)), hw)
    return t.occupancy
