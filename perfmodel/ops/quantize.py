"""Quantize a BF16/FP32 tensor to FP8, MXFP8, NVFP4 or MXFP4.

Work, per the NVFP4 recipe (docs/studies.md §3; Transformer Engine cast kernels):
  * optional amax pass over the input for the FP32 tensor scale (an extra full read);
  * per element: |x| max into the block amax, multiply by the block's reciprocal scale, convert
    (packed: 2 elements per conversion instruction);
  * per block: one reciprocal (XU) and the scale's own conversion (E4M3 for NVFP4, UE8M0 for MX);
  * optional 16×16 Random Hadamard Transform: 16 multiply-adds per element;
  * optional stochastic rounding: 8 random bits per element from Philox4x32-7; Blackwell converts
    with `cvt.rs` (one instruction per 4 elements), Hopper emulates it in ~7 instructions per
    element (quack rounding.py);
  * `transpose`: also write the columnwise copy (Wgrad needs K-major operands).

`tensor_amax_demand` is the separate amax-reduction kernel a dynamic per-tensor FP8 cast runs
before its cast kernel in TensorRT-LLM (ops/linear.py `activation_scale="dynamic"`).
"""
from __future__ import annotations

from perfmodel.demand import Demand, add_work
from perfmodel.units import BLOCK_SCALES, DTYPE_BYTES, bytes_per_element
from perfmodel.ops.base import Op, Param, positive
from perfmodel.ops.rng import philox_work
from perfmodel.ops.streaming import row_kernel, stream_demand

DEFAULT_BLOCK = {"fp8": 0, "mxfp8": 32, "nvfp4": 16, "mxfp4": 32}  # 0: one per-tensor scale
RHT_MAC_PER_ELEMENT = 16
SR_BITS_PER_ELEMENT = 8
SR_EMULATION_INSTR = 7  # quack rounding.py: 7-SASS software stochastic rounding on sm_90

# TensorRT-LLM's per-tensor FP8 amax kernel (cpp/tensorrt_llm/common/cudaFp8Utils.cu:
# invokeComputeFP8QuantizeScale, QuantizeMode::PER_TENSOR, reached from
# invokeComputeScalesAndQuantizeMatrix, the thop `quantize_e4m3_per_tensor`). Recalled from the
# TensorRT-LLM sources, not read here (its wheel cannot be downloaded; flashinfer 0.7.4's copy,
# csrc/nv_internal/include/tensorrt_llm/common/cudaFp8Utils.h, ships the declarations of
# invokeComputeFP8QuantizeScale / invokeQuantizeMatrix / invokeComputeScalesAndQuantizeMatrix but
# not their bodies): a cudaMemsetAsync of the 4-byte scale, then a FIXED grid of 1024 CTAs of
# 1024 threads, whatever the tensor's size; each thread keeps a running max of |x| over a
# grid-stride loop of scalar element loads, the CTA reduces it (blockReduceMax: warp shuffles,
# shared memory, __syncthreads) and thread 0 does one atomicMax on the global scale. The cast
# (invokeQuantizeMatrix) then reads the scale and the input again. AIConfigurator measures the
# two kernels on their own (systems/data/<gpu>/quantize/trtllm/1.3.0rc20/computescale_perf and
# scale_matrix_perf): at m = 1 the amax kernel takes 7.2 us on H200 where the cast takes 1.3 us,
# the fixed grid's CTA rounds, not the bytes.
TRTLLM_AMAX_CTAS = 1024
TRTLLM_AMAX_THREADS = 1024
# loads in flight per thread of the max loop: nvcc unrolls a small loop of unknown trip count by
# 4 (the same assumption as streaming.ATEN_RMS_UNROLL; no SASS was read)
AMAX_LOADS_IN_FLIGHT = 4
# blockReduceMax over 1024 threads: 5 shuffle + max steps per warp, then warp 0 reduces the 32
# warp maxima in 5 more (per thread, counted on every thread of the CTA as the SM issues them)
AMAX_REDUCE_STEPS = 10


