"""gpt-oss's MXFP4 experts: a mixed-input mainloop converts every weight tile it multiplies, at
the fitted operations per element on Hopper (perfmodel/fitted.yaml moe.convert_ops.mxfp4) and
at the generic convert + scale where the GPU's MMAs take MXFP4 themselves (Blackwell)."""
from __future__ import annotations

import math

import pytest

import perfmodel as pm
from perfmodel import fitted
from perfmodel.ops.moe import op as moe_op


def _experts(tokens: int) -> pm.ops.Moe:
    return pm.ops.Moe(tokens=tokens, hidden=2880, expert_hidden=2880, experts=128, top_k=4,
                      gpus=1, dtype="bf16", weight_dtype="mxfp4", routing="token_balanced")


def test_each_row_tile_converts_the_weights_it_multiplies(monkeypatch):
    """16 tokens x top-4 on 128 experts: every activated expert holds one 64-row tile, so one
    more operation per element adds 3 x 2880 x 2880 FMA-pipe operations per activated expert
    on Hopper; on Blackwell (MXFP4 in its MMAs) the generic count holds whatever the constant."""
    op = _experts(16)
    active = sum(1 for r in op.per_gpu_rows()[0] if r)

    def fma(hw_name: str, ops_per: float) -> float:
        monkeypatch.setitem(moe_op.CONVERT_OPS, "mxfp4", ops_per)
        hw = pm.hardware(hw_name)
        return op._gpu_demand(list(op.per_gpu_rows()[0]), 4096, hw).work["fma"]
    assert fma("H200-SXM", 7.0) - fma("H200-SXM", 6.0) == pytest.approx(active * 3 * 2880 ** 2)
    assert fma("B200", 7.0) == fma("B200", 6.0)


def test_hopper_converts_mxfp4_slower_than_blackwell_and_the_constant_is_fitted():
    c = fitted.CONSTANTS["moe.convert_ops.mxfp4"]
    assert 2.0 < c.value < 32.0 and c.fitted_on
    assert all(r.startswith("AICMXFP4-vllm-H200-SXM-") for r in c.fitted_on)
    small = _experts(16)
    # decode-sized: the conversion binds on Hopper, the weight bytes on Blackwell
    h200 = pm.predict_op(small, "H200-SXM")
    assert h200.bound == "fma"
    assert math.isfinite(pm.predict_op(small, "B200").time_s)
