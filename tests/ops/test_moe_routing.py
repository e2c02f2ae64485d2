"""MoE placement and routing (perfmodel.ops.moe.routing): EPLB, contiguous, token-balanced, METRO,
optimal. Every numpy draw is seeded; hypothesis follows the profile of tests/conftest.py
(derandomized by default)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.ops.moe.routing import (POLICIES, Placement, _make_room, expert_counts,
                                       place_contiguous, place_eplb, replica_counts, route,
                                       route_metro, route_optimal, route_token_balanced,
                                       route_uniform)
from perfmodel.ops.moe import routing
from perfmodel.ops.moe.traces import synthetic_trace
from perfmodel.studies import moe_decode
from tests.oracles import route_metro_fixpoint, route_metro_sequential, route_optimal_milp


@st.composite
def placements(draw, max_experts=10, max_gpus=5):
    """Arbitrary placements (not only EPLB's) with per-expert token counts, some experts idle."""
    gpus = draw(st.integers(1, max_gpus))
    experts = draw(st.integers(1, max_experts))
    reps = [draw(st.lists(st.integers(0, gpus - 1), min_size=1, max_size=gpus, unique=True))
            for _ in range(experts)]
    counts = np.array(draw(st.lists(st.integers(0, 6), min_size=experts, max_size=experts)))
    return Placement(tuple(reps), gpus), counts


def random_case(rng, max_experts=40, max_gpus=9):
    gpus = int(rng.integers(1, max_gpus))
    experts = int(rng.integers(1, max_experts))
    reps = [rng.choice(gpus, size=int(rng.integers(1, gpus + 1)), replace=False)
            for _ in range(experts)]
    counts = rng.integers(0, 5, experts) * (rng.random(experts) < rng.random())
    return Placement(tuple(reps), gpus), counts


def decode_step(experts=256, gpus=16, replication=1.5, tokens=1024, top_k=8, seed=0, skew=1.0):
    """A decode step like the METRO paper's benchmark: EPLB placement from an earlier step's
    load."""
    load = np.bincount(synthetic_trace(4 * tokens, experts, top_k, "zipf", skew, seed).ravel(),
                       minlength=experts)
    trace = synthetic_trace(tokens, experts, top_k, "correlated", skew, seed + 1,
                            popularity_seed=seed)
    return place_eplb(load, gpus, replication), trace


# ---------------------------------------------------------------------------------- placement --


@given(load=st.lists(st.floats(0, 1e4), min_size=1, max_size=40), gpus=st.integers(1, 16),
       replication=st.floats(1.0, 3.0))
def test_eplb_placement_invariants(load, gpus, replication):
    experts = len(load)
    total = math.floor(experts * replication + 0.5)
    if total > experts * gpus:
        with pytest.raises(ValueError, match="replicas"):
            place_eplb(load, gpus, replication)
        return
    p = place_eplb(load, gpus, replication)
    assert p.experts == experts and p.gpus == gpus
    assert all(len(r) >= 1 for r in p.replicas)
    assert all(len(set(r)) == len(r) for r in p.replicas)  # no GPU holds an expert twice
    assert p.counts.sum() == total
    per_gpu = p.replicas_per_gpu
    assert per_gpu.max() <= -(-total // gpus)
    if total % gpus == 0:
        assert (per_gpu == total // gpus).all()
    # replicas follow load: a more loaded expert never has fewer replicas
    order = np.argsort(load, kind="stable")
    assert (np.diff(p.counts[order])[np.diff(np.array(load)[order]) > 0] >= 0).all()


def test_eplb_replicates_hot_experts_and_balances_load():
    load = np.array([100.0, 50, 10, 10, 10, 10, 5, 5])
    assert replica_counts(load, 4, 1.5).tolist() == [4, 2, 1, 1, 1, 1, 1, 1]
    p = place_eplb(load, 4, 1.5)
    gpu_load = np.zeros(4)
    np.add.at(gpu_load, p.replica_gpu, (load / p.counts)[p.replica_expert])
    assert gpu_load.max() - gpu_load.min() <= 10  # perfect is 200/4 = 50 each
    assert p.replicas[0] == (0, 1, 2, 3)


def test_make_room_swaps_to_free_a_slot():
    holds = np.array([[True, False],    # expert 0 on GPU 0, needs a second replica
                      [False, True],
                      [False, True]])
    load, used = np.array([1.0, 2.0]), np.array([1, 2])
    _make_room(0, holds, load, used, np.ones(3), slots=2)
    assert holds.sum() == 3 and used.tolist() == [2, 1] and load.tolist() == [2.0, 1.0]
    assert not holds[0, 1] and holds[:, 1].sum() == 1  # GPU 1 now has a free slot for expert 0


def test_contiguous_placement_and_validation():
    p = place_contiguous(16, 4)
    assert [r[0] for r in p.replicas] == [e // 4 for e in range(16)]
    assert p.replicas_per_gpu.tolist() == [4, 4, 4, 4]
    assert Placement(((3, 1),), 4).replicas == ((1, 3),)  # kept sorted by GPU id
    for reps, msg in [(((),), "no replica"), (((0, 0),), "two replicas"), (((4,),), "outside")]:
        with pytest.raises(ValueError, match=msg):
            Placement(reps, 4)


# ------------------------------------------------------------------------------------ routing --


def check_routing(r, placement, counts):
    """Invariants every policy must keep."""
    for e in range(placement.experts):
        assert r.expert_tokens(e).sum() == counts[e]  # no token dropped, and only own replicas
    assert r.tokens_per_gpu.sum() == counts.sum()
    assert (r.replica_tokens >= 0).all()
    rows = r.gpu_rows()
    assert [len(x) for x in rows] == r.activated_per_gpu.tolist()
    assert [sum(x) for x in rows] == r.tokens_per_gpu.tolist()
    assert (r.expert_gpu_tokens().sum(1) == counts).all()


@settings(max_examples=100)  # expensive: every example solves the MILP and a max-flow
@given(placements())
def test_routing_properties(case):
    p, counts = case
    out = {name: route(name, counts, p, seed=1) for name in POLICIES}
    for r in out.values():
        check_routing(r, p, counts)
    for name in ("metro", "optimal"):  # whole expert to exactly one replica (Lemma 1 form)
        served = [(out[name].expert_tokens(e) > 0).sum() for e in range(p.experts)]
        assert served == [int(c > 0) for c in counts]
    assert out["optimal"].max_activated <= out["metro"].max_activated
    assert out["optimal"].max_activated == route_optimal_milp(counts, p).max_activated
    for metro in (route_metro_sequential, route_metro_fixpoint):
        assert np.array_equal(metro(counts, p).replica_tokens, out["metro"].replica_tokens)
    # Theorem when token-balanced activates every replica (T_e ≥ r_e): metro puts on GPU g only
    # active experts with a replica on g, and token-balanced activates all of those there.
    if all(c >= r for c, r in zip(counts, p.counts) if c > 0):
        assert out["metro"].max_activated <= out["token_balanced"].max_activated


def test_metro_can_exceed_token_balanced_when_an_expert_has_fewer_tokens_than_replicas():
    # Expert 1 has 1 token and replicas on GPUs 0 and 1. METRO is greedy in expert id order: it
    # sends expert 1 to GPU 1 (fewer activated so far), not knowing experts 2 and 3 are pinned
    # there. Token-balanced puts the single token on its first replica (GPU 0) by convention.
    p = Placement(((0,), (0, 1), (1,), (1,)), 2)
    counts = np.array([2, 1, 1, 2])
    assert route_metro(counts, p).activated_per_gpu.tolist() == [1, 3]
    assert route_token_balanced(counts, p).activated_per_gpu.tolist() == [2, 2]
    assert route_optimal(counts, p).max_activated == 2
    counts = np.array([2, 2, 1, 2])  # with T ≥ r token-balanced activates both replicas
    assert route_token_balanced(counts, p).max_activated == 3
    assert route_metro(counts, p).max_activated == 3


def test_paper_toy_example_token_balancing_doubles_activated_replicas():
    # METRO Fig. 4 in miniature: two experts, each replicated on both GPUs, both active.
    p = Placement(((0, 1), (0, 1)), 2)
    counts = np.array([8, 8])
    assert route_token_balanced(counts, p).activated_per_gpu.tolist() == [2, 2]
    assert route_metro(counts, p).activated_per_gpu.tolist() == [1, 1]


def test_optimal_beats_greedy_on_a_tie():
    p = Placement(((0, 1), (0,)), 2)  # METRO sends expert 0 to GPU 0 (tie), then 1 is forced there
    counts = np.array([3, 3])
    assert route_metro(counts, p).max_activated == 2
    assert route_optimal(counts, p).max_activated == 1
    assert route_optimal(counts, p).activated_per_gpu.tolist() == [1, 1]


def test_metro_fast_versions_equal_sequential_on_many_cases():
    rng = np.random.default_rng(0)
    suboptimal = 0
    for i in range(400):
        p, counts = random_case(rng)
        seq = route_metro_sequential(counts, p)
        for fast in (route_metro(counts, p), route_metro_fixpoint(counts, p)):
            assert np.array_equal(seq.replica_tokens, fast.replica_tokens)
            assert np.array_equal(seq.activated_per_gpu, fast.activated_per_gpu)
        if i < 100:
            opt = route_optimal(counts, p)
            check_routing(opt, p, counts)
            suboptimal += opt.max_activated < seq.max_activated
    assert suboptimal > 5  # the max-flow search is exercised, not only METRO's λ


@pytest.mark.parametrize("replication", [1.0, 1.125, 1.5, 2.0, 3.0])
@pytest.mark.parametrize("skew", [0.0, 1.2])
def test_decode_size_step(replication, skew):
    p, trace = decode_step(replication=replication, skew=skew)
    counts = expert_counts(trace, 256)
    out = {name: route(name, trace, p) for name in POLICIES}
    for r in out.values():
        assert r.tokens_per_gpu.sum() == 1024 * 8
        check_routing(r, p, counts)
    for metro in (route_metro_sequential, route_metro_fixpoint):
        assert np.array_equal(metro(trace, p).replica_tokens, out["metro"].replica_tokens)
    assert out["optimal"].max_activated <= out["metro"].max_activated \
        <= out["token_balanced"].max_activated
    assert out["optimal"].max_activated >= math.ceil((counts > 0).sum() / 16)


@given(experts=st.integers(1, 24), gpus=st.integers(1, 6), seed=st.integers(0, 1000))
def test_without_replication_all_policies_agree(experts, gpus, seed):
    p = place_contiguous(experts, gpus)
    trace = synthetic_trace(20, experts, min(3, experts), "zipf", 1.0, seed)
    ref = route_token_balanced(trace, p)
    assert ref.tokens_per_gpu.sum() == 20 * min(3, experts)
    for name in POLICIES:
        r = route(name, trace, p, seed=seed)
        assert np.array_equal(r.replica_tokens, ref.replica_tokens)
        assert np.array_equal(r.activated_per_gpu, ref.activated_per_gpu)


def test_uniform_routing_is_seeded_and_spread():
    p = Placement(((0, 1, 2, 3),), 4)
    counts = np.array([4000])
    a, b = route_uniform(counts, p, seed=7), route_uniform(counts, p, seed=7)
    assert np.array_equal(a.replica_tokens, b.replica_tokens)
    assert not np.array_equal(a.replica_tokens, route_uniform(counts, p, seed=8).replica_tokens)
    assert np.allclose(a.replica_tokens, 1000, rtol=0.1)


def test_token_balanced_split():
    p = Placement(((0, 1, 2),), 3)
    assert route_token_balanced(np.array([7]), p).replica_tokens.tolist() == [3, 2, 2]
    assert route_token_balanced(np.array([2]), p).activated_per_gpu.tolist() == [1, 1, 0]


def test_routing_input_errors():
    p = place_contiguous(4, 2)
    with pytest.raises(ValueError, match="outside 0..3"):
        route_metro(np.array([[0, 4]]), p)
    with pytest.raises(ValueError, match="4 non-negative"):
        route_metro(np.array([1, 2, 3]), p)
    with pytest.raises(ValueError, match="policy"):
        route("greedy", np.array([1, 2, 3, 4]), p)
    empty = route_optimal(np.zeros(4, int), p)
    assert empty.max_activated == 0 and route_optimal_milp(np.zeros(4, int), p).max_activated == 0


def test_routing_policies_are_named_once():
    assert routing.POLICIES == ("token_balanced", "metro", "optimal", "uniform")
    assert moe_decode.STUDY_POLICIES == ("token_balanced", "metro", "optimal")
    assert set(moe_decode.STUDY_POLICIES) == set(moe_decode.ROUTING_COST_S)


def test_routing_takes_load_and_the_oracles_live_in_tests():
    p = routing.place_contiguous(8, 4)
    counts = [3, 0, 1, 5, 0, 0, 2, 1]
    assert routing.route_metro(load=counts, placement=p).max_activated == 2
    assert routing.expert_counts(load=[[0, 1], [1, 7]], experts=8).tolist() == \
        [1, 2, 0, 0, 0, 0, 0, 1]
    for name in ("route_metro_sequential", "route_metro_fixpoint", "route_optimal_milp"):
        assert not hasattr(routing, name)
    from tests.oracles import route_metro_sequential
    assert route_metro_sequential(counts, p).max_activated == 2
