"""NCCL's cost model of a collective (src/graph/tuning.cc, ncclTopoTuneModel), as counts.

NCCL predicts the time of each (algorithm, protocol) pair as

    base[algorithm][protocol] + hops · hop[link][algorithm][protocol] + bytes / bandwidth

and its tuner runs the pair of least predicted time for the message size. This module holds
NCCL's numbers and turns them into what an op may hand the engine: bytes on the wire and link
steps. The collectives (perfmodel/ops/comm.py) build one Demand per pair from them.

Bandwidth. A protocol puts more bytes on the wire than it delivers, by its line format: LL
stores 8 B of data with an 8 B flag in every 16 B line (50 %), LL128 120 B of data and 8 B of
flags in every 128 B line (93.75 %), Simple moves plain data and synchronizes per chunk with
flags and fences (~100 %) (NCCL src/device/prims_ll.h, prims_ll128.h, prims_simple.h). NCCL's
tuner charges more than the line format alone: ring LL at 1/4 of Simple's bus bandwidth for an
all-reduce or across nodes and 1/3 otherwise (the 50 % line, then LL's per-thread store-and-poll
loop), ring LL128 at 0.92 (its code comment: "120.0/128.0"; 0.7 with one GPU per node), the tree
at 0.92 of the ring's bus bandwidth, then LL at 1/3.8 of that and LL128 at 7/9 inside one node,
120/128 across nodes. `bus_efficiency` returns those factors; the op divides its payload bytes by
them (and by the link's achievable fraction, NCCL's per-link rate in src/graph/topo.h) to get
the bytes the link must carry in the same time.

NCCL also caps LL and LL128 bus bandwidth per architecture and per channel (tuning.cc llMaxBws:
Ampere 87.7, Hopper 141, Blackwell 2×141 GB/s in one node; 22.5/45/90 on two nodes, 19/35/70
beyond; perChMaxRingLL128Bw 20 (Ampere) / 36.7 (Hopper) / 2×36.7 (Blackwell) GB/s per channel;
perChMaxTreeBw, perChMaxTreeLL128Bw alike). With the factors above, LL on every built-in GPU stays
below llMaxBws (tests/ops/test_comm.py checks it), and the per-channel caps times the 16 or
more channels NCCL opens on an NVSwitch board (assumed) lie above the link rate, so no cap binds
and none is modelled: the engine prices a link only at its own rate.

Latency. tuning.cc's tables (microseconds) are below. The engine charges every link step the
link's `latency` from the spec, so an op cannot hand it microseconds; instead each spec link
states NCCL's ring hop of each protocol (hwspec keys `links.<name>.ll_latency`, `ll128_latency`,
`simple_latency`, with the `_s` unit suffix; hwspec-format.md), and this module expresses every
other entry (tree and NVLS hops, the base latencies, the network overhead) in units of that ring
hop, taking the ratios from the same table. With the spec holding tuning.cc's ring hops, the
engine reproduces tuning.cc's latencies exactly; a measured hop in a spec scales the rest in
proportion. `hardware.Link.protocol_step` turns those hops into steps of the link's own latency.

Provenance. The tables are NCCL 2.19–2.21's tuning.cc as recalled from the source; GitHub was
not reachable when this was written, so each entry says how sure the recollection is. Entries
marked "assumed" are not in tuning.cc.
"""
from __future__ import annotations

PROTOCOLS = ("ll", "ll128", "simple")

# Data bytes per wire byte of each protocol's line format (prims_ll.h: a 16 B line of two
# 4 B data words and two 4 B flags; prims_ll128.h: 128 B lines, 8 B of flags in each; Simple:
# plain data). NCCL's send/receive (the all-to-all) is priced at these alone (assumed: p2p is not
# in tuning.cc's model).
LINE_EFFICIENCY = {"ll": 8 / 16, "ll128": 120 / 128, "simple": 1.0}

# tuning.cc baseLat[algorithm][protocol], us: the fixed cost of one collective, from NCCL's fit
# to back-to-back collectives (nccl-tests), so it includes the kernel launch (the collectives
# count no launch of their own beside it). Ring {6.6, 14.0, 8.4} and tree {6.8, 14.0, 0}: NCCL
# 2.12-2.21, sure of the LL and LL128 entries, less of tree Simple (0 here; some releases have
# 8.4). NVLS: 0 (its whole latency is the NVLS hop below; tuning.cc sets an NVLS latency to the
# hop, not base + hop).
BASE_LAT_US = {
    ("ring", "ll"): 6.6, ("ring", "ll128"): 14.0, ("ring", "simple"): 8.4,
    ("tree", "ll"): 6.8, ("tree", "ll128"): 14.0, ("tree", "simple"): 0.0,
    ("nvls", "simple"): 0.0,
}

