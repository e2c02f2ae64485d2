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
from .hardware import Hardware, hardware, list_hardware, load_spec

__version__ = "0.1.0"


def predict_op(op: "ops.Op", hw: "Hardware | str", level: str = "pipes") -> Estimate:
    """Predict one op's time and bound on one GPU."""
    hw = hardware(hw)
    return estimate(op.demand(hw), hw, level)


__all__ = ["ops", "Demand", "LaunchShape", "Estimate", "estimate", "LEVELS", "InputError",
           "Hardware", "hardware", "list_hardware", "load_spec", "predict_op", "__version__"]
