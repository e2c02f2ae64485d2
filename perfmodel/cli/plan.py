"""`perfmodel plan serve|train MODEL --hw NAME --gpus N`: search the deployments of a model on N
GPUs (`perfmodel.plan.search`) and print them ranked, best first, the layouts that do not fit
after with their reason."""
from __future__ import annotations

import csv
import io
import json
import math
import re
import sys
from typing import Any

from perfmodel.cli.format import add_sm_clock_option
from perfmodel.errors import InputError
from perfmodel.plan.frameworks import FRAMEWORKS
from perfmodel.plan.optimizers import DISTRIBUTED_OPTIMIZERS, OPTIMIZERS
from perfmodel.plan.simulator.engines import ALIASES, ENGINES
from perfmodel.plan.simulator.kv import KV_DTYPES
from perfmodel.report.tables import (FRONT_COLUMNS, LATENCY_HEADS, SERVE_COLUMNS, column_heads,
                                     format_table, latency_cells, number, row_cells)
from perfmodel.units import GEMM_DTYPES

FORMATS = ("table", "json", "csv")
# the most requests `plan serve` simulates: about a minute per layout at ~30 us a decode step with
# a batch of 256 and 1k-token outputs (benchmarks/speed_report.py); beyond, an error names the
# flag rather than a run of hours without a word
MAX_SERVE_REQUESTS = 100_000
DURATION = re.compile(r"^\s*((?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?)\s*(us|µs|ms|s)?\s*$", re.I)
UNIT_S = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, None: 1.0}


def parse_duration(text: str | None, flag: str) -> float | None:
    """`50ms`, `2s`, `200us` (or a bare number of seconds) in seconds; InputError naming
    `flag` otherwise."""
    if text is None:
        return None
    m = DURATION.match(str(text))
    value = float(m.group(1)) * UNIT_S[m.group(2) and m.group(2).lower()] if m else math.nan
    if not (value > 0 and math.isfinite(value)):
        raise InputError(f"{flag}: expected a positive duration such as 50ms, 2s or 200us, "
                         f"got {text!r}")
    return value


