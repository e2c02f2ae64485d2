"""Which SOL-ExecBench problems perfmodel maps, and a cross-check of the published bounds.

For every workload of the CSV: the mapping's status (direct, approximate, none), its
SOLAR-convention bound on SOLAR's own B200 arch file (`solar.B200_SOLAR`, plus the published
table's 0.4 µs floor where its rows carry one) against the published `T_SOL`, and a verdict:

* `agree`: within 5 % (and 0.06 µs on the rows with the floor: those values are rounded to
  0.1 µs); the arch constants (MAC and DRAM rates) carry 4–5 digits;
* `copied`: the problem's published rows are the rows of another problem, value for value
  (a reference error of the published table);
* `below_io`: the published bound is below the time to read every input and write every output
  once at peak DRAM bandwidth, so it is not a lower bound. Where a simple change to the byte
  count reproduces it, the explanation names it: FP32 tensors counted at 2 bytes, bool tensors
  at 0, a GEMM's activation (A) read left out, or one named input left out;
* `fp4_pair`: an NVFP4 problem whose published bound matches its MACs halved (a packed FP4 pair
  counted as one MAC; ±the block-scale einsum of K/16), below the NVFP4 tensor time;
* `above`: the published bound exceeds ours: SOLAR's graph holds more MACs or bytes than this
  mapping (intermediates, einsums the definition's tensors do not reveal) — or the mapping,
  where approximate, misses work;
* `below`: under ours but not under the I/O time: ours counts more tensor-core MACs than SOLAR.

The conventions agree where the mapping is direct and the published value is not flagged as a
defect (`copied`, `below_io`, `fp4_pair`); those workloads must agree, and `summary` reports how
many do and the largest disagreement among them.
"""
from __future__ import annotations

import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from perfmodel.sol import problems as problems_mod
from perfmodel.sol.mapping import Mapped, map_workload
from perfmodel.sol.problems import Workload
from perfmodel.sol.solar import B200_SOLAR, SolarArch, published_floor_s, solar_bound

REL_TOL = 0.05
ABS_TOL_S = 0.06e-6
VERDICTS = ("agree", "copied", "below_io", "fp4_pair", "above", "below")
DEFECTS = ("copied", "below_io", "fp4_pair")


@dataclass
class WorkloadCheck:
    workload: Workload
    mapped: Mapped
    ours_s: float          # SOLAR-convention bound + the published floor
    io_s: float            # every input and output once at peak DRAM bandwidth + floor
    published_s: float
    verdict: str
    explanation: str = ""

    @property
    def ratio(self) -> float:
        return self.ours_s / self.published_s


@dataclass
class ProblemCheck:
    problem: str
    status: str
    workloads: list[WorkloadCheck] = field(default_factory=list)

    @property
    def first(self) -> WorkloadCheck:
        return self.workloads[0]

    @property
    def verdict(self) -> str:
        counts = Counter(w.verdict for w in self.workloads)
        return max(VERDICTS, key=lambda v: (counts[v], -VERDICTS.index(v)))

    @property
    def explanation(self) -> str:
        hits = Counter(w.explanation for w in self.workloads
                       if w.verdict == self.verdict and w.explanation)
        return hits.most_common(1)[0][0] if hits else ""

    @property
    def ratios(self) -> list[float]:
        return [w.ratio for w in self.workloads]

    @property
    def standins(self) -> list[str]:
        out: list[str] = []
        for w in self.workloads:
            for s in w.mapped.standins:
                if s not in out:
                    out.append(s)
        return out

    @property
    def reason(self) -> str:
        return next((w.mapped.reason for w in self.workloads if w.mapped.reason), "")


def _tol(published: float, floor: float) -> float:
    """5 %, and half the published table's 0.1 µs rounding on its rows with the floor."""
    return max(REL_TOL * published, ABS_TOL_S if floor else 0.0)


def _bound_s(m: Mapped, arch: SolarArch, floor: float, scale=None, drop=(),
             macs_scale: float = 1.0) -> float:
    dram = 0.0
    for n, b in m.io_bytes.items():
        if n in drop:
            continue
        dram += b * (scale(m.workload.tensors[n]) if scale else 1.0)
    macs = {p: (n * macs_scale if p == "nvfp4" else n) for p, n in m.macs.items()}
    return solar_bound(macs, dram, arch).time_s + floor


def check_workload(w: Workload, arch: SolarArch = B200_SOLAR,
                   copied_from: str | None = None) -> WorkloadCheck:
    m = map_workload(w)
    floor = published_floor_s(w.subset, w.op_kind)
    ours = _bound_s(m, arch, floor)
    io = m.dram_bytes / arch.dram_bytes_per_s + floor
    pub = float(w.published_sol_s or 0.0)
    tol = _tol(pub, floor)
    close = (lambda t: abs(t - pub) <= tol)
    if m.status == "none":
        # no graph, but the bytes and the convention's memory bound still compare
        ours = io
    if close(ours):
        return WorkloadCheck(w, m, ours, io, pub, "agree")
    if copied_from:
        return WorkloadCheck(w, m, ours, io, pub, "copied",
                             f"published rows are {copied_from}'s, value for value")
    if pub < io - tol:
        return WorkloadCheck(w, m, ours, io, pub, "below_io", _explain_below_io(m, arch, floor,
                                                                                 close))
    if m.macs.get("nvfp4"):
        for label, s in (("a packed FP4 pair counted as one MAC", 0.5),
                         ("a packed FP4 pair as one MAC, plus the block-scale einsum (K/16)",
                          0.5 + 1 / 16)):
            if close(_bound_s(m, arch, floor, macs_scale=s)):
                return WorkloadCheck(w, m, ours, io, pub, "fp4_pair", label)
        if pub < ours - tol:
            return WorkloadCheck(w, m, ours, io, pub, "fp4_pair",
                                 "below the NVFP4 tensor time of the problem's MACs")
    if pub > ours:
        return WorkloadCheck(w, m, ours, io, pub, "above",
                             "SOLAR counts more MACs or bytes than this graph")
    return WorkloadCheck(w, m, ours, io, pub, "below",
                         "SOLAR's reference has fewer tensor-core MACs than this graph")


