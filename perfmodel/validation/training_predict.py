"""The published training rows (`perfmodel.validation.training`) replayed on the training planner
(`perfmodel.plan.training.plan_training`), with the plain roofline beside it.

    python -m perfmodel.validation.training_predict   # error tables by source, GPU, model, layout
    python -m perfmodel.validation.training_predict --bridge   # the Megatron-Bridge rows only

What a row becomes: plan_training(model, hardware, batch = global batch / dp, seq, tp, pp, dp,
dtype = the recipe's GEMM policy, ep, microbatches = batch / micro-batch, virtual_stages = VP,
pipeline_split = the split the recipe runs (BRIDGE_LAYOUTS; else "auto", Megatron-Core's split
of plan.training.pipeline_split: even, else the embedding and loss counted as layers, else
first/last-stage counts), cp = CP, recompute (where the row states none: the recipe's own where the framework's recipe
for the model sets one, RECIPE_RECOMPUTE, or Megatron-Bridge's DeepSeek-V3 and GPT-OSS modules by
layout, BRIDGE_RECOMPUTE, else the least recomputation that fits, "none" —
the default of Megatron-Core's TransformerConfig — else "full", the rule of
`search_training_plans`: a published run fitted in memory, so its recipe recomputed what it had
to), zero = the row's ZeRO stage, grad_reduce_dtype = fp32 for the PyTorch-FSDP frameworks that
reduce gradients in FP32 (GRAD_REDUCE_DTYPE), attention_kernel = the attention kernels the
framework trains with (FRAMEWORK_ATTENTION), moe_dispatcher = the expert exchange a
Megatron-Bridge release's recipe names where the planner has it (BRIDGE_DISPATCHER; else
"auto"), allow_oversubscribed=False), once at level "pipes" (the planner) and once at "roofline"
(the speed-of-light baseline: datasheet peaks, no kernel model). A plan whose memory estimate
exceeds the usable HBM, or a layout the planner refuses, is a row not predicted, with the reason.

Compared metrics: tokens/s per GPU (the plan's tokens/s over the row's GPUs) and step time. A
model-TFLOP/s or MFU row is not compared on its FLOPs, whose counts differ between frameworks
(validate/data/training_SOURCES.md): where its configuration has a tokens/s or step-time row,
that row is the comparison; otherwise it is converted to tokens/s only under a FLOP convention the
row states (`TrainingCase.tokens_per_s_per_gpu_from_flops`), and left out where it states none.
Peak-memory rows are not compared. Blockwise FP8 and an expert tensor parallelism other than
the planner's (tp/ep) have no counterpart in the planner: not predicted.

Errors are in throughput terms, so that one sign means one thing across metrics: predicted /
measured − 1 of tokens/s, and measured / predicted − 1 of a step time (+ is a planner faster
than the run).

One constant is fitted on these rows: training.sm_clock_fraction (perfmodel/fitted.yaml; the
step's SM clock, perfmodel.plan.training), on the configurations of the Megatron-Core
frameworks (NeMo, Megatron-LM, dgxc-benchmarking). Their rows are reported as "fitted" (a
configuration's other rows with them); the PyTorch frameworks' rows (llm-foundry, torchtitan,
NeMo AutoModel) are judged only. `cross_validated` judges each Megatron source with the
fraction refitted on the others (leave one source out). The Megatron-Bridge rows
(validate/data/training_megatron_bridge.csv, `load_bridge_cases`) are replayed beside them:
the clock fit reads training_measurements.csv alone, and one constant is fitted on Bridge
rows, training.moe_host_launch_s (the host's seconds per operation of a MoE step,
perfmodel.plan.moe_host), on the H100 rows of MoE models with at least 8 experts per GPU
(perfmodel.validation.fit `moe_host_fit_rows`); those rows show as "fitted", every other
Bridge row (all of B200's) is judged.
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from statistics import median
from typing import Callable, Iterable

from perfmodel import fitted
from perfmodel.errors import InputError
from perfmodel.hardware import Hardware
from perfmodel.plan.training import TrainingPlan, plan_training
from perfmodel.report.progress import Progress
from perfmodel.report.tables import format_table
from perfmodel.validation.training import (FLOP_METRICS, TrainingCase, load_bridge_cases,
                                           load_training_cases)
from perfmodel.workloads.models import load_model

COMPARED = ("tokens_per_s_per_gpu", "step_time_s")
# Sources whose framework reduce-scatters gradients in FP32 (plan_training grad_reduce_dtype):
# torchtitan, TrainingConfig.mixed_precision_reduce = "float32" (torchtitan/config/configs.py,
# 0.3.0, line 93: the only choice) for the torchao runs; Composer's FSDP mixed_precision
# 'DEFAULT' (composer/distributed/mosaic_parallelism.py, 0.32.1, get_mixed_precision, lines
# 78-81: reduce_dtype = torch.float32) for llm-foundry's "MP mode DEFAULT"; its "MP mode PURE"
# reduces in the training precision (composer 0.17.2, the line llm-foundry 0.4.0 pins,
# composer/trainer/mosaic_fsdp_utils.py get_mixed_precision, lines 98-100: PURE sets
# reduce_dtype to the precision, BF16; DEFAULT, lines 94-97, float32):
# PURE_REDUCE_DTYPE, by the row's precision text. The others run Megatron-Core
# (grad_reduce_in_fp32 = False by default) or do not say.
GRAD_REDUCE_DTYPE = {"AO": "fp32", "LF": "fp32"}
PURE_MIXED_PRECISION = "MP MODE PURE"
PURE_REDUCE_DTYPE = "bf16"
# The attention kernels each framework trains with (plan_training attention_kernel; a framework
# not named keeps the GPU's default design):
#   NeMo, Megatron-LM: Transformer Engine's DotProductAttention, whose backend selection prefers
#     its FusedAttention (cuDNN's fused SDPA) on Hopper and Blackwell -> "cudnn";
#   torchtitan: torch.nn.functional.scaled_dot_product_attention (flex attention off by
#     default), whose CUDA backends try FlashAttention (PyTorch's copy of FlashAttention-2)
#     first -> "fa2";
#   llm-foundry: MPT's attn_impl as llm-foundry 0.4.0 defaults it, "triton" (llmfoundry/models/
#     layers/blocks.py:18, attn_config_defaults): the Triton FlashAttention it vendors
#     (flash_attn_triton.py) -> "triton_fa" (perfmodel.ops.attention.triton_fa). Assumed for the
#     benchmark tables (regenerated 2024-01-06; their yamls are not read): 0.4.0 (2023-11-22)
#     runs MPT's ALiBi only on its torch or Triton kernels (configuration_mpt.py:219-223);
#     ALiBi with flash-attn came in 0.5.0 (2024-02-08, configuration_mpt.py: "flash (v2.4.2 or
#     higher)"). The ALiBi bias itself is not priced (triton_fa's docstring);
#   nanotron: flash-attn 2 -> "fa2".
# NeMo AutoModel runs SDPA or FlexAttention per recipe (validate/data/training_SOURCES.md):
# left default.
FRAMEWORK_ATTENTION = {"llm-foundry": "triton_fa", "torchtitan": "fa2", "nanotron": "fa2",
                       "NeMo": "cudnn", "Megatron-LM": "cudnn", "Megatron-Bridge": "cudnn"}
# The training framework each row ran (plan_training framework; perfmodel.plan.frameworks):
# NeMo and Megatron-LM run Megatron-Core with Transformer Engine; llm-foundry runs Composer's
# trainer on PyTorch FSDP ("composer": its per-microbatch train metrics and its per-parameter
# DecoupledAdamW); the others PyTorch's own parallelism (torchtitan, NeMo AutoModel's FSDP2)
TRAINING_FRAMEWORK = {"NeMo": "megatron", "Megatron-LM": "megatron",
                      "Megatron-Bridge": "megatron", "llm-foundry": "composer"}
# The pipeline layouts Megatron-Bridge's DeepSeek-V3 recipes pass (61 decoder layers do not split
# by Megatron-Core's other rules once VP > 1): set_deepseek_v3_pipeline_model_parallel_layout,
# NVIDIA-NeMo/Megatron-Bridge r0.6.0 src/megatron/bridge/recipes/deepseek/h100/deepseek_v3.py:
# 50-90, maps (PP, VP) to a layout string, (8, 2) and (4, 4) -> "Et*4|(t*4|)*14tmL"; the H100
# recipes pass "Et|(tt|)*30mL" for PP8 x VP4. The MTP layer `m` is dropped: the model file has
# none. Other (model, pp, vp): "auto" (plan.training.pipeline_split)
BRIDGE_LAYOUTS = {("deepseek-v3", 8, 2): "Et*4|(t*4|)*14tL",
                  ("deepseek-v3", 4, 4): "Et*4|(t*4|)*14tL",
                  ("deepseek-v3", 8, 4): "Et|(tt|)*30L"}
# The recomputation tried, in order, for a row that does not state its own (module docstring)
UNSTATED_RECOMPUTE = ("none", "full")
# The recomputation a framework's recipe sets for a model, which its rows run unless they say
# otherwise: NeMo's DeepSeek-V3 pretraining recipe recomputes every layer
# (nemo/collections/llm/recipes/deepseek_v3.py, nemo_toolkit 2.3.0 — the NeMo 25.04 container
# dgxc-benchmarking v25.05 runs — lines 111-113: recompute_granularity "full", method
# "uniform", one layer per group). NeMo's other pretraining recipes set none (Megatron-Core's
# default).
RECIPE_RECOMPUTE = {("NeMo", "deepseek-v3"): "full"}
# Megatron-Bridge's DeepSeek-V3 performance recipes recompute selectively by module (Megatron-
# Core's recompute_modules, plan_training `recompute_modules`), per layout (the DeepSeek-V3
# pretrain configs of NVIDIA-NeMo/Megatron-Bridge r0.6.0@6124fbe3
# src/megatron/bridge/perf_recipes/deepseek/<gpu>/, `recompute_modules`): H100
# PP8 VP4 and PP8 VP2 (BF16, FP8-CS, blockwise FP8) and B200 PP8 VP2 (MXFP8) recompute
# mla_up_proj and mlp; B200 PP16 (BF16, FP8-CS) mla_up_proj. Assumed for the rows, which state
# none ("not stated in table"): the releases before the recipes read (25.09-26.02, B200 MXFP8
# on PP16 until 26.04) recomputed what their layout's recipe does now. A choice is written
# "selective:<module>,<module>" (`recompute_choice`).
# Its GPT-OSS-120B performance recipes (same tree, perf_recipes/gpt_oss/<gpu>/gpt_oss.py) recompute
# layernorm and moe_act on H100 (PP4, MBS 1) and B200 (PP1, MBS 4), in BF16 and FP8 alike;
# assumed for the 25.11-26.04 rows as for DeepSeek-V3's.
BRIDGE_RECOMPUTE = {("deepseek-v3", 8, 4): "selective:mla_up_proj,mlp",
                    ("deepseek-v3", 8, 2): "selective:mla_up_proj,mlp",
                    ("deepseek-v3", 16, 1): "selective:mla_up_proj",
                    ("gpt-oss-120b", 4, 1): "selective:layernorm,moe_act",
                    ("gpt-oss-120b", 1, 1): "selective:layernorm,moe_act"}
# Megatron-Bridge's expert exchange where a release's recipe names one the planner has, as the
# release branches changed the perf recipes: Qwen3-235B-A22B on B200 ran DeepEP's kernels (the
# flex dispatcher's deepep backend) from r0.3.0@8301abfc (26.02), until r0.5.0@f83545d9 (26.06)
# moved its MXFP8 preset to the full-iteration bundle's HybridEP; the other rows keep the
# planner's "auto" (NCCL's all-to-all in a node, DeepEP's internode kernels for DeepSeek-V3's
# node-limited gate across nodes). Keys: (model, GPU, releases as "YY.MM").
BRIDGE_DISPATCHER = {("qwen3-235b-a22b", "B200", ("26.02", "26.04")): "deepep"}
LEVELS = ("pipes", "roofline")
NOT_FIT = "does not fit in memory (plan_training's estimate, allow_oversubscribed=False)"
_METRIC_LABEL = {"model_flop_per_s_per_gpu": "model TFLOP/s", "flop_per_s_per_gpu": "TFLOP/s",
                 "mfu": "MFU"}


def throughput_rows(cases: Iterable[TrainingCase]) -> dict[str, TrainingCase]:
    """The compared row of each configuration: its tokens/s row, else its step-time row."""
    out: dict[str, TrainingCase] = {}
    for c in cases:
        if c.metric in COMPARED and (c.config not in out or c.metric == "tokens_per_s_per_gpu"):
            out[c.config] = c
    return out


def why_not(case: TrainingCase, compared: dict[str, TrainingCase]) -> str | None:
    """Why the planner cannot replay this row, or None if it can (module docstring).
    `compared`: `throughput_rows` of all cases."""
    if case.metric == "peak_memory_bytes":
        return ("peak memory is not compared (the planner's memory estimate admits or refuses "
                "a plan; it is not a peak-memory model)")
    if case.metric in FLOP_METRICS:
        label = _METRIC_LABEL[case.metric]
        twin = compared.get(case.config)
        if twin is not None:
            return (f"{label}: the framework's own FLOP count; its configuration is compared on "
                    f"its {'tokens/s' if twin.metric == 'tokens_per_s_per_gpu' else 'step-time'}"
                    f" row")
        if case.tokens_per_s_per_gpu_from_flops() is None:
            return f"{label} without a stated FLOP convention (and no tokens/s or step-time row)"
    if case.dtype is None:
        return f"recipe {case.recipe}: no whole-model GEMM policy in the planner"
    if case.expert_tp is not None and case.expert_tp != max(1, case.tp // case.ep):
        return (f"expert tensor parallelism ETP={case.expert_tp} differs from the planner's "
                f"tp/ep = {max(1, case.tp // case.ep)}")
    return None


def _plan_uncached(hw, model: str, batch: int, seq: int, tp: int, pp: int, dp: int,
                   dtype: str, ep: int, microbatches: int, vp: int, level: str, recompute: str,
                   zero: int, cp: int = 1, grad_reduce_dtype: str = "bf16",
                   attention_kernel: str | None = None, framework: str = "megatron",
                   pipeline_split: str = "auto", moe_dispatcher: str = "auto",
                   sm_clock_fraction: float | None = None,
                   moe_host_launch_s: float | None = None,
                   moe_capacity_factor: float | None = None) -> TrainingPlan | str:
    """The plan, or the one-line reason plan_training refused it (memory or layout).
    `recompute`: a replayed choice (`recompute_choice`)."""
    recompute, modules = recompute_choice(recompute)
    try:
        return plan_training(model, hw, batch=batch, seq=seq, tp=tp, pp=pp, dp=dp, dtype=dtype,
                             ep=ep, microbatches=microbatches, virtual_stages=vp, level=level,
                             recompute=recompute, recompute_modules=modules, zero=zero,
                             allow_oversubscribed=False, cp=cp,
                             grad_reduce_dtype=grad_reduce_dtype,
                             attention_kernel=attention_kernel, framework=framework,
                             sm_clock_fraction=sm_clock_fraction,
                             pipeline_split=pipeline_split, moe_dispatcher=moe_dispatcher,
                             moe_host_launch_s=moe_host_launch_s,
                             moe_capacity_factor=moe_capacity_factor)
    except InputError as e:
        return str(e).splitlines()[0]


# the report plans each row at both levels and again for its worst-rows table: by GPU name
_plan = functools.lru_cache(maxsize=None)(_plan_uncached)


def replayed_recompute(case: TrainingCase) -> tuple[str, ...]:
    """The recomputation choices a row is replayed with, in order: its own, or where it states
    none its recipe's (RECIPE_RECOMPUTE; Megatron-Bridge's DeepSeek-V3 and GPT-OSS by layout,
    BRIDGE_RECOMPUTE), else UNSTATED_RECOMPUTE (module docstring)."""
    if case.recompute:
        return (case.recompute,)
    recipe = RECIPE_RECOMPUTE.get((case.framework, case.model))
    if case.framework == "Megatron-Bridge":
        recipe = BRIDGE_RECOMPUTE.get((case.model, case.pp, case.vp), recipe)
    return (recipe,) if recipe else UNSTATED_RECOMPUTE


def recompute_choice(choice: str) -> tuple[str, tuple[str, ...] | None]:
    """(recompute, recompute_modules) of a replayed choice: "full", or "selective:a,b" for
    Megatron-Core's selective recomputation of modules a and b."""
    rc, _, modules = choice.partition(":")
    return rc, (tuple(modules.split(",")) if modules else None)