def register(sub) -> None:
    p = sub.add_parser("plan", help="search the deployments of a model on N GPUs (serving: "
                                    "simulated; training: predicted), best first")
    kinds = p.add_subparsers(dest="plan_command", required=True)

    s = kinds.add_parser("serve", help="serving: every TP x PP (x EP) replica layout on the "
                                       "GPUs, simulated under continuous batching")
    _common(s)
    s.add_argument("--isl", type=int, default=1024, help="input (prompt) tokens per request")
    s.add_argument("--osl", type=int, default=128, help="output tokens per request")
    s.add_argument("--isl-range", type=float, metavar="R", help="input lengths uniform in "
                   "[floor(R x ISL), ISL] per request, as InferenceX's and SGLang's benchmark "
                   "clients draw them (--random-range-ratio; InferenceX runs 0.8)")
    s.add_argument("--osl-range", type=float, metavar="R", help="output lengths uniform in "
                   "[floor(R x OSL), OSL] per request")
    s.add_argument("--isl-std", type=float, metavar="S", help="input lengths normal with mean "
                   "ISL and standard deviation S tokens (rounded, at least 1)")
    s.add_argument("--osl-std", type=float, metavar="S", help="output lengths normal with mean "
                   "OSL and standard deviation S tokens")
    s.add_argument("--lengths", metavar="FILE", help="CSV of one request a row, with columns "
                   "isl and osl (or prompt_len/output_len, input_tokens/output_tokens): a "
                   "dataset's lengths replayed in order, cycled if --requests asks for more; "
                   "replaces --isl/--osl")
    mode = s.add_mutually_exclusive_group()
    mode.add_argument("--offline", action="store_true",
                      help="every request queued at t = 0: maximum throughput (the default)")
    mode.add_argument("--rate", type=float, help="Poisson arrivals, requests/s (deployment)")
    mode.add_argument("--concurrency", type=int,
                      help="requests in flight in the whole deployment")
    s.add_argument("--burstiness", type=float, default=1.0, help="with --rate: gamma-"
                   "distributed gaps of this shape (1: Poisson; below 1 burstier), as vLLM's "
                   "and InferenceX's benchmark clients draw them")
    s.add_argument("--requests", type=int, help="requests of the deployment to simulate "
                   "(split over the replicas; default: see docs/cli.md \"plan\"; at most "
                   f"{MAX_SERVE_REQUESTS:,})")
    s.add_argument("--seed", type=int, default=0, help="seed of the request stream")
    s.add_argument("--tpot-slo", help="p99 TPOT target, e.g. 50ms")
    s.add_argument("--ttft-slo", help="p99 TTFT target, e.g. 2s")
    s.add_argument("--tp", type=int, help="fixed tensor parallelism (else searched)")
    s.add_argument("--pp", type=int, help="fixed pipeline stages (else searched)")
    s.add_argument("--ep", type=int, help="fixed expert parallelism (else searched; MoE)")
    s.add_argument("--engine", type=str.lower, choices=ENGINES + tuple(ALIASES), default="vllm",
                   help="serving engine preset (default vllm)")
    s.add_argument("--kv-dtype", type=str.lower, choices=KV_DTYPES,
                   help="KV-cache storage type (default bf16)")
    s.add_argument("--sweep", action="store_true", help="also simulate each layout at 1, 4, 16, "
                   "64 and 256 requests in flight per replica (its Pareto points)")
    s.add_argument("--disagg", action="store_true", help="disaggregated prefill/decode: split "
                   "each layout's replicas every way into a prefill and a decode pool, the KV "
                   "cache moved over NVLink or the network (offline or --rate)")
    s.add_argument("--spec-tokens", type=int, help="speculative decoding: draft tokens per "
                   "step (MTP / EAGLE layers); needs --spec-acceptance")
    s.add_argument("--spec-acceptance", type=float, help="probability a draft token is "
                   "accepted given the previous ones, e.g. 0.8")
    s.add_argument("--moe-kernel", choices=("grouped", "marlin"), default=None,
                   help="MoE experts stored narrower than their GEMMs (gpt-oss's MXFP4): the "
                        "engine's grouped GEMMs (default) or vLLM's Marlin MoE, as "
                        "VLLM_MXFP4_USE_MARLIN=1 runs it on Hopper")
    s.add_argument("--moe-loads", metavar="FILE", help="MoE: route each layer from recorded "
                   "expert loads (SGLang logical_count JSON, a path or a shipped name such as "
                   "decode_in1000out1000.json) instead of uniform routing")
    s.add_argument("--moe-replication", type=float, default=1.0, help="MoE: expert slots / "
                   "experts; > 1 places (R - 1) x experts redundant slots by DeepSeek's EPLB "
                   "from the --moe-loads statistics (default 1: contiguous, EPLB off)")
    s.add_argument("--plot", help="draw p99 TTFT and TPOT against tokens/s/GPU, the SLOs and "
                   "the chosen layout (PNG)")
    s.add_argument("--html", metavar="FILE", help="also write a self-contained HTML report: "
                   "the inputs, the layouts, interactive Pareto and latency-vs-load charts")
    s.set_defaults(fn=run_serve)

    t = kinds.add_parser("train", help="training: every TP x CP x PP x VP x DP (x EP) x "
                                       "micro-batch layout of the GPUs with the least "
                                       "recomputation that fits, one step predicted each")
    _common(t)
    t.add_argument("--global-batch", "--batch", dest="batch", type=int, required=True,
                   help="global batch in sequences (split over the dp replicas)")
    t.add_argument("--seq", type=int, default=4096, help="sequence length")
    t.add_argument("--tp", type=int, help="fixed tensor parallelism (else searched)")
    t.add_argument("--cp", type=int, help="fixed context parallelism (else searched)")
    t.add_argument("--pp", type=int, help="fixed pipeline stages (else searched)")
    t.add_argument("--vp", type=int, help="fixed virtual stages per GPU (else searched)")
    t.add_argument("--pipeline-split", default="auto", metavar="SPLIT",
                   help="how the decoder layers split over the PP ranks and VP chunks, as "
                        "Megatron-Core allows: auto (even, else the embedding and loss counted "
                        "as layers, else first/last-stage counts), even, account "
                        "(account_for_embedding/loss_in_pipeline_split), F,L (first/last-stage "
                        "layers) or a pipeline_model_parallel_layout such as "
                        "'Et*4|(t*4|)*14tL' (default auto; docs/cli.md)")
    t.add_argument("--moe-dispatcher", choices=("auto", "alltoall", "deepep"), default="auto",
                   help="MoE token dispatcher: alltoall (NCCL's all-to-all), deepep (Megatron-"
                        "Core's flex dispatcher with DeepEP/HybridEP: one network crossing per "
                        "destination node) or auto (deepep for a group-limited gate whose EP "
                        "group spans nodes, as the DeepSeek-V3 recipes; default)")
    t.add_argument("--bf16-layers", default="0,0", metavar="FIRST,LAST",
                   help="with a quantized --dtype, the first and last decoder layers kept in "
                        "BF16 (Megatron-Core's first_last_layers_bf16; default 0,0 as Megatron-"
                        "Core and the Megatron-Bridge performance recipes run)")
    t.add_argument("--moe-capacity-factor", type=float, metavar="FACTOR",
                   help="MoE token dropping as Megatron-Core pads it: every expert computes "
                        "ceil(tokens x top_k / experts x FACTOR) rows per rank and the host "
                        "never waits for the split sizes (moe_expert_capacity_factor with "
                        "moe_pad_expert_input_to_capacity; the all-to-all dispatcher; default: "
                        "dropless)")
    t.add_argument("--ep-overlap", action="store_true",
                   help="Megatron-Core's EP all-to-all overlap (overlap_moe_expert_parallel_comm:"
                        " one microbatch's expert exchange beside another's compute; layouts "
                        "without full recomputation)")
    t.add_argument("--dp", type=int, help="fixed data-parallel replicas (else searched)")
    t.add_argument("--ep", type=int, help="fixed expert parallelism (else searched; MoE)")
    t.add_argument("--micro-batch", type=int, help="sequences per microbatch (else searched)")
    t.add_argument("--recompute", choices=("none", "selective", "op", "full"),
                   help="fixed recomputation (default: none where it fits, else full)")
    t.add_argument("--recompute-modules", metavar="M1,M2",
                   help="Megatron-Core's selective recomputation by module, comma-separated: "
                        "core_attn, layernorm, mla_up_proj, mlp, moe, moe_act, shared_experts "
                        "(implies --recompute selective)")
    t.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=1,
                   help="ZeRO stage (1: Megatron's distributed optimizer; 3: FSDP)")
    t.add_argument("--framework", choices=tuple(FRAMEWORKS), default="megatron",
                   help="megatron: Megatron-Core + Transformer Engine (TP communication "
                        "overlapped, FP8 weights cast once per step, casts fused into norms; "
                        "NeMo, Megatron-LM); pytorch: torchtitan / FSDP, the graph as it is; "
                        "composer: llm-foundry's MPT on Composer + FSDP (train metrics every "
                        "microbatch, DecoupledAdamW one parameter at a time) (default megatron)")
    t.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw",
                   help="adamw (the default), muon (Newton-Schulz on every hidden weight "
                        "matrix, 5 iterations of 3 BF16 GEMMs) or soap (Adam in the Kronecker "
                        "factors' eigenbasis, eigenbases refreshed every 10 steps); embeddings, "
                        "LM head and norms stay on AdamW; its step time is the 'optimizer s' "
                        "column (docs/cli.md)")
    t.add_argument("--distributed-optimizer", choices=DISTRIBUTED_OPTIMIZERS,
                   help="elementwise (Megatron's distributed optimizer: state split evenly over "
                        "the DP ranks; Muon/SOAP gather whole matrices) or layerwise (whole "
                        "matrices per DP rank, the step paced by the busiest rank); default: "
                        "elementwise for adamw, layerwise for muon and soap")
    t.add_argument("--top", type=int, default=10, help="plans to print (default 10)")
    t.set_defaults(fn=run_train)


