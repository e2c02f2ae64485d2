"""Expert placement and replica routing for expert-parallel MoE decode.

Follows METRO (Yu et al., arXiv 2512.09277; notes in docs/studies.md §2). In decode a
GPU's MoE time is set by its *activated replicas* (replicas that get ≥ 1 token: each one costs a
full read of the expert's weights), not by its tokens (§2.1). Given a placement (which GPUs hold a
replica of which expert) and the tokens each expert got from the gate's top-k, a routing policy
decides how many of each expert's tokens go to each of its replicas:

  token_balanced   EPLB: split every expert's tokens evenly over its replicas (§2.1)
  metro            METRO Algorithm 1: each active expert goes whole to one replica, the one on the
                   candidate GPU with the fewest activated replicas so far (§2.4)
  optimal          minimize the max activated replicas per GPU (MIN-EXP-ROUTING, §2.2–2.3)
  uniform          each token to a uniformly random replica of its expert

Units: tokens are token-expert assignments (a token routed to k experts counts k times); GPU ids
are 0..G−1; expert ids 0..E−1. A replica is identified by (expert, GPU): no GPU holds two replicas
of one expert, so `Placement.replicas[e]` is kept sorted by GPU id and flat replica arrays list
replicas expert-major in that order. A policy's `load` is one step's routed tokens: a
(tokens × top_k) trace of expert ids, or the tokens of each expert (E,) (`expert_counts` turns
either into the latter); `place_eplb`'s `load` is the same per-expert quantity from earlier steps.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

POLICIES = ("token_balanced", "metro", "optimal", "uniform")  # the routing policies (one list)


@dataclass(frozen=True, eq=False)
class Placement:
    """replicas[e] = GPU ids holding a replica of expert e (sorted here); `gpus` = G.

    Derived flat arrays (length R = total replicas, expert-major): replica_expert, replica_gpu;
    offsets (E+1) so expert e's replicas are [offsets[e], offsets[e+1]); counts (E) replicas per
    expert; holds (E × G bool) = METRO's placement matrix A (§2.2)."""
    replicas: tuple
    gpus: int

    def __post_init__(self):
        if self.gpus < 1:
            raise ValueError(f"gpus must be >= 1, got {self.gpus}")
        reps = tuple(tuple(sorted(int(g) for g in r)) for r in self.replicas)
        for e, r in enumerate(reps):
            if not r:
                raise ValueError(f"expert {e} has no replica")
            if r[0] < 0 or r[-1] >= self.gpus:
                raise ValueError(f"expert {e}: GPU ids {list(r)} outside 0..{self.gpus - 1}")
            if len(set(r)) != len(r):
                raise ValueError(f"expert {e}: two replicas on one GPU ({list(r)})")
        counts = np.array([len(r) for r in reps], dtype=np.int64)
        gpu = np.fromiter((g for r in reps for g in r), dtype=np.int64, count=int(counts.sum()))
        holds = np.zeros((len(reps), self.gpus), bool)
        expert = np.repeat(np.arange(len(reps)), counts)
        holds[expert, gpu] = True
        for name, value in dict(replicas=reps, counts=counts, replica_gpu=gpu, holds=holds,
                                replica_expert=expert,
                                offsets=np.concatenate([[0], np.cumsum(counts)])).items():
            object.__setattr__(self, name, value)

    @property
    def experts(self) -> int:
        return len(self.replicas)

    @property
    def replicas_per_gpu(self) -> np.ndarray:
        """Replicas held by each GPU (G,)."""
        return np.bincount(self.replica_gpu, minlength=self.gpus)


