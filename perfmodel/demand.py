"""Demand: the work an op puts on each hardware resource, plus its launch shape.

An op never knows how fast hardware is; it only counts: work per resource, DRAM round trips it
waits for, link steps it takes (docs/design.md "Data flow"). The engine turns counts into time.
Resource names (docs/design.md "Resources"):

    tensor:<dtype>  FLOP            fma, fma_heavy, alu, xu, fp64, lsu   thread-ops
    issue           warp-instrs     smem, l2, hbm                        bytes
    link:<name>     bytes per GPU

Where a library chooses among kernels or algorithms, or a layer waits for the slowest of
parallel parts, the op returns the alternatives (`Choice`, or `KernelCandidates` for a
vectorized kernel search) and the engine resolves them at the level the user asked for.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

SM_PIPES = ("fma", "fma_heavy", "alu", "xu", "fp64", "lsu")
DEVICE_RESOURCES = ("l2", "hbm")
FLOOR_BOUNDS = ("latency", "launch")

# Bytes a plain (non-TMA) thread keeps in flight toward HBM: four 16-byte vector loads, the
# unrolled streaming loop PyTorch/quack elementwise kernels use (vectorized_elementwise_kernel
# unrolls 4 x 16 B). Feeds Little's law in the engine; a launch shape can override it.
DEFAULT_BYTES_IN_FLIGHT_PER_THREAD = 64.0


def is_sm_resource(resource: str) -> bool:
    """Resources that live inside each SM (rated per SM per clock)."""
    return resource.startswith("tensor:") or resource in SM_PIPES or resource in ("issue", "smem")


def is_valid_resource(resource: str) -> bool:
    return (is_sm_resource(resource) or resource in DEVICE_RESOURCES
            or resource.startswith("link:"))


@dataclass(frozen=True)
class LaunchShape:
    """How a kernel is launched; sets occupancy, waves and memory-level parallelism."""

    ctas: int
    threads_per_cta: int
    registers_per_thread: int = 32
    smem_per_cta_bytes: int = 0
    bytes_in_flight_per_cta: float | None = None  # None: threads × DEFAULT_BYTES_IN_FLIGHT

    def __post_init__(self):
        if self.ctas < 1 or self.threads_per_cta < 1:
            raise ValueError(f"launch shape needs ctas >= 1 and threads >= 1, got {self}")

    @property
    def warps_per_cta(self) -> int:
        return -(-self.threads_per_cta // 32)

    @property
    def in_flight_bytes(self) -> float:
        if self.bytes_in_flight_per_cta is not None:
            return self.bytes_in_flight_per_cta
        return self.threads_per_cta * DEFAULT_BYTES_IN_FLIGHT_PER_THREAD


@dataclass(frozen=True)
class Overlap:
    """Two groups of SM resources a kernel overlaps only partly (e.g. attention's MMAs and its
    softmax on the CUDA cores). With tA ≥ tB the busiest resource time of each group, the joint
    time is their power mean (tA^p + tB^p)^(1/p), p = 1 / (1 − efficiency): efficiency 0 is
    fully serial (the sum), 1 is perfect pipelining (the plain max).

    Why a power mean and not max + (1 − efficiency)·min: the exposed part of the smaller group,
    tA·((1 + r^p)^(1/p) − 1) with r = tB/tA, shrinks faster than r. The more slack the bigger
    group leaves, the more of the smaller one a warp scheduler can slot into it, and the cost is
    largest when the two are balanced. FlashAttention-3's forward constant, fitted at head dim 128
    (exp time = 1/2 of MMA time), predicts head dims 64 and 256 (1 and 1/4) within ~5% on judged
    rows; the linear form missed head dim 64 by 9% (perfmodel.validation.fit).

    A group may itself be an Overlap (FA2's MMAs with their own ldmatrix operand loads, that pair
    with the softmax)."""

    a: "tuple[str, ...] | Overlap"
    b: "tuple[str, ...] | Overlap"
    efficiency: float

    def time_s(self, times: Mapping[str, float]) -> float:
        """Joint time of the two groups given each resource's busy time."""
        ta, tb = (g.time_s(times) if isinstance(g, Overlap)
                  else max((times.get(r, 0.0) for r in g), default=0.0)
                  for g in (self.a, self.b))
        hi, lo = max(ta, tb), min(ta, tb)
        if lo <= 0.0 or self.efficiency >= 1.0:
            return hi
        p = 1.0 / (1.0 - self.efficiency)
        return hi * (1.0 + (lo / hi) ** p) ** (1.0 / p)

    def __post_init__(self):
        if not 0.0 <= self.efficiency <= 1.0:
            raise ValueError(f"overlap efficiency {self.efficiency} outside [0, 1]")


