"""Published end-to-end training throughputs as validation cases.

    python -m perfmodel.validation.training

Rows: validate/data/training_measurements.csv, conventions in validate/data/training_SOURCES.md
(NeMo documentation and NeMo-Framework user guide, Megatron-LM, NeMo AutoModel,
dgxc-benchmarking, torchao/torchtitan, llm-foundry, nanotron); and, apart,
validate/data/training_megatron_bridge.csv (BRIDGE_CSV: Megatron-Bridge's performance summaries,
id prefix MBR), which `load_bridge_cases` reads by the same rules and which is replayed and judged
only (no fitted constant reads it: `load_training_cases()` reads the first file alone). Every row becomes either a
`TrainingCase`, which names the perfmodel hardware and model, the recipe, the full layout
(GPUs, TP, PP, VP, CP, EP, DP, micro-batch, global batch, sequence length, recompute, sharding)
and one metric in SI units, or a `Skipped` with the reason. No row is dropped silently; a row the
reader cannot parse at all (a missing column, a non-numeric value or count, a repeated id) is an
InputError naming the file, the CSV line and the problem.

Normalisation rules (each guess a rule makes is written into the case's `assumptions`):
- hardware: "A100 (80GB)" is A100-SXM, "A100 (40GB)" A100-SXM-40GB (llm-foundry's clusters;
  the SXM4 form an assumption, as for the 80 GB part) and every H100 is H100-SXM (the sources are
  DGX/HGX systems); the power-limited B200 of torchao's MXFP8 table is not the
  B200 spec (its clocks under the unstated limit are unknown). A GPU the collector inferred
  (nanotron, Megatron-LM's Llama table) says so.
- model: Llama 3 and 3.1 share an architecture (llama3-8b/70b/405b, also written LLAMA3.1_405B);
  "Qwen3 MoE 30B" and Qwen3_30B_a3B are Qwen3-30B-A3B, Qwen3_235B_a22B is Qwen3-235B-A22B;
  DeepSeek-V3 (DeepSeekV3) is deepseek-v3, but not its runs with the MTP layer (not in the model
  file); a MoE run that drops tokens ("tokendrop") runs Megatron-Bridge's apply_moe_token_drop
  with its defaults, capacity factor 1.0 with padding (TOKEN_DROP_CAPACITY, plan_training's
  moe_capacity_factor); Llama-2, Mixtral, Nemotron-4 15B/340B and MPT-30B
  have model files, and so do llm-foundry's benchmark MPT sizes (mpt-125m ... mpt-70b: its
  pretrain yamls, which the NumParams column pins), NeMo's GPT-3 5B/20B/175B (gpt3-*),
  Nemotron 8B/22B (NeMo's Nemotron3Config, nemotron3-8b/22b) and Llama 4 Scout (NeMo's
  Llama4Experts16Config, llama4-scout: its chunked attention is the causal one at the rows'
  8192 tokens), Megatron-LM's GPT weak-scaling family 1.7B ... 462B (megatron-gpt-*: the
  layers, width, heads and vocabulary its rows state, Megatron-LM's defaults for the rest) and
  GPT-OSS 20B/120B (the serving files gpt-oss-20b/120b; AutoModel's rows print no EP though
  their notes name DeepEP, so they are refused for it). Llama 4 Maverick
  (dense and MoE layers alternate: the format's `dense_layers` are the first ones only),
  Nemotron-3 Nano/Super/Ultra, Kimi K2 and nanotron's Llama-style sizes do not
  (`NO_MODEL_FILE`): no source in the repository states Kimi K2's or the nanotron sizes'
  dimensions. A layer count in the notes, and a layer count, width, head count or vocabulary
  in the model column, must match the model file's.
- recipe: bf16; fp8 with the scaling the row states (delayed, current — Megatron-Bridge's
  FP8-CS —, tensorwise, rowwise, blockwise), plain `fp8` where it states none; mxfp8 (FP8-MX);
  nvfp4. `dtype` is the planner's GEMM
  policy for it (every per-tensor or per-row FP8 recipe → fp8; blockwise FP8 has no whole-model
  policy: None).
- parallelism: VP "n/a"/"-" is 1 (no interleaving), and so is any VP with PP = 1; CP, EP "n/a"
  or "-" are 1. DP comes from `dp_or_fsdp` (NVIDIA's tables print none: the collector's
  gpus/(tp·pp·cp)); GPUs must equal tp·pp·cp·dp (EP is carved out of DP).
- sharding (`zero`, the ZeRO stage whose memory and traffic the planner models): FSDP
  FULL_SHARD and FSDP2 are stage 3, SHARD_GRAD_OP stage 2, nanotron's ZeRO-N stage N, Megatron's
  distributed optimizer stage 1 — also where an NVIDIA table prints no flag, since it is the
  NeMo recipes' default (an assumption, `sharding_stated` False); Megatron-Bridge's FSDP column
  above 0 (the Megatron-FSDP sharding group) is stage 3.
- batch: `microbatches` per step and replica = global batch / (dp · micro-batch); a GA, LBS or
  token count in the notes must agree.
- metric and value: tokens/s/GPU (an all-GPU rate is divided by the GPUs), step time in seconds,
  model FLOP/s per GPU and FLOP/s per GPU (TFLOP/s × 1e12), MFU as a fraction, peak memory in
  bytes (GB = 1e9). `flop_convention` is the FLOP count the row states for its TFLOP/s or MFU
  (only llm-foundry's rows state one); None where the source does not say, as NeMo's and
  dgxc-benchmarking's tables do not.
- skipped besides hardware and model: fine-tuning rows (packed SFT sequences), and rows whose
  sequence length, precision, micro-batch, VP (with PP > 1) or CP is not stated, or whose batch or
  GPU counts do not add up.
"""
from __future__ import annotations

