"""Many GEMM shapes in one numpy pass: `gemm_batch` (`pm.gemm_batch`).

A sweep or a planner asks for thousands of shapes of one GEMM family (same dtypes, options and
GPU; different m, n, k, batch, count). `predict_op` prices each one through the plain-Python
tile search (`predict.gemm_estimate`): a few µs a candidate kernel
(6 tiles, and 15 split-K factors for each tile that leaves SMs idle) and an Estimate object per
shape. Here the same search runs on arrays of shape (shapes, candidates), CHUNK shapes at a
time so the arrays stay in cache, and the result is a table of arrays (`GemmTable`).

Bit-identical to `predict_op`: every formula is the scalar path's, in its order of floating-point
operations (numpy float64 is the same IEEE double as a Python float; int64 holds the integer
products exactly where Python's ints would, which the shapes admitted here guarantee), and the
search keeps the scalar order of candidates: every tile unsplit first, then each short tile's
split factors, tile by tile. `argmin` takes the first of the fastest, as the scalar loop's
strict `<` does. tests/ops/test_gemm_batch.py checks random families on every GPU at both
levels, every field.

How the search is cut (`_search`):
  * the unsplit tiles of every shape are one (shapes, tiles) grid;
  * split-K is evaluated per (shape, tile) pair, only where the scalar search offers it (the
    tile's tiles leave SMs idle, K holds two k-blocks a part, no NVFP4 CUTLASS kernel);
  * a pair is skipped where a lower bound on all its split candidates already exceeds the
    shape's best unsplit time. The bound: the unsplit HBM bytes at full bandwidth, or the MMAs
    spread perfectly over the SMs at the fastest clock, plus the first load and two launches,
    shaved by SPLIT_BOUND. Such a pair cannot hold the winner.

Not on this path (the shapes go through `predict_op` one by one, into the same table):
  * block-scaled FP8 where the MMA takes no scales (the CUDA-core promotion is an overlap the
    scalar path also leaves to the engine);
  * shapes large enough that an integer product could pass int64.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from perfmodel import intervals
from perfmodel.engine import LEVELS, Estimate, occupancy
from perfmodel.demand import LaunchShape
from perfmodel.errors import InputError
from perfmodel.hardware import Hardware, hardware
from perfmodel.ops.base import ELEMENTS_WHY, MAX_ELEMENTS
from perfmodel.ops.gemm import (FP4_MMA_N, MAX_SPLIT_K, Gemm, ceil_div, fp4_cutlass,
                               operand_bytes, rows_tma_aligned, tile_facts)
from perfmodel.predict import SPLIT_BOUND
from perfmodel.units import DTYPE_BYTES, bytes_per_element, tensor_dtype

# shapes per numpy pass: (CHUNK, candidates) float64 arrays of ~100 candidates stay within L2
CHUNK = 1024
SIZE_FIELDS = ("m", "n", "k", "batch", "count")


@dataclass(frozen=True)
class GemmTable:
    """One row per shape, in the order given: what `predict_op` gives each shape's Estimate
    (`estimate(j)` builds that Estimate, equal field for field)."""

    level: str
    time_s: np.ndarray            # float64
    bound: np.ndarray             # str: the binding resource (Estimate.bound)
    roofline_time_s: np.ndarray
    flop: np.ndarray
    hbm_bytes: np.ndarray
    resource_time_s: Mapping[str, np.ndarray]  # per resource; 0 where the Estimate has none
    tile: np.ndarray              # str: the chosen kernel's tile label
    split_k: np.ndarray           # int
    sm_clock_hz: np.ndarray       # the chosen kernel's SM clock (nan at the roofline level)
    interval_s: tuple[np.ndarray, np.ndarray] | None = None  # the op class's 80 % band
    # what `estimate` needs: the chosen tile and CTA count of every row on the array path,
    # the shared facts; rows that took predict_op keep their Estimate
    tile_index: np.ndarray | None = field(default=None, repr=False)
    ctas: np.ndarray | None = field(default=None, repr=False)
    facts: Any = field(default=None, repr=False)
    estimates: tuple | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.time_s)

    def rows(self) -> list[dict[str, Any]]:
        """The table as one dict per shape (for CSV/JSON writers)."""
        out = []
        for j in range(len(self)):
            row = {"time_s": float(self.time_s[j]), "bound": str(self.bound[j]),
                   "roofline_time_s": float(self.roofline_time_s[j]),
                   "flop": float(self.flop[j]), "hbm_bytes": float(self.hbm_bytes[j]),
                   "tile": str(self.tile[j]), "split_k": int(self.split_k[j])}
            if self.interval_s is not None:
                row["interval_s"] = [float(self.interval_s[0][j]), float(self.interval_s[1][j])]
            out.append(row)
        return out

    def estimate(self, j: int) -> Estimate:
        """Row j as the Estimate predict_op gives that shape."""
        if self.estimates is not None and self.estimates[j] is not None:
            return self.estimates[j]
        x: _Facts = self.facts
        hw, f, i = x.hw, x.f, int(self.tile_index[j])
        ctas, sms = int(self.ctas[j]), hw.sm_count
        details = {"tile": str(self.tile[j]), "split_k": int(self.split_k[j]),
                   "stages": f["stages"][i], "tiles": ctas,
                   "persistent": x.probe.is_persistent(hw)}
        times = {r: float(t[j]) for r, t in self.resource_time_s.items() if t[j] > 0}
        if self.level == "roofline":
            return Estimate(float(self.time_s[j]), str(self.bound[j]), times,
                            float(self.flop[j]), float(self.hbm_bytes[j]), "roofline",
                            float(self.roofline_time_s[j]), details)
        cps, limiter = x.occupancy[i]
        details.update(ctas_per_sm=cps, occupancy_limiter=limiter, waves=ctas / (sms * cps),
                       busiest_sm_ctas=math.ceil(ctas / sms),
                       sm_clock_hz=float(self.sm_clock_hz[j]))
        interval = ((float(self.interval_s[0][j]), float(self.interval_s[1][j]))
                    if self.interval_s is not None else None)
        return Estimate(float(self.time_s[j]), str(self.bound[j]), times, float(self.flop[j]),
                        float(self.hbm_bytes[j]), "pipes", float(self.roofline_time_s[j]),
                        details, interval, x.band.basis if interval is not None else None)


def _sizes(m, n, k, batch, count) -> dict[str, np.ndarray]:
    """The size arrays broadcast to one length, checked as Gemm's parameters are."""
    try:
        arrays = np.broadcast_arrays(*(np.asarray(v) for v in (m, n, k, batch, count)))
    except ValueError as e:
        raise InputError(f"gemm batch: m, n, k, batch and count do not broadcast ({e})") from None
    out = {}
    for name, a in zip(SIZE_FIELDS, arrays):
        a = np.atleast_1d(a)
        if a.dtype.kind == "f":
            if not np.all(np.isfinite(a)) or np.any(a != np.floor(a)):
                raise InputError(f"gemm batch: {name} must be whole numbers")
        elif a.dtype.kind not in "iu":
            raise InputError(f"gemm batch: {name} must be integers, got {a.dtype}")
        if a.size and (a.min() < 1 or a.max() > MAX_ELEMENTS):
            raise InputError(f"gemm batch: {name} must be integers in [1, 2^40]")
        out[name] = a.astype(np.int64).ravel()
    m, n, k, b = (out[x].astype(float) for x in ("m", "n", "k", "batch"))
    for dims, size in ((("batch", "m", "k"), b * m * k), (("batch", "k", "n"), b * k * n),
                       (("batch", "m", "n"), b * m * n)):
        if size.size and size.max() > MAX_ELEMENTS:
            j = int(np.argmax(size))
            raise InputError(f"gemm batch: shape {j} has a {' x '.join(dims)} tensor of "
                             f"{size[j]:.3g} elements, above 2^40 ({ELEMENTS_WHY})")
    return out


