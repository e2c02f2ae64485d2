"""The engine: Demand × Hardware → Estimate, at two levels.

`roofline` — the speed-of-light bound: useful compute over its device-wide datasheet peak (tensor
FLOP at the tensor clock; CUDA-core pipe ops at max boost; both capped by a locked SM clock)
against HBM bytes at peak bandwidth
(and link bytes for collectives); the maximum of those. Williams, Waterman, Patterson,
"Roofline", CACM 52(4), 2009. L2, shared memory and issue slots belong to the pipes level.

`pipes` — what a kernel of that launch shape can reach:
  * per-SM resources (tensor pipe per dtype, fma, fma_heavy, alu, xu, fp64, lsu, issue slots,
    shared memory) at their per-SM per-clock rates; the busiest SM runs ceil(CTAs / SMs) CTAs, so
    partial waves cost a full CTA time (wave quantization);
  * one SM clock per kernel for every SM-clocked rate (the SM resources and L2): max boost (or a
    locked clock) without tensor work, falling with the tensor pipe's utilization to the
    sustained (power-limited) clock, `tensor_clock_hz × tensor_sustained_fraction`
    (`kernel_clock_hz`; Hardware "clock domains"); HBM and links keep their own clocks;
  * device-wide L2 and HBM; HBM at its achievable fraction and, by Little's law, at most
    (bytes in flight of the resident CTAs) / (DRAM latency) — small grids cannot fill HBM;
  * floors: one DRAM round trip before the first tile arrives, each CTA round's exposed start
    and drain (the op's DRAM round trips per CTA), each link step's latency, and the launch
    overhead per kernel.
Time is max over resources plus the floors (a kernel overlaps its resources with each other but
not with its own start-up). Every Estimate carries the time of each resource, so the binding one
and the slack of the others are visible, like Nsight Compute's speed-of-light section.

Ops only count; this module alone turns counts into seconds. Where an op returns alternatives
(`Choice`, `KernelCandidates`), `resolve` keeps one at the requested level.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from perfmodel.demand import Choice, Demand, KernelCandidates, LaunchShape, Overlap, \
    is_sm_resource
from perfmodel.errors import InputError, check_result
from perfmodel.hardware import Hardware

LEVELS = ("roofline", "pipes")
ROOFLINE_PIPES = ("fma", "fma_heavy", "alu", "xu", "fp64")  # compute pipes; not issue/smem/lsu


@dataclass(frozen=True)
class Estimate:
    """A predicted time with the resource that binds it and every resource's busy time."""

    time_s: float
    bound: str
    resource_time_s: Mapping[str, float]
    flop: float
    hbm_bytes: float
    level: str
    roofline_time_s: float
    details: Mapping[str, object] = field(default_factory=dict)
    # an 80 % band from the cross-validated residuals of the op's class (perfmodel.intervals),
    # attached by perfmodel.predict.predict_op; None for a bare Demand's estimate
    interval_s: tuple[float, float] | None = None
    interval_basis: str | None = None

    @property
    def utilization(self) -> dict[str, float]:
        """Busy fraction of each resource over the op's time (0..1)."""
        return {r: t / self.time_s for r, t in self.resource_time_s.items()}

    @property
    def fraction_of_roofline(self) -> float:
        """Roofline time / predicted time: 1.0 means at the speed of light."""
        return self.roofline_time_s / self.time_s

    @property
    def achieved_flop_per_s(self) -> float:
        return self.flop / self.time_s

    def to_dict(self) -> dict:
        return {"time_s": self.time_s, "bound": self.bound, "flop": self.flop,
                "hbm_bytes": self.hbm_bytes, "level": self.level,
                "roofline_time_s": self.roofline_time_s,
                "resource_time_s": dict(self.resource_time_s),
                **({"interval_s": list(self.interval_s), "interval_basis": self.interval_basis}
                   if self.interval_s is not None else {})}


