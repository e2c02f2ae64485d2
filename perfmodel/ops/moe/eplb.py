"""DeepSeek's Expert-Parallelism Load Balancer (EPLB), ported from PyTorch to numpy.

Source: deepseek-ai/EPLB, `eplb.py` (github.com/deepseek-ai/EPLB, released 2025-02 with
DeepSeek's Open-Source Week; the same code ships in SGLang as
`python/sglang/srt/eplb/eplb_algorithms/deepseek.py` and in vLLM's EPLB). Written here from that
published code; function names, arguments and steps follow it one to one so the two can be read
side by side. Inputs are per-layer expert loads (any non-negative unit: the SGLang statistics
files count routed tokens over a whole run, `perfmodel.ops.moe.loads`).

`rebalance_experts` picks one of two policies, as the original does:
  hierarchical  when the expert groups divide evenly over the nodes (num_groups % num_nodes == 0):
                1. pack the expert groups onto nodes, balancing the nodes' loads
                   (`balanced_packing`, each node gets num_groups/num_nodes groups), so
                   group-limited routing (DeepSeek-V3 §2.1.2: top-4 of 8 groups per token)
                   keeps a token's traffic on few nodes;
                2. inside each node, add the redundant replicas one at a time to the expert
                   with the largest load per replica (`replicate_experts`);
                3. pack each node's replicas onto its GPUs, each GPU getting the same number
                   of slots and the loads balanced (`balanced_packing` again).
  global        otherwise: one group and one node, i.e. replicate over all experts and pack
                all replicas onto all GPUs. The EPLB README recommends it for decode with large
                EP sizes.

What the original does not promise and this port keeps: `balanced_packing` can put two replicas
of one expert on the same GPU. Nothing forbids it; the second copy lands there whenever that GPU
is still the lightest with room after the first (on SGLang's DeepSeek loads 0.2–2 times per
layer with 32 redundant slots, up to 9 with 1.5× replication). perfmodel's `Placement` holds at
most one replica of an expert per GPU (`routing.Placement`), so `eplb_placement` merges such
twins into one replica and counts them (`EplbPlacement.merged`); `route_token_balanced_slots`
keeps them apart, because token balancing feeds both slots.

Tie-breaking: the original sorts with `torch.sort(descending=True)` (not stable) and takes
`max(...).indices` (the first maximum); here sorts are stable (equal loads keep id order) and
argmax takes the first maximum, so results are deterministic and match the original whenever
loads have no ties.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel.ops.moe.routing import Placement, Routing, expert_counts

POLICIES = ("auto", "hierarchical", "global")


def balanced_packing(weight: np.ndarray, num_packs: int) -> tuple[np.ndarray, np.ndarray]:
    """Pack n weighted items into `num_packs` packs of exactly n/num_packs items each, balancing
    the packs' total weight: items in decreasing weight, each to the lightest pack that still has
    room (first such pack on ties). weight (X, n), one row per layer. Returns pack_index and
    rank_in_pack (X, n): the item's pack and its position in that pack (order of arrival)."""
    weight = np.asarray(weight, dtype=float)
    num_layers, num_groups = weight.shape
    if num_groups % num_packs:
        raise ValueError(f"{num_groups} items do not divide into {num_packs} equal packs")
    groups_per_pack = num_groups // num_packs
    if groups_per_pack == 1:  # one item per pack: the identity, as in the original
        return (np.broadcast_to(np.arange(num_groups), weight.shape).copy(),
                np.zeros(weight.shape, np.int64))
    indices = np.argsort(-weight, axis=-1, kind="stable")
    pack_index = np.full(weight.shape, -1, np.int64)
    rank_in_pack = np.full(weight.shape, -1, np.int64)
    for i in range(num_layers):
        pack_weights = [0.0] * num_packs
        pack_items = [0] * num_packs
        for group in indices[i].tolist():
            pack = min((p for p in range(num_packs) if pack_items[p] < groups_per_pack),
                       key=pack_weights.__getitem__)
            pack_index[i, group] = pack
            rank_in_pack[i, group] = pack_items[pack]
            pack_weights[pack] += float(weight[i, group])
            pack_items[pack] += 1
    return pack_index, rank_in_pack


