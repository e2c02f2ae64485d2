"""Collectives as NCCL runs them: ring bytes, NCCL's protocols and algorithms (ring, tree, NVLS)
as its tuner picks them by message size, and the links a group spans: NVLink inside one NVLink
domain, the network (each GPU's NIC) across domains."""
from __future__ import annotations

import math

import pytest

import perfmodel as pm
from perfmodel.demand import Choice
from perfmodel.ops import nccl

KINDS = ("allreduce", "allgather", "reduce_scatter", "alltoall")
NVLS_GPUS = {"H100-SXM", "H200-SXM", "H800-SXM", "B200", "B300", "GB200", "GB300"}


def _time(hw, kind="allreduce", level="pipes", **params):
    return pm.predict_op(pm.ops.op(kind, **params), hw, level).time_s


def _busbw(est, nbytes, gpus):
    """nccl-tests' all-reduce bus bandwidth: algbw · 2(G−1)/G."""
    return nbytes / est.time_s * 2 * (gpus - 1) / gpus


def _explicit(kind):
    """Every (algorithm, protocol) `auto` chooses among, NCCL's and the custom ones it adds
    (the one-shot all-reduce; not the two-shot, which only the engines' dispatch offers)."""
    cls = pm.ops.REGISTRY[kind]
    for algorithm in (*cls.ALGORITHMS, *cls.AUTO_CUSTOM):
        if algorithm in cls.CUSTOM:
            yield algorithm, "auto"
        elif algorithm == "nvls":
            yield algorithm, "simple"
        else:
            yield from ((algorithm, p) for p in cls.PROTOCOLS)


def _offered(choice) -> set[str]:
    """The "algorithm/protocol" pairs an op offered: NCCL's as its tuner table lists them (the
    NCCL pair that runs carries it), the custom kernels as options of their own."""
    options = choice.options if isinstance(choice, Choice) else (choice,)
    offered = set()
    for o in options:
        offered |= set(o.details.get("nccl_tuner_s", ()))
        if "nccl_tuner_s" not in o.details:
            offered.add(f"{o.details['algorithm']}/{o.details.get('protocol')}")
    return offered


def test_collectives_follow_ring_bytes(h100):
    ar = pm.predict_op(pm.ops.Allreduce(bytes=1e9, gpus=8, algorithm="ring"), h100)
    ag = pm.predict_op(pm.ops.Allgather(bytes=1e9, gpus=8), h100)
    assert ar.bound == "link:nvlink" and ar.details["protocol"] == "simple"
    assert ar.resource_time_s["link:nvlink"] == pytest.approx(
        2 * ag.resource_time_s["link:nvlink"])
    nv = h100.link("nvlink")  # the ring's bytes at NCCL's per-link NVLink rate
    assert ar.resource_time_s["link:nvlink"] == pytest.approx(
        2 * 7 / 8 * 1e9 / (nv.bandwidth_bytes_per_s * nv.achievable_fraction))


# ------------------------------------------------------------- NCCL's tuner inside a domain --


@pytest.mark.parametrize("hw_name", ["H100-SXM", "B200"])
def test_nvls_carries_a_large_all_reduce_on_an_8_gpu_nvswitch_board(hw_name):
    for algorithm in ("nccl", "auto"):
        est = pm.predict_op(pm.ops.Allreduce(bytes=1e9, gpus=8, algorithm=algorithm), hw_name)
        assert (est.details["algorithm"], est.details["protocol"]) == ("nvls", "simple")
        assert est.bound == "link:nvlink"
    # NVLS moves (G+1)/G of the buffer each way, the ring 2(G−1)/G: a higher bus bandwidth
    ring = pm.predict_op(pm.ops.Allreduce(bytes=1e9, gpus=8, algorithm="ring"), hw_name)
    nvls = pm.predict_op(pm.ops.Allreduce(bytes=1e9, gpus=8, algorithm="nvls"), hw_name)
    assert _busbw(nvls, 1e9, 8) > 1.1 * _busbw(ring, 1e9, 8)
    assert nvls.details["bytes_sent_per_gpu"] == pytest.approx(9 / 8 * 1e9)
    # the bus bandwidth nccl-tests measures with NVLS (nccl-tests issue 212: ~480 GB/s on 8 H100;
    # nccl issue 1807: 830+ on 8 B200), within the 1 GB message's latency share
    assert _busbw(nvls, 1e9, 8) == pytest.approx({"H100-SXM": 480e9, "B200": 830e9}[hw_name],
                                                 rel=0.03)
    assert nvls.details["channels"] == {"H100-SXM": 16, "B200": 24}[hw_name]


