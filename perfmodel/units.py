"""Unit constants and dtype sizes. SI floats inside; GB = 1e9, GiB = 2**30, always written out."""
from __future__ import annotations

KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
KiB = 2**10
MiB = 2**20
GiB = 2**30

# Bytes per element of each data type. Block-scaled formats count only the element payload here;
# their scale factors are added by `scale_bytes_per_element` (SPEC.md: "Block-scaled formats count
# their scale factors in bytes moved").
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
# elements; MX formats: one UE8M0 scale per 32 elements (OCP MX spec; seed-papers.md §3).
BLOCK_SCALES: dict[str, tuple[int, float]] = {
    "nvfp4": (16, 1.0),
    "mxfp4": (32, 1.0),
    "mxfp8": (32, 1.0),
}

DTYPES = tuple(DTYPE_BYTES)


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
