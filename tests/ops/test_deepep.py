"""DeepEP's dispatch and combine (perfmodel/ops/deepep.py): the routing fan-out, the SM-limited
copies, the link and the fixed time."""
import math

import numpy as np
import pytest

from perfmodel import ops
from perfmodel.errors import InputError
from perfmodel.hardware import hardware
from perfmodel.ops.deepep import (FIXED_S, ranks_per_token, warp_copy_rounds,
                                  wire_bytes_per_element)
from perfmodel.predict import predict_op


def _op(**kw):
    base = dict(tokens=4096, hidden=7168, top_k=8, experts=256, ep=8)
    return ops.DeepEP(**{**base, **kw})


@pytest.mark.parametrize("experts, ep, k", [(256, 8, 8), (256, 4, 8), (64, 8, 6), (16, 2, 2),
                                            (8, 8, 1)])
def test_ranks_per_token_matches_sampled_routing(experts, ep, k):
    rng = np.random.default_rng(0)
    draws = np.argsort(rng.random((20000, experts)), axis=1)[:, :k] // (experts // ep)
    sampled = np.mean([len(set(row)) for row in draws])
    assert ranks_per_token(experts, ep, k) == pytest.approx(sampled, rel=0.02)
    assert ranks_per_token(experts, ep, 1) == pytest.approx(1.0)


def test_normal_dispatch_sends_a_token_once_per_rank_low_latency_once_per_expert():
    normal, ll = _op(), _op(mode="low_latency")
    assert normal.copies == pytest.approx(4096 * ranks_per_token(256, 8, 8))
    assert ll.copies == 4096 * 8
    assert normal.copies < ll.copies


def test_the_copy_rounds_follow_the_kernels_loops():
    """UNROLLED_WARP_COPY: floor(n / (32·unroll)) unrolled rounds, then the remainder one element
    per lane a round; a BF16 DeepSeek token is 896 16-byte elements: 5 + 3 rounds at unroll 5,
    7 at unroll 4."""
    assert warp_copy_rounds(896, 5) == 8 and warp_copy_rounds(896, 4) == 7
    assert warp_copy_rounds(160, 5) == 1 and warp_copy_rounds(161, 5) == 2
    assert warp_copy_rounds(0, 5) == 0


def test_the_sms_set_the_copy_time_until_the_link_binds():
    """Half the SMs, twice the copy rounds per warp (SGLang's SM sweep: time ∝ 1/SMs); at many
    SMs the NVLink bytes bind instead."""
    hw = hardware("H200-SXM")
    few = predict_op(_op(tokens=65536, num_sms=4), hw)
    more = predict_op(_op(tokens=65536, num_sms=8), hw)
    assert few.details["sender_rounds"] == pytest.approx(2 * more.details["sender_rounds"])
    assert few.details["tile_rounds_s"] == pytest.approx(2 * more.details["tile_rounds_s"])
    assert few.time_s > 1.8 * more.time_s - 20e-6
    wide = predict_op(_op(tokens=65536, num_sms=64), hw)
    assert wide.bound == "link:nvlink"
    link = hw.link("nvlink")
    assert wide.resource_time_s["link:nvlink"] == pytest.approx(
        wide.details["remote_bytes"] / (link.bandwidth_bytes_per_s * link.achievable_fraction))
    assert wide.details["remote_bytes"] == pytest.approx(
        wide.details["copies"] * wide.details["bytes_per_copy"] * 7 / 8)


def test_combine_receivers_sum_rank_by_rank():
    """A combine receiver warp takes one round per rank per 16-byte lane step: more ranks per
    token (EP8 vs EP4 at the same routing) means more rounds per token."""
    e8 = _op(phase="combine").copy_rounds()
    e4 = _op(phase="combine", ep=4).copy_rounds()
    assert e8["receiver"] / e4["receiver"] == pytest.approx(
        (28 * ranks_per_token(256, 8, 8) + 1) / (28 * ranks_per_token(256, 4, 8) + 1))


def test_fixed_time_is_the_floor_of_a_small_call():
    hw = hardware("H100-SXM")
    small = predict_op(_op(tokens=1), hw)
    assert small.resource_time_s["latency"] >= FIXED_S[("normal", "dispatch")]
    assert small.time_s < FIXED_S[("normal", "dispatch")] + 20e-6
    # the normal dispatch waits on the host for its counts; the low-latency one does not
    assert FIXED_S[("normal", "dispatch")] > FIXED_S[("normal", "combine")]


def test_wire_types_and_combine_in_bf16():
    assert wire_bytes_per_element("bf16") == 2.0
    assert wire_bytes_per_element("fp8") == pytest.approx(1 + 4 / 128)
    assert wire_bytes_per_element("nvfp4") == pytest.approx(0.5 + 1 / 16)
    hw = hardware("B200")
    bf16, fp8, fp4 = (predict_op(_op(dtype=d, tokens=65536), hw) for d in ("bf16", "fp8",
                                                                           "nvfp4"))
    # narrower types put fewer bytes on NVLink; the copies are latency rounds, which the FP8
    # scales' words eat back (9 rounds a copy either way), NVFP4 saves one (8)
    assert fp8.details["remote_bytes"] < 0.6 * bf16.details["remote_bytes"]
    assert fp8.time_s <= bf16.time_s * (1 + 1e-12)
    assert fp4.details["sender_rounds"] / bf16.details["sender_rounds"] == pytest.approx(8 / 9)
    with pytest.raises(InputError, match="combine sends BF16"):
        _op(phase="combine", dtype="fp8")


@pytest.mark.parametrize("kw, match", [(dict(ep=16), "2, 4 or 8 ranks"),
                                       (dict(experts=100), "split evenly"),
                                       (dict(num_sms=21), "even count"),
                                       (dict(mode="low_latency", num_sms=24),
                                        "applies to the normal kernels")])
def test_bad_layouts_are_refused(kw, match):
    with pytest.raises(InputError, match=match):
        _op(**kw)


def test_a_group_wider_than_the_nvlink_domain_is_refused():
    with pytest.raises(InputError, match="NVLink domain"):
        predict_op(_op(mode="low_latency", ep=16), hardware("H100-SXM"))


def test_time_grows_with_tokens():
    hw = hardware("B200")
    times = [predict_op(_op(tokens=t), hw).time_s for t in (16, 256, 4096, 65536)]
    assert times == sorted(times) and math.isfinite(times[-1])
