"""Collectives as they run at small and mid sizes (issue 40): the small-message floor, the
algorithm NCCL's tuner takes, the engines' own kernels below their limits and the host path of an
eager call, the chunk pipeline's fill, and where a group's bytes travel (NIC across nodes, one
NVLink domain on GB200 NVL72)."""
import pytest

import perfmodel as pm
from perfmodel.ops import custom_allreduce, nccl
from perfmodel.validation import collectives

KiB, MiB = 1 << 10, 1 << 20


@pytest.mark.parametrize("hw_name", ["H100-SXM", "B200"])
@pytest.mark.parametrize("algorithm", ["nccl", "vllm", "sglang", "trtllm"])
def test_small_messages_are_latency_bound_and_flat_in_size(hw_name, algorithm):
    hw = pm.hardware(hw_name)
    times = []
    for nbytes in (256, 1 * KiB, 4 * KiB, 8 * KiB):
        e = pm.predict_op(pm.ops.Allreduce(bytes=nbytes, gpus=8, algorithm=algorithm), hw)
        latency = e.resource_time_s.get("latency", 0.0) + e.resource_time_s.get("launch", 0.0)
        assert latency > 0.5 * e.time_s, (nbytes, e.resource_time_s)
        times.append(e.time_s)
    # flat within 6 %: the largest call's bytes still take a little link time (8 H100s'
    # Lamport push of 8 KiB: 56 KiB over NVLink, ~0.16 us of a ~3.2 us call)
    assert max(times) < 1.06 * min(times)


@pytest.mark.parametrize("hw_name", ["H100-SXM", "B200"])
def test_nccl_takes_ring_ll_for_small_messages_and_nvls_for_large_on_an_nvswitch_board(hw_name):
    hw = pm.hardware(hw_name)
    # (at 8 Blackwell GPUs the measured ring LL hops add up past NVLS's flat 25 us)
    small = pm.predict_op(pm.ops.Allreduce(bytes=4 * KiB, gpus=4), hw).details
    large = pm.predict_op(pm.ops.Allreduce(bytes=64 * MiB, gpus=8), hw).details
    assert (small["algorithm"], small["protocol"]) == ("ring", "ll")
    assert (large["algorithm"], large["protocol"]) == ("nvls", "simple")
    assert large["channels"] == nccl.arch_row(nccl.NVLS_CHANNELS, hw.compute_capability)


def test_the_op_names_what_nccl_chose_and_its_latency_and_bandwidth_terms(h100):
    e = pm.predict_op(pm.ops.Allreduce(bytes=16 * MiB, gpus=8), h100)
    for key in ("algorithm", "protocol", "channels"):
        assert e.details[key] is not None
    assert e.resource_time_s["latency"] > 0 and e.resource_time_s["link:nvlink"] > 0


