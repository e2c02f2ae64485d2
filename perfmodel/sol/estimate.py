"""The speed of light of an op, a graph or a problem's workload, two ways, on one GPU.

* **SOLAR's convention** (`solar.py`): tensor-core MACs at the dtype's dense tensor peak against
  the graph's input and output bytes at peak HBM bandwidth, the larger of the two; CUDA-core work
  left out. For a problem these are the mapping's MACs and I/O bytes; for an op, its useful
  tensor FLOP / 2 and its operands' bytes; for a graph file, the sums over its ops (a graph does
  not say which tensors stay on chip, so every op's operands count).
* **perfmodel's own**, from `perfmodel.predict` at its two levels:
  - `roofline_time_s`: the fused roofline — every op's compute at the roofline level (tensor
    FLOP at the datasheet peak, CUDA-core pipe work at the pipes' peaks) summed resource by
    resource (the tensor pipe's time over all its dtypes together), against the same I/O bytes
    at peak HBM bandwidth; the largest. The speed of light of one fused kernel doing the whole
    problem, CUDA-core work included: at least SOLAR's, except where SOLAR counts MACs a kernel
    need not do (a causal mask's upper triangle, which perfmodel's attention skips);
  - `unfused_roofline_time_s`: the graph predicted op by op at the roofline level
    (intermediates through HBM);
  - `attainable_time_s`: the graph at the pipes level (occupancy, waves, sustained clocks, L2,
    Little's law, latency and launch floors), op after op on one stream; `bound` is the resource
    that binds the ops holding most of that time.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from perfmodel.errors import InputError
from perfmodel.graph import Node, OpGraph
from perfmodel.hardware import Hardware
from perfmodel.ops import Op
from perfmodel.predict import predict, predict_op
from perfmodel.sol.mapping import Mapped, Part, map_workload
from perfmodel.sol.problems import Workload
from perfmodel.sol.solar import SolarBound, arch_from_hardware, precision_of, solar_bound

FLOOR_BOUNDS = ("latency", "launch")


@dataclass
class SolEstimate:
    name: str
    hardware: Hardware
    solar: SolarBound
    roofline_time_s: float | None = None
    roofline_bound: str | None = None
    unfused_roofline_time_s: float | None = None
    attainable_time_s: float | None = None
    bound: str | None = None
    ops: list[dict[str, Any]] = field(default_factory=list)
    mapping: Mapped | None = None

    @property
    def sol_time_s(self) -> float:
        return self.solar.time_s

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name, "hardware": self.hardware.name,
            "sm_clock_lock_hz": self.hardware.sm_clock_hz,
            "sol_time_s": self.sol_time_s, "roofline_time_s": self.roofline_time_s,
            "attainable_time_s": self.attainable_time_s, "bound": self.bound,
            "roofline_bound": self.roofline_bound,
            "unfused_roofline_time_s": self.unfused_roofline_time_s,
            "solar": self.solar.to_dict(), "ops": self.ops,
        }
        if self.mapping is not None:
            w = self.mapping.workload
            out["workload"] = {"problem": w.problem, "index": w.index, "uuid": w.uuid,
                               "axes": dict(w.axes), "published_sol_s": w.published_sol_s}
            out["mapping"] = {"status": self.mapping.status,
                              "standins": list(self.mapping.standins),
                              "reason": self.mapping.reason, "notes": list(self.mapping.notes)}
        return out


def _graph(name: str, parts: list[Part]) -> OpGraph:
    nodes, seen = [], set()
    for p in parts:
        n, i = p.name, 2
        while n in seen:
            n, i = f"{p.name} #{i}", i + 1
        seen.add(n)
        nodes.append(Node(n, p.op, ()))
    return OpGraph(name, nodes)


def estimate_parts(name: str, parts: list[Part], io_bytes: float, hw: Hardware,
                   mapping: Mapped | None = None) -> SolEstimate:
    """Both speeds of light of a sequence of ops with these I/O bytes (module docstring)."""
    macs: dict[str, float] = {}
    for p in parts:
        if p.macs:
            macs[p.precision] = macs.get(p.precision, 0.0) + p.macs
    bound = solar_bound(macs, io_bytes, arch_from_hardware(hw))
    est = SolEstimate(name, hw, bound, mapping=mapping)
    if not parts:
        return est
    graph = _graph(name, parts)
    roof = predict(graph, hw, "roofline")
    pipes = predict(graph, hw, "pipes")
    fused: dict[str, float] = {}
    for o in roof.ops:
        for r, t in o.estimate.resource_time_s.items():
            if r not in ("hbm", *FLOOR_BOUNDS):
                r = "tensor" if r.startswith("tensor:") else r  # one tensor pipe, all dtypes
                fused[r] = fused.get(r, 0.0) + t
    fused["hbm"] = io_bytes / hw.hbm_peak_bandwidth_bytes_per_s
    est.roofline_bound = max(fused, key=fused.get)
    est.roofline_time_s = fused[est.roofline_bound]
    est.unfused_roofline_time_s = roof.total_time_s
    est.attainable_time_s = pipes.total_time_s
    share: dict[str, float] = {}
    for o in pipes.ops:
        share[o.estimate.bound] = share.get(o.estimate.bound, 0.0) + o.time_s
    est.bound = max(share, key=share.get)
    est.ops = [{"name": o.name, "op": o.op.to_dict(), "attainable_time_s": o.time_s,
                "bound": o.estimate.bound, "roofline_time_s": r.estimate.time_s}
               for o, r in zip(pipes.ops, roof.ops)]
    return est


def op_parts(op: Op, hw: Hardware, name: str | None = None) -> tuple[Part, float]:
    """An op as a part with its SOLAR MACs (useful tensor FLOP / 2), and its operand bytes."""
    e = predict_op(op, hw, "roofline")
    tensor = [r for r in e.resource_time_s if r.startswith("tensor:")]
    macs = e.flop / 2 if tensor else 0.0
    precision = precision_of(tensor[0].split(":", 1)[1]) if tensor else "fp16"
    return Part(name or op.name, op, macs, precision), e.hbm_bytes


def estimate_op(op: Op, hw: Hardware) -> SolEstimate:
    part, io = op_parts(op, hw)
    return estimate_parts(repr(op), [part], io, hw)


def estimate_graph(graph: OpGraph, hw: Hardware) -> SolEstimate:
    parts, io = [], 0.0
    for n in graph.nodes:
        part, b = op_parts(n.op, hw, n.name)
        parts.append(part)
        io += b
    return estimate_parts(graph.name, parts, io, hw)


def estimate_workload(w: Workload, hw: Hardware) -> SolEstimate:
    """A problem's workload: the mapping's graph, MACs and I/O bytes. An unmapped problem gets
    SOLAR's memory bound only (its bytes are known, its MACs are not)."""
    m = map_workload(w)
    if m.status == "none":
        return SolEstimate(w.name, hw, solar_bound({}, m.dram_bytes, arch_from_hardware(hw)),
                           mapping=m)
    try:
        return estimate_parts(w.name, m.parts, m.dram_bytes, hw, m)
    except InputError as e:
        raise InputError([f"{w.name}: {p}" for p in e.problems]) from None