def check_estimate(est: Estimate, op: Any, hw: Hardware) -> Estimate:
    """`est` of `op` on `hw`, unless one of its numbers is not finite and non-negative
    (errors.check_result: an InternalError naming the op). Called where an estimate is first
    computed and memoized (schedule.op_entry, the GEMM paths of predict), so a cached
    prediction costs nothing, and a cold one a few comparisons."""
    r, inf = est.resource_time_s.values(), math.inf
    # (a NaN anywhere makes the sum NaN, which fails `< inf`; a negative shows in the min)
    if not (0 <= est.time_s < inf and 0 <= est.flop < inf and 0 <= est.hbm_bytes < inf
            and 0 <= est.roofline_time_s < inf and (not r or (min(r) >= 0 and sum(r) < inf))):
        check_result(lambda: f"{op!r} on {hw.name}",  # raises, naming the number
                     {"time_s": est.time_s, "flop": est.flop, "hbm_bytes": est.hbm_bytes,
                      "roofline_time_s": est.roofline_time_s, **est.resource_time_s})
    return est


@functools.lru_cache(maxsize=1024)
def occupancy(launch: LaunchShape, hw: Hardware) -> tuple[int, str]:
    """Resident CTAs per SM and the limiter (CUDA occupancy calculator rules, CPG-CC Table 30)."""
    if launch.threads_per_cta > hw.max_threads_per_cta:
        raise InputError(f"launch of {launch.threads_per_cta} threads per CTA exceeds "
                         f"{hw.name}'s limit of {hw.max_threads_per_cta}")
    if launch.smem_per_cta_bytes > hw.smem_per_cta_bytes:
        raise InputError(f"launch needs {launch.smem_per_cta_bytes} B shared memory per CTA; "
                         f"{hw.name} allows {hw.smem_per_cta_bytes}")
    regs = min(launch.registers_per_thread, hw.max_registers_per_thread)
    # registers are allocated per warp in units of 256 (CUDA occupancy calculator)
    regs_per_warp = math.ceil(regs * 32 / 256) * 256
    limits = {
        "ctas": hw.max_ctas_per_sm,
        "warps": hw.max_warps_per_sm // launch.warps_per_cta,
        "registers": hw.registers_per_sm // (regs_per_warp * launch.warps_per_cta),
        "smem": (hw.smem_per_sm_bytes // launch.smem_per_cta_bytes
                 if launch.smem_per_cta_bytes else hw.max_ctas_per_sm),
    }
    limiter = min(limits, key=limits.get)
    return max(1, limits[limiter]), limiter


def sm_rate_per_clk(resource: str, hw: Hardware) -> float:
    """Per-SM rate of an SM resource in its work unit per SM clock."""
    if resource.startswith("tensor:"):
        dtype = resource.split(":", 1)[1]
        if dtype not in hw.tensor_flop_per_sm_per_clk:
            raise InputError(f"{hw.name} ({hw.architecture}) has no tensor-core support for "
                             f"'{dtype}' (supported: "
                             f"{', '.join(sorted(hw.tensor_flop_per_sm_per_clk))})")
        return hw.tensor_flop_per_sm_per_clk[dtype]
    if resource == "issue":
        return hw.issue_per_sm_per_clk
    if resource == "smem":
        return hw.smem_bytes_per_clk
    return hw.pipes_per_sm_per_clk[resource]


def sm_rate_per_s(resource: str, hw: Hardware, sustained: bool,
                  clock_hz: float | None = None) -> float:
    """Per-SM rate of an SM resource in its work unit per second, at `clock_hz` if given.
    Otherwise `sustained`: at the clock of a kernel that loads only this resource (the tensor pipe
    at the sustained SM clock, every other resource at max boost or the locked clock); not
    `sustained`: at the datasheet clocks (tensor peaks at the tensor clock, the CUDA-core pipes at
    max boost; both capped by a locked clock)."""
    if clock_hz is None:
        tensor = resource.startswith("tensor:")
        clock_hz = ((hw.sustained_sm_clock_hz if sustained else hw.tensor_peak_clock_hz)
                    if tensor else hw.max_sm_clock_hz)
    return sm_rate_per_clk(resource, hw) * clock_hz


@functools.lru_cache(maxsize=64)
def _sm_rates_per_clk(hw: Hardware) -> dict[str, float]:
    """Per-SM per-clock rates of every SM resource the spec defines (cached per spec)."""
    names = [f"tensor:{d}" for d in hw.tensor_flop_per_sm_per_clk]
    names += [*hw.pipes_per_sm_per_clk, "issue", "smem"]
    return {r: sm_rate_per_clk(r, hw) for r in names}