def _explain_below_io(m: Mapped, arch: SolarArch, floor: float, close) -> str:
    w = m.workload
    fp32 = (lambda t: 0.5 if t.kind == "fp32" else 1.0)
    boolean = (lambda t: 0.0 if t.kind == "bool" else 1.0)
    if any(t.kind == "fp32" for t in w.tensors.values()) and close(
            _bound_s(m, arch, floor, scale=fp32)):
        return "FP32 tensors counted at 2 bytes"
    if any(t.kind == "bool" for t in w.tensors.values()) and close(
            _bound_s(m, arch, floor, scale=boolean)):
        return "bool tensors counted at 0 bytes"
    if w.op_kind == "gemm" and "A" in w.inputs and close(_bound_s(m, arch, floor, drop=("A",))):
        return "the GEMM's activation (A) read left out"
    for n in sorted(w.inputs, key=lambda n: -m.io_bytes.get(n, 0.0)):
        if m.io_bytes.get(n) and close(_bound_s(m, arch, floor, drop=(n,))):
            return f"input {n} left out"
    for n in sorted(w.outputs, key=lambda n: -m.io_bytes.get(n, 0.0)):
        if m.io_bytes.get(n) and close(_bound_s(m, arch, floor, drop=(n,))):
            return f"output {n} left out"
    return "no single byte-count change reproduces it"


def duplicates(by_problem: dict[str, list[Workload]]) -> dict[str, str]:
    """Problems whose published rows repeat an earlier problem's, value for value."""
    seen: dict[tuple, str] = {}
    out = {}
    for pid, wl in by_problem.items():
        key = tuple(round((w.published_sol_s or 0) * 1e12) for w in wl)
        if len(set(key)) > 1 and key in seen:  # a constant list (all floors) is no evidence
            out[pid] = seen[key]
        seen.setdefault(key, pid)
    return out


def check(workloads: list[Workload], arch: SolarArch = B200_SOLAR) -> list[ProblemCheck]:
    """The cross-check of every workload, grouped by problem."""
    by = problems_mod.by_problem(workloads)
    copies = duplicates(by)
    out = []
    rank = {"direct": 0, "approximate": 1, "none": 2}
    for pid, wl in by.items():
        rows = [check_workload(w, arch, copies.get(pid)) for w in wl]
        status = max((r.mapped.status for r in rows), key=rank.__getitem__)
        out.append(ProblemCheck(pid, status, rows))
    return out


def standin_kind(text: str) -> str:
    """A stand-in's kind: its text without tensor names and numbers."""
    t = re.sub(r"^[\w.]+ \[[\d, ]+\]", "W", text)
    t = re.sub(r"^[\w.]+: ", "", t)
    t = re.sub(r"\b\d+(\.\d+)?\b", "N", t)
    t = re.sub(r"\bof [A-Za-z]\w*_[\w.]*( out)?\b", "of X", t)
    return t


def summary(checks: list[ProblemCheck]) -> dict:
    """Counts of problems and workloads by status, stand-in kinds, unmapped reasons, verdicts,
    and the agreement where the conventions agree."""
    statuses = ("direct", "approximate", "none")
    problems = Counter(c.status for c in checks)
    workloads = Counter(w.mapped.status for c in checks for w in c.workloads)
    kinds: Counter = Counter()
    for c in checks:
        if c.status == "approximate":
            for k in {standin_kind(s) for s in c.standins if not s.startswith("FP32 matmuls")}:
                kinds[k] += 1
    verdicts = Counter(w.verdict for c in checks for w in c.workloads)
    comparable = [w for c in checks for w in c.workloads
                  if w.mapped.status == "direct" and w.verdict not in DEFECTS]
    agree = [w for w in comparable if w.verdict == "agree"]
    worst = max(comparable, key=lambda w: abs(w.ratio - 1.0), default=None)
    ratios = [w.ratio for w in comparable]
    return {
        "problems": {s: problems[s] for s in statuses} | {"total": len(checks)},
        "workloads": {s: workloads[s] for s in statuses} | {"total": sum(workloads.values())},
        "standins": dict(kinds.most_common()),
        "unmapped": {c.problem: c.reason for c in checks if c.status == "none"},
        "verdicts": {v: verdicts[v] for v in VERDICTS},
        "problem_verdicts": dict(Counter(c.verdict for c in checks)),
        "conventions_agree": {
            "workloads": len(comparable), "agree": len(agree),
            "median_ratio": statistics.median(ratios) if ratios else None,
            "largest_disagreement": None if worst is None else {
                "workload": worst.workload.name, "ours_s": worst.ours_s,
                "published_s": worst.published_s, "ratio": worst.ratio,
                "verdict": worst.verdict, "explanation": worst.explanation},
        },
    }


def read(path: str | Path | None = None) -> list[Workload]:
    """The workloads of a SOL-ExecBench CSV, each with its published bound (the cross-check
    divides by it); at least one (a table of nothing checks nothing)."""
    from perfmodel.errors import InputError
    out = problems_mod.read_csv(path, published=True)
    if not out:
        raise InputError(f"{path or problems_mod.DEFAULT_CSV}: no workloads (expected a row per "
                         f"workload after the header)")
    return out
