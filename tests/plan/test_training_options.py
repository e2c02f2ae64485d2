"""Megatron-Core options of a training step: the MoE exchange (perfmodel.plan.training
moe_dispatcher, ep_overlap; perfmodel.plan.frameworks ep_overlap_*: the combined 1F1B schedule
of one MoE layer by hand, the paired share of microbatches, the flex dispatcher's DeepEP kernels
in the training graph, the one-line refusals Megatron-Core's own checks give) and the layers a
quantized recipe keeps in BF16 (bf16_layers)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

import perfmodel as pm
from perfmodel.graph import DEFAULT_STREAM
from perfmodel.plan import frameworks as fw
from perfmodel.plan.training import moe_dispatcher_of, plan_training
from perfmodel.workloads.builder import build_graph


def scheduled(name: str, time_s: float):
    return SimpleNamespace(name=name, op=SimpleNamespace(name="x"), time_s=time_s,
                           stream=DEFAULT_STREAM)


def test_one_layer_schedule_by_hand():
    # comm: Cb 2 | Df 3 -> Db 1 | Cf 2 ; comp: Af 4 | Mb 2 -> Mbdw 2 -> Mf 5 | Ab 6
    t = dict(Af=4, Df=3, Mf=5, Cf=2, Cb=2, Mb=2, Mbdw=2, Db=1, Ab=6)
    # t1 = max(2, 4) = 4; Df ends 7, Mb 6, Mbdw 8; Db starts max(7, 6) = 7, ends 8;
    # Mf starts max(7, 8) = 8, ends 13; Cf 13..15; Ab starts max(8, 13) = 13, ends 19
    assert fw.ep_overlap_layer_s(t) == 19
    assert sum(t.values()) == 27
    # a long dispatch: everything after it waits (Af, Df, then Mf and Ab; Db hides under Mf)
    slow = dict(t, Df=30)
    assert fw.ep_overlap_layer_s(slow) == 4 + 30 + 5 + 6


def test_savings_per_microbatch_from_the_graphs_names():
    ops = [scheduled("l0.attn_norm", 1), scheduled("l0.attn", 3), scheduled("l0.dispatch", 3),
           scheduled("l0.experts", 5), scheduled("l0.combine", 2),
           scheduled("l0.combine_bwd", 2), scheduled("l0.experts_dgrad", 2),
           scheduled("l0.experts_wgrad", 2), scheduled("l0.dispatch_bwd", 1),
           scheduled("l0.attn_bwd", 6),
           scheduled("l1.attn", 3), scheduled("l1.attn_bwd", 3)]  # a dense layer: no savings
    backward_at = 5
    assert fw.ep_overlap_savings_s(ops[:10] + ops[10:11], backward_at, 1.0) == \
        pytest.approx(27 - 19)
    assert fw.ep_overlap_savings_s(ops, backward_at, 0.5) == pytest.approx((27 - 19) / 2)
    assert fw.ep_overlap_savings_s(ops, backward_at, 0.0) == 0.0


def test_paired_share_leaves_out_the_warmup():
    assert fw.ep_overlap_paired_share(8, 1, 1) == 7 / 8          # all but the first forward
    assert fw.ep_overlap_paired_share(128, 8, 2) == (256 - 9) / 256
    assert fw.ep_overlap_paired_share(1, 1, 1) == 0.0


def test_auto_dispatcher_is_deepep_for_a_group_limited_gate_across_nodes():
    dsv3, qwen = pm.load_model("deepseek-v3"), pm.load_model("qwen3-235b-a22b")
    h100 = pm.hardware("H100-SXM")
    assert moe_dispatcher_of(dsv3, h100, 64) == "deepep"
    assert moe_dispatcher_of(dsv3, h100, 8) == "alltoall"     # one NVLink domain
    assert moe_dispatcher_of(qwen, h100, 32) == "alltoall"    # no group limit
    assert moe_dispatcher_of(qwen, h100, 32, "deepep") == "deepep"
    # inside GB200's 72-GPU NVLink domain the group spans no network
    assert moe_dispatcher_of(dsv3, pm.hardware("GB200"), 64) == "alltoall"


def test_deepep_in_the_training_graph_runs_both_ways():
    g = build_graph(pm.load_model("deepseek-v3"), "train", batch=2, seq=1024, tp=1, ep=32,
                    pp=16, dp=32, dtype="fp8", moe_exchange="deepep")
    kinds = {n.name.split(".", 1)[1]: n.op for n in g.nodes if n.name.startswith("l60.")}
    assert kinds["dispatch"].name == kinds["combine_bwd"].name == "deepep"
    assert kinds["dispatch"].phase == kinds["combine_bwd"].phase == "dispatch"
    assert kinds["combine"].phase == kinds["dispatch_bwd"].phase == "combine"
    assert kinds["dispatch"].dtype == "bf16"  # Megatron sends BF16 hidden states


def test_deepep_and_overlap_speed_a_cross_node_step_up():
    kw = dict(batch=64, seq=4096, tp=1, pp=8, dp=32, dtype="fp8", ep=32, microbatches=64,
              virtual_stages=2, recompute="selective", pipeline_split="Et*4|(t*4|)*14tL",
              allow_oversubscribed=True)
    a2a = plan_training("deepseek-v3", "B200", moe_dispatcher="alltoall", **kw)
    deepep = plan_training("deepseek-v3", "B200", moe_dispatcher="deepep", **kw)
    both = plan_training("deepseek-v3", "B200", moe_dispatcher="deepep", ep_overlap=True, **kw)
    assert a2a.step_time_s > deepep.step_time_s > both.step_time_s
    assert both.breakdown["ep_overlap"] < 0
    assert "ep_overlap" not in deepep.breakdown


@pytest.mark.parametrize("kw, fragment", [
    (dict(ep=1, ep_overlap=True), "ep > 1"),
    (dict(ep=8, ep_overlap=True, recompute="full"), "no full recomputation"),
    (dict(ep=8, moe_dispatcher="hybridep"), "moe_dispatcher"),
    (dict(ep=8, ep_overlap="yes"), "ep_overlap")])
def test_refusals_name_the_rule(kw, fragment):
    with pytest.raises(pm.InputError, match=fragment):
        plan_training("qwen3-30b-a3b", "H100-SXM", batch=64, seq=4096, dp=8, dtype="bf16",
                      microbatches=64, allow_oversubscribed=True, **kw)


def test_bf16_layers_are_megatron_cores_first_last_layers():
    kw = dict(batch=32, seq=8192, tp=2, pp=4, dp=8, microbatches=32, virtual_stages=5,
              recompute="none", allow_oversubscribed=True)
    mx = plan_training("llama3-70b", "GB200", dtype="mxfp8", **kw)
    fp4 = plan_training("llama3-70b", "GB200", dtype="nvfp4", **kw)
    kept = plan_training("llama3-70b", "GB200", dtype="nvfp4", bf16_layers=(2, 11), **kw)
    # every layer in NVFP4 (Megatron-Core's default): faster than MXFP8; keeping the last 11
    # layers in BF16 puts them all on the last pipeline rank, which paces the step
    assert fp4.tokens_per_s > 1.1 * mx.tokens_per_s
    assert kept.tokens_per_s < mx.tokens_per_s
    g = build_graph(pm.load_model("llama3-8b"), "train", batch=1, seq=512, dtype="nvfp4",
                    bf16_layers=(1, 1))
    assert any(n.op.name == "gemm" and n.op.dtype == "bf16" and n.name.startswith("l31.")
               for n in g.nodes)
    assert all(n.op.dtype == "nvfp4" for n in g.nodes
               if n.op.name == "gemm" and n.name.startswith("l30.") and "lm_head" not in n.name)
    with pytest.raises(pm.InputError, match="bf16_layers"):
        build_graph(pm.load_model("llama3-8b"), "train", batch=1, seq=512, dtype="bf16",
                    bf16_layers=(1, 1))
    with pytest.raises(pm.InputError, match="bf16_layers"):
        build_graph(pm.load_model("llama3-8b"), "train", batch=1, seq=512, dtype="nvfp4",
                    bf16_layers=(30, 30))