import csv
import functools
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from perfmodel.errors import InputError
from perfmodel.hardware import Hardware, hardware
from perfmodel.report.tables import format_table
from perfmodel.workloads.models import ModelSpec, list_models, load_model

from perfmodel.validation.measurements import DATA_DIR
from perfmodel.validation.serving import first_rule

TRAINING_CSV = DATA_DIR / "training_measurements.csv"
# Megatron-Bridge's performance summaries (validate/data/training_SOURCES.md "MBR"): judged only
BRIDGE_CSV = DATA_DIR / "training_megatron_bridge.csv"
COLUMNS = ("id", "hardware", "gpus", "framework_version", "model", "params", "seq_len",
           "global_batch", "micro_batch", "tp", "pp", "vp", "cp", "ep", "dp_or_fsdp",
           "precision", "recompute", "metric", "value", "unit", "source", "notes")

# id prefix → the framework that produced the numbers (dgxc-benchmarking runs NeMo recipes)
SOURCES = {"NEMO2407": "NeMo", "NEMO": "NeMo", "NEMOFW": "NeMo", "MLM": "Megatron-LM",
           "DGXC": "NeMo", "AM": "NeMo AutoModel", "AO": "torchtitan", "LF": "llm-foundry",
           "NT": "nanotron", "MBR": "Megatron-Bridge"}

# Normalised metrics, SI: tokens/s per GPU, seconds per optimizer step, FLOP/s per GPU (model
# FLOPs as the framework counts them; `flop_per_s_per_gpu` where the source does not say which
# FLOPs), MFU as a fraction of the peak, bytes.
METRICS = ("tokens_per_s_per_gpu", "step_time_s", "model_flop_per_s_per_gpu",
           "flop_per_s_per_gpu", "mfu", "peak_memory_bytes")
FLOP_METRICS = ("model_flop_per_s_per_gpu", "flop_per_s_per_gpu", "mfu")
# (published metric, lower-cased unit) → (metric, factor to SI); factor None: ÷ GPUs
_METRIC_UNITS = {
    ("tokens_per_s_per_gpu", "tokens/s/gpu"): ("tokens_per_s_per_gpu", 1.0),
    ("tokens_per_s_total", "tokens/s (all gpus)"): ("tokens_per_s_per_gpu", None),
    ("step_time_s", "s/step"): ("step_time_s", 1.0),
    ("step_time_s", "s/global step"): ("step_time_s", 1.0),
    ("model_tflops_per_gpu", "tflop/s/gpu (model flops)"): ("model_flop_per_s_per_gpu", 1e12),
    ("model_tflops_per_gpu", "tflop/s/gpu"): ("model_flop_per_s_per_gpu", 1e12),
    ("tflops_per_gpu", "tflop/s/gpu"): ("flop_per_s_per_gpu", 1e12),
    ("mfu", "%"): ("mfu", 0.01),
    ("peak_memory_gb", "gb"): ("peak_memory_bytes", 1e9),
    ("peak_memory_gb", "gb (as published)"): ("peak_memory_bytes", 1e9),
}

RECIPES = ("bf16", "fp8", "fp8_delayed", "fp8_current", "fp8_tensorwise", "fp8_rowwise",
           "fp8_blockwise", "mxfp8", "nvfp4")
# recipe → the planner's whole-model GEMM policy (perfmodel.units.GEMM_DTYPES); blockwise FP8
# exists only per linear layer (units.LINEAR_RECIPES "fp8_block"), not as a model policy
PLANNER_DTYPE = {"bf16": "bf16", "fp8": "fp8", "fp8_delayed": "fp8", "fp8_current": "fp8",
                 "fp8_tensorwise": "fp8", "fp8_rowwise": "fp8", "fp8_blockwise": None,
                 "mxfp8": "mxfp8", "nvfp4": "nvfp4"}
