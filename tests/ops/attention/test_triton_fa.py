"""llm-foundry's Triton FlashAttention (kernel="triton_fa"; perfmodel/ops/attention/triton_fa.py,
sourced from llmfoundry/models/layers/flash_attn_triton.py, llm-foundry 0.4.0)."""
from __future__ import annotations

import pytest

import perfmodel as pm
from perfmodel.errors import InputError
from perfmodel.ops.attention import op as attention_op
from perfmodel.ops.attention.triton_fa import dot_smem_elements, padded_head_dim, warp_grid

LONG = dict(batch=1, heads=16, seq_q=16384, head_dim=128, dtype="bf16", causal=True)


def est(hw="A100-SXM", **kw):
    return pm.predict_op(pm.ops.Attention(**{**LONG, **kw}), hw)


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_slower_than_fa2_on_a100_because_its_tile_loads_serialize(direction, head_dim):
    """num_stages=1: each K/V (forward) or Q/dO (backward) tile's move from L2 adds to the
    MMAs and the softmax, where FA2's cp.async stages hide it: slower at the same shape."""
    tri = est(kernel="triton_fa", direction=direction, head_dim=head_dim)
    fa2 = est(kernel="fa2", direction=direction, head_dim=head_dim)
    assert tri.time_s > 1.1 * fa2.time_s
    t = tri.resource_time_s
    # serial: at least the MMAs plus the L2 loads, not their max
    assert tri.time_s >= (t["tensor:bf16"] + t["l2"]) * (1 - 1e-9)


def test_the_serial_loads_are_the_overlap_of_efficiency_zero():
    d = pm.ops.Attention(**LONG, kernel="triton_fa").demand(pm.hardware("A100-SXM"))
    assert d.overlap.b == ("l2",) and d.overlap.efficiency == 0.0
    # inside it, FA2's own partial overlaps (ldmatrix with the MMAs, softmax with both)
    assert d.overlap.a.efficiency == attention_op.SOFTMAX_OVERLAP["fa2"]
    assert d.overlap.a.a.efficiency == attention_op.MMA_SYNC_OPERAND_OVERLAP


