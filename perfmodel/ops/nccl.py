"""NCCL's cost model of a collective (src/graph/tuning.cc, ncclTopoTuneModel), as counts.

NCCL predicts the time of each (algorithm, protocol) pair as

    base[algorithm][protocol] + hops · hop[link][algorithm][protocol] + bytes / bandwidth

and its tuner runs the pair of least predicted time for the message size. This module holds
NCCL's numbers, the tuner's estimate (`tuner_cost_s`, by which the collectives pick the pair
NCCL runs) and what an op may hand the engine to price that pair: bytes on the wire and link
steps. The collectives (perfmodel/ops/comm.py) build the Demand from them.

Version and provenance. The tables are NVIDIA/nccl v2.27.7-1 (commit 593de54e),
src/graph/tuning.cc, read at the line numbers cited beside each; what changed in 2.21-2.30 is
noted where it matters. They are as the project's research notes copy them out of that source,
with line numbers (the nvidia-nccl-cu12 wheel ships the library, not tuning.cc).

Bandwidth. A protocol puts more bytes on the wire than it delivers, by its line format: LL
stores 8 B of data with an 8 B flag in every 16 B line (50 %; src/include/device.h:71-83), LL128
120 B of data in every 128 B line (device.h:106-111), Simple moves plain data. tuning.cc:266-327
turns the bus bandwidth of a graph (nChannels x per-channel speed: the link's rate as NCCL's
topology gives it, src/graph/topo.h) into each pair's:
  ring LL      min(llMaxBw, 0.5 busBw)              (llMaxBws[arch][nodes]: one node 87.7
                                                     Ampere, 141 Hopper, 282 Blackwell GB/s)
  ring LL128   0.92 busBw                          ("120.0/128.0"; the per-channel cap
                                                     nCh x perChMaxRingLL128Bw is above it on
                                                     the NVSwitch boards: not modelled)
  tree         0.92 busBw, then LL: min(that/3.8, llMaxBw), LL128: x 7/9 in one node, x 120/128
               across nodes
  NVLS         perfmodel: the switch traffic at NVLS_EFFICIENCY per architecture (below)
`bus_efficiency` returns the payload-per-wire-byte factor these imply on the op's link; the op
divides its payload bytes by it (and by the link's achievable fraction).

Latency. tuning.cc:134-156 (tables below) and 328-378 (how they add up: a ring pays base +
steps x hop; a tree base + 2((ppn-1) intra + log2(nodes) inter) hops; NVLS its hop alone). The
engine charges every link step the link's `latency` from the spec, so each spec link states
NCCL's ring hop of each protocol (hwspec keys `links.<name>.ll_latency`, `ll128_latency`,
`simple_latency`, with the `_s` unit suffix; hwspec-format.md), and this module expresses every
other entry in units of that ring hop, taking the ratios from the same table. NCCL's numbers are
its tuner's estimates (fitted by NVIDIA to nccl-tests). Where a GPU family's measured collectives
give its NVLink LL hop and ring LL base (`ll_latency` and `nccl_base_latency`, with the unit
suffix, from perfmodel/fitted.yaml's nccl.* keys), every base keeps tuning.cc's ratio to the
ring LL base (`base_steps`) and the tree's LL hop its ratio to the ring's; the LL128 and Simple
hops stay tuning.cc's.
"""
from __future__ import annotations

from typing import Any

from perfmodel import fitted

PROTOCOLS = ("ll", "ll128", "simple")

# Data bytes per wire byte of each protocol's line format (prims_ll.h: a 16 B line of two
# 4 B data words and two 4 B flags; prims_ll128.h: 128 B lines, 8 B of flags in each; Simple:
# plain data). NCCL's send/receive (the all-to-all) is priced at LL's and at its own fitted
# Simple efficiency inside an NVLink domain (p2p_efficiency, below), at these across domains
# (assumed: p2p is not in tuning.cc's model).
LINE_EFFICIENCY = {"ll": 8 / 16, "ll128": 120 / 128, "simple": 1.0}

