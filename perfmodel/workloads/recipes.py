"""Low-precision training recipes per linear layer: the GEMMs and quantization kernels of
Fprop, Dgrad and Wgrad, as Transformer Engine runs them (TE docs "Low precision training";
NVFP4 pretraining paper arXiv:2509.25149 §4; DeepSeek-V3 §3.3 for FP8 blocks).

For Y = X·W (X: tokens × in, W: in × out):
  Fprop  Y  = X · W        quantize X (rowwise, and columnwise for Wgrad), quantize W
  Dgrad  dX = dY · Wᵀ      quantize dY (rowwise and columnwise); W's columnwise copy
  Wgrad  dW = Xᵀ · dY      the columnwise copies of X and dY (TN-only MMAs need them K-major)
Per format:
  bf16       no quantization
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

FORMATS = ("bf16", "fp8_block", "mxfp8", "nvfp4")
PASSES = ("fprop", "dgrad", "wgrad")


def _gemm(fmt: str, m: int, n: int, k: int) -> Op:
    if fmt == "fp8_block":
        return make_op("gemm", m=m, n=n, k=k, dtype="fp8", fp8_scaling="block")
    return make_op("gemm", m=m, n=n, k=k, dtype=fmt)


def quantize_op(fmt: str, rows: int, cols: int, role: str) -> Op:
    """Quantization kernel of one operand; role ∈ activation | weight | gradient. `fp8` is
    per-tensor current scaling (amax pass); the other formats as in the module docstring."""
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
    # nvfp4: tensor amax pass; weights 2D-scaled; Wgrad copies Hadamard-rotated; gradients SR
    return make_op("quantize", rows=rows, cols=cols, to="nvfp4", amax_pass=True,
                   scaling="2d" if role == "weight" else "1d", transpose=True,
                   rht=role != "weight", stochastic_rounding=role == "gradient")


def linear_layer(tokens: int, d_in: int, d_out: int, fmt: str,
                 quantize: bool = True) -> dict[str, list[Op]]:
    """The kernels of one linear layer's training step, per pass, in launch order."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    out: dict[str, list[Op]] = {
        "fprop": [_gemm(fmt, tokens, d_out, d_in)],
        "dgrad": [_gemm(fmt, tokens, d_in, d_out)],
        "wgrad": [_gemm(fmt, d_in, d_out, tokens)],
    }
    if quantize and fmt != "bf16":
        out["fprop"] = [quantize_op(fmt, tokens, d_in, "activation"),
                        quantize_op(fmt, d_in, d_out, "weight")] + out["fprop"]
        out["dgrad"] = [quantize_op(fmt, tokens, d_out, "gradient")] + out["dgrad"]
    return out
