"""Collectives as NCCL runs them, over NVLink, PCIe and the network (per-GPU time of the slowest
GPU).

NCCL picks, per call, an algorithm and a protocol by the time its cost model predicts for the
message size (src/graph/tuning.cc; perfmodel/ops/nccl.py holds its numbers and
`tuner_cost_s`, its estimate). The op offers the pair NCCL's tuner prices lowest, as one
Demand priced by the model: NCCL runs that pair whether or not it is truly the fastest (a 2-GPU
Blackwell all-reduce of 4 MiB runs Simple, which its tuner prices at 21.0 us against LL's 22.7,
though LL would be faster; the measured time jumps there). The demand's details carry the
tuner's estimate of every pair offered (`nccl_tuner_s`).

With G GPUs and a buffer of S bytes, each GPU sends:

  ring          all-reduce 2(G−1)/G·S in 2(G−1) hops; all-gather (S the gathered output) and
                reduce-scatter (S the full input) (G−1)/G·S in G−1 hops (Patarasuk & Yuan, JPDC
                2009; NCCL's ring). All-to-all: (G−1)/G·S, S/G to each peer, in G−1 pairwise
                hops (NCCL's send/receive; the METRO paper finds its fixed cost comparable to an
                all-gather's, §2.5).
  tree          all-reduce only: a chain through the GPUs of each node (NVLink domain) and a
                double binary tree across nodes ("Massively Scale Your Deep Learning Training
                with NCCL 2.4", NVIDIA developer blog, 2019). A GPU sends its buffer up the
                reduction and down the broadcast, 2·S (tuning.cc converts tree bus bandwidth to
                algorithm bandwidth by 1/2), in 2(m−1) NVLink hops and 2⌈log2 n⌉ network hops
                (tuning.cc: 2·((nRanks/nNodes − 1)·intraLat + log2(nNodes)·interLat)); a group
                inside one domain is a single chain of 2(G−1) hops, a group of one GPU per
                node on the network a binary tree of 2⌈log2 G⌉.
  nvls          all-reduce inside one NVLink domain whose NVSwitches reduce (NVLink SHARP,
                `topology.nvls`): each GPU reduces its 1/G shard with multimem.ld_reduce (the
                switch reads that shard from every GPU: S up, S/G down) and multicasts it back
                with multimem.st (S/G up, S down), so (G+1)/G·S each way in one switch round
                trip instead of the ring's 2(G−1)/G·S in 2(G−1) hops. Simple protocol only.
                NVLS with a tree across domains (NVLS_TREE) is not modelled.
  oneshot       all-reduce inside one NVLink domain, not NCCL's: vLLM's and TensorRT-LLM's custom
                all-reduce for small messages reads every peer's whole buffer in one step,
                (G−1)·S bytes in per GPU, one link latency.

Protocols (`protocol`): LL, LL128 and Simple trade bandwidth for latency. The bytes a link
carries are the payload over NCCL's bus efficiency of the pair (LL 8 B of data per 16 B line and
its store-and-poll loop: 1/4 of Simple's bandwidth for an all-reduce ring; LL128 120 of 128 B:
0.92; Simple 1; the tree 0.92 of that; NVLS 5/6, assumed) and over the link's achievable fraction
(NCCL's per-link NVLink rate, src/graph/topo.h). Latency: NCCL's base latency of the pair plus
each hop's latency on the link it crosses, NVLink or network; the engine charges them as link
steps (perfmodel/ops/nccl.py says how). A ring that leaves the domain pays at least NCCL's
network overhead per NVLink hop. NCCL enables LL128 only where the GPUs talk over NVLink
(tuning.cc), so a collective on `pcie` offers LL and Simple. The base latency covers NCCL's
kernel launch (it is fitted to back-to-back collectives), so an NCCL pair counts no launch of its
own; nor does the engines' one-shot all-reduce, whose kernel boundary is priced as NVLink round
trips (perfmodel/ops/custom_allreduce.py: its peers' stores acknowledged, the next launch
overlapping its tail by programmatic dependent launch); only its copy kernels launch.

Algorithm choice (`algorithm`). ring, tree, nvls and oneshot name one algorithm (the protocol
still auto unless named, the tuner then choosing among that algorithm's protocols, as
NCCL_ALGO does). `nccl`, the default, offers NCCL's algorithms for the collective (ring, tree
and, where available, nvls for an all-reduce; ring for the others: NCCL has no tree all-gather,
reduce-scatter or all-to-all) with every protocol, and runs the pair NCCL's tuner picks. The
all-to-all (NCCL's send/receive, outside the tuner's model) keeps the fastest of its pairs.
`auto` offers NCCL's pick and, for an all-reduce inside one NVLink domain, the one-shot custom
all-reduce, the faster kept, as serving engines switch to it for small messages (the graph
builder's tensor-parallel all-reduce asks for it). Why `nccl` is the default: a collective in a
graph is an NCCL call unless a serving engine replaces it, NCCL never runs a fixed protocol, and
a fixed ring with one step latency overstates a small all-reduce by several times and misses
NVLS's bandwidth on NVSwitch systems; a fixed choice is still one parameter away (NCCL_ALGO and
NCCL_PROTO do the same to NCCL).

Which link (`link`). A named link carries the whole collective. `auto` (the default) reads the
spec's NVLink domain (`hw.nvlink_domain_gpus`) and the group's `placement` (where its GPUs sit in
rank order; default consecutive): a group inside one domain is priced on `nvlink` exactly as
`link=nvlink`; a group over n domains with m of its GPUs in each crosses `network`, each GPU
through its own NIC (the rail-optimized DGX/HGX fabrics give every GPU one):
  ring        NCCL's ring spans the nodes with each node's GPUs consecutive, one ring per NIC
              (m rings): every ring leaves each domain once, so a GPU's NIC carries 1/m of the
              ring bytes (the same per-step bytes as an NVLink hop, at the NIC's rate) and its
              NVLink the other (m−1)/m; of the ring's hops, RING_STEPS·(n−1) cross the network
              (NCCL's tuning model splits a ring's steps the same way into intra- and inter-node
              steps; it counts 2·n inter-node steps for an all-reduce where this counts 2(n−1),
              so that one GPU per domain is exactly the ring on `network`).
  tree        the ring's split of bytes over NVLink and NIC, scaled to the tree's 2·S, in
              2(m−1) NVLink hops and 2⌈log2 n⌉ network hops.
  all-to-all  pairwise: S/G to each peer, (m−1)/G · S over NVLink and (G−m)/G · S over the
              network, in as many hops of each.
  nvls, oneshot  inside one NVLink domain only.
Across domains NCCL's multi-node factors apply (ring LL at 1/4 of Simple for every collective,
LL128 at 0.7 with one GPU per node, tree LL128 at 120/128). With m = 1 (one GPU per domain) both
reduce to the single-link formulas on `network`. Where domains hold unequal shares of the group,
NVLink bytes follow the fullest domain and NIC bytes the emptiest (the slowest GPU of each).
Reductions add one read-modify-write of the received bytes in HBM (NVLS reduces in the switch).
"""
from __future__ import annotations

