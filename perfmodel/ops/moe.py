"""Mixture-of-experts FFN layer under expert parallelism (first version; the MoE issue deepens it).

Tokens pick `top_k` of `experts` (seeded synthetic routing: uniform, or Zipf-skewed popularity
p_e ∝ (e+1)^−skew; or a trace file). Experts (and, with replication > 1, replicas of the most
loaded experts) are placed on `gpus`; a routing policy sends each expert's tokens to replicas:
  token_balanced  split every expert's tokens evenly over its replicas (EPLB);
  metro           each active expert goes whole to the replica whose GPU has the fewest activated
                  replicas so far, GPUs visited in id order (METRO, Algorithm 1);
  uniform         each token to a random replica.
Per GPU the grouped GEMM reads every activated replica's gate/up/down weights (3·h·f elements)
and multiplies its tokens (rows padded to the 64-row MMA tile). In decode the weight bytes
dominate, so time follows activated experts per GPU, not tokens (METRO's observation). The layer
time is the slowest GPU's.
"""
from __future__ import annotations

import math

import numpy as np

from ..demand import Demand, LaunchShape
from ..engine import pipes
from ..errors import InputError
from ..units import bytes_per_element, tensor_dtype
from .base import Op, Param, positive

# Above this many token × expert draws, route by per-expert counts instead of per token
# (prefill and training batches: every expert is active anyway).
EXACT_ROUTING_LIMIT = 1 << 21
MMA_ROWS = 64  # smallest MMA tile in M (Hopper wgmma m64; tcgen05 M = 64)
TILE_N = 128


def route(tokens: int, experts: int, top_k: int, skew: float, seed: int) -> np.ndarray:
    """tokens × top_k expert ids without repeats per token (Gumbel top-k on log-popularity)."""
    rng = np.random.default_rng(seed)
    logp = -skew * np.log(np.arange(1, experts + 1, dtype=float))
    keys = logp[None, :] + rng.gumbel(size=(tokens, experts))
    return np.argpartition(-keys, top_k - 1, axis=1)[:, :top_k]


def routed_counts(tokens: int, experts: int, top_k: int, skew: float, seed: int) -> np.ndarray:
    """Tokens per expert for large batches: tokens·top_k picks from the popularity (the
    no-repeat-per-token constraint is negligible when tokens ≫ experts)."""
    p = np.arange(1, experts + 1, dtype=float) ** -skew
    return np.random.default_rng(seed).multinomial(tokens * top_k, p / p.sum())


def load_trace(path: str, top_k: int) -> np.ndarray:
    """Per-token expert ids from a CSV (one token per row) or an NPZ with array `experts`."""
    try:
        if path.endswith(".npz"):
            ids = np.load(path)["experts"]
        else:
            ids = np.loadtxt(path, delimiter=",", dtype=np.int64, ndmin=2)
    except (OSError, KeyError, ValueError) as e:
        raise InputError(f"{path}: cannot read routing trace ({e})") from None
    if ids.ndim != 2 or ids.shape[1] != top_k:
        raise InputError(f"{path}: expected one row of {top_k} expert ids per token, "
                         f"got shape {ids.shape}")
    return ids


