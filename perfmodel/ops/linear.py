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

`activation_scale` says where a per-tensor FP8 activation scale comes from:
  static   the checkpoint's calibrated input scale (ModelOpt FP8 checkpoints carry `input_scale`;
           what a serving deployment runs): the cast kernel alone;
  dynamic  computed from the activation at run time, when the checkpoint has none: TensorRT-LLM
           FP8QDQLinearMethod then calls `quantize_e4m3_per_tensor`
           (invokeComputeScalesAndQuantizeMatrix: a memset of the scale, the amax kernel
           invokeComputeFP8QuantizeScale over a fixed 1024 x 1024 grid, then the cast
           invokeQuantizeMatrix; ops/quantize.py `tensor_amax_demand`), vLLM `scaled_fp8_quant`
           with no scale (segmented_max_reduction, then the cast). AIConfigurator's TensorRT-LLM
           FP8 GEMM table is this variant: its SDK derives `fp8_static` from the `fp8` table
           minus the separately measured amax ("compute_scale") kernel
           (aiconfigurator_core sdk/perf_database.py `_gemm_key_names`, sdk/common.py
           GEMMQuantMode.fp8_static: "fp8 with static quantization (compute_scale/scale_matrix
           modeled)").
1x128 block FP8, MXFP8 and NVFP4 take their block scales from the activation in the cast kernel
itself either way (NVFP4's global scale is the checkpoint's static `input_scale`).
"""
from __future__ import annotations

import dataclasses

from perfmodel.demand import Demand, KernelCandidates, sequence_demand
from perfmodel.hardware import Hardware
from perfmodel.ops.base import Op, Param, positive
from perfmodel.ops.gemm import Gemm
from perfmodel.ops.gemm_dispatch import DISPATCHES
from perfmodel.ops.quantize import Quantize, tensor_amax_demand
from perfmodel.units import bytes_per_element

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
        "activation_scale": Param("choice", default="static", choices=("static", "dynamic"),
                                  doc="per-tensor fp8: the checkpoint's calibrated input scale, "
                                      "or an amax kernel before the cast computes it (module "
                                      "docstring)"),
        "dispatch": Param("choice", default="best", choices=DISPATCHES,
                          doc="the GEMM's kernel: the best the model offers, or an engine's "
                              "table by M (vllm-0.10.2, vllm-0.24.0: vLLM's per-tensor FP8 "
                              "CUTLASS kernels; gemm `dispatch`)"),
    }
    SIZE_PARAMS = ("m", "n", "k")
    TENSORS = (("m", "k"), ("k", "n"), ("m", "n"))

    def check(self, v):
        if v["fp8_scaling"] == "block" and v["dtype"] != "fp8":
            return [("fp8_scaling", f"block scaling applies to fp8 linears, not {v['dtype']}")]
        if v["activation_scale"] == "dynamic" and (v["dtype"] != "fp8"
                                                   or v["fp8_scaling"] != "tensor"):
            what = "1x128 block fp8" if v["dtype"] == "fp8" else v["dtype"]
            return [("activation_scale", f"a dynamic activation scale applies to per-tensor fp8 "
                                         f"linears; {what} takes its block scales from the "
                                         f"activation in the cast kernel")]
        return []

    @property
    def flop(self) -> float:
        return 2.0 * self.m * self.n * self.k

    def gemm(self) -> Gemm:
        return Gemm(m=self.m, n=self.n, k=self.k, dtype=self.dtype,
                    fp8_scaling=self.fp8_scaling, dispatch=self.dispatch)

    def input_cast(self) -> Quantize | None:
        """The activation's cast kernel (module docstring), None if there is none."""
        if not self.quantize_input or self.dtype not in QUANTIZED:
            return None
        if self.dtype == "fp8":
            block = 128 if self.fp8_scaling == "block" else 0
            return Quantize(rows=self.m, cols=self.k, to="fp8", block=block, amax_pass=False)
        return Quantize(rows=self.m, cols=self.k, to=self.dtype, amax_pass=False)

    def cast_kernels(self, hw: Hardware) -> tuple[Demand, ...]:
        """The kernels before the GEMM: a dynamic per-tensor scale's amax kernel, then the
        cast (module docstring); none for an unquantized or fused-cast linear."""
        cast = self.input_cast()
        if cast is None:
            return ()
        q = cast.demand(hw)
        if not isinstance(q, Demand):
            raise TypeError(f"the {cast.to} cast's demand is a {type(q).__name__}, expected one "
                            f"kernel")
        if self.activation_scale == "dynamic":
            amax = tensor_amax_demand(self.m, self.k, bytes_per_element("bf16"))
            return (amax, q)
        return (q,)

    def demand(self, hw: Hardware) -> Demand | KernelCandidates:
        gemm = self.gemm().demand(hw)
        before = self.cast_kernels(hw)
        if not before:
            return gemm
        label = self.dtype + (" dynamic" if self.activation_scale == "dynamic" else "")
        if isinstance(gemm, KernelCandidates):
            # the cast costs every tile candidate the same, so the engine's pick among the
            # GEMM's candidates stands; the chosen one runs after the cast
            pick = gemm.demand_at
            return dataclasses.replace(gemm, demand_at=lambda i: _after(before, pick(i), label))
        return _after(before, gemm, label)


def _after(before: tuple[Demand, ...], gemm: Demand, label: str) -> Demand:
    """The cast kernel(s), then the GEMM kernel."""
    return sequence_demand((*before, gemm), flop=gemm.flop,
                           details={**gemm.details, "input_cast": label})