RECOMPUTE = ("none", "selective", "op", "full")
# a token-drop run's expert capacity factor, padded: Megatron-Bridge's apply_moe_token_drop
# defaults (megatron-bridge 0.3.0 training/utils/moe_token_drop.py: moe_expert_capacity_factor
# 1.0, moe_pad_expert_input_to_capacity True)
TOKEN_DROP_CAPACITY = 1.0
SHARDING = ("distributed-optimizer", "zero", "fsdp", "fsdp-full-shard", "fsdp-shard-grad-op",
            "fsdp2")

# llm-foundry's MFU (mosaicml/llm-foundry:scripts/train/benchmarking/README.md): 3·(2·N·s +
# 4·L·d·s²) FLOP per sequence of s tokens, N the NumParams column, L layers of width d;
# activation recomputation is not counted; the peak is the dense BF16 one (FP8 rows: the dense
# FP8 one)
LF_FLOP_CONVENTION = ("llm-foundry: 6·N + 12·L·d·s FLOP per token (N = NumParams column), no "
                      "recomputation counted; MFU against the dense peak of the GEMM dtype")


# ---------------------------------------------------------------------------------------------
# Cases


@dataclass(frozen=True)
class TrainingCase:
    id: str
    config: str                      # id up to its last '-': the rows of one configuration
    source: str                      # id prefix (SOURCES)
    framework: str
    framework_version: str
    hardware: Hardware
    model: str                       # built-in model name
    recipe: str                      # RECIPES
    dtype: str | None                # the planner's GEMM policy (PLANNER_DTYPE)
    gpus: int
    tp: int
    pp: int
    vp: int                          # virtual pipeline stages (model chunks per GPU)
    cp: int
    ep: int
    dp: int                          # data-parallel (or FSDP sharding) degree
    micro_batch: int                 # sequences per microbatch
    global_batch: int                # sequences per optimizer step
    seq: int                         # tokens per sequence
    recompute: str | None            # RECOMPUTE; None: not stated
    sharding: str                    # SHARDING
    zero: int                        # ZeRO stage equivalent of `sharding`
    sharding_stated: bool
    metric: str                      # METRICS
    value: float                     # SI
    published_metric: str
    published_value: str
    unit: str
    expert_tp: int | None = None     # Megatron's ETP where stated
    flop_convention: str | None = None
    params_stated: float | None = None  # llm-foundry's NumParams (its MFU's N)
    precision_note: str = ""
    assumptions: tuple[str, ...] = ()
    line: int = 0                    # CSV line (header = 1)
    raw: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False, repr=False)
    moe_capacity_factor: float | None = None  # a token-drop run's (TOKEN_DROP_CAPACITY)

    @property
    def hw(self) -> str:
        return self.hardware.name

    @property
    def batch_per_replica(self) -> int:
        """Sequences one data-parallel replica processes per step (plan_training's `batch`)."""
        return self.global_batch // self.dp

    @property
    def microbatches(self) -> int:
        """Microbatches per step and replica: pipeline microbatches, or the gradient
        accumulation steps without pipeline parallelism."""
        return self.batch_per_replica // self.micro_batch

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq

    @property
    def parallelism(self) -> str:
        """The kind of layout: the model-parallel dimensions in use, then the data-parallel
        flavour (DP, ZeRO-2 or FSDP), e.g. 'TP+PP+VP+DP', 'FSDP', 'EP+FSDP'."""
        parts = [k for k, on in (("TP", self.tp > 1), ("PP", self.pp > 1), ("VP", self.vp > 1),
                                 ("CP", self.cp > 1), ("EP", self.ep > 1)) if on]
        if self.dp > 1 or not parts:
            parts.append("FSDP" if self.zero == 3 else "ZeRO-2" if self.zero == 2 else "DP")
        return "+".join(parts)

    def flop_per_token(self) -> float | None:
        """FLOP per token of the row's stated convention (llm-foundry's 6·N + 12·L·d·s with
        its NumParams as N and the model file's L and d), None where no convention is stated."""
        if self.flop_convention != LF_FLOP_CONVENTION or self.params_stated is None:
            return None
        m = _model(self.model)
        return 6 * self.params_stated + 12 * m.layers * m.hidden * self.seq

    def tokens_per_s_per_gpu_from_flops(self) -> float | None:
        """The throughput a TFLOP/s or MFU row implies under its stated FLOP convention (MFU
        against the spec's dense peak of the GEMM dtype); None without a convention."""
        per_token = self.flop_per_token()
        if per_token is None or self.metric not in FLOP_METRICS:
            return None
        if self.metric == "mfu":
            peak = self.hardware.tensor_peak_flop_per_s(self.dtype or "bf16")
            return self.value * peak / per_token
        return self.value / per_token


@dataclass(frozen=True)
class Skipped:
    id: str
    reason: str
    source: str = ""
    hardware: str = ""               # the spec's name, or a short label of the source's GPU
    model: str = ""                  # the built-in name, or a short label of the source's model
    reasons: tuple[str, ...] = ()    # every check the row failed, `reason` first
    config: str = ""


