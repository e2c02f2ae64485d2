"""Schedule an op graph on one GPU: streams, dependencies, contention, makespan.

An op starts when its dependencies and the previous op on its stream have finished. Ops running
at the same time (on different streams) share the GPU through the contention model of
`perfmodel.contention`: all co-running ops slow by the oversubscription of the most contended
resource. The stepping itself is the contention model's (`contention.run`): it advances from event
to event (an op finishing, which may start others).
Each op gets start/end times, its exposed time (running alone) and hidden time (overlapped), and
whether it lies on the critical path.
"""
from __future__ import annotations

import csv
import io
import json
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from perfmodel import contention

from perfmodel.engine import Estimate, check_estimate, estimate, resolve
from perfmodel.graph import OpGraph, Pipeline
from perfmodel.hardware import Hardware

JSON_SCHEMA_VERSION = 1
# Memoized op predictions, shared by every graph and call (`op_entry`): keyed by the op's
# parameters (Op.cache_key), the Hardware object (identity: a clock-locked or refitted spec is
# another object) and the level, and valid while the module state its demand reads
# (Op.cache_state: fitted constants) is what it was; least recently used entries go first.
CACHE_SIZE = 1 << 14  # entries of a few kB each (Demand, Estimate, Load)


class OpEntry:
    """One op's memoized prediction on one GPU at one level: the Demand that runs (alternatives
    resolved), its Estimate, and, filled on first use, its contention Load and the Estimate with
    its prediction band (perfmodel.predict.predict_op)."""

    __slots__ = ("state", "demand", "estimate", "load", "banded")

    def __init__(self, state: tuple, demand, est: Estimate):
        self.state, self.demand, self.estimate = state, demand, est
        self.load = self.banded = None

    def load_on(self, hw: Hardware) -> contention.Load:
        if self.load is None:
            self.load = contention.load_of(self.demand, self.estimate, hw)
        return self.load


_ENTRIES: OrderedDict = OrderedDict()


def clear_cache() -> None:
    """Forget every memoized op prediction (keys already cover parameters, hardware, level and
    the fitted constants an op declares in `cache_state`; for anything else changed by hand)."""
    _ENTRIES.clear()


def op_entry(op: Any, hw: Hardware, level: str) -> OpEntry:
    """The memoized prediction of `op` on `hw` at `level` (computed on first use), on the GPU
    as the op's kernel sees it (Op.kernel_hardware)."""
    hw = op.kernel_hardware(hw)
    key = (op.cache_key(), hw, level)
    state = op.cache_state()
    hit = _ENTRIES.get(key)
    if hit is not None and hit.state == state:  # an entry of other constants is replaced
        try:
            _ENTRIES.move_to_end(key)
        except KeyError:  # evicted meanwhile by another thread
            pass
        return hit
    raw = op.demand(hw)
    d = resolve(raw, hw, level)
    est = check_estimate(estimate(raw, hw, level, resolved=d), op, hw)  # never NaN or < 0
    hit = _ENTRIES[key] = OpEntry(state, d, est)
    while len(_ENTRIES) > CACHE_SIZE:
        _ENTRIES.popitem(last=False)
    return hit


@dataclass(slots=True)
class ScheduledOp:
    name: str
    op: Any
    stream: str
    estimate: Estimate       # the op alone on the GPU
    start_s: float = 0.0
    end_s: float = 0.0
    exposed_s: float = 0.0   # time it ran with no other op running
    critical: bool = False

    @property
    def time_s(self) -> float:
        """Scheduled duration (stand-alone time stretched by contention, if any)."""
        return self.end_s - self.start_s

    @property
    def hidden_s(self) -> float:
        return self.time_s - self.exposed_s

    def to_dict(self) -> dict[str, Any]:
        e = self.estimate
        return {"name": self.name, "op": self.op.name, "stream": self.stream,
                "time_s": self.time_s, "start_s": self.start_s, "end_s": self.end_s,
                "bound": e.bound, "flop": e.flop, "hbm_bytes": e.hbm_bytes,
                "standalone_time_s": e.time_s, "roofline_time_s": e.roofline_time_s,
                "exposed_s": self.exposed_s, "hidden_s": self.hidden_s,
                "critical": self.critical, "resource_time_s": dict(e.resource_time_s)}


@dataclass
class Prediction:
    """A scheduled graph: per-op results and the makespan (`total_time_s`).

    A pipeline-parallel graph (`pipeline` set) also has the schedule's `microbatch_time_s` (one
    microbatch of the stage's work) and `pipeline_bubble_s`; both are None without a pipeline.
    `meta` is the graph's report settings (`OpGraph.meta`)."""

    graph: str
    hardware: Hardware
    level: str
    ops: list[ScheduledOp]
    total_time_s: float
    meta: dict[str, Any] = field(default_factory=dict)
    pipeline: Pipeline | None = None
    microbatch_time_s: float | None = None
    pipeline_bubble_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        # JSON `meta`: the graph file's meta (settings, then `pipeline`), then the schedule's
        # pipeline results
        meta = dict(self.meta)
        if self.pipeline is not None:
            meta.update(pipeline=self.pipeline.to_dict(),
                        pipeline_bubble_s=self.pipeline_bubble_s,
                        microbatch_time_s=self.microbatch_time_s)
        return {"schema_version": JSON_SCHEMA_VERSION, "graph": self.graph,
                "hardware": self.hardware.name, "level": self.level,
                "total_time_s": self.total_time_s,
                "total_flop": sum(o.estimate.flop for o in self.ops),
                "total_hbm_bytes": sum(o.estimate.hbm_bytes for o in self.ops),
                "meta": meta, "ops": [o.to_dict() for o in self.ops],
                **(self.interval() or {})}

    def interval(self) -> dict[str, Any] | None:
        """The makespan's 80 % band from the ops' own (perfmodel.intervals), pipes level only."""
        if self.level != "pipes":
            return None
        from perfmodel.intervals import graph_interval
        return graph_interval(self)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def to_csv(self) -> str:
        fields = ["name", "op", "stream", "time_s", "start_s", "end_s", "bound", "flop",
                  "hbm_bytes", "standalone_time_s", "roofline_time_s", "exposed_s", "hidden_s",
                  "critical"]
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for o in self.ops:
            w.writerow(o.to_dict())
        return buf.getvalue()

    def totals_by(self, key: str) -> dict[str, float]:
        """Summed scheduled time per op type (`op`) or per bound (`bound`)."""
        out: dict[str, float] = {}
        for o in self.ops:
            k = o.op.name if key == "op" else o.estimate.bound
            out[k] = out.get(k, 0.0) + o.time_s
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _serial(ops: list[ScheduledOp]) -> float:
    """One stream: every op runs alone, back to back, and all lie on the critical path."""
    now = 0.0
    for o in ops:
        o.start_s = now
        now += o.estimate.time_s
        o.end_s = now
        o.exposed_s = o.estimate.time_s
        o.critical = True
    return now


