"""Fit the model's few fitted constants on their designated rows, and only those, and write them
to perfmodel/fitted.yaml, their one home.

    python -m perfmodel.validation.fit            # refit and rewrite perfmodel/fitted.yaml
    python -m perfmodel.validation.fit --check    # exit 1 (with a diff) if it differs from a refit

For each constant the file holds its value, the range its meaning allows (also the fit's bounds),
what it means, the rows it was fitted on (`fitted_on`, from the selection rules below), the rule
in words and the fit's rms log error where there is one. perfmodel.fitted reads it; the ops and
the hwspecs (`fitted:` provenance) take their values from there, and `measurements.FITTED_ROWS`
(the rows `perfmodel validate` reports apart as "fitted") derives from the `fitted_on` lists.

The fit starts from a known state: fixed starting points (each range's midpoint) and every
constant a fit depends on set explicitly (the sustained fraction first, then the attention
constants, then FA4's and cuDNN's tcgen05 overlaps with both), so the values in fitted.yaml
never change the result.

`tensor_sustained_fraction`: the SM clock under sustained dense MMA load as a share of the tensor
clock (power/thermal limit; the whole SM runs at it, Hardware "clock domains"). Fitted on gemm-mamf-001, Bekman's Maximum Achievable Matmul
FLOPS for BF16 on H100 SXM: a brute-force search for the best shape, so by construction the row
that measures the sustained rate with the least shape overhead. Every other GEMM row is judged
against the value, not fitted. The other GPUs carry it over (`fitted:` with `assumed:` in their
hwspecs) until measured. B200 and GB200 (the same die) take `tensor_sustained_fraction.b200`,
fitted on AIConfigurator's compute-bound B200 BF16 linears (held out: the MAMF fraction); B300
its own, `tensor_sustained_fraction.b300`, on AIConfigurator's compute-bound B300 BF16 linears
by the same rule (held out: the fit on Transformer Engine's B300 GEMM profile,
perfmodel.validation.te_profile). B300 sustains ~8 % more than B200 (0.726 against 0.669): the
H100 value made Blackwell's large GEMMs ~20 % too fast while Hopper's are within 5 %.

Attention: the H100 constants jointly on FP16 non-causal rows of the FA3 paper, forward and
backward (each family has its own backward overlap: a constant fitted on forward rows never
prices a backward); FA4's overlap on its one B200 headline; cuDNN's tcgen05 overlaps on cuDNN's
own Blackwell rows, the forward on one source (CUDNN-PRE, B200) and judged on the other
(CUDNN-TRN, GB200), the backward on three CUDNN-TRN rows and judged on the rest.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import difflib
import json
import math
import sys

import numpy as np
from scipy.optimize import least_squares

from perfmodel import fitted, ops, yamlio
from perfmodel.engine import estimate, resolve
from perfmodel.hardware import Hardware
from perfmodel.ops import nccl
from perfmodel.ops.attention import op as attention

from perfmodel.validation import te_profile
from perfmodel.validation.measurements import (AICONFIGURATOR_CSV, AICONFIGURATOR_MOE_MXFP4_CSV,
                                               AICONFIGURATOR_MOE_MARLIN_CSV,
                                               AICONFIGURATOR_NCCL_CSV, BLACKWELL_CSV,
                                               BLACKWELL_MEASUREMENTS_CSV, PUBLIC_CSV, Case,
                                               load_cases as _load_cases)


def load_cases(path) -> tuple[list[Case], list]:
    """measurements.load_cases, read once per file version: the fits read the same CSVs a dozen
    times per fit_all, and a cross-validation runs fit_all 17 times. New lists each call (the
    cases themselves are frozen), so no caller sees another's changes."""
    from pathlib import Path
    st = Path(path).stat()
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key not in _CASES:
        _CASES[key] = _load_cases(path)
    cases, skipped = _CASES[key]
    return list(cases), list(skipped)


_CASES: dict[tuple, tuple[list[Case], list]] = {}  # (path, mtime, size) -> load_cases

MAMF_ROW = "gemm-mamf-001"
STREAM_ROW = "CUTLASS2917-001"
FA4_ROW = "att-fa4-b200-001"
FAMILIES = ("fa2", "fa3", "cudnn")
# the attention fit's result names -> fitted.yaml keys
ATTENTION_KEYS = {
    **{f"SOFTMAX_OVERLAP[{f}]": f"attention.softmax_overlap.{f}" for f in FAMILIES},
    "MMA_SYNC_FRACTION": "attention.mma_sync_fraction",
    "CTA_ROUND_TRIPS": "attention.cta_round_trips",
    "MMA_SYNC_OPERAND_OVERLAP": "attention.mma_sync_operand_overlap",
    **{f"SOFTMAX_OVERLAP_BWD[{f}]": f"attention.softmax_overlap.{f}.bwd" for f in FAMILIES},
}
# Weight of the joint attention fit's pull of each constant to the middle of its range, per
# full range of deviation, in log-error units: moving a constant across its whole range costs
# what a 0.3 % error on one row costs, so the constants the rows determine keep their fitted 3
# decimals (fitted.yaml is unchanged by it), and one the rows leave free is not set by the
# solver's floating-point path, which differs between CPUs: without it, the cross-validation
# fold that holds out att-fa3p-fwd16 fitted cuDNN's wgmma overlap at 0.166 under one OpenBLAS
# kernel set and 0.853 under another (OPENBLAS_CORETYPE=Sandybridge), and the H100
# attention_fwd CV MAPE read 12.3 % or 13.3 % by machine. 0.001 still let a weakly determined
# constant flip its third decimal between the two.
ATTENTION_PRIOR = 0.003
# cuDNN's tcgen05 kernels (attention.DESIGN_OVERLAP): key -> (design, pass)
CUDNN_TCGEN05_KEYS = {"attention.softmax_overlap.cudnn_tcgen05.fwd": ("cudnn_tcgen05", "fwd"),
                      "attention.softmax_overlap.cudnn_tcgen05.bwd": ("cudnn_tcgen05", "bwd")}
# TensorRT-LLM's own attention kernels (ops/attention/trtllm.py): key -> the design whose forward
# overlap it is (attention.DESIGN_OVERLAP), fitted on the GPU named, and XQA's round trips
TRTLLM_OVERLAP_KEYS = {"attention.softmax_overlap.trtllm_fmha_v2.fwd": ("trtllm_fmha_v2", "fwd"),
                       "attention.softmax_overlap.trtllm_gen.fwd": ("trtllm_gen", "fwd")}
TRTLLM_FIT_GPU = {"attention.softmax_overlap.trtllm_fmha_v2.fwd": "H100-SXM",
                  "attention.softmax_overlap.trtllm_gen.fwd": "B200",
                  "attention.cta_round_trips.xqa_sm90": "H100-SXM",
                  "attention.fixed_s.trtllm_gen_decode": "B200"}
XQA_KEY = "attention.cta_round_trips.xqa_sm90"
TRTLLM_GEN_FIXED_KEY = "attention.fixed_s.trtllm_gen_decode"
TRTLLM_GEN_FIXED_MAX_S = 15e-6  # generation calls this short are nearly all fixed cost
TRTLLM_CONTEXT_MIN_TOKENS = 4096  # compute-bound context rows: the overlap, not the floors
# fitted.yaml key -> (range its meaning allows, also the fit's bounds; decimals kept; meaning).
# The mma.sync rate's floor of 0.2 keeps FA2 within 5x of the native rate (0 would be no MMAs at
# all); the sustained fraction keeps the hwspec schema's [0.3, 1.0] and its 2 decimals, the value
# the hwspecs have carried since it was first fitted.
SPECS = {
    "tensor_sustained_fraction": (
        (0.3, 1.0), 2,
        "the SM clock under sustained dense MMA load as a share of the tensor clock (power/"
        "thermal limit; every SM-clocked rate of a tensor-heavy kernel runs at it); hwspecs take "
        "it with `fitted: tensor_sustained_fraction`"),
    "tensor_power_exponent": (
        (0.0, 1.0), 3,
        "how the power per clock of an MMA grows with its FLOP per clock r over the 16-bit MMA "
        "(r**exponent: FP8 r = 2, FP4 r = 4): the SM clock falls linearly in the power-weighted "
        "tensor utilization, so a busy FP8/FP4 MMA runs below the 16-bit sustained clock "
        "(engine.tensor_power_ratio); hwspecs take it with `fitted: tensor_power_exponent`"),
    **{f"graph_kernel_gap_s.{family}": (
        (0.0, 6.0e-6), 8,
        f"the GPU-side cost of each kernel a CUDA graph replays on {family} GPUs (the grid's "
        f"launch after the previous grid drains; the host's launch is gone): the serving "
        f"simulator's captured steps keep it per kernel; hwspecs take it with "
        f"`fitted: graph_kernel_gap_s.{family}`") for family in ("hopper", "blackwell")},
    **{f"nccl.ll_hop_s.{family}": (
        (1.0e-7, 5.0e-6), 9,
        f"one ring hop of NCCL's LL protocol over NVLink on {family} GPUs, measured (tuning.cc's "
        f"hwLat[NVLINK][RING][LL] is 0.6 us): the LL128 and Simple hops and the tree's keep "
        f"tuning.cc's ratios to the spec's; hwspecs take it with `fitted: nccl.ll_hop_s.{family}` "
        f"(links.nvlink.ll_latency_s)") for family in ("hopper", "blackwell")},
    **{f"nccl.ll_base_s.{family}": (
        (1.0e-6, 2.0e-5), 9,
        f"the fixed time of NCCL's ring LL collective over NVLink on {family} GPUs, measured "
        f"back to back (tuning.cc's baseLat[RING][LL] is 6.6 us; every base latency scales with "
        f"it, perfmodel/ops/nccl.py base_s); hwspecs take it with `fitted: "
        f"nccl.ll_base_s.{family}` (links.nvlink.nccl_base_latency_s)")
       for family in ("hopper", "blackwell")},
    **{f"nccl.ring_local_rate.{family}": (
        (2.0e11, 5.0e12), -9,
        f"the rate (bytes/s over NCCL's channels) of the one step per chunk loop in which a "
        f"GPU's ring touches only its own memory (its own chunk onto the ring, or the result off "
        f"it) while its inbound NVLink idles, on {family} GPUs: a ring collective of S bytes over "
        f"G GPUs pays S/G at this rate beside its link time (perfmodel/ops/nccl.py "
        f"ring_local_step_s); no source states it") for family in ("hopper", "blackwell")},
    "nccl.p2p.peer_s": (
        (0.0, 5.0e-6), 9,
        "what NCCL's all-to-all (grouped send/receive inside one NVLink domain) adds per peer "
        "beyond the first to its one round of latency (the kernel walks a work item per peer; "
        "perfmodel/ops/nccl.py p2p_extra_s); no source states it"),
    "nccl.p2p.ll_rate": (
        (1.0e9, 1.0e12), -6,
        "the rate (bytes/s) at which NCCL's all-to-all moves each peer's S/G with the LL "
        "protocol, the peers at once (the few p2p channels a small message gets; perfmodel/ops/"
        "nccl.py p2p_extra_s); no source states it"),
    "nccl.p2p.link_efficiency": (
        (0.3, 1.0), 3,
        "the share of NCCL's NVLink rate (the topology's 20.6 GB/s per Hopper link, 40.1 per "
        "Blackwell link) the peers' bytes of NCCL's Simple all-to-all reach (perfmodel/ops/"
        "nccl.py p2p_efficiency); no source states it"),
    "nccl.p2p.copy_rate": (
        (1.0e11, 5.0e12), -9,
        "the rate (bytes/s) at which NCCL's p2p channels pass a Simple all-to-all's whole "
        "buffer, the GPU's own S/G included (the bound Blackwell's rows show at every GPU "
        "count; perfmodel/ops/nccl.py p2p_extra_s); no source states it"),
    "tensor_power_exponent.fp4": (
        (0.0, 1.0), 3,
        "tensor_power_exponent of the block-scaled 4-bit MMAs (NVFP4, MXFP4; their power per "
        "clock also carries the block scales), where a spec takes it with `fitted: "
        "tensor_power_exponent.fp4`"),
    "tensor_sustained_fraction.b200": (
        (0.3, 1.0), 3,
        "B200's own sustained SM clock share under dense MMA load (a 1000 W part whose tensor "
        "cores draw more power per clock than Hopper's); B200 and GB200 (the same die) take it "
        "with `fitted: tensor_sustained_fraction.b200`"),
    "tensor_sustained_fraction.b300": (
        (0.3, 1.0), 3,
        "B300's own sustained SM clock share (Blackwell Ultra is strongly power-limited); its "
        "hwspec takes it with `fitted: tensor_sustained_fraction.b300`"),
    "hbm_achievable_fraction.b200": (
        (0.7, 0.95), 3,
        "the share of B200-class HBM3e's peak bandwidth a well-written streaming kernel sustains "
        "(read + write, refresh and bank/turnaround losses); B200 and GB200 take it with "
        "`fitted: hbm_achievable_fraction.b200`, B300 and GB300 (the same 8 TB/s HBM3e) carry it "
        "over"),
    "moe.marlin_mma_fraction": (
        (0.1, 1.0), 3,
        "the share of the GPU's mma.sync rate (isa.mma_sync_flop_per_sm_per_clk) vLLM's Marlin "
        "MoE reaches in its MMAs (ops.moe MARLIN_MMA_FRACTION)"),
    "moe.convert_ops.mxfp4": (
        (1.0, 32.0), 2,
        "FMA-pipe thread operations a mixed-input MoE mainloop spends per MXFP4 weight element it "
        "converts to the MMA type (E2M1 nibbles unpacked, widened, scaled by the block's E8M0 "
        "exponent): ops.moe CONVERT_OPS; the generic convert + scale counts 2"),
    **{f"serving.request_overhead_s.{e}": (
        (0.0, 0.2), 4,
        f"{e}'s per-request host path as a benchmark client times it (its send to the scheduler "
        f"and the first token back: connection, HTTP, tokenization, the hand-off to the "
        f"scheduler, detokenization, streaming), added to TTFT and E2E: no source states it "
        f"(plan/simulator/engines.py); the {e} preset takes it")
       for e in ("vllm", "sglang", "trtllm")},
    "serving.step_overhead_s.sglang": (
        (0.0, 0.05), 5,
        "SGLang's CPU time per engine step (scheduling, batch preparation, sampling, "
        "detokenization), serial with the GPU: no source states it (plan/simulator/engines.py)"),
    "training.sm_clock_fraction": (
        (0.5, 1.0), 3,
        "the SM clock a training step sustains as a share of the GPU's sustained clock under "
        "dense MMA load (the kernel benchmarks' clock, Hardware.sustained_sm_clock_hz): a "
        "step holds every SM busy for minutes, so it runs at the board's power and thermal "
        "limit, and it also stands in for the per-kernel costs the step's graph leaves out "
        "(launches, the host's synchronisations, the optimizer's and the loss's small "
        "kernels); plan_training takes it (perfmodel/plan/training.py)"),
    "training.moe_host_launch_s": (
        (0.0, 2.0e-4), 7,
        "the host's seconds per operation it issues in a Megatron-Core MoE step (a kernel of "
        "the graph; in Transformer Engine's GroupedLinear each local expert's quantize and "
        "GEMM): Python, PyTorch's dispatch and the launches, which the GPU waits for after "
        "each dropless MoE layer's synchronisation on the tokens per expert "
        "(perfmodel/plan/moe_host.py); no source states it"),
    "attention.softmax_overlap.fa2": (
        (0.0, 1.0), 3,
        "FA2's forward overlap efficiency of its softmax with its MMAs (demand.Overlap's power "
        "mean: 1 = fully hidden, 0 = serial)"),
    "attention.softmax_overlap.fa3": (
        (0.0, 1.0), 3,
        "FA3's forward overlap efficiency of its softmax with its MMAs (demand.Overlap's power "
        "mean: 1 = fully hidden, 0 = serial)"),
    "attention.softmax_overlap.fa4": (
        (0.0, 1.0), 3,
        "FA4's forward overlap efficiency of its softmax with its MMAs: its dedicated MMA warp "
        "and two ping-ponging softmax warpgroups hide far more than FA3 does"),
    "attention.softmax_overlap.cudnn": (
        (0.0, 1.0), 3,
        "cuDNN's (wgmma) forward overlap efficiency of its softmax with its MMAs "
        "(demand.Overlap's power mean: 1 = fully hidden, 0 = serial)"),
    "attention.mma_sync_fraction": (
        (0.2, 1.0), 3,
        "FA2's share of the GPU's Ampere-style mma.sync rate (isa.mma_sync_flop_per_sm_per_clk) "
        "on GPUs whose native MMA is wgmma (tcgen05 GPUs: attention.mma_sync_fraction.tcgen05)"),
    "attention.mma_sync_fraction.tcgen05": (
        (0.2, 1.0), 3,
        "FlashAttention-2's share of the spec's mma.sync rate on tcgen05 GPUs (Blackwell's "
        "legacy tensor path; the rate itself is Hopper's, assumed): held out, it takes "
        "attention.mma_sync_fraction"),
    "attention.mma_sync_operand_overlap": (
        (0.0, 1.0), 3,
        "how well FA2's ldmatrix operand loads overlap its mma.sync MMAs (overlap efficiency)"),
    "attention.cta_round_trips": (
        (0.0, 10.0), 3,
        "a non-persistent CTA's exposed start and drain in DRAM round trips: the first Q/K/V "
        "tiles, the O tile and LSE written back, the next CTA's launch"),
    **{f"attention.softmax_overlap.{f}.bwd": (
        (0.0, 1.0), 3,
        f"{name}'s backward overlap of its softmax and dQ work with its MMAs (demand.Overlap's "
        f"power mean), its own: no forward constant is used for a backward")
       for f, name in (("fa2", "FA2"), ("fa3", "FA3"), ("cudnn", "cuDNN (wgmma)"))},
    "attention.softmax_overlap.cudnn_tcgen05.fwd": (
        (0.0, 1.0), 3,
        "cuDNN's tcgen05 (Blackwell) forward overlap of its softmax with its MMAs, its own "
        "(not FA4's)"),
    "attention.softmax_overlap.cudnn_tcgen05.bwd": (
        (0.0, 1.0), 3,
        "cuDNN's tcgen05 (Blackwell) backward overlap of its softmax and dQ work with its MMAs; "
        "FA4's backward, unmeasured, takes it too"),
    "attention.softmax_overlap.trtllm_fmha_v2.fwd": (
        (0.0, 1.0), 3,
        "TensorRT-LLM's fmha_v2 Hopper context kernel: forward overlap of its softmax with its "
        "MMAs (its own, not FA3's)"),
    "attention.softmax_overlap.trtllm_gen.fwd": (
        (0.0, 1.0), 3,
        "TensorRT-LLM's trtllm-gen Blackwell context kernel: forward overlap of its softmax "
        "with its MMAs (its own, not FA4's); at its lower bound the FA4-class tile is still too "
        "fast, so it stands in for a mechanism not found"),
    "deepep.copy_round_trips": (
        (0.05, 2.0), 4,
        "one dependent copy round of a DeepEP normal kernel's warp (its loads from the L2-held "
        "input and ring buffers, then their posted stores; ops/deepep.py), in DRAM round trips "
        "of the GPU's spec"),
    "deepep.copy_round_trips.blackwell": (
        (0.05, 2.0), 4,
        "one dependent copy round of a DeepEP normal kernel's warp on Blackwell's two-die GPUs "
        "(its loads from the input and ring buffers, held in either die's L2; ops/deepep.py), in "
        "DRAM round trips of the GPU's spec"),
    **{f"deepep.fixed_s.{m}.{p}": (
        (0.0, 5.0e-4), 7,
        f"the time of one DeepEP {m.replace('_', '-')} {p} call outside its copies (kernel "
        f"launches, NVLink barriers" + (", the host's wait for the received counts" if
        (m, p) == ("normal", "dispatch") else "") + "; ops/deepep.py), serial with them")
       for m in ("normal", "low_latency") for p in ("dispatch", "combine")},
    **{f"custom_allreduce.eager_host_s.{path}": (
        (5.0e-6, 1.0e-4), 10,
        f"the host's call path of an eager {what} all-reduce, timed back to back: a call takes "
        f"the longer of it and the kernels' GPU time (ops/custom_allreduce.py; the c10d loop "
        f"and nccl-tests' timing, communication notes §2)")
       for path, what in (("vllm", "vLLM custom"), ("vllm_symm_mem", "vLLM torch symm-mem"),
                          ("sglang", "SGLang custom"), ("vllm_nccl", "vLLM NCCL (pynccl)"),
                          ("sglang_nccl", "SGLang NCCL (torch.distributed)"))},
    **{f"custom_allreduce.release_peer_trips.{family}": (
        (0.0, 8.0), 4,
        f"one release barrier's NVLink trips (LL hops) per peer on {family.capitalize()} (ops/"
        f"custom_allreduce.py RELEASE_BARRIERS: each peer's flag stored with system-scope "
        f"release semantics by its own lane of one warp, the lanes' releases one after the "
        f"other; vLLM's two-stage and TensorRT-LLM's two-shot kernels)")
       for family in ("hopper", "blackwell")},
    "custom_allreduce.eager_host_ratio.grace": (
        (1.0, 5.0), 3,
        "a Grace host's call path of an eager engine all-reduce over the x86 hosts' (hwspec "
        "topology.host_cpu: GB200, GB300; ops/custom_allreduce.py EAGER_HOST_RATIO)"),
    "attention.fixed_s.trtllm_gen_decode": (
        (0.0, 2.0e-5), 8,
        "trtllm-gen's Blackwell generation kernels (ops/attention/trtllm.py): the one-time start "
        "a call exposes before its first tile, in seconds (tensor-memory, barrier and tensor-map "
        "setup; no source states it)"),
    "attention.cta_round_trips.xqa_sm90": (
        (0.0, 40.0), 3,
        "XQA's Hopper FP8 GMMA generation kernel (mha_sm90.cu): a CTA round's exposed start and "
        "drain in DRAM round trips"),
}
TRTLLM_CONTEXT_RULE = (
    "the {gpu} context rows of aiconfigurator_attention.csv at >= 4096 tokens ({n} rows, BF16 "
    "and FP8, causal: TensorRT-LLM's context attention op as the trtllm family prices it with "
    "its QKV preprocessing, perfmodel.validation.modules): bisection for the overlap at which "
    "the median log(predicted / measured) is zero ({fit:.4f}), with the other attention "
    "constants at their fitted values. The other GPUs' context rows and every generation row "
    "are judged only")
