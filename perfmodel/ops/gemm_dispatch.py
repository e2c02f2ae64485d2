"""GEMM kernels an engine dispatches by shape, rather than the fastest of the tile set.

`Gemm(dispatch="best")` (the default) prices the fastest (tile, split-K) kernel the model offers,
cuBLAS's heuristic idealized. An engine that calls its own CUTLASS kernels instead picks one
compiled configuration from the problem's M (and N) with a fixed table, without split-K, and
that choice is what its decode steps pay. `Gemm(dispatch=NAME)` runs the table NAME names:

vllm-0.10.2    vLLM's `cutlass_scaled_mm` for per-tensor FP8 (`Fp8LinearMethod` on a ModelOpt /
               compressed-tensors FP8 checkpoint: static per-tensor weight and input scales),
               as vLLM 0.10.2 dispatches it:
  sm90 (wgmma)   csrc/quantization/cutlass_w8a8/c3x/scaled_mm_sm90_fp8_dispatch.cuh
                 `cutlass_gemm_sm90_fp8_dispatch`:
                   M <= 16, N <= 1280   64x16x256,  cluster 1x4, swap-AB, KernelTmaWarpSpecialized
                   M <= 16, N >  1280   64x16x256,  cluster 1x1, swap-AB, KernelTmaWarpSpecialized
                   M <= 64, N <= 1280   64x16x256,  cluster 1x4, swap-AB, KernelTmaWarpSpecialized
                   M <= 64, N >  1280   64x64x256,  cluster 1x1, swap-AB, KernelTmaWarpSpecialized
                   M <= 128             64x128x128, cluster 2x1, Pingpong (persistent)
                   M >  128             128x128x128, cluster 2x1, Pingpong (persistent)
                 Swap-AB runs the problem transposed (`prob_shape = (n, m, k)`, the weight as
                 operand A): the weight's rows fill the 64-row wgmma and the few tokens take
                 the tile's N. The three swap-AB configurations use the plain
                 KernelTmaWarpSpecialized schedule, which CUTLASS 3.x runs non-persistent (one
                 tile per CTA: sm90_gemm_tma_warpspecialized.hpp); the Pingpong ones run the
                 persistent scheduler (`cutlass::gemm::PersistentScheduler`).
  sm100 (tcgen05) .../c3x/scaled_mm_sm100_fp8_dispatch.cuh `cutlass_gemm_sm100_fp8_dispatch`,
                 on mp2 = max(16, next power of two of M):
                   mp2 <= 16    64x64x128,   cluster 1x4
                   mp2 <= 64    64x64x128,   cluster 1x1
                   mp2 <= 256   128x128x128, cluster 2x1
                   above        256x128x128, cluster 2x2
                 no swap-AB; sm100 kernels are persistent (CLC tile scheduler).
vllm-0.24.0    the same kernels as vLLM 0.24.0 dispatches them
               (csrc/libtorch_stable/quantization/w8a8/cutlass/c3x/):
  sm90           0.10.2's table, and M >= 8192 with K >= 6144 runs 256x128x128, cluster 2x1,
                 Cooperative (persistent);
  sm100          M <= 16: 128x32x128, cluster 4x1, swap-AB; 16 < M <= 64: 128x64x256, cluster
                 4x1, swap-AB, but 64x64x128 unswapped for M = 64 with K < 4096; M <= 256:
                 128x128x128, cluster 2x1; above: 256x128x128, cluster 2x2.
On sm100, KernelScheduleAuto builds the 2-SM MMA where the cluster's M is even and the tile's M
a multiple of 128 (CUTLASS 4.2 gemm/collective/builders/sm100_common.inl
`sm100_make_trivial_tiled_mma`): those are CTA pairs, each SM holding half the tile's rows and
half of B. A cluster's CTAs along N share the A tile by TMA multicast (one L2 read), as those
along M share B (Tile.cluster_m, cluster_n). The `tile` parameter writes a configuration as
CUTLASS's TileShape (the CTA pair's on tcgen05) and cluster.
A dispatch applies where its kernels exist: the vLLM tables to per-tensor FP8 on wgmma and tcgen05
GPUs; elsewhere (BF16 linears, which vLLM runs through torch.mm and cuBLAS; block-scaled FP8;
NVFP4) the GEMM keeps the best kernel. The vllm serving preset runs 0.10.2's table (the
InferenceX Llama-3.3-70B recipe's image).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from perfmodel.errors import InputError

DISPATCHES = ("best", "vllm-0.10.2", "vllm-0.24.0")
# a fixed tile as the `tile` parameter writes it: "64x128", or "64x16 cluster 1x4"
TILE_PATTERN = re.compile(r"^\s*(\d+)\s*x\s*(\d+)(?:\s+cluster\s+(\d+)\s*x\s*(\d+))?\s*$")
# tile rows the tensor-core instruction families take per CTA (wgmma m64; tcgen05 64/128 per
# SM, 256 over a CTA pair; mma.sync warps tile any multiple of 16)
TILE_M = {"wgmma": (64, 128, 256), "tcgen05": (64, 128, 256), "mma_sync": (16, 32, 64, 128, 256)}
TILE_N_STEP = 8   # wgmma/tcgen05 N in steps of 8 (16 for tcgen05 M = 128)
TILE_N_MAX = 256
CLUSTER_MAX = 4          # CTAs along one dimension of the clusters the tables use
CLUSTER_CTAS_MAX = 8     # CTAs in a portable thread-block cluster (CUDA programming guide)


@dataclass(frozen=True)
class KernelChoice:
    """One compiled kernel configuration: its tile as the `tile` parameter writes it, whether it
    runs the problem transposed, and whether it is persistent."""
    tile: str
    swap_ab: bool
    persistent: bool


@dataclass(frozen=True)
class ParsedTile:
    m: int
    n: int
    cluster_m: int
    cluster_n: int


def parse_tile(text: str, mma_instruction: str) -> ParsedTile:
    """The `tile` parameter as numbers, checked against what the GPU's MMA can run."""
    match = TILE_PATTERN.match(text)
    if not match:
        raise InputError(f"gemm tile: expected 'MxN' or 'MxN cluster AxB' (e.g. '64x128', "
                         f"'64x16 cluster 1x4'), got {text!r}")
    tm, tn = int(match[1]), int(match[2])
    cm, cn = int(match[3] or 1), int(match[4] or 1)
    rows = TILE_M.get(mma_instruction, ())
    if tm not in rows:
        raise InputError(f"gemm tile: {mma_instruction} tiles have {', '.join(map(str, rows))} "
                         f"rows, got {tm}")
    if not (TILE_N_STEP <= tn <= TILE_N_MAX and tn % TILE_N_STEP == 0):
        raise InputError(f"gemm tile: N must be a multiple of {TILE_N_STEP} in "
                         f"[{TILE_N_STEP}, {TILE_N_MAX}], got {tn}")
    if not (1 <= cm <= CLUSTER_MAX and 1 <= cn <= CLUSTER_MAX and cm * cn <= CLUSTER_CTAS_MAX):
        raise InputError(f"gemm tile: cluster dimensions in [1, {CLUSTER_MAX}] and at most "
                         f"{CLUSTER_CTAS_MAX} CTAs, got {cm}x{cn}")
    if (cm > 1 or cn > 1) and mma_instruction == "mma_sync":
        raise InputError("gemm tile: thread-block clusters need Hopper or later (wgmma/tcgen05)")
    return ParsedTile(tm, tn, cm, cn)


