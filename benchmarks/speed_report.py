"""Every figure of issue 17's speed table, now against its target, in one run (a benchmark, not a
test: nothing here asserts a time).

    python benchmarks/speed_report.py [--hw H100-SXM] [--quick]

Each row: the median measured now, the target, measured / target, and the same time in units of
a reference measured in this run, so a reader can tell a regression from a slow or busy machine:
`flop-loop` is one iteration of a plain Python loop doing a float multiply-add on locals (~25 ns
on an idle core), the start-up rows are over `python -c pass`. "before" rows time the path the
scalar GEMM replaced (the engine's numpy tile search, perfmodel.engine.resolve + estimate) in the
same run.
"""
from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import perfmodel as pm  # noqa: E402
from perfmodel.report.tables import format_table  # noqa: E402
# the timing helpers of the per-op benchmark (this folder is on sys.path when run as a script)
from predict_speed import each_new as _each_new, median_s, wall_s  # noqa: E402
from perfmodel.ops.attention import tiles  # noqa: E402
from tests.oracles import visited_by_rows  # noqa: E402

COUNTER = itertools.count(1)


def each_new(make, runs: int) -> float:
    """predict_speed.each_new with this report's one counter: no two figures repeat a shape."""
    return _each_new(make, runs, COUNTER)


def flop_loop_s(n: int = 200_000) -> float:
    """One iteration of a plain Python loop with a float multiply-add on locals."""
    def loop():
        a, b, c = 1.5, 2.5, 0.0
        for _ in range(n):
            c = a * b + c
        return c
    return median_s(loop, runs=5) / n


