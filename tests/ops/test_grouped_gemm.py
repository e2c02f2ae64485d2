"""The grouped GEMM: one persistent launch over every group's tiles, per-group M padded to the
tile, each active group's weights read once, ragged groups by their multinomial expectation,
the masked layout's slab padding, block-scaled dtypes, input errors."""
from __future__ import annotations

import numpy as np
import pytest

import perfmodel as pm
from perfmodel.engine import resolve

N, K = 4096, 2048


def gg(**kw):
    return pm.ops.op("grouped_gemm", **{"n": N, "k": K, "dtype": "bf16", **kw})


def chosen(op, hw):
    return resolve(op.demand(pm.hardware(hw)), pm.hardware(hw))


@pytest.mark.parametrize("hw", ["H100-SXM", "B200", "A100-SXM"])
def test_one_group_is_a_gemm(hw):
    """A single group is a plain GEMM (no split-K at this size): the same kernel, work, time."""
    one = pm.predict_op(gg(group_m=[8192]), hw)
    gemm = pm.predict_op(pm.ops.Gemm(m=8192, n=N, k=K, dtype="bf16"), hw)
    assert one.details["tile"] == gemm.details["tile"]
    assert one.time_s == pytest.approx(gemm.time_s, rel=1e-9)
    assert one.flop == gemm.flop and one.hbm_bytes == gemm.hbm_bytes


def test_each_group_pads_to_the_tile_and_reads_its_weights_once():
    d = chosen(gg(group_m=[1] * 64), "H100-SXM")
    tm = int(d.details["tile"].split("x")[0])
    assert d.flop == 2.0 * 64 * N * K  # useful work
    assert d.work["tensor:bf16"] >= 2.0 * 64 * tm * N * K  # every group a whole M tile
    assert d.details["padding_fraction"] == pytest.approx(1 - 1 / tm)
    weights = 64 * N * K * 2.0
    assert d.hbm_bytes == pytest.approx(weights + 64 * (K + N) * 2.0)
    assert weights <= d.work["hbm"] <= 1.01 * d.hbm_bytes
    assert d.kernels == 1  # one launch for every group


def test_empty_groups_cost_nothing():
    with_empty = chosen(gg(group_m=[256, 0, 0, 512]), "H100-SXM")
    without = chosen(gg(group_m=[256, 512]), "H100-SXM")
    assert with_empty.work == without.work
    assert with_empty.details["active_groups"] == 2


def test_decode_is_bound_by_the_weights_of_the_active_groups():
    """64 tokens over 64 experts: about 64·(1−1/64)^64 ≈ 23 experts get none and read nothing."""
    d = chosen(gg(groups=64, m=64, k=7168), "H100-SXM")
    active = 64 * (1 - (1 - 1 / 64) ** 64)
    assert d.details["active_groups"] == pytest.approx(active, rel=1e-9)
    assert d.hbm_bytes == pytest.approx(active * N * 7168 * 2.0 + 64 * (7168 + N) * 2.0)
    assert pm.predict_op(gg(groups=64, m=64, k=7168), "H100-SXM").bound == "hbm"


