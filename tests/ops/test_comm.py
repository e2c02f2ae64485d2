"""Collectives: ring bytes, the algorithm NCCL's auto choice would take, and the links a group
spans: NVLink inside one NVLink domain, the network (each GPU's NIC) across domains."""
from __future__ import annotations

import pytest

import perfmodel as pm


def test_collectives_follow_ring_bytes(h100):
    ar = pm.predict_op(pm.ops.Allreduce(bytes=1e9, gpus=8), h100)
    ag = pm.predict_op(pm.ops.Allgather(bytes=1e9, gpus=8), h100)
    assert ar.bound == "link:nvlink"
    assert ar.resource_time_s["link:nvlink"] == pytest.approx(
        2 * ag.resource_time_s["link:nvlink"])


def test_allreduce_auto_picks_oneshot_for_small_and_ring_for_large(h100):
    def t(nbytes, algorithm):
        return pm.predict_op(pm.ops.Allreduce(bytes=nbytes, gpus=8, algorithm=algorithm),
                             h100).time_s
    assert t(1e6, "oneshot") < t(1e6, "ring")
    assert t(1e9, "ring") < t(1e9, "oneshot")
    for nbytes in (1e4, 1e6, 1e8, 1e9):
        assert t(nbytes, "auto") == pytest.approx(min(t(nbytes, a) for a in
                                                      ("ring", "tree", "oneshot")))
    with pytest.raises(pm.InputError, match="'oneshot' is not an algorithm of allgather"):
        pm.ops.Allgather(bytes=1e6, gpus=8, algorithm="oneshot")


# ------------------------------------------------------- groups that span NVLink domains --


def test_a_16_gpu_allreduce_on_h100_is_slower_than_8_and_bound_by_the_network(h100):
    e8 = pm.predict_op(pm.ops.Allreduce(bytes=1e9, gpus=8, algorithm="auto"), h100)
    e16 = pm.predict_op(pm.ops.Allreduce(bytes=1e9, gpus=16, algorithm="auto"), h100)
    assert e16.time_s > e8.time_s
    assert e8.bound == "link:nvlink" and "link:network" not in e8.resource_time_s
    assert e16.bound == "link:network"
    assert e16.details["nvlink_domains"] == 2 and e16.details["gpus_per_domain"] == 8
    # NCCL's ring over 2 nodes, one ring per NIC: each NIC carries 1/8 of the ring bytes
    ring = 2 * 15 / 16 * 1e9
    assert e16.details["network_bytes_per_gpu"] == pytest.approx(ring / 8)
    assert e16.resource_time_s["link:network"] == pytest.approx(
        ring / 8 / h100.link("network").bandwidth_bytes_per_s)


def test_ring_steps_split_between_nvlink_and_the_network(h100):
    d = pm.ops.Allreduce(bytes=1e6, gpus=32).demand(h100)  # 4 domains of 8
    assert d.link_steps == {"network": 2 * 3, "nvlink": 2 * 31 - 2 * 3}
    t = pm.ops.Allreduce(bytes=1e6, gpus=32, algorithm="tree").demand(h100)
    assert t.link_steps == {"network": 2 * 2, "nvlink": 2 * 7}  # node chain, log2(4) levels
    assert t.work == d.work  # the tree moves the ring's bytes


def test_gb200_keeps_72_gpus_on_nvlink_and_crosses_racks_beyond():
    gb = pm.hardware("GB200")
    for kind in ("allreduce", "allgather", "reduce_scatter", "alltoall"):
        auto = pm.predict_op(pm.ops.op(kind, bytes=1e8, gpus=72, algorithm="auto"), gb)
        named = pm.predict_op(pm.ops.op(kind, bytes=1e8, gpus=72, algorithm="auto",
                                        link="nvlink"), gb)
        assert auto.bound == "link:nvlink" and "link:network" not in auto.resource_time_s
        assert auto.time_s == named.time_s
        across = pm.predict_op(pm.ops.op(kind, bytes=1e8, gpus=144, algorithm="auto"), gb)
        assert "link:network" in across.resource_time_s
        assert across.details["nvlink_domains"] == 2


