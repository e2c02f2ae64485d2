"""Streaming ops (elementwise, norm, softmax, memcpy) at HBM speed."""
from __future__ import annotations

import pytest

import perfmodel as pm


def test_large_elementwise_is_hbm_bound(any_hw):
    est = pm.predict_op(pm.ops.Elementwise(elements=1 << 28, dtype="bf16", inputs=2), any_hw)
    assert est.bound == "hbm"
    assert est.time_s == pytest.approx(3 * (1 << 28) * 2 / any_hw.hbm_bandwidth_bytes_per_s,
                                       rel=0.05)


def test_softmax_backward_reads_y_and_dy_and_writes_dx(any_hw):
    fwd = pm.ops.Softmax(rows=4096, cols=4096, dtype="bf16")
    assert fwd.demand(any_hw) == pm.ops.Softmax(rows=4096, cols=4096, dtype="bf16",
                                                direction="fwd").demand(any_hw)
    n = 4096 * 4096
    d = pm.ops.Softmax(rows=4096, cols=4096, dtype="bf16", direction="bwd").demand(any_hw)
    assert d.hbm_bytes == 3 * n * 2 == d.work["hbm"]
    assert "xu" not in d.work and d.work["fma"] == 3 * n
    big = pm.ops.Softmax(rows=1 << 16, cols=8192, dtype="bf16", direction="bwd")
    est = pm.predict_op(big, any_hw)
    assert est.bound == "hbm"
    assert est.time_s == pytest.approx(3 * (1 << 29) * 2 / any_hw.hbm_bandwidth_bytes_per_s,
                                       rel=0.1)


# ------------------------------------------------------------------ norms --

ROWS, COLS = 16384, 4096


def norm(kind, direction, rows=ROWS, cols=COLS):
    return pm.ops.Norm(rows=rows, cols=cols, dtype="bf16", kind=kind, direction=direction)


@pytest.mark.parametrize("kind", ["rmsnorm", "layernorm"])
def test_norm_bytes_are_the_cudnn_benchmark_count(kind, h100):
    """cuDNN's norm benchmark byte counts (cudnn-frontend benchmark/norms): forward reads x, γ
    (β) and writes y and the FP32 statistics (rstd; LayerNorm also the mean); backward reads x,
    dy, γ and the statistics and writes dx and dγ (dβ)."""
    n, c, s = ROWS * COLS, COLS, 2 if kind == "layernorm" else 1
    fwd = norm(kind, "fwd").demand(h100)
    assert fwd.hbm_bytes == (n + s * c) * 2 + n * 2 + s * ROWS * 4
    bwd = norm(kind, "bwd").demand(h100)
    assert bwd.hbm_bytes == (2 * n + c) * 2 + s * ROWS * 4 + (n + s * c) * 2


@pytest.mark.parametrize("kind", ["rmsnorm", "layernorm"])
def test_norm_backward_is_dx_then_the_partial_sum_reduction(kind, any_hw):
    d = norm(kind, "bwd").demand(any_hw)
    assert d.kernels == 2 and len(d.sequence) == 2
    dx, fin = d.sequence
    s = 2 if kind == "layernorm" else 1
    # the dx kernel's persistent grid fills the SMs and writes FP32 partials [CTAs x cols]
    ctas = dx.launch.ctas
    assert any_hw.sm_count <= ctas <= ROWS and ctas % any_hw.sm_count == 0
    assert d.details["partials_bytes"] == ctas * COLS * 4 * s
    # they stay in L2: HBM sees only the problem's bytes, L2 sees them written and read back
    assert d.details["partials_in_l2"]
    assert d.work["hbm"] == pytest.approx(d.hbm_bytes)
    assert d.work["l2"] == pytest.approx(d.hbm_bytes + 2 * d.details["partials_bytes"])
    assert fin.work["fma"] == ctas * COLS * s  # one add per partial
    est = pm.predict_op(norm(kind, "bwd"), any_hw)
    assert [p["part"] for p in est.details["parts"]][0] == "dx"
    assert est.resource_time_s["launch"] == pytest.approx(2 * any_hw.kernel_launch_s)
    assert est.time_s == pytest.approx(sum(p["time_s"] for p in est.details["parts"]))


def test_norm_backward_partials_spill_past_l2(h100):
    wide = norm("layernorm", "bwd", rows=8192, cols=1 << 20).demand(h100)
    assert not wide.details["partials_in_l2"]
    assert wide.work["hbm"] == pytest.approx(wide.hbm_bytes + 2 * wide.details["partials_bytes"])


def test_norm_backward_of_few_rows_uses_one_cta_per_row(h100):
    d = norm("rmsnorm", "bwd", rows=7).demand(h100)
    assert d.sequence[0].launch.ctas == 7 and d.details["partials_bytes"] == 7 * COLS * 4
    # two kernels' launches and first loads: a floor no single kernel has
    assert pm.predict_op(norm("rmsnorm", "bwd", rows=7), h100).time_s > \
        2 * h100.kernel_launch_s + 2 * h100.hbm_latency_s