def plan_case(case: TrainingCase, level: str = "pipes", hw: Hardware | None = None,
              sm_clock_fraction: float | None = None,
              moe_host_launch_s: float | None = None) -> TrainingPlan | str:
    """plan_training for the row's layout at `level` with the first of its recomputation
    choices that fits (`replayed_recompute`), or the reason it was refused (the first
    choice's, when none fits). `hw` (default: the row's GPU as loaded), `sm_clock_fraction`
    and `moe_host_launch_s` (default: the fitted ones) are the fits' and the
    cross-validation's (TRAINING_CLOCK_RULE, MOE_HOST_RULE)."""
    first = None
    for rc in replayed_recompute(case):
        args = (case.model, case.batch_per_replica, case.seq, case.tp, case.pp, case.dp,
                case.dtype, case.ep, case.microbatches, case.vp, level, rc, case.zero, case.cp,
                grad_reduce_dtype_of(case),
                FRAMEWORK_ATTENTION.get(case.framework), framework_of(case),
                pipeline_split_of(case), moe_dispatcher_of(case))
        if hw is None and sm_clock_fraction is None and moe_host_launch_s is None:
            p = _plan(case.hw, *args, moe_capacity_factor=case.moe_capacity_factor)
        else:
            p = _plan_uncached(hw or case.hw, *args, sm_clock_fraction=sm_clock_fraction,
                               moe_host_launch_s=moe_host_launch_s,
                               moe_capacity_factor=case.moe_capacity_factor)
        if not isinstance(p, str) or refusal_reason(p) != NOT_FIT:
            return p
        first = first or p
    return first


