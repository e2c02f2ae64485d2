"""The two entry points: one op on one GPU (`predict_op`), a whole graph scheduled (`predict`)."""
from __future__ import annotations

import dataclasses

from perfmodel import intervals
from perfmodel.engine import LEVELS, Estimate, estimate
from perfmodel.errors import InputError
from perfmodel.graph import OpGraph
from perfmodel.hardware import Hardware, hardware
from perfmodel.ops import Op
from perfmodel.schedule import Prediction, schedule


def predict_op(op: Op, hw: Hardware | str, level: str = "pipes") -> Estimate:
    """Predict one op's time and bound on one GPU; at the pipes level the Estimate carries the
    80 % band of its op class's cross-validated error (`interval_s`, perfmodel.intervals)."""
    hw = hardware(hw)
    est = estimate(op.demand(hw), hw, level)
    band = intervals.band(op, hw) if level == "pipes" else None
    if band is None:
        return est
    return dataclasses.replace(est, interval_s=band.around(est.time_s), interval_basis=band.basis)


def predict(graph: OpGraph, hw: Hardware | str | None = None,
            level: str = "pipes") -> Prediction:
    """Predict and schedule a whole graph on one GPU (`hw` defaults to the graph's own)."""
    target = hw if hw is not None else graph.hardware
    if target is None:
        raise InputError(f"graph '{graph.name}': no hardware given and no `hardware:` key")
    if level not in LEVELS:
        raise InputError(f"unknown level '{level}' (expected one of {', '.join(LEVELS)})")
    return schedule(graph, hardware(target), level)
