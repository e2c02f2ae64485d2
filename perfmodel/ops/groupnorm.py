"""GroupNorm (and InstanceNorm, groups = channels) over N × C × spatial, channels in groups.

PyTorch's kernels (pytorch/pytorch aten/src/ATen/native/cuda/group_norm_kernel.cu), the
`pytorch` implementation:
  * forward: `RowwiseMomentsCUDAKernel`, one CTA per (n, group), reads x once for the mean and
    rstd (Welford, FP32, saved for the backward: N·G each); `ComputeFusedParamsCUDAKernel` folds
    γ, β, mean and rstd into one scale and shift per (n, c); the elementwise pass y = a·x + b
    reads x again and writes y. Two reads of x, one write of y;
  * backward: `ComputeInternalGradientsCUDAKernel` reads dy and x for Σ dy·x and Σ dy per
    (n, c); `GroupNormBackward`'s coefficient kernels are per (n, g); the dx pass reads dy and x
    again and writes dx; dγ and dβ reduce the per-(n, c) sums over N. Four reads, one write.
The `fused` implementation keeps each group on chip (a group of C/G · spatial elements in
registers/shared memory, as the fused GroupNorm+SiLU kernels of diffusion inference do): one read
of x, one write of y forward; one read of dy and x, one write of dx backward.

FMA-pipe operations per element (FP32 math): forward moments 3 (Welford: subtract, FFMA, add),
apply 2 (FFMA, conversion); backward sums 2, dx 4 (the two coefficient FFMAs, the product,
conversion). One rsqrt per group on the XU; shuffle trees per group reduction on the LSU.
"""
from __future__ import annotations

import math

from perfmodel.demand import sequence_demand
from perfmodel.units import bytes_per_element
from perfmodel.ops.base import Op, Param, positive
from perfmodel.ops.streaming import row_threads, stream_demand

FMA = {("fwd", "moments"): 3.0, ("fwd", "apply"): 2.0, ("bwd", "sums"): 2.0, ("bwd", "dx"): 4.0}
STAT_BYTES = 4.0  # FP32 mean / rstd / partial sums
SHUFFLE_STEPS = 5.0


class GroupNorm(Op):
    """y = (x − mean_g) · rstd_g · γ_c + β_c, statistics per (sample, group)."""

    name = "groupnorm"
    EXAMPLE = dict(batch=16, channels=512, spatial=4096, groups=32, dtype="fp32")
    PARAMS = {
        "batch": positive("samples", "batch N"),
        "channels": positive("channels", "channels C"),
        "spatial": positive("elements", "spatial elements per channel (H·W, or D·H·W)"),
        "groups": positive("", "groups G (channels: InstanceNorm)"),
        "dtype": Param("dtype", required=True),
        "direction": Param("choice", default="fwd", choices=("fwd", "bwd")),
        "implementation": Param("choice", default="pytorch", choices=("pytorch", "fused"),
                                doc="pytorch: moments then apply (x read twice forward); "
                                    "fused: each group held on chip (x read once)"),
    }
    SIZE_PARAMS = ("batch", "channels", "spatial")
    TENSORS = (("batch", "channels", "spatial"),)

    def check(self, v):
        if v["channels"] % v["groups"]:
            return [("groups", f"channels {v['channels']} is not a multiple of groups "
                               f"{v['groups']}")]
        return []

    def demand(self, hw):
        b = bytes_per_element(self.dtype)
        n = float(self.batch) * self.channels * self.spatial
        group = self.channels // self.groups * self.spatial
        rows = self.batch * self.groups
        stats = rows * 2 * STAT_BYTES
        params = self.channels * b * 2  # γ, β
        reduce = {"xu": 1.0 / group, "lsu": 2 * SHUFFLE_STEPS / group}
        threads = row_threads(min(group, 4096), b)
        if self.direction == "fwd":
            fma = FMA[("fwd", "moments")] + FMA[("fwd", "apply")]
            if self.implementation == "fused":
                return stream_demand(n, n * b + params, n * b + stats, {"fma": fma, **reduce}, b,
                                     flop=fma * n, ctas=rows, threads=threads,
                                     details={"implementation": "fused"})
            moments = stream_demand(n, n * b, stats, {"fma": FMA[("fwd", "moments")], **reduce},
                                    b, flop=FMA[("fwd", "moments")] * n, ctas=rows,
                                    threads=threads, details={"part": "moments"})
            apply = stream_demand(n, n * b + params + stats, n * b,
                                  {"fma": FMA[("fwd", "apply")]}, b,
                                  flop=FMA[("fwd", "apply")] * n, details={"part": "apply"})
            return sequence_demand((moments, apply))
        sums = self.batch * self.channels * 2 * STAT_BYTES
        fma = FMA[("bwd", "sums")] + FMA[("bwd", "dx")]
        if self.implementation == "fused":
            return stream_demand(n, 2 * n * b + params + stats, n * b + params,
                                 {"fma": fma, **reduce}, b, flop=fma * n, ctas=rows,
                                 threads=threads, details={"implementation": "fused"})
        grads = stream_demand(n, 2 * n * b, sums, {"fma": FMA[("bwd", "sums")], **reduce}, b,
                              flop=FMA[("bwd", "sums")] * n, ctas=self.batch * self.channels,
                              threads=row_threads(min(self.spatial, 4096), b),
                              details={"part": "internal gradients"})
        dx = stream_demand(n, 2 * n * b + stats + sums + params, n * b,
                           {"fma": FMA[("bwd", "dx")]}, b, flop=FMA[("bwd", "dx")] * n,
                           details={"part": "dx"})
        dgamma = stream_demand(float(self.batch * self.channels), sums, params, {"fma": 2.0},
                               STAT_BYTES, flop=2.0 * self.batch * self.channels,
                               ctas=max(1, math.ceil(self.channels / 256)),
                               details={"part": "dgamma dbeta"})
        return sequence_demand((grads, dx, dgamma))
