"""`perfmodel` command line (docs/cli.md).

Exit codes: 0 success; 2 bad input (one line per problem on stderr, naming file, key path and
expectation; never a traceback); 1 internal error.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from perfmodel.errors import InputError

COMMANDS = ("hw", "models", "ops", "op", "predict", "build", "validate", "calibrate", "overlap",
            "moe", "plan", "sol")


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as bad input (exit 2) in our one-line style."""

    def error(self, message: str):
        raise InputError(f"usage: {message} (see `{self.prog} --help`)")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    p = _Parser(prog="perfmodel", description="Analytical GPU performance model for AI "
                "workloads (Hopper, Blackwell).")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    first = next((a for a in (argv or ()) if not a.startswith("-")), None)
    for command in (first,) if first in COMMANDS else COMMANDS:
        importlib.import_module(f"perfmodel.cli.{command}").register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = build_parser(argv).parse_args(argv)
        return args.fn(args)
    except InputError as e:
        for line in e.problems:
            print(f"perfmodel: error: {line}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
