"""Memory-streaming kernels: elementwise, norms, softmax, copies.

They move bytes HBM → registers → HBM with a little arithmetic per element. The demand is the
bytes (every byte also crosses L2), the per-element instruction mix on its pipes, and issue slots
for loads/stores (16-byte vectors, as PyTorch's vectorized_elementwise_kernel and quack's kernels
use) plus that mix. Row-wise kernels (norm, softmax) reduce across a row with warp shuffles.
"""
from __future__ import annotations

import math
from dataclasses import replace

from perfmodel.demand import (DEFAULT_BYTES_IN_FLIGHT_PER_THREAD, Demand, LaunchShape, add_work,
                              sequence_demand)
from perfmodel.units import bytes_per_element
from perfmodel.ops.base import Op, Param, byte_count, positive

VECTOR_BYTES = 16          # one LDG.128/STG.128 per thread per access
THREADS_PER_CTA = 256
VECTORS_PER_THREAD = 4     # unrolled vectors per thread (PyTorch elementwise unroll of 4)
INDEX_INSTR_PER_VECTOR = 2  # address/bounds arithmetic per vector access (IMAD + ISETP)


def stream_demand(elements: float, read_bytes: float, write_bytes: float,
                  per_element: dict[str, float], element_bytes: float, flop: float,
                  ctas: int | None = None, threads: int = THREADS_PER_CTA,
                  details: dict | None = None, vector_bytes: float = VECTOR_BYTES) -> Demand:
    """A grid-wide streaming kernel over `elements` with the given per-element pipe work, its
    loads and stores `vector_bytes` wide (16: LDG.128; a kernel of scalar loads issues more)."""
    elems_per_vector = max(1.0, VECTOR_BYTES / element_bytes)
    vectors = (read_bytes + write_bytes) / vector_bytes
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


# ---- row kernels as the libraries launch them (the `implementation` of norm and softmax) ------
#
# "fused" is a bandwidth-tuned row kernel (cuDNN's norm graphs, quack, CUTLASS's CuTe DSL
# examples, Transformer Engine): small CTAs, many resident, the row streamed at HBM speed (the
# model above). "eager" is PyTorch ATen's CUDA kernel and "triton" Liger-Kernel's (0.8.0); their
# launch shapes below come from the sources named at each constant. A one-row-per-CTA kernel
# that is not persistent waits for its row before it can reduce: its reductions and stores
# follow the load serially and the next CTA only starts when this one retires, so each CTA round
# (and each row a looping CTA takes) exposes one DRAM round trip beyond Little's law on its
# bytes in flight (`Demand.cta_dram_round_trips`).
IMPLEMENTATIONS = ("fused", "eager", "triton")
IMPLEMENTATION_DOC = ("fused: a bandwidth-tuned row kernel (cuDNN, quack, CUTLASS, Transformer "
                      "Engine); eager: PyTorch ATen's CUDA kernels; triton: Liger-Kernel's")