def grad_reduce_dtype_of(case: TrainingCase) -> str:
    """The dtype the row's framework reduce-scatters gradients in (GRAD_REDUCE_DTYPE, except
    Composer's PURE mixed precision, PURE_REDUCE_DTYPE)."""
    if case.source == "LF" and PURE_MIXED_PRECISION in case.precision_note.upper():
        return PURE_REDUCE_DTYPE
    return GRAD_REDUCE_DTYPE.get(case.source, "bf16")


def release_of(case: TrainingCase) -> str | None:
    """The NeMo container release a row ran (its framework_version's "YY.MM" or "YY.MM.PP"),
    or None where it names none."""
    found = re.search(r"\b(\d\d\.\d\d(?:\.\d\d)?)\b", case.framework_version or "")
    return found.group(1) if found else None


def moe_dispatcher_of(case: TrainingCase) -> str:
    """The expert exchange the row's recipe runs (plan_training `moe_dispatcher`):
    BRIDGE_DISPATCHER's for its Megatron-Bridge release, model and GPU, else "auto"."""
    if case.framework != "Megatron-Bridge":
        return "auto"
    release = release_of(case)
    for (model, gpu, releases), dispatcher in BRIDGE_DISPATCHER.items():
        if case.model == model and case.hardware.name == gpu and release is not None \
                and release[:5] in releases:
            return dispatcher
    return "auto"