import functools
import math
from collections import Counter
from dataclasses import replace

from perfmodel.demand import Choice, Demand
from perfmodel.errors import InputError
from perfmodel.ops import custom_allreduce, nccl
from perfmodel.ops.base import GPUS_WHY, MAX_GPUS, Op, Param, byte_count

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


NCCL = "nccl"
ENGINES = custom_allreduce.ENGINES  # an engine's own dispatch (custom kernel or NCCL)
ALGORITHM_CHOICES = ("ring", "tree", "nvls", "oneshot", "twoshot", NCCL, AUTO, *ENGINES)


def _fastest(options: list[Demand]) -> Demand | Choice:
    return options[0] if len(options) == 1 else Choice(tuple(options), pick="fastest")


class _Collective(Op):
    PARAMS = {
        "bytes": byte_count("buffer size per GPU"),
        "gpus": Param("int", required=True, lo=1, hi=MAX_GPUS, hi_why=GPUS_WHY,
                      doc="GPUs in the group"),
        "link": Param("str", default=AUTO, doc="link name in the hardware spec; auto: nvlink "
                      "inside one NVLink domain, network (and nvlink) across domains"),
        "algorithm": Param("choice", default=NCCL, choices=ALGORITHM_CHOICES,
                           doc="ring; tree, nvls (NVLink SHARP, one NVLink domain), oneshot "
                               "and twoshot (custom kernels, one NVLink domain): all-reduce "
                               "only; nccl: the algorithm and protocol NCCL's tuner picks "
                               "(its own cost model); auto: nccl or the one-shot custom "
                               "all-reduce, the faster; "
                               "vllm, sglang, trtllm (all-reduce only): that engine's own "
                               "choice, its custom kernel where its rules take the message, "
                               "else nccl"),
        "protocol": Param("choice", default=AUTO, choices=(AUTO, *nccl.PROTOCOLS),
                          doc="NCCL protocol: ll, ll128, simple; auto: the one NCCL's tuner "
                              "picks of those the algorithm offers (all-to-all: the "
                              "fastest)"),
        "placement": Param("str", default=None, doc=PLACEMENT_DOC),
    }
    SIZE_PARAMS = ("bytes",)
    EXAMPLE = dict(bytes=1e8, gpus=8)
    SEND_FACTOR = 1.0   # × (G−1)/G · bytes sent per GPU
    RING_STEPS = 1.0    # × (G−1) hops
    REDUCES = False
    PAIRWISE = False    # all-to-all: bytes go to every peer, not around a ring

    ALGORITHMS = ("ring",)        # NCCL's algorithms for this collective
    CUSTOM: tuple[str, ...] = ()  # other libraries' algorithms (custom kernels)
    AUTO_CUSTOM: tuple[str, ...] = ()  # the custom kernels that `auto` adds
    ENGINE_DISPATCH: tuple[str, ...] = ()  # engines whose own dispatch the op offers
    PROTOCOLS = nccl.PROTOCOLS    # NCCL's protocols for this collective
    TUNED = True                  # NCCL's tuner picks the pair (nccl.tuner_cost_s)

    def check(self, v):
        problems = []
        algorithm, protocol = v["algorithm"], v["protocol"]
        others = (*self.CUSTOM, NCCL, AUTO, *self.ENGINE_DISPATCH)
        if algorithm not in (*self.ALGORITHMS, *others):
            problems.append(("algorithm", f"'{algorithm}' is not an algorithm of {self.name} "
                                          f"(expected one of {', '.join(self.ALGORITHMS)}, "
                                          f"{', '.join(others)})"))
        elif protocol != AUTO and algorithm in (*self.CUSTOM, *self.ENGINE_DISPATCH):
            problems.append(("protocol", f"the {algorithm} all-reduce is not NCCL's and has no "
                                         f"NCCL protocol (expected auto, got '{protocol}')"))
        elif protocol not in (AUTO, "simple") and algorithm == "nvls":
            problems.append(("protocol", f"NVLS runs only NCCL's simple protocol (got "
                                         f"'{protocol}'; expected auto or simple)"))
        if protocol != AUTO and protocol not in self.PROTOCOLS:
            problems.append(("protocol", f"'{protocol}' is not a protocol of {self.name} "
                                         f"(expected auto, {', '.join(self.PROTOCOLS)})"))
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
        domains = None
        if link in (AUTO, "nvlink"):
            domains, fewest, most = domain_occupancy(placement_levels(self.placement, self.gpus),
                                                     hw.nvlink_domain_gpus)
        if link == AUTO:
            if domains > 1:
                return self._across_domains(hw, domains, fewest, most)
            link = "nvlink"
        hw.link(link)  # an unknown link is bad input whatever the algorithm
        if self.algorithm in self.ENGINE_DISPATCH and link == "nvlink" and domains == 1:
            # the engine's own kernel where its rules take the message (ops/custom_allreduce.py)
            pick = custom_allreduce.dispatch(self.algorithm, hw, self.gpus, self.bytes,
                                             self.mode, link)
            if pick.kernel is not None and not pick.with_nccl:
                return pick.kernel
        else:
            pick = None
        pairs = self._pairs(hw, link, nvls=hw.nvls and link == "nvlink" and domains == 1)
        wire = hw.link(link)
        across = nccl.link_class(link) == "network"  # each GPU in a node of its own
        tuner = self._tuner(hw, pairs, self.gpus if across else 1, link,
                            wire.bandwidth_bytes_per_s * wire.achievable_fraction)
        options = self._engine_nccl(hw, [self._tuned(self._demand(hw, a, p, link), tuner)
                                         for a, p in pairs if self._runs(a, p, tuner)])
        if pick is not None and pick.kernel is not None:
            options.insert(0, pick.kernel)
        return _fastest(options)

    def _engine_nccl(self, hw, options: list[Demand]) -> list[Demand]:
        """NCCL's options as an engine's eager call runs them (algorithm vllm, sglang in mode
        eager): behind the engine's host path for NCCL (custom_allreduce.nccl_host_s)."""
        if self.algorithm not in self.ENGINE_DISPATCH:
            return options
        host = custom_allreduce.nccl_host_s(self.algorithm, getattr(self, "mode", "graph"), hw)
        if host <= 0.0:
            return options
        return [replace(d, host_floor_s=host, details={**d.details, "host_path_s": host,
                                                       "path": custom_allreduce.NCCL_PATH})
                for d in options]

    # -- which pair NCCL's tuner runs ----------------------------------------------------------
    def _tuner(self, hw, pairs: list[tuple[str, str | None]], nodes: int, intra_link: str,
               bus_bytes_per_s: float) -> dict[str, float] | None:
        """NCCL's own estimate (s) of each NCCL pair offered, keyed "algorithm/protocol"
        (nccl.tuner_cost_s), for `nodes` nodes (NVLink domains) joined inside by
        `intra_link` over a bus of `bus_bytes_per_s`; None for the all-to-all (NCCL's
        send/receive, which the tuner does not price: TUNED)."""
        if not self.TUNED:
            return None
        return {f"{a}/{p}": nccl.tuner_cost_s(self.name, a, p, self.bytes, self.gpus, nodes,
                                              intra_link, bus_bytes_per_s,
                                              hw.compute_capability)
                for a, p in pairs if a not in self.CUSTOM}

    def _runs(self, algorithm: str, protocol: str | None, tuner: dict[str, float] | None
              ) -> bool:
        """Whether the pair runs: a custom kernel always competes (the engine picks by the
        model's time); of NCCL's pairs, only the one NCCL's tuner prices lowest (NCCL runs it
        whether or not it is the fastest; the first offered wins a tie, as tuning.cc's strict
        minimum over its loop does), all of them where the tuner does not price the op."""
        if algorithm in self.CUSTOM or tuner is None:
            return True
        return f"{algorithm}/{protocol}" == min(tuner, key=tuner.get)

    @staticmethod
    def _tuned(demand: Demand, tuner: dict[str, float] | None) -> Demand:
        """The demand with NCCL's tuner table in its details (an NCCL pair's only)."""
        if tuner is None or demand.details.get("algorithm") not in nccl.TUNED_ALGORITHMS:
            return demand
        return replace(demand, details={**demand.details, "nccl_tuner_s": tuner})

    # -- which (algorithm, protocol) pairs run -------------------------------------------------
    def _pairs(self, hw, link: str, nvls: bool,
               spanning: bool = False) -> list[tuple[str, str | None]]:
        """The (algorithm, protocol) pairs the op offers on `link` (nvls: NVLS can run, the
        group on NVLink in one domain of an NVLS system; spanning: the group crosses domains,
        where no custom all-reduce runs); an InputError for a named one that cannot run."""
        if self.algorithm in (NCCL, AUTO, *self.ENGINE_DISPATCH):
            algorithms = [a for a in self.ALGORITHMS if a != "nvls" or nvls]
            if self.algorithm == AUTO and not spanning:
                algorithms += self.AUTO_CUSTOM
        else:
            algorithms = [self.algorithm]
            if self.algorithm == "nvls" and not nvls:
                raise InputError(self._no_nvls(hw))
        # tuning.cc enables LL128 only where the GPUs talk over NVLink
        offered = tuple(p for p in self.PROTOCOLS
                        if p != "ll128" or nccl.link_class(link) != "pcie")
        pairs: list[tuple[str, str | None]] = []
        for a in algorithms:
            if a in self.CUSTOM:
                pairs.append((a, None))
                continue
            protocols = ("simple",) if a == "nvls" else offered
            if self.protocol != AUTO:
                protocols = tuple(p for p in protocols if p == self.protocol)
            pairs += [(a, p) for p in protocols]
        if not pairs:
            raise InputError(f"{self.name}: NCCL enables the {self.protocol} protocol only over "
                             f"NVLink, not on link '{link}' of {hw.name}")
        return pairs

    def _no_nvls(self, hw) -> str:
        if not hw.nvls:
            return (f"{self.name}: algorithm nvls needs NVSwitches that reduce (NVLink SHARP); "
                    f"{hw.name} has none (topology.nvls)")
        return (f"{self.name}: algorithm nvls needs the group on NVLink in one NVLink domain of "
                f"{hw.nvlink_domain_gpus} on {hw.name} ({self.gpus} GPUs placed "
                f"{self.placement or 'consecutively'}, link {self.link}); NVLS with a tree "
                f"across domains is not modelled")

    # -- one link ------------------------------------------------------------------------------
    def _demand(self, hw, algorithm: str, protocol: str | None, link: str) -> Demand:
        g, s = self.gpus, self.bytes
        wire_link = hw.link(link)
        if algorithm in self.CUSTOM:  # a custom kernel (ops/custom_allreduce.py)
            return custom_allreduce.kernel_demand(hw, algorithm, g, s, link,
                                                  reduces=self.REDUCES)
        across = nccl.link_class(link) == "network"  # each GPU in a node of its own
        if algorithm == "nvls":
            sent, hops = (g + 1) / g * s, 1
        elif algorithm == "tree":
            sent = 2.0 * s
            hops = 2 * math.ceil(math.log2(g)) if across else 2 * (g - 1)
        else:
            sent, hops = self.SEND_FACTOR * (g - 1) / g * s, self.RING_STEPS * (g - 1)
        efficiency = nccl.bus_efficiency(
            self.name, algorithm, protocol, g if across else 1,
            wire_link.bandwidth_bytes_per_s * wire_link.achievable_fraction,
            hw.compute_capability)
        wire = sent / (efficiency * wire_link.achievable_fraction)
        # NCCL's latency in steps of the link's latency: the base, then each hop in ring hops
        # of the protocol on this link
        steps = (nccl.base_steps(link, algorithm, protocol, wire_link)
                 + hops * nccl.hop(link, algorithm, protocol) * wire_link.protocol_step(protocol))
        hbm = 2 * sent + (sent if self.REDUCES and algorithm != "nvls" else 0.0)
        channels = nccl.channels(algorithm, protocol, s, g, hw.compute_capability,
                                 g if across else 1)
        # the chunk pipeline's fill: the first chunk crosses every stage before the link
        # streams (nccl.pipeline_fill_s)
        fill = nccl.pipeline_fill_s(algorithm, protocol, s, g, sent,
                                    wire_link.bandwidth_bytes_per_s
                                    * wire_link.achievable_fraction * efficiency, channels)
        # a ring's chunk loop has one step in the GPU's own memory, its link idle
        # (nccl.ring_local_step_s); the all-to-all's sends are not a ring
        local = (nccl.ring_local_step_s(s, g, hw.compute_capability)
                 if algorithm == "ring" and not self.PAIRWISE else 0.0)
        return Demand(work={f"link:{link}": wire, "hbm": hbm}, launch=None, flop=0.0,
                      hbm_bytes=hbm, kernels=0, fixed_s=fill + local,
                      link_steps={link: steps},
                      details={"bytes_sent_per_gpu": sent, "wire_bytes_per_gpu": wire,
                               "steps": hops, "hops": {link: hops}, "algorithm": algorithm,
                               "protocol": protocol, "channels": channels,
                               "pipeline_fill_s": fill, "ring_local_step_s": local})

    # -- across NVLink domains -----------------------------------------------------------------
    def _across_domains(self, hw, domains: int, fewest: int, most: int) -> Demand | Choice:
        hw.link("network")
        if most > 1:
            hw.link("nvlink")
        if self.algorithm in self.CUSTOM:
            kernel = self.algorithm.replace("shot", "-shot")  # one-shot, two-shot
            raise InputError(f"{self.name}: the {kernel} algorithm needs the group in "
                             f"one NVLink domain; {self.gpus} GPUs placed "
                             f"{self.placement or 'consecutively'} span {domains} domains of "
                             f"{hw.nvlink_domain_gpus} on {hw.name}")
        if self.algorithm == "nvls":
            raise InputError(self._no_nvls(hw))
        pairs = self._pairs(hw, "network", nvls=False, spanning=True)
        net = hw.link("network")
        tuner = self._tuner(hw, pairs, domains, "nvlink" if most > 1 else "network",
                            net.bandwidth_bytes_per_s * net.achievable_fraction)
        return _fastest(self._engine_nccl(
            hw, [self._tuned(self._spanning(hw, a, p, domains, fewest, most), tuner)
                 for a, p in pairs if self._runs(a, p, tuner)]))

    def _spanning(self, hw, algorithm: str, protocol: str, n: int, fewest: int,
                  most: int) -> Demand:
        """One (algorithm, protocol) over n domains (module docstring): NVLink bytes of the
        fullest domain's GPUs, NIC bytes of the emptiest's."""
        g, s = self.gpus, self.bytes
        if self.PAIRWISE:
            nvlink, network = (most - 1) / g * s, (g - fewest) / g * s
            nv_hops, net_hops = most - 1, g - fewest
        else:
            ring = self.SEND_FACTOR * (g - 1) / g * s
            nvlink, network = ring * (most - 1) / most, ring / fewest
            net_hops = self.RING_STEPS * (n - 1)
            nv_hops = self.RING_STEPS * (g - 1) - net_hops
        if algorithm == "tree":  # a chain in each domain, a binary tree across domains
            nvlink, network = nvlink * g / (g - 1), network * g / (g - 1)  # 2·S, not the ring's
            nv_hops, net_hops = 2 * (most - 1), 2 * math.ceil(math.log2(n))
        net = hw.link("network")
        efficiency = nccl.bus_efficiency(self.name, algorithm, protocol, n,
                                         net.bandwidth_bytes_per_s * net.achievable_fraction,
                                         hw.compute_capability)
        sent = nvlink + network
        hbm = 2 * sent + (sent if self.REDUCES else 0.0)
        work = {"link:network": network / (efficiency * net.achievable_fraction), "hbm": hbm}
        net_ring_hops = net_hops * nccl.hop("network", algorithm, protocol)
        if nvlink > 0:
            nv = hw.link("nvlink")
            intra = nccl.hop("nvlink", algorithm, protocol)
            if algorithm == "ring":
                intra *= nccl.intra_hop_leaving_node(protocol)
            work["link:nvlink"] = nvlink / (efficiency * nv.achievable_fraction)
            steps = {"network": net_ring_hops * net.protocol_step(protocol),
                     "nvlink": nccl.base_steps("nvlink", algorithm, protocol, nv)
                     + nv_hops * intra * nv.protocol_step(protocol)}
        else:
            steps = {"network": nccl.base_steps("network", algorithm, protocol, net)
                     + net_ring_hops * net.protocol_step(protocol)}
        hops = {"network": net_hops, **({"nvlink": nv_hops} if nvlink > 0 else {})}
        local = (nccl.ring_local_step_s(s, g, hw.compute_capability)
                 if algorithm == "ring" and not self.PAIRWISE else 0.0)
        return Demand(work=work, launch=None, flop=0.0, hbm_bytes=hbm, kernels=0,
                      fixed_s=local, link_steps=steps,
                      details={"bytes_sent_per_gpu": sent, "network_bytes_per_gpu": network,
                               "steps": nv_hops * (nvlink > 0) + net_hops, "hops": hops,
                               "algorithm": algorithm, "protocol": protocol,
                               "nvlink_domains": n, "gpus_per_domain": fewest})


