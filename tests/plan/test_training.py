"""Training plans: MFU, time to train, data-parallel scaling, memory refusal, recomputation,
ZeRO stages."""
from __future__ import annotations

import pytest

from perfmodel.errors import InputError
from perfmodel.plan.training import plan_training


def test_training_plan_mfu_and_time_to_train():
    # gradient accumulation over 8 microbatches of one sequence: fits an 80 GB H100
    tr = plan_training("llama3-8b", "H100-SXM", batch=8, seq=4096, tp=1, dp=8, microbatches=8)
    assert tr.memory.fits
    assert 0.2 < tr.mfu < 0.85 and tr.gpus == 8
    assert tr.time_to_train_s(1e9) == pytest.approx(1e9 / tr.tokens_per_s)
    assert set(tr.to_dict()) >= {"step_time_s", "tokens_per_s", "mfu", "memory", "gpus"}


def test_more_data_parallel_gpus_raise_throughput():
    a = plan_training("llama3-8b", "H100-SXM", batch=4, seq=4096, dp=8, microbatches=4)
    b = plan_training("llama3-8b", "H100-SXM", batch=4, seq=4096, dp=16, microbatches=4)
    assert b.tokens_per_s > 1.8 * a.tokens_per_s


def test_a_plan_that_does_not_fit_is_refused_unless_allowed():
    with pytest.raises(InputError, match=r"llama3-70b train on H100-SXM .*needs 95\.2 GB per "
                                         r"GPU .*has 85\.9 GB usable.*allow_oversubscribed"):
        plan_training("llama3-70b", "H100-SXM", batch=8, seq=4096, tp=8, pp=2, microbatches=4)
    tr = plan_training("llama3-70b", "H100-SXM", batch=8, seq=4096, tp=8, pp=2, microbatches=4,
                       allow_oversubscribed=True)
    assert not tr.memory.fits and 0 < tr.mfu < 1


def test_full_recompute_lowers_activation_memory_and_raises_step_time():
    kw = dict(batch=2, seq=4096, tp=2, dp=4)
    base = plan_training("llama3-8b", "H100-SXM", **kw)
    full = plan_training("llama3-8b", "H100-SXM", recompute="full", **kw)
    assert full.memory.activation_bytes < base.memory.activation_bytes / 10
    # one more forward per layer: a forward is about a third of forward + backward
    assert 1.15 < full.step_time_s / base.step_time_s < 1.45
    none = plan_training("llama3-8b", "H100-SXM", recompute="none", **kw)
    assert none.step_time_s == base.step_time_s and none.memory == base.memory
    # what lets a configuration fit
    with pytest.raises(InputError):
        plan_training("llama3-8b", "H100-SXM", batch=8, seq=4096, tp=2, dp=4)
    assert plan_training("llama3-8b", "H100-SXM", batch=8, seq=4096, tp=2, dp=4,
                         recompute="full").memory.fits


def test_zero_3_lowers_weight_memory_and_adds_parameter_gathers():
    kw = dict(batch=2, seq=4096, tp=2, dp=4)
    z1 = plan_training("llama3-8b", "H100-SXM", **kw)
    assert plan_training("llama3-8b", "H100-SXM", zero=1, **kw) == z1  # the default
    z2 = plan_training("llama3-8b", "H100-SXM", zero=2, **kw)
    z3 = plan_training("llama3-8b", "H100-SXM", zero=3, **kw)
    assert z3.memory.weights_bytes < z2.memory.weights_bytes < z1.memory.weights_bytes
    assert z2.step_time_s == z1.step_time_s < z3.step_time_s
    with pytest.raises(InputError, match="zero"):
        plan_training("llama3-8b", "H100-SXM", zero=5, **kw)


def test_microbatches_without_pipeline_accumulate_gradients():
    """Gradient accumulation: the step runs every microbatch, so throughput stays put while
    activation memory falls."""
    kw = dict(batch=2, seq=4096, tp=2, dp=4)
    one = plan_training("llama3-8b", "H100-SXM", **kw)
    two = plan_training("llama3-8b", "H100-SXM", microbatches=2, **kw)
    assert two.tokens_per_s == pytest.approx(one.tokens_per_s, rel=0.05)
    assert two.memory.activation_bytes == one.memory.activation_bytes / 2


def test_the_frameworks_attention_kernel_prices_the_attention_passes():
    """plan_training(attention_kernel=...) runs the attention forward and backward in that
    family: FlashAttention-2 (flash-attn, PyTorch SDPA) is slower on H100 than FA3's design, the
    other ops unchanged; TensorRT-LLM's forward-only kernels are refused."""
    from perfmodel.validation.training_predict import FRAMEWORK_ATTENTION
    kw = dict(batch=8, seq=8192, dp=8, microbatches=8, recompute="full")
    fa3 = plan_training("llama3-8b", "H100-SXM", **kw)
    fa2 = plan_training("llama3-8b", "H100-SXM", attention_kernel="fa2", **kw)
    assert fa2.step_time_s > 1.05 * fa3.step_time_s
    assert fa2.mfu < fa3.mfu
    with pytest.raises(InputError, match="attention_kernel"):
        plan_training("llama3-8b", "H100-SXM", attention_kernel="trtllm", **kw)
    assert FRAMEWORK_ATTENTION["torchtitan"] == "fa2" and FRAMEWORK_ATTENTION["NeMo"] == "cudnn"
