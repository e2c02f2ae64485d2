"""Ops built from their YAML names (ops/base.py): bad parameters and unknown ops name the key."""
from __future__ import annotations

import pytest

import perfmodel as pm


@pytest.mark.parametrize("params, message", [
    (dict(m=0, n=1, k=1, dtype="bf16"), "m: expected an integer >= 1, got 0"),
    (dict(m=1, n=1, k=1, dtype="bf17"), "dtype: expected a dtype"),
    (dict(m=1, n=1, k=1, dtype="bf16", mm=3), "mm: unknown parameter for op 'gemm'"),
    (dict(n=1, k=1, dtype="bf16"), "m: missing required parameter of op 'gemm'"),
    (dict(m="big", n=1, k=1, dtype="bf16"), "m: expected an integer >= 1, got 'big'"),
])
def test_bad_op_parameters_name_the_key(params, message):
    with pytest.raises(pm.InputError, match=message):
        pm.ops.op("gemm", **params)


def test_unknown_op_is_named():
    with pytest.raises(pm.InputError, match="unknown op 'gemmm'"):
        pm.ops.op("gemmm", m=1)
