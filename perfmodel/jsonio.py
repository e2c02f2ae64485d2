"""Reading JSON inputs: one reader (bytes → UTF-8 → size and depth limits → parse) for every
JSON document perfmodel takes — Hugging Face config.json files, SOL-ExecBench definitions and
workload.jsonl lines, the JSON cells of the SOL workloads CSV, recorded MoE expert loads — beside
`perfmodel.yamlio`, whose limits and one-line errors it shares.

Python's `json` module takes more than JSON and fails in ways that are not input errors, so each
document is checked before and while it is parsed:
  * bytes must be UTF-8 (`yamlio.read_text`, whose error names the line and column);
  * at most MAX_BYTES of text: the largest real inputs are a few MB;
  * nesting at most yamlio.MAX_DEPTH levels, counted before parsing: the C decoder recurses once
    per level, and 3,000 nested `[` raise RecursionError, not a syntax error;
  * numbers must be finite: `NaN`, `Infinity` (not JSON, but Python writes and reads them) and
    a literal that overflows a float (`1e400` parses as inf) are refused; an integer literal of
    more than 4,300 digits (Python's int conversion limit) is one line too, not a ValueError.
    Integers of any other size parse exactly: whoever reads a value checks its bounds and names
    its key;
  * a key written twice in one object is refused (the last one silently won), as in YAML.
Every problem is an InputError of one line naming the file (and line and column where the
parser gives them).
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from perfmodel import yamlio
from perfmodel.errors import InputError, show

# Text of one JSON document: the largest real inputs (a workload.jsonl of a few thousand lines,
# SGLang's expert-load dumps) are a few MB
MAX_BYTES = 64 << 20
MAX_DEPTH = yamlio.MAX_DEPTH

# a string literal (escapes included) or one bracket: strings are skipped whole, so brackets
# inside them do not count towards the depth
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.S)


def _position(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    return f"line {line}, column {pos - (text.rfind(chr(10), 0, pos) + 1) + 1}"


def _check_depth(text: str, file: str) -> None:
    """Refuse nesting deeper than MAX_DEPTH, found by a linear scan (no recursion)."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return  # cannot nest deeper than its brackets (the common, small document)
    depth = 0
    for m in _TOKENS.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise InputError(f"{file}: nested deeper than {MAX_DEPTH} levels at "
                                 f"{_position(text, m.start())}")
        elif c in "]}":
            depth -= 1


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (expected a finite number)")


def _float(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(f"number {text[:40]} is out of range (at most ~1.8e308)")
    return v


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {show(k)}; each key may appear once in an object")
        out[k] = v
    return out


def loads(text: str, file: str = "<string>") -> Any:
    """Parse JSON text (module docstring: limits, finite numbers, one-line errors naming
    `file`)."""
    if len(text) > MAX_BYTES:
        raise InputError(f"{file}: {len(text):,} characters of JSON; expected at most "
                         f"{MAX_BYTES:,}")
    _check_depth(text, file)
    try:
        return json.loads(text, parse_constant=_constant, parse_float=_float,
                          object_pairs_hook=_object)
    except json.JSONDecodeError as e:
        raise InputError(f"{file}: not JSON ({e.msg} at line {e.lineno}, column {e.colno})") \
            from None
    except ValueError as e:  # a hook's refusal, or int()'s digit limit (no position given)
        why = yamlio.one_line(e)
        if "digits" in why and "integer" in why:
            why = "an integer literal of more than 4,300 digits"
        raise InputError(f"{file}: not JSON: {why}") from None
    except RecursionError:  # cannot happen below MAX_DEPTH; kept as the last line of defence
        raise InputError(f"{file}: nested too deeply to read") from None


def load(path: str | Path, what: str = "JSON file") -> Any:
    """Read and parse a JSON input file (`yamlio.read_text`: readable, gzip where `.gz`,
    UTF-8; then `loads`)."""
    return loads(yamlio.read_text(path, what), str(Path(path)))
