"""Collectives over NVLink, PCIe and the network (per-GPU time of the slowest GPU).

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

Which link (`link`). A named link carries the whole collective. `auto` (the default) reads the
spec's NVLink domain (`hw.nvlink_domain_gpus`) and the group's `placement` (where its GPUs sit in
rank order; default consecutive): a group inside one domain is priced on `nvlink` exactly as
`link=nvlink`; a group over n domains with m of its GPUs in each crosses `network`, each GPU
through its own NIC (the rail-optimized DGX/HGX fabrics give every GPU one):
  ring        NCCL's ring spans the nodes with each node's GPUs consecutive, one ring per NIC
              (m rings): every ring leaves each domain once, so a GPU's NIC carries 1/m of the
              ring bytes (the same per-step bytes as an NVLink hop, at the NIC's rate) and its
              NVLink the other (m−1)/m; of the ring's steps, RING_STEPS·(n−1) cross the network
              (NCCL's tuning model splits a ring's steps the same way into intra- and inter-node
              steps, NVIDIA/nccl src/graph/tuning.cc).
  tree        NCCL's tree is a chain inside each node and a double binary tree across nodes
              ("Massively Scale Your Deep Learning Training with NCCL 2.4", NVIDIA developer
              blog, 2019): the ring's bytes on each link (as inside one domain, the tree moves
              the ring's bytes), in 2(m−1) NVLink steps and 2⌈log2 n⌉ network steps (the
              tree latency of NCCL's tuning model).
  all-to-all  pairwise: S/G to each peer, (m−1)/G · S over NVLink and (G−m)/G · S over the
              network, in as many steps of each (tree: the tree's steps).
  oneshot     inside one NVLink domain only (the custom all-reduces are NVLink-only).
With m = 1 (one GPU per domain) both reduce to the single-link formulas on `network`. Where
domains hold unequal shares of the group, NVLink bytes follow the fullest domain and NIC bytes the
emptiest (the slowest GPU of each).
"""
from __future__ import annotations

import functools
import math
from collections import Counter

from perfmodel.demand import Choice, Demand
from perfmodel.errors import InputError
from perfmodel.ops.base import Op, Param

AUTO = "auto"
PLACEMENT_DOC = ("where the group's GPUs sit in rank order: COUNTxSTRIDE levels, innermost first "
                 "(8x1,4x64: 8 consecutive GPUs, 4 such blocks 64 apart); none: consecutive")


def placement_levels(text: str | None, gpus: int | None = None) -> tuple[tuple[int, int], ...]:
    """Parse a placement ("8x1,4x64") into (count, stride) levels; ValueError with the reason.
    None is `gpus` consecutive GPUs. The levels must not overlap and, given `gpus`, hold it."""
    if text is None:
        return ((gpus or 2, 1),)
    levels = []
    for part in text.replace(" ", "").split(","):
        count, sep, stride = part.partition("x")
        if not (sep and count.isdigit() and stride.isdigit() and int(count) >= 1
                and int(stride) >= 1):
            raise ValueError(f"expected COUNTxSTRIDE levels separated by commas (e.g. 8x1,4x64), "
                             f"got {text!r}")
        levels.append((int(count), int(stride)))
    extent = 1  # positions the inner levels cover
    for count, stride in levels:
        if stride < extent and count > 1:
            raise ValueError(f"level {count}x{stride} of {text!r} overlaps the levels inside it "
                             f"(its stride must be at least {extent})")
        extent += (count - 1) * stride
    held = math.prod(c for c, _ in levels)
    if gpus is not None and held != gpus:
        raise ValueError(f"placement {text!r} holds {held} GPUs, the group has {gpus}")
    return tuple(levels)


MAX_PLACED_GPUS = 1 << 20  # positions enumerated for an irregular placement


