"""MoE routing traces (perfmodel.ops.moe.traces): synthetic traces, the closed form of activated
experts, trace files. Every numpy draw is seeded."""
from __future__ import annotations

import numpy as np
import pytest

from perfmodel.errors import InputError
from perfmodel.ops.moe.traces import (TraceError, correlated_steps, expected_activated,
                                      expected_activated_per_gpu, load_trace, synthetic_trace,
                                      trace_prefix)


# ------------------------------------------------------------------------------------ traces --


@pytest.mark.parametrize("kind", ["uniform", "zipf", "correlated"])
def test_synthetic_trace_shape_range_no_repeats_seeded(kind):
    t = synthetic_trace(500, 64, 6, kind, skew=1.2, seed=3)
    assert t.shape == (500, 6) and t.dtype == np.int64
    assert t.min() >= 0 and t.max() < 64
    s = np.sort(t, axis=1)
    assert not (s[:, 1:] == s[:, :-1]).any()
    assert np.array_equal(t, synthetic_trace(500, 64, 6, kind, skew=1.2, seed=3))
    assert not np.array_equal(t, synthetic_trace(500, 64, 6, kind, skew=1.2, seed=4))


def test_zipf_is_skewed_and_uniform_is_not():
    tokens, experts, k = 4096, 128, 8
    mean = tokens * k / experts  # 256 per expert under uniform routing
    zipf = np.bincount(synthetic_trace(tokens, experts, k, "zipf", 1.0, 0).ravel(),
                       minlength=experts)
    uni = np.bincount(synthetic_trace(tokens, experts, k, "uniform", seed=0).ravel(),
                      minlength=experts)
    assert zipf.max() > 3 * mean  # the hottest (p ≈ 1/H_128 ≈ 0.18 per draw) is in most top-8s
    assert uni.max() < 1.3 * mean
    # the hottest expert is chosen by a seeded permutation, not always expert 0
    hottest = {int(np.argmax(np.bincount(synthetic_trace(2048, 128, 8, "zipf", 1.0, s).ravel())))
               for s in range(5)}
    assert len(hottest) > 1


def test_correlated_trace_keeps_previous_step():
    prev = synthetic_trace(400, 64, 8, "zipf", 1.0, seed=1)
    same = synthetic_trace(400, 64, 8, "correlated", 1.0, seed=2, correlation=1.0, previous=prev)
    assert np.array_equal(same, prev)
    half = synthetic_trace(400, 64, 8, "correlated", 1.0, seed=2, correlation=0.5, previous=prev)
    kept = (half == prev).mean()  # slot-wise: kept with p = 0.5, or refilled with the same id
    assert 0.45 < kept < 0.65
    fresh = synthetic_trace(400, 64, 8, "correlated", 1.0, seed=2, correlation=0.0, previous=prev)
    assert (fresh == prev).mean() < 0.15
    steps = correlated_steps(4, 100, 32, 4, correlation=1.0, seed=5)
    assert all(np.array_equal(s, steps[0]) for s in steps)
    with pytest.raises(ValueError, match="previous"):
        synthetic_trace(10, 64, 8, "correlated", previous=prev)


def test_trace_argument_errors():
    with pytest.raises(ValueError, match="top_k"):
        synthetic_trace(10, 4, 5)
    with pytest.raises(ValueError, match="kind"):
        synthetic_trace(10, 8, 2, kind="pareto")
    with pytest.raises(ValueError, match="correlation"):
        synthetic_trace(10, 8, 2, kind="correlated", correlation=1.5)


