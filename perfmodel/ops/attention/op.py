"""Attention as FlashAttention-style tiles on pipes.

Per visited (query tile × key tile) pair (Dao et al. FlashAttention-2, arXiv:2307.08691;
Shah et al. FlashAttention-3, arXiv:2407.08608 §3; FlashAttention-4, arXiv:2603.05451):
  * forward MMAs S = QKᵀ and O += PV: 2·bm·bn·(d + dv) FLOP on the tensor pipe;
  * softmax: one exp per score on the XU (MUFU.EX2), ~4 FMA-pipe ops per score (scale-subtract
    FFMA, running max, row sum, pack), masking compares on the ALU; forward also rescales the
    bm × dv output accumulator once per key tile (FA2 Algorithm 1), dv / bn FMA ops per score;
  * the key tile is the widest that fits shared memory beside the Q tile with two K/V stages
    (kv_tile_width): 128 × 128 at head dim ≤ 128, 128 × 80 at 256 in 16-bit types;
  * FA4 and cuDNN's tcgen05 kernels move a fraction of the exps to a degree-3 polynomial on the
    FMA pipe, each by its own rule (fa4_emulated_fraction; CUDNN_TCGEN05_EMULATED_FRACTION);
  * FA2's Ampere-style mma.sync runs at the GPU's own mma.sync rate
    (isa.mma_sync_flop_per_sm_per_clk: on Hopper 2/3 of wgmma's, on Blackwell the legacy path,
    not tcgen05's), times FA2's fitted share of it;
  * cuDNN is its own family: on wgmma GPUs an FA3-like design, on tcgen05 GPUs an FA4-class one
    ("cudnn_tcgen05": FA4's tile shape, cuDNN's own exp emulation and overlaps); each design has
    its own forward and backward overlap constants, and none fitted on forward rows prices a
    backward;
  * shared memory at 128 B/clk/SM: wgmma/tcgen05 kernels (FA3, FA4, cuDNN) use the FA4 tile
    roofline's 3 tile reads (Q, K, V) per pair forward and 13 backward; FA2's tiles and warp grids
    come from its launch templates, and each of its warps ldmatrix-loads the whole K and V tiles
    (forward) or its share of the five backward GEMMs' operands, loads that overlap its mma.sync
    MMAs only partly;
  * backward: 5 MMAs (recompute S, dP, dV, dK, dQ) = 2·bm·bn·(3d + 2dv), the exp recomputed,
    dQ accumulated with FP32 atomics in L2; FlashAttention-2/3 run it as three kernels in sequence
    (flash_bwd_launch_template.h; FA3 paper §3): a preprocess (D = rowsum(dO∘O), zero the FP32
    dQ accumulator), the main kernel, and a postprocess (dQ FP32 → input dtype). The two small ones
    are memory-bound and scale with tokens, the main one with tokens², so they matter at short
    sequence lengths;
  * FP8: the FP32 probabilities P are packed to E4M3 for the PV MMA with cvt…e4m3x2 (two scores per
    instruction) on the pipe the spec's isa.fp8_convert_pipe names: the XU beside the
    exponentials on Hopper, the ALU on Blackwell;
  * HBM: Q, K, V, O (+ LSE) forward; + dO, dQ, dK, dV backward; K/V read once per KV head
    (L2 serves the query tiles and GQA heads that share it); with GQA the backward's dK, dV are
    written per query head and summed (FA2) or accumulated in FP32 and converted (FA3-style);
  * causal and sliding-window masks skip tiles; diagonal tiles compute fully but are partly
    wasted; decode (few query rows) splits the KV sequence across CTAs (flash-decoding).
Dropout adds Philox work per score (fused) or a mask read from HBM (precomputed). Fused, the
Philox calls run on the warps that compute the softmax (FA2: every warp; FA3: the consumer
warpgroups; FA4: the two softmax warpgroups forward, the compute warps backward), in their issue
slots, FMA-heavy lanes, ALU and registers (perfmodel.ops.rng.fused_dropout_work; the register
split and warp roles per design are DROPOUT_WARPS); the backward regenerates the mask and applies
it to P (dV) and dP (dS). Where the registers left beside the pass's fragments hold no Philox
chain (FA4's backward compute warps at 136 registers; rng.rng_on_critical_path), the RNG cannot
run ahead of the data it masks and sits on the pass's critical path: its integer group (ALU,
FMA-heavy, issue) adds to the kernel's time instead of hiding under the MMAs
(RNG_SERIAL_RESOURCES, `_overlap`). The terms are in the Estimate's details["dropout"].
A KV cache stored narrower than the MMA dtype (`kv_dtype`: FP8 or NVFP4 K/V with BF16/FP16 or FP8
compute, FlashInfer's and vLLM's FP8 KV caches) moves K and V in their storage bytes (HBM, L2,
the K/V stages in shared memory) and converts each K/V element a CTA loads on the CUDA cores into
a staging tile of the MMA dtype that the MMAs then read (FlashInfer's repack_fp8_tile_to_bf16;
`kv_dequant_work`).
Tile sizes, masks and the grid live in tiles.py; this module turns them into work.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math

from perfmodel import fitted
from perfmodel.demand import Demand, LaunchShape, Overlap, add_work, sequence_demand
from perfmodel.errors import InputError
from perfmodel.units import bytes_per_element, tensor_dtype
from perfmodel.ops.attention.tiles import (FA4_CLASS, FA4_FWD_Q_STAGES,
                                           KV_STAGES, PREFILL_ONLY, Tiling,
                                           fa2_bwd_smem_elements, tile_smem_bytes, tiling)
from perfmodel.ops.attention.trtllm import (TRTLLM_GEN_DECODE, XQA_DESIGNS, trtllm_design,
                                            xqa_launch)
from perfmodel.ops.base import Op, Param, positive
from perfmodel.ops.rng import GENERATOR_ROUNDS, fused_dropout_work
from perfmodel.ops.streaming import stream_demand

KERNELS = ("fa2", "fa3", "fa4", "cudnn", "trtllm", "triton_fa")
# Each family is written for one tensor-core instruction (the spec's isa.mma_instruction): FA2
# issues mma.sync, which every GPU since Ampere runs; FA3 is built on wgmma, FA4 on tcgen05;
# cuDNN ships kernels for each. The default is the family written for the GPU's own MMA.
# "triton_fa": llm-foundry's Triton FlashAttention (perfmodel.ops.attention.triton_fa), whose
# pre-MLIR Triton emits mma.sync and targets sm_80 and sm_90 (llm-foundry's triton_pre_mlir
# builds), not Blackwell.
DEFAULT_KERNEL = {"mma_sync": "fa2", "wgmma": "fa3", "tcgen05": "fa4"}
KERNEL_MMA = {"fa2": ("mma_sync", "wgmma", "tcgen05"), "fa3": ("wgmma",),
              "fa4": ("tcgen05",), "cudnn": ("mma_sync", "wgmma", "tcgen05"),
              "trtllm": ("wgmma", "tcgen05"), "triton_fa": ("mma_sync", "wgmma")}
SOFTMAX_FMA_PER_SCORE = {"fwd": 4.0, "bwd": 6.0}
SOFTMAX_ALU_PER_SCORE = 1.0
# P → FP8 for the PV MMA: cvt.rn.satfinite.e4m3x2.f32 converts two scores per instruction, on the
# pipe the spec's isa.fp8_convert_pipe names: the XU on Hopper (the CUDA throughput table's
# 16/clk/SM for conversions, sharing the MUFU's slots), the ALU on Blackwell
# (docs/hardware-notes.md §4.1). FP16/BF16 packs take the ALU's fast path and sit in the ALU count.
FP8_PACK_XU_PER_SCORE = 0.5
# Backward pre/postprocess kernels: FMA-pipe ops per element (dO·O product-accumulate; scale and
# convert of the FP32 dQ accumulator).
BWD_PREPROCESS_FMA_PER_ELEMENT = 2.0
BWD_POSTPROCESS_FMA_PER_ELEMENT = 1.0
# wgmma/tcgen05 backward: 13 tile reads from shared memory per tile pair (FA4 paper's tile
# roofline at M = N = D = 128)
SMEM_TILE_READS_BWD = 13.0
# FA4's backward runs its MMAs in 2-CTA mode (tcgen05 cta_group::2): per tile SMEM falls from 3328
# to 2688 cycles and the dQ atomic adds halve (FA4 paper; docs/hardware-notes.md §7,
# docs/studies.md §5.3)
FA4_BWD_2CTA_SMEM_FRACTION = 2688 / 3328
FA4_BWD_2CTA_DQ_FRACTION = 0.5
# FA4's forward computes some exps as a degree-3 polynomial on the FMA pipe (flash_attn/cute/
# softmax.py apply_exp2_convert and utils.e2e_asm2, flash-attn 2.8.3): in each 32-score fragment
# of a row, the scores whose index mod e2e_freq falls in the last E2E_RES are emulated; the row's
# last fragment always uses MUFU; only unmasked tiles at head dim <= 128 emulate. e2e_freq is 16,
# or 10 with packed GQA, no mask and head dim > 64 (flash_fwd_sm100.py). Per emulated exp: a
# clamp (FMNMX), the round/split and the 3-term Horner polynomial as packed FADD2/FFMA2 (6 lane
# ops), then the exponent inserted with SHL and IADD.
# That 2.8.3 rule stays the stand-in for the trtllm-gen designs (fa4_emulated_fraction); FA4's own
# forward follows flash-attn-4 4.0.0b40 (fa4_ex2_emu_schedule, below).
FA4_E2E_FRAGMENT = 32
FA4_E2E_RES = 4
FA4_E2E_FREQ = 16
FA4_E2E_FREQ_PACKED_GQA = 10
# flash-attn-4 4.0.0b40 picks (ex2_emu_freq, ex2_emu_start_frg) per launch (flash_attn/cute/
# config.py:540-573 select_ex2_emu) and softmax.py:516-535 apply_exp2_convert emulates, in each
# 32-score fragment j of a thread's row with ex2_emu_start_frg <= j < last, the score pairs whose
# index k has k mod freq >= freq - 4; freq 0 keeps every exp on MUFU. Every tile emulates, masked
# ones too (flash_fwd_sm100.py:3036-3041 passes the schedule whatever mask_fn is). Tuned entries,
# keyed (2-CTA, causal, padded head dim) on cc 10.0/11.0 (config.py:307-376 SM100_TUNING; the
# SM103 family's entries are all 0, its MUFU is fast enough); FP8 P/V overrides (config.py:
# 377-381 SM100_FP8_TUNING). Untuned keys: freq 16 from fragment 1 up to head dim 128 and at 192
# with 2-CTA, no mask (config.py:560-570); packed GQA without a mask above head dim 64 takes the
# tuned freq or 10 (config.py:571-572; 32 is varlen's, which the model does not take).
FA4_EX2_EMU_TUNING = {(True, False, 128): (10, 1), (False, True, 128): (16, 1),
                      (True, False, 192): (16, 0), (False, True, 192): (32, 1),
                      (True, False, 256): (14, 0), (True, True, 256): (14, 0)}
FA4_FP8_EX2_EMU_TUNING = {(True, False, 128): (10, 1), (False, True, 128): (8, 1)}
FA4_EX2_EMU_FREQ_DEFAULT = 16
FA4_EX2_EMU_START_FRG_DEFAULT = 1
FA4_EMULATED_EXP_FMA = 6.0
FA4_EMULATED_EXP_ALU = 3.0
# cuDNN's tcgen05 forward emulates 32 of every 128 exps of a softmax row (of every 16 columns the
# last 4; the row's rescale exp stays on MUFU) with the same degree-3 polynomial, FFMA2/FADD2 pairs
# plus the exponent insert: cudnn-frontend 1.32.0 cudnn/sdpa/fwd/kernels/sm100/prefill_d128_f16.py
# (_E2E_FREQ 16, _E2E_RES 4, _E2E_LIMIT = TILE_N; "the same SHAPE as the cuDNN backend fprop
# kernel's", whose FP8 pattern (16, 8, 72) also emulates 32 columns, prefill_d128_fp8.py). Only on
# parts whose MUFU is the softmax's longest pipe (cc 10.0: "its sign follows the part's MUFU rate";
# the doubled MUFU of cc 10.3 keeps all exps there): here, when the MUFU's exps per clock do not
# outpace the MMA's scores per clock. 16-bit kernels emulate in unmasked tiles of unmasked
# ("dense band") attention only; FP8 kernels in every unmasked tile.
CUDNN_TCGEN05_EMULATED_FRACTION = 32 / 128
# Fitted: values, meanings and the rows they were fitted on live in perfmodel/fitted.yaml
# (written by `python -m perfmodel.validation.fit`). Each family's overlap efficiency of its
# softmax with its MMAs (demand.Overlap's power mean: 1 = fully hidden, 0 = serial), Hopper's
# mma.sync rate (FA2), and how well FA2's ldmatrix operand loads overlap its MMAs. FA4's is fitted
# on its one published B200 number: its dedicated MMA warp and two ping-ponging softmax
# warpgroups hide far more than FA3 does.
SOFTMAX_OVERLAP = {f: fitted.value(f"attention.softmax_overlap.{f}")
                   for f in ("fa2", "fa3", "fa4", "cudnn")}


# Each design's own overlap per pass, where the forward's is not SOFTMAX_OVERLAP or the pass is the
# backward: a constant fitted on forward rows is never used for a backward. cuDNN's tcgen05 kernels
# have their own for both passes, fitted on cuDNN's Blackwell rows (CUDNN-PRE forward, CUDNN-TRN
# backward); FA4 has no backward measurement, and its backward takes the tcgen05 backward constant
# fitted on cuDNN's (both run FA4-class warp-specialized tcgen05 backward kernels).
DESIGN_OVERLAP = {(d, p): fitted.value_or_nan(f"attention.softmax_overlap.{d}.{p}") for d, p in (
    ("cudnn_tcgen05", "fwd"), ("fa2", "bwd"), ("fa3", "bwd"), ("cudnn", "bwd"),
    ("cudnn_tcgen05", "bwd"))}
BWD_OVERLAP_OF = {"fa4": "cudnn_tcgen05"}
# TensorRT-LLM's context kernels (perfmodel.ops.attention.trtllm): fmha_v2 on Hopper and
# trtllm-gen on Blackwell, each with its own forward overlap fitted on its own context rows
# (AIConfigurator's TensorRT-LLM tables, H100 and B200); XQA's generation kernels take FA3's,
# their MMAs hidden under the KV stream either way.
DESIGN_OVERLAP.update({(d, "fwd"): fitted.value_or_nan(f"attention.softmax_overlap.{d}.fwd")
                       for d in ("trtllm_fmha_v2", "trtllm_gen")})
FWD_OVERLAP_OF = {"xqa": "fa3", "xqa_sm90": "fa3", TRTLLM_GEN_DECODE: "trtllm_gen"}
# trtllm-gen's generation kernels: the one-time start a call exposes before its first tile
# (tensor-memory allocation, barrier and tensor-map setup of a warp-specialized tcgen05 kernel;
# no source states it), fitted on B200's floor-bound generation rows
TRTLLM_GEN_DECODE_FIXED_S = fitted.value_or_nan("attention.fixed_s.trtllm_gen_decode")
# XQA's CTAs each walk their key tiles through a two-deep buffer and merge partial results
# through global semaphores: a CTA round's exposed start and drain, in DRAM round trips, per
# kernel (fitted on H100's FP8-cache generation rows)
XQA_CTA_ROUND_TRIPS = {"xqa_sm90": fitted.value_or_nan("attention.cta_round_trips.xqa_sm90"),
                       "xqa": fitted.value("attention.cta_round_trips")}  # not selected (trtllm.py)
# FA2's share of the GPU's mma.sync rate (isa.mma_sync_flop_per_sm_per_clk) on GPUs whose native
# MMA is wgmma or tcgen05 (fitted; on an mma.sync GPU FA2's MMAs are the native ones)
MMA_SYNC_FRACTION = fitted.value("attention.mma_sync_fraction")
# ... and on tcgen05 GPUs, where mma.sync runs on the legacy tensor path beside tcgen05's
# (Nsight Compute's `tensor` vs `tc` pipes): fitted on FlashAttention-2's own B200 rows, since
# the spec's mma.sync rate there is Hopper's, assumed (hwspecs/B200.yaml)
MMA_SYNC_FRACTION_TCGEN05 = fitted.value_or_nan("attention.mma_sync_fraction.tcgen05")
MMA_SYNC_OPERAND_OVERLAP = fitted.value("attention.mma_sync_operand_overlap")
# A non-persistent CTA's exposed start and drain, in DRAM round trips: the first Q/K/V tiles, the
# O tile and LSE written back, the next CTA's launch (fitted; one CTA per SM hides none).
CTA_ROUND_TRIPS = fitted.value("attention.cta_round_trips")
# Applying a precomputed mask: byte mask → compare-free select per score; bit mask → extract the
# bit (shift/and) then select.
MASK_APPLY_ALU_PER_SCORE = {"bytes": 1.0, "bits": 2.0}
# K/V storage types (kv_dtype) and the per-element work of converting one K/V element to the MMA
# dtype on the CUDA cores. Serving kernels with an FP8 KV cache and 16-bit queries (FlashInfer,
# include/flashinfer/attention/prefill.cuh v0.7.4: repack_fp8_tile_to_bf16 converts each K/V tile
# once per CTA from its FP8 shared-memory stage into a 16-bit staging tile the MMAs read,
# "numerically identical to the in-loop dequant"; vLLM's paged attention converts in registers,
# fp8::scaled_convert) use FlashInfer's fast_dequant_f8f16x4 (vec_dtypes.cuh) for E4M3 → BF16:
# per 4 elements one PRMT and seven LOP3/SHF on the ALU and two packed HMUL2 (the exponent-bias
# multiply) on the FMA pipe.
# FP16 queries on a GPU with a hardware FP8 convert (FLASHINFER_HARDWARE_FP8_CONVERSION_ENABLED,
# sm_90+; the spec's isa.fp8_convert_pipe) take cvt.rn.f16x2.e4m3x2, two elements per instruction.
# NVFP4 K/V (E2M1 + an E4M3 scale per 16): cvt.rn.bf16x2.e2m1x2 where the GPU has FP4 tensor cores
# (sm_100), else the PRMT table lookup e2m1x8_to_bf16x8 (~17 ALU ops per 8 elements), then the
# block scale's HMUL2 (load_fp4_k_frag_scaled). Into FP8 MMAs (FP8 queries, NVFP4 K/V) a further
# cvt…e4m3x2 per two elements follows.
# Fused dropout: which warps of each design run Philox, per pass, with their register budget
# (setmaxnreg) and what those registers already hold, and the Philox variant each code base
# ships. (rng warps per CTA, registers per thread or None for the launch's, fragments held:
# S only, or S and dP, plus register accumulators or not)
#   fa4 / cudnn_tcgen05 forward: the two softmax warpgroups (8 warps), 192 registers each
#     (flash_attn/cute/flash_fwd_sm100.py, flash-attn-4 4.0.0b36: num_regs_softmax = 192 at
#     head dim 128; 4.0.0b40 config.py: 192 for BF16 at head dim 128, SM100_BF16_TUNING and
#     SM100_TUNING, and 200 below head dim 96, SM100_SMALL_HDIM_REGISTERS: FA4_FWD_SOFTMAX_REGS);
#     a thread owns one row of the bn-wide S tile loaded from tensor memory; O is in tensor
#     memory, not in registers. The row's converted P (bn/2 registers, softmax_step's
#     tSrP_r2t_f32) joins S only after the exps, when the mask is already made: FA4 precomputes
#     the dropout bitmask (`precompute_dropout_mask`, its INT32 work beside the FP32 max and
#     scale), so the chains share the registers with S alone;
#   fa4 / cudnn_tcgen05 backward: the 8 compute warps at 136 registers (flash_bwd_sm100.py:
#     num_regs_compute = 136; compute_warp_ids 4..11), holding a thread's share of S/P and dP;
#   fa3 / cudnn on wgmma: the two consumer warpgroups at 240 registers (FA3 paper §3.1, hopper
#     setmaxnreg 240 for 2 consumer warpgroups), with S and the O accumulator (forward) or S,
#     dP and the dK, dV accumulators (backward) in registers;
#   fa2: every warp, at the launch's registers, same fragments as fa3.
DROPOUT_WARPS = {("fa4", "fwd"): (8, 192), ("fa4", "bwd"): (8, 136),
                 ("cudnn_tcgen05", "fwd"): (8, 192), ("cudnn_tcgen05", "bwd"): (8, 136),
                 ("fa3", "fwd"): (8, 240), ("fa3", "bwd"): (8, 240),
                 ("cudnn", "fwd"): (8, 240), ("cudnn", "bwd"): (8, 240)}
# FA4's forward softmax registers by padded head dim (flash-attn-4 4.0.0b40 config.py
# select_sm100_registers, 16-bit, TMA K/V): below 96 the small-head-dim split (softmax 200,
# correction 64, other 48); from 96 the tuned split, 192 for BF16. FP8 P has its own splits
# (SM100_FP8_SMALL_HDIM_REGISTERS, SM100_FP8_TUNING) that are not modelled: 192 stands.
FA4_FWD_SMALL_HDIM = 96
FA4_FWD_SMALL_HDIM_SOFTMAX_REGS = 200
# Registers a softmax/compute thread holds beside its fragments (addresses, row max and sum,
# loop and pipeline state); assumed, range 16-40
DROPOUT_BOOKKEEPING_REGS = 24
# Random bits each design draws per score: FA2's philox.cuh/dropout.h read one call's 128 bits
# as 16 bytes, one per score; FA4's CuTe dropout (PR 2597, flash_attn/cute/dropout.py) reads
# them as 8 16-bit values (threshold p_keep_uint8·257) (docs/studies.md §1.2)
DROPOUT_BITS_PER_SCORE = {"fa2": 8, "fa3": 8, "cudnn": 8, "fa4": 16, "cudnn_tcgen05": 16}
# Philox as each design compiles it, per pass: (3-input XORs folded into LOP3, round keys
# precomputed). FA4 folds forward and not backward, where the fold "REGRESSES the bwd kernel by
# ~390 us" (flash_attn/cute/philox.py comment), and hoists its round keys
# (philox_precompute_round_keys); FA2's C++ philox.cuh bumps the key in every round and ptxas
# folds a ^ b ^ c into one LOP3.
DROPOUT_PHILOX = {("fa4", "fwd"): (True, True), ("fa4", "bwd"): (False, True),
                  ("cudnn_tcgen05", "fwd"): (True, True), ("cudnn_tcgen05", "bwd"): (False, True)}


@contextlib.contextmanager
def dropout_philox_variant(design: str, direction: str, lop3_fold: bool):
    """Price `design`'s fused Philox in `direction` with (or without) the LOP3 fold for the
    duration of the block, the round keys as shipped: what-if studies of FA4's own fold
    measurement (studies.dropout.fold_check). Demands built inside it differ from the shipped
    kernel's; do not let them reach a prediction cache (perfmodel.schedule)."""
    key = (design, direction)
    shipped = DROPOUT_PHILOX.get(key)
    DROPOUT_PHILOX[key] = (lop3_fold, (shipped or (True, False))[1])
    try:
        yield
    finally:
        if shipped is None:
            del DROPOUT_PHILOX[key]
        else:
            DROPOUT_PHILOX[key] = shipped


