"""`perfmodel predict FILE|MODEL`: schedule a graph (or a model's step) on one GPU and print
the per-op table, JSON or CSV, optionally with charts."""
from __future__ import annotations

import sys
from pathlib import Path

from perfmodel.cli.workload import add_workload_options, graph_from
from perfmodel.engine import LEVELS
from perfmodel.errors import InputError
from perfmodel.predict import predict
from perfmodel.report.tables import prediction_table


def register(sub) -> None:
    pr = sub.add_parser("predict", help="predict a graph file, or a model with workload options")
    pr.add_argument("file", help="graph file, model file or built-in model name")
    pr.add_argument("--hw", help="hardware name, alias or spec path (default: the graph's)")
    pr.add_argument("--level", choices=LEVELS, default="pipes")
    pr.add_argument("--format", choices=("table", "json", "csv"), default="table")
    pr.add_argument("--output", "-o", help="write to a file instead of stdout")
    pr.add_argument("--plot", help="also write breakdown / timeline / roofline charts (PNG)")
    pr.add_argument("--all", action="store_true", help="table: one row per op, not per role")
    add_workload_options(pr)
    pr.set_defaults(fn=run_predict)


def run_predict(args) -> int:
    graph = graph_from(args)
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