# tuning.cc baseLat[algorithm][protocol], us (v2.27.7 tuning.cc:134-137): the fixed cost of
# one collective, from NCCL's fit to back-to-back collectives (nccl-tests), so it includes the
# kernel launch (the collectives count no launch of their own beside it). Ring {6.6, 14.0, 8.4}
# (unchanged 2.21-2.30); tree {6.8, 14.0, 8.4} (tree Simple was 0 in 2.21/2.22, 8.4 from 2.23).
# NVLS: 0 (tuning.cc sets an NVLS latency to its hop, replacing the base).
BASE_LAT_US = {
    ("ring", "ll"): 6.6, ("ring", "ll128"): 14.0, ("ring", "simple"): 8.4,
    ("tree", "ll"): 6.8, ("tree", "ll128"): 14.0, ("tree", "simple"): 8.4,
    ("nvls", "simple"): 0.0,
}

# tuning.cc hwLat[NVLINK|PCI|NET][algorithm][protocol], us per hop (v2.27.7 tuning.cc:143-156).
# Ring: NVLink {.6, 1.9, 3.4}, PCI {1.0, 2.5, 5.7}, NET {2.7, 4.0, 14.0}. Tree: NVLink {.6, 1.25,
# 4}, PCI {1.0, 1.9, 4}, NET {5.0, 8.5, 14} (tree Simple was 28 in every row before 2.23). NVLS
# over NVLink, Simple only: 25 (also in 2.30).
HW_LAT_US = {
    "nvlink": {("ring", "ll"): 0.6, ("ring", "ll128"): 1.9, ("ring", "simple"): 3.4,
               ("tree", "ll"): 0.6, ("tree", "ll128"): 1.25, ("tree", "simple"): 4.0,
               ("nvls", "simple"): 25.0},
    "pcie": {("ring", "ll"): 1.0, ("ring", "ll128"): 2.5, ("ring", "simple"): 5.7,
             ("tree", "ll"): 1.0, ("tree", "ll128"): 1.9, ("tree", "simple"): 4.0},
    "network": {("ring", "ll"): 2.7, ("ring", "ll128"): 4.0, ("ring", "simple"): 14.0,
                ("tree", "ll"): 5.0, ("tree", "ll128"): 8.5, ("tree", "simple"): 14.0},
}

# tuning.cc getNetOverhead() (v2.27.7 tuning.cc:201-209): a ring that leaves the node pays at
# least this per intra-node hop (1 us on Intel x86 and other hosts, 2 on AMD; x3 with Simple).
# Intel/Arm assumed.
NET_OVERHEAD_US = 1.0
NET_OVERHEAD_SIMPLE_FACTOR = 3.0

# NVLS (NVLink SHARP) efficiency: the share of the link's NCCL rate the switch traffic the op
# counts (comm.py: (G+1)/G of the buffer each way) reaches, by compute capability major.
# Hopper: 5/6, the factor tuning.cc (v2.21-2.27, tuning.cc:320-327) applies to NVLS bus bandwidth
# when it converts it to algorithm bandwidth; with 8 H100 (18 x 20.6 GB/s) it gives 480 GB/s of
# NVLS bus bandwidth, as nccl-tests measures it (nccl-tests issue 212: ~480, algbw ~275; nccl
# issue 1455; Azure ND H100 v5: 478.87 GB/s at 8 GiB), where v2.28's nvlsEfficiency of 0.85 would
# give 490. Blackwell: 0.74, v2.28+'s nvlsEfficiency for SM100 (v2.30.7 tuning.cc:139-144); with
# 8 B200 (18 x 40.1 GB/s) it gives 831 GB/s, as measured (nccl issue 1807: 830+ on B200; issue
# 2140: 845 on B300).
NVLS_EFFICIENCY = {9: 5 / 6, 10: 0.74}


