"""Megatron-Core's padded token dropping (plan_training `moe_capacity_factor`): every expert
computes the capacity's rows per rank, the all-to-all carries the padding, and the dispatcher
never makes the host wait; hand-worked against the builder, the host schedule and the
Megatron-Bridge token-drop rows."""
from __future__ import annotations

import math

import pytest

from perfmodel.errors import InputError
from perfmodel.plan.moe_host import moe_host_extra_s
from perfmodel.plan.training import plan_training
from perfmodel.validation import training_predict
from perfmodel.workloads.builder import build_graph
from perfmodel.workloads.models import load_model

from tests.plan.test_moe_training_host import moe_layer


def _expert_rows(graph):
    experts = next(n for n in graph.nodes if n.name.endswith(".experts"))
    dispatch = next(n for n in graph.nodes if n.name.endswith(".dispatch"))
    return experts.op.params["tokens"], dispatch.op.params["bytes"]


def test_the_capacity_pads_every_experts_rows_and_the_all_to_all():
    qwen = load_model("qwen3-30b-a3b")    # 128 experts, top 8
    kw = dict(batch=4, seq=4096, ep=8, dp=8, microbatches=2)
    rows, sent = _expert_rows(build_graph(qwen, "train", **kw))
    # 2 sequences of 4096 tokens a microbatch: 8192 · 8 / 128 = 512 rows an expert, an even
    # capacity at factor 1.0: nothing padded
    assert _expert_rows(build_graph(qwen, "train", moe_capacity_factor=1.0, **kw)) == \
        (rows, sent)
    # factor 1.3: ceil(665.6) = 666 rows an expert from each rank, 666/512 of the balanced rows
    capacity = math.ceil(8192 * 8 / 128 * 1.3)
    assert capacity == 666
    padded_rows, padded_sent = _expert_rows(build_graph(qwen, "train", moe_capacity_factor=1.3,
                                                        **kw))
    assert padded_rows == pytest.approx(rows * capacity / 512)
    assert padded_sent == pytest.approx(sent * capacity / 512)


@pytest.mark.parametrize("model, phase, factor, message", [
    ("llama3-8b", "train", 1.0, "applies to MoE models"),
    ("qwen3-30b-a3b", "prefill", 1.0, "applies to training steps"),
    ("qwen3-30b-a3b", "train", 0.0, "expected a number in (0, 64]"),
    ("qwen3-30b-a3b", "train", float("nan"), "expected a number in (0, 64]"),
])
def test_a_capacity_that_does_not_apply_is_refused(model, phase, factor, message):
    with pytest.raises(InputError, match="moe_capacity_factor: .*" + message.replace("(", r"\(")
                       .replace(")", r"\)").replace("[", r"\[").replace("]", r"\]")):
        build_graph(load_model(model), phase, batch=2, seq=1024, moe_capacity_factor=factor)


def test_the_flex_dispatcher_does_not_pad():
    with pytest.raises(InputError, match="moe_capacity_factor: .*flex dispatcher"):
        plan_training("qwen3-30b-a3b", "H100", batch=8, seq=4096, ep=8, dp=8, dtype="fp8",
                      moe_dispatcher="deepep", moe_capacity_factor=1.0)
    with pytest.raises(InputError, match="moe_capacity_factor: expected an expert capacity"):
        plan_training("qwen3-30b-a3b", "H100", batch=8, seq=4096, ep=8, dp=8,
                      moe_capacity_factor=-1)


def test_an_unsynced_host_paces_only_where_it_outruns_the_gpu():
    # moe_layer(1): attn 2, dispatch 1, experts 4 (8 operations, BF16), combine 1; launch 1 s.
    # No wait: attn ends 1 + 2 = 3, dispatch 4, the experts' operations issued until
    # 2 + 8 = 10 and their last eighth after: 10.5, combine 11 + 1 = 12; 8 s of GPU: 4 s of
    # host (6 with the wait before the dispatch)
    assert moe_host_extra_s(moe_layer(1.0), "bf16", 1, 1.0, synced=False) == pytest.approx(4.0)
    assert moe_host_extra_s(moe_layer(1.0), "bf16", 1, 1.0) == pytest.approx(6.0)
    # moe_layer(4): the GPU's 32 s outlast the host's 11; only the first launch shows
    assert moe_host_extra_s(moe_layer(4.0), "bf16", 1, 1.0, synced=False) == pytest.approx(1.0)


def test_the_padded_step_drops_the_hosts_wait():
    kw = dict(batch=8, seq=4096, ep=8, dp=8, dtype="fp8", moe_dispatcher="alltoall",
              microbatches=8)
    dropless = plan_training("qwen3-30b-a3b", "H100", **kw)
    padded = plan_training("qwen3-30b-a3b", "H100", moe_capacity_factor=1.0, **kw)
    assert padded.breakdown["moe_host_sync"] < dropless.breakdown["moe_host_sync"]
    assert padded.step_time_s < dropless.step_time_s


def test_the_bridge_token_drop_rows_replay_with_the_padded_capacity():
    cases, skipped = training_predict.load_bridge_cases()
    assert not any("token dropping" in s.reason for s in skipped)
    drop = [c for c in cases if "tokendrop" in c.raw.get("model", "").lower()]
    assert drop and all(c.moe_capacity_factor == 1.0 for c in drop)
    assert all(c.moe_capacity_factor is None for c in cases if c not in drop)
    plan = training_predict.plan_case(drop[0])
    assert not isinstance(plan, str), plan
