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
Like cuBLAS's heuristics, the op tries each architecture's tile shapes and split factors and
keeps the fastest prediction.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from ..demand import Demand, LaunchShape
from ..engine import pipes_time_s
from ..errors import InputError
from ..hardware import Hardware
from ..units import DTYPE_BYTES, bytes_per_element, tensor_dtype
from .base import Op, Param, positive

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
MMA_DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8", "fp8_e4m3", "fp8_e5m2", "int8", "mxfp8",
              "nvfp4", "mxfp4")


@dataclass(frozen=True)
class Tile:
    m: int
    n: int
    threads: int
    registers: int
    cluster_m: int = 1      # CTAs along M sharing each B tile by TMA multicast (one L2 read)
    cta_pair: bool = False  # Blackwell cta_group::2: two SMs split one B tile in shared memory


# Tile shapes per architecture. Hopper: wgmma m64nNk16, one producer + tm/64 consumer
# warpgroups, 2x1 clusters with B multicast (CUTLASS KernelTmaWarpSpecialized{Cooperative,
# Pingpong}, ClusterShape 2x1x1 defaults). Blackwell: tcgen05 with M = 64/128 per SM and 2-SM
# pairs (CUTLASS sm100 1SM/2SM kernels). Ampere: mma.sync with cp.async, 4-8 warps, no clusters.
TILES: dict[str, tuple[Tile, ...]] = {
    "hopper": (Tile(128, 256, 384, 168, 2), Tile(256, 128, 384, 168, 2),
               Tile(128, 128, 384, 168, 2), Tile(64, 256, 256, 168, 2),
               Tile(64, 128, 256, 168, 2), Tile(128, 128, 384, 168, 1)),
    "blackwell": (Tile(128, 256, 256, 128, 2, cta_pair=True), Tile(128, 256, 256, 128, 1),
                  Tile(128, 128, 256, 128, 2, cta_pair=True), Tile(128, 128, 256, 128, 1),
                  Tile(64, 256, 256, 128, 1), Tile(64, 128, 256, 128, 1)),
    "ampere": (Tile(128, 256, 256, 232), Tile(256, 128, 256, 232), Tile(128, 128, 256, 128),
               Tile(64, 128, 128, 128), Tile(64, 64, 128, 128)),
}
SIMT_TILE = Tile(128, 128, 256, 128)  # fp32 without tensor cores (sgemm)


