"""Memory-streaming kernels: elementwise, norms, softmax, copies.

They move bytes HBM → registers → HBM with a little arithmetic per element. The demand is the
bytes (every byte also crosses L2), the per-element instruction mix on its pipes, and issue slots
for loads/stores (16-byte vectors, as PyTorch's vectorized_elementwise_kernel and quack's kernels
use) plus that mix. Row-wise kernels (norm, softmax) reduce across a row with warp shuffles.
"""
from __future__ import annotations

import math

from perfmodel.demand import Demand, LaunchShape, add_work
from perfmodel.units import bytes_per_element
from perfmodel.ops.base import Op, Param, positive

VECTOR_BYTES = 16          # one LDG.128/STG.128 per thread per access
THREADS_PER_CTA = 256
VECTORS_PER_THREAD = 4     # unrolled vectors per thread (PyTorch elementwise unroll of 4)
INDEX_INSTR_PER_VECTOR = 2  # address/bounds arithmetic per vector access (IMAD + ISETP)


def stream_demand(elements: float, read_bytes: float, write_bytes: float,
                  per_element: dict[str, float], element_bytes: float, flop: float,
                  ctas: int | None = None, threads: int = THREADS_PER_CTA,
                  details: dict | None = None) -> Demand:
    """A grid-wide streaming kernel over `elements` with the given per-element pipe work."""
    elems_per_vector = max(1.0, VECTOR_BYTES / element_bytes)
    vectors = (read_bytes + write_bytes) / VECTOR_BYTES
    alu_ops = vectors * INDEX_INSTR_PER_VECTOR
    work = add_work({r: w * elements for r, w in per_element.items()},
                    {"alu": alu_ops, "lsu": 0.0})
    thread_instr = sum(work.values()) + vectors
    work["issue"] = thread_instr / 32.0
    work["l2"] = read_bytes + write_bytes
    work["hbm"] = read_bytes + write_bytes
    if ctas is None:
        per_cta = threads * VECTORS_PER_THREAD * elems_per_vector
        ctas = max(1, math.ceil(elements / per_cta))
    launch = LaunchShape(ctas=ctas, threads_per_cta=threads, registers_per_thread=32)
    return Demand(work={r: w for r, w in work.items() if w > 0}, launch=launch, flop=flop,
                  hbm_bytes=read_bytes + write_bytes, details=details or {})


def row_threads(cols: int, element_bytes: float) -> int:
    """Threads of a one-row-per-CTA kernel: each thread holds VECTORS_PER_THREAD vectors."""
    warps = math.ceil(cols * element_bytes / VECTOR_BYTES / 32 / VECTORS_PER_THREAD)
    return min(1024, max(32, 32 * warps))


class Elementwise(Op):
    """out = f(in_1..in_k) element by element (activations, residual adds, casts, scales)."""

    name = "elementwise"
    EXAMPLE = dict(elements=1 << 24, dtype="bf16", inputs=2)
    PARAMS = {
        "elements": positive("elements", "elements per tensor"),
        "dtype": Param("dtype", required=True),
        "inputs": Param("int", default=1, lo=0, doc="input tensors read"),
        "outputs": Param("int", default=1, lo=0, doc="output tensors written"),
        "flop_per_element": Param("float", default=1.0, lo=0, unit="FLOP",
                                  doc="FP32 FMA-pipe operations per element"),
        "xu_per_element": Param("float", default=0.0, lo=0, unit="ops",
                                doc="MUFU/conversion operations per element (exp, rsqrt, ...)"),
    }
    SIZE_PARAMS = ("elements",)

    def demand(self, hw):
        b = bytes_per_element(self.dtype)
        n = float(self.elements)
        return stream_demand(n, n * b * self.inputs, n * b * self.outputs,
                             {"fma": self.flop_per_element, "xu": self.xu_per_element}, b,
                             flop=n * self.flop_per_element)


