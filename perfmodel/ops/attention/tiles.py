"""How a FlashAttention-style kernel cuts attention into tiles and CTAs.

The tile sizes each family launches (FA2 from its launch templates; FA3/FA4/cuDNN defaults
narrowed to what shared memory holds), the tile pairs a mask leaves to compute, and the grid:
one CTA per query tile (forward) or key tile (backward), or for decode, query rows of a KV head's
group packed into 64-row tiles with the KV sequence split across CTAs (flash-decoding).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from perfmodel.ops.attention.trtllm import (TRTLLM_GEN_DECODE, TRTLLM_GEN_KV_TILE, XQA_DESIGNS,
                                            fmha_v2_kv_step, trtllm_gen_decode_launch,
                                            trtllm_gen_mla_launch, xqa_launch)

# (block_m, block_n, threads, registers) per design: FA3 128x128 with 3 warpgroups (1 producer,
# 2 consumers); FA4 128x128 MMA tiles with 512 threads (MMA, softmax, correction and load warps;
# its forward CTA takes two query tiles, FA4_FWD_Q_STAGES); cuDNN on wgmma like FA3; cuDNN on
# tcgen05 ("cudnn_tcgen05") the same shape as FA4: two 128-row query tiles per CTA, two softmax
# warpgroups, four correction warps, 16 warps / 512 threads (cudnn-frontend 1.32.0,
# cudnn/sdpa/fwd/kernels/sm100/prefill_d128_f16.py, "TILES_Q=2 ... 16 warps / 512 threads",
# mirroring cuDNN's C++ SM100 prefill); FA2's tiles depend on head dim and GPU (fa2_tile).
# block_n is the widest key tile; kv_tile_width narrows it to what shared memory holds.
TILE = {"fa2": (128, 64, 128, 255), "fa3": (128, 128, 384, 168), "fa4": (128, 128, 512, 128),
        "cudnn": (128, 128, 384, 168), "cudnn_tcgen05": (128, 128, 512, 128),
        # TensorRT-LLM's kernels (perfmodel.ops.attention.trtllm has the sources). Context:
        # fmha_v2's Hopper warp-specialized flash kernel, a 128-thread DMA group and two
        # 128-thread compute groups of 64 query rows each (THREADS = 128 + NUM_COMPUTE_GROUPS *
        # 128, loop_step 64), 128-key steps at head dim <= 128 in 16-bit types; trtllm-gen's
        # Blackwell context kernels FA4's shape. Generation: XQA's kernels, whose decode tiles
        # are set by trtllm.xqa_launch.
        "trtllm_fmha_v2": (128, 128, 384, 168), "trtllm_gen": (128, 128, 512, 128),
        "xqa": (64, 256, 256, 128), "xqa_sm90": (64, 64, 384, 56),
        # trtllm-gen's generation kernels: the query tile and split are set by
        # trtllm.trtllm_gen_decode_launch; threads and registers as FA4's class (their cubins'
        # metadata is not in the sources read; assumed)
        TRTLLM_GEN_DECODE: (8, TRTLLM_GEN_KV_TILE, 512, 128)}
# Designs built like FA4: tcgen05 MMAs issued by one warp, two query tiles per forward CTA, FP32
# softmax math as packed FFMA2/FADD2, the output rescaled by a correction warpgroup only when a
# row maximum grows past a threshold
FA4_CLASS = ("fa4", "cudnn_tcgen05", "trtllm_gen", TRTLLM_GEN_DECODE)
# Designs whose context (prefill) kernel has no decode path: TensorRT-LLM runs its context FMHA
# on every context request, however few tokens, one CTA per (sequence, head, query tile)
PREFILL_ONLY = ("trtllm_fmha_v2", "trtllm_gen")
# FA4's forward CTA holds two 128-row query tiles, one per softmax warpgroup (flash_fwd_sm100.py:
# q_stage = 2, cta_tiler = (q_stage * m_block_size, n_block_size, head_dim))
FA4_FWD_Q_STAGES = 2
# K/V tiles in flight: the FA3 design double-buffers K and V (FlashInfer's port of it,
# prefill_sm90.cuh: NUM_STAGES_ = 2; flash_attn/cute/interface.py: num_stages=2); with the Q tile
# they must fit the CTA's shared memory, which narrows the key tile at long head dims
KV_STAGES = 2
# The key tile is the K dimension of the PV MMA, so its width steps by the MMA's K step: 32 bytes
# of operand (k16 for 16-bit types, k32 for FP8; PTX ISA wgmma/tcgen05 shapes)
MMA_K_STEP_BYTES = 32
DECODE_MAX_SEQ_Q = 16   # up to this many new tokens (speculative decoding): decode path
DECODE_TILE_M = 64      # MMA rows per decode tile (wgmma / tcgen05 M = 64)
# Kernel families that decode through their forward kernel, its whole query tile per (sequence,
# KV head; not TensorRT-LLM's kernels built on the same design):
# FlashAttention-3 (hopper/, which vLLM's vllm-flash-attn and SGLang's sgl-kernel build) has no
# decode kernel of its own; with PackGQA the query rows of a KV head's group fill its bm-row tile
# (two consumer warpgroups of 64 rows), and both warpgroups run the MMAs and the softmax on every
# row, padding included. Evidence (AIConfigurator's vLLM 0.24.0 FA3 generation table, H100/H200:
# validate/data/aiconfigurator_vllm_attention.csv): an FP8 cache decodes at ~2.7 TB/s where a
# BF16 one reaches ~4.1, the padded rows' exponentials and MMAs binding the FP8 kernel, which a
# 64-row tile leaves memory-bound. (FA3 takes 192-row tiles at head dims <= 96; kept at bm here.)
FULL_TILE_DECODE = ("fa3",)
# FlashAttention-2's split-KV (decode) kernel: 64-row query tiles, key tiles by head dim, and its
# split heuristic's constants (csrc/flash_attn/flash_api.cpp, set_params_splitkv and
# num_splits_heuristic, v2.8.3): 2 CTA slots per SM ("we're using 128 threads per block"), no
# split once the grid fills 80 % of them, else the fewest splits within 85 % of the best wave
# efficiency, at most 128
FA2_SPLITKV_THREADS = 128
FA2_SPLIT_SLOTS_PER_SM = 2
FA2_SPLIT_FILL = 0.8
FA2_SPLIT_EFFICIENCY_SHARE = 0.85
FA2_MAX_SPLITS = 128
# FA2 backward warp grids (AtomLayoutMSdP, AtomLayoutNdKV, AtomLayoutMdQ) up to each head dim
FA2_BWD_WARP_LAYOUT = {64: (4, 4, 4), 96: (2, 4, 4), 128: (2, 4, 2), 256: (4, 2, 2)}


def kv_tile_width(hw, bm: int, bn: int, d: int, dv: int, element_bytes: float,
                  v_transposed: bool, shared_kv: bool = False,
                  kv_element_bytes: float | None = None) -> int:
    """The widest key tile ≤ bn whose KV_STAGES K and V buffers fit in shared memory beside the
    bm × d Q tile. FP8 wgmma kernels keep a transposed copy of each V tile as well; with MLA's
    latent cache V is part of the K buffer. At head dim 256 in 16-bit types a 128 × 128 tile
    cannot fit (320 KB); the rule gives 128 × 80 (and FlashMLA's 64-key blocks for 576/512)."""
    step = int(MMA_K_STEP_BYTES // element_bytes)
    q_bytes = tile_smem_bytes(bm, 0, d, dv, element_bytes, v_transposed, shared_kv,
                              kv_element_bytes)
    per_key = tile_smem_bytes(0, 1, d, dv, element_bytes, v_transposed, shared_kv,
                              kv_element_bytes)
    fits = int((hw.smem_per_cta_bytes - q_bytes) // per_key)
    return max(step, min(bn, fits // step * step))


def tile_smem_bytes(bm: int, bn: int, d: int, dv: int, element_bytes: float,
                    v_transposed: bool, shared_kv: bool = False,
                    kv_element_bytes: float | None = None) -> float:
    """Shared memory of the bm × d Q tile and KV_STAGES buffers of bn keys: K's row, V's row
    (none when V lives inside MLA's latent K buffer) and, in FP8 wgmma kernels, V transposed.
    A KV cache narrower than the MMA dtype (kv_element_bytes) keeps its stages in the storage
    type and one staging tile of K and V in the MMA dtype (FlashInfer's one-byte-KV repack)."""
    kv_row = d + (0 if shared_kv else dv) + (dv if v_transposed else 0)
    if kv_element_bytes is None or kv_element_bytes == element_bytes:
        return (bm * d + KV_STAGES * bn * kv_row) * element_bytes
    stored = d + (0 if shared_kv else dv)
    return ((bm * d + KV_STAGES * bn * (kv_row - stored) + bn * stored) * element_bytes
            + KV_STAGES * bn * stored * kv_element_bytes)


def fa2_splitkv_block_n(head_dim: int) -> int:
    """Key tile of FA2's split-KV kernel (flash_api.cpp set_params_splitkv)."""
    return 256 if head_dim <= 64 else 128 if head_dim <= 128 else 64


def fa2_num_splits(ctas: int, slots: int, kv_tiles: int) -> int:
    """How many pieces FA2 splits each KV sequence into (num_splits_heuristic): none when the
    unsplit grid almost fills the GPU; else the fewest splits whose wave efficiency (waves /
    whole waves) is within FA2_SPLIT_EFFICIENCY_SHARE of the best, skipping counts that leave
    the key tiles per split unchanged."""
    if ctas >= FA2_SPLIT_FILL * slots:
        return 1
    most = min(FA2_MAX_SPLITS, slots, kv_tiles)
    eligible = [n for n in range(1, most + 1)
                if n == 1 or math.ceil(kv_tiles / n) != math.ceil(kv_tiles / (n - 1))]
    efficiency = {n: (ctas * n / slots) / math.ceil(ctas * n / slots) for n in eligible}
    best = max(efficiency.values())
    return next(n for n in eligible if efficiency[n] >= FA2_SPLIT_EFFICIENCY_SHARE * best)


def fa2_tile(hw, head_dim: int, direction: str, dropout: bool = False) -> tuple[int, int, int]:
    """(block_m, block_n, threads) FlashAttention-2 launches for this head dim on this GPU
    (csrc/flash_attn/src/flash_{fwd,bwd}_launch_template.h, v2.8.3, sm80/sm90 paths; dropout
    narrows the forward key tile). Each warp owns 16-row slices of the query tile and reads the
    whole K and V tiles itself."""
    if direction == "bwd":
        return ((128, 128, 256) if head_dim <= 64 else (64, 128, 256) if head_dim <= 128
                else (64, 64, 256))
    if head_dim <= 64:
        return (128, 64, 128) if dropout else (128, 128, 128)
    if head_dim <= 128:
        return (128, 32, 128) if dropout else (128, 64, 128)
    if head_dim <= 192 or hw.smem_per_sm_bytes < 4 * head_dim * (64 + 2 * 64):
        return 128, 64, 256  # 8 warps (A100's 164 KB smem per SM)
    return 64, 64, 128       # H100-class smem per SM: two 4-warp CTAs per SM


def fa2_bwd_smem_elements(bm: int, bn: int, d: int, dv: int, warps: int) -> float:
    """Shared-memory elements FA2's backward reads and writes per (bm × bn) tile pair.

    A warp-tiled GEMM M×N×K whose warps form an a × (warps/a) grid reads its A operand
    warps/a times and its B operand a times. The five GEMMs (S = QKᵀ, dP = dO·Vᵀ, dV += Pᵀ·dO,
    dK += dSᵀ·Q, dQ = dS·K) use the kernel's three warp layouts; P and dS are written to smem."""
    a1, a2, a3 = next((FA2_BWD_WARP_LAYOUT[h] for h in sorted(FA2_BWD_WARP_LAYOUT) if h >= d),
                      FA2_BWD_WARP_LAYOUT[256])
    gemm = lambda m, n, k, a: m * k * (warps // a) + n * k * a  # noqa: E731
    return (gemm(bm, bn, d, a1) + gemm(bm, bn, dv, a1) + gemm(bn, dv, bm, a2)
            + gemm(bn, d, bm, a2) + gemm(bm, d, bn, a3) + 2 * bm * bn)


@functools.lru_cache(maxsize=4096)
def visited(seq_q: int, seq_kv: int, causal: bool, window: int | None, bm: int, bn: int
            ) -> tuple[int, int]:
    """(tile pairs computed, unmasked scores) for one head, bottom-right aligned masks, in
    closed form (O(log) in the lengths; tests/oracles.py `visited_by_rows` counts row by row).

    Query row r (0 ≤ r < Q) sees keys lo_r..hi_r of K with o = K − Q: hi_r = r + o (causal;
    never above K − 1) or K − 1, lo_r = max(0, r + o − window + 1) or 0. Its unmasked scores
    are hi_r − lo_r + 1 when positive: causal min(window, max(0, r + o + 1)), else
    K − max(0, r + o − window + 1). Query tile j (rows s_j..e_j) computes the key tiles
    ⌊lo_{s_j} / bn⌋..⌊hi_{e_j} / bn⌋ where hi_{e_j} ≥ lo_{s_j}: sums of floors of linear
    functions of j (`floor_sum`)."""
    o = seq_kv - seq_q
    a = o + 1  # a causal row r sees r + a keys before the window
    if causal:
        scores = ramp_sum(seq_q, a) - (ramp_sum(seq_q, a - window) if window else 0)
    else:
        scores = seq_q * seq_kv - (ramp_sum(seq_q, a - window) if window else 0)
    tiles = -(-seq_q // bm)
    full = tiles - 1  # tiles 0..full-1 end at row j·bm + bm − 1, the last one at row Q − 1
    last_lo = max(0, (full * bm) + o - window + 1) if window else 0
    pairs = (seq_kv - 1) // bn - last_lo // bn + 1  # the last tile ends at hi = K − 1
    # full tiles with keys: causal needs hi_{e_j} = j·bm + bm − 1 + o ≥ 0 (lo_{s_j} ≤ hi_{e_j}
    # then holds); without a causal mask every tile has keys
    j0 = min(full, max(0, -(-(1 - bm - o) // bm))) if causal else 0
    n = full - j0
    if n > 0:
        if causal:
            pairs += floor_sum(n, bn, bm, j0 * bm + bm - 1 + o)
        else:
            pairs += n * ((seq_kv - 1) // bn)
        pairs += n
        if window:  # lo_{s_j} = j·bm + o − window + 1 once positive
            jz = max(j0, -(-(window - o) // bm))  # first j with j·bm + o − window + 1 > 0
            if jz < full:
                pairs -= floor_sum(full - jz, bn, bm, jz * bm + o - window + 1)
    return pairs, scores


def ramp_sum(n: int, c: int) -> int:
    """Σ_{r=0}^{n-1} max(0, r + c), integers."""
    start = max(0, 1 - c)  # first r with r + c ≥ 1
    if start >= n:
        return 0
    count = n - start
    return count * ((start + c) + (n - 1 + c)) // 2


def floor_sum(n: int, m: int, a: int, b: int) -> int:
    """Σ_{i=0}^{n-1} ⌊(a·i + b) / m⌋ for n ≥ 0, m ≥ 1 and any integers a, b, in O(log m) steps
    (the Euclidean-like reduction of AtCoder Library's floor_sum)."""
    if n <= 0:
        return 0
    total = (n * (n - 1) // 2) * (a // m) + n * (b // m)
    a, b = a % m, b % m
    while True:
        if a >= m:
            total += (n * (n - 1) // 2) * (a // m)
            a %= m
        if b >= m:
            total += n * (b // m)
            b %= m
        y_max = a * n + b
        if y_max < m:
            return total
        n, b = divmod(y_max, m)
        m, a = a, m


@dataclass(frozen=True)
class Tiling:
    """One pass's tiles and grid."""

    bm: int                 # query tile rows the family launches with (prefill)
    bn: int                 # key tile width
    tile_m: int             # MMA rows per visited tile (bm, or DECODE_TILE_M when decoding
                            # unless the design decodes with its forward tile)
    threads: int
    registers: int
    tile_heads: int         # heads with tiles of their own (decode packs a KV head's group)
    pairs: int              # (query tile, key tile) pairs computed, all heads and sequences
    scores: float           # unmasked scores, all heads and sequences (the useful work)
    ctas: int
    imbalance: float        # (largest CTA's work / mean CTA's work) − 1
    decode: bool
    kv_splits: int          # decode: pieces each KV sequence is split into over CTAs (1: none)
    v_splits: int = 1       # CTAs sharing one query tile's V dims (each recomputes the scores)
    separate_reduction: bool = True  # split-KV partials combined by a second kernel

    @property
    def split_kv(self) -> bool:
        """Split-KV decode: the KV sequence is cut over CTAs."""
        return self.kv_splits > 1

    @property
    def kernels(self) -> int:
        """Kernels of the pass: a split's second, combining kernel where the partials are not
        reduced inside the main one."""
        return 2 if (self.split_kv and self.separate_reduction) else 1

    @property
    def tile_scores(self) -> float:
        """Scores the tiles compute, masked ones included."""
        return float(self.pairs * self.tile_m * self.bn)


def tiling(hw, kernel: str, design: str, direction: str, *, batch: int, heads: int,
           kv_heads: int, seq_q: int, seq_kv: int, d: int, dv: int, element_bytes: float,
           causal: bool, window: int | None, dropout: bool, v_transposed: bool,
           shared_kv: bool, kv_element_bytes: float | None = None,
           own_kernel: bool = True) -> Tiling:
    """The tiles and grid `kernel` (built as `design`) launches for one pass; `own_kernel`
    False: another family's kernel priced on `kernel`'s design (TensorRT-LLM's Hopper decode
    on FA3's: trtllm.trtllm_design), which keeps the 64-row decode tile."""
    bm, bn, threads, regs = TILE[design]
    decode = direction == "fwd" and seq_q <= DECODE_MAX_SEQ_Q and design not in PREFILL_ONLY
    # (MLA's latent decode on this design stands for FlashMLA's 64-row kernel: not FA3's tile)
    full_decode_tile = own_kernel and kernel in FULL_TILE_DECODE and not shared_kv
    decode_m = bm if full_decode_tile else DECODE_TILE_M  # (FA3's bm: TILE's, unchanged below)
    if design in XQA_DESIGNS:
        return xqa_tiling(hw, design, batch=batch, heads=heads, kv_heads=kv_heads, seq_q=seq_q,
                          seq_kv=seq_kv, causal=causal, window=window)
    if design == TRTLLM_GEN_DECODE and shared_kv:
        return trtllm_gen_mla_tiling(hw, batch=batch, heads=heads, seq_q=seq_q, seq_kv=seq_kv)
    if design == TRTLLM_GEN_DECODE:
        return trtllm_gen_tiling(hw, batch=batch, heads=heads, kv_heads=kv_heads, seq_q=seq_q,
                                 seq_kv=seq_kv, causal=causal, window=window)
    if kernel == "fa2":
        bm, bn, threads = fa2_tile(hw, d, direction, dropout)
    elif direction == "fwd":
        if design in FA4_CLASS:
            bm *= FA4_FWD_Q_STAGES
        if design == "trtllm_fmha_v2":
            bn = fmha_v2_kv_step(d, element_bytes)
        bn = kv_tile_width(hw, decode_m if decode else bm, bn, d, dv, element_bytes,
                           v_transposed, shared_kv, kv_element_bytes)
    if decode and kernel == "fa2":
        bn, threads = fa2_splitkv_block_n(d), FA2_SPLITKV_THREADS
    kv_tiles = math.ceil(seq_kv / bn)
    if decode:
        # flash-decoding (FlashDecoding, FlashInfer, FlashMLA): the query rows of all heads
        # sharing a KV head are packed into 64-row MMA tiles (FA3: its forward tile,
        # FULL_TILE_DECODE); CTAs split the KV sequence, FA2 by its own heuristic, the others to
        # about two CTAs per SM
        m_tiles = math.ceil(seq_q * (heads // kv_heads) / decode_m)
        groups = batch * kv_heads * m_tiles
        splits = (fa2_num_splits(groups, FA2_SPLIT_SLOTS_PER_SM * hw.sm_count, kv_tiles)
                  if kernel == "fa2" else
                  max(1, min(kv_tiles, math.ceil(2 * hw.sm_count / groups))))
        scores = seq_q * seq_kv if not causal else visited(seq_q, seq_kv, True, window, bm, bn)[1]
        return Tiling(bm, bn, decode_m, threads, regs, tile_heads=kv_heads,
                      pairs=m_tiles * kv_tiles * batch * kv_heads,
                      scores=float(scores) * batch * heads, ctas=max(1, groups * splits),
                      imbalance=0.0, decode=True, kv_splits=splits)
    pairs_per_head, scores = visited(seq_q, seq_kv, causal, window, bm, bn)
    q_tiles = math.ceil(seq_q / bm)
    per_head_ctas = q_tiles if direction == "fwd" else kv_tiles
    # masks make CTAs unequal: the busiest SM finishes with a full-length one
    per_cta = pairs_per_head / per_head_ctas
    longest = kv_tiles if direction == "fwd" else q_tiles
    imbalance = max(0.0, min(longest, (window or 10**12) // bn + 1) / per_cta - 1)
    return Tiling(bm, bn, bm, threads, regs, tile_heads=heads, pairs=pairs_per_head * batch * heads,
                  scores=float(scores) * batch * heads, ctas=max(1, batch * heads * per_head_ctas),
                  imbalance=imbalance, decode=False, kv_splits=1)


def xqa_tiling(hw, design: str, *, batch: int, heads: int, kv_heads: int, seq_q: int,
               seq_kv: int, causal: bool, window: int | None) -> Tiling:
    """XQA's generation grid (trtllm.xqa_launch): one CTA per (sequence, KV head, sub-sequence),
    all query heads of the KV head's group (and the speculative tokens) in its MMA rows, the KV
    sequence split into the kernel's own number of sub-sequences, each CTA walking its share
    in key tiles of the kernel's width."""
    x = xqa_launch(hw, design, batch=batch, kv_heads=kv_heads, group=heads // kv_heads * seq_q,
                   seq_kv=seq_kv)
    kv_tiles = math.ceil(seq_kv / x.bn)
    scores = (seq_q * seq_kv if not causal
              else visited(seq_q, seq_kv, True, window, x.rows, x.bn)[1])
    ctas = batch * kv_heads * x.splits
    # the busiest CTA walks ceil(tiles / splits) key tiles, the mean one tiles / splits
    imbalance = math.ceil(kv_tiles / x.splits) / (kv_tiles / x.splits) - 1
    return Tiling(x.rows, x.bn, x.rows, x.threads, x.registers, tile_heads=kv_heads,
                  pairs=kv_tiles * batch * kv_heads, scores=float(scores) * batch * heads,
                  ctas=ctas, imbalance=imbalance, decode=True, kv_splits=x.splits,
                  separate_reduction=False)


def trtllm_gen_tiling(hw, *, batch: int, heads: int, kv_heads: int, seq_q: int, seq_kv: int,
                      causal: bool, window: int | None) -> Tiling:
    """trtllm-gen's generation grid (trtllm.trtllm_gen_decode_launch): each CTA holds the query
    rows of its heads in one tileSizeQ-row tile (the swapped MMA's N side) and walks its share of
    the KV sequence in 128-key tiles; the split's partial results are reduced in the kernel."""
    x = trtllm_gen_decode_launch(hw, batch=batch, heads=heads, kv_heads=kv_heads, seq_q=seq_q,
                                 seq_kv=seq_kv)
    _, bn, threads, regs = TILE[TRTLLM_GEN_DECODE]
    kv_tiles = math.ceil(seq_kv / bn)
    scores = (seq_q * seq_kv if not causal
              else visited(seq_q, seq_kv, True, window, x.rows, bn)[1])
    imbalance = math.ceil(kv_tiles / x.splits) / (kv_tiles / x.splits) - 1
    return Tiling(x.rows, bn, x.rows, threads, regs, tile_heads=kv_heads,
                  pairs=kv_tiles * x.base_ctas, scores=float(scores) * batch * heads,
                  ctas=x.base_ctas * x.splits, imbalance=imbalance, decode=True,
                  kv_splits=x.splits, separate_reduction=False)


def trtllm_gen_mla_tiling(hw, *, batch: int, heads: int, seq_q: int, seq_kv: int) -> Tiling:
    """trtllm-gen's MLA generation grid (trtllm.trtllm_gen_mla_launch): each CTA walks its share
    of the latent cache in 128-key tiles for one token's tile of heads and its share of the V
    dims; V-split CTAs each compute the whole 576-deep scores."""
    x = trtllm_gen_mla_launch(hw, batch=batch, heads=heads, seq_q=seq_q, seq_kv=seq_kv)
    _, bn, threads, regs = TILE[TRTLLM_GEN_DECODE]
    kv_tiles = math.ceil(seq_kv / bn)
    imbalance = math.ceil(kv_tiles / x.splits) / (kv_tiles / x.splits) - 1
    return Tiling(x.rows, bn, x.rows, threads, regs, tile_heads=1,
                  pairs=kv_tiles * x.base_ctas, scores=float(seq_q * seq_kv) * batch * heads,
                  ctas=x.base_ctas * x.splits, imbalance=imbalance, decode=True,
                  kv_splits=x.splits, v_splits=x.v_splits,
                  separate_reduction=x.kernels == 2)