# ---------------------------------------------------------------------------------------------
# Field rules

# (pattern on the lower-cased hardware text, spec name or None, label)
_HARDWARE_RULES = (
    (r"a100.*40\s*gb", "A100-SXM-40GB", "A100 40GB"),
    (r"a100", "A100-SXM", "A100 80GB"),
    (r"b200.*power limited", None, "B200 power-limited"),
    (r"gb200", "GB200", "GB200"),
    (r"b200", "B200", "B200"),
    (r"h100", "H100-SXM", "H100"),
)

# (pattern on the lower-cased model text, built-in model or None, label)
_MODEL_RULES = (
    # llm-foundry's benchmark sizes (models/mpt-*.yaml); mpt-30b is the released model's file
    (r"^mpt-(125m|350m|760m|1b|3b|7b|13b|30b|70b)$", "mpt-{0}", "MPT-{0}"),
    (r"^mpt-(\w+)$", None, "MPT-{0}"),
    (r"llama ?2-(7|13|70)b", "llama2-{0}b", "Llama-2-{0}B"),
    (r"llama[ -]?3(?:\.1)?[ _-](8|70|405)b", "llama3-{0}b", "Llama-3-{0}B"),
    (r"nemotron(?:-4)?[ -](15|340)b", "nemotron4-{0}b", "Nemotron-4-{0}B"),
    (r"nemotron-(8|22)b", "nemotron3-{0}b", "Nemotron-{0}B"),   # NeMo's Nemotron3Config
    (r"nemotron(?: v|_)3[ _](\w+)", None, "Nemotron-3 {0}"),
    (r"mixtral-8x(7|22)b", "mixtral-8x{0}b", "Mixtral-8x{0}B"),
    (r"deepseek[- ]?v3", "deepseek-v3", "DeepSeek-V3"),
    (r"qwen3 moe 30b|qwen3_30b_a3b", "qwen3-30b-a3b", "Qwen3-30B-A3B"),
    (r"qwen3_235b_a22b", "qwen3-235b-a22b", "Qwen3-235B-A22B"),
    (r"gpt[- ]oss (20|120)b", "gpt-oss-{0}b", "GPT-OSS-{0}B"),
    (r"gpt3-(5|20|175)b", "gpt3-{0}b", "GPT-3 {0}B"),             # NeMo's GPTConfig sizes
    (r"gpt3-(\d+)b", None, "GPT-3 {0}B"),
    (r"llama ?4[ -]scout", "llama4-scout", "Llama-4 Scout"),
    (r"llama ?4[ -](maverick)", None, "Llama-4 {0}"),
    (r"kimi k2", None, "Kimi K2"),
    # Megatron-LM's README weak-scaling table (models/megatron-gpt-*.yaml: the sizes its rows state)
    (r"megatron-lm weak-scaling family\) (1\.7b|7\.1b|16b|32b|70b|119b|177b|314b|462b)\b",
     "megatron-gpt-{0}", "Megatron-LM GPT {0}"),
    (r"megatron-lm weak-scaling family\) ([\d.]+b)", None, "Megatron-LM GPT {0}"),
    (r"llama-style dense model, ([\d.]+b)", None, "nanotron Llama-style {0}"),
)
NO_MODEL_FILE = ("Nemotron-3", "Llama-4 Maverick", "Kimi K2", "nanotron Llama-style")


@functools.lru_cache(maxsize=None)
def _model(name: str) -> ModelSpec:
    return load_model(name)


@functools.lru_cache(maxsize=None)
def _builtin_models() -> frozenset[str]:
    return frozenset(list_models())


def resolve_hardware(text: str) -> tuple[str | None, str]:
    """(spec name or None, short label) for a row's hardware text."""
    return first_rule(text, _HARDWARE_RULES)


def resolve_model(text: str) -> tuple[str | None, str]:
    """(built-in model name or None, short label) for a row's model text."""
    t = text.lower().strip()
    for pattern, model, label in _MODEL_RULES:
        m = re.search(pattern, t)
        if m:
            groups = [g.upper() if re.fullmatch(r"[\d.]+[bm]", g) else
                      g.capitalize() if g.isalpha() else g for g in m.groups()]
            # built-in names are lower case (models/*.yaml): 'mpt-{0}' of '125M' is mpt-125m
            return (model.format(*groups).lower() if model else None), label.format(*groups)
    return None, re.sub(r"\s*\(.*?\)", "", text).split(":")[0].strip() or text


# Sizes a model column states ("GPT (...) 1.7B: 24 layers, hidden 2048, 16 heads, vocab
# 131072", "Llama 3.1 405B (126 layers)") → the ModelSpec field each must equal
_MODEL_TEXT_SIZES = ((r"\b(\d+) layers\b", "layers"), (r"\bhidden (\d+)\b", "hidden"),
                     (r"\b(\d+) heads\b", "heads"), (r"\bvocab (\d+)\b", "vocab"))


