"""Model files (models/*.yaml, docs/model-format.md): strict loading and parameter counts.

A ModelSpec is the architecture only. `perfmodel.workloads.builder` turns it into an op graph for
a phase, batch, lengths, dtype policy and parallelism.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from perfmodel import yamlio
from perfmodel.errors import InputError, show
from perfmodel.shipped import shipped_dir
from perfmodel.ops.base import ELEMENTS_WHY, MAX_ELEMENTS, bound_text
from perfmodel.units import FP8_BLOCK

MODEL_SCHEMA_VERSION = 1
ACTIVATIONS = ("swiglu", "gelu", "relu", "silu")
INT_KEYS = {  # key: (required, minimum)
    "hidden": (True, 1), "layers": (True, 1), "heads": (True, 1), "kv_heads": (True, 1),
    "head_dim": (True, 1), "ffn_hidden": (True, 1), "vocab": (True, 1),
    "experts": (False, 0), "top_k": (False, 0), "expert_hidden": (False, 0),
    "shared_experts": (False, 0), "dense_layers": (False, 0),
    "q_lora_rank": (False, 0), "kv_lora_rank": (False, 0), "qk_nope_head_dim": (False, 0),
    "qk_rope_head_dim": (False, 0), "v_head_dim": (False, 0),
    "expert_groups": (False, 0), "group_top_k": (False, 0), "sliding_window": (False, 0),
    "fp8_weight_block": (False, 0),
}
# Which layers a `sliding_window` applies to (`sliding_window_layers`): every layer, or those of
# even / odd index (0-based; gpt-oss: even, its config.json layer_types starting with
# "sliding_attention")
WINDOW_LAYERS = ("all", "even", "odd")
# Storage types of routed-expert weights (`expert_dtype`): the moe op's weight types
EXPERT_DTYPES = ("bf16", "fp16", "fp8", "mxfp8", "nvfp4", "mxfp4")
# Weight matrices of one layer (the keys whose product is one tensor's elements): each at most
# MAX_ELEMENTS, as every size is (perfmodel.ops.base)
MODEL_TENSORS = (("vocab", "hidden"), ("hidden", "ffn_hidden"), ("heads", "head_dim", "hidden"),
                 ("experts", "hidden", "expert_hidden"))
# Keys with a bound of their own (else MAX_ELEMENTS), and why: a step's graph holds every layer's
# ops, and an MoE op keeps arrays of one entry per expert
KEY_LIMITS = {
    "layers": (4096, "30x the deepest published LLMs (126 layers); the step's graph holds "
                     "every layer's ops"),
    "experts": (2 ** 20, "the most fine-grained MoE published (PEER: 1024^2 experts)"),
}
# The largest clamp a model file may state (`swiglu_limit`): BF16's largest finite value
MAX_SWIGLU_LIMIT = 3.3895e38
# A stated parameter count: at most 1e15 (10^3 times the largest models published, ~1e12)
MAX_PARAMS_TOTAL = 1e15


@dataclass(frozen=True)
class ModelSpec:
    name: str
    source: str
    params_total_stated: float
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn_hidden: int
    vocab: int
    activation: str = "swiglu"
    tie_embeddings: bool = False
    experts: int = 0
    top_k: int = 0
    expert_hidden: int = 0
    shared_experts: int = 0
    dense_layers: int = 0
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    # group-limited routing (DeepSeek-V3 config.json n_group, topk_group): the experts form
    # `expert_groups` groups and a token's top-k come from its best `group_top_k` groups (0:
    # not group-limited)
    expert_groups: int = 0
    group_top_k: int = 0
    # sliding-window attention (Mistral-style local attention; gpt-oss's alternating layers):
    # `sliding_window` keys per query (0: full attention everywhere) on the layers
    # `sliding_window_layers` names (WINDOW_LAYERS)
    sliding_window: int = 0
    sliding_window_layers: str = "all"
    # the routed experts' weight storage type when it differs from the run's GEMM dtype policy
    # (gpt-oss: mxfp4, its checkpoint's quantization_config); None: the policy's
    expert_dtype: str | None = None
    # the FP8 checkpoint's scaling: 0, one scale per tensor (NVIDIA's FP8 Llama checkpoints);
    # 128, FP32 scales per 128x128 weight block and 1x128 activation block (DeepSeek-V3/R1's
    # config.json quantization_config.weight_block_size [128, 128]), which an fp8 run's linears
    # and experts then take (ops.gemm / ops.moe fp8_scaling "block")
    fp8_weight_block: int = 0
    # the routed experts' linears carry biases (gpt-oss: the checkpoint's gate_up_proj_bias and
    # down_proj_bias), and the gated activation clamps its inputs at `swiglu_limit` (gpt-oss
    # config.json swiglu_limit 7.0; 0: no clamp): what the training graph prices as
    # Megatron-Core runs them (workloads.builder `_expert_extras`)
    expert_bias: bool = False
    swiglu_limit: float = 0.0
    path: str = ""

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def group_limit(self) -> tuple[int, int | None]:
        """(expert groups, groups per token) of the gate, as the moe op takes them
        (expert_groups, group_top_k); (1, None): not group-limited."""
        if not self.expert_groups:
            return 1, None
        return self.expert_groups, self.group_top_k or None

    def is_moe_layer(self, layer: int) -> bool:
        return self.is_moe and layer >= self.dense_layers

    def window(self, layer: int) -> int | None:
        """The sliding window (keys per query) of layer `layer`'s attention; None: full."""
        if not self.sliding_window:
            return None
        sel = self.sliding_window_layers
        if sel == "all" or (sel == "even") == (layer % 2 == 0):
            return self.sliding_window
        return None

    def window_layers(self, layers=None) -> int:
        """How many of `layers` (default all) attend through a sliding window."""
        layers = range(self.layers) if layers is None else layers
        return sum(self.window(i) is not None for i in layers)

    def kv_tokens(self, layer: int, context: int) -> int:
        """Tokens of a `context`-token sequence layer `layer` keeps in its KV cache: the
        window's last keys on a sliding-window layer (an engine frees the blocks behind it),
        else all of them."""
        w = self.window(layer)
        return min(context, w) if w else context

    @property
    def ffn_matrices(self) -> int:
        """Weight matrices per FFN: gate, up, down for gated activations; up, down otherwise."""
        return 3 if self.activation == "swiglu" else 2

    # ---- parameter counts (elements) -------------------------------------------------------
    def attention_params(self) -> int:
        h = self.hidden
        if self.is_mla:
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            q = (h * self.q_lora_rank + self.q_lora_rank * self.heads * qk
                 if self.q_lora_rank else h * self.heads * qk)
            kv = h * (self.kv_lora_rank + self.qk_rope_head_dim) \
                + self.kv_lora_rank * self.heads * (self.qk_nope_head_dim + self.v_head_dim)
            return q + kv + self.heads * self.v_head_dim * h
        return h * (self.heads + 2 * self.kv_heads) * self.head_dim + self.heads * self.head_dim * h

    def ffn_params(self, layer: int, active: bool = False) -> int:
        h = self.hidden
        if not self.is_moe_layer(layer):
            return self.ffn_matrices * h * self.ffn_hidden
        experts = self.top_k if active else self.experts
        per_expert = self.ffn_matrices * h * self.expert_hidden
        return (experts + self.shared_experts) * per_expert + h * self.experts  # + router

    def params(self, active: bool = False) -> int:
        """Total (or per-token activated) parameters, embeddings and LM head included."""
        emb = self.vocab * self.hidden * (1 if self.tie_embeddings else 2)
        layers = sum(self.attention_params() + self.ffn_params(i, active)
                     for i in range(self.layers))
        return emb + layers

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "path"}