# tuning.cc hwLat[NVLINK|PCI|NET][algorithm][protocol], us per hop. Ring rows (sure):
# NVLink {.6, 1.9, 3.4}, PCI {1.0, 2.5, 5.7}, NET {2.7, 4.0, 14.0}. Tree rows: NVLink {.6, 1.25,
# 4}, PCI {1.0, 1.9, 4}, NET {5.0, 8.5, 14} (LL and LL128 sure; the Simple entries were 28 before
# NCCL 2.14 and are less sure). NVLS over NVLink, Simple only: 25 (least sure; 23-25 across
# releases).
HW_LAT_US = {
    "nvlink": {("ring", "ll"): 0.6, ("ring", "ll128"): 1.9, ("ring", "simple"): 3.4,
               ("tree", "ll"): 0.6, ("tree", "ll128"): 1.25, ("tree", "simple"): 4.0,
               ("nvls", "simple"): 25.0},
    "pcie": {("ring", "ll"): 1.0, ("ring", "ll128"): 2.5, ("ring", "simple"): 5.7,
             ("tree", "ll"): 1.0, ("tree", "ll128"): 1.9, ("tree", "simple"): 4.0},
    "network": {("ring", "ll"): 2.7, ("ring", "ll128"): 4.0, ("ring", "simple"): 14.0,
                ("tree", "ll"): 5.0, ("tree", "ll128"): 8.5, ("tree", "simple"): 14.0},
}

# tuning.cc getNetOverhead(): a ring that leaves the node pays at least this per intra-node hop
# (1 us on Intel x86 and on Arm hosts, 2 on AMD; x3 with Simple). Intel/Arm assumed.
NET_OVERHEAD_US = 1.0
NET_OVERHEAD_SIMPLE_FACTOR = 3.0

# NVLS (NVLink SHARP) bus efficiency. Assumed: 5/6 is the factor tuning.cc (2.17-2.19, as
# recalled) applies to NVLS bus bandwidth when it converts it to algorithm bandwidth, used here
# on the switch traffic the op counts (comm.py: (G+1)/G of the buffer each way). With 8 H100 it
# predicts ~480 GB/s of NVLS bus bandwidth, beside the ring's ~370.
NVLS_EFFICIENCY = 5 / 6

# Link names of the specs and the class of NCCL's latency table they belong to; any other link
# name is priced as NVLink (assumed).
LINK_CLASS = {"nvlink": "nvlink", "pcie": "pcie", "network": "network"}


def link_class(link: str) -> str:
    return LINK_CLASS.get(link, "nvlink")


def bus_efficiency(collective: str, algorithm: str, protocol: str, across_nodes: bool,
                   one_gpu_per_node: bool) -> float:
    """Payload bytes per wire byte NCCL's tuner charges an (algorithm, protocol) pair: the
    factors of its bus bandwidth against Simple's on the same links (module docstring)."""
    if algorithm == "nvls":
        return NVLS_EFFICIENCY
    if collective == "alltoall":
        return LINE_EFFICIENCY[protocol]
    if algorithm == "ring":
        if protocol == "ll":  # tuning.cc: busBw * (nNodes > 1 || AllReduce ? 1/4 : 1/3)
            return 1 / 4 if (across_nodes or collective == "allreduce") else 1 / 3
        if protocol == "ll128":  # busBw * (ppn < 2 ? 0.7 : 0.92 /*120.0/128.0*/)
            return 0.7 if one_gpu_per_node else 0.92
        return 1.0
    tree = 0.92  # tuning.cc: tree busBw * .92
    if protocol == "ll":  # then * 1.0/3.8
        return tree / 3.8
    if protocol == "ll128":  # then * (nNodes == 1 ? 7/9 : 120/128)
        return tree * (120 / 128 if across_nodes else 7 / 9)
    return tree


def hop(link: str, algorithm: str, protocol: str) -> float:
    """One hop of (algorithm, protocol) on `link`, in ring hops of `protocol` on that link."""
    table = HW_LAT_US[link_class(link)]
    return table[(algorithm, protocol)] / table[("ring", protocol)]


def intra_hop_leaving_node(protocol: str) -> float:
    """An NVLink hop of a ring that also crosses the network, in NVLink ring hops: at least the
    network overhead (tuning.cc: intraLat = max(intraLat, netOverhead))."""
    ring = HW_LAT_US["nvlink"][("ring", protocol)]
    overhead = NET_OVERHEAD_US * (NET_OVERHEAD_SIMPLE_FACTOR if protocol == "simple" else 1.0)
    return max(ring, overhead) / ring


def base(link: str, algorithm: str, protocol: str) -> float:
    """The fixed cost of one collective, in ring hops of `protocol` on `link` (where it is
    charged)."""
    return BASE_LAT_US[(algorithm, protocol)] / HW_LAT_US[link_class(link)][("ring", protocol)]