TRTLLM_GEN_FIXED_RULE = (
    "the B200 generation rows of aiconfigurator_attention.csv measured at most {limit:.0f} us "
    "({n} rows, BF16 and FP8 caches: trtllm-gen's generation kernel with the QKV preprocessing "
    "under CUDA graphs, nearly all fixed cost): bisection for the time at which the mean log "
    "error is zero ({fit:.3g} s). B200's longer calls, B300's and GB200's rows are judged")
XQA_RULE = (
    "every H100-SXM generation row of aiconfigurator_attention.csv with an FP8 cache ({n} rows: "
    "XQA's FP8 GMMA kernel with the QKV preprocessing, under CUDA graphs): bisection for the "
    "round trips at which the median log(predicted / measured) is zero ({fit:.4f}). H200's "
    "rows are judged only")
ATTENTION_RULE = (
    "FP16, non-causal rows of public_measurements.csv (attention_fit_rows). Forward: head dim 128 "
    "at sequence length >= 2048 (all families), FA2 head dim 64 >= 2048 (separates its softmax "
    "and mma.sync constants), FA2 head dim 256 >= 2048 (its 64x64 tiles make operand loads as "
    "heavy as the MMAs: separates the operand overlap from the mma.sync rate) and FA3 head dim 128 "
    "below 2048 (the per-CTA cost). Backward: sequence length >= 2048, head dims 64 and 128 (all "
    "families; their own backward overlaps). One least-squares fit of log(predicted / measured) "
    "for all nine constants. Every other attention row is judged only")
CUDNN_TCGEN05_FWD_RULE = (
    "every CUDNN-PRE row of blackwell_measurements.csv (cuDNN 9.27 prefill sweep on B200, BF16 "
    "causal: square 2k-16k and 512-token chunks against 8k-128k of KV): least squares of "
    "log(predicted / measured), with the H100-fitted attention constants at their fitted values. "
    "Judged on the other source, CUDNN-TRN (cuDNN 9.22 on GB200), and att-cudnn-b200-001")
CUDNN_TCGEN05_BWD_RULE = (
    "the CUDNN-TRN backward rows of the Llama-3.1 shape in BF16 with the causal mask at sequence "
    "length >= 8192 (blackwell_measurements.csv; cuDNN 9.22 on GB200): least squares of "
    "log(predicted / measured), with the H100-fitted attention constants at their fitted values. "
    "The other CUDNN-TRN backward rows (2k and 4k, unmasked, FP8, DeepSeek-V3's head dim 192) are "
    "judged only")
# FlashAttention-2's B200 rows (tritonbench PR 171) long enough that the MMAs bind
FA2_TCGEN05_SOURCE = "TRITONBENCH171"
FA2_TCGEN05_MIN_SEQ = 2048
FA2_TCGEN05_RULE = (
    "the FlashAttention-2 forward rows on B200 of tritonbench PR 171 (blackwell_measurements."
    "csv) at >= {seq} tokens ({n} rows, BF16, non-causal, head dim 128, bound by the mma.sync "
    "MMAs): bisection for the share at which the mean log error is zero ({fit:.4f}), with the "
    "other attention constants at their fitted values. The PR's shorter rows are judged; with "
    "the source held out the share is attention.mma_sync_fraction")
FA4_RULE = (
    f"the one published FA4 number, {FA4_ROW} (FA4's B200 forward headline, "
    "blackwell_attention.csv): bisection for the overlap at which the prediction equals it, with "
    "the other attention constants at their fitted values")
SUSTAINED_RULE = (
    f"the one row {MAMF_ROW}: Bekman's Maximum Achievable Matmul FLOPS, best-shape BF16 cuBLAS on "
    "H100 SXM (794.5 TFLOPS at 2048x2048x13312, L2 flushed), the row that measures the sustained "
    "rate with the least shape overhead; bisection for the fraction at which the pipes-level "
    "prediction equals it ({fit:.4f}), kept to 2 decimals. Every other GEMM row is judged")
POWER_RULE = (
    "the AIConfigurator pairs of TensorRT-LLM's per-tensor FP8 and BF16 linears on H100 SXM at "
    "the same shapes with m, n, k >= 4096 (aiconfigurator_gemm.csv; {n} rows, compute-bound in "
    "both types; the FP8 activation's dynamic per-tensor scale priced by its own kernels, the amax "
    "reduction and the cast, ops.linear activation_scale='dynamic'): bisection for the "
    "exponent at which the mean log error of the predicted FP8/BF16 time ratio is zero "
    "({fit:.4f}), kept to 3 decimals, with the sustained fraction at its fitted value. The ratio "
    "isolates the operand type from the GEMM model's shape errors. Judged on every other row: "
    "H200, B200, B300 and GB200 FP8, the block-scaled FP8 and NVFP4 linears, other shapes, and "
    "the public FP8 GEMMs and attention")
POWER_FP4_RULE = (
    "the AIConfigurator pairs of TensorRT-LLM's NVFP4 and BF16 linears on B200 at the same "
    "shapes with m, n, k >= 4096 (aiconfigurator_gemm.csv; {n} rows, compute-bound in both "
    "types; the NVFP4 cast priced by its own kernel, ops.linear): bisection for the exponent at "
    "which the mean log error of the predicted NVFP4/BF16 time ratio is zero ({fit:.4f}), kept to "
    "3 decimals, with the sustained fraction and the FP8 exponent at their fitted values. "
    "Judged on GB200 (the same chip), B300 (a 6x datasheet FP4/BF16 ratio where B200 has 4x) "
    "and the other NVFP4 shapes; with the pairs held out it takes tensor_power_exponent")
GRAPH_GAP_RULE = (
    "the AIConfigurator rows of TensorRT-LLM's DeepSeek-V3 MLA attention block in decode "
    "(aiconfigurator_mla_decode.csv) on {gpu} with 16 heads (TP8), BF16 GEMMs and batch <= 8, "
    "{n} rows where the block's 10-odd kernels are nearly all per-kernel cost: bisection for the "
    "gap at which the mean log error of the block predicted under CUDA graphs "
    "(perfmodel.validation.modules) is zero ({fit:.3g} s). Judged on the other GPUs of the "
    "family, 128 heads, batch 32 and 128, FP8-block and NVFP4 GEMMs, and the serving rows")
NCCL_LATENCY_RULE = (
    "the AIConfigurator rows of NCCL 2.29.2's all-reduce on {gpu} of at most {limit} bytes "
    "(aiconfigurator_nccl.csv; {n} rows over 2, 4 and 8 GPUs, FP16: latency-bound, NCCL's ring LL "
    "pair): ordinary least squares of the measured time on the ring's 2(G-1) hops, time = base + "
    "hops x hop (base {base:.3g} s, hop {hop:.3g} s). Judged on every other row: the larger "
    "all-reduces, the all-gather, reduce-scatter and all-to-all rows (other hop counts), the other "
    "GPUs of the family and the Azure GB200 nccl-tests rows")
# the GPU each NCCL latency family is fitted on, and the largest message of its rows
NCCL_FIT_GPU = {"hopper": "H100-SXM", "blackwell": "B200"}
NCCL_FIT_MAX_BYTES = 4096
# the GPU each gap family is fitted on (GRAPH_GAP_RULE)
GRAPH_GAP_GPU = {"hopper": "H100-SXM", "blackwell": "B200"}
GRAPH_GAP_MAX_BATCH = 8
# the graph gaps and TensorRT-LLM's attention constants are fitted in turn until they repeat
# (fit_all); they settle in three or four passes
JOINT_FIT_MAX_PASSES = 10
HBM_RULE = (
    f"the one row {STREAM_ROW} (blackwell_measurements.csv: NVIDIA/cutlass PR 2917's CuTe DSL "
    "RMSNorm on B200, 32768 x 16384 BF16, 2.15 GB read and written in 329.5 us, a kernel written "
    "for bandwidth and the largest pure stream of the Blackwell rows): bisection for the fraction "
    "at which the pipes-level prediction equals it ({fit:.4f}), kept to 3 decimals. Judged on the "
    "other streaming rows (cuDNN's GB200 norms, PyTorch's B200 cross-entropy, torchao's casts)")