COLUMNS = ("time_s", "bound", "roofline_time_s", "flop", "hbm_bytes", "tile", "split_k",
           "sm_clock_hz", "tile_index", "ctas")


def _untma(probe: Gemm, hw: Hardware, sizes: dict) -> np.ndarray:
    """Which shapes Gemm.kernel_hardware moves off TMA (its rule, over the arrays)."""
    if not probe.has_legacy_path(hw):
        return np.zeros(len(sizes["m"]), dtype=bool)
    return ~rows_tma_aligned(sizes["k"], sizes["n"], probe.element_bytes())


def gemm_batch(hw: Hardware | str, m, n, k, dtype: str, batch=1, count=1,
               level: str = "pipes", **fixed: Any) -> GemmTable:
    """`predict_op(Gemm(m=m[j], n=n[j], k=k[j], batch=batch[j], count=count[j], dtype=dtype,
    **fixed), hw, level)` for every j, as a GemmTable (module docstring). m, n, k, batch and
    count are integers or arrays that broadcast; `fixed` holds Gemm's other parameters
    (out_dtype, a_dtype, b_dtype, fp8_scaling, persistent), one value for every shape."""
    if type(hw) is not Hardware:
        hw = hardware(hw)
    if level not in LEVELS:
        raise InputError(f"unknown level '{level}' (expected one of {', '.join(LEVELS)})")
    sizes = _sizes(m, n, k, batch, count)
    s = len(sizes["m"])
    # one op validates the fixed parameters (names, choices, the dtype on this GPU) and gives
    # the dtype facts every shape shares
    probe = Gemm(m=1, n=1, k=1, dtype=dtype, **fixed)
    probe.demand(hw)  # the GPU's dtype check, with predict_op's error
    params = dict(dtype=dtype, **fixed)
    from perfmodel.predict import gemm_rates
    compute = tensor_dtype(probe.dtype)
    if probe.promotes_on_cuda_cores(hw) or (compute != "fp32" and f"tensor:{compute}"
                                            not in gemm_rates(hw)[0]):
        slow = np.ones(s, dtype=bool)
    else:
        # int64 holds the search's integer products (padded m·n·k·batch·split at most, for
        # SIMT fp32) where Python's ints are unbounded: larger shapes take predict_op
        slow = (np.ceil(sizes["m"] / 256.0) * 256 * np.ceil(sizes["n"] / 256.0) * 256
                * (sizes["k"] + 512.0) * sizes["batch"] * MAX_SPLIT_K) >= 2.0**62
        # shapes whose rows TMA cannot address run the legacy tensor path (Gemm.kernel_hardware):
        # predict_op prices them on that GPU
        slow |= _untma(probe, hw, sizes)
    x = _facts(hw, probe, level) if not slow.all() else None
    fast = np.flatnonzero(~slow)
    parts = [_chunk(x, {f: a[fast[i:i + CHUNK]] for f, a in sizes.items()}, level)
             for i in range(0, len(fast), CHUNK)]
    names = list(dict.fromkeys(r for p in parts for r in p["times"]))
    estimates = None
    if slow.any():
        from perfmodel.predict import predict_op
        estimates = [None] * s
        for j in np.flatnonzero(slow):
            estimates[j] = predict_op(Gemm(**{f: int(sizes[f][j]) for f in SIZE_FIELDS},
                                           **params), hw, level)
        names += [r for j in np.flatnonzero(slow) for r in estimates[j].resource_time_s
                  if r not in names]
    cols = {c: np.empty(s, dtype=object if c in ("bound", "tile") else
                        np.int64 if c in ("split_k", "tile_index", "ctas") else float)
            for c in COLUMNS}
    times = {r: np.zeros(s) for r in names}
    for i, p in zip(range(0, len(fast), CHUNK), parts):
        rows = fast[i:i + CHUNK]
        for c in COLUMNS:
            cols[c][rows] = p[c]
        for r, t in p["times"].items():
            times[r][rows] = t
    if estimates is not None:
        for j in np.flatnonzero(slow):
            e = estimates[j]
            for c, v in (("time_s", e.time_s), ("bound", e.bound),
                         ("roofline_time_s", e.roofline_time_s), ("flop", e.flop),
                         ("hbm_bytes", e.hbm_bytes), ("tile", e.details.get("tile", "")),
                         ("split_k", e.details.get("split_k", 1)),
                         ("sm_clock_hz", e.details.get("sm_clock_hz", math.nan)),
                         ("tile_index", -1), ("ctas", e.details.get("tiles", 0))):
                cols[c][j] = v
            for r, t in e.resource_time_s.items():
                times[r][j] = t
    band = intervals.band(probe, hw) if level == "pipes" else None
    interval = None
    if band is not None:
        interval = (cols["time_s"] * band.low_factor, cols["time_s"] * band.high_factor)
    return GemmTable(level, cols["time_s"], cols["bound"], cols["roofline_time_s"],
                     cols["flop"], cols["hbm_bytes"], times, cols["tile"], cols["split_k"],
                     cols["sm_clock_hz"], interval, cols["tile_index"], cols["ctas"], x,
                     tuple(estimates) if estimates is not None else None)


