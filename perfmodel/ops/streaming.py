"""Memory-streaming kernels: elementwise, norms, softmax, copies.

They move bytes HBM → registers → HBM with a little arithmetic per element. The demand is the
bytes (every byte also crosses L2), the per-element instruction mix on its pipes, and issue slots
for loads/stores (16-byte vectors, as PyTorch's vectorized_elementwise_kernel and quack's kernels
use) plus that mix. Row-wise kernels (norm, softmax) reduce across a row with warp shuffles.
"""
from __future__ import annotations

import math
from dataclasses import replace

from perfmodel.demand import DEFAULT_BYTES_IN_FLIGHT_PER_THREAD, Demand, LaunchShape, add_work
from perfmodel.units import bytes_per_element
from perfmodel.ops.base import Op, Param, byte_count, positive

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
# Registers a thread of the backward dx kernel needs besides its row slice (addressing, loop
# state, the two row sums) — the CUDA compiler's base of ~32 for a streaming kernel
NORM_BWD_BASE_REGISTERS = 32
# The finalize kernel reduces the FP32 partials down their rows: each CTA of 256 threads takes
# 32 columns, its 8 warps a slice of the partial rows each, summed through shared memory
FINALIZE_THREADS = 256
FINALIZE_COLUMNS_PER_CTA = 32


