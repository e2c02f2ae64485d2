"""DeepEP's dispatch and combine (perfmodel/ops/deepep.py): the routing fan-out, the SM-limited
copies, the link and the fixed time."""
import math

import numpy as np
import pytest

from perfmodel import ops
from perfmodel.errors import InputError
from perfmodel.hardware import hardware
from perfmodel.ops.deepep import FIXED_S, ranks_per_token, wire_bytes_per_element
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


def test_large_calls_are_bound_by_the_copy_warps_or_the_link():
    """Little's law on the copy warps' loads: half the ranks, half the warps per SM (EP4 on
    GB200), so the bytes per second of the copy halve; the link carries the remote copies."""
    b200, gb200, h100 = hardware("B200"), hardware("GB200"), hardware("H100-SXM")
    big = dict(tokens=65536)
    e8 = predict_op(_op(**big), b200)
    e4 = predict_op(_op(ep=4, **big), gb200)
    assert e8.bound == "hbm" and e4.bound == "hbm"
    rate8 = e8.details["copies"] * e8.details["bytes_per_copy"] / e8.resource_time_s["hbm"]
    rate4 = e4.details["copies"] * e4.details["bytes_per_copy"] / e4.resource_time_s["hbm"]
    assert rate8 / rate4 == pytest.approx(2.0, rel=1e-6)
    # the copies bound for other ranks cross NVLink at its achievable rate
    e = predict_op(_op(**big), h100)
    link = h100.link("nvlink")
    assert e.resource_time_s["link:nvlink"] == pytest.approx(
        e.details["remote_bytes"] / (link.bandwidth_bytes_per_s * link.achievable_fraction))
    assert e.details["remote_bytes"] == pytest.approx(
        e.details["copies"] * e.details["bytes_per_copy"] * 7 / 8)


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
    assert (predict_op(_op(dtype="fp8", tokens=65536), hw).time_s
            < predict_op(_op(tokens=65536), hw).time_s)
    with pytest.raises(InputError, match="combine sends BF16"):
        _op(phase="combine", dtype="fp8")


@pytest.mark.parametrize("kw, match", [(dict(ep=16), "2, 4 or 8 ranks"),
                                       (dict(experts=100), "split evenly"),
                                       (dict(num_sms=21), "even count")])
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