@dataclass(frozen=True)
class _Facts:
    """What every shape of the batch shares: dtypes, tile facts, rates."""

    probe: Gemm
    hw: Hardware
    compute: str
    a_b: float
    b_b: float
    c_b: float
    op_b: float
    f: dict
    tensor: bool
    resource: str | None
    fp4: bool
    cps_tile: np.ndarray   # resident CTAs per SM of each tile
    mixed: bool            # a storage type narrower than the MMA's (dequant in the main loop)
    narrow_b: bool
    occupancy: tuple       # (CTAs per SM, limiter) of each tile (engine.occupancy)
    band: Any              # the op class's band (pipes level), or None


def _facts(hw: Hardware, probe: Gemm, level: str = "pipes") -> _Facts:
    from perfmodel.predict import tile_ctas_per_sm
    compute, a_b, b_b, c_b = probe._dtype_key()
    f = tile_facts(hw, compute, a_b, b_b, c_b)
    op_b = DTYPE_BYTES[compute]
    tensor = compute != "fp32"
    cps = np.array([tile_ctas_per_sm(hw, f["threads"][i], f["registers"][i],
                                     f["smem"][i])[0] for i in range(len(f["m"]))])
    mixed = any(bytes_per_element(x) < op_b for x in (probe.a_dtype, probe.b_dtype) if x)
    occ = tuple(occupancy(LaunchShape(ctas=1, threads_per_cta=t.threads,
                                      registers_per_thread=t.registers,
                                      smem_per_cta_bytes=int(f["smem"][i])), hw)
                for i, t in enumerate(f["tiles"]))
    return _Facts(probe, hw, compute, a_b, b_b, c_b, op_b, f, tensor,
                  f"tensor:{compute}" if tensor else None, fp4_cutlass(hw, compute), cps,
                  mixed, bool(probe.b_dtype) and b_b < op_b, occ,
                  intervals.band(probe, hw) if level == "pipes" else None)


