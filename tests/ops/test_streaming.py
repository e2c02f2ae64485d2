"""Streaming ops (elementwise, norm, softmax, memcpy) at HBM speed."""
from __future__ import annotations

import pytest

import perfmodel as pm


def test_large_elementwise_is_hbm_bound(any_hw):
    est = pm.predict_op(pm.ops.Elementwise(elements=1 << 28, dtype="bf16", inputs=2), any_hw)
    assert est.bound == "hbm"
    assert est.time_s == pytest.approx(3 * (1 << 28) * 2 / any_hw.hbm_bandwidth_bytes_per_s,
                                       rel=0.05)
