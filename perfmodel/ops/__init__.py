"""The op vocabulary (docs/graph-format.md "Op vocabulary"): one class per op, CamelCase of the
YAML name.

`pm.ops.op(name, **params)` builds any op from its YAML name; `REGISTRY` maps names to classes.
"""
from perfmodel.ops.attention.op import Attention
from perfmodel.ops.base import REGISTRY, Op, Param, op
from perfmodel.ops.comm import Allgather, Allreduce, Alltoall, ReduceScatter, SendRecv
from perfmodel.ops.conv import Conv
from perfmodel.ops.deepep import DeepEP
from perfmodel.ops.gemm import Gemm
from perfmodel.ops.grouped_gemm import GroupedGemm
from perfmodel.ops.groupnorm import GroupNorm
from perfmodel.ops.indexing import Embedding, Gather, Scatter
from perfmodel.ops.linear import Linear
from perfmodel.ops.losses import CrossEntropy
from perfmodel.ops.moe.op import Moe
from perfmodel.ops.quantize import Quantize
from perfmodel.ops.rng import Rng
from perfmodel.ops.streaming import Elementwise, Memcpy, Norm, Softmax
from perfmodel.ops.topk import TopK

__all__ = ["REGISTRY", "Op", "Param", "op", "Gemm", "Attention", "Elementwise", "Norm",
           "Softmax", "GroupedGemm", "Rng", "Quantize", "Moe", "Memcpy", "Allreduce", "Allgather",
           "ReduceScatter", "Alltoall", "SendRecv", "CrossEntropy",
           "Conv", "DeepEP", "GroupNorm", "Gather", "Scatter", "Embedding", "TopK", "Linear"]
