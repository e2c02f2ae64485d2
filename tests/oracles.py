"""Test oracles: alternative implementations that the tests (and benchmarks) check the product
against. They are not part of perfmodel: nothing in the package may call them.

    from tests.oracles import route_metro_sequential      # run from the repository root

MoE routing (perfmodel/ops/moe/routing.py; METRO, Yu et al., arXiv 2512.09277):
  route_metro_sequential  METRO Algorithm 1 transcribed line by line (the reference for
                          `routing.route_metro`);
  route_metro_fixpoint    the same greedy with numpy passes only (a second fast form; the
                          benchmark shows it slower than `route_metro` at decode sizes);
  route_optimal_milp      MIN-EXP-ROUTING as the paper's integer program (scipy's MILP), the
                          reference for `routing.route_optimal` (max-flow) on small cases.
Attention tiles (perfmodel/ops/attention/tiles.py):
  visited_by_rows         the tile pairs and unmasked scores of a mask counted row by row (the
                          reference for the closed form `tiles.visited`).
They use only the public API of perfmodel.ops.moe.routing (`Placement`, `Routing`,
`expert_counts`); the METRO helpers below are their own copies, so a bug in the product's helpers
cannot hide in an oracle that shares it.
"""
from __future__ import annotations

import numpy as np

from perfmodel.ops.moe.routing import Placement, Routing, expert_counts


def _whole(placement: Placement, counts: np.ndarray, chosen: np.ndarray, policy: str) -> Routing:
    """Routing that sends all of each active expert's tokens to one chosen replica (flat ids)."""
    x = np.zeros(placement.replica_gpu.size, np.int64)
    x[chosen] = counts[placement.replica_expert[chosen]]
    return Routing.from_replica_tokens(placement, policy, x)


def route_metro_sequential(load, placement: Placement) -> Routing:
    """METRO Algorithm 1 (§2.4), transcribed sequentially. For each expert with T[i] > 0, in
    expert id order (the paper runs one thread per expert; this is the serial schedule of those
    threads in id order): visit its candidate GPUs in GPU id order (the paper's lock order),
    take the one with the smallest activated count L[g] (first in id order on ties: a later
    candidate must be strictly smaller to win), set y_{i,g} = 1, L[g] += 1. x_{i,g} = T[i].
    `load`: a (tokens × top_k) trace of expert ids or tokens per expert (E,)."""
    p = placement
    counts = expert_counts(load, p.experts)
    activated = [0] * p.gpus
    chosen = []
    for i in range(p.experts):
        if counts[i] == 0:
            continue
        best = -1
        for j in range(p.offsets[i], p.offsets[i + 1]):  # replicas sorted by GPU id
            if best < 0 or activated[p.replica_gpu[j]] < activated[p.replica_gpu[best]]:
                best = j
        activated[p.replica_gpu[best]] += 1
        chosen.append(best)
    return _whole(p, counts, np.array(chosen, np.int64), "metro")


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


