"""Training mechanisms read from the frameworks' sources: the activations Megatron-Core / TE
keep (tensor by tensor, FP8 GEMM inputs saved quantized), the MoE dispatch of a sequence-
parallel TP rank, FP32 gradient reduction under PyTorch FSDP, FSDP's prefetch exposure and the
replay of a row whose recomputation is not stated."""
from __future__ import annotations

import dataclasses

from collections import Counter

import pytest

import perfmodel as pm
from perfmodel.errors import InputError
from perfmodel.plan.memory import activation_bytes_per_token, memory_fit
from perfmodel.plan.training import plan_training, prefetched_exposed_s
from perfmodel.validation.training import load_training_cases
from perfmodel.validation.training_predict import (NOT_FIT, plan_case, refusal_reason,
                                                   replayed_recompute)
from perfmodel.workloads.builder import Workload, build_graph


def test_dense_llama_layer_keeps_korthikanti_34_less_the_dropout_masks():
    """llama3-70b (GQA 64/8, SwiGLU 28672) in BF16: norm inputs 4h, norm outputs 4h, Q K V
    2.5h, O 2h, gate and up 14h, down's input 7h = 33.5 bytes per token and hidden."""
    m = pm.load_model("llama3-70b")
    assert activation_bytes_per_token(m, 0) == pytest.approx(33.5 * m.hidden)
    # sequence parallelism splits every tensor over the TP ranks
    assert activation_bytes_per_token(m, 0, tp=8) == pytest.approx(33.5 * m.hidden / 8)


def test_fp8_saves_gemm_inputs_in_one_byte():
    """TE keeps the FP8 column-wise copy of each Linear's input (linear.py 693-717): the two
    norm outputs and down's input drop to 1 byte; the o_proj gets an FP8 copy beside
    FlashAttention's BF16 output."""
    m = pm.load_model("llama3-70b")
    bf16, fp8 = activation_bytes_per_token(m, 0), activation_bytes_per_token(m, 0, dtype="fp8")
    assert bf16 - fp8 == pytest.approx(2 * m.hidden + m.ffn_hidden - m.heads * m.head_dim)


def test_moe_layer_keeps_top_k_routed_rows():
    m = pm.load_model("mixtral-8x7b")
    more = dataclasses.replace(m, top_k=2 * m.top_k)
    one, two = (activation_bytes_per_token(x, m.layers - 1, ep=8) for x in (m, more))
    row = 2 * (2 * m.hidden + 3 * m.expert_hidden)  # input, gate+up, activation, output (BF16)
    assert two - one == pytest.approx(m.top_k * row)


def test_fp8_fsdp_llama3_70b_on_gb200_fits_as_it_ran():
    """NEMOFW-2504-GB200-03 (NeMo 25.04: llama3-70b FP8, FSDP over 64 GB200, micro-batch 1,
    seq 8192, GA 2) ran; with BF16 activations it would not fit."""
    m, h = pm.load_model("llama3-70b"), pm.hardware("GB200")
    w = Workload("train", batch=2, seq=8192, dp=64, dtype="fp8", microbatches=2)
    assert memory_fit(m, h, w, zero=3).fits
    assert not memory_fit(m, h, dataclasses.replace(w, dtype="bf16"), zero=3).fits


def _ops(g, kind):
    return [n.op for n in g.nodes if n.op.name == kind]


def test_moe_dispatch_of_a_sequence_parallel_tp_rank_is_its_share():
    """Megatron-Core runs MoE with sequence parallelism under TP (moe_layer.py:379): a TP rank
    dispatches t/tp tokens, so every all-to-all of the step halves from TP1 to TP2."""
    m = pm.load_model("mixtral-8x7b")
    kw = dict(batch=1, seq=1024, ep=2, dp=2)
    one = _ops(build_graph(m, "train", tp=1, **kw), "alltoall")
    two = _ops(build_graph(m, "train", tp=2, **kw), "alltoall")
    assert len(one) == len(two) > 0
    assert all(b.bytes == pytest.approx(a.bytes / 2) for a, b in zip(one, two))
    # serving (data-parallel attention, ep > tp) dispatches all of its tokens
    serve = _ops(build_graph(m, "prefill", batch=1, seq=1024, tp=2, ep=4), "alltoall")
    assert serve[0].bytes == pytest.approx(one[0].bytes)