def pipeline_split_of(case: TrainingCase) -> str:
    """The pipeline split the row's recipe runs (BRIDGE_LAYOUTS for Megatron-Bridge's
    DeepSeek-V3, else "auto")."""
    if case.framework == "Megatron-Bridge":
        return BRIDGE_LAYOUTS.get((case.model, case.pp, case.vp), "auto")
    return "auto"


def framework_of(case: TrainingCase) -> str:
    """The plan_training framework the row ran (TRAINING_FRAMEWORK; the others: pytorch)."""
    return TRAINING_FRAMEWORK.get(case.framework, "pytorch")


def refusal_reason(message: str) -> str:
    """The reason class of a plan_training refusal, for counting."""
    if "GB per GPU" in message and "usable" in message:
        return NOT_FIT
    return f"planner refused the layout: {message.split(': ', 1)[-1]}"


@dataclass(frozen=True)
class TrainingComparison:
    case: TrainingCase
    metric: str                  # the compared metric (a converted FLOP row: tokens/s)
    measured: float | None       # SI, in `metric`
    predicted: float | None      # level "pipes"; None: not predicted
    roofline: float | None       # level "roofline"
    reason: str | None = None    # why not predicted (None: predicted)
    detail: str = ""             # the planner's message for a refusal
    fitted: bool = False

    def _error(self, p: float | None) -> float | None:
        if p is None or self.measured is None:
            return None
        if self.metric == "step_time_s":
            return self.measured / p - 1.0
        return p / self.measured - 1.0

    @property
    def error(self) -> float | None:
        """Signed throughput error of the planner (module docstring)."""
        return self._error(self.predicted)

    @property
    def roofline_error(self) -> float | None:
        return self._error(self.roofline)