class Allreduce(_Collective):
    name = "allreduce"
    PARAMS = {**_Collective.PARAMS,
              "mode": Param("choice", default="graph", choices=custom_allreduce.MODES,
                            doc="how an engine's dispatch (algorithm vllm, sglang) runs: graph "
                                "(replayed from a CUDA graph, its buffers registered) or eager "
                                "(vLLM's and SGLang's pull kernels copy the input into a "
                                "registered buffer first; every call, NCCL's too, behind the "
                                "engine's host path); other algorithms ignore it")}
    SEND_FACTOR, RING_STEPS, REDUCES = 2.0, 2.0, True
    ALGORITHMS = ("ring", "tree", "nvls")
    CUSTOM = ("oneshot", "twoshot")
    AUTO_CUSTOM = ("oneshot",)
    ENGINE_DISPATCH = ENGINES

    def cache_state(self) -> tuple:
        """The fitted release-barrier trips the engines' kernels read
        (custom_allreduce.RELEASE_PEER_TRIPS; perfmodel.validation.fit sets them while it
        fits)."""
        return tuple(sorted(custom_allreduce.RELEASE_PEER_TRIPS.items()))

    def warnings(self):
        engines = custom_allreduce.MODE_ENGINES
        if self.mode != "graph" and self.algorithm not in engines:
            return [("mode", f"applies to an engine's own dispatch (algorithm "
                             f"{' or '.join(engines)}); algorithm {self.algorithm} ignores it")]
        return []