def _grid(x: _Facts, z: dict, idx: np.ndarray, split: np.ndarray) -> dict[str, np.ndarray]:
    """Every candidate (tile idx[c], split[c]) of every shape in z: its work and the scalar
    loop's total (inf where the search does not offer it), as (shapes, candidates) arrays
    (Gemm.kernel_candidates' work and predict.gemm_estimate's loop, operation for operation).
    `idx` is one tile per candidate column, or a (shapes, 1) column: one tile per shape, its
    candidates the split factors."""
    from perfmodel.predict import gemm_rates
    from perfmodel.engine import tensor_power_ratio
    hw, f, probe = x.hw, x.f, x.probe
    a_b, b_b, c_b, op_b = x.a_b, x.b_b, x.c_b, x.op_b
    kblock, sms = f["kblock"], hw.sm_count
    m, n, k, bat = (z[name][:, None] for name in ("m", "n", "k", "batch"))
    # per tile (rows, tiles) and per split factor (rows, splits) first, gathered per candidate
    # after: the same values, fewer array operations (integers stay integers either way)
    splits_u = np.unique(split)
    si = np.searchsorted(splits_u, split)
    if idx.ndim == 1:
        tiles_u = np.unique(idx)
        ti = np.searchsorted(tiles_u, idx)
        tm_u, tn_u = np.array(f["m"])[tiles_u], np.array(f["n"])[tiles_u]

        def per_tile(a):  # (rows, distinct tiles) -> (rows, candidates)
            return a[..., ti]
    else:  # one tile a row: the tile arrays are (rows, 1) already
        tm_u, tn_u = np.array(f["m"])[idx], np.array(f["n"])[idx]

        def per_tile(a):
            return a
    tm, tn = per_tile(tm_u), per_tile(tn_u)
    cluster, b_share = np.array(f["cluster"])[idx], np.array(f["b_share"])[idx]
    fits = np.array(f["fits"])[idx]
    a_bytes, b_bytes, c_bytes = operand_bytes(m, n, k, bat, probe.element_bytes(),
                                              probe.block_scaled_fp8)
    k_split_u = ceil_div(k, splits_u)
    k_split = k_split_u[:, si]
    k_pad = (ceil_div(k_split_u, kblock) * kblock)[:, si]
    tiles_mn_u = ceil_div(m, tm_u) * ceil_div(n, tn_u) * bat
    tiles_mn = per_tile(tiles_mn_u)
    tiles = tiles_mn * split
    is_split = split > 1
    valid = fits & (~is_split | ((tiles_mn < sms) & (k_split > kblock)))
    w_tensor = tiles * 2.0 * tm * (np.maximum(tn, FP4_MMA_N) if x.fp4 else tn) * k_pad
    w_fma = tiles * per_tile(tm_u * tn_u) * 1.0  # integer products: any grouping is exact
    if x.compute == "fp32":
        w_fma = w_fma + tiles * per_tile(tm_u * tn_u) * k_pad * 1.0
    if x.mixed:
        w_fma = w_fma + tiles * k_pad * (tn if x.narrow_b else tm) * 2
    w_smem = (tiles * k_pad * (tm * op_b + tn * op_b * b_share)
              + tiles * 2.0 * tm * tn * c_b)
    l2 = tiles * (tm * a_b + tn * b_b / cluster) * k_split + c_bytes
    hbm = (_hbm_operand_bytes(hw, m, n, k, tm_u, tn_u, a_bytes, b_bytes, a_b, b_b, bat)
           + c_bytes)
    hbm = per_tile(hbm)
    if is_split.any():
        partial = split * m * n * 4.0 * bat
        l2 = np.where(is_split, l2 + 2 * partial, l2 + 0.0)
        hbm = np.where(is_split, hbm + np.where(2 * partial > hw.l2_capacity_bytes,
                                                2 * partial, 0.0), hbm + 0.0)
    else:
        l2, hbm = l2 + 0.0, hbm + 0.0
    kernels = np.where(is_split, 2, 1)
    per_clk, _, l2_rate = gemm_rates(hw)
    sustained, hi, lo = hw.sustained_sm_clock_hz, hw.max_sm_clock_hz, hw.sustained_sm_clock_hz
    hbm_bw, hbm_lat = hw.hbm_bandwidth_bytes_per_s, hw.hbm_latency_s
    cps = x.cps_tile[idx]
    in_flight = np.array(f["in_flight"])[idx]
    busiest = np.ceil(tiles / sms) + 0.0
    rate = np.minimum(hbm_bw, np.minimum(tiles, sms * cps) * in_flight / hbm_lat)
    t_f = busiest * (w_fma / tiles) / (per_clk["fma"] * sustained)
    t_s = busiest * (w_smem / tiles) / (per_clk["smem"] * sustained)
    t_l2 = l2 / l2_rate
    with np.errstate(divide="ignore"):
        t_h = np.where(rate != 0, hbm / np.where(rate != 0, rate, 1.0), math.inf)
    if x.tensor:
        power_ratio = tensor_power_ratio(hw, x.resource)
        t_t = busiest * (w_tensor / tiles) / (per_clk[x.resource] * sustained) * power_ratio
        busy = np.maximum(np.maximum(np.maximum(t_t, t_f), np.maximum(t_s, t_l2)), t_h)
        if hi <= lo:
            clock = lo
        else:
            with np.errstate(invalid="ignore", divide="ignore"):
                share = np.where(busy > 0, np.minimum(np.maximum(t_t / busy, 0.0), 1.0), 0.0)
            clock = hi - share * (hi - lo)
    else:
        t_t, clock = None, (lo if hi <= lo else hi)
    scale = sustained / clock
    top = np.maximum(np.maximum(t_f * scale, t_s * scale), np.maximum(t_l2 * scale, t_h))
    if x.tensor:
        top = np.maximum(top, t_t * scale)
    total = top + np.where(hbm > 0, hbm_lat, 0.0) + hw.kernel_launch_s * kernels
    shape = total.shape
    return {"total": np.where(valid, total, math.inf), "w_tensor": w_tensor, "w_fma": w_fma,
            "w_smem": w_smem, "l2": l2, "hbm": hbm, "ctas": tiles,
            "idx": np.broadcast_to(idx, shape), "split": np.broadcast_to(split, shape),
            "kernels": np.broadcast_to(kernels, shape),
            "a_bytes": np.broadcast_to(a_bytes, (shape[0], 1))[:, 0],
            "b_bytes": np.broadcast_to(b_bytes, (shape[0], 1))[:, 0],
            "c_bytes": np.broadcast_to(c_bytes, (shape[0], 1))[:, 0]}