# Fused Philox on the critical path (rng.rng_on_critical_path: no registers for a chain beside
# the pass's fragments, FA4's and FA3's backward at head dim 128): the RNG warps generate each
# tile's mask between their load of S (or dP) and their hand-off of P (or dS), which the MMAs
# consuming it wait for; in FA4's backward (flash_attn/cute/flash_bwd_sm100.py, flash-attn-4
# 4.0.0b40) S/P, dP and dS each have one TMEM stage (pipeline_S_P, pipeline_dP, pipeline_dS:
# num_stages=1, P aliasing S and dS aliasing dP outside the head-dim-64 1-CTA kernel) and the
# 8 compute warps meet at compute_sync_barrier in each phase, so dV, dK and dQ (3 of the 5 MMAs)
# wait for it, and the MMAs that do not (the next S and dP) already hide the softmax at the
# fitted efficiency. The pipes Philox and the mask application load (IMAD.WIDE on the
# FMA-heavy pipe, LOP3 / compare / select on the ALU, all in the RNG warps' issue slots) then
# add to the rest of the kernel, efficiency 0; the group holds those resources' whole time, the
# softmax's own ALU and issue share included (they are the pass's critical-path instructions too)
RNG_SERIAL_RESOURCES = ("alu", "issue", "fma_heavy")
KV_DTYPES = ("bf16", "fp16", "fp8", "fp8_e4m3", "nvfp4")
FP8_KV_DEQUANT_ALU = 2.0
FP8_KV_DEQUANT_FMA = 0.5
NVFP4_KV_LOOKUP_ALU = 17.0 / 8
NVFP4_KV_SCALE_FMA = 0.5
CVT_X2_PER_ELEMENT = 0.5