def _device_rate_per_s(resource: str, hw: Hardware, peak: bool,
                       clock_hz: float | None = None) -> float:
    if resource == "hbm":
        return hw.hbm_peak_bandwidth_bytes_per_s if peak else hw.hbm_bandwidth_bytes_per_s
    if resource == "l2":  # the L2 slices and crossbar run on the SM (graphics) clock
        return hw.l2_bandwidth_at(hw.max_sm_clock_hz if clock_hz is None else clock_hz)
    return hw.link(resource.split(":", 1)[1]).bandwidth_bytes_per_s


def is_sm_clocked(resource: str) -> bool:
    """Resources whose rate follows the SM clock: the SM's own, and L2."""
    return is_sm_resource(resource) or resource == "l2"


def kernel_clock_hz(hw: Hardware, times: Mapping[str, Any], overlap: Overlap | None = None
                    ) -> Any:
    """The SM clock a kernel runs at, from its resource times at the sustained SM clock (scalars,
    or arrays of candidates): max boost (or the locked clock) without tensor work, falling
    linearly in the tensor pipe's utilization u = (tensor busy time) / (kernel busy time) to the
    sustained clock at u = 1. The power limit sets the clock of the whole SM; the tensor pipe is
    what draws the power (docs/hardware-notes.md §5 "Clocks under load")."""
    hi, lo = hw.max_sm_clock_hz, hw.sustained_sm_clock_hz
    tensor = sum((t for r, t in times.items() if r.startswith("tensor:")), 0.0)
    scalar = isinstance(tensor, (float, int))
    if hi <= lo or not (tensor > 0 if scalar else np.any(np.asarray(tensor) > 0)):
        return lo if hi <= lo else hi
    if scalar or np.ndim(tensor) == 0:  # one kernel: plain floats (the common, fast path)
        busy = max(float(t) for t in times.values())
        if overlap is not None:
            busy = max(busy, overlap.time_s(times))
        return hi - min(1.0, float(tensor) / busy) * (hi - lo)
    busy = np.maximum.reduce([np.asarray(t, dtype=float) for t in times.values()])
    if overlap is not None:
        busy = np.maximum(busy, _overlap_time_s(overlap, times))
    with np.errstate(divide="ignore", invalid="ignore"):
        u = np.where(busy > 0, np.clip(tensor / busy, 0.0, 1.0), 0.0)
    clock = hi - u * (hi - lo)
    return float(clock) if np.ndim(clock) == 0 else clock


FP4_MMA_DTYPES = ("nvfp4", "mxfp4")  # the block-scaled 4-bit MMAs (tcgen05 kind::mxf4nvf4)


@functools.lru_cache(maxsize=256)
def tensor_power_ratio(hw: Hardware, resource: str) -> float:
    """How much slower than its datasheet rate `resource`'s MMA runs under the power limit,
    relative to the 16-bit MMA: r**exponent, where r is its FLOP per clock over the 16-bit MMA's
    (2 for FP8, 4 for FP4 on Blackwell) and the exponent hw.tensor_power_exponent. An MMA on
    narrower operands does r times the multiply-adds per clock at less energy each; its power per
    clock grows as r**exponent, so under the limit that holds a 16-bit MMA at the sustained clock
    it delivers r**(1 - exponent) times the 16-bit FLOP/s (exponent 0: the datasheet ratio r; 1:
    no faster than 16-bit). Applied to the tensor pipe's busy time at the kernel's clock
    (power_limited), not to the SM clock, so halving an MMA's work never slows the rest of the
    kernel. Types slower than 16-bit (TF32) count 1. The block-scaled 4-bit MMAs (NVFP4, MXFP4)
    take their own exponent where the spec has one (hw.tensor_power_exponent_fp4): their power
    per clock also carries the per-block scale factors the tensor core applies, so a fit of the
    FP8/BF16 ratio does not carry over (AIConfigurator's B200 NVFP4/BF16 linears at m, n, k >=
    4096 run 2.4x BF16 where the FP8 exponent gives 3.05x)."""
    rates = hw.tensor_flop_per_sm_per_clk
    base = rates.get("bf16") or rates.get("fp16")
    dtype = resource.split(":", 1)[1]
    r = rates.get(dtype, base) / base if base else 1.0
    exponent = (hw.tensor_power_exponent_fp4 if dtype in FP4_MMA_DTYPES
                and hw.tensor_power_exponent_fp4 is not None else hw.tensor_power_exponent)
    return r ** exponent if r > 1.0 else 1.0


