"""DeepEP's expert-parallel dispatch and combine inside one NVLink domain, as its kernels run them
(deep_ep 1.0.0 from PyPI: deep_ep/buffer.py, csrc/deep_ep.cpp, csrc/kernels/intranode.cu and
internode_ll.cu; line numbers of that release).

Normal ("high-throughput") kernels, intranode (2, 4 or 8 ranks over NVLink):
  * Each token goes once to every rank that holds one of its top-k experts, not once per expert
    (the layout's `is_token_in_rank`): with the experts drawn uniformly, a token reaches
    G·(1 − C(E − E/G, k) / C(E, k)) of the G ranks (`ranks_per_token`).
  * dispatch runs on `Buffer.num_sms` = 20 SMs (buffer.py:30): even SMs send, odd ones receive,
    one channel per pair (intranode.cu:187-191). A sender CTA has one warp per destination rank
    (`__launch_bounds__(kNumRanks * 32, 1)`, :178) that walks its channel's tokens and copies each
    one bound for its rank into that rank's ring buffer with UNROLLED_WARP_COPY(5, …) (:293):
    per lane five 16-byte loads, then their stores, the remainder one element at a time; then the
    scales (one 4-byte word per lane per step, :313) and the top-k entries. A receiver warp per
    source rank copies the ring buffer into the output the same way (:381). Each warp's copy
    waits on its own loads round after round (the stores, over NVLink to the peer or into local
    memory, are posted), so a warp's time is its copies × their dependent load rounds
    (`warp_copy_rounds`) × the latency of one round (`deepep.copy_round_trips`, a share of
    the DRAM round trip, fitted: the data is L2-held, no source gives the loaded latency; on
    Blackwell its own fit, `deepep.copy_round_trips.blackwell`), the warps of an SM in
    parallel: the SM count sets the throughput, as SGLang's SM sweep shows (time ∝ 1/SMs until
    NVLink binds).
  * combine runs 768-thread CTAs on the same SMs (kNumThreads = 768, :779): a rank's tokens go to
    24 / ranks sender warps with UNROLLED_WARP_COPY(4, …) (:602); a receiver warp (23 of the 24,
    :697) sums a token's copies rank by rank, one dependent load round per rank for each of its
    lanes' 16-byte steps (:727). The busier side sets the time. Its wire type is BF16 (the
    kernel's dtype_t).
  * HBM per GPU: the sender reads each copy, its peer's buffer takes it, the receiver reads it
    back and writes the output: four passes of the copies' bytes (combine: three, plus the
    reduced tokens written once), at the HBM's bandwidth. NVLink carries the copies bound for
    other ranks, (G − 1)/G of them, at the link's achievable rate. The copy rounds run under
    these streams (Demand.persistent): the longest binds.
  * Fixed time outside the copy (`fixed_s`): dispatch launches the layout, notify and dispatch
    kernels and, between the last two, the host busy-waits on a mapped counter for the number of
    tokens it will receive (deep_ep.cpp:417-431) before it allocates the outputs; combine
    launches its notify kernel (a cross-rank barrier) and the combine kernel. No source states
    these times: one constant per kernel kind is fitted on H100 rows of TensorRT-LLM's DeepEP
    (AIConfigurator, perfmodel/fitted.yaml `deepep.fixed_s.*`), the other GPUs judged. They are
    the x86 hosts' (the rows are eager calls, their small ones host-bound): on a Grace host
    (GB200, GB300: `topology.host_cpu`) the call takes them times the ratio the engines' eager
    all-reduce calls take there (`custom_allreduce.eager_host_ratio.grace`, fitted on GB200's
    engine rows), which GB200's and GB300's DeepEP rows judge (`DeepEP.fixed_s`).

Low-latency kernels (internode_ll.cu): one kernel per call on ceil(experts / 3) SMs of 3 warp
groups × 10 warps (:299-305, 329), every token sent once per selected expert (top_k copies, no
per-rank de-duplication) into that expert's receive slots; dispatch on the wire in the call's
type (FP8 with a scale per 128, BF16 or NVFP4), combine back in its own. Its copies are one
16-byte load per lane at a time (the lane loops of :83-140), priced by Little's law on those
loads in flight at the DRAM latency, and its fixed time is fitted as the normal kernels' is.

Normal kernels, internode (csrc/kernels/internode.cu; README "Normal kernels with NVLink and
RDMA forwarding"), for EP groups of whole 8-GPU NVLink nodes (NUM_MAX_NVL_PEERS = 8; the rank
counts buffer.py:170-176 has configs for: 16, 24, 32, 64, 128, 144, 160):
  * a token crosses the network once per destination node, not once per rank or expert: it goes
    over RDMA to the GPU of the same local rank on each node that holds one of its experts, which
    forwards it over NVLink to the node's ranks that need it (the layout's
    `num_tokens_per_rdma_rank`; tests/test_internode.py counts the RDMA bytes the same way,
    `rdma_idx` made unique per token over the nodes, the token's own node included);
  * the nodes a token reaches: with DeepSeek's group-limited gate (`expert_groups`,
    `group_top_k`; the groups laid contiguously, so each node holds expert_groups / nodes of
    them) the nodes of its group_top_k chosen groups, N·(1 − C(g − g/N, t) / C(g, t)) (every
    chosen group is assumed to receive one of the top-k experts: a group is chosen by the sum of
    its two best scores); without a group limit the uniform draw's N·(1 − C(E − E/N, k) /
    C(E, k));
  * the RDMA leg runs at DEEPEP_RDMA_FRACTION of the GPU's NIC (the network link), the NVLink
    forwarding leg beside it at the NVLink's achievable rate: the two are chunked and pipelined,
    so the longer binds, plus the normal kernels' fixed time (the intranode fit's) and one
    network latency.

Not modelled: NVSHMEM's IBGDA path inside an NVL72 rack (DeepEP's internode kernels take NVLink
peers in groups of 8), the SMs the kernels take from the computation beside them, routing
imbalance (every rank sends and receives the mean), and non-uniform routing at the rank level
(the uniform draw sends a DeepSeek-V3 token to 5.3 of 8 ranks, its group-limited gate to at most
4 groups).
"""
from __future__ import annotations