DEEPEP_ROUND_RULE = (
    "SGLang 0.5.12's DeepEP normal dispatch and combine on H200 (aiconfigurator_sglang_deepep."
    "csv) at >= {tokens} tokens per rank on <= {sms} SMs ({n} rows: copy-bound, below the "
    "NVLink's rate): bisection for the round at which the mean log error of the deepep op's "
    "kernel time against the transmit time is zero ({fit:.4f}). TensorRT-LLM's DeepEP rows on "
    "six GPUs and SGLang's other rows are judged")
DEEPEP_ROUND_BLACKWELL_RULE = (
    "TensorRT-LLM's DeepEP normal dispatch and combine on {gpu} (aiconfigurator_moe_a2a.csv) at "
    ">= {tokens} tokens per rank ({n} rows: copy-bound, the NVLink's 900 GB/s not reached, the "
    "fixed times a few per cent), with the fixed times and Hopper's round as fitted: bisection "
    "for the round at which the mean log error of the deepep op is zero ({fit:.4f}). Judged on "
    "B300, GB200, GB300, the smaller calls and the low-latency kernels")
DEEPEP_RULE = (
    "the {gpu} rows of TensorRT-LLM's DeepEP {mode} {phase} with at most {tokens} tokens per "
    "rank (aiconfigurator_moe_a2a.csv, {n} rows, where the call is nearly all fixed time): "
    "bisection for the time at which the mean log error of the deepep op "
    "(perfmodel.validation.collectives) is zero ({fit:.3g} s). Every other GPU and every larger "
    "call is judged")
STEP_OVERHEAD_RULE = (
    "the DataCrunch SGLang rows of median inter-token latency at the lightest load, 1 request/s "
    "(serving_measurements.csv; Llama 3.3 70B TP4 and Llama 3.1 405B TP8 on H200, where queueing "
    "is negligible and a token's latency is one engine step): regula falsi for the overhead at "
    "which the mean log error of the simulated medians is zero. Every other serving row is judged")
MXFP4_CONVERT_RULE = (
    "the AIConfigurator rows of vLLM 0.24.0's MXFP4 experts of gpt-oss-120b on H200 SXM "
    "(aiconfigurator_moe_mxfp4.csv: the OpenAI Triton MXFP4 kernel, BF16 activations, "
    "balanced routing) at EP1 and at most {tokens} tokens ({n} rows: decode-sized, where the "
    "weights' conversion binds the grouped GEMMs): bisection for the operations per element at "
    "which the mean log error is zero ({fit:.3f}), kept to 2 decimals. Judged on the rest: "
    "TensorRT-LLM's rows, H100, EP8, larger token counts, and the InferenceX gpt-oss rows")
MXFP4_CONVERT_GPU = "H200-SXM"
MXFP4_CONVERT_MAX_TOKENS = 64
MARLIN_RULE = (
    "the AIConfigurator rows of vLLM 0.24.0's Marlin MoE on MXFP4 experts on H200 SXM "
    "(aiconfigurator_moe_marlin.csv: a 896-expert top-16 model, hidden 3584, one GPU, balanced "
    "routing) at {tokens} tokens or more ({n} rows: 64-row blocks, where the MMAs bind), with the "
    "MXFP4 conversion at its fitted value: bisection for the share at which the mean log error "
    "is zero ({fit:.4f}), kept to 3 decimals. Judged on the rest: H100, fewer tokens, and the "
    "InferenceX gpt-oss rows of vLLM (VLLM_MXFP4_USE_MARLIN=1)")
MARLIN_FIT_GPU = "H200-SXM"
MARLIN_FIT_MIN_TOKENS = 2048
REQUEST_OVERHEAD_RULE = (
    "the InferenceX H200 rows of {model} on {engine} at TP8 without attention DP, 1k/1k, "
    "concurrency <= {conc} (inferencex_h200.csv; {n} rows: nothing queues and a 1k prompt's "
    "prefill is small beside the path), their {metric}: the overhead at which the simulated "
    "statistic's mean error is zero ({fit:.4f} s; Newton steps, the TTFT rising one for one "
    "with it), the engine's other constants at their fitted values. Every other InferenceX "
    "row (other models, TP sizes, lengths, loads) and every other serving row is judged")
TRAINING_CLOCK_RULE = (
    "the published runs of the Megatron-Core frameworks (training_measurements.csv: NeMo, "
    "NeMo Framework, dgxc-benchmarking and Megatron-LM, the sources {sources}; {n} "
    "configurations the planner predicts, one row each: its tokens/s row, else its step-time "
    "row): regula falsi for the fraction at which the median log error of the planned "
    "throughput is zero ({fit:.4f}), kept to 3 decimals. The PyTorch frameworks' runs "
    "(llm-foundry, torchtitan with torchao, NeMo AutoModel) are judged only, and each "
    "Megatron source is judged with the fraction refitted without it "
    "(python -m perfmodel.validation.training_predict)")
MOE_HOST_MIN_LOCAL_EXPERTS = 8  # fewer experts per GPU: the GPU's work paces the layer
# MoE models whose rows the host's fit leaves out, with why: their steps miss the plan by a
# mechanism other than the host's, which the constant would absorb
MOE_HOST_LEFT_OUT = {
    "gpt-oss-120b": "its steps run 39-43 % slower than planned on H100 and 19-118 % on B200, "
                    "where the host's share differs (its attention with sinks and a 128-token "
                    "window as Transformer Engine runs it is not modelled)",
}
MOE_HOST_RULE = (
    "the Megatron-Bridge H100 rows of MoE models holding at least {min_local} experts per GPU "
    "(training_megatron_bridge.csv, one per configuration the planner predicts: {rows}; "
    "Qwen3-30B-A3B at EP8 and EP16, FP8, micro-batch 1-2): bisection for the seconds at "
    "which the median log error of the planned throughput is zero ({fit:.4g} s), the step's "
    "clock at its fitted fraction. Every B200 row and the H100 rows with fewer experts per "
    "GPU (Qwen3-235B-A22B EP32, DeepSeek-V3 EP64: 4) are judged, and so are the token-drop "
    "rows (padded: no wait before the dispatch) "
    "(python -m perfmodel.validation.training_predict --bridge), and so are GPT-OSS-120B's "
    "(EP8: 16 experts per GPU), left out of the fit: {left_out}")
B200_RULE = (
    "the AIConfigurator rows of TensorRT-LLM's BF16 linears on B200 with m, n, k >= 4096 "
    "(aiconfigurator_gemm.csv; {n} rows, compute-bound: the tensor pipe busy throughout, so the "
    "SM runs at the sustained clock): bisection for the fraction at which their mean log error "
    "is zero ({fit:.4f}), kept to 3 decimals. Judged on B200's other linears (FP8, block FP8, "
    "NVFP4, the smaller BF16 shapes), on GB200's (the same die at a higher power limit), on "
    "B200's attention and MoE rows")
B300_RULE = (
    "the AIConfigurator rows of TensorRT-LLM's BF16 linears on B300 with m, n, k >= 4096 "
    "(aiconfigurator_gemm.csv; {n} rows, compute-bound), as B200's own fraction is fitted: "
    "bisection for the fraction at which their mean log error is zero ({fit:.4f}), kept to 3 "
    "decimals. Judged on B300's other linears and MoE rows and on Transformer Engine's B300 "
    "GEMM profile (te_b300_gemm_profile.csv, one NVIDIA B300 SXM6 AC: its three BF16 "
    "prequantized per-layer rows, on which the fraction was fitted before, read 0.672, 7 % "
    "below these rows' fraction); where these rows are held out, that profile's fit")
# What a constant is when none of its rows may inform it (a cross-validation fold that holds out
# its source, perfmodel.validation.calibrate): the value its meaning implies without a fit.
PRIORS = {
    # NCCL's all-to-all: the p2p fit's start (perfmodel.validation.collectives P2P_PRIOR: no
    # per-peer cost, LL and Simple at NCCL's link rate, the copy at NCCL's Blackwell NVLink rate)
    "nccl.p2p.peer_s": 0.0, "nccl.p2p.ll_rate": 185.0e9, "nccl.p2p.link_efficiency": 1.0,
    "nccl.p2p.copy_rate": 722.0e9,
    "tensor_sustained_fraction": 1.0,          # the datasheet clock: no throttling assumed
    "tensor_power_exponent": 0.0,              # narrow MMAs deliver their datasheet ratio
    "graph_kernel_gap_s.hopper": 0.0,          # a graph removes the whole launch
    "graph_kernel_gap_s.blackwell": 0.0,
    "tensor_sustained_fraction.b300": 1.0,
    "hbm_achievable_fraction.b200": 0.90,      # the GH200 measurement hwspecs carried before
    "serving.step_overhead_s.sglang": 0.0,     # no CPU time per step
    "moe.convert_ops.mxfp4": 2.0,              # the generic convert + scale
    "moe.marlin_mma_fraction": 1.0,            # the whole mma.sync rate
    "serving.request_overhead_s.vllm": 0.0,    # no host path per request
    "serving.request_overhead_s.sglang": 0.0,
    "serving.request_overhead_s.trtllm": 0.0,
    "custom_allreduce.eager_host_s.vllm": 0.0,  # no host path: the kernels' time alone
    "custom_allreduce.eager_host_s.vllm_symm_mem": 0.0,
    "custom_allreduce.eager_host_s.sglang": 0.0,
    "custom_allreduce.eager_host_s.vllm_nccl": 0.0,
    "custom_allreduce.eager_host_s.sglang_nccl": 0.0,
    "custom_allreduce.eager_host_ratio.grace": 1.0,  # as fast as the x86 hosts
    "custom_allreduce.release_peer_trips.hopper": 0.0,  # a release barrier: its trips
    "custom_allreduce.release_peer_trips.blackwell": 0.0,
    "nccl.ll_hop_s.hopper": 0.6e-6,            # tuning.cc's hwLat[NVLINK][RING][LL]
    "nccl.ll_hop_s.blackwell": 0.6e-6,
    "nccl.ll_base_s.hopper": 6.6e-6,           # tuning.cc's baseLat[RING][LL]
    "nccl.ll_base_s.blackwell": 6.6e-6,
    "training.sm_clock_fraction": 1.0,         # the kernel benchmarks' sustained clock
    "training.moe_host_launch_s": 0.0,         # the host never paces the GPU
}


def prior(key: str) -> float:
    """PRIORS[key], else the midpoint of the constant's range."""
    if key in PRIORS:
        return PRIORS[key]
    lo, hi = SPECS[key][0]
    return (lo + hi) / 2


HEADER = """\
# Fitted constants of the model: written by `python -m perfmodel.validation.fit`, not by hand.
# Refit and rewrite with that command; `--check` exits 1 if this file differs from a fresh fit.
# Each entry: value, range (what its meaning allows; the loader rejects a value outside it),
# meaning, fitted_on (the row ids its rule selects), rule, script, rms_log_error (joint fits).
# perfmodel.fitted reads it; hwspecs name a key with `fitted:`, ops read values at import.
"""

# Attention: per family, how much softmax work hides under the MMAs (SOFTMAX_OVERLAP forward; the
# backward's own in DESIGN_OVERLAP), FA2's share of the GPU's mma.sync rate (the rate itself is a
# hwspec fact, isa.mma_sync_flop_per_sm_per_clk), how much of FA2's own ldmatrix operand loads
# hide under its mma.sync MMAs (MMA_SYNC_OPERAND_OVERLAP), and the exposed per-CTA start/drain in
# DRAM round trips (CTA_ROUND_TRIPS). Fitted on FP16, non-causal rows. Forward: head dim 128 at
# sequence length >= 2048 (all families), head dim 64 >= 2048 (FA2, to separate its softmax and
# mma.sync constants), FA2 head dim 256 >= 2048 (its 64x64 tiles make operand loads as heavy as
# the MMAs: the one shape that separates the operand overlap from the mma.sync rate), and FA3
# head dim 128 below 2048 (the per-CTA cost). Backward: head dims 64 and 128 at >= 2048 (the
# backward overlaps). Everything else (causal, other head dims, short sequences, FP8,
# forward+backward, A100) is judged only.


def attention_fit_rows(cases: list[Case]) -> list[Case]:
    out = []
    for c in cases:
        o = c.op
        if c.op_class not in ("attention_fwd", "attention_bwd"):
            continue
        long_hd128 = o.seq_q >= 2048 and o.head_dim == 128
        fa2_hd64 = o.seq_q >= 2048 and o.head_dim == 64 and o.kernel == "fa2"
        fa3_short = o.seq_q < 2048 and o.head_dim == 128 and o.kernel == "fa3"
        fa2_hd256 = o.seq_q >= 2048 and o.head_dim == 256 and o.kernel == "fa2"
        fwd = c.op_class == "attention_fwd" and (long_hd128 or fa2_hd64 or fa3_short or fa2_hd256)
        bwd = c.op_class == "attention_bwd" and o.seq_q >= 2048
        if o.dtype == "fp16" and not o.causal and (fwd or bwd):
            out.append(c)
    return out


def cudnn_tcgen05_fwd_rows(cases: list[Case]) -> list[Case]:
    """CUDNN_TCGEN05_FWD_RULE's rows."""
    return [c for c in cases if c.id.startswith("CUDNN-PRE-") and c.op_class == "attention_fwd"
            and c.op.kernel == "cudnn"]


def cudnn_tcgen05_bwd_rows(cases: list[Case]) -> list[Case]:
    """CUDNN_TCGEN05_BWD_RULE's rows."""
    return [c for c in cases if c.id.startswith("CUDNN-TRN-") and c.op_class == "attention_bwd"
            and c.op.kernel == "cudnn" and c.op.dtype == "bf16" and c.op.causal
            and c.op.head_dim == 128 and c.op.seq_q >= 8192]


# hwspec quantities a fitted constant can feed -> the Hardware field it sets
HARDWARE_FIELDS = {"clocks.tensor_sustained_fraction": "tensor_sustained_fraction",
                   "graph_kernel_gap_s": "graph_kernel_gap_s",
                   "clocks.tensor_power_exponent": "tensor_power_exponent",
                   "clocks.tensor_power_exponent_fp4": "tensor_power_exponent_fp4",
                   "hbm.achievable_fraction": "hbm_achievable_fraction"}
# fields of a spec link a fitted constant may give (the NCCL latencies measured per family)
LINK_FIELDS = ("ll_latency_s", "nccl_base_latency_s")
# hardware constants of the fit in progress (fit_all sets them before the fits that depend on them)
_FRESH_HW: dict[str, float] = {}


def with_fitted(hw: Hardware, values: dict[str, float]) -> Hardware:
    """hw as it loads when fitted.yaml holds `values` (key -> value) for the quantities its spec
    takes with `fitted: KEY` (HARDWARE_FIELDS); hw itself when none applies."""
    changes = {}
    for path, name in HARDWARE_FIELDS.items():
        q = hw.quantities.get(path)
        key = q.provenance.get("fitted") if q is not None else None
        if key in values and values[key] is not None:
            changes[name] = values[key]
    links = {}
    for link_name, link in hw.links.items():  # a link's fitted NCCL latencies (LINK_FIELDS)
        fields = {}
        for name in LINK_FIELDS:
            q = hw.quantities.get(f"links.{link_name}.{name}")
            key = q.provenance.get("fitted") if q is not None else None
            if key in values and values[key] is not None:
                fields[name] = values[key]
        if fields:
            links[link_name] = dataclasses.replace(link, **fields)
    if links:
        changes["links"] = {**hw.links, **links}
    return dataclasses.replace(hw, **changes) if changes else hw


