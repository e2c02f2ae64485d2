"""Streaming ops (elementwise, norm, softmax, memcpy) at HBM speed."""
from __future__ import annotations

import math

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



# ---- implementations: ATen (eager) and Liger (triton) launch shapes ---------------------------

def _b200():
    return pm.hardware("B200")


def test_eager_softmax_forward_is_one_1024_thread_cta_per_row_alone_on_its_sm():
    hw = _b200()
    d = pm.ops.Softmax(rows=8192, cols=4096, dtype="bf16", implementation="eager").demand(hw)
    assert (d.launch.ctas, d.launch.threads_per_cta) == (8192, 1024)
    assert d.launch.bytes_in_flight_per_cta == 4096 * 2  # 512 vectors of 16 B, one per thread
    assert d.details["row_in_smem"] and d.cta_dram_round_trips == 1.0
    eager = pm.predict_op(pm.ops.Softmax(rows=8192, cols=4096, dtype="bf16",
                                         implementation="eager"), hw)
    fused = pm.predict_op(pm.ops.Softmax(rows=8192, cols=4096, dtype="bf16"), hw)
    assert eager.details["ctas_per_sm"] == 1 and eager.time_s > 2 * fused.time_s


def test_eager_softmax_short_rows_take_the_persistent_warp_kernel():
    hw = _b200()
    a = pm.ops.Softmax(rows=4096, cols=1024, dtype="bf16", implementation="eager").demand(hw)
    b = pm.ops.Softmax(rows=4096, cols=1024, dtype="bf16").demand(hw)
    assert a.work == b.work and a.launch == b.launch


def test_triton_softmax_follows_liger_calculate_settings():
    hw = _b200()
    for cols, threads in ((1024, 128), (4096, 256), (8192, 512), (32768, 1024)):
        d = pm.ops.Softmax(rows=64, cols=cols, dtype="bf16", implementation="triton").demand(hw)
        assert d.launch.threads_per_cta == threads
        assert d.launch.bytes_in_flight_per_cta == cols * 2  # the whole row at once


def test_eager_layernorm_backward_rereads_x_and_dy_for_dgamma():
    hw = _b200()
    small = pm.ops.Norm(rows=1024, cols=4096, dtype="bf16", kind="layernorm", direction="bwd",
                        implementation="eager").demand(hw)
    big = pm.ops.Norm(rows=16384, cols=4096, dtype="bf16", kind="layernorm", direction="bwd",
                      implementation="eager").demand(hw)
    assert small.kernels == 2 and [p.details["part"] for p in small.sequence] == \
        ["dx", "dgamma dbeta"]
    n = 1024 * 4096 * 2
    assert small.details["dgamma_reads_from_l2"] and small.sequence[1].work["l2"] >= 2 * n
    assert not big.details["dgamma_reads_from_l2"]  # 3·n·b > L2: x and dy from HBM again
    assert big.sequence[1].hbm_bytes > 2 * 16384 * 4096 * 2


def test_triton_norm_backward_runs_one_program_per_sm_with_exposed_rows():
    hw = _b200()
    d = pm.ops.Norm(rows=8192, cols=4096, dtype="bf16", kind="layernorm", direction="bwd",
                    implementation="triton").demand(hw)
    dx, fin = d.sequence
    assert dx.launch.ctas == hw.sm_count and dx.launch.threads_per_cta == 256
    assert dx.cta_dram_round_trips == math.ceil(8192 / hw.sm_count)
    assert fin.kernels == 4  # _DW/_DB .sum(0) and .to(dtype)


def test_eager_layernorm_forward_keeps_one_load_per_thread_in_flight():
    hw = _b200()
    ln = pm.ops.Norm(rows=4096, cols=4096, dtype="bf16", kind="layernorm",
                     implementation="eager").demand(hw)
    rms = pm.ops.Norm(rows=4096, cols=4096, dtype="bf16", implementation="eager").demand(hw)
    assert ln.launch.threads_per_cta == 128 and ln.launch.bytes_in_flight_per_cta == 128 * 8
    assert rms.launch.bytes_in_flight_per_cta == 4 * 128 * 8
    odd = pm.ops.Norm(rows=64, cols=4095, dtype="bf16", kind="layernorm",
                      implementation="eager").demand(hw)
    assert odd.kernels == 2  # RowwiseMoments, then the normalize kernel


# ---- ATen's norm kernels as torch 2.10's sm_100 SASS has them (streaming.ATEN_NORM_*, ATEN_GB_*)

def _eager(rows, cols, kind="rmsnorm", direction="fwd"):
    return pm.ops.Norm(rows=rows, cols=cols, dtype="bf16", kind=kind, direction=direction,
                       implementation="eager")