def _predicted(case: TrainingCase, plan: TrainingPlan, metric: str) -> float:
    if metric == "step_time_s":
        return plan.step_time_s
    return plan.tokens_per_s / case.gpus


def compare_case(case: TrainingCase, compared: dict[str, TrainingCase],
                 fitted_rows: frozenset[str] = frozenset()) -> TrainingComparison:
    """One row against the planner and the roofline (or the reason it is not predicted)."""
    reason = why_not(case, compared)
    metric, measured = case.metric, case.value
    if reason is None and case.metric in FLOP_METRICS:
        metric, measured = "tokens_per_s_per_gpu", case.tokens_per_s_per_gpu_from_flops()
    if reason is not None:
        return TrainingComparison(case, metric, None, None, None, reason,
                                  fitted=case.id in fitted_rows)
    plans = {lv: plan_case(case, lv) for lv in LEVELS}
    refused = next((p for p in plans.values() if isinstance(p, str)), None)
    if refused is not None:
        return TrainingComparison(case, metric, measured, None, None, refusal_reason(refused),
                                  refused, fitted=case.id in fitted_rows)
    return TrainingComparison(case, metric, measured, _predicted(case, plans["pipes"], metric),
                              _predicted(case, plans["roofline"], metric),
                              fitted=case.id in fitted_rows)


