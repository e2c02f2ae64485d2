"""The engines' own all-reduce dispatch (perfmodel/ops/custom_allreduce.py): thresholds worked by
hand from vLLM 0.24.0, SGLang 0.5.14 and FlashInfer 0.7.4's sources."""
import pytest

import perfmodel as pm
from perfmodel.ops import custom_allreduce as car

KiB, MiB = 1024, 1024 * 1024


def _pick(hw, engine, nbytes, gpus=8, mode="graph", **kw):
    est = pm.predict_op(pm.ops.Allreduce(bytes=float(nbytes), gpus=gpus, algorithm=engine,
                                         mode=mode, **kw), hw)
    return est.details


def test_vllm_on_sm90_at_eight_gpus_switches_at_256_kib(h100):
    # CUSTOM_ALL_REDUCE_MAX_SIZES["9.0"][8] = 256 KiB, `inp_size < max_size`; then torch
    # symm-mem (multimem on 9.0 for 4, 6, 8 GPUs) up to 64 MiB, then NCCL
    below = _pick(h100, "vllm", 256 * KiB - 16)
    assert (below["algorithm"], below["engine"], below["path"]) == \
        ("oneshot", "vllm", "custom_allreduce")
    at = _pick(h100, "vllm", 256 * KiB)
    assert (at["algorithm"], at["path"]) == ("multimem", "torch_symm_mem")
    assert _pick(h100, "vllm", 64 * MiB)["path"] == "torch_symm_mem"  # `<=` 64 MiB
    assert _pick(h100, "vllm", 64 * MiB + 16)["algorithm"] in ("ring", "tree", "nvls")


def test_vllm_kernel_choice_one_stage_below_its_cutoffs_else_two_stage(h100, b200):
    # four GPUs on SM90: custom up to 32 MiB; one-stage below 512 KiB, two-stage above
    assert _pick(h100, "vllm", 512 * KiB - 16, gpus=4)["algorithm"] == "oneshot"
    assert _pick(h100, "vllm", 512 * KiB, gpus=4)["algorithm"] == "twoshot"
    # two GPUs are always one-stage, below min(64 MiB cap, 8 MiB max_size); then symm-mem's
    # two-shot (no multimem at 2 GPUs on 9.0)
    assert _pick(h100, "vllm", 8 * MiB - 16, gpus=2)["algorithm"] == "oneshot"
    at = _pick(h100, "vllm", 8 * MiB, gpus=2)
    assert (at["algorithm"], at["path"]) == ("twoshot", "torch_symm_mem")
    # SM 10.0, eight GPUs: custom below 1 MiB, two-stage from 256 KiB, then symm-mem
    assert _pick(b200, "vllm", 128 * KiB)["algorithm"] == "oneshot"
    assert _pick(b200, "vllm", 512 * KiB)["algorithm"] == "twoshot"
    assert _pick(b200, "vllm", 1 * MiB)["path"] == "torch_symm_mem"


def test_vllm_eager_copies_into_its_ipc_buffer_graphs_do_not(h100):
    graph = pm.predict_op(pm.ops.Allreduce(bytes=64e3, gpus=8, algorithm="vllm"), h100)
    eager = pm.predict_op(pm.ops.Allreduce(bytes=64e3, gpus=8, algorithm="vllm",
                                           mode="eager"), h100)
    assert eager.details["copies"] == 1 and graph.details["copies"] == 0
    assert eager.time_s > graph.time_s


