"""Concurrent kernels on one GPU (contention model, through the scheduler): the joint time lies
between the longest kernel and the sum; SM slots decide whether a kernel fits beside another."""
from __future__ import annotations

import pytest

import perfmodel as pm
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
