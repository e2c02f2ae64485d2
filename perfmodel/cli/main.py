"""`perfmodel` command line (SPEC.md "Command line").

Exit codes: 0 success; 2 bad input (one line per problem on stderr, naming file, key path and
expectation; never a traceback); 1 internal error.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Sequence

from pathlib import Path

from perfmodel import yamlio
from perfmodel.predict import predict
from perfmodel.workloads.builder import PHASES, build_graph
from perfmodel.engine import LEVELS, estimate
from perfmodel.errors import InputError
from perfmodel.graph import OpGraph, parse_graph
from perfmodel.hardware import hardware, list_hardware
from perfmodel.workloads.models import is_model_file, list_models, load_model, parse_model
from perfmodel.ops import REGISTRY, op
from perfmodel.report.tables import format_table, prediction_table


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as bad input (exit 2) in our one-line style."""

    def error(self, message: str):
        raise InputError(f"usage: {message} (see `{self.prog} --help`)")


def _hw_list(args) -> int:
    rows = [[hw.name, hw.architecture, hw.compute_capability, ", ".join(hw.aliases),
             ", ".join(hw.device_names)] for hw in list_hardware()]
    print(format_table(["name", "arch", "cc", "aliases", "device names"], rows))
    return 0


def _fmt_si(x: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.4g} {prefix}{unit}"
    return f"{x:.4g} {unit}"


def _hw_show(args) -> int:
    hw = hardware(args.name)
    info = hw.summary()
    if args.format == "json":
        print(json.dumps(info, indent=2))
        return 0
    print(f"{hw.name}  ({hw.architecture}, compute capability {hw.compute_capability})")
    print(f"  file: {hw.path}")
    print(f"  aliases: {', '.join(hw.aliases)}")
    rows = []
    for key, q in hw.quantities.items():
        prov = "; ".join(f"{k}: {v}" for k, v in q.provenance.items())
        rng = f"[{q.range[0]:.4g}, {q.range[1]:.4g}]" if q.range else ""
        rows.append([key, f"{q.value:.6g}", rng, prov[:70]])
    print(format_table(["quantity", "value", "range", "provenance"], rows))
    d = info["derived"]
    print("\nderived:")
    for dt, peak in d["tensor_peak_flop_per_s"].items():
        print(f"  tensor {dt:6s} {_fmt_si(peak, 'FLOP/s'):>16}   ridge "
              f"{d['ridge_point_flop_per_byte'][dt]:7.1f} FLOP/byte")
    print(f"  fp32 (FMA pipe)  {_fmt_si(d['fp32_peak_flop_per_s'], 'FLOP/s')}")
    print(f"  HBM achievable   {_fmt_si(d['hbm_achievable_bandwidth_bytes_per_s'], 'B/s')}")
    print(f"  shared memory    {_fmt_si(d['smem_aggregate_bandwidth_bytes_per_s'], 'B/s')}")
    print(f"  MUFU/XU          {_fmt_si(d['xu_peak_per_s'], 'op/s')}")
    if info["assumed"]:
        print(f"\nassumed (not sourced; ranges given): {', '.join(info['assumed'])}")
    return 0


def _ops(args) -> int:
    for name, cls in sorted(REGISTRY.items()):
        example = " ".join(f"{k}={v}" for k, v in cls.EXAMPLE.items())
        print(f"{name}  ({cls.__name__})   e.g. perfmodel op {name} {example} --hw h100")
        for key, p in cls.PARAMS.items():
            req = "required" if p.required else f"default {p.default!r}"
            unit = f" [{p.unit}]" if p.unit else ""
            print(f"    {key:20s} {p.expectation()}{unit}; {req}" + (f" — {p.doc}" if p.doc else ""))
    return 0


