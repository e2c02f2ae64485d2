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
    m.add_argument("--replication", type=float, nargs="+", default=None,
                   help="expert replicas / experts (default 1.0 1.125 1.5; 1.0 on one GPU, "
                        "where no expert has a second GPU to be replicated on)")
    m.add_argument("--skew", type=float, default=None,
                   help="Zipf exponent of synthetic expert popularity (default 1; not with "
                        "--loads)")
    m.add_argument("--loads", metavar="FILE", default=None,
                   help="route from recorded per-layer expert loads (SGLang logical_count JSON, "
                        "a path or a shipped name such as decode_in1000out1000.json), with "
                        "DeepSeek's EPLB placement from the same file")
    m.add_argument("--layers", type=int, nargs="+", default=None,
                   help="with --loads: layers of the file to route (default: all its MoE layers)")
    m.add_argument("--variation", type=float, default=0.0,
                   help="with --loads: batch-to-batch log-normal sigma of expert popularity")
    m.add_argument("--seed", type=int, default=0, help="with --loads: the batch's seed")
    m.add_argument("--dtype", default=None, help="expert weight dtype (bf16, fp8, nvfp4; default "
                   "bf16, fp8 with --loads: DeepSeek-V3's released weights)")
    m.add_argument("--format", choices=("table", "json"), default="table")
    m.set_defaults(fn=run_moe)


DEFAULT_REPLICATION = [1.0, 1.125, 1.5]


def _check_layout(args, experts: int) -> None:
    """--gpus, --tokens-per-gpu and --replication against one another and the model: one line
    naming the flag per problem (before any op is built, whose errors would name its keys)."""
    from perfmodel.ops.base import MAX_ELEMENTS, MAX_GPUS, MAX_SEED, bound_text
    if not 1 <= args.gpus <= MAX_GPUS:
        raise InputError(f"--gpus: expected an integer in [1, {bound_text(MAX_GPUS)}], "
                         f"got {args.gpus}")
    if args.replication is None:
        args.replication = DEFAULT_REPLICATION if args.gpus > 1 else [1.0]
    problems = [f"--tokens-per-gpu: expected integers in [1, {bound_text(MAX_ELEMENTS)}], "
                f"got {t}" for t in args.tokens_per_gpu if not 1 <= t <= MAX_ELEMENTS]
    if args.skew is not None and not 0.0 <= args.skew <= 8.0:
        problems.append(f"--skew: expected a Zipf exponent in [0, 8], got {args.skew}")
    if not 0 <= args.seed <= MAX_SEED:
        problems.append(f"--seed: expected an integer in [0, 2^63 - 1], got {args.seed}")
    # the moe op's expert types; checked here, since an empty --dtype '' once ran as the default
    from perfmodel.ops import REGISTRY
    dtypes = REGISTRY["moe"].PARAMS["dtype"].choices
    if args.dtype is not None and args.dtype.lower() not in dtypes:
        problems.append(f"--dtype: expected one of {', '.join(dtypes)}, got {args.dtype!r}")
    for r in args.replication:
        if not 1.0 <= r <= 8.0:  # nan fails too
            problems.append(f"--replication: expected numbers in [1, 8] (replicas per expert), "
                            f"got {r}")
        elif int(experts * r + 0.5) - experts > experts * (args.gpus - 1):
            problems.append(f"--replication: {r} needs more than one replica of an expert per "
                            f"GPU with --gpus {args.gpus} (at most {args.gpus})")
    if problems:
        raise InputError(problems)


def run_moe(args) -> int:
    from perfmodel.workloads.models import load_model
    from perfmodel.studies.moe_decode import study_rows
    model = load_model(args.model)
    if not model.is_moe:
        raise InputError(f"--model: {model.name} has no experts")
    _check_layout(args, model.experts)
    if args.loads is not None:
        return _run_loads(args, model)
    for flag, value in (("--layers", args.layers), ("--variation", args.variation or None)):
        if value is not None:
            raise InputError(f"{flag}: applies with --loads only")
    if model.experts % args.gpus:
        raise InputError(f"--gpus: {args.gpus} must divide the {model.experts} experts")
    args.skew = 1.0 if args.skew is None else args.skew
    args.dtype = args.dtype or "bf16"
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


