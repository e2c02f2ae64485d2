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


def test_triton_block_m_follows_matmul_ogs_opt_flags():
    # block_m = max(16, min(next_pow2(picks // local experts), 128))
    assert moe_op.triton_block_m(1 * 4, 128) == 16        # decode: 1 row per expert at most
    assert moe_op.triton_block_m(1024 * 4, 128) == 32     # EP1: 32 rows per expert
    assert moe_op.triton_block_m(4096 * 4, 128) == 128    # EP1: 128 rows per expert
    assert moe_op.triton_block_m(65 * 128, 128) == 128    # 65 rounds up to 128
    assert moe_op.triton_block_m(1 << 20, 1) == 128       # capped
    # EP8 without an all-to-all: every rank gathers all 4096 picks against its 16 experts, so
    # the estimate is 256 rows per expert, eight times the 32 an expert gets
    assert moe_op.triton_block_m(1024 * 4, 128 // 8) == 128


def _hopper_gemm_work(tokens: int, gpus: int, monkeypatch) -> tuple[list[int], float, float]:
    """(rows of the first GPU's experts, its MMA work, the FMA-pipe operations one more
    conversion operation per weight element adds) on H200."""
    op = pm.ops.Moe(tokens=tokens, hidden=2880, expert_hidden=2880, experts=128, top_k=4,
                    gpus=gpus, dtype="bf16", weight_dtype="mxfp4", routing="token_balanced",
                    kernel="triton")
    rows = list(op.per_gpu_rows()[0])
    hw = pm.hardware("H200-SXM")

    def work(ops_per: float) -> dict:
        monkeypatch.setitem(moe_op.CONVERT_OPS, "mxfp4", ops_per)
        return op._gpu_demand(rows, 4096, hw).work
    one_more = work(7.0)["fma"] - work(6.0)["fma"]
    return rows, work(6.0)["tensor:bf16"], one_more


def test_triton_row_tiles_of_128_convert_the_weights_once_per_128_rows(monkeypatch):
    """4096 tokens x top-4 on 128 experts (EP1): about 128 rows per expert, so 128-row tiles,
    where 64-row tiles would convert each weight about twice as often; the MMAs cover whole
    tiles."""
    rows, mma, per_op = _hopper_gemm_work(4096, 1, monkeypatch)
    assert sum(rows) == 4096 * 4 and len(rows) == 128
    tiles = sum(math.ceil(t / 128) for t in rows)
    assert tiles < sum(math.ceil(t / 64) for t in rows) / 1.5
    assert per_op == pytest.approx(tiles * 3 * 2880 ** 2)
    assert mma == pytest.approx(2.0 * tiles * 128 * 3 * 2880 ** 2)


def test_triton_ep8_pads_each_experts_rows_to_the_rank_blind_tile(monkeypatch):
    """EP8, 1024 tokens: an expert gets about 32 rows, but the tile is 128 (the estimate counts
    every rank's picks), so the MMAs run over 128 rows per local expert, twice a 64-row tile's;
    the conversions, one tile per expert, are as many as 64-row tiles would make."""
    rows, mma, per_op = _hopper_gemm_work(1024, 8, monkeypatch)
    assert len(rows) == 16 and max(rows) <= 64
    assert mma == pytest.approx(2.0 * 16 * 128 * 3 * 2880 ** 2)
    assert per_op == pytest.approx(16 * 3 * 2880 ** 2)


def test_the_grouped_kernel_keeps_its_64_row_tiles():
    """The triton row tile is the Triton experts' alone: the grouped runner (CUTLASS's) keeps
    64-row tiles, so at 4096 tokens it converts each weight about twice as often."""
    kw = dict(tokens=4096, hidden=2880, expert_hidden=2880, experts=128, top_k=4, gpus=1,
              dtype="bf16", weight_dtype="mxfp4", routing="token_balanced")
    hw = pm.hardware("H200-SXM")
    grouped, triton = (pm.predict_op(pm.ops.Moe(kernel=k, **kw), hw).time_s
                       for k in ("grouped", "triton"))
    assert triton < grouped