def test_sglang_push_pull_and_two_shot_thresholds(h100, b200):
    # H200-tuned table, 8 GPUs: push and pull both <= 160 KiB, else 2-shot pull up to 16 MiB
    assert _pick(h100, "sglang", 160 * KiB)["path"] == "push"
    assert _pick(h100, "sglang", 160 * KiB + 16)["algorithm"] == "twoshot"
    assert _pick(h100, "sglang", 16 * MiB)["algorithm"] == "twoshot"
    assert _pick(h100, "sglang", 16 * MiB + 16)["algorithm"] in ("ring", "tree", "nvls")
    # 4 GPUs: push <= 384 KiB, pull threshold 256 KiB below it: 2-shot above 384 KiB
    assert _pick(h100, "sglang", 384 * KiB, gpus=4)["path"] == "push"
    assert _pick(h100, "sglang", 384 * KiB + 16, gpus=4)["algorithm"] == "twoshot"
    # B200 (compute capability 10.x) table, 8 GPUs: one-shot up to 720 KiB
    assert _pick(b200, "sglang", 720 * KiB)["algorithm"] == "oneshot"
    assert _pick(b200, "sglang", 720 * KiB + 16)["algorithm"] == "twoshot"
    # the push kernel copies nothing eagerly; the 2-shot pull copies in and out
    assert _pick(h100, "sglang", 64 * KiB, mode="eager")["copies"] == 0
    assert _pick(h100, "sglang", 1 * MiB, mode="eager")["copies"] == 2


def test_trtllm_one_shot_by_flashinfers_byte_rule_within_its_workspace(h100):
    # one-shot while 2·G·S <= 42 MiB at 8 GPUs: S <= 2.625 MiB; the engine keeps the faster of
    # its kernel and NCCL below the 64 MiB workspace
    small = pm.ops.Allreduce(bytes=64e3, gpus=8, algorithm="trtllm").demand(h100)
    assert small.options[0].details["algorithm"] == "oneshot"
    mid = pm.ops.Allreduce(bytes=float(3 * MiB), gpus=8, algorithm="trtllm").demand(h100)
    assert mid.options[0].details["algorithm"] == "twoshot"
    big = pm.ops.Allreduce(bytes=float(64 * MiB + 16), gpus=8, algorithm="trtllm").demand(h100)
    # above the workspace: NCCL alone, the one pair its tuner picks (ops/comm.py)
    assert big.details.get("engine") is None and "nccl_tuner_s" in big.details


def test_a_group_spanning_two_nvlink_domains_never_runs_a_custom_kernel(h100):
    for engine in car.ENGINES:
        for nbytes in (4 * KiB, 256 * KiB, 4 * MiB):
            est = pm.predict_op(pm.ops.Allreduce(bytes=float(nbytes), gpus=16,
                                                 algorithm=engine), h100)
            assert est.details["algorithm"] in ("ring", "tree"), (engine, nbytes)
            assert "engine" not in est.details


def test_unsupported_world_sizes_fall_back_to_nccl(h100):
    # vLLM: {2, 4, 6, 8}, torch symm-mem the same; a group of 3 runs NCCL
    assert _pick(h100, "vllm", 4 * KiB, gpus=3)["algorithm"] in ("ring", "tree", "nvls")
    # TensorRT-LLM's one-shot table has 2, 4 and 8 only
    assert _pick(h100, "trtllm", 4 * KiB, gpus=6)["algorithm"] in ("ring", "tree", "nvls")


def test_the_generic_kernels_keep_their_bytes(h100):
    one = pm.ops.Allreduce(bytes=1e6, gpus=8, algorithm="oneshot").demand(h100)
    two = pm.ops.Allreduce(bytes=1e6, gpus=8, algorithm="twoshot").demand(h100)
    assert one.details["bytes_sent_per_gpu"] == pytest.approx(7e6)
    assert two.details["bytes_sent_per_gpu"] == pytest.approx(2 * 7 / 8 * 1e6)
    # no launch of their own: the kernel's boundary is its retire, in NVLink trips
    assert one.kernels == two.kernels == 0
    # the latency floor: each kernel's NVLink one-way trips at the family's measured LL hop
    # (custom_allreduce.NVLINK_TRIPS: the generic one-shot is the engines' push kernel, a store
    # and the peer's wait on it; the two-stage kernel barriers, loads, barriers, loads, barriers;
    # RETIRE_TRIPS: both retire after a round trip acknowledging their remote stores)
    hop = h100.link("nvlink").ll_latency_s
    for demand, trips in ((one, 2 + 2), (two, 7 + 2)):
        assert demand.details["nvlink_trips"] == trips
        assert demand.link_steps["nvlink"] * h100.link("nvlink").latency_s == \
            pytest.approx(trips * hop)


