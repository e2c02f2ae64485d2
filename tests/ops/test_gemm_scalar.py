"""The scalar GEMM path (perfmodel.predict.gemm_estimate: the plain-Python tile search and the
engine's formulas on floats) gives the engine's Estimates bit for bit: every field compared by
repr (floats exactly, -0.0 apart from 0.0), on random shapes, dtypes and flags on every GPU at
both levels, and predict_op, which takes it, agrees with the engine path and with clear_cache."""
from __future__ import annotations

import pytest

import perfmodel as pm
from perfmodel.predict import gemm_estimate
from tests.ops import gemm_cases
from tests.ops.gemm_cases import engine_estimate, exact



def random_gemms(seed: int, n: int):
    """The shared random cases with the engines' kernels among them (tests/ops/gemm_cases.py)."""
    return gemm_cases.random_gemms(seed, n, kernels=True)


def check(cases):
    mirrored = 0
    for op, hw, level in cases:
        fast = gemm_estimate(op, hw, level)
        if fast is None:  # block-scaled FP8 promoted on the CUDA cores: the engine's
            assert op.promotes_on_cuda_cores(hw)
            continue
        mirrored += 1
        assert exact(fast) == exact(engine_estimate(op, hw, level)), (op, hw.name, level)
    return mirrored


def test_scalar_path_is_the_engine_bit_for_bit():
    assert check(random_gemms(1, 400)) > 300


@pytest.mark.slow
def test_scalar_path_is_the_engine_bit_for_bit_on_thousands_of_shapes():
    assert check(random_gemms(2, 4000)) > 3000


def test_predict_op_takes_it_and_keeps_the_engine_numbers(h100):
    op = pm.ops.Gemm(m=333, n=4096, k=7168, dtype="fp8")
    pm.clear_cache()
    est = pm.predict_op(op, h100)
    assert exact(est) == exact(engine_estimate(op, h100, "pipes"))
    assert pm.predict_op(op, h100) is est  # memoized
    pm.clear_cache()
    assert pm.predict_op(op, h100) is not est
    # a graph schedules the same GEMM through the engine: the same time
    g = pm.OpGraph.from_ops([op]) if hasattr(pm.OpGraph, "from_ops") else None
    if g is not None:
        assert pm.predict(g, h100).ops[0].estimate.time_s == est.time_s


def test_engine_errors_stay_the_engines(h100):
    a100 = pm.hardware("a100")
    with pytest.raises(pm.InputError, match="not supported"):
        pm.predict_op(pm.ops.Gemm(m=64, n=64, k=64, dtype="fp8"), a100)