def _common(p) -> None:
    p.add_argument("model", help="built-in model name or model file")
    p.add_argument("--hw", required=True, help="hardware name, alias or spec path")
    add_sm_clock_option(p)
    p.add_argument("--gpus", type=int, required=True, help="GPUs of the whole deployment")
    p.add_argument("--dtype", type=str.lower, choices=GEMM_DTYPES, default="bf16",
                   help="GEMM dtype policy (default bf16)")
    p.add_argument("--format", choices=FORMATS, default="table")
    p.add_argument("--jobs", type=int, help="worker processes (default: the CPUs, on Linux)")


def _resolve(args):
    """The model and hardware, bad names reported against their flag."""
    from perfmodel.cli.format import resolve_hardware
    from perfmodel.workloads.models import load_model
    problems, m, h = [], None, None
    try:
        m = load_model(args.model)
    except InputError as e:
        problems += [f"MODEL: {p}" for p in e.problems]
    try:
        h = resolve_hardware(args.hw, args.sm_clock)
    except InputError as e:
        problems += [p if p.startswith("--sm-clock") else f"--hw: {p}" for p in e.problems]
    from perfmodel.errors import show
    from perfmodel.ops.base import MAX_ELEMENTS, MAX_GPUS, MAX_SEED, bound_text
    # upper bounds (perfmodel/ops/base.py): GPUs and processes at most MAX_GPUS, counts of
    # tokens, requests and sequences at most MAX_ELEMENTS
    for flag in ("gpus", "jobs", "isl", "osl", "requests", "concurrency", "batch", "seq",
                 "microbatches", "tp", "pp", "ep", "dp", "cp", "vp", "micro_batch", "top"):
        v = getattr(args, flag, None)
        hi = MAX_GPUS if flag in ("gpus", "jobs", "tp", "pp", "ep", "dp") else MAX_ELEMENTS
        if v is not None and v < 1:
            problems.append(f"--{flag}: expected a positive integer, got {v}")
        elif v is not None and v > hi:
            problems.append(f"--{flag}: expected an integer <= {bound_text(hi)}, got {show(v)}")
    seed = getattr(args, "seed", 0)
    if not 0 <= seed <= MAX_SEED:  # numpy's generators take a seed in [0, 2^63 - 1]
        problems.append(f"--seed: expected an integer in [0, {bound_text(MAX_SEED)}], got "
                        f"{show(seed)}")
    rate = getattr(args, "rate", None)
    if rate is not None and not (rate > 0 and math.isfinite(rate)):
        problems.append(f"--rate: expected a positive number of requests/s, got {rate}")
    requests = getattr(args, "requests", None)
    if getattr(args, "plan_command", None) == "serve" and requests is not None \
            and 1 <= requests <= MAX_ELEMENTS and requests > MAX_SERVE_REQUESTS:
        problems.append(f"--requests: at most {MAX_SERVE_REQUESTS:,} requests are simulated "
                        f"(about a minute per layout; more would run for hours), got "
                        f"{requests:,}")
    for flag in ("isl_range", "osl_range"):
        v = getattr(args, flag, None)
        if v is not None and not (0 < v <= 1):
            problems.append(f"--{flag.replace('_', '-')}: expected a range ratio in (0, 1], "
                            f"got {v}")
    for side in ("isl", "osl"):
        std = getattr(args, f"{side}_std", None)
        if std is not None and not (std > 0 and math.isfinite(std)):
            problems.append(f"--{side}-std: expected a standard deviation > 0 in tokens, got "
                            f"{std}")
        if std is not None and getattr(args, f"{side}_range", None) is not None:
            problems.append(f"--{side}-std: a length is drawn either uniform (--{side}-range) "
                            f"or normal (--{side}-std), not both")
    if getattr(args, "lengths", None) is not None:
        given = [f"--{f.replace('_', '-')}" for f in ("isl_range", "osl_range", "isl_std",
                                                     "osl_std") if getattr(args, f, None)]
        if given:
            problems.append(f"--lengths: the file gives every request's lengths; drop "
                            f"{', '.join(given)}")
    burstiness = getattr(args, "burstiness", 1.0)
    if not (burstiness > 0 and math.isfinite(burstiness)):
        problems.append(f"--burstiness: expected a positive number (1: Poisson), got "
                        f"{burstiness}")
    if problems:
        raise InputError(problems)
    return m, h


