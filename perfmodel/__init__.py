"""perfmodel: analytical performance model for AI workloads on NVIDIA Hopper and Blackwell GPUs.

    import perfmodel as pm
    hw = pm.hardware("H100-SXM")
    est = pm.predict_op(pm.ops.Gemm(m=8192, n=8192, k=8192, dtype="bf16"), hw)
    est.time_s, est.bound, est.resource_time_s
"""
from __future__ import annotations

from . import ops
from .demand import Demand, LaunchShape
from .engine import LEVELS, Estimate, estimate
from .errors import InputError
from .builder import Workload, build_graph
from .graph import OpGraph, load_graph, parse_graph
from .hardware import Hardware, hardware, list_hardware, load_spec
from .models import ModelSpec, list_models, load_model
from .schedule import Prediction

__version__ = "0.1.0"


def predict_op(op: "ops.Op", hw: "Hardware | str", level: str = "pipes") -> Estimate:
    """Predict one op's time and bound on one GPU."""
    hw = hardware(hw)
    return estimate(op.demand(hw), hw, level)


def predict(graph: OpGraph, hw: "Hardware | str | None" = None,
            level: str = "pipes") -> Prediction:
    """Predict and schedule a whole graph on one GPU (`hw` defaults to the graph's own)."""
    target = hw if hw is not None else graph.hardware
    if target is None:
        raise InputError(f"graph '{graph.name}': no hardware given and no `hardware:` key")
    if level not in LEVELS:
        raise InputError(f"unknown level '{level}' (expected one of {', '.join(LEVELS)})")
    from .schedule import schedule
    return schedule(graph, hardware(target), level)


__all__ = ["predict", "OpGraph", "load_graph", "parse_graph", "build_graph", "Workload",
           "ModelSpec", "load_model", "list_models", "Prediction", "ops", "Demand", "LaunchShape", "Estimate", "estimate", "LEVELS", "InputError",
           "Hardware", "hardware", "list_hardware", "load_spec", "predict_op", "__version__"]