class Norm(Op):
    """RMSNorm / LayerNorm over the last dimension.

    Forward: one CTA per row reads x and γ (and β), writes y and the FP32 statistics it saves
    for the backward (rstd; LayerNorm also the mean).

    Backward: two kernels, as Liger-Kernel (0.8.0, ops/rms_norm.py and ops/layer_norm.py) and
    Transformer Engine's normalization kernels run it:
      1. dx: a persistent grid, each CTA looping over its rows, reads x, dy, γ and the saved
         statistics and writes dx; it keeps its row slice of x and dy in registers for the two
         row sums (Σ dy·γ·x̂ and, for LayerNorm, Σ dy·γ) and accumulates dγ (and dβ) over its
         rows in FP32 registers, written once at the end as partials [CTAs × cols] in FP32
         (Liger: `_DW = torch.empty((sm_count, n_cols), dtype=torch.float32)`, grid
         `(sm_count,)`; Transformer Engine sizes its grid to fill the SMs by occupancy, the rule
         used here);
      2. dγ (dβ): a small kernel sums the partials down their rows and writes dγ (dβ) in the
         weight dtype (Liger: `_DW.sum(dim=0).to(W.dtype)`).
    The partials stay in L2 between the two kernels when they fit (the rule of the GEMM's
    split-K partial sums); each kernel pays its own launch and first DRAM round trip."""

    name = "norm"
    EXAMPLE = dict(rows=4096, cols=4096, dtype="bf16")
    PARAMS = {
        "rows": positive("rows", "rows (tokens)"),
        "cols": positive("elements", "normalized dimension (hidden)"),
        "dtype": Param("dtype", required=True),
        "kind": Param("choice", default="rmsnorm", choices=("rmsnorm", "layernorm")),
        "direction": Param("choice", default="fwd", choices=("fwd", "bwd"),
                           doc="bwd: the dx kernel, then the dγ (dβ) reduction kernel"),
    }
    SIZE_PARAMS = ("rows", "cols")
    TENSORS = (("rows", "cols"),)

    def demand(self, hw):
        b = bytes_per_element(self.dtype)
        n = float(self.rows) * self.cols
        layer = self.kind == "layernorm"
        stats = self.rows * 4.0 * (2 if layer else 1)  # FP32 rstd (and mean) per row
        if self.direction == "bwd":
            return self._backward(hw, b, n, stats)
        read, write = n * b + self.cols * b * (2 if layer else 1), n * b + stats  # x, γ, β; y
        fma = NORM_FMA_PER_ELEMENT[(self.kind, "fwd")]
        per_elem = {"fma": fma, "xu": 1.0 / self.cols,
                    "lsu": 2 * 5.0 / max(self.cols, 1)}  # 5-step shuffle tree per row per warp
        return stream_demand(n, read, write, per_elem, b, flop=n * fma, ctas=self.rows,
                             threads=row_threads(self.cols, b))

    def _backward(self, hw, b: float, n: float, stats: float) -> Demand:
        sums = 2 if self.kind == "layernorm" else 1  # partial dγ (and dβ) per column
        threads = row_threads(self.cols, b)
        # registers: the row slice of x and dy (FP32 after conversion) and the FP32 dγ (dβ)
        # accumulators, one of each per element the thread holds, capped so one CTA fits
        per_thread = math.ceil(self.cols / threads)
        regs = min(NORM_BWD_BASE_REGISTERS + per_thread * (2 + sums),
                   hw.max_registers_per_thread,
                   hw.registers_per_sm // threads // 8 * 8)
        ctas = min(self.rows, hw.sm_count * self._resident(hw, threads, regs))
        partials = ctas * self.cols * 4.0 * sums
        spill = 2 * partials > hw.l2_capacity_bytes  # written, then read back by kernel 2

        fma = NORM_FMA_PER_ELEMENT[(self.kind, "bwd")]
        per_elem = {"fma": fma, "xu": 1.0 / self.cols, "lsu": 2 * 5.0 * sums / self.cols}
        read = 2 * n * b + stats + self.cols * b  # x, dy, saved statistics, γ
        dx = stream_demand(n, read, n * b + partials, per_elem, b, flop=n * fma, ctas=ctas,
                           threads=threads, details={"part": "dx"})
        dx_work = dict(dx.work)
        if not spill:
            dx_work["hbm"] -= partials
        # x and dy vectors are issued together: twice a streaming thread's bytes in flight
        dx = replace(dx, work=dx_work, hbm_bytes=read + n * b,
                     launch=LaunchShape(ctas=ctas, threads_per_cta=threads,
                                        registers_per_thread=regs,
                                        bytes_in_flight_per_cta=threads * 2
                                        * DEFAULT_BYTES_IN_FLIGHT_PER_THREAD))

        out = self.cols * b * sums  # dγ (dβ) in the weight dtype
        fin_ctas = math.ceil(self.cols * sums / FINALIZE_COLUMNS_PER_CTA)
        fin = stream_demand(partials / 4.0, partials, out, {"fma": 1.0}, 4.0,
                            flop=partials / 4.0, ctas=fin_ctas, threads=FINALIZE_THREADS,
                            details={"part": "dgamma" + (" dbeta" if sums == 2 else "")})
        fin_work = dict(fin.work)
        if not spill:
            fin_work["hbm"] -= partials
        # each thread walks one column: scalar FP32 loads, VECTORS_PER_THREAD of them in flight
        fin = replace(fin, work=fin_work, hbm_bytes=out,
                      launch=LaunchShape(ctas=fin_ctas, threads_per_cta=FINALIZE_THREADS,
                                         bytes_in_flight_per_cta=FINALIZE_THREADS * 4.0
                                         * VECTORS_PER_THREAD))
        return Demand(work=add_work(dx.work, fin.work), launch=dx.launch,
                      flop=dx.flop + fin.flop, hbm_bytes=dx.hbm_bytes + fin.hbm_bytes,
                      kernels=2, sequence=(dx, fin),
                      details={"dx_ctas": ctas, "partials_bytes": partials,
                               "partials_in_l2": not spill})

    @staticmethod
    def _resident(hw, threads: int, regs: int) -> int:
        """CTAs of the dx kernel resident per SM (the CUDA occupancy calculator's warp, CTA and
        register limits, registers in 256-register warp units), which sizes its grid."""
        warps = math.ceil(threads / 32)
        per_warp = math.ceil(regs * 32 / 256) * 256
        return max(1, min(hw.max_ctas_per_sm, hw.max_warps_per_sm // warps,
                          hw.registers_per_sm // (per_warp * warps)))


# Softmax backward, dx = y ⊙ (dy − Σ_row dy⊙y) (the Jacobian-vector product of softmax; PyTorch
# aten/src/ATen/native/cuda/SoftMax.cu softmax_backward, Liger-Kernel src/liger_kernel/ops/
# softmax.py): per element the dy·y product-accumulate (1 FFMA), the subtraction (1) and the
# multiply by y (1) on the FMA pipe, no exponential; one row reduction (a 5-step shuffle tree).
SOFTMAX_BWD_FMA_PER_ELEMENT = 3.0


class Softmax(Op):
    """Row softmax: max, exp(x − max), sum, scale — one read and one write of the matrix.
    Backward reads y and dy and writes dx: two reads and one write."""

    name = "softmax"
    EXAMPLE = dict(rows=4096, cols=4096, dtype="bf16")
    PARAMS = {
        "rows": positive("rows", "rows"),
        "cols": positive("elements", "softmax dimension"),
        "dtype": Param("dtype", required=True),
        "direction": Param("choice", default="fwd", choices=("fwd", "bwd"),
                           doc="bwd: dx from y and dy"),
    }
    SIZE_PARAMS = ("rows", "cols")
    TENSORS = (("rows", "cols"),)

    def demand(self, hw):
        b = bytes_per_element(self.dtype)
        n = float(self.rows) * self.cols
        if self.direction == "bwd":
            fma = SOFTMAX_BWD_FMA_PER_ELEMENT
            per_elem = {"fma": fma, "lsu": 2 * 5.0 / max(self.cols, 1)}
            return stream_demand(n, 2 * n * b, n * b, per_elem, b, flop=fma * n,
                                 ctas=self.rows, threads=row_threads(self.cols, b))
        # max (1), subtract-and-scale FFMA (1), sum (1), normalize (1); one ex2 on the XU
        per_elem = {"fma": 4.0, "xu": 1.0, "lsu": 4 * 5.0 / max(self.cols, 1)}
        return stream_demand(n, n * b, n * b, per_elem, b, flop=5 * n, ctas=self.rows,
                             threads=row_threads(self.cols, b))


class Memcpy(Op):
    """cudaMemcpy: device-to-device through HBM (read + write) or host transfers over PCIe."""

    name = "memcpy"
    EXAMPLE = dict(bytes=1e8)
    PARAMS = {
        "bytes": byte_count("bytes copied"),
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
