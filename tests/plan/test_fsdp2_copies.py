"""FSDP2's copies around its collectives (perfmodel.plan.frameworks fsdp2_copies_s, read in
torch 2.13.0's _fsdp_collectives.py): the bytes each copy moves, by hand, and where the planner
charges them (the pytorch framework under ZeRO-3 only)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

import perfmodel as pm
from perfmodel.ops import op as make_op
from perfmodel.plan import frameworks as fw
from perfmodel.plan.training import plan_training
from perfmodel.predict import predict_op


def _tail(params: float, gpus: int, reduce_bytes: int):
    """The per-step collectives of a stage holding `params` parameters, as the builder adds
    them: the BF16 all-gather and the reduce-scatter in the reduce dtype."""
    ag = make_op("allgather", bytes=2.0 * params, gpus=gpus)
    rs = make_op("reduce_scatter", bytes=float(reduce_bytes) * params, gpus=gpus)
    return [SimpleNamespace(name="grad_reduce_scatter", op=rs),
            SimpleNamespace(name="param_allgather", op=ag)]


def _stream_s(hw, elements: int, read: int, write: int) -> float:
    o = make_op("elementwise", elements=elements, dtype="fp8", inputs=read, outputs=write,
                flop_per_element=0.0)
    return predict_op(o, hw).time_s


def test_copies_of_one_layer_by_hand():
    # one layer of 2^28 parameters over 8 GPUs, gradients reduced in FP32: per microbatch two
    # gathers, each a copy-in over the 2^25-element shard (6 B read, 4 B written per element)
    # and a copy-out over the layer (2 B read, 2 B written), and one chunk-cat of the BF16
    # gradients into FP32 (2 B read, 4 B written)
    hw = pm.hardware("H100-SXM")
    p = 1 << 28
    expected = (2 * (_stream_s(hw, p // 8, 6, 4) + _stream_s(hw, p, 2, 2))
                + _stream_s(hw, p, 2, 4))
    assert fw.fsdp2_copies_s(_tail(p, 8, 4), 1, hw, "pipes") == pytest.approx(expected)
    # four layers of a quarter each: the same bytes in four times the kernels
    quarter = fw.fsdp2_copies_s(_tail(p, 8, 4), 4, hw, "pipes")
    assert quarter >= expected and quarter == pytest.approx(expected, rel=0.05)


def test_copies_are_memory_bound_and_grow_with_the_reduce_dtype():
    hw = pm.hardware("H100-SXM")
    p = 1 << 28
    fp32 = fw.fsdp2_copies_s(_tail(p, 8, 4), 1, hw, "pipes")
    bf16 = fw.fsdp2_copies_s(_tail(p, 8, 2), 1, hw, "pipes")
    assert fp32 > bf16
    # 2 x (10/8 + 4) + 6 = 16.5 bytes per parameter: at least their time at the HBM's
    # achievable rate, and not far above it
    rate = hw.hbm_peak_bandwidth_bytes_per_s * hw.hbm_achievable_fraction
    assert p * 16.5 / rate <= fp32 <= 1.2 * p * 16.5 / rate


def test_no_collectives_no_copies():
    hw = pm.hardware("H100-SXM")
    assert fw.fsdp2_copies_s([], 32, hw, "pipes") == 0.0


def test_the_planner_charges_them_to_fsdp2_only():
    kw = dict(batch=1, seq=8192, dp=8, zero=3, grad_reduce_dtype="fp32")
    torchtitan = plan_training("llama3-8b", "H100-SXM", framework="pytorch", **kw)
    composer = plan_training("llama3-8b", "H100-SXM", framework="composer", **kw)
    megatron = plan_training("llama3-8b", "H100-SXM", framework="megatron", **kw)
    copies = torchtitan.breakdown["fsdp2_copies"]
    assert copies > 0 and "fsdp2_copies" not in composer.breakdown
    assert "fsdp2_copies" not in megatron.breakdown
    # ZeRO-1 keeps the parameters whole: nothing to copy out
    zero1 = plan_training("llama3-8b", "H100-SXM", framework="pytorch",
                          **{**kw, "zero": 1})
    assert "fsdp2_copies" not in zero1.breakdown
    # about 16.5 bytes per parameter per microbatch at the HBM's rate: tens of milliseconds
    # for Llama 3 8B on an H100
    assert 0.02 < copies < 0.08
