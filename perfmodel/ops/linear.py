"""A quantized linear layer as inference engines run it: the activation is quantized, then the
GEMM runs on the quantized operands (docs/graph-format.md "linear").

Serving checkpoints store the weights already quantized, but the activation arrives in BF16 and
each quantized linear casts it before its GEMM, in a kernel of its own:
  fp8 (per tensor)  a cast with the checkpoint's static input scale, no amax pass: TensorRT-LLM
                    FP8QDQLinearMethod (`static_quantize_e4m3_per_tensor`, then
                    `cublas_scaled_mm`), vLLM Fp8LinearMethod (`scaled_fp8_quant` with the
                    static `input_scale`, then `torch._scaled_mm`);
  fp8 block         a 1x128 per-token-group cast whose scale comes from the group itself
                    (TensorRT-LLM FP8BlockScalesLinearMethod `fp8_quantize_1x128`, vLLM
                    `per_token_group_quant_fp8`), then the block-scaled GEMM;
  nvfp4             `fp4_quantize` with the static global scale (the 16-element block scales
                    are computed in the kernel), then the NVFP4 GEMM (TensorRT-LLM
                    NVFP4LinearMethod).
A BF16/FP16 linear is the GEMM alone. Engines fuse some of these casts into the kernel before
(an RMSNorm that writes FP8/FP4); `quantize_input=False` prices such a fused linear.
"""
from __future__ import annotations

import dataclasses

from perfmodel.demand import Demand, KernelCandidates, sequence_demand
from perfmodel.hardware import Hardware
from perfmodel.ops.base import Op, Param, positive
from perfmodel.ops.gemm import Gemm
from perfmodel.ops.quantize import Quantize

QUANTIZED = ("fp8", "nvfp4", "mxfp8")


class Linear(Op):
    name = "linear"
    EXAMPLE = dict(m=256, n=8192, k=8192, dtype="bf16")
    PARAMS = {
        "m": positive("rows", "tokens (rows of the activation)"),
        "n": positive("columns", "output features"),
        "k": positive("elements", "input features (the GEMM's reduction)"),
        "dtype": Param("dtype", required=True, choices=("bf16", "fp16", "fp8", "mxfp8", "nvfp4"),
                       doc="the GEMM's operand type: bf16/fp16 unquantized, else the checkpoint's "
                           "quantization"),
        "fp8_scaling": Param("choice", default="tensor", choices=("tensor", "block"),
                             doc="fp8: one static scale per tensor, or 1x128 activation blocks "
                                 "(DeepSeek-V3)"),
        "quantize_input": Param("bool", default=True,
                                doc="cast the BF16 activation in a kernel of its own (false: "
                                    "fused into the kernel before)"),
    }
    SIZE_PARAMS = ("m", "n", "k")
    TENSORS = (("m", "k"), ("k", "n"), ("m", "n"))

    def check(self, v):
        if v["fp8_scaling"] == "block" and v["dtype"] != "fp8":
            return [("fp8_scaling", f"block scaling applies to fp8 linears, not {v['dtype']}")]
        return []

    @property
    def flop(self) -> float:
        return 2.0 * self.m * self.n * self.k

    def gemm(self) -> Gemm:
        return Gemm(m=self.m, n=self.n, k=self.k, dtype=self.dtype,
                    fp8_scaling=self.fp8_scaling)

    def input_cast(self) -> Quantize | None:
        """The activation's cast kernel (module docstring), None if there is none."""
        if not self.quantize_input or self.dtype not in QUANTIZED:
            return None
        if self.dtype == "fp8":
            block = 128 if self.fp8_scaling == "block" else 0
            return Quantize(rows=self.m, cols=self.k, to="fp8", block=block, amax_pass=False)
        return Quantize(rows=self.m, cols=self.k, to=self.dtype, amax_pass=False)

    def demand(self, hw: Hardware) -> Demand | KernelCandidates:
        gemm = self.gemm().demand(hw)
        cast = self.input_cast()
        if cast is None:
            return gemm
        q = cast.demand(hw)
        if not isinstance(q, Demand):
            raise TypeError(f"the {cast.to} cast's demand is a {type(q).__name__}, expected one "
                            f"kernel")
        if isinstance(gemm, KernelCandidates):
            # the cast costs every tile candidate the same, so the engine's pick among the
            # GEMM's candidates stands; the chosen one runs after the cast
            pick = gemm.demand_at
            return dataclasses.replace(gemm, demand_at=lambda i: _after(q, pick(i), cast.to))
        return _after(q, gemm, cast.to)


def _after(cast: Demand, gemm: Demand, to: str) -> Demand:
    """The cast kernel, then the GEMM kernel."""
    return sequence_demand((cast, gemm), flop=gemm.flop,
                           details={**gemm.details, "input_cast": to})