def model_text_conflicts(text: str, model: str) -> list[str]:
    """A skip reason for each size the row's model column states that differs from the
    model file's: the file must be the model the row ran, not one of the same name."""
    spec = _model(model)
    out = []
    for pattern, key in _MODEL_TEXT_SIZES:
        m = re.search(pattern, text)
        if m and int(m.group(1)) != getattr(spec, key):
            out.append(f"model: the model column's {key} {m.group(1)} differs from {model}'s "
                       f"{getattr(spec, key)}")
    return out


def recipe_of(text: str) -> tuple[str | None, str]:
    """(recipe or None, precision note) for a precision text; None: not stated or not
    recognised."""
    t = text.lower().strip()
    if not t or t.startswith("not stated"):
        return None, text
    if "mxfp8" in t or "fp8-mx" in t:
        return "mxfp8", text
    if "nvfp4" in t:
        return "nvfp4", text
    if "fp8" in t:
        for key, recipe in (("current scaling", "fp8_current"), ("fp8-cs", "fp8_current"),
                            ("delayed", "fp8_delayed"),
                            ("tensorwise", "fp8_tensorwise"), ("rowwise", "fp8_rowwise"),
                            ("block", "fp8_blockwise")):
            if key in t:
                return recipe, text
        return "fp8", text
    if t.startswith("bf16"):
        return "bf16", text
    return None, text


def recompute_of(text: str) -> str | None:
    """RECOMPUTE value of a recompute text, None where not stated. torchtitan's per-op
    selective activation checkpointing (SAC) saves the matmul outputs except every second one
    and recomputes the rest (torchtitan/distributed/activation_checkpoint.py): "op"; its
    layer-wise SAC and Megatron's selective recomputation (the attention core): "selective"."""
    t = text.lower().strip()
    if t.startswith("not stated") or not t:
        return None
    if t.startswith("full"):
        return "full"
    if "per-op" in t or "op sac" in t:
        return "op"
    if "sac" in t or "selective" in t:
        return "selective"
    if t == "none":
        return "none"
    return None


def sharding_of(text: str) -> tuple[str, int, bool]:
    """(sharding, ZeRO stage, stated) for a dp_or_fsdp text."""
    t = text.strip()
    m = re.search(r"ZeRO-(\d)", t)
    if m:
        return "zero", int(m.group(1)), True
    if "SHARD_GRAD_OP" in t:
        return "fsdp-shard-grad-op", 2, True
    if "FULL_SHARD" in t:
        return "fsdp-full-shard", 3, True
    if re.fullmatch(r"FSDP2?=\d+", t):
        return "fsdp2", 3, True            # torchtitan / AutoModel: the text is the FSDP degree
    if re.search(r"\bFSDP=1\b", t):
        return "fsdp", 3, True             # NeMo's FSDP flag on (parameters sharded too)
    if "distributed optimizer" in t:
        return "distributed-optimizer", 1, True
    m = re.search(r"FSDP column=(\d+)", t)       # Megatron-Bridge: 0 = DDP, N > 0 = FSDP group
    if m and int(m.group(1)) > 0:
        return "fsdp", 3, True
    # NVIDIA tables without a flag (or FSDP=0): Megatron's distributed optimizer, NeMo's default
    return "distributed-optimizer", 1, False


def dp_of(text: str) -> int | None:
    """The data-parallel (or FSDP) degree a dp_or_fsdp text states."""
    for pattern in (r"\bdp=(\d+)", r"over (\d+) GPUs", r"FSDP2?=(\d+)"):
        m = re.search(pattern, text)
        if m:
            return int(m.group(1))
    return None


_LEADING = re.compile(r"^(\d+)(?:\s*\((.*)\))?$")


class _Row:
    """One CSV row with its line number, for error messages and strict field reading."""

    def __init__(self, path: Path, line: int, raw: dict):
        self.path, self.line, self.raw = path, line, raw
        self.id = raw.get("id") or ""

    def error(self, column: str, problem: str) -> InputError:
        who = f" ({self.id})" if self.id else ""
        return InputError(f"{self.path.name}: row {self.line}{who}: {column}: {problem}")

    def text(self, column: str) -> str:
        v = self.raw.get(column)
        if v is None:
            raise self.error(column, "missing (the row has fewer cells than the header)")
        return v.strip()

    def integer(self, column: str) -> int:
        t = self.text(column)
        if not t.isdigit() or int(t) < 1:
            raise self.error(column, f"expected a positive integer, got '{t}'")
        return int(t)

    def count(self, column: str, absent: int | None) -> tuple[int | None, str]:
        """A parallel degree or batch count: an integer, an integer with a parenthesised note
        (kept as an assumption), `absent` for "n/a" / "-", or None when not stated."""
        t = self.text(column)
        if t in ("n/a", "-"):
            return absent, ""
        if t.lower().startswith("not stated"):
            return None, ""
        m = _LEADING.match(t)
        if not m or int(m.group(1)) < 1:
            raise self.error(column, f"expected a positive integer, 'n/a', '-' or 'not stated', "
                                     f"got '{t}'")
        return int(m.group(1)), (f"{column}: {m.group(1)} ('{t}')" if m.group(2) else "")

    def number(self, column: str) -> float:
        t = self.text(column)
        try:
            v = float(t)
        except ValueError:
            raise self.error(column, f"expected a number, got '{t}'") from None
        if not v > 0:
            raise self.error(column, f"expected a positive number, got '{t}'")
        return v


