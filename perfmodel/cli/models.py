"""`perfmodel models`: the built-in models (`list`), one model's architecture with its
parameter counts and KV-cache size per token (`show`), and a model file made from a Hugging Face
`config.json` (`import`, `model_from_hf_config`)."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from perfmodel.errors import InputError

from perfmodel.cli.format import fmt_si
from perfmodel.report.tables import format_table
from perfmodel.workloads.builder import kv_cache_bytes_per_token
from perfmodel.workloads.models import list_models, load_model


def register(sub) -> None:
    models = sub.add_parser("models", help="built-in models: list, or show one")
    msub = models.add_subparsers(dest="models_command", required=True,
                                 parser_class=type(models))
    msub.add_parser("list", help="built-in model names with their sizes").set_defaults(
        fn=run_list)
    show = msub.add_parser("show", help="a model's architecture, parameters and KV bytes/token")
    show.add_argument("name", help="built-in model name or model file")
    show.add_argument("--format", choices=("table", "json"), default="table")
    show.set_defaults(fn=run_show)
    imp = msub.add_parser("import", help="write a model file from a Hugging Face config.json")
    imp.add_argument("config", help="path of a config.json (dense, GQA, MoE, MLA)")
    imp.add_argument("-o", "--output", help="model file to write (default: stdout)")
    imp.add_argument("--name", help="model name (default: the config's _name_or_path or the "
                                    "file's folder)")
    imp.add_argument("--params", type=float, help="the model card's parameter count, e.g. "
                                                  "8.03e9 (default: the count from the config)")
    imp.add_argument("--url", default="", help="where the config comes from (the source url)")
    imp.set_defaults(fn=run_import)


def _kind(m) -> str:
    attention = "MLA" if m.is_mla else ("GQA" if m.kv_heads < m.heads else "MHA")
    return f"MoE {m.experts}x top-{m.top_k}, {attention}" if m.is_moe else f"dense, {attention}"


def run_list(args) -> int:
    rows = []
    for name in list_models():
        m = load_model(name)
        rows.append([m.name, _kind(m), f"{m.params() / 1e9:.1f} B",
                     f"{m.params(active=True) / 1e9:.1f} B", m.layers, m.hidden,
                     fmt_si(kv_cache_bytes_per_token(m), "B")])
    print(format_table(["model", "kind", "params", "active", "layers", "hidden",
                        "KV / token (TP1)"], rows))
    return 0


def run_show(args) -> int:
    m = load_model(args.name)
    info = {**m.to_dict(), "params": m.params(), "params_active": m.params(active=True),
            "kv_cache_bytes_per_token": kv_cache_bytes_per_token(m)}
    if args.format == "json":
        print(json.dumps(info, indent=2))
        return 0
    print(f"{m.name}  ({_kind(m)})")
    print(f"  source: {m.source}")
    print(f"  parameters: {m.params() / 1e9:.2f} B total, {m.params(active=True) / 1e9:.2f} B "
          f"active per token (stated: {m.params_total_stated / 1e9:.4g} B)")
    print(f"  KV cache: {fmt_si(info['kv_cache_bytes_per_token'], 'B')} per token at TP1, "
          f"BF16")
    rows = [[k, v] for k, v in m.to_dict().items()
            if k not in ("name", "source", "path") and v not in (0, "", None)]
    print(format_table(["key", "value"], rows))
    return 0


# config.json keys of the architectures perfmodel's model file can express, by family: the first
# key present wins (Llama/Mistral/Qwen/DeepSeek/Nemotron use the HF-standard names, MPT its own,
# GPT-2-style configs n_embd / n_layer / n_head)
_HIDDEN = ("hidden_size", "d_model", "n_embd")
_LAYERS = ("num_hidden_layers", "n_layers", "n_layer")
_HEADS = ("num_attention_heads", "n_heads", "n_head")
_FFN = ("intermediate_size", "ffn_hidden_size", "n_inner")
_EXPERTS = ("num_local_experts", "num_experts", "n_routed_experts")
# hidden_act → the model file's activation: SiLU-gated FFNs (Llama's gate/up/down) are swiglu;
# Nemotron's squared ReLU and MPT's GELU have no gate
_ACTIVATION = {"silu": "swiglu", "swish": "swiglu", "swiglu": "swiglu", "gelu": "gelu",
               "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu", "relu2": "relu", "relu": "relu"}


def _first(cfg: dict, keys: tuple[str, ...], what: str, default: Any = None) -> Any:
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    if default is not None:
        return default
    raise InputError(f"config.json: no {what} (expected one of {', '.join(keys)})")


def model_from_hf_config(cfg: dict, name: str, params_total: float | None = None,
                         url: str = "") -> tuple[dict[str, Any], list[str]]:
    """A model-file mapping (perfmodel.workloads.models.parse_model's schema) from a Hugging
    Face config.json, and the notes on what it could not express. Dense and GQA attention
    (num_key_value_heads), MoE (num_local_experts / num_experts / n_routed_experts,
    num_experts_per_tok, moe_intermediate_size, n_shared_experts or
    shared_expert_intermediate_size, first_k_dense_replace), MLA (q_lora_rank, kv_lora_rank,
    qk_nope_head_dim, qk_rope_head_dim, v_head_dim). Sliding-window and ALiBi attention change no
    parameter count but have no model-file key: the attention is priced as full causal
    attention, and the note says so. `params_total`: the model card's count (None: the count
    the architecture gives)."""
    from perfmodel.workloads.models import parse_model
    if not isinstance(cfg, dict):
        raise InputError("config.json: expected a JSON object")
    attn_cfg = cfg.get("attn_config") or {}
    hidden = int(_first(cfg, _HIDDEN, "hidden size"))
    layers = int(_first(cfg, _LAYERS, "layer count"))
    heads = int(_first(cfg, _HEADS, "attention head count"))
    kv_heads = int(cfg.get("num_key_value_heads") or attn_cfg.get("kv_n_heads") or heads)
    notes: list[str] = []
    mla = bool(cfg.get("kv_lora_rank"))
    head_dim = int(cfg.get("head_dim") or (cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]
                                          if mla else hidden // heads))
    if cfg.get("expansion_ratio") and not any(cfg.get(k) for k in _FFN):  # MPT
        ffn = int(cfg["expansion_ratio"] * hidden)
    else:
        ffn = int(_first(cfg, _FFN, "FFN size"))
    act_name = str(cfg.get("hidden_act") or cfg.get("activation_function")
                   or ("gelu" if cfg.get("model_type") == "mpt" else "silu")).lower()
    if act_name not in _ACTIVATION:
        raise InputError(f"config.json: hidden_act {act_name!r}: expected one of "
                         f"{', '.join(sorted(_ACTIVATION))}")
    # HF's PretrainedConfig ties by default; Llama-family configs say false. MPT always ties.
    tie = bool(cfg.get("tie_word_embeddings", cfg.get("model_type") in ("mpt", None)))
    out: dict[str, Any] = {
        "schema_version": 1, "name": name,
        "source": {"title": f"{name} config.json (perfmodel models import)", "url": url},
        "hidden": hidden, "layers": layers, "heads": heads, "kv_heads": kv_heads,
        "head_dim": head_dim, "ffn_hidden": ffn, "vocab": int(cfg["vocab_size"]),
        "activation": _ACTIVATION[act_name], "tie_embeddings": tie}
    experts = _first(cfg, _EXPERTS, "experts", 0) or 0
    if experts:
        expert_hidden = int(cfg.get("moe_intermediate_size") or ffn)
        shared = int(cfg.get("n_shared_experts") or 0)
        shared_size = cfg.get("shared_expert_intermediate_size")
        if shared_size:  # Qwen-MoE: one shared expert of its own width, in expert units
            shared = max(1, round(shared_size / expert_hidden))
            if shared * expert_hidden != shared_size:
                notes.append(f"shared expert of {shared_size} taken as {shared} x "
                             f"{expert_hidden}")
        dense = int(cfg.get("first_k_dense_replace") or 0)
        if cfg.get("mlp_only_layers"):
            notes.append("mlp_only_layers (dense layers between MoE ones) not expressible: "
                         "every layer after the first dense ones is MoE")
        out.update(experts=int(experts), top_k=int(cfg["num_experts_per_tok"]),
                   expert_hidden=expert_hidden, shared_experts=shared, dense_layers=dense)
    if mla:
        out.update(q_lora_rank=int(cfg.get("q_lora_rank") or 0),
                   kv_lora_rank=int(cfg["kv_lora_rank"]),
                   qk_nope_head_dim=int(cfg["qk_nope_head_dim"]),
                   qk_rope_head_dim=int(cfg["qk_rope_head_dim"]),
                   v_head_dim=int(cfg["v_head_dim"]))
    window = cfg.get("sliding_window")
    if window and cfg.get("use_sliding_window", True):
        notes.append(f"sliding_window {window}: priced as full causal attention (no model-file "
                     f"key)")
    if attn_cfg.get("alibi") or cfg.get("alibi"):
        notes.append("ALiBi position bias: priced as RoPE-free full attention")
    out["params_total"] = {"value": 1.0, "source": ""}
    spec = parse_model(out, f"{name}.yaml")
    counted = float(spec.params())
    out["params_total"] = {
        "value": float(params_total) if params_total else counted,
        "source": ("the model card's count (perfmodel models import --params)" if params_total
                   else "counted from the architecture by perfmodel models import")}
    if params_total and not math.isclose(counted, params_total, rel_tol=0.005):
        notes.append(f"the architecture counts {counted / 1e9:.3f} B parameters, "
                     f"{counted / params_total - 1:+.1%} off the stated {params_total / 1e9:.3f} B")
    return out, notes


def run_import(args) -> int:
    from perfmodel.yamlio import dump
    path = Path(args.config)
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise InputError(f"{args.config}: cannot read ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{args.config}: not JSON (line {e.lineno}: {e.msg})") from None
    name = args.name or str((cfg.get("_name_or_path") if isinstance(cfg, dict) else None)
                            or path.resolve().parent.name).split("/")[-1].lower()
    out, notes = model_from_hf_config(cfg, name, args.params, args.url)
    text = "".join(f"# note: {n}\n" for n in notes) + dump(out)
    for n in notes:
        print(f"perfmodel: note: {n}", file=sys.stderr)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        print(text, end="")
    return 0
