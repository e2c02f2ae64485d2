"""FA4's forward exp emulation as flash-attn-4 4.0.0b40 schedules it: config.py select_ex2_emu
(ex2_emu_freq, ex2_emu_start_frg per launch) and softmax.py apply_exp2_convert (which scores of a
row's 32-score fragments go to the FMA pipe)."""
import pytest

import perfmodel as pm
from perfmodel.ops.attention import op as att


@pytest.mark.parametrize("bn, freq, start, share", [
    (128, 16, 1, 0.125),     # pairs k = 12, 14, 28, 30 of 32 in fragments 1, 2 of 4
    (128, 16, 0, 0.1875),    # flash-attn 2.8.3's rule: fragments 0, 1, 2
    (128, 10, 1, 0.1875),    # k mod 10 in {6, 8}: 12 of 32, fragments 1, 2
    (128, 8, 1, 0.25),       # FP8 causal: half of each emulated fragment
    (128, 14, 0, 0.1875),    # head dim 256: k mod 14 in {10, 12}: 8 of 32, fragments 0-2
    (128, 32, 1, 0.0625),    # k = 28, 30 only
    (128, 0, 0, 0.0),        # freq 0: every exp on MUFU
    (64, 16, 1, 0.0),        # fragment 0 is before the start, fragment 1 the last
    (32, 16, 0, 0.0),        # one fragment: the last always stays on MUFU
])
def test_emulated_share_of_a_row_by_hand(bn, freq, start, share):
    assert att.e2e_emulated_fraction(bn, freq, start) == pytest.approx(share, rel=1e-12)


def test_the_2_8_3_rule_is_the_same_pattern_from_fragment_0():
    for freq in (10, 16):
        assert att.fa4_emulated_fraction(128, 128, freq) == att.e2e_emulated_fraction(128, freq, 0)
    assert att.fa4_emulated_fraction(128, 192, 16) == 0.0


SM100 = "10.0"


@pytest.mark.parametrize("cc, kw, schedule", [
    (SM100, dict(two_cta=False, causal=False, head_dim=64), (16, 1)),    # untuned default
    (SM100, dict(two_cta=True, causal=False, head_dim=128), (10, 1)),    # SM100_TUNING
    (SM100, dict(two_cta=False, causal=True, head_dim=128), (16, 1)),
    (SM100, dict(two_cta=False, causal=True, head_dim=128, fp8=True), (8, 1)),  # FP8 override
    (SM100, dict(two_cta=True, causal=False, head_dim=192), (16, 0)),
    (SM100, dict(two_cta=False, causal=False, head_dim=192), (0, 0)),    # 192 only with 2-CTA
    (SM100, dict(two_cta=False, causal=True, head_dim=192), (32, 1)),    # tuned key
    (SM100, dict(two_cta=False, causal=False, head_dim=256), (0, 0)),
    (SM100, dict(two_cta=True, causal=True, head_dim=256), (14, 0)),
    (SM100, dict(two_cta=False, causal=False, head_dim=128, pack_gqa=True), (10, 1)),
    (SM100, dict(two_cta=False, causal=False, head_dim=64, pack_gqa=True), (16, 1)),  # d <= 64
    (SM100, dict(two_cta=False, causal=True, head_dim=128, pack_gqa=True), (16, 1)),  # masked
    ("10.3", dict(two_cta=True, causal=False, head_dim=128), (0, 0)),   # SM103: fast MUFU
    ("12.0", dict(two_cta=False, causal=False, head_dim=64), (0, 0)),   # not the SM100 kernel
])
def test_schedule_follows_select_ex2_emu(cc, kw, schedule):
    args = dict(local=False, pack_gqa=False, fp8=False) | kw
    assert att.fa4_ex2_emu_schedule(cc, **args) == schedule


def _fwd(hw, kernel="fa4", **kw):
    shape = dict(batch=1, heads=8, seq_q=8192, head_dim=64, dtype="bf16") | kw
    op = pm.ops.Attention(kernel=kernel, **shape)
    design = "trtllm_gen" if kernel == "trtllm" else "fa4"
    t = att.tiling(hw, "fa4", design, "fwd", batch=1, heads=8,
                   kv_heads=shape.get("kv_heads") or 8, seq_q=8192, seq_kv=8192,
                   d=shape["head_dim"], dv=shape["head_dim"], element_bytes=2,
                   causal=shape.get("causal", False), window=None, dropout=False,
                   v_transposed=False, shared_kv=False)
    return op, t, op.demand(hw).work


@pytest.mark.parametrize("hw_name, head_dim, causal, share", [
    ("GB200", 64, False, 0.125),    # 1-CTA, freq 16 from fragment 1
    ("B200", 64, True, 0.125),      # masked tiles emulate too
    ("B200", 128, False, 0.1875),   # 2-CTA non-causal: freq 10 from fragment 1
    ("B200", 128, True, 0.125),     # causal: freq 16 from fragment 1
    ("B300", 128, False, 0.0),      # cc 10.3 keeps every exp on MUFU
])
def test_fa4_forward_emulates_the_share_b40_does(hw_name, head_dim, causal, share):
    hw = pm.hardware(hw_name)
    _, t, work = _fwd(hw, head_dim=head_dim, causal=causal)
    assert t.bn == 128
    # every computed score takes one exp, on MUFU or emulated
    assert t.tile_scores - work["xu"] == pytest.approx(share * t.tile_scores, rel=1e-9)


def test_trtllm_gen_keeps_the_2_8_3_stand_in():
    """The trtllm-gen designs price their exps with FA4's older rule: unmasked tiles only,
    from fragment 0; the b40 schedule is FA4's own."""
    hw = pm.hardware("B200")
    op, t, work = _fwd(hw, kernel="trtllm", head_dim=64, causal=True)
    unmasked = t.tile_scores - op._masked_scores(t)
    assert t.tile_scores - work["xu"] == pytest.approx(0.1875 * unmasked, rel=1e-9)