def _import_plots() -> None:
    """Import the plot's modules (matplotlib: about half a second) while the search's worker
    processes simulate and this one waits. Whatever fails here is left to the plot to
    report (it imports them again, under its --plot error handling), not to the search."""
    try:
        import perfmodel.plan.plots  # noqa: F401
    except Exception:  # noqa: BLE001 - reported by the plot's own import
        pass


def run_serve(args) -> int:
    if args.html:  # before the search, as --plot
        from perfmodel.cli.format import check_output
        from perfmodel.report.html import require_plotly
        check_output(args.html, "--html")
        require_plotly("--html")
    if args.plot:  # before the search: a path that cannot be written fails at once
        from perfmodel.cli.format import check_output
        check_output(args.plot, "--plot", plot=True)
    from perfmodel.plan.search import best, pareto, search_serving
    from perfmodel.plan.simulator import Workload
    from perfmodel.plan.simulator.workload import read_length_pairs
    from perfmodel.workloads.builder import expert_weight_dtype
    problems = []
    slo = {}
    for flag, key in (("--tpot-slo", "tpot_slo"), ("--ttft-slo", "ttft_slo")):
        try:
            slo[key] = parse_duration(getattr(args, key), flag)
        except InputError as e:
            problems += e.problems
    try:
        m, h = _resolve(args)
    except InputError as e:
        problems = e.problems + problems
    if problems:
        raise InputError(problems)
    mode = "rate" if args.rate is not None else (
        "concurrency" if args.concurrency is not None else "offline")
    if args.burstiness != 1.0 and mode != "rate":
        print("perfmodel: warning: --burstiness applies to --rate arrivals only (ignored)",
              file=sys.stderr)
    pairs = read_length_pairs(args.lengths) if args.lengths is not None else None
    wl = Workload(mode, args.requests, _lengths(args, "isl"), _lengths(args, "osl"), pairs,
                  rate=args.rate, concurrency=args.concurrency, seed=args.seed,
                  burstiness=args.burstiness if mode == "rate" else 1.0)
    settings = _spec_settings(args)
    if args.moe_kernel is not None:
        if expert_weight_dtype(m, args.dtype, "decode") == args.dtype:
            print(f"perfmodel: warning: --moe-kernel applies to experts stored narrower than "
                  f"their GEMMs; {m.name}'s are {args.dtype} (ignored)", file=sys.stderr)
        else:
            settings["moe_kernel"] = args.moe_kernel
    common = dict(engine=args.engine, dtype=args.dtype, kv_dtype=args.kv_dtype, tp=args.tp,
                  pp=args.pp, ep=args.ep, tpot_slo_s=slo["tpot_slo"], ttft_slo_s=slo["ttft_slo"],
                  progress=sys.stderr.isatty(), jobs=args.jobs, **settings)
    if args.moe_loads is None and args.moe_replication != 1.0:
        raise InputError("--moe-replication: EPLB's redundant slots are placed from recorded "
                         "loads; give --moe-loads FILE")
    if args.disagg and (args.moe_loads is not None):
        raise InputError("--moe-loads: not simulated with --disagg (the pools route "
                         "uniformly); drop one of them")
    if args.disagg:
        from perfmodel.plan.search import search_disaggregated
        if args.sweep:
            print("perfmodel: warning: --sweep does not apply with --disagg (ignored)",
                  file=sys.stderr)
        rows = search_disaggregated(m, h, args.gpus, wl, **common)
    else:
        rows = search_serving(m, h, args.gpus, wl, sweep=args.sweep,
                              moe_loads=args.moe_loads, moe_replication=args.moe_replication,
                              while_waiting=_import_plots if args.plot else None, **common)
    top, front = best(rows), pareto(rows)
    for note in dict.fromkeys(n for r in rows for n in r.get("notes") or ()):
        print(f"perfmodel: warning: {note}", file=sys.stderr)
    search = {"model": m.name, "hardware": h.name, "gpus": args.gpus, "engine": args.engine,
              "dtype": args.dtype, "kv_dtype": args.kv_dtype or "bf16",
              "workload": wl.to_dict(), "tpot_slo_s": slo["tpot_slo"],
              "ttft_slo_s": slo["ttft_slo"], "sweep": args.sweep,
              "moe_loads": args.moe_loads, "moe_replication": args.moe_replication,
              "expert_weights": expert_weight_dtype(m, args.dtype, "decode"),
              "moe_kernel": settings.get("moe_kernel", "grouped")}
    if args.format == "json":
        print(json.dumps({"search": search, "rows": rows, "best": top, "pareto": front},
                         indent=2))
    elif args.format == "csv":
        print(_csv(rows), end="")
    else:
        print(serve_table(rows, top, front, search))
    if args.plot:
        from perfmodel.cli.format import writing
        with writing(args.plot, "--plot"):
            from perfmodel.plan.plots import plot_serve_search
            plot_serve_search(rows, top, front, search, args.plot)
        print(f"wrote {args.plot}", file=sys.stderr)
    if args.html:
        from perfmodel.cli.format import write_output
        from perfmodel.report.html import serve_report
        write_output(args.html, serve_report(rows, top, front, search, vars(args)), "--html")
        print(f"wrote {args.html}", file=sys.stderr)
    return 0