def at_clock(times: Mapping[str, Any], from_hz: Any, to_hz: Any) -> dict[str, Any]:
    """Resource times at SM clock `from_hz` moved to `to_hz`: the SM-clocked ones scale, HBM and
    links keep theirs."""
    scale = from_hz / to_hz
    return {r: (t * scale if is_sm_clocked(r) else t) for r, t in times.items()}


def power_limited(times: Mapping[str, Any], hw: Hardware) -> dict[str, Any]:
    """Resource times with each narrow MMA's busy time stretched by its tensor_power_ratio (1 for
    16-bit MMAs). The kernel's clock (kernel_clock_hz) is read from the stretched times, so a
    kernel kept busy by its power-limited MMAs runs at the sustained clock (the 16-bit MMA's
    power limit) and extra non-MMA work never raises it; the stretch is the narrow MMA's own
    share of the power limit, so the two do not compound."""
    return {r: (t * tensor_power_ratio(hw, r) if r.startswith("tensor:") else t)
            for r, t in times.items()}


@functools.lru_cache(maxsize=64)
def _peak_rates(hw: Hardware) -> dict[str, float]:
    """Device-wide datasheet rates of the roofline's resources (cached per spec)."""
    rates = {f"tensor:{d}": sm_rate_per_s(f"tensor:{d}", hw, sustained=False) * hw.sm_count
             for d in hw.tensor_flop_per_sm_per_clk}
    rates.update({p: sm_rate_per_s(p, hw, sustained=False) * hw.sm_count for p in ROOFLINE_PIPES})
    rates["hbm"] = hw.hbm_peak_bandwidth_bytes_per_s
    rates.update({f"link:{n}": link.bandwidth_bytes_per_s for n, link in hw.links.items()})
    return rates


def roofline(demand: Demand, hw: Hardware) -> Estimate:
    """Speed-of-light: useful compute and HBM/link bytes over their datasheet peaks."""
    times: dict[str, float] = {}
    rates = _peak_rates(hw)
    tensor_work = sum(w for r, w in demand.work.items() if r.startswith("tensor:"))
    useful = demand.roofline_work
    for r, w in demand.work.items():
        if r in useful:  # padded-tile work: the roofline counts what the problem needs
            w = useful[r]
        if w <= 0:
            continue
        rate = rates.get(r)
        if rate is None:
            if r.startswith("tensor:"):
                sm_rate_per_s(r, hw, sustained=False)  # raises: dtype unsupported
            if r.startswith("link:"):
                hw.link(r.split(":", 1)[1])  # raises: unknown link
            continue  # l2, smem, issue, lsu belong to the pipes level
        if r.startswith("tensor:"):
            # useful FLOP (not padded tiles) shared among tensor dtypes by their work
            times[r] = (demand.flop * w / tensor_work if demand.flop else w) / rate
        elif r == "hbm":
            times[r] = demand.hbm_bytes / rate
        else:
            times[r] = w / rate
    times = {r: t * demand.repeat for r, t in times.items()}
    t = max(times.values(), default=0.0)
    if t <= 0:
        t = hw.kernel_launch_s * demand.kernels * demand.repeat  # an op with no work at all
        times["launch"] = t
    bound = max(times, key=times.get)
    return Estimate(t, bound, times, demand.flop * demand.repeat,
                    demand.hbm_bytes * demand.repeat, "roofline", t, dict(demand.details))