def test_nvls_is_never_chosen_without_nvlink_sharp_nor_across_domains(any_hw):
    assert any_hw.nvls == (any_hw.name in NVLS_GPUS)
    for gpus in sorted({2, 4, any_hw.nvlink_domain_gpus, 2 * any_hw.nvlink_domain_gpus} - {1}):
        for nbytes in (1e3, 1e6, 1e8, 1e10):
            op = pm.ops.Allreduce(bytes=nbytes, gpus=gpus, algorithm="auto")
            offered = {pair.split("/")[0] for pair in _offered(op.demand(any_hw))}
            can = any_hw.nvls and gpus <= any_hw.nvlink_domain_gpus
            assert ("nvls" in offered) == can, (gpus, nbytes)
    if not any_hw.nvls:
        with pytest.raises(pm.InputError, match="algorithm nvls needs NVSwitches that reduce"):
            pm.ops.Allreduce(bytes=1e8, gpus=2, algorithm="nvls").demand(any_hw)
    else:
        with pytest.raises(pm.InputError, match="NVLS with a tree across domains"):
            pm.ops.Allreduce(bytes=1e8, gpus=2 * any_hw.nvlink_domain_gpus,
                             algorithm="nvls").demand(any_hw)


def test_ll_for_tiny_messages_and_simple_or_ll128_for_large(any_hw):
    if any_hw.nvlink_domain_gpus == 1:
        pytest.skip(f"{any_hw.name}: a one-GPU NVLink domain runs no NVLink collective")
    gpus = min(8, any_hw.nvlink_domain_gpus)
    for kind in KINDS:
        tiny = pm.predict_op(pm.ops.op(kind, bytes=1e3, gpus=gpus, algorithm="ring"), any_hw)
        large = pm.predict_op(pm.ops.op(kind, bytes=1e9, gpus=gpus, algorithm="ring"), any_hw)
        assert tiny.details["protocol"] == "ll", kind
        assert large.details["protocol"] == "simple", kind
        for algorithm in ("nccl", "auto"):
            est = pm.predict_op(pm.ops.op(kind, bytes=1e9, gpus=gpus, algorithm=algorithm),
                                any_hw)
            # (two GPUs: the one-shot all-reduce moves the ring's bytes in one step)
            assert est.details["protocol"] in ("simple", "ll128") or \
                est.details["algorithm"] == "oneshot", (kind, algorithm)
    if gpus < 4:  # two GPUs: Simple's base + 2 hops is below LL128's
        return
    # in between, LL128 wins somewhere on an NVLink ring (its 0.92 of Simple's bandwidth at a
    # lower latency than Simple's from four GPUs on)
    protocols = {pm.predict_op(pm.ops.Allreduce(bytes=float(1 << k), gpus=gpus, algorithm="ring"),
                               any_hw).details["protocol"] for k in range(10, 34)}
    assert protocols == {"ll", "ll128", "simple"}


