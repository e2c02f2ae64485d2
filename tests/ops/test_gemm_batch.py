"""The batched GEMM path (perfmodel.batch.gemm_batch, `pm.gemm_batch`, and predict_ops,
which takes it for cold GEMMs) gives predict_op's Estimates bit for bit: every field compared
by repr, on random shapes of random families (GPU, dtype, options) at both levels, the table's
columns equal to the Estimates' fields, and its errors."""
from __future__ import annotations

import random

import numpy as np
import pytest

import perfmodel as pm
from perfmodel.batch import gemm_batch
from tests.ops.gemm_cases import exact, random_gpu_dtype, random_size

def random_families(seed: int, families: int, shapes: int):
    """(hw, level, fixed options, list of size dicts) per family: sizes as the scalar path's
    test draws them (tiny, any, powers of two), so split-K, padding and huge shapes occur."""
    rng = random.Random(seed)
    out = []
    while len(out) < families:
        hw, dtype = random_gpu_dtype(rng)
        fixed = {"dtype": dtype}
        if rng.random() < 0.2:
            fixed["persistent"] = rng.choice((True, False))
        if rng.random() < 0.2:
            fixed["out_dtype"] = rng.choice(("fp32", "fp16", "fp8"))
        if dtype == "bf16" and rng.random() < 0.3:
            fixed["b_dtype"] = rng.choice(("int4", "fp8", "int8"))
        if dtype in ("fp8", "fp8_e4m3") and rng.random() < 0.3:
            fixed["fp8_scaling"] = "block"
        sizes = []
        while len(sizes) < shapes:
            s = dict(m=random_size(rng, 1 << 17), n=random_size(rng, 1 << 16),
                     k=random_size(rng, 1 << 16),
                     batch=rng.randint(1, 64) if rng.random() < 0.2 else 1,
                     count=rng.randint(1, 8) if rng.random() < 0.1 else 1)
            try:
                pm.ops.Gemm(**s, **fixed)
            except pm.InputError:  # a tensor too large
                continue
            sizes.append(s)
        out.append((hw, rng.choice(("pipes", "roofline")), fixed, sizes))
    return out


def check(families):
    compared = 0
    for hw, level, fixed, sizes in families:
        cols = {f: [s[f] for s in sizes] for f in ("m", "n", "k", "batch", "count")}
        table = gemm_batch(hw, level=level, **cols, **fixed)
        assert len(table) == len(sizes)
        pm.clear_cache()
        for j, s in enumerate(sizes):
            ref = pm.predict_op(pm.ops.Gemm(**s, **fixed), hw, level)
            got = table.estimate(j)
            where = (hw.name, level, fixed, s)
            assert exact(got) == exact(ref), where
            assert list(got.resource_time_s) == list(ref.resource_time_s), where
            assert list(got.details) == list(ref.details), where
            # the columns are the Estimate's fields
            assert table.time_s[j] == ref.time_s and table.bound[j] == ref.bound, where
            assert table.roofline_time_s[j] == ref.roofline_time_s, where
            assert (table.flop[j], table.hbm_bytes[j]) == (ref.flop, ref.hbm_bytes), where
            for r, t in ref.resource_time_s.items():
                assert table.resource_time_s[r][j] == t, where
            if ref.interval_s is not None:
                assert (table.interval_s[0][j], table.interval_s[1][j]) == ref.interval_s
            compared += 1
    return compared


def test_batch_is_predict_op_bit_for_bit():
    assert check(random_families(11, 24, 40)) == 24 * 40


@pytest.mark.slow
def test_batch_is_predict_op_bit_for_bit_on_thousands_of_shapes():
    assert check(random_families(12, 60, 120)) == 60 * 120


def test_decode_shapes_take_split_k_as_predict_op_does(h100):
    """m < 128 against a wide N: the unsplit tiles leave SMs idle, split-K wins some shapes and
    not others; the pruned split search keeps predict_op's pick (tile and factor)."""
    m = np.arange(1, 257)
    table = pm.gemm_batch(h100, m=m, n=5120, k=5120 + 7 * m, dtype="bf16")
    pm.clear_cache()
    splits = set()
    for j, mm in enumerate(m):
        ref = pm.predict_op(pm.ops.Gemm(m=int(mm), n=5120, k=5120 + 7 * int(mm), dtype="bf16"),
                            h100)
        assert exact(table.estimate(j)) == exact(ref)
        assert table.split_k[j] == ref.details["split_k"]
        splits.add(int(table.split_k[j]))
    assert 1 in splits and max(splits) > 1  # split and unsplit kernels across the sweep


def test_predict_ops_batches_cold_gemms_and_returns_predict_ops_estimates(h100):
    ops = [pm.ops.Gemm(m=mm, n=4096, k=3000 + mm, dtype="fp8") for mm in range(1, 60)]
    ops += [pm.ops.Gemm(m=5, n=5, k=5, dtype="bf16")]  # a family of one: the scalar path
    pm.clear_cache()
    batched = pm.predict_ops(ops, h100)
    assert pm.predict_ops(ops, h100) == batched  # memoized: the same objects again
    assert all(a is b for a, b in zip(pm.predict_ops(ops, h100), batched))
    pm.clear_cache()
    one_by_one = [pm.predict_op(o, h100) for o in ops]
    assert [exact(e) for e in batched] == [exact(e) for e in one_by_one]


def test_block_scaled_fp8_on_hopper_goes_through_predict_op(h100):
    """The CUDA-core promotion is the engine's overlap: those shapes are priced one by one,
    with the same table."""
    table = gemm_batch(h100, m=[64, 4096], n=7168, k=2048, dtype="fp8", fp8_scaling="block")
    assert table.estimates is not None
    ref = pm.predict_op(pm.ops.Gemm(m=4096, n=7168, k=2048, dtype="fp8", fp8_scaling="block"),
                        h100)
    assert table.estimate(1) is ref and table.time_s[1] == ref.time_s


def test_rows_and_broadcasting(h100):
    table = pm.gemm_batch(h100, m=[1, 64, 8192], n=8192, k=8192, dtype="bf16")
    rows = table.rows()
    assert [r["time_s"] for r in rows] == list(table.time_s)
    assert rows[2]["bound"].startswith("tensor") and rows[0]["bound"] == "hbm"
    assert all(lo < r["time_s"] < hi for r, (lo, hi) in
               zip(rows, (r["interval_s"] for r in rows)))


@pytest.mark.parametrize("kwargs,match", [
    (dict(m=[1, 2], n=[1, 2, 3], k=8), "do not broadcast"),
    (dict(m=[1.5], n=8, k=8), "whole numbers"),
    (dict(m=[0], n=8, k=8), r"\[1, 2\^40\]"),
    (dict(m=["a"], n=8, k=8), "integers"),
    (dict(m=[1 << 30], n=1 << 30, k=8), "above 2\\^40"),
])
def test_bad_sizes_name_the_field(h100, kwargs, match):
    with pytest.raises(pm.InputError, match=match):
        gemm_batch(h100, dtype="bf16", **kwargs)


def test_bad_family_is_the_ops_error(h100):
    with pytest.raises(pm.InputError, match="not supported"):
        gemm_batch(pm.hardware("a100"), m=[64], n=64, k=64, dtype="fp8")
    with pytest.raises(pm.InputError):
        gemm_batch(h100, m=[64], n=64, k=64, dtype="bf16", fp8_scaling="block")
    with pytest.raises(pm.InputError, match="unknown level"):
        gemm_batch(h100, m=[64], n=64, k=64, dtype="bf16", level="exact")