def test_eager_layernorm_forward_registers_leave_12_ctas_per_sm():
    """vectorized_layer_norm_kernel: 40 registers for LayerNorm (Welford), 32 for RMSNorm. A
    128-thread CTA of 40 registers takes 4 warps x 1280 registers: 65536 / 5120 -> 12 per SM;
    at 32 registers the 64-warp limit gives 16."""
    hw = _b200()
    ln = pm.predict_op(_eager(8192, 4096, "layernorm"), hw)
    rms = pm.predict_op(_eager(8192, 4096), hw)
    assert ln.details["ctas_per_sm"] == 12 and rms.details["ctas_per_sm"] == 16


@pytest.mark.parametrize("rows, block_y, ln_trips, rms_trips",
                         [(40, 1, 5, 5), (100, 8, 2, 2), (200, 16, 2, 2), (8192, 32, 96, 64)])
def test_eager_gamma_beta_tile_and_round_trips_follow_the_rows(rows, block_y, ln_trips, rms_trips):
    """GammaBetaBackwardCUDAKernelTemplate: 32 columns per CTA, block_dim_y thread rows by the
    row count, 8 rows per thread per step; the 1024-thread (32, 256) shape issues a step's loads
    in 3 dependent groups for LayerNorm and 2 for RMSNorm, the others in one."""
    hw = _b200()
    for kind, trips in (("layernorm", ln_trips), ("rmsnorm", rms_trips)):
        d = _eager(rows, 4096, kind, "bwd").demand(hw)
        dx, dg = d.sequence
        assert d.details["gamma_beta_block"] == (32, block_y)
        assert dg.launch.ctas == 4096 // 32 and dg.launch.threads_per_cta == 32 * block_y
        assert dg.cta_dram_round_trips == trips
        assert dx.launch.registers_per_thread == 32


def test_eager_rmsnorm_at_1536_columns_and_500_rows_by_hand():
    """The issue's case, worked by hand on B200 (DRAM latency L = hbm_latency_s).
    Forward: 500 CTAs of 128 threads, 32 registers (16 per SM): one round, so the latency is the
    first load plus the row's round trip, 2 L.
    Backward dγ: 500 >= 256 rows take the (32, 256) shape: 1536 / 32 = 48 CTAs of 1024 threads;
    500 is no multiple of 256, so the guarded instance of 32 registers (2 CTAs per SM; 48 CTAs,
    one round); ceil(500 / 256) = 2 steps of 2 round trips: 4 L on top of the first load."""
    hw = _b200()
    lat = hw.hbm_latency_s
    fwd = pm.predict_op(_eager(500, 1536), hw)
    assert fwd.details["ctas_per_sm"] == 16
    assert fwd.resource_time_s["latency"] == pytest.approx(2 * lat)
    bwd = pm.predict_op(_eager(500, 1536, direction="bwd"), hw)
    dx, dg = bwd.details["parts"]
    assert dg["part"] == "dgamma" and dg["ctas_per_sm"] == 2 and dg["busiest_sm_ctas"] == 1
    # 512 rows are aligned: the 64-register instance, alone on its SM
    assert pm.predict_op(_eager(512, 1536, direction="bwd"), hw).details["parts"][1][
        "ctas_per_sm"] == 1
    assert bwd.details["gamma_beta_round_trips"] == 4
    d = _eager(500, 1536, direction="bwd").demand(hw)
    assert d.sequence[1].launch.ctas == 48
    dg_est = pm.engine.pipes(d.sequence[1], hw)
    assert dg_est.resource_time_s["latency"] == pytest.approx(5 * lat)


def test_eager_gamma_beta_splits_many_rows_of_few_columns_over_ctas():
    """Past 65536 rows with cols / 32 < sm_count / 2 the rows split over CTAs of one warp per
    column strip (min(ceil(M / 32), 32768 / strips) of them), whose FP32 partials `.sum(0)`
    reduces, one reduction per weight gradient; the partials stay in L2."""
    hw = _b200()
    d = _eager(131072, 128, "layernorm", "bwd").demand(hw)
    parts = [p.details["part"] for p in d.sequence]
    assert parts == ["dx", "dgamma dbeta", "sum(0)", "sum(0)"] and d.kernels == 4
    dg = d.sequence[1]
    assert dg.launch.ctas == 4 * 4096 and dg.launch.threads_per_cta == 32
    partials = 4096 * 128 * 4 * 2
    assert partials * 2 < hw.l2_capacity_bytes
    assert all(p.work["hbm"] == pytest.approx(p.hbm_bytes) for p in d.sequence[1:])
    assert d.sequence[2].work["l2"] >= partials / 2  # each sum reads its buffer from L2
    # under the split threshold the same columns take the one-CTA-per-strip tile
    assert _eager(65536, 128, "layernorm", "bwd").demand(hw).kernels == 2
