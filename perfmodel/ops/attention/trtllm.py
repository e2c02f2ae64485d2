"""TensorRT-LLM's own attention kernels as a family (`Attention(kernel="trtllm")`).

TensorRT-LLM does not run FlashAttention: its attention op picks kernels of its own, and they
are cut differently (sources: the copies of TensorRT-LLM's kernels FlashInfer 0.7.4 ships,
flashinfer/data/csrc/xqa and flashinfer/jit/attention/fmha_v2):

  * generation on Hopper runs XQA. An FP8 cache runs the Hopper GMMA kernel (mha_sm90.cu,
    XQAKernelType::kHOPPER_WARP_SPECIALIZED; FlashInfer's xqa.py takes it only for an FP8 cache,
    run_sm90_fp8_mha): three 128-thread warpgroups (gemm0, gemm1, I/O), 64-key tiles
    (gemm0WarpGrpTileNbTokens), the query heads of a KV head as the N side of a swapped-AB GMMA
    (ctaNbQHeads = roundUp(group, 8)), __launch_bounds__(384, headElems·ctaNbQHeads <= 2048 ?
    3 : 2) CTAs per SM, and nbSubSeqPerSeq = min(max(1, round((3·SMs / (batch·KV heads)) ·
    0.25)), ceil(seq / 64)) sub-sequences per sequence (integer division first): about three
    quarters of a CTA per SM in all, never the two to three the SM holds;
  * a 16-bit cache runs the Ampere-style warp-specialized kernel (mha.cu,
    XQAKernelType::kAMPERE_WARP_SPECIALIZED): mma.sync, ctaShapeInWarps {4, 1, 2} = 256 threads,
    256-key CTA tiles (warpTile.x 64 × 4 warps), roundUp(group, 16) MMA rows, 2 CTAs per SM on
    sm_90 (nbCtaPerSM), nbSubSeqPerSeq = min(max(1, SMs / (batch·KV heads)), ceil(seq / 256)):
    about one CTA per SM;
  * both merge the sub-sequences inside the kernel (the last CTA of a sequence reduces the
    others' partial results, mha.cu's semaphores and scratch), so split-KV is one kernel, not
    flash-decoding's two;
  * context runs fmha_v2's warp-specialized flash kernel on Hopper (fmha_library.py: sm_mma 90,
    loop_step 64 per compute group, kv_loop_step 128 at head dim 65-128 in FP16/BF16, 256 at
    <= 64, 64 above; FP8 E4M3 256 at head dim <= 128, 128 above; V transposed in shared memory
    for E4M3, kernel_traits.h DMA_GROUP_TRANSPOSE_V) and trtllm-gen's tcgen05 kernels on
    Blackwell (FA4's class). Neither has a decode path: the context FMHA runs one CTA per
    (sequence, head, query tile) whatever the length. Before it the context path builds the
    sequence metadata (cumulative sequence lengths, padding offsets) in a kernel of its own,
    which the context op launches on every call (TensorRT-LLM's buildDecoderInfo, recalled:
    FlashInfer's copies do not carry it; the measured 13-16 µs floor of a one-token context
    call, AIConfigurator's context_attention_perf, holds a third kernel's launch).

Generation on Blackwell runs trtllm-gen's generation kernels (design 'trtllm_gen_decode'), cut
as TensorRT-LLM's runner cuts them (FlashInfer 0.7.4's copy of the runner,
include/flashinfer/trtllm/fmha: fmhaKernels.cuh selectGqGenerationKernel and
computeCtaAndClusterConfig, fmhaRunnerParams.h):
  * the MMA is swapped (SwapsMmaAbForGeneration): 128 keys (mTileSizeKv(128)) are the MMA's M
    side and the query heads of a KV head (× the speculative tokens) its N side, padded to
    tileSizeQ = 8, 16 or 32; more than 32 rows take the unswapped kernel
    (KeepsMmaAbForGeneration) with tileSizeQ 64 or 128. A GQA group of 4 computes 8 score rows
    per key, not FA4's 128 or flash-decoding's 64;
  * the grid is (KV splits × query tiles, heads / heads per CTA, batch); the KV sequence is split
    over numCtasPerSeqKv = min(ceil(seq_kv / (2 · 128)), max(1, SMs // base CTAs)) CTAs (one wave:
    the multi-CTA mode "for better GPU utilization"), reduced inside the kernel (a CGA
    shared-memory reduction up to 16 splits, a global-memory one beyond), so one kernel; without
    a split the persistent tile scheduler runs.
FlashInfer's copy adds a multi-wave rule and a 16-split clamp of its own (benchmarked there);
the one-wave rule above is the runner's base rule, used here. Each call also exposes a one-time
start before its first tile (tensor-memory allocation, barrier and tensor-map setup of a
warp-specialized tcgen05 kernel): no source states it, so it is fitted on B200's floor-bound
generation calls (perfmodel/fitted.yaml `attention.fixed_s.trtllm_gen_decode`; the op's ~11 µs
at any head count and context, where RoPE + cache append and the kernel's work take ~7 µs).
Per-design constants fitted on one GPU per architecture live in perfmodel/fitted.yaml: the
context kernels' softmax/MMA overlap, XQA's exposed CTA start/drain per CTA round.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

XQA_DESIGNS = ("xqa", "xqa_sm90")
TRTLLM_GEN_DECODE = "trtllm_gen_decode"
# trtllm-gen generation (module docstring): the key tile, the query tiles and the largest swapped
# one, and the split rule's keys per CTA (2 · tileSizeKv: "the reduction overhead does not outweigh
# the benefits of a shorter mainloop")
TRTLLM_GEN_KV_TILE = 128
TRTLLM_GEN_Q_TILES = (8, 16, 32, 64, 128)
TRTLLM_GEN_SWAPPED_MAX_Q = 32
TRTLLM_GEN_KEYS_PER_SPLIT = 2 * TRTLLM_GEN_KV_TILE
# mha_sm90.cu (launchHopperF8MHA): sub-sequences from 3·SMs / (batch·KV heads) · 0.25
XQA_SM90_SPLIT_CTAS_PER_SM = 3
XQA_SM90_SPLIT_FACTOR = 0.25
XQA_SM90_KEY_TILE = 64
XQA_SM90_THREADS = 384
XQA_SM90_HEAD_ALIGN = 8          # swapAB: ctaNbQHeads = roundUp(group, 8)
XQA_SM90_THREE_CTA_LIMIT = 2048  # launch bounds: 3 CTAs/SM while headElems·ctaNbQHeads <= 2048
# mha.cu (launchMHA): one sub-sequence per SM's share of the (sequence, KV head) pairs
XQA_KEY_TILE = 256               # ctaTile.x = warpTile.x (64) × ctaShapeInWarps.x (4)
XQA_THREADS = 256
XQA_ROW_ALIGN = 16               # warpTile.y = roundUp(group, 16)
XQA_CTAS_PER_SM = 2              # nbCtaPerSM on sm_90
REGISTER_GRANULE = 8


@dataclass(frozen=True)
class XqaLaunch:
    rows: int        # MMA rows (query heads of the group, padded)
    bn: int          # key tile
    threads: int
    registers: int
    ctas_per_sm: int
    splits: int      # sub-sequences per (sequence, KV head)


def xqa_launch(hw, design: str, *, batch: int, kv_heads: int, group: int, seq_kv: int
               ) -> XqaLaunch:
    """XQA's CTA shape and multi-block split for `design` ('xqa_sm90': the Hopper FP8 GMMA
    kernel; 'xqa': the mma.sync kernel), as its launcher computes them (module docstring)."""
    pairs = max(1, batch * kv_heads)
    if design == "xqa_sm90":
        rows = math.ceil(group / XQA_SM90_HEAD_ALIGN) * XQA_SM90_HEAD_ALIGN
        bn, threads = XQA_SM90_KEY_TILE, XQA_SM90_THREADS
        per_sm = 3 if 128 * rows <= XQA_SM90_THREE_CTA_LIMIT else 2
        wanted = round((XQA_SM90_SPLIT_CTAS_PER_SM * hw.sm_count // pairs)
                       * XQA_SM90_SPLIT_FACTOR)
    else:
        rows = math.ceil(group / XQA_ROW_ALIGN) * XQA_ROW_ALIGN
        bn, threads, per_sm = XQA_KEY_TILE, XQA_THREADS, XQA_CTAS_PER_SM
        wanted = hw.sm_count // pairs
    splits = min(max(1, wanted), math.ceil(seq_kv / bn))
    # registers the launch bounds leave each thread at that many CTAs per SM
    regs = min(hw.max_registers_per_thread,
               hw.registers_per_sm // (threads * per_sm) // REGISTER_GRANULE * REGISTER_GRANULE)
    return XqaLaunch(rows, bn, threads, regs, per_sm, splits)


@dataclass(frozen=True)
class TrtllmGenLaunch:
    rows: int        # tileSizeQ: query rows (heads × tokens) per CTA, the swapped MMA's N
    swapped: bool    # SwapsMmaAbForGeneration (keys on the MMA's M side)
    base_ctas: int   # CTAs before the KV split: query tiles × head CTAs × batch
    splits: int      # numCtasPerSeqKv


def trtllm_gen_decode_launch(hw, *, batch: int, heads: int, kv_heads: int, seq_q: int,
                             seq_kv: int) -> TrtllmGenLaunch:
    """trtllm-gen's generation grid for a GQA/MHA step (module docstring): the query tile from
    the group's rows, the heads one CTA holds, and the one-wave KV split."""
    group = heads // kv_heads
    rows_needed = group * seq_q
    rows = next((t for t in TRTLLM_GEN_Q_TILES if rows_needed <= t), TRTLLM_GEN_Q_TILES[-1])
    heads_per_cta = min(group, rows)                     # mGroupsHeadsQ
    tokens_per_cta = max(1, rows // group)               # numTokensPerCtaQ
    base = math.ceil(seq_q / tokens_per_cta) * (heads // heads_per_cta) * batch
    most = max(1, math.ceil(seq_kv / TRTLLM_GEN_KEYS_PER_SPLIT))
    splits = min(most, max(1, hw.sm_count // base))
    return TrtllmGenLaunch(rows, rows <= TRTLLM_GEN_SWAPPED_MAX_Q, base, splits)


@dataclass(frozen=True)
class TrtllmGenMlaLaunch:
    rows: int          # tileSizeQ: query rows per CTA (the swapped MMA's N, or 64 unswapped)
    swapped: bool      # SwapsMmaAbForGeneration
    v_splits: int      # numCtasPerHeadDim: CTAs sharing one (token, head tile)'s 512 V dims
    base_ctas: int     # CTAs before the KV split
    splits: int        # numCtasPerSeqKv
    kernels: int       # 2 when the split's partials are reduced by a separate kernel


def mla_padded_tile_q(heads: int) -> int:
    """getPaddedMlaTileSizeQ: the smallest shipped query tile holding a head group that cannot
    be its own tile (non-power-of-two groups, groups below 8); 0 for the others."""
    if heads >= 128 or (heads >= 8 and heads & (heads - 1) == 0):
        return 0
    return max(8, 1 << (heads - 1).bit_length())


def trtllm_gen_mla_launch(hw, *, batch: int, heads: int, seq_q: int, seq_kv: int
                          ) -> TrtllmGenMlaLaunch:
    """trtllm-gen's dense MLA generation grid (one latent KV head, 576-wide keys, 512-wide
    values) as the runner selects it (module docstring: selectMlaGenerationKernel,
    useSwapsMmaAbMlaGenKernel, computeCtaAndClusterConfig):

      * speculative steps (seq_q > 1) of 8/16/32 heads at batch <= 16 run the grouped kernel:
        tokens × heads packed into 64-row unswapped tiles, V split over 1/2/4 CTAs as the grid
        is small, partials always reduced by a separate kernel;
      * otherwise up to 32 heads (and 128 heads while each split CTA walks <= 1024 keys and the
        16-head CTAs fit one wave) run swapped in 8- or 16-row tiles, one token per CTA, their
        splits reduced in the kernel; more heads run unswapped 64-row tiles, 128 heads as a
        2-CTA MMA pair each taking 256 V dims, reduced by a separate kernel;
      * the KV split is the runner's one wave, min(ceil(seq_kv / 256), SMs // base CTAs); where
        that leaves SMs idle the V dims are split too (512 → 256 or 128 per CTA, each CTA
        recomputing the 576-deep scores: "use smaller headDimPerCtaV to fully utilize the SMs"),
        and the KV split is recomputed over the larger grid."""
    sms = hw.sm_count
    most = max(1, math.ceil(seq_kv / TRTLLM_GEN_KEYS_PER_SPLIT))
    if seq_q > 1 and heads in (8, 16, 32) and batch <= 16:       # the grouped kernel
        base = batch * math.ceil(seq_q * heads / 64)
        v_per_cta = 128 if base <= 1 else 256 if base <= 4 else 512
        base *= 512 // v_per_cta
        return TrtllmGenMlaLaunch(64, False, 512 // v_per_cta, base,
                                  min(most, max(1, sms // base)), 2)
    padded = mla_padded_tile_q(heads)
    if padded:
        swapped = padded <= 32
    elif heads <= 32:
        swapped = True
    else:  # useSwapsMmaAbMlaGenKernel, with 16-head CTAs and 256 keys per split
        ctas16 = batch * seq_q * math.ceil(heads / 16)
        per_cta_kv = math.ceil(seq_kv / min(most, max(1, sms // ctas16)))
        swapped = per_cta_kv <= 1024 and ctas16 <= sms
    rows = (padded or (8 if heads <= 8 else 16)) if swapped else 64
    # 128 heads unswapped: a 2-CTA MMA pair, 64 heads and 256 V dims per CTA, covers a token
    two_cta = not swapped and heads == 128
    base = seq_q * (heads // min(heads, rows)) * batch
    splits = min(most, max(1, sms // base))
    v_splits = 1
    if not two_cta:
        # the V-dim split where the grid leaves SMs idle (min-latency mode, batch 1, counts the
        # grid once; otherwise twice)
        corr = 1 if batch == 1 else 2
        if base * splits * corr <= sms:
            v_splits = 2 if base * splits * 2 * corr > sms else 4
            base *= v_splits
            if splits > 1:
                splits = min(most, max(1, sms // base))
    kernels = 2 if (splits > 1 and not swapped) else 1
    return TrtllmGenMlaLaunch(rows, swapped, v_splits, base, splits, kernels)


def fmha_v2_kv_step(head_dim: int, element_bytes: float) -> int:
    """fmha_v2's Hopper warp-specialized key step (fmha_library.py kv_loop_step)."""
    if element_bytes == 1:
        return 256 if head_dim <= 128 else 128
    return 256 if head_dim <= 64 else 128 if head_dim <= 128 else 64


def trtllm_design(hw, seq_q: int, seq_kv: int, fp8: bool, mla: bool = False
                  ) -> tuple[str, str]:
    """(base kernel, design) TensorRT-LLM runs: generation (a few new tokens against a longer
    cache) on XQA on wgmma GPUs, on trtllm-gen's generation kernels on tcgen05 (MLA's latent
    cache too: trtllm_gen_mla_launch); context on fmha_v2 (wgmma) or trtllm-gen (tcgen05)."""
    from perfmodel.ops.attention.tiles import DECODE_MAX_SEQ_Q
    generation = seq_q <= DECODE_MAX_SEQ_Q and seq_kv > seq_q
    if mla and generation and hw.mma_instruction == "wgmma":
        # XQA's MLA kernel is built for sm_120 only; Hopper's MLA generation is priced as the
        # FlashMLA-class decode of FA3's design, as without an engine
        return "fa3", "fa3"
    if hw.mma_instruction == "wgmma":
        if generation and fp8:
            return "trtllm", "xqa_sm90"
        if generation:
            # 16-bit caches: XQA's mma.sync kernel ('xqa', xqa_launch) does not fit the data
            # (H100/H200 tables: single-round calls ~5 µs, but ~10 µs per CTA round at large
            # batch and tiny contexts); until TensorRT-LLM's dispatch for them is known (XQA's
            # perf-gain heuristic or the MMHA kernel), priced with FA3's decode path as before
            return "fa3", "fa3"
        return "fa3", "trtllm_fmha_v2"
    if generation:
        return "fa4", TRTLLM_GEN_DECODE
    return "fa4", "trtllm_gen"