# Per-element FP32 work of row-normalizations (count of FMA-pipe ops per element):
# RMSNorm fwd: x² accumulate (1 FFMA), x·rstd·w (2 FMUL) and the BF16 conversion (1) = 4;
# LayerNorm adds the mean pass and bias: 7. Backward roughly doubles it (recompute + two
# reductions, Megatron/Apex fused_layer_norm_cuda). One rsqrt per row on the XU.
NORM_FMA_PER_ELEMENT = {("rmsnorm", "fwd"): 4.0, ("layernorm", "fwd"): 7.0,
                        ("rmsnorm", "bwd"): 8.0, ("layernorm", "bwd"): 12.0}


class Norm(Op):
    """RMSNorm / LayerNorm over the last dimension, one CTA per row block."""

    name = "norm"
    EXAMPLE = dict(rows=4096, cols=4096, dtype="bf16")
    PARAMS = {
        "rows": positive("rows", "rows (tokens)"),
        "cols": positive("elements", "normalized dimension (hidden)"),
        "dtype": Param("dtype", required=True),
        "kind": Param("choice", default="rmsnorm", choices=("rmsnorm", "layernorm")),
        "direction": Param("choice", default="fwd", choices=("fwd", "bwd")),
    }
    SIZE_PARAMS = ("rows", "cols")

    def demand(self, hw):
        b = bytes_per_element(self.dtype)
        n = float(self.rows) * self.cols
        params = self.cols * b * (2 if self.kind == "layernorm" else 1)
        if self.direction == "fwd":
            read, write = n * b + params, n * b + self.rows * 4.0  # y and rstd (fp32)
        else:  # read x, dy, rstd, weight; write dx and per-CTA partial dweight
            read, write = 2 * n * b + self.rows * 4.0 + params, n * b + params * 4
        fma = NORM_FMA_PER_ELEMENT[(self.kind, self.direction)]
        per_elem = {"fma": fma, "xu": 1.0 / self.cols,
                    "lsu": 2 * 5.0 / max(self.cols, 1)}  # 5-step shuffle tree per row per warp
        return stream_demand(n, read, write, per_elem, b, flop=n * fma, ctas=self.rows,
                             threads=row_threads(self.cols, b))


class Softmax(Op):
    """Row softmax: max, exp(x − max), sum, scale — one read and one write of the matrix."""

    name = "softmax"
    EXAMPLE = dict(rows=4096, cols=4096, dtype="bf16")
    PARAMS = {
        "rows": positive("rows", "rows"),
        "cols": positive("elements", "softmax dimension"),
        "dtype": Param("dtype", required=True),
    }
    SIZE_PARAMS = ("rows", "cols")

    def demand(self, hw):
        b = bytes_per_element(self.dtype)
        n = float(self.rows) * self.cols
        # max (1), subtract-and-scale FFMA (1), sum (1), normalize (1); one ex2 on the XU
        per_elem = {"fma": 4.0, "xu": 1.0, "lsu": 4 * 5.0 / max(self.cols, 1)}
        return stream_demand(n, n * b, n * b, per_elem, b, flop=5 * n, ctas=self.rows,
                             threads=row_threads(self.cols, b))


class Memcpy(Op):
    """cudaMemcpy: device-to-device through HBM (read + write) or host transfers over PCIe."""

    name = "memcpy"
    EXAMPLE = dict(bytes=1e8)
    PARAMS = {
        "bytes": Param("float", required=True, lo=1, unit="bytes", doc="bytes copied"),
        "kind": Param("choice", default="d2d", choices=("d2d", "h2d", "d2h")),
    }
    SIZE_PARAMS = ("bytes",)

    def demand(self, hw):
        if self.kind == "d2d":
            return stream_demand(self.bytes, self.bytes, self.bytes, {}, 1.0, flop=0.0)
        # copy engines: the host link is the bottleneck, HBM sees the bytes once
        work = {"link:pcie": self.bytes, "hbm": self.bytes}
        return Demand(work=work, launch=None, hbm_bytes=self.bytes,
                      link_steps={"pcie": 1})