@pytest.mark.parametrize("engine, limit", [("vllm", 256 * KiB), ("sglang", 160 * KiB)])
def test_the_engines_one_shot_kernel_runs_below_its_size_limit(h100, engine, limit):
    below = pm.predict_op(pm.ops.Allreduce(bytes=limit // 2, gpus=8, algorithm=engine), h100)
    assert below.details["algorithm"] == "oneshot" and below.details["engine"] == engine
    above = pm.predict_op(pm.ops.Allreduce(bytes=4 * limit, gpus=8, algorithm=engine), h100)
    assert above.details["algorithm"] != "oneshot"


def test_an_eager_call_costs_the_longer_of_its_host_path_and_its_gpu_time(h100, monkeypatch):
    host = 20e-6
    monkeypatch.setitem(custom_allreduce.EAGER_HOST_S, ("vllm", "custom_allreduce"), host)

    def time(nbytes, mode):
        op = pm.ops.Allreduce(bytes=nbytes, gpus=8, algorithm="vllm", mode=mode)
        return pm.predict_op(op, h100)
    small = time(4 * KiB, "eager")
    assert small.time_s == pytest.approx(host, rel=1e-9)
    assert small.details["host_bound"] and small.details["host_path_s"] == host
    assert time(4 * KiB, "graph").time_s < host / 2  # a graph replay has no host path
    # a call whose kernels outlast the host path is timed by its GPU work alone
    monkeypatch.setitem(custom_allreduce.EAGER_HOST_S, ("vllm", "custom_allreduce"), 1e-9)
    gpu = time(200 * KiB, "eager").time_s
    monkeypatch.setitem(custom_allreduce.EAGER_HOST_S, ("vllm", "custom_allreduce"),
                        gpu / 2)
    assert time(200 * KiB, "eager").time_s == pytest.approx(gpu, rel=1e-9)


def test_the_eager_host_path_is_fitted_on_host_bound_h100_calls_only():
    rows = collectives.load_engine_rows(trtllm_path=None)
    fits = collectives.fit_eager_host_s(rows)
    assert set(fits) == (set(custom_allreduce.EAGER_HOST_KEYS.values())
                         - set(collectives.NCCL_HOST_KEYS))
    by_id = {r["id"]: r for r in rows}
    for key, (value, ids) in fits.items():
        fit = [by_id[i] for i in ids]
        assert all(r["hardware"] == "H100-SXM" and r["mode"] == "eager"
                   and r["bytes"] <= collectives.EAGER_HOST_FIT_MAX_BYTES for r in fit)
        assert min(r["measured_s"] for r in fit) <= value <= max(r["measured_s"] for r in fit)
        assert 10e-6 < value < 60e-6, key
        for r in fit:  # host-bound: the graph-replayed kernels take well under the call
            graph = collectives.engine_predicted_s({**r, "mode": "graph"})
            # (the measured graph replays reach 0.63 of the eager call: 4 GPUs x 1 MiB)
            assert graph < 0.7 * r["measured_s"], r["id"]


def test_an_engines_eager_nccl_fallback_pays_its_own_host_path(monkeypatch):
    """Beyond a GB300 tray SGLang's and vLLM's custom kernels do not run (one host); their
    eager NCCL call pays the engine's NCCL host path, Grace's ratio over the x86 value."""
    gb300 = pm.hardware("GB300")
    ratio = custom_allreduce.EAGER_HOST_RATIO["grace"]
    for engine, host in (("sglang", 50e-6), ("vllm", 30e-6)):
        monkeypatch.setitem(custom_allreduce.EAGER_HOST_S,
                            (engine, custom_allreduce.NCCL_PATH), host)
        gpus = 16  # vLLM's torch symm-mem takes 8 GPUs at 4 KiB
        eager = pm.predict_op(pm.ops.Allreduce(bytes=4 * KiB, gpus=gpus, algorithm=engine,
                                               mode="eager"), gb300)
        graph = pm.predict_op(pm.ops.Allreduce(bytes=4 * KiB, gpus=gpus, algorithm=engine),
                              gb300)
        assert eager.details["path"] == custom_allreduce.NCCL_PATH
        assert eager.details["algorithm"] == graph.details["algorithm"]  # NCCL's own pick
        assert eager.time_s == pytest.approx(host * ratio, rel=1e-9)
        assert graph.time_s < eager.time_s and "host_path_s" not in graph.details
    # TensorRT-LLM's NCCL calls carry no host path
    trt = pm.predict_op(pm.ops.Allreduce(bytes=4 * KiB, gpus=16, algorithm="trtllm"), gb300)
    assert "host_path_s" not in trt.details


def test_the_nccl_host_paths_are_fitted_on_one_gb300_group_each():
    rows = collectives.load_engine_rows(trtllm_path=None)
    by_id = {r["id"]: r for r in rows}
    ratio = custom_allreduce.EAGER_HOST_RATIO["grace"]
    fits = collectives.fit_nccl_host_s(rows, ratio)
    assert set(fits) == set(collectives.NCCL_HOST_KEYS)
    for key, (value, ids) in fits.items():
        fit = [by_id[i] for i in ids]
        engine = fit[0]["engine"]
        assert {(r["hardware"], r["gpus"]) for r in fit} == {collectives.NCCL_HOST_FIT[engine]}
        assert all(r["mode"] == "eager" and collectives.eager_host_path(r) == "nccl"
                   for r in fit)
        times = [r["measured_s"] / ratio for r in fit]
        assert min(times) <= value <= max(times)


def test_an_eager_row_carries_the_harness_copy_of_its_message():
    """AIConfigurator's eager rows: max(host path, GPU time + a memcpy of the message)."""
    big = {"hardware": "H100-SXM", "gpus": 8, "bytes": float(512 * MiB), "engine": "sglang",
           "mode": "eager", "measured_s": 1.0}
    h100 = pm.hardware("H100-SXM")
    op = collectives.engine_op(big)
    copy = pm.predict_op(pm.ops.Memcpy(bytes=512 * MiB), h100).time_s
    assert copy == pytest.approx(collectives.harness_copy_s(big, h100))
    assert collectives.engine_predicted_s(big) == pytest.approx(
        pm.predict_op(op, h100).time_s + copy, rel=1e-9)
    # a host-bound call hides the copy under its host path
    small = {**big, "bytes": 4.0 * KiB}
    call = pm.predict_op(collectives.engine_op(small), h100)
    assert call.details["host_bound"]
    assert collectives.engine_predicted_s(small) == call.time_s


def test_the_pipeline_fill_grows_with_the_chunk_then_stays(h100):
    def fill(algorithm, protocol, nbytes, gpus=8, channels=16):
        return nccl.pipeline_fill_s(algorithm, protocol, nbytes, gpus, nbytes, 300e9, channels)
    assert fill("ring", "ll", 64 * MiB) == fill("ring", "ll128", 64 * MiB) == 0.0
    small, mid, capped, big = (fill("nvls", "simple", s) for s in (1 * MiB, 8 * MiB,
                                                                    16 * MiB, 1 << 30))
    assert 0 < small < mid < capped == big
    # 4 stages, a 128 KiB chunk on each of 16 channels sharing 300 GB/s
    assert big == pytest.approx(3 * 128 * KiB / (300e9 / 16))
    assert fill("ring", "simple", 1 << 30, gpus=2) == pytest.approx(
        512 * KiB / (300e9 / 16))
    assert fill("ring", "simple", 64 * MiB, gpus=1) == 0.0


def test_a_group_spanning_two_nodes_is_priced_on_the_nic(h100):
    e = pm.predict_op(pm.ops.Allreduce(bytes=256 * MiB, gpus=16), h100)
    assert e.bound == "link:network"
    assert e.details["nvlink_domains"] == 2
    inside = pm.predict_op(pm.ops.Allreduce(bytes=256 * MiB, gpus=8), h100)
    # each GPU's ring share crosses its 50 GB/s NIC, beside 371 GB/s of NVLink
    assert e.time_s > inside.time_s and e.resource_time_s["link:network"] > \
        e.resource_time_s["link:nvlink"]


@pytest.mark.parametrize("hw_name", ["GB200", "GB300"])
def test_an_nvl72_rack_is_one_nvlink_domain(hw_name):
    hw = pm.hardware(hw_name)
    e = pm.predict_op(pm.ops.Allreduce(bytes=256 * MiB, gpus=72), hw)
    assert "link:network" not in e.resource_time_s
    assert e.details["algorithm"] == "nvls" and "nvlink_domains" not in e.details
    across = pm.predict_op(pm.ops.Allreduce(bytes=256 * MiB, gpus=144), hw)
    assert across.details["nvlink_domains"] == 2 and "link:network" in across.resource_time_s
