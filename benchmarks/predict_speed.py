"""Predictions per second for each op type (a benchmark, not a test).

    python benchmarks/predict_speed.py [--hw H100-SXM] [--seconds 0.5]

`warm`: the same op predicted repeatedly (a model graph repeats each layer's ops; GEMM memoizes
its kernel search per shape). `cold`: a distinct shape every call (sweeps over shapes).
"""
from __future__ import annotations

import argparse
import itertools
import time

import perfmodel as pm
from perfmodel.report.tables import format_table

BASE = {name: cls.EXAMPLE for name, cls in pm.ops.REGISTRY.items()}
GROW = {name: cls.SIZE_PARAMS[0] for name, cls in pm.ops.REGISTRY.items()}


def rate(fn, seconds: float) -> float:
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        fn()
        n += 1
    return n / (time.perf_counter() - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hw", default="H100-SXM")
    ap.add_argument("--seconds", type=float, default=0.5)
    args = ap.parse_args()
    hw = pm.hardware(args.hw)
    rows = []
    for name, params in BASE.items():
        op = pm.ops.op(name, **params)
        warm = rate(lambda: pm.predict_op(op, hw), args.seconds)
        counter = itertools.count(1)
        key = GROW[name]

        def cold():
            p = dict(params)
            p[key] = type(p[key])(p[key] + next(counter))
            pm.predict_op(pm.ops.op(name, **p), hw)

        rows.append([name, f"{warm:,.0f}", f"{1e6 / warm:.1f}", f"{rate(cold, args.seconds):,.0f}"])
    print(f"predictions per second on {hw.name} (this machine, one core)")
    print(format_table(["op", "warm/s", "warm us/op", "cold/s (distinct shapes)"], rows))


if __name__ == "__main__":
    main()