def _vllm_sm90_fp8(m: int, n: int, k: int, version: str) -> KernelChoice:
    if m <= 64:
        narrow = n <= 1280
        if m <= 16:
            tile = "64x16 cluster 1x4" if narrow else "64x16"
        else:
            tile = "64x16 cluster 1x4" if narrow else "64x64"
        return KernelChoice(tile, swap_ab=True, persistent=False)
    if m <= 128:
        return KernelChoice("64x128 cluster 2x1", swap_ab=False, persistent=True)
    if version == "vllm-0.24.0" and m >= 8192 and k >= 6144:
        return KernelChoice("256x128 cluster 2x1", swap_ab=False, persistent=True)
    return KernelChoice("128x128 cluster 2x1", swap_ab=False, persistent=True)


def _vllm_sm100_fp8(m: int, n: int, k: int, version: str) -> KernelChoice:
    if version == "vllm-0.24.0":
        if m <= 16:
            return KernelChoice("128x32 cluster 4x1", swap_ab=True, persistent=True)
        if m <= 64:
            if m == 64 and k < 4096:
                return KernelChoice("64x64", swap_ab=False, persistent=True)
            return KernelChoice("128x64 cluster 4x1", swap_ab=True, persistent=True)
        if m <= 256:
            return KernelChoice("128x128 cluster 2x1", swap_ab=False, persistent=True)
        return KernelChoice("256x128 cluster 2x2", swap_ab=False, persistent=True)
    mp2 = max(16, 1 << max(0, m - 1).bit_length())  # next power of two, at least 16
    if mp2 <= 16:
        tile = "64x64 cluster 1x4"
    elif mp2 <= 64:
        tile = "64x64"
    elif mp2 <= 256:
        tile = "128x128 cluster 2x1"
    else:
        tile = "256x128 cluster 2x2"
    return KernelChoice(tile, swap_ab=False, persistent=True)


def dispatched_kernel(dispatch: str, mma_instruction: str, compute: str, block_scaled: bool,
                      m: int, n: int, k: int) -> KernelChoice | None:
    """The kernel `dispatch` runs for an M × N × K GEMM of `compute` operands on this MMA
    family; None where the table does not apply (the best kernel then)."""
    if dispatch == "best" or compute != "fp8" or block_scaled:
        return None
    if dispatch not in DISPATCHES:
        raise InputError(f"gemm dispatch: expected one of {', '.join(DISPATCHES)}, got "
                         f"{dispatch!r}")
    if mma_instruction == "wgmma":
        return _vllm_sm90_fp8(m, n, k, dispatch)
    if mma_instruction == "tcgen05":
        return _vllm_sm100_fp8(m, n, k, dispatch)
    return None
