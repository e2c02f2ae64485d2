"""Errors for bad user input, and the guard on results.

Every problem names the file, the key path and what was expected, so the CLI can print one line
per problem and exit 2 without a traceback (docs/cli.md "Exit codes"). A result that is not a
finite non-negative number is never returned (`check_result`: an InternalError, exit 1).
"""
from __future__ import annotations

from numbers import Real


class InputError(Exception):
    """One or more problems with user input (spec file, graph file, op parameters, names)."""

    def __init__(self, problems: list[str] | str):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


def where(file: str | None, path: str) -> str:
    """Format `file: key.path` for error messages; either part may be empty."""
    parts = [p for p in (file, path) if p]
    return ": ".join(parts) if parts else "<input>"


def show(value: object, limit: int = 60) -> str:
    """`repr(value)` for a message, short: a huge integer as its leading digits and exponent
    (1.000e+400, not 401 digits), anything else cut at `limit` characters."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**15:
        digits = str(abs(value))
        return f"{'-' if value < 0 else ''}{digits[0]}.{digits[1:4]}e+{len(digits) - 1}"
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def printable(line: str) -> str:
    """`line` safe to print as one line: control and format characters, line and paragraph
    separators (which `str.splitlines` and terminals break on: \\n, \\r, \\x1c-\\x1e, \\x85,
    \\u2028, ...) written as escapes; the text a user wrote may hold any of them."""
    import unicodedata
    return "".join(c if c == " " or unicodedata.category(c)[0] not in "CZ"
                   else ascii(c)[1:-1] for c in str(line))


_INF = float("inf")


class InternalError(RuntimeError):
    """A result perfmodel must never return: a time, rate or size that is not finite or is
    negative. A bug in the model, not bad input: the CLI exits 1 with its traceback (docs/cli.md
    "Exit codes") rather than print a NaN as a prediction."""


def check_result(what, values) -> None:
    """Refuse a result whose numbers (`values`: name → number or None; bools and other types
    pass) are not finite and non-negative: InternalError naming `what` (a string, or a function
    giving it, called only then) and the number. Called by the public planners and predictions
    on what they return (cheap: one comparison each)."""
    for name, v in values.items():
        kind = type(v)
        if kind is float or kind is int:
            if 0 <= v < _INF:  # (nan fails both comparisons)
                continue
        elif v is None or kind is bool or kind is str or not isinstance(v, Real) \
                or 0 <= v < _INF:  # numpy's numbers are Real too
            continue
        raise InternalError(f"{what() if callable(what) else what}: {name} = {v!r}: a result "
                            f"must be a finite, non-negative number (a bug in perfmodel, not in "
                            f"the input)")