def _lengths(args, side: str) -> Any:
    """--isl / --osl as the simulator's length: fixed, uniform over --*-range or normal with
    --*-std."""
    from perfmodel.plan.simulator.workload import normal_lengths, range_lengths
    length = getattr(args, side)
    std = getattr(args, f"{side}_std", None)
    if std is not None:
        return normal_lengths(length, std, f"--{side}-std")
    return range_lengths(length, getattr(args, f"{side}_range"), f"--{side}-range")


def _spec_settings(args) -> dict[str, Any]:
    """Engine settings of --spec-tokens / --spec-acceptance (both or neither)."""
    k, a = args.spec_tokens, args.spec_acceptance
    if k is None and a is None:
        return {}
    if k is None or a is None or k < 1 or not 0 < a <= 1:
        raise InputError("--spec-tokens/--spec-acceptance: speculative decoding needs both, "
                         f"a draft count >= 1 and an acceptance in (0, 1], got {k!r} and "
                         f"{a!r}")
    return {"spec_tokens": k, "spec_acceptance": a}


def _csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    if rows:
        w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    return buf.getvalue()


def _length(v: Any) -> str:
    """A workload length as to_dict gives it: an int, or [kind, a, b]."""
    if isinstance(v, list):
        kind, a, b = v
        return f"{a:g}..{b:g} uniform" if kind == "uniform" else f"~N({a:g}, {b:g})"
    return str(v)