@dataclass(frozen=True)
class Demand:
    """Total work per resource for one op on one GPU.

    `work` holds totals over the whole op (all CTAs, all `count` repeats). `flop` and `hbm_bytes`
    are the useful FLOP and bytes reported to users (the roofline uses them); `work` may hold
    more (padded tiles, re-reads). `launch` is None for work that runs on no SM (DMA copies,
    link transfers). `link_steps` counts serial hops per link (a ring all-reduce's 2(G−1)
    steps), each paying that link's latency; `cta_dram_round_trips` the DRAM round trips of a
    CTA's exposed start and drain. `kernels` counts launches for the launch overhead; `repeat`
    runs the whole demand that many times in sequence (each repeat quantizes into waves on its
    own)."""

    work: Mapping[str, float]
    launch: LaunchShape | None
    flop: float = 0.0
    hbm_bytes: float = 0.0
    kernels: int = 1
    link_steps: Mapping[str, float] = field(default_factory=dict)  # link name → serial steps
    repeat: int = 1  # identical launches back to back (gemm `count`); flop/bytes are per launch
    overlap: Overlap | None = None  # partial pipelining between two groups of SM resources
    cta_dram_round_trips: float = 0.0  # serial per-CTA prologue/epilogue in DRAM round trips
    #                                    (not hidden by other CTAs unless several are resident)
    cta_imbalance: float = 0.0  # (largest CTA's work / mean CTA's work) − 1: the busiest SM
    #                             ends with a heavy CTA (causal attention's last query tiles)
    # The CTAs are the work tiles of a persistent grid that pipelines them (its load warps run
    # ahead into the next tile): a tile's exposed start and drain (cta_dram_round_trips) overlap
    # the other tiles' streaming, so the rounds bound the time instead of adding to it
    persistent: bool = False
    # Time the op spends outside its GPU work, serial with it: host waits and synchronization
    # (DeepEP's dispatch waits on the host for the counts it will receive). Added to the
    # latency; the roofline leaves it out.
    fixed_s: float = 0.0
    # The host's call path when calls are timed back to back (an eager call's Python and launch
    # path: ops/custom_allreduce.py): a call takes at least this long, whatever its GPU time;
    # what the floor adds beyond the GPU time counts as latency
    host_floor_s: float = 0.0
    sequence: tuple["Demand", ...] = ()  # kernels run back to back (e.g. attention fwd + bwd);
    #                                      `work` holds their sum
    details: Mapping[str, object] = field(default_factory=dict)
    # The part of `work` the kernel runs outside its overlapped main loop (work per resource, a
    # subset of `work`): each exposed CTA round's prologue (its first pipeline stage landing in
    # shared memory before the first MMA) and epilogue (its output tile written back after the
    # last MMA); a persistent warp-specialized kernel exposes them once per SM, a non-persistent
    # one once per CTA round (ops/gemm.py "Fixed costs"). Meant to be priced on the same
    # resources as `work` and added to the main loop's time rather than overlapped with it; the
    # engine does not read it yet, so it is counted and carried only.
    serial_work: Mapping[str, float] = field(default_factory=dict)
    # DRAM round trips the busiest SM waits for outside its main loop beyond the one first-load
    # round trip of the kernel (the first k-block of each later exposed CTA round)
    serial_round_trips: float = 0.0
    # The useful part of `work` on resources where `work` counts padded tiles (an FP32 GEMM's
    # FFMAs on the FMA pipe: its tiles' padding is work the kernel does, not work the problem
    # needs): what the roofline counts. A resource not named here is useful in full; tensor
    # pipes are counted from `flop` instead.
    roofline_work: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self):
        for r, w in self.work.items():
            if not is_valid_resource(r):
                raise ValueError(f"unknown resource '{r}' in demand")
            if w < 0:
                raise ValueError(f"negative work {w} on resource '{r}'")
        for link, steps in self.link_steps.items():
            if steps < 0:
                raise ValueError(f"negative step count {steps} on link '{link}'")
        if self.host_floor_s < 0 or not math.isfinite(self.host_floor_s):
            raise ValueError(f"host floor {self.host_floor_s} s must be finite and >= 0")
        if self.fixed_s < 0 or not math.isfinite(self.fixed_s):
            raise ValueError(f"fixed time {self.fixed_s} s must be finite and >= 0")
        if self.cta_dram_round_trips < 0:
            raise ValueError(f"negative DRAM round trips {self.cta_dram_round_trips} per CTA")
        for r, w in self.serial_work.items():
            if not is_valid_resource(r):
                raise ValueError(f"unknown resource '{r}' in serial work")
            if not 0 <= w <= self.work.get(r, 0.0) * (1 + 1e-9):
                raise ValueError(f"serial work {w} on '{r}' is not part of the work on it")
        if self.serial_round_trips < 0:
            raise ValueError(f"negative serial DRAM round trips {self.serial_round_trips}")


