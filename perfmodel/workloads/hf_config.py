"""A model file from a Hugging Face `config.json` (`perfmodel models import`).

Every config key the import reads is declared in FIELDS with its type and bounds, and read
through `_Config.get`, so a value of the wrong type, out of range or missing is one line naming
the key and what it expected, never a TypeError from int() or a ZeroDivisionError from
hidden // heads. The bounds are the model file's (perfmodel.workloads.models: sizes at most
MAX_ELEMENTS, layers and experts at their KEY_LIMITS); the model built is then checked as a
model file (parse_model), whose errors name the model-file key.

JSON null is "not set" for every key. Keys HF writes as 0 for "no such feature"
(`unset_zero`: e.g. num_key_value_heads 0, q_lora_rank 0) read as not set too, as the import
always took them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from perfmodel.errors import InputError, show
from perfmodel.ops.base import MAX_ELEMENTS, bound_text
from perfmodel.workloads.models import KEY_LIMITS, MAX_PARAMS_TOTAL, parse_model


@dataclass(frozen=True)
class Field:
    """How one config key is read: `int` (an integer, or a float with an integral value),
    `number` (finite), `bool`, `str`, `list` or `object`; integers and numbers in [lo, hi]."""

    kind: str
    lo: float = 0
    hi: float = MAX_ELEMENTS
    why: str = ""               # why `hi` is the bound (a model-file key's KEY_LIMITS reason)
    unset_zero: bool = False    # 0 means "not set"


def _size(lo: int = 1, unset_zero: bool = False, limit: str | None = None) -> Field:
    hi, why = KEY_LIMITS.get(limit, (MAX_ELEMENTS, "")) if limit else (MAX_ELEMENTS, "")
    return Field("int", lo, hi, why, unset_zero)


# config.json keys of the architectures perfmodel's model file can express, by family: the first
# key present wins (Llama/Mistral/Qwen/DeepSeek/Nemotron use the HF-standard names, MPT its own,
# GPT-2-style configs n_embd / n_layer / n_head)
HIDDEN = ("hidden_size", "d_model", "n_embd")
LAYERS = ("num_hidden_layers", "n_layers", "n_layer")
HEADS = ("num_attention_heads", "n_heads", "n_head")
FFN = ("intermediate_size", "ffn_hidden_size", "n_inner")
EXPERTS = ("num_local_experts", "num_experts", "n_routed_experts")

FIELDS: dict[str, Field] = {
    **{k: _size() for k in HIDDEN + HEADS + FFN},
    **{k: _size(limit="layers") for k in LAYERS},
    **{k: _size(0, limit="experts") for k in EXPERTS},
    "vocab_size": _size(),
    "num_key_value_heads": _size(unset_zero=True),
    "head_dim": _size(unset_zero=True),
    "expansion_ratio": Field("number", 0, 1e6, unset_zero=True),  # MPT: ffn = ratio · d_model
    "hidden_act": Field("str"), "activation_function": Field("str"), "model_type": Field("str"),
    "_name_or_path": Field("str"),
    "tie_word_embeddings": Field("bool"),
    "num_experts_per_tok": _size(),
    "moe_intermediate_size": _size(unset_zero=True),
    "n_shared_experts": _size(0),
    "shared_expert_intermediate_size": _size(unset_zero=True),
    "first_k_dense_replace": _size(0),
    "mlp_only_layers": Field("list"),
    "q_lora_rank": _size(0), "kv_lora_rank": _size(0),
    "qk_nope_head_dim": _size(0), "qk_rope_head_dim": _size(0), "v_head_dim": _size(0),
    "sliding_window": _size(0), "use_sliding_window": Field("bool"),
    "alibi": Field("bool"),
    "attn_config": Field("object"),                  # MPT's attention options
    "attn_config.kv_n_heads": _size(unset_zero=True),
    "attn_config.alibi": Field("bool"),
}

# hidden_act → the model file's activation: SiLU-gated FFNs (Llama's gate/up/down) are swiglu;
# Nemotron's squared ReLU and MPT's GELU have no gate
ACTIVATION = {"silu": "swiglu", "swish": "swiglu", "swiglu": "swiglu", "gelu": "gelu",
              "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu", "relu2": "relu", "relu": "relu"}
_KINDS = {"int": "an integer", "number": "a number", "bool": "true or false", "str": "a string",
          "list": "a list", "object": "an object"}


class _Config:
    """The config's values, each read once through its Field; the problems found collect in
    `problems` (every one reported, not only the first)."""

    def __init__(self, cfg: dict, file: str):
        self.cfg, self.file, self.problems = cfg, file, []
        attn = cfg.get("attn_config")
        self.attn = attn if isinstance(attn, dict) else {}

    def get(self, key: str, default: Any = None) -> Any:
        """The value of `key` (`attn_config.x`: MPT's nested key), checked against FIELDS;
        `default` where it is not set or is bad (the problem is recorded)."""
        f = FIELDS[key]
        parent, _, leaf = key.rpartition(".")
        v = (self.attn if parent else self.cfg).get(leaf)
        if v is None or (f.unset_zero and v == 0 and not isinstance(v, bool)):
            return default
        problem = _problem(f, v)
        if problem:
            self.problems.append(f"{self.file}: {key}: {problem}")
            return default
        return int(v) if f.kind == "int" else v

    def first(self, keys: tuple[str, ...], what: str, required: bool = True) -> Any:
        """The first of `keys` that is set (an architecture family's name for one quantity)."""
        for k in keys:
            if self.cfg.get(k) is not None:
                return self.get(k)
        if required:
            self.problems.append(f"{self.file}: no {what} (expected one of {', '.join(keys)})")
        return None

    def need(self, key: str, why: str) -> Any:
        v = self.get(key)
        if v is None and self.cfg.get(key) is None:
            self.problems.append(f"{self.file}: {key}: missing ({why})")
        return v


def _problem(f: Field, v: Any) -> str:
    """What is wrong with value `v` for field `f`, or ''."""
    expected = _KINDS[f.kind]
    if f.kind in ("int", "number"):
        number = isinstance(v, (int, float)) and not isinstance(v, bool)
        if not number or (isinstance(v, float) and not math.isfinite(v)):
            return f"expected {expected}, got {show(v)}"
        if f.kind == "int" and isinstance(v, float) and not v.is_integer():
            return f"expected an integer, got {show(v)} (not a whole number)"
        if v < f.lo:
            return f"expected {expected} >= {f.lo:g}, got {show(v)}"
        if v > f.hi:
            why = f" ({f.why})" if f.why else ""
            return f"expected {expected} <= {bound_text(f.hi)}{why}, got {show(v)}"
        return ""
    types = {"bool": bool, "str": str, "list": list, "object": dict}[f.kind]
    if not isinstance(v, types):
        return f"expected {expected}, got {show(v)}"
    if isinstance(v, str):
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate written as a \\udXXX escape
            return f"expected Unicode text, got {show(v)} (a lone surrogate)"
    return ""


def check_params_total(value: Any, name: str = "params_total") -> float | None:
    """A stated parameter count (`--params`): None, or a number in [1, MAX_PARAMS_TOTAL], as
    the model file's params_total.value."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not 1 <= value <= MAX_PARAMS_TOTAL:  # nan fails both comparisons
        raise InputError(f"{name}: expected a parameter count in [1, {MAX_PARAMS_TOTAL:g}], "
                         f"got {show(value)}")
    return float(value)


def model_from_hf_config(cfg: Any, name: str, params_total: float | None = None,
                         url: str = "", file: str = "config.json"
                         ) -> tuple[dict[str, Any], list[str]]:
    """A model-file mapping (perfmodel.workloads.models.parse_model's schema) from a Hugging
    Face config.json, and the notes on what it could not express. Dense and GQA attention
    (num_key_value_heads), MoE (num_local_experts / num_experts / n_routed_experts,
    num_experts_per_tok, moe_intermediate_size, n_shared_experts or
    shared_expert_intermediate_size, first_k_dense_replace), MLA (q_lora_rank, kv_lora_rank,
    qk_nope_head_dim, qk_rope_head_dim, v_head_dim). Sliding-window and ALiBi attention change no
    parameter count but have no model-file key: the attention is priced as full causal
    attention, and the note says so. `params_total`: the model card's count (None: the count
    the architecture gives). `file`: the config's name in error messages."""
    params_total = check_params_total(params_total)
    if not isinstance(cfg, dict):
        raise InputError(f"{file}: expected a JSON object, got {type(cfg).__name__}")
    if not isinstance(name, str) or _problem(Field("str"), name):
        raise InputError(f"name: expected a model name (Unicode text), got {show(name)}")
    c = _Config(cfg, file)
    c.get("attn_config")
    c.get("_name_or_path")  # the CLI's default name: checked here with the rest
    hidden = c.first(HIDDEN, "hidden size")
    layers = c.first(LAYERS, "layer count")
    heads = c.first(HEADS, "attention head count")
    kv_heads = c.get("num_key_value_heads") or c.get("attn_config.kv_n_heads") or heads
    mla = bool(c.get("kv_lora_rank"))
    head_dim = c.get("head_dim")
    if mla:
        nope = c.need("qk_nope_head_dim", "an MLA config (kv_lora_rank) needs it")
        rope = c.need("qk_rope_head_dim", "an MLA config (kv_lora_rank) needs it")
        v_dim = c.need("v_head_dim", "an MLA config (kv_lora_rank) needs it")
        q_rank = c.get("q_lora_rank") or 0
    ratio = c.get("expansion_ratio")
    mpt = cfg.get("expansion_ratio") and not any(cfg.get(k) for k in FFN)
    ffn = None if mpt else c.first(FFN, "FFN size")
    act_name = c.get("hidden_act") or c.get("activation_function")
    model_type = c.get("model_type")
    # an explicit null reads as false (the import always took bool() of a value given)
    tie_given = c.get("tie_word_embeddings", False if "tie_word_embeddings" in cfg else None)
    vocab = c.need("vocab_size", "the embedding's rows")
    experts = c.first(EXPERTS, "experts", required=False) or 0
    if experts:
        top_k = c.need("num_experts_per_tok", "an MoE config needs it")
        moe_size = c.get("moe_intermediate_size")
        shared = c.get("n_shared_experts") or 0
        shared_size = c.get("shared_expert_intermediate_size")
        dense = c.get("first_k_dense_replace") or 0
        mlp_only = c.get("mlp_only_layers")
    window = c.get("sliding_window")
    use_window = c.get("use_sliding_window", "use_sliding_window" not in cfg)
    alibi = c.get("attn_config.alibi") or c.get("alibi")
    if c.problems:
        raise InputError(c.problems)

    notes: list[str] = []
    if mla:
        head_dim = head_dim or nope + rope
    elif not head_dim:
        head_dim = hidden // heads
        if head_dim < 1:
            raise InputError(f"{file}: hidden size {hidden} / {heads} attention heads: a head "
                             f"dimension of 0 (expected head_dim, or a hidden size of at least "
                             f"one per head)")
    if mpt:
        ffn = int(ratio * hidden)
    act_name = str(act_name or ("gelu" if model_type == "mpt" else "silu")).lower()
    if act_name not in ACTIVATION:
        raise InputError(f"{file}: hidden_act {act_name!r}: expected one of "
                         f"{', '.join(sorted(ACTIVATION))}")
    # HF's PretrainedConfig ties by default; Llama-family configs say false. MPT always ties.
    tie = tie_given if tie_given is not None else model_type in ("mpt", None)
    out: dict[str, Any] = {
        "schema_version": 1, "name": name,
        "source": {"title": f"{name} config.json (perfmodel models import)", "url": url},
        "hidden": hidden, "layers": layers, "heads": heads, "kv_heads": kv_heads,
        "head_dim": head_dim, "ffn_hidden": ffn, "vocab": vocab,
        "activation": ACTIVATION[act_name], "tie_embeddings": tie}
    if experts:
        expert_hidden = moe_size or ffn
        if shared_size:  # Qwen-MoE: one shared expert of its own width, in expert units
            shared = max(1, round(shared_size / expert_hidden))
            if shared * expert_hidden != shared_size:
                notes.append(f"shared expert of {shared_size} taken as {shared} x "
                             f"{expert_hidden}")
        if mlp_only:
            notes.append("mlp_only_layers (dense layers between MoE ones) not expressible: "
                         "every layer after the first dense ones is MoE")
        out.update(experts=experts, top_k=top_k, expert_hidden=expert_hidden,
                   shared_experts=shared, dense_layers=dense)
    if mla:
        out.update(q_lora_rank=q_rank, kv_lora_rank=c.get("kv_lora_rank"),
                   qk_nope_head_dim=nope, qk_rope_head_dim=rope, v_head_dim=v_dim)
    if window and use_window:
        notes.append(f"sliding_window {window}: priced as full causal attention (no model-file "
                     f"key)")
    if alibi:
        notes.append("ALiBi position bias: priced as RoPE-free full attention")
    out["params_total"] = {"value": 1.0, "source": ""}
    spec = parse_model(out, f"{file} (as a model file)")
    counted = float(spec.params())
    out["params_total"] = {
        "value": params_total if params_total else counted,
        "source": ("the model card's count (perfmodel models import --params)" if params_total
                   else "counted from the architecture by perfmodel models import")}
    # the file written must read back: a count above MAX_PARAMS_TOTAL (a 2^33 q_lora_rank) is
    # refused here, naming the model-file key, rather than written
    parse_model(out, f"{file} (as a model file)")
    if params_total and not math.isclose(counted, params_total, rel_tol=0.005):
        notes.append(f"the architecture counts {counted / 1e9:.3f} B parameters, "
                     f"{counted / params_total - 1:+.1%} off the stated {params_total / 1e9:.3f} B")
    return out, notes