import math

from perfmodel import fitted
from perfmodel.demand import Demand, LaunchShape
from perfmodel.errors import InputError
from perfmodel.ops.base import Op, Param, positive
from perfmodel.ops.nccl import arch_row

# deep_ep/buffer.py:30 and the intranode kernels' rank templates (SWITCH_RANKS: 2, 4, 8)
DEFAULT_NUM_SMS = 20
INTRANODE_RANKS = (2, 4, 8)
# the internode normal kernels: NVLink peers per node (NUM_MAX_NVL_PEERS) and the rank counts
# with a dispatch/combine config (deep_ep/buffer.py get_dispatch_config, :170-176)
NVL_PEERS = 8
INTERNODE_RANKS = (16, 24, 32, 64, 128, 144, 160)
# The share of the NIC's line rate the internode normal kernels reach on the RDMA leg: DeepEP's
# README measures 43, 44 and 46 GB/s (dispatch, EP 16/32/64, FP8) and 43, 47 and 45 GB/s
# (combine, BF16) of "bottleneck bandwidth (RDMA)" on H800 with one ConnectX-7 400 Gb/s NIC
# (~50 GB/s) per GPU, bytes counted per destination node: their mean, 44.7 / 50. A measured
# figure from the kernel's authors, not fitted on any row here.
DEEPEP_RDMA_FRACTION = 0.89
# UNROLLED_WARP_COPY: lanes × 16-byte (int4) loads, unrolled 5 (dispatch) or 4 (combine sender)
LANES = 32
INT4_BYTES = 16
DISPATCH_UNROLL = 5
COMBINE_THREADS = 768
COMBINE_UNROLL = 4
# low-latency kernels: 3 warp groups of 10 warps per SM, one SM per 3 experts
LL_WARP_GROUPS = 3
LL_WARPS_PER_GROUP = 10
LL_UNROLL = 1
# the per-token metadata each copy carries: the source index (int32), top-k indices (int64) and
# weights (fp32), copied by the lanes in one more round
SRC_IDX_BYTES = 4
TOPK_ENTRY_BYTES = 8 + 4
METADATA_ROUNDS = 1
# the token's elements and its scales on the wire, and the scales' words the lanes copy one
# per lane per round (`for (int i = lane_id; i < num_scales; i += 32)`, intranode.cu:313)
WIRE_ELEMENT_BYTES = {"bf16": 2.0, "fp8": 1.0, "nvfp4": 0.5}
SCALE_BYTES_PER_ELEMENT = {"bf16": 0.0, "fp8": 4.0 / 128, "nvfp4": 1.0 / 16}
SCALE_WORD_BYTES = 4
# combine's receiver CTA: 24 warps, one of them coordinating the others' heads (:697)
COMBINE_RECEIVE_WARPS = COMBINE_THREADS // LANES - 1
MODES = ("normal", "low_latency")
PHASES = ("dispatch", "combine")
DTYPES = ("bf16", "fp8", "nvfp4")