def schedule(graph: OpGraph, hw: Hardware, level: str = "pipes",
             slot_limits: bool = True) -> Prediction:
    """Predict every op and simulate the schedule. `slot_limits=False` lets concurrent kernels
    share SMs without co-residency limits (an upper bound on what overlap can gain)."""
    cache: dict[int, tuple[Estimate, contention.Load | None]] = {}
    concurrent = len({n.stream for n in graph.nodes}) > 1  # else no contention to model
    ops: list[ScheduledOp] = []
    loads: list[contention.Load | None] = []
    for n in graph.nodes:
        key = id(n.op)  # builders reuse one op object for every identical layer
        hit = cache.get(key)
        if hit is None:
            e = op_entry(n.op, hw, level)
            hit = cache[key] = (e.estimate, e.load_on(hw) if concurrent else None)
        ops.append(ScheduledOp(n.name, n.op, n.stream, hit[0]))
        loads.append(hit[1])
    meta = dict(graph.meta)
    pipeline = graph.pipeline
    if pipeline is None:
        total = _simulate(graph, ops, loads, slot_limits)
        _settle_rounding(ops)
        return Prediction(graph.name, hw, level, ops, total, meta)
    # 1F1B pipeline (Narayanan et al. 2021, §2.2): this stage's per-microbatch work runs once
    # per microbatch, plus a bubble of (stages − 1)/virtual_stages microbatch times; the
    # per-step tail (gradient sync, optimizer) runs once. Listed op times are one microbatch's.
    k = pipeline.per_microbatch_ops
    head = OpGraph(graph.name, graph.nodes[:k])
    tail = OpGraph(graph.name, [n._replace(after=tuple(a for a in n.after if a not in head))
                                for n in graph.nodes[k:]])
    mb_time = _simulate(head, ops[:k], loads[:k], slot_limits)
    bubble = mb_time * (pipeline.stages - 1) / pipeline.virtual_stages
    offset = mb_time * pipeline.microbatches + bubble
    tail_time = _simulate(tail, ops[k:], loads[k:], slot_limits) if len(tail) else 0.0
    for o in ops[k:]:
        o.start_s += offset
        o.end_s += offset
    _settle_rounding(ops)
    return Prediction(graph.name, hw, level, ops, offset + tail_time, meta, pipeline,
                      microbatch_time_s=mb_time, pipeline_bubble_s=bubble)


# Relative rounding of event times (each a sum of many op times, in floating point): an op's
# exposed time may exceed its end − start by this much of the times involved without meaning
# anything
ROUNDING = 1e-9


def _settle_rounding(ops: list[ScheduledOp]) -> None:
    """An op is exposed at most for its duration. Where rounding of the event times puts its
    exposed time a hair above end − start (within ROUNDING), it is the duration, so `hidden_s`
    is 0 and never slightly negative (−4e-21 s); a larger excess is left visible."""
    for o in ops:
        d = o.end_s - o.start_s
        if d < o.exposed_s <= d + ROUNDING * max(abs(o.end_s), abs(o.start_s)):
            o.exposed_s = d


def _simulate(graph: OpGraph, ops: list[ScheduledOp], loads: list[contention.Load],
              slot_limits: bool = True) -> float:
    if len({n.stream for n in graph.nodes}) <= 1:
        return _serial(ops)
    index = {o.name: i for i, o in enumerate(ops)}
    n = len(ops)
    preds: list[list[int]] = [[] for _ in range(n)]
    last_on_stream: dict[str, int] = {}
    for i, node in enumerate(graph.nodes):
        preds[i] = [index[d] for d in node.after]
        if node.stream in last_on_stream:
            preds[i].append(last_on_stream[node.stream])
        last_on_stream[node.stream] = i
    succs: list[list[int]] = [[] for _ in range(n)]
    waiting = [len(set(p)) for p in preds]
    for i, p in enumerate(preds):
        for j in set(p):
            succs[j].append(i)
    run = contention.run(loads, succs, waiting, slot_limits)
    for o, start, end, exposed in zip(ops, run.start_s, run.end_s, run.exposed_s):
        o.start_s, o.end_s, o.exposed_s = start, end, exposed
    total = max((o.end_s for o in ops), default=0.0)
    # critical path: from the last op to finish, follow the predecessor that released each op
    # (the one that finished last)
    i = max(range(n), key=lambda k: ops[k].end_s) if n else -1
    while i >= 0:
        ops[i].critical = True
        i = run.released_by[i]
    return total