def test_serving_expert_parallelism_inside_the_tp_group_is_an_all_reduce():
    """Serving without sequence parallelism: with ep <= tp every TP rank holds every token after
    the attention all-reduce, so the experts' outputs are summed by one all-reduce (TensorRT-LLM
    without attention DP, vLLM's FusedMoE EP without DP); training with ep = tp dispatches its
    sequence-parallel share with an all-to-all; serving with ep > tp dispatches."""
    m = pm.load_model("qwen3-30b-a3b")
    moe_layer = f"l{m.layers - 1}."

    def kinds(phase, **kw):
        shape = dict(batch=8, context=1024) if phase == "decode" else dict(batch=1, seq=1024)
        g = build_graph(m, phase, dtype="fp8", **shape, **kw)
        return {n.name for n in g.nodes}, Counter(n.op.name for n in g.nodes)

    names, count = kinds("decode", tp=4, ep=4)
    assert "alltoall" not in count and f"{moe_layer}ffn_allreduce" in names
    names, count = kinds("decode", tp=2, ep=4)
    assert count["alltoall"] == 2 * m.layers and f"{moe_layer}ffn_allreduce" not in names
    names, count = kinds("train", tp=4, ep=4, dp=4)
    assert count["alltoall"] == 4 * m.layers


def test_fp32_gradient_reduction_doubles_the_reduce_scatter_only():
    m = pm.load_model("llama3-8b")
    kw = dict(batch=1, seq=1024, dp=8)
    bf, f32 = (build_graph(m, "train", grad_reduce_dtype=d, **kw) for d in ("bf16", "fp32"))
    rs = [g.node("grad_reduce_scatter").op.bytes for g in (bf, f32)]
    ag = [g.node("param_allgather").op.bytes for g in (bf, f32)]
    assert rs[1] == pytest.approx(2 * rs[0]) and ag[0] == ag[1]
    with pytest.raises(InputError, match="grad_reduce_dtype"):
        build_graph(m, "train", grad_reduce_dtype="fp16", **kw)
    slow = plan_training(m, "H100-SXM", 1, 8192, dp=8, zero=3, grad_reduce_dtype="fp32")
    fast = plan_training(m, "H100-SXM", 1, 8192, dp=8, zero=3)
    assert slow.dp_exposed_s >= fast.dp_exposed_s


def test_prefetch_exposes_only_the_communication_beyond_each_layers_compute():
    # shorter than the layer's compute: only the first layer's gather is exposed
    assert prefetched_exposed_s(1e-3, 5e-3, 32) == pytest.approx(1e-3)
    # longer: each later layer serializes on its collective
    assert prefetched_exposed_s(5e-3, 2e-3, 32) == pytest.approx(5e-3 + 31 * 3e-3)


def _case(case_id):
    cases, _ = load_training_cases()
    return next(c for c in cases if c.id == case_id)


def test_unstated_recompute_replays_the_least_that_fits():
    """AM-10 (AutoModel, llama3-70b BF16, CP2 FSDP on 64 H100) ran without stating its
    recomputation; without any, its activations do not fit in 80 GB, so it is replayed with
    full recomputation."""
    c = _case("AM-10-step")
    assert c.recompute is None and replayed_recompute(c) == ("none", "full")
    plan = plan_case(c)
    assert not isinstance(plan, str) and plan.recompute == "full" and plan.memory.fits


def test_stated_recompute_is_kept():
    c = _case("AO-F8-H100-1-tps")
    assert replayed_recompute(c) == ("op",)
    assert refusal_reason("needs 90.0 GB per GPU (...), has 80.0 GB usable") == NOT_FIT


def test_nemo_deepseek_v3_rows_recompute_as_the_recipe_does():
    """dgxc-benchmarking's DeepSeek-V3 rows do not state their recomputation; NeMo's recipe
    recomputes every layer (RECIPE_RECOMPUTE), so GB200's, which would fit without, replays
    with full recomputation too."""
    c = _case("DGXC-2505-DSV3-GB200-128-tput")
    assert c.recompute is None and replayed_recompute(c) == ("full",)
    assert plan_case(c).recompute == "full"
    assert plan_case(dataclasses.replace(c, recompute="none")).recompute == "none"