def wire_bytes_per_element(dtype: str) -> float:
    """Bytes per hidden element on the wire, scales included: BF16 2; FP8 1 + an FP32 scale per
    128 (DeepEP's per-token, per-128-channel scales); NVFP4 ½ + an E4M3 scale per 16."""
    return WIRE_ELEMENT_BYTES[dtype] + SCALE_BYTES_PER_ELEMENT[dtype]


def ranks_per_token(experts: int, ep: int, top_k: int) -> float:
    """Expected ranks a token reaches when its top-k experts are drawn uniformly without
    replacement from `experts` split evenly over `ep` ranks: ep·(1 − C(E − E/ep, k) / C(E, k))."""
    local = experts // ep
    miss = 1.0
    for i in range(top_k):  # C(E − E/G, k) / C(E, k) as a product
        miss *= max(0.0, (experts - local - i) / (experts - i))
    return ep * (1.0 - miss)


# the fixed time of each (mode, phase) call (module docstring), fitted
FIXED_S = {(m, p): fitted.value_or_nan(f"deepep.fixed_s.{m}.{p}") for m in MODES for p in PHASES}
# one dependent copy round of a normal kernel's warp in DRAM round trips (its loads hit the
# L2-held input and ring buffers; module docstring), fitted: on Hopper (SGLang's H200 rows), and
# on Blackwell's two-die GPUs apart (TensorRT-LLM's B200 rows), where a line the warp loads may
# sit in the far die's L2 (its latency bimodal across the dies, Chips and Cheese's B200
# measurements; the spec's DRAM round trip is Hopper's) and the same copies take ~1.5x longer
COPY_ROUND_TRIPS = fitted.value_or_nan("deepep.copy_round_trips")
COPY_ROUND_TRIPS_BLACKWELL = fitted.value_or_nan("deepep.copy_round_trips.blackwell")


def copy_round_trips(hw) -> float:
    """The copy round of `hw`'s family (nccl.arch_row: Blackwell's from compute capability 10
    on, Hopper's for every earlier GPU). Read at call time: the fits set the two values."""
    return arch_row({9: COPY_ROUND_TRIPS, 10: COPY_ROUND_TRIPS_BLACKWELL}, hw.compute_capability)


