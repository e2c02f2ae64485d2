"""Contention between kernels that run at the same time on one GPU
(docs/design.md "Overlap and contention").

Each kernel alone has a time T and a busy time t_r on every resource r; its utilization is
u_r = t_r / T. Kernels running together share the resources: when the summed utilization of a
resource exceeds 1, that resource is oversubscribed and every co-running kernel slows by the same
factor,

    slowdown(S) = max(1, max_r Σ_{i∈S} u_{i,r})

(processor sharing of the binding resource). Resources are the engine's (tensor pipe per dtype,
fma, fma_heavy, alu, xu, issue, smem, l2, hbm, links) plus `sm_slots`: the share of each SM's
registers / shared memory / warp slots a kernel's resident CTAs hold, times the share of SMs it
covers. A GEMM that fills every SM's shared memory has sm_slots ≈ 1, so a concurrent kernel
cannot become resident beside it and the two effectively serialize; a small kernel leaves room.
The joint time of kernels that start together is therefore at least the longest one alone and at
most their sum. No interference term is added: none is justified by a measurement yet.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from perfmodel.demand import Demand, is_sm_resource
from perfmodel.engine import Estimate, occupancy, sm_rate_per_s
from perfmodel.hardware import Hardware

SM_SLOTS = "sm_slots"


@dataclass(frozen=True)
class Load:
    """What one kernel asks of the shared GPU while it runs: utilization per resource."""

    time_s: float
    utilization: Mapping[str, float]


def sm_slot_share(demand: Demand, hw: Hardware) -> float:
    """Share of the GPU's CTA slots (registers, shared memory, warps) a kernel's resident CTAs
    hold: per-SM occupancy share × share of SMs covered."""
    launch = demand.launch
    if launch is None:
        return 0.0
    per_sm, _ = occupancy(launch, hw)
    resident = min(launch.ctas, hw.sm_count * per_sm)
    sms = min(hw.sm_count, resident)
    per_sm_resident = resident / max(sms, 1)
    warps = per_sm_resident * launch.warps_per_cta / hw.max_warps_per_sm
    regs = per_sm_resident * launch.warps_per_cta * 32 * launch.registers_per_thread \
        / hw.registers_per_sm
    smem = per_sm_resident * launch.smem_per_cta_bytes / hw.smem_per_sm_bytes
    return min(1.0, max(warps, regs, smem)) * sms / hw.sm_count


def load_of(demand: Demand, estimate: Estimate, hw: Hardware) -> Load:
    """A kernel's average share of every GPU-wide resource while it runs alone: its work over
    the whole GPU's rate, divided by its time. (A 16-CTA kernel keeps 16 SMs' pipes busy: a
    small share of the GPU, however busy those 16 SMs are.)"""
    t = estimate.time_s / demand.repeat
    if t <= 0:
        return Load(0.0, {})
    util = {r: device_busy_s(r, w, hw) / t for r, w in demand.work.items() if w > 0}
    util[SM_SLOTS] = sm_slot_share(demand, hw)
    return Load(estimate.time_s, util)


def device_busy_s(resource: str, work: float, hw: Hardware) -> float:
    """Seconds the whole GPU's capacity of a resource needs for `work`."""
    if is_sm_resource(resource):
        return work / (sm_rate_per_s(resource, hw, sustained=True) * hw.sm_count)
    if resource == "hbm":
        return work / hw.hbm_bandwidth_bytes_per_s
    if resource == "l2":
        return work / hw.l2_bandwidth_bytes_per_s
    return work / hw.link(resource.split(":", 1)[1]).bandwidth_bytes_per_s


def summed_utilization(loads: Iterable[Load], slot_limits: bool = True) -> dict[str, float]:
    """Utilization of each resource summed over kernels running together. `slot_limits=False`
    drops the co-residency limit (kernels sharing SMs as if their warps were one kernel's, e.g.
    RNG warps added to a GEMM kernel)."""
    total: dict[str, float] = {}
    for load in loads:
        for r, u in load.utilization.items():
            if slot_limits or r != SM_SLOTS:
                total[r] = total.get(r, 0.0) + u
    return total


def slowdown(loads: Iterable[Load], slot_limits: bool = True) -> float:
    """Common slowdown of kernels running together: the most oversubscribed resource."""
    return max(1.0, max(summed_utilization(loads, slot_limits).values(), default=0.0))


def saturated_resource(loads: Iterable[Load], slot_limits: bool = True) -> str:
    """The resource whose summed utilization is highest (what binds kernels run together)."""
    total = summed_utilization(loads, slot_limits)
    return max(total, key=total.get) if total else ""


# A kernel has finished when what is left of its stand-alone time is at most this fraction of
# that time: floating-point residue of the steps. Relative, so it holds alike for a microsecond
# kernel and for a kernel of minutes (an absolute bound would be far below one ulp of the latter).
FINISH_TOLERANCE = 1e-12


@dataclass
class Run:
    """Per kernel (index into the loads of `run`): when it started and ended, the seconds it ran
    with no other kernel beside it, and the kernel whose end released it (-1: ready at time 0 or
    never released)."""

    start_s: list[float]
    end_s: list[float]
    exposed_s: list[float]
    released_by: list[int]

    @property
    def makespan_s(self) -> float:
        return max(self.end_s, default=0.0)


def run(loads: Sequence[Load], successors: Sequence[Sequence[int]], waiting: Sequence[int],
        slot_limits: bool = True) -> Run:
    """Fluid simulation of kernels sharing one GPU, advanced from event to event (a kernel
    ending, which may release others). Kernel i is ready once the `waiting[i]` kernels it waits
    for have ended (0: ready at time 0); `successors[i]` lists the kernels waiting for i (one
    entry per dependency counted in `waiting`). Kernels running together all slow by `slowdown`;
    one running alone runs at its stand-alone speed, and that time is its exposed time."""
    n = len(loads)
    waiting = list(waiting)
    out = Run([0.0] * n, [0.0] * n, [0.0] * n, [-1] * n)
    now = 0.0
    left = [load.time_s for load in loads]  # remaining stand-alone seconds
    running = [i for i in range(n) if waiting[i] == 0]
    while running:
        s = slowdown((loads[i] for i in running), slot_limits) if len(running) > 1 else 1.0
        step = min(left[i] for i in running) * s
        if len(running) == 1:
            out.exposed_s[running[0]] += step
        now += step
        finished = []
        for i in running:
            left[i] -= step / s
            if left[i] <= FINISH_TOLERANCE * max(loads[i].time_s, 1e-30):
                finished.append(i)
        running = [i for i in running if i not in finished]
        for i in finished:
            out.end_s[i] = now
            for j in successors[i]:
                waiting[j] -= 1
                if waiting[j] == 0:
                    out.released_by[j] = i
                    out.start_s[j] = now
                    running.append(j)
    return out


def joint_time_s(loads: list[Load], slot_limits: bool = True) -> float:
    """Time for kernels that start together to all finish (`run` with no dependencies)."""
    return run(loads, [()] * len(loads), [0] * len(loads), slot_limits).makespan_s