def _with_sustained(hw: Hardware, sustained: float | None) -> Hardware:
    """hw as it loads when fitted.yaml's tensor_sustained_fraction is `sustained` (the GPUs whose
    spec takes it with `fitted:`) and the hardware constants fitted so far in this run
    (_FRESH_HW) hold; `sustained` None: as loaded."""
    values = dict(_FRESH_HW)
    if sustained is not None:
        values["tensor_sustained_fraction"] = sustained
    return with_fitted(hw, values)


def _set_attention(values: dict[str, float]) -> None:
    """Set the attention module's fitted constants from fit-result names (ATTENTION_KEYS)."""
    for f in FAMILIES:
        attention.SOFTMAX_OVERLAP[f] = values[f"SOFTMAX_OVERLAP[{f}]"]
        attention.DESIGN_OVERLAP[(f, "bwd")] = values[f"SOFTMAX_OVERLAP_BWD[{f}]"]
    attention.MMA_SYNC_FRACTION = values["MMA_SYNC_FRACTION"]
    attention.CTA_ROUND_TRIPS = values["CTA_ROUND_TRIPS"]
    attention.MMA_SYNC_OPERAND_OVERLAP = values["MMA_SYNC_OPERAND_OVERLAP"]


def _saved_attention() -> tuple[tuple[dict, ...], dict[str, float]]:
    return (dict(attention.SOFTMAX_OVERLAP), dict(attention.DESIGN_OVERLAP),
            dict(attention.XQA_CTA_ROUND_TRIPS)), {
        n: getattr(attention, n) for n in (
            "MMA_SYNC_FRACTION", "MMA_SYNC_FRACTION_TCGEN05", "CTA_ROUND_TRIPS",
            "MMA_SYNC_OPERAND_OVERLAP", "TRTLLM_GEN_DECODE_FIXED_S")}


def _restore_attention(saved: tuple[tuple[dict, ...], dict[str, float]]) -> None:
    attention.SOFTMAX_OVERLAP.update(saved[0][0])
    attention.DESIGN_OVERLAP.update(saved[0][1])
    attention.XQA_CTA_ROUND_TRIPS.update(saved[0][2])
    for n, v in saved[1].items():
        setattr(attention, n, v)


def _set_trtllm(values: dict[str, float]) -> None:
    """The TensorRT-LLM attention family's fitted values (TRTLLM_OVERLAP_KEYS, XQA_KEY)."""
    for key, design in TRTLLM_OVERLAP_KEYS.items():
        if key in values:
            attention.DESIGN_OVERLAP[design] = values[key]
    if XQA_KEY in values:
        attention.XQA_CTA_ROUND_TRIPS["xqa_sm90"] = values[XQA_KEY]
    if TRTLLM_GEN_FIXED_KEY in values:
        attention.TRTLLM_GEN_DECODE_FIXED_S = values[TRTLLM_GEN_FIXED_KEY]


@contextlib.contextmanager
def applied(entries: dict[str, dict]):
    """The attention module's fitted values (and the MoE op's MXFP4 conversion, NCCL's ring local
    step) set to `entries`
    (fit_all's result) for the block, as if fitted.yaml held them; yields the values by key,
    for `with_fitted` on each case's hardware (perfmodel.validation.calibrate predicts its
    cross-validation folds so)."""
    from perfmodel.ops.moe import op as moe_op
    values = {k: e["value"] for k, e in entries.items()}
    saved = _saved_attention()
    saved_convert = dict(moe_op.CONVERT_OPS)
    saved_marlin = moe_op.MARLIN_MMA_FRACTION
    saved_ring = dict(nccl.RING_LOCAL_RATE)
    saved_p2p = dict(nccl.P2P)
    try:
        for key in nccl.P2P_KEYS:  # the all-to-all's p2p rates (module constants)
            if f"nccl.p2p.{key}" in values:
                nccl.P2P[key] = values[f"nccl.p2p.{key}"]
        if "moe.convert_ops.mxfp4" in values:  # the MoE op's MXFP4 conversion (module constant)
            moe_op.CONVERT_OPS["mxfp4"] = values["moe.convert_ops.mxfp4"]
        if "moe.marlin_mma_fraction" in values:  # Marlin's MMA share (module constant)
            moe_op.MARLIN_MMA_FRACTION = values["moe.marlin_mma_fraction"]
        for major, family in nccl.RING_LOCAL_FAMILY.items():  # the ring's local step (module)
            key = f"nccl.ring_local_rate.{family}"
            if key in values:
                nccl.RING_LOCAL_RATE[major] = values[key]
        _set_attention({name: values[key] for name, key in ATTENTION_KEYS.items()})
        attention.SOFTMAX_OVERLAP["fa4"] = values["attention.softmax_overlap.fa4"]
        attention.MMA_SYNC_FRACTION_TCGEN05 = values["attention.mma_sync_fraction.tcgen05"]
        for key, design in CUDNN_TCGEN05_KEYS.items():
            attention.DESIGN_OVERLAP[design] = values[key]
        _set_trtllm(values)
        yield values
    finally:
        _restore_attention(saved)
        moe_op.CONVERT_OPS.clear()
        moe_op.CONVERT_OPS.update(saved_convert)
        moe_op.MARLIN_MMA_FRACTION = saved_marlin
        nccl.RING_LOCAL_RATE.update(saved_ring)
        nccl.P2P.update(saved_p2p)


def fit_attention(cases: list[Case], sustained: float | None = None) -> dict:
    """The nine H100 attention constants (ATTENTION_KEYS), jointly, on attention_fit_rows(cases),
    from fixed starting points; `sustained` sets the GPUs' fitted tensor_sustained_fraction (as
    loaded if None)."""
    hws = {}
    rows = [(c, hws.setdefault(id(c.hardware), _with_sustained(c.hardware, sustained)))
            for c in attention_fit_rows(cases)]
    names = list(ATTENTION_KEYS)
    lo, hi = zip(*(SPECS[ATTENTION_KEYS[n]][0] for n in names))
    start = [(a + b) / 2 for a, b in zip(lo, hi)]

    span = np.subtract(hi, lo)

    def residuals(x):
        _set_attention(dict(zip(names, x)))
        errors = [math.log(estimate(c.op.demand(hw), hw).time_s / c.measured_time_s)
                  for c, hw in rows]
        # a weak pull to the range's middle (ATTENTION_PRIOR): a constant the rows leave
        # undetermined (a cross-validation fold without its family's rows) settles there
        # instead of wherever the solver's path, which differs with the CPU's BLAS kernels,
        # happened to stop
        return errors + list(ATTENTION_PRIOR * (np.asarray(x) - start) / span)

    saved = _saved_attention()
    try:
        fit = least_squares(residuals, start, bounds=(lo, hi))
    finally:
        _restore_attention(saved)  # leave the module as fitted.yaml has it
    result = dict(zip(names, np.round(fit.x, 3).tolist()))
    errors = fit.fun[:len(rows)]
    return {**result, "rows": [c.id for c, _ in rows],
            "rms_log_error": float(np.sqrt(np.mean(np.square(errors))))}


def fit_cudnn_tcgen05(constants: dict[str, float], sustained: float | None = None,
                      exclude: frozenset[str] = frozenset()
                      ) -> dict[str, tuple[float, list[str]]]:
    """cuDNN's tcgen05 overlaps, forward and backward, each on its own rows (CUDNN_TCGEN05_*_RULE)
    by a bounded least-squares fit of the log errors, with the other attention constants at
    `constants` (fit_attention's result names) and the fitted sustained fraction at `sustained`.
    Returns key -> (value, row ids)."""
    cases, _ = load_cases(BLACKWELL_MEASUREMENTS_CSV)
    out = {}
    saved = _saved_attention()
    try:
        _set_attention(constants)
        for key, select in (
                ("attention.softmax_overlap.cudnn_tcgen05.fwd", cudnn_tcgen05_fwd_rows),
                ("attention.softmax_overlap.cudnn_tcgen05.bwd", cudnn_tcgen05_bwd_rows)):
            hws = {}
            rows = [(c, hws.setdefault(id(c.hardware), _with_sustained(c.hardware, sustained)))
                    for c in select(cases) if c.id not in exclude]
            lo, hi = SPECS[key][0]
            if not rows:  # every row held out: the prior
                out[key] = (prior(key), [], None)
                attention.DESIGN_OVERLAP[CUDNN_TCGEN05_KEYS[key]] = prior(key)
                continue

            def residuals(x, rows=rows, key=key):
                attention.DESIGN_OVERLAP[CUDNN_TCGEN05_KEYS[key]] = float(x[0])
                return [math.log(estimate(c.op.demand(hw), hw).time_s / c.measured_time_s)
                        for c, hw in rows]
            fit = least_squares(residuals, [(lo + hi) / 2], bounds=([lo], [hi]))
            out[key] = (float(fit.x[0]), [c.id for c, _ in rows],
                        float(np.sqrt(np.mean(np.square(fit.fun)))))
            attention.DESIGN_OVERLAP[CUDNN_TCGEN05_KEYS[key]] = float(fit.x[0])
    finally:
        _restore_attention(saved)
    return out


def _solve_falling(time_at, measured_s: float, lo: float, hi: float, tol: float) -> float:
    """Bisect for the parameter at which a predicted time that falls as the parameter rises
    equals the measured one."""
    while hi - lo > tol:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if time_at(mid) > measured_s else (lo, mid)
    return (lo + hi) / 2


def fa2_tcgen05_fit_rows() -> list[Case]:
    """FA2_TCGEN05_RULE's rows."""
    cases, _ = load_cases(BLACKWELL_MEASUREMENTS_CSV)
    return [c for c in cases if c.id.startswith(FA2_TCGEN05_SOURCE)
            and c.op.seq_q >= FA2_TCGEN05_MIN_SEQ]


def fit_fa2_tcgen05_fraction(constants: dict[str, float], sustained: float | None = None,
                             exclude: frozenset[str] = frozenset(),
                             tol: float = 1e-5) -> tuple[float, list[str]]:
    """FA2's mma.sync share on tcgen05 GPUs on its rows (FA2_TCGEN05_RULE), the other
    attention constants at `constants` (fit_attention's result names); the Hopper share when
    the rows are held out. The time falls as the share rises."""
    rows = [c for c in fa2_tcgen05_fit_rows() if c.id not in exclude]
    if not rows:
        return constants["MMA_SYNC_FRACTION"], []
    saved = _saved_attention()
    hws = {id(c.hardware): _with_sustained(c.hardware, sustained) for c in rows}

    def mean_log_error(share: float) -> float:
        attention.MMA_SYNC_FRACTION_TCGEN05 = share
        return sum(math.log(estimate(c.op.demand(hws[id(c.hardware)]),
                                     hws[id(c.hardware)]).time_s / c.measured_time_s)
                   for c in rows) / len(rows)
    try:
        _set_attention(constants)
        x = _zero_of_rising(lambda v: -mean_log_error(v),
                            *SPECS["attention.mma_sync_fraction.tcgen05"][0], tol)
    finally:
        _restore_attention(saved)
    return x, [c.id for c in rows]


def fit_fa4_overlap(row_id: str = FA4_ROW, tol: float = 1e-5,
                    constants: dict[str, float] | None = None,
                    sustained: float | None = None) -> float:
    """FA4's softmax/MMA overlap on its one published B200 number, with the other attention
    constants at `constants` (fit_attention's result names) and the fitted sustained fraction at
    `sustained` (both as loaded if None)."""
    cases, _ = load_cases(BLACKWELL_CSV)
    case = next(c for c in cases if c.id == row_id)
    hw = _with_sustained(case.hardware, sustained)
    saved = _saved_attention()

    def time_at(efficiency: float) -> float:
        attention.SOFTMAX_OVERLAP["fa4"] = efficiency
        return estimate(case.op.demand(hw), hw).time_s

    try:
        if constants is not None:
            _set_attention(constants)
        lo, hi = SPECS["attention.softmax_overlap.fa4"][0]
        return _solve_falling(time_at, case.measured_time_s, lo, hi, tol)
    finally:
        _restore_attention(saved)


def _fit_field_on_row(path, row_id: str, field: str, key: str, tol: float) -> float:
    """The value of Hardware `field` (a share whose rise speeds the row up) at which the
    pipes-level prediction of row `row_id` of `path` equals its measurement, within the range
    of fitted constant `key`."""
    cases, _ = load_cases(path)
    case = next(c for c in cases if c.id == row_id)

    def time_at(value: float) -> float:
        hw = dataclasses.replace(case.hardware, **{field: value})
        return estimate(case.op.demand(hw), hw, "pipes").time_s

    lo, hi = SPECS[key][0]
    return _solve_falling(time_at, case.measured_time_s, lo, hi, tol)


def fit_hbm_fraction(row_id: str = STREAM_ROW, tol: float = 1e-5) -> float:
    """B200-class HBM's achievable share on its one streaming row (HBM_RULE)."""
    return _fit_field_on_row(BLACKWELL_MEASUREMENTS_CSV, row_id, "hbm_achievable_fraction",
                             "hbm_achievable_fraction.b200", tol)


def fit_sustained_fraction(row_id: str = MAMF_ROW, tol: float = 1e-5) -> float:
    """The sustained SM clock's share of the tensor clock on its one row (SUSTAINED_RULE)."""
    return _fit_field_on_row(PUBLIC_CSV, row_id, "tensor_sustained_fraction",
                             "tensor_sustained_fraction", tol)


def _zero_of_rising(f, lo: float, hi: float, tol: float) -> float:
    """Where a rising `f` crosses zero in [lo, hi], by bisection; lo (hi) when f is already
    >= 0 (<= 0) there."""
    if f(lo) >= 0:
        return lo
    if f(hi) <= 0:
        return hi
    while hi - lo > tol:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
    return (lo + hi) / 2


# shapes at which every dtype was sampled (validate/import_aiconfigurator.py PAIRED): all three
# dimensions >= 4096, compute-bound in every dtype
POWER_FIT_MIN_DIM = 4096


def _same_shape_pairs(cases: list[Case], gpu: str, dtype: str) -> list[tuple[Case, Case]]:
    """(dtype row, BF16 row) pairs of AIConfigurator linears on `gpu` at the same m x n x k,
    every dimension >= POWER_FIT_MIN_DIM (compute-bound in both types)."""
    def shape(c: Case) -> tuple[int, int, int]:
        return c.op.m, c.op.n, c.op.k
    bf16 = {shape(c): c for c in cases if c.id.startswith(f"AIC-{gpu}-bfloat16-")}
    return [(c, bf16[shape(c)]) for c in cases
            if c.id.startswith(f"AIC-{gpu}-{dtype}-") and c.op_class == f"linear_{dtype}"
            and min(shape(c)) >= POWER_FIT_MIN_DIM and shape(c) in bf16]