ROW_ROUND_TRIPS = 1.0
# Liger-Kernel ops/utils.py calculate_settings: BLOCK_SIZE = next_power_of_2(cols), at most
# MAX_FUSED_SIZE = 65536; num_warps 4, 8 from 2048, 16 from 8192, 32 from 32768
TRITON_MAX_BLOCK = 65536
# Registers of a Triton row kernel: a base for addresses, masks and loop state (the CUDA compiler's
# ~32 of a streaming kernel, NORM_BWD_BASE_REGISTERS) plus one FP32 register per element per row
# tensor the thread holds live (Triton keeps the whole BLOCK_SIZE row in registers)
TRITON_BASE_REGISTERS = 32
# ATen (aten/src/ATen/native/cuda/SoftMax.cu): max_threads 1024; the persistent warp softmax
# (dispatch_softmax_forward/backward, one warp per row, the row in registers) for
# dim_size <= 1024 and dim_size * sizeof(scalar_t) <= 4096; above, one CTA per row
# (cunn_SoftMaxForward[Smem], cunn_SoftMaxBackward), vectors of ILP = 16 B / sizeof(scalar_t)
ATEN_MAX_THREADS = 1024
ATEN_PERSISTENT_MAX_COLS = 1024
ATEN_PERSISTENT_MAX_ROW_BYTES = 4096
# cunn_SoftMaxForwardSmem caches the row in shared memory when it fits in sharedMemPerBlock (the
# 48 KiB a kernel gets without opting in) beside the warp-sum buffer; else cunn_SoftMaxForward
# reads the row three times (max, sum, write; the re-reads hit L2)
ATEN_SMEM_PER_BLOCK = 48 * 1024
# Registers of ATen's block softmax (assumed, from its code: the ILP = 8 FP32 values of a vector,
# the vector itself, two pointers, the running max/sum and loop state exceed 32; no
# __launch_bounds__ caps it below 64): a 1024-thread CTA is then alone on its SM
ATEN_SOFTMAX_REGISTERS = 40
# ATen layer_norm_kernel.cu: vectorized_layer_norm_kernel (and, since PyTorch 2.8, the RMSNorm
# of _fused_rms_norm through the same template) runs one row per CTA of num_threads() = 4 warps
# (ATen/native/cuda/thread_constants.h: C10_WARP_SIZE * 4), loading vec_size = 4 elements per
# load when cols % 4 == 0; its Welford loop consumes each load before the next (one vector per
# thread in flight), and the second pass re-reads the row (L2) with γ and β to write y.
# layer_norm_grad_input_kernel_vectorized (dx) is laid out the same.
ATEN_NORM_THREADS = 128
ATEN_NORM_VEC = 4
# Registers per thread and the loads in flight, read from the SASS of torch 2.10.0+cu128's
# libtorch_cuda.so for sm_100 (cuobjdump -res-usage / -sass, CUDA 13 cuobjdump and nvdisasm;
# BF16 instances, layer_norm_kernel.cu): vectorized_layer_norm_kernel 40 registers for LayerNorm,
# 32 for RMSNorm (template flag rms_norm); layer_norm_grad_input_kernel_vectorized 32 for both;
# the non-vectorized RowwiseMomentsCUDAKernel 40 and LayerNormForwardCUDAKernel 32. A 40-register
# 128-thread CTA leaves 12 resident per SM, not the 16 a 32-register one gets. The SASS also shows
# the loads in flight the model uses: RMSNorm's Σx² loop unrolled by 4 (four LDG.64 issued
# together), LayerNorm's Welford loop one LDG.64 at a time (each consumed by four Welford
# updates, with their MUFU.RCP, before the next load), the dx kernel's x, dy and γ one vector each.
ATEN_NORM_FWD_REGISTERS = {"layernorm": 40, "rmsnorm": 32}
ATEN_NORM_DX_REGISTERS = 32
ATEN_MOMENTS_REGISTERS = 40
ATEN_NORM_FWD_SCALAR_REGISTERS = 32
# Loads in flight per thread of the forward's statistics loop (the SASS above): 4 for RMSNorm,
# 1 for LayerNorm
ATEN_RMS_UNROLL = 4
# Welford's online update per element (cuWelfordOnlineSum): delta, count + 1, its reciprocal
# (1/count on the XU), the mean and the M2 FMAs
WELFORD_FMA_PER_ELEMENT = 4.0
# dγ (dβ): GammaBetaBackwardCUDAKernelTemplate<T, T_ACC, block_dim_x, block_dim_y,
# rows_per_block_y, check_x, check_y, rms_norm> (PyTorch >= 2.7's rewrite of the GammaBeta
# backward; the launch rule below is LaunchGammaBetaBackwardCUDAKernel's as recalled, not read
# from the .cu here: the five shapes it names are the ones torch 2.10's sm_100 binary
# instantiates, and their registers and loads are read from its SASS). block_dim_x = 32
# columns per CTA, each thread one column; the block's block_dim_y thread rows walk the rows in
# steps of rows_per_block_y (8 rows per thread per step: a dy and an x load per row, the step's
# mean and rstd shuffled across the warp). By rows: (block_dim_y, rows_per_block_y) = (1, 8)
# under 64, (8, 64) under 128, (16, 128) under 256, else (32, 256): ceil(cols / 32) CTAs, each
# over all rows.
ATEN_GB_COLUMNS = 32
ATEN_GB_ROWS_PER_THREAD_STEP = 8
ATEN_GB_TILES = ((64, 1), (128, 8), (256, 16))  # (rows below, block_dim_y); else 32
ATEN_GB_MAX_BLOCK_Y = 32
# Registers of each shape by block_dim_y (torch 2.10 sm_100 SASS, BF16, aligned grid): a
# 1024-thread CTA is capped at 64 and spills (56-64 bytes of stack); it is alone on its SM.
ATEN_GB_REGISTERS = {"layernorm": {1: 127, 8: 103, 16: 103, 32: 64},
                     "rmsnorm": {1: 127, 8: 80, 16: 101, 32: 64}}
