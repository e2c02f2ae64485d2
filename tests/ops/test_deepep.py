"""DeepEP's dispatch and combine (perfmodel/ops/deepep.py): the routing fan-out, the SM-limited
copies, the link and the fixed time."""
import math

import numpy as np
import pytest

from perfmodel import ops
from perfmodel.errors import InputError
from perfmodel.hardware import hardware
from perfmodel.ops import op as make_op
from perfmodel.ops.deepep import (FIXED_S, DeepEP, ranks_per_token, warp_copy_rounds,
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


@pytest.mark.parametrize("kw, match", [(dict(ep=12), "2, 4 or 8 ranks"),
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


# ---- the internode normal kernels ---------------------------------------------------------

def test_internode_sends_a_token_once_per_node_at_the_readme_rate():
    """EP 32 over four 8-GPU H100 nodes: the RDMA leg carries each token once per destination
    node (own node included, as DeepEP's test_internode.py counts), which binds, at the README's
    ~44.7 GB/s of a 50 GB/s NIC."""
    hw = hardware("H100-SXM")
    est = predict_op(_op(tokens=4096, ep=32, dtype="fp8"), hw)
    d = est.details
    assert d["kernels"] == "internode" and est.bound == "link:network"
    uniform = ranks_per_token(256, 4, 8)  # nodes a uniformly routed top-8 token reaches
    assert d["nodes_per_token"] == pytest.approx(uniform) and 3.5 < uniform < 3.7
    token = 7168 * (1 + 4 / 128) + 4 + 8 * 12
    assert d["rdma_bytes"] == pytest.approx(4096 * uniform * token)
    rate = d["rdma_bytes"] / (est.time_s - est.resource_time_s.get("latency", 0.0))
    assert 40e9 < rate < 45e9


def test_group_limited_routing_reaches_fewer_nodes():
    """DeepSeek-V3's gate (8 groups, top-4 groups): a token's experts sit in the nodes of its
    4 groups, 4·(1 − C(6, 4) / C(8, 4)) = 3.14 of 4 nodes, where the uniform draw reaches 3.61;
    the RDMA time falls with them."""
    hw = hardware("H100-SXM")
    free = predict_op(_op(tokens=8192, ep=32), hw)
    limited = predict_op(_op(tokens=8192, ep=32, expert_groups=8, group_top_k=4), hw)
    assert limited.details["nodes_per_token"] == pytest.approx(4 * (1 - 15 / 70))
    assert limited.time_s < free.time_s


def test_internode_beats_an_all_to_all_of_every_expert_copy():
    """The plain all-to-all moves top_k copies of each token, 3/4 of them over the NIC (6 of
    8); DeepEP one per node it reaches (3.61 of 4, its own included): at 8192 tokens in FP8 the
    internode dispatch takes under 3/4 of the time."""
    hw = hardware("H100-SXM")
    deep = predict_op(_op(tokens=8192, ep=32, dtype="fp8"), hw)
    bytes_ = 8192 * 8 * 7168 * (1 + 4 / 128)
    a2a = predict_op(make_op("alltoall", bytes=bytes_, gpus=32), hw)
    assert deep.time_s < 0.75 * a2a.time_s


def test_internode_kernels_need_8_gpu_nodes():
    with pytest.raises(InputError, match="nodes of 8 NVLink peers"):
        predict_op(_op(ep=16), hardware("GB200"))
    assert DeepEP.runs_on(16, hardware("H100-SXM")) and not DeepEP.runs_on(16, hardware("GB200"))
    assert DeepEP.runs_on(8, hardware("GB200"))


def test_blackwell_copy_rounds_take_their_own_fitted_round(monkeypatch):
    """The same copies' rounds cost each family's fitted round, in its spec's DRAM round trips:
    B200's rounds (two dies, the L2-held lines on either) against H100's."""
    from perfmodel import fitted
    from perfmodel.ops import deepep
    b200, h100 = hardware("B200"), hardware("H100-SXM")
    assert deepep.copy_round_trips(b200) == fitted.value("deepep.copy_round_trips.blackwell")
    assert deepep.copy_round_trips(h100) == fitted.value("deepep.copy_round_trips")
    assert deepep.copy_round_trips(hardware("B300")) == deepep.copy_round_trips(b200)
    op = _op(tokens=65536)
    db, dh = op.demand(b200), op.demand(h100)
    assert db.cta_dram_round_trips / dh.cta_dram_round_trips == pytest.approx(
        deepep.copy_round_trips(b200) / deepep.copy_round_trips(h100))
    # a copy-bound B200 call (65536 tokens: below the NVLink's rate) takes the round's ratio
    # over what Hopper's round would give it, but for its fixed time
    slow = predict_op(op, b200)
    assert slow.bound != "link:nvlink"
    monkeypatch.setattr(deepep, "COPY_ROUND_TRIPS_BLACKWELL", deepep.COPY_ROUND_TRIPS)
    fast = predict_op(op, b200)
    fixed = FIXED_S[("normal", "dispatch")]
    assert (slow.time_s - fixed) / (fast.time_s - fixed) == pytest.approx(
        fitted.value("deepep.copy_round_trips.blackwell")
        / fitted.value("deepep.copy_round_trips"), rel=0.02)


def test_a_grace_host_takes_the_engines_grace_ratio_of_the_fixed_time():
    """DeepEP's fixed times are x86 hosts' eager calls: on GB200's Grace host they take the ratio
    the engines' eager all-reduce calls take there (custom_allreduce.eager_host_ratio.grace)."""
    from perfmodel import fitted
    ratio = fitted.value("custom_allreduce.eager_host_ratio.grace")
    gb200, b200 = hardware("GB200"), hardware("B200")
    assert gb200.host_cpu != "x86" and b200.host_cpu == "x86"
    for mode in ("normal", "low_latency"):
        op = _op(tokens=16, ep=4, mode=mode)
        assert op.fixed_s(b200) == FIXED_S[(mode, "dispatch")]
        assert op.fixed_s(gb200) == pytest.approx(ratio * FIXED_S[(mode, "dispatch")])
        assert op.demand(gb200).fixed_s == pytest.approx(op.fixed_s(gb200))