def route_metro_fixpoint(load, placement: Placement) -> Routing:
    """METRO Algorithm 1 with array passes only; identical to `route_metro_sequential` (tested).

    The replicated active experts' choices are the fixed point of "each expert takes the argmin
    of the counts left by the experts before it". From a guess (lowest GPU id), recompute every
    choice at once (cumulative sum over a one-hot matrix) and keep the rows up to and including
    the first change, which are then exact (induction: rows before it were exact and unchanged).
    Each pass fixes ≥ 1 row, so it ends; the pass count is the number of greedy corrections."""
    p = placement
    counts = expert_counts(load, p.experts)
    chosen_single, multi, forced = _metro_forced(p, counts)
    flat, gpu = _candidates(p, multi)
    forced = np.concatenate([forced, np.full((multi.size, 1), np.iinfo(np.int64).max // 2)], 1)
    rows, m = np.arange(multi.size), multi.size
    pick = np.zeros(m, np.int64)           # column of the chosen candidate
    start = 0                              # rows < start are final
    done = np.zeros(p.gpus + 1, np.int64)  # activated counts from the final rows
    while start < m:
        r, g = rows[: m - start], gpu[start:]
        onehot = np.zeros((m - start, p.gpus + 1), np.int64)
        onehot[r, g[r, pick[start:]]] = 1
        before = np.cumsum(onehot, axis=0)
        before += forced[start:] + done - onehot
        new = before[r[:, None], g].argmin(axis=1)   # first minimum = lowest GPU id on ties
        diff = np.flatnonzero(new != pick[start:])
        pick[start:] = new
        stop = m if diff.size == 0 else start + diff[0] + 1
        done += np.bincount(gpu[rows[start:stop], pick[start:stop]], minlength=p.gpus + 1)
        start = stop
    return _whole(p, counts, np.concatenate([chosen_single, flat[rows, pick]]), "metro")


def route_optimal_milp(load, placement: Placement) -> Routing:
    """MIN-EXP-ROUTING as the paper's integer program (§2.2), solved by scipy.optimize.milp; a
    cross-check for small cases (it does not assume Lemma 1: tokens may split). Variables per
    (active expert i, GPU g holding it): x ∈ {0..T_i} tokens, y ∈ {0,1} activated; plus λ.
    min λ s.t. Σ_i y_ig ≤ λ, Σ_g x_ig = T_i, x_ig ≤ T_i·y_ig."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    p = placement
    counts = expert_counts(load, p.experts)
    reps = np.flatnonzero(counts[p.replica_expert] > 0)  # replicas of active experts
    n = reps.size
    if n == 0:
        return Routing.from_replica_tokens(p, "optimal", np.zeros(p.replica_gpu.size))
    t = counts[p.replica_expert[reps]].astype(float)
    nvar = 2 * n + 1                                       # x (n), y (n), λ
    per_gpu = np.zeros((p.gpus, nvar))
    per_gpu[p.replica_gpu[reps], n + np.arange(n)] = 1.0
    per_gpu[:, -1] = -1.0
    active = np.unique(p.replica_expert[reps])
    per_expert = np.zeros((active.size, nvar))
    per_expert[np.searchsorted(active, p.replica_expert[reps]), np.arange(n)] = 1.0
    link = np.zeros((n, nvar))
    link[np.arange(n), np.arange(n)] = 1.0
    link[np.arange(n), n + np.arange(n)] = -t
    res = milp(c=np.r_[np.zeros(2 * n), 1.0], integrality=np.r_[np.ones(2 * n), 0.0],
               bounds=Bounds(np.zeros(nvar), np.r_[t, np.ones(n), np.inf]),
               constraints=[LinearConstraint(per_gpu, -np.inf, 0.0),
                            LinearConstraint(per_expert, counts[active], counts[active]),
                            LinearConstraint(link, -np.inf, 0.0)])
    if not res.success:
        raise RuntimeError(f"MILP routing failed: {res.message}")
    x = np.zeros(p.replica_gpu.size, np.int64)
    x[reps] = np.round(res.x[:n]).astype(np.int64)
    return Routing.from_replica_tokens(p, "optimal", x)


def visited_by_rows(seq_q: int, seq_kv: int, causal: bool, window: int | None, bm: int, bn: int
                    ) -> tuple[int, int]:
    """(tile pairs computed, unmasked scores) for one head, bottom-right aligned masks, from
    every query row's key range (O(seq_q)): the reference for `tiles.visited`."""
    rows = np.arange(seq_q, dtype=np.int64)
    offset = seq_kv - seq_q
    hi = np.minimum(rows + offset, seq_kv - 1) if causal else np.full(seq_q, seq_kv - 1)
    lo = np.maximum(rows + offset - window + 1, 0) if window else np.zeros(seq_q, np.int64)
    scores = int(np.clip(hi - lo + 1, 0, None).sum())
    starts = rows[::bm]
    ends = np.minimum(starts + bm, seq_q) - 1
    t_lo, t_hi = lo[starts] // bn, hi[ends] // bn
    pairs = int(np.clip(t_hi - t_lo + 1, 0, None)[hi[ends] >= lo[starts]].sum())
    return pairs, scores