def replicate_experts(weight: np.ndarray, num_phy: int
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Replicate num_log experts into num_phy physical experts so that the largest load per
    replica is minimized: each extra replica goes to the expert with the largest weight/count.
    weight (X, num_log). Returns phy2log (X, num_phy): the logical expert of each physical
    one (the first num_log are the experts themselves), rank (X, num_phy): the replica's index
    among its expert's replicas, logcnt (X, num_log): replicas per expert."""
    weight = np.asarray(weight, dtype=float)
    n, num_log = weight.shape
    if num_phy < num_log:
        raise ValueError(f"{num_phy} physical experts cannot hold {num_log} logical ones")
    phy2log = np.tile(np.arange(num_phy, dtype=np.int64), (n, 1))
    rank = np.zeros((n, num_phy), np.int64)
    logcnt = np.ones((n, num_log), np.int64)
    rows = np.arange(n)
    for i in range(num_log, num_phy):
        redundant = np.argmax(weight / logcnt, axis=-1)
        phy2log[:, i] = redundant
        rank[:, i] = logcnt[rows, redundant]
        logcnt[rows, redundant] += 1
    return phy2log, rank, logcnt


def _inverse(perm: np.ndarray) -> np.ndarray:
    """Row-wise inverse permutation."""
    inv = np.empty_like(perm)
    np.put_along_axis(inv, perm, np.broadcast_to(np.arange(perm.shape[1]), perm.shape), axis=1)
    return inv


def rebalance_experts_hierarchical(weight: np.ndarray, num_physical_experts: int,
                                   num_groups: int, num_nodes: int, num_gpus: int
                                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The hierarchical policy (module docstring). weight (layers, num_logical_experts).
    Returns phy2log (layers, num_physical_experts): the logical expert in each physical slot,
    slots numbered GPU-major (GPU g holds slots g·S .. g·S + S − 1, S = slots per GPU);
    phyrank (same shape): replica index; logcnt (layers, num_logical_experts)."""
    weight = np.asarray(weight, dtype=float)
    num_layers, num_logical_experts = weight.shape
    problems = [msg for bad, msg in (
        (num_logical_experts % num_groups, f"{num_logical_experts} experts in {num_groups} groups"),
        (num_groups % num_nodes, f"{num_groups} groups on {num_nodes} nodes"),
        (num_gpus % num_nodes, f"{num_gpus} GPUs on {num_nodes} nodes"),
        (num_physical_experts % num_gpus, f"{num_physical_experts} slots on {num_gpus} GPUs"))
        if bad]
    if problems:
        raise ValueError("EPLB needs even splits: " + "; ".join(problems))
    group_size = num_logical_experts // num_groups
    groups_per_node = num_groups // num_nodes
    phy_experts_per_gpu = num_physical_experts // num_gpus

    # Step 1: pack groups to nodes
    tokens_per_group = weight.reshape(num_layers, num_groups, group_size).sum(-1)
    group_pack_index, group_rank_in_pack = balanced_packing(tokens_per_group, num_nodes)
    # log2mlog: logical expert -> "node-major" logical id (the node's experts contiguous)
    log2mlog = (((group_pack_index * groups_per_node + group_rank_in_pack) * group_size)[..., None]
                + np.arange(group_size)).reshape(num_layers, -1)
    mlog2log = _inverse(log2mlog)

    # Step 2: construct redundant experts within nodes
    # [num_layers * num_nodes, num_logical_experts // num_nodes]
    tokens_per_mlog = np.take_along_axis(weight, mlog2log, -1).reshape(
        -1, num_logical_experts // num_nodes)
    phy2mlog, phyrank, mlogcnt = replicate_experts(tokens_per_mlog,
                                                   num_physical_experts // num_nodes)

    # Step 3: pack physical_experts to GPUs
    # [num_layers * num_nodes, num_physical_experts // num_nodes]
    tokens_per_phy = np.take_along_axis(tokens_per_mlog / mlogcnt, phy2mlog, -1)
    pack_index, rank_in_pack = balanced_packing(tokens_per_phy, num_gpus // num_nodes)
    phy2pphy = pack_index * phy_experts_per_gpu + rank_in_pack
    pphy2phy = _inverse(phy2pphy)

    pphy2mlog = np.take_along_axis(phy2mlog, pphy2phy, -1)
    pphy2mlog = (pphy2mlog.reshape(num_layers, num_nodes, -1)
                 + np.arange(0, num_logical_experts, num_logical_experts // num_nodes
                             ).reshape(1, -1, 1)).reshape(num_layers, -1)
    pphy2log = np.take_along_axis(mlog2log, pphy2mlog, -1)
    pphyrank = np.take_along_axis(phyrank, pphy2phy, -1).reshape(num_layers, -1)
    logcnt = np.take_along_axis(mlogcnt.reshape(num_layers, -1), log2mlog, -1)
    return pphy2log, pphyrank, logcnt


def rebalance_experts(weight: np.ndarray, num_replicas: int, num_groups: int, num_nodes: int,
                      num_gpus: int, policy: str = "auto"
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """EPLB's entry point. weight (layers, experts); num_replicas physical slots in all (experts
    + redundant), a multiple of num_gpus. policy "auto" is the original's rule (hierarchical iff
    num_groups % num_nodes == 0, else global); "hierarchical" / "global" force one.
    Returns phy2log (layers, num_replicas), log2phy (layers, experts, max replicas; −1 padded):
    the physical slots of each expert, logcnt (layers, experts)."""
    if policy not in POLICIES:
        raise ValueError(f"EPLB policy must be one of {POLICIES}, got {policy!r}")
    weight = np.atleast_2d(np.asarray(weight, dtype=float))
    num_layers, num_logical_experts = weight.shape
    hierarchical = num_groups % num_nodes == 0 if policy == "auto" else policy == "hierarchical"
    if hierarchical:
        phy2log, phyrank, logcnt = rebalance_experts_hierarchical(weight, num_replicas,
                                                                  num_groups, num_nodes, num_gpus)
    else:
        phy2log, phyrank, logcnt = rebalance_experts_hierarchical(weight, num_replicas, 1, 1,
                                                                  num_gpus)
    maxlogcnt = int(logcnt.max())
    log2phy = np.full((num_layers, num_logical_experts * maxlogcnt), -1, np.int64)
    np.put_along_axis(log2phy, phy2log * maxlogcnt + phyrank,
                      np.broadcast_to(np.arange(num_replicas), phy2log.shape), axis=-1)
    return phy2log, log2phy.reshape(num_layers, num_logical_experts, maxlogcnt), logcnt


# ------------------------------------------------------------------- perfmodel's placement ---

@dataclass(frozen=True)
class EplbPlacement:
    """One layer's EPLB result as a routing `Placement`, with what was needed to get there.
    phy2log (R,): the logical expert in each physical slot (GPU-major, `slots_per_gpu` each);
    policy: "hierarchical" or "global"; nodes: nodes EPLB packed for; merged: slots whose expert
    already had a replica on the same GPU (merged into it, see the module docstring)."""
    placement: Placement
    phy2log: np.ndarray
    policy: str
    nodes: int
    slots_per_gpu: int
    merged: int


def nodes_for(gpus: int, gpus_per_node: int) -> int:
    """Nodes EPLB balances over: the GPUs fill nodes of `gpus_per_node` (the NVLink domain, the
    fast network inside which EPLB does not mind where a replica sits). Fewer GPUs than a node:
    one node."""
    return max(1, -(-gpus // gpus_per_node))


def eplb_placement(load, gpus: int, redundant: int, groups: int = 1, gpus_per_node: int = 8,
                   policy: str = "auto") -> EplbPlacement:
    """DeepSeek EPLB placement of one layer. load (E,): the layer's recorded expert loads;
    `redundant` extra slots (E + redundant must be a multiple of gpus); `groups`: the model's
    expert groups (DeepSeek-V3: 8); nodes from `nodes_for`. ValueError if the splits are not
    even (EPLB asserts the same)."""
    w = np.asarray(load, dtype=float)
    if w.ndim != 1 or w.size == 0 or not np.all(np.isfinite(w)) or w.min() < 0:
        raise ValueError("EPLB load must be a non-empty vector of non-negative numbers")
    if redundant < 0:
        raise ValueError(f"redundant experts must be >= 0, got {redundant}")
    nodes = nodes_for(gpus, gpus_per_node)
    total = w.size + redundant
    if total % gpus:
        raise ValueError(f"{w.size} experts + {redundant} redundant = {total} slots do not "
                         f"divide over {gpus} GPUs")
    if gpus % nodes:
        raise ValueError(f"{gpus} GPUs do not fill {nodes} nodes of {gpus_per_node} evenly")
    used = ("hierarchical" if groups % nodes == 0 else "global") if policy == "auto" else policy
    phy2log, _, _ = rebalance_experts(w[None, :], total, groups, nodes, gpus, used)
    phy2log = phy2log[0]
    slots = total // gpus
    gpu_of_slot = np.arange(total) // slots
    holds = np.zeros((w.size, gpus), bool)
    holds[phy2log, gpu_of_slot] = True
    merged = total - int(holds.sum())
    return EplbPlacement(Placement(tuple(tuple(np.flatnonzero(h)) for h in holds), gpus),
                         phy2log, used, nodes, slots, merged)


def route_token_balanced_slots(load, placement: EplbPlacement) -> Routing:
    """Token balancing (EPLB's, `routing.route_token_balanced`) over EPLB's physical slots:
    expert e's T_e tokens split evenly over its r_e slots in slot order (GPU-major), the first
    T_e mod r_e slots taking one extra. Unlike routing on the merged `Placement`, two slots of
    one expert on one GPU are two activated replicas there (two weight copies read), which is
    what a serving engine running EPLB's slot table does. load: trace or counts (E,)."""
    p, slots = placement.placement, placement.phy2log
    counts = expert_counts(load, p.experts)
    r = np.bincount(slots, minlength=p.experts)
    order = np.argsort(slots, kind="stable")  # slots of each expert, in slot order
    rank = np.empty(slots.size, np.int64)
    rank[order] = np.arange(slots.size) - np.repeat(np.cumsum(r) - r, r)
    t = counts[slots]
    x = t // r[slots] + (rank < t % r[slots])
    gpu = np.arange(slots.size) // placement.slots_per_gpu
    merged = np.zeros((p.experts, p.gpus), np.int64)
    np.add.at(merged, (slots, gpu), x)
    replica_tokens = merged[p.replica_expert, p.replica_gpu]
    rows = tuple(tuple(int(v) for v in x[(gpu == g) & (x > 0)]) for g in range(p.gpus))
    return Routing(p, "token_balanced", replica_tokens,
                   np.bincount(gpu[x > 0], minlength=p.gpus),
                   np.bincount(gpu, weights=x, minlength=p.gpus).astype(np.int64), rows)
