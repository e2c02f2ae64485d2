"""The two entry points: one op on one GPU (`predict_op`), a whole graph scheduled (`predict`).

Op predictions are memoized per (op parameters, hardware object, level) and shared with the
scheduler (perfmodel.schedule.op_entry), so a planner's or a sweep's repeated shapes, and a graph's
identical layers, are predicted once; `clear_cache()` forgets them.
"""
from __future__ import annotations

import dataclasses
from typing import Iterable

from perfmodel import intervals
from perfmodel.engine import LEVELS, Estimate
from perfmodel.errors import InputError
from perfmodel.graph import OpGraph
from perfmodel.hardware import Hardware, hardware
from perfmodel.ops import Op
from perfmodel.schedule import Prediction, op_entry, schedule
from perfmodel.schedule import clear_cache as _clear_schedule_cache


def clear_cache() -> None:
    """Forget every memoized op prediction. The keys already follow the op's parameters, the
    hardware object (a clock-locked or refitted spec is another one), the level and the fitted
    constants an op reads (Op.cache_state); call this after changing anything else a prediction
    reads, such as perfmodel/accuracy.yaml (the prediction bands)."""
    _clear_schedule_cache()


def predict_op(op: Op, hw: Hardware | str, level: str = "pipes") -> Estimate:
    """Predict one op's time and bound on one GPU; at the pipes level the Estimate carries the
    80 % band of its op class's cross-validated error (`interval_s`, perfmodel.intervals)."""
    if type(hw) is not Hardware:
        hw = hardware(hw)
    e = op_entry(op, hw, level)
    if e.banded is None:
        est = e.estimate
        band = intervals.band(op, hw) if level == "pipes" else None
        e.banded = est if band is None else dataclasses.replace(
            est, interval_s=band.around(est.time_s), interval_basis=band.basis)
    return e.banded


def predict_ops(ops: Iterable[Op], hw: Hardware | str, level: str = "pipes") -> list[Estimate]:
    """`predict_op` of each op in turn (the hardware resolved once): a list of Estimates in the
    order of `ops`."""
    if type(hw) is not Hardware:
        hw = hardware(hw)
    return [predict_op(o, hw, level) for o in ops]


def predict(graph: OpGraph, hw: Hardware | str | None = None,
            level: str = "pipes") -> Prediction:
    """Predict and schedule a whole graph on one GPU (`hw` defaults to the graph's own)."""
    target = hw if hw is not None else graph.hardware
    if target is None:
        raise InputError(f"graph '{graph.name}': no hardware given and no `hardware:` key")
    if level not in LEVELS:
        raise InputError(f"unknown level '{level}' (expected one of {', '.join(LEVELS)})")
    return schedule(graph, hardware(target), level)