@pytest.mark.parametrize("groups, m", [(16, 3000), (8, 700), (256, 262144)])
def test_ragged_tiles_are_the_multinomial_expectation(groups, m):
    """Cross-check: the closed-form expectation Σ_j P(X > j·tm) against random routings."""
    hw = pm.hardware("H100-SXM")
    op = gg(groups=groups, m=m)
    d = resolve(op.demand(hw), hw)
    tm, tn = (int(x) for x in d.details["tile"].split("x")[:2])
    rng = np.random.default_rng(0)
    draws = rng.multinomial(m, np.full(groups, 1 / groups), size=4000)
    sampled = np.mean(np.sum(-(-draws // tm), axis=1)) * -(-N // tn)
    assert d.details["tiles"] == pytest.approx(sampled, rel=0.01)
    # exact sizes: the listed groups' tiles
    exact = resolve(gg(group_m=[int(x) for x in draws[0]]).demand(hw), hw)
    assert exact.flop == pytest.approx(d.flop)


def test_masked_layout_moves_the_padding_rows_too():
    rows = [100, 3, 250, 60]
    contiguous = chosen(gg(group_m=rows), "H100-SXM")
    masked = chosen(gg(group_m=rows, layout="masked", capacity=256), "H100-SXM")
    assert masked.flop == contiguous.flop and masked.hbm_bytes == contiguous.hbm_bytes
    assert masked.work["hbm"] > contiguous.work["hbm"]  # the padded rows of each last tile
    hw = pm.hardware("H100-SXM")
    assert pm.predict_op(gg(group_m=rows, layout="masked", capacity=256), hw).time_s >= \
        pm.predict_op(gg(group_m=rows), hw).time_s
    # masked with no m: every slab full
    full = chosen(gg(groups=4, layout="masked", capacity=256), "H100-SXM")
    assert full.flop == 2.0 * 4 * 256 * N * K and full.details["padding_fraction"] == 0


def test_block_scaled_dtypes():
    h100, b200 = pm.hardware("H100-SXM"), pm.hardware("B200")
    fp8 = gg(groups=8, m=8192, dtype="fp8", fp8_scaling="block")
    d = resolve(fp8.demand(h100), h100)
    assert d.overlap is not None and d.work["fma"] > d.work["tensor:fp8"] / 512
    assert int(d.details["tile"].split("x")[1]) <= 128  # one weight scale per N tile
    scales = 8192 * (K // 128) * 4.0 + 8 * (K // 128) * (N // 128) * 4.0
    plain = resolve(gg(groups=8, m=8192, dtype="fp8").demand(h100), h100)
    assert d.hbm_bytes == pytest.approx(plain.hbm_bytes + scales)
    assert resolve(fp8.demand(b200), b200).overlap is None  # tcgen05 applies the scales
    nv = pm.predict_op(gg(groups=8, m=8192, dtype="nvfp4"), b200)
    mx = pm.predict_op(gg(groups=8, m=8192, dtype="mxfp8"), b200)
    assert nv.time_s < mx.time_s < pm.predict_op(gg(groups=8, m=8192), b200).time_s
    with pytest.raises(pm.InputError, match="not supported by H100-SXM"):
        pm.predict_op(gg(groups=8, m=8192, dtype="nvfp4"), h100)


def test_persistent_kernels_expose_fixed_costs_once_per_sm():
    """Serial (prologue/epilogue) work: once per SM when persistent, once per tile otherwise."""
    hw = pm.hardware("H100-SXM")
    per_sm = chosen(gg(groups=64, m=65536), hw)
    per_tile = chosen(gg(groups=64, m=65536, persistent=False), hw)
    assert per_sm.details["persistent"] and not per_tile.details["persistent"]
    tiles = per_tile.details["tiles"]
    assert per_tile.serial_work["l2"] / per_sm.serial_work["l2"] == pytest.approx(
        tiles / (tiles / np.ceil(tiles / hw.sm_count)), rel=1e-9)
    assert per_sm.serial_round_trips == 0
    assert per_tile.serial_round_trips == np.ceil(tiles / hw.sm_count) - 1


@pytest.mark.parametrize("params, key", [
    (dict(groups=3, group_m=[1, 2]), "groups"),
    (dict(m=5, group_m=[1, 2]), "m"),
    (dict(group_m=[0, 0]), "group_m"),
    (dict(group_m=[1, -2]), "group_m"),
    (dict(groups=4), "m"),
    (dict(n=1), "groups"),
    (dict(groups=2, m=10, layout="masked"), "capacity"),
    (dict(groups=2, m=10, capacity=8), "capacity"),
    (dict(group_m=[9, 1], layout="masked", capacity=8), "group_m"),
    (dict(groups=2, m=17, layout="masked", capacity=8), "m"),
    (dict(groups=2, m=10, fp8_scaling="block"), "fp8_scaling"),
    (dict(groups=2, m=10, dtype="fp32"), "dtype"),
])
def test_bad_input_is_one_line_per_problem(params, key):
    with pytest.raises(pm.InputError) as e:
        gg(**params)
    assert str(e.value).splitlines()[0].startswith(key)


@pytest.mark.parametrize("m, groups", [(4096, 8), (16384, 256), (37, 64), (1 << 20, 384)])
def test_a_ragged_groups_tail_is_the_binomial_survival_function_bit_for_bit(m, groups):
    """GroupedGemm._tail (scipy.special.betainc) is scipy.stats.binom.sf, float for float, at
    and beyond the group's rows."""
    from scipy.stats import binom
    op = pm.ops.GroupedGemm(groups=groups, m=m, n=256, k=256, dtype="bf16")
    x = np.arange(-2, min(m + 3, 20000))
    assert np.array_equal(op._tail(x), binom.sf(x, m, 1.0 / groups))
