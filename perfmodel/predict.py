"""The two entry points: one op on one GPU (`predict_op`), a whole graph scheduled (`predict`)."""
from __future__ import annotations

from perfmodel.engine import LEVELS, Estimate, estimate
from perfmodel.errors import InputError
from perfmodel.graph import OpGraph
from perfmodel.hardware import Hardware, hardware
from perfmodel.ops import Op
from perfmodel.schedule import Prediction, schedule


def predict_op(op: Op, hw: Hardware | str, level: str = "pipes") -> Estimate:
    """Predict one op's time and bound on one GPU."""
    hw = hardware(hw)
    return estimate(op.demand(hw), hw, level)


def predict(graph: OpGraph, hw: Hardware | str | None = None,
            level: str = "pipes") -> Prediction:
    """Predict and schedule a whole graph on one GPU (`hw` defaults to the graph's own)."""
    target = hw if hw is not None else graph.hardware
    if target is None:
        raise InputError(f"graph '{graph.name}': no hardware given and no `hardware:` key")
    if level not in LEVELS:
        raise InputError(f"unknown level '{level}' (expected one of {', '.join(LEVELS)})")
    return schedule(graph, hardware(target), level)
