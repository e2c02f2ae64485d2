"""Composer's FSDP as llm-foundry runs it (perfmodel.plan.frameworks "composer"): the ranks'
parameters of FSDP's flat parameter by hand, the two train-metric cross-entropy passes per
microbatch, DecoupledAdamW's per-parameter host sync, and the replay's settings for the LF rows
(perfmodel.validation.training_predict)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from perfmodel.errors import InputError
from perfmodel.hardware import hardware
from perfmodel.ops import op as make_op
from perfmodel.plan import frameworks as fw
from perfmodel.plan.training import plan_training
from perfmodel.predict import predict_op
from perfmodel.validation import training_predict as tp
from perfmodel.workloads.models import load_model


def test_rank_params_counts_the_spans_each_flat_shard_touches():
    # 16 elements over 2 ranks, chunks [0, 8) and [8, 16): rank 0 holds parts of the first two
    assert fw.fsdp_rank_params([4, 4, 8], 2) == 2
    # padded to 3 x 6: [0, 6) touches 5 and 1 of the 3, [6, 12) the 3 and 6, [12, 18) the 6
    assert fw.fsdp_rank_params([5, 3, 6], 3) == 2
    # one rank holds every parameter; an empty one holds nothing
    assert fw.fsdp_rank_params([5, 0, 3, 6], 1) == 3
    # a parameter split over ranks counts on each of them
    assert fw.fsdp_rank_params([100], 8) == 1
    with pytest.raises(InputError, match="fsdp_rank_params"):
        fw.fsdp_rank_params([4], 0)


def test_mpt_block_layout_and_rank_params():
    d, f = 4, 16
    sizes = fw.mpt_block_param_sizes(d, 3 * d, f)
    # 12 d^2 weights + 13 d of biases and LayerNorm weights (the NumParams count of the rows)
    assert sum(sizes) == 12 * d * d + 13 * d and len(sizes) == 12
    m = SimpleNamespace(hidden=d, heads=2, kv_heads=2, head_dim=2, ffn_hidden=f, vocab=10)
    # one rank steps every parameter: 12 per block and the root's 4
    assert fw.mpt_rank_params(m, 8, 3, 1) == 3 * 12 + 4
    # more ranks: fewer parameters each, never fewer than one per unit
    assert 3 + 1 <= fw.mpt_rank_params(m, 8, 3, 8) < 3 * 12 + 4


def test_adamw_host_and_kernels_add_up_by_parameter():
    h = hardware("H100-SXM")
    base = fw.per_param_adamw_s(10, 1_000_000, h, "pipes", 0.0)
    # the host's share: 10 operations per parameter in turn with the GPU, and the clipping's
    # 2 per parameter beside its kernels (here longer than them)
    host = 1e-3
    got = fw.per_param_adamw_s(10, 1_000_000, h, "pipes", host)
    clip_kernels = predict_op(make_op("elementwise", elements=1_000_000, dtype="fp32",
                                      inputs=2, outputs=1, flop_per_element=3.0),
                              h, "pipes").time_s
    assert got == pytest.approx(base - clip_kernels + 10 * 10 * host + 10 * 2 * host)
    # its kernels stream 21 FP32 tensors where the graph's fused Adam streams 7
    fused = predict_op(make_op("elementwise", elements=1_000_000, dtype="fp32", inputs=4,
                               outputs=3, flop_per_element=12), h, "pipes").time_s
    assert base > 2.5 * fused
    assert fw.per_param_adamw_s(10, 0, h, "pipes", host) == 0.0


def test_train_metrics_are_two_eager_cross_entropy_forwards():
    h = hardware("A100-SXM")
    loss = SimpleNamespace(name="loss", op=SimpleNamespace(name="softmax", rows=4096,
                                                           cols=50368))
    one = predict_op(make_op("cross_entropy", rows=4096, vocab=50368, dtype="bf16",
                             direction="fwd", implementation="eager"), h, "pipes").time_s
    assert fw.train_metrics_s([loss], 2, h, "pipes") == pytest.approx(2 * one)
    assert fw.train_metrics_s([], 2, h, "pipes") == 0.0
    got = fw.microbatch_savings_s(fw.framework("composer"), [loss], 1, 108, "bf16", 1, 1,
                                  hw=h)
    assert got == pytest.approx({"train_metrics": -2 * one})
    # without a GPU to price them on, and for the other frameworks, nothing
    assert fw.microbatch_savings_s(fw.framework("composer"), [loss], 1, 108, "bf16", 1, 1) == {}
    assert fw.microbatch_savings_s(fw.framework("pytorch"), [loss], 1, 108, "bf16", 1, 1,
                                   hw=h) == {}


def test_composer_step_is_pytorchs_plus_its_metrics_and_optimizer():
    kw = dict(batch=8, seq=2048, dp=8, zero=3, microbatches=2, grad_reduce_dtype="fp32",
              attention_kernel="fa2")
    torch = plan_training("mpt-125m", "A100-SXM", framework="pytorch", **kw)
    comp = plan_training("mpt-125m", "A100-SXM", framework="composer", **kw)
    # the breakdown holds a framework's cost as a positive term (a negative saving)
    metrics = comp.breakdown["train_metrics"]
    assert metrics > 0 and "train_metrics" not in torch.breakdown
    # FSDP2's copies are the pytorch framework's, not Composer's FSDP (FlatParameter) one's
    copies = torch.breakdown["fsdp2_copies"]
    assert copies > 0 and "fsdp2_copies" not in comp.breakdown
    assert comp.pipeline_s == pytest.approx(torch.pipeline_s - copies + metrics, rel=1e-9)
    assert comp.optimizer_s > torch.optimizer_s
    assert comp.step_time_s == pytest.approx(
        torch.step_time_s - copies + metrics + comp.optimizer_s - torch.optimizer_s, rel=1e-9)


def test_llm_foundry_rows_replay_on_composer_with_their_reduce_dtype():
    def case(note):
        return SimpleNamespace(source="LF", framework="llm-foundry", precision_note=note)
    assert tp.framework_of(case("BF16 (torch AMP); MP mode DEFAULT")) == "composer"
    assert tp.grad_reduce_dtype_of(case("BF16 (torch AMP); MP mode DEFAULT")) == "fp32"
    assert tp.grad_reduce_dtype_of(case("BF16; MP mode PURE")) == "bf16"
    other = SimpleNamespace(source="AO", framework="torchtitan", precision_note="")
    assert tp.framework_of(other) == "pytorch" and tp.grad_reduce_dtype_of(other) == "fp32"
    assert load_model("mpt-125m").vocab == 50368