def kv_dequant_work(hw, kv_dtype: str, dtype: str) -> dict[str, float]:
    """CUDA-core work per K/V element converted from `kv_dtype` storage to the `dtype` MMA
    operand (KV_DTYPES); none when they are the same type."""
    kv, mma = tensor_dtype(kv_dtype), tensor_dtype(dtype)
    cvt = hw.fp8_convert_pipe
    if kv == mma:
        return {}
    if kv == "fp8":
        if mma == "fp16" and cvt:
            return {cvt: CVT_X2_PER_ELEMENT}
        return {"alu": FP8_KV_DEQUANT_ALU, "fma": FP8_KV_DEQUANT_FMA}
    # nvfp4
    work = ({cvt: CVT_X2_PER_ELEMENT} if (cvt and hw.supports("nvfp4"))
            else {"alu": NVFP4_KV_LOOKUP_ALU})
    work = add_work(work, {"fma": NVFP4_KV_SCALE_FMA})
    if mma == "fp8":
        work = add_work(work, {cvt or "xu": CVT_X2_PER_ELEMENT})
    return work


def e2e_emulated_fraction(bn: int, freq: int, start_fragment: int) -> float:
    """Share of a bn-score row's exps the exp2 emulation takes (softmax.py apply_exp2_convert,
    flash-attn-4 4.0.0b40 softmax.py:516-535): in fragments start_fragment .. last - 1 of the
    row's 32-score fragments, the pairs (k, k + 1) with k mod freq >= freq - 4; freq 0: none.
    With 128-wide rows from fragment 1: 0.125 at freq 16, 0.1875 at 10, 0.25 at 8."""
    fragments = bn // FA4_E2E_FRAGMENT
    emulating = fragments - 1 - start_fragment
    if freq <= 0 or emulating <= 0:
        return 0.0
    per_fragment = sum(2 for k in range(0, FA4_E2E_FRAGMENT, 2)
                       if k % freq >= freq - FA4_E2E_RES) / FA4_E2E_FRAGMENT
    return per_fragment * emulating / fragments