def _note_int(notes: str, *keys: str) -> int | None:
    for k in keys:
        m = re.search(rf"\b{k}=(\d+)\b", notes)
        if m:
            return int(m.group(1))
    return None


def _source_assumptions(source: str, notes: str, metric: str) -> list[str]:
    out = []
    if source == "AO" and metric == "tokens_per_s_per_gpu":
        out.append("value: torchtitan's 'median tokens/second' read as per GPU")
    if source == "AM":
        out.append("AutoModel: mock data and a fake balanced MoE gate (the planner's balanced "
                   "routing)")
    if source == "MLM" and "mirror a NeMo" in notes:
        out.append("Megatron-LM Llama table: numbers probably repeat a NeMo release")
    if source == "MBR" and "'a (b)' cell" in notes:
        out.append("Megatron-Bridge 25.09/25.11: a cell printed 'a (b)', the two parts another "
                   "quantization granularity; the row holds the part its notes name")
    if "'a (b)' alternatives" in notes:
        out.append("NeMo 25.07: of the page's 'a (b)' alternatives only the first is recorded")
    if "swapped" in notes:
        out.append("batch: the published GBS/MBS cells read swapped; GBS 64, MBS 1 from GA")
    if "GPU count conflict" in notes:
        out.append("gpus: the earlier revision's count, which matches tp·pp·cp·dp")
    if source == "DGXC" and "last logged step" in notes:
        out.append("step time: the last logged step, not a mean")
    return out


