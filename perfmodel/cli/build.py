"""`perfmodel build MODEL`: expand a model's step into its op graph (YAML)."""
from __future__ import annotations

import sys

from perfmodel.cli.format import check_output, resolve_hardware, write_output
from perfmodel.cli.workload import add_workload_options, read_input, warn
from perfmodel.errors import InputError


def register(sub) -> None:
    b = sub.add_parser("build", help="expand a model into its op graph (YAML)")
    b.add_argument("file", help="model file or built-in model name")
    b.add_argument("--output", "-o", help="graph file to write (default: stdout)")
    b.add_argument("--hw", help="hardware to record in the graph's `hardware:` key")
    add_workload_options(b)
    b.set_defaults(fn=run_build)


def run_build(args) -> int:
    if args.output:
        check_output(args.output, "--output")
    if args.hw is not None:  # the name recorded must resolve when the graph is predicted
        try:
            resolve_hardware(args.hw, None)
        except InputError as e:
            raise InputError([f"--hw: {p}" for p in e.problems]) from None
    inp = read_input(args)
    warn(inp.warnings)
    graph = inp.graph
    text = graph.dump()
    if args.output:
        write_output(args.output, text, "--output")
        print(f"wrote {args.output} ({len(graph)} ops)", file=sys.stderr)
    else:
        print(text, end="")
    return 0