def _ceil(a: float, b: float) -> int:
    return -(-int(a) // int(b))


@functools.lru_cache(maxsize=65536)
def _best_demand(shape_key: tuple, hw: Hardware) -> Demand:
    """Memoized demand of the fastest kernel per (shape, dtypes, GPU): model graphs repeat the
    same GEMMs in every layer, so the tile search runs once per distinct shape."""
    m, n, k, batch, dtype, a_dtype, b_dtype, out_dtype, count = shape_key
    g = Gemm(m=m, n=n, k=k, batch=batch, dtype=dtype, a_dtype=a_dtype, b_dtype=b_dtype,
             out_dtype=out_dtype, count=count)
    tile, split = g.fastest_candidate(hw)
    return g._tile_demand(hw, tile, split)


class Gemm(Op):
    """C = A·B with M the token/row dimension and K the reduction (SPEC.md `gemm`)."""

    name = "gemm"
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
    }
    SIZE_PARAMS = ("m", "n", "k", "batch", "count")

    @property
    def flop(self) -> float:
        return 2.0 * self.m * self.n * self.k * self.batch

    def unique_bytes(self) -> tuple[float, float, float]:
        a = bytes_per_element(self.a_dtype or self.dtype)
        b = bytes_per_element(self.b_dtype or self.dtype)
        c = bytes_per_element(self.out_dtype)
        return (self.m * self.k * a * self.batch, self.k * self.n * b * self.batch,
                self.m * self.n * c * self.batch)

    def demand(self, hw: Hardware) -> Demand:
        compute = tensor_dtype(self.dtype)
        if compute != "fp32" and not hw.supports(compute):
            raise InputError(f"gemm dtype '{self.dtype}' is not supported by {hw.name}'s tensor "
                             f"cores ({hw.architecture}; supported: "
                             f"{', '.join(sorted(hw.tensor_flop_per_sm_per_clk))})")
        return _best_demand(self._shape_key(), hw)

    def _shape_key(self) -> tuple:
        return (self.m, self.n, self.k, self.batch, self.dtype, self.a_dtype, self.b_dtype,
                self.out_dtype, self.count)

    def fastest_candidate(self, hw: Hardware) -> tuple[Tile, int]:
        """(tile, split-K) with the lowest predicted time — cuBLAS's heuristic, idealized."""
        best: tuple[float, Tile, int] | None = None
        for tile, split, d in self.candidates(hw):
            t = pipes_time_s(d, hw)
            if best is None or t < best[0]:
                best = (t, tile, split)
        if best is None:
            raise InputError(f"gemm {self!r}: no tile shape fits {hw.name}'s shared memory")
        return best[1], best[2]

    # ---- candidate kernels -------------------------------------------------------------------
    def candidates(self, hw: Hardware):
        compute = tensor_dtype(self.dtype)
        tiles = (SIMT_TILE,) if compute == "fp32" else TILES[hw.architecture]
        for tile in tiles:
            tiles_mn = _ceil(self.m, tile.m) * _ceil(self.n, tile.n) * self.batch
            splits = {1}
            if tiles_mn < hw.sm_count:
                # split factors that fill one or two waves of SMs (what split-K is for), at
                # most as many as leave each split two k-blocks
                most = max(1, min(MAX_SPLIT_K, self.k // (2 * self._kblock(hw))))
                splits |= {min(most, max(1, w * hw.sm_count // tiles_mn)) for w in (1, 2)}
            for s in sorted(splits):
                d = self._tile_demand(hw, tile, s)
                if d is not None:
                    yield tile, s, d

    def _kblock(self, hw: Hardware) -> int:
        """K elements per pipeline stage."""
        compute = tensor_dtype(self.dtype)
        op_b = DTYPE_BYTES[compute]
        if compute == "fp32" or hw.architecture == "ampere":
            return AMPERE_KBLOCK_ELEMS * max(1, int(2 / op_b))
        return max(16, int(KBLOCK_BYTES / op_b))

    def _tile_demand(self, hw: Hardware, tile: Tile, split: int) -> Demand | None:
        compute = tensor_dtype(self.dtype)
        a_b = bytes_per_element(self.a_dtype or self.dtype)
        b_b = bytes_per_element(self.b_dtype or self.dtype)
        c_b = bytes_per_element(self.out_dtype)
        op_b = DTYPE_BYTES[compute]  # element payload; block scales ride along separately
        kblock = self._kblock(hw)
        k_split = _ceil(self.k, split)
        if split > 1 and k_split < 2 * kblock:
            return None
        k_pad = _ceil(k_split, kblock) * kblock
        tm, tn = tile.m, tile.n
        tiles_m, tiles_n = _ceil(self.m, tm), _ceil(self.n, tn)
        tiles = tiles_m * tiles_n * self.batch * split

        # shared memory: pipeline stages + epilogue staging
        stage_bytes = (tm * a_b + tn * b_b) * kblock
        budget = hw.smem_per_cta_bytes - EPILOGUE_SMEM_BYTES
        stages = min(MAX_STAGES, int(budget // stage_bytes))
        if stages < 2:
            return None
        smem = stages * stage_bytes + EPILOGUE_SMEM_BYTES

        mma_flop = tiles * 2.0 * tm * tn * k_pad
        work: dict[str, float] = {}
        if compute == "fp32":
            work["fma"] = mma_flop / 2  # one FFMA per multiply-add
        else:
            work[f"tensor:{compute}"] = mma_flop
        # MMA operands read from shared memory once per tile per k-block (FA4's smem-cycle
        # accounting); a CTA pair splits B, each SM holding and reading half of it.
        b_share = 0.5 if tile.cta_pair else 1.0
        b_l2_share = 1.0 / tile.cluster_m  # multicast: one L2 read of B per cluster
        kblocks = k_pad / kblock
        work["smem"] = tiles * kblocks * kblock * (tm * op_b + tn * op_b * b_share)
        work["smem"] += tiles * 2.0 * tm * tn * c_b  # epilogue: registers → smem → TMA store
        work["fma"] = work.get("fma", 0.0) + tiles * tm * tn  # alpha/beta scaling, conversion
        narrow = [(x, bytes_per_element(x)) for x in (self.a_dtype, self.b_dtype) if x]
        if any(size < op_b for _, size in narrow):
            # mixed-input GEMM: each CTA converts its narrow operand tile to the MMA type
            # (convert + scale per element, on the FMA pipe)
            work["fma"] += tiles * k_pad * (tn if (self.b_dtype and b_b < op_b) else tm) * 2

        a_bytes, b_bytes, c_bytes = self.unique_bytes()
        l2_in = tiles * (tm * a_b + tn * b_b * b_l2_share) * k_split
        hbm_in = self._hbm_operand_bytes(hw, tile, a_bytes, b_bytes, a_b, b_b)
        work["l2"] = l2_in + c_bytes
        work["hbm"] = hbm_in + c_bytes
        kernels = 1
        if split > 1:
            partial = split * self.m * self.n * 4.0 * self.batch  # FP32 partial sums
            work["l2"] += 2 * partial
            if 2 * partial > hw.l2_capacity_bytes:
                work["hbm"] += 2 * partial
            kernels = 2  # cuBLAS/CUTLASS split-K-parallel: GEMM, then a reduction kernel
        launch = LaunchShape(ctas=tiles, threads_per_cta=tile.threads,
                             registers_per_thread=tile.registers, smem_per_cta_bytes=smem,
                             bytes_in_flight_per_cta=stages * stage_bytes)
        return Demand(work=work, launch=launch, flop=self.flop,
                      hbm_bytes=a_bytes + b_bytes + c_bytes, kernels=kernels,
                      repeat=self.count,
                      details={"tile": f"{tm}x{tn}x{kblock}" + ("x2sm" if tile.cta_pair else "")
                                + (f" cluster {tile.cluster_m}x1" if tile.cluster_m > 1 else ""),
                               "split_k": split, "stages": stages, "tiles": tiles})

    def _hbm_operand_bytes(self, hw: Hardware, tile: Tile, a_bytes: float, b_bytes: float,
                           a_b: float, b_b: float) -> float:
        """HBM reads of A and B with L2 reuse across co-resident tiles."""
        if a_bytes + b_bytes <= 0.5 * hw.l2_capacity_bytes:
            return a_bytes + b_bytes  # operands stay in L2 (half left for C and other traffic)
        tiles_m, tiles_n = _ceil(self.m, tile.m), _ceil(self.n, tile.n)
        per_wave = hw.sm_count  # GEMM tiles fill one CTA per SM
        # rasterize a wave as an r × c block of tiles minimizing (r·tm·a + c·tn·b)
        r = math.sqrt(per_wave * tile.n * b_b / (tile.m * a_b))
        r = min(max(1, round(r)), tiles_m)
        c = min(_ceil(per_wave, r), tiles_n)
        waves = (tiles_m * tiles_n) / (r * c)
        per_wave_bytes = (r * tile.m * a_b + c * tile.n * b_b) * self.k
        hbm = waves * per_wave_bytes * self.batch
        return min(max(hbm, a_bytes + b_bytes),
                   (tiles_n * a_bytes + tiles_m * b_bytes))  # never above no-reuse traffic
