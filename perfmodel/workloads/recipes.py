"""Low-precision training recipes per linear layer: the GEMMs and quantization kernels of
Fprop, Dgrad and Wgrad, as Transformer Engine runs them (TE docs "Low precision training";
NVFP4 pretraining paper arXiv:2509.25149 §4; DeepSeek-V3 §3.3 for FP8 blocks).

For Y = X·W (X: tokens × in, W: in × out):
  Fprop  Y  = X · W        quantize X (rowwise, and columnwise for Wgrad), quantize W
  Dgrad  dX = dY · Wᵀ      quantize dY (rowwise and columnwise); W's columnwise copy
  Wgrad  dW = Xᵀ · dY      the columnwise copies of X and dY (TN-only MMAs need them K-major)
Per recipe (`units.LINEAR_RECIPES`, the one list; `fmt` below names a recipe):
  bf16/fp16  no quantization
  fp8        E4M3 with one FP32 scale per tensor, current scaling (an amax pass before the cast);
             the builder's `fp8` GEMM policy
  fp8_block  E4M3, 1x128 blocks for activations and gradients, 128x128 for weights, FP32 scales,
             partial sums promoted on the CUDA cores (`Gemm(fp8_scaling="block")`)
  mxfp8      E4M3 with a UE8M0 scale per 32 elements, hardware-scaled MMA
  nvfp4      E2M1 with an E4M3 scale per 16 and an FP32 tensor scale (amax pass); weights with
             16x16 (2D) scales; Random Hadamard Transform on both Wgrad inputs; stochastic
             rounding on gradients
`quantize=False` gives the kernel-only view (inputs already quantized, as TE's "pre-quantized"
profiling).
"""
from __future__ import annotations

from perfmodel.ops import Op, op as make_op
from perfmodel.units import LINEAR_RECIPES

# The recipes Transformer Engine's B300 GEMM profile measured (validation/te_profile.py), which
# the NVFP4 study compares; every one is a key of LINEAR_RECIPES.
TE_FORMATS = ("bf16", "fp8_block", "mxfp8", "nvfp4")
PASSES = ("fprop", "dgrad", "wgrad")


def _recipe(fmt: str):
    try:
        return LINEAR_RECIPES[fmt]
    except KeyError:
        raise ValueError(f"format must be one of {tuple(LINEAR_RECIPES)}, got {fmt!r}") from None


def _gemm(fmt: str, m: int, n: int, k: int) -> Op:
    r = _recipe(fmt)
    if r.fp8_scaling == "block":
        return make_op("gemm", m=m, n=n, k=k, dtype=r.gemm_dtype, fp8_scaling="block")
    return make_op("gemm", m=m, n=n, k=k, dtype=r.gemm_dtype)


def quantize_op(fmt: str, rows: int, cols: int, role: str) -> Op:
    """Quantization kernel of one operand; role ∈ activation | weight | gradient; `fmt` a
    quantized recipe (module docstring)."""
    if not _recipe(fmt).quantized:
        raise ValueError(f"recipe {fmt!r} runs its GEMMs unquantized: no quantization kernel")
    if fmt == "fp8":
        return make_op("quantize", rows=rows, cols=cols, to="fp8", amax_pass=True,
                       transpose=role != "weight")
    if fmt == "fp8_block":
        block = 128 if role != "weight" else 128  # 1x128 rows; weights 128x128 via 2d
        return make_op("quantize", rows=rows, cols=cols, to="fp8", block=block,
                       scaling="2d" if role == "weight" else "1d", amax_pass=False,
                       transpose=role != "weight")
    if fmt == "mxfp8":
        return make_op("quantize", rows=rows, cols=cols, to="mxfp8", amax_pass=False,
                       transpose=True)
    if fmt == "nvfp4":
        # tensor amax pass; weights 2D-scaled; Wgrad copies Hadamard-rotated; gradients SR
        return make_op("quantize", rows=rows, cols=cols, to="nvfp4", amax_pass=True,
                       scaling="2d" if role == "weight" else "1d", transpose=True,
                       rht=role != "weight", stochastic_rounding=role == "gradient")
    raise ValueError(f"no quantization kernel modelled for recipe {fmt!r}")


def linear_layer(tokens: int, d_in: int, d_out: int, fmt: str,
                 quantize: bool = True) -> dict[str, list[Op]]:
    """The kernels of one linear layer's training step, per pass, in launch order; `fmt` is any
    of `units.LINEAR_RECIPES`, among them every GEMM dtype policy of the builder."""
    out: dict[str, list[Op]] = {
        "fprop": [_gemm(fmt, tokens, d_out, d_in)],
        "dgrad": [_gemm(fmt, tokens, d_in, d_out)],
        "wgrad": [_gemm(fmt, d_in, d_out, tokens)],
    }
    if quantize and _recipe(fmt).quantized:
        out["fprop"] = [quantize_op(fmt, tokens, d_in, "activation"),
                        quantize_op(fmt, d_in, d_out, "weight")] + out["fprop"]
        out["dgrad"] = [quantize_op(fmt, tokens, d_out, "gradient")] + out["dgrad"]
    return out