class DeepEP(Op):
    """One DeepEP dispatch or combine call of `tokens` tokens per rank over `ep` GPUs: of one
    NVLink domain, or of whole 8-GPU nodes over the network (the internode normal kernels;
    module docstring)."""

    name = "deepep"
    EXAMPLE = dict(tokens=4096, hidden=7168, top_k=8, experts=256, ep=8)
    PARAMS = {
        "tokens": positive("tokens", "tokens per rank (the call's input)"),
        "hidden": positive("elements", "hidden size of a token"),
        "top_k": Param("int", required=True, lo=1, hi=32, hi_why="DeepEP's kernels take at "
                       "most 32 (EP_DEVICE_ASSERT(num_topk <= 32))", doc="experts per token"),
        "experts": positive("experts", "routed experts over all ranks"),
        "ep": Param("int", required=True, lo=2, hi=max(INTERNODE_RANKS),
                    hi_why="DeepEP's largest rank count with a config (buffer.py)",
                    doc="ranks of the expert-parallel group (2, 4, 8 in one NVLink domain; "
                        "16-160 over 8-GPU nodes: the internode kernels)"),
        "expert_groups": Param("int", default=1, lo=1, doc="groups of the gate's group-limited "
                               "routing (DeepSeek-V3: 8); 1: no group limit"),
        "group_top_k": Param("int", default=None, nullable=True, lo=1,
                             doc="groups a token's experts come from (DeepSeek-V3: 4)"),
        "phase": Param("choice", default="dispatch", choices=PHASES,
                       doc="dispatch (tokens to experts) or combine (results back)"),
        "mode": Param("choice", default="normal", choices=MODES,
                      doc="normal (high-throughput) or low_latency kernels"),
        "dtype": Param("choice", default="bf16", choices=DTYPES,
                       doc="type on the wire (normal combine: bf16 only)"),
        "num_sms": Param("int", default=DEFAULT_NUM_SMS, lo=2, hi=1024,
                         doc="SMs of the normal kernels (Buffer.num_sms; even)"),
    }
    SIZE_PARAMS = ("tokens",)

    def check(self, v):
        problems = []
        if v["experts"] % v["ep"]:
            problems.append(("experts", f"{v['experts']} experts do not split evenly over "
                                        f"ep = {v['ep']} ranks"))
        if v["top_k"] > v["experts"]:
            problems.append(("top_k", f"top_k = {v['top_k']} exceeds experts = "
                                      f"{v['experts']}"))
        if v["group_top_k"] is not None and not v["group_top_k"] <= v["expert_groups"]:
            problems.append(("group_top_k", f"group_top_k = {v['group_top_k']} exceeds "
                                            f"expert_groups = {v['expert_groups']}"))
        if v["experts"] % v["expert_groups"]:
            problems.append(("expert_groups", f"{v['experts']} experts do not split into "
                                              f"{v['expert_groups']} groups"))
        if v["mode"] == "normal":
            if v["ep"] not in INTRANODE_RANKS + INTERNODE_RANKS:
                problems.append(("ep", f"DeepEP's normal kernels run 2, 4 or 8 ranks in one "
                                       f"NVLink domain or {', '.join(map(str, INTERNODE_RANKS))}"
                                       f" over 8-GPU nodes (got {v['ep']})"))
            if v["num_sms"] % 2:
                problems.append(("num_sms", f"DeepEP pairs sender and receiver SMs: expected "
                                            f"an even count, got {v['num_sms']}"))
            if v["phase"] == "combine" and v["dtype"] != "bf16":
                problems.append(("dtype", f"DeepEP's normal combine sends BF16 (its kernel's "
                                          f"dtype), got {v['dtype']!r}"))
        elif v["num_sms"] != DEFAULT_NUM_SMS:
            problems.append(("num_sms", f"num_sms applies to the normal kernels; the "
                                        f"low-latency ones run on ceil(experts / "
                                        f"{LL_WARP_GROUPS}) SMs (got {v['num_sms']})"))
        return problems

    def fixed_s(self, hw) -> float:
        """The call's fixed time (FIXED_S, fitted on x86-hosted H100 calls) on `hw`'s host: a
        Grace host's is the x86 one times the ratio the engines' eager calls take there
        (custom_allreduce.EAGER_HOST_RATIO, fitted on GB200's eager all-reduce calls; module
        docstring)."""
        from perfmodel.ops.custom_allreduce import EAGER_HOST_RATIO
        return FIXED_S[(self.mode, self.phase)] * EAGER_HOST_RATIO.get(hw.host_cpu, 1.0)

    def cache_state(self) -> tuple:
        """The fitted time the demand reads (perfmodel.validation.fit sets it while it fits):
        the prediction caches key on it."""
        from perfmodel.ops.custom_allreduce import EAGER_HOST_RATIO
        return (FIXED_S[(self.mode, self.phase)], COPY_ROUND_TRIPS, COPY_ROUND_TRIPS_BLACKWELL,
                tuple(sorted(EAGER_HOST_RATIO.items())))

    @property
    def copies(self) -> float:
        """Token copies each rank sends (and receives, the mean over ranks)."""
        if self.mode == "low_latency":
            return float(self.tokens) * self.top_k
        return self.tokens * ranks_per_token(self.experts, self.ep, self.top_k)

    @staticmethod
    def internode_on(ep: int, hw) -> bool:
        """Whether the normal kernels of `ep` ranks on `hw` are the internode ones (whole 8-GPU
        NVLink nodes over the network), as modelled."""
        return ep in INTERNODE_RANKS and hw.nvlink_domain_gpus == NVL_PEERS \
            and "network" in hw.links

    @classmethod
    def runs_on(cls, ep: int, hw, mode: str = "normal") -> bool:
        """Whether a call of `ep` ranks in `mode` runs on `hw` as modelled."""
        if ep in INTRANODE_RANKS or mode == "low_latency":
            return ep <= hw.nvlink_domain_gpus
        return mode == "normal" and cls.internode_on(ep, hw)

    def unsupported_on(self, hw) -> str | None:
        """Why the call cannot run on `hw` as modelled (None: it can)."""
        if self.runs_on(self.ep, hw, self.mode):
            return None
        if self.mode == "normal" and self.ep in INTERNODE_RANKS:
            return (f"deepep: ep = {self.ep} needs DeepEP's internode kernels, which group ranks "
                    f"in nodes of {NVL_PEERS} NVLink peers over the network; {hw.name}'s "
                    f"NVLink domain has {hw.nvlink_domain_gpus} GPUs (NVSHMEM inside a larger "
                    f"domain is not modelled)")
        return (f"deepep: ep = {self.ep} spans more than {hw.name}'s NVLink domain of "
                f"{hw.nvlink_domain_gpus} GPUs; DeepEP's low-latency kernels across nodes are "
                f"not modelled")

    @property
    def nodes_per_token(self) -> float:
        """Nodes of NVL_PEERS ranks a token reaches (module docstring, internode)."""
        nodes = self.ep // NVL_PEERS
        g, t = self.expert_groups, self.group_top_k
        if t is not None and g > 1 and g % nodes == 0 and t < g:
            return ranks_per_token(g, nodes, t)  # the nodes of its chosen groups
        return ranks_per_token(self.experts, nodes, self.top_k)

    def copy_rounds(self) -> dict[str, float]:
        """The normal kernels' dependent copy rounds per warp (module docstring): the busiest
        warp's count, sender and receiver side."""
        channels = self.num_sms // 2
        reached = ranks_per_token(self.experts, self.ep, self.top_k)
        share = reached / self.ep  # the share of tokens each rank gets
        x_int4 = self.hidden * WIRE_ELEMENT_BYTES[self.dtype] / INT4_BYTES
        scale_rounds = math.ceil(self.hidden * SCALE_BYTES_PER_ELEMENT[self.dtype]
                                 / SCALE_WORD_BYTES / LANES)
        if self.phase == "dispatch":
            # one warp per (channel, rank) on each side: the copies its channel sends that rank
            copies = self.tokens / channels * share
            per_copy = warp_copy_rounds(x_int4, DISPATCH_UNROLL) + scale_rounds \
                + METADATA_ROUNDS
            return {"sender": copies * per_copy, "receiver": copies * per_copy}
        senders_per_rank = COMBINE_THREADS // LANES // self.ep
        copies = self.tokens / channels * share / senders_per_rank
        send = copies * (warp_copy_rounds(x_int4, COMBINE_UNROLL) + METADATA_ROUNDS)
        # a receiver warp sums a token's copies rank by rank: one round per rank per lane step
        tokens = self.tokens / channels / COMBINE_RECEIVE_WARPS
        per_token = math.ceil(x_int4 / LANES) * reached + METADATA_ROUNDS
        return {"sender": send, "receiver": tokens * per_token}

    def demand(self, hw):
        reason = self.unsupported_on(hw)
        if reason:
            raise InputError(reason)
        token = self.hidden * wire_bytes_per_element(self.dtype) + SRC_IDX_BYTES \
            + self.top_k * TOPK_ENTRY_BYTES
        if self.mode == "normal" and self.ep in INTERNODE_RANKS:
            return self._internode_demand(hw, token)
        sent = self.copies * token
        remote = sent * (self.ep - 1) / self.ep
        link = hw.link("nvlink")
        details = {"copies": self.copies, "bytes_per_copy": token, "remote_bytes": remote,
                   "mode": self.mode, "phase": self.phase}
        work = {"link:nvlink": remote / link.achievable_fraction}
        if self.mode == "low_latency":
            ctas = math.ceil(self.experts / LL_WARP_GROUPS)
            warps = LL_WARP_GROUPS * LL_WARPS_PER_GROUP
            work["hbm"] = 4.0 * sent
            # Little's law on one 16-byte load per lane in flight, each load's bytes and its
            # posted store's
            launch = LaunchShape(ctas=ctas, threads_per_cta=warps * LANES,
                                 bytes_in_flight_per_cta=2.0 * warps * LL_UNROLL * LANES
                                 * INT4_BYTES)
            return Demand(work=work, launch=launch, hbm_bytes=work["hbm"], kernels=1,
                          fixed_s=self.fixed_s(hw), details=details)
        passes = 4.0 if self.phase == "dispatch" else \
            3.0 + self.tokens * self.hidden * 2.0 / max(sent, 1.0)
        work["hbm"] = passes * sent
        rounds = self.copy_rounds()
        chain = max(rounds.values())
        details.update(sender_rounds=rounds["sender"], receiver_rounds=rounds["receiver"])
        threads = (self.ep if self.phase == "dispatch" else COMBINE_THREADS // LANES) * LANES
        # one CTA per SM, its warps' copy rounds serial (in DRAM round trips), pipelined with
        # the HBM and NVLink traffic (persistent: the longer binds); the HBM time is its
        # bandwidth's, the latency being the chain's
        launch = LaunchShape(ctas=self.num_sms, threads_per_cta=threads,
                             bytes_in_flight_per_cta=work["hbm"])
        return Demand(work=work, launch=launch, hbm_bytes=work["hbm"],
                      kernels=3 if self.phase == "dispatch" else 2,
                      cta_dram_round_trips=chain * copy_round_trips(hw),
                      persistent=True, fixed_s=self.fixed_s(hw),
                      details=details)


    def _internode_demand(self, hw, token: float) -> Demand:
        """The internode normal kernels (module docstring): the RDMA leg, once per destination
        node, beside the NVLink forwarding leg to the ranks inside each node."""
        rdma = self.tokens * self.nodes_per_token * token
        ranks = self.tokens * ranks_per_token(self.experts, self.ep, self.top_k)
        nvl = ranks * token * (NVL_PEERS - 1) / NVL_PEERS  # its own rank's copies stay local
        nvlink = hw.link("nvlink")
        hw.link("network")
        # HBM: each RDMA copy is read at its sender and written at its receiver; each forwarded
        # copy read there and written at its rank, which reads it into the output
        hbm = 2.0 * rdma + 3.0 * ranks * token
        work = {"link:network": rdma / DEEPEP_RDMA_FRACTION,
                "link:nvlink": nvl / nvlink.achievable_fraction, "hbm": hbm}
        details = {"kernels": "internode", "nodes_per_token": self.nodes_per_token,
                   "rdma_bytes": rdma, "nvlink_bytes": nvl, "mode": self.mode,
                   "phase": self.phase}
        return Demand(work=work, launch=None, hbm_bytes=hbm,
                      kernels=3 if self.phase == "dispatch" else 2, link_steps={"network": 1},
                      fixed_s=self.fixed_s(hw), details=details)


def warp_copy_rounds(n_int4: float, unroll: int) -> float:
    """Dependent load rounds of UNROLLED_WARP_COPY(unroll) over n 16-byte elements: the
    unrolled loop's iterations (each `unroll` loads per lane in flight, then their stores), then
    the tail one element per lane at a time."""
    n = int(math.ceil(n_int4))
    stride = LANES * unroll
    return n // stride + math.ceil((n % stride) / LANES)
