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
from perfmodel.engine import LEVELS, ROOFLINE_PIPES, Estimate, check_estimate, occupancy, \
    sm_rate_per_clk, sm_rate_per_s, tensor_power_ratio
from perfmodel.demand import LaunchShape
from perfmodel.errors import InputError, check_result
from perfmodel.graph import OpGraph
from perfmodel.hardware import Hardware, hardware
from perfmodel.ops import Op
from perfmodel.ops.gemm import FP4_MMA_N, Gemm, fp4_cutlass, tile_facts
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


def predict_op(op: Op, hw: Hardware | str, level: str = "pipes") -> Estimate:
    """Predict one op's time and bound on one GPU; at the pipes level the Estimate carries the
    80 % band of its op class's cross-validated error (`interval_s`, perfmodel.intervals)."""
    if type(hw) is not Hardware:
        hw = hardware(hw)
    if type(op) is Gemm:
        key = (op.cache_key(), hw, level)
        hit = _GEMM_MEMO.get(key)
        if hit is None:
            hit = gemm_estimate(op, hw, level)
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
            key = (o.cache_key(), hw, level)
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
# A cold GEMM through the engine runs ~100 numpy calls on 6-18-element candidate arrays (~1 us
# of fixed cost each); the same arithmetic on Python floats costs ~25 ns an operation. So
# `predict_op` of a Gemm takes the plain-Python tile search (Gemm.scalar_candidates) and the
# engine's formulas below on Python floats, in the engine's order of operations, which gives the
# same doubles: every prediction bit-identical to the engine's (tests/test_gemm_scalar.py checks
# thousands of random shapes on every GPU at both levels). Its Estimates are memoized here, per
# (op parameters, hardware, level) like schedule.op_entry's; graphs still schedule through
# op_entry (it keeps the Demand and contention load the scheduler needs).
# Mirrors: engine.candidate_times_s, kernel_resource_times, kernel_clock_hz, at_clock, pipes,
# roofline. A change to those formulas must be made here too (the test fails until it is).
GEMM_MEMO_SIZE = 1 << 14
# The split-K candidates' lower bound (gemm_estimate, perfmodel.batch._search) is real
# arithmetic done in floats: shaved by this factor it stays below every candidate's computed
# total, so no winner is pruned.
SPLIT_BOUND = 1.0 - 1e-9
_GEMM_MEMO: dict = {}


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


class _TileSearch:
    """What the scalar tile search of one (GPU, GEMM dtypes, fixed kernel) reads that no shape
    changes (`_tile_search`): `tile_facts`' lists, each tile's terms of the candidate work that
    are products of tile constants alone (computed as `Gemm.scalar_candidates` computes them,
    so the same doubles), and each tile's occupancy, found on first use as the search finds
    it."""

    __slots__ = ("f", "tiles", "n_tiles", "kblock", "op_b", "fp4", "ctas_per_sm",
                 "launch_occupancy", "labels")

    def __init__(self, hw: Hardware, compute: str, a_b: float, b_b: float, c_b: float,
                 fixed) -> None:
        f = self.f = tile_facts(hw, compute, a_b, b_b, c_b, fixed)
        op_b = self.op_b = DTYPE_BYTES[compute]
        self.kblock = f["kblock"]
        self.fp4 = fp4 = fp4_cutlass(hw, compute)
        per_wave = hw.sm_count
        rows = []
        for i in range(len(f["m"])):
            tm, tn = f["m"][i], f["n"][i]
            cluster, b_share, cluster_n = f["cluster"][i], f["b_share"][i], f["cluster_n"][i]
            rows.append((
                i, tm, tn, f["fits"][i],
                max(tn, FP4_MMA_N) if fp4 else tn,              # the MMA's N (FP4 granule)
                tm * op_b + tn * op_b * b_share,                # smem bytes per k element
                tm * a_b / cluster_n + tn * b_b / cluster,      # L2 bytes per k element
                # hbm_operand_bytes_scalar's raster rows before the tile-count clamp
                max(round(math.sqrt(per_wave * tn * b_b / (tm * a_b))), 1),
                f["in_flight"][i]))
        self.tiles = tuple(rows)
        self.n_tiles = len(rows)
        self.ctas_per_sm: list = [None] * len(rows)
        self.launch_occupancy: list = [None] * len(rows)
        self.labels: list = [None] * len(rows)  # Gemm.scalar_demand_details' tile labels