def test_backward_by_hand_one_head_256_tokens_causal_head_dim_64():
    """Two 128-key columns; the causal walk visits (0,0), (1,0), (1,1): 3 tile pairs."""
    o = pm.ops.Attention(batch=1, heads=1, seq_q=256, head_dim=64, dtype="bf16", causal=True,
                         direction="bwd", kernel="triton_fa")
    d = o.demand(pm.hardware("A100-SXM"))
    pre, zero, main, post = d.sequence
    assert d.kernels == 4
    w = main.work
    tile_scores = 3 * 128 * 128
    assert w["tensor:bf16"] == 2 * (3 * 64 + 2 * 64) * tile_scores   # five dots, A100: rate 1
    assert w["xu"] == tile_scores                                     # one exp per score
    assert w["fma"] == 7 * tile_scores
    assert w["alu"] == (1 + 2) * tile_scores     # the causal compare + select on every tile
    # 8 warps as 4 x 2: QKᵀ and dP (128x128, depth 64) read A twice and B four times; dV, dK,
    # dQ (128x64, depth 128) likewise; Q, dO, P and dS stored
    per_pair = 2 * (128 * 64 * 2 + 128 * 64 * 4) + 3 * (128 * 128 * 2 + 64 * 128 * 4) \
        + 2 * 128 * 64 + 2 * 128 * 128
    assert w["smem"] == 3 * per_pair * 2
    kv = 256 * 2 * 64 * 2
    rows = 3 * 128
    assert w["l2"] == kv + rows * 2 * 64 * 2 + rows * 8 + rows * 64 * 4 * 2 + kv
    assert main.hbm_bytes == 256 * 64 * 2 * 2 + 2 * kv + 2 * 256 * 4 + 256 * 64 * 4
    assert main.launch.ctas == 2 and main.launch.threads_per_cta == 256
    assert main.cta_imbalance == pytest.approx(2 / 1.5 - 1)
    assert d.flop == 2 * (3 * 64 + 2 * 64) * (256 * 257 // 2)      # the unmasked scores
    assert zero.hbm_bytes == 256 * 64 * 4 and pre.hbm_bytes == 2 * 256 * 64 * 2 + 256 * 4


def test_head_dim_112_computes_at_128():
    a = pm.ops.Attention(**{**LONG, "head_dim": 112}, kernel="triton_fa")
    b = pm.ops.Attention(**LONG, kernel="triton_fa")
    hw = pm.hardware("A100-SXM")
    assert padded_head_dim(112) == 128 and padded_head_dim(8) == 16
    assert a.demand(hw).work["tensor:bf16"] == b.demand(hw).work["tensor:bf16"]
    assert a.demand(hw).flop == pytest.approx(b.demand(hw).flop * 112 / 128)


def test_forward_warps_by_head_dim_and_causal_tiles_skipped():
    hw = pm.hardware("A100-SXM")
    small = pm.ops.Attention(**{**LONG, "head_dim": 64, "seq_q": 1024},
                             kernel="triton_fa").demand(hw)
    dense = pm.ops.Attention(**{**LONG, "head_dim": 64, "seq_q": 1024, "causal": False},
                             kernel="triton_fa").demand(hw)
    assert small.launch.threads_per_cta == 128
    assert pm.ops.Attention(**LONG, kernel="triton_fa").demand(hw).launch.threads_per_cta == 256
    # 8 query tiles: 36 of 64 tile pairs visited, each with the causal mask's compare + select
    assert small.details["tile_pairs"] == 36 * 16 and dense.details["tile_pairs"] == 64 * 16
    assert small.work["alu"] == 3 * 36 * 16 * 128 * 128
    assert dense.work["alu"] == 64 * 16 * 128 * 128


def test_warp_grid_as_square_as_possible():
    assert warp_grid(4, 128, 128) == (2, 2) and warp_grid(8, 128, 128) == (4, 2)
    assert warp_grid(8, 128, 64) == (4, 2)
    assert dot_smem_elements(128, 128, 64, 4) == 128 * 64 * 2 + 128 * 64 * 2


def test_runs_on_hopper_through_mma_sync_not_on_blackwell():
    h100 = est("H100-SXM", kernel="triton_fa")
    assert h100.time_s > est("H100-SXM", kernel="fa2").time_s
    with pytest.raises(InputError, match="triton_fa"):
        est("B200", kernel="triton_fa")


@pytest.mark.parametrize("kw, param", [
    (dict(head_dim=256), "head_dim"), (dict(head_dim_v=64), "head_dim_v"),
    (dict(kv_heads=4), "kv_heads"), (dict(dropout_p=0.1), "dropout_p"), (dict(window=128), "window"),
    (dict(seq_kv=32768), "seq_kv"), (dict(dtype="fp8"), "dtype")])
def test_refuses_what_the_kernel_does_not_take(kw, param):
    with pytest.raises(InputError, match=f"^{param}: attention kernel 'triton_fa'"):
        pm.ops.Attention(**{**LONG, **kw}, kernel="triton_fa").demand(pm.hardware("H100-SXM"))


def test_llm_foundry_rows_run_it_on_gpus_it_runs_on():
    """The replay gives llm-foundry's rows the kernel (llm-foundry 0.4.0's default attn_impl),
    and each row's GPU has the mma.sync or wgmma tensor cores it is written for."""
    from perfmodel.validation.training import load_training_cases
    from perfmodel.validation.training_predict import FRAMEWORK_ATTENTION
    assert FRAMEWORK_ATTENTION["llm-foundry"] == "triton_fa"
    gpus = {c.hw for c in load_training_cases()[0] if c.framework == "llm-foundry"}
    assert gpus
    for gpu in gpus:
        assert pm.hardware(gpu).mma_instruction in attention_op.KERNEL_MMA["triton_fa"]