PICKS = ("fastest", "slowest")


@dataclass(frozen=True)
class Choice:
    """Alternatives of which the engine keeps one, at the level the user asked for: a library
    choosing the fastest algorithm (`fastest`: NCCL's or a custom all-reduce by message size),
    or parallel parts the op waits for (`slowest`: the straggler GPU of an expert-parallel
    layer). Ties at that level go to the option the pipes level ranks first, then to the
    earlier option."""

    options: tuple["Demand", ...]
    pick: str = "fastest"

    def __post_init__(self):
        if not self.options:
            raise ValueError("a choice needs at least one option")
        if self.pick not in PICKS:
            raise ValueError(f"pick must be one of {PICKS}, got {self.pick!r}")


@dataclass(frozen=True, eq=False)  # identity hash: the engine memoizes its pick per object
class KernelCandidates:
    """A kernel library's candidate launches for one problem, as numpy arrays with one entry per
    candidate (the GEMM tile × split-K search), so the engine scores them all with one formula.
    `work` holds arrays of work per resource; the launch arrays give each candidate's CTAs,
    threads, registers, shared memory and bytes in flight; `valid` masks the candidates that
    cannot run; `overlap` is shared by all; `demand_at(i)` builds the chosen one's Demand.
    The engine keeps the fastest valid candidate (cuBLAS's heuristic, idealized)."""

    work: Mapping[str, Any]
    ctas: Any
    threads_per_cta: Any
    registers_per_thread: Any
    smem_per_cta_bytes: Any
    bytes_in_flight_per_cta: Any
    kernels: Any
    valid: Any
    demand_at: Callable[[int], "Demand"]
    overlap: Overlap | None = None
    what: str = "kernel"  # names the problem in the error when no candidate can run
    # per candidate, as Demand.serial_work (arrays, a subset of `work`) and serial_round_trips
    serial_work: Mapping[str, Any] = field(default_factory=dict)
    serial_round_trips: Any = 0.0


def add_work(*works: Mapping[str, float]) -> dict[str, float]:
    """Sum work dictionaries resource by resource."""
    out: dict[str, float] = {}
    for w in works:
        for r, x in w.items():
            out[r] = out.get(r, 0.0) + x
    return out


def sequence_demand(parts, launch_from: int = -1, flop: float | None = None,
                    kernels: int | None = None, details: Mapping | None = None) -> "Demand":
    """Kernels run back to back as one op's demand: their work, bytes and launches summed, the
    launch shape of part `launch_from` (the last by default), `flop` the parts' sum unless given
    (an op whose extra kernels do no useful FLOP), `kernels` the parts' sum unless given."""
    parts = tuple(parts)
    return Demand(work=add_work(*(p.work for p in parts)), launch=parts[launch_from].launch,
                  flop=sum(p.flop for p in parts) if flop is None else flop,
                  hbm_bytes=sum(p.hbm_bytes for p in parts),
                  kernels=sum(p.kernels for p in parts) if kernels is None else kernels,
                  sequence=parts, details=dict(details or {}))
