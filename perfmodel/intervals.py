"""Prediction intervals: an 80 % band around a predicted time, from the cross-validated residuals
of its op class on its GPU architecture.

`perfmodel calibrate` (perfmodel/validation/calibrate.py) predicts every published kernel row
with constants fitted without that row's source and writes, per op class and architecture, the
10th and 90th percentiles q10, q90 of log(measured / predicted) to perfmodel/accuracy.yaml. A
prediction t of an op of that class on that architecture gets [t·e^q10, t·e^q90]; with fewer
than the file's `min_interval_rows` rows of the class the architecture's band over all classes
is used, then the band over every row; `basis` says which. The band is what the published rows
say the model's error is; an op unlike any of them (a new kind of kernel) may err beyond it.

A GEMM takes the band of the library linears of its dtype first (`band_classes`: linear_bf16,
linear_fp8, linear_fp8_block, linear_nvfp4: AIConfigurator's cuBLAS / TensorRT-LLM GEMMs, 114 to
171 rows an architecture), then the `gemm` class: the gemm op prices a library-grade kernel, and
the `gemm` rows are a handful of user kernels from bug reports (a TileLang matmul 3x slower than
cuBLAS on B200), whose band would say more about those kernels than about the model.

A collective takes the band of the NCCL rows of its kind and message-size band first
(`allreduce 64KiB-4MiB`: AIConfigurator's NCCL 2.29.2 measurements), then its own class.

A graph's band: each op's own, weighted by its time (the errors of one graph's ops taken as fully
correlated, the conservative reading): [T·Σ t_i e^q10_i / Σ t_i, T·Σ t_i e^q90_i / Σ t_i].
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfmodel.units import collective_size_band

ACCURACY_PATH = Path(__file__).resolve().parent / "accuracy.yaml"


@dataclass(frozen=True)
class Band:
    low_factor: float      # e^q10
    high_factor: float     # e^q90
    basis: str             # "attention_fwd@hopper", "hopper" or "all"
    rows: int

    def around(self, time_s: float) -> tuple[float, float]:
        return time_s * self.low_factor, time_s * self.high_factor

    def to_dict(self, time_s: float) -> dict[str, Any]:
        lo, hi = self.around(time_s)
        return {"interval_s": [lo, hi], "interval_basis": self.basis, "interval_rows": self.rows,
                "interval_coverage": 0.8}


@functools.lru_cache(maxsize=1)
def _document() -> dict | None:
    from perfmodel import yamlio
    if not ACCURACY_PATH.is_file():
        return None
    return yamlio.loads(ACCURACY_PATH.read_text(), str(ACCURACY_PATH))


def reload() -> None:
    """Forget the loaded perfmodel/accuracy.yaml (after `perfmodel calibrate` rewrote it)."""
    _document.cache_clear()
    band_of_classes.cache_clear()


def op_class(op) -> str:
    """The validation op class an op belongs to (the `op` column of the measurement CSVs)."""
    name, p = op.name, op.params
    if name == "attention":
        if p.get("seq_q", 2) <= 16:
            return "mla_decode" if p.get("shared_kv") else "attention_decode"
        return {"fwd": "attention_fwd", "bwd": "attention_bwd",
                "fwd+bwd": "attention_fwd_bwd"}[p.get("direction", "fwd")]
    if name == "gemm":
        return "gemm_fp8_blockscaled" if p.get("fp8_scaling") == "block" else "gemm"
    if name == "grouped_gemm":
        return "grouped_gemm_mxfp8" if p.get("dtype") == "mxfp8" else "grouped_gemm"
    if name == "norm":
        kind = "rms_norm" if p.get("kind", "rmsnorm") == "rmsnorm" else "layer_norm"
        return f"{kind}_{p.get('direction', 'fwd')}"
    if name == "softmax":
        return f"softmax_{p.get('direction', 'fwd')}"
    if name == "cross_entropy":
        return "cross_entropy_fwd" if p.get("direction", "fwd") == "fwd" else \
            "cross_entropy_fwd_bwd"
    if name == "quantize":
        return f"quantize_{p.get('format', '')}"
    if name == "allreduce":
        return "all_reduce"
    if name in ("elementwise", "memcpy"):
        return "memory"
    return name


@functools.lru_cache(maxsize=512)
def band_of_classes(classes: tuple[str, ...], architecture: str) -> Band | None:
    """The band of the first of `classes` with rows on `architecture`, else the
    architecture's, else all rows' (None where no accuracy file was written)."""
    doc = _document()
    if doc is None:
        return None
    iv = doc["intervals"]
    candidates = [(f"{c}@{architecture}", iv["by_class"].get(f"{c}@{architecture}"))
                  for c in classes]
    for basis, entry in (*candidates, (architecture, iv["by_architecture"].get(architecture)),
                         ("all", iv.get("all"))):
        if entry:
            return Band(math.exp(entry["log_q10"]), math.exp(entry["log_q90"]), basis,
                        int(entry["n"]))
    return None


# the collectives whose validation classes carry a message-size band (perfmodel.validation.
# measurements: the NCCL rows)
COLLECTIVES = ("allreduce", "allgather", "reduce_scatter", "alltoall")
# the library-linear class of a GEMM's dtype (module docstring)
LINEAR_CLASS = {"bf16": "linear_bf16", "fp16": "linear_bf16", "fp8": "linear_fp8",
                "fp8_e4m3": "linear_fp8", "nvfp4": "linear_nvfp4"}


def band_classes(op) -> tuple[str, ...]:
    """The op classes whose band an op takes, in order (module docstring)."""
    cls = op_class(op)
    if op.name in COLLECTIVES:  # the NCCL rows' class of its size band first
        return (f"{op.name} {collective_size_band(float(op.params['bytes']))}", cls)
    if op.name == "gemm":
        p = op.params
        linear = ("linear_fp8_block" if p.get("fp8_scaling") == "block" and
                  str(p.get("dtype", "")).startswith("fp8") else
                  LINEAR_CLASS.get(str(p.get("dtype", ""))))
        if linear:
            return (linear, cls)
    return (cls,)


def band(op, hw) -> Band | None:
    """The band of `op` on `hw`: of the first of its `band_classes` with rows on the
    architecture, else the architecture's, else all rows' (None where no accuracy file was
    written)."""
    return band_of_classes(band_classes(op), hw.architecture)


def graph_interval(prediction) -> dict[str, Any] | None:
    """The band of a scheduled graph's makespan (module docstring)."""
    total = lo = hi = 0.0
    for o in prediction.ops:
        b = band(o.op, prediction.hardware)
        if b is None:
            return None
        t = o.estimate.time_s
        total, lo, hi = total + t, lo + t * b.low_factor, hi + t * b.high_factor
    if total <= 0:
        return None
    T = prediction.total_time_s
    return {"interval_s": [T * lo / total, T * hi / total],
            "interval_basis": "time-weighted bands of the graph's ops", "interval_coverage": 0.8}