def arch_row(table: dict[int, Any], compute_capability: str) -> Any:
    """The entry of a table keyed by compute-capability major for the GPU: its own major,
    clamped to the table's oldest and newest (Blackwell's for any newer GPU)."""
    major = int(str(compute_capability).split(".")[0])
    return table[min(max(major, min(table)), max(table))]


def nvls_efficiency(compute_capability: str) -> float:
    """NVLS_EFFICIENCY of the GPU's architecture (Blackwell's for any newer one)."""
    return arch_row(NVLS_EFFICIENCY, compute_capability)

# Link names of the specs and the class of NCCL's latency table they belong to; any other link
# name is priced as NVLink (assumed).
LINK_CLASS = {"nvlink": "nvlink", "pcie": "pcie", "network": "network"}


def link_class(link: str) -> str:
    return LINK_CLASS.get(link, "nvlink")


# tuning.cc llMaxBws[arch][nodes] (v2.27.7 tuning.cc:164-189, 232-240), GB/s: the most bus
# bandwidth NCCL's LL protocol reaches, by architecture (compute capability < 8, 8.x, 9.x, >= 10)
# and node count (1, 2, >= 3). Across nodes the first index is the CPU vendor in tuning.cc (Intel
# or other: the row used here, as NET_OVERHEAD_US assumes).
LL_MAX_BW_GBPS = {7: (39.0, 39.0, 20.4), 8: (87.7, 22.5, 19.0), 9: (141.0, 45.0, 35.0),
                  10: (282.0, 90.0, 70.0)}
TREE_CORRECTION = 0.92  # tuning.cc: tree busBw * .92
TREE_LL_DIVISOR = 3.8   # tuning.cc: tree LL busBw / 3.8
RING_LL128_FRACTION = 0.92  # tuning.cc: busBw * 0.92 /*120.0/128.0*/


def ll_max_bw_bytes_per_s(compute_capability: str, nodes: int) -> float:
    """llMaxBws for the GPU's architecture and the group's node (NVLink domain) count."""
    row = arch_row(LL_MAX_BW_GBPS, compute_capability)
    return row[0 if nodes <= 1 else 1 if nodes == 2 else 2] * 1e9


def bus_efficiency(collective: str, algorithm: str, protocol: str, nodes: int,
                   bus_bytes_per_s: float, compute_capability: str) -> float:
    """Payload bytes per wire byte NCCL's tuner charges an (algorithm, protocol) pair on a link
    whose bus bandwidth (NCCL's nChannels x bw: the link's rate times its achievable fraction)
    is `bus_bytes_per_s`, for a group over `nodes` NVLink domains (module docstring)."""
    if algorithm == "nvls":
        return nvls_efficiency(compute_capability)
    if collective == "alltoall":  # send/receive: not in tuning.cc's model
        return LINE_EFFICIENCY[protocol]
    ll_cap = ll_max_bw_bytes_per_s(compute_capability, nodes) / bus_bytes_per_s
    if algorithm == "ring":
        if protocol == "ll":  # tuning.cc: std::min(llMaxBw, busBw * .5)
            return min(LINE_EFFICIENCY["ll"], ll_cap)
        if protocol == "ll128":
            return RING_LL128_FRACTION
        return 1.0
    if protocol == "ll":  # tuning.cc: std::min(busBw * .92 / 3.8, llMaxBw)
        return min(TREE_CORRECTION / TREE_LL_DIVISOR, ll_cap)
    if protocol == "ll128":  # then * (nNodes == 1 ? 7/9 : 120/128)
        return TREE_CORRECTION * (120 / 128 if nodes > 1 else 7 / 9)
    return TREE_CORRECTION


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
    charged), by tuning.cc's tables alone."""
    return BASE_LAT_US[(algorithm, protocol)] / HW_LAT_US[link_class(link)][("ring", protocol)]


