"""Quantized linears: the activation cast kernels before the GEMM, static vs dynamic FP8 scales
(perfmodel/ops/linear.py, ops/quantize.py `tensor_amax_demand`)."""
from __future__ import annotations

import math

import pytest

import perfmodel as pm
from perfmodel.engine import estimate
from perfmodel.ops.quantize import TRTLLM_AMAX_CTAS, TRTLLM_AMAX_THREADS, tensor_amax_demand
from perfmodel.validation.measurements import AICONFIGURATOR_CSV, load_cases


def _parts(op, hw):
    return estimate(op.demand(hw), hw).details["parts"]


@pytest.mark.parametrize("gpu", ["H200-SXM", "B200"])
def test_dynamic_scale_adds_the_amax_kernel_before_the_cast(gpu):
    hw = pm.hardware(gpu)
    static = pm.ops.Linear(m=16, n=4096, k=4096, dtype="fp8")
    dynamic = pm.ops.Linear(m=16, n=4096, k=4096, dtype="fp8", activation_scale="dynamic")
    assert static.activation_scale == "static"  # the serving default: the checkpoint's scale
    assert len(_parts(static, hw)) == 2 and len(_parts(dynamic, hw)) == 3
    s, d = pm.predict_op(static, hw), pm.predict_op(dynamic, hw)
    amax = estimate(tensor_amax_demand(16, 4096, 2.0), hw)
    assert d.time_s == pytest.approx(s.time_s + amax.time_s, rel=1e-9)
    # the same GEMM runs after either cast
    assert _parts(dynamic, hw)[-1]["tile"] == _parts(static, hw)[-1]["tile"]


@pytest.mark.parametrize("gpu", ["H100-SXM", "H200-SXM", "B200", "GB200"])
def test_amax_kernel_pays_its_fixed_grid_on_a_tiny_tensor(gpu):
    """TensorRT-LLM's 1024 x 1024 grid: at one row the kernel still runs ceil(CTAs per SM /
    resident) rounds, each exposing a DRAM round trip, so its time hardly moves with m."""
    hw = pm.hardware(gpu)
    d = tensor_amax_demand(1, 4096, 2.0)
    assert (d.launch.ctas, d.launch.threads_per_cta) == (TRTLLM_AMAX_CTAS, TRTLLM_AMAX_THREADS)
    assert tensor_amax_demand(4096, 4096, 2.0).launch.ctas == TRTLLM_AMAX_CTAS
    one, sixteen = (estimate(tensor_amax_demand(m, 4096, 2.0), hw).time_s for m in (1, 16))
    assert sixteen == pytest.approx(one, rel=0.05)
    resident = hw.max_warps_per_sm // (TRTLLM_AMAX_THREADS // 32)
    rounds = math.ceil(math.ceil(TRTLLM_AMAX_CTAS / hw.sm_count) / resident)
    assert rounds >= 2
    assert one >= hw.kernel_launch_s + (1 + rounds) * hw.hbm_latency_s
    # far above the cast of the same tensor
    cast = pm.predict_op(pm.ops.Quantize(rows=1, cols=4096, to="fp8", amax_pass=False), hw)
    assert one > cast.time_s


def test_amax_kernel_reads_the_tensor_once_at_most_at_hbm_speed():
    hw = pm.hardware("H200-SXM")
    rows, cols = 32768, 8192
    d = tensor_amax_demand(rows, cols, 2.0)
    assert d.hbm_bytes == rows * cols * 2.0
    e = estimate(d, hw)
    assert e.bound == "hbm"
    assert e.time_s >= d.hbm_bytes / hw.hbm_bandwidth_bytes_per_s


@pytest.mark.parametrize("kw", [dict(dtype="nvfp4"), dict(dtype="fp8", fp8_scaling="block"),
                                dict(dtype="bf16")])
def test_dynamic_scale_is_only_for_per_tensor_fp8(kw):
    with pytest.raises(pm.InputError, match="activation_scale"):
        pm.ops.Linear(m=16, n=1024, k=1024, activation_scale="dynamic", **kw)


def test_aiconfigurator_per_tensor_fp8_rows_run_the_dynamic_scale():
    """Its collector loads no input scale; its SDK derives static FP8 from these rows."""
    cases, _ = load_cases(AICONFIGURATOR_CSV)
    linears = [c for c in cases if c.op_class.startswith("linear_")]
    by = {}
    for c in linears:
        by.setdefault(c.op_class, set()).add(c.op.activation_scale)
    assert by["linear_fp8"] == {"dynamic"}
    assert by["linear_fp8_block"] == by["linear_nvfp4"] == by["linear_bf16"] == {"static"}


def test_dynamic_fp8_linear_is_slower_than_bf16_at_decode_sizes():
    """At m <= 16 the measured FP8 linear is ~9 us above BF16 on H200 (AIConfigurator): the
    amax and cast kernels, which a static scale halves."""
    hw = pm.hardware("H200-SXM")
    bf16 = pm.predict_op(pm.ops.Linear(m=16, n=1024, k=1024, dtype="bf16"), hw).time_s
    static = pm.predict_op(pm.ops.Linear(m=16, n=1024, k=1024, dtype="fp8"), hw).time_s
    dynamic = pm.predict_op(pm.ops.Linear(m=16, n=1024, k=1024, dtype="fp8",
                                          activation_scale="dynamic"), hw).time_s
    assert bf16 < static < dynamic
    assert dynamic - static > static - bf16
