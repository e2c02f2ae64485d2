"""`perfmodel predict FILE|MODEL`: schedule a graph (or a model's step) on one GPU and print
the per-op table, JSON or CSV, optionally with charts."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from perfmodel.cli.format import add_sm_clock_option, resolve_hardware
from perfmodel.cli.workload import add_workload_options, read_input
from perfmodel.engine import LEVELS
from perfmodel.errors import InputError
from perfmodel.plan.memory import memory_fit
from perfmodel.predict import predict
from perfmodel.report.tables import prediction_table


def register(sub) -> None:
    pr = sub.add_parser("predict", help="predict a graph file, or a model with workload options")
    pr.add_argument("file", help="graph file, model file or built-in model name")
    pr.add_argument("--hw", help="hardware name, alias or spec path (default: the graph's)")
    add_sm_clock_option(pr)
    pr.add_argument("--level", choices=LEVELS, default="pipes")
    pr.add_argument("--format", choices=("table", "json", "csv"), default="table")
    pr.add_argument("--output", "-o", help="write to a file instead of stdout")
    pr.add_argument("--plot", help="also write breakdown / timeline / roofline charts (PNG)")
    pr.add_argument("--all", action="store_true", help="table: one row per op, not per role")
    add_workload_options(pr)
    pr.set_defaults(fn=run_predict)


def run_predict(args) -> int:
    graph, model, workload = read_input(args)
    hw = args.hw or graph.hardware
    if hw is None:
        raise InputError(f"{args.file}: no hardware: pass --hw NAME or add `hardware:` to the "
                         f"graph")
    pred = predict(graph, resolve_hardware(hw, args.sm_clock), args.level)
    fit = None
    if model is not None:  # built from a model: does the deployment fit in memory?
        fit = memory_fit(model, pred.hardware, workload)
        if not fit.fits:
            print(f"perfmodel: warning: {model.name} {workload.phase} on "
                  f"{pred.hardware.name}: {fit.summary()}", file=sys.stderr)

    def to_json() -> str:
        if fit is None:
            return pred.to_json()
        return json.dumps({**pred.to_dict(), "memory": fit.to_dict()}, indent=2)
    text = {"json": to_json, "csv": pred.to_csv,
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