def base_steps(link: str, algorithm: str, protocol: str, wire) -> float:
    """The fixed cost of one collective in steps of the spec link's (`wire`, a hardware.Link)
    latency: tuning.cc's base scaled by the link's measured ring LL base where the spec gives
    one (Link.nccl_base_steps), else tuning.cc's base in ring hops of the protocol at the link's
    own hop."""
    measured = wire.nccl_base_steps(BASE_LAT_US[(algorithm, protocol)],
                                    BASE_LAT_US[("ring", "ll")])
    if measured is not None:
        return measured
    return base(link, algorithm, protocol) * wire.protocol_step(protocol)


# Channels (one CTA each). NVLS runs a fixed count (v2.27.7 src/transport/nvls.cc:147-149,
# 177-198): 16 on compute capability 9.x, 24 on 10.x+ inside one node or NVLink domain, 32
# across nodes. Ring and tree: the topology search's count doubled at setup (search.cc:937-950,
# connect.cc:452-485); NVLINK_RING_CHANNELS is the runtime count an 8-GPU H100 NVSwitch log shows
# ("Channel 05/16", NVIDIA/nccl issue 1453), taken for every NVSwitch board (assumed). At launch
# NCCL drops channels while the message is under nChannels x threads x threshold (enqueue.cc:
# 1831-1872; thresholds per thread in comm.h:38-40: LL 8 B, x nRanks for ring LL; LL128 8 B;
# Simple 64 B), with 512 threads (LL, Simple) or 640 (LL128; device.h:89-111).
NVLS_CHANNELS = {9: 16, 10: 24}
NVLS_CHANNELS_ACROSS_NODES = 32
NVLINK_RING_CHANNELS = 16
THREAD_THRESHOLD_BYTES = {"ll": 8, "ll128": 8, "simple": 64}
THREADS = {"ll": 512, "ll128": 640, "simple": 512}


