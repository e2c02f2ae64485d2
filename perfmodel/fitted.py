"""The model's fitted constants: perfmodel/fitted.yaml, read once at import and checked strictly.

    from perfmodel import fitted
    fitted.value("attention.softmax_overlap.fa3")      # 0.218
    fitted.CONSTANTS["attention.cta_round_trips"].fitted_on

fitted.yaml is written by `python -m perfmodel.validation.fit`, never by hand: each entry holds
the value, the range its meaning allows, what it means, the rows it was fitted on and the rule
that selects them. Ops read the values into module constants at import, so predictions never look
them up. A core module: it imports only perfmodel.errors, perfmodel.yamlio and the stdlib.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfmodel import yamlio
from perfmodel.errors import InputError, where

PATH = Path(__file__).resolve().with_name("fitted.yaml")
SCRIPT = "python -m perfmodel.validation.fit"
REQUIRED = ("value", "range", "meaning", "fitted_on", "rule", "script")
OPTIONAL = ("rms_log_error",)


@dataclass(frozen=True)
class Constant:
    """One fitted constant as fitted.yaml holds it."""

    key: str
    value: float
    range: tuple[float, float]
    meaning: str
    fitted_on: tuple[str, ...]
    rule: str
    script: str
    rms_log_error: float | None = None


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _check_entry(key: str, raw: Any, file: str, problems: list[str]) -> Constant | None:
    at = where(file, key)
    if not isinstance(raw, dict):
        problems.append(f"{at}: expected a mapping {{{', '.join(REQUIRED)}}}, "
                        f"got {type(raw).__name__}")
        return None
    n = len(problems)
    for k in raw:
        if k not in REQUIRED + OPTIONAL:
            problems.append(f"{at}.{k}: unknown key (expected one of "
                            f"{', '.join(REQUIRED + OPTIONAL)})")
    for k in REQUIRED:
        if k not in raw:
            problems.append(f"{at}.{k}: missing required key")
    value, rng = raw.get("value"), raw.get("range")
    if "value" in raw and not _is_number(value):
        problems.append(f"{at}.value: expected a number, got {value!r}")
    if "range" in raw and not (isinstance(rng, list) and len(rng) == 2
                               and all(_is_number(x) for x in rng) and rng[0] <= rng[1]):
        problems.append(f"{at}.range: expected [lo, hi] numbers with lo <= hi, got {rng!r}")
    elif _is_number(value) and isinstance(rng, list) and not rng[0] <= value <= rng[1]:
        problems.append(f"{at}.value: {value!r} out of range [{rng[0]:g}, {rng[1]:g}]")
    for k in ("meaning", "rule", "script"):
        if k in raw and not (isinstance(raw[k], str) and raw[k].strip()):
            problems.append(f"{at}.{k}: expected a non-empty string, got {raw[k]!r}")
    rows = raw.get("fitted_on")
    if "fitted_on" in raw and not (isinstance(rows, list) and rows
                                   and all(isinstance(r, str) and r for r in rows)
                                   and len(set(rows)) == len(rows)):
        problems.append(f"{at}.fitted_on: expected a non-empty list of distinct row ids, "
                        f"got {rows!r}")
    rms = raw.get("rms_log_error")
    if "rms_log_error" in raw and not (_is_number(rms) and rms >= 0):
        problems.append(f"{at}.rms_log_error: expected a number >= 0, got {rms!r}")
    if len(problems) > n:
        return None
    return Constant(key, float(value), (float(rng[0]), float(rng[1])), raw["meaning"],
                    tuple(rows), raw["rule"], raw["script"],
                    None if rms is None else float(rms))


def parse(raw: Any, file: str = "") -> dict[str, Constant]:
    """Validate parsed fitted.yaml data; raises InputError listing every problem."""
    if not isinstance(raw, dict) or not raw:
        raise InputError(f"{where(file, '')}: expected a mapping of constant name -> "
                         f"{{{', '.join(REQUIRED)}}}, got {type(raw).__name__}")
    problems: list[str] = []
    out = {}
    for key, entry in raw.items():
        if not isinstance(key, str):
            problems.append(f"{where(file, str(key))}: expected a constant name (a string)")
            continue
        got = _check_entry(key, entry, file, problems)
        if got is not None:
            out[key] = got
    if problems:
        raise InputError(problems)
    return out


def load(path: str | Path = PATH) -> dict[str, Constant]:
    """Load and validate a fitted-constants file (fitted.yaml unless told otherwise)."""
    return parse(yamlio.load(path, "fitted constants"), str(path))


CONSTANTS: dict[str, Constant] = load()


def value(key: str) -> float:
    """The fitted value of `key` (an InputError naming fitted.yaml if there is none)."""
    try:
        return CONSTANTS[key].value
    except KeyError:
        raise InputError(f"{PATH}: {key}: no such fitted constant (has: "
                         f"{', '.join(CONSTANTS)}; `{SCRIPT}` writes them)") from None


def value_or_nan(key: str) -> float:
    """The fitted value of `key`, NaN until `python -m perfmodel.validation.fit` has first
    written it: for module constants the fit sets before it predicts with them."""
    return CONSTANTS[key].value if key in CONSTANTS else math.nan


def fitted_rows() -> dict[str, tuple[str, ...]]:
    """Row id -> the constants fitted on it, in file order."""
    rows: dict[str, tuple[str, ...]] = {}
    for key, c in CONSTANTS.items():
        for r in c.fitted_on:
            rows[r] = rows.get(r, ()) + (key,)
    return rows