# Samples: max(50, 3200 // tokens) seeded uniform decode steps per case (≥ 100 up to 32 tokens).
# Tolerance: 3 % on the mean activated experts, 8 % on each GPU's mean; in every case that is
# more than 3.5 standard errors of the simulated mean (worst: 8 experts per GPU at 8 tokens,
# s.e. ≈ 2.2 % of the mean), and the total at 1 token is exactly top_k.
@pytest.mark.parametrize("experts,top_k", [(64, 4), (256, 8)])
@pytest.mark.parametrize("tokens", [1, 8, 32, 128])
def test_closed_form_matches_simulation(experts, top_k, tokens):
    samples, gpus = max(50, 3200 // tokens), 8
    t = synthetic_trace(samples * tokens, experts, top_k, "uniform", seed=tokens)
    sample = np.repeat(np.arange(samples), tokens * top_k)
    hit = np.bincount(sample * experts + t.ravel(), minlength=samples * experts) > 0
    hit = hit.reshape(samples, experts)
    assert hit.sum(1).mean() == pytest.approx(expected_activated(experts, top_k, tokens),
                                              rel=0.03)
    # per GPU: experts in contiguous blocks of E/G (place_contiguous), no replication
    per_gpu = hit.reshape(samples, gpus, experts // gpus).sum(2).mean(0)
    assert per_gpu == pytest.approx(
        np.full(gpus, expected_activated_per_gpu(experts, top_k, tokens, gpus)), rel=0.08)


def test_closed_form_limits():
    assert expected_activated(128, 8, 1) == pytest.approx(8)
    assert expected_activated(128, 8, 10_000) == pytest.approx(128)
    assert np.allclose(expected_activated(64, 4, np.array([0, 1])), [0, 4])


# ------------------------------------------------------------------------------ trace files --


def test_load_trace_csv_and_npz_roundtrip(tmp_path):
    t = synthetic_trace(50, 32, 4, "zipf", seed=0)
    csv = tmp_path / "t.csv"
    np.savetxt(csv, t, fmt="%d", delimiter=",", header="expert ids per token")
    npz = tmp_path / "t.npz"
    np.savez(npz, experts=t)
    assert np.array_equal(load_trace(str(csv), 4, experts=32), t)
    assert np.array_equal(load_trace(npz, 4, experts=32), t)


@pytest.mark.parametrize("content,experts,message", [
    ("1,2,3\n4,5,6\n", None, "expected one row of 4 expert ids per token, got shape (2, 3)"),
    ("1,2,3,4\n4,5,6\n", None, "cannot read routing trace"),
    ("1,2,3,4\n4,5,x,7\n", None, "cannot read routing trace"),
    ("1,2,3,4.5\n", None, "must be integers"),
    ("1,2,3,4\n4,5,6,40\n", 32, "token 1 has expert id(s) outside 0..31"),
    ("1,2,-3,4\n", None, "outside >= 0"),
    ("1,2,3,4\n4,5,5,7\n", None, "token 1 repeats an expert"),
    ("", None, "no tokens"),
    ("# only a comment\n", None, "no tokens"),
])
def test_load_trace_csv_errors(tmp_path, content, experts, message):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    with pytest.raises(ValueError) as err:
        load_trace(str(path), 4, experts=experts)
    assert str(path) in str(err.value) and message in str(err.value)
    assert isinstance(err.value, InputError)  # the CLI prints it as one line


def test_load_trace_npz_and_missing_file_errors(tmp_path):
    npz = tmp_path / "bad.npz"
    np.savez(npz, ids=np.zeros((3, 2), int))
    with pytest.raises(TraceError, match=r"bad.npz: NPZ has no array 'experts'"):
        load_trace(str(npz), 2)
    with pytest.raises(TraceError, match=r"missing.csv: cannot read routing trace"):
        load_trace(str(tmp_path / "missing.csv"), 2)
    np.savez(npz, experts=np.zeros((3, 2, 1), int))
    with pytest.raises(TraceError, match=r"got shape \(3, 2, 1\)"):
        load_trace(str(npz), 2)


@pytest.mark.parametrize("kind, skew", [("uniform", 0.0), ("zipf", 1.2)])
def test_a_trace_prefix_is_the_shorter_draw_bit_for_bit(kind, skew):
    """The first n rows of one growing draw are the n-token draw, whatever order the token
    counts come in (a serving search asks for many; traces.trace_prefix)."""
    for n in (5, 100, 37, 1000, 999, 0, 2500, 1):
        prefix = trace_prefix(n, 64, 6, kind, skew, seed=11)
        assert np.array_equal(prefix, synthetic_trace(n, 64, 6, kind, skew, seed=11))
        assert not prefix.flags.writeable


def test_a_trace_prefix_refuses_what_it_cannot_draw():
    with pytest.raises(ValueError, match="uniform or zipf"):
        trace_prefix(4, 8, 2, "correlated")
    with pytest.raises(ValueError, match="top_k"):
        trace_prefix(4, 8, 9)


def test_an_evicted_trace_prefix_is_drawn_again_the_same(monkeypatch):
    """At most PREFIX_CACHE growing draws are kept; one evicted and asked for again is the same
    draw from its seed."""
    from perfmodel.ops.moe import traces
    monkeypatch.setattr(traces, "PREFIX_CACHE", 2)
    monkeypatch.setattr(traces, "_PREFIXES", traces.OrderedDict())
    first = trace_prefix(300, 32, 4, "zipf", 1.1, seed=1).copy()
    for seed in (2, 3, 4):
        trace_prefix(50, 32, 4, "zipf", 1.1, seed=seed)
    assert len(traces._PREFIXES) == 2
    assert np.array_equal(trace_prefix(300, 32, 4, "zipf", 1.1, seed=1), first)
    assert np.array_equal(first, synthetic_trace(300, 32, 4, "zipf", 1.1, seed=1))