def _parse_assignments(items: Sequence[str]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise InputError(f"op parameter '{item}': expected key=value")
        key, value = item.split("=", 1)
        params[key.strip()] = yamlio.loads(value, f"parameter {key}") if value else None
    return params


def _op(args) -> int:
    hw = hardware(args.hw)
    o = op(args.name, **_parse_assignments(args.params))
    est = estimate(o.demand(hw), hw, args.level)
    if args.format == "json":
        print(json.dumps({"op": o.to_dict(), "hardware": hw.name, **est.to_dict(),
                          "details": {k: v for k, v in est.details.items()}}, indent=2,
                         default=str))
        return 0
    print(f"{o!r} on {hw.name} ({args.level})")
    print(f"  time      {est.time_s * 1e6:.4g} us   bound: {est.bound}   "
          f"{est.fraction_of_roofline:.0%} of roofline ({est.roofline_time_s * 1e6:.4g} us)")
    if est.flop:
        print(f"  achieved  {_fmt_si(est.achieved_flop_per_s, 'FLOP/s')}")
    print(f"  HBM       {_fmt_si(est.hbm_bytes, 'B')}  "
          f"({_fmt_si(est.hbm_bytes / est.time_s, 'B/s')})")
    rows = [[r, f"{t * 1e6:.4g}", f"{t / est.time_s:.0%}"]
            for r, t in sorted(est.resource_time_s.items(), key=lambda kv: -kv[1])]
    print(format_table(["resource", "time_us", "busy"], rows))
    parts = _kernel_parts(est.details)
    if parts:
        print(format_table(["kernel", "part", "time_us", "bound"],
                           [[str(i + 1), name, f"{t * 1e6:.4g}", bound]
                            for i, (name, t, bound) in enumerate(parts)]))
    shown = {k: v for k, v in est.details.items() if k != "parts"}
    if shown:
        print("  " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                               for k, v in shown.items()))
    return 0


def _kernel_parts(details: dict) -> list[tuple[str, float, str]]:
    """(name, time, bound) of each kernel of an op that runs several in sequence, flattened."""
    out = []
    for part in details.get("parts", ()):
        if part.get("parts"):
            out += _kernel_parts(part)
        else:
            name = part.get("part") or " ".join(str(part[k]) for k in ("kernel", "direction")
                                                 if k in part) or "kernel"
            out.append((name, part["time_s"], part["bound"]))
    return out


def _add_workload_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model options (when the file is a model)")
    g.add_argument("--phase", choices=PHASES)
    g.add_argument("--batch", type=int, default=1, help="sequences per step (per model replica)")
    g.add_argument("--seq", type=int, default=2048, help="prompt / training sequence length")
    g.add_argument("--context", type=int, help="decode: KV-cache length (default --seq)")
    g.add_argument("--tp", type=int, default=1, help="tensor-parallel GPUs")
    g.add_argument("--ep", type=int, default=1, help="expert-parallel GPUs")
    g.add_argument("--pp", type=int, default=1, help="pipeline stages")
    g.add_argument("--dp", type=int, default=1, help="data-parallel replicas (training)")
    g.add_argument("--dtype", default="bf16", help="GEMM dtype policy: bf16, fp8, mxfp8, nvfp4")
    g.add_argument("--microbatches", type=int, help="pipeline microbatches (default: up to 4·pp)")
    g.add_argument("--virtual-stages", type=int, default=1,
                   help="interleaved pipeline: model chunks per GPU (default 1)")


def _graph_from(args) -> OpGraph:
    """A graph file as is, or a model (file or built-in name) built with the model options."""
    path = Path(args.file)
    if path.is_file():
        raw = yamlio.load(path, "graph or model file")
        if not is_model_file(raw):
            return parse_graph(raw, str(path))
        model = parse_model(raw, str(path))
    elif args.file.lower() in list_models():
        model = load_model(args.file)
    else:
        raise InputError(f"{args.file}: no such graph or model file (built-in models: "
                         f"{', '.join(list_models())})")
    if not args.phase:
        raise InputError(f"{args.file} is a model: give --phase prefill|decode|train")
    return build_graph(model, args.phase, batch=args.batch, seq=args.seq, context=args.context,
                       tp=args.tp, ep=args.ep, pp=args.pp, dp=args.dp, dtype=args.dtype,
                       microbatches=args.microbatches, virtual_stages=args.virtual_stages,
                       hardware=args.hw)


