"""Measured vs predicted: per-row errors and per (op class, GPU) summaries.

Error is signed relative error (predicted − measured) / measured. Summaries report n, MAPE,
median and max absolute error, bias (mean signed error), and the same MAPE for the plain
datasheet roofline on the same rows. Rows that informed a constant are summarized apart
(`fitted`) and never counted as validation.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from statistics import median
from typing import Iterable

from perfmodel.demand import Demand
from perfmodel.engine import estimate, resolve

from perfmodel.validation.measurements import Case


@dataclass(frozen=True)
class Comparison:
    case: Case
    predicted_time_s: float
    roofline_time_s: float
    bound: str
    # the demand that ran (the op's on case.hardware, resolved at `level`): kept so that
    # validate --plot's roofline panels reuse it instead of building and resolving every op
    # again; not part of the comparison's value (equality, hash, repr, to_dict)
    demand: Demand | None = field(default=None, compare=False, repr=False)
    level: str | None = field(default=None, compare=False, repr=False)

    @property
    def error(self) -> float:
        return self.predicted_time_s / self.case.measured_time_s - 1.0

    @property
    def roofline_error(self) -> float:
        return self.roofline_time_s / self.case.measured_time_s - 1.0

    def to_dict(self) -> dict:
        c = self.case
        return {"id": c.id, "op_class": c.op_class, "hardware": c.hardware.name,
                "library": c.library, "measured_time_s": c.measured_time_s,
                "predicted_time_s": self.predicted_time_s, "error": self.error,
                "roofline_time_s": self.roofline_time_s, "roofline_error": self.roofline_error,
                "bound": self.bound, "fitted": c.fitted}


# Below this many rows compare() predicts in this process; above it, in forked workers (one per
# CPU, perfmodel.plan.search.worker_count): `perfmodel validate` predicts ~3,200 rows, ~1.3-1.5 s
# on one core; returning the demands costs ~60 ms, and each worker repeats the lazy imports
# (scipy.special ~0.3 s) and warms its own caches, so two workers take ~1.15 s.
PARALLEL_MIN_CASES = 500
_WORK: tuple[list[Case], str] = ([], "pipes")  # the rows and level the forked workers share


def _predicted(c: Case, level: str) -> tuple[float, float, str, Demand]:
    """(time at `level`, roofline time, bound, the resolved demand) of one row."""
    d = resolve(c.op.demand(c.hardware), c.hardware, level)
    est = estimate(d, c.hardware, level)
    return est.time_s, estimate(d, c.hardware, "roofline").time_s, est.bound, d


def _share(k_of_n: tuple[int, int]) -> list[tuple]:
    """Worker k of n: rows k, k + n, ... (interleaved, so the costly op classes spread)."""
    k, n = k_of_n
    cases, level = _WORK
    return [(i, *_predicted(cases[i], level)) for i in range(k, len(cases), n)]


def compare(cases: Iterable[Case], level: str = "pipes", jobs: int | None = None
            ) -> list[Comparison]:
    """Every row predicted at `level` (and at the roofline), in row order. `jobs`: worker
    processes (default: one per CPU on Linux, for PARALLEL_MIN_CASES rows or more; 1: this
    process). Each row's prediction depends on nothing but its op and GPU, so the result is the
    same in any process and any order."""
    global _WORK
    cases = list(cases)
    n = 1
    if jobs is not None or len(cases) >= PARALLEL_MIN_CASES:
        from perfmodel.plan.search import worker_count
        n = worker_count(jobs, len(cases))
    if n <= 1:
        return [Comparison(c, *_predicted(c, level), level) for c in cases]
    import multiprocessing
    _WORK = (cases, level)
    try:
        with multiprocessing.get_context("fork").Pool(n) as pool:
            shares = pool.map(_share, [(k, n) for k in range(n)])
    finally:
        _WORK = ([], "pipes")
    out: list[Comparison | None] = [None] * len(cases)
    for share in shares:
        for i, time_s, roof_s, bound, d in share:
            out[i] = Comparison(cases[i], time_s, roof_s, bound, d, level)
    return out  # type: ignore[return-value]


def summarize(comparisons: list[Comparison], group_by=None) -> list[dict]:
    """One row per (op class, hardware, judged|fitted), or per `group_by(case)` (a tuple of
    strings, e.g. kernel family and dtype) within those."""
    groups: dict[tuple, list[Comparison]] = {}
    for c in comparisons:
        key = (c.case.op_class, c.case.hardware.name, "fitted" if c.case.fitted else "judged")
        if group_by is not None:
            key += tuple(group_by(c.case))
        groups.setdefault(key, []).append(c)
    rows = []
    for key, cs in sorted(groups.items()):
        errs = [abs(c.error) for c in cs]
        rows.append({"op_class": key[0], "hardware": key[1], "rows": key[2],
                     **({"group": key[3:]} if group_by is not None else {}), "n": len(cs),
                     "mape": sum(errs) / len(errs), "median_ape": median(errs),
                     "max_ape": max(errs), "bias": sum(c.error for c in cs) / len(cs),
                     "roofline_mape": sum(abs(c.roofline_error) for c in cs) / len(cs)})
    return rows
