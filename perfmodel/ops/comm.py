"""Collectives over NVLink/PCIe (first version; per-GPU time of the slowest GPU).

Ring algorithms (Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
workstations", JPDC 2009; NCCL's ring): with G GPUs and a buffer of S bytes each GPU sends
  all-reduce        2 (G−1)/G · S   in 2 (G−1) steps
  all-gather        (G−1)/G · S     in (G−1) steps   (S = the gathered output)
  reduce-scatter    (G−1)/G · S     in (G−1) steps   (S = the full input)
  all-to-all        (G−1)/G · S     in (G−1) pairwise steps
Tree all-reduce (NCCL double binary tree) moves the same bytes in 2·log2(G) steps. One-shot
all-reduce (vLLM's and TensorRT-LLM's custom all-reduce for small messages over NVLink/NVSwitch)
reads every peer's whole buffer in one step: (G−1)·S bytes in per GPU, one latency. `auto` offers
every algorithm and the engine keeps the fastest, as those engines switch by message size. The op
counts steps; the engine charges each the link's latency. Reductions add one read-modify-write
of the received bytes in HBM.
"""
from __future__ import annotations

import math

from perfmodel.demand import Choice, Demand
from perfmodel.ops.base import Op, Param


class _Collective(Op):
    PARAMS = {
        "bytes": Param("float", required=True, lo=1, unit="bytes", doc="buffer size per GPU"),
        "gpus": Param("int", required=True, lo=1, doc="GPUs in the group"),
        "link": Param("str", default="nvlink", doc="link name in the hardware spec"),
        "algorithm": Param("choice", default="ring", choices=("ring", "tree", "oneshot", "auto"),
                           doc="oneshot: all-reduce only; auto: the fastest available"),
    }
    SIZE_PARAMS = ("bytes",)
    EXAMPLE = dict(bytes=1e8, gpus=8)
    SEND_FACTOR = 1.0   # × (G−1)/G · bytes sent per GPU
    RING_STEPS = 1.0    # × (G−1) latency steps
    REDUCES = False

    ALGORITHMS = ("ring", "tree")

    def check(self, v):
        if v["algorithm"] not in (*self.ALGORITHMS, "auto"):
            return [("algorithm", f"'{v['algorithm']}' is not an algorithm of {self.name} "
                                  f"(expected one of {', '.join(self.ALGORITHMS)}, auto)")]
        return []

    def demand(self, hw) -> Demand | Choice:
        if self.gpus == 1:
            return Demand(work={}, launch=None, kernels=1)  # NCCL still launches a kernel
        hw.link(self.link)  # an unknown link is bad input whatever the algorithm
        if self.algorithm != "auto":
            return self._demand(self.algorithm)
        return Choice(tuple(self._demand(a) for a in self.ALGORITHMS), pick="fastest")

    def _demand(self, algorithm: str) -> Demand:
        g = self.gpus
        if algorithm == "oneshot":
            sent, steps = (g - 1) * self.bytes, 1
        else:
            sent = self.SEND_FACTOR * (g - 1) / g * self.bytes
            steps = (2 * math.ceil(math.log2(g)) if algorithm == "tree"
                     else self.RING_STEPS * (g - 1))
        hbm = 2 * sent + (sent if self.REDUCES else 0.0)  # read to send, write received (+reduce)
        return Demand(work={f"link:{self.link}": sent, "hbm": hbm}, launch=None, flop=0.0,
                      hbm_bytes=hbm, link_steps={self.link: steps},
                      details={"bytes_sent_per_gpu": sent, "steps": steps,
                               "algorithm": algorithm})


class Allreduce(_Collective):
    name = "allreduce"
    SEND_FACTOR, RING_STEPS, REDUCES = 2.0, 2.0, True
    ALGORITHMS = ("ring", "tree", "oneshot")


class Allgather(_Collective):
    name = "allgather"


class ReduceScatter(_Collective):
    name = "reduce_scatter"
    REDUCES = True


class Alltoall(_Collective):
    """Pairwise exchange with every peer: (G−1)/G of the buffer leaves each GPU in G−1 steps
    (NCCL's all-to-all is G−1 send/recv pairs; the METRO paper finds its fixed cost comparable
    to an all-gather's, §2.5)."""

    name = "alltoall"


class SendRecv(Op):
    """Point-to-point transfer to a neighbour GPU (pipeline-parallel activations/gradients)."""

    name = "sendrecv"
    PARAMS = {
        "bytes": Param("float", required=True, lo=1, unit="bytes", doc="bytes sent"),
        "link": Param("str", default="nvlink", doc="link name in the hardware spec"),
    }
    SIZE_PARAMS = ("bytes",)
    EXAMPLE = dict(bytes=1e8)

    def demand(self, hw):
        hw.link(self.link)  # raises for an unknown link
        return Demand(work={f"link:{self.link}": self.bytes, "hbm": 2 * self.bytes},
                      launch=None, hbm_bytes=2 * self.bytes, link_steps={self.link: 1})
