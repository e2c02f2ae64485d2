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
"""
from __future__ import annotations

from perfmodel.demand import add_work
from perfmodel.units import BLOCK_SCALES, DTYPE_BYTES, bytes_per_element
from perfmodel.ops.base import Op, Param, positive
from perfmodel.ops.rng import philox_work
from perfmodel.ops.streaming import stream_demand

DEFAULT_BLOCK = {"fp8": 0, "mxfp8": 32, "nvfp4": 16, "mxfp4": 32}  # 0: one per-tensor scale
RHT_MAC_PER_ELEMENT = 16
SR_BITS_PER_ELEMENT = 8
SR_EMULATION_INSTR = 7  # quack rounding.py: 7-SASS software stochastic rounding on sm_90


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