def power_fit_rows(cases: list[Case]) -> list[tuple[Case, Case]]:
    """POWER_RULE's (FP8, BF16) row pairs: the same m x n x k on H100 SXM."""
    return _same_shape_pairs(cases, "H100-SXM", "fp8")


def power_fp4_fit_rows(cases: list[Case]) -> list[tuple[Case, Case]]:
    """POWER_FP4_RULE's (NVFP4, BF16) row pairs: the same m x n x k on B200."""
    return _same_shape_pairs(cases, "B200", "nvfp4")


def b200_sustained_fit_rows(cases: list[Case], gpu: str = "B200") -> list[Case]:
    """B200_RULE's rows (B300_RULE's for gpu B300): the BF16 linears on the GPU with every
    dimension >= POWER_FIT_MIN_DIM."""
    return [c for c in cases if c.id.startswith(f"AIC-{gpu}-bfloat16-")
            and c.op_class == "linear_bf16" and min(c.op.m, c.op.n, c.op.k) >= POWER_FIT_MIN_DIM]


def fit_b200_sustained_fraction(general: float, exclude: frozenset[str] = frozenset(),
                                tol: float = 1e-5, gpu: str = "B200") -> tuple[float, list[str]]:
    """tensor_sustained_fraction.b200 on B200_RULE's rows (`general`, the MAMF-fitted fraction
    the spec carried before, if they are held out: no evidence of B200's own): the kernels run
    faster as the fraction rises, so bisect the mean log error to zero. `gpu` B300: B300's
    fraction on its own rows (B300_RULE)."""
    key = f"tensor_sustained_fraction.{gpu.lower()}"
    rows = [c for c in b200_sustained_fit_rows(load_cases(AICONFIGURATOR_CSV)[0], gpu)
            if c.id not in exclude]
    if not rows:
        return general, []
    base = rows[0].hardware

    def mean_log_error(x: float) -> float:
        hw = with_fitted(base, {**_FRESH_HW, key: x})
        return sum(math.log(estimate(c.op.demand(hw), hw, "pipes").time_s / c.measured_time_s)
                   for c in rows) / len(rows)
    x = _zero_of_rising(lambda v: -mean_log_error(v), *SPECS[key][0], tol)
    return x, [c.id for c in rows]


def _ratio_exponent(pairs: list[tuple[Case, Case]], field: str, key: str,
                    sustained: float, tol: float) -> float:
    """The exponent (Hardware `field`, fitted.yaml `key`) at which the mean log error of the
    predicted narrow/BF16 time ratio of `pairs` is zero: the ratio grows with the exponent, so
    bisect."""
    hw0 = _with_sustained(pairs[0][0].hardware, sustained)

    def mean_log_error(x: float) -> float:
        hw = dataclasses.replace(hw0, **{field: x})
        total = 0.0
        for a, b in pairs:
            ratio = (estimate(a.op.demand(hw), hw, "pipes").time_s
                     / estimate(b.op.demand(hw), hw, "pipes").time_s)
            total += math.log(ratio / (a.measured_time_s / b.measured_time_s))
        return total / len(pairs)
    return _zero_of_rising(mean_log_error, *SPECS[key][0], tol)


def fit_power_exponent(sustained: float, exclude: frozenset[str] = frozenset(),
                       tol: float = 1e-5) -> tuple[float, list[str]]:
    """tensor_power_exponent on POWER_RULE's pairs (its prior if any row of them is held out)."""
    pairs = [(a, b) for a, b in power_fit_rows(load_cases(AICONFIGURATOR_CSV)[0])
             if a.id not in exclude and b.id not in exclude]
    if not pairs:
        return prior("tensor_power_exponent"), []
    return (_ratio_exponent(pairs, "tensor_power_exponent", "tensor_power_exponent",
                            sustained, tol), [r.id for pair in pairs for r in pair])


def fit_fp4_power_exponent(sustained: float, general: float,
                           exclude: frozenset[str] = frozenset(),
                           tol: float = 1e-5) -> tuple[float, list[str]]:
    """tensor_power_exponent.fp4 on POWER_FP4_RULE's pairs (`general`, the FP8-fitted
    exponent, if any row of them is held out: no evidence of a 4-bit exponent of its own)."""
    pairs = [(a, b) for a, b in power_fp4_fit_rows(load_cases(AICONFIGURATOR_CSV)[0])
             if a.id not in exclude and b.id not in exclude]
    if not pairs:
        return general, []
    return (_ratio_exponent(pairs, "tensor_power_exponent_fp4", "tensor_power_exponent.fp4",
                            sustained, tol), [r.id for pair in pairs for r in pair])


def trtllm_fit_rows(key: str) -> list[dict]:
    """TRTLLM_CONTEXT_RULE's or XQA_RULE's rows for `key` (aiconfigurator_attention.csv)."""
    from perfmodel.validation import modules
    gpu = TRTLLM_FIT_GPU[key]
    rows = [r for r in modules.load_attention_rows() if r["hardware"] == gpu]
    if key == XQA_KEY:
        return [r for r in rows if r["phase"] == "generation" and r["kv_dtype"] == "fp8"]
    if key == TRTLLM_GEN_FIXED_KEY:
        return [r for r in rows if r["phase"] == "generation"
                and r["measured_s"] <= TRTLLM_GEN_FIXED_MAX_S]
    return [r for r in rows if r["phase"] == "context"
            and r["seq_q"] >= TRTLLM_CONTEXT_MIN_TOKENS]


def fit_trtllm_attention(sustained: float | None = None, tol: float = 1e-6
                         ) -> dict[str, tuple[float, list[str]]]:
    """The TensorRT-LLM attention family's constants, each on its rows (trtllm_fit_rows) by
    bisection of the median log error, with the other attention constants as set by the
    caller (fit_all's `applied` block). Its rows are no source of perfmodel validate's, so no
    cross-validation fold holds them out. Returns key -> (value, row ids)."""
    from statistics import fmean as mean, median

    from perfmodel.hardware import hardware
    from perfmodel.validation import modules
    out = {}
    saved = _saved_attention()
    try:
        for key in (*TRTLLM_OVERLAP_KEYS, XQA_KEY, TRTLLM_GEN_FIXED_KEY):
            rows = trtllm_fit_rows(key)
            hw = _with_sustained(hardware(TRTLLM_FIT_GPU[key]), sustained)

            # the fixed time's rules take the mean log error, the others the median
            center = mean if key == TRTLLM_GEN_FIXED_KEY else median

            def log_error(x: float, rows=rows, key=key, hw=hw, center=center) -> float:
                _set_trtllm({key: x})
                return center(math.log(modules.attention_predicted_s(r, hw) / r["measured_s"])
                              for r in rows)
            lo, hi = SPECS[key][0]
            if key in (XQA_KEY, TRTLLM_GEN_FIXED_KEY):  # more cost, a slower kernel
                x = _zero_of_rising(log_error, lo, hi,
                                    1e-10 if key == TRTLLM_GEN_FIXED_KEY else tol)
            else:  # more overlap, a faster kernel: the error falls
                x = _zero_of_rising(lambda v: -log_error(v), lo, hi, tol)
            _set_trtllm({key: x})
            out[key] = (x, [r["id"] for r in rows])
    finally:
        _restore_attention(saved)
    return out


def graph_gap_fit_rows(family: str) -> list[dict]:
    """GRAPH_GAP_RULE's rows for `family`."""
    from perfmodel.validation import modules
    return [r for r in modules.load_rows() if r["hardware"] == GRAPH_GAP_GPU[family]
            and r["heads"] == 16 and r["gemm"] == "bfloat16"
            and r["batch"] <= GRAPH_GAP_MAX_BATCH]


def fit_graph_gap(family: str, exclude: frozenset[str] = frozenset(), sustained=None,
                  tol: float = 1e-10) -> tuple[float, list[str]]:
    """graph_kernel_gap_s.<family> on its rows (its prior if they are held out): the block's
    time grows with the gap, so bisect the mean log error to zero."""
    from perfmodel.hardware import hardware
    from perfmodel.validation import modules
    rows = [r for r in graph_gap_fit_rows(family) if r["id"] not in exclude]
    key = f"graph_kernel_gap_s.{family}"
    if not rows:
        return prior(key), []
    hw = _with_sustained(hardware(GRAPH_GAP_GPU[family]), sustained)

    def mean_log_error(gap: float) -> float:
        return sum(math.log(modules.predicted_s(r, hw, gap) / r["measured_s"])
                   for r in rows) / len(rows)
    return _zero_of_rising(mean_log_error, *SPECS[key][0], tol), [r["id"] for r in rows]


def nccl_latency_fit_rows(family: str) -> list:
    """NCCL_LATENCY_RULE's rows for `family`: small all-reduces on the family's fit GPU."""
    cases, _ = load_cases(AICONFIGURATOR_NCCL_CSV)
    return [c for c in cases if c.hardware.name == NCCL_FIT_GPU[family]
            and isinstance(c.op, ops.Allreduce) and c.op.bytes <= NCCL_FIT_MAX_BYTES]


def fit_nccl_latency(family: str, exclude: frozenset[str] = frozenset()
                     ) -> tuple[tuple[float, float], list[str]]:
    """(ring LL base, ring LL hop) in seconds by least squares on the family's small all-reduce
    rows (NCCL_LATENCY_RULE); tuning.cc's values (PRIORS) when the rows are held out."""
    rows = [c for c in nccl_latency_fit_rows(family) if c.id not in exclude]
    if len({c.op.gpus for c in rows}) < 2:
        return (prior(f"nccl.ll_base_s.{family}"), prior(f"nccl.ll_hop_s.{family}")), []
    xs = [2.0 * (c.op.gpus - 1) for c in rows]
    ys = [c.measured_time_s for c in rows]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    hop = (sum((x - mx) * (y - my) for x, y in zip(xs, ys))
           / sum((x - mx) ** 2 for x in xs))
    return (my - hop * mx, hop), [c.id for c in rows]


RING_LOCAL_RULE = (
    "the AIConfigurator rows of NCCL 2.29.2's all-gather on {gpu} of at least {limit} MiB over "
    "2, 4 and 8 GPUs (aiconfigurator_nccl.csv; {n} rows, Simple ring, link-bound): ordinary least "
    "squares of time - sent / link (link: the spec NVLink's NCCL rate) on [1, S/G] "
    "(perfmodel.validation.collectives ring_bandwidth_fit; fixed {fixed:.3g} s, rate {fit:.4g} "
    "B/s). Judged on every other row: the all-reduce and reduce-scatter rows, the smaller "
    "messages and the other GPUs of the family")


def fit_ring_local_rate(family: str, exclude: frozenset[str] = frozenset()
                        ) -> tuple[float, float, list[str]]:
    """(rate, fixed s, rows) of the ring's local step on the family's fit GPU (RING_LOCAL_RULE,
    the GPU NCCL_FIT_GPU names); the prior where the held-out rows leave fewer than two GPU
    counts."""
    from perfmodel.hardware import hardware
    from perfmodel.validation import collectives
    gpu = NCCL_FIT_GPU[family]
    rows = [r for r in collectives.ring_rows(collectives.load_nccl_rows(), gpu, "allgather")
            if r["id"] not in exclude]
    if len({r["gpus"] for r in rows}) < 2:
        return prior(f"nccl.ring_local_rate.{family}"), 0.0, []
    fixed, _, rate = collectives.ring_bandwidth_fit(rows, collectives.ring_link_rate(
        hardware(gpu)))
    return rate, fixed, [r["id"] for r in rows]


P2P_RULE = (
    "every AIConfigurator row of NCCL 2.29.2's all-to-all on {gpus} (aiconfigurator_nccl.csv; "
    "{n} rows, 2, 4 and 8 GPUs, 512 B to 512 MiB): the four p2p rates (peer_s, ll_rate, "
    "link_efficiency, copy_rate) jointly, least squares of the relative error with a soft L1 "
    "loss (perfmodel.validation.collectives p2p_fit: {fit}), the GPUs' NCCL latencies as "
    "fitted. Judged on the all-to-all rows of the other GPUs of each family (H200 SXM, B300, "
    "GB200, GB300)")


def fit_p2p(exclude: frozenset[str] = frozenset()) -> tuple[dict[str, float], list[str]]:
    """NCCL's four p2p rates (P2P_RULE) by key nccl.p2p.*, and the rows; the priors where the
    held-out rows leave none."""
    from perfmodel.hardware import hardware
    from perfmodel.validation import collectives
    rows = [r for r in collectives.p2p_rows(collectives.load_nccl_rows())
            if r["id"] not in exclude]
    keys = [f"nccl.p2p.{k}" for k in nccl.P2P_KEYS]
    if not rows:
        return {key: prior(key) for key in keys}, []
    hws = {gpu: with_fitted(hardware(gpu), _FRESH_HW) for gpu in {r["hardware"] for r in rows}}
    return dict(zip(keys, collectives.p2p_fit(rows, hws))), [r["id"] for r in rows]


def fit_deepep_round(tol: float = 1e-7) -> tuple[float, list[str]]:
    """DeepEP's copy round on SGLang's copy-bound H200 rows (DEEPEP_ROUND_RULE): the kernel
    time rises with it, so bisect the mean log error to zero."""
    from perfmodel.hardware import hardware
    from perfmodel.ops import deepep
    from perfmodel.validation import collectives
    rows = collectives.round_fit_rows(collectives.load_sglang_deepep_rows())
    hw = hardware("H200-SXM")
    saved, saved_fixed = deepep.COPY_ROUND_TRIPS, dict(deepep.FIXED_S)
    # the transmit times hold no fixed time (collectives.transmit_predicted_s takes it out):
    # the fit does not depend on the fixed times' values
    deepep.FIXED_S.update({k: 0.0 for k in deepep.FIXED_S})

    def mean_log_error(x: float) -> float:
        deepep.COPY_ROUND_TRIPS = x
        return sum(math.log(collectives.transmit_predicted_s(r, hw) / r["measured_s"])
                   for r in rows) / len(rows)
    try:
        x = _zero_of_rising(mean_log_error, *SPECS["deepep.copy_round_trips"][0], tol)
    finally:
        deepep.COPY_ROUND_TRIPS = saved
        deepep.FIXED_S.update(saved_fixed)
    return x, [r["id"] for r in rows]


def fit_deepep_fixed(copy_round_trips: float | None = None,
                     tol: float = 1e-10) -> dict[str, tuple[float, list[str]]]:
    """Each DeepEP kernel kind's fixed time on its small H100 calls (DEEPEP_RULE): a call's time
    rises with it, so bisect the mean log error to zero. Returns key -> (value, row ids)."""
    from perfmodel.hardware import hardware
    from perfmodel.ops import deepep
    from perfmodel.validation import collectives
    rows = collectives.load_a2a_rows()
    hw = hardware(collectives.FIXED_FIT_GPU)
    out, saved, saved_round = {}, dict(deepep.FIXED_S), deepep.COPY_ROUND_TRIPS
    if copy_round_trips is not None:
        deepep.COPY_ROUND_TRIPS = copy_round_trips
    try:
        for mode in deepep.MODES:
            for phase in deepep.PHASES:
                key = f"deepep.fixed_s.{mode}.{phase}"
                fit_rows = collectives.fixed_fit_rows(rows, mode, phase)

                def mean_log_error(x: float, fit_rows=fit_rows, m=mode, p=phase) -> float:
                    deepep.FIXED_S[(m, p)] = x
                    return sum(math.log(collectives.a2a_predicted_s(r, hw) / r["measured_s"])
                               for r in fit_rows) / len(fit_rows)
                x = _zero_of_rising(mean_log_error, *SPECS[key][0], tol)
                out[key] = (x, [r["id"] for r in fit_rows])
    finally:
        deepep.FIXED_S.update(saved)
        deepep.COPY_ROUND_TRIPS = saved_round
    return out


