"""Speed of MoE replica routing for one decode step (a benchmark, not a test).

    python -m benchmarks.moe_routing_speed        (from the repository root: it imports the test
                                                   oracles, tests/oracles.py)

One decode step of 1024 tokens × top-8 over 256 experts on 16 GPUs:
EPLB placement from an earlier step's load, then each routing policy on a temporally correlated
Zipf trace. Times are the median of repeated calls, per trace input (tokens × top_k ids) including
the per-expert bincount. Targets: metro and token_balanced a few ms at most (metro < 1 ms),
optimal < 100 ms. "max act" is the max activated replicas per GPU (lower is better). The
"(fixpoint)", "(sequential)" and "(MILP)" rows are the test oracles, timed beside the product's
policies they check.
"""
from __future__ import annotations

import time

import numpy as np

from perfmodel.ops.moe.routing import (place_eplb, route_metro, route_optimal,
                                       route_token_balanced, route_uniform)
from perfmodel.ops.moe.traces import synthetic_trace
from perfmodel.report.tables import format_table
from tests.oracles import route_metro_fixpoint, route_metro_sequential, route_optimal_milp

TOKENS, EXPERTS, TOP_K, GPUS = 1024, 256, 8, 16
# the product's routing policies and the oracles beside them (table label, function)
ROUTERS = [("token_balanced", route_token_balanced), ("uniform", route_uniform),
           ("metro", route_metro), ("metro (fixpoint)", route_metro_fixpoint),
           ("metro (sequential)", route_metro_sequential),
           ("optimal (max-flow)", route_optimal), ("optimal (MILP)", route_optimal_milp)]


def median_time_s(fn, budget_s: float = 0.3, min_runs: int = 5) -> float:
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_runs or time.perf_counter() - start < budget_s:
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def main() -> None:
    rows = []
    for skew in (0.0, 1.0):
        load = np.bincount(synthetic_trace(4 * TOKENS, EXPERTS, TOP_K, "zipf", skew, 0).ravel(),
                           minlength=EXPERTS)
        trace = synthetic_trace(TOKENS, EXPERTS, TOP_K, "correlated", skew, 1,
                                popularity_seed=0)
        for replication in (1.0, 1.125, 1.5, 2.0, 3.0):
            placement = place_eplb(load, GPUS, replication)
            for name, fn in ROUTERS:
                t = median_time_s(lambda: fn(trace, placement))
                r = fn(trace, placement)
                rows.append([skew, replication, name, f"{t * 1e3:.3f}", r.max_activated,
                             int(r.activated_per_gpu.sum())])
    print(f"{TOKENS} tokens x top-{TOP_K}, {EXPERTS} experts, {GPUS} GPUs, EPLB placement")
    print(format_table(["zipf skew", "replication", "policy", "ms", "max act", "total act"],
                       rows))


if __name__ == "__main__":
    main()
