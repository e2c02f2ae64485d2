"""`perfmodel models`: the built-in models (`list`), one model's architecture with its
parameter counts and KV-cache size per token (`show`), and a model file made from a Hugging Face
`config.json` (`import`: perfmodel.workloads.hf_config reads it)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from perfmodel.cli.format import fmt_si
from perfmodel.report.tables import format_table
from perfmodel.workloads.builder import kv_cache_bytes_per_token
# the import's logic, and its name here for the callers that import it from the command
from perfmodel.workloads.hf_config import check_params_total, model_from_hf_config
from perfmodel.workloads.models import list_models, load_model


def register(sub) -> None:
    models = sub.add_parser("models", help="built-in models: list (the default), show one, or "
                                           "import a Hugging Face config.json")
    # bare `perfmodel models` lists them (`perfmodel models list`)
    models.set_defaults(fn=run_list)
    msub = models.add_subparsers(dest="models_command", required=False,
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


def run_import(args) -> int:
    from perfmodel import jsonio
    from perfmodel.cli.format import check_output, write_output
    from perfmodel.yamlio import dump
    if args.output:  # before any work: a path that cannot be written fails at once
        check_output(args.output, "--output")
    params = check_params_total(args.params, "--params")
    path = Path(args.config)
    cfg = jsonio.load(path, "config.json")
    name = args.name
    if not name:
        given = cfg.get("_name_or_path") if isinstance(cfg, dict) else None
        name = (given if isinstance(given, str) and given else path.resolve().parent.name)
        name = name.split("/")[-1].lower()
    out, notes = model_from_hf_config(cfg, name, params, args.url, file=str(path))
    text = "".join(f"# note: {n}\n" for n in notes) + dump(out)
    for n in notes:
        print(f"perfmodel: note: {n}", file=sys.stderr)
    if args.output:
        write_output(args.output, text, "--output")
    else:
        print(text, end="")
    return 0