def kernel_resource_times(hw: Hardware, work: Mapping[str, Any], ctas: Any = None,
                          ctas_per_sm: Any = 1, in_flight_bytes: Any = 0.0,
                          cta_imbalance: float = 0.0, clock_hz: float | None = None
                          ) -> dict[str, Any]:
    """Busy time of each resource for one kernel launch, the SM-clocked ones at SM clock
    `clock_hz` (default: the sustained SM clock; `kernel_clock_hz` then finds the kernel's own).

    Works on scalars or on numpy arrays holding one entry per candidate kernel (the GEMM tile
    search), so both use one formula. SM resources: the busiest SM runs ceil(CTAs / SMs) CTAs,
    plus `cta_imbalance` CTAs' worth when CTAs differ in work (its last CTA is a heavy one).
    HBM: achievable bandwidth, capped by Little's law at (resident CTAs × bytes in flight) /
    DRAM latency.
    """
    clock = hw.sustained_sm_clock_hz if clock_hz is None else clock_hz
    times: dict[str, Any] = {}
    hbm_rate: Any = hw.hbm_bandwidth_bytes_per_s
    if ctas is not None:
        if isinstance(ctas, np.ndarray) or isinstance(in_flight_bytes, np.ndarray):
            busiest = np.ceil(ctas / hw.sm_count) + cta_imbalance
            resident = np.minimum(ctas, hw.sm_count * ctas_per_sm)
            hbm_rate = np.minimum(hbm_rate, resident * in_flight_bytes / hw.hbm_latency_s)
        else:
            # one kernel: the same operations on Python floats, without numpy's per-call cost
            # on 0-d values (most of a cold prediction's time otherwise)
            busiest = math.ceil(ctas / hw.sm_count) + cta_imbalance
            resident = min(ctas, hw.sm_count * ctas_per_sm)
            hbm_rate = min(hbm_rate, resident * in_flight_bytes / hw.hbm_latency_s)
    sm_rates = _sm_rates_per_clk(hw)
    for r, w in work.items():
        rate = sm_rates.get(r)
        if rate is None and is_sm_resource(r):
            rate = sm_rate_per_clk(r, hw)  # raises for unsupported tensor dtypes
        if rate is not None:
            if ctas is None:
                raise ValueError(f"demand puts work on SM resource '{r}' without a launch shape")
            times[r] = busiest * (w / ctas) / (rate * clock)
        elif r == "hbm":
            times[r] = _hbm_time_s(w, hbm_rate)
        else:
            times[r] = w / _device_rate_per_s(r, hw, peak=False, clock_hz=clock)
    return times


def _hbm_time_s(nbytes: Any, rate: Any) -> Any:
    """HBM time at `rate`: a tile-search candidate with no pipeline stage has no bytes in
    flight, rate 0, time inf (it is filtered out as invalid), not a warning."""
    if isinstance(rate, np.ndarray):
        with np.errstate(divide="ignore"):
            return nbytes / rate
    return nbytes / rate if rate else (math.inf if nbytes > 0 else math.nan)


def link_latency_s(demand: Demand, hw: Hardware) -> float:
    """Serial latency of the op's link steps: each step waits for its link's latency."""
    return sum(steps * hw.link(name).latency_s for name, steps in demand.link_steps.items())


def _pipes_times(demand: Demand, hw: Hardware) -> tuple[float, dict[str, float], dict]:
    """Single-launch time, per-resource times (incl. floors) and launch details."""
    details: dict[str, object] = {}
    launch = demand.launch
    work = {r: w for r, w in demand.work.items() if w > 0}
    if launch is not None:
        ctas_per_sm, limiter = occupancy(launch, hw)
        details = {"ctas_per_sm": ctas_per_sm, "occupancy_limiter": limiter,
                   "waves": launch.ctas / (hw.sm_count * ctas_per_sm),
                   "busiest_sm_ctas": math.ceil(launch.ctas / hw.sm_count)}
        raw = kernel_resource_times(hw, work, launch.ctas, ctas_per_sm, launch.in_flight_bytes,
                                    demand.cta_imbalance)
    else:
        raw = kernel_resource_times(hw, work)
    # narrow MMAs stretched to their power-limited busy time (power_limited), which the clock
    # follows; then every SM-clocked time moves to that clock
    raw = power_limited(raw, hw)
    clock = kernel_clock_hz(hw, raw, demand.overlap)
    details["sm_clock_hz"] = clock
    times = {r: float(t) for r, t in at_clock(raw, hw.sustained_sm_clock_hz, clock).items()}
    busy = max(times.values(), default=0.0)
    if demand.overlap is not None:
        joint = demand.overlap.time_s(times)
        details["overlap_loss_s"] = max(0.0, joint - busy)
        busy = max(busy, joint)
    first_load = hw.hbm_latency_s if (launch is not None and work.get("hbm", 0) > 0) else 0
    cta_serial = 0.0
    if launch is not None and demand.cta_dram_round_trips:
        # each SM runs its CTAs in ceil(busiest / resident) rounds; a round's prologue and
        # epilogue are exposed (co-resident CTAs of the same round share them)
        cta_serial = math.ceil(details["busiest_sm_ctas"] / details["ctas_per_sm"]) \
            * (demand.cta_dram_round_trips * hw.hbm_latency_s)
        if demand.persistent:
            # the tiles' rounds run under the pipelined stream: whichever is longer binds, and
            # what the rounds take beyond the stream is exposed latency
            details["tile_rounds_s"] = cta_serial
            cta_serial = max(0.0, cta_serial - busy)
    times["latency"] = first_load + link_latency_s(demand, hw) + cta_serial + demand.fixed_s
    times["launch"] = hw.kernel_launch_s * demand.kernels
    return busy + times["latency"] + times["launch"], times, details