# When the grid is not aligned (rows % rows_per_block_y or cols % 32 non-zero: the check_x /
# check_y instances) the loop is guarded and compiled to fewer registers: 32 for the
# (8, 64), (16, 128) and (32, 256) shapes, 48 for (1, 8); a (32, 256) CTA then leaves 2 per SM.
# Its loads: the RMSNorm instance was read to take the same 2 round trips per step as the
# aligned one (7 loads and rstd, then the other 9 once the first values are consumed); the
# others are assumed to keep their aligned round trips.
ATEN_GB_CHECKED_REGISTERS = {1: 48, 8: 32, 16: 32, 32: 32}
# Dependent memory round trips per step: the shapes with registers to spare issue a step's 16
# loads together (one round trip); the 64-register (32, 256) shape reuses the registers and
# issues them in dependent groups, each waiting for the previous group's values: 8, 4 and 4
# loads for LayerNorm (dγ and dβ; three round trips per step), 8 and 8 for RMSNorm (two).
ATEN_GB_ROUND_TRIPS = {"layernorm": 3, "rmsnorm": 2}
# M > 65536 rows and cols / 32 < sm_count / 2 (many rows, few columns; the same recalled launch
# rule): the rows are split over min(ceil(M / 32), 32768 / ceil(cols / 32)) CTAs of one warp per
# column strip (the (1, 32) shape, 255 registers and spills in the SASS), each writing FP32
# partials that `.sum(0)` reduces (one reduction kernel per weight gradient). Its loads are
# assumed to take one round trip per 32-row step (not read).
ATEN_GB_SPLIT_MIN_ROWS = 64 * 1024
ATEN_GB_SPLIT_ROWS_PER_CTA = 32
ATEN_GB_SPLIT_MAX_CTAS = 64 * 1024 // 2
ATEN_GB_SPLIT_REGISTERS = 255


def triton_row_settings(cols: int) -> tuple[int, int]:
    """Liger's (BLOCK_SIZE, threads) for a row of `cols` (calculate_settings)."""
    block = min(TRITON_MAX_BLOCK, 1 << max(0, math.ceil(math.log2(max(cols, 1)))))
    warps = 32 if block >= 32768 else 16 if block >= 8192 else 8 if block >= 2048 else 4
    return block, 32 * warps