def place(load: np.ndarray, gpus: int, replicas: int) -> list[list[int]]:
    """GPU ids of each expert's replicas: one per expert in contiguous blocks, extra replicas for
    the most loaded experts on the GPU with the fewest replicas (EPLB-style greedy)."""
    e = len(load)
    homes = [[i * gpus // e] for i in range(e)]
    count = np.bincount([h[0] for h in homes], minlength=gpus).astype(float)
    order = np.argsort(-load / 1.0, kind="stable")
    for i in range(replicas - e):
        ex = int(order[i % e])
        candidates = [g for g in np.argsort(count, kind="stable") if g not in homes[ex]]
        g = int(candidates[0]) if candidates else homes[ex][0]
        homes[ex].append(g)
        count[g] += 1
    return homes


def assign(tokens_per_expert: np.ndarray, homes: list[list[int]], gpus: int, routing: str,
           seed: int) -> tuple[np.ndarray, list[list[int]]]:
    """(activated replicas per GPU, token counts of each activated replica per GPU)."""
    rows: list[list[int]] = [[] for _ in range(gpus)]
    rng = np.random.default_rng(seed + 1)
    if routing == "metro":
        activated = np.zeros(gpus, int)
        for ex in np.flatnonzero(tokens_per_expert):
            g = min(homes[ex], key=lambda x: (activated[x], x))
            activated[g] += 1
            rows[g].append(int(tokens_per_expert[ex]))
    else:
        for ex in np.flatnonzero(tokens_per_expert):
            t, reps = int(tokens_per_expert[ex]), homes[ex]
            if routing == "token_balanced":
                share = [t // len(reps) + (i < t % len(reps)) for i in range(len(reps))]
            else:  # uniform: each token to a random replica
                share = np.bincount(rng.integers(0, len(reps), t), minlength=len(reps))
            for g, s in zip(reps, share):
                if s:
                    rows[g].append(int(s))
    return np.array([len(r) for r in rows]), rows


class Moe(Op):
    name = "moe"
    EXAMPLE = dict(tokens=256, experts=64, top_k=4, hidden=2048, expert_hidden=1024, dtype="bf16",
                   gpus=8)
    PARAMS = {
        "tokens": positive("tokens", "tokens in the batch (all GPUs)"),
        "experts": positive("experts", "routed experts"),
        "top_k": positive("experts", "experts per token"),
        "hidden": positive("elements", "model hidden size"),
        "expert_hidden": positive("elements", "expert FFN intermediate size"),
        "dtype": Param("dtype", required=True, choices=("bf16", "fp16", "fp8", "fp8_e4m3",
                                                        "mxfp8", "nvfp4", "mxfp4")),
        "gpus": positive("GPUs", "expert-parallel GPUs"),
        "replication": Param("float", default=1.0, lo=1.0, hi=8.0,
                             doc="expert replicas / experts"),
        "routing": Param("choice", default="token_balanced",
                         choices=("token_balanced", "metro", "optimal", "uniform")),
        "shared_experts": Param("int", default=0, lo=0),
        "skew": Param("float", default=0.0, lo=0.0, doc="Zipf exponent of expert popularity"),
        "seed": Param("int", default=0, lo=0),
        "trace": Param("path", default=None, nullable=True, doc="routing trace (CSV or NPZ)"),
    }
    SIZE_PARAMS = ("hidden", "expert_hidden")

    def check(self, v):
        out = []
        if v["top_k"] > v["experts"]:
            out.append(("top_k", f"top_k ({v['top_k']}) exceeds experts ({v['experts']})"))
        if v["experts"] % v["gpus"]:
            out.append(("gpus", f"experts ({v['experts']}) must divide evenly over gpus "
                                f"({v['gpus']})"))
        if v["routing"] == "optimal":
            out.append(("routing", "'optimal' (max-flow routing) is not available yet; use "
                                   "token_balanced, metro or uniform"))
        return out

    def per_gpu_rows(self) -> list[list[int]]:
        if self.trace:
            ids = load_trace(self.trace, self.top_k)
            per_expert = np.bincount(ids.ravel(), minlength=self.experts)[: self.experts]
        elif self.tokens * self.experts <= EXACT_ROUTING_LIMIT:
            ids = route(self.tokens, self.experts, self.top_k, self.skew, self.seed)
            per_expert = np.bincount(ids.ravel(), minlength=self.experts)
        else:  # many tokens: per-expert counts from a multinomial over the popularity
            per_expert = routed_counts(self.tokens, self.experts, self.top_k, self.skew,
                                       self.seed)
        replicas = max(self.experts, round(self.experts * self.replication))
        homes = place(per_expert.astype(float), self.gpus, replicas)
        return assign(per_expert, homes, self.gpus, self.routing, self.seed)[1]

    def demand(self, hw):
        if not hw.supports(self.dtype):
            raise InputError(f"moe dtype '{self.dtype}' is not supported by {hw.name}'s tensor "
                             f"cores")
        demands = [self._gpu_demand(hw, rows) for rows in self.per_gpu_rows()]
        return max(demands, key=lambda d: pipes(d, hw).time_s)

    def _gpu_demand(self, hw, rows: list[int]) -> Demand:
        h, f = self.hidden, self.expert_hidden
        w = bytes_per_element(self.dtype)
        act = 2.0  # activations in BF16
        shared_rows = math.ceil(self.tokens / self.gpus) if self.shared_experts else 0
        groups = rows + [shared_rows] * self.shared_experts
        tokens = float(sum(groups))
        weights = len(groups) * 3.0 * h * f * w
        padded = sum(math.ceil(t / MMA_ROWS) * MMA_ROWS for t in groups)
        tiles = sum(math.ceil(t / MMA_ROWS) for t in groups) * (
            math.ceil(2 * f / TILE_N) + math.ceil(h / TILE_N))
        hbm = weights + tokens * (2 * h + 3 * f) * act  # x in, y out, gate/up/act intermediates
        work = {f"tensor:{tensor_dtype(self.dtype)}": 2.0 * padded * 3 * h * f,
                "fma": tokens * 3 * f, "xu": tokens * f,  # SiLU(gate)·up epilogue
                "l2": hbm, "hbm": hbm}
        launch = LaunchShape(ctas=max(1, tiles), threads_per_cta=384, registers_per_thread=168,
                             smem_per_cta_bytes=160 * 1024,
                             bytes_in_flight_per_cta=128 * 1024)
        return Demand(work=work, launch=launch, flop=2.0 * tokens * 3 * h * f, hbm_bytes=hbm,
                      kernels=2,  # grouped GEMM gate/up, grouped GEMM down
                      details={"activated_replicas": len(rows), "tokens_on_gpu": tokens})
