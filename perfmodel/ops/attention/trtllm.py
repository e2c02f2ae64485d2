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


def fmha_v2_kv_step(head_dim: int, element_bytes: float) -> int:
    """fmha_v2's Hopper warp-specialized key step (fmha_library.py kv_loop_step)."""
    if element_bytes == 1:
        return 256 if head_dim <= 128 else 128
    return 256 if head_dim <= 64 else 128 if head_dim <= 128 else 64


def trtllm_design(hw, seq_q: int, seq_kv: int, fp8: bool) -> tuple[str, str]:
    """(base kernel, design) TensorRT-LLM runs: generation (a few new tokens against a longer
    cache) on XQA on wgmma GPUs, on trtllm-gen's generation kernels on tcgen05;
    context on fmha_v2 (wgmma) or trtllm-gen (tcgen05)."""
    from perfmodel.ops.attention.tiles import DECODE_MAX_SEQ_Q
    generation = seq_q <= DECODE_MAX_SEQ_Q and seq_kv > seq_q
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