def pipes_time_s(demand: Demand, hw: Hardware) -> float:
    """Just the pipes-level time (for ranking alternatives)."""
    if demand.sequence:
        t = sum(pipes_time_s(d, hw) for d in demand.sequence) * demand.repeat
    else:
        t = _pipes_times(demand, hw)[0] * demand.repeat
    return max(t, demand.host_floor_s * demand.repeat)


def _host_floored(e: Estimate, demand: Demand) -> Estimate:
    """`e` behind the demand's host floor (Demand.host_floor_s): calls timed back to back take
    the longer of the host path and the GPU time; the excess counts as latency (the GPU's own
    time stays in the details, device_time_s)."""
    floor = demand.host_floor_s * demand.repeat
    if floor <= e.time_s:
        return e
    times = {**e.resource_time_s,
             "latency": e.resource_time_s.get("latency", 0.0) + floor - e.time_s}
    return dataclasses.replace(e, time_s=floor, bound=max(times, key=times.get),
                               resource_time_s=times,
                               details={**e.details, "host_bound": True,
                                        "device_time_s": e.time_s})


def pipes(demand: Demand, hw: Hardware) -> Estimate:
    """Per-SM pipes with occupancy and waves, device-wide memory, latency and launch floors."""
    if demand.sequence:  # several kernels back to back: times add
        parts = [pipes(d, hw) for d in demand.sequence]
        times: dict[str, float] = {}
        for e in parts:
            for r, t in e.resource_time_s.items():
                times[r] = times.get(r, 0.0) + t
        total = sum(e.time_s for e in parts) * demand.repeat
        times = {r: t * demand.repeat for r, t in times.items()}
        return _host_floored(Estimate(
            total, max(times, key=times.get), times, demand.flop * demand.repeat,
            demand.hbm_bytes * demand.repeat, "pipes", roofline(demand, hw).time_s,
            {**demand.details, "parts": [{"time_s": e.time_s, "bound": e.bound, **e.details}
                                         for e in parts]}), demand)
    single, times, launch_details = _pipes_times(demand, hw)
    bound = max(times, key=times.get)
    times = {r: t * demand.repeat for r, t in times.items() if t > 0}
    roof = roofline(demand, hw).time_s
    return _host_floored(Estimate(single * demand.repeat, bound, times,
                                  demand.flop * demand.repeat, demand.hbm_bytes * demand.repeat,
                                  "pipes", roof, {**demand.details, **launch_details}), demand)


def _level_time_s(demand: Demand, hw: Hardware, level: str) -> float:
    return pipes_time_s(demand, hw) if level == "pipes" else roofline(demand, hw).time_s


