"""GroupNorm (perfmodel/ops/groupnorm.py): PyTorch reads x twice forward, four times backward;
a fused kernel once (twice backward)."""
from __future__ import annotations

import pytest

import perfmodel as pm
from perfmodel.errors import InputError
from perfmodel.ops import GroupNorm

N, C, S, G = 16, 512, 4096, 32


def gn(**kw):
    return GroupNorm(**{**dict(batch=N, channels=C, spatial=S, groups=G, dtype="fp32"), **kw})


def test_pytorch_forward_reads_x_twice(h100):
    d = gn().demand(h100)
    x = N * C * S * 4
    assert d.kernels == 2
    assert d.hbm_bytes == pytest.approx(3 * x, rel=1e-3)  # moments read, apply read + write


def test_fused_forward_reads_x_once(h100):
    d = gn(implementation="fused").demand(h100)
    assert d.hbm_bytes == pytest.approx(2 * N * C * S * 4, rel=1e-3)
    assert pm.predict_op(gn(implementation="fused"), h100).time_s < \
        pm.predict_op(gn(), h100).time_s


def test_backward_reads_dy_and_x_twice(h100):
    d = gn(direction="bwd").demand(h100)
    assert d.kernels == 3
    assert d.hbm_bytes == pytest.approx(5 * N * C * S * 4, rel=1e-3)
    assert pm.predict_op(gn(direction="bwd"), h100).bound == "hbm"


def test_groups_must_divide_the_channels():
    with pytest.raises(InputError) as e:
        gn(groups=3)
    assert e.value.problems == ["groups: channels 512 is not a multiple of groups 3"]