@pytest.mark.parametrize("hw_name", ["H100-SXM", "A100-SXM", "GB200", "H100-PCIe"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("gpus", [4, 8, 16])
def test_nccl_runs_the_pair_its_tuner_prices_lowest_and_auto_adds_the_custom_kernel(
        hw_name, kind, gpus):
    """`nccl` is priced as the one pair NCCL's tuner estimates fastest (nccl.tuner_cost_s),
    exactly as that pair named; `auto` is never slower than it; the tuner's estimate of what it
    runs grows with the bytes. The model's time of `nccl` need not: where the tuner switches to
    a pair the model prices faster (16 GB200s: ring LL to 64 KiB, then NVLS) it drops, as NCCL's
    own choice can. The all-to-all, which the tuner does not price, keeps the fastest of its
    pairs and grows with the bytes."""
    hw = pm.hardware(hw_name)
    previous = {"tuner": 0.0, "alltoall": 0.0}
    for k in range(0, 34, 3):
        nbytes = 2.0 ** k  # 1 B .. 8 GiB
        est = pm.predict_op(pm.ops.op(kind, bytes=nbytes, gpus=gpus), hw)
        tuner = est.details.get("nccl_tuner_s")
        ran = f"{est.details['algorithm']}/{est.details['protocol']}"
        if kind == "alltoall":
            assert tuner is None
        else:
            assert ran == min(tuner, key=tuner.get), nbytes
        for level in ("pipes", "roofline"):
            t = _time(hw, kind, level, bytes=nbytes, gpus=gpus)
            named = _time(hw, kind, level, bytes=nbytes, gpus=gpus,
                          algorithm=est.details["algorithm"], protocol=est.details["protocol"])
            if kind != "alltoall":
                assert t == pytest.approx(named, rel=1e-12), (nbytes, level)
            assert _time(hw, kind, level, bytes=nbytes, gpus=gpus, algorithm="auto") <= \
                t * (1 + 1e-12), (nbytes, level)
        key, t = ("alltoall", est.time_s) if tuner is None else ("tuner", min(tuner.values()))
        assert t >= previous[key] * (1 - 1e-12), nbytes
        previous[key] = t


def test_the_tuner_switches_a_2_gpu_b200_all_reduce_to_simple_at_4_mib_though_ll_prices_faster():
    """The brief's hand-worked case (v2.27.7 tuning.cc's numbers): at 4 MiB LL costs
    6.6 + 2 x 0.6 + 4 MiB / 282 GB/s (llMaxBw) = 22.7 us and Simple 8.4 + 2 x 3.4 + 4 MiB /
    721.8 GB/s = 21.0 us, so NCCL runs Simple (AIConfigurator's NCCL 2.29.2 rows jump from 19 to
    37 us between 2 and 4 MiB); at 2 MiB LL (15.2 us) still beats Simple (18.1 us)."""
    bus = 18 * 40.1e9  # NCCL's NVLink rate on Blackwell (topo.h: 40.1 GB/s per link)
    t = {p: nccl.tuner_cost_s("allreduce", "ring", p, 4 * 2 ** 20, 2, 1, "nvlink", bus, "10.0")
         for p in nccl.PROTOCOLS}
    assert t["ll"] == pytest.approx(7.8e-6 + 4 * 2 ** 20 / 282e9)
    assert t["simple"] == pytest.approx(15.2e-6 + 4 * 2 ** 20 / bus)
    assert t["simple"] < t["ll"] < t["ll128"]
    b200 = pm.hardware("B200")
    assert b200.link("nvlink").bandwidth_bytes_per_s * b200.link("nvlink").achievable_fraction \
        == pytest.approx(bus, rel=0.01)
    at = {n: pm.predict_op(pm.ops.Allreduce(bytes=float(n * 2 ** 20), gpus=2), b200)
          for n in (2, 4)}
    assert at[2].details["protocol"] == "ll" and at[4].details["protocol"] == "simple"


def test_tuner_latency_and_bandwidth_by_hand():
    """tuning.cc's sums (research notes §1.10): 8 GPUs on one node, ring LL 6.6 + 14 x 0.6 =
    15.0 us, LL128 14 + 14 x 1.9 = 40.6, Simple 8.4 + 14 x 3.4 = 56.0, tree LL 6.8 + 14 x 0.6
    = 15.2, NVLS 25; all-gather ring LL 6.6 + 7 x 0.6 = 10.8; 16 GPUs on 2 nodes (Intel):
    ring LL 6.6 + 28 x max(0.6, 1) + 2 x 2.7 = 40.0 and tree LL 6.8 + 2 (7 x 0.6 + 1 x 5.0)
    = 25.2, as the notes' table has them. Ring LL's algorithm bandwidth on 8 Hoppers is
    llMaxBw x 8 / 14 (141 GB/s: the cap binds below twice it)."""
    lat = nccl.tuner_latency_us
    assert lat("allreduce", "ring", "ll", 8, 1, "nvlink") == pytest.approx(15.0)
    assert lat("allreduce", "ring", "ll128", 8, 1, "nvlink") == pytest.approx(40.6)
    assert lat("allreduce", "ring", "simple", 8, 1, "nvlink") == pytest.approx(56.0)
    assert lat("allreduce", "tree", "ll", 8, 1, "nvlink") == pytest.approx(15.2)
    assert lat("allreduce", "nvls", "simple", 8, 1, "nvlink") == pytest.approx(25.0)
    assert lat("allgather", "ring", "ll", 8, 1, "nvlink") == pytest.approx(10.8)
    assert lat("allreduce", "tree", "ll", 16, 2, "nvlink") == pytest.approx(25.2)
    assert lat("allreduce", "ring", "ll", 16, 2, "nvlink") == pytest.approx(40.0)
    bw = nccl.tuner_bandwidth_bytes_per_s
    assert bw("allreduce", "ring", "ll", 1e6, 8, 1, 370.8e9, "9.0") == pytest.approx(
        141e9 * 8 / 14)
    assert bw("allgather", "ring", "simple", 1e6, 8, 1, 370.8e9, "9.0") == pytest.approx(
        370.8e9 * 8 / 7)
    # tree: 0.92 x bus, x 1/2, x treeCorrectionFactor (Simple at 1 MiB: index 14, 0.5)
    assert bw("allreduce", "tree", "simple", 2 ** 20, 8, 1, 370.8e9, "9.0") == pytest.approx(
        0.92 * 370.8e9 * 0.5 * 0.5)


def test_auto_adds_the_one_shot_all_reduce_to_nccls_choice(h100):
    assert _time(h100, bytes=1e4, gpus=8, algorithm="oneshot") < _time(h100, bytes=1e4, gpus=8)
    small = pm.predict_op(pm.ops.Allreduce(bytes=1e4, gpus=8, algorithm="auto"), h100)
    assert small.details["algorithm"] == "oneshot"
    default = pm.predict_op(pm.ops.Allreduce(bytes=1e4, gpus=8), h100)  # nccl: no custom AR
    assert default.details["algorithm"] == "ring" and default.details["protocol"] == "ll"
    assert _time(h100, bytes=1e9, gpus=8, algorithm="oneshot") > _time(h100, bytes=1e9, gpus=8,
                                                                        algorithm="auto")
    with pytest.raises(pm.InputError, match="'oneshot' is not an algorithm of allgather"):
        pm.ops.Allgather(bytes=1e6, gpus=8, algorithm="oneshot")
    with pytest.raises(pm.InputError, match="'tree' is not an algorithm of reduce_scatter"):
        pm.ops.ReduceScatter(bytes=1e6, gpus=8, algorithm="tree")


def test_the_latency_is_nccls_base_plus_a_hop_per_step(h100):
    """Cross-check: the engine's latency floor, from the spec's ring hops and nccl.py's ratios,
    equals tuning.cc's formula written out in seconds: every base scaled by the measured ring LL
    base over tuning.cc's 6.6 us, every hop at the spec's ring hop of its protocol times
    tuning.cc's ratio of the algorithm's hop to the ring's."""
    us = 1e-6
    nv = h100.link("nvlink")
    scale = nv.nccl_base_latency_s / (nccl.BASE_LAT_US[("ring", "ll")] * us)
    for protocol in nccl.PROTOCOLS:
        ring_hop = getattr(nv, f"{protocol}_latency_s")
        for algorithm, hops in (("ring", 14), ("tree", 14)):  # 8 GPUs: 2(G−1) either way
            est = pm.predict_op(pm.ops.Allreduce(bytes=8, gpus=8, algorithm=algorithm,
                                                 protocol=protocol), h100)
            ratio = (nccl.HW_LAT_US["nvlink"][(algorithm, protocol)]
                     / nccl.HW_LAT_US["nvlink"][("ring", protocol)])
            want = nccl.BASE_LAT_US[(algorithm, protocol)] * us * scale + hops * ratio * ring_hop
            assert est.resource_time_s["latency"] == pytest.approx(want), (algorithm, protocol)
            assert est.resource_time_s.get("launch", 0.0) == 0.0  # NCCL's base covers it


def test_without_measured_latencies_the_latency_is_tuning_ccs_own():
    """A GPU whose spec states tuning.cc's hops and no measured base (A100) gets tuning.cc's
    microseconds exactly: 8-GPU ring LL 6.6 + 14 x 0.6 = 15.0 us."""
    a100 = pm.hardware("A100-SXM")
    assert a100.link("nvlink").nccl_base_latency_s is None
    est = pm.predict_op(pm.ops.Allreduce(bytes=8, gpus=8, algorithm="ring", protocol="ll"), a100)
    assert est.resource_time_s["latency"] == pytest.approx(15.0e-6)


def test_measured_small_message_latency_follows_the_hop_count():
    """The fitted ring LL base and hop (perfmodel/fitted.yaml nccl.*) price every collective's
    small messages by its own hop count: an all-gather of G GPUs pays G−1 hops, an all-reduce
    2(G−1), and both stay flat in size below a few KiB (latency-bound)."""
    b200 = pm.hardware("B200")
    nv = b200.link("nvlink")
    ring_ll = dict(algorithm="ring", protocol="ll")
    for gpus in (2, 4, 8):
        ag = pm.predict_op(pm.ops.Allgather(bytes=1024, gpus=gpus, **ring_ll), b200)
        ar = pm.predict_op(pm.ops.Allreduce(bytes=1024, gpus=gpus, **ring_ll), b200)
        # NCCL's own choice is never slower than the ring LL pair
        assert pm.predict_op(pm.ops.Allreduce(bytes=1024, gpus=gpus), b200).time_s <= ar.time_s
        local = nccl.ring_local_step_s(1024, gpus, b200.compute_capability)  # < 1 ns here
        assert ag.resource_time_s["latency"] == pytest.approx(
            nv.nccl_base_latency_s + (gpus - 1) * nv.ll_latency_s + local)
        assert ar.resource_time_s["latency"] == pytest.approx(
            nv.nccl_base_latency_s + 2 * (gpus - 1) * nv.ll_latency_s + local)
        bigger = pm.predict_op(pm.ops.Allreduce(bytes=4096, gpus=gpus, **ring_ll), b200)
        assert bigger.time_s == pytest.approx(ar.time_s, rel=0.02)


def test_a_ring_pays_its_local_step_once_per_chunk_loop(h100):
    """A ring of S bytes over G GPUs pays S/G at the channels' local rate beside its link time
    (nccl.ring_local_step_s): twice as much with 2 GPUs as with 4, none for NVLS or the
    all-to-all, the same whatever the link."""
    s = 256 << 20
    rate = nccl.arch_row(nccl.RING_LOCAL_RATE, h100.compute_capability)
    for kind in ("allreduce", "allgather", "reduce_scatter"):
        for gpus in (2, 4, 8):
            d = pm.ops.op(kind, bytes=s, gpus=gpus, algorithm="ring",
                          protocol="simple").demand(h100)
            assert d.details["ring_local_step_s"] == pytest.approx(s / gpus / rate)
            assert d.fixed_s == pytest.approx(d.details["pipeline_fill_s"] + s / gpus / rate)
    nvls = pm.ops.Allreduce(bytes=s, gpus=8, algorithm="nvls").demand(h100)
    a2a = pm.ops.Alltoall(bytes=s, gpus=8, protocol="simple").demand(h100)
    assert nvls.details["ring_local_step_s"] == a2a.details["ring_local_step_s"] == 0.0
    # 2 GPUs: the local step is half of a loop of one link step each way
    two = pm.predict_op(pm.ops.Allgather(bytes=s, gpus=2, algorithm="ring", protocol="simple"),
                        h100)
    four = pm.predict_op(pm.ops.Allgather(bytes=s, gpus=4, algorithm="ring",
                                          protocol="simple"), h100)
    assert 1 / 2 * s / two.time_s < 3 / 4 * s / four.time_s  # busbw grows with G


def test_nvls_and_the_network_tree_take_tuning_ccs_latencies(h100):
    us = 1e-6
    nvls = pm.predict_op(pm.ops.Allreduce(bytes=8, gpus=8, algorithm="nvls"), h100)
    assert nvls.resource_time_s["latency"] == pytest.approx(
        nccl.HW_LAT_US["nvlink"][("nvls", "simple")] * us)
    # one GPU per node on the network: a binary tree of 2·log2(G) network hops
    tree = pm.predict_op(pm.ops.Allreduce(bytes=8, gpus=8, algorithm="tree", protocol="ll",
                                          link="network"), h100)
    assert tree.resource_time_s["latency"] == pytest.approx(
        (nccl.BASE_LAT_US[("tree", "ll")] + 6 * nccl.HW_LAT_US["network"][("tree", "ll")]) * us)


def test_protocols_put_their_line_format_and_nccls_factors_on_the_wire(h100):
    def wire(**kw):
        return pm.ops.Allreduce(bytes=1e8, gpus=8, **kw).demand(h100).work["link:nvlink"]
    simple = wire(algorithm="ring", protocol="simple")
    # LL: half of Simple's bus bandwidth (its 8 B of data per 16 B line), capped at Hopper's
    # llMaxBw of 141 GB/s (tuning.cc), which binds on H100's 370.8 GB/s NVLink
    nv = h100.link("nvlink")
    bus = nv.bandwidth_bytes_per_s * nv.achievable_fraction
    ll_bus = min(0.5 * bus, 141e9)
    assert ll_bus == 141e9
    assert wire(algorithm="ring", protocol="ll") == pytest.approx(simple * bus / ll_bus)
    assert wire(algorithm="ring", protocol="ll128") == pytest.approx(simple / 0.92)
    ag = pm.ops.Allgather(bytes=1e8, gpus=8, algorithm="ring", protocol="ll").demand(h100)
    assert ag.details["wire_bytes_per_gpu"] == pytest.approx(
        ag.details["bytes_sent_per_gpu"] * bus / ll_bus / nv.achievable_fraction)
    # every protocol's efficiency is at most its line format's
    for kind in KINDS:
        for algorithm in ("ring", "tree"):
            for protocol in nccl.PROTOCOLS:
                for nodes in (1, 2, 4):
                    assert nccl.bus_efficiency(kind, algorithm, protocol, nodes, 370.8e9,
                                               "9.0") <= nccl.LINE_EFFICIENCY[protocol]


# Tuning.cc's LL bus-bandwidth caps (llMaxBws, GB/s: one node, two, more) by compute capability:
# the model leaves them out because no built-in GPU reaches them; this keeps that true.
LL_MAX_BW = {"8": (87.7, 22.5, 19.0), "9": (141.0, 45.0, 35.0), "10": (282.0, 90.0, 70.0)}


def test_nccls_ll_bandwidth_caps_bound_ll_on_the_built_in_gpus(any_hw):
    if any_hw.compute_capability.split(".")[0] not in LL_MAX_BW:
        pytest.skip(f"{any_hw.name}: NCCL's LL bandwidth table has no row for sm_"
                    f"{any_hw.compute_capability}")
    one_node, _, beyond = LL_MAX_BW[any_hw.compute_capability.split(".")[0]]
    nv, net = any_hw.link("nvlink"), any_hw.link("network")
    cc = any_hw.compute_capability
    bus = nv.bandwidth_bytes_per_s * nv.achievable_fraction
    ll = max(nccl.bus_efficiency(k, "ring", "ll", 1, bus, cc) for k in KINDS[:3])
    assert bus * ll <= one_node * 1e9 * (1 + 1e-12)
    net_bus = net.bandwidth_bytes_per_s * net.achievable_fraction
    assert net_bus * nccl.bus_efficiency("allreduce", "ring", "ll", 4, net_bus, cc) \
        <= beyond * 1e9 * (1 + 1e-12)


@pytest.mark.parametrize("params, message", [
    (dict(protocol="ll256"), "protocol: expected one of auto, ll, ll128, simple, got 'll256'"),
    (dict(algorithm="nvls", protocol="ll"), "protocol: NVLS runs only NCCL's simple protocol"),
    (dict(algorithm="oneshot", protocol="ll128"), "protocol: the oneshot all-reduce is not NCCL"),
    (dict(algorithm="dbtree"), "algorithm: expected one of ring, tree, nvls, oneshot, twoshot, "
                               "nccl, auto, vllm, sglang, trtllm"),
])
def test_bad_protocols_are_one_line_input_errors_naming_the_parameter(params, message):
    with pytest.raises(pm.InputError) as e:
        pm.ops.Allreduce(bytes=1e6, gpus=8, **params)
    assert str(e.value).count("\n") == 0 and message in str(e.value)


def test_protocols_a_collective_or_link_does_not_run_are_refused(h100):
    with pytest.raises(pm.InputError, match="protocol: 'll128' is not a protocol of alltoall"):
        pm.ops.Alltoall(bytes=1e6, gpus=8, protocol="ll128")
    with pytest.raises(pm.InputError, match="enables the ll128 protocol only over NVLink"):
        pm.ops.Allreduce(bytes=1e6, gpus=2, link="pcie", protocol="ll128").demand(h100)
    on_pcie = pm.ops.Allreduce(bytes=1e6, gpus=2, link="pcie").demand(h100)
    assert {p.split("/")[1] for p in _offered(on_pcie)} == {"ll", "simple"}


def test_every_builtin_spec_declares_nvls_and_nccls_link_numbers(any_hw):
    cap = any_hw.capabilities["topology.nvls"]
    assert cap.provenance and cap.value == (any_hw.name in NVLS_GPUS)
    for name in ("nvlink", "pcie", "network"):
        for protocol in nccl.PROTOCOLS:
            q = any_hw.quantities[f"links.{name}.{protocol}_latency_s"]
            if "fitted" in q.provenance:  # a family's measured NVLink LL hop (fitted.yaml)
                assert (name, protocol) == ("nvlink", "ll")
                assert q.provenance["fitted"].startswith("nccl.ll_hop_s.")
                continue
            assert q.provenance.get("source") == "NCCL-tuning"
            assert q.value == pytest.approx(
                nccl.HW_LAT_US[name][("ring", protocol)] * 1e-6)
    assert 0.75 <= any_hw.link("nvlink").achievable_fraction <= 0.9
    assert "nvls" not in any_hw.summary()["isa"]


# ------------------------------------------------------- groups that span NVLink domains --


def test_a_16_gpu_allreduce_on_h100_is_slower_than_8_and_bound_by_the_network(h100):
    e8 = pm.predict_op(pm.ops.Allreduce(bytes=1e9, gpus=8, algorithm="auto"), h100)
    e16 = pm.predict_op(pm.ops.Allreduce(bytes=1e9, gpus=16, algorithm="auto"), h100)
    assert e16.time_s > e8.time_s
    assert e8.bound == "link:nvlink" and "link:network" not in e8.resource_time_s
    assert e16.bound == "link:network"
    assert e16.details["nvlink_domains"] == 2 and e16.details["gpus_per_domain"] == 8
    assert (e16.details["algorithm"], e16.details["protocol"]) == ("ring", "simple")
    # NCCL's ring over 2 nodes, one ring per NIC: each NIC carries 1/8 of the ring bytes
    ring = 2 * 15 / 16 * 1e9
    assert e16.details["network_bytes_per_gpu"] == pytest.approx(ring / 8)
    assert e16.resource_time_s["link:network"] == pytest.approx(
        ring / 8 / h100.link("network").bandwidth_bytes_per_s)


def test_ring_hops_split_between_nvlink_and_the_network(h100):
    d = pm.ops.Allreduce(bytes=1e6, gpus=32, algorithm="ring", protocol="simple").demand(h100)
    assert d.details["hops"] == {"network": 2 * 3, "nvlink": 2 * 31 - 2 * 3}  # 4 domains of 8
    t = pm.ops.Allreduce(bytes=1e6, gpus=32, algorithm="tree", protocol="simple").demand(h100)
    assert t.details["hops"] == {"network": 2 * 2, "nvlink": 2 * 7}  # node chain, log2(4) levels
    for link in ("link:nvlink", "link:network"):  # the tree moves 2·S, the ring 2(G−1)/G·S
        assert t.work[link] * 0.92 == pytest.approx(d.work[link] * 32 / 31)
    # each hop at its own link's NCCL latency, NVLink hops of a ring at least the net overhead
    # (the NVLink base scaled by the family's measured ring LL base over tuning.cc's 6.6 us; an
    # NVLink LL hop at the measured hop times tuning.cc's max(hop, overhead) / hop)
    us = 1e-6
    nv = h100.link("nvlink")
    scale = nv.nccl_base_latency_s / (6.6 * us)
    ring_latency = (8.4 * scale + 56 * max(3.4, 3 * nccl.NET_OVERHEAD_US) + 6 * 14.0) * us
    assert pm.predict_op(pm.ops.Allreduce(bytes=1, gpus=32, algorithm="ring", protocol="simple"),
                         h100).resource_time_s["latency"] == pytest.approx(ring_latency)
    ll = pm.predict_op(pm.ops.Allreduce(bytes=1, gpus=32, algorithm="ring", protocol="ll"), h100)
    assert ll.resource_time_s["latency"] == pytest.approx(
        6.6 * scale * us + 56 * max(0.6, nccl.NET_OVERHEAD_US) / 0.6 * nv.ll_latency_s
        + 6 * 2.7 * us)


def test_gb200_keeps_72_gpus_on_nvlink_and_crosses_racks_beyond():
    gb = pm.hardware("GB200")
    for kind in KINDS:
        auto = pm.predict_op(pm.ops.op(kind, bytes=1e9, gpus=72, algorithm="auto"), gb)
        named = pm.predict_op(pm.ops.op(kind, bytes=1e9, gpus=72, algorithm="auto",
                                        link="nvlink"), gb)
        assert auto.bound == "link:nvlink" and "link:network" not in auto.resource_time_s
        assert auto.time_s == named.time_s
        across = pm.predict_op(pm.ops.op(kind, bytes=1e8, gpus=144, algorithm="auto"), gb)
        assert "link:network" in across.resource_time_s
        assert across.details["nvlink_domains"] == 2


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("algorithm", ["ring", "tree", "nvls", "nccl", "auto"])
def test_a_group_inside_one_domain_is_priced_exactly_as_on_nvlink(any_hw, kind, algorithm):
    """link: auto is the default; inside one NVLink domain it is bit-identical to link=nvlink."""
    cls = pm.ops.REGISTRY[kind]
    if algorithm not in (*cls.ALGORITHMS, "nccl", "auto") or (algorithm == "nvls"
                                                               and not any_hw.nvls):
        return
    # group sizes inside the domain (none on a one-GPU domain such as GB10's)
    for gpus in sorted(g for g in {2, any_hw.nvlink_domain_gpus} if 1 < g <= any_hw.nvlink_domain_gpus):
        for nbytes in (1e3, 1e8):
            auto = pm.ops.op(kind, bytes=nbytes, gpus=gpus, algorithm=algorithm)
            named = auto.with_params(link="nvlink")
            for level in ("pipes", "roofline"):
                a, n = (pm.predict_op(o, any_hw, level) for o in (auto, named))
                assert (a.time_s, a.bound, a.resource_time_s) == \
                    (n.time_s, n.bound, n.resource_time_s)


def test_one_gpu_per_domain_is_the_plain_collective_on_the_network(h100):
    """A data-parallel group with one GPU in each node (TP8 fills the node): placement 8x8."""
    for kind in KINDS:
        for algorithm in pm.ops.REGISTRY[kind].ALGORITHMS:
            if algorithm == "nvls":
                continue
            for protocol in pm.ops.REGISTRY[kind].PROTOCOLS:
                spread = pm.ops.op(kind, bytes=1e8, gpus=8, algorithm=algorithm,
                                   protocol=protocol, placement="8x8")
                flat = spread.with_params(link="network", placement=None)
                d, f = spread.demand(h100), flat.demand(h100)
                assert d.work == pytest.approx(f.work), (kind, algorithm, protocol)
                assert d.link_steps == pytest.approx(f.link_steps), (kind, algorithm, protocol)


def test_expert_parallel_all_to_all_over_64_h100s_crosses_the_network(h100):
    e = pm.predict_op(pm.ops.Alltoall(bytes=1e8, gpus=64), h100)
    assert e.bound == "link:network" and e.details["protocol"] == "simple"
    assert e.details["network_bytes_per_gpu"] == pytest.approx((64 - 8) / 64 * 1e8)
    nv = h100.link("nvlink")
    assert e.resource_time_s["link:nvlink"] == pytest.approx(
        7 / 64 * 1e8 / (nv.bandwidth_bytes_per_s * nv.achievable_fraction))


def test_a_named_link_still_carries_the_whole_group(h100):
    d = pm.ops.Allreduce(bytes=1e8, gpus=16, link="nvlink", algorithm="ring",
                         protocol="simple").demand(h100)
    assert set(d.work) == {"link:nvlink", "hbm"} and d.details["hops"] == {"nvlink": 30}
    # 16 GPUs named onto NVLink are more than one domain: NCCL's NVLS is not offered
    choice = pm.ops.Allreduce(bytes=1e8, gpus=16, link="nvlink").demand(h100)
    assert "nvls/simple" not in _offered(choice) and "ring/simple" in _offered(choice)


def test_oneshot_needs_one_domain_and_auto_does_not_offer_it_across_domains(h100):
    with pytest.raises(pm.InputError, match="one-shot algorithm needs the group in one NVLink"):
        pm.predict_op(pm.ops.Allreduce(bytes=1e5, gpus=16, algorithm="oneshot"), h100)
    choice = pm.ops.Allreduce(bytes=1e5, gpus=16, algorithm="auto").demand(h100)
    assert {p.split("/")[0] for p in _offered(choice)} == {"ring", "tree"}
    assert len(_offered(choice)) == 2 * len(nccl.PROTOCOLS)


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


def test_nvls_bytes_and_tree_bytes_are_counted_not_fitted():
    """NVLS: G+1 shards of S/G each way per GPU; the tree: S up the reduction, S down the
    broadcast. Both against the ring's 2(G−1)/G·S."""
    b200 = pm.hardware("B200")
    for gpus in (2, 4, 8):
        nvls = pm.ops.Allreduce(bytes=1e8, gpus=gpus, algorithm="nvls").demand(b200)
        assert nvls.details["bytes_sent_per_gpu"] == pytest.approx((gpus + 1) / gpus * 1e8)
        tree = pm.ops.Allreduce(bytes=1e8, gpus=gpus, algorithm="tree",
                                protocol="simple").demand(b200)
        assert tree.details["bytes_sent_per_gpu"] == pytest.approx(2e8)
        assert math.isclose(tree.details["steps"], 2 * (gpus - 1))  # one chain in the node


# -- NCCL's all-to-all inside one NVLink domain (grouped send/receive; nccl.p2p_extra_s) ------

def test_the_alltoall_op_is_the_p2p_fit_formula_on_every_row():
    """The fit's arithmetic (perfmodel.validation.collectives p2p_time_s) is the op's: on every
    NCCL all-to-all row the project has, at the fitted p2p rates, the two agree."""
    from perfmodel.validation import collectives
    x = tuple(nccl.P2P[k] for k in nccl.P2P_KEYS)
    rows = [r for r in collectives.load_nccl_rows() if r["collective"] == "alltoall"]
    assert len(rows) == 336  # 21 sizes x 16 (GPU, GPU count) pairs
    for r in rows:
        hw = pm.hardware(r["hardware"])
        formula = collectives.p2p_time_s(x, r, collectives.p2p_terms(r, hw))
        assert collectives.nccl_predicted_s(r, hw) == pytest.approx(formula, rel=1e-9), r["id"]


def test_a_small_alltoall_pays_one_round_not_a_hop_per_peer(h100):
    """The peers' sends run at once: a 1 KiB all-to-all over 8 GPUs costs the 2-GPU one plus
    peer_s for each of 6 more peers (and the smaller per-peer share at LL's rate), not 6 more
    hops; and it is flat in size while it is latency-bound."""
    s = 1024
    t2, t8 = (_time(h100, "alltoall", bytes=s, gpus=g) for g in (2, 8))
    link = h100.link("nvlink")
    ll_rate = link.bandwidth_bytes_per_s * link.achievable_fraction * 0.5  # LL's line format
    expected = (6 * nccl.P2P["peer_s"] + (s / 8 - s / 2) / nccl.P2P["ll_rate"]
                + (7 / 8 - 1 / 2) * s / ll_rate)
    assert t8 - t2 == pytest.approx(expected, rel=1e-9)
    assert t8 - t2 < h100.link("nvlink").ll_latency_s * 6
    assert _time(h100, "alltoall", bytes=2 * s, gpus=8) == pytest.approx(t8, rel=0.02)
    est = pm.predict_op(pm.ops.Alltoall(bytes=s, gpus=8), h100)
    assert est.details["protocol"] == "ll" and est.details["hops"] == {"nvlink": 1}


def test_a_large_alltoall_is_link_bound_on_hopper_and_copy_bound_on_blackwell(h100):
    """Simple's bytes (nccl.p2p_extra_s): the slower of the peers' (G−1)/G·S at link_efficiency
    of NCCL's NVLink rate and the channels' copy of the whole buffer at copy_rate. On Hopper the
    link binds at every GPU count, so 8 GPUs take 7/4 of 2 GPUs' time; on B200, whose NVLink is
    twice as fast, the copy binds at 2 and 4 GPUs, whose times are then the same."""
    s = 512 << 20

    def bound(hw, g):
        link = hw.link("nvlink")
        rate = link.bandwidth_bytes_per_s * link.achievable_fraction * nccl.P2P["link_efficiency"]
        return (g - 1) / g * s / rate, s / nccl.P2P["copy_rate"]

    b200 = pm.hardware("B200")
    for hw in (h100, b200):
        for g in (2, 4, 8):
            est = pm.predict_op(pm.ops.Alltoall(bytes=s, gpus=g), hw)
            assert est.details["protocol"] == "simple"
            assert est.time_s == pytest.approx(max(bound(hw, g)), rel=0.05)
    assert all(link > copy for link, copy in (bound(h100, g) for g in (2, 4, 8)))
    assert all(copy > link for link, copy in (bound(b200, g) for g in (2, 4)))
    t2, t4 = (_time(b200, "alltoall", bytes=s, gpus=g) for g in (2, 4))
    assert t4 == pytest.approx(t2, rel=0.01)