def _run_loads(args, model) -> int:
    """`--loads`: per tokens/GPU and redundancy, each policy's activated experts and layer time,
    averaged over the file's MoE layers (`perfmodel.studies.moe_decode.real_layers`)."""
    import numpy as np
    from perfmodel.ops.moe.loads import load_expert_loads
    from perfmodel.studies.moe_decode import REAL_DTYPE, real_layers, redundant_slots
    if args.skew is not None:
        raise InputError("--skew: synthetic popularity; --loads routes from the file instead")
    if not 0 <= args.variation <= 4:
        raise InputError(f"--variation: expected a number in [0, 4], got {args.variation}")
    loads = load_expert_loads(args.loads)
    loads.check_experts(model.experts)
    for layer in args.layers or []:
        loads.check_layer(layer)
    hw = resolve_hardware(args.hw, args.sm_clock)
    dtype = args.dtype or REAL_DTYPE
    redundant = sorted({redundant_slots(model.experts, args.gpus,
                                        int(round(model.experts * (r - 1.0))))
                        for r in args.replication})
    from perfmodel.report.progress import Progress
    bar = Progress(len(args.tokens_per_gpu) * len(redundant),
                   f"routing and pricing {len(args.layers or loads.moe_layers)} layers")
    rows = []
    for t in args.tokens_per_gpu:
        for i, red in enumerate(redundant):
            bar.update()
            policies = (("contiguous",) if i == 0 else ()) + ("token_balanced", "metro",
                                                              "optimal")
            res = real_layers(model, hw, args.gpus, t, loads.path, args.layers, red,
                              (args.seed,), args.variation, dtype, policies)[hw.name]
            for p in dict.fromkeys(r.policy for r in res):
                rs = [r for r in res if r.policy == p]
                mean = {k: float(np.mean([getattr(r, k) for r in rs]))
                        for k in ("max_activated", "mean_activated", "ffn_s", "layer_s")}
                rows.append({"model": model.name, "hardware": hw.name, "gpus": args.gpus,
                             "loads": loads.path, "layers": [r.layer for r in rs],
                             "tokens_per_gpu": t, "redundant": 0 if p == "contiguous" else red,
                             "policy": p, **mean,
                             "max_activated_worst": max(r.max_activated for r in rs),
                             "dispatch_s": rs[0].dispatch_s, "gate_s": rs[0].gate_s,
                             "routing_s": rs[0].routing_s, "combine_s": rs[0].combine_s,
                             "bound": rs[0].bound})
    if args.format == "json":
        print(json.dumps({"rows": rows}, indent=2))
        return 0
    n = len(rows[0]["layers"]) if rows else 0
    print(f"{model.name} on {args.gpus}x {hw.name}, routed from {args.loads} ({n} MoE layers, "
          f"{dtype}, seed {args.seed}, variation {args.variation}); EPLB placement from the "
          f"file; per layer (mean over layers): layer = dispatch + gate + routing + slowest "
          f"GPU's FFN + combine")
    print(format_table(
        ["tokens/GPU", "redundant", "policy", "max activated", "worst layer", "mean/GPU",
         "FFN us", "dispatch us", "gate+routing us", "combine us", "layer us", "bound"],
        [[r["tokens_per_gpu"], r["redundant"], r["policy"], f"{r['max_activated']:.2f}",
          f"{r['max_activated_worst']:.0f}", f"{r['mean_activated']:.2f}",
          f"{r['ffn_s'] * 1e6:.1f}", f"{r['dispatch_s'] * 1e6:.1f}",
          f"{(r['gate_s'] + r['routing_s']) * 1e6:.1f}", f"{r['combine_s'] * 1e6:.1f}",
          f"{r['layer_s'] * 1e6:.1f}", r["bound"]] for r in rows]))
    return 0