def channels(algorithm: str, protocol: str, nbytes: float, ranks: int,
             compute_capability: str, nodes: int = 1) -> int:
    """The channels (CTAs) NCCL runs a collective of `nbytes` on (the count the op reports;
    the time does not depend on it: the link's bus bandwidth already holds the graph's)."""
    if algorithm == "nvls":
        return (NVLS_CHANNELS_ACROSS_NODES if nodes > 1
                else arch_row(NVLS_CHANNELS, compute_capability))
    threshold = THREAD_THRESHOLD_BYTES[protocol] * (ranks if (algorithm, protocol)
                                                    == ("ring", "ll") else 1)
    fits = int(nbytes // (THREADS[protocol] * threshold))
    return max(1, min(NVLINK_RING_CHANNELS, fits))


# Pipeline fill. A channel streams its share of the buffer as a pipeline of chunks: each chunk
# passes the algorithm's stages in turn, and the channel streams at its rate only once its first
# chunk has crossed them, so a call pays (stages − 1) chunk times beyond its bytes over the
# bandwidth (the fill; the drain is the bandwidth term's last chunk). Stages: NVLS moves a chunk
# through four (copied into the NVLS buffer, multimem.ld_reduce through the switch, multimem.st
# back, copied out of the buffer: nccl-tests registers no user buffer, so NCCL copies in and out;
# the research notes on communication §1.8, §1.11); a Simple ring two (a step's chunk lands in
# the peer's buffer before the peer's recvReduceSend forwards it). Chunk: NVLS's chunk,
# NCCL_NVLS_CHUNKSIZE 128 KiB (v2.27.7, research notes §1.6); a Simple ring step, the Simple
# buffer of 4 MiB per channel connection over NCCL_STEPS = 8 slots (v2.27.7 src/init.cc:618-631,
# device.h:25; research notes §1.7): 512 KiB; never more than the channel's share of one GPU's
# shard, S / (channels · G). LL and LL128 move lines of 16 and 128 B, flagged one by one, and
# their base and hop latencies already hold their start (their fill is not counted).
NVLS_CHUNK_BYTES = 128 * 1024
SIMPLE_STEP_BYTES = 4 * 1024 * 1024 // 8
PIPELINE_STAGES = {"nvls": 4, ("ring", "simple"): 2}


def pipeline_fill_s(algorithm: str, protocol: str, nbytes: float, gpus: int, sent_bytes: float,
                    rate_bytes_per_s: float, n_channels: int) -> float:
    """The fill of NCCL's chunk pipeline (above) for a collective of `nbytes` per GPU over
    `gpus` GPUs that sends `sent_bytes` per GPU at `rate_bytes_per_s` (the pair's payload rate:
    the link's rate x achievable fraction x bus efficiency) over `n_channels` channels; 0 for the
    pairs whose fill is not counted."""
    stages = PIPELINE_STAGES.get(algorithm if algorithm == "nvls" else (algorithm, protocol))
    if stages is None or nbytes <= 0 or rate_bytes_per_s <= 0 or gpus < 2:
        return 0.0
    chunk = NVLS_CHUNK_BYTES if algorithm == "nvls" else SIMPLE_STEP_BYTES
    chunk = min(chunk, nbytes / (n_channels * gpus))
    per_channel = rate_bytes_per_s / n_channels
    return (stages - 1) * chunk * (sent_bytes / nbytes) / per_channel


# The ring's local step. A channel moves its share of the buffer in chunk loops of G chunks, and
# each loop runs its 2(G-1) (all-reduce) or G-1 (all-gather, reduce-scatter) link steps one after
# another in the channel's CTA, plus one step that touches only the GPU's own memory: the step
# that puts the GPU's own chunk on the ring or takes the finished one off it (the ring kernels'
# first send and last receive; the loop's structure: NCCL's ring all-reduce, Patarasuk & Yuan
# JPDC 2009, and NCCL's runRing). While a CTA runs it, the link into the GPU idles, so a ring of
# S bytes pays S/G at the channels' local copy rate beside its link time: 1/G of a loop, the most
# with 2 GPUs. AIConfigurator's NCCL 2.29.2 rows of at least 64 MiB show it on every GPU: fitted
# freely, time = fixed + sent / link + (S/G) / local gives the link NCCL's topology rate within
# 6 % (18 x 20.6 GB/s on Hopper, 18 x 40.1 on Blackwell) and local 0.8-1.5 TB/s on Hopper and
# Blackwell alike (perfmodel.validation.collectives ring_bandwidth_report). No source states the
# rate of that step, so it is fitted per architecture (`nccl.ring_local_rate.<arch>` in
# perfmodel/fitted.yaml, the rule in perfmodel.validation.collectives ring_bandwidth_fit).
RING_LOCAL_FAMILY = {9: "hopper", 10: "blackwell"}  # compute-capability major -> fitted key
RING_LOCAL_RATE = {major: fitted.value(f"nccl.ring_local_rate.{family}")
                   for major, family in RING_LOCAL_FAMILY.items()}


def ring_local_step_s(nbytes: float, gpus: int, compute_capability: str) -> float:
    """The ring's local step (above) for a buffer of `nbytes` over `gpus` GPUs."""
    if gpus < 2 or nbytes <= 0:
        return 0.0
    return nbytes / gpus / arch_row(RING_LOCAL_RATE, compute_capability)


# -- NCCL's send/receive: the all-to-all inside one NVLink domain ---------------------------------
# NCCL 2.28 added a native ncclAlltoAll (src/nccl.h.in:448) and nccl-tests' alltoall_perf calls
# it from 2.28 on (nccl-tests src/alltoall.cu:9-15, 317-319); it runs as grouped send/receive:
# one send and one receive per peer, the GPU's own S/G included, spread over the p2p channels
# (research notes on communication §1.7). tuning.cc does not price send/receive, and the
# scheduler's channel split (enqueue.cc's p2p rounds) is not in the project's notes, so the
# all-to-all's terms are the shape AIConfigurator's NCCL 2.29.2 rows show (2, 4 and 8 GPUs,
# 512 B to 512 MiB, every GPU of both families), with four rates fitted on two GPUs and judged
# on the four others (perfmodel/fitted.yaml `nccl.p2p.*`; perfmodel.validation.collectives
# p2p_fit):
#   - the peers' transfers run at once on their own channels, so the latency is one round,
#     not G−1 hops: NCCL's ring base of the protocol (scaled by the family's measured ring LL
#     base, as every base here) and one hop (LL) or two (Simple: the receiver's credit to the
#     sender, then the data and its flag: a send/receive pair's rendezvous, where a ring's
#     steady state has credits in hand), plus `peer_s` per peer beyond the first (the kernel
#     walks a work item per peer); the rows rise ~0.4 us per peer where a ring adds ~1 us
#     per hop;
#   - LL (below NCCL_P2P_LL_THRESHOLD, 16 KiB per peer per channel) moves each peer's S/G
#     at `ll_rate`, the few channels a small message gets; Simple above it. The threshold's
#     channel count is not known here, so the op runs the faster of the two (the rows' switch
#     to Simple's 13-17 us plateau lies where LL's time crosses it);
#   - Simple's bytes: the peers' (G−1)/G·S cross NVLink at `link_efficiency` of NCCL's link
#     rate (Hopper's binding term: its 2-GPU rows move S/2 in the time 4 and 8 GPUs move
#     (G−1)/G·S), and the whole buffer, the GPU's own part included, passes the p2p channels'
#     copy at `copy_rate` (Blackwell's binding term: every GPU count moves S at one rate,
#     ~0.9 of the link NCCL's rings reach; its NVLink doubled Hopper's, its channels did not).
# Across NVLink domains the all-to-all keeps the pairwise form (perfmodel/ops/comm.py).
P2P_KEYS = ("peer_s", "ll_rate", "link_efficiency", "copy_rate")
P2P = {key: fitted.value_or_nan(f"nccl.p2p.{key}") for key in P2P_KEYS}
P2P_HOPS = {"ll": 1, "simple": 2}
P2P_PROTOCOLS = tuple(P2P_HOPS)


def p2p_efficiency(protocol: str, p2p: dict[str, float] | None = None) -> float:
    """Payload per NCCL link byte of the all-to-all's peers: LL's line format, Simple at the
    p2p link efficiency (of `p2p`, the rates by P2P_KEYS; default the fitted P2P)."""
    if protocol == "ll":
        return LINE_EFFICIENCY["ll"]
    return (P2P if p2p is None else p2p)["link_efficiency"]


def p2p_extra_s(protocol: str, nbytes: float, gpus: int, link_s: float,
                p2p: dict[str, float] | None = None) -> float:
    """What the all-to-all of `nbytes` per GPU over `gpus` GPUs pays beyond its link time
    `link_s` (the peers' bytes at p2p_efficiency) and its latency steps: `peer_s` per peer
    beyond the first, then LL's per-peer transfer at `ll_rate`, or what the channels' copy of
    the whole buffer at `copy_rate` takes beyond the link time (module notes); the rates of
    `p2p` (default the fitted P2P; the fit passes its trial values)."""
    p2p = P2P if p2p is None else p2p
    peers = (gpus - 1) * p2p["peer_s"]
    if protocol == "ll":
        return peers + nbytes / gpus / p2p["ll_rate"]
    return peers + max(0.0, nbytes / p2p["copy_rate"] - link_s)


# -- NCCL's tuner: which (algorithm, protocol) runs -------------------------------------------
# NCCL does not run the pair that is truly fastest: it runs the pair its own cost model prices
# lowest (v2.27.7 src/enqueue.cc:1753-1810 topoGetAlgoInfo takes the minimum of
# ncclTopoGetAlgoTime over the allowed pairs; "we estimate how much time each would take, then
# take the lowest", NVIDIA/nccl issue 457), time_us = latency + nBytes / (1000 · algBw)
# (tuning.cc:561-578), with nBytes the per-GPU buffer of an all-reduce and the whole gathered or
# scattered buffer of an all-gather or reduce-scatter (enqueue.h:30-38): the `bytes` of these
# ops. The op then prices the chosen pair with the model (comm.py). The tuner's terms, from the
# tables above (tuning.cc, research notes on communication §1.2-1.5):
#   latency  ring: base + (nsteps − nInter)·max(intraLat, netOverhead) + nInter·interLat,
#            nsteps 2(G−1) (all-reduce) or G−1, nInter 2(nodes−1) or nodes−1
#            (tuning.cc:347-355);
#            tree: base + 2((ppn−1)·intraLat + log2i(nodes)·interLat); NVLS: its hop alone.
#   bandwidth  the bus bandwidth B (nChannels x bw of the graph: the link's NCCL rate, as
#            bus_efficiency takes it), then ring LL min(llMaxBw, B/2), LL128 0.92 B, Simple B,
#            x G/nsteps; tree 0.92 B, LL min(that/3.8, llMaxBw), LL128 x 7/9 (one node) or
#            120/128, x 1/2, x treeCorrectionFactor by size (tuning.cc:553-578); NVLS (the
#            v2.28+ form, NCCL 2.29.2 being what the project's rows measure; v2.30.7
#            tuning.cc:307-323, 376-382):
#            min(B · nvlsEfficiency · (nCh−1)/nCh · 2, B) x G/nsteps,
#            nCh the NVLS channels, the inter-node bound B on one node (assumed: one node's NVLS
#            graph has the same inter and intra speed), nvlsEfficiency 0.85 Hopper, 0.74
#            Blackwell (v2.30.7 tuning.cc:139-144).
# Not modelled: the per-channel caps (nCh x perChMaxRingLL128Bw, perChMaxTreeBw, ...: they need
# the topology search's channel count, which the spec does not carry; v2.29's Blackwell ring
# LL128 cap of 34.5 GB/s per channel would slow LL128 in the tuner's eyes), the multi-node ring
# Simple all-reduce's x1.4 latency plateau, the FP8 ring penalty and NCCL_ALGO/NCCL_PROTO beyond
# the op's own `algorithm` and `protocol`.
# Against AIConfigurator's NCCL 2.29.2 rows (validate/data/aiconfigurator_nccl.csv) these terms
# place the switches where the measured times jump: ring LL to Simple between 1 and 2 MiB on 2
# H100s and between 2 and 4 MiB on 2 B200s; ring LL to NVLS between 1 and 2 MiB on 8 H100s, 2
# and 4 MiB on 8 B200s, 4 and 8 MiB on 4 B200s. They keep NVLS at every larger size, where the
# Blackwell rows run a ring again from 128 MiB (busbw below the ring's 721.8 GB/s bound): NCCL's
# tuner must price NVLS below the ring there, which no reading of the v2.28+ NVLS terms above
# does for both 4 and 8 GPUs (from the rows' switch points, its NVLS algorithm bandwidth would
# be ~0.97-0.99 of the ring's on 4 B200s and ~0.84-0.91 on 8). Not modelled: NVLS is kept.
# The rows' slopes say more than their switch points: on 4 B200s, 16-64 MiB add ~585 GB/s of
# algorithm bandwidth (0.8 x the 722 GB/s link: NVLS's G/(G+1) share of the link at full
# efficiency, above the model's 0.74), on 8 B200s 4-64 MiB add only ~280 GB/s, below any
# NVLS reading and close to a ring's (the model's ring reads -3 ... -20 % there, its NVLS
# -26 ... -33 %); which pair NCCL 2.29.2 runs on 8 GPUs needs its tuning.cc, not read here.
TUNER_NVLS_EFFICIENCY = {9: 0.85, 10: 0.74}
TUNED_ALGORITHMS = ("ring", "tree", "nvls")  # the algorithms the tuner prices

# tuning.cc treeCorrectionFactor[protocol][log2(nBytes/64)], 64 B ... 256 MiB (v2.27.7
# tuning.cc:553-578; research notes §1.4)
TREE_CORRECTION_FACTOR = {
    "ll": (1, 1, 1, 1, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1, 1, 1, 1),
    "ll128": (1, 1, 1, 1, 1, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1, 1),
    "simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8,
               .9, .9),
}


