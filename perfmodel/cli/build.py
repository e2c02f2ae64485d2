"""`perfmodel build MODEL`: expand a model's step into its op graph (YAML)."""
from __future__ import annotations

import sys
from pathlib import Path

from perfmodel.cli.workload import add_workload_options, graph_from


def register(sub) -> None:
    b = sub.add_parser("build", help="expand a model into its op graph (YAML)")
    b.add_argument("file", help="model file or built-in model name")
    b.add_argument("--output", "-o", help="graph file to write (default: stdout)")
    b.add_argument("--hw", help="hardware to record in the graph's `hardware:` key")
    add_workload_options(b)
    b.set_defaults(fn=run_build)


def run_build(args) -> int:
    graph = graph_from(args)
    text = graph.dump()
    if args.output:
        Path(args.output).write_text(text)
        print(f"wrote {args.output} ({len(graph)} ops)", file=sys.stderr)
    else:
        print(text, end="")
    return 0
