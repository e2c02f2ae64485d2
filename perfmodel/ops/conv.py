"""Convolution (1D, 2D, 3D) as cuDNN and CUTLASS run it on tensor cores: implicit GEMM.

A convolution of an input N × C × (D ×) H × W with K filters of C/g × (T ×) R × S (g groups,
stride, padding) is the GEMM (CUTLASS docs "Implicit GEMM Convolution"; Chetlur et al., "cuDNN:
Efficient Primitives for Deep Learning", arXiv:1410.0759, §3):
  * M = N · (Z ·) P · Q output pixels, N_gemm = K / g output channels, K_gemm = C / g · (T ·) R · S;
  * g groups are g independent GEMMs in one launch (`batch` of the GEMM);
  * the A operand is the im2col matrix, which the kernel never materializes: each CTA gathers its
    A tile from the input tensor (channels-last, NHWC; TMA's im2col mode on Hopper and Blackwell,
    cp.async gathers on Ampere), so overlapping filter windows are re-read from L2 and shared
    memory, not from DRAM. HBM sees the operand bytes of the *tensors*: input, filter and output
    (plus the GEMM's own re-reads when its operands overflow L2), not the R·S-times larger
    im2col matrix;
  * everything else (tiles, waves, split-K, the epilogue, L2 reuse) is the GEMM model of
    `perfmodel.ops.gemm`, which picks the fastest tile like cuDNN's heuristics.

Two cases run differently and are their own kernels:
  * **depthwise** (groups = in_channels: one filter per channel, MobileNet/ConvNeXt/Mamba's causal
    conv1d): K_gemm = T·R·S is too short for an MMA tile, so cuDNN and PyTorch run it on the CUDA
    cores (PyTorch aten/src/ATen/native/cuda/DepthwiseConv2d.cu, causal-conv1d's kernel): one
    FFMA per filter tap per output element, streaming the input and output once;
  * **1×1** (pointwise, no padding): the im2col matrix *is* the input (every pixel read once;
    with a stride, only the sampled pixels), a plain GEMM of N·P·Q × K × C.

Output extent per spatial dimension: (X + 2·pad − kernel) // stride + 1 (PyTorch Conv*d with
dilation 1). Padding defaults to kernel // 2 ("same" for odd kernels at stride 1).
"""
from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from perfmodel.demand import KernelCandidates
from perfmodel.errors import InputError
from perfmodel.units import bytes_per_element, tensor_dtype
from perfmodel.ops.base import Op, Param, positive
from perfmodel.ops.gemm import MMA_DTYPES, Gemm
from perfmodel.ops.streaming import stream_demand

DIMS = ("d", "h", "w")  # spatial dimensions, outermost first (3D: depth/time, height, width)


