"""Errors for bad user input.

Every problem names the file, the key path and what was expected, so the CLI can print one line
per problem and exit 2 without a traceback (docs/cli.md "Exit codes").
"""
from __future__ import annotations


class InputError(Exception):
    """One or more problems with user input (spec file, graph file, op parameters, names)."""

    def __init__(self, problems: list[str] | str):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


def where(file: str | None, path: str) -> str:
    """Format `file: key.path` for error messages; either part may be empty."""
    parts = [p for p in (file, path) if p]
    return ": ".join(parts) if parts else "<input>"
