"""The host's share of a Megatron-Core MoE microbatch (perfmodel.plan.moe_host): the operations
the host issues per local expert, the synchronisation before each MoE layer's dispatch, and the
schedule of host and GPU against hand-worked cases: a host-bound layer, a GPU-bound one, and a
micro-batch growing from one to the other."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from perfmodel.errors import InputError
from perfmodel.graph import DEFAULT_STREAM
from perfmodel.plan import frameworks as fw
from perfmodel.plan import moe_host
from perfmodel.plan.moe_host import HostStep, host_bound_s, host_steps, launches, \
    moe_host_extra_s
from perfmodel.plan.training import plan_training


def scheduled(name: str, kind: str, time_s: float, stream: str = DEFAULT_STREAM, **params):
    """A scheduled op as the planner reads it: its name, its op's kind and parameters, its
    stream and time."""
    return SimpleNamespace(name=name, op=SimpleNamespace(name=kind, params=params),
                           time_s=time_s, stream=stream)


def moe_layer(k: float = 1.0, prefix: str = "l0"):
    """One MoE layer's forward, its GPU times k times those of micro-batch 1: attention 2,
    dispatch 1, experts 4 (8 experts over EP 2: 4 local), combine 1."""
    experts = {"experts": 8, "gpus": 2}
    return [scheduled(f"{prefix}.attn", "attention", 2.0 * k),
            scheduled(f"{prefix}.dispatch", "alltoall", 1.0 * k),
            scheduled(f"{prefix}.experts", "moe", 4.0 * k, **experts),
            scheduled(f"{prefix}.combine", "alltoall", 1.0 * k)]


def test_expert_ops_count_a_quantize_and_a_gemm_per_local_expert_and_linear():
    op = SimpleNamespace(name="moe", params={"experts": 128, "gpus": 8})   # 16 local experts
    # MXFP8: forward and dgrad 2 linears x (quantize + GEMM), wgrad 2 GEMMs, per expert
    assert launches("l3.experts", op, "mxfp8") == 2 * 2 * 16
    assert launches("l3.experts_dgrad", op, "mxfp8") == 2 * 2 * 16
    assert launches("l3.experts_wgrad", op, "mxfp8") == 2 * 16
    # FP8 current scaling's three kernels are one quantize call: the same count
    assert launches("l3.experts", op, "fp8") == launches("l3.experts", op, "mxfp8")
    # BF16: torch.split views, no quantize: the GEMMs alone
    assert launches("l3.experts", op, "bf16") == 2 * 16
    # 256 experts over EP 8 (DeepSeek-V3): twice the operations
    big = SimpleNamespace(name="moe", params={"experts": 256, "gpus": 8})
    assert launches("l0.experts", big, "mxfp8") == 2 * launches("l3.experts", op, "mxfp8")
    # any other op is one operation
    assert launches("l3.qkv", SimpleNamespace(name="gemm", params={}), "mxfp8") == 1


def test_the_host_waits_before_each_forward_dispatch_only():
    ops = [scheduled("l0.router", "gemm", 1.0), scheduled("l0.dispatch", "alltoall", 1.0),
           scheduled("l0.experts", "moe", 1.0, experts=4, gpus=2),
           scheduled("l0.recompute.dispatch", "alltoall", 1.0),
           scheduled("l0.recompute.experts", "moe", 1.0, experts=4, gpus=2),
           scheduled("l0.dispatch_bwd", "alltoall", 1.0),
           scheduled("l1.experts", "moe", 1.0, experts=4, gpus=1),    # no exchange (EP 1)
           scheduled("l1.side", "alltoall", 5.0, stream="comm")]      # not the compute stream
    steps = host_steps(ops, "bf16", 1, True, True)
    assert [s.name for s in steps if s.sync] == ["l0.dispatch", "l0.recompute.dispatch",
                                                 "l1.experts"]
    assert "l1.side" not in [s.name for s in steps]


def test_cached_weight_casts_and_norm_fused_casts_leave_the_host_too():
    ops = [scheduled("l0.norm", "norm", 1.0), scheduled("l0.qkv.quant_x", "quantize", 0.3),
           scheduled("l0.qkv.quant_w", "quantize", 0.5), scheduled("l0.qkv", "gemm", 8.0)]
    steps = {s.name: s for s in host_steps(ops, "fp8", 4, True, True)}
    assert "l0.qkv.quant_x" not in steps                    # the norm writes it
    assert steps["l0.qkv.quant_w"].launches == pytest.approx(0.25)  # once in 4 microbatches
    assert steps["l0.qkv.quant_w"].gpu_s == pytest.approx(0.125)
    plain = {s.name: s for s in host_steps(ops, "fp8", 4, False, False)}
    assert plain["l0.qkv.quant_x"].launches == 1 and plain["l0.qkv.quant_w"].gpu_s == 0.5


def test_schedule_by_hand_gpu_bound_and_host_bound():
    steps = [HostStep("l0.attn", 1, 10.0), HostStep("l0.router", 1, 2.0),
             HostStep("l0.dispatch", 1, 3.0, sync=True), HostStep("l0.experts", 4, 8.0),
             HostStep("l0.combine", 1, 3.0)]
    # launch 1: the GPU waits only on the first launch and on the first after the wait:
    # attn ends 1 + 10 = 11, router 13, the host waits to 13, dispatch ends 13 + 1 + 3 = 17,
    # experts 25, combine 28
    assert host_bound_s(steps, 1.0) == (pytest.approx(28.0), pytest.approx(26.0))
    # launch 5: attn ends 15, router 17; the host waits to 17, dispatch ends 17 + 5 + 3 = 25;
    # the host issues the experts' 4 operations until 42 and their last quarter (2) runs
    # after: 44; combine 42 + 5 + 3 = 50
    assert host_bound_s(steps, 5.0) == (pytest.approx(50.0), pytest.approx(26.0))


def test_micro_batch_growth_makes_the_layer_gpu_bound():
    # launch 1 s; micro-batch 1: attn ends 3, the host waits to 3, dispatch ends 5, the
    # experts' 8 operations (4 local x 2 GEMMs, BF16) issued until 4 + 8 = 12, the last
    # eighth (0.5) after: 12.5, combine 14; the GPU's own sum is 8: 6 s of host
    assert moe_host_extra_s(moe_layer(1.0), "bf16", 1, 1.0) == pytest.approx(6.0)
    # micro-batch 4: the GPU's 32 s outlast the host's issue; only the two launches the GPU
    # waits on stay exposed (the first, and the dispatch after the wait): 34 − 32
    assert moe_host_extra_s(moe_layer(4.0), "bf16", 1, 1.0) == pytest.approx(2.0)
    assert moe_host_extra_s(moe_layer(40.0), "bf16", 1, 1.0) == pytest.approx(2.0)
    # per unit of GPU work the host's share falls as the micro-batch grows
    shares = [moe_host_extra_s(moe_layer(k), "bf16", 1, 1.0) / (8.0 * k) for k in (1, 2, 4, 8)]
    assert shares == sorted(shares, reverse=True)
    # MXFP8 adds a quantize per GEMM: 16 operations, host-bound longer
    assert moe_host_extra_s(moe_layer(1.0), "mxfp8", 1, 1.0) > \
        moe_host_extra_s(moe_layer(1.0), "bf16", 1, 1.0)


def test_no_moe_layer_or_no_host_cost_adds_nothing():
    dense = [scheduled("l0.attn", "attention", 2.0), scheduled("l0.ffn", "gemm", 1.0)]
    assert moe_host_extra_s(dense, "bf16", 1, 1.0) == 0.0         # no synchronisation
    assert moe_host_extra_s(moe_layer(), "bf16", 1, 0.0) == 0.0
    with pytest.raises(InputError, match="moe_host_launch_s"):
        moe_host_extra_s(moe_layer(), "bf16", 1, -1.0)
    # the framework: megatron counts it as a negative saving, pytorch not at all
    got = fw.microbatch_savings_s(fw.framework("megatron"), moe_layer(), 1, 132, "bf16", 1,
                                  len(moe_layer()), host_launch_s=1.0)
    assert got["moe_host_sync"] == pytest.approx(-6.0)
    assert "moe_host_sync" not in fw.microbatch_savings_s(
        fw.framework("pytorch"), moe_layer(), 1, 132, "bf16", 1, 4, host_launch_s=1.0)


def test_plan_training_qwen3_30b_b200_host_share_falls_with_the_micro_batch():
    def plan(micro_batch: int, launch_s: float | None = None):
        return plan_training("qwen3-30b-a3b", "B200", batch=64, seq=4096, tp=1, pp=1, dp=8,
                             ep=8, dtype="mxfp8", microbatches=64 // micro_batch,
                             moe_host_launch_s=launch_s)
    one, four = plan(1), plan(4)
    assert one.breakdown["moe_host_sync"] > 0 and four.breakdown["moe_host_sync"] > 0
    # the host's share of the step: large at micro-batch 1, small at 4
    assert one.breakdown["moe_host_sync"] / one.step_time_s > \
        2 * four.breakdown["moe_host_sync"] / four.step_time_s
    off = plan(1, 0.0)
    assert "moe_host_sync" not in off.breakdown
    assert off.step_time_s == pytest.approx(one.step_time_s - one.breakdown["moe_host_sync"])
    # the roofline has no host
    roof = plan_training("qwen3-30b-a3b", "B200", batch=64, seq=4096, tp=1, dp=8, ep=8,
                         dtype="mxfp8", microbatches=64, level="roofline")
    assert "moe_host_sync" not in roof.breakdown


def test_plan_training_refuses_a_bad_host_cost_in_one_line():
    for bad in (-1e-6, float("nan"), True, "fast"):
        with pytest.raises(InputError, match="moe_host_launch_s") as e:
            plan_training("qwen3-30b-a3b", "B200", batch=64, seq=4096, dp=8, ep=8,
                          dtype="mxfp8", microbatches=64, moe_host_launch_s=bad)
        assert "\n" not in str(e.value)


def test_dense_plans_are_unchanged_by_the_host_cost():
    a = plan_training("llama3-8b", "H100-SXM", batch=8, seq=4096, dp=8, microbatches=8,
                      moe_host_launch_s=0.0)
    b = plan_training("llama3-8b", "H100-SXM", batch=8, seq=4096, dp=8, microbatches=8,
                      moe_host_launch_s=moe_host.HOST_LAUNCH_S)
    assert a.step_time_s == b.step_time_s and "moe_host_sync" not in b.breakdown


def test_the_unfused_ops_around_the_experts_count_their_torch_calls():
    elementwise = SimpleNamespace(name="elementwise", params={})
    # 16 local experts (128 over EP 8): the bias's multiply and add per expert and its cat;
    # its backward's two multiplies and two reductions per expert; the clamps and their cats
    assert launches("l3.experts_bias", elementwise, "bf16", 16) == 2 * 16 + 1
    assert launches("l3.experts_bias_bwd", elementwise, "bf16", 16) == 4 * 16
    assert launches("l3.experts_clamp", elementwise, "bf16", 16) == 3
    assert launches("l3.recompute.experts_clamp", elementwise, "bf16", 16) == 3
    assert launches("l3.experts_clamp_bwd", elementwise, "bf16", 16) == 3
    # host_steps takes the local experts from the layer's moe op
    ops = [scheduled("l0.dispatch", "alltoall", 1.0),
           scheduled("l0.experts", "moe", 1.0, experts=128, gpus=8),
           scheduled("l0.experts_bias", "elementwise", 1.0),
           scheduled("l0.experts_bias_bwd", "elementwise", 1.0)]
    steps = {s.name: s for s in host_steps(ops, "bf16", 1, True, True)}
    assert steps["l0.experts_bias"].launches == 33
    assert steps["l0.experts_bias_bwd"].launches == 64
