"""Memoized predictions (perfmodel.schedule.op_entry, perfmodel.predict): a hit is the prediction a
fresh computation gives; anything a prediction reads (parameters, the hardware object, the level,
the fitted constants an op declares) is part of the key; the batched API equals the single one."""
from __future__ import annotations

import math
import pickle
import random

import pytest

import perfmodel as pm
from perfmodel import schedule
from perfmodel.engine import estimate
from perfmodel.ops.attention import op as attention


def _fresh(op, hw, level="pipes"):
    """The engine's estimate without any cache of ours, on the GPU as the op's kernel sees it
    (Op.kernel_hardware: a GEMM whose rows TMA cannot address runs the legacy tensor path)."""
    hw = op.kernel_hardware(hw)
    return estimate(op.demand(hw), hw, level)


def _same(a, b):
    """Every field of two Estimates, floats compared exactly (band aside)."""
    return (a.time_s == b.time_s and a.bound == b.bound and a.flop == b.flop
            and a.hbm_bytes == b.hbm_bytes and a.roofline_time_s == b.roofline_time_s
            and dict(a.resource_time_s) == dict(b.resource_time_s) and a.level == b.level
            and repr(dict(a.details)) == repr(dict(b.details)))


@pytest.mark.parametrize("name", sorted(pm.ops.REGISTRY))
@pytest.mark.parametrize("level", pm.LEVELS)
def test_a_hit_returns_what_a_fresh_prediction_gives(name, level, h100):
    cls = pm.ops.REGISTRY[name]
    first = pm.predict_op(cls(**cls.EXAMPLE), h100, level)
    again = pm.predict_op(cls(**cls.EXAMPLE), h100, level)  # another object, equal parameters
    assert again is first
    assert _same(first, _fresh(cls(**cls.EXAMPLE), h100, level))


def test_equal_ops_share_a_key_and_changed_ones_do_not(h100):
    a = pm.ops.Gemm(m=4096, n=4096, k=4096, dtype="bf16")
    assert a.cache_key() == pm.ops.Gemm(m=4096, n=4096, k=4096, dtype="bf16").cache_key()
    changed = a.with_params(m=8192)
    assert changed.cache_key() != a.cache_key()
    assert pm.predict_op(changed, h100).time_s != pm.predict_op(a, h100).time_s
    assert _same(pm.predict_op(changed, h100), _fresh(changed, h100))
    # 1.0 and 1 and True are equal in Python, and -0.0 equals 0.0: not as parameters
    e = pm.ops.Elementwise(elements=1024, dtype="bf16", flop_per_element=0.0)
    assert e.cache_key() != e.with_params(flop_per_element=-0.0).cache_key()
    assert pm.ops.Elementwise(elements=1024, dtype="bf16", flop_per_element=1).cache_key() \
        == pm.ops.Elementwise(elements=1024, dtype="bf16", flop_per_element=1.0).cache_key()


def test_list_parameters_are_keyed_by_value(h100):
    a = pm.ops.GroupedGemm(group_m=[128, 256, 64], n=4096, k=2048, dtype="bf16")
    b = pm.ops.GroupedGemm(group_m=[128, 256, 64], n=4096, k=2048, dtype="bf16")
    c = pm.ops.GroupedGemm(group_m=[128, 64, 256], n=4096, k=2048, dtype="bf16")
    assert a.cache_key() == b.cache_key() != c.cache_key()
    assert pm.predict_op(b, h100) is pm.predict_op(a, h100)


def test_a_clock_locked_gpu_is_another_key():
    g = pm.ops.Gemm(m=8192, n=8192, k=8192, dtype="bf16")
    free = pm.predict_op(g, "B200")
    locked_hw = pm.hardware("B200", sm_clock_hz=1.2e9)
    locked = pm.predict_op(g, locked_hw)
    assert locked.time_s > free.time_s
    assert _same(locked, _fresh(g, locked_hw))
    assert pm.predict_op(g, "B200") is free  # the unlocked entry is still there


def test_levels_are_separate_entries(h100):
    g = pm.ops.Gemm(m=256, n=8192, k=8192, dtype="fp8")
    roof, pipes = pm.predict_op(g, h100, "roofline"), pm.predict_op(g, h100, "pipes")
    assert roof.level == "roofline" and pipes.level == "pipes"
    assert _same(roof, _fresh(g, h100, "roofline"))
    with pytest.raises(pm.InputError, match="unknown level"):
        pm.predict_op(g, h100, "nope")


def test_fitted_constants_set_by_hand_or_by_a_fit_are_seen(h100, monkeypatch):
    """The attention op reads fitted constants at demand time (perfmodel.validation.fit sets
    them while it fits): the cache follows them, and returns to the old entry's values."""
    a = pm.ops.op("attention", **pm.ops.Attention.EXAMPLE)
    before = pm.predict_op(a, h100)
    monkeypatch.setitem(attention.SOFTMAX_OVERLAP, "fa3", 0.05)
    changed = pm.predict_op(a, h100)
    assert changed.time_s != before.time_s and _same(changed, _fresh(a, h100))
    monkeypatch.setattr(attention, "CTA_ROUND_TRIPS", attention.CTA_ROUND_TRIPS + 1.0)
    assert _same(pm.predict_op(a, h100), _fresh(a, h100))
    monkeypatch.undo()
    assert _same(pm.predict_op(a, h100), before)


