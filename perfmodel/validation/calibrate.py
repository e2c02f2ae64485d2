"""Calibration: fit the named constants on their rows, and judge them on rows they never saw.

    perfmodel calibrate                 # fit, cross-validate by source, write fitted.yaml and
                                        # perfmodel/accuracy.yaml, print the table
    perfmodel calibrate --check         # write nothing; exit 1 if either file is stale

The constants are perfmodel/fitted.yaml's, each fitted by its rule in
`perfmodel.validation.fit` on the rows the rule names and kept inside the range its entry
declares. This module adds the judgement:

Cross-validation, leave one source out. A source is one benchmark or paper figure: a row id
without its trailing number (`att-fa3p-fwd16`, `CUDNN-TRN`, `LIGER`). For every source holding a
row that some constant's rule selects, all constants are refitted with that source's rows
excluded (`fit.fit_all(exclude=...)`); a constant left without rows takes its prior
(`fit.PRIORS`: the datasheet value, or its range's midpoint). The source's rows are predicted
with those constants. A source no rule draws from is predicted with the full fit (holding it
out would change nothing). So every row is predicted by constants fitted without it and without
any row of its source, and the CV error is what a new benchmark of a known kind should expect.

Reported per op class and GPU, beside each other: the in-sample error (the full fit, fitted
rows included), the cross-validated error, and the plain datasheet roofline's; `fitted` counts
the rows of the class that some rule selected in the full fit.

Prediction intervals (`interval`): per op class and GPU architecture, the 10th and 90th
percentiles of the cross-validated log residuals log(measured / predicted) over at least
MIN_INTERVAL_ROWS rows (else over the architecture's rows of every class, else every row), an
80 % band [t·e^q10, t·e^q90] around a prediction t. perfmodel/accuracy.yaml holds them with
their row counts; `perfmodel.predict.predict_op` attaches the band to each Estimate and `perfmodel
op/predict --format json` reports it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np

from perfmodel import yamlio
from perfmodel.engine import estimate, resolve
from perfmodel.intervals import ACCURACY_PATH  # the file perfmodel.intervals reads
from perfmodel.report.progress import Progress
from perfmodel.report.tables import format_table
from perfmodel.validation import fit
from perfmodel.validation.measurements import PUBLISHED_CSVS, Case, load_cases

MIN_INTERVAL_ROWS = 5
QUANTILES = (10, 90)
README_BEGIN = "<!-- accuracy table: written by `perfmodel calibrate` -->"
README_END = "<!-- end of accuracy table -->"


def source_of(row_id: str) -> str:
    """The benchmark or figure a row comes from: its id without the trailing number."""
    return re.sub(r"-\d+[a-z]?$", "", row_id)


def kernel_cases() -> list[Case]:
    """Every published kernel row the model expresses (public, Blackwell attention, Blackwell
    measurements, AIConfigurator's TensorRT-LLM linears and fused MoE); our own GPU results are
    judged by `perfmodel validate`, not fitted here."""
    out = []
    for path in PUBLISHED_CSVS:
        out += load_cases(path)[0]
    return out


def predict_cases(cases: Iterable[Case], entries: dict[str, dict], level: str = "pipes"
                  ) -> dict[str, float]:
    """Row id -> predicted time under `entries`."""
    out = {}
    with fit.applied(entries) as values:
        hws: dict[int, object] = {}
        for c in cases:
            hw = hws.setdefault(id(c.hardware), fit.with_fitted(c.hardware, values))
            out[c.id] = estimate(resolve(c.op.demand(hw), hw, level), hw, level).time_s
    return out


def fitted_rows(entries: dict[str, dict]) -> set[str]:
    return {r for e in entries.values() for r in e["fitted_on"]}


@dataclass
class Calibration:
    """The full fit, and every row's in-sample, cross-validated and roofline predictions."""

    entries: dict[str, dict]
    cases: list[Case]
    in_sample: dict[str, float]
    cv: dict[str, float]
    roofline: dict[str, float]
    folds: dict[str, list[str]]        # refitted source -> the constants' fit rows it held

    def fitted(self) -> set[str]:
        return fitted_rows(self.entries)


def calibrate(progress: bool = False, serving: bool = True) -> Calibration:
    """Fit every constant (fit.fit_all), then cross-validate by source (module docstring).

    The folds refit with `serving=False` (fit.fit_all: the whole-system constants as written),
    so they do not wait for the full fit's serving and training fits, the slowest part of it:
    the kernel constants are fitted here first (fit_all with serving=False: the same kernel
    constants as the full fit, which runs the same code before its serving fits), they name
    the sources to refit, and the full fit and the folds then run side by side
    (_fits_and_folds). The sources the full fit names are the ones refitted: one it adds
    (none can while the whole-system rows are no kernel rows) is refitted after, one it drops
    is not judged held out. Every row's in-sample and roofline predictions run beside them too,
    under the kernel fit's constants; they stand where the full fit comes out equal to it (the
    whole-system constants as fitted.yaml holds them: `perfmodel calibrate --check` on a
    current tree) and are predicted again under the full fit's where it does not."""
    cases = kernel_cases()
    by_source: dict[str, list[Case]] = {}
    for c in cases:
        by_source.setdefault(source_of(c.id), []).append(c)
    kernel = fit.fit_all(serving=False)
    first = _refit_sources(kernel, by_source)
    entries = None if serving else kernel
    fold_of: dict[str, dict[str, float]] = {}
    whole: dict[str, dict[str, float]] = {}  # level -> every row's prediction under `kernel`
    bar = Progress(len(first) + (entries is None) + len(LEVELS), "cross-validating by source",
                   force=progress)
    tasks = _fits_and_folds([by_source[s] for s in sorted(first)], full=entries is None,
                            cases=cases, kernel=kernel)
    for k, got in tasks:
        if k is None:
            entries = got
        elif isinstance(k, str):
            whole[k] = got
        else:
            fold_of[sorted(first)[k]] = got
        bar.update()
    refit = _refit_sources(entries, by_source)
    for s in sorted(set(refit) - set(fold_of)):
        fold_of[s] = predict_cases(by_source[s], fit.fit_all(
            exclude=frozenset(c.id for c in by_source[s]), serving=False))
    if entries != kernel:  # the whole-system constants moved: the rows under the full fit
        whole = {level: predict_cases(cases, entries, level) for level in LEVELS}
    in_sample, roofline = whole["pipes"], whole["roofline"]
    cv = dict(in_sample)  # sources no rule draws from: the full fit never saw them
    for s in sorted(refit):
        cv.update(fold_of[s])
    return Calibration(entries, cases, in_sample, cv, roofline, refit)


def _refit_sources(entries: dict[str, dict], by_source: dict[str, list[Case]]
                   ) -> dict[str, list[str]]:
    """Source -> its rows that some constant of `entries` is fitted on, for the sources holding
    any (the sources a cross-validation refits without)."""
    used = fitted_rows(entries)
    refit = {s: sorted(c.id for c in cs if c.id in used) for s, cs in by_source.items()}
    return {s: ids for s, ids in refit.items() if ids}


# The levels every row is predicted at beside the folds: the in-sample error's and the
# roofline's
LEVELS = ("pipes", "roofline")
# What the forked workers read (set by _fits_and_folds, emptied after): the folds' held-out
# rows, every row and the kernel fit
_HELD: list[list[Case]] = []
_ALL: list[Case] = []
_KERNEL: dict[str, dict] = {}


def _task(k: int | str) -> tuple[int | str | None, dict]:
    """Task k of _fits_and_folds: -1 the full fit, (None, entries); a level of LEVELS, every
    row predicted at it under the kernel fit, (level, predictions); else fold k, every
    constant refitted without its held-out rows and those rows predicted, (k, predictions)."""
    if isinstance(k, str):
        return k, predict_cases(_ALL, _KERNEL, k)
    if k < 0:
        return None, fit.fit_all()
    held = _HELD[k]
    return k, predict_cases(held, fit.fit_all(exclude=frozenset(c.id for c in held),
                                              serving=False))


def _fits_and_folds(held: list[list[Case]], full: bool, cases: list[Case] = (),
                    kernel: dict[str, dict] | None = None):
    """(None, the full fit's entries) if `full`, (k, fold k's predictions) for each fold and,
    given `kernel`, (level, every row of `cases` predicted under it) for each of LEVELS, in
    forked workers where the machine has several CPUs (the search's default_jobs; each task
    fits from the fitted constants alone, so it gives the same numbers in any process, in any
    order: tests/test_fitted.py test_fit_does_not_depend_on_the_values_it_replaces).
    A worker starts with what this process memoized (fit._SUBFITS: the kernel fit just run),
    so a fold whose held-out rows leave a sub-fit's inputs as they were skips it."""
    import multiprocessing
    from perfmodel.plan.search import default_jobs
    global _HELD, _ALL, _KERNEL
    # the slowest first: the full fit (its serving and training fits), then the folds with
    # the most rows to refit without; the whole-row predictions (about a second each) last,
    # filling the time the workers' last folds leave
    order = ([-1] * full + sorted(range(len(held)), key=lambda k: -len(held[k]))
             + list(LEVELS) * (kernel is not None))
    n = default_jobs(len(order))
    _HELD, _ALL, _KERNEL = held, list(cases), kernel or {}
    try:
        if n <= 1:
            for k in order:
                yield _task(k)
            return
        with multiprocessing.get_context("fork").Pool(n) as pool:
            yield from pool.imap_unordered(_task, order)
    finally:
        _HELD, _ALL, _KERNEL = [], [], {}


def _ape(pred: float, meas: float) -> float:
    return abs(pred / meas - 1.0)


def summary_rows(cal: Calibration) -> list[dict]:
    """Per (op class, GPU): n, fitted rows, in-sample / CV / roofline MAPE, CV bias; and an
    overall row."""
    groups: dict[tuple[str, str], list[Case]] = {}
    for c in cal.cases:
        groups.setdefault((c.op_class, c.hardware.name), []).append(c)
    used = cal.fitted()
    rows = []
    for (cls, gpu), cs in sorted(groups.items()):
        rows.append(_row(cls, gpu, cs, cal, used))
    rows.append(_row("all", "all", cal.cases, cal, used))
    return rows


def _row(cls: str, gpu: str, cs: list[Case], cal: Calibration, used: set[str]) -> dict:
    def mape(pred: dict[str, float]) -> float:
        return float(np.mean([_ape(pred[c.id], c.measured_time_s) for c in cs]))
    return {"op_class": cls, "hardware": gpu, "n": len(cs),
            "fitted": sum(c.id in used for c in cs),
            "in_sample_mape": mape(cal.in_sample), "cv_mape": mape(cal.cv),
            "roofline_mape": mape(cal.roofline),
            "cv_bias": float(np.mean([cal.cv[c.id] / c.measured_time_s - 1 for c in cs])),
            "sources": sorted({source_of(c.id) for c in cs})}


def intervals(cal: Calibration) -> dict:
    """Quantiles of the CV log residuals log(measured / predicted) per (op class,
    architecture), per architecture, and overall (module docstring)."""
    def band(cs: list[Case]) -> dict:
        r = np.log([c.measured_time_s / cal.cv[c.id] for c in cs])
        q = np.percentile(r, QUANTILES)
        return {"n": len(cs), "log_q10": round(float(q[0]), 4), "log_q90": round(float(q[1]), 4)}
    by_class: dict[tuple[str, str], list[Case]] = {}
    by_arch: dict[str, list[Case]] = {}
    for c in cal.cases:
        by_class.setdefault((c.op_class, c.hardware.architecture), []).append(c)
        by_arch.setdefault(c.hardware.architecture, []).append(c)
    return {"quantiles": list(QUANTILES),
            "by_class": {f"{k[0]}@{k[1]}": band(cs) for k, cs in sorted(by_class.items())
                         if len(cs) >= MIN_INTERVAL_ROWS},
            "by_architecture": {a: band(cs) for a, cs in sorted(by_arch.items())
                                if len(cs) >= MIN_INTERVAL_ROWS},
            "all": band(cal.cases)}


def accuracy_document(cal: Calibration) -> dict:
    """perfmodel/accuracy.yaml's content: the summary table and the intervals."""
    rows = []
    for r in summary_rows(cal):
        rows.append({k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()})
    return {"script": "perfmodel calibrate", "min_interval_rows": MIN_INTERVAL_ROWS,
            "folds": {s: ids for s, ids in sorted(cal.folds.items())},
            "table": rows, "intervals": intervals(cal)}


HEADER = """\
# Accuracy of the kernel model: written by `perfmodel calibrate`, not by hand.
# table: per op class and GPU, MAPE in sample (full fit), cross-validated by source (each
# source's rows predicted by constants refitted without them) and of the plain roofline.
# intervals: quantiles of the CV log residuals log(measured / predicted), the prediction bands
# perfmodel.predict attaches to estimates (perfmodel/validation/calibrate.py).
"""


def render(doc: dict) -> str:
    import json
    lines = [HEADER]
    for key in ("script", "min_interval_rows"):
        lines.append(f"{key}: {json.dumps(doc[key])}\n")
    lines.append("folds:\n")
    for s, ids in doc["folds"].items():
        lines.append(f"  {json.dumps(s)}: {json.dumps(ids)}\n")
    lines.append("table:\n")
    for r in doc["table"]:
        lines.append(f"  - {json.dumps(r)}\n")
    iv = doc["intervals"]
    lines.append("intervals:\n")
    lines.append(f"  quantiles: {json.dumps(iv['quantiles'])}\n")
    for part in ("by_class", "by_architecture"):
        lines.append(f"  {part}:\n")
        for k, v in iv[part].items():
            lines.append(f"    {json.dumps(k)}: {json.dumps(v)}\n")
    lines.append(f"  all: {json.dumps(iv['all'])}\n")
    return "".join(lines)


def load_accuracy(path: Path | None = None) -> dict | None:
    """The written accuracy document, or None where none was written yet."""
    path = path or ACCURACY_PATH
    if not path.is_file():
        return None
    return yamlio.loads(path.read_text(), str(path))


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def table_text(doc: dict, markdown: bool = False) -> str:
    """The summary table (plain text, or Markdown for the README)."""
    head = ["op class", "GPU", "n", "fitted", "in-sample MAPE", "CV MAPE", "CV bias",
            "roofline MAPE"]
    body = [[r["op_class"], r["hardware"], r["n"], r["fitted"], pct(r["in_sample_mape"]),
             pct(r["cv_mape"]), f"{100 * r['cv_bias']:+.1f}%", pct(r["roofline_mape"])]
            for r in doc["table"]]
    if not markdown:
        return format_table(head, body)
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(x) for x in row) + " |" for row in body]
    return "\n".join(out)


def readme_block(doc: dict) -> str:
    folds = ", ".join(f"{s} ({len(ids)} fit rows)" for s, ids in doc["folds"].items())
    return (f"{README_BEGIN}\n{table_text(doc, markdown=True)}\n\n"
            f"Sources refitted without their own rows: {folds}. Every other source's rows "
            f"informed no constant.\n{README_END}")


def update_readme(text: str, doc: dict) -> str:
    """`text` (the README) with its accuracy block replaced by a fresh one."""
    if README_BEGIN not in text or README_END not in text:
        raise ValueError("README has no accuracy block markers")
    head, rest = text.split(README_BEGIN, 1)
    _, tail = rest.split(README_END, 1)
    return head + readme_block(doc) + tail
