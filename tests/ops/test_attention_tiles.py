"""Attention tiles and grid (ops/attention/tiles.py): key-tile widths that fit shared memory, FA2's
split-KV heuristic."""
from __future__ import annotations

import pytest

import perfmodel as pm


@pytest.mark.parametrize("hw_name", ["H100-SXM", "B200"])
@pytest.mark.parametrize("head_dim", [64, 96, 128, 192, 256])
@pytest.mark.parametrize("dtype, v_transposed", [("bf16", False), ("fp8", True)])
def test_key_tile_and_q_tile_fit_in_shared_memory(hw_name, head_dim, dtype, v_transposed):
    """The key tile is as wide as the family's default allows while Q and KV_STAGES K/V buffers
    (plus FP8's transposed V on Hopper) fit in a CTA's shared memory, in whole MMA K steps."""
    from perfmodel.ops.attention import tiles
    hw = pm.hardware(hw_name)
    b = 1 if dtype == "fp8" else 2
    bn = tiles.kv_tile_width(hw, 128, 128, head_dim, head_dim, b, v_transposed)
    used = 128 * head_dim * b + tiles.KV_STAGES * bn * head_dim * (3 if v_transposed else 2) * b
    assert used <= hw.smem_per_cta_bytes
    assert bn % (32 // b) == 0
    wider = used + tiles.KV_STAGES * (32 // b) * head_dim * (3 if v_transposed else 2) * b
    assert bn == 128 or wider > hw.smem_per_cta_bytes  # one K step more would not fit


def test_head_dim_256_in_16_bit_narrows_the_key_tile_to_80():
    """128 x 128 at hd256 bf16 would need 64 KB (Q) + 2 x 128 KB (K, V) > 227 KB."""
    from perfmodel.ops.attention import tiles
    hw = pm.hardware("H100-SXM")
    assert tiles.kv_tile_width(hw, 128, 128, 256, 256, 2, False) == 80
    assert tiles.kv_tile_width(hw, 128, 128, 256, 256, 1, True) == 128  # FP8 fits 128
    assert tiles.kv_tile_width(hw, 128, 128, 128, 128, 2, False) == 128
    # MLA decode (latent K of 576 dims whose first 512 are V, 64-row query tiles): 64-key blocks
    # as FlashMLA's; counting V as a buffer of its own would have given 32
    assert tiles.kv_tile_width(hw, 64, 128, 576, 512, 2, False, shared_kv=True) == 64
    assert tiles.kv_tile_width(hw, 64, 128, 576, 512, 2, False) == 32


def test_fa2_splits_the_kv_cache_by_its_own_heuristic():
    """FA2's split-KV decode (flash_api.cpp num_splits_heuristic): the fewest splits within 85 %
    of the best wave efficiency over 2 CTA slots per SM, none once the grid fills 80 % of them;
    key tiles of 256/128/64 by head dim."""
    from perfmodel.ops.attention import tiles
    assert tiles.fa2_num_splits(8, 264, 64) == 32      # 8 x 32 = 256 CTAs: 0.97 of a wave
    assert tiles.fa2_num_splits(256, 264, 64) == 1     # already 97 % of the slots
    assert tiles.fa2_num_splits(64, 264, 32) == 4      # 256 CTAs; 5 splits would waste a wave
    assert [tiles.fa2_splitkv_block_n(d) for d in (64, 128, 256)] == [256, 128, 64]
    hw = pm.hardware("H100-SXM")

    def decode(batch):
        return pm.ops.Attention(batch=batch, heads=32, kv_heads=8, seq_q=1, seq_kv=8192,
                                head_dim=128, dtype="bf16", kernel="fa2").demand(hw)
    few, many = decode(2), decode(64)
    slots = 2 * hw.sm_count
    assert few.details["kv_splits"] == tiles.fa2_num_splits(2 * 8, slots, 8192 // 128) > 1
    assert few.kernels == 2 and few.launch.threads_per_cta == 128  # + the combine kernel
    assert many.details["kv_splits"] == 1 and many.kernels == 1    # 512 CTAs fill the GPU


LENGTHS = (1, 2, 15, 16, 17, 63, 64, 65, 127, 128, 129, 200, 255, 256, 257, 1000, 2048, 4097)
WINDOWS = (None, 1, 2, 63, 64, 65, 127, 128, 129, 1000, 5000)
TILE_SHAPES = ((128, 128), (64, 64), (128, 64), (64, 128), (256, 128), (128, 80), (192, 32),
               (1, 1), (3, 5))


@pytest.mark.parametrize("bm, bn", TILE_SHAPES)
def test_visited_closed_form_equals_the_row_by_row_count(bm, bn):
    """tiles.visited (closed form) and the oracle's row-by-row count agree exactly on every
    causal, windowed and bottom-right (seq_kv != seq_q) mask of a grid of lengths."""
    from perfmodel.ops.attention import tiles
    from tests.oracles import visited_by_rows
    for q in LENGTHS:
        for k in LENGTHS:
            for causal in (False, True):
                for w in WINDOWS:
                    assert tiles.visited.__wrapped__(q, k, causal, w, bm, bn) \
                        == visited_by_rows(q, k, causal, w, bm, bn), (q, k, causal, w, bm, bn)


def test_visited_closed_form_equals_the_row_by_row_count_on_random_shapes():
    import random
    from perfmodel.ops.attention import tiles
    from tests.oracles import visited_by_rows
    rng = random.Random(17)
    for _ in range(3000):
        q = rng.randint(1, 20000)
        k = rng.choice([q, rng.randint(1, 20000)])
        w = rng.choice([None, rng.randint(1, 30000)])
        bm, bn = rng.choice([64, 128, 256, rng.randint(1, 300)]), rng.choice(
            [32, 64, 80, 128, rng.randint(1, 300)])
        causal = rng.random() < 0.5
        assert tiles.visited.__wrapped__(q, k, causal, w, bm, bn) \
            == visited_by_rows(q, k, causal, w, bm, bn), (q, k, causal, w, bm, bn)


def test_visited_is_constant_time_in_the_length():
    """A million-token causal mask: exact integers, no per-row work (tens of µs, not ms)."""
    from perfmodel.ops.attention import tiles
    q = 1 << 20
    pairs, scores = tiles.visited.__wrapped__(q, q, True, None, 128, 128)
    t = q // 128
    assert pairs == t * (t + 1) // 2 and scores == q * (q + 1) // 2
    assert tiles.visited.__wrapped__(q, q, True, 4096, 128, 128)[1] \
        == 4096 * q - 4095 * 4096 // 2


def test_floor_sum_equals_the_sum():
    import random
    from perfmodel.ops.attention.tiles import floor_sum
    rng = random.Random(3)
    for _ in range(2000):
        n, m = rng.randint(0, 60), rng.randint(1, 50)
        a, b = rng.randint(-200, 200), rng.randint(-500, 500)
        assert floor_sum(n, m, a, b) == sum((a * i + b) // m for i in range(n))


def test_fa3_decodes_with_its_forward_query_tile():
    """FlashAttention-3 has no decode kernel: PackGQA puts a KV head's query rows into its
    128-row forward tile and both consumer warpgroups work on every row, so a decode call's
    softmax runs 128 rows per KV tile where the flash-decoding designs run 64 (tiles.
    FULL_TILE_DECODE). TensorRT-LLM's Hopper decode priced on FA3's design and MLA's latent
    decode (FlashMLA's 64-row kernel) keep 64."""
    from perfmodel.ops.attention import tiles
    hw = pm.hardware("H200-SXM")

    def tiling(kernel="fa3", **kw):
        shape = dict(batch=64, heads=64, kv_heads=8, seq_q=1, seq_kv=4096, d=128, dv=128,
                     element_bytes=1, causal=False, window=None, dropout=False,
                     v_transposed=True, shared_kv=False)
        shape.update(kw)
        return tiles.tiling(hw, kernel, "fa3", "fwd", **shape)
    assert tiling().tile_m == 128 and tiling().decode
    assert tiling(own_kernel=False).tile_m == tiles.DECODE_TILE_M == 64
    assert tiling(kernel="fa2").tile_m == 64
    assert tiling(heads=16, kv_heads=1, d=576, dv=512, shared_kv=True).tile_m == 64
    # exps per call: the padded rows count (8 real rows of 128 per KV head here)
    op = pm.ops.Attention(batch=64, heads=64, kv_heads=8, seq_q=1, seq_kv=4096, head_dim=128,
                          dtype="fp8", kernel="fa3")
    t = tiling()
    assert t.pairs == 64 * 8 * -(-4096 // t.bn)
    assert op.demand(hw).work["xu"] >= t.pairs * 128 * t.bn  # an exp per (padded) score


def test_fa3_fp8_decode_is_not_half_its_bf16_time():
    """AIConfigurator's vLLM 0.24.0 FA3 generation table on H200 (64/8 heads, 4096 keys, batch
    64): BF16 255.6 us, FP8 191.9 us, a ratio of 0.75 where the bytes alone give 0.5. With the
    128-row tile the padded rows' softmax binds the FP8 call: the predicted ratio is above 0.6;
    the BF16 call stays memory-bound, within 10 % of 255.6 us."""
    hw = pm.hardware("H200-SXM")

    def t(dtype):
        return pm.predict_op(pm.ops.Attention(batch=64, heads=64, kv_heads=8, seq_q=1,
                                              seq_kv=4096, head_dim=128, dtype=dtype,
                                              kernel="fa3"), hw)
    bf16, fp8 = t("bf16"), t("fp8")
    assert bf16.bound == "hbm" and bf16.time_s == pytest.approx(255.6e-6, rel=0.10)
    assert fp8.time_s / bf16.time_s > 0.6
