"""DeepSeek's EPLB (perfmodel.ops.moe.eplb): a hand-worked case of each policy, the building
blocks, invariants on random loads, and token balancing over EPLB's slots."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.ops.moe.eplb import (balanced_packing, eplb_placement, nodes_for,
                                    rebalance_experts, replicate_experts,
                                    route_token_balanced_slots)
from perfmodel.ops.moe.routing import route_metro, route_token_balanced

# The hand-worked case: 8 experts in 4 groups of 2 (g0 = {0, 1}, g1 = {2, 3}, g2 = {4, 5},
# g3 = {6, 7}), 2 nodes of 2 GPUs, 12 slots (4 redundant, 3 per GPU). No ties in the loads that
# change the outcome (ties between equal replicas of one expert leave it unchanged).
LOAD = np.array([90, 10, 24, 16, 34, 26, 64, 16], float)


def test_hierarchical_hand_worked():
    """Step 1, groups to nodes: group loads g0 100, g1 40, g2 60, g3 80; by decreasing load each
    to the lighter node with room (2 groups per node): g0 → n0 (100), g3 → n1 (80), g2 → n1
    (140, full), g1 → n0 (140). Node 0 holds experts 0-3, node 1 experts 6, 7, 4, 5 (g3 first:
    its rank in the node).
    Step 2, 2 redundant per node to the largest load per replica: node 0 [90, 10, 24, 16]:
    e0 (90 → 45), e0 again (45 > 24: 3 replicas of 30). Node 1 [e6 64, e7 16, e4 34, e5 26]:
    e6 (64 → 32), then e4 (34 > 32 → 17).
    Step 3, each node's 6 replicas onto its 2 GPUs, 3 each, heaviest first to the lighter GPU
    with room (the first on ties). Node 0, replicas e0 30, 30, 30, e2 24, e3 16, e1 10: GPU0
    e0 (30), GPU1 e0 (30), GPU0 e0 (60: tie, first), GPU1 e2 (54), GPU1 e3 (70, full), GPU0 e1
    (70). Node 1, e6 32, 32, e5 26, e4 17, 17, e7 16: GPU2 e6 (32), GPU3 e6 (32), GPU2 e5 (58),
    GPU3 e4 (49), GPU3 e4 (66, full), GPU2 e7 (74).
    Slots GPU-major, in order of arrival: [e0 e0 e1 | e0 e2 e3 | e6 e5 e7 | e6 e4 e4]. Two GPUs
    got two replicas of one expert (GPU0: e0, GPU3: e4): nothing in EPLB prevents it."""
    phy2log, log2phy, logcnt = rebalance_experts(LOAD[None], 12, 4, 2, 4)
    assert phy2log.tolist() == [[0, 0, 1, 0, 2, 3, 6, 5, 7, 6, 4, 4]]
    assert logcnt.tolist() == [[3, 1, 1, 1, 2, 1, 2, 1]]
    # log2phy lists each expert's slots by replica rank (rank = order of creation in step 2)
    assert log2phy[0, 0].tolist() == [0, 3, 1] and log2phy[0, 4].tolist() == [10, 11, -1]
    for e in range(8):
        slots = log2phy[0, e][log2phy[0, e] >= 0]
        assert (phy2log[0, slots] == e).all() and slots.size == logcnt[0, e]
    ep = eplb_placement(LOAD, 4, 4, groups=4, gpus_per_node=2)
    assert (ep.policy, ep.nodes, ep.slots_per_gpu, ep.merged) == ("hierarchical", 2, 3, 2)
    assert ep.placement.replicas == ((0, 1), (0,), (1,), (1,), (3,), (2,), (2, 3), (2,))


def test_global_hand_worked():
    """One group, one node: replicate over all 8 experts (e0 → 45, e6 → 32, e0 → 30, e4 → 17),
    then 12 replicas onto 4 GPUs of 3: by weight e6 32 (slot 6), e6 32 (9), e0 30 (0, 8, 10),
    e5 26, e2 24, e4 17 (4, 11), e3 16, e7 16, e1 10 → GPU0 e6, GPU1 e6, GPU2 e0, GPU3 e0, GPU2
    e0 (60, first of the 30s), GPU3 e5 (56), GPU0 e2 (56), GPU1 e4 (49), GPU1 e4 (66, full), GPU0
    e3 (72, full: first of the 56s), GPU3 e7 (72, full), GPU2 e1 (70)."""
    phy2log, _, logcnt = rebalance_experts(LOAD[None], 12, 4, 2, 4, policy="global")
    assert phy2log.tolist() == [[6, 2, 3, 6, 4, 4, 0, 0, 1, 0, 5, 7]]
    assert logcnt.tolist() == [[3, 1, 1, 1, 2, 1, 2, 1]]
    # the original's rule: groups that do not divide over the nodes fall back to global
    auto = eplb_placement(LOAD, 6, 4, groups=4, gpus_per_node=2)  # 3 nodes, 4 groups
    assert auto.policy == "global" and auto.nodes == 3


def test_building_blocks():
    pack, rank = balanced_packing(np.array([[5.0, 1, 4, 2, 3, 3]]), 2)
    # 5 → p0, 4 → p1, 3 → p1 (4 < 5; the first 3 is item 4), 3 → p0, 2 → p1 (full), 1 → p0
    assert pack.tolist() == [[0, 0, 1, 1, 1, 0]] and rank.tolist() == [[0, 2, 0, 2, 1, 1]]
    same, zero = balanced_packing(np.array([[1.0, 2.0]]), 2)  # one item per pack: identity
    assert same.tolist() == [[0, 1]] and zero.tolist() == [[0, 0]]
    phy2log, rank, cnt = replicate_experts(np.array([[6.0, 3.0, 1.0]]), 6)
    # 6 → 3 per replica, then 3 (e0 vs e1: first maximum, e0) → 2, then e1 3 → 1.5
    assert phy2log.tolist() == [[0, 1, 2, 0, 0, 1]] and cnt.tolist() == [[3, 2, 1]]
    assert rank.tolist() == [[0, 0, 0, 1, 2, 1]]
    assert nodes_for(4, 8) == 1 and nodes_for(16, 8) == 2 and nodes_for(72, 72) == 1
    with pytest.raises(ValueError, match="slots do not divide"):
        eplb_placement(LOAD, 3, 0)
    with pytest.raises(ValueError, match="packs"):
        balanced_packing(np.ones((1, 5)), 2)


@given(load=st.lists(st.integers(0, 10_000), min_size=16, max_size=16),
       gpus=st.sampled_from([1, 2, 4, 8]), extra=st.integers(0, 3),
       node=st.sampled_from([1, 2, 4, 8]))
def test_eplb_invariants(load, gpus, extra, node):
    """Every expert gets a slot, every GPU the same number of slots, replicas follow load
    among the experts of one node (a heavier expert never has fewer; redundant slots are
    shared out per node), and under the hierarchical policy each node holds whole expert groups
    (4 groups of 4 here)."""
    w = np.array(load, float)
    redundant = extra * gpus
    ep = eplb_placement(w, gpus, redundant, groups=4, gpus_per_node=node)
    slots = ep.phy2log
    assert slots.size == 16 + redundant
    assert np.bincount(np.arange(slots.size) // ep.slots_per_gpu).tolist() == \
        [ep.slots_per_gpu] * gpus
    cnt = np.bincount(slots, minlength=16)
    assert cnt.min() >= 1
    per_node = slots.reshape(ep.nodes if ep.policy == "hierarchical" else 1, -1)
    for node_slots in per_node:
        mine = np.unique(node_slots)
        order = mine[np.argsort(w[mine], kind="stable")]
        assert (np.diff(cnt[order])[np.diff(w[order]) > 0] >= 0).all()
    assert ep.merged == slots.size - sum(len(r) for r in ep.placement.replicas)
    if ep.policy == "hierarchical" and ep.nodes > 1:
        for n in range(ep.nodes):
            groups = set((per_node[n] // 4).tolist())
            assert len(groups) == 4 // ep.nodes  # whole groups, none split over nodes


def test_token_balancing_over_slots_counts_twins():
    """Tokens [7, 1, 1, 0, 3, 0, 2, 1] on the hand-worked placement: e0's 7 go 3, 2, 2 to its
    slots 0, 1 (GPU0) and 3 (GPU1); e4's 3 go 2, 1 to its two slots on GPU3; e6's 2 go 1, 1.
    GPU0 runs three row groups (e0 twice, e1): twins are two activated replicas, where the
    merged placement would count one."""
    ep = eplb_placement(LOAD, 4, 4, groups=4, gpus_per_node=2)
    tokens = np.array([7, 1, 1, 0, 3, 0, 2, 1])
    r = route_token_balanced_slots(tokens, ep)
    assert r.gpu_rows() == [[3, 2, 1], [2, 1], [1, 1], [1, 2, 1]]
    assert r.activated_per_gpu.tolist() == [3, 2, 2, 3]
    assert r.tokens_per_gpu.tolist() == [6, 3, 2, 4] and r.tokens_per_gpu.sum() == tokens.sum()
    merged = route_token_balanced(tokens, ep.placement)
    assert merged.activated_per_gpu.tolist() == [2, 2, 2, 2]
    # METRO sends e0's tokens to one replica: twins never matter to it
    assert route_metro(tokens, ep.placement).activated_per_gpu.sum() == (tokens > 0).sum()


def test_metro_order_matters():
    """Expert 0 on GPUs {0, 1}, expert 1 only on GPU 0, both active. Algorithm 1 in id order
    takes expert 0 first, sees empty counters and picks GPU 0 (first on ties): GPU 0 then also
    gets expert 1, λ = 2. Counting the forced expert 1 first sends expert 0 to GPU 1: λ = 1."""
    from perfmodel.ops.moe.routing import Placement, route_metro_forced_first, route_optimal
    p = Placement(((0, 1), (0,)), 2)
    tokens = np.array([3, 2])
    assert route_metro(tokens, p).max_activated == 2
    first = route_metro_forced_first(tokens, p)
    assert first.max_activated == 1 == route_optimal(tokens, p).max_activated
    assert first.expert_gpu_tokens().tolist() == [[0, 3], [2, 0]]
    # on EPLB's hand-worked placement and any tokens it is never below the optimum
    ep = eplb_placement(LOAD, 4, 4, groups=4, gpus_per_node=2)
    rng = np.random.default_rng(0)
    for _ in range(50):
        t = rng.integers(0, 3, 8)
        assert route_metro_forced_first(t, ep.placement).max_activated >= \
            route_optimal(t, ep.placement).max_activated