def _describe(w: dict[str, Any]) -> str:
    arrivals = ("Poisson arrivals" if w.get("burstiness", 1.0) == 1.0 else
                f"gamma arrivals (burstiness {w['burstiness']:g})")
    what = {"offline": "offline (every request queued at t = 0)",
            "rate": f"{arrivals} at {w.get('rate')} requests/s",
            "concurrency": f"{w.get('concurrency')} requests in flight"}[w["mode"]]
    if "pairs" in w:
        return f"{what}, lengths from a file ({w['pairs']:,} rows, replayed in order and cycled)"
    if "isl" not in w:
        return what
    return f"{what}, isl {_length(w['isl'])}, osl {_length(w['osl'])}"


def statistics_block(row: dict[str, Any]) -> list[str]:
    """The benchmark clients' statistics of one row: mean, median, p90, p99 of TTFT, TPOT, ITL
    (ms) and E2E (s), and the throughputs (docs/cli.md "plan" defines each)."""
    lines = ["", "latencies of the best layout (per request; ITL per token gap):",
             format_table(LATENCY_HEADS, latency_cells(row)), ""]
    lines.append(
        f"throughput: {number(row.get('requests_per_s'), 1, 2)} requests/s, "
        f"{number(row['output_tokens_per_s'])} output tokens/s "
        f"({number(row['output_tokens_per_s_per_gpu'])} per GPU), "
        f"{number(row.get('total_tokens_per_s'))} total tokens/s "
        f"({number(row.get('total_tokens_per_s_per_gpu'))} per GPU), "
        f"{number(row.get('output_tokens_per_s_per_user'), 1, 1)} per user (1 / mean TPOT); "
        f"first send to last completion")
    steady = "steady state" if row.get("steady_state") else "steady state (not reached)"
    lines.append(f"{steady}: {number(row.get('steady_output_tokens_per_s'))} output tokens/s "
                 f"({number(row.get('steady_output_tokens_per_s_per_gpu'))} per GPU), "
                 f"{number(row.get('steady_total_tokens_per_s_per_gpu'))} total tokens/s per GPU; "
                 f"layouts are ranked on it")
    return lines