def _log2i(x: float) -> int:
    return int(x).bit_length() - 1 if x >= 1 else -1


def tuner_latency_us(collective: str, algorithm: str, protocol: str, gpus: int, nodes: int,
                     intra_link: str) -> float:
    """The latency (us) NCCL's tuner gives (algorithm, protocol) for `gpus` GPUs over `nodes`
    nodes (NVLink domains), the GPUs of a node joined by `intra_link` (module notes)."""
    key = (algorithm, protocol)
    if algorithm == "nvls":
        return HW_LAT_US["nvlink"][key]
    intra = HW_LAT_US[link_class(intra_link) if intra_link != "network" else "nvlink"][key]
    inter = HW_LAT_US["network"][key]
    if algorithm == "tree":
        ppn = gpus // nodes
        return BASE_LAT_US[key] + 2 * ((ppn - 1) * intra + _log2i(nodes) * inter)
    per_ring = 2 if collective == "allreduce" else 1
    nsteps, n_inter = per_ring * (gpus - 1), per_ring * (nodes - 1)
    if nodes > 1:
        intra = max(intra, NET_OVERHEAD_US * (NET_OVERHEAD_SIMPLE_FACTOR
                                              if protocol == "simple" else 1.0))
    return BASE_LAT_US[key] + (nsteps - n_inter) * intra + n_inter * inter