def fit_deepep_round_blackwell(copy_round_trips: float, fixed: dict[str, float],
                               tol: float = 1e-7) -> tuple[float, list[str]]:
    """DeepEP's copy round on Blackwell (DEEPEP_ROUND_BLACKWELL_RULE), with Hopper's round and
    the fixed times (`fixed`: key -> value) as given: the kernel time rises with it, so bisect
    the mean log error to zero."""
    from perfmodel.hardware import hardware
    from perfmodel.ops import deepep
    from perfmodel.validation import collectives
    rows = collectives.blackwell_round_fit_rows(collectives.load_a2a_rows())
    hw = hardware(collectives.BLACKWELL_ROUND_FIT_GPU)
    saved = (deepep.COPY_ROUND_TRIPS, deepep.COPY_ROUND_TRIPS_BLACKWELL, dict(deepep.FIXED_S))
    deepep.COPY_ROUND_TRIPS = copy_round_trips
    for key, value in fixed.items():
        deepep.FIXED_S[tuple(key.split(".")[2:])] = value

    def mean_log_error(x: float) -> float:
        deepep.COPY_ROUND_TRIPS_BLACKWELL = x
        return sum(math.log(collectives.a2a_predicted_s(r, hw) / r["measured_s"])
                   for r in rows) / len(rows)
    try:
        x = _zero_of_rising(mean_log_error,
                            *SPECS["deepep.copy_round_trips.blackwell"][0], tol)
    finally:
        deepep.COPY_ROUND_TRIPS, deepep.COPY_ROUND_TRIPS_BLACKWELL = saved[:2]
        deepep.FIXED_S.update(saved[2])
    return x, [r["id"] for r in rows]


def fit_release_peer_trips(major: int, engine_rows: list[dict],
                           tol: float = 1e-5) -> tuple[float, list[str]]:
    """custom_allreduce.release_peer_trips of the compute-capability `major` family on its fit
    rows among `engine_rows` (collectives.RELEASE_RULE): the kernels' time rises with it, so
    bisect the mean log error of the fit rows to zero."""
    from perfmodel.ops import custom_allreduce
    from perfmodel.validation import collectives
    rows = collectives.release_fit_rows(engine_rows, major)
    if not rows:
        return PRIORS[custom_allreduce.RELEASE_PEER_KEYS[major]], []
    saved = dict(custom_allreduce.RELEASE_PEER_TRIPS)

    def mean_log_error(x: float) -> float:
        custom_allreduce.RELEASE_PEER_TRIPS[major] = x
        return sum(math.log(collectives.engine_predicted_s(r) / r["measured_s"])
                   for r in rows) / len(rows)
    try:
        x = _zero_of_rising(mean_log_error,
                            *SPECS[custom_allreduce.RELEASE_PEER_KEYS[major]][0], tol)
    finally:
        custom_allreduce.RELEASE_PEER_TRIPS.clear()
        custom_allreduce.RELEASE_PEER_TRIPS.update(saved)
    return x, [r["id"] for r in rows]


def step_overhead_fit_rows(cases) -> list:
    """The serving rows SGLang's step overhead is fitted on (STEP_OVERHEAD_RULE)."""
    from perfmodel.validation import serving_predict
    return [c for c in cases if c.source == "DCR" and c.engine == "sglang"
            and c.metric == "itl_median_s" and c.mode == "rate" and c.rate is not None
            and c.rate <= 1.0 and serving_predict.why_not(c) is None]


def fit_sglang_step_overhead(sustained: float | None = None,
                             tol: float = 1e-6) -> tuple[float, list[str]]:
    """SGLang's per-step overhead on its light-load ITL rows: the simulated inter-token latency
    rises by about the overhead per step, so regula falsi converges in a few simulations. The
    GPUs as this fit has them (_with_sustained: the hardware constants fitted before it, the
    CUDA-graph kernel gap among them), not as fitted.yaml holds them."""
    from perfmodel.validation import serving_predict
    from perfmodel.validation.serving import load_serving_cases
    rows = step_overhead_fit_rows(load_serving_cases()[0])
    hws = {id(c.hardware): _with_sustained(c.hardware, sustained) for c in rows}

    def mean_log_error(overhead: float) -> float:
        return sum(math.log(serving_predict.simulate_case(
            c, hw=hws[id(c.hardware)], step_overhead_s=overhead) / c.value)
            for c in rows) / len(rows)
    lo, hi = SPECS["serving.step_overhead_s.sglang"][0]
    f_lo, f_hi = mean_log_error(lo), mean_log_error(hi)
    if f_lo >= 0:  # the simulation is already slower at no overhead
        return lo, [c.id for c in rows]
    x = lo
    for _ in range(40):
        x = hi - f_hi * (hi - lo) / (f_hi - f_lo)
        f_x = mean_log_error(x)
        if abs(f_x) < 1e-9 or hi - lo < tol:
            break
        lo, f_lo, hi, f_hi = (x, f_x, hi, f_hi) if f_x < 0 else (lo, f_lo, x, f_x)
    return x, [c.id for c in rows]


REQUEST_OVERHEAD_ENGINES = ("vllm", "sglang", "trtllm")


def marlin_fit_rows(exclude: frozenset[str] = frozenset()) -> list:
    """MARLIN_RULE's rows."""
    cases, _ = load_cases(AICONFIGURATOR_MOE_MARLIN_CSV)
    return [c for c in cases if c.id not in exclude and c.hardware.name == MARLIN_FIT_GPU
            and c.op.tokens >= MARLIN_FIT_MIN_TOKENS]


def fit_marlin_fraction(convert_ops: float, exclude: frozenset[str] = frozenset(),
                        tol: float = 1e-4) -> tuple[float, list[str]]:
    """Marlin's share of the mma.sync rate (MARLIN_RULE), with the MXFP4 conversion at
    `convert_ops`: a larger share makes the calls faster, so bisect the negated mean log error
    to zero; the prior where the rows are held out."""
    from perfmodel.ops.moe import op as moe_op
    rows = marlin_fit_rows(exclude)
    if not rows:
        return prior("moe.marlin_mma_fraction"), []
    hws = [_with_sustained(c.hardware, None) for c in rows]
    saved, saved_convert = moe_op.MARLIN_MMA_FRACTION, dict(moe_op.CONVERT_OPS)

    def mean_log_error(x: float) -> float:
        moe_op.MARLIN_MMA_FRACTION = x
        return sum(math.log(estimate(resolve(c.op.demand(hw), hw, "pipes"), hw, "pipes").time_s
                            / c.measured_time_s) for c, hw in zip(rows, hws)) / len(rows)
    try:
        moe_op.CONVERT_OPS["mxfp4"] = convert_ops
        x = _zero_of_rising(lambda v: -mean_log_error(v), *SPECS["moe.marlin_mma_fraction"][0],
                            tol)
    finally:
        moe_op.MARLIN_MMA_FRACTION = saved
        moe_op.CONVERT_OPS.clear()
        moe_op.CONVERT_OPS.update(saved_convert)
    return x, [c.id for c in rows]


def mxfp4_convert_fit_rows(exclude: frozenset[str] = frozenset()) -> list:
    """MXFP4_CONVERT_RULE's rows."""
    cases, _ = load_cases(AICONFIGURATOR_MOE_MXFP4_CSV)
    return [c for c in cases if c.id not in exclude and c.id.startswith("AICMXFP4-vllm-")
            and c.hardware.name == MXFP4_CONVERT_GPU and c.op.gpus == 1
            and c.op.tokens <= MXFP4_CONVERT_MAX_TOKENS]


def fit_mxfp4_convert(exclude: frozenset[str] = frozenset(),
                      tol: float = 1e-3) -> tuple[float, list[str]]:
    """The MXFP4 conversion's operations per element (MXFP4_CONVERT_RULE): a decode-sized MoE
    call's time rises with it, so bisect the mean log error to zero; the prior where the rows
    are held out."""
    from perfmodel.ops.moe import op as moe_op
    rows = mxfp4_convert_fit_rows(exclude)
    if not rows:
        return prior("moe.convert_ops.mxfp4"), []
    hws = [_with_sustained(c.hardware, None) for c in rows]
    saved = dict(moe_op.CONVERT_OPS)

    def mean_log_error(x: float) -> float:
        # the estimate itself: predict_op's memo would keep the constant's first value
        moe_op.CONVERT_OPS["mxfp4"] = x
        return sum(math.log(estimate(resolve(c.op.demand(hw), hw, "pipes"), hw, "pipes").time_s
                            / c.measured_time_s) for c, hw in zip(rows, hws)) / len(rows)
    try:
        x = _zero_of_rising(mean_log_error, *SPECS["moe.convert_ops.mxfp4"][0], tol)
    finally:
        moe_op.CONVERT_OPS.clear()
        moe_op.CONVERT_OPS.update(saved)
    return x, [c.id for c in rows]


def _request_rule(engine: str, fit: tuple[float, list[str]]) -> str:
    from perfmodel.validation import inferencex as ix
    model, metric = ix.REQUEST_OVERHEAD_FIT[engine]
    return REQUEST_OVERHEAD_RULE.format(model=model, engine=engine, n=len(fit[1]), metric=metric,
                                        conc=ix.REQUEST_OVERHEAD_FIT_MAX_CONC, fit=fit[0])


def fit_request_overhead(engine: str, step_overhead_s: float | None = None,
                         tol: float = 1e-5) -> tuple[float, list[str]]:
    """An engine's per-request path on its InferenceX rows (REQUEST_OVERHEAD_RULE): the
    simulated TTFT rises one for one with it, so Newton steps on the mean error (seconds) reach
    zero in two or three simulations of each row. `step_overhead_s`: SGLang's per-step overhead
    as this fit run has it (fitted before), else the preset's."""
    from perfmodel.validation import inferencex as ix
    _, metric = ix.REQUEST_OVERHEAD_FIT[engine]
    rows = ix.request_overhead_fit_rows(engine)
    extra = (("step_overhead_s", step_overhead_s),) if (engine == "sglang" and step_overhead_s
                                                        is not None) else ()
    lo, hi = SPECS[f"serving.request_overhead_s.{engine}"][0]

    def mean_error(x: float) -> float:
        over = (("request_overhead_s", x),) + extra
        return sum(ix.simulate_deployment(c.deployment, over)[metric] - c.measured[metric]
                   for c in rows) / len(rows)
    x = lo
    for _ in range(8):
        step = -mean_error(x)
        x_new = min(hi, max(lo, x + step))
        if abs(x_new - x) < tol:
            x = x_new
            break
        x = x_new
    return x, [c.id for c in rows]


def training_clock_fit_rows(exclude: frozenset[str] = frozenset()) -> list:
    """The training rows the step's clock fraction is fitted on (TRAINING_CLOCK_RULE): one per
    configuration of a Megatron-Core framework that the planner predicts, none in `exclude`."""
    from perfmodel.validation import training_predict as tp
    from perfmodel.validation.training import load_training_cases
    cases, _ = load_training_cases()
    compared = tp.throughput_rows(cases)
    rows = [c for c in compared.values() if c.id not in exclude
            and tp.framework_of(c) == "megatron" and tp.why_not(c, compared) is None]
    # a plan the planner refuses (memory, layout) is refused at every clock
    return [c for c in rows if not isinstance(tp.plan_case(c), str)]


def training_clock_sources(row_ids: list[str]) -> list[str]:
    """The sources (TrainingCase.source) of training rows, sorted."""
    from perfmodel.validation.training import load_training_cases
    source = {c.id: c.source for c in load_training_cases()[0]}
    return sorted({source[r] for r in row_ids})


# fit_training_clock's results by everything they depend on: the tests and the report refit it
# under the same constants several times in one process, and each fit plans ~80 steps ~6 times
_TRAINING_CLOCK_FITS: dict[tuple, tuple[float, list[str]]] = {}


def fit_training_clock(sustained: float | None = None,
                       exclude: frozenset[str] = frozenset(),
                       tol: float = 1e-4) -> tuple[float, list[str]]:
    """training.sm_clock_fraction on its rows (TRAINING_CLOCK_RULE; its prior if they are all
    held out). A run's planned throughput rises with the clock, and so does the median of the
    rows' log errors, a continuous function: regula falsi (Illinois) finds its zero in a few
    dozen plans per row. The GPUs as this fit has them (_with_sustained), the attention
    constants as the caller has set them (fit_all: `applied`)."""
    from perfmodel.hardware import hardware
    from perfmodel.validation import training_predict as tp
    key = "training.sm_clock_fraction"
    rows = training_clock_fit_rows(exclude)
    if not rows:
        return prior(key), []
    memo = (sustained, tuple(sorted(_FRESH_HW.items())), tuple(r.id for r in rows),
            tuple(sorted(attention.SOFTMAX_OVERLAP.items())),
            tuple(sorted(attention.DESIGN_OVERLAP.items())), attention.MMA_SYNC_FRACTION,
            attention.MMA_SYNC_FRACTION_TCGEN05, attention.CTA_ROUND_TRIPS,
            attention.MMA_SYNC_OPERAND_OVERLAP)
    if memo in _TRAINING_CLOCK_FITS:
        return _TRAINING_CLOCK_FITS[memo]
    hws = {name: _with_sustained(hardware(name), sustained) for name in {r.hw for r in rows}}

    def median_log_error(f: float) -> float:
        errors = []
        for r in rows:
            plan = tp.plan_case(r, hw=hws[r.hw], sm_clock_fraction=f)
            predicted = plan.tokens_per_s / r.gpus if r.metric == "tokens_per_s_per_gpu" \
                else 1.0 / plan.step_time_s
            errors.append(math.log(predicted / (r.value if r.metric == "tokens_per_s_per_gpu"
                                                else 1.0 / r.value)))
        return float(np.median(errors))
    x = _warm_zero(median_log_error, *SPECS[key][0], _warm_start(key), tol)
    _TRAINING_CLOCK_FITS[memo] = x, [r.id for r in rows]
    return _TRAINING_CLOCK_FITS[memo]


# the warm start's half-width: two steps of the 3 decimals fitted.yaml keeps, so the bracket holds
# the zero whenever the file is current (|zero - value| <= 0.0005) and a little beyond
WARM_SPAN = 0.001


def _warm_start(key: str) -> float | None:
    """The value fitted.yaml holds for `key` (the last fit's zero, rounded), None if it holds
    none: where fit_training_clock's search starts (_warm_zero)."""
    c = fitted.CONSTANTS.get(key)
    return None if c is None else c.value


