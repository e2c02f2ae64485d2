"""`perfmodel` command line (docs/cli.md).

Exit codes: 0 success; 2 bad input (one line per problem on stderr, naming file, key path and
expectation; never a traceback); 1 internal error.
"""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

from perfmodel.cli import (build, calibrate, hw, models, moe, op, ops, overlap, plan, predict,
                           sol, validate)
from perfmodel.errors import InputError

# Every command, in `perfmodel --help` order: each module registers its own subparser.
COMMANDS = (hw, models, ops, op, predict, build, validate, calibrate, overlap, moe, plan,
            sol)


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as bad input (exit 2) in our one-line style."""

    def error(self, message: str):
        raise InputError(f"usage: {message} (see `{self.prog} --help`)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="perfmodel", description="Analytical GPU performance model for AI "
                "workloads (Hopper, Blackwell).")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for command in COMMANDS:
        command.register(sub)
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