def fa4_emulated_fraction(bn: int, head_dim: int, e2e_freq: int) -> float:
    """flash-attn 2.8.3's rule, kept for the trtllm-gen designs that stand on FA4's: share of an
    unmasked tile's exps emulated, E2E_RES of every e2e_freq scores of a 32-score fragment in all
    but the row's last fragment; none above head dim 128. With 128-wide key tiles: 0.1875 at
    e2e_freq 16, 0.28 at 10."""
    if head_dim > 128:
        return 0.0
    return e2e_emulated_fraction(bn, e2e_freq, 0)


def fa4_ex2_emu_schedule(compute_capability: str, *, two_cta: bool, causal: bool, local: bool,
                         head_dim: int, pack_gqa: bool, fp8: bool) -> tuple[int, int]:
    """(ex2_emu_freq, ex2_emu_start_frg) of FA4's forward, flash-attn-4 4.0.0b40 config.py:
    540-573 select_ex2_emu: (0, 0) off cc 10.x/11.x and on the SM103 family (cc 10.3); tuned
    keys (FA4_EX2_EMU_TUNING, FP8 P/V: FA4_FP8_EX2_EMU_TUNING), else freq 16 from fragment 1 at
    padded head dim <= 128 or at 192 with 2-CTA and no mask; packed GQA with no mask above
    head dim 64: the tuned freq or 10. head_dim is the padded one (a multiple of 16)."""
    major, _, minor = compute_capability.partition(".")
    if major not in ("10", "11") or (major, minor) == ("10", "3"):
        return 0, 0
    key = (two_cta, causal, head_dim)
    tune = FA4_FP8_EX2_EMU_TUNING.get(key) if fp8 else None
    tune = tune or FA4_EX2_EMU_TUNING.get(key)
    if tune is not None:
        freq, start = tune
        if freq == 0:
            return 0, 0
    else:
        if not (head_dim <= 128 or (head_dim == 192 and two_cta and not causal and not local)):
            return 0, 0
        freq, start = FA4_EX2_EMU_FREQ_DEFAULT, FA4_EX2_EMU_START_FRG_DEFAULT
    if pack_gqa and head_dim > 64 and not causal and not local:
        freq = tune[0] if tune is not None else FA4_E2E_FREQ_PACKED_GQA
    return freq, start


def backward_side_kernels(o_elements: float, o_bytes: float, lse_bytes: float, q_bytes: float,
                          kv_bytes: float, dq_accum_bytes: float, dkv_expanded_bytes: float,
                          dkv_accum_bytes: float, element_bytes: float
                          ) -> tuple[Demand, list[Demand]]:
    """The streaming kernels around FlashAttention's backward main kernel: the preprocess
    (D = rowsum(dO∘O); zero the FP32 accumulators), then after it dQ's FP32 → dtype conversion,
    and with GQA either the reduction of the per-query-head dK, dV (FA2) or the conversion of
    their FP32 accumulators (FA3-style)."""
    pre = stream_demand(o_elements, read_bytes=2 * o_bytes,
                        write_bytes=lse_bytes + dq_accum_bytes + dkv_accum_bytes,
                        per_element={"fma": BWD_PREPROCESS_FMA_PER_ELEMENT},
                        element_bytes=element_bytes, flop=0.0,
                        details={"part": "bwd preprocess: D = rowsum(dO∘O), zero dQ accum"})
    posts = [stream_demand(dq_accum_bytes / 4, read_bytes=dq_accum_bytes, write_bytes=q_bytes,
                           per_element={"fma": BWD_POSTPROCESS_FMA_PER_ELEMENT},
                           element_bytes=4.0, flop=0.0,
                           details={"part": "bwd postprocess: dQ FP32 → input dtype"})]
    if dkv_expanded_bytes:  # two reductions (dK, dV) over each KV head's query-head group
        posts.append(dataclasses.replace(stream_demand(
            dkv_expanded_bytes / element_bytes, read_bytes=dkv_expanded_bytes,
            write_bytes=kv_bytes, per_element={"fma": 1.0}, element_bytes=element_bytes,
            flop=0.0, details={"part": "bwd GQA: sum dK, dV over the query-head group"}),
            kernels=2))
    if dkv_accum_bytes:  # dK and dV postprocess: FP32 accumulators → input dtype
        posts.append(dataclasses.replace(stream_demand(
            dkv_accum_bytes / 4, read_bytes=dkv_accum_bytes, write_bytes=kv_bytes,
            per_element={"fma": BWD_POSTPROCESS_FMA_PER_ELEMENT}, element_bytes=4.0,
            flop=0.0, details={"part": "bwd postprocess: dK, dV FP32 → input dtype"}),
            kernels=2))
    return pre, posts


