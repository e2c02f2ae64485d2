"""`perfmodel moe`: MoE decode routing study (EPLB vs METRO vs optimal) from the command line."""
from __future__ import annotations

import json

from perfmodel.cli.format import add_sm_clock_option, resolve_hardware
from perfmodel.errors import InputError
from perfmodel.report.tables import format_table


def register(sub) -> None:
    m = sub.add_parser("moe", help="MoE decode: activated experts and layer time per routing "
                                   "policy (token_balanced / metro / optimal)")
    m.add_argument("--model", required=True, help="an MoE model (qwen3-30b-a3b, "
                   "qwen3-235b-a22b, deepseek-v3) or model file")
    m.add_argument("--hw", required=True)
    add_sm_clock_option(m)
    m.add_argument("--gpus", type=int, default=8, help="expert-parallel GPUs")
    m.add_argument("--tokens-per-gpu", type=int, nargs="+", default=[32, 128],
                   help="decode tokens per GPU (data-parallel attention)")
    m.add_argument("--replication", type=float, nargs="+", default=[1.0, 1.125, 1.5])
    m.add_argument("--skew", type=float, default=1.0, help="Zipf exponent of expert popularity")
    m.add_argument("--dtype", default="bf16", help="expert weight dtype (bf16, fp8, nvfp4)")
    m.add_argument("--format", choices=("table", "json"), default="table")
    m.set_defaults(fn=run_moe)


def run_moe(args) -> int:
    from perfmodel.workloads.models import load_model
    from perfmodel.studies.moe_decode import study_rows
    model = load_model(args.model)
    if not model.is_moe:
        raise InputError(f"--model: {model.name} has no experts")
    if model.experts % args.gpus:
        raise InputError(f"--gpus: {args.gpus} must divide the {model.experts} experts")
    rows = study_rows(model, resolve_hardware(args.hw, args.sm_clock), args.gpus,
                      args.tokens_per_gpu, args.replication, args.skew, args.dtype)
    if args.format == "json":
        print(json.dumps({"rows": rows}, indent=2))
        return 0
    print(f"{model.name} on {args.gpus}x {rows[0]['hardware']}: one MoE layer of a decode step "
          f"(skew {args.skew}, {args.dtype}); layer = slowest GPU's FFN + dispatch/combine + "
          f"routing algorithm")
    print(format_table(
        ["tokens/GPU", "replication", "policy", "max activated", "FFN us", "comm us",
         "routing us", "layer us", "bound"],
        [[r["tokens_per_gpu"], r["replication"], r["policy"], f"{r['max_activated']:.1f}",
          f"{r['ffn_s'] * 1e6:.1f}", f"{r['comm_s'] * 1e6:.1f}", f"{r['routing_s'] * 1e6:.1f}",
          f"{r['layer_s'] * 1e6:.1f}", r["bound"]] for r in rows]))
    return 0
