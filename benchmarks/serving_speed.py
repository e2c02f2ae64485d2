"""Speed of the serving planner against issue 16's targets (a benchmark, not a test: nothing here
asserts a time).

    python benchmarks/serving_speed.py [--runs 3] [--quick]

Rows, each the median of `--runs` fresh processes (cold caches: what a user's command pays):
  cli             `perfmodel plan serve llama3-70b --hw H200 --gpus 8 --isl 1000 --osl 1000
                  --offline`, wall time of the whole process (target < 1 s);
  plan            `plan_serving("llama3-70b", "H200", tp=8)`: one deployment, all its batches
                  (target ≤ 50 ms), and `simulate` of one deployment (TP8, the CLI's offline
                  workload and request count), import excluded;
  search 8 / 64   `search_serving` over every TP × PP layout of 8 and 64 H200s (default worker
                  processes), import excluded (target ≤ 2 s).
Beside each: measured / target, and measured in units of `python -c pass` timed in the same
run, so a reader can tell a regression from a slow or busy machine (the machine's load average
is printed too).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perfmodel.report.tables import format_table  # noqa: E402

CLI = ("import sys; from perfmodel.cli.main import main; sys.argv[0] = 'perfmodel'; "
       "sys.exit(main())")
CLI_ARGS = ["plan", "serve", "llama3-70b", "--hw", "H200", "--gpus", "8", "--isl", "1000",
            "--osl", "1000", "--offline"]
# each snippet prints the seconds of its timed part (imports done before the clock starts)
PLAN = """
import time
from perfmodel.plan.serving import plan_serving
t = time.perf_counter()
plan_serving("llama3-70b", "H200", tp=8)
print(time.perf_counter() - t)
"""
SIMULATE = """
import time
from perfmodel.plan.search import search_serving
from perfmodel.plan.simulator import Workload
t = time.perf_counter()
search_serving("llama3-70b", "H200", 8, Workload("offline", isl=1000, osl=1000), tp=8, pp=1,
               jobs=1)
print(time.perf_counter() - t)
"""
SEARCH = """
import time
from perfmodel.plan.search import search_serving
from perfmodel.plan.simulator import Workload
t = time.perf_counter()
search_serving("llama3-70b", "H200", {gpus}, Workload("offline", isl=1000, osl=1000))
print(time.perf_counter() - t)
"""


def wall(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def inner(code: str) -> float:
    out = subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT,
                         capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1])


def median(fn, runs: int) -> float:
    return statistics.median(fn() for _ in range(runs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="fresh processes per row (median)")
    ap.add_argument("--quick", action="store_true", help="one run per row, no 64-GPU search")
    a = ap.parse_args()
    runs = 1 if a.quick else a.runs
    ref = median(lambda: wall([sys.executable, "-c", "pass"]), max(3, runs))
    rows = []

    def row(name: str, seconds: float, target: float | None) -> None:
        rows.append([name, f"{seconds:.3f}", "" if target is None else f"{target:g}",
                     "" if target is None else f"{seconds / target:.2f}", f"{seconds / ref:.1f}"])

    row("cli plan serve llama3-70b 8x H200 (wall)",
        median(lambda: wall([sys.executable, "-c", CLI, *CLI_ARGS]), runs), 1.0)
    row("plan_serving llama3-70b TP8 (one deployment)", median(lambda: inner(PLAN), runs), 0.05)
    row("simulate llama3-70b TP8 offline (one deployment)", median(lambda: inner(SIMULATE), runs),
        None)
    for gpus in (8,) if a.quick else (8, 64):
        row(f"search_serving llama3-70b {gpus}x H200",
            median(lambda: inner(SEARCH.format(gpus=gpus)), runs), 2.0)
    print(format_table(["figure", "seconds", "target", "/ target", "/ python -c pass"], rows))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\npython -c pass: {ref:.3f} s; {os.cpu_count()} CPUs, load average {load:.2f}; "
          f"medians of {runs} fresh process(es) each")


if __name__ == "__main__":
    main()