def test_a_blackwell_custom_kernel_waits_longer_on_its_nvlink():
    """NVLink 5's measured LL hop (1.27 us on B200 against 0.79 us on H100: fitted.yaml
    nccl.ll_hop_s.*) makes the same small one-shot all-reduce slower on B200, as the engines'
    measured small calls are (AIConfigurator: vLLM 7.4 us on 8 B200, 4.7 us on 8 H100)."""
    small = pm.ops.Allreduce(bytes=256, gpus=8, algorithm="oneshot")
    assert pm.predict_op(small, "B200").resource_time_s["latency"] > \
        1.5 * pm.predict_op(small, "H100-SXM").resource_time_s["latency"]


@pytest.mark.parametrize("params, message", [
    (dict(algorithm="vllm-custom"), "algorithm: expected one of"),
    (dict(algorithm="sglang", protocol="ll"), "protocol: the sglang all-reduce is not NCCL"),
    (dict(algorithm="vllm", mode="replay"), "mode: expected one of graph, eager"),
])
def test_bad_names_are_input_errors_naming_the_parameter(params, message):
    with pytest.raises(pm.InputError) as e:
        pm.ops.Allreduce(bytes=1e6, gpus=8, **params)
    assert message in str(e.value)


def test_engine_dispatch_is_all_reduce_only():
    with pytest.raises(pm.InputError, match="'vllm' is not an algorithm of allgather"):
        pm.ops.Allgather(bytes=1e6, gpus=8, algorithm="vllm")


def test_serving_presets_name_their_dispatch_and_the_builder_default_is_auto():
    from perfmodel.plan.simulator.engines import engine_preset
    from perfmodel.workloads.builder import build_graph
    assert {e: engine_preset(e, "H100-SXM", tp=8).allreduce
            for e in ("vllm", "sglang", "trtllm")} == \
        {"vllm": "vllm", "sglang": "sglang", "trtllm": "trtllm"}
    model = pm.load_model("llama3-8b")
    plain = build_graph(model, "decode", batch=8, context=128, tp=8)
    assert {n.op.algorithm for n in plain.nodes if n.op.name == "allreduce"} == {"auto"}
    engine = build_graph(model, "decode", batch=8, context=128, tp=8, allreduce="sglang")
    assert {n.op.algorithm for n in engine.nodes if n.op.name == "allreduce"} == {"sglang"}
    with pytest.raises(pm.InputError, match="allreduce"):
        build_graph(model, "decode", batch=8, context=128, tp=8, allreduce="nccl-custom")


def test_the_generic_one_shot_is_priced_as_the_engines_push_kernel(h100):
    """`auto`'s one-shot is the Lamport/push kind (no barrier): as TensorRT-LLM's own one-shot,
    and faster than vLLM's barrier-load-barrier one-stage kernel at a message this small."""
    small = dict(bytes=4096.0, gpus=2)
    generic = pm.ops.Allreduce(algorithm="oneshot", **small).demand(h100)
    trt = car.dispatch("trtllm", h100, 2, 4096.0).kernel
    vllm = car.dispatch("vllm", h100, 2, 4096.0).kernel
    assert generic.link_steps == trt.link_steps
    assert generic.link_steps["nvlink"] < vllm.link_steps["nvlink"]
    auto = pm.predict_op(pm.ops.Allreduce(algorithm="auto", **small), h100)
    assert auto.details["algorithm"] == "oneshot"