@functools.lru_cache(maxsize=256)
def _tile_search(hw: Hardware, compute: str, a_b: float, b_b: float, c_b: float,
                 fixed) -> _TileSearch:
    return _TileSearch(hw, compute, a_b, b_b, c_b, fixed)


def gemm_estimate(op: Gemm, hw: Hardware, level: str) -> Estimate | None:
    """The Estimate the engine gives `op` (with its band at the pipes level), on Python floats;
    None where the mirror does not apply (block-scaled FP8 promoted on the CUDA cores: an
    overlap; a dtype the GPU lacks: the engine's error) and the engine path decides."""
    if level not in LEVELS or op.promotes_on_cuda_cores(hw):
        return None
    op = op.resolved(hw)  # the kernel an engine's table picks, a swap-AB one transposed
    compute = tensor_dtype(op.dtype)
    if compute != "fp32":
        if not hw.supports(compute):
            return None
        compute = f"tensor:{compute}"
    per_clk, peak, l2_rate = gemm_rates(hw)
    tensor = compute != "fp32"
    if tensor and compute not in per_clk:
        return None
    dtype_key = op._dtype_key()
    fixed = op.fixed_tiles(hw)
    ts = _tile_search(hw, *dtype_key, fixed)
    f = ts.f
    # engine.candidate_times_s: each candidate's resource times (kernel_resource_times) at the
    # sustained clock, moved to its kernel clock (kernel_clock_hz: any candidate with tensor
    # work puts every candidate on the utilization rule; at_clock), max + first load + launch;
    # the first fastest valid candidate wins (np.argmin)
    sms, sustained = hw.sm_count, hw.sustained_sm_clock_hz
    hi, lo = hw.max_sm_clock_hz, sustained
    r_tensor = per_clk[compute] * sustained if tensor else 0.0
    # narrow MMAs under the power limit (engine.kernel_resource_times: tensor_power_ratio)
    power_ratio = tensor_power_ratio(hw, compute) if tensor else 1.0
    r_fma, r_smem = per_clk["fma"] * sustained, per_clk["smem"] * sustained
    hbm_bw, hbm_lat, launch_s = (hw.hbm_bandwidth_bytes_per_s, hw.hbm_latency_s,
                                 hw.kernel_launch_s)
    # every candidate has tensor work where the GEMM is on tensor cores (tiles >= 1)
    any_tensor = tensor
    threads, registers, smem_cta, in_flight = f["threads"], f["registers"], f["smem"], \
        f["in_flight"]
    ctas_per_sm = ts.ctas_per_sm
    best, best_t = None, math.inf

    def kernel_total(i: int, ctas: int, kernels: int, w_t, w_f: float, w_s: float,
                     w_l2: float, w_h: float) -> float:
        """One candidate's time (engine.candidate_times_s on floats, module comment)."""
        cps = ctas_per_sm[i]
        if cps is None:
            cps = ctas_per_sm[i] = tile_ctas_per_sm(hw, threads[i], registers[i],
                                                    smem_cta[i])[0]
        busiest = math.ceil(ctas / sms) + 0.0
        rate = min(hbm_bw, min(ctas, sms * cps) * in_flight[i] / hbm_lat)
        t_f = busiest * (w_f / ctas) / r_fma
        t_s = busiest * (w_s / ctas) / r_smem
        t_l2 = w_l2 / l2_rate
        t_h = w_h / rate if rate else math.inf
        if tensor:
            # stretched to its power-limited time first, as engine.power_limited
            t_t = busiest * (w_t / ctas) / r_tensor * power_ratio
            busy = max(t_t, t_f, t_s, t_l2, t_h)
        else:
            t_t, busy = 0.0, max(t_f, t_s, t_l2, t_h)
        if hi <= lo:
            clock = lo
        elif not any_tensor:
            clock = hi
        else:
            clock = hi - (min(max(t_t / busy, 0.0), 1.0) if busy > 0 else 0.0) * (hi - lo)
        # the engine's max(t_f·s, t_s·s, t_l2·s, t_h, t_t·s): a product by s > 0 keeps the order
        # of its factors (rounding is monotone), so the largest product is the largest
        # factor's; t_t is 0 without tensor work
        top = max(max(t_f, t_s, t_l2, t_t) * (sustained / clock), t_h)
        return top + (hbm_lat if w_h > 0 else 0.0) + launch_s * kernels

    def scan(candidates):
        nonlocal best, best_t
        for c in candidates:
            i, split, valid, w_t, w_f, w_s, w_l2, w_h, ctas, kernels = c
            if not valid:
                continue  # np.where(valid, total, inf): never the fastest while any is valid
            total = kernel_total(i, ctas, kernels, w_t, w_f, w_s, w_l2, w_h)
            if total < best_t:
                best, best_t = c, total

    # the unsplit candidates, built and scanned in one pass: Gemm.scalar_candidates'
    # arithmetic for split = 1 (its tile-constant terms from _TileSearch) and scan's, in their
    # orders of operations; a candidate's tuple is made only where it leads
    m, n, k, batch = op.m, op.n, op.k, op.batch
    a_bytes, b_bytes, c_bytes = op.unique_bytes()
    _, a_b, b_b, c_b = dtype_key
    op_b = ts.op_b
    kblock = ts.kblock
    k_pad = -(-k // kblock) * kblock  # k_split = k
    simt = compute == "fp32"
    mixed = any(bytes_per_element(x) < op_b for x in (op.a_dtype, op.b_dtype) if x)
    narrow_b = bool(op.b_dtype) and b_b < op_b
    ab_bytes = a_bytes + b_bytes
    l2_resident = ab_bytes <= 0.5 * hw.l2_capacity_bytes  # hbm_operand_bytes: read once
    offered = -(-k // 2) > kblock  # a split leaves each part two k-blocks
    short = []  # (tile, HBM bytes, CTAs) of the tiles that leave SMs idle: split-K's offer
    for i, tm, tn, fits, tn_mma, smem_per_k, l2_per_k, r0, flight in ts.tiles:
        tiles_m, tiles_n = -(-m // tm), -(-n // tn)
        tiles = tiles_m * tiles_n * batch
        if l2_resident:
            hbm = ab_bytes + c_bytes
        else:  # hbm_operand_bytes_scalar
            r = min(r0, tiles_m)
            c = min(math.ceil(sms / r), tiles_n)
            waves = (tiles_m * tiles_n) / (r * c)
            hbm = waves * (r * tm * a_b + c * tn * b_b) * k * batch
            hbm = min(max(hbm, ab_bytes), tiles_n * a_bytes + tiles_m * b_bytes) + c_bytes
        if offered and tiles < sms:
            short.append((i, hbm + 0.0, tiles))
        if not fits:
            continue  # not valid: never the fastest
        w_t = tiles * 2.0 * tm * tn_mma * k_pad if tensor else None
        w_f = tiles * tm * tn * 1.0
        if simt:
            w_f = w_f + tiles * tm * tn * k_pad * 1.0
        if mixed:
            w_f = w_f + tiles * k_pad * (tn if narrow_b else tm) * 2
        w_s = tiles * k_pad * smem_per_k + tiles * 2.0 * tm * tn * c_b
        w_l2 = tiles * l2_per_k * k + c_bytes + 0.0
        w_h = hbm + 0.0
        total = kernel_total(i, tiles, 1, w_t, w_f, w_s, w_l2, w_h)
        if total < best_t:
            best, best_t = (i, 1, True, w_t, w_f, w_s, w_l2, w_h, tiles, 1), total
    # then the split-K candidates of the tiles whose lower bound (perfmodel.batch._search:
    # the unsplit HBM bytes at full bandwidth, or the MMAs spread perfectly over the SMs at the
    # fastest clock, plus the first load and two launches) does not exceed the best unsplit
    # time: the others cannot hold a strictly faster kernel, so the pick is the same
    keep = []
    for i, w_h, ctas in short:
        lower = w_h / hbm_bw
        if tensor:
            t_mma = (ctas * 2.0 * f["m"][i] * f["n"][i] * k / sms / r_tensor * power_ratio)
            lower = max(lower, t_mma * (sustained / hi))
        if not (lower + hbm_lat + 2 * launch_s) * SPLIT_BOUND > best_t:
            keep.append(i)
    if keep and not ts.fp4 and fixed is None:  # the NVFP4 kernel, a fixed one: no split-K
        scan(op.scalar_candidates(hw, split_tiles=keep, unsplit=False)[1])
    if best is None:
        return None  # nothing fits: the engine's error
    i, split, _, w_t, w_f, w_s, w_l2, w_h, ctas, kernels = best
    work = {compute: w_t} if tensor else {}
    work.update(fma=w_f, smem=w_s, l2=w_l2, hbm=w_h)
    hbm_bytes = a_bytes + b_bytes + c_bytes
    flop, repeat = op.flop, op.count
    label = ts.labels[i]
    if label is None:
        details = op.scalar_demand_details(hw, f, best)
        ts.labels[i] = details["tile"]
    else:  # Gemm.scalar_demand_details, its tile label kept
        details = {"tile": label, "split_k": split, "stages": f["stages"][i], "tiles": ctas,
                   "persistent": op.is_persistent(hw)}
    # engine.roofline of the chosen Demand (the useful FMA work, not the padded tiles')
    roof_times = {}
    tensor_work = w_t if tensor else 0  # the sum of the tensor resources' work
    # Gemm.useful_fma (nothing promoted on this path)
    useful_fma = float(op._fma_work(dtype_key[0], op_b, b_b, batch, m, n, k, False))
    for r, w in work.items():
        if r == "fma":
            w = useful_fma
        if w <= 0:
            continue
        rate = peak.get(r)
        if rate is None:
            continue  # l2, smem: the pipes level's
        if r.startswith("tensor:"):
            roof_times[r] = (flop * w / tensor_work if flop else w) / rate
        elif r == "hbm":
            roof_times[r] = hbm_bytes / rate
        else:
            roof_times[r] = w / rate
    roof_times = {r: t * repeat for r, t in roof_times.items()}
    roof = max(roof_times.values(), default=0.0)
    if roof <= 0:
        return None
    if level == "roofline":
        return Estimate(roof, max(roof_times, key=roof_times.get), roof_times, flop * repeat,
                        hbm_bytes * repeat, "roofline", roof, details)
    # engine.pipes of the chosen Demand: its resources with work, at its kernel clock
    # the chosen Demand's launch, as Gemm._demand_at builds it (candidate_launch)
    occ = ts.launch_occupancy[i]  # occupancy reads the tile's threads, registers and smem
    if occ is None:
        occ = ts.launch_occupancy[i] = occupancy(LaunchShape(
            ctas=ctas, threads_per_cta=f["tiles"][i].threads,
            registers_per_thread=f["tiles"][i].registers, smem_per_cta_bytes=int(smem_cta[i]),
            bytes_in_flight_per_cta=float(in_flight[i])), hw)
    cps, limiter = occ
    busiest = math.ceil(ctas / sms) + 0.0
    rate = min(hbm_bw, min(ctas, sms * cps) * in_flight[i] / hbm_lat)
    raw = {}
    for r, w in work.items():
        if not w > 0:
            continue
        if r == "hbm":
            raw[r] = w / rate
        elif r == "l2":
            raw[r] = w / l2_rate
        else:
            raw[r] = busiest * (w / ctas) / (per_clk[r] * sustained)
    if tensor and compute in raw:  # engine.power_limited, before the clock
        raw[compute] = raw[compute] * power_ratio  # tensor_power_ratio(hw, compute)
    t_tensor = sum((t for r, t in raw.items() if r.startswith("tensor:")), 0.0)
    if hi <= lo or not t_tensor > 0:
        clock = lo if hi <= lo else hi
    else:
        clock = hi - min(1.0, t_tensor / max(raw.values())) * (hi - lo)
    scale = sustained / clock
    times = {r: (t if r == "hbm" else t * scale) for r, t in raw.items()}
    busy = max(times.values(), default=0.0)
    # first load + link latency (none) + CTA round trips (none), as engine._pipes_times adds
    times["latency"] = (hbm_lat if w_h > 0 else 0) + 0 + 0.0
    times["launch"] = launch_s * kernels
    single = busy + times["latency"] + times["launch"]
    bound = max(times, key=times.get)
    times = {r: t * repeat for r, t in times.items() if t > 0}
    details.update(ctas_per_sm=cps, occupancy_limiter=limiter, waves=ctas / (sms * cps),
                   busiest_sm_ctas=math.ceil(ctas / sms), sm_clock_hz=clock)
    time_s = single * repeat
    band = intervals.band(op, hw)
    return Estimate(time_s, bound, times, flop * repeat, hbm_bytes * repeat, "pipes", roof,
                    details, *((band.around(time_s), band.basis) if band is not None else ()))