def serve_table(rows, top, front, search) -> str:
    slo = search["tpot_slo_s"] is not None or search["ttft_slo_s"] is not None
    lines = [f"{search['model']} on {search['gpus']}x {search['hardware']}, "
             f"{search['engine']}, {search['dtype']} weights"
             + (f" (experts {search['expert_weights']}"
                + (f", {search['moe_kernel']} kernel" if search.get("moe_kernel", "grouped")
                   != "grouped" else "") + ")"
                if search.get("expert_weights", search["dtype"]) != search["dtype"] else "")
             + f", {search['kv_dtype']} KV cache; "
             f"{_describe(search['workload'])}"]
    if slo:
        lines.append("SLOs (p99): " + ", ".join(
            f"{k} {v * 1e3:g} ms" for k, v in (("TTFT", search["ttft_slo_s"]),
                                               ("TPOT", search["tpot_slo_s"])) if v))
    if top:
        point = "" if top["point"] == "workload" else f" at {top['concurrency']} in flight"
        lines.append(
            f"best: {top['layout']} x {top['replicas']} replica{'s' * (top['replicas'] > 1)}"
            f"{point}: {top['output_tokens_per_s']:.0f} output tokens/s, "
            f"{top['output_tokens_per_s_per_gpu']:.0f} per GPU, "
            f"{number(top['output_tokens_per_s_per_user'], 1, 1)} per user; TTFT p99 "
            f"{number(top['ttft_p99_s'], 1e3)} ms, TPOT p99 {number(top['tpot_p99_s'], 1e3, 1)} ms")
        lines += statistics_block(top)
    else:
        lines.append("best: none" + (" meets the SLOs" if slo and any(r["fits"] for r in rows)
                                     else " fits"))
    main_rows = [r for r in rows if r["point"] == "workload"]
    fit = [r for r in main_rows if r["fits"]]
    table = [row_cells(r, SERVE_COLUMNS, slo) for r in fit]
    lines += ["", "memory per GPU; throughput of the deployment; requests simulated per replica"]
    lines.append(format_table(column_heads(SERVE_COLUMNS, slo), table) if table
                 else "(no layout fits)")
    rest = [r for r in main_rows if not r["fits"]]
    if rest:
        lines += ["", "not fitting or not valid:"]
        lines.append(format_table(["layout", "replicas", "reason"],
                                  [[r["layout"], r["replicas"], r["reason"]] for r in rest]))
    if search["sweep"]:
        lines += ["", "Pareto front (tokens/s/GPU against tokens/s/user, every point that fits):"]
        lines.append(format_table(column_heads(FRONT_COLUMNS, slo),
                                  [row_cells(r, FRONT_COLUMNS, slo) for r in front]))
    return "\n".join(lines)


def _bf16_layers(text: str) -> tuple[int, int]:
    """--bf16-layers FIRST,LAST as two non-negative integers."""
    parts = text.split(",")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise InputError(f"--bf16-layers: expected FIRST,LAST (two non-negative integers, e.g. "
                         f"2,8), got {text!r}")
    return int(parts[0]), int(parts[1])


def _recompute_modules(text: str | None) -> tuple[str, ...] | None:
    """--recompute-modules "mla_up_proj,mlp" as plan_training's tuple (None: not given); the
    names are checked by plan_training (an InputError naming recompute_modules)."""
    if text is None:
        return None
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise InputError(f"--recompute-modules: expected module names separated by commas, "
                         f"got {text!r}")
    return names


def _optimizer_text(args, plans) -> str:
    """The optimizer and the distributed optimizer that runs it, e.g. 'muon (layerwise)'."""
    dist = plans[0].distributed_optimizer if plans else (args.distributed_optimizer or "")
    return f"{args.optimizer} ({dist})" if dist else args.optimizer