def test_fit_applied_predicts_with_its_values(h100):
    from perfmodel import fitted
    from perfmodel.validation import fit
    a = pm.ops.op("attention", **{**pm.ops.Attention.EXAMPLE, "causal": False})
    before = pm.predict_op(a, h100)
    entries = {k: {"value": c.value} for k, c in fitted.CONSTANTS.items()}
    entries["attention.softmax_overlap.fa3"] = {"value": 0.01}
    with fit.applied(entries):
        inside = pm.predict_op(a, h100)
        assert _same(inside, _fresh(a, h100)) and inside.time_s != before.time_s
    assert pm.predict_op(a, h100) is not inside
    assert _same(pm.predict_op(a, h100), before)


def test_the_cache_is_bounded(h100, monkeypatch):
    monkeypatch.setattr(schedule, "CACHE_SIZE", 8)
    for m in range(1, 40):
        pm.predict_op(pm.ops.Elementwise(elements=1000 + m, dtype="bf16"), h100)
    assert len(schedule._ENTRIES) <= 8
    pm.clear_cache()
    assert not schedule._ENTRIES


def test_graphs_share_the_op_cache(h100):
    g = pm.build_graph(pm.load_model("llama3-8b"), "decode", batch=8, context=1024)
    pred = pm.predict(g, h100)
    for o in pred.ops[:40]:
        assert _same(o.estimate, _fresh(o.op, h100))
        assert schedule.op_entry(o.op, h100, "pipes").estimate is o.estimate
    again = pm.predict(pm.build_graph(pm.load_model("llama3-8b"), "decode", batch=8,
                                      context=1024), h100)
    assert again.total_time_s == pred.total_time_s


def test_an_op_pickles_without_its_process_local_key():
    g = pm.ops.Gemm(m=64, n=128, k=256, dtype="bf16")
    key = g.cache_key()
    state = pickle.loads(pickle.dumps(g)).__dict__
    assert "_cache_key" not in state and g.__dict__["_cache_key"] == key


def test_moe_routing_is_drawn_once_per_routing(h100):
    base = dict(pm.ops.Moe.EXAMPLE, tokens=512, skew=1.0, seed=3)
    a, b = pm.ops.Moe(**base), pm.ops.Moe(**base)
    assert b.routing_result is a.routing_result
    # the expert shapes do not change the routing; the seed does
    assert pm.ops.Moe(**{**base, "hidden": 4096}).routing_result is a.routing_result
    other = pm.ops.Moe(**{**base, "seed": 4}).routing_result
    assert other is not a.routing_result
    assert not (other.replica_tokens == a.routing_result.replica_tokens).all()


def test_moe_routing_follows_its_trace_file(tmp_path, h100):
    trace = tmp_path / "t.csv"
    trace.write_text("0,1\n2,3\n0,1\n")
    op = dict(tokens=3, experts=8, top_k=2, hidden=1024, expert_hidden=512, dtype="bf16",
              gpus=2, trace=str(trace))
    first = pm.ops.Moe(**op).routing_result
    trace.write_text("4,5\n6,7\n5,4\n# rewritten\n")  # another size: another key
    assert pm.ops.Moe(**op).routing_result is not first


def _random_ops(n: int, seed: int = 0) -> list:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        kind = rng.choice(["gemm", "attention", "elementwise", "norm", "allreduce"])
        if kind == "gemm":
            out.append(pm.ops.Gemm(m=rng.randint(1, 9000), n=rng.randint(1, 9000),
                                   k=rng.randint(16, 9000), dtype=rng.choice(["bf16", "fp8"])))
        elif kind == "attention":
            out.append(pm.ops.op("attention", batch=rng.randint(1, 4), heads=32, kv_heads=8,
                                 seq_q=rng.randint(1, 9000), head_dim=128, dtype="bf16",
                                 causal=rng.random() < 0.5))
        elif kind == "elementwise":
            out.append(pm.ops.Elementwise(elements=rng.randint(1, 1 << 26), dtype="bf16"))
        elif kind == "norm":
            out.append(pm.ops.Norm(rows=rng.randint(1, 9000), cols=4096, dtype="bf16"))
        else:
            out.append(pm.ops.Allreduce(bytes=float(rng.randint(1, 1 << 30)), gpus=8))
    return out


@pytest.mark.parametrize("level", pm.LEVELS)
def test_predict_ops_equals_predict_op_elementwise(level):
    ops = _random_ops(300)
    batch = pm.predict_ops(ops, "H100-SXM", level)
    pm.clear_cache()
    single = [pm.predict_op(o, "H100-SXM", level) for o in ops]
    assert len(batch) == len(ops)
    for a, b in zip(batch, single):
        assert _same(a, b) and a.interval_s == b.interval_s
    for o, a in zip(ops[:50], batch):
        assert _same(a, _fresh(o, pm.hardware("H100-SXM"), level))
    assert math.isfinite(sum(e.time_s for e in batch))
