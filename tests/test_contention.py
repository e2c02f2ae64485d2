"""Concurrent kernels on one GPU (contention model, through the scheduler): the joint time lies
between the longest kernel and the sum; SM slots decide whether a kernel fits beside another."""
from __future__ import annotations

from pathlib import Path
import importlib
import pytest

import perfmodel as pm
from perfmodel import contention
from perfmodel.engine import estimate, resolve
from perfmodel.graph import parse_graph


H100 = "H100-SXM"


def g(*ops, **top):
    return {"schema_version": 1, "name": "t", "ops": list(ops), **top}


GEMM = {"op": "gemm", "m": 4096, "n": 4096, "k": 4096, "dtype": "bf16"}


@pytest.mark.parametrize("second", [
    {"op": "elementwise", "elements": 1 << 26, "dtype": "bf16", "inputs": 2},
    {"op": "rng", "elements": 1 << 28},
    {**GEMM, "m": 2048},
])
def test_two_streams_overlap_between_max_and_sum(second):
    raw = g({**GEMM, "name": "a", "m": 8192}, {**second, "name": "b", "after": [], "stream": "s2"})
    pred = pm.predict(parse_graph(raw), H100)
    a, b = (o.estimate.time_s for o in pred.ops)
    assert max(a, b) * (1 - 1e-9) <= pred.total_time_s <= (a + b) * (1 + 1e-9)
    assert pred.ops[1].start_s == 0.0
    assert sum(o.hidden_s for o in pred.ops) > 0


def _overlap_ratio(first, second):
    raw = g({**first, "name": "a"}, {**second, "name": "b", "after": [], "stream": "s2"})
    pred = pm.predict(parse_graph(raw), H100)
    return pred.total_time_s / sum(o.estimate.time_s for o in pred.ops)


def test_kernels_that_fill_the_sms_serialize():
    """A GEMM whose CTAs hold every SM's registers leaves no room for a second kernel."""
    assert _overlap_ratio({**GEMM, "m": 8192}, {**GEMM, "m": 8192}) > 0.95


def test_small_grid_kernel_hides_under_a_gemm():
    """A 16-CTA latency-bound norm needs few SM slots and little bandwidth: it runs beside a
    GEMM that holds the SMs' registers almost entirely."""
    small = {"op": "norm", "rows": 16, "cols": 1 << 20, "dtype": "bf16"}
    raw = g({**GEMM, "name": "a", "m": 8192}, {**small, "name": "b", "after": [],
                                               "stream": "s2"})
    pred = pm.predict(parse_graph(raw), H100)
    longest = max(o.estimate.time_s for o in pred.ops)
    assert pred.total_time_s < 1.1 * longest
    assert pred.ops[1].hidden_s > 0.9 * pred.ops[1].time_s


# ---- the one stepping loop (contention.run) ---------------------------------------------
H100_HW = pm.hardware("H100-SXM")
BIG_GEMM = {"op": "gemm", "m": 8192, "n": 4096, "k": 4096, "dtype": "bf16"}


def _graph(*ops, **top):
    return {"schema_version": 1, "name": "t", "ops": list(ops), **top}


def _loads(*raw_ops):
    out = []
    for raw in raw_ops:
        params = dict(raw)
        o = pm.ops.op(params.pop("op"), **params)
        d = resolve(o.demand(H100_HW), H100_HW, "pipes")
        out.append(contention.load_of(d, estimate(d, H100_HW), H100_HW))
    return out


def test_joint_time_is_the_schedule_of_kernels_started_together():
    second = {"op": "rng", "elements": 1 << 28}
    loads = _loads(BIG_GEMM, second)
    pred = pm.predict(parse_graph(_graph({**BIG_GEMM, "name": "a"},
                                        {**second, "name": "b", "after": [], "stream": "s2"})),
                      H100_HW)
    assert contention.joint_time_s(loads) == pred.total_time_s
    a, b = (ld.time_s for ld in loads)
    assert max(a, b) <= contention.joint_time_s(loads) <= (a + b) * (1 + 1e-12)


def test_run_respects_dependencies_and_reports_exposed_time():
    a, b, c = _loads(BIG_GEMM, {**BIG_GEMM, "m": 512}, {**BIG_GEMM, "m": 1024})
    # c waits for a; a and b start together
    r = contention.run([a, b, c], successors=[[2], [], []], waiting=[0, 0, 1])
    assert r.start_s[:2] == [0.0, 0.0] and r.start_s[2] == r.end_s[0]
    assert r.released_by == [-1, -1, 0]
    assert r.makespan_s == max(r.end_s)
    assert all(0.0 <= e <= end - start + 1e-18
               for e, start, end in zip(r.exposed_s, r.start_s, r.end_s))


def test_finish_tolerance_is_relative():
    """A long kernel whose remaining time keeps a rounding residue (≈ 1e-13 s, far above an
    absolute 1e-15 s) after the step that should end it still ends at that event."""
    a = contention.Load(3000.0, {"hbm": 0.7})
    s = contention.slowdown([a, contention.Load(1.0, {"hbm": 0.6})])
    v = next(t for t in (1000.0 + i / 10 for i in range(1000)) if t - (t * s) / s > 1e-15)
    r = contention.run([a, contention.Load(v, {"hbm": 0.6})], [[], []], [0, 0])
    assert r.end_s[1] == v * s  # ended in the first step, not after a residue step
    assert r.end_s[0] == pytest.approx(v * s + (3000.0 - v), rel=1e-12)


def test_the_scheduler_has_no_stepping_loop_of_its_own():
    src = Path(importlib.import_module("perfmodel.schedule").__file__).read_text()
    assert "contention.run(" in src and "slowdown(" not in src