CHOSEN = ("w_tensor", "w_fma", "w_smem", "l2", "hbm", "ctas", "idx", "split", "kernels")


def _search(x: _Facts, z: dict) -> dict[str, np.ndarray]:
    """The fastest candidate of every shape, as the scalar search keeps it: the first of the
    fastest in its order (every tile unsplit, then each short tile's split factors, tile by
    tile). The split factors are evaluated per (shape, tile) pair, only for the pairs the
    search offers them (the tile leaves SMs idle and K holds two k-blocks a part) and that
    could win: a pair whose lower bound (SPLIT_BOUND) exceeds the shape's best unsplit time
    has no split that beats it, so it is not evaluated."""
    f, hw = x.f, x.hw
    sms = hw.sm_count
    t_count = len(f["m"])
    g1 = _grid(x, z, np.arange(t_count), np.ones(t_count, dtype=np.int64))
    rows = np.arange(len(z["m"]))
    best = np.argmin(g1["total"], axis=1)
    out = {name: np.broadcast_to(g1[name], g1["total"].shape)[rows, best] for name in CHOSEN}
    out["total"] = g1["total"][rows, best]
    out.update({name: g1[name] for name in ("a_bytes", "b_bytes", "c_bytes")})
    splits = [] if x.fp4 else list(range(2, MAX_SPLIT_K + 1))
    if not splits:
        return out
    tm_t, tn_t = np.array(f["m"]), np.array(f["n"])
    m, n, k, bat = (z[name][:, None] for name in ("m", "n", "k", "batch"))
    tiles_mn = ceil_div(m, tm_t) * ceil_div(n, tn_t) * bat
    offered = (tiles_mn < sms) & (ceil_div(k, 2) > f["kblock"]) & np.array(f["fits"])
    # a lower bound on every split candidate's total: its HBM bytes are the unsplit ones
    # plus the partial sums' (>= 0) at no more than the full bandwidth; its MMAs, spread
    # perfectly over the SMs, at the fastest clock; plus the first load and two launches
    lower = g1["hbm"] / hw.hbm_bandwidth_bytes_per_s
    if x.tensor:
        from perfmodel.engine import tensor_power_ratio
        from perfmodel.predict import gemm_rates
        per_clk = gemm_rates(hw)[0]
        # (no FP4 granule here: the NVFP4 CUTLASS kernel has no split-K, returned above)
        t_mma = (tiles_mn * 2.0 * tm_t * tn_t * k / sms
                 / (per_clk[x.resource] * hw.sustained_sm_clock_hz)
                 * tensor_power_ratio(hw, x.resource))
        lower = np.maximum(lower, t_mma * (hw.sustained_sm_clock_hz / hw.max_sm_clock_hz))
    lower = (lower + hw.hbm_latency_s + 2 * hw.kernel_launch_s) * SPLIT_BOUND
    pair_row, pair_tile = np.nonzero(offered & ~(lower > out["total"][:, None]))
    if not len(pair_row):
        return out
    split = np.array(splits, dtype=np.int64)
    g2 = _grid(x, {name: a[pair_row] for name, a in z.items()}, pair_tile[:, None], split)
    b2 = np.argmin(g2["total"], axis=1)
    t2 = g2["total"][np.arange(len(pair_row)), b2]
    # each shape's first fastest pair (pairs come row by row, tile by tile)
    order = np.lexsort((np.arange(len(pair_row)), t2, pair_row))
    first = order[np.r_[True, pair_row[order][1:] != pair_row[order][:-1]]]
    take = first[t2[first] < out["total"][pair_row[first]]]  # the unsplit one came first
    sel = pair_row[take]
    for name in CHOSEN:
        out[name] = out[name].copy()
        out[name][sel] = np.broadcast_to(g2[name], g2["total"].shape)[take, b2[take]]
    out["total"] = out["total"].copy()
    out["total"][sel] = t2[take]
    return out


