"""perfmodel: analytical performance model for AI workloads on NVIDIA Hopper and Blackwell GPUs.

    import perfmodel as pm
    hw = pm.hardware("H100-SXM")
    est = pm.predict_op(pm.ops.Gemm(m=8192, n=8192, k=8192, dtype="bf16"), hw)
    est.time_s, est.bound, est.resource_time_s

This module only re-exports the public API; docs/api.md describes it. Each name's module is
imported on first use (perfmodel.lazy), so `import perfmodel` is cheap.
"""
from __future__ import annotations

import sys

from perfmodel.lazy import LazyPackage

__version__ = "0.1.0"

# public name -> the module that defines it (`ops`: the subpackage itself)
EXPORTS = {
    "ops": "perfmodel.ops",
    "Demand": "perfmodel.demand", "LaunchShape": "perfmodel.demand",
    "LEVELS": "perfmodel.engine", "Estimate": "perfmodel.engine", "estimate": "perfmodel.engine",
    "InputError": "perfmodel.errors",
    "OpGraph": "perfmodel.graph", "load_graph": "perfmodel.graph",
    "parse_graph": "perfmodel.graph",
    "Hardware": "perfmodel.hardware", "hardware": "perfmodel.hardware",
    "list_hardware": "perfmodel.hardware", "load_spec": "perfmodel.hardware",
    "predict": "perfmodel.predict", "predict_op": "perfmodel.predict",
    "predict_ops": "perfmodel.predict", "clear_cache": "perfmodel.predict",
    "gemm_batch": "perfmodel.batch",
    "Prediction": "perfmodel.schedule",
    "Workload": "perfmodel.workloads.builder", "build_graph": "perfmodel.workloads.builder",
    "ModelSpec": "perfmodel.workloads.models", "list_models": "perfmodel.workloads.models",
    "load_model": "perfmodel.workloads.models",
}

__all__ = ["predict", "predict_op", "predict_ops", "gemm_batch", "clear_cache", "OpGraph", "load_graph",
           "parse_graph", "build_graph", "Workload", "ModelSpec", "load_model", "list_models",
           "Prediction", "ops", "Demand", "LaunchShape", "Estimate", "estimate", "LEVELS",
           "InputError", "Hardware", "hardware", "list_hardware", "load_spec", "__version__"]

sys.modules[__name__].__class__ = LazyPackage
