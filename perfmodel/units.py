"""Unit constants, dtype sizes and the dtype vocabularies. SI floats inside; GB = 1e9,
GiB = 2**30, always written out.

The one source of truth for dtype names:
  DTYPES          storage dtypes (bytes per element in DTYPE_BYTES): what a tensor may hold;
  TENSOR_DTYPES   tensor-core compute dtypes: the rate classes of a hardware spec's
                  `tensor_flop_per_sm_per_clk` (E4M3 and E5M2 share `fp8`, see `tensor_dtype`);
  LINEAR_RECIPES  how a linear layer's training GEMMs run: their dtype, FP8 scaling, and whether
                  quantization kernels feed them (`workloads.recipes.linear_layer`);
  GEMM_DTYPES     the GEMM dtype policies a whole model may run in (`workloads.builder`): the
                  recipes named by their GEMM dtype.
"""
from __future__ import annotations

import math

from dataclasses import dataclass

KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
KiB = 2**10
MiB = 2**20
GiB = 2**30

# Bytes per element of each data type. Block-scaled formats count only the element payload here;
# their scale factors are added by `bytes_per_element`: block-scaled formats count their scale
# factors in the bytes they move (docs/graph-format.md "Data types").
DTYPE_BYTES: dict[str, float] = {
    "fp64": 8.0,
    "fp32": 4.0,
    "tf32": 4.0,
    "fp16": 2.0,
    "bf16": 2.0,
    "fp8": 1.0,
    "fp8_e4m3": 1.0,
    "fp8_e5m2": 1.0,
    "int8": 1.0,
    "mxfp8": 1.0,
    "nvfp4": 0.5,
    "mxfp4": 0.5,
    "int4": 0.5,
}

# Block-scaled formats: (elements per scale, bytes per scale). NVFP4: one E4M3 scale per 16
# elements; MX formats: one UE8M0 scale per 32 elements (OCP MX spec; docs/studies.md §3.1).
BLOCK_SCALES: dict[str, tuple[int, float]] = {
    "nvfp4": (16, 1.0),
    "mxfp4": (32, 1.0),
    "mxfp8": (32, 1.0),
}

DTYPES = tuple(DTYPE_BYTES)

# Tensor-core rate classes a hardware spec lists (fp16, bf16, tf32, int8 on every spec; the rest
# where the architecture has them).
TENSOR_DTYPES = ("fp16", "bf16", "tf32", "fp8", "int8", "mxfp8", "nvfp4", "mxfp4")
# Block-scaled FP8's block (DeepSeek-V3, arXiv:2412.19437 §3.3.2: FP32 scales per 1x128
# activation tile and 128x128 weight block): the K block the partial sums are promoted per
# (ops.gemm), the only block a model file's fp8_weight_block may state (workloads.models)
FP8_BLOCK = 128


@dataclass(frozen=True)
class LinearRecipe:
    """How a linear layer's Fprop/Dgrad/Wgrad GEMMs run in training."""

    gemm_dtype: str
    fp8_scaling: str = "tensor"  # fp8 GEMMs: one scale per tensor, or per 1x128/128x128 block
    quantized: bool = True       # quantization kernels cast the operands on the fly


# Transformer Engine's recipes (TE docs "Low precision training"; workloads/recipes.py):
LINEAR_RECIPES: dict[str, LinearRecipe] = {
    "bf16": LinearRecipe("bf16", quantized=False),
    "fp16": LinearRecipe("fp16", quantized=False),
    "fp8": LinearRecipe("fp8"),                  # E4M3, per-tensor current scaling (amax pass)
    "fp8_block": LinearRecipe("fp8", "block"),   # E4M3, FP32 scales per block (DeepSeek-V3)
    "mxfp8": LinearRecipe("mxfp8"),              # E4M3, UE8M0 scale per 32
    "nvfp4": LinearRecipe("nvfp4"),              # E2M1, E4M3 scale per 16 + FP32 tensor scale
}

# A model's `dtype` policy names one dtype for all its GEMMs, so it is a recipe named by its GEMM
# dtype (fp8_block would also need the block-scaling choice, which a policy does not carry).
GEMM_DTYPES = tuple(name for name, r in LINEAR_RECIPES.items() if name == r.gemm_dtype)


def canonical_dtype(name: str) -> str:
    """`fp8` and `fp8_e4m3` are one format for the tensor cores; keep e5m2 distinct only by name."""
    n = name.lower()
    return "fp8" if n == "fp8_e4m3" else n


def tensor_dtype(name: str) -> str:
    """The tensor-core rate class a dtype runs at (E4M3 and E5M2 share the FP8 rate)."""
    n = canonical_dtype(name)
    return "fp8" if n == "fp8_e5m2" else n


def bytes_per_element(dtype: str) -> float:
    """Payload plus amortized block-scale bytes per element."""
    d = canonical_dtype(dtype)
    size = DTYPE_BYTES[d]
    if d in BLOCK_SCALES:
        block, scale_bytes = BLOCK_SCALES[d]
        size += scale_bytes / block
    return size


# Message-size bands a collective's error is reported and its interval taken in: decode-sized
# (latency-bound), medium, prefill- and training-sized (bandwidth-bound)
COLLECTIVE_SIZE_BANDS = ((64 << 10, "<64KiB"), (4 << 20, "64KiB-4MiB"), (math.inf, ">4MiB"))


def collective_size_band(nbytes: float) -> str:
    """The message-size band of a collective's buffer of `nbytes` per GPU."""
    return next(name for upper, name in COLLECTIVE_SIZE_BANDS if nbytes < upper)
