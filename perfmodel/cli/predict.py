"""`perfmodel predict FILE|MODEL`: schedule a graph (or a model's step) on one GPU and print
the per-op table, JSON or CSV, optionally with charts."""
from __future__ import annotations

import json
import sys

from perfmodel.cli.format import (add_sm_clock_option, check_output, resolve_hardware,
                                  write_output, writing)
from perfmodel.cli.workload import add_workload_options, read_input, warn
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


# A step longer than this is outside physical sense for one GPU's step (warned, still printed)
DAY_S = 86400.0


def run_predict(args) -> int:
    if args.output:
        check_output(args.output, "--output")
    if args.plot:
        check_output(args.plot, "--plot", plot=True)
    graph, model, workload, notes = read_input(args)
    warnings = list(notes)
    hw = args.hw or graph.hardware
    if hw is None:
        raise InputError(f"{args.file}: no hardware: pass --hw NAME or add `hardware:` to the "
                         f"graph")
    pred = predict(graph, resolve_hardware(hw, args.sm_clock), args.level)
    fit = None
    if model is not None:  # built from a model: does the deployment fit in memory?
        fit = memory_fit(model, pred.hardware, workload)
        if not fit.fits:
            warnings.append(f"{model.name} {workload.phase} on {pred.hardware.name}: "
                            f"{fit.summary()}")
    if pred.total_time_s > DAY_S:
        warnings.append(f"the step takes {pred.total_time_s / DAY_S:.3g} days on one GPU: "
                        f"outside physical sense for one step (check the sizes)")
    warn(warnings)

    def to_json() -> str:
        extra = {"memory": fit.to_dict()} if fit is not None else {}
        return json.dumps({**pred.to_dict(), **extra, "warnings": warnings}, indent=2)
    text = {"json": to_json, "csv": pred.to_csv,
            "table": lambda: prediction_table(pred, all_ops=args.all)}[args.format]()
    if args.output:
        write_output(args.output, text if text.endswith("\n") else text + "\n", "--output")
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        print(text)
    if args.plot:
        from perfmodel.report.plots import plot_prediction
        with writing(args.plot, "--plot"):
            plot_prediction(pred, args.plot)
        print(f"wrote {args.plot}", file=sys.stderr)
    return 0
