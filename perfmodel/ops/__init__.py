"""The op vocabulary (SPEC.md "Op vocabulary"): one class per op, CamelCase of the YAML name.

`pm.ops.op(name, **params)` builds any op from its YAML name; `REGISTRY` maps names to classes.
"""
from .attention import Attention
from .base import REGISTRY, Op, Param, op
from .comm import Allgather, Allreduce, Alltoall, ReduceScatter, SendRecv
from .gemm import Gemm
from .moe import Moe
from .quantize import Quantize
from .rng import Rng
from .streaming import Elementwise, Memcpy, Norm, Softmax

__all__ = ["REGISTRY", "Op", "Param", "op", "Gemm", "Attention", "Elementwise", "Norm",
           "Softmax", "Rng", "Quantize", "Moe", "Memcpy", "Allreduce", "Allgather",
           "ReduceScatter", "Alltoall", "SendRecv"]
