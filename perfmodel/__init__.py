"""perfmodel: analytical performance model for AI workloads on NVIDIA Hopper and Blackwell GPUs.

    import perfmodel as pm
    hw = pm.hardware("H100-SXM")
    est = pm.predict_op(pm.ops.Gemm(m=8192, n=8192, k=8192, dtype="bf16"), hw)
    est.time_s, est.bound, est.resource_time_s

This module only re-exports the public API; docs/api.md describes it.
"""
from __future__ import annotations

from perfmodel import ops
from perfmodel.demand import Demand, LaunchShape
from perfmodel.engine import LEVELS, Estimate, estimate
from perfmodel.errors import InputError
from perfmodel.graph import OpGraph, load_graph, parse_graph
from perfmodel.hardware import Hardware, hardware, list_hardware, load_spec
from perfmodel.predict import predict, predict_op
from perfmodel.schedule import Prediction
from perfmodel.workloads.builder import Workload, build_graph
from perfmodel.workloads.models import ModelSpec, list_models, load_model

__version__ = "0.1.0"

__all__ = ["predict", "predict_op", "OpGraph", "load_graph", "parse_graph", "build_graph",
           "Workload", "ModelSpec", "load_model", "list_models", "Prediction", "ops", "Demand",
           "LaunchShape", "Estimate", "estimate", "LEVELS", "InputError", "Hardware",
           "hardware", "list_hardware", "load_spec", "__version__"]