@dataclass(frozen=True, eq=False)
class Routing:
    """Where each expert's tokens go. replica_tokens (R,): tokens sent to each replica (flat,
    Placement order); activated_per_gpu (G,): replicas with ≥ 1 token on each GPU (what sets
    memory-bound time); tokens_per_gpu (G,): token-expert assignments computed on each GPU."""
    placement: Placement
    policy: str
    replica_tokens: np.ndarray
    activated_per_gpu: np.ndarray
    tokens_per_gpu: np.ndarray
    # Per GPU, the tokens of each activated physical slot, where that differs from one row per
    # replica: DeepSeek's EPLB can put two slots of one expert on a GPU, and token balancing
    # feeds (and reads the weights of) both (`perfmodel.ops.moe.eplb`). None: gpu_rows() below.
    slot_rows: tuple | None = None

    @classmethod
    def from_replica_tokens(cls, placement: Placement, policy: str, replica_tokens) -> Routing:
        x = np.asarray(replica_tokens, dtype=np.int64)
        gpu = placement.replica_gpu
        return cls(placement, policy, x, np.bincount(gpu[x > 0], minlength=placement.gpus),
                   np.bincount(gpu, weights=x, minlength=placement.gpus).astype(np.int64))

    @property
    def max_activated(self) -> int:
        """λ of §2.2: the largest activated-replica count on any GPU."""
        return int(self.activated_per_gpu.max(initial=0))

    def expert_tokens(self, expert: int) -> np.ndarray:
        """Tokens of `expert` on each of its replicas (in placement.replicas[expert] order)."""
        o = self.placement.offsets
        return self.replica_tokens[o[expert]:o[expert + 1]]

    def expert_gpu_tokens(self) -> np.ndarray:
        """x_{i,g} of §2.2 as an (E × G) int matrix."""
        p = self.placement
        out = np.zeros((p.experts, p.gpus), np.int64)
        out[p.replica_expert, p.replica_gpu] = self.replica_tokens
        return out

    def gpu_rows(self) -> list[list[int]]:
        """Per GPU, the token count of each activated replica (the grouped GEMM's row groups)."""
        if self.slot_rows is not None:
            return [list(r) for r in self.slot_rows]
        x, g = self.replica_tokens, self.placement.replica_gpu
        rows: list[list[int]] = [[] for _ in range(self.placement.gpus)]
        for j in np.flatnonzero(x):
            rows[g[j]].append(int(x[j]))
        return rows


def expert_counts(load, experts: int) -> np.ndarray:
    """Tokens per expert (E,) int64 from a trace (tokens × top_k ids) or from counts (E,)."""
    routed = np.asarray(load)
    if routed.ndim == 2:
        if routed.size and (routed.min() < 0 or routed.max() >= experts):
            raise ValueError(f"trace has expert ids outside 0..{experts - 1}")
        return np.bincount(routed.ravel().astype(np.int64), minlength=experts)
    if routed.ndim != 1 or routed.size != experts or (routed.size and routed.min() < 0):
        raise ValueError(f"expected a (tokens × top_k) trace or {experts} non-negative "
                         f"per-expert token counts, got shape {routed.shape}")
    return routed.astype(np.int64)


# ------------------------------------------------------------------------------- placement ----