def triton_registers(block: int, threads: int, live_tensors: int, hw) -> int:
    """Registers per thread of a Triton row kernel holding `live_tensors` rows in FP32."""
    regs = TRITON_BASE_REGISTERS + math.ceil(block / threads) * live_tensors
    return min(regs, hw.max_registers_per_thread, hw.registers_per_sm // threads // 8 * 8)


def row_kernel(elements: float, read: float, write: float, per_element: dict[str, float],
               element_bytes: float, flop: float, ctas: int, threads: int, registers: int,
               in_flight: float, smem: int = 0, l2_rereads: float = 0.0,
               round_trips: float = ROW_ROUND_TRIPS, vector_bytes: float = VECTOR_BYTES,
               details: dict | None = None) -> Demand:
    """A row kernel of a given launch: its HBM bytes, `l2_rereads` bytes read again from L2 (a
    second pass over rows just read), bytes in flight per CTA and exposed round trips."""
    d = stream_demand(elements, read, write, per_element, element_bytes, flop, ctas=ctas,
                      threads=threads, details=details, vector_bytes=vector_bytes)
    work = dict(d.work)
    if l2_rereads:
        work["l2"] += l2_rereads
        work["issue"] += l2_rereads / vector_bytes / 32.0  # the re-read loads
    return replace(d, work=work, cta_dram_round_trips=round_trips,
                   launch=LaunchShape(ctas=max(1, ctas), threads_per_cta=threads,
                                      registers_per_thread=registers, smem_per_cta_bytes=smem,
                                      bytes_in_flight_per_cta=in_flight))


def sequence(*parts: Demand, details: dict | None = None) -> Demand:
    """Kernels run back to back as one op's demand."""
    return sequence_demand(parts, launch_from=0, kernels=len(parts), details=details)


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
        "implementation": Param("choice", default="fused", choices=IMPLEMENTATIONS,
                                doc=IMPLEMENTATION_DOC),
        "residual": Param("bool", default=False,
                          doc="forward: the residual add fused before the norm (vLLM's "
                              "fused_add_rms_norm): reads x and the residual, writes their sum "
                              "and y"),
    }
    SIZE_PARAMS = ("rows", "cols")
    TENSORS = (("rows", "cols"),)

    def check(self, v):
        if v["residual"] and (v["direction"] != "fwd" or v["implementation"] != "fused"):
            return [("residual", "the fused residual add is a forward of the fused kernel "
                                 "(direction fwd, implementation fused)")]
        return []

    def demand(self, hw):
        b = bytes_per_element(self.dtype)
        n = float(self.rows) * self.cols
        layer = self.kind == "layernorm"
        stats = self.rows * 4.0 * (2 if layer else 1)  # FP32 rstd (and mean) per row
        if self.implementation == "eager":
            return (self._eager_backward(hw, b, n, stats) if self.direction == "bwd"
                    else self._eager_forward(hw, b, n, stats))
        if self.direction == "bwd":
            return self._backward(hw, b, n, stats)
        if self.implementation == "triton":
            return self._triton_forward(hw, b, n, stats)
        read, write = n * b + self.cols * b * (2 if layer else 1), n * b + stats  # x, γ, β; y
        fma = NORM_FMA_PER_ELEMENT[(self.kind, "fwd")]
        if self.residual:
            # fused_add_rms_norm (vLLM csrc/layernorm_kernels.cu; SGLang's sgl-kernel
            # fused_add_rmsnorm; TensorRT-LLM's add + RMSNorm): x + residual is formed in
            # registers, written back as the next residual and normalized, in one kernel
            # instead of an elementwise add and a norm that reads the sum again
            read, write, fma = read + n * b, write + n * b, fma + 1.0
        per_elem = {"fma": fma, "xu": 1.0 / self.cols,
                    "lsu": 2 * 5.0 / max(self.cols, 1)}  # 5-step shuffle tree per row per warp
        return stream_demand(n, read, write, per_elem, b, flop=n * fma, ctas=self.rows,
                             threads=row_threads(self.cols, b))

    def _triton_forward(self, hw, b: float, n: float, stats: float) -> Demand:
        """Liger's forward (ops/layer_norm.py, ops/rms_norm.py): one program per row with the
        whole BLOCK_SIZE row, γ (and β) in registers, loaded at once."""
        layer = self.kind == "layernorm"
        block, threads = triton_row_settings(self.cols)
        passes = math.ceil(self.cols / block)
        weights = self.cols * b * (2 if layer else 1)
        read, write = n * b + weights, n * b + stats
        fma = NORM_FMA_PER_ELEMENT[(self.kind, "fwd")]
        per_elem = {"fma": fma, "xu": 1.0 / self.cols, "lsu": 2 * 5.0 / max(self.cols, 1)}
        regs = triton_registers(block, threads, 3 if layer else 2, hw)
        return row_kernel(n, read, write, per_elem, b, n * fma, self.rows, threads, regs,
                          in_flight=min(self.cols, block) * b + weights / passes,
                          round_trips=ROW_ROUND_TRIPS * passes)

    def _eager_forward(self, hw, b: float, n: float, stats: float) -> Demand:
        """ATen's layer_norm / _fused_rms_norm forward (layer_norm_kernel.cu): the vectorized
        kernel when cols % vec_size == 0 (ATEN_NORM_* above), else RowwiseMomentsCUDAKernel then
        LayerNormForwardCUDAKernel, two kernels each reading x."""
        layer = self.kind == "layernorm"
        weights = self.cols * b * (2 if layer else 1)
        welford = WELFORD_FMA_PER_ELEMENT if layer else 0.0  # RMSNorm: Σx² only
        fma = NORM_FMA_PER_ELEMENT[(self.kind, "fwd")] + welford
        per_elem = {"fma": fma, "xu": (1.0 if layer else 0.0) + 1.0 / self.cols,
                    "lsu": 2 * 5.0 * 3 / max(self.cols, 1)}  # Welford's 3 values per shuffle
        threads = ATEN_NORM_THREADS
        if self.cols % ATEN_NORM_VEC == 0:
            vec = ATEN_NORM_VEC * b
            # pass 2 re-reads the row and γ (β) from L2 for every row
            unroll = 1 if layer else ATEN_RMS_UNROLL
            return row_kernel(n, n * b + weights, n * b + stats, per_elem, b, n * fma, self.rows,
                              threads, ATEN_NORM_FWD_REGISTERS[self.kind],
                              in_flight=threads * vec * unroll,
                              l2_rereads=n * b + self.rows * weights, vector_bytes=vec)
        x_again = n * b > hw.l2_capacity_bytes  # the second kernel's x from HBM or L2
        moments = row_kernel(n, n * b, stats, {"fma": WELFORD_FMA_PER_ELEMENT, "xu": 1.0}, b,
                             n * WELFORD_FMA_PER_ELEMENT, self.rows, 512, ATEN_MOMENTS_REGISTERS,
                             in_flight=512 * b, vector_bytes=b, details={"part": "moments"})
        fwd = row_kernel(n, (n * b if x_again else 0.0) + stats + weights, n * b,
                         {"fma": NORM_FMA_PER_ELEMENT[(self.kind, "fwd")]}, b, 0.0, self.rows,
                         256, ATEN_NORM_FWD_SCALAR_REGISTERS, in_flight=256 * b, vector_bytes=b,
                         l2_rereads=0.0 if x_again else n * b, details={"part": "normalize"})
        return sequence(moments, fwd)

    def _eager_backward(self, hw, b: float, n: float, stats: float) -> Demand:
        """ATen's backward: the dx kernel (a row per CTA, two passes over x and dy), then
        GammaBetaBackwardCUDAKernelTemplate re-reading dy and x for dγ (dβ): from L2 when the
        dx kernel's x, dy and dx fit in it, else from HBM (`_eager_gamma_beta`)."""
        layer = self.kind == "layernorm"
        sums = 2 if layer else 1
        threads, vec = ATEN_NORM_THREADS, ATEN_NORM_VEC * b
        fma = NORM_FMA_PER_ELEMENT[(self.kind, "bwd")]
        per_elem = {"fma": fma, "lsu": 2 * 5.0 * sums / self.cols}
        dx = row_kernel(n, 2 * n * b + stats + self.cols * b, n * b, per_elem, b, n * fma,
                        self.rows, threads, ATEN_NORM_DX_REGISTERS, in_flight=threads * 2 * vec,
                        l2_rereads=2 * n * b + self.rows * self.cols * b, vector_bytes=vec,
                        details={"part": "dx"})
        in_l2 = 3 * n * b <= hw.l2_capacity_bytes
        parts = self._eager_gamma_beta(hw, b, n, stats, in_l2)
        gb = parts[0].details
        return sequence(dx, *parts, details={
            "dgamma_reads_from_l2": in_l2, "gamma_beta_block": gb["gamma_beta_block"],
            "gamma_beta_round_trips": gb["gamma_beta_round_trips"]})

    def _eager_gamma_beta(self, hw, b: float, n: float, stats: float,
                          in_l2: bool) -> tuple[Demand, ...]:
        """GammaBetaBackwardCUDAKernelTemplate's launch (the ATEN_GB_* rule above): each CTA
        walks its 32 columns over its rows in steps of 8 rows per thread; a step's loads take
        ATEN_GB_ROUND_TRIPS dependent round trips in the 1024-thread shape, one in the others
        (Demand.cta_dram_round_trips). Past ATEN_GB_SPLIT_MIN_ROWS rows with few columns the
        rows are split over CTAs writing FP32 partials that `.sum(0)` reduces."""
        layer = self.kind == "layernorm"
        sums = 2 if layer else 1
        strips = math.ceil(self.cols / ATEN_GB_COLUMNS)
        out = self.cols * b * sums
        reads = 2 * n * b  # dy and x again: from L2 when they stayed there
        split = (self.rows > ATEN_GB_SPLIT_MIN_ROWS
                 and self.cols // ATEN_GB_COLUMNS < hw.sm_count // 2)
        if split:
            block_y = 1
            row_ctas = min(math.ceil(self.rows / ATEN_GB_SPLIT_ROWS_PER_CTA),
                           ATEN_GB_SPLIT_MAX_CTAS // strips)
            steps = math.ceil(math.ceil(self.rows / row_ctas) / ATEN_GB_SPLIT_ROWS_PER_CTA)
            regs, trips = ATEN_GB_SPLIT_REGISTERS, steps
            rows_in_flight = ATEN_GB_SPLIT_ROWS_PER_CTA
        else:
            block_y = next((y for below, y in ATEN_GB_TILES if self.rows < below),
                           ATEN_GB_MAX_BLOCK_Y)
            row_ctas = 1
            steps = math.ceil(self.rows / (block_y * ATEN_GB_ROWS_PER_THREAD_STEP))
            aligned = (self.rows % (block_y * ATEN_GB_ROWS_PER_THREAD_STEP) == 0
                       and self.cols % ATEN_GB_COLUMNS == 0)
            regs = (ATEN_GB_REGISTERS[self.kind] if aligned
                    else ATEN_GB_CHECKED_REGISTERS)[block_y]
            trips = steps * (ATEN_GB_ROUND_TRIPS[self.kind]
                             if block_y == ATEN_GB_MAX_BLOCK_Y else 1)
            rows_in_flight = ATEN_GB_ROWS_PER_THREAD_STEP
        threads = ATEN_GB_COLUMNS * block_y
        partials = row_ctas * self.cols * 4.0 * sums if split else 0.0
        # partials [row CTAs, cols] in FP32 stay in L2 between the kernels when they fit (the
        # rule of the fused backward's partial sums)
        spill = 2 * partials > hw.l2_capacity_bytes
        # per element: (x − mean)·rstd·dy accumulate (dγ) and the dy sum (dβ)
        dg = row_kernel(n, (0.0 if in_l2 else reads) + stats, partials or out,
                        {"fma": 2.0 + (sums - 1)}, b, 0.0, strips * row_ctas, threads, regs,
                        in_flight=threads * rows_in_flight * 2 * b,
                        l2_rereads=reads if in_l2 else 0.0, round_trips=trips, vector_bytes=b,
                        details={"part": "dgamma" + (" dbeta" if layer else ""),
                                 "gamma_beta_block": (ATEN_GB_COLUMNS, block_y),
                                 "gamma_beta_round_trips": trips})
        if not split:
            return (dg,)
        if not spill:
            dg = replace(dg, work={**dg.work, "hbm": dg.work["hbm"] - partials},
                         hbm_bytes=dg.hbm_bytes - partials)
        # `.sum(0)` of each partial buffer, writing that gradient
        per = partials / sums
        red = []
        for _ in range(sums):
            r = stream_demand(per / 4.0, per, self.cols * b, {"fma": 1.0}, 4.0, flop=per / 4.0,
                              ctas=math.ceil(self.cols / FINALIZE_COLUMNS_PER_CTA),
                              threads=FINALIZE_THREADS, details={"part": "sum(0)"})
            if not spill:
                r = replace(r, work={**r.work, "hbm": r.work["hbm"] - per},
                            hbm_bytes=r.hbm_bytes - per)
            red.append(r)
        return (dg, *red)

    def _backward(self, hw, b: float, n: float, stats: float) -> Demand:
        sums = 2 if self.kind == "layernorm" else 1  # partial dγ (and dβ) per column
        triton = self.implementation == "triton"
        if triton:  # Liger: grid (sm_count,), calculate_settings' warps, the row in registers
            block, threads = triton_row_settings(self.cols)
            regs = triton_registers(block, threads, 2 + sums, hw)
            ctas = min(self.rows, hw.sm_count)
        else:
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
        # x and dy vectors are issued together: twice a streaming thread's bytes in flight;
        # Liger loads a whole row of each at once and takes its rows one after another, each
        # row's load exposed (a plain `range` loop: no software pipelining of the next row)
        in_flight = (2 * self.cols * b if triton
                     else threads * 2 * DEFAULT_BYTES_IN_FLIGHT_PER_THREAD)
        dx = replace(dx, work=dx_work, hbm_bytes=read + n * b,
                     cta_dram_round_trips=(ROW_ROUND_TRIPS * math.ceil(self.rows / ctas)
                                           if triton else 0.0),
                     launch=LaunchShape(ctas=ctas, threads_per_cta=threads,
                                        registers_per_thread=regs,
                                        bytes_in_flight_per_cta=in_flight))

        out = self.cols * b * sums  # dγ (dβ) in the weight dtype
        fin_ctas = math.ceil(self.cols * sums / FINALIZE_COLUMNS_PER_CTA)
        fin = stream_demand(partials / 4.0, partials, out, {"fma": 1.0}, 4.0,
                            flop=partials / 4.0, ctas=fin_ctas, threads=FINALIZE_THREADS,
                            details={"part": "dgamma" + (" dbeta" if sums == 2 else "")})
        fin_work = dict(fin.work)
        if not spill:
            fin_work["hbm"] -= partials
        # each thread walks one column: scalar FP32 loads, VECTORS_PER_THREAD of them in flight
        # Liger finishes with eager `_DW.sum(dim=0).to(W.dtype)` (and _DB's): a sum and a cast
        # kernel per partial buffer
        fin = replace(fin, work=fin_work, hbm_bytes=out, kernels=2 * sums if triton else 1,
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
        "implementation": Param("choice", default="fused", choices=IMPLEMENTATIONS,
                                doc=IMPLEMENTATION_DOC),
    }
    SIZE_PARAMS = ("rows", "cols")
    TENSORS = (("rows", "cols"),)

    def demand(self, hw):
        b = bytes_per_element(self.dtype)
        n = float(self.rows) * self.cols
        if self.implementation == "triton":
            return self._triton(hw, b, n)
        if self.implementation == "eager" and not (
                self.cols <= ATEN_PERSISTENT_MAX_COLS
                and self.cols * b <= ATEN_PERSISTENT_MAX_ROW_BYTES):
            return self._eager(hw, b, n)
        # (ATen's persistent warp softmax for short rows streams like the fused kernels)
        if self.direction == "bwd":
            fma = SOFTMAX_BWD_FMA_PER_ELEMENT
            per_elem = {"fma": fma, "lsu": 2 * 5.0 / max(self.cols, 1)}
            return stream_demand(n, 2 * n * b, n * b, per_elem, b, flop=fma * n,
                                 ctas=self.rows, threads=row_threads(self.cols, b))
        # max (1), subtract-and-scale FFMA (1), sum (1), normalize (1); one ex2 on the XU
        per_elem = {"fma": 4.0, "xu": 1.0, "lsu": 4 * 5.0 / max(self.cols, 1)}
        return stream_demand(n, n * b, n * b, per_elem, b, flop=5 * n, ctas=self.rows,
                             threads=row_threads(self.cols, b))


    def _triton(self, hw, b: float, n: float) -> Demand:
        """Liger's softmax (ops/softmax.py): one program per row; the single-block kernels hold
        the BLOCK_SIZE row in registers (backward: dy and y), loaded at once; rows longer than
        the block loop over it twice (the multi-block kernels: online max/sum, then write)."""
        block, threads = triton_row_settings(self.cols)
        passes = math.ceil(self.cols / block)
        reads = 2.0 if passes > 1 else 1.0  # the multi-block kernels read the row twice
        if self.direction == "bwd":
            fma = SOFTMAX_BWD_FMA_PER_ELEMENT
            per_elem = {"fma": fma, "lsu": 2 * 5.0 / max(self.cols, 1)}
            regs = triton_registers(block, threads, 2, hw)
            return row_kernel(n, 2 * n * b * reads, n * b, per_elem, b, fma * n, self.rows,
                              threads, regs, in_flight=2 * min(self.cols, block) * b,
                              round_trips=ROW_ROUND_TRIPS * passes * reads)
        per_elem = {"fma": 4.0, "xu": reads, "lsu": 4 * 5.0 / max(self.cols, 1)}
        regs = triton_registers(block, threads, 2, hw)
        return row_kernel(n, n * b * reads, n * b, per_elem, b, 5 * n, self.rows, threads, regs,
                          in_flight=min(self.cols, block) * b,
                          round_trips=ROW_ROUND_TRIPS * passes * reads)

    def _eager(self, hw, b: float, n: float) -> Demand:
        """ATen's block softmax for rows above the persistent kernel's limit (SoftMax.cu).
        Forward: SoftMaxForward_getBlockSize, min(cols, 1024) threads rounded up to a warp; the
        row cached in shared memory when it fits (cunn_SoftMaxForwardSmem: one HBM read, two
        block reductions, exp again in the epilogue), else read three times. Backward:
        SoftMax_getBlockSize(ILP, cols), the power of two >= min(cols / ILP, 1024) / 2;
        cunn_SoftMaxBackward sums dy·y in one pass and re-reads both (L2) to write dx."""
        ilp = max(1, int(VECTOR_BYTES // b))
        vectors = math.ceil(self.cols / ilp)
        if self.direction == "bwd":
            cap = min(vectors, ATEN_MAX_THREADS) // (2 if ilp > 1 else 1)
            threads = max(32, 1 << max(0, math.ceil(math.log2(max(cap, 1)))))
            fma = SOFTMAX_BWD_FMA_PER_ELEMENT
            per_elem = {"fma": fma, "lsu": 2 * 5.0 / max(self.cols, 1)}
            return row_kernel(n, 2 * n * b, n * b, per_elem, b, fma * n, self.rows, threads, 32,
                              in_flight=min(threads, vectors) * 2 * VECTOR_BYTES,
                              smem=threads // 32 * 4, l2_rereads=2 * n * b)
        threads = min(ATEN_MAX_THREADS, math.ceil(self.cols / 32) * 32)
        reduction = threads // 32 * 4  # FP32 warp sums
        cached = (self.cols * b + reduction < ATEN_SMEM_PER_BLOCK and self.cols % ilp == 0)
        per_elem = {"fma": 4.0, "xu": 2.0, "lsu": 4 * 5.0 / max(self.cols, 1)}
        d = row_kernel(n, n * b, n * b, per_elem, b, 5 * n, self.rows, threads,
                       ATEN_SOFTMAX_REGISTERS, in_flight=min(threads, vectors) * VECTOR_BYTES,
                       smem=(self.cols * b if cached else 0) + reduction,
                       l2_rereads=0.0 if cached else 2 * n * b,
                       details={"row_in_smem": cached})
        if cached:  # the row written to shared memory once and read back twice
            d = replace(d, work=add_work(d.work, {"smem": 3 * n * b}))
        return d


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
