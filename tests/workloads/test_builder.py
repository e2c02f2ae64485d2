"""Graph builder: FLOP cross-checks, the ops of a layer, parallelism ops, the dtype policy."""
from __future__ import annotations

from collections import Counter

import pytest

import perfmodel as pm
from perfmodel.errors import InputError
from perfmodel.workloads.builder import Workload, build_graph, layer_nodes


def _gemm_flop(graph) -> float:
    return sum(n.op.flop for n in graph.nodes if n.op.name == "gemm") + sum(
        pm.predict_op(n.op, "H100-SXM").flop for n in graph.nodes if n.op.name == "moe")


def _linear_params(m) -> float:
    """Parameters that multiply every token: all but the embedding table and the LM head."""
    return m.params(active=True) - m.vocab * m.hidden * (1 if m.tie_embeddings else 2)


@pytest.mark.parametrize("name", ["llama3-8b", "llama3-70b", "qwen3-30b-a3b", "deepseek-v3"])
@pytest.mark.parametrize("tp", [1, 8])
def test_prefill_flop_is_2_params_tokens(name, tp):
    """GEMM FLOP = 2·(linear params)·tokens + LM head on the last token of each sequence,
    within 2 % (router and MLA absorbed forms differ slightly)."""
    m = pm.load_model(name)
    if m.is_moe and tp > 1 and m.expert_hidden % tp:
        pytest.skip("expert_hidden not divisible")
    b, s = 2, 1024
    g = pm.build_graph(m, "prefill", batch=b, seq=s, tp=tp)
    # with fewer KV heads than TP ranks each rank keeps a replica of one KV head
    kv_replicas = 0 if m.is_mla else tp * max(1, m.kv_heads // tp) - m.kv_heads
    extra = kv_replicas * 2 * m.head_dim * m.hidden * m.layers
    # MLA's low-rank down-projections and the router are replicated on every TP rank (vLLM
    # ReplicatedLinear)
    if m.is_mla:
        extra += (tp - 1) * m.hidden * (m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim) \
            * m.layers
    extra += (tp - 1) * m.hidden * m.experts * (m.layers - m.dense_layers) if m.is_moe else 0
    expected = 2 * (_linear_params(m) + extra) * b * s + 2 * m.hidden * m.vocab * b
    assert _gemm_flop(g) * tp == pytest.approx(expected, rel=0.02)


@pytest.mark.parametrize("name", ["llama3-8b", "llama3-70b", "qwen3-30b-a3b"])
def test_training_flop_is_6_params_tokens(name):
    m = pm.load_model(name)
    b, s = 1, 2048
    g = pm.build_graph(m, "train", batch=b, seq=s)
    expected = 6 * (_linear_params(m) + m.hidden * m.vocab) * b * s  # LM head on every token
    assert _gemm_flop(g) == pytest.approx(expected, rel=0.02)


def test_layer_ops_are_all_present():
    g = pm.build_graph(pm.load_model("llama3-8b"), "prefill", batch=1, seq=512, tp=2)
    roles = Counter(n.name.split(".", 1)[1] if n.name.startswith("l") and "." in n.name
                    else n.name for n in g.nodes)
    for role in ("attn_norm", "qkv", "rope", "attn", "o_proj", "attn_allreduce", "attn_residual",
                 "ffn_norm", "gate_up", "act", "down", "ffn_allreduce", "ffn_residual"):
        assert roles[role] == 32, role
    for single in ("embed", "final_norm", "lm_head"):
        assert roles[single] == 1


def test_expert_and_data_parallel_ops():
    g = pm.build_graph(pm.load_model("deepseek-v3"), "train", batch=8, seq=1024, ep=8, dp=4)
    kinds = Counter(n.op.name for n in g.nodes)
    assert kinds["alltoall"] == 4 * (61 - 3)  # dispatch + combine, forward and backward
    assert kinds["reduce_scatter"] == 1 and kinds["allgather"] == 1
    assert kinds["moe"] == 3 * 58 and kinds["attention"] == 2 * 61


def test_mla_decode_uses_the_latent_cache():
    g = pm.build_graph(pm.load_model("deepseek-v3"), "decode", batch=32, context=4096)
    attn = next(n.op for n in g.nodes if n.op.name == "attention")
    assert attn.head_dim == 576 and attn.head_dim_v == 512 and attn.kv_heads == 1
    assert attn.shared_kv


@pytest.mark.parametrize("kw, message", [
    (dict(tp=3), "tp: 3 must divide the 64 attention heads"),
    (dict(ep=2), "has no experts"),
    (dict(phase="serve"), "phase: expected one of"),
    (dict(dtype="int3"), "dtype: expected one of"),
    (dict(batch=0), "batch: expected a positive integer"),
])
def test_bad_workloads_are_input_errors(kw, message):
    args = {"phase": "decode", "batch": 4, **kw}
    with pytest.raises(pm.InputError, match=message):
        pm.build_graph(pm.load_model("llama3-70b"), **args)


def test_fp8_policy_speeds_up_prefill_on_h100():
    m = pm.load_model("llama3-70b")
    bf16 = pm.predict(pm.build_graph(m, "prefill", batch=4, seq=4096, tp=8), "H100-SXM")
    fp8 = pm.predict(pm.build_graph(m, "prefill", batch=4, seq=4096, tp=8, dtype="fp8"),
                     "H100-SXM")
    assert 1.2 < bf16.total_time_s / fp8.total_time_s < 2.0


def test_layer_nodes_are_the_builders_layer():
    m = pm.load_model("llama3-8b")
    w = Workload("train", 2, 1024, tp=2, dtype="fp8")
    nodes = layer_nodes(m, w, "l31.", layer=31, backward=True)
    full = build_graph(m, "train", batch=2, seq=1024, tp=2, dtype="fp8")
    want = [n for n in full.nodes if n.name.startswith("l31.")]
    assert [n.name for n in nodes] == [n.name for n in want]
    assert [n.op.to_dict() for n in nodes] == [n.op.to_dict() for n in want]
    assert nodes[0].after == () and all(n.after == (p.name,) for p, n in zip(nodes, nodes[1:]))
    with pytest.raises(InputError, match="tp: 3"):
        layer_nodes(m, Workload("train", 2, 1024, tp=3))


def test_kv_dtype_none_is_the_graph_before_it_and_fp8_reaches_the_attention_ops():
    m = pm.load_model("llama3-70b")
    base = build_graph(m, "decode", batch=16, context=4096, tp=8)
    none = build_graph(m, "decode", batch=16, context=4096, tp=8, kv_dtype=None)
    assert [(n.name, n.op.to_dict()) for n in none.nodes] == \
        [(n.name, n.op.to_dict()) for n in base.nodes]
    assert none.meta == base.meta and "kv_dtype" not in base.meta
    attn = [n.op for n in base.nodes if n.op.name == "attention"]
    assert attn and all(a.kv_dtype is None and "kv_dtype" not in a.to_dict() for a in attn)
    fp8 = build_graph(m, "decode", batch=16, context=4096, tp=8, kv_dtype="fp8")
    assert fp8.meta["kv_dtype"] == "fp8"
    assert {n.op.kv_dtype for n in fp8.nodes if n.op.name == "attention"} == {"fp8"}
    # only the attention ops change
    assert [n.op for n in fp8.nodes if n.op.name != "attention"] == \
        [n.op for n in base.nodes if n.op.name != "attention"]
    with pytest.raises(pm.InputError, match="kv_dtype: expected one of"):
        build_graph(m, "decode", batch=16, kv_dtype="int8")
    with pytest.raises(pm.InputError, match="kv_dtype: training keeps K and V"):
        build_graph(m, "train", batch=1, kv_dtype="fp8")


def test_full_recompute_runs_every_layers_forward_again():
    m = pm.load_model("llama3-8b")
    base = build_graph(m, "train", batch=1, seq=2048)
    full = build_graph(m, "train", batch=1, seq=2048, recompute="full")
    names = [n.name for n in base.nodes]
    forward = base.nodes[:names.index("final_norm")]
    again = [n for n in full.nodes if ".recompute." in n.name]
    assert [n.op for n in again] == [n.op for n in reversed_layers(forward, m.layers)]
    # the forward GEMMs once more: 8·N·tokens of linear-layer FLOP instead of 6
    lin = _linear_params(m) * 2048
    assert _gemm_flop(full) - _gemm_flop(base) == pytest.approx(2 * lin, rel=1e-9)
    # each layer's recomputed forward comes right before its backward
    names = [n.name for n in full.nodes]
    assert names.index("l31.recompute.attn_norm") < names.index("l31.ffn_residual_bwd") < \
        names.index("l30.recompute.attn_norm")
    # selective (Megatron's checkpointed core attention): one attention forward more per layer
    sel = build_graph(m, "train", batch=1, seq=2048, recompute="selective")
    extra = [n for n in sel.nodes if ".recompute." in n.name]
    assert len(extra) == m.layers and all(n.op.name == "attention" for n in extra)
    assert [n for n in sel.nodes if ".recompute." not in n.name] != [] and \
        len(sel.nodes) == len(base.nodes) + m.layers


def reversed_layers(nodes, layers: int):
    """The per-layer nodes of a forward, layer by layer from the last."""
    return [n for i in reversed(range(layers)) for n in nodes if n.name.startswith(f"l{i}.")]


def test_microbatches_without_pipeline_repeat_the_microbatch():
    g = build_graph(pm.load_model("llama3-8b"), "train", batch=4, seq=1024, dp=2,
                    microbatches=4)
    assert g.pipeline is not None and g.pipeline.stages == 1 and g.pipeline.microbatches == 4
    assert g.nodes[g.pipeline.per_microbatch_ops].name == "grad_reduce_scatter"
    one = build_graph(pm.load_model("llama3-8b"), "train", batch=4, seq=1024).pipeline
    assert (one.stages, one.microbatches) == (1, 1)  # a training step always reports its
    # microbatch time (plan.training's overlap windows)


# ------------------------------------------------------------ the link each group spans --


def _links(graph, hw: str, op_name: str) -> set[str]:
    """Links the ops of a kind put bytes on, at the algorithm the engine picks."""
    out = set()
    for n in graph.nodes:
        if n.op.name == op_name:
            out |= {r for r in pm.predict_op(n.op, hw).resource_time_s if r.startswith("link:")}
    return out


def test_group_placements_follow_tp_ep_pp_dp_order():
    from perfmodel.workloads.builder import group_placements
    assert group_placements(8, 1, 16, 64) == {"pp": "16x8", "dp": "64x128",   # Llama 3 405B
                                              "edp": "64x128"}
    assert group_placements(1, 64, 16, 128) == {"pp": "16x64", "dp": "64x1,2x1024",  # DS-V3
                                                 "edp": "2x1024"}
    assert group_placements(2, 1, 1, 4) == {"pp": None, "dp": "4x2", "edp": "4x2"}


def test_experts_sync_their_gradients_over_the_expert_data_parallel_group():
    """With EP each GPU reduces only its own experts' gradients, over the GPUs holding the same
    experts (tp·dp / ep of them); the dense parameters over the dp replicas."""
    m = pm.load_model("deepseek-v3")
    g = build_graph(m, "train", batch=16, seq=1024, tp=1, ep=8, pp=4, dp=16)
    ops = {n.name: n.op for n in g.nodes}
    assert ops["grad_reduce_scatter"].gpus == 16 and ops["expert_grad_reduce_scatter"].gpus == 2
    stage = range(m.layers - -(-m.layers // 4), m.layers)
    experts = sum(m.experts for i in stage if m.is_moe_layer(i)) * (
        m.ffn_matrices * m.hidden * m.expert_hidden)
    assert ops["expert_grad_reduce_scatter"].bytes == pytest.approx(experts / 8 * 2)
    full = build_graph(m, "train", batch=16, seq=1024, tp=1, ep=128, pp=4, dp=128)
    assert "expert_grad_reduce_scatter" not in {n.name for n in full.nodes}  # one copy each


def test_the_builder_puts_ep_64_on_the_network_and_ep_8_on_nvlink():
    ds = pm.load_model("deepseek-v3")
    wide = build_graph(ds, "decode", batch=32, context=4096, ep=64, dtype="fp8")
    assert _links(wide, "H100-SXM", "alltoall") == {"link:nvlink", "link:network"}
    assert _links(wide, "GB200", "alltoall") == {"link:nvlink"}  # 64 GPUs of one NVL72 rack
    node = build_graph(ds, "decode", batch=32, context=4096, ep=8, dtype="fp8")
    assert _links(node, "H100-SXM", "alltoall") == {"link:nvlink"}


def test_pipeline_and_data_parallel_groups_cross_nodes_but_tp8_stays_in_one():
    g = build_graph(pm.load_model("llama3-405b"), "train", batch=16, seq=8192, tp=8, pp=16, dp=64)
    assert _links(g, "H100-SXM", "allreduce") == {"link:nvlink"}
    assert _links(g, "H100-SXM", "sendrecv") == {"link:network"}
    # one GPU of each data-parallel group per node: all of its bytes cross the network
    assert _links(g, "H100-SXM", "reduce_scatter") == {"link:network"}
    param_gather = next(n.op for n in g.nodes if n.name == "param_allgather")
    assert {r for r in pm.predict_op(param_gather, "H100-SXM").resource_time_s
            if r.startswith("link:")} == {"link:network"}
    small = build_graph(pm.load_model("llama3-8b"), "train", batch=8, seq=4096, tp=2, pp=2, dp=2)
    for kind in ("allreduce", "sendrecv", "reduce_scatter", "allgather"):
        assert _links(small, "H100-SXM", kind) == {"link:nvlink"}, kind  # 8 GPUs, one node
    rack = build_graph(pm.load_model("llama3-70b"), "train", batch=16, seq=4096, tp=8, pp=4,
                       dp=2)
    assert _links(rack, "GB200", "sendrecv") == {"link:nvlink"}  # 64 GPUs of one NVL72


def test_tp_beyond_the_nvlink_domain_is_priced_across_domains_not_refused():
    g = build_graph(pm.load_model("llama3-70b"), "decode", batch=64, context=8192, tp=16)
    assert _links(g, "H100-SXM", "allreduce") == {"link:nvlink", "link:network"}
    assert _links(g, "GB200", "allreduce") == {"link:nvlink"}
    ar16 = next(n.op for n in g.nodes if n.op.name == "allreduce")
    assert pm.predict_op(ar16, "H100-SXM").time_s > \
        pm.predict_op(ar16.with_params(gpus=8), "H100-SXM").time_s


def test_pipeline_hops_scatter_over_tp_ranks_and_gather_on_nvlink():
    """Megatron's scatter/gather (Narayanan et al., SC'21 §4.1): each TP rank sends 1/tp of the
    activations to its peer of the next stage, and the peers all-gather them over NVLink."""
    m = pm.load_model("llama3-70b")
    g = build_graph(m, "train", batch=4, seq=2048, tp=8, pp=4, microbatches=2)
    nodes = {n.name: n for n in g.nodes}
    send = nodes["send_grads"].op
    gather = nodes["send_grads.allgather"]
    assert gather.after == ("send_grads",)
    assert send.bytes * 8 == gather.op.bytes == g.meta["tokens_per_microbatch"] * m.hidden * 2
    assert gather.op.gpus == 8
    assert {r for r in pm.predict_op(gather.op, "H100-SXM").resource_time_s
            if r.startswith("link:")} == {"link:nvlink"}
    no_tp = build_graph(m, "train", batch=4, seq=2048, tp=1, pp=4, microbatches=2)
    assert not any(n.name.endswith(".allgather") for n in no_tp.nodes)


def test_hybrid_expert_and_tensor_parallel_moe_splits_each_expert():
    """1 < ep < tp (TensorRT-LLM's TP8/EP2): experts over ep GPUs, each split tp/ep ways; no
    all-to-all (every TP rank holds every token), the TP all-reduce sums the partial outputs;
    each GPU holds 1/tp of the routed weights, as with ep = 1 or ep = tp."""
    from perfmodel.plan.memory import weight_bytes_per_gpu
    m = pm.load_model("deepseek-v3")
    g = build_graph(m, "decode", batch=4, context=512, tp=8, ep=2)
    kinds = Counter(n.op.name for n in g.nodes)
    assert "alltoall" not in kinds
    experts = next(n.op for n in g.nodes if n.op.name == "moe")
    assert experts.expert_hidden == m.expert_hidden // 4 and experts.gpus == 2
    moe_layer = f"l{m.layers - 1}."  # the last layer is an MoE layer
    assert f"{moe_layer}ffn_allreduce" in {n.name for n in g.nodes}
    w = {ep: weight_bytes_per_gpu(m, "fp8", 8, ep, 1) for ep in (1, 2, 8)}
    assert w[2] == pytest.approx(w[1]) and w[2] == pytest.approx(w[8], rel=0.05)
    wide = build_graph(m, "decode", batch=4, context=512, tp=1, ep=8)
    assert Counter(n.op.name for n in wide.nodes)["alltoall"] > 0


@pytest.mark.parametrize("model, kw", [
    ("llama3-70b", dict(tp=4)), ("deepseek-v3", dict(ep=8, dtype="nvfp4")),
    ("qwen3-30b-a3b", dict(tp=2, ep=2, dtype="fp8", kv_dtype="fp8"))])
@pytest.mark.parametrize("phase, shape", [("prefill", dict(seq=300)),
                                          ("decode", dict(batch=32, context=1000))])
def test_inference_op_counts_are_the_graphs_ops_with_their_multiplicity(model, kw, phase,
                                                                          shape):
    """The serving simulator prices each layer kind once (inference_op_counts); the ops it sees,
    counted, must be exactly the graph's nodes' ops."""
    from collections import Counter
    from perfmodel.plan.memory import as_model
    from perfmodel.workloads.builder import inference_op_counts
    m = as_model(model)
    graph = build_graph(m, phase, **shape, **kw)
    counted = inference_op_counts(m, phase, **shape, **kw)
    seen: Counter = Counter()
    for _, o, k in counted:  # an op may head several entries (a norm in dense and MoE layers)
        seen[repr(o.to_dict())] += k
    assert seen == Counter(repr(n.op.to_dict()) for n in graph.nodes)
    assert len(counted) < len(graph.nodes) / 10  # each layer kind once, not every layer


def test_deepep_exchange_replaces_the_all_to_all_within_its_rank_templates():
    """moe_exchange="deepep" (TensorRT-LLM's wide-EP MoE) prices dispatch and combine with the
    deepep op at EP 2/4/8 (intranode) and 16-160 (internode, with the gate's group limit), the
    dispatch on the wire in the experts' type and the normal combine in BF16; another group
    size keeps the all-to-all; training runs it both ways in BF16 (Megatron-Core's flex
    dispatcher)."""
    m = pm.load_model("deepseek-v3")
    kw = dict(batch=256, context=2000, tp=1, ep=8, dtype="nvfp4")
    nccl = build_graph(m, "decode", **kw)
    deep = build_graph(m, "decode", moe_exchange="deepep", **kw)
    kinds = Counter(n.op.name for n in deep.nodes)
    assert kinds["deepep"] == 2 * (61 - 3) and "alltoall" not in kinds
    assert Counter(n.op.name for n in nccl.nodes)["alltoall"] == 2 * (61 - 3)
    d = next(n.op for n in deep.nodes if n.name.endswith("dispatch"))
    c = next(n.op for n in deep.nodes if n.name.endswith("combine"))
    assert (d.phase, d.dtype, d.tokens, d.ep, c.phase, c.dtype) == (
        "dispatch", "nvfp4", 256, 8, "combine", "bf16")
    # DeepEP's SM-limited copies cost more than NCCL's bandwidth-bound exchange here (the
    # AIConfigurator rows: TensorRT-LLM's DeepEP is slower than the plain all-to-all model)
    t = {name: sum(pm.predict_op(n.op, "B200").time_s for n in g.nodes
                   if n.name.endswith(("dispatch", "combine")))
         for name, g in (("nccl", nccl), ("deepep", deep))}
    assert t["deepep"] > t["nccl"]
    wide = build_graph(m, "decode", moe_exchange="deepep", **{**kw, "ep": 16})
    assert Counter(n.op.name for n in wide.nodes)["deepep"] == 2 * (61 - 3)
    w = next(n.op for n in wide.nodes if n.name.endswith("dispatch"))
    assert (w.ep, w.expert_groups, w.group_top_k) == (16, 8, 4)
    odd = build_graph(m, "decode", moe_exchange="deepep", **{**kw, "ep": 256})  # no config
    assert Counter(n.op.name for n in odd.nodes)["alltoall"] == 2 * (61 - 3)
    train = build_graph(m, "train", batch=8, seq=4096, ep=8, dp=8, moe_exchange="deepep")
    assert Counter(n.op.name for n in train.nodes)["deepep"] > 0
    assert all(n.op.dtype == "bf16" for n in train.nodes if n.op.name == "deepep")
    with pytest.raises(InputError, match="moe_exchange"):
        build_graph(m, "decode", moe_exchange="pplx", **kw)