def tuner_bandwidth_bytes_per_s(collective: str, algorithm: str, protocol: str, nbytes: float,
                                gpus: int, nodes: int, bus_bytes_per_s: float,
                                compute_capability: str) -> float:
    """The algorithm bandwidth (nBytes per second) NCCL's tuner gives (algorithm, protocol) on
    a graph of bus bandwidth `bus_bytes_per_s` (module notes)."""
    bus, ll_max = bus_bytes_per_s, ll_max_bw_bytes_per_s(compute_capability, nodes)
    nsteps = (2 if collective == "allreduce" else 1) * (gpus - 1)
    if algorithm == "nvls":
        n_ch = channels("nvls", "simple", 0.0, gpus, compute_capability, nodes)
        eff = arch_row(TUNER_NVLS_EFFICIENCY, compute_capability)
        return min(bus * eff * (n_ch - 1) / n_ch * 2, bus) * gpus / nsteps
    if algorithm == "ring":
        bw = {"ll": min(ll_max, 0.5 * bus), "ll128": RING_LL128_FRACTION * bus,
              "simple": bus}[protocol]
        return bw * gpus / nsteps
    tree = TREE_CORRECTION * bus
    bw = {"ll": min(tree / TREE_LL_DIVISOR, ll_max),
          "ll128": tree * (7 / 9 if nodes == 1 else 120 / 128), "simple": tree}[protocol]
    index = _log2i(nbytes / 64)
    factors = TREE_CORRECTION_FACTOR[protocol]
    if collective == "allreduce" and 0 <= index < len(factors):
        bw *= factors[index]
    return 0.5 * bw


def tuner_cost_s(collective: str, algorithm: str, protocol: str, nbytes: float, gpus: int,
                 nodes: int, intra_link: str, bus_bytes_per_s: float,
                 compute_capability: str) -> float:
    """NCCL's own cost of the pair (its estimate in seconds, tuning.cc's arithmetic): the
    quantity its tuner minimises to choose, never the model's price of the pair (the engine
    prices the demand the op builds for the chosen pair)."""
    latency = tuner_latency_us(collective, algorithm, protocol, gpus, nodes, intra_link) * 1e-6
    return latency + nbytes / tuner_bandwidth_bytes_per_s(
        collective, algorithm, protocol, nbytes, gpus, nodes, bus_bytes_per_s,
        compute_capability)