class Conv(Op):
    """Forward convolution, NHWC, as an implicit GEMM (or depthwise on the CUDA cores)."""

    name = "conv"
    EXAMPLE = dict(batch=16, in_channels=256, out_channels=256, height=64, width=64, kernel=3,
                   dtype="bf16")
    PARAMS = {
        "batch": positive("images", "batch N"),
        "in_channels": positive("channels", "input channels C"),
        "out_channels": positive("channels", "output channels K (filters)"),
        "depth": positive("elements", "input depth / frames (3D conv); 1 for 2D", False, 1),
        "height": positive("elements", "input height; 1 for 1D", False, 1),
        "width": positive("elements", "input width (the sequence length of a 1D conv)"),
        "kernel": positive("elements", "filter extent of every spatial dimension larger than 1 "
                           "(the _d/_h/_w keys override one)", False, 3),
        "kernel_d": Param("int", default=None, nullable=True, lo=1,
                          doc="filter depth (none: kernel if depth > 1, else 1)"),
        "kernel_h": Param("int", default=None, nullable=True, lo=1,
                          doc="filter height (none: kernel if height > 1, else 1)"),
        "kernel_w": Param("int", default=None, nullable=True, lo=1,
                          doc="filter width (none: kernel)"),
        "stride": positive("elements", "stride of every convolved dimension", False, 1),
        "stride_d": Param("int", default=None, nullable=True, lo=1,
                          doc="stride along depth (none: stride if depth > 1)"),
        "padding": Param("int", default=None, nullable=True, lo=0,
                         doc="zero padding per side of every dimension (none: kernel // 2)"),
        "groups": positive("", "groups (in_channels: depthwise)", False, 1),
        "dtype": Param("dtype", required=True, choices=MMA_DTYPES,
                       doc="tensor-core input type; fp32 runs on the FMA pipe"),
        "out_dtype": Param("dtype", default=None, nullable=True, doc="output type (= dtype)"),
    }
    SIZE_PARAMS = ("batch", "in_channels", "out_channels", "height", "width")
    TENSORS = (("batch", "in_channels", "depth", "height", "width"),
               ("batch", "out_channels", "depth", "height", "width"),
               ("out_channels", "in_channels", "kernel"))

    def check(self, v):
        bad = [k for k in ("in_channels", "out_channels") if v[k] % v["groups"]]
        if bad:
            return [("groups", f"{' and '.join(f'{k} {v[k]}' for k in bad)} not a multiple of "
                               f"groups {v['groups']}")]
        names = {"d": "depth", "h": "height", "w": "width"}
        for dim, extent, k, s, p in _geometry(v):
            if extent + 2 * p < k:
                return [(f"kernel_{dim}" if v[f"kernel_{dim}"] else "kernel",
                         f"filter {names[dim]} {k} exceeds the padded input {names[dim]} "
                         f"{extent + 2 * p}")]
        return []

    # ---- geometry --------------------------------------------------------------------------
    @property
    def geometry(self) -> list[tuple[str, int, int, int, int]]:
        """(dimension, input extent, filter extent, stride, padding) of d, h, w."""
        return _geometry(self.params)

    @property
    def output_extent(self) -> tuple[int, int, int]:
        """Output (Z, P, Q)."""
        return tuple((x + 2 * p - k) // s + 1 for _, x, k, s, p in self.geometry)

    @property
    def taps(self) -> int:
        """Filter taps T·R·S."""
        return math.prod(k for _, _, k, _, _ in self.geometry)

    @property
    def case(self) -> str:
        if self.groups > 1 and self.groups == self.in_channels:
            return "depthwise"
        if self.taps == 1 and all(p == 0 for *_, p in self.geometry):
            return "1x1"
        return "implicit_gemm"

    def gemm_shape(self) -> tuple[int, int, int, int]:
        """(M, N, K, groups) of the implicit GEMM."""
        m = self.batch * math.prod(self.output_extent)
        return (m, self.out_channels // self.groups,
                self.in_channels // self.groups * self.taps, self.groups)

    def tensor_bytes(self) -> tuple[float, float, float]:
        """(input, filter, output) bytes; a strided 1×1 conv reads only the sampled pixels."""
        b = bytes_per_element(self.dtype)
        c = bytes_per_element(self.out_dtype or self.dtype)
        pixels = self.depth * self.height * self.width
        if self.case == "1x1":
            pixels = math.prod(self.output_extent)
        inp = self.batch * self.in_channels * pixels * b
        filt = self.out_channels * self.in_channels // self.groups * self.taps * b
        out = self.batch * self.out_channels * math.prod(self.output_extent) * c
        return inp, filt, out

    @property
    def flop(self) -> float:
        m, n, k, g = self.gemm_shape()
        return 2.0 * m * n * k * g

    # ---- demand ----------------------------------------------------------------------------
    def demand(self, hw):
        if self.case == "depthwise":
            return self._depthwise()
        return _implicit_gemm(self._key(), hw)

    def _key(self) -> tuple:
        return tuple(sorted(self.params.items()))

    def _depthwise(self):
        inp, filt, out = self.tensor_bytes()
        outputs = self.batch * self.out_channels * math.prod(self.output_extent)
        taps = self.taps * (self.in_channels // self.groups)
        b = bytes_per_element(self.dtype)
        return stream_demand(float(outputs), inp + filt, out, {"fma": float(taps)}, b,
                             flop=2.0 * taps * outputs,
                             details={"case": "depthwise", "taps": taps,
                                      "output": "x".join(map(str, self.output_extent))})

    def gemm(self) -> Gemm:
        m, n, k, g = self.gemm_shape()
        return Gemm(m=m, n=n, k=k, batch=g, dtype=self.dtype,
                    out_dtype=self.out_dtype or self.dtype)


def _geometry(v) -> list[tuple[str, int, int, int, int]]:
    extents = {"d": v["depth"], "h": v["height"], "w": v["width"]}
    out = []
    for dim in DIMS:
        x = extents[dim]
        k = v[f"kernel_{dim}"]
        if k is None:
            k = v["kernel"] if (x > 1 or dim == "w") else 1
        s = v["stride"] if (x > 1 or dim == "w") else 1
        if dim == "d" and v["stride_d"] is not None:
            s = v["stride_d"]
        p = v["padding"] if v["padding"] is not None else k // 2
        if x == 1 and k == 1:
            p = 0
        out.append((dim, x, k, s, p))
    return out


@functools.lru_cache(maxsize=4096)
def _implicit_gemm(key: tuple, hw) -> KernelCandidates:
    conv = Conv(**dict(key))
    gemm = conv.gemm()
    compute = tensor_dtype(gemm.dtype)
    if compute != "fp32" and not hw.supports(compute):
        raise InputError(f"conv dtype '{conv.dtype}' is not supported by {hw.name}'s tensor "
                         f"cores (supported: {', '.join(sorted(hw.tensor_flop_per_sm_per_clk))})")
    cands = gemm.kernel_candidates(hw)
    a_im2col, b_bytes, c_bytes = gemm.unique_bytes()
    inp, filt, out = conv.tensor_bytes()
    useful = inp + filt + out
    # the GEMM's HBM reads of A are reads of the im2col matrix; the kernel reads the input tensor
    # instead (its re-reads beyond one pass, when operands overflow L2, carry over as they are)
    hbm = np.maximum(np.asarray(cands.work["hbm"]) - a_im2col - b_bytes - c_bytes + useful,
                     useful)
    work = {**cands.work, "hbm": hbm}
    details = {"case": conv.case, "gemm": "x".join(map(str, conv.gemm_shape()[:3])),
               "groups": conv.groups, "output": "x".join(map(str, conv.output_extent))}

    def demand_at(i: int):
        d = cands.demand_at(i)
        return dataclasses.replace(d, work={**d.work, "hbm": float(hbm[i])}, hbm_bytes=useful,
                                   details={**d.details, **details})

    return dataclasses.replace(cands, work=work, demand_at=demand_at, what=f"conv {conv!r}")