def candidate_times_s(c: KernelCandidates, hw: Hardware) -> np.ndarray:
    """Pipes-level time of every candidate launch at once (inf where it cannot run): the
    resource times of `kernel_resource_times`, the overlap, the first DRAM round trip and the
    launch floors, i.e. what `pipes` gives each candidate's Demand."""
    # occupancy per distinct launch (a tile's split-K candidates share its launch)
    keys = list(zip(*(np.asarray(a).tolist() for a in (
        c.threads_per_cta, c.registers_per_thread, c.smem_per_cta_bytes, c.valid))))
    seen: dict[tuple, int] = {}
    for key in keys:
        if key not in seen:
            t, r, sm, ok = key
            seen[key] = occupancy(LaunchShape(1, int(t), int(r), int(sm)), hw)[0] if ok else 1
    ctas_per_sm = np.array([seen[key] for key in keys])
    times = power_limited(kernel_resource_times(hw, c.work, c.ctas, ctas_per_sm,
                                                c.bytes_in_flight_per_cta), hw)
    times = at_clock(times, hw.sustained_sm_clock_hz, kernel_clock_hz(hw, times, c.overlap))
    busy = np.maximum.reduce(list(times.values()))
    if c.overlap is not None:
        busy = np.maximum(busy, _overlap_time_s(c.overlap, times))
    first_load = np.where(c.work.get("hbm", 0.0) > 0, hw.hbm_latency_s, 0.0)
    total = busy + first_load + hw.kernel_launch_s * c.kernels
    return np.where(c.valid, total, np.inf)


def _overlap_time_s(overlap: Overlap, times: Mapping[str, Any]) -> Any:
    """`Overlap.time_s` on arrays of candidate times (efficiency 0 is the plain sum)."""
    ta, tb = (_overlap_time_s(g, times) if isinstance(g, Overlap)
              else np.maximum.reduce([times.get(r, 0.0) for r in g])
              for g in (overlap.a, overlap.b))
    if overlap.efficiency <= 0.0:
        return ta + tb
    hi, lo = np.maximum(ta, tb), np.minimum(ta, tb)
    if overlap.efficiency >= 1.0:
        return hi
    p = 1.0 / (1.0 - overlap.efficiency)
    with np.errstate(divide="ignore", invalid="ignore"):
        joint = hi * (1.0 + (lo / hi) ** p) ** (1.0 / p)
    return np.where(lo > 0, joint, hi)


@functools.lru_cache(maxsize=65536)
def _fastest_candidate(c: KernelCandidates, hw: Hardware) -> Demand:
    total = candidate_times_s(c, hw)
    best = int(np.argmin(total))
    if not np.isfinite(total[best]):
        raise InputError(f"{c.what}: no candidate kernel fits {hw.name}'s shared memory")
    return c.demand_at(best)


def resolve(demand: "Demand | Choice | KernelCandidates", hw: Hardware,
            level: str = "pipes") -> Demand:
    """The Demand that runs: a plain Demand as it is; the fastest of a kernel library's
    candidates (they do the same useful work, so the roofline cannot rank them and the pipes
    level does at every level); a Choice's fastest or slowest option at `level`, ties broken by
    the pipes level, then by order."""
    if isinstance(demand, Demand):
        return demand
    if isinstance(demand, KernelCandidates):
        return _fastest_candidate(demand, hw)
    if isinstance(demand, Choice):
        options = [resolve(o, hw, level) for o in demand.options]
        if len(options) == 1:
            return options[0]
        keys = [(_level_time_s(o, hw, level) if level != "pipes" else 0.0, pipes_time_s(o, hw))
                for o in options]
        pick = min if demand.pick == "fastest" else max
        return options[pick(range(len(options)), key=keys.__getitem__)]
    raise TypeError(f"cannot resolve {type(demand).__name__} into a Demand")


def estimate(demand: "Demand | Choice | KernelCandidates", hw: Hardware,
             level: str = "pipes", resolved: Demand | None = None) -> Estimate:
    """Time, bound and resource times of an op's demand (alternatives resolved at `level`;
    `resolved`: that resolution, when the caller has it already)."""
    if level not in LEVELS:
        raise InputError(f"unknown level '{level}' (expected one of {', '.join(LEVELS)})")
    chosen = resolved if resolved is not None else resolve(demand, hw, level)
    if level != "pipes":
        return roofline(chosen, hw)
    est = pipes(chosen, hw)
    if isinstance(demand, Choice) and len(demand.options) > 1:
        # the op's speed of light is the roofline level's own pick among the options (the
        # slowest GPU by roofline need not be the slowest by pipes)
        roof = roofline(resolve(demand, hw, "roofline"), hw).time_s
        if roof != est.roofline_time_s:
            est = dataclasses.replace(est, roofline_time_s=roof)
    return est