def builtin_model_dir() -> Path:
    return shipped_dir("models", "models")


def list_models() -> list[str]:
    return sorted(p.stem for p in builtin_model_dir().glob("*.yaml"))


def is_model_file(raw: Any) -> bool:
    return isinstance(raw, dict) and "layers" in raw and "ops" not in raw


def parse_model(raw: Any, file: str = "<model>") -> ModelSpec:
    if not isinstance(raw, dict):
        raise InputError(f"{file}: expected a mapping of model architecture keys")
    problems: list[str] = []
    allowed = set(INT_KEYS) | {"schema_version", "name", "source", "params_total", "activation",
                               "tie_embeddings", "sliding_window_layers", "expert_dtype",
                               "expert_bias", "swiglu_limit"}
    for k in raw:
        if k not in allowed:
            problems.append(f"{file}: {k}: unknown key (expected one of {sorted(allowed)})")
    if raw.get("schema_version") != MODEL_SCHEMA_VERSION:
        problems.append(f"{file}: schema_version: expected {MODEL_SCHEMA_VERSION}, "
                        f"got {raw.get('schema_version')!r}")
    values: dict[str, Any] = {}
    for k, (required, lo) in INT_KEYS.items():
        if k not in raw:
            if required:
                problems.append(f"{file}: {k}: missing required key (a positive integer)")
            continue
        v = raw[k]
        if not isinstance(v, int) or isinstance(v, bool) or v < lo:
            problems.append(f"{file}: {k}: expected an integer >= {lo}, got {show(v)}")
        elif v > KEY_LIMITS.get(k, (MAX_ELEMENTS,))[0]:
            hi, why = KEY_LIMITS.get(k, (MAX_ELEMENTS, ELEMENTS_WHY))
            problems.append(f"{file}: {k}: expected an integer <= {bound_text(hi)} ({why}), "
                            f"got {show(v)}")
        values[k] = v
    src = raw.get("source")
    if not (isinstance(src, dict) and isinstance(src.get("title"), str)
            and isinstance(src.get("url"), str)):
        problems.append(f"{file}: source: expected {{title, url}} saying where the numbers "
                        f"come from")
    stated = raw.get("params_total", {})
    if not (isinstance(stated, dict) and isinstance(stated.get("value"), (int, float))
            and not isinstance(stated.get("value"), bool)
            and isinstance(stated.get("source"), str)):
        problems.append(f"{file}: params_total: expected {{value, source, url}} (the stated "
                        f"parameter count)")
    elif not 1 <= stated["value"] <= MAX_PARAMS_TOTAL:  # nan fails both comparisons
        problems.append(f"{file}: params_total.value: expected a parameter count in "
                        f"[1, {MAX_PARAMS_TOTAL:g}], got {show(stated['value'])}")
    tie = raw.get("tie_embeddings", False)
    if not isinstance(tie, bool):
        problems.append(f"{file}: tie_embeddings: expected true or false, got {show(tie)}")
    act = raw.get("activation", "swiglu")
    if act not in ACTIVATIONS:
        problems.append(f"{file}: activation: expected one of {ACTIVATIONS}, got {act!r}")
    window_layers = raw.get("sliding_window_layers", "all")
    if window_layers not in WINDOW_LAYERS:
        problems.append(f"{file}: sliding_window_layers: expected one of "
                        f"{', '.join(WINDOW_LAYERS)}, got {show(window_layers)}")
    elif "sliding_window_layers" in raw and not values.get("sliding_window"):
        problems.append(f"{file}: sliding_window_layers: needs sliding_window (the window's "
                        f"keys per query)")
    block = values.get("fp8_weight_block", 0)
    if block not in (0, FP8_BLOCK):
        problems.append(f"{file}: fp8_weight_block: expected 0 (per-tensor scales) or "
                        f"{FP8_BLOCK} (128x128 weight blocks, the only block-scaled FP8 "
                        f"layout the kernels implement), got {show(block)}")
    expert_dtype = raw.get("expert_dtype")
    if expert_dtype is not None and expert_dtype not in EXPERT_DTYPES:
        problems.append(f"{file}: expert_dtype: expected one of {', '.join(EXPERT_DTYPES)}, "
                        f"got {show(expert_dtype)}")
    elif expert_dtype is not None and not values.get("experts"):
        problems.append(f"{file}: expert_dtype: applies to routed experts; the model has none "
                        f"(experts: 0)")
    expert_bias = raw.get("expert_bias", False)
    if not isinstance(expert_bias, bool):
        problems.append(f"{file}: expert_bias: expected true or false, got {show(expert_bias)}")
    elif expert_bias and not values.get("experts"):
        problems.append(f"{file}: expert_bias: applies to routed experts; the model has none "
                        f"(experts: 0)")
    limit = raw.get("swiglu_limit", 0.0)
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) \
            or not 0 <= limit <= MAX_SWIGLU_LIMIT:  # nan fails the comparison
        problems.append(f"{file}: swiglu_limit: expected a number in [0, {MAX_SWIGLU_LIMIT:g}] "
                        f"(0: no clamp), got {show(limit)}")
    elif limit and not (values.get("experts") and act == "swiglu"):
        problems.append(f"{file}: swiglu_limit: clamps the routed experts' SwiGLU inputs; needs "
                        f"experts > 0 and activation swiglu")
    if not problems:
        if values.get("sliding_window") and values.get("kv_lora_rank"):
            problems.append(f"{file}: sliding_window: not modelled with multi-head latent "
                            f"attention (kv_lora_rank > 0)")
        if values["heads"] % values["kv_heads"]:
            problems.append(f"{file}: kv_heads: must divide heads ({values['heads']})")
        if values.get("experts") and not 0 < values.get("top_k", 0) <= values["experts"]:
            problems.append(f"{file}: top_k: expected 1..experts for an MoE model")
        if values.get("experts") and not values.get("expert_hidden"):
            problems.append(f"{file}: expert_hidden: required for an MoE model")
        groups, per_token = values.get("expert_groups", 0), values.get("group_top_k", 0)
        if groups and (not values.get("experts") or values["experts"] % groups):
            problems.append(f"{file}: expert_groups: {groups} must divide the routed experts "
                            f"({values.get('experts', 0)})")
        elif per_token and not groups:
            problems.append(f"{file}: group_top_k: needs expert_groups (the groups it picks "
                            f"among)")
        elif per_token > groups:
            problems.append(f"{file}: group_top_k: {per_token} exceeds expert_groups "
                            f"({groups})")
        elif groups and per_token and per_token * (values["experts"] // groups) \
                < values.get("top_k", 0):
            problems.append(f"{file}: group_top_k: {per_token} groups of "
                            f"{values['experts'] // groups} experts hold fewer than top_k "
                            f"({values['top_k']})")
        if values.get("dense_layers", 0) > values["layers"]:
            problems.append(f"{file}: dense_layers: {values['dense_layers']} exceeds layers "
                            f"({values['layers']})")
        for dims in MODEL_TENSORS:
            n = 1
            for d in dims:
                n *= values.get(d) or 1
            if n > MAX_ELEMENTS:  # named by its largest dimension, the likely culprit
                key = max(dims, key=lambda d: values.get(d) or 0)
                problems.append(f"{file}: {key}: {' x '.join(dims)} = {show(n)} elements: "
                                f"expected at most {bound_text(MAX_ELEMENTS)} in one weight "
                                f"tensor ({ELEMENTS_WHY})")
    if problems:
        raise InputError(problems)
    return ModelSpec(name=str(raw.get("name") or Path(file).stem), source=src["url"],
                     params_total_stated=float(stated["value"]), activation=act,
                     tie_embeddings=tie, sliding_window_layers=window_layers,
                     expert_dtype=expert_dtype, expert_bias=expert_bias,
                     swiglu_limit=float(limit), path=file, **values)


def load_model(name_or_path: str | Path) -> ModelSpec:
    """A built-in model by name (`llama3-70b`) or a model file by path."""
    s = str(name_or_path)
    p = Path(s)
    if not (s.endswith((".yaml", ".yml")) or yamlio.is_file(p)):
        p = builtin_model_dir() / f"{s.lower()}.yaml"
        if not yamlio.is_file(p):
            raise InputError(f"unknown model '{s}' (built-in: {', '.join(list_models())}; or "
                             f"give a model file path)")
    return _parsed_model(str(p), *_file_stamp(p))


def _file_stamp(path: Path) -> tuple[int, int]:
    """(modification time in ns, size) of a model file, or (-1, -1) where it cannot be stat'ed
    (the read then reports why)."""
    try:
        st = path.stat()
    except OSError:
        return -1, -1
    return st.st_mtime_ns, st.st_size


@functools.lru_cache(maxsize=256)
def _parsed_model(path: str, mtime_ns: int, size: int) -> ModelSpec:
    """The model file at `path` parsed, once per version of the file (its modification time
    and size key the cache): plan and fit loops load the same built-in models thousands of
    times (`fit_all` 1,676 loads, ~0.5 s of YAML parsing), and a ModelSpec is frozen, so every
    caller can share one. A file that fails to parse raises each time (lru_cache keeps no
    exception)."""
    return parse_model(yamlio.load(path, "model file"), path)