def _case(row: _Row) -> TrainingCase | Skipped:
    r = row.raw
    rid = row.id
    prefix = rid.split("-")[0]
    if prefix not in SOURCES:
        raise row.error("id", f"unknown source prefix '{prefix}' (known: {', '.join(SOURCES)})")
    config = rid.rsplit("-", 1)[0]
    notes = row.text("notes")
    gpus = row.integer("gpus")
    tp, pp = row.integer("tp"), row.integer("pp")
    value_text = row.text("value")
    value = row.number("value")
    assumptions: list[str] = []
    reasons: list[str] = []

    if "task=SFT" in notes:
        reasons.append("fine-tuning (SFT) on packed sequences: per-document attention, not a "
                       "pretraining step")
    spec, hw_label = resolve_hardware(row.text("hardware"))
    if spec is None:
        reasons.append(f"no hardware spec: {hw_label}")
    elif "inferred" in row.text("hardware"):
        assumptions.append(f"hardware: {row.text('hardware')}")
    elif "sxm" not in row.text("hardware").lower() and "SXM" in spec:
        assumptions.append(f"hardware: '{row.text('hardware')}' taken as {spec}")
    model, model_label = resolve_model(row.text("model"))
    if model is None:
        reasons.append(f"no model file: {model_label}")
    elif model not in _builtin_models():
        reasons.append(f"no model file: {model}")
    elif "mtp" in row.text("model").lower():
        reasons.append(f"{model} with its multi-token-prediction layer: not in the model file")
    else:
        m = re.search(r"(?:^|;\s*)(\d+) layers\b", notes)  # not "7/21/42 layers" (proxies)
        if m and int(m.group(1)) != _model(model).layers:
            reasons.append(f"model: the notes' {m.group(1)} layers differ from {model}'s "
                           f"{_model(model).layers}")
        reasons += model_text_conflicts(row.text("model"), model)
    recipe, precision_note = recipe_of(row.text("precision"))
    if recipe is None:
        reasons.append("precision not stated" if row.text("precision").lower()
                       .startswith("not stated") else
                       f"precision not recognised: '{row.text('precision')}'")
    elif recipe == "fp8":
        assumptions.append("recipe: FP8 with the scaling not stated")

    seq_text = row.text("seq_len")
    seq = int(seq_text) if seq_text.isdigit() else None
    if seq is None:
        if not seq_text.lower().startswith("not stated"):
            raise row.error("seq_len", f"expected a positive integer or 'not stated', got "
                                       f"'{seq_text}'")
        reasons.append("sequence length not stated")

    vp, a = row.count("vp", 1)
    assumptions += [a] if a else []
    if pp == 1:
        if vp not in (None, 1):
            assumptions.append(f"vp: {vp} listed with pp=1 has no effect")
        vp = 1
    elif vp is None:
        reasons.append(f"parallelism not stated (vp with pp={pp})")
    cp, a = row.count("cp", 1)
    assumptions += [a] if a else []
    if cp is None:
        if "assuming CP=1" in row.text("dp_or_fsdp"):
            cp = 1
            assumptions.append("cp: 1 assumed (the collector's dp)")
        else:
            reasons.append("parallelism not stated (cp)")
    ep, a = row.count("ep", 1)
    assumptions += [a] if a else []
    if row.text("ep") in ("n/a", "-") and "DeepEP" in notes:
        # DeepEP is an expert-parallel all-to-all: the run sharded its experts over a group the
        # table does not print (AutoModel's GPT-OSS rows), so EP 1 would be a guess
        reasons.append(f"parallelism not stated (ep: '{row.text('ep')}', but the notes name "
                       f"DeepEP, an expert-parallel all-to-all)")
    dp = dp_of(row.text("dp_or_fsdp"))
    if dp is None:
        raise row.error("dp_or_fsdp", f"no data-parallel degree in '{row.text('dp_or_fsdp')}'")
    if "inferred" in row.text("dp_or_fsdp"):
        assumptions.append("dp: gpus/(tp·pp·cp), not printed by the source")
    sharding, zero, sharding_stated = sharding_of(row.text("dp_or_fsdp"))
    if not sharding_stated:
        assumptions.append("sharding: Megatron's distributed optimizer (ZeRO-1), the NeMo "
                           "recipes' default; the table prints no flag")
    if cp is not None and tp * pp * cp * dp != gpus:
        reasons.append(f"GPU count inconsistent: gpus {gpus} != tp·pp·cp·dp = "
                       f"{tp * pp * cp * dp}")

    mbs, a = row.count("micro_batch", None)
    assumptions += [a] if a else []
    if mbs is None:
        reasons.append("micro-batch size not stated")
    gbs, a = row.count("global_batch", None)
    if gbs is None:
        raise row.error("global_batch", "expected the global batch in sequences")
    assumptions += [a] if a else []
    if mbs is not None:
        ga, lbs = _note_int(notes, "GA", "GAS", "GradAccum"), _note_int(notes, "LBS")
        if gbs % (dp * mbs):
            reasons.append(f"batch inconsistent: global batch {gbs} is not a multiple of "
                           f"dp·micro-batch = {dp * mbs}")
        elif ga is not None and gbs != dp * (lbs or mbs) * ga:
            reasons.append(f"batch inconsistent: global batch {gbs} != dp·"
                           f"{'LBS' if lbs else 'micro-batch'}·GA = {dp * (lbs or mbs) * ga}")
    tokens_stated = _note_int(notes, r"GlobalBatchSize\(T\)")
    if tokens_stated is not None and seq is not None and tokens_stated != gbs * seq:
        reasons.append(f"batch inconsistent: {tokens_stated} tokens per batch stated, "
                       f"global batch × seq = {gbs * seq}")

    recompute = recompute_of(row.text("recompute"))
    if recompute is None and not row.text("recompute").lower().startswith("not stated"):
        raise row.error("recompute", f"not understood: '{row.text('recompute')}'")

    published = row.text("metric")
    hit = _METRIC_UNITS.get((published, row.text("unit").lower()))
    metric = None
    if hit is None:
        reasons.append(f"metric not expressible: '{published}' [{row.text('unit')}]")
    else:
        metric, scale = hit
        if scale is None:
            value /= gpus
            assumptions.append(f"value: the all-GPU rate / {gpus} GPUs")
        else:
            value *= scale
    flop_convention = None
    if metric in FLOP_METRICS and "MFU formula includes attention FLOPs" in notes:
        flop_convention = LF_FLOP_CONVENTION
    params_stated = None
    m = re.match(r"(\d+) \(NumParams column\)", row.text("params"))
    if m:
        params_stated = float(m.group(1))
    if metric is not None:
        assumptions += _source_assumptions(prefix, notes, metric)
    if "float8 all-gather" in precision_note or "f8 all-gather" in precision_note:
        assumptions.append("FSDP all-gathers the weights in FP8 (the planner gathers BF16)")
    if "MP mode DEFAULT" in precision_note:
        assumptions.append("Composer FSDP mixed precision DEFAULT reduces gradients in FP32 "
                           "(the planner reduces BF16)")

    capacity = None
    if "tokendrop" in row.text("model").lower() or "token-drop" in notes:
        # the Megatron-Bridge token-drop runs: apply_moe_token_drop's defaults, capacity 1.0
        # with the experts' input padded (megatron-bridge 0.3.0
        # training/utils/moe_token_drop.py), on the all-to-all dispatcher it asserts
        capacity = TOKEN_DROP_CAPACITY
        assumptions.append(f"MoE token drop: capacity factor {TOKEN_DROP_CAPACITY:g}, padded "
                           f"(Megatron-Bridge apply_moe_token_drop's defaults; the table "
                           f"states neither)")
    if reasons:
        return Skipped(rid, reasons[0], prefix, spec or hw_label, model or model_label,
                       tuple(reasons), config)
    m = re.search(r"\bETP=(\d+)", notes)
    return TrainingCase(
        id=rid, config=config, source=prefix, framework=SOURCES[prefix],
        framework_version=row.text("framework_version"), hardware=hardware(spec), model=model,
        recipe=recipe, dtype=PLANNER_DTYPE[recipe], gpus=gpus, tp=tp, pp=pp, vp=vp, cp=cp,
        ep=ep, dp=dp, micro_batch=mbs, global_batch=gbs, seq=seq, recompute=recompute,
        sharding=sharding, zero=zero, sharding_stated=sharding_stated, metric=metric,
        value=value, published_metric=published, published_value=value_text,
        unit=row.text("unit"), expert_tp=int(m.group(1)) if m else None,
        flop_convention=flop_convention, params_stated=params_stated,
        precision_note=precision_note, assumptions=tuple(assumptions), line=row.line,
        raw=dict(r), moe_capacity_factor=capacity)


