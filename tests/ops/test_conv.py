"""Convolution as implicit GEMM (perfmodel/ops/conv.py): the GEMM shape, the operand bytes of the
tensors (not of the im2col matrix), depthwise and 1x1 as their own cases, one-line errors."""
from __future__ import annotations

import pytest

import perfmodel as pm
from perfmodel.errors import InputError
from perfmodel.ops import Conv


def test_implicit_gemm_shape_is_npq_by_k_by_crs():
    c = Conv(batch=16, in_channels=256, out_channels=128, height=64, width=64, kernel=3,
             dtype="bf16")
    assert c.case == "implicit_gemm" and c.output_extent == (1, 64, 64)
    assert c.gemm_shape() == (16 * 64 * 64, 128, 256 * 9, 1)
    assert c.flop == 2.0 * 16 * 64 * 64 * 128 * 256 * 9


def test_strided_and_padded_output_extent():
    # PyTorch: (H + 2p - k) // s + 1
    c = Conv(batch=1, in_channels=32, out_channels=64, height=384, width=384, kernel=3,
             stride=2, padding=1, dtype="bf16")
    assert c.output_extent == (1, 192, 192)
    patch = Conv(batch=1, in_channels=16, out_channels=5120, depth=81, height=224, width=224,
                 kernel_d=1, kernel_h=2, kernel_w=2, stride=2, stride_d=1, padding=0,
                 dtype="fp16")
    assert patch.output_extent == (81, 112, 112) and patch.taps == 4
    assert patch.gemm_shape()[:3] == (81 * 112 * 112, 5120, 16 * 4)


def test_hbm_bytes_are_the_tensors_not_the_im2col_matrix(h100):
    c = Conv(batch=16, in_channels=256, out_channels=256, height=64, width=64, kernel=3,
             dtype="bf16")
    inp, filt, out = c.tensor_bytes()
    assert inp == 16 * 256 * 64 * 64 * 2 and filt == 256 * 256 * 9 * 2 and out == inp
    est = pm.predict_op(c, h100)
    assert est.hbm_bytes == pytest.approx(inp + filt + out)
    a_im2col = c.gemm().unique_bytes()[0]
    assert a_im2col == pytest.approx(9 * inp)  # what a materialized im2col would read
    assert est.resource_time_s["hbm"] < a_im2col / h100.hbm_bandwidth_bytes_per_s
    assert est.bound == "tensor:bf16"


def test_depthwise_runs_on_the_cuda_cores(h100):
    c = Conv(batch=2, in_channels=2048, out_channels=2048, width=4096, kernel_w=4, padding=3,
             groups=2048, dtype="bf16")
    assert c.case == "depthwise"
    d = c.demand(h100)
    assert not any(r.startswith("tensor:") for r in d.work)
    outputs = 2 * 2048 * (4096 + 6 - 4 + 1)
    assert d.work["fma"] >= 4 * outputs  # one FFMA per tap per output element
    assert d.hbm_bytes == pytest.approx(sum(c.tensor_bytes()))
    assert pm.predict_op(c, h100).bound in ("hbm", "fma", "issue")


def test_one_by_one_is_a_plain_gemm(h100):
    c = Conv(batch=8, in_channels=192, out_channels=384, width=1571, kernel=1, padding=0,
             dtype="bf16")
    assert c.case == "1x1" and c.gemm_shape() == (8 * 1571, 384, 192, 1)
    g = pm.ops.Gemm(m=8 * 1571, n=384, k=192, dtype="bf16")
    assert pm.predict_op(c, h100).time_s == pytest.approx(pm.predict_op(g, h100).time_s,
                                                          rel=0.02)
    strided = Conv(batch=1, in_channels=64, out_channels=64, height=64, width=64, kernel=1,
                   stride=2, padding=0, dtype="bf16")
    assert strided.tensor_bytes()[0] == 64 * 32 * 32 * 2  # only the sampled pixels


def test_grouped_conv_is_a_batched_gemm():
    c = Conv(batch=4, in_channels=128, out_channels=256, height=28, width=28, kernel=3,
             groups=4, dtype="bf16")
    assert c.gemm_shape() == (4 * 28 * 28, 64, 32 * 9, 4)


@pytest.mark.parametrize("params, key", [
    (dict(groups=3), "groups"),
    (dict(kernel=9, padding=0, height=4, width=4), "kernel"),
    (dict(dtype="fp64"), "dtype"),
    (dict(batch=0), "batch"),
])
def test_bad_parameters_are_one_line_errors(params, key):
    base = dict(batch=1, in_channels=64, out_channels=64, height=8, width=8, dtype="bf16")
    with pytest.raises(InputError) as e:
        Conv(**{**base, **params})
    assert len(e.value.problems) == 1 and e.value.problems[0].startswith(key)