@functools.lru_cache(maxsize=512)
def domain_occupancy(levels: tuple[tuple[int, int], ...], domain: int) -> tuple[int, int, int]:
    """(NVLink domains the group touches, fewest and most of its GPUs in one), for domains of
    `domain` GPUs aligned in rank order. Outer levels whose stride is a multiple of the domain
    copy the inner pattern onto new domains (the levels do not overlap); a single level whose
    stride divides the domain fills domains in turn; anything else is enumerated."""
    k = len(levels)
    while k > 0 and levels[k - 1][1] % domain == 0:
        k -= 1
    copies = math.prod(c for c, _ in levels[k:])
    inner = levels[:k]
    if not inner:
        return copies, 1, 1
    if len(inner) == 1 and domain % inner[0][1] == 0:
        count, per = inner[0][0], domain // inner[0][1]
        n = -(-count // per)
        return n * copies, count - (n - 1) * per, min(count, per)
    placed = math.prod(c for c, _ in inner)
    if placed > MAX_PLACED_GPUS:
        raise InputError(f"placement {','.join(f'{c}x{s}' for c, s in levels)}: cannot place "
                         f"{placed} GPUs of irregular stride in domains of {domain} (at most "
                         f"{MAX_PLACED_GPUS})")
    positions = [0]
    for count, stride in inner:
        positions = [p + i * stride for i in range(count) for p in positions]
    per_domain = Counter(p // domain for p in positions)
    return len(per_domain) * copies, min(per_domain.values()), max(per_domain.values())


class _Collective(Op):
    PARAMS = {
        "bytes": Param("float", required=True, lo=1, unit="bytes", doc="buffer size per GPU"),
        "gpus": Param("int", required=True, lo=1, doc="GPUs in the group"),
        "link": Param("str", default=AUTO, doc="link name in the hardware spec; auto: nvlink "
                      "inside one NVLink domain, network (and nvlink) across domains"),
        "algorithm": Param("choice", default="ring", choices=("ring", "tree", "oneshot", "auto"),
                           doc="oneshot: all-reduce only; auto: the fastest available"),
        "placement": Param("str", default=None, doc=PLACEMENT_DOC),
    }
    SIZE_PARAMS = ("bytes",)
    EXAMPLE = dict(bytes=1e8, gpus=8)
    SEND_FACTOR = 1.0   # × (G−1)/G · bytes sent per GPU
    RING_STEPS = 1.0    # × (G−1) latency steps
    REDUCES = False
    PAIRWISE = False    # all-to-all: bytes go to every peer, not around a ring

    ALGORITHMS = ("ring", "tree")

    def check(self, v):
        problems = []
        if v["algorithm"] not in (*self.ALGORITHMS, "auto"):
            problems.append(("algorithm", f"'{v['algorithm']}' is not an algorithm of "
                                          f"{self.name} (expected one of "
                                          f"{', '.join(self.ALGORITHMS)}, auto)"))
        if v["placement"] is not None:
            try:
                placement_levels(v["placement"], v["gpus"])
            except ValueError as e:
                problems.append(("placement", str(e)))
        return problems

    def demand(self, hw) -> Demand | Choice:
        if self.gpus == 1:
            return Demand(work={}, launch=None, kernels=1)  # NCCL still launches a kernel
        link = self.link
        if link == AUTO:
            domains, fewest, most = domain_occupancy(placement_levels(self.placement, self.gpus),
                                                     hw.nvlink_domain_gpus)
            if domains > 1:
                return self._across_domains(hw, domains, fewest, most)
            link = "nvlink"
        hw.link(link)  # an unknown link is bad input whatever the algorithm
        if self.algorithm != "auto":
            return self._demand(self.algorithm, link)
        return Choice(tuple(self._demand(a, link) for a in self.ALGORITHMS), pick="fastest")

    def _demand(self, algorithm: str, link: str) -> Demand:
        g = self.gpus
        if algorithm == "oneshot":
            sent, steps = (g - 1) * self.bytes, 1
        else:
            sent = self.SEND_FACTOR * (g - 1) / g * self.bytes
            steps = (2 * math.ceil(math.log2(g)) if algorithm == "tree"
                     else self.RING_STEPS * (g - 1))
        hbm = 2 * sent + (sent if self.REDUCES else 0.0)  # read to send, write received (+reduce)
        return Demand(work={f"link:{link}": sent, "hbm": hbm}, launch=None, flop=0.0,
                      hbm_bytes=hbm, link_steps={link: steps},
                      details={"bytes_sent_per_gpu": sent, "steps": steps,
                               "algorithm": algorithm})

    def _across_domains(self, hw, domains: int, fewest: int, most: int) -> Demand | Choice:
        hw.link("network")
        if most > 1:
            hw.link("nvlink")
        if self.algorithm == "oneshot":
            raise InputError(f"{self.name}: the one-shot algorithm needs the group in one NVLink "
                             f"domain; {self.gpus} GPUs placed {self.placement or 'consecutively'} "
                             f"span {domains} domains of {hw.nvlink_domain_gpus} on {hw.name}")
        algorithms = [a for a in self.ALGORITHMS if a != "oneshot"]
        if self.algorithm != "auto":
            algorithms = [self.algorithm]
        options = tuple(self._spanning(a, domains, fewest, most) for a in algorithms)
        return options[0] if len(options) == 1 else Choice(options, pick="fastest")

    def _spanning(self, algorithm: str, n: int, fewest: int, most: int) -> Demand:
        """One algorithm over n domains (module docstring): NVLink bytes of the fullest
        domain's GPUs, NIC bytes of the emptiest's."""
        g, s = self.gpus, self.bytes
        if self.PAIRWISE:
            nvlink, network = (most - 1) / g * s, (g - fewest) / g * s
            nv_steps, net_steps = most - 1, g - fewest
        else:
            ring = self.SEND_FACTOR * (g - 1) / g * s
            nvlink, network = ring * (most - 1) / most, ring / fewest
            net_steps = self.RING_STEPS * (n - 1)
            nv_steps = self.RING_STEPS * (g - 1) - net_steps
        if algorithm == "tree":  # a chain in each domain, a binary tree across domains
            nv_steps, net_steps = 2 * (most - 1), 2 * math.ceil(math.log2(n))
        sent = nvlink + network
        hbm = 2 * sent + (sent if self.REDUCES else 0.0)
        work = {"link:network": network, "hbm": hbm}
        steps = {"network": net_steps}
        if nvlink > 0:
            work["link:nvlink"] = nvlink
            steps["nvlink"] = nv_steps
        return Demand(work=work, launch=None, flop=0.0, hbm_bytes=hbm, link_steps=steps,
                      details={"bytes_sent_per_gpu": sent, "network_bytes_per_gpu": network,
                               "steps": nv_steps + net_steps, "algorithm": algorithm,
                               "nvlink_domains": n, "gpus_per_domain": fewest})


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
    PAIRWISE = True


class SendRecv(Op):
    """Point-to-point transfer to a neighbour GPU (pipeline-parallel activations/gradients).
    With `link: auto`, on NVLink when every rank of the pipeline (`placement`) sits in one NVLink
    domain, else on the network: stages run in lock step, so the slowest hop paces them all."""

    name = "sendrecv"
    PARAMS = {
        "bytes": Param("float", required=True, lo=1, unit="bytes", doc="bytes sent"),
        "link": Param("str", default=AUTO, doc="link name in the hardware spec; auto: nvlink "
                      "if the pipeline fits in one NVLink domain, else network"),
        "placement": Param("str", default=None,
                           doc="the pipeline's ranks, as COUNTxSTRIDE levels (16x8: 16 stages "
                               "8 GPUs apart); none: two consecutive GPUs"),
    }
    SIZE_PARAMS = ("bytes",)
    EXAMPLE = dict(bytes=1e8)

    def check(self, v):
        if v["placement"] is not None:
            try:
                placement_levels(v["placement"])
            except ValueError as e:
                return [("placement", str(e))]
        return []

    def demand(self, hw):
        link = self.link
        if link == AUTO:
            domains, _, _ = domain_occupancy(placement_levels(self.placement),
                                             hw.nvlink_domain_gpus)
            link = "nvlink" if domains == 1 else "network"
        hw.link(link)  # raises for an unknown link
        return Demand(work={f"link:{link}": self.bytes, "hbm": 2 * self.bytes},
                      launch=None, hbm_bytes=2 * self.bytes, link_steps={link: 1})