@pytest.mark.parametrize("kind", ["allreduce", "allgather", "reduce_scatter", "alltoall"])
@pytest.mark.parametrize("algorithm", ["ring", "tree", "auto"])
def test_a_group_inside_one_domain_is_priced_exactly_as_on_nvlink(any_hw, kind, algorithm):
    """link: auto is the default; inside one NVLink domain it is bit-identical to link=nvlink."""
    for gpus in sorted({2, any_hw.nvlink_domain_gpus} - {1}):
        for nbytes in (1e3, 1e8):
            auto = pm.ops.op(kind, bytes=nbytes, gpus=gpus, algorithm=algorithm)
            named = auto.with_params(link="nvlink")
            for level in ("pipes", "roofline"):
                a, n = (pm.predict_op(o, any_hw, level) for o in (auto, named))
                assert (a.time_s, a.bound, a.resource_time_s) == \
                    (n.time_s, n.bound, n.resource_time_s)


def test_one_gpu_per_domain_is_the_plain_collective_on_the_network(h100):
    """A data-parallel group with one GPU in each node (TP8 fills the node): placement 8x8."""
    for kind in ("allreduce", "reduce_scatter", "allgather", "alltoall"):
        for algorithm in ("ring", "tree"):
            spread = pm.ops.op(kind, bytes=1e8, gpus=8, algorithm=algorithm, placement="8x8")
            flat = spread.with_params(link="network", placement=None)
            d, f = spread.demand(h100), flat.demand(h100)
            assert d.work == f.work and d.link_steps == f.link_steps, (kind, algorithm)


def test_expert_parallel_all_to_all_over_64_h100s_crosses_the_network(h100):
    e = pm.predict_op(pm.ops.Alltoall(bytes=1e8, gpus=64), h100)
    assert e.bound == "link:network"
    assert e.details["network_bytes_per_gpu"] == pytest.approx((64 - 8) / 64 * 1e8)
    assert e.resource_time_s["link:nvlink"] == pytest.approx(
        7 / 64 * 1e8 / h100.link("nvlink").bandwidth_bytes_per_s)


def test_a_named_link_still_carries_the_whole_group(h100):
    d = pm.ops.Allreduce(bytes=1e8, gpus=16, link="nvlink").demand(h100)
    assert set(d.work) == {"link:nvlink", "hbm"} and d.link_steps == {"nvlink": 30}


def test_oneshot_needs_one_domain_and_auto_does_not_offer_it_across_domains(h100):
    with pytest.raises(pm.InputError, match="one-shot algorithm needs the group in one NVLink"):
        pm.predict_op(pm.ops.Allreduce(bytes=1e5, gpus=16, algorithm="oneshot"), h100)
    choice = pm.ops.Allreduce(bytes=1e5, gpus=16, algorithm="auto").demand(h100)
    assert [o.details["algorithm"] for o in choice.options] == ["ring", "tree"]


def test_sendrecv_crosses_the_network_when_the_pipeline_leaves_the_domain(h100):
    def bound(hw, **kw):
        return pm.predict_op(pm.ops.SendRecv(bytes=1e8, **kw), hw).bound
    assert bound(h100) == "link:nvlink"                       # two consecutive GPUs
    assert bound(h100, placement="4x2") == "link:nvlink"      # TP2 PP4 in one node
    assert bound(h100, placement="16x8") == "link:network"    # TP8 PP16: stages on 16 nodes
    assert bound("GB200", placement="4x8") == "link:nvlink"   # 32 GPUs of one NVL72 rack
    assert bound("GB200", placement="16x8") == "link:network"
    assert bound(h100, placement="16x8", link="nvlink") == "link:nvlink"


@pytest.mark.parametrize("placement, message", [
    ("8", "expected COUNTxSTRIDE levels"),
    ("8x0", "expected COUNTxSTRIDE levels"),
    ("4x1,2x2", "overlaps the levels inside it"),
    ("4x1,4x4", "holds 16 GPUs, the group has 8"),
])
def test_bad_placements_are_input_errors(placement, message):
    with pytest.raises(pm.InputError, match=message) as e:
        pm.ops.Allreduce(bytes=1e6, gpus=8, placement=placement)
    assert "placement" in str(e.value)