def test_load_based_kernels_stream_at_their_loads_in_flight(h100):
    """vLLM's one-stage kernel on 2 H100s, 4 MiB, worked by hand: 36 blocks x 512 threads x 16 B
    = 294,912 B of loads in flight per pass; 4 MiB / 294,912 = 14.22 passes, the first in the
    latency's trips, the other 13.22 at a round trip of two LL hops each (2 x 0.791 us): 20.9 us,
    longer than 4 MiB at the link's 371 GB/s (11.3 us), so the link's time is the passes'."""
    nbytes = 4.0 * MiB
    kernel = car.dispatch("vllm", h100, 2, nbytes).kernel
    assert kernel.details["path"] == "custom_allreduce" and kernel.details["algorithm"] == "oneshot"
    assert kernel.details["loads_in_flight_bytes"] == 36 * 512 * 16
    passes = nbytes / (36 * 512 * 16) - 1
    assert kernel.details["load_passes"] == pytest.approx(passes)
    link = h100.link("nvlink")
    expected = passes * 2 * link.ll_latency_s
    est = pm.predict_op(pm.ops.Allreduce(bytes=nbytes, gpus=2, algorithm="vllm"), h100)
    assert est.resource_time_s["link:nvlink"] == pytest.approx(expected)
    # at the link's rate it would take 4 MiB / 371 GB/s, well under the passes
    assert nbytes / (link.bandwidth_bytes_per_s * link.achievable_fraction) < 0.6 * expected


def test_a_message_within_one_pass_and_the_push_kernels_stream_at_the_link(h100):
    # 64 KiB on vLLM's kernel fits one pass (8 blocks): no passes beyond the trips' round trip
    small = car.dispatch("vllm", h100, 2, 64.0 * KiB).kernel
    assert small.details["loads_in_flight_bytes"] == 8 * 512 * 16
    assert small.details["load_passes"] == 0.0
    # SGLang's 1-shot push (2 MiB on 2 H100s: its push threshold) stores, so no load bound
    push = car.dispatch("sglang", h100, 2, 2.0 * MiB).kernel
    assert push.details["path"] == "push" and "load_passes" not in push.details
    link = h100.link("nvlink")
    assert push.work["link:nvlink"] == pytest.approx(2.0 * MiB / link.achievable_fraction)


def test_sglangs_pull_grid_is_one_block_per_sm_more_gpus_more_in_flight(h100):
    """SGLang's pull kernels launch at most one 512-thread block per SM (jit_kernel/all_reduce.py
    NUM_CTA): 132 on H100, and each thread's loads reach every peer."""
    assert car.loads_in_flight_bytes(h100, "pull", 4, 64.0 * MiB) == 132 * 512 * 16 * 3
    assert car.loads_in_flight_bytes(h100, "pull", 8, 64.0 * MiB) == 132 * 512 * 16 * 7
    assert car.loads_in_flight_bytes(h100, "push", 8, 64.0 * MiB) is None


def test_a_replayed_kernels_boundary_is_its_retire_in_nvlink_trips_not_a_graph_gap(h100, b200):
    """TensorRT-LLM's Lamport one-shot of 256 B on 2 GPUs, replayed from a CUDA graph: the push
    and the peer's push it waits on (2 trips) and the retire's acknowledgement round trip (2):
    4 LL hops, 3.16 us on H100 and 5.09 us on B200 (AIConfigurator measured 2.66 and 4.58), with
    no launch and so no graph gap (its grid launches under PDL)."""
    from perfmodel.validation.modules import captured_s
    op = pm.ops.Allreduce(bytes=256.0, gpus=2, algorithm="trtllm")
    for hw in (h100, b200):
        kernel = car.dispatch("trtllm", hw, 2, 256.0).kernel
        assert kernel.kernels == 0 and kernel.details["nvlink_trips"] == 4
        hop = hw.link("nvlink").ll_latency_s
        assert captured_s(op, hw) == pytest.approx(4 * hop, rel=0.01)
    # the families' floors scale with their LL hops, whatever their graph gaps
    assert captured_s(op, b200) / captured_s(op, h100) == pytest.approx(
        b200.link("nvlink").ll_latency_s / h100.link("nvlink").ll_latency_s, rel=0.01)