def _predict(args) -> int:
    graph = _graph_from(args)
    hw = args.hw or graph.hardware
    if hw is None:
        raise InputError(f"{args.file}: no hardware: pass --hw NAME or add `hardware:` to the "
                         f"graph")
    pred = predict(graph, hw, args.level)
    text = {"json": pred.to_json, "csv": pred.to_csv,
            "table": lambda: prediction_table(pred, all_ops=args.all)}[args.format]()
    if args.output:
        Path(args.output).write_text(text if text.endswith("\n") else text + "\n")
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        print(text)
    if args.plot:
        from perfmodel.report.plots import plot_prediction
        plot_prediction(pred, args.plot)
        print(f"wrote {args.plot}", file=sys.stderr)
    return 0


def _build(args) -> int:
    graph = _graph_from(args)
    text = graph.dump()
    if args.output:
        Path(args.output).write_text(text)
        print(f"wrote {args.output} ({len(graph)} ops)", file=sys.stderr)
    else:
        print(text, end="")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="perfmodel", description="Analytical GPU performance model for AI "
                "workloads (Hopper, Blackwell).")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    hw = sub.add_parser("hw", help="hardware specs")
    hwsub = hw.add_subparsers(dest="hw_command", required=True, parser_class=_Parser)
    hwsub.add_parser("list", help="built-in hardware names and aliases").set_defaults(fn=_hw_list)
    show = hwsub.add_parser("show", help="a resolved spec with derived peaks")
    show.add_argument("name", help="name, alias, driver device name or spec path")
    show.add_argument("--format", choices=("table", "json"), default="table")
    show.set_defaults(fn=_hw_show)

    sub.add_parser("ops", help="the op vocabulary with parameters").set_defaults(fn=_ops)

    o = sub.add_parser("op", help="predict one op: perfmodel op gemm m=8192 n=8192 k=8192 "
                                  "dtype=bf16 --hw h100")
    o.add_argument("name")
    o.add_argument("params", nargs="*", help="key=value parameters (SPEC.md op vocabulary)")
    o.add_argument("--hw", required=True)
    o.add_argument("--level", choices=LEVELS, default="pipes")
    o.add_argument("--format", choices=("table", "json"), default="table")
    o.set_defaults(fn=_op)

    pr = sub.add_parser("predict", help="predict a graph file, or a model with workload options")
    pr.add_argument("file", help="graph file, model file or built-in model name")
    pr.add_argument("--hw", help="hardware name, alias or spec path (default: the graph's)")
    pr.add_argument("--level", choices=LEVELS, default="pipes")
    pr.add_argument("--format", choices=("table", "json", "csv"), default="table")
    pr.add_argument("--output", "-o", help="write to a file instead of stdout")
    pr.add_argument("--plot", help="also write breakdown / timeline / roofline charts (PNG)")
    pr.add_argument("--all", action="store_true", help="table: one row per op, not per role")
    _add_workload_options(pr)
    pr.set_defaults(fn=_predict)

    b = sub.add_parser("build", help="expand a model into its op graph (YAML)")
    b.add_argument("file", help="model file or built-in model name")
    b.add_argument("--output", "-o", help="graph file to write (default: stdout)")
    b.add_argument("--hw", help="hardware to record in the graph's `hardware:` key")
    _add_workload_options(b)
    b.set_defaults(fn=_build)

    from perfmodel.cli.moe import add_moe_parser
    from perfmodel.cli.overlap import add_overlap_parser
    from perfmodel.cli.validate import add_validate_parser
    add_validate_parser(sub)
    add_overlap_parser(sub)
    add_moe_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return args.fn(args)
    except InputError as e:
        for line in e.problems:
            print(f"perfmodel: error: {line}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
