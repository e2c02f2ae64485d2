"""Whole-graph and planning speed (a benchmark, not a test).

    python benchmarks/graph_speed.py

Times building and predicting a full Llama-3-405B training-step graph (all 126 layers, TP8 x DP64,
and the per-GPU stage of TP8 x PP16 x DP64), a 70B decode graph, and a capacity-planning search
over ~1,000 serving configurations (3 GPUs x 4 TP x 3 dtypes x ~28 batch sizes), and the simulated
deployment search of `perfmodel plan serve` (Llama-3-70B on 8 and 64 H200s). "cold" is the
first prediction with the op cache cleared (every op shape predicted once); "warm" repeats it
(median), "build+predict warm" builds the graph again and predicts it (the ops hit the cache by
their parameters). Targets (issue 17): a graph ≤ 2 ms warm, plan_serving over its 21 batches
≤ 15 ms warm.
"""
from __future__ import annotations

import statistics
import time

import perfmodel as pm
from perfmodel.plan.serving import sweep_serving
from perfmodel.report.tables import format_table


def median_s(fn, runs: int) -> float:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return statistics.median(out)


def timed(fn, repeat: int = 1) -> tuple[float, object]:
    start = time.perf_counter()
    for _ in range(repeat):
        out = fn()
    return (time.perf_counter() - start) / repeat, out


def main() -> None:
    rows = []
    cases = [
        ("llama3-405b train TP8 DP64 (126 layers)", "llama3-405b",
         dict(phase="train", batch=16, seq=8192, tp=8, dp=64)),
        ("llama3-405b train TP8 PP16 DP64 (stage)", "llama3-405b",
         dict(phase="train", batch=16, seq=8192, tp=8, pp=16, dp=64)),
        ("llama3-70b decode b64 TP8", "llama3-70b",
         dict(phase="decode", batch=64, context=8192, tp=8)),
        ("deepseek-v3 decode b32 EP8", "deepseek-v3",
         dict(phase="decode", batch=32, context=4096, ep=8, dtype="fp8")),
    ]
    hw = pm.hardware("H100-SXM")
    for label, model, kw in cases:
        m = pm.load_model(model)
        t_build, g = timed(lambda: pm.build_graph(m, **kw))
        pm.clear_cache()  # cold: no op of the graph predicted yet
        t_cold, pred = timed(lambda: pm.predict(g, hw))
        t_warm = median_s(lambda: pm.predict(g, hw), 7)
        t_rebuilt = median_s(lambda: pm.predict(pm.build_graph(m, **kw), hw), 3)
        distinct = len({id(n.op) for n in g.nodes})
        rows.append([label, len(g), distinct, f"{t_build * 1e3:.1f}", f"{t_cold * 1e3:.1f}",
                     f"{t_warm * 1e3:.2f}", f"{t_warm / 2e-3:.2f}x",
                     f"{t_warm / len(g) * 1e6:.2f}", f"{t_rebuilt * 1e3:.2f}",
                     f"{pred.total_time_s * 1e3:.4g}"])
    print(format_table(["graph", "ops", "distinct", "build ms", "predict cold ms",
                        "predict warm ms", "vs 2 ms", "warm us/node", "build+predict warm ms",
                        "predicted step ms"], rows))

    from perfmodel.plan.serving import plan_serving
    plan = lambda: plan_serving("llama3-70b", "H200", tp=8, dtype="fp8",  # noqa: E731
                                tpot_slo_s=0.05)
    t_cold, out = timed(plan)
    t_warm = median_s(plan, 5)
    print(f"\nplan_serving llama3-70b TP8 H200 fp8, {len(out.points)} batches: cold "
          f"{t_cold * 1e3:.0f} ms, warm {t_warm * 1e3:.1f} ms (target 15 ms: "
          f"{t_warm / 15e-3:.2f}x)")

    batches = (1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64, 80, 96, 128, 160, 192, 224, 256, 320, 384,
               448, 512, 640, 768, 896, 1024, 1536, 2048)
    t, out = timed(lambda: sweep_serving("llama3-70b", ["H100-SXM", "H200-SXM", "B200"],
                                         tps=[1, 2, 4, 8], dtypes=["bf16", "fp8", "nvfp4"],
                                         batches=batches))
    print(f"\nserving sweep: {len(out)} configurations (plus one prefill per deployment) in "
          f"{t:.2f} s = {t / max(len(out), 1) * 1e3:.2f} ms each")

    from perfmodel.plan.search import search_serving
    from perfmodel.plan.simulator import StepCost, Workload, simulate
    from perfmodel.plan.simulator import cost as cost_module
    # one deployment (issue target: <= 50 ms): Llama-3-70B TP8 on H200 offline 1000/1000, a
    # fresh StepCost (cold: its nodes filled on the way) and the same simulation again (warm)
    w = Workload("offline", requests=1024, isl=1000, osl=1000)
    cost_module._shared.clear()
    t_cold, r = timed(lambda: simulate("llama3-70b", "H200", w, "vllm", tp=8))
    c = StepCost("llama3-70b", "H200", tp=8)
    simulate("llama3-70b", "H200", w, "vllm", tp=8, cost=c)
    t_warm, _ = timed(lambda: simulate("llama3-70b", "H200", w, "vllm", tp=8, cost=c), 3)
    print(f"\none deployment simulated (llama3-70b TP8 H200, {r.steps} steps): cold "
          f"{t_cold * 1e3:.0f} ms, warm {t_warm * 1e3:.0f} ms (target 50 ms: "
          f"{t_warm / 0.05:.2f}x warm, {t_cold / 0.05:.2f}x cold)")
    for gpus in (8, 64):  # `perfmodel plan serve llama3-70b --hw H200 --gpus N --isl 1000 ...`
        cost_module._shared.clear()
        t, out = timed(lambda: search_serving("llama3-70b", "H200", gpus,
                                              Workload("offline", isl=1000, osl=1000)))
        print(f"deployment search: llama3-70b on {gpus}x H200, offline 1000/1000: "
              f"{len(out)} layouts in {t:.2f} s (target 2 s: {t / 2:.2f}x)")


if __name__ == "__main__":
    main()
