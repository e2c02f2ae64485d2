"""Mixture-of-experts FFN layer under expert parallelism (METRO, arXiv:2512.09277).

Tokens pick `top_k` of `experts` (seeded synthetic routing: uniform, or Zipf-skewed popularity;
or a trace file; `perfmodel.ops.moe.traces`). Experts, and with replication > 1 extra replicas of
the most loaded ones (EPLB placement), sit on `gpus`; a routing policy (`perfmodel.ops.moe.routing`)
sends each expert's tokens to replicas:
  token_balanced  split every expert's tokens evenly over its replicas (EPLB);
  metro           each active expert goes whole to the replica whose GPU has the fewest activated
                  replicas so far (METRO, Algorithm 1);
  optimal         minimum over routings of the max activated replicas per GPU (max-flow);
  uniform         each token to a random replica.
Per GPU the grouped GEMM reads every activated replica's gate/up/down weights (3·h·f elements)
and multiplies its tokens (rows padded to the 64-row MMA tile). In decode the weight bytes
dominate, so time follows activated experts per GPU, not tokens (METRO's observation). The layer
waits for its slowest GPU: the op returns every GPU's demand and the engine keeps the slowest.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from perfmodel.demand import Choice, Demand, LaunchShape
from perfmodel.errors import InputError
from perfmodel.units import bytes_per_element, tensor_dtype
from perfmodel.ops.moe.routing import POLICIES, Routing, place_contiguous, place_eplb
from perfmodel.ops.moe.routing import route as route_tokens
from perfmodel.ops.moe.traces import load_trace, popularity, synthetic_trace
from perfmodel.ops.base import Op, Param, positive

# Above this many token × expert draws, route by per-expert counts instead of per token
# (prefill and training batches: every expert is active anyway).
EXACT_ROUTING_LIMIT = 1 << 21
MMA_ROWS = 64  # smallest MMA tile in M (Hopper wgmma m64; tcgen05 M = 64)
TILE_N = 128


def routed_counts(tokens: int, experts: int, top_k: int, skew: float, seed: int) -> np.ndarray:
    """Tokens per expert for large batches: tokens·top_k picks from the popularity (the
    no-repeat-per-token constraint is negligible when tokens ≫ experts)."""
    kind = "zipf" if skew > 0 else "uniform"
    p = popularity(experts, kind, skew, np.random.default_rng(seed))
    return np.random.default_rng(seed).multinomial(tokens * top_k, p)


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
        "routing": Param("choice", default="token_balanced", choices=POLICIES),
        "shared_experts": Param("int", default=0, lo=0),
        "skew": Param("float", default=0.0, lo=0.0, hi=8.0,
                      doc="Zipf exponent of expert popularity (0: uniform)"),
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
        return out

    def expert_counts(self) -> np.ndarray:
        """Tokens routed to each expert in this step (trace, or seeded synthetic routing)."""
        if self.trace:
            ids = load_trace(self.trace, self.top_k, self.experts)
        elif self.tokens * self.experts <= EXACT_ROUTING_LIMIT:
            ids = synthetic_trace(self.tokens, self.experts, self.top_k,
                                  "zipf" if self.skew > 0 else "uniform", self.skew, self.seed)
        else:  # many tokens: per-expert counts from a multinomial over the popularity
            return routed_counts(self.tokens, self.experts, self.top_k, self.skew, self.seed)
        return np.bincount(ids.ravel(), minlength=self.experts)

    @functools.cached_property
    def routing_result(self) -> Routing:
        """EPLB placement (replicas from this step's load: an oracle for EPLB's statistics) and
        the routing policy's assignment of tokens to replicas."""
        counts = self.expert_counts()
        placement = (place_contiguous(self.experts, self.gpus) if self.replication == 1.0
                     else place_eplb(counts.astype(float), self.gpus, self.replication))
        return route_tokens(self.routing, counts, placement, self.seed)

    def per_gpu_rows(self) -> list[list[int]]:
        return self.routing_result.gpu_rows()

    def demand(self, hw) -> Choice:
        if not hw.supports(self.dtype):
            raise InputError(f"moe dtype '{self.dtype}' is not supported by {hw.name}'s tensor "
                             f"cores")
        return Choice(tuple(self._gpu_demand(rows) for rows in self.per_gpu_rows()),
                      pick="slowest")

    def _gpu_demand(self, rows: list[int]) -> Demand:
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
