"""`perfmodel` command line (docs/cli.md).

Exit codes: 0 success; 2 bad input (one line per problem on stderr, naming file, key path and
expectation; never a traceback); 1 internal error.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from perfmodel.errors import InputError, printable

# Every command, in `perfmodel --help` order: each module (perfmodel.cli.<command>) registers its
# own subparser. A run imports only its command's module (the others' imports would cost start-up
# time: numpy, the op models, the planners); help and usage errors import them all.
COMMANDS = ("hw", "models", "ops", "op", "predict", "build", "validate", "calibrate", "overlap",
            "moe", "plan", "sol", "sweep")


def package_version() -> str:
    """The installed distribution's version (its metadata), else the source's: the version in
    the checkout's pyproject.toml (run without installing)."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("perfmodel")
    except PackageNotFoundError:
        import re
        from pathlib import Path
        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        try:
            m = re.search(r'^version\s*=\s*"([^"]+)"', pyproject.read_text(encoding="utf-8"),
                          re.M)
        except OSError:
            m = None
        return m.group(1) if m else "unknown (not installed)"


class _VersionAction(argparse.Action):
    """`--version`, looked up only when asked: reading the distribution's metadata
    (importlib.metadata scans the installed distributions) costs every other run start-up
    time."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="show the version and exit"):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"perfmodel {package_version()}")
        parser.exit()


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as bad input (exit 2) in our one-line style."""

    def error(self, message: str):
        raise InputError(f"usage: {message} (see `{self.prog} --help`)")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or, given the arguments of a run, of its command alone."""
    p = _Parser(prog="perfmodel", description="Analytical GPU performance model for AI "
                "workloads (Hopper, Blackwell).")
    p.add_argument("--version", action=_VersionAction)
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
        for line in e.problems:  # one line each, whatever characters the input held
            print(f"perfmodel: error: {printable(line)}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
