"""GEMM: C[M,N] = A[M,K] · B[K,N] as CTA tiles on the tensor pipe, in waves, with L2 reuse.

The model follows how CUTLASS/cuBLAS kernels are built (CUTLASS docs "Efficient GEMM"; PTX ISA for
wgmma/tcgen05 shapes):
  * a CTA computes a tm × tn output tile, streaming K in k-blocks of 128 bytes per row (the TMA
    128B swizzle width) through a multi-stage shared-memory pipeline;
  * tiles are padded: a 1-row GEMV still runs a 64-row (Hopper) MMA tile;
  * the busiest SM runs ceil(tiles / SMs) tiles (wave quantization, in the engine);
  * A is re-read once per tile column and B once per tile row from L2; HBM sees each operand once
    when they fit in L2, else once per wave of co-resident tiles (rasterized in a near-square
    block, the swizzle CUTLASS uses);
  * split-K for shapes with fewer tiles than SMs: partial sums in FP32 through L2/HBM and a
    reduction kernel;
  * the epilogue stages the output tile through shared memory.
Like cuBLAS's heuristics, the op offers each tensor-core instruction family's tile shapes and
split factors as candidates (`KernelCandidates`); the engine keeps the fastest.

Fixed costs (the prologue and epilogue a kernel cannot overlap with its main loop), counted as
the Demand's `serial_work` (a subset of its work) and `serial_round_trips` (the engine does not
add them to the time yet; the tile ranking is the main loop's either way):
  * prologue: a CTA's first MMA waits for its first k-block stage to land in shared memory (the
    consumer waits on stage 0's barrier, `consumer_wait` in CUTLASS's sm90 TMA mainloops; the
    producer issues the later stages meanwhile and they arrive while the first MMAs run): one
    stage's bytes through L2 (B once per cluster) into shared memory, after a DRAM round trip;
  * epilogue: after its last MMA the CTA writes its output tile (accumulators → registers →
    shared memory → TMA store to L2): the tile through shared memory twice and L2 once;
  * persistent warp-specialized kernels expose both once per SM: the producer warp loads tile
    i+1 while tile i runs, and a second consumer warpgroup (sm90 Pingpong) or the dedicated
    epilogue warps fed through an accumulator pipeline of TMEM buffers (sm100,
    sm100_gemm_tma_warpspecialized.hpp AccumulatorPipeline) write tile i's output while tile
    i+1 computes. Non-persistent kernels (one tile per CTA) expose both in every CTA round,
    and each later round waits one more DRAM round trip for its first k-block.
  * persistence defaults per `isa.mma_instruction` (`persistent` overrides it): wgmma and tcgen05
    → persistent (CUTLASS 3.x sm90 collective builder, KernelScheduleAuto: "Persistent schedules
    perform best for CUDA Toolkits with version >= 12.1", Pingpong for 64-row tiles and
    Cooperative otherwise; sm100 kernels persistent with a CLC/static tile scheduler); mma_sync
    → non-persistent (CUTLASS 2.x sm80 multistage kernels: one tile per CTA, the same warps run
    the main loop and then the epilogue). The last partial wave costs a whole tile on the busiest
    SM either way (the persistent scheduler hands out ceil(tiles / SMs) tiles to some SMs).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from perfmodel.demand import Demand, KernelCandidates, LaunchShape, Overlap
from perfmodel.errors import InputError
from perfmodel.hardware import Hardware
from perfmodel.units import (DTYPE_BYTES, FP8_BLOCK, TENSOR_DTYPES, bytes_per_element,
                             tensor_dtype)
from perfmodel.ops.base import Op, Param, positive
from perfmodel.ops.gemm_dispatch import DISPATCHES, dispatched_kernel, parse_tile

# TMA addresses a tensor whose global strides are multiples of 16 bytes (rows_tma_aligned)
TMA_ALIGN_BYTES = 16


def rows_tma_aligned(k, n, element_bytes: tuple[float, float, float]):
    """Whether TMA can address the rows of A [M, K], B as a linear layer stores it ([N, K]) and
    C [M, N] with these element sizes (ints, or arrays of shapes: gemm_batch): a tensor map's
    global strides must be multiples of 16 bytes (CUDA Driver API, cuTensorMapEncodeTiled:
    "globalStrides ... must be a multiple of 16"), and CUTLASS's sm90/sm100 TMA collectives
    require 16-byte-aligned operands (AlignmentA/B/C = 128 bits / element size)."""
    a, b, c = element_bytes
    return ((k * a % TMA_ALIGN_BYTES == 0) & (k * b % TMA_ALIGN_BYTES == 0)
            & (n * c % TMA_ALIGN_BYTES == 0))
# Bytes of K per row in one k-block: the 128-byte TMA swizzle span (CUTLASS sm90/sm100
# collective builders pick tile K = 128 B / element size).
KBLOCK_BYTES = 128
# Ampere cp.async pipelines use 32 elements of K per stage for 16-bit types (CUTLASS sm80
# default tile shapes, e.g. 128x128x32).
AMPERE_KBLOCK_ELEMS = 32
MAX_STAGES = 8
# Output-tile shared-memory staging reserved for the epilogue (CUTLASS sm90 epilogue tiles are
# 64x32..128x64 subtiles of the output; 32 KiB covers them).
EPILOGUE_SMEM_BYTES = 32 * 1024
MAX_SPLIT_K = 16
# GEMM input types: every tensor-core rate class, FP8 by its two encodings too, and FP32 (SIMT)
MMA_DTYPES = ("fp32", *TENSOR_DTYPES, "fp8_e4m3", "fp8_e5m2")
# Persistent warp-specialized kernels by tensor-core instruction family (module docstring, "Fixed
# costs"); SIMT fp32 (sgemm) runs CUTLASS 2.x-style, one tile per CTA.
PERSISTENT_BY_MMA = {"wgmma": True, "tcgen05": True, "mma_sync": False}


@dataclass(frozen=True)
class Tile:
    m: int
    n: int
    threads: int
    registers: int
    cluster_m: int = 1      # CTAs along M sharing each B tile by TMA multicast (one L2 read)
    cta_pair: bool = False  # Blackwell cta_group::2: two SMs split one B tile in shared memory
    cluster_n: int = 1      # CTAs along N sharing each A tile by TMA multicast (ops.gemm_dispatch)


# Tile shapes per tensor-core instruction family (the spec's isa.mma_instruction). wgmma
# (Hopper): m64nNk16, one producer + tm/64 consumer warpgroups, 2x1 clusters with B multicast
# (CUTLASS KernelTmaWarpSpecialized{Cooperative,Pingpong}, ClusterShape 2x1x1 defaults).
# tcgen05 (Blackwell): M = 64/128 per SM and 2-SM pairs (CUTLASS sm100 1SM/2SM kernels).
# mma_sync (Ampere): cp.async pipelines, 4-8 warps, no clusters.
TILES: dict[str, tuple[Tile, ...]] = {
    "wgmma": (Tile(128, 256, 384, 168, 2), Tile(256, 128, 384, 168, 2),
               Tile(128, 128, 384, 168, 2), Tile(64, 256, 256, 168, 2),
               Tile(64, 128, 256, 168, 2), Tile(128, 128, 384, 168, 1)),
    "tcgen05": (Tile(128, 256, 256, 128, 2, cta_pair=True), Tile(128, 256, 256, 128, 1),
                  Tile(128, 128, 256, 128, 2, cta_pair=True), Tile(128, 128, 256, 128, 1),
                  Tile(64, 256, 256, 128, 1), Tile(64, 128, 256, 128, 1)),
    "mma_sync": (Tile(128, 256, 256, 232), Tile(256, 128, 256, 232), Tile(128, 128, 256, 128),
               Tile(64, 128, 128, 128), Tile(64, 64, 128, 128)),
}
SIMT_TILE = Tile(128, 128, 256, 128)  # fp32 without tensor cores (sgemm)
# NVFP4 on tcgen05 runs the CUTLASS sm100 block-scaled FP4 GEMM that TensorRT-LLM's
# NVFP4LinearMethod calls (flashinfer 0.7.4 carries TensorRT-LLM's copy):
#   * tiles CtaShape128x{64,256}x128B and 128x{128,256}x256B, every one crossed with cluster
#     shapes 1x1..4x4, cluster M >= 2 running the 2-SM MMA (_2SM) and M = 1 the 1-SM one
#     (include/flashinfer/gemm/fp4_gemm_cutlass_template.h:194-210 getConfigs, :55-95 the
#     cluster dispatch); "M-mode size should be 128 or 256 for 2 CTA cluster MMA; 128 for
#     1 CTA" (:114-117): no 64-row tile, so a decode GEMM pads M to 128;
#   * no split-K: the kernel runs GemmUniversalMode::kGemm
#     (include/flashinfer/gemm/fp4_gemm_template_sm100.h:211) with a persistent tile scheduler
#     (:190), so a short GEMM's CTAs each stream all of K.
# The K-per-stage of the 256B tiles (512 FP4 elements) is not modelled; every tile streams
# 128-byte k-blocks like the other tcgen05 kernels.
FP4_CUTLASS_TILES = (Tile(128, 256, 256, 128, 2, cta_pair=True), Tile(128, 256, 256, 128, 1),
                     Tile(128, 128, 256, 128, 2, cta_pair=True), Tile(128, 128, 256, 128, 1),
                     Tile(128, 64, 256, 128, 2, cta_pair=True), Tile(128, 64, 256, 128, 1))


# The block-scaled FP4 MMA's N granule on the tensor pipe. TensorRT-LLM's measured NVFP4 linears
# at decode sizes (validate/data/aiconfigurator_gemm.csv, m < 1024) take the same time at any N
# that fits one wave and grow by one fixed step per 256-wide k-block on B200, GB200 and B300; on
# B200 that step is a 128 x 256 x 256 tile's MMA at the power-limited FP4 rate, so a CTA's
# narrow N tile (64, 128) costs the tensor pipe what a 256-wide one does. (B300's measured step
# is ~2x shorter than B200's; the model's is ~5 % shorter, its B300 power limit taking most of
# the 1.5x FP4 rate: an open gap, docs/hardware-notes.md §5.) The CUTLASS collective handles B's
# scale factors in whole 128-column blocks (cutlass/gemm/collective/
# sm100_blockscaled_mma_warpspecialized.hpp: `CTA_N_SF = ceil_div(CTA_N, Blk_MN) * Blk_MN`, the
# SFB tile "used for partitioning", loaded whole and offset into for N = 64 and 192, :137-142
# and :972-988), so a narrow tile does not shrink that path; the 256-wide granule itself is
# read from the measurements (no fitted constant), not from a document.
FP4_MMA_N = 256


def fp4_mma_n(hw: Hardware, compute: str, tn):
    """The N a CTA's MMAs occupy the tensor pipe for: FP4_MMA_N at least for the CUTLASS NVFP4
    kernel (its block-scaled MMA), the tile's own N otherwise (numpy arrays or Python ints)."""
    if not fp4_cutlass(hw, compute):
        return tn
    return np.maximum(tn, FP4_MMA_N) if isinstance(tn, np.ndarray) else max(tn, FP4_MMA_N)