class Quantize(Op):
    name = "quantize"
    EXAMPLE = dict(rows=4096, cols=4096, to="fp8")
    PARAMS = {
        "rows": positive("rows", "rows"),
        "cols": positive("elements", "columns"),
        "to": Param("choice", required=True, choices=("fp8", "mxfp8", "nvfp4", "mxfp4")),
        "from": Param("dtype", default="bf16", choices=("bf16", "fp16", "fp32")),
        "block": Param("int", default=None, nullable=True, lo=0,
                       doc="elements per scale (default per format: nvfp4 16, mx 32, fp8 tensor)"),
        "scaling": Param("choice", default="1d", choices=("1d", "2d")),
        "rht": Param("bool", default=False, doc="16x16 Random Hadamard Transform first"),
        "stochastic_rounding": Param("bool", default=False),
        "amax_pass": Param("bool", default=None, nullable=True,
                           doc="extra read for the tensor amax (default: true for nvfp4, fp8)"),
        "transpose": Param("bool", default=False, doc="also write the transposed copy"),
    }
    SIZE_PARAMS = ("rows", "cols")
    TENSORS = (("rows", "cols"),)

    def demand(self, hw):
        src = self.params["from"]
        n = float(self.rows) * self.cols
        in_b = bytes_per_element(src)
        block = self.block if self.block is not None else DEFAULT_BLOCK[self.to]
        if self.scaling == "2d" and block:
            block = block * block  # 16x16 (or 32x32) tiles share one scale
        amax = self.amax_pass if self.amax_pass is not None else self.to in ("nvfp4", "fp8")
        payload = n * DTYPE_BYTES[self.to]  # element payload; scales counted separately
        # scale entries: E4M3 (nvfp4) or UE8M0 (MX) bytes; FP32 for fp8 blocks (DeepSeek/TE)
        scale_size = BLOCK_SCALES[self.to][1] if self.to in BLOCK_SCALES else 4.0
        scale_bytes = n / block * scale_size if block else 4.0
        copies = 2 if self.transpose else 1
        read = n * in_b * (2 if amax else 1)
        write = copies * (payload + scale_bytes)
        blocks = n / block if block else 0.0
        per_elem = {"fma": (2.0 if amax else 1.0) + 1.0, "alu": 0.5 * copies}
        extra = {"xu": blocks * copies, "alu": blocks * 4 * copies}
        if self.rht:
            per_elem["fma"] += RHT_MAC_PER_ELEMENT
        if self.stochastic_rounding:
            calls = n * copies * SR_BITS_PER_ELEMENT / 128
            extra = add_work(extra, philox_work(calls, rounds=7))
            if hw.stochastic_rounding:  # cvt.rs takes the random bits
                per_elem["alu"] += 0.25 * copies
            else:
                per_elem["alu"] += SR_EMULATION_INSTR * copies
        d = stream_demand(n, read, write, per_elem, in_b, flop=0.0,
                          details={"block": block, "amax_pass": amax})
        work = add_work(d.work, extra)
        work["issue"] = d.work["issue"] + sum(extra.values()) / 32
        return type(d)(work=work, launch=d.launch, flop=d.flop, hbm_bytes=d.hbm_bytes,
                       details=d.details)


def tensor_amax_demand(rows: int, cols: int, element_bytes: float) -> Demand:
    """TensorRT-LLM's per-tensor amax kernel over a rows x cols tensor (TRTLLM_AMAX_* above):
    one full read in scalar loads, a max per element, the fixed 1024 x 1024 grid. Each CTA
    round on an SM exposes its first load's DRAM round trip before the reduction and the atomic
    can run (`row_kernel`'s round trip per CTA round), so a tiny tensor still pays
    ceil(1024 / SMs / resident CTAs) rounds. The 4-byte cudaMemsetAsync before it is not priced
    as a kernel: at m <= 16 the whole dynamic cast measures ~9 us above BF16 on H200
    (AIConfigurator gemm_perf, n = k = 1024: FP8 13.0 us, BF16 4.1 us), which holds the two
    kernels' launches and the amax rounds but not a third launch (the spec's per-kernel
    launch, 3 us)."""
    n = float(rows) * cols
    read = n * element_bytes
    # per element: the bf16 -> fp32 convert (a shift, ALU) and FMNMX with |x| (ALU), the loop's
    # 64-bit index add and compare (ALU); per thread, the CTA's reduction steps
    threads = TRTLLM_AMAX_CTAS * TRTLLM_AMAX_THREADS
    per_elem = {"alu": 4.0}
    d = row_kernel(n, read, 0.0, per_elem, element_bytes, flop=0.0, ctas=TRTLLM_AMAX_CTAS,
                   threads=TRTLLM_AMAX_THREADS, registers=32,
                   in_flight=TRTLLM_AMAX_THREADS * element_bytes * AMAX_LOADS_IN_FLIGHT,
                   vector_bytes=element_bytes,
                   details={"kernel": "trtllm computeFP8QuantizeScale (per tensor)"})
    work = add_work(d.work, {"alu": threads * AMAX_REDUCE_STEPS * 2.0})
    work["issue"] = d.work["issue"] + threads * AMAX_REDUCE_STEPS * 2.0 / 32
    return Demand(work=work, launch=d.launch, flop=0.0, hbm_bytes=read,
                  cta_dram_round_trips=d.cta_dram_round_trips, details=d.details)