def _illinois(f, lo: float, hi: float, f_lo: float, f_hi: float, tol: float) -> float:
    """The zero of a rising `f` bracketed by lo < hi (f_lo < 0 < f_hi) by regula falsi with the
    Illinois modification (the end that stays put twice has its value halved), to |f| < 1e-9
    or a bracket narrower than `tol`."""
    side = 0
    for _ in range(60):
        x = hi - f_hi * (hi - lo) / (f_hi - f_lo)
        f_x = f(x)
        if abs(f_x) < 1e-9 or hi - lo < tol:
            break
        if f_x < 0:
            lo, f_lo = x, f_x
            if side == -1:
                f_hi /= 2  # Illinois: the end that stays put is halved
            side = -1
        else:
            hi, f_hi = x, f_x
            if side == 1:
                f_lo /= 2
            side = 1
    return x


def _warm_zero(f, lo: float, hi: float, start: float | None, tol: float) -> float:
    """Where a rising `f` crosses zero in [lo, hi] (a bound where the zero lies outside), by
    _illinois, first in [start - WARM_SPAN, start + WARM_SPAN]: each evaluation of the clock fit
    plans every row, and the full range costs about 9 of them where the narrow bracket around
    the last fit's value costs 4 or 5. The narrow search runs to |f| < 1e-9 alone (no bracket
    width test: its bracket starts narrower than `tol`), the residual at which the full-range
    search ends too, so both return the zero to ~1e-9 / f' (the clock's: f' ~ 1.2, so ~1e-9,
    far below the 4 decimals its rule prints). Where the narrow bracket misses the zero, the
    search goes on in the part of the range beyond it, whose inner end is already evaluated."""
    if start is not None and lo < start - WARM_SPAN and start + WARM_SPAN < hi:
        a, b = start - WARM_SPAN, start + WARM_SPAN
        f_a, f_b = f(a), f(b)
        if f_a < 0 < f_b:
            return _illinois(f, a, b, f_a, f_b, 0.0)
        if f_a >= 0:  # the zero lies below the bracket (or at its lower end)
            if f_a == 0:
                return a
            f_lo = f(lo)
            return lo if f_lo >= 0 else _illinois(f, lo, a, f_lo, f_a, tol)
        if f_b == 0:
            return b
        f_hi = f(hi)  # the zero lies above the bracket
        return hi if f_hi <= 0 else _illinois(f, b, hi, f_b, f_hi, tol)
    f_lo, f_hi = f(lo), f(hi)
    if f_lo >= 0 or f_hi <= 0:  # the zero lies outside the range: its bound
        return lo if f_lo >= 0 else hi
    return _illinois(f, lo, hi, f_lo, f_hi, tol)


def moe_host_fit_rows(exclude: frozenset[str] = frozenset()) -> list:
    """The Megatron-Bridge rows the MoE host's seconds per operation is fitted on
    (MOE_HOST_RULE): one per configuration on H100 of a dropless MoE model with at least
    MOE_HOST_MIN_LOCAL_EXPERTS experts per GPU that the planner predicts, none in `exclude`."""
    from perfmodel.validation import training_predict as tp
    from perfmodel.validation.training import load_bridge_cases
    from perfmodel.workloads.models import load_model
    cases, _ = load_bridge_cases()
    compared = tp.throughput_rows(cases)
    rows = []
    for c in compared.values():
        m = load_model(c.model)
        if (c.id not in exclude and c.hw == "H100-SXM" and m.is_moe
                and c.model not in MOE_HOST_LEFT_OUT
                and c.moe_capacity_factor is None  # dropless: the waits the constant prices
                and m.experts / max(1, c.ep) >= MOE_HOST_MIN_LOCAL_EXPERTS
                and tp.why_not(c, compared) is None
                and not isinstance(tp.plan_case(c), str)):
            rows.append(c)
    return sorted(rows, key=lambda c: c.id)


def fit_moe_host_launch(clock: float, sustained: float | None = None,
                        exclude: frozenset[str] = frozenset(),
                        tol: float = 1e-9) -> tuple[float, list[str]]:
    """training.moe_host_launch_s on its rows (MOE_HOST_RULE; its prior if none): the planned
    throughput falls as the host's seconds per operation grow, and so does the median log
    error; bisection for its zero in the constant's range (a bound where the zero lies
    outside). `clock`: the step's SM clock fraction the plans run at."""
    from perfmodel.hardware import hardware
    from perfmodel.validation import training_predict as tp
    key = "training.moe_host_launch_s"
    rows = moe_host_fit_rows(exclude)
    if not rows:
        return prior(key), []
    hws = {name: _with_sustained(hardware(name), sustained) for name in {r.hw for r in rows}}

    def median_log_error(launch_s: float) -> float:
        errors = []
        for r in rows:
            plan = tp.plan_case(r, hw=hws[r.hw], sm_clock_fraction=clock,
                                moe_host_launch_s=launch_s)
            predicted = plan.tokens_per_s / r.gpus if r.metric == "tokens_per_s_per_gpu" \
                else 1.0 / plan.step_time_s
            measured = r.value if r.metric == "tokens_per_s_per_gpu" else 1.0 / r.value
            errors.append(math.log(predicted / measured))
        return float(np.median(errors))
    lo, hi = SPECS[key][0]
    if median_log_error(lo) <= 0:
        return lo, [r.id for r in rows]
    if median_log_error(hi) >= 0:
        return hi, [r.id for r in rows]
    while hi - lo > tol:
        mid = (lo + hi) / 2
        if median_log_error(mid) > 0:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2, [r.id for r in rows]


def _entry(key: str, value: float, rows: list[str], rule: str,
           rms: float | None = None) -> dict:
    rng, digits, meaning = SPECS[key]
    out = {"value": round(value, digits), "range": [float(rng[0]), float(rng[1])],
           "meaning": meaning, "fitted_on": list(rows), "rule": rule, "script": fitted.SCRIPT}
    if rms is not None:
        out["rms_log_error"] = round(rms, 4)
    return out


def fit_all(exclude: frozenset[str] = frozenset(), serving: bool = True) -> dict[str, dict]:
    """Every fitted constant from a fresh fit, as fitted.yaml holds it (key -> entry). `exclude`:
    row ids no rule may select (a cross-validation fold's held-out source): a constant left
    with no rows takes its prior (PRIORS) and fits on none. `serving=False` keeps the constants
    fitted on whole-system rows (SGLang's step overhead, the training clock) as fitted.yaml has
    them (no kernel row informs them)."""
    _FRESH_HW.clear()
    try:
        return _fit_all(frozenset(exclude), serving)
    finally:
        _FRESH_HW.clear()


# Sub-fits of fit_all by everything they read (_memo_key): a cross-validation fold
# (perfmodel.validation.calibrate) refits every constant without its source's rows, and where the
# rows, the GPUs and the module constants a sub-fit reads come out as they did in the full fit
# (or in another fold), its result is that fit's: the fold's worker is forked from the process
# that ran the full fit, so it finds the full fit's results here. Only the costliest sub-fits
# are kept (the attention fits, about 0.6 s and 0.7 s a pass; the GEMM clock and power fits,
# about 0.15 s each).
_SUBFITS: dict[tuple, object] = {}


def _module_state() -> tuple:
    """The module constants the fits set and the estimates read, besides the hardware (the
    attention module's, the MoE op's MXFP4 conversion, NCCL's ring local step, DeepEP's), as
    exact text (repr keeps every float's bits)."""
    from perfmodel.ops import deepep
    from perfmodel.ops.moe import op as moe_op
    (softmax, design, xqa), scalars = _saved_attention()
    return tuple(repr(sorted(d.items(), key=repr)) for d in (
        softmax, design, xqa, scalars, moe_op.CONVERT_OPS, nccl.RING_LOCAL_RATE,
        deepep.FIXED_S)) + (repr(deepep.COPY_ROUND_TRIPS),
                            repr(deepep.COPY_ROUND_TRIPS_BLACKWELL))


def _memo_key(name: str, rows, hws) -> tuple:
    """A sub-fit's key: its name and arguments, its rows, the GPUs it prices them on (repr:
    every field of the spec, the fitted constants applied, but its links: these sub-fits price
    single-GPU kernels, whose demands hold no link work, and only the collectives read a Link,
    so the NCCL latencies a fold refits leave them as they were) and _module_state."""
    return (name, rows, tuple(sorted(repr(dataclasses.replace(h, links={})) for h in hws)),
            _module_state())


def _memoized(key: tuple, fit):
    """fit()'s result under `key` (_SUBFITS), a copy (the callers own theirs)."""
    if key not in _SUBFITS:
        _SUBFITS[key] = fit()
    return copy.deepcopy(_SUBFITS[key])


def _attention_fit(cases: list[Case], sustained: float | None) -> dict:
    """fit_attention(cases, sustained), memoized (_SUBFITS): it reads its rows (id and
    measurement) on their GPUs as _with_sustained has them, and the attention module."""
    rows = attention_fit_rows(cases)
    hws = {id(c.hardware): c.hardware for c in rows}.values()
    key = _memo_key("attention", tuple((c.id, c.measured_time_s) for c in rows),
                    [_with_sustained(h, sustained) for h in hws])
    return _memoized(key, lambda: fit_attention(cases, sustained))


def _power_fit(sustained: float, exclude: frozenset[str], general: float | None = None
               ) -> tuple[float, list[str]]:
    """fit_power_exponent(sustained, exclude), or with `general` fit_fp4_power_exponent
    (sustained, general, exclude), memoized (_SUBFITS): they read their pairs of AIConfigurator
    rows left by `exclude` on the first pair's GPU as _with_sustained has it."""
    select = power_fit_rows if general is None else power_fp4_fit_rows
    pairs = [(a, b) for a, b in select(load_cases(AICONFIGURATOR_CSV)[0])
             if a.id not in exclude and b.id not in exclude]
    key = _memo_key(("power", sustained, general), tuple(
        (a.id, b.id, a.measured_time_s, b.measured_time_s) for a, b in pairs),
        [_with_sustained(pairs[0][0].hardware, sustained)] if pairs else [])
    if general is None:
        return _memoized(key, lambda: fit_power_exponent(sustained, exclude))
    return _memoized(key, lambda: fit_fp4_power_exponent(sustained, general, exclude))


def _b200_fit(general: float, exclude: frozenset[str], gpu: str = "B200"
              ) -> tuple[float, list[str]]:
    """fit_b200_sustained_fraction(general, exclude, gpu=gpu), memoized (_SUBFITS): it reads
    its AIConfigurator rows left by `exclude` on their GPU with this run's hardware constants
    (_FRESH_HW) applied."""
    rows = [c for c in b200_sustained_fit_rows(load_cases(AICONFIGURATOR_CSV)[0], gpu)
            if c.id not in exclude]
    key = _memo_key(("b200", general, gpu), tuple((c.id, c.measured_time_s) for c in rows),
                    [with_fitted(rows[0].hardware, dict(_FRESH_HW))] if rows else [])
    return _memoized(key, lambda: fit_b200_sustained_fraction(general, exclude, gpu=gpu))


def _trtllm_fit(sustained: float | None) -> dict[str, tuple[float, list[str]]]:
    """fit_trtllm_attention(sustained), memoized (_SUBFITS): it reads its rows (trtllm_fit_rows:
    the fit GPUs' rows of the module benchmarks' attention file, which no fold holds out) on
    its GPUs as _with_sustained has them, and the attention module (the TensorRT-LLM constants
    among it)."""
    from perfmodel.hardware import hardware
    from perfmodel.validation import modules
    gpus = sorted(set(TRTLLM_FIT_GPU.values()))
    rows = repr([r for r in modules.load_attention_rows() if r["hardware"] in gpus])
    key = _memo_key("trtllm", rows, [_with_sustained(hardware(g), sustained) for g in gpus])
    return _memoized(key, lambda: fit_trtllm_attention(sustained))


def _on_one_row(key: str, row: str, exclude: frozenset[str], fit_row) -> tuple[float,
                                                                               list[str]]:
    """(value, rows) of a constant fitted on its one row: `fit_row()`, or its prior when the
    row is held out."""
    return (prior(key), []) if row in exclude else (fit_row(), [row])


