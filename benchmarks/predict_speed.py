"""Predictions per second for each op type (a benchmark, not a test); the speed figures of
issue 17 against their targets are benchmarks/speed_report.py's, which borrows this file's
timing helpers.

    python benchmarks/predict_speed.py [--hw H100-SXM] [--seconds 0.5]

`warm`: the same op predicted repeatedly (a model graph repeats each layer's ops). `cold`: a
distinct shape every call (sweeps over shapes). Predictions are memoized per (op parameters,
hardware, level) (perfmodel.schedule.op_entry), so "new object" (an equal op built again) is a
cache hit too; `cold` misses.
"""
from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.oracles (the row-by-row tile count)

import perfmodel as pm  # noqa: E402
from perfmodel.report.tables import format_table  # noqa: E402

BASE = {name: cls.EXAMPLE for name, cls in pm.ops.REGISTRY.items()}
GROW = {name: cls.SIZE_PARAMS[0] for name, cls in pm.ops.REGISTRY.items()}


def rate(fn, seconds: float) -> float:
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        fn()
        n += 1
    return n / (time.perf_counter() - start)


def median_s(fn, runs: int = 7, number: int = 1) -> float:
    """Median over `runs` of the mean time of `number` calls."""
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        out.append((time.perf_counter() - t) / number)
    return statistics.median(out)


def each_new(make, runs: int = 9, counter=None) -> float:
    """Median time of `make(i)()` over distinct i: a new shape (or object) per call (building
    the callable is not timed). `counter`: where i comes from (a fresh count by default; share
    one across calls so no two calls repeat a shape)."""
    counter = counter if counter is not None else itertools.count(1)
    out = []
    for _ in range(runs):
        f = make(next(counter))
        t = time.perf_counter()
        f()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def wall_s(args: list[str], runs: int = 5) -> float:
    """Median wall time of a fresh Python process, its modules' bytecode cached as on a user's
    machine: PYTHONDONTWRITEBYTECODE (set in some sandboxes and CI images) is dropped, and an
    untimed first run writes the cache, else every run recompiles the package (~0.2 s)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out = []
    for i in range(runs + 1):
        t = time.perf_counter()
        subprocess.run([sys.executable, *args], check=True, stdout=subprocess.DEVNULL,
                       cwd=ROOT, env=env)
        if i:
            out.append(time.perf_counter() - t)
    return statistics.median(out)


def table(hw, seconds: float) -> None:
    rows = []
    for name, params in BASE.items():
        op = pm.ops.op(name, **params)
        pm.predict_op(op, hw)  # first use: lazy imports (grouped_gemm's scipy.stats)
        warm = rate(lambda: pm.predict_op(op, hw), seconds)
        counter = itertools.count(1)
        key = GROW[name]

        def cold():
            p = dict(params)
            p[key] = type(p[key])(p[key] + next(counter))
            pm.predict_op(pm.ops.op(name, **p), hw)

        rows.append([name, f"{warm:,.0f}", f"{1e6 / warm:.2f}",
                     f"{rate(cold, seconds):,.0f}"])
    print(f"predictions per second on {hw.name} (this machine, one core)")
    print(format_table(["op", "warm/s", "warm us/op", "cold/s (distinct shapes)"], rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hw", default="H100-SXM")
    ap.add_argument("--seconds", type=float, default=0.5)
    args = ap.parse_args()
    hw = pm.hardware(args.hw)
    table(hw, args.seconds)


if __name__ == "__main__":
    main()