def test_eager_calls_launch_only_their_copy_kernels(h100):
    eager = car.dispatch("vllm", h100, 2, 4096.0, mode="eager").kernel
    graph = car.dispatch("vllm", h100, 2, 4096.0, mode="graph").kernel
    assert (eager.kernels, graph.kernels) == (1, 0)


def test_lamport_one_shot_runs_its_push_clear_and_reduce_back_to_back(h100):
    """TensorRT-LLM's Lamport one-shot (FlashInfer 0.7.4 allreduce_fusion_kernel_oneshot_lamport)
    on 2 H100s, 64 MiB, worked by hand: push 64 MiB over NVLink while 3 x 64 MiB pass through
    HBM (the input read, its own copy, the peer's copy landing), clear 2 x 64 MiB, reduce
    3 x 64 MiB; the buffers (6 x 64 MiB) exceed half the L2, so the phases are HBM's, and their
    times add."""
    nbytes = 64.0 * MiB
    kernel = car.kernel_demand(h100, "oneshot", 2, nbytes, engine="trtllm", path="lamport")
    assert [p.details["phase"] for p in kernel.sequence] == ["push", "clear", "reduce"]
    assert [p.work["hbm"] for p in kernel.sequence] == [3 * nbytes, 2 * nbytes, 3 * nbytes]
    assert kernel.details["buffers_in_l2"] is False
    est = pm.predict_op(pm.ops.Allreduce(bytes=nbytes, gpus=2, algorithm="oneshot"), h100)
    parts = est.details["parts"]
    assert est.time_s == pytest.approx(sum(p["time_s"] for p in parts))
    link = h100.link("nvlink")
    push_link_s = nbytes / (link.bandwidth_bytes_per_s * link.achievable_fraction)
    assert est.time_s > push_link_s + 5 * nbytes / h100.hbm_peak_bandwidth_bytes_per_s


def test_a_small_lamport_call_keeps_its_buffers_in_l2(h100):
    # 1 MiB on 4 GPUs touches (2 x 4 + 2) MiB, within half of H100's 50 MiB L2
    kernel = car.kernel_demand(h100, "oneshot", 4, 1.0 * MiB, engine="trtllm", path="lamport")
    assert kernel.details["buffers_in_l2"] is True
    assert "hbm" not in kernel.work and kernel.hbm_bytes == 0.0
    assert kernel.work["l2"] == pytest.approx((5 + 4 + 5) * MiB)


def test_lamport_two_shot_copies_in_reduces_and_copies_out(b200):
    # allreduce_fusion_kernel_twoshot_sync: the input into its buffer, the shard's reduce and
    # broadcast (2 (G-1)/G S over NVLink), the sums out
    kernel = car.kernel_demand(b200, "twoshot", 8, 32.0 * MiB, engine="trtllm", path="lamport")
    assert [p.details["phase"] for p in kernel.sequence] == ["copy", "reduce_broadcast", "out"]
    link = b200.link("nvlink")
    assert kernel.sequence[1].work["link:nvlink"] == pytest.approx(
        2 * 7 / 8 * 32 * MiB / link.achievable_fraction)