def _without(group: "tuple[str, ...] | Overlap", resources: tuple[str, ...]
             ) -> "tuple[str, ...] | Overlap":
    """An overlap tree (or group) with `resources` taken out of every group."""
    if isinstance(group, Overlap):
        return Overlap(_without(group.a, resources), _without(group.b, resources),
                       group.efficiency)
    return tuple(r for r in group if r not in resources)


def fitted_state() -> tuple:
    """The fitted constants an attention demand reads when called (perfmodel.validation.fit
    sets them while it fits), as a hashable value: the prediction caches key on them."""
    return (MMA_SYNC_FRACTION, MMA_SYNC_FRACTION_TCGEN05, MMA_SYNC_OPERAND_OVERLAP,
            CTA_ROUND_TRIPS,
            *SOFTMAX_OVERLAP.values(), *DESIGN_OVERLAP.values(),
            *XQA_CTA_ROUND_TRIPS.values(), TRTLLM_GEN_DECODE_FIXED_S)


class Attention(Op):
    name = "attention"
    EXAMPLE = dict(batch=2, heads=32, kv_heads=8, seq_q=2048, head_dim=128, dtype="bf16",
                   causal=True)
    ALIASES = {"dropout": "dropout_p"}  # the name this parameter had before dropout_p
    PARAMS = {
        "batch": positive("sequences", "batch size"),
        "heads": positive("heads", "query heads"),
        "seq_q": positive("tokens", "query length (1 for decode)"),
        "head_dim": positive("elements", "Q/K head dimension"),
        "dtype": Param("dtype", required=True, choices=("fp16", "bf16", "fp8", "fp8_e4m3")),
        "kv_heads": Param("int", default=None, nullable=True, lo=1, doc="K/V heads (= heads)"),
        "seq_kv": Param("int", default=None, nullable=True, lo=1, doc="key length (= seq_q)"),
        "head_dim_v": Param("int", default=None, nullable=True, lo=1, doc="V dim (= head_dim)"),
        "causal": Param("bool", default=False),
        "window": Param("int", default=None, nullable=True, lo=1,
                        doc="sliding window in keys (none: full)"),
        "direction": Param("choice", default="fwd", choices=("fwd", "bwd", "fwd+bwd")),
        "dropout_p": Param("float", default=0.0, lo=0.0, hi=0.999,
                           doc="dropout probability, as PyTorch's scaled_dot_product_attention "
                               "and FlashAttention name it (alias: dropout)"),
        "dropout_rng": Param("choice", default="fused", choices=("fused", "precomputed")),
        "kernel": Param("choice", default=None, nullable=True, choices=KERNELS),
        "dropout_mask": Param("choice", default="bytes", choices=("bytes", "bits"),
                              doc="precomputed mask layout: a byte or a bit per score"),
        "dropout_bits_per_score": Param("int", default=None, nullable=True, lo=1, hi=128,
                                        doc="random bits drawn per score by fused dropout "
                                            "(none: the kernel's own, FA2/FA3 8, i.e. 16 per "
                                            "Philox call, FA4 16; 128: one call per score, "
                                            "FA's per-element SM90/SM100 path)"),
        "dropout_generator": Param("choice", default="philox4x32-7",
                                   choices=("philox4x32-7", "philox4x32-10"),
                                   doc="fused RNG (FlashAttention uses Philox4x32-7)"),
        "shared_kv": Param("bool", default=False,
                           doc="V is the first head_dim_v dims of K (MLA latent KV cache)"),
        "kv_dtype": Param("dtype", default=None, nullable=True, choices=KV_DTYPES,
                          doc="K/V storage type (none: dtype); narrower than dtype: K/V move in "
                              "it and are converted to dtype on the CUDA cores (forward)"),
    }
    SIZE_PARAMS = ("batch", "heads", "seq_q", "head_dim")
    TENSORS = (("batch", "heads", "seq_q", "head_dim"), ("batch", "kv_heads", "seq_kv", "head_dim"))

    def check(self, v):
        kv = v["kv_heads"] or v["heads"]
        if v["heads"] % kv:
            return [("kv_heads", f"heads ({v['heads']}) must be a multiple of kv_heads ({kv})")]
        s = v["kv_dtype"]
        if s is not None and tensor_dtype(s) != tensor_dtype(v["dtype"]):
            if bytes_per_element(s) >= bytes_per_element(v["dtype"]):
                return [("kv_dtype", f"{s} K/V with {v['dtype']} MMAs: a K/V cache is stored in "
                                     f"dtype or narrower")]
            if v["direction"] != "fwd":
                return [("kv_dtype", f"{s} K/V narrower than dtype {v['dtype']} is a serving "
                                     f"(forward) cache; the backward needs K and V in dtype")]
        return []

    # the dropout options by the RNG mode they shape: the mask's layout only a precomputed mask,
    # the bits per score and the generator only the fused Philox draws
    DROPOUT_OPTIONS = {"dropout_rng": None, "dropout_mask": "precomputed",
                       "dropout_bits_per_score": "fused", "dropout_generator": "fused"}

    def warnings(self):
        out = []
        for key, rng in self.DROPOUT_OPTIONS.items():
            if self.params[key] == self.PARAMS[key].default:
                continue
            if self.dropout_p == 0:
                out.append((key, "applies to dropout (dropout_p > 0); with none it changes "
                                 "nothing"))
            elif rng is not None and self.dropout_rng != rng:
                out.append((key, f"applies to dropout_rng {rng}; the {self.dropout_rng} "
                                 f"mask ignores it"))
        return out

    def cache_state(self) -> tuple:
        return fitted_state()

    def demand(self, hw):
        kernel = self.kernel or DEFAULT_KERNEL[hw.mma_instruction]
        if hw.mma_instruction not in KERNEL_MMA[kernel]:
            raise InputError(f"attention kernel '{kernel}' does not run on {hw.name} "
                             f"({hw.mma_instruction} tensor cores); it needs "
                             f"{' or '.join(KERNEL_MMA[kernel])}")
        if not hw.supports(self.dtype):
            raise InputError(f"attention dtype '{self.dtype}' is not supported by {hw.name}'s "
                             f"tensor cores (supported: "
                             f"{', '.join(sorted(hw.tensor_flop_per_sm_per_clk))})")
        if kernel == "trtllm":
            if self.direction != "fwd":
                raise InputError("attention kernel 'trtllm' is TensorRT-LLM's inference "
                                 "attention: forward only")
            base, design = trtllm_design(hw, self.seq_q, self.seq_kv or self.seq_q,
                                         tensor_dtype(self.dtype) == "fp8", self.shared_kv)
            return self._pass_demand(hw, base, "fwd", design=design, family="trtllm")
        passes = ("fwd", "bwd") if self.direction == "fwd+bwd" else (self.direction,)
        demands = [self._pass_demand(hw, kernel, p) for p in passes]
        if len(demands) == 1:
            return demands[0]
        # fwd+bwd: the two passes' kernels back to back
        a, b = demands
        return Demand(work=add_work(a.work, b.work), launch=b.launch, flop=a.flop + b.flop,
                      hbm_bytes=a.hbm_bytes + b.hbm_bytes, kernels=a.kernels + b.kernels,
                      sequence=(a, b), details={"kernel": kernel, "direction": "fwd+bwd"})

    def _pass_demand(self, hw, kernel: str, direction: str, design: str | None = None,
                     family: str | None = None) -> Demand:
        if kernel == "triton_fa":  # its own tiles, loads and backward (triton_fa.py)
            from perfmodel.ops.attention.triton_fa import triton_fa_pass
            return triton_fa_pass(self, hw, direction)
        d, dv = self.head_dim, self.head_dim_v or self.head_dim
        b = bytes_per_element(self.dtype)
        kb = self._kv_bytes_per_element()
        tensor = f"tensor:{tensor_dtype(self.dtype)}"
        # cuDNN's tcgen05 SDPA kernels are warp-specialized designs of FA4's class (tiles.TILE,
        # FA4_CLASS) with parameters of their own: their exp emulation
        # (CUDNN_TCGEN05_EMULATED_FRACTION) and overlaps fitted on cuDNN's own Blackwell rows
        design = design or ("cudnn_tcgen05" if (kernel == "cudnn"
                                                 and hw.mma_instruction == "tcgen05") else kernel)
        # FP8 wgmma (Hopper) wants V K-major: FA3-design kernels transpose each V tile in shared
        # memory (FA3 paper §3.3); tcgen05 reads either major-ness
        v_transposed = tensor == "tensor:fp8" and design in ("fa3", "cudnn", "trtllm_fmha_v2",
                                                             "xqa_sm90")
        t = tiling(hw, kernel, design, direction, batch=self.batch, heads=self.heads,
                   kv_heads=self.kv_heads or self.heads, seq_q=self.seq_q,
                   seq_kv=self.seq_kv or self.seq_q, d=d, dv=dv, element_bytes=b,
                   causal=self.causal, window=self.window, dropout=self.dropout_p > 0,
                   v_transposed=v_transposed, shared_kv=self.shared_kv, kv_element_bytes=kb,
                   own_kernel=family is None)
        work = self._tile_work(hw, t, kernel, design, direction, tensor, v_transposed)
        io = self._memory(t, kernel, direction)
        smem = tile_smem_bytes(t.tile_m, t.bn, d, dv, b, v_transposed, self.shared_kv, kb)
        dropout_terms = {}
        if self.dropout_p > 0:
            dropout_terms = self._add_dropout(hw, work, io, t, design, direction, smem)
        work["hbm"], work["l2"] = io["hbm"], io["l2"]
        smem_cta = min(hw.smem_per_cta_bytes, int(smem))
        round_trips = CTA_ROUND_TRIPS
        if design in XQA_DESIGNS:
            # XQA's launch bounds set its CTAs per SM (trtllm.xqa_launch); its split-KV merge runs
            # inside the kernel
            x = xqa_launch(hw, design, batch=self.batch, kv_heads=self.kv_heads or self.heads,
                           group=self.heads // (self.kv_heads or self.heads) * self.seq_q,
                           seq_kv=self.seq_kv or self.seq_q)
            smem_cta = min(smem_cta, hw.smem_per_sm_bytes // x.ctas_per_sm)
            round_trips = XQA_CTA_ROUND_TRIPS[design]
        launch = LaunchShape(ctas=t.ctas, threads_per_cta=t.threads,
                             registers_per_thread=t.registers,
                             smem_per_cta_bytes=smem_cta,
                             bytes_in_flight_per_cta=KV_STAGES * t.bn * (d + dv) * kb)
        details = {"kernel": family or kernel, "direction": direction, "tile_pairs": t.pairs,
                   "key_tile": t.bn, "decode": t.decode, "kv_splits": t.kv_splits}
        if family:
            details["design"] = design
        if dropout_terms:
            details["dropout"] = dropout_terms
        main = Demand(work=work, launch=launch, flop=self._mma_flop_per_score(direction) * t.scores,
                      hbm_bytes=io["hbm"],
                      overlap=self._overlap(kernel, design, direction, tensor, bool(
                          dropout_terms.get("rng_on_critical_path"))),
                      cta_dram_round_trips=round_trips,
                      cta_imbalance=t.imbalance, kernels=t.kernels,
                      persistent=design == TRTLLM_GEN_DECODE and not t.split_kv,
                      fixed_s=TRTLLM_GEN_DECODE_FIXED_S if design == TRTLLM_GEN_DECODE else 0.0,
                      details=details)
        if direction == "fwd" and design in PREFILL_ONLY:
            # TensorRT-LLM's context path first builds the batch's sequence metadata
            # (buildDecoderInfo: cumulative sequence lengths, padding offsets) in a kernel of its
            # own: a few integers per sequence read and written
            info = stream_demand(self.batch, read_bytes=4.0 * self.batch,
                                 write_bytes=4.0 * 2 * (self.batch + 1), per_element={},
                                 element_bytes=4.0, flop=0.0,
                                 details={"part": "context: build sequence metadata"})
            return sequence_demand((info, main), launch_from=1, flop=main.flop, details=details)
        if direction == "fwd":
            return main
        pre, posts = backward_side_kernels(
            o_elements=self.batch * self.heads * self.seq_q * dv, o_bytes=io["o"],
            lse_bytes=io["lse"], q_bytes=io["q"], kv_bytes=io["kv"],
            dq_accum_bytes=io["dq_accum"], dkv_expanded_bytes=io["dkv_expanded"],
            dkv_accum_bytes=io["dkv_accum"], element_bytes=b)
        return sequence_demand((pre, main, *posts), launch_from=1, flop=main.flop,
                               details=details)

    def _tile_work(self, hw, t: Tiling, kernel: str, design: str, direction: str, tensor: str,
                   v_transposed: bool) -> dict[str, float]:
        """SM work of the visited tiles: MMAs, softmax, shared memory, issue slots."""
        d, dv = self.head_dim, self.head_dim_v or self.head_dim
        b = bytes_per_element(self.dtype)
        tile_scores = t.tile_scores
        # V-split CTAs (trtllm-gen MLA) each compute the whole QKᵀ and their share of P·V
        dv = dv / t.v_splits
        mma = self._mma_flop_per_score(direction, dv) * tile_scores
        work: dict[str, float] = {tensor: mma / self._mma_path(hw, kernel)}
        masked_scores = self._masked_scores(t)
        exps = tile_scores
        emulated = 0.0
        if design == "fa4" and direction == "fwd":
            # flash-attn-4 4.0.0b40: every computed tile emulates, masked ones too
            emulated = tile_scores * e2e_emulated_fraction(t.bn, *self._fa4_ex2_emu(hw, t))
        elif kernel == "fa4" and direction == "fwd":
            emulated = (tile_scores - masked_scores) * fa4_emulated_fraction(
                t.bn, max(d, dv), self._fa4_e2e_freq(d))
        elif design == "cudnn_tcgen05" and direction == "fwd":
            emulated = (tile_scores - masked_scores) * self._cudnn_emulated_fraction(hw, direction)
        if emulated:
            work["fma"] = emulated * FA4_EMULATED_EXP_FMA
            work["alu"] = emulated * FA4_EMULATED_EXP_ALU
            exps -= emulated
        work["xu"] = exps
        work = add_work(work, {"fma": SOFTMAX_FMA_PER_SCORE[direction] * tile_scores,
                               "alu": SOFTMAX_ALU_PER_SCORE * tile_scores})
        if direction == "fwd" and design not in FA4_CLASS:
            # online softmax rescales the output accumulator at every key tile,
            # O ← diag(exp(m_old − m_new))·O + PV (FA2 paper Algorithm 1): tile_m × dv FP32
            # multiplies per tile pair, dv / bn per score. FA4 rescales only when a row max grows
            # past a threshold, in a correction warpgroup (FA4 paper), so it is left out there.
            work["fma"] += t.pairs * t.tile_m * dv
        if kernel == "fa2" and direction == "fwd":
            # mma.sync operands: the Q tile once, and K and V once per warp (ldmatrix)
            work["smem"] = t.pairs * (t.bm * d + t.threads // 32 * t.bn * (d + dv)) * b
        elif kernel == "fa2":
            work["smem"] = t.pairs * fa2_bwd_smem_elements(t.bm, t.bn, d, dv, t.threads // 32) * b
        elif direction == "fwd":
            # wgmma/tcgen05 read the Q, K and V tiles from shared memory; FA4's two query tiles
            # per CTA each run their own MMAs, so each reads K and V
            kv_reads = FA4_FWD_Q_STAGES if design in FA4_CLASS and not t.decode else 1
            work["smem"] = t.pairs * (t.tile_m * d + kv_reads * t.bn * (d + dv)) * b
        else:
            work["smem"] = SMEM_TILE_READS_BWD * t.pairs * t.bn * (d + dv) / 2 * b
            if kernel == "fa4":
                work["smem"] *= FA4_BWD_2CTA_SMEM_FRACTION
        if v_transposed:
            # each V tile is transposed in shared memory (read and write once) and P is
            # byte-permuted in registers (FA3 paper §3.3)
            work["smem"] += 2.0 * t.pairs * t.bn * dv * b
            work["alu"] += tile_scores / 4
        if tensor == "tensor:fp8":
            convert = hw.fp8_convert_pipe
            work[convert] = work.get(convert, 0.0) + FP8_PACK_XU_PER_SCORE * tile_scores
        work["alu"] += 2.0 * masked_scores  # a compare and a select per score of masked tiles
        # FA4-class kernels issue their FP32 softmax math as packed FFMA2/FADD2 (sm_100): one
        # instruction per two lanes' work
        fma_per_instr = 2.0 if (design in FA4_CLASS and hw.packed_fp32) else 1.0
        work["issue"] = (work.get("fma", 0.0) / fma_per_instr + work.get("alu", 0.0)
                         + work.get("xu", 0.0)) / 32.0
        if self.kv_dtype is not None and tensor_dtype(self.kv_dtype) != tensor_dtype(self.dtype):
            # each K/V tile a CTA loads: its narrow stage read from shared memory, converted on
            # the CUDA cores (kv_dequant_work: instructions per element), written as a dtype
            # staging tile that the MMAs read
            kv_elements = t.pairs * t.bn * (d if self.shared_kv else d + dv)
            work["smem"] += kv_elements * (self._kv_bytes_per_element() + b)
            convert = kv_dequant_work(hw, self.kv_dtype, self.dtype)
            work = add_work(work, {r: n * kv_elements for r, n in convert.items()},
                            {"issue": sum(convert.values()) * kv_elements / 32.0})
        return work

    def _mma_path(self, hw, kernel: str) -> float:
        """The MMAs' rate as a share of the native tensor rate the work is counted at: 1, except
        for FA2's Ampere-style mma.sync on a GPU whose native MMA is wgmma or tcgen05, which runs
        at the GPU's own mma.sync rate (isa.mma_sync_flop_per_sm_per_clk; on Blackwell the
        legacy path, not tcgen05's) times FA2's share of it (MMA_SYNC_FRACTION; on tcgen05 GPUs
        MMA_SYNC_FRACTION_TCGEN05)."""
        if kernel != "fa2" or hw.mma_instruction == "mma_sync":
            return 1.0
        d = tensor_dtype(self.dtype)
        if d not in hw.mma_sync_flop_per_sm_per_clk:
            raise InputError(f"attention kernel 'fa2' issues mma.sync, for which {hw.name}'s spec "
                             f"declares no {d} rate (isa.mma_sync_flop_per_sm_per_clk has: "
                             f"{', '.join(sorted(hw.mma_sync_flop_per_sm_per_clk))})")
        share = MMA_SYNC_FRACTION_TCGEN05 if hw.mma_instruction == "tcgen05" \
            else MMA_SYNC_FRACTION
        return share * hw.mma_sync_flop_per_sm_per_clk[d] / hw.tensor_flop_per_sm_per_clk[d]

    def _cudnn_emulated_fraction(self, hw, direction: str) -> float:
        """Share of an unmasked tile's exps cuDNN's tcgen05 forward emulates on the FMA pipe
        (CUDNN_TCGEN05_EMULATED_FRACTION): where the MUFU's exps per clock do not outpace the
        MMA's scores per clock, in FP8 kernels always and in 16-bit kernels without a mask."""
        d = tensor_dtype(self.dtype)
        mufu_bound = (hw.pipes_per_sm_per_clk["xu"] * self._mma_flop_per_score(direction)
                      <= hw.tensor_flop_per_sm_per_clk[d])
        dense = not self.causal and not self.window
        return CUDNN_TCGEN05_EMULATED_FRACTION if mufu_bound and (d == "fp8" or dense) else 0.0

    def _mma_flop_per_score(self, direction: str, dv: float | None = None) -> float:
        """MMA FLOP per score: S = QKᵀ and O += PV forward; backward recomputes S and runs dP,
        dV, dK and dQ (FA2 paper §3.2). `dv`: the V dims a CTA multiplies (default all)."""
        d = self.head_dim
        dv = dv or self.head_dim_v or self.head_dim
        return 2.0 * (d + dv) if direction == "fwd" else 2.0 * (3 * d + 2 * dv)

    def _masked_scores(self, t: Tiling) -> float:
        """Scores of the tiles that apply a mask: per query tile, the key tiles the diagonal
        crosses, ceil(bm / bn) of them (causal: FA2's n_masking_steps, flash_fwd_kernel.h) if
        there are that many, or else the last key tile when the key length ends inside it (the
        seqlen_k mask)."""
        skv = self.seq_kv or self.seq_q
        if not (self.causal or skv % t.bn):
            return 0.0
        per_q_tile = min(math.ceil(t.tile_m / t.bn), math.ceil(skv / t.bn)) if self.causal else 1
        tiles = self.batch * t.tile_heads * math.ceil(self.seq_q / t.tile_m) * per_q_tile
        # never more than the tiles computed: with fewer keys than queries, bottom-right causal
        # alignment leaves the first query tiles no key tile at all
        return float(min(tiles, t.pairs) * t.tile_m * t.bn)

    def _fa4_ex2_emu(self, hw, t: Tiling) -> tuple[int, int]:
        """FA4's forward exp-emulation schedule for this launch (fa4_ex2_emu_schedule), with the
        launch choices it keys on as flash-attn-4 4.0.0b40 config.py makes them: pack_gqa by
        default with GQA (default_pack_gqa, :708-733: not at head dim 256 when the group does not
        divide 128), two query stages when the packed query rows exceed a 128-row tile and V is
        not 256 wide (:1585), 2-CTA MMAs (is_2cta_eligible, :786-818) with one KV split, packed
        query rows beyond the stages' tiles (or a one-wave head-dim-256 grid), the group dividing
        the tile when packed, and head dim 256 or no mask at padded head dims 128/192 with V 128."""
        d, dv = self.head_dim, self.head_dim_v or self.head_dim
        hkv = self.kv_heads or self.heads
        group = self.heads // hkv
        hd256 = d == 256 and dv == 256
        pack_gqa = group > 1 and not (hd256 and 128 % group)
        local = self.window is not None
        rows = self.seq_q * (group if pack_gqa else 1)
        q_stages = 2 if rows > 128 and dv != 256 else 1
        dp, dvp = -(-d // 16) * 16, -(-dv // 16) * 16
        hd256_decode = hd256 and 2 * self.batch * (hkv if pack_gqa else self.heads) <= hw.sm_count
        two_cta = (t.kv_splits == 1 and (rows > q_stages * 128 or hd256_decode)
                   and (128 % group == 0 or not pack_gqa)
                   and (hd256 or (not self.causal and not local and dp in (128, 192)
                                  and dvp == 128)))
        return fa4_ex2_emu_schedule(hw.compute_capability, two_cta=two_cta, causal=self.causal,
                                    local=local, head_dim=dp, pack_gqa=pack_gqa,
                                    fp8=tensor_dtype(self.dtype) == "fp8")

    def _fa4_e2e_freq(self, d: int) -> int:
        """FA4's exp-emulation period: 10 when it packs a GQA group into the query tile (its
        default when the group divides 128) with no mask at head dim > 64, else 16."""
        group = self.heads // (self.kv_heads or self.heads)
        packed = group > 1 and 128 % group == 0
        unmasked = not self.causal and not self.window
        return FA4_E2E_FREQ_PACKED_GQA if (packed and unmasked and d > 64) else FA4_E2E_FREQ

    def _memory(self, t: Tiling, kernel: str, direction: str) -> dict[str, float]:
        """HBM and L2 bytes of the main kernel, and the tensors the backward's side kernels
        stream (bytes)."""
        d, dv = self.head_dim, self.head_dim_v or self.head_dim
        hkv = self.kv_heads or self.heads
        group = self.heads // hkv
        b = bytes_per_element(self.dtype)
        kb = self._kv_bytes_per_element()
        q_bytes = self.batch * self.heads * self.seq_q * d * b
        kv_row = d if self.shared_kv else d + dv
        kv_bytes = self.batch * hkv * (self.seq_kv or self.seq_q) * kv_row * kb
        # FA3's FP8 forward writes O in BF16 (hopper/test_flash_attn.py compares it with a BF16
        # reference by subtraction, which PyTorch's float8 does not support); cuDNN's FP8 graph
        # writes FP8 (hopper/benchmark_flash_attention_fp8.py allocates O as the QKV dtype)
        o_b = 2 if (b == 1 and kernel == "fa3") else b
        o_bytes = self.batch * self.heads * self.seq_q * dv * o_b
        lse = self.batch * self.heads * self.seq_q * 4.0
        io = {"q": q_bytes, "kv": kv_bytes, "o": o_bytes, "lse": lse, "dq_accum": 0.0,
              "dkv_expanded": 0.0, "dkv_accum": 0.0}
        if direction == "fwd":
            io["hbm"] = q_bytes + kv_bytes + o_bytes + lse
            io["l2"] = q_bytes + t.pairs * t.bn * kv_row * kb + o_bytes + lse
            return io
        # main kernel: read Q, K, V, dO, LSE, D; write dK, dV; dQ FP32 atomics through L2
        dq_accum = q_bytes * 4 / b
        # dK, dV with GQA (a group of query heads per KV head): FA2 writes them per query head
        # and sums the group afterwards (flash_api.cpp mha_bwd: dk_expanded, at::sum_out);
        # FA3-style kernels add each query head's share into FP32 accumulators with atomics
        # and convert them in a postprocess (cute/interface.py _flash_attn_bwd: dk_accum)
        dkv_expanded = kv_bytes * group if (group > 1 and kernel == "fa2") else 0.0
        dkv_accum = kv_bytes * 4 / b if (group > 1 and kernel != "fa2") else 0.0
        dkv_written = dkv_expanded or dkv_accum or kv_bytes
        hbm = q_bytes + kv_bytes + dkv_written + o_bytes + 2 * lse + dq_accum
        dq_atomics = t.pairs * t.bm * d * 4.0 * 2 * (FA4_BWD_2CTA_DQ_FRACTION if kernel == "fa4"
                                                       else 1.0)
        io.update(hbm=hbm, l2=hbm + dq_atomics + dkv_accum * group * 2, dq_accum=dq_accum,
                  dkv_expanded=dkv_expanded, dkv_accum=dkv_accum)
        return io

    def _kv_bytes_per_element(self) -> float:
        """Bytes per K/V element as stored (kv_dtype, block scales included; none: dtype)."""
        return bytes_per_element(self.kv_dtype or self.dtype)

    def _add_dropout(self, hw, work: dict[str, float], io: dict[str, float], t: Tiling,
                     design: str, direction: str, smem_bytes: float) -> dict[str, float]:
        """Fused dropout: Philox beside the softmax on the warps that compute it
        (rng.fused_dropout_work), the mask regenerated in backward. Precomputed: a mask read from
        HBM and applied per score. Returns the named terms (details["dropout"])."""
        if self.dropout_rng != "fused":
            mask_bytes = t.scores * (1.0 if self.dropout_mask == "bytes" else 1 / 8)
            io["hbm"] += mask_bytes
            io["l2"] += mask_bytes
            apply = t.scores * MASK_APPLY_ALU_PER_SCORE[self.dropout_mask]
            work["alu"] += apply
            work["issue"] += apply / 32
            return {"mask_bytes": mask_bytes, "mask_alu": apply}
        d, dv = self.head_dim, self.head_dim_v or self.head_dim
        warps, regs = DROPOUT_WARPS.get((design, direction), (t.threads // 32, t.registers))
        if (design == "fa4" and direction == "fwd" and self.dtype in ("bf16", "fp16")
                and -(-max(d, dv) // 16) * 16 < FA4_FWD_SMALL_HDIM):
            regs = FA4_FWD_SMALL_HDIM_SOFTMAX_REGS
        rng_threads = warps * 32
        tile = t.tile_m * t.bn
        scores_per_thread = t.bn if (design in FA4_CLASS and direction == "fwd") \
            else tile / rng_threads
        live = scores_per_thread * (2 if direction == "bwd" else 1) + DROPOUT_BOOKKEEPING_REGS
        if design not in FA4_CLASS:  # accumulators in registers (tensor memory on tcgen05)
            live += (t.tile_m * dv if direction == "fwd" else t.bn * (d + dv)) / rng_threads
        fold, keys = DROPOUT_PHILOX.get((design, direction), (True, False))
        bits = self.dropout_bits_per_score or DROPOUT_BITS_PER_SCORE[design]
        rng_work, terms = fused_dropout_work(
            t.tile_scores, bits, GENERATOR_ROUNDS[self.dropout_generator], direction, fold, keys,
            rng_warps_per_sm=warps * self._ctas_per_sm(hw, t, smem_bytes), register_budget=min(
                regs, hw.max_registers_per_thread), live_registers=live,
            scores_per_thread=scores_per_thread)
        issue = work.get("issue", 0.0) + rng_work["issue"]
        # the Philox chains' latency floor: softmax instructions fill the stalls, so the warps'
        # issue is the larger of all their instructions and the chains' own floor
        terms["chain_stall_issue"] = max(0.0, terms["chain_issue_floor"] - issue)
        work.update(add_work(work, {r: w for r, w in rng_work.items() if r != "issue"}))
        work["issue"] = max(issue, terms["chain_issue_floor"])
        terms.update(bits_per_score=float(bits), lop3_fold=float(fold),
                     precomputed_keys=float(keys), register_budget=float(regs))
        return terms

    @staticmethod
    def _ctas_per_sm(hw, t: Tiling, smem_bytes: float) -> int:
        """Resident CTAs per SM of the pass (registers, warps, shared memory): the count the
        engine's occupancy gives, repeated here because an op does not call the engine."""
        warps = t.threads // 32
        regs_per_warp = math.ceil(min(t.registers, hw.max_registers_per_thread) * 32 / 256) * 256
        limits = [hw.max_ctas_per_sm, hw.max_warps_per_sm // warps,
                  hw.registers_per_sm // (regs_per_warp * warps)]
        if smem_bytes:
            limits.append(hw.smem_per_sm_bytes // min(hw.smem_per_cta_bytes, int(smem_bytes)))
        return max(1, min(limits))

    @staticmethod
    def _overlap(kernel: str, design: str, direction: str, tensor: str,
                 rng_serial: bool = False) -> Overlap:
        """What hides under what inside the main kernel. `rng_serial`: fused dropout's Philox
        runs on the critical path (rng.rng_on_critical_path): its integer group
        (RNG_SERIAL_RESOURCES) then adds to the rest instead of hiding under it."""
        if rng_serial:
            tree = Attention._overlap(kernel, design, direction, tensor, False)
            return Overlap(_without(tree, RNG_SERIAL_RESOURCES), RNG_SERIAL_RESOURCES, 0.0)
        # FA2's warps load their own MMA operands (ldmatrix) between mma.sync instructions: those
        # loads overlap the MMAs only partly. wgmma/tcgen05 read shared memory themselves.
        mmas = (Overlap((tensor,), ("smem",), MMA_SYNC_OPERAND_OVERLAP) if kernel == "fa2"
                else (tensor,))
        # what runs beside the MMAs: the softmax on the CUDA cores, and in backward the dQ
        # accumulation (FP32 atomics in L2). FA2's compute warps issue those atomics themselves,
        # between their MMAs and softmax; FA3-style kernels hand each dQ tile to a warp of their
        # own that adds it with TMA reduce-adds, a third stage overlapping the other two.
        softmax = ("xu", "fma", "alu", "issue")
        if direction == "fwd":
            design = FWD_OVERLAP_OF.get(design, design)
            eff = SOFTMAX_OVERLAP.get(design, DESIGN_OVERLAP.get((design, "fwd")))
        else:
            eff = DESIGN_OVERLAP[(BWD_OVERLAP_OF.get(design, design), "bwd")]
        if direction == "bwd" and kernel == "fa2":
            return Overlap(mmas, softmax + ("l2",), eff)
        if direction == "bwd":
            return Overlap(Overlap(mmas, softmax, eff), ("l2",), eff)
        return Overlap(mmas, softmax, eff)
