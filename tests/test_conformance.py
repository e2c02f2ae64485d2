"""Every registered op through the same invariants on every GPU (docs/design.md "Conventions",
item 5):
time > 0; pipes time >= roofline time; bound named from the vocabulary; utilization <= 1;
time monotone (non-decreasing) in each size parameter."""
from __future__ import annotations

import math

import pytest

import perfmodel as pm
from perfmodel.demand import FLOOR_BOUNDS, is_valid_resource
from perfmodel.ops import REGISTRY

EXAMPLES = {name: cls.EXAMPLE for name, cls in REGISTRY.items()}
CASES = [(name, hw.name) for name in sorted(REGISTRY) for hw in pm.list_hardware()]


def test_every_registered_op_has_an_example():
    for name, cls in REGISTRY.items():
        assert cls.EXAMPLE, name
        assert cls(**cls.EXAMPLE).to_dict()["op"] == name


def _predict(name, hw, level="pipes", **changes):
    return pm.predict_op(pm.ops.op(name, **{**EXAMPLES[name], **changes}), hw, level)


def _skip_unsupported(name, hw):
    """Skip an op that states it cannot run on `hw` (Op.unsupported_on: DeepEP's group needs an
    NVLink domain that large); the reason is the op's own."""
    reason = getattr(pm.ops.op(name, **EXAMPLES[name]), "unsupported_on", lambda hw: None)(hw)
    if reason:
        pytest.skip(reason)


@pytest.mark.parametrize("name, hw_name", CASES)
def test_invariants(name, hw_name):
    hw = pm.hardware(hw_name)
    _skip_unsupported(name, hw)
    est = _predict(name, hw)
    roof = _predict(name, hw, level="roofline")
    assert est.time_s > 0 and math.isfinite(est.time_s)
    assert est.time_s >= roof.time_s * (1 - 1e-9)
    assert est.roofline_time_s == pytest.approx(roof.time_s)
    assert is_valid_resource(est.bound) or est.bound in FLOOR_BOUNDS
    assert all(is_valid_resource(r) or r in FLOOR_BOUNDS for r in est.resource_time_s)
    assert all(0 <= u <= 1 + 1e-9 for u in est.utilization.values())
    assert est.resource_time_s[est.bound] == max(est.resource_time_s.values())


@pytest.mark.parametrize("name, hw_name", [(n, "H100-SXM") for n in sorted(REGISTRY)]
                         + [(n, "B200") for n in sorted(REGISTRY)])
def test_monotone_in_problem_size(name, hw_name):
    hw = pm.hardware(hw_name)
    base = _predict(name, hw).time_s
    for param in REGISTRY[name].SIZE_PARAMS:
        value = EXAMPLES[name].get(param, REGISTRY[name].PARAMS[param].default)
        bigger = value * 2 if isinstance(value, (int, float)) else value
        grown = _predict(name, hw, **{param: bigger}).time_s
        assert grown >= base * (1 - 1e-9), f"{name}: doubling {param} made it faster"


def test_size_params_are_declared():
    for name, cls in REGISTRY.items():
        assert cls.SIZE_PARAMS, name
        assert set(cls.SIZE_PARAMS) <= set(cls.PARAMS), name