def test_copy_kernels_run_before_and_after_the_kernel_not_beside_it():
    """vLLM's torch symm-mem path copies the input in and the result out (two kernels of 2 S of
    HBM each) around the multimem kernel: their times add to the kernel's."""
    h200 = pm.hardware("H200-SXM")
    nbytes = 16.0 * MiB
    kernel = car.dispatch("vllm", h200, 8, nbytes).kernel
    assert kernel.details["path"] == "torch_symm_mem" and kernel.details["copies"] == 2
    phases = [p.details.get("phase") for p in kernel.sequence]
    assert phases == ["copy", None, "copy"]
    est = pm.predict_op(pm.ops.Allreduce(bytes=nbytes, gpus=8, algorithm="vllm"), h200)
    copy_s, main_s, _ = (p["time_s"] for p in est.details["parts"])
    assert est.time_s == pytest.approx(2 * copy_s + main_s)
    assert copy_s > 2 * nbytes / h200.hbm_peak_bandwidth_bytes_per_s


def test_torch_symm_mem_grids_as_torch_launches_them(h100, b200):
    """torch 2.10.0's multimem_all_reduce_ launches at most 8 blocks of 1024 threads and
    two_shot_all_reduce_ at most 24 (libtorch_cuda.so's inlined init_elementwise_launch_config),
    sized by each rank's share; multimem's ld_reduce brings one reduced 16-B vector a thread."""
    assert car.loads_in_flight_bytes(b200, "torch_symm_mem", 8, 128.0 * MiB,
                                     "multimem") == 8 * 1024 * 16
    assert car.loads_in_flight_bytes(b200, "torch_symm_mem", 4, 32.0 * MiB,
                                     "twoshot") == 24 * 1024 * 16 * 3
    # 512 KiB on 8 GPUs: 64 KiB a rank, 4,096 vectors of 16 B: 4 blocks of 1024 threads
    assert car.loads_in_flight_bytes(h100, "torch_symm_mem", 8, 512.0 * KiB,
                                     "multimem") == 4 * 1024 * 16
    kernel = car.dispatch("vllm", b200, 8, 128.0 * MiB).kernel
    assert kernel.details["load_passes"] == pytest.approx(128 * MiB / 8 / (8 * 1024 * 16) - 1)


def test_multimem_moves_the_switch_traffic_at_nvls_efficiency(h100):
    from perfmodel.ops import nccl
    kernel = car.kernel_demand(h100, "multimem", 8, 64.0 * MiB, engine="vllm",
                               path="torch_symm_mem")
    link = h100.link("nvlink")
    expected = 9 / 8 * 64 * MiB / link.achievable_fraction / nccl.nvls_efficiency("9.0")
    assert kernel.work["link:nvlink"] >= expected * (1 - 1e-12)


def test_the_engines_kernels_stop_at_a_host_of_an_nvl72_rack():
    """vLLM's and SGLang's custom all-reduce are built only for groups inside one host
    (`in_the_same_node_as`); a GB300 compute tray holds 4 GPUs (topology.host_gpus), so a group
    of 8 in one NVL72 rack runs vLLM's symmetric-memory kernel or NCCL, while 4 keep the custom
    kernel, and an 8-GPU HGX board is one host."""
    gb300, b300 = pm.hardware("GB300"), pm.hardware("B300")
    assert (gb300.gpus_per_host, b300.gpus_per_host) == (4, 8)
    assert _pick(gb300, "sglang", 64 * KiB, gpus=4)["engine"] == "sglang"
    assert _pick(gb300, "sglang", 64 * KiB, gpus=8).get("engine") is None  # NCCL
    assert _pick(b300, "sglang", 64 * KiB, gpus=8)["engine"] == "sglang"
    assert _pick(gb300, "vllm", 64 * KiB, gpus=4)["path"] == "custom_allreduce"
    assert _pick(gb300, "vllm", 64 * KiB, gpus=8)["path"] == "torch_symm_mem"
    assert _pick(b300, "vllm", 64 * KiB, gpus=8)["path"] == "custom_allreduce"