class Allgather(_Collective):
    name = "allgather"


class ReduceScatter(_Collective):
    name = "reduce_scatter"
    REDUCES = True


class Alltoall(_Collective):
    """Pairwise exchange with every peer: (G−1)/G of the buffer leaves each GPU, S/G to each
    peer (NCCL's all-to-all is a send and a receive per peer). Inside one NVLink domain the
    peers run at once (perfmodel/ops/nccl.py, the all-to-all's notes: one round of latency,
    LL at its per-peer rate, Simple bound by the link or the p2p channels' copy of the whole
    buffer); across domains G−1 pairwise hops at the ring's hop and base latencies (assumed:
    tuning.cc does not model send/receive). NCCL's send/receive runs LL or Simple (LL below
    16 KiB per peer per channel, NCCL_P2P_LL_THRESHOLD); here the faster of the two. The one
    algorithm keeps its old name, ring."""

    name = "alltoall"
    PAIRWISE = True
    TUNED = False
    PROTOCOLS = nccl.P2P_PROTOCOLS

    def _demand(self, hw, algorithm: str, protocol: str | None, link: str) -> Demand:
        """Inside one NVLink domain, NCCL's grouped send/receive as the NCCL 2.29.2 rows show
        it (perfmodel/ops/nccl.py, the all-to-all's notes): the peers at once, one round of
        latency, LL at its per-peer rate, Simple bound by the link or the channels' copy; on
        other links the pairwise form."""
        if nccl.link_class(link) != "nvlink":
            return super()._demand(hw, algorithm, protocol, link)
        g, s = self.gpus, self.bytes
        wire_link = hw.link(link)
        sent = (g - 1) / g * s
        wire = sent / (nccl.p2p_efficiency(protocol) * wire_link.achievable_fraction)
        link_s = wire / wire_link.bandwidth_bytes_per_s
        hops = nccl.P2P_HOPS[protocol]
        steps = (nccl.base_steps(link, "ring", protocol, wire_link)
                 + hops * wire_link.protocol_step(protocol))
        extra = nccl.p2p_extra_s(protocol, s, g, link_s)
        return Demand(work={f"link:{link}": wire, "hbm": 2 * sent}, launch=None, flop=0.0,
                      hbm_bytes=2 * sent, kernels=0, fixed_s=extra, link_steps={link: steps},
                      details={"bytes_sent_per_gpu": sent, "wire_bytes_per_gpu": wire,
                               "steps": hops, "hops": {link: hops}, "algorithm": algorithm,
                               "protocol": protocol, "p2p_extra_s": extra,
                               "pipeline_fill_s": 0.0, "ring_local_step_s": 0.0})


class SendRecv(Op):
    """Point-to-point transfer to a neighbour GPU (pipeline-parallel activations/gradients).
    With `link: auto`, on NVLink when every rank of the pipeline (`placement`) sits in one NVLink
    domain, else on the network: stages run in lock step, so the slowest hop paces them all."""

    name = "sendrecv"
    PARAMS = {
        "bytes": byte_count("bytes sent"),
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
