"""Numerics of low-precision formats: bit-exact float formats (`formats`) and the quantizers of
NVFP4, MXFP4/8, FP8 and BF16 with error statistics (`quantizers`)."""