def test_a_grace_hosts_eager_path_is_the_x86_one_times_its_ratio():
    """GB200/GB300 hosts are Grace CPUs (topology.host_cpu): an eager call's host floor is the
    x86 path fitted on H100 times the ratio fitted on GB200; a graph replay has none."""
    gb300, b300 = pm.hardware("GB300"), pm.hardware("B300")
    assert (gb300.host_cpu, b300.host_cpu) == ("grace", "x86")
    ratio = car.EAGER_HOST_RATIO["grace"]
    assert 1.0 < ratio < 5.0
    x86 = car.eager_host_s("sglang", "push")
    assert car.eager_host_s("sglang", "push", "grace") == pytest.approx(ratio * x86)
    eager = _pick(gb300, "sglang", 4 * KiB, gpus=4, mode="eager")
    assert eager["host_path_s"] == pytest.approx(ratio * x86)
    assert _pick(b300, "sglang", 4 * KiB, gpus=4, mode="eager")["host_path_s"] == \
        pytest.approx(x86)
    assert "host_path_s" not in _pick(gb300, "sglang", 4 * KiB, gpus=4)


@pytest.mark.parametrize("engine, gpus, nbytes, barriers", [
    ("vllm", 8, 512 * 1024, 1),        # vLLM's two-stage kernel: its middle barrier
    ("vllm", 8, 64 * 1024, 0),         # the one-stage kernel: volatile flags only
    ("sglang", 8, 2 * 1024 * 1024, 0),  # SGLang's pull: one warp a peer (none counted)
])
def test_release_barriers_cost_their_peers(monkeypatch, engine, gpus, nbytes, barriers):
    """A release barrier adds the family's NVLink trips per peer
    (custom_allreduce.RELEASE_PEER_TRIPS) for each peer, each an LL hop of the spec's NVLink,
    on top of the kernel's trips; kernels without one are untouched."""
    b200 = pm.hardware("B200")
    op = pm.ops.Allreduce(bytes=nbytes, gpus=gpus, algorithm=engine)
    monkeypatch.setitem(car.RELEASE_PEER_TRIPS, 10, 0.0)
    bare = pm.predict_op(op, b200)
    monkeypatch.setitem(car.RELEASE_PEER_TRIPS, 10, 1.5)
    released = pm.predict_op(op, b200)
    assert released.details.get("release_trips", 0.0) == pytest.approx(barriers * (gpus - 1)
                                                                       * 1.5)
    hop = b200.link("nvlink").ll_latency_s
    assert released.time_s - bare.time_s == pytest.approx(barriers * (gpus - 1) * 1.5 * hop,
                                                          rel=1e-6, abs=1e-12)


def test_tensorrt_llms_two_shot_releases_at_both_barriers(monkeypatch):
    monkeypatch.setitem(car.RELEASE_PEER_TRIPS, 10, 1.5)
    b200 = pm.hardware("B200")
    kernel = car.kernel_demand(b200, "twoshot", 8, 4 * 1024 * 1024, "nvlink", "trtllm",
                               path="lamport")
    assert kernel.details["release_trips"] == pytest.approx(2 * 7 * 1.5)
    one = car.kernel_demand(b200, "oneshot", 8, 64 * 1024, "nvlink", "trtllm", path="lamport")
    assert "release_trips" not in one.details


def test_the_release_cost_is_fitted_on_latency_bound_two_stage_calls():
    from perfmodel.validation import collectives
    rows = collectives.load_engine_rows(trtllm_path=None)
    for major, gpu in collectives.RELEASE_FIT_GPU.items():
        fit = collectives.release_fit_rows(rows, major)
        assert fit and all(r["hardware"] == gpu and r["engine"] == "vllm"
                           and r["mode"] == "graph" for r in fit)
        assert 0 < car.RELEASE_PEER_TRIPS[major] < 4
    # in seconds Blackwell's release costs more than Hopper's
    h100, b200 = pm.hardware("H100-SXM"), pm.hardware("B200")
    assert car.RELEASE_PEER_TRIPS[10] * b200.link("nvlink").ll_latency_s > \
        car.RELEASE_PEER_TRIPS[9] * h100.link("nvlink").ll_latency_s