def fp4_cutlass(hw: Hardware, compute: str) -> bool:
    """Whether this GEMM runs the CUTLASS sm100 NVFP4 kernel (FP4_CUTLASS_TILES: its tile set,
    no split-K)."""
    return compute == "nvfp4" and hw.mma_instruction == "tcgen05"


def ceil_div(a, b):
    """Integer ceil(a / b) for ints or numpy arrays."""
    return -(-a // b)


def operand_bytes(m, n, k, batch, element_bytes: tuple[float, float, float],
                  block_scaled: bool) -> tuple:
    """The unique bytes of A [M, K], B [K, N] and C [M, N] over `batch` (ints, or arrays of
    shapes: gemm_batch) at `element_bytes` of A, B and C, with block-scaled FP8's FP32 scales
    (one per 1x128 of A, per 128x128 of B) where `block_scaled`: Gemm.unique_bytes, and the
    scalar and batched searches' (perfmodel.predict, perfmodel.batch)."""
    a, b, c = element_bytes
    a_scales = b_scales = 0.0
    if block_scaled:
        a_scales = m * ceil_div(k, FP8_BLOCK) * 4.0
        b_scales = ceil_div(k, FP8_BLOCK) * ceil_div(n, FP8_BLOCK) * 4.0
    return (m * k * a * batch + a_scales * batch, k * n * b * batch + b_scales * batch,
            m * n * c * batch)


def default_persistent(hw: Hardware, compute: str) -> bool:
    """Whether the library's kernel for this GPU and compute type is persistent
    warp-specialized (module docstring, "Fixed costs")."""
    return compute != "fp32" and PERSISTENT_BY_MMA[hw.mma_instruction]


@functools.lru_cache(maxsize=64)
def fixed_tile(text: str, mma_instruction: str) -> Tile:
    """The Tile a `tile` parameter names (ops.gemm_dispatch.parse_tile): on tcgen05 a cluster
    with an even M and a tile M that is a multiple of 128 runs the 2-SM MMA (CUTLASS 4.2
    sm100_common.inl `sm100_make_trivial_tiled_mma`, KernelScheduleAuto), each SM of the pair
    holding half the rows; threads and registers of the family's tile with as many rows."""
    p = parse_tile(text, mma_instruction)
    pair = mma_instruction == "tcgen05" and p.cluster_m % 2 == 0 and p.m % 128 == 0
    rows = p.m // 2 if pair else p.m
    if mma_instruction == "tcgen05" and rows > 128:
        raise InputError(f"gemm tile: a {p.m}-row tcgen05 tile is a CTA pair's: its cluster's "
                         f"M must be even (e.g. '{p.m}x{p.n} cluster 2x1')")
    family = TILES[mma_instruction]
    like = next((t for t in family if t.m == rows), family[0])
    return Tile(rows, p.n, like.threads, like.registers, p.cluster_m, cta_pair=pair,
                cluster_n=p.cluster_n)


@functools.lru_cache(maxsize=256)
def tile_table(hw: Hardware, compute: str, a_b: float, b_b: float, c_b: float,
               tiles: tuple[Tile, ...] | None = None) -> dict:
    """Shape-independent facts of each tile on this GPU for these dtypes: pipeline stages that
    fit in shared memory (after the epilogue's staging), bytes in flight. `tiles`: a fixed
    kernel's tile alone (Gemm `tile`), else the family's offer."""
    tiles = tiles or ((SIMT_TILE,) if compute == "fp32" else
                      FP4_CUTLASS_TILES if fp4_cutlass(hw, compute)
                      else TILES[hw.mma_instruction])
    op_b = DTYPE_BYTES[compute]
    if compute == "fp32" or hw.mma_instruction == "mma_sync":  # cp.async k-blocks
        kblock = AMPERE_KBLOCK_ELEMS * max(1, int(2 / op_b))
    else:
        kblock = max(16, int(KBLOCK_BYTES / op_b))
    stage = [(t.m * a_b + t.n * b_b) * kblock for t in tiles]
    stages = [min(MAX_STAGES, int((hw.smem_per_cta_bytes - EPILOGUE_SMEM_BYTES) // b))
              for b in stage]
    smem = [n * b + EPILOGUE_SMEM_BYTES for n, b in zip(stages, stage)]
    threads = np.array([t.threads for t in tiles])
    registers = np.array([t.registers for t in tiles])
    # resident CTAs per SM (the CUDA occupancy calculator's limits; registers in 256-register
    # warp units): the stages fill shared memory, so nearly every tile runs one CTA per SM
    warps = ceil_div(threads, 32)
    per_warp = ceil_div(np.minimum(registers, hw.max_registers_per_thread) * 32, 256) * 256
    resident = np.maximum(1, np.minimum.reduce([
        np.full(len(tiles), hw.max_ctas_per_sm), hw.max_warps_per_sm // warps,
        hw.registers_per_sm // (per_warp * warps), hw.smem_per_sm_bytes // np.array(smem)]))
    return {"tiles": tiles, "kblock": kblock,
            "m": np.array([t.m for t in tiles]), "n": np.array([t.n for t in tiles]),
            "cluster": np.array([t.cluster_m for t in tiles]),
            "cluster_n": np.array([t.cluster_n for t in tiles]),
            "b_share": np.array([0.5 if t.cta_pair else 1.0 for t in tiles]),
            "stages": np.array(stages), "fits": np.array(stages) >= 2,
            "smem": np.array(smem), "in_flight": np.array(stages) * np.array(stage),
            "threads": threads, "registers": registers, "resident": resident,
            "index2": np.tile(np.arange(len(tiles)), 2)}  # tile index of the split candidates


def fixed_costs(hw: Hardware, table: dict, index: np.ndarray, tiles: np.ndarray,
                k_split: np.ndarray, c_tile_bytes: np.ndarray, a_b: float, b_b: float,
                op_b: float, c_b: float, persistent: bool) -> tuple[dict, np.ndarray]:
    """The exposed prologue and epilogue of each candidate (module docstring, "Fixed costs"):
    serial work per resource (totals over the kernel, as the engine divides work over the CTAs
    and multiplies by the busiest SM's count) and the serial DRAM round trips.

    Per exposed CTA: its first stage (min(k-block, K of a split) rows of A and B; B once per
    cluster from L2, half of it per SM of a CTA pair in shared memory) and its output tile
    (`c_tile_bytes`, the unpadded output per tile, through L2; the whole tm × tn tile written to
    and read from shared memory). The busiest SM exposes R = 1 (persistent) or ceil(its CTAs /
    resident CTAs) (non-persistent) of them, so the kernel's total is tiles · R / busiest."""
    tm, tn = table["m"][index], table["n"][index]
    cluster, b_share = table["cluster"][index], table["b_share"][index]
    cluster_n = table["cluster_n"][index]
    first = np.minimum(table["kblock"], k_split)
    busiest = ceil_div(tiles, hw.sm_count)
    rounds = (np.ones_like(busiest) if persistent
              else ceil_div(busiest, table["resident"][index]))
    exposed = tiles * rounds / busiest
    smem = exposed * (first * (tm + tn * b_share) * op_b + 2.0 * tm * tn * c_b)
    l2 = exposed * (first * (tm * a_b / cluster_n + tn * b_b / cluster) + c_tile_bytes)
    return {"smem": smem, "l2": l2}, (rounds - 1).astype(float)


@functools.lru_cache(maxsize=256)
def tile_facts(hw: Hardware, compute: str, a_b: float, b_b: float, c_b: float,
               tiles: tuple[Tile, ...] | None = None) -> dict:
    """`tile_table` as plain Python lists (the scalar tile search, perfmodel.predict):
    the same values, read without numpy's per-call cost on six-element arrays."""
    t = tile_table(hw, compute, a_b, b_b, c_b, tiles)
    out = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in t.items()}
    out["tiles"] = t["tiles"]
    return out


def hbm_operand_bytes_scalar(hw: Hardware, m: int, n: int, k: int, tm: int, tn: int,
                             a_bytes: float, b_bytes: float, a_b: float, b_b: float,
                             batch: int = 1) -> float:
    """`hbm_operand_bytes` of one tile shape in plain Python: the same operations in the same
    order, so the same IEEE doubles (integers stay exact below 2^53 either way; Python's round
    and numpy's both round half to even)."""
    tiles_m, tiles_n = -(-m // tm), -(-n // tn)
    per_wave = hw.sm_count
    r = min(max(round(math.sqrt(per_wave * tn * b_b / (tm * a_b))), 1), tiles_m)
    c = min(math.ceil(per_wave / r), tiles_n)
    waves = (tiles_m * tiles_n) / (r * c)
    hbm = waves * (r * tm * a_b + c * tn * b_b) * k * batch
    hbm = min(max(hbm, a_bytes + b_bytes), tiles_n * a_bytes + tiles_m * b_bytes)
    return a_bytes + b_bytes if a_bytes + b_bytes <= 0.5 * hw.l2_capacity_bytes else hbm


@functools.lru_cache(maxsize=65536)
def _candidates(shape_key: tuple, hw: Hardware) -> KernelCandidates:
    """Memoized kernel candidates per (shape, dtypes, GPU): model graphs repeat the same GEMMs
    in every layer, so the candidates are built (and the engine's pick, memoized per candidate
    set, is made) once per distinct shape."""
    (m, n, k, batch, dtype, a_dtype, b_dtype, out_dtype, count, fp8_scaling, persistent,
     tile) = shape_key
    g = Gemm(m=m, n=n, k=k, batch=batch, dtype=dtype, a_dtype=a_dtype, b_dtype=b_dtype,
             out_dtype=out_dtype, count=count, fp8_scaling=fp8_scaling, persistent=persistent,
             tile=tile)
    return g.kernel_candidates(hw)



def candidate_launch(w: dict, i: int) -> tuple[LaunchShape, str, Overlap | None]:
    """Tile candidate `i` of a GEMM-family work table (Gemm, GroupedGemm): its launch, its label
    (`128x256x64x2sm cluster 2x1`) and, where FP8 block scales are promoted on the CUDA cores,
    the promotion's overlap with the MMAs."""
    tile = w["tile"][i]
    launch = LaunchShape(ctas=int(w["ctas"][i]), threads_per_cta=tile.threads,
                         registers_per_thread=tile.registers,
                         smem_per_cta_bytes=int(w["smem"][i]),
                         bytes_in_flight_per_cta=float(w["in_flight"][i]))
    label = (f"{tile.m}x{tile.n}x{w['kblock']}" + ("x2sm" if tile.cta_pair else "")
             + (f" cluster {tile.cluster_m}x1" if tile.cluster_m > 1 else ""))
    overlap = Overlap(("tensor:fp8",), ("fma",), 0.0) if w["promoted"] else None
    return launch, label, overlap


def fp8_blocks_promoted(hw: Hardware) -> bool:
    """Block-scaled FP8 on tensor cores that take no scales (no block-scaled MMA kind for it:
    Hopper's wgmma): the partial sums are scaled on the CUDA cores every FP8_BLOCK of K
    (DeepSeek-V3 §3.3.2). GEMMs, grouped GEMMs and MoE experts ask it."""
    return "mxfp8" not in hw.block_scaled_mma


class Gemm(Op):
    """C = A·B with M the token/row dimension and K the reduction (docs/graph-format.md "gemm")."""

    name = "gemm"
    EXAMPLE = dict(m=4096, n=4096, k=4096, dtype="bf16")
    PARAMS = {
        "m": positive("rows", "rows of A and C (tokens)"),
        "n": positive("columns", "columns of B and C (output features)"),
        "k": positive("elements", "reduction dimension"),
        "dtype": Param("dtype", required=True, choices=MMA_DTYPES,
                       doc="tensor-core input type (sets the MMA rate); fp32 runs on the FMA pipe"),
        "batch": positive("", "independent GEMMs in one batched launch", False, 1),
        "out_dtype": Param("dtype", default="bf16", doc="type of C"),
        "a_dtype": Param("dtype", default=None, nullable=True, doc="A storage type (= dtype)"),
        "b_dtype": Param("dtype", default=None, nullable=True,
                         doc="B storage type (= dtype); narrower than dtype means dequant in the "
                             "mainloop (e.g. w4a16: dtype bf16, b_dtype int4)"),
        "count": positive("", "identical GEMMs back to back (separate launches)", False, 1),
        "fp8_scaling": Param("choice", default="tensor", choices=("tensor", "block"),
                             doc="fp8 scales: one per tensor, or DeepSeek-V3 blocks (1x128 "
                                 "activations, 128x128 weights) promoted on the CUDA cores"),
        "persistent": Param("bool", default=None, nullable=True,
                            doc="persistent warp-specialized kernel: prologue and epilogue "
                                "exposed once per SM, not once per CTA round (none: the ISA's "
                                "default, true for wgmma/tcgen05, false for mma_sync)"),
        "dispatch": Param("choice", default="best", choices=DISPATCHES,
                          doc="which kernel runs: best (the fastest tile and split-K the model "
                              "offers, cuBLAS's heuristic idealized) or an engine's own table by "
                              "M (vllm-0.10.2, vllm-0.24.0: vLLM's per-tensor FP8 CUTLASS "
                              "kernels as that release picks them; ops/gemm_dispatch.py)"),
        "tile": Param("str", default=None, nullable=True,
                      doc="one fixed kernel: its CUTLASS tile 'MxN' or 'MxN cluster AxB' (the "
                          "CTA pair's on tcgen05), no split-K (none: dispatch decides)"),
        "swap_ab": Param("bool", default=False,
                         doc="the kernel runs the transposed problem (C^T = B^T A^T: the "
                             "weight's rows fill the MMA's M, as CUTLASS swap-AB kernels for "
                             "few tokens)"),
    }
    SIZE_PARAMS = ("m", "n", "k", "batch", "count")
    TENSORS = (("batch", "m", "k"), ("batch", "k", "n"), ("batch", "m", "n"))

    def check(self, v):
        out = []
        if v["fp8_scaling"] == "block" and tensor_dtype(v["dtype"]) != "fp8":
            out.append(("fp8_scaling", f"block scaling applies to fp8 GEMMs, not {v['dtype']}"))
        if v["tile"] is not None and v["dispatch"] != "best":
            out.append(("tile", f"a fixed tile replaces the dispatch table: give one of tile "
                                f"and dispatch ({v['dispatch']!r}), not both"))
        if (v["tile"] is not None or v["swap_ab"]) and tensor_dtype(v["dtype"]) == "fp32":
            out.append(("tile", "fp32 runs the SIMT kernel: no tensor-core tile to fix"))
        if v["swap_ab"] and v["fp8_scaling"] == "block":
            out.append(("swap_ab", "block-scaled FP8 promotes per 128-wide weight block along "
                                   "N; swap-AB is modelled for per-tensor scales only"))
        return out

    @property
    def flop(self) -> float:
        return 2.0 * self.m * self.n * self.k * self.batch

    def resolved(self, hw: Hardware) -> "Gemm":
        """The GEMM as its kernel runs it: the dispatch table's fixed kernel in place of the
        search (ops.gemm_dispatch), and a swap-AB kernel's problem transposed (M and N, A and
        B exchanged; the same FLOP and bytes). Itself where neither applies."""
        g = self
        if self.dispatch != "best":
            choice = dispatched_kernel(self.dispatch, hw.mma_instruction,
                                       tensor_dtype(self.dtype), self.block_scaled_fp8,
                                       self.m, self.n, self.k)
            g = self.with_params(dispatch="best")
            if choice is not None:
                g = g.with_params(tile=choice.tile, swap_ab=choice.swap_ab,
                                  persistent=(choice.persistent if self.persistent is None
                                              else self.persistent))
        if g.swap_ab:
            g = g.with_params(m=g.n, n=g.m, a_dtype=g.b_dtype, b_dtype=g.a_dtype, swap_ab=False)
        return g

    def element_bytes(self) -> tuple[float, float, float]:
        """Bytes per element of A, B and C as stored (block scales amortized)."""
        return (bytes_per_element(self.a_dtype or self.dtype),
                bytes_per_element(self.b_dtype or self.dtype), bytes_per_element(self.out_dtype))

    def row_bytes(self) -> tuple[float, float, float]:
        """The bytes of one row of A [M, K], of B as a linear layer stores it ([N, K], PyTorch's
        `weight`) and of C [M, N]: the strides TMA must address."""
        a, b, c = self.element_bytes()
        return self.k * a, self.k * b, self.n * c

    def tma_aligned(self) -> bool:
        """Whether TMA can address every operand (rows_tma_aligned)."""
        return bool(rows_tma_aligned(self.k, self.n, self.element_bytes()))

    def has_legacy_path(self, hw: Hardware) -> bool:
        """Whether a misaligned shape of this GEMM leaves TMA for `hw`'s legacy tensor path: a
        tensor-core type the GPU's mma.sync has, on a GPU whose own path is TMA-fed (SIMT FP32
        and mma.sync GPUs run as they are; FP4 too: cuBLASLt requires aligned NVFP4/MXFP4
        operands)."""
        compute = tensor_dtype(self.dtype)
        return (compute != "fp32" and hw.mma_instruction != "mma_sync"
                and compute in hw.mma_sync_flop_per_sm_per_clk)

    def kernel_hardware(self, hw: Hardware) -> Hardware:
        """The GPU as this GEMM's kernel sees it: where a row stride is not a multiple of 16
        bytes (a vocabulary of 51,866 in BF16: 103,732 B per row of C), no TMA kernel (wgmma,
        tcgen05) can run it, and cuBLAS falls back to its Ampere-style kernels (cp.async and
        mma.sync: Hardware.without_tma) where it has them (has_legacy_path); those with a
        narrower alignment also load in smaller vectors, which is not modelled."""
        if self.tma_aligned() or not self.has_legacy_path(hw):
            return hw
        return hw.without_tma()

    def fixed_tiles(self, hw: Hardware) -> tuple[Tile, ...] | None:
        """The one tile a fixed kernel (`tile`) runs, None for the search."""
        return None if self.tile is None else (fixed_tile(self.tile, hw.mma_instruction),)

    @property
    def block_scaled_fp8(self) -> bool:
        return self.fp8_scaling == "block"

    def unique_bytes(self) -> tuple[float, float, float]:
        return operand_bytes(self.m, self.n, self.k, self.batch, self.element_bytes(),
                             self.block_scaled_fp8)

    def demand(self, hw: Hardware) -> KernelCandidates:
        compute = tensor_dtype(self.dtype)
        if compute != "fp32" and not hw.supports(compute):
            raise InputError(f"gemm dtype '{self.dtype}' is not supported by {hw.name}'s tensor "
                             f"cores ({hw.mma_instruction}; supported: "
                             f"{', '.join(sorted(hw.tensor_flop_per_sm_per_clk))})")
        return _candidates(self.resolved(hw)._shape_key(), hw)

    def _shape_key(self) -> tuple:
        return (self.m, self.n, self.k, self.batch, self.dtype, self.a_dtype, self.b_dtype,
                self.out_dtype, self.count, self.fp8_scaling, self.persistent, self.tile)

    def is_persistent(self, hw: Hardware) -> bool:
        if self.persistent is not None:
            return self.persistent
        return default_persistent(hw, tensor_dtype(self.dtype))

    # ---- the kernel search -------------------------------------------------------------------
    def candidates(self, hw: Hardware) -> tuple[dict, np.ndarray, np.ndarray]:
        """(tile table, tile index, split-K) of the kernels worth trying: every tile with no
        split, and, where its tiles alone leave SMs idle (what split-K is for), with every split
        factor from 2 to MAX_SPLIT_K that leaves each split at least two (padded) k-blocks
        (`_work`'s validity). Every factor, not only those that fill one or two waves: a kernel
        for K also runs any smaller K (zero padding), so the time must not fall as K grows, and
        a factor that K makes available stays available for every larger K."""
        fixed = self.fixed_tiles(hw)
        table = tile_table(hw, *self._dtype_key(), fixed)
        tiles_mn = ceil_div(self.m, table["m"]) * ceil_div(self.n, table["n"]) * self.batch
        n = len(tiles_mn)
        short = np.flatnonzero(tiles_mn < hw.sm_count)
        # the CUTLASS NVFP4 kernel has no split-K (FP4_CUTLASS_TILES), nor has a fixed kernel
        # (an engine's compiled configuration runs GemmUniversalMode::kGemm)
        splits = np.arange(2, 2 if fixed or fp4_cutlass(hw, tensor_dtype(self.dtype))
                           else MAX_SPLIT_K + 1)
        # a split is worth trying when K holds at least two k-blocks for each part
        splits = splits[ceil_div(self.k, splits) > table["kblock"]]
        index = np.concatenate([np.arange(n), np.repeat(short, len(splits))])
        split = np.concatenate([np.ones(n, dtype=np.int64), np.tile(splits, len(short))])
        return table, index, split

    def _dtype_key(self) -> tuple:
        return (tensor_dtype(self.dtype), *self.element_bytes())

    def promotes_on_cuda_cores(self, hw: Hardware) -> bool:
        """Block-scaled FP8 where it is promoted on the CUDA cores (`fp8_blocks_promoted`)."""
        return self.block_scaled_fp8 and fp8_blocks_promoted(hw)

    def kernel_candidates(self, hw: Hardware) -> KernelCandidates:
        """Every (tile, split-K) kernel worth trying, as arrays for the engine to score at once;
        the engine keeps the fastest — cuBLAS's heuristic, idealized."""
        w = self._work(hw, *self.candidates(hw))
        # promotion is serial with the MMAs it waits for
        overlap = Overlap(("tensor:fp8",), ("fma",), 0.0) if w["promoted"] else None
        return KernelCandidates(
            work=w["work"], ctas=w["ctas"], threads_per_cta=w["threads"],
            registers_per_thread=w["registers"], smem_per_cta_bytes=w["smem"],
            bytes_in_flight_per_cta=w["in_flight"], kernels=w["kernels"], valid=w["valid"],
            overlap=overlap, demand_at=functools.partial(self._demand_at, w),
            what=f"gemm {self!r}", serial_work=w["serial_work"],
            serial_round_trips=w["serial_round_trips"])

    def _work(self, hw: Hardware, table: dict, index: np.ndarray, split: np.ndarray) -> dict:
        """Work per resource and launch shape of every candidate, as numpy arrays."""
        compute, a_b, b_b, c_b = self._dtype_key()
        op_b = DTYPE_BYTES[compute]  # element payload; block scales ride along separately
        kblock = table["kblock"]
        tm, tn = table["m"][index], table["n"][index]
        cluster, b_share = table["cluster"][index], table["b_share"][index]
        cluster_n = table["cluster_n"][index]

        k_split = ceil_div(self.k, split)
        k_pad = ceil_div(k_split, kblock) * kblock
        tiles_m, tiles_n = ceil_div(self.m, tm), ceil_div(self.n, tn)
        tiles = tiles_m * tiles_n * self.batch * split
        # each split keeps at least two (padded) k-blocks: K > one k-block per part
        valid = table["fits"][index] & ((split == 1) | (k_split > kblock))
        promoted = self.promotes_on_cuda_cores(hw)
        if promoted:
            valid &= tn <= FP8_BLOCK  # sm90 blockwise: one weight scale per 128-wide N tile

        # the MMAs' tensor-pipe work, narrow FP4 tiles at the block-scaled granule (FP4_MMA_N)
        mma_flop = tiles * 2.0 * tm * fp4_mma_n(hw, compute, tn) * k_pad
        work: dict[str, np.ndarray] = {}
        if compute != "fp32":
            work[f"tensor:{compute}"] = mma_flop
        work["fma"] = self._fma_work(compute, op_b, b_b, tiles, tm, tn, k_pad, promoted)
        # MMA operands read from shared memory once per tile per k-block (FA4's smem-cycle
        # accounting); a CTA pair splits B, each SM holding and reading half of it; the epilogue
        # writes and reads the output tile once (registers → smem → TMA store).
        work["smem"] = tiles * k_pad * (tm * op_b + tn * op_b * b_share) + tiles * 2.0 * tm * tn * c_b

        a_bytes, b_bytes, c_bytes = self.unique_bytes()
        # L2 → SM: each tile streams its A and B panels; TMA multicast reads B once per cluster
        # along M (A once per cluster along N)
        l2 = tiles * (tm * a_b / cluster_n + tn * b_b / cluster) * k_split + c_bytes
        hbm = self._hbm_operand_bytes(hw, tm, tn, a_bytes, b_bytes, a_b, b_b) + c_bytes
        partial = split * self.m * self.n * 4.0 * self.batch  # FP32 partial sums of split-K
        splitk = split > 1
        l2 = l2 + np.where(splitk, 2 * partial, 0.0)
        hbm = hbm + np.where(splitk & (2 * partial > hw.l2_capacity_bytes), 2 * partial, 0.0)
        work["l2"], work["hbm"] = l2, hbm
        # the GEMM kernel's own output per tile: C, or a split's FP32 partial tile
        c_tile = np.where(splitk, partial / split, c_bytes) / (tiles / split)
        serial, round_trips = fixed_costs(hw, table, index, tiles, k_split, c_tile, a_b, b_b,
                                          op_b, c_b, self.is_persistent(hw))

        return {"work": work, "ctas": tiles, "threads": table["threads"][index],
                "registers": table["registers"][index],
                "valid": valid, "in_flight": table["in_flight"][index],
                "smem": table["smem"][index], "stages": table["stages"][index],
                "kernels": np.where(splitk, 2, 1), "kblock": kblock,
                "tile": [table["tiles"][i] for i in index], "split": split,
                "promoted": promoted, "serial_work": serial,
                "serial_round_trips": round_trips, "persistent": self.is_persistent(hw),
                "useful_fma": self.useful_fma(hw)}

    def _fma_work(self, compute: str, op_b: float, b_b: float, tiles, tm, tn, k_pad,
                  promoted: bool):
        """FMA-pipe thread operations of `tiles` tiles of tm × tn outputs over k_pad of K
        (arrays of candidates, or the problem itself unpadded: one tile of m × n per batch)."""
        fma = tiles * tm * tn * 1.0  # epilogue alpha/beta scaling and conversion
        if compute == "fp32":
            fma = fma + tiles * tm * tn * k_pad * 1.0  # SIMT: one FFMA per multiply-add
        if any(bytes_per_element(x) < op_b for x in (self.a_dtype, self.b_dtype) if x):
            # mixed-input GEMM: each CTA converts its narrow operand tile to the MMA type
            # (convert + scale per element, on the FMA pipe)
            narrow_b = bool(self.b_dtype) and b_b < op_b
            fma = fma + tiles * k_pad * (tn if narrow_b else tm) * 2
        if promoted:
            # DeepSeek-V3 §3.3.2 / CUTLASS sm90 blockwise: wgmma takes no scales, so every 128
            # of K the partial sums leave the tensor core and are scaled into FP32 accumulators
            # on the CUDA cores (one FFMA per accumulator), after the MMAs drain. Blackwell's
            # tcgen05 block-scaled MMA applies the scales in the tensor core.
            fma = fma + tiles * tm * tn * (k_pad / FP8_BLOCK)
        return fma

    def useful_fma(self, hw: Hardware) -> float:
        """The FMA-pipe work the problem itself needs (no padded tiles, no split-K): what the
        roofline counts (Demand.roofline_work)."""
        compute, _, b_b, _ = self._dtype_key()
        return float(self._fma_work(compute, DTYPE_BYTES[compute], b_b, self.batch, self.m,
                                    self.n, self.k, self.promotes_on_cuda_cores(hw)))

    def _demand_at(self, w: dict, i: int) -> Demand:
        split = int(w["split"][i])
        a_bytes, b_bytes, c_bytes = self.unique_bytes()
        launch, label, overlap = candidate_launch(w, i)
        return Demand(work={r: float(v[i]) for r, v in w["work"].items()}, launch=launch,
                      flop=self.flop, hbm_bytes=a_bytes + b_bytes + c_bytes, overlap=overlap,
                      kernels=int(w["kernels"][i]),  # split-K: GEMM, then a reduction kernel
                      repeat=self.count,
                      serial_work={r: float(v[i]) for r, v in w["serial_work"].items()},
                      serial_round_trips=float(w["serial_round_trips"][i]),
                      roofline_work={"fma": w["useful_fma"]},
                      details={"tile": label, "split_k": split, "stages": int(w["stages"][i]),
                               "tiles": int(w["ctas"][i]), "persistent": w["persistent"]})

    def _hbm_operand_bytes(self, hw: Hardware, tm, tn, a_bytes: float, b_bytes: float,
                           a_b: float, b_b: float):
        return hbm_operand_bytes(hw, self.m, self.n, self.k, tm, tn, a_bytes, b_bytes, a_b, b_b,
                                 self.batch)


def hbm_operand_bytes(hw: Hardware, m, n: int, k: int, tm, tn, a_bytes, b_bytes, a_b: float,
                      b_b: float, batch=1):
    """HBM reads of A and B of `batch` GEMMs of m × n × k (A and B bytes over all of them) with
    L2 reuse across co-resident tiles; numpy arrays of tile sizes (and of m, a_bytes, b_bytes
    for several problems) broadcast."""
    tiles_m, tiles_n = ceil_div(m, tm), ceil_div(n, tn)
    per_wave = hw.sm_count  # GEMM tiles fill one CTA per SM
    # rasterize a wave as an r × c block of tiles minimizing (r·tm·a + c·tn·b)
    r = np.minimum(np.maximum(np.round(np.sqrt(per_wave * tn * b_b / (tm * a_b))), 1), tiles_m)
    c = np.minimum(np.ceil(per_wave / r), tiles_n)
    waves = (tiles_m * tiles_n) / (r * c)
    hbm = waves * (r * tm * a_b + c * tn * b_b) * k * batch
    # never below one read of each operand, never above no reuse at all
    hbm = np.minimum(np.maximum(hbm, a_bytes + b_bytes), tiles_n * a_bytes + tiles_m * b_bytes)
    # operands that fit in L2 (half of it left for C and other traffic) are read once
    return np.where(a_bytes + b_bytes <= 0.5 * hw.l2_capacity_bytes, a_bytes + b_bytes, hbm)