def training_fitted_rows(cases: Iterable[TrainingCase]) -> frozenset[str]:
    """Training rows a fitted constant was fitted on (its `fitted_on` in perfmodel/fitted.yaml:
    training.sm_clock_fraction), with the other rows of their configurations: a step-time row
    and its configuration's tokens/s row carry the same information."""
    cases = list(cases)
    ids = {c.id for c in cases}
    named = {r for c in fitted.CONSTANTS.values() for r in c.fitted_on if r in ids}
    configs = {c.config for c in cases if c.id in named}
    return frozenset(c.id for c in cases if c.config in configs)


def cross_validated(sources: Iterable[str] | None = None,
                    progress: bool = True) -> list[dict]:
    """Leave one source out (TRAINING_CLOCK_RULE): for each source among the clock fit's rows
    (`sources`: those only), the fraction refitted on the other sources' rows and the held-out
    source's configurations judged at it, beside their in-sample errors at the fitted value.
    One dict per source: source, n, fraction, MAPE / median |error| / bias held out and in
    sample, and `errors`, the held-out signed errors."""
    from perfmodel.validation import fit
    rows = fit.training_clock_fit_rows()
    by_source: dict[str, list[TrainingCase]] = {}
    for r in rows:
        by_source.setdefault(r.source, []).append(r)
    wanted = sorted(by_source) if sources is None else list(sources)
    unknown = [s for s in wanted if s not in by_source]
    if unknown:
        raise InputError(f"sources: {unknown} have no row in the clock fit (has: "
                         f"{sorted(by_source)})")
    bar = Progress(len(wanted), "clock folds") if progress else None
    out = []
    for s in wanted:
        held = by_source[s]
        f, _ = fit.fit_training_clock(exclude=frozenset(r.id for r in held))
        out_of = [_throughput_error(r, plan_case(r, sm_clock_fraction=f)) for r in held]
        inside = [_throughput_error(r, plan_case(r)) for r in held]
        mape, med, bias = _stats(out_of)
        i_mape, i_med, i_bias = _stats(inside)
        out.append({"source": s, "n": len(held), "fraction": f, "errors": out_of, "mape": mape,
                    "median_ape": med, "bias": bias, "fitted_mape": i_mape,
                    "fitted_median_ape": i_med, "fitted_bias": i_bias})
        if bar:
            bar.update()
    return out


def _throughput_error(case: TrainingCase, plan: TrainingPlan) -> float:
    """The planner's signed throughput error on a tokens/s or step-time row (module
    docstring), as TrainingComparison reckons it."""
    return TrainingComparison(case, case.metric, case.value,
                              _predicted(case, plan, case.metric), None).error


def cross_validation_table(folds: list[dict]) -> str:
    return format_table(
        ["held-out source", "configs", "fraction without it", "MAPE", "median", "bias",
         "fitted MAPE", "fitted median", "fitted bias"],
        [[r["source"], r["n"], f"{r['fraction']:.3f}", _pct(r["mape"]), _pct(r["median_ape"]),
          _pct(r["bias"]), _pct(r["fitted_mape"]), _pct(r["fitted_median_ape"]),
          _pct(r["fitted_bias"])] for r in folds])


def run(cases: list[TrainingCase], progress: bool = True) -> list[TrainingComparison]:
    """Comparisons of every case, unpredicted ones included (with their reason)."""
    compared = throughput_rows(cases)
    fitted_rows = training_fitted_rows(cases)
    bar = Progress(len(cases), "training rows") if progress else None
    out = []
    for c in cases:
        out.append(compare_case(c, compared, fitted_rows))
        if bar:
            bar.update()
    return out


# ---------------------------------------------------------------------------------------------
# Tables

GROUP_KEYS: dict[str, Callable[[TrainingCase], str]] = {
    "source": lambda c: c.source,
    "hardware": lambda c: c.hw,
    "model": lambda c: c.model,
    "parallelism": lambda c: c.parallelism,
    "metric": lambda c: c.metric,
    "recipe": lambda c: c.recipe,
    "model_type": lambda c: "MoE" if load_model(c.model).is_moe else "dense",
}


def _stats(errors: list[float]) -> tuple[float | None, float | None, float | None]:
    """(MAPE, median |error|, bias) of signed errors."""
    if not errors:
        return None, None, None
    ape = [abs(e) for e in errors]
    return sum(ape) / len(ape), median(ape), sum(errors) / len(errors)


def one_per_configuration(comparisons: Iterable[TrainingComparison]) -> list[TrainingComparison]:
    """The predicted comparisons with one per configuration (its tokens/s row, else its
    step-time row): a configuration's step-time and tokens/s rows carry the same throughput
    error up to the published rounding, so counting both would weight the sources that print
    both (dgxc-benchmarking, AutoModel) twice."""
    best: dict[str, TrainingComparison] = {}
    for c in comparisons:
        if c.error is None:
            continue
        kept = best.get(c.case.config)
        if kept is None or (c.metric == "tokens_per_s_per_gpu" != kept.metric):
            best[c.case.config] = c
    return list(best.values())