def _chunk(x: _Facts, z: dict, level: str) -> dict[str, Any]:
    """`gemm_batch` of one chunk of shapes: the search (`_search`), then the chosen kernel's
    roofline and pipes times as predict.gemm_estimate computes them."""
    from perfmodel.predict import gemm_rates
    from perfmodel.engine import tensor_power_ratio
    hw = x.hw
    ch = _search(x, z)
    if not np.all(np.isfinite(ch["total"])):
        j = int(np.flatnonzero(~np.isfinite(ch["total"]))[0])
        raise InputError(f"gemm {dict((f, int(z[f][j])) for f in SIZE_FIELDS)}: no candidate "
                         f"kernel fits {hw.name}'s shared memory")
    f, sms, tensor, resource = x.f, hw.sm_count, x.tensor, x.resource
    m1, n1, k1, bat1, repeat = (z[name] for name in SIZE_FIELDS)
    w = {"fma": ch["w_fma"], "smem": ch["w_smem"], "l2": ch["l2"], "hbm": ch["hbm"]}
    if tensor:
        w = {resource: ch["w_tensor"], **w}
    ctas1, idx1, split1, kern1 = ch["ctas"], ch["idx"], ch["split"], ch["kernels"]
    flop = 2.0 * m1 * n1 * k1 * bat1
    hbm_bytes = ch["a_bytes"] + ch["b_bytes"] + ch["c_bytes"]
    per_clk, peak, l2_rate = gemm_rates(hw)
    # engine.roofline of the chosen Demand (Gemm.useful_fma for the FMA work)
    useful_fma = bat1 * m1 * n1 * 1.0
    if x.compute == "fp32":
        useful_fma = useful_fma + bat1 * m1 * n1 * k1 * 1.0
    if x.mixed:
        useful_fma = useful_fma + bat1 * k1 * (n1 if x.narrow_b else m1) * 2
    roof_times = {}
    for r, wr in w.items():
        if r == "fma":
            wr = useful_fma
        rate_r = peak.get(r)
        if rate_r is None:
            continue  # l2, smem: the pipes level's
        if r.startswith("tensor:"):
            roof_times[r] = (flop * wr / wr) / rate_r
        elif r == "hbm":
            roof_times[r] = hbm_bytes / rate_r
        else:
            roof_times[r] = wr / rate_r
    roof_times = {r: t * repeat for r, t in roof_times.items()}
    roof = np.maximum.reduce(list(roof_times.values()))
    kblock = f["kblock"]
    labels = np.array([f"{t.m}x{t.n}x{kblock}" + ("x2sm" if t.cta_pair else "")
                       + (f" cluster {t.cluster_m}x1" if t.cluster_m > 1 else "")
                       for t in f["tiles"]], dtype=object)
    chosen = {"tile": labels[idx1], "split_k": split1, "tile_index": idx1, "ctas": ctas1}
    if level == "roofline":
        names = list(roof_times)
        bound = np.array(names)[np.argmax(np.stack([roof_times[r] for r in names]), axis=0)]
        return {"time_s": roof, "bound": bound, "roofline_time_s": roof, "flop": flop * repeat,
                "hbm_bytes": hbm_bytes * repeat, "times": roof_times,
                "sm_clock_hz": np.full(len(roof), math.nan), **chosen}
    # engine.pipes of the chosen Demand, at its kernel clock
    sustained, hi, lo = hw.sustained_sm_clock_hz, hw.max_sm_clock_hz, hw.sustained_sm_clock_hz
    hbm_bw, hbm_lat = hw.hbm_bandwidth_bytes_per_s, hw.hbm_latency_s
    busiest1 = np.ceil(ctas1 / sms) + 0.0
    rate1 = np.minimum(hbm_bw, np.minimum(ctas1, sms * x.cps_tile[idx1])
                       * np.array(f["in_flight"])[idx1] / hbm_lat)
    raw = {}
    for r, wr in w.items():
        if r == "hbm":
            raw[r] = wr / rate1
        elif r == "l2":
            raw[r] = wr / l2_rate
        else:
            raw[r] = busiest1 * (wr / ctas1) / (per_clk[r] * sustained)
        if r.startswith("tensor:"):
            raw[r] = raw[r] * tensor_power_ratio(hw, r)
    top_raw = np.maximum.reduce(list(raw.values()))
    if hi <= lo:
        clock1 = np.full_like(top_raw, lo)
    elif not tensor:
        clock1 = np.full_like(top_raw, hi)
    else:
        t_tensor = 0.0 + raw[resource]
        clock1 = np.where(t_tensor > 0, hi - np.minimum(1.0, t_tensor / top_raw) * (hi - lo), hi)
    scale1 = sustained / clock1
    times = {r: (t if r == "hbm" else t * scale1) for r, t in raw.items()}
    busy1 = np.maximum.reduce(list(times.values()))
    times["latency"] = np.where(w["hbm"] > 0, hbm_lat, 0) + 0 + 0.0
    times["launch"] = hw.kernel_launch_s * kern1
    single = busy1 + times["latency"] + times["launch"]
    names = list(times)
    bound = np.array(names)[np.argmax(np.stack([times[r] for r in names]), axis=0)]
    times = {r: np.where(t > 0, t * repeat, 0.0) for r, t in times.items()}
    return {"time_s": single * repeat, "bound": bound, "roofline_time_s": roof,
            "flop": flop * repeat, "hbm_bytes": hbm_bytes * repeat, "times": times,
            "sm_clock_hz": clock1, **chosen}


def _hbm_operand_bytes(hw: Hardware, m, n, k, tm, tn, a_bytes, b_bytes, a_b, b_b, batch):
    """gemm.hbm_operand_bytes_scalar on arrays (the same operations in the same order)."""
    tiles_m, tiles_n = ceil_div(m, tm), ceil_div(n, tn)
    per_wave = hw.sm_count
    r = np.minimum(np.maximum(np.round(np.sqrt(per_wave * tn * b_b / (tm * a_b))), 1), tiles_m)
    r = r.astype(np.int64)
    c = np.minimum(np.ceil(per_wave / r), tiles_n)
    waves = (tiles_m * tiles_n) / (r * c)
    hbm = waves * (r * tm * a_b + c * tn * b_b) * k * batch
    hbm = np.minimum(np.maximum(hbm, a_bytes + b_bytes), tiles_n * a_bytes + tiles_m * b_bytes)
    return np.where(a_bytes + b_bytes <= 0.5 * hw.l2_capacity_bytes, a_bytes + b_bytes, hbm)