def place_contiguous(experts: int, gpus: int) -> Placement:
    """No replication: expert e on GPU ⌊e·G/E⌋ (blocks of E/G consecutive experts)."""
    return Placement(tuple((e * gpus // experts,) for e in range(experts)), gpus)


def total_replicas(experts: int, replication: float) -> int:
    """Replicas of `experts` experts at `replication` replicas per expert: round(E·replication),
    halves rounded up (the count EPLB's placements and the redundant slots are made from)."""
    return int(math.floor(experts * replication + 0.5))


def replica_counts(load, gpus: int, replication: float) -> np.ndarray:
    """Replicas per expert (E,), at least 1 and at most G, summing to R = round(E·replication).
    Each extra replica goes to the expert with the most load per replica (DeepSeek EPLB's
    `replicate_experts`, a D'Hondt apportionment: counts come out proportional to load).
    Ties go to the lower expert id; zero total load counts as uniform load."""
    w = np.asarray(load, dtype=float)
    e = w.size
    total = total_replicas(e, replication)
    if not e <= total <= e * gpus:
        raise ValueError(f"replication {replication} gives {total} replicas of {e} experts; "
                         f"need between {e} (one each) and {e * gpus} (one per GPU each)")
    if w.min(initial=0) < 0:
        raise ValueError("expert load must be >= 0")
    w = w if w.sum() > 0 else np.ones(e)
    counts = np.ones(e, np.int64)
    for _ in range(total - e):
        counts[np.argmax(np.where(counts < gpus, w / counts, -1.0))] += 1
    return counts


def place_eplb(load, gpus: int, replication: float) -> Placement:
    """EPLB-style placement (§2.1, §2.5 "placement and replication stay EPLB's").

    load (E,): recent tokens per expert (any non-negative unit). Replica counts from
    `replica_counts`; then each replica, carrying load/count, is placed largest first (ties: lower
    expert id) onto the least-loaded GPU (ties: fewer replicas, then lower id) that has a free slot
    and no replica of that expert yet. Slots per GPU = ⌈R/G⌉, so every GPU holds R/G replicas
    when G divides R. If every GPU with a free slot already holds the expert, a swap makes room
    (always possible, see `_make_room`)."""
    w = np.asarray(load, dtype=float)
    w = w if w.sum() > 0 else np.ones(w.size)
    counts = replica_counts(w, gpus, replication)
    slots = -(-int(counts.sum()) // gpus)
    per_replica = w / counts
    holds = np.zeros((w.size, gpus), bool)
    gpu_load, gpu_used = np.zeros(gpus), np.zeros(gpus, np.int64)
    for e in np.lexsort((np.arange(w.size), -per_replica)):
        for _ in range(counts[e]):
            ok = ~holds[e] & (gpu_used < slots)
            if not ok.any():
                _make_room(e, holds, gpu_load, gpu_used, per_replica, slots)
                ok = ~holds[e] & (gpu_used < slots)
            cand = np.flatnonzero(ok)
            g = cand[np.lexsort((cand, gpu_used[cand], gpu_load[cand]))[0]]
            holds[e, g] = True
            gpu_load[g] += per_replica[e]
            gpu_used[g] += 1
    return Placement(tuple(tuple(np.flatnonzero(h)) for h in holds), gpus)


def _make_room(e, holds, gpu_load, gpu_used, per_replica, slots) -> None:
    """Free a slot for expert e on a GPU without e. Every GPU with a free slot holds e, so pick
    one (h) and a full GPU g without e; g has some expert j that h lacks (else h would hold g's
    `slots` experts plus e, over its slots). Move j from g to h; g now has a free slot."""
    h = np.flatnonzero(gpu_used < slots)[0]
    g = np.flatnonzero(~holds[e])[0]
    j = np.flatnonzero(holds[:, g] & ~holds[:, h])[0]
    holds[j, g], holds[j, h] = False, True
    gpu_load[g] -= per_replica[j]
    gpu_load[h] += per_replica[j]
    gpu_used[g] -= 1
    gpu_used[h] += 1


# --------------------------------------------------------------------------------- routing ----

def _whole(placement: Placement, counts: np.ndarray, chosen: np.ndarray, policy: str) -> Routing:
    """Routing that sends all of each active expert's tokens to one chosen replica (flat ids)."""
    x = np.zeros(placement.replica_gpu.size, np.int64)
    x[chosen] = counts[placement.replica_expert[chosen]]
    return Routing.from_replica_tokens(placement, policy, x)


def route_token_balanced(load, placement: Placement) -> Routing:
    """EPLB routing (§2.1): expert e's T_e tokens split evenly over its r_e replicas, the first
    T_e mod r_e replicas (by GPU id) taking one extra. Every replica gets a token once T_e ≥ r_e,
    which is why token balancing inflates activated replicas in decode."""
    p = placement
    t = expert_counts(load, p.experts)[p.replica_expert]
    r = p.counts[p.replica_expert]
    rank = np.arange(p.replica_expert.size) - p.offsets[p.replica_expert]
    return Routing.from_replica_tokens(p, "token_balanced", t // r + (rank < t % r))


def route_uniform(load, placement: Placement, seed: int = 0) -> Routing:
    """Each token-expert assignment goes to a uniformly random replica of its expert (seeded
    numpy Generator; per-expert counts are expanded to one entry per token first)."""
    p = placement
    routed = np.asarray(load)
    counts = expert_counts(routed, p.experts)  # also validates the ids
    expert_ids = (routed.ravel().astype(np.int64) if routed.ndim == 2  # one per assignment
                  else np.repeat(np.arange(p.experts), counts))
    rank = (np.random.default_rng(seed).random(expert_ids.size) * p.counts[expert_ids]
            ).astype(np.int64)
    x = np.bincount(p.offsets[expert_ids] + rank, minlength=p.replica_gpu.size)
    return Routing.from_replica_tokens(p, "uniform", x)


def _candidates(p: Placement, experts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(M × rmax) flat replica ids and GPU ids of the given experts' replicas, padded with −1 / G
    (GPU column G of the count matrices holds +inf, so padding never wins an argmin)."""
    width = int(p.counts[experts].max(initial=1))
    col = np.arange(width)
    valid = col[None, :] < p.counts[experts][:, None]
    flat = np.where(valid, p.offsets[experts][:, None] + col, -1)
    return flat, np.where(valid, p.replica_gpu[np.maximum(flat, 0)], p.gpus)


def _metro_forced(p: Placement, counts: np.ndarray):
    """Split the active experts for METRO: single-replica ones have no choice (their flat replica
    ids), replicated ones (ids, in id order) need one; and, for each replicated expert, the
    activated counts per GPU left by the single-replica experts with a lower id (a prefix sum)."""
    active = counts > 0
    single = active & (p.counts == 1)
    multi = np.flatnonzero(active & (p.counts > 1))
    chosen_single = p.offsets[:-1][single]
    forced = np.zeros((p.experts + 1, p.gpus), np.int64)
    forced[1:][single, p.replica_gpu[chosen_single]] = 1
    return chosen_single, multi, np.cumsum(forced, axis=0)[multi]


def route_metro(load, placement: Placement) -> Routing:
    """METRO Algorithm 1 (§2.4): in expert id order, each active expert goes whole to the replica
    whose GPU has the fewest activated replicas so far (first in GPU id order on ties). Tested
    identical to a line-by-line transcription (`tests/oracles.py: route_metro_sequential`).

    Experts with one replica (most of them at EPLB replication ≤ 1.5) have no choice, so their
    share of the counts L[g] is a numpy prefix sum (`_metro_forced`); only the replicated active
    experts run the greedy, as a scalar loop over Python lists. The greedy is inherently
    sequential: a fully array-based form (`tests/oracles.py: route_metro_fixpoint`) needs 3–45
    numpy passes at E = 256 and is slower than this loop at these sizes
    (benchmarks/moe_routing_speed.py)."""
    p = placement
    counts = expert_counts(load, p.experts)
    chosen_single, multi, forced = _metro_forced(p, counts)
    offsets, replica_gpu = p.offsets.tolist(), p.replica_gpu.tolist()
    flexible = [0] * p.gpus            # activated counts from replicated experts so far
    chosen = []
    for i, before in zip(multi.tolist(), forced.tolist()):
        best, best_count = -1, None
        for j in range(offsets[i], offsets[i + 1]):  # GPU id order; strict < keeps the first tie
            c = before[replica_gpu[j]] + flexible[replica_gpu[j]]
            if best_count is None or c < best_count:
                best, best_count = j, c
        flexible[replica_gpu[best]] += 1
        chosen.append(best)
    return _whole(p, counts, np.concatenate([chosen_single, np.array(chosen, np.int64)]),
                  "metro")


def route_metro_forced_first(load, placement: Placement) -> Routing:
    """METRO's greedy (§2.4) with the counters L[g] started from every single-replica active
    expert (they have no choice) before the replicated ones choose, in expert id order. Not
    the paper's order: Algorithm 1 runs all experts in parallel, so a replicated expert with a
    low id sees few of the forced ones. Used by the study to show how much of METRO's gap to
    the optimum on recorded loads is that ordering (docs/studies.md §2.8)."""
    p = placement
    counts = expert_counts(load, p.experts)
    chosen_single, multi, _ = _metro_forced(p, counts)
    load_per_gpu = np.bincount(p.replica_gpu[chosen_single], minlength=p.gpus).tolist()
    offsets, replica_gpu = p.offsets.tolist(), p.replica_gpu.tolist()
    chosen = []
    for i in multi.tolist():
        best = min(range(offsets[i], offsets[i + 1]), key=lambda j: load_per_gpu[replica_gpu[j]])
        load_per_gpu[replica_gpu[best]] += 1
        chosen.append(best)
    return _whole(p, counts, np.concatenate([chosen_single, np.array(chosen, np.int64)]),
                  "metro_forced_first")


def route_optimal(load, placement: Placement, flow_func=None) -> Routing:
    """Minimum max activated replicas per GPU (MIN-EXP-ROUTING, §2.2–2.3). By Lemma 1 an optimum
    sends each active expert whole to one replica, so this is makespan scheduling of unit jobs on
    restricted machines: binary search on λ, each λ tested by max-flow (networkx) on
    source →(1) active expert →(1) its replica GPUs → GPU →(λ − fixed_g) sink; feasible iff the
    flow saturates every expert. Experts with a single replica are fixed beforehand (fixed_g of
    them on GPU g), which keeps the graph small. Search range: λ ≥ max(⌈active/G⌉, max fixed_g);
    METRO's λ is feasible, so it is the upper end (and its routing is returned if optimal).
    Tested against the paper's integer program (`tests/oracles.py: route_optimal_milp`)."""
    p = placement
    counts = expert_counts(load, p.experts)
    metro = route_metro(counts, p)
    chosen_single, multi, _ = _metro_forced(p, counts)
    fixed = np.bincount(p.replica_gpu[chosen_single], minlength=p.gpus)
    lo = max(-(-int((counts > 0).sum()) // p.gpus), int(fixed.max(initial=0)))
    hi = metro.max_activated
    if lo >= hi:
        return Routing(p, "optimal", metro.replica_tokens, metro.activated_per_gpu,
                       metro.tokens_per_gpu)
    import networkx as nx  # imported on use: it is slow to import and only this policy needs it

    m, source, sink = multi.size, multi.size + p.gpus, multi.size + p.gpus + 1
    flat, gpu = _candidates(p, multi)
    graph = nx.DiGraph()
    graph.add_edges_from((source, k, {"capacity": 1}) for k in range(m))
    ks, cs = np.nonzero(flat >= 0)
    graph.add_edges_from((int(k), m + int(gpu[k, c]), {"capacity": 1}) for k, c in zip(ks, cs))
    best = None
    while lo < hi:
        lam = (lo + hi) // 2
        for g in range(p.gpus):
            graph.add_edge(m + g, sink, capacity=int(lam - fixed[g]))
        value, flow = nx.maximum_flow(graph, source, sink, flow_func=flow_func)
        if value == m:
            hi, best = lam, flow
        else:
            lo = lam + 1
    if best is None:  # nothing below METRO's λ is feasible
        return Routing(p, "optimal", metro.replica_tokens, metro.activated_per_gpu,
                       metro.tokens_per_gpu)
    pick = np.zeros(m, np.int64)  # the candidate column whose expert → GPU edge carries flow
    for k, c in zip(ks, cs):
        if best[int(k)].get(m + int(gpu[k, c]), 0) > 0:
            pick[k] = c
    return _whole(p, counts, np.concatenate([chosen_single, flat[np.arange(m), pick]]),
                  "optimal")


def route(policy: str, load, placement: Placement, seed: int = 0) -> Routing:
    """Dispatch by policy name (POLICIES); `seed` is used by 'uniform' only."""
    if policy == "uniform":
        return route_uniform(load, placement, seed)
    table = {"token_balanced": route_token_balanced, "metro": route_metro,
             "optimal": route_optimal}
    if policy not in table:
        raise ValueError(f"routing policy must be one of {POLICIES}, got {policy!r}")
    return table[policy](load, placement)