def summarize(comparisons: list[TrainingComparison],
              by: str | tuple[str, ...] = "source") -> list[dict]:
    """One row per group × judged|fitted: n_rows (predicted rows), n (configurations, one
    comparison each: `one_per_configuration`), n_unpredicted (rows), the planner's MAPE, median
    |error| and bias over the configurations, and the roofline's on the same ones."""
    names = (by,) if isinstance(by, str) else tuple(by)
    unknown = [n for n in names if n not in GROUP_KEYS]
    if unknown:
        raise ValueError(f"unknown group keys {unknown}; known: {sorted(GROUP_KEYS)}")
    groups: dict[tuple, list[TrainingComparison]] = {}
    for cmp in comparisons:
        key = (*(GROUP_KEYS[n](cmp.case) for n in names), "fitted" if cmp.fitted else "judged")
        groups.setdefault(key, []).append(cmp)
    rows = []
    for key, cs in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0]))):
        n_rows = sum(c.error is not None for c in cs)
        done = one_per_configuration(cs)
        mape, med, bias = _stats([c.error for c in done])
        r_mape, r_med, r_bias = _stats([c.roofline_error for c in done])
        rows.append({**dict(zip(names, key[:-1])), "rows": key[-1], "n": len(done),
                     "n_rows": n_rows, "n_unpredicted": len(cs) - n_rows, "mape": mape,
                     "median_ape": med, "bias": bias, "roofline_mape": r_mape,
                     "roofline_median_ape": r_med, "roofline_bias": r_bias})
    return rows


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1%}" if x < 0 else f"{x:.1%}"


def error_table(comparisons: list[TrainingComparison], by: str | tuple[str, ...]) -> str:
    names = (by,) if isinstance(by, str) else tuple(by)
    rows = summarize(comparisons, names)
    # groups with no comparable row at all are noise in an error table
    rows = [r for r in rows if r["n"]]
    return format_table([*names, "kind", "configs", "n rows", "not pred.", "MAPE", "median",
                         "bias", "roofline MAPE", "roofline median", "roofline bias"],
                        [[*(r[n] for n in names), r["rows"], r["n"], r["n_rows"],
                          r["n_unpredicted"],
                          _pct(r["mape"]), _pct(r["median_ape"]), _pct(r["bias"]),
                          _pct(r["roofline_mape"]), _pct(r["roofline_median_ape"]),
                          _pct(r["roofline_bias"])] for r in rows])


def _fmt(metric: str, v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.3g} s" if metric == "step_time_s" else f"{v:,.0f}"


def worst_rows(comparisons: list[TrainingComparison], n: int = 10) -> list[TrainingComparison]:
    """The n configurations furthest from their measurement, by |log(predicted / measured)|
    of throughput (one comparison each)."""
    return sorted(one_per_configuration(comparisons),
                  key=lambda c: -abs(math.log1p(c.error)))[:n]


def _replayed_label(case: TrainingCase, plan: TrainingPlan) -> str:
    """The recomputation a row was replayed with: the plan's, with its modules where the
    choice named them (BRIDGE_RECOMPUTE)."""
    for choice in replayed_recompute(case):
        if recompute_choice(choice)[0] == plan.recompute:
            return choice
    return plan.recompute


def worst_table(comparisons: list[TrainingComparison], n: int = 10) -> str:
    rows = []
    for c in worst_rows(comparisons, n):
        k = c.case
        plan = plan_case(k)
        # an unstated recomputation shows the one replayed (replayed_recompute)
        rc = k.recompute or ("n/s" + (f"->{_replayed_label(k, plan)}"
                                      if not isinstance(plan, str) else ""))
        layout = (f"tp{k.tp} pp{k.pp} vp{k.vp} ep{k.ep} dp{k.dp} mbs{k.micro_batch} "
                  f"mb{k.microbatches} {k.sharding} rc={rc}")
        rows.append([k.id, k.model, k.hw, k.recipe, k.seq, layout, _fmt(c.metric, c.measured),
                     _fmt(c.metric, c.predicted), _pct(c.error), _pct(c.roofline_error)])
    return format_table(["row", "model", "GPU", "recipe", "seq", "layout", "measured",
                         "predicted", "error", "roofline error"], rows)