def run_train(args) -> int:
    """`plan train`: plan.training.search_training_plans, the fastest `--top` that fit."""
    from perfmodel.plan.training import search_training_plans
    m, h = _resolve(args)
    fixed = math.prod(v for v in (args.tp, args.cp, args.pp, args.dp) if v)
    if args.gpus % fixed:
        raise InputError(f"--gpus: {args.gpus} is not a multiple of the fixed tp·cp·pp·dp = "
                         f"{fixed}")
    plans, tried, refused = search_training_plans(
        m, h, args.gpus, args.batch, args.seq, args.dtype, args.tp, args.cp, args.pp, args.vp,
        args.dp, args.ep, args.micro_batch, args.recompute, args.zero,
        progress=sys.stderr.isatty(), framework=args.framework,
        pipeline_split=args.pipeline_split, moe_dispatcher=args.moe_dispatcher,
        ep_overlap=args.ep_overlap, bf16_layers=_bf16_layers(args.bf16_layers),
        optimizer=args.optimizer, distributed_optimizer=args.distributed_optimizer,
        recompute_modules=_recompute_modules(args.recompute_modules),
        moe_capacity_factor=args.moe_capacity_factor)
    search = {"model": m.name, "hardware": h.name, "gpus": args.gpus,
              "global_batch": args.batch, "seq": args.seq, "dtype": args.dtype,
              "recompute": args.recompute, "recompute_modules": args.recompute_modules,
              "zero": args.zero, "framework": args.framework,
              "pipeline_split": args.pipeline_split, "moe_dispatcher": args.moe_dispatcher,
              "ep_overlap": args.ep_overlap,
              "moe_capacity_factor": args.moe_capacity_factor, "optimizer": args.optimizer,
              "distributed_optimizer": args.distributed_optimizer, "layouts_tried": tried,
              "layouts_not_fitting": refused}
    rows = [p.to_dict() for p in plans]
    if args.format == "json":
        print(json.dumps({"search": search, "plans": rows[:args.top]}, indent=2))
        return 0
    if args.format == "csv":
        flat = [{k: v for k, v in r.items() if not isinstance(v, (dict, tuple, list))}
                | {"memory_total_bytes": r["memory"]["total_bytes"]} for r in rows]
        print(_csv(flat), end="")
        return 0
    lines = [f"{m.name} training on {args.gpus}x {h.name}: global batch {args.batch} x "
             f"{args.seq} tokens, {args.dtype}, ZeRO {args.zero}, {args.framework}, "
             f"{_optimizer_text(args, plans)}; "
             f"{tried} layouts tried, "
             f"{len(plans)} fit in memory ({refused} do not fit with any recomputation)"]
    if not plans:
        lines.append("no layout fits in memory: add GPUs, use --zero 3, or a shorter --seq")
        print("\n".join(lines))
        return 0
    lines.append("MFU: 6N+attn = 6·N + 12·L·h·s FLOP/token (PaLM); Megatron = Megatron-LM's "
                 "num_floating_point_operations; both against the dense BF16 peak")
    lines.append(format_table(
        ["rank", "layout", "mbs", "recompute", "step s", "tok/s/GPU", "MFU 6N+attn %",
         "MFU Megatron %", "bubble s", "DP exposed s", "optimizer s", "weights+grads GB",
         "optimizer GB",
         "act GB", "total GB"],
        [[k, p.layout, p.micro_batch, p.recompute, f"{p.step_time_s:.3f}",
          f"{p.tokens_per_s_per_gpu:,.0f}", f"{p.mfu * 100:.1f}", f"{p.mfu_megatron * 100:.1f}",
          f"{p.breakdown.get('pipeline_bubble', 0.0):.3f}", f"{p.dp_exposed_s:.3f}",
          f"{p.optimizer_s:.3f}",
          number(p.memory.weights_bytes, 1e-9, 1), number(p.memory.optimizer_bytes, 1e-9, 1),
          number(p.memory.activation_bytes, 1e-9, 1), number(p.memory.total_bytes, 1e-9, 1)]
         for k, p in enumerate(plans[:args.top], 1)]))
    uneven = {p.pipeline_split for p in plans[:args.top] if not p.pipeline_split.startswith("even")}
    lines += [f"pipeline split {s} (decoder layers per PP rank, its VP chunks joined by +)"
              for s in sorted(uneven)]
    print("\n".join(lines))
    return 0
