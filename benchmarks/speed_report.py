"""Every figure of issue 17's and issue 43's speed tables, now against its target, in one run (a
benchmark, not a test: nothing here asserts a time).

    python benchmarks/speed_report.py [--hw H100-SXM] [--quick] [--issue 17|43|all] [--suite]

Issue 43 ("speed where users wait") rows: the cold GEMM, the 405B training step predicted by the
CLI beyond start-up, three `plan serve` searches, `calibrate --check`, `validate --plot`,
`sweep --count` of a 10^14-point space and, with --suite, the test suite (`pytest -q`, minutes).
The CLI rows are wall times of fresh processes (medians); "beyond start-up" rows subtract
`perfmodel hw list` (the interpreter and `import perfmodel`) measured in the same run.

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
import os
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
    ap.add_argument("--issue", choices=("17", "43", "all"), default="all",
                    help="which issue's table (default both)")
    ap.add_argument("--suite", action="store_true",
                    help="issue 43: also time the test suite (pytest -q: minutes)")
    args = ap.parse_args()
    if args.issue in ("17", "all"):
        issue17(args)
    if args.issue in ("43", "all"):
        if args.issue == "all":
            print()
        issue43(args)


def cli_s(args: list[str], runs: int) -> float:
    """Median wall time of `python -m perfmodel.cli ARGS` in a fresh process (output
    discarded)."""
    return wall_s(["-m", "perfmodel.cli", *args], runs)


# a design space of 10^14 points: two integer ranges of 10^7 values (docs/cli.md "sweep")
SPACE_1E14 = """grids:
  - op: gemm
    hw: H100
    m: {range: [1, 10000000, 1]}
    n: {range: [1, 10000000, 1]}
    k: 4096
    dtype: bf16
"""


def issue43(args) -> None:
    """Issue 43's table: where users wait."""
    import tempfile
    runs = 3 if args.quick else 5
    rows = []
    ref = flop_loop_s()

    def add(what, seconds, target, unit=1e-3, label="ms", note=""):
        rows.append([what, f"{seconds / unit:,.4g} {label}", f"{target / unit:,.4g} {label}",
                     f"{seconds / target:.2f}x", "met" if seconds <= target else "NOT met",
                     note])

    hw = pm.hardware(args.hw)
    pm.predict_op(pm.ops.Gemm(m=8192, n=8192, k=8192, dtype="bf16"), hw)
    gemm = each_new(lambda i: lambda: pm.predict_op(
        pm.ops.Gemm(m=8192 + i, n=8192, k=8192, dtype="bf16"), hw), 51 if args.quick else 201)
    add("GEMM predict_op, cold (new shape, 8k cube)", gemm, 25e-6, 1e-6, "us",
        f"{gemm / ref:,.0f} flop-loops of {ref * 1e9:.0f} ns (~25 ns idle)")
    split = each_new(lambda i: lambda: pm.predict_op(
        pm.ops.Gemm(m=1 + i % 127, n=4096 + 16 * i, k=4096, dtype="bf16"), hw),
        51 if args.quick else 201)
    add("GEMM predict_op, cold (m < 128: split-K)", split, 25e-6, 1e-6, "us",
        f"{split / ref:,.0f} flop-loops")

    # the 405B training step: the command's own work in a fresh process once its modules are
    # imported (an 8B command first: the imports; then the op caches cleared: every op of the
    # 405B graph predicted cold, its model and GPU files read), median over fresh processes;
    # then a fresh process's wall over `hw list` (start-up: interpreter, imports, bytecode)
    predict = ["predict", "llama3-405b", "--phase", "train", "--batch", "16", "--seq", "8192",
               "--tp", "8", "--pp", "8", "--hw", "H100"]
    import subprocess
    probe = (
        "import contextlib, io, time, perfmodel as pm\n"
        "from perfmodel.cli.main import main\n"
        "def run(a):\n"
        "    with contextlib.redirect_stdout(io.StringIO()), "
        "contextlib.redirect_stderr(io.StringIO()):\n"
        "        main(a)\n"
        "run(['predict', 'llama3-8b', '--phase', 'train', '--batch', '2', '--seq', '1024', "
        "'--tp', '2', '--pp', '2', '--hw', 'H200'])\n"
        "pm.clear_cache()\n"
        "t = time.perf_counter()\n"
        f"run({predict!r})\n"
        "print(time.perf_counter() - t)\n")
    own = sorted(float(subprocess.run([sys.executable, "-c", probe], cwd=ROOT, check=True,
                                      capture_output=True, text=True).stdout)
                 for _ in range(runs))[runs // 2]
    add("predict llama3-405b train TP8 PP8: the command beyond start-up (cold op caches)", own,
        30e-3)
    start = cli_s(["hw", "list"], runs)
    fresh = cli_s(predict, runs)
    rows.append(["  its fresh process over `hw list` (imports: numpy, the op models)",
                 f"{(fresh - start) * 1e3:,.4g} ms", "", "", "",
                 f"wall {fresh * 1e3:.0f} ms, `hw list` {start * 1e3:.0f} ms"])

    serve = ["plan", "serve"]
    add("plan serve llama3-70b --hw H200 --gpus 8 --isl 1000 --osl 1000 --offline",
        cli_s(serve + ["llama3-70b", "--hw", "H200", "--gpus", "8", "--isl", "1000",
                       "--osl", "1000", "--offline"], runs), 1.0, 1.0, "s")
    with tempfile.TemporaryDirectory() as tmp:
        add("plan serve qwen3-30b-a3b --hw B200 --gpus 8 --engine sglang --dtype fp8 "
            "--sweep --plot", cli_s(serve + ["qwen3-30b-a3b", "--hw", "B200", "--gpus", "8",
                                            "--engine", "sglang", "--dtype", "fp8", "--sweep",
                                            "--plot", str(Path(tmp) / "pareto.png")],
                                    max(1, runs - 2)), 5.0, 1.0, "s")
        add("plan serve deepseek-v3 --hw B200 --gpus 16",
            cli_s(serve + ["deepseek-v3", "--hw", "B200", "--gpus", "16"], max(1, runs - 2)),
            2.0, 1.0, "s")
        add("calibrate --check", cli_s(["calibrate", "--check"], 1), 20.0, 1.0, "s")
        add("validate --plot", cli_s(["validate", "--plot", str(Path(tmp) / "v.png")],
                                     max(1, runs - 2)), 4.0, 1.0, "s")
        space = Path(tmp) / "space.yaml"
        space.write_text(SPACE_1E14)
        add("sweep SPACE --count, 10^14 points", cli_s(["sweep", str(space), "--count"], runs),
            0.5, 1.0, "s")
    if args.suite:
        import subprocess
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                       cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        add("test suite (pytest -q)", time.perf_counter() - t, 240.0, 1.0, "s")
    else:
        rows.append(["test suite (pytest -q)", "not run (--suite)", "240 s", "", "", ""])
    print(f"issue 43 speed figures (medians of fresh processes unless noted; this machine: "
          f"{os.cpu_count()} CPUs, flop-loop {ref * 1e9:.0f} ns)")
    print(format_table(["what", "measured", "target", "vs target", "", "note"], rows))


def issue17(args) -> None:
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