def reasons_table(comparisons: list[TrainingComparison]) -> str:
    n: dict[str, list[str]] = {}
    for c in comparisons:
        if c.reason is not None:
            n.setdefault(c.reason, []).append(c.case.source)
    rows = []
    for reason, sources in sorted(n.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        counts: dict[str, int] = {}
        for s in sources:
            counts[s] = counts.get(s, 0) + 1
        rows.append([reason, len(sources), ", ".join(f"{s} {k}" for s, k in sorted(
            counts.items(), key=lambda kv: (-kv[1], kv[0])))])
    return format_table(["reason", "rows", "sources"], rows)


def memory_table(comparisons: list[TrainingComparison]) -> str:
    """The rows refused for memory, with the planner's estimate (one line per configuration)."""
    rows, seen = [], set()
    for c in comparisons:
        if c.reason == NOT_FIT and c.case.config not in seen:
            seen.add(c.case.config)
            rows.append([c.case.config, c.case.model, c.case.hw, c.case.parallelism,
                         c.detail.rsplit(": ", 1)[-1].split("; shard more")[0]])
    return format_table(["configuration", "model", "GPU", "layout", "plan_training memory"], rows)


def report(comparisons: list[TrainingComparison], skipped: int = 0,
           folds: list[dict] | None = None) -> str:
    done = [c for c in comparisons if c.error is not None]
    configs = one_per_configuration(done)
    n_fitted = len(one_per_configuration(c for c in done if c.fitted))
    out = [f"Published training rows replayed on plan_training (level pipes) beside the roofline: "
           f"{len(done)} rows of {len(configs)} configurations predicted, "
           f"{len(comparisons) - len(done)} expressible rows not predicted, {skipped} rows "
           f"skipped as inexpressible (python -m perfmodel.validation.training). One constant "
           f"is fitted on training rows, training.sm_clock_fraction = "
           f"{fitted.value('training.sm_clock_fraction'):g} (perfmodel/fitted.yaml), on the "
           f"{n_fitted} Megatron-Core configurations: their rows are 'fitted', the PyTorch "
           f"frameworks' 'judged'.",
           "error = predicted/measured - 1 of throughput (a step-time row: measured/predicted "
           "- 1); + is faster than the run. Statistics count each configuration once (its "
           "tokens/s row, else its step-time row).\n"]
    for g in ("source", ("source", "hardware"), "hardware", "model", "parallelism", "recipe"):
        out.append(error_table(comparisons, g))
        out.append("")
    if folds:
        out.append("the fitted rows cross-validated: each Megatron-Core source judged with the "
                   "clock fraction refitted without it")
        out.append(cross_validation_table(folds))
        judged = [c.error for c in configs if not c.fitted]
        held = [e for r in folds for e in r.get("errors", ())]
        mape, med, bias = _stats(judged + held)
        out.append(f"every configuration judged (the Megatron-Core sources held out of the fit, "
                   f"the others never in it): {len(judged) + len(held)} configurations, MAPE "
                   f"{_pct(mape)}, median {_pct(med)}, bias {_pct(bias)}")
        out.append("")
    out.append("10 configurations furthest from their measurement")
    out.append(worst_table(comparisons))
    out.append("\nexpressible rows not predicted, by reason")
    out.append(reasons_table(comparisons))
    if any(c.reason == NOT_FIT for c in comparisons):
        out.append("\nconfigurations refused for memory (these runs happened: the estimate is "
                   "above what the frameworks need)")
        out.append(memory_table(comparisons))
    return "\n".join(out)


def bridge_report(comparisons: list[TrainingComparison], skipped: int = 0) -> str:
    """The Megatron-Bridge rows (judged only): errors by GPU and dense/MoE, the furthest
    configurations and the rows not predicted with their reasons."""
    done = [c for c in comparisons if c.error is not None]
    return "\n".join([
        f"Megatron-Bridge rows (validate/data/training_megatron_bridge.csv, judged only): "
        f"{len(done)} rows of {len(one_per_configuration(done))} configurations predicted, "
        f"{len(comparisons) - len(done)} expressible rows not predicted, {skipped} skipped as "
        f"inexpressible", "", error_table(comparisons, ("hardware", "model_type")), "",
        error_table(comparisons, ("hardware", "model")), "",
        "configurations furthest from their measurement", worst_table(comparisons), "",
        "expressible rows not predicted, by reason", reasons_table(comparisons)])


def main(argv: list[str] | None = None) -> None:
    import sys
    args = sys.argv[1:] if argv is None else argv
    bridge, bridge_skipped = load_bridge_cases()
    if "--bridge" not in args:
        cases, skipped = load_training_cases()
        print(report(run(cases), len(skipped), cross_validated()))
        print()
    print(bridge_report(run(bridge), len(bridge_skipped)))


if __name__ == "__main__":
    main()