def _fit_all(exclude: frozenset[str], serving: bool) -> dict[str, dict]:
    raw_sustained, sustained_rows = _on_one_row("tensor_sustained_fraction", MAMF_ROW, exclude,
                                                fit_sustained_fraction)
    sustained = round(raw_sustained, SPECS["tensor_sustained_fraction"][1])
    raw_power, power_rows = _power_fit(sustained, exclude)
    _FRESH_HW["tensor_power_exponent"] = round(raw_power, SPECS["tensor_power_exponent"][1])
    raw_b200, b200_rows = _b200_fit(sustained, exclude)
    _FRESH_HW["tensor_sustained_fraction.b200"] = round(
        raw_b200, SPECS["tensor_sustained_fraction.b200"][1])
    raw_fp4, fp4_rows = _power_fit(sustained, exclude, _FRESH_HW["tensor_power_exponent"])
    _FRESH_HW["tensor_power_exponent.fp4"] = round(raw_fp4,
                                                   SPECS["tensor_power_exponent.fp4"][1])
    raw_hbm, hbm_rows = _on_one_row("hbm_achievable_fraction.b200", STREAM_ROW, exclude,
                                    fit_hbm_fraction)
    _FRESH_HW["hbm_achievable_fraction.b200"] = round(
        raw_hbm, SPECS["hbm_achievable_fraction.b200"][1])
    nccl_latency = {}
    for family in NCCL_FIT_GPU:
        (base, hop), rows = fit_nccl_latency(family, exclude)
        nccl_latency[family] = (base, hop, rows)
        for key, value in ((f"nccl.ll_base_s.{family}", base), (f"nccl.ll_hop_s.{family}", hop)):
            _FRESH_HW[key] = round(value, SPECS[key][1])
    ring_local = {family: fit_ring_local_rate(family, exclude) for family in NCCL_FIT_GPU}
    p2p, p2p_rows = fit_p2p(exclude)
    raw_convert, convert_rows = fit_mxfp4_convert(exclude)
    raw_marlin, marlin_rows = fit_marlin_fraction(round(raw_convert, 2), exclude)
    cases, _ = load_cases(PUBLIC_CSV)
    att = _attention_fit([c for c in cases if c.id not in exclude], sustained)
    fa4, fa4_rows = _on_one_row("attention.softmax_overlap.fa4", FA4_ROW, exclude,
                                lambda: fit_fa4_overlap(constants=att, sustained=sustained))
    cudnn_tcgen05 = fit_cudnn_tcgen05(att, sustained, exclude)
    fa2_tcgen05, fa2_tcgen05_rows = fit_fa2_tcgen05_fraction(att, sustained, exclude)
    raw_b300, b300_rows = _b200_fit(te_profile.fit_b300_sustained_fraction(), exclude,
                                    gpu="B300")
    # the module and serving fits price attention too: with the attention constants just fitted
    attention_now = {key: {"value": att[name]} for name, key in ATTENTION_KEYS.items()}
    attention_now["attention.softmax_overlap.fa4"] = {"value": fa4}
    attention_now["attention.mma_sync_fraction.tcgen05"] = {"value": fa2_tcgen05}
    attention_now.update({key: {"value": cudnn_tcgen05[key][0]} for key in CUDNN_TCGEN05_KEYS})
    # and NCCL's all-to-all at its p2p rates just fitted (serving steps and training exchanges)
    attention_now.update({key: {"value": round(value, SPECS[key][1])}
                          for key, value in p2p.items()})
    gaps = {}
    with applied(attention_now):
        # TensorRT-LLM's attention constants are fitted on captured calls (so under the graph
        # gaps) and the gaps on captured MLA blocks whose attention is TensorRT-LLM's (so under
        # trtllm-gen's fixed time): the two fits alternate until their rounded values repeat
        seen = None
        for _ in range(JOINT_FIT_MAX_PASSES):
            trtllm = _trtllm_fit(sustained)
            _set_trtllm({k: round(v, SPECS[k][1]) for k, (v, _) in trtllm.items()})
            for family in GRAPH_GAP_GPU:
                key = f"graph_kernel_gap_s.{family}"
                gaps[family] = fit_graph_gap(family, exclude, sustained)
                _FRESH_HW[key] = round(gaps[family][0], SPECS[key][1])
            now = (tuple(round(v, SPECS[k][1]) for k, (v, _) in sorted(trtllm.items())),
                   tuple(_FRESH_HW[f"graph_kernel_gap_s.{f}"] for f in GRAPH_GAP_GPU))
            if now == seen:
                break
            seen = now
        if serving:
            overhead, overhead_rows = fit_sglang_step_overhead(sustained)
            request = {e: fit_request_overhead(e, overhead) for e in REQUEST_OVERHEAD_ENGINES}
            clock, clock_rows = fit_training_clock(sustained)
            clock_rule = TRAINING_CLOCK_RULE.format(
                sources=", ".join(training_clock_sources(clock_rows)), n=len(clock_rows),
                fit=clock)
            host, host_rows = fit_moe_host_launch(
                round(clock, SPECS["training.sm_clock_fraction"][1]), sustained, exclude)
            host_rule = MOE_HOST_RULE.format(min_local=MOE_HOST_MIN_LOCAL_EXPERTS,
                                             rows=", ".join(host_rows), fit=host,
                                             left_out=MOE_HOST_LEFT_OUT["gpt-oss-120b"])
        else:
            c = fitted.CONSTANTS["serving.step_overhead_s.sglang"]
            overhead, overhead_rows = c.value, list(c.fitted_on)
            request = {e: (fitted.CONSTANTS[f"serving.request_overhead_s.{e}"].value,
                           list(fitted.CONSTANTS[f"serving.request_overhead_s.{e}"].fitted_on))
                       for e in REQUEST_OVERHEAD_ENGINES}
            c = fitted.CONSTANTS["training.sm_clock_fraction"]
            clock, clock_rows, clock_rule = c.value, list(c.fitted_on), c.rule
            c = fitted.CONSTANTS["training.moe_host_launch_s"]
            host, host_rows, host_rule = c.value, list(c.fitted_on), c.rule
    entries = {"tensor_sustained_fraction": _entry(
        "tensor_sustained_fraction", sustained, sustained_rows,
        SUSTAINED_RULE.format(fit=raw_sustained)),
        "tensor_power_exponent": _entry(
        "tensor_power_exponent", raw_power, power_rows,
        POWER_RULE.format(n=len(power_rows), fit=raw_power)),
        "tensor_power_exponent.fp4": _entry(
        "tensor_power_exponent.fp4", raw_fp4, fp4_rows,
        POWER_FP4_RULE.format(n=len(fp4_rows), fit=raw_fp4)),
        "hbm_achievable_fraction.b200": _entry(
        "hbm_achievable_fraction.b200", raw_hbm, hbm_rows, HBM_RULE.format(fit=raw_hbm)),
        **{f"graph_kernel_gap_s.{f}": _entry(
            f"graph_kernel_gap_s.{f}", gaps[f][0], gaps[f][1],
            GRAPH_GAP_RULE.format(gpu=GRAPH_GAP_GPU[f], n=len(gaps[f][1]), fit=gaps[f][0]))
           for f in GRAPH_GAP_GPU},
        "tensor_sustained_fraction.b200": _entry(
        "tensor_sustained_fraction.b200", raw_b200, b200_rows,
        B200_RULE.format(n=len(b200_rows), fit=raw_b200)),
        "tensor_sustained_fraction.b300": _entry(
        "tensor_sustained_fraction.b300", raw_b300, b300_rows or list(te_profile.FIT_ROWS),
        B300_RULE.format(n=len(b300_rows), fit=raw_b300)),
        "serving.step_overhead_s.sglang": _entry(
        "serving.step_overhead_s.sglang", overhead, overhead_rows, STEP_OVERHEAD_RULE),
        **{f"serving.request_overhead_s.{e}": _entry(
            f"serving.request_overhead_s.{e}", request[e][0], request[e][1],
            _request_rule(e, request[e])) for e in REQUEST_OVERHEAD_ENGINES},
        "training.sm_clock_fraction": _entry(
        "training.sm_clock_fraction", clock, clock_rows, clock_rule),
        "training.moe_host_launch_s": _entry(
        "training.moe_host_launch_s", host, host_rows, host_rule)}
    for name, key in ATTENTION_KEYS.items():
        entries[key] = _entry(key, att[name], att["rows"], ATTENTION_RULE, att["rms_log_error"])
    entries["attention.softmax_overlap.fa4"] = _entry(
        "attention.softmax_overlap.fa4", fa4, fa4_rows, FA4_RULE)
    entries["attention.mma_sync_fraction.tcgen05"] = _entry(
        "attention.mma_sync_fraction.tcgen05", fa2_tcgen05, fa2_tcgen05_rows,
        FA2_TCGEN05_RULE.format(seq=FA2_TCGEN05_MIN_SEQ, n=len(fa2_tcgen05_rows),
                                fit=fa2_tcgen05))
    for key, rule in (("attention.softmax_overlap.cudnn_tcgen05.fwd", CUDNN_TCGEN05_FWD_RULE),
                      ("attention.softmax_overlap.cudnn_tcgen05.bwd", CUDNN_TCGEN05_BWD_RULE)):
        value, rows, rms = cudnn_tcgen05[key]
        entries[key] = _entry(key, value, rows, rule, rms)
    from perfmodel.validation import collectives
    copy_round, round_rows = fit_deepep_round()
    entries["moe.convert_ops.mxfp4"] = _entry(
        "moe.convert_ops.mxfp4", raw_convert, convert_rows, MXFP4_CONVERT_RULE.format(
            tokens=MXFP4_CONVERT_MAX_TOKENS, n=len(convert_rows), fit=raw_convert))
    entries["moe.marlin_mma_fraction"] = _entry(
        "moe.marlin_mma_fraction", raw_marlin, marlin_rows, MARLIN_RULE.format(
            tokens=MARLIN_FIT_MIN_TOKENS, n=len(marlin_rows), fit=raw_marlin))
    for family, (base, hop, rows) in nccl_latency.items():
        rule = NCCL_LATENCY_RULE.format(gpu=NCCL_FIT_GPU[family], limit=NCCL_FIT_MAX_BYTES,
                                        n=len(rows), base=base, hop=hop)
        entries[f"nccl.ll_base_s.{family}"] = _entry(f"nccl.ll_base_s.{family}", base, rows, rule)
        entries[f"nccl.ll_hop_s.{family}"] = _entry(f"nccl.ll_hop_s.{family}", hop, rows, rule)
    for family, (rate, fixed, rows) in ring_local.items():
        key = f"nccl.ring_local_rate.{family}"
        entries[key] = _entry(key, rate, rows, RING_LOCAL_RULE.format(
            gpu=NCCL_FIT_GPU[family], limit=collectives.RING_FIT_MIN_BYTES >> 20, n=len(rows),
            fixed=fixed, fit=rate))
    p2p_text = ", ".join(f"{key.rsplit('.', 1)[1]} {value:.4g}" for key, value in p2p.items())
    for key, value in p2p.items():
        entries[key] = _entry(key, value, p2p_rows, P2P_RULE.format(
            gpus=" and ".join(collectives.P2P_FIT_GPUS), n=len(p2p_rows), fit=p2p_text))
    entries["deepep.copy_round_trips"] = _entry(
        "deepep.copy_round_trips", copy_round, round_rows, DEEPEP_ROUND_RULE.format(
            tokens=collectives.ROUND_FIT_MIN_TOKENS, sms=collectives.ROUND_FIT_MAX_SMS,
            n=len(round_rows), fit=copy_round))
    rounded_copy_round = round(copy_round, SPECS["deepep.copy_round_trips"][1])
    for key, (value, rows) in fit_deepep_fixed(rounded_copy_round).items():
        mode, phase = key.split(".")[2:]
        entries[key] = _entry(key, value, rows, DEEPEP_RULE.format(
            gpu=collectives.FIXED_FIT_GPU, mode=mode.replace("_", "-"), phase=phase,
            tokens=collectives.FIXED_FIT_TOKENS, n=len(rows), fit=value))
    # Blackwell's round, with Hopper's and the fixed times as the file holds them
    bw_round, bw_rows = fit_deepep_round_blackwell(rounded_copy_round, {
        k: entries[k]["value"] for k in entries if k.startswith("deepep.fixed_s.")})
    entries["deepep.copy_round_trips.blackwell"] = _entry(
        "deepep.copy_round_trips.blackwell", bw_round, bw_rows,
        DEEPEP_ROUND_BLACKWELL_RULE.format(
            gpu=collectives.BLACKWELL_ROUND_FIT_GPU,
            tokens=collectives.BLACKWELL_ROUND_FIT_MIN_TOKENS, n=len(bw_rows), fit=bw_round))
    from perfmodel.ops.custom_allreduce import EAGER_HOST_KEYS, EAGER_HOST_RATIO_KEYS
    engine_rows = [r for r in collectives.load_engine_rows(trtllm_path=None)
                   if r["id"] not in exclude]
    eager = collectives.fit_eager_host_s(engine_rows)
    kernel_keys = [k for k in dict.fromkeys(EAGER_HOST_KEYS.values())
                   if k not in collectives.NCCL_HOST_KEYS]
    for key in kernel_keys:
        value, rows = eager.get(key, (PRIORS[key], []))
        paths = [(e, p) for (e, p), k in EAGER_HOST_KEYS.items() if k == key]
        entries[key] = _entry(key, value, rows, collectives.EAGER_HOST_RULE.format(
            engine=paths[0][0], gpu=collectives.EAGER_HOST_FIT_GPU,
            limit=collectives.EAGER_HOST_FIT_MAX_BYTES,
            path=" or ".join(p for _, p in paths), n=len(rows)))
    x86 = {key: entries[key]["value"] for key in kernel_keys}
    ratios = collectives.fit_eager_host_ratio(engine_rows, x86)
    for cpu, key in EAGER_HOST_RATIO_KEYS.items():
        value, rows = ratios.get(key, (PRIORS[key], []))
        entries[key] = _entry(key, value, rows, collectives.EAGER_HOST_RATIO_RULE.format(
            gpu=collectives.EAGER_HOST_RATIO_FIT_GPU[cpu], cpu=cpu.capitalize(),
            limit=collectives.EAGER_HOST_FIT_MAX_BYTES, n=len(rows),
            x86_gpu=collectives.EAGER_HOST_FIT_GPU))
    from perfmodel.ops.custom_allreduce import RELEASE_PEER_KEYS
    by_id = {r["id"]: r for r in engine_rows}
    for major, key in RELEASE_PEER_KEYS.items():
        value, rows = fit_release_peer_trips(major, engine_rows)
        sizes = ", ".join(sorted({f"{by_id[i]['gpus']} GPUs x {by_id[i]['bytes'] / 2**10:g} KiB"
                                  for i in rows if i in by_id}))
        entries[key] = _entry(key, value, rows, collectives.RELEASE_RULE.format(
            gpu=collectives.RELEASE_FIT_GPU[major], n=len(rows), sizes=sizes, fit=value))
    # the engines' NCCL paths, seen host-bound only on a Grace host (NCCL_HOST_FIT)
    grace = entries[EAGER_HOST_RATIO_KEYS["grace"]]["value"]
    nccl_paths = collectives.fit_nccl_host_s(engine_rows, grace)
    for key in collectives.NCCL_HOST_KEYS:
        value, rows = nccl_paths.get(key, (PRIORS[key], []))
        engine = next(e for (e, _), k in EAGER_HOST_KEYS.items() if k == key)
        gpu, gpus = collectives.NCCL_HOST_FIT[engine]
        entries[key] = _entry(key, value, rows, collectives.NCCL_HOST_RULE.format(
            engine=engine, gpu=gpu, gpus=gpus, limit=collectives.EAGER_HOST_FIT_MAX_BYTES,
            n=len(rows), fit=value,
            how=("pynccl's ncclAllReduce" if engine == "vllm"
                 else "torch.distributed.all_reduce, c10d"),
            judged=("Judged on its 16-GPU rows and the larger calls" if engine == "sglang"
                    else "Judged on the larger calls only (its 8-GPU calls run torch "
                         "symm-mem)")))
    for key, (value, rows) in trtllm.items():
        rule = (XQA_RULE.format(n=len(rows), fit=value) if key == XQA_KEY else
                TRTLLM_GEN_FIXED_RULE.format(limit=TRTLLM_GEN_FIXED_MAX_S * 1e6, n=len(rows),
                                             fit=value) if key == TRTLLM_GEN_FIXED_KEY else
                TRTLLM_CONTEXT_RULE.format(gpu=TRTLLM_FIT_GPU[key], n=len(rows), fit=value))
        entries[key] = _entry(key, value, rows, rule)
    return {k: entries[k] for k in SPECS}  # in SPECS' order


def _scalar(x) -> str:
    if isinstance(x, float):
        return repr(x)
    if isinstance(x, list) and all(isinstance(v, float) for v in x):
        return f"[{', '.join(map(repr, x))}]"
    plain = isinstance(x, str) and "#" not in x and ": " not in x and yamlio.loads(x) == x
    return x if plain else json.dumps(x)  # a JSON string is a double-quoted YAML scalar


def render(entries: dict[str, dict]) -> str:
    """fitted.yaml's text: one block per constant, strings on one line, one row id per line."""
    lines = [HEADER]
    for key, entry in entries.items():
        lines.append(f"\n{key}:\n")
        for k, v in entry.items():
            if k == "fitted_on":
                lines.append(f"  {k}:\n" + "".join(f"    - {_scalar(r)}\n" for r in v))
            else:
                lines.append(f"  {k}: {_scalar(v)}\n")
    return "".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m perfmodel.validation.fit",
                                 description="Refit the fitted constants and write "
                                             f"{fitted.PATH.name}.")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 with a diff if the file differs from a fresh fit")
    args = ap.parse_args(argv)
    text = render(fit_all())
    path = fitted.PATH
    old = path.read_text() if path.is_file() else ""
    if args.check:
        if old == text:
            print(f"{path}: matches a fresh fit")
            return 0
        sys.stdout.writelines(difflib.unified_diff(
            old.splitlines(keepends=True), text.splitlines(keepends=True),
            f"{path} (as written)", "fresh fit"))
        print(f"{path}: differs from a fresh fit; `{fitted.SCRIPT}` rewrites it")
        return 1
    path.write_text(text)
    for key, c in fitted.parse(yamlio.loads(text, str(path)), str(path)).items():
        rms = f"  rms log error {c.rms_log_error}" if c.rms_log_error is not None else ""
        print(f"{key} = {c.value:g}  ({len(c.fitted_on)} row{'s' * (len(c.fitted_on) > 1)}){rms}")
    print(f"wrote {path}{'' if old == text else ' (changed)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