def load_bridge_cases() -> tuple[list[TrainingCase], list[Skipped]]:
    """The Megatron-Bridge rows (BRIDGE_CSV) as `load_training_cases` reads a file: judged
    only, never fitted (module docstring)."""
    return load_training_cases(BRIDGE_CSV)


def load_training_cases(path: str | Path = TRAINING_CSV) -> tuple[list[TrainingCase],
                                                                  list[Skipped]]:
    """Every row of the training CSV as a case or a skip with its reason, in file order.
    Raises InputError (file, CSV line, column, problem) for a row it cannot read."""
    path = Path(path)
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
        if missing:
            raise InputError(f"{path.name}: missing columns: {', '.join(missing)}")
        rows = [_Row(path, n, r) for n, r in enumerate(reader, start=2)]
    cases: list[TrainingCase] = []
    skipped: list[Skipped] = []
    seen: dict[str, int] = {}
    for row in rows:
        if not row.id:
            raise row.error("id", "empty")
        if row.id in seen:
            raise row.error("id", f"appears twice (also row {seen[row.id]})")
        seen[row.id] = row.line
        c = _case(row)
        (skipped if isinstance(c, Skipped) else cases).append(c)
    return cases, skipped


# ---------------------------------------------------------------------------------------------
# Summary of what is expressible


def by_source(ids_sources: list[tuple[str, str]]) -> str:
    """'LF 156, NT 52' for (id, source) pairs, most rows first."""
    n = Counter(s for _, s in ids_sources)
    return ", ".join(f"{s} {k}" for s, k in sorted(n.items(), key=lambda kv: (-kv[1], kv[0])))


def summary_table(cases: list[TrainingCase], skipped: list[Skipped]) -> str:
    """Counts per source × GPU × model of expressible rows (by metric family) and skipped rows,
    then the skipped rows by reason and the cases by metric."""
    groups: dict[tuple, Counter] = {}
    for c in cases:
        kind = ("throughput" if c.metric in ("tokens_per_s_per_gpu", "step_time_s")
                else "flop" if c.metric in FLOP_METRICS else "memory")
        groups.setdefault((c.source, c.hw, c.model), Counter())[kind] += 1
    for s in skipped:
        groups.setdefault((s.source, s.hardware, s.model), Counter())["skipped"] += 1
    order = {k: i for i, k in enumerate(SOURCES)}
    rows = []
    for (src, hw, model), n in sorted(groups.items(), key=lambda kv: (order[kv[0][0]],
                                                                        kv[0][1:])):
        rows.append([src, hw, model, n["throughput"] + n["flop"] + n["memory"], n["throughput"],
                     n["flop"], n["memory"], n["skipped"]])
    rows.append(["all", "", "", *[sum(r[i] for r in rows) for i in range(3, 8)]])
    lines = [f"training measurements: {len(cases) + len(skipped)} rows, {len(cases)} "
             f"expressible, {len(skipped)} skipped",
             format_table(["source", "GPU", "model", "cases", "tokens/s|step", "TFLOP/s|MFU",
                           "memory", "skipped"], rows)]
    by_reason: dict[str, list[tuple[str, str]]] = {}
    for s in skipped:
        by_reason.setdefault(s.reason, []).append((s.id, s.source))
    lines.append("\nskipped rows by reason (first failed check)")
    lines.append(format_table(["reason", "n", "sources"],
                              [[r, len(ids), by_source(ids)] for r, ids in
                               sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0]))]))
    metrics = Counter(c.metric for c in cases)
    lines.append("\nexpressible rows by metric")
    lines.append(format_table(["metric", "n"], sorted(metrics.items(), key=lambda kv: -kv[1])))
    return "\n".join(lines)


def main() -> None:
    cases, skipped = load_training_cases()
    print(summary_table(cases, skipped))


if __name__ == "__main__":
    main()