def engine_gemm(op, hw):
    """The path predict_op took for a GEMM before the scalar one: the engine's numpy search."""
    from perfmodel.engine import estimate, resolve
    return estimate(resolve(op.demand(hw), hw, "pipes"), hw, "pipes")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hw", default="H100-SXM")
    ap.add_argument("--quick", action="store_true", help="fewer runs, no 32k-token MoE")
    args = ap.parse_args()
    hw = pm.hardware(args.hw)
    runs = 15 if args.quick else 51
    rows = []
    ref = flop_loop_s()

    def add(what, seconds, target=None, unit=1e-6, label="us", per=ref, per_label="flop-loop"):
        rows.append([what, f"{seconds / unit:,.2f} {label}",
                     f"{target / unit:,.4g} {label}" if target else "",
                     f"{seconds / target:.2f}x" if target else "",
                     f"{seconds / per:,.0f} {per_label}" if per else ""])

    add("reference: plain-Python flop-loop iteration", ref, None, 1e-9, "ns", per=None)
    add("reference: a Python function call", median_s(lambda: None, number=100000), None,
        1e-9, "ns")

    # --- GEMM -------------------------------------------------------------------------------
    gemm = pm.ops.Gemm(m=8192, n=8192, k=8192, dtype="bf16")
    pm.predict_op(gemm, hw)
    add("gemm predict_op warm (same op)",
        median_s(lambda: pm.predict_op(gemm, hw), number=20000), 2e-6)
    add("gemm predict_op, equal op built again (hit)", median_s(
        lambda: pm.predict_op(pm.ops.Gemm(m=8192, n=8192, k=8192, dtype="bf16"), hw),
        number=2000), None)
    add("gemm predict_op cold (new shape, 8k cube)", each_new(
        lambda i: lambda: pm.predict_op(pm.ops.Gemm(m=8192 + i, n=8192, k=8192, dtype="bf16"),
                                        hw), runs), 25e-6)
    add("  before: the engine's numpy search, same shapes", each_new(
        lambda i: lambda: engine_gemm(pm.ops.Gemm(m=8192 + i, n=8192, k=8192, dtype="bf16"),
                                      hw), runs), 25e-6)
    add("gemm predict_op cold (new shape, m < 128: split-K)", each_new(
        lambda i: lambda: pm.predict_op(pm.ops.Gemm(m=1 + i % 127, n=4096 + 16 * i, k=4096,
                                                    dtype="bf16"), hw), runs), 25e-6)
    add("  before: the engine's numpy search, same kind", each_new(
        lambda i: lambda: engine_gemm(pm.ops.Gemm(m=1 + i % 127, n=4096 + 16 * i, k=4096,
                                                  dtype="bf16"), hw), runs), 25e-6)
    shapes = [pm.ops.Gemm(m=m, n=5120, k=5120 + next(COUNTER), dtype="bf16")
              for m in range(1, 1001)]
    t = time.perf_counter()
    pm.predict_ops(shapes, hw)
    add("predict_ops, 1,000 new gemm shapes, per op", (time.perf_counter() - t) / 1000, 3e-6)
    add("predict_ops, the same 1,000 again, per op",
        median_s(lambda: pm.predict_ops(shapes, hw), runs=5) / 1000, 3e-6)
    # the array path itself (perfmodel.batch): a table of 1,000 new shapes, no Estimates
    import numpy as np
    rows_m = np.arange(1, 1001)
    add("gemm_batch, 1,000 new shapes as arrays (m 1..1000: split-K), per op", each_new(
        lambda i: lambda: pm.gemm_batch(hw, m=rows_m, n=5120, k=5120 + 1000 * (i + 1),
                                            dtype="bf16"), 5) / 1000, 3e-6)
    big = np.random.default_rng(0).integers(1024, 16384, (3, 1000))
    add("gemm_batch, 1,000 new shapes as arrays (m, n, k 1k..16k), per op", each_new(
        lambda i: lambda: pm.gemm_batch(hw, m=big[0], n=big[1], k=big[2] + i + 1,
                                            dtype="bf16"), 5) / 1000, 3e-6)

    # --- attention --------------------------------------------------------------------------
    def attention(i, seq=4096, direction="fwd"):
        return pm.ops.op("attention", batch=1, heads=32, kv_heads=8, seq_q=seq + i,
                         head_dim=128, dtype="bf16", causal=True, direction=direction)
    add("attention fwd cold (4k)", each_new(lambda i: lambda: pm.predict_op(attention(i), hw),
                                            runs), None)
    fb = attention(0, direction="fwd+bwd")
    pm.predict_op(fb, hw)
    add("attention fwd+bwd warm", median_s(lambda: pm.predict_op(fb, hw), number=20000), 2e-6)
    add("attention fwd cold at 1M tokens", each_new(
        lambda i: lambda: pm.predict_op(attention(i, 1 << 20), hw), runs), 100e-6)
    add("  its tile count (closed form), 1M causal", median_s(
        lambda: tiles.visited.__wrapped__(1 << 20, 1 << 20, True, None, 128, 128),
        number=1000), None)
    add("  the same counted row by row (tests.oracles)", median_s(
        lambda: visited_by_rows(1 << 20, 1 << 20, True, None, 128, 128), runs=3), None)

    # --- MoE --------------------------------------------------------------------------------
    for tokens in ((256, 4096) if args.quick else (256, 4096, 32768)):
        p = dict(pm.ops.Moe.EXAMPLE, tokens=tokens)
        pm.predict_op(pm.ops.op("moe", **p), hw)
        add(f"moe new object, same parameters ({tokens} tokens)",
            median_s(lambda: pm.predict_op(pm.ops.op("moe", **p), hw), number=50),
            100e-6 if tokens == 4096 else None)
    p = dict(pm.ops.Moe.EXAMPLE, tokens=4096)
    add("moe new expert shape, same routing (4096 tokens)", each_new(
        lambda i: lambda: pm.predict_op(pm.ops.op("moe", **{**p, "hidden": 2048 + 64 * i}), hw),
        15), 100e-6)
    add("moe new routing (seed) (4096 tokens)", each_new(
        lambda i: lambda: pm.predict_op(pm.ops.op("moe", **{**p, "seed": 1000 + i}), hw),
        5), 100e-6, 1e-3, "ms")

    # --- graphs and plans -------------------------------------------------------------------
    g = pm.build_graph(pm.load_model("llama3-70b"), phase="decode", batch=64, context=8192,
                       tp=8)
    pm.predict(g, hw)
    add(f"llama3-70b decode graph ({len(g)} nodes) predict warm",
        median_s(lambda: pm.predict(g, hw), runs=7), 2e-3, 1e-3, "ms")
    from perfmodel.plan.serving import plan_serving
    plan = lambda: plan_serving("llama3-70b", "H200", tp=8, dtype="fp8")  # noqa: E731
    plan()
    add("plan_serving, 21 batches, warm", median_s(plan, runs=5), 15e-3, 1e-3, "ms")

    # --- sweep ------------------------------------------------------------------------------
    from perfmodel import sweep
    space = sweep.parse_space({"grids": [{"op": "gemm", "hw": hw.name,
                                          "m": {"range": [1, 4000, 1]}, "n": 6144,
                                          "k": 7000 + next(COUNTER), "dtype": "bf16"}]},
                              "<bench>")
    t = time.perf_counter()
    n = sum(len(rows_) for rows_ in sweep.chunks(space))
    add(f"perfmodel sweep in-process, {n:,} new gemm points, per point",
        (time.perf_counter() - t) / n, None)

    # --- start-up ---------------------------------------------------------------------------
    python = wall_s(["-c", "pass"])
    add("reference: python -c pass (wall)", python, None, 1e-3, "ms", per=None)
    add("import perfmodel (wall)", wall_s(["-c", "import perfmodel"]), 0.1 + python, 1e-3,
        "ms", per=python, per_label="x python -c pass")
    add("perfmodel hw list (wall)", wall_s(["-m", "perfmodel.cli", "hw", "list"]),
        0.1 + python, 1e-3, "ms", per=python, per_label="x python -c pass")

    print(f"issue 17 speed figures on {hw.name} (medians; start-up targets are 100 ms over "
          f"`python -c pass`)")
    print(format_table(["what", "measured", "target", "vs target", "in reference units"],
                       rows))


if __name__ == "__main__":
    main()
