"""Predictions per second for each op type, and the speed figures of issue 17 against their
targets (a benchmark, not a test).

    python benchmarks/predict_speed.py [--hw H100-SXM] [--seconds 0.5] [--no-table]

`warm`: the same op predicted repeatedly (a model graph repeats each layer's ops). `cold`: a
distinct shape every call (sweeps over shapes). Predictions are memoized per (op parameters,
hardware, level) (perfmodel.schedule.op_entry), so "new object" (an equal op built again) is a
cache hit too; `cold` misses.

The figures: medians on this machine, each beside its target and the ratio (measured / target),
plus references measured in the same run (a Python function call; `python -c pass`; attention's
tile count row by row, tests/oracles.py) so a reader can tell a regression from a slow machine.
"""
from __future__ import annotations

import argparse
import itertools
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
    """Median wall time of a fresh Python process."""
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, *args], check=True, stdout=subprocess.DEVNULL,
                       cwd=ROOT)
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


def figures(hw) -> None:
    from perfmodel.ops.attention import tiles
    from tests.oracles import visited_by_rows

    rows = []

    def add(what: str, seconds: float, target: float | None, unit: float = 1e-6,
            label: str = "us") -> None:
        rows.append([what, f"{seconds / unit:,.2f} {label}",
                     f"{target / unit:,.4g} {label}" if target else "",
                     f"{seconds / target:.2f}x" if target else ""])

    call = median_s(lambda: None, number=100000)
    add("reference: a Python function call", call, None)

    gemm = pm.ops.Gemm(m=8192, n=8192, k=8192, dtype="bf16")
    pm.predict_op(gemm, hw)
    add("gemm predict_op warm (same op)", median_s(lambda: pm.predict_op(gemm, hw),
                                                    number=20000), 2e-6)
    add("gemm predict_op, equal op built again (hit)", median_s(
        lambda: pm.predict_op(pm.ops.Gemm(m=8192, n=8192, k=8192, dtype="bf16"), hw),
        number=2000), None)
    add("gemm predict_op cold (new shape)", each_new(
        lambda i: lambda: pm.predict_op(pm.ops.Gemm(m=8192 + i, n=8192, k=8192, dtype="bf16"),
                                        hw), runs=51), 25e-6)

    def attention(i, seq=4096, direction="fwd"):
        return pm.ops.op("attention", batch=1, heads=32, kv_heads=8, seq_q=seq + i,
                         head_dim=128, dtype="bf16", causal=True, direction=direction)
    add("attention fwd cold (4k)", each_new(lambda i: lambda: pm.predict_op(attention(i), hw),
                                            runs=31), None)
    fb = attention(0, direction="fwd+bwd")
    pm.predict_op(fb, hw)
    add("attention fwd+bwd warm", median_s(lambda: pm.predict_op(fb, hw), number=20000), 2e-6)
    add("attention fwd cold at 1M tokens", each_new(
        lambda i: lambda: pm.predict_op(attention(i, 1 << 20), hw), runs=31), 100e-6)
    add("  its tile count (closed form), 1M causal", median_s(
        lambda: tiles.visited.__wrapped__(1 << 20, 1 << 20, True, None, 128, 128),
        number=1000), None)
    add("  the same counted row by row (tests.oracles)", median_s(
        lambda: visited_by_rows(1 << 20, 1 << 20, True, None, 128, 128), runs=3), None)

    for tokens in (256, 4096, 32768):
        p = dict(pm.ops.Moe.EXAMPLE, tokens=tokens)
        pm.predict_op(pm.ops.op("moe", **p), hw)
        add(f"moe new object, same parameters ({tokens} tokens)",
            median_s(lambda: pm.predict_op(pm.ops.op("moe", **p), hw), number=50),
            100e-6 if tokens == 4096 else None)
    p = dict(pm.ops.Moe.EXAMPLE, tokens=4096)
    add("moe new expert shape, same routing (4096 tokens)", each_new(
        lambda i: lambda: pm.predict_op(pm.ops.op("moe", **{**p, "hidden": 2048 + 64 * i}), hw),
        runs=15), 100e-6)
    add("moe new routing (seed) (4096 tokens)", each_new(
        lambda i: lambda: pm.predict_op(pm.ops.op("moe", **{**p, "seed": 1000 + i}), hw),
        runs=5), 100e-6, 1e-3, "ms")

    shapes = [pm.ops.Gemm(m=m, n=4096, k=4096, dtype="bf16") for m in range(1, 1001)]
    t = time.perf_counter()
    pm.predict_ops(shapes, hw)
    add("predict_ops, 1,000 new gemm shapes, per op", (time.perf_counter() - t) / 1000, 3e-6)
    add("predict_ops, the same 1,000 again, per op",
        median_s(lambda: pm.predict_ops(shapes, hw), runs=5) / 1000, 3e-6)

    python = wall_s(["-c", "pass"])
    add("reference: python -c pass (wall)", python, None, 1e-3, "ms")
    add("import perfmodel (wall)", wall_s(["-c", "import perfmodel"]), 0.1 + python, 1e-3,
        "ms")
    add("perfmodel hw list (wall, python -m perfmodel.cli)",
        wall_s(["-m", "perfmodel.cli", "hw", "list"]), 0.1 + python, 1e-3, "ms")
    print(f"\nspeed figures on {hw.name} (medians; targets from issue 17, start-up targets are "
          f"100 ms over `python -c pass`)")
    print(format_table(["what", "measured", "target", "ratio"], rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hw", default="H100-SXM")
    ap.add_argument("--seconds", type=float, default=0.5)
    ap.add_argument("--no-table", action="store_true", help="the figures only")
    args = ap.parse_args()
    hw = pm.hardware(args.hw)
    if not args.no_table:
        table(hw, args.seconds)
    figures(hw)


if __name__ == "__main__":
    main()
