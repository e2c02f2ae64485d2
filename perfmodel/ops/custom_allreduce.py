"""The inference engines' own all-reduce kernels and the rules by which each engine picks one.

vLLM, SGLang and TensorRT-LLM replace NCCL's all-reduce of the tensor-parallel group with kernels
of their own over NVLink peer memory, below a size limit their source sets, and call NCCL above
it. Each kernel here is one Demand (work per resource, link steps, launches); `dispatch` returns
the kernel an engine's rules pick for a message, or nothing where the engine calls NCCL (comm.py
then offers NCCL's algorithms and protocols, the fastest kept). With G GPUs in one NVLink domain
and S bytes per GPU:

  oneshot    every GPU reads (or pushes) every peer's whole buffer and reduces it locally:
             (G−1)·S bytes over its NVLink, its barrier and load trips (NVLINK_TRIPS) and its
             retire (RETIRE_TRIPS).
             vLLM's one-stage kernel, SGLang's 1-shot push and pull, TensorRT-LLM's Lamport
             one-shot; the generic kernel (no engine) is the push kind.
  twoshot    a reduce-scatter then an all-gather through the peers' buffers: each GPU reduces
             its 1/G shard from every peer and every peer reads the reduced shards back,
             2·(G−1)/G·S over its NVLink, its trips (NVLINK_TRIPS, RETIRE_TRIPS).
             vLLM's two-stage kernel, SGLang's 2-shot pull, TensorRT-LLM's two-shot.
  multimem   PyTorch's symmetric-memory `multimem_all_reduce_` (vLLM's fallback before NCCL on
             NVSwitch systems): the switch reduces each GPU's 1/G shard (multimem.ld_reduce) and
             multicasts it back (multimem.st), (G+1)/G·S each way as NCCL's NVLS (comm.py) and
             at its efficiency (ops/nccl.py NVLS_EFFICIENCY: the same switch traffic), a
             barrier before and after (NVLINK_TRIPS), a grid of 8 blocks (LOAD_GRIDS) whose
             ld_reduce round trips bound it on small grids; the input is copied into the
             symmetric buffer and the result out of it (two copy kernels, 2·S of HBM each).

HBM: a kernel's link bytes are read from one GPU's HBM and written into another's, and the
reduction reads its operands once more, 3 × the bytes sent, as comm.py counts NCCL's pairs;
TensorRT-LLM's Lamport kernels (and the generic one-shot) count their phases' own traffic
instead, each phase after the other (PHASED, below). Copy kernels (the eager copies, symm-mem's
copy in and out) are kernels of their own on the stream, before and after the kernel: their
times add to its time (`_with_copies`).
The kernel's boundary (RETIRE_TRIPS). A kernel that stored into its peers' memory retires only
once those stores are acknowledged, a round trip over the NVLink (two trips) after its last
remote store, and the next call's kernel starts after it; the engines' kernels launch with
programmatic dependent launch (TensorRT-LLM's and FlashInfer's fusion kernels
cudaGridDependencySynchronize / cudaTriggerProgrammaticLaunchCompletion, FlashInfer 0.7.4
trtllm_allreduce_fusion.cuh; SGLang 0.5.14's PDLWaitPrimary / PDLTriggerSecondary with
`enable_pdl(is_arch_support_pdl())`), so the next grid's launch overlaps this one's tail. The
kernel is therefore priced as NCCL's pairs are (their base latency holds their launch): no
launch of its own (Demand.kernels counts only the copy kernels), its boundary in NVLink trips.
Measured small calls bear this out (AIConfigurator, CUDA graphs, 256 B on 2 GPUs): TensorRT-LLM
2.66 us on H100 and 4.58 on B200, vLLM 4.3 and 6.6, SGLang's push 2.4 and 3.8: a near-constant
number of LL hops on both families (about 3.4, 5.4 and 3.1), while the graph gap fitted on
TensorRT-LLM's MLA blocks falls from 1.88 us on Hopper to 0.84 on Blackwell; a graph gap plus
the trips left Hopper's calls 16-25 % too slow and Blackwell's 15-30 % too fast. vLLM's kernel
launches without PDL (csrc/custom_all_reduce.cuh: a plain <<<blocks, threads>>> launch) yet
fits the same way: its launch is not separately visible in the rows.

Graph and eager (`mode`). Inside a CUDA graph the engines register the graph's input buffers
with their peers once, at capture. Eagerly, vLLM's custom all-reduce first copies the input into
its pre-registered IPC buffer (custom_all_reduce.py `custom_all_reduce`: "outside of cuda graph
context, custom allreduce incurs a cost of cudaMemcpy"; ops.all_reduce with reg_buffer), and
SGLang's pull kernels copy the input into their buffer and, for the 2-shot kernel, the result
back (custom_all_reduce_pull.cuh lines 186-192: "1.copy the input to the buffer ... 3. copy the
reduced result back"); SGLang's push kernel writes into the peers' buffers from the input
directly and copies nothing. Each copy is one more kernel and 2·S of HBM.

The host's call path of an eager call (`EAGER_HOST_S`). Eagerly, every call runs the engine's
Python dispatch (vLLM's CudaCommunicator.all_reduce → CustomAllreduce.custom_all_reduce →
ops.all_reduce; SGLang's GroupCoordinator.all_reduce → CustomAllReduceV2; vLLM's torch
symm-mem path adds the symmetric buffer's copy in and out and torch.ops.symm_mem's own
dispatch) and the launches it issues, on the host, before the GPU can start the call's kernels.
Timed back to back (a loop of calls, the clock read once around it: nccl-tests' convention,
the project's research notes on communication §2.1, and PyTorch's c10d, §2.3: "a Python-timed
loop without per-iteration synchronize measures pipelined launches"), a call takes the longer of
its host path and its GPU time: the GPU idles while the host is behind (small messages, flat in
size at the host path), the host runs ahead while the GPU is busy (large ones). The op adds the
host path as the call's floor (Demand.host_floor_s), so an eager call
costs max(host path, GPU time). No source publishes the host path of these calls (the research
notes §4 "Gaps": "per-call host overhead of c10d"), so it is a fitted constant per engine path
(`custom_allreduce.eager_host_s.<path>` in perfmodel/fitted.yaml, the rule in
perfmodel/validation/collectives.py `fit_eager_host_s`): the median of the engine's eager calls
of at most 1 MiB on H100 SXM (x86 hosts), where the kernels take well under the call's time.
A graph replay has none: its
launch is one graph launch for the whole step. On a Grace host (GB200/GB300: hwspec
topology.host_cpu) the path is the x86 hosts' times one fitted ratio
(`custom_allreduce.eager_host_ratio.grace`, EAGER_HOST_RATIO).

The engines' NCCL fallback is an eager call with a host path too (NCCL_PATH, `nccl_host_s`), a
different one per engine. vLLM 0.24.0 calls NCCL through its ctypes binding
(cuda_communicator.py `CudaCommunicator.all_reduce` → pynccl.py `PyNcclCommunicator.all_reduce`:
an output from torch.empty_like, ncclAllReduce on the current stream); SGLang (0.5.12 read)
through torch.distributed, its pynccl binding being disabled outside graph capture (pynccl.py:
"by default it is disabled, e.g. in profiling models and prefill phase"; parallel_state.py
`GroupCoordinator.all_reduce` → the inplace_all_reduce custom op → `_all_reduce_in_place` →
torch.distributed.all_reduce), which runs c10d's ProcessGroupNCCL::collective: the stream
event and wait, the work object with its end event, the watchdog's queue (research notes on
communication §2.3). Only a Grace host's tables show these paths host-bound (GB300's groups
beyond one tray, where the custom kernels do not run: HOST_CHECK); each is fitted there and
kept as its x86 value, the Grace rows over EAGER_HOST_RATIO (perfmodel/fitted.yaml).

The engines' rules, read from their released wheels (pip download --no-deps):

vLLM 0.24.0 (the version AIConfigurator measured; the tables are the same in 0.19.0):
  vllm/distributed/device_communicators/cuda_communicator.py `CudaCommunicator.all_reduce`:
  NCCL symmetric memory (VLLM_USE_NCCL_SYMM_MEM, default 0: envs.py), QuickReduce (ROCm),
  FlashInfer (VLLM_ALLREDUCE_USE_FLASHINFER, default 0), the custom all-reduce
  (`should_custom_ar`), torch symmetric memory (VLLM_ALLREDUCE_USE_SYMM_MEM, default 1:
  `should_use_symm_mem`), then PyNCCL. With the defaults: custom, symm-mem, NCCL.
  custom_all_reduce.py `CustomAllreduce`: world sizes {2, 4, 6, 8}
  (_SUPPORTED_WORLD_SIZES), one node, every pair on NVLink for more than 2 GPUs;
  max_size 8 MiB (8192 * 1024), capped by all_reduce_utils.py CUSTOM_ALL_REDUCE_MAX_SIZES of
  the GPU's compute capability when symm-mem is enabled; `should_custom_ar`: bytes < max_size.
  symm_mem.py `SymmMemCommunicator`: BF16 only, compute capabilities and world sizes of
  SYMM_MEM_ALL_REDUCE_MAX_SIZES (all_reduce_utils.py), disabled without a multicast pointer (no
  NVSwitch multicast: `topology.nvls` here); `should_use_symm_mem`: bytes <= max_size;
  multimem_all_reduce_ for the world sizes of _WORLD_SIZES_MULTIMEM, else
  two_shot_all_reduce_; input copied in and the output copied out (`all_reduce`).
  The kernel choice is in csrc/custom_all_reduce.cuh (not in the wheel; the project's research
  notes on communication, §3.1, vLLM commit c9eabec7,
  `CustomAllreduce::allreduce`): 2 GPUs always one-stage; full NVLink and (G <= 4 and bytes <
  512 KiB) or (G <= 8 and bytes < 256 KiB): one-stage; else two-stage.
SGLang 0.5.14 (the version AIConfigurator measured):
  sglang/srt/distributed/parallel_state.py `GroupCoordinator.all_reduce`: NCCL symmetric memory
  (enable_symm_mem, default False: server_args.py), the custom all-reduce
  (`should_custom_ar`), QuickReduce (ROCm), MSCCL++ (enable_mscclpp, off), torch symm-mem
  (enable_torch_symm_mem, default False), then NCCL. The custom all-reduce is
  custom_all_reduce_v2.py `CustomAllReduceV2` (SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2 default
  True: environ.py): world sizes 2-8 (THRESHOLD_2_SHOT_MAP), one node, full NVLink
  (custom_all_reduce_utils.py `can_use_custom_all_reduce_with_nvlink`); max_size =
  max(max_pull_size 16 MiB, one-shot push threshold); `should_custom_ar`: bytes <= max_size;
  `_determine_algo`: bytes <= push threshold → 1-shot push, <= pull threshold → 1-shot pull,
  else 2-shot pull; thresholds per world size from `_maybe_init_config` (B200-tuned table on
  compute capability 10.x, `is_sm100_supported`: utils/common.py; H200-tuned table otherwise).
TensorRT-LLM (its wheels are not on PyPI; FlashInfer's port of its Lamport fusion all-reduce,
  flashinfer-python 0.7.4): flashinfer/comm/trtllm_ar.py `_should_use_oneshot`: one-shot when
  tokens·hidden·2·G·itemsize = 2·G·S <= _use_oneshot_heuristics[G] MiB (G 2: 512, 4: 64,
  8: 42), else two-shot; world sizes 2, 4, 8 (the table's keys). TensorRT-LLM's own AUTO
  strategy (cpp/tensorrt_llm/common/customAllReduceUtils.h, the research notes §3.3) calls NCCL
  above its 64 MiB fusion workspace and otherwise looks the strategy up in a table measured per
  GPU, TP size, hidden size and token count, NCCL included; the table is not in any source
  read here, so below the workspace the engine keeps the faster of the Lamport kernel and NCCL.

Loads in flight (LOAD_GRIDS). vLLM's kernels and SGLang's pull kernels read their peers'
buffers with 16-B loads from a grid of at most 36 blocks (vLLM) or one per SM (SGLang) of 512
threads, each thread waiting for its loads before its next pass: a pass keeps blocks × 512 ×
16 B × (G−1) in flight and takes a load's round trip (two trips, as NVLINK_TRIPS counts a
load), so by Little's law a large message streams at most that much per round trip (vLLM's 36
blocks on 2 GPUs: 295 KB per pass, below the link's rate at any round trip over 0.8 us). The
measured vLLM 2-GPU rows (AIConfigurator, 512 KiB-4 MiB) grow by 1.13-1.20 us per pass on H100
and H200 and 1.6-1.8 us on B200 and B300, about 1.45 LL hops on both families: the two trips
priced (1.58 us on Hopper, 2.54 on Blackwell) are the module's one trip unit, a little long
for a bare load. The kernel's link time is the
longer of its bytes at the link's rate and its passes beyond the first of each stage (that one
is in NVLINK_TRIPS) at a round trip each. The push kernels store and never wait on a remote
load: their stores are bounded by the link alone.

What is not modelled: the 16-byte alignment rule, vLLM's and
SGLang's NCCL symmetric-memory and FlashInfer paths (off by default), the block counts of the
push kernels and of TensorRT-LLM's two-shot kernel (FlashInfer trtllm_allreduce_fusion.cuh
`allreduce_fusion_kernel_twoshot_sync`: its reduce-scatter loads its peers' shards; its grid,
one cluster per token slice, is not modelled, so it streams at the link's rate, and its two
release barriers are priced as trips: the measured two-shot calls on 4-8 B200s run ~20 us and
~35 % of the link's rate slower than this), the skew
between more GPUs' arrivals (the measured floors grow 0.1-0.5 us from 2 to 8 GPUs; the
trips do not grow with G), the GB200 rows' lower floors than B200's on the same trips, and
the engines' eager NCCL calls: above the custom kernels' limits the eager rows run 11-18 %
slower than the same engine's graph rows on H100 and B200 (8 H100s, 128 MiB: 663.5 us eager,
576.6 graph, 578.7 in the NCCL table; the op gives both the graph time), and SGLang's eager
fallback across GB300 trays (SGLang 0.5.14 srt/distributed/parallel_state.py _all_reduce_in_place:
torch.distributed.all_reduce: device_communicators/pynccl.py:123-126 keeps pynccl disabled
"e.g. in profiling models and prefill phase", enabled while capturing) carries a ~123 us
host floor that no x86 row shows (their NCCL fallbacks start at 16 MiB, GPU-bound).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from perfmodel import fitted
from perfmodel.demand import Demand
from perfmodel.ops import nccl

KiB, MiB = 1 << 10, 1 << 20
ENGINES = ("vllm", "sglang", "trtllm")
MODES = ("graph", "eager")
# the engines whose dispatch reads the mode (_vllm, _sglang: the eager copies and host path);
# TensorRT-LLM's kernels are priced as replayed from a graph (_trtllm)
MODE_ENGINES = ("vllm", "sglang")
KERNELS = ("oneshot", "twoshot", "multimem")
# The NVLink one-way trips each kernel waits on in turn (its latency floor), by (path, kernel),
# from the kernels' structure: vLLM's one-stage kernel signals a start barrier to every peer
# (one trip), loads the peers' buffers (a round trip: two) and signals an end barrier (one); its
# two-stage kernel adds a second load round and a middle barrier (csrc/custom_all_reduce.cuh
# cross_device_reduce_1stage / _2stage, multi_gpu_barrier); PyTorch's multimem all-reduce
# barriers, reduces through the switch (multimem.ld_reduce: a round trip) and multicasts
# (multimem.st: one) before its end barrier; SGLang's push kernel writes into the peers'
# buffers and polls its own (one trip each way of a flag), its pull kernels load as vLLM's;
# TensorRT-LLM's Lamport kernels push data whose words are their own flags and spin until the
# last peer's lands (FlashInfer trtllm_allreduce_fusion.cuh: no barrier), counted as a round
# trip per stage like the other kernels' loads (the push, and the peer's push it waits on).
# Every kernel adds its retire (RETIRE_TRIPS). A trip is the NVLink's one-way latency
# as NCCL's LL protocol measures it: a store and the peer's poll (the spec's measured
# `ll_latency`, perfmodel/ops/nccl.py), 1.6x Hopper's on Blackwell's NVLink 5 switches.
# The generic one-shot (path None: the builder's `auto` all-reduce, and `algorithm=oneshot`) is
# the push kernel the engines run for their smallest messages (TensorRT-LLM's and FlashInfer's
# Lamport one-shot, SGLang's 1-shot push: data stored straight into the peers' buffers, no
# barrier; comm.py: "one link latency"), not vLLM's barrier-load-barrier kernel, which the
# engine dispatch `vllm` prices; `auto` keeps the faster of it and NCCL.
NVLINK_TRIPS = {("custom_allreduce", "oneshot"): 4, ("custom_allreduce", "twoshot"): 7,
                ("torch_symm_mem", "multimem"): 5, ("torch_symm_mem", "twoshot"): 7,
                ("push", "oneshot"): 2, ("pull", "oneshot"): 4, ("pull", "twoshot"): 7,
                ("lamport", "oneshot"): 2, ("lamport", "twoshot"): 4,
                (None, "oneshot"): 2, (None, "twoshot"): 7, (None, "multimem"): 5}
# The kernel's retire: the acknowledgement of its last stores into peer memory, a round trip
# (module docstring "The kernel's boundary"); it replaces the kernel's own launch.
RETIRE_TRIPS = 2
# Release barriers. A barrier that must also publish the block's own stores to its peers makes
# its signalling threads store each peer's flag with system-scope release semantics and spin on
# theirs with acquire loads, one thread a peer, threads 0..G-1 of the block: vLLM's two-stage
# kernel between its reduce-scatter and all-gather (FlashInfer 0.7.4's copy,
# include/flashinfer/comm/vllm_custom_all_reduce.cuh `multi_gpu_barrier<ngpus, false, true>`:
# st.release.sys / ld.acquire.sys), TensorRT-LLM's two-shot at both its barriers
# (trtllm_allreduce_fusion.cuh `Barrier::sync`: st.global.release.sys per peer). The rows time
# such a barrier at a cost per peer on top of the kernel's trips, as if the lanes' releases ran
# one after the other (vLLM's two-stage kernel on B200 exceeds its trips by about 5 us at 4
# GPUs and 13.5 us at 8); SGLang's fenced barrier, whose releases come from one warp a peer
# (sgl_kernel/distributed/common.cuh PullController::sync, atom.release.sys), shows about
# 1 us at any group size, so it counts none. No source states the release's cost: a fitted
# number of NVLink trips (LL hops, as NVLINK_TRIPS) per peer and barrier per GPU family
# (`custom_allreduce.release_peer_trips.<family>`, perfmodel/fitted.yaml;
# perfmodel/validation/collectives.py `release_fit_rows`).
RELEASE_BARRIERS = {("custom_allreduce", "twoshot"): 1, ("lamport", "twoshot"): 2}
RELEASE_PEER_KEYS = {9: "custom_allreduce.release_peer_trips.hopper",
                     10: "custom_allreduce.release_peer_trips.blackwell"}
RELEASE_PEER_TRIPS = {major: fitted.value(key) for major, key in RELEASE_PEER_KEYS.items()}


def release_trips(hw, path: str | None, algorithm: str, gpus: int) -> float:
    """The release barriers' NVLink trips of one kernel of `path` and `algorithm` over `gpus`
    GPUs (RELEASE_BARRIERS): per barrier, the family's trips per peer times the peers."""
    barriers = RELEASE_BARRIERS.get((path, algorithm), 0)
    if not barriers:
        return 0.0
    return barriers * (gpus - 1) * nccl.arch_row(RELEASE_PEER_TRIPS, hw.compute_capability)


LINK_STEPS = {"oneshot": 1, "twoshot": 2, "multimem": 2}  # barrier rounds (the op's details)

# The kernels that pull their peers' data with loads, and their grids (blocks at most, threads
# per block); each thread loads 16 B (one packed vector) from every peer per pass of its loop and
# waits for them before its next pass, so a pass keeps blocks × threads × 16 B × (G−1) in flight
# on the NVLink and takes a load's round trip: by Little's law the kernel pulls at most that much
# per round trip, below the link's rate for the small grids these kernels launch.
#   custom_allreduce  vLLM's one- and two-stage kernels: 512 threads, blocks = min(36, the
#                     buffer's 16-B vectors / 512) (csrc/custom_all_reduce.cuh kMaxBlocks = 36,
#                     `CustomAllreduce::allreduce` threads 512; the same in FlashInfer 0.7.4's
#                     copy include/flashinfer/comm/vllm_custom_all_reduce.cuh).
#   pull              SGLang 0.5.14's pull kernels: 512 threads (jit_kernel/all_reduce.py
#                     MAX_THREADS), blocks = min(the GPU's SMs, the vectors / 512)
#                     (NUM_CTA = multi_processor_count; custom_all_reduce_pull.cuh num_blocks).
# The push kernels (SGLang's push, TensorRT-LLM's Lamport) store to their peers and never wait
# on a remote load, so nothing bounds their stores in flight but the link.
#   torch_symm_mem    PyTorch's symmetric-memory kernels that vLLM calls (torch 2.10.0,
#                     libtorch_cuda.so, read from the host code's inlined
#                     init_elementwise_launch_config: `mov $0x400` threads and a `cmov` clamp of
#                     the blocks): multimem_all_reduce_ at most 8 blocks of 1024 threads, each
#                     thread's multimem.ld_reduce returning its 16-B vector reduced over the
#                     switch (the vectors in flight carry the reduced S/G, not (G−1) peers'
#                     loads); two_shot_all_reduce_ at most 24 blocks of 1024 threads, loading
#                     every peer's vector of its shard as SGLang's 2-shot pull does.
LOAD_GRIDS = {"custom_allreduce": (36, 512), "pull": (None, 512),
              ("torch_symm_mem", "multimem"): (8, 1024), ("torch_symm_mem", "twoshot"): (24, 1024)}
# The load stages of each load-based kernel: vLLM's two-stage kernel loads its shard from every
# peer, then every peer's reduced shard (cross_device_reduce_2stage); SGLang's 2-shot pull
# loads once and stores the reduced shard into every peer's buffer (custom_all_reduce_pull.cuh
# all_reduce_impl<kBroadcast=true>: "fuse the reduce-scatter and broadcast").
LOAD_STAGES = {("custom_allreduce", "oneshot"): 1, ("custom_allreduce", "twoshot"): 2,
               ("pull", "oneshot"): 1, ("pull", "twoshot"): 1,
               ("torch_symm_mem", "multimem"): 1, ("torch_symm_mem", "twoshot"): 1}
LOAD_VECTOR_BYTES = 16

# TensorRT-LLM's Lamport kernels in phases (FlashInfer 0.7.4's port,
# include/flashinfer/comm/trtllm_allreduce_fusion.cuh). Every thread of the kernel's one-wave
# grid (at most one block an SM: `allreduce_fusion_kernel_launcher`'s grid_size) runs the
# kernel's loops over its strided share one after the other, so the grid passes each loop
# together and their times add, each loop bound by its own resource:
#   oneshot  allreduce_fusion_kernel_oneshot_lamport (lines 1643-1711): push: load the input
#            (S) and store it into every rank's buffer, its own (S) and its peers' ((G−1)·S over
#            the NVLink, while the peers' (G−1)·S land in this GPU's memory); clear: overwrite
#            the buffer of the call before last with −0.0 (G·S: `comm.update(size · NRanks)`
#            sets the clear size); reduce: load the G copies from its own buffer (G·S) and write
#            the sum (S).
#   twoshot  allreduce_fusion_kernel_twoshot_sync (lines 1714-1776): copy the input into its
#            own buffer (2·S); barrier; load its 1/G rows from every rank, reduce, store the sum
#            into every rank (2(G−1)/G·S over the NVLink each way, 2·S of memory); barrier; copy
#            the sums of all rows to the output (2·S).
# The generic one-shot (path None) is this push kernel too (NVLINK_TRIPS). A call whose
# buffers fit in half the L2 (lamport_footprint_bytes; the half-L2 rule of ops/gemm.py for
# operands that stay resident) moves its memory traffic through the L2, not HBM: the benchmark
# loops rotate the same three buffers. What is not modelled: the Lamport reader's spin (a load
# that finds −0.0 loads again; the peers' stores landed during the push phase).
PHASED = {("lamport", "oneshot"), ("lamport", "twoshot"), (None, "oneshot")}
L2_RESIDENT_FRACTION = 0.5
LOAD_ROUND_TRIP_TRIPS = 2  # a remote load: the request out and the data back (NVLINK_TRIPS)


def loads_in_flight_bytes(hw, path: str | None, gpus: int, nbytes: float,
                          algorithm: str | None = None) -> float | None:
    """The peer bytes a load-based kernel (LOAD_GRIDS) has in flight per pass of its loop; None
    for the push kernels and the generic ones."""
    grid = LOAD_GRIDS.get((path, algorithm)) or LOAD_GRIDS.get(path)
    if grid is None:
        return None
    most, threads = grid
    most = hw.sm_count if most is None else most
    # PyTorch's kernels size their grid by each rank's share (numel / world size), the others
    # by the whole buffer
    share = nbytes / gpus if path == "torch_symm_mem" else nbytes
    blocks = max(1, min(most, math.ceil(share / LOAD_VECTOR_BYTES / threads)))
    # multimem's vectors come back reduced: one per thread, whatever the peers
    peers = 1 if algorithm == "multimem" else gpus - 1
    return blocks * threads * LOAD_VECTOR_BYTES * peers

# The engines' NCCL fallback, a path with a host path of its own (the module docstring).
NCCL_PATH = "nccl"
# The host path of one eager call, s, by (engine, path) (module docstring): fitted keys of
# perfmodel/fitted.yaml.
EAGER_HOST_KEYS = {("vllm", "custom_allreduce"): "custom_allreduce.eager_host_s.vllm",
                   ("vllm", "torch_symm_mem"): "custom_allreduce.eager_host_s.vllm_symm_mem",
                   ("sglang", "push"): "custom_allreduce.eager_host_s.sglang",
                   ("sglang", "pull"): "custom_allreduce.eager_host_s.sglang",
                   ("vllm", NCCL_PATH): "custom_allreduce.eager_host_s.vllm_nccl",
                   ("sglang", NCCL_PATH): "custom_allreduce.eager_host_s.sglang_nccl"}
EAGER_HOST_S = {path: fitted.value(key) for path, key in EAGER_HOST_KEYS.items()}
# A Grace host's call path against the x86 hosts' the paths are fitted on (hwspec
# topology.host_cpu): one ratio for every engine path, fitted on GB200's eager calls
# (perfmodel/fitted.yaml), GB300's judged. The same Python dispatch and launches run slower on
# the Grace CPU's cores than on the x86 hosts of HGX/DGX boards; no source states by how much.
EAGER_HOST_RATIO_KEYS = {"grace": "custom_allreduce.eager_host_ratio.grace"}
EAGER_HOST_RATIO = {cpu: fitted.value(key) for cpu, key in EAGER_HOST_RATIO_KEYS.items()}


def eager_host_s(engine: str, path: str | None, host_cpu: str = "x86") -> float:
    """The host path of one eager call of `engine`'s kernel on `path` from a `host_cpu` host
    (Hardware.host_cpu; 0 for the paths EAGER_HOST_KEYS does not name: no host path is priced
    for TensorRT-LLM's kernels)."""
    return EAGER_HOST_S.get((engine, path), 0.0) * EAGER_HOST_RATIO.get(host_cpu, 1.0)


# One host (HOST_CHECK). vLLM's and SGLang's custom all-reduce are built only for a group whose
# ranks share one host (vLLM 0.18.0 custom_all_reduce.py:90-94, SGLang 0.5.14
# custom_all_reduce_utils.py:432-437 `in_the_same_node_as`: "disabled because this process group
# spans across nodes"); a group of consecutive GPUs spans hosts when it has more GPUs than one
# host holds (Hardware.gpus_per_host: a GB200/GB300 compute tray's 4), and then runs vLLM's
# symmetric-memory kernel (no host check in symm_mem.py) or NCCL. TensorRT-LLM's Lamport
# kernels are not held to a host here (its MNNVL all-reduce takes NVL72 groups).

# -- vLLM 0.24.0 -----------------------------------------------------------------------------
VLLM_WORLD_SIZES = (2, 4, 6, 8)      # custom_all_reduce.py CustomAllreduce._SUPPORTED_WORLD_SIZES
VLLM_MAX_SIZE = 8192 * 1024          # custom_all_reduce.py CustomAllreduce.__init__ max_size
# all_reduce_utils.py CUSTOM_ALL_REDUCE_MAX_SIZES (applied when torch symm-mem is enabled)
VLLM_CUSTOM_MAX_SIZES = {
    "9.0": {2: 64 * MiB, 4: 32 * MiB, 6: MiB // 2, 8: MiB // 4},
    "10.0": {2: 2 * MiB, 4: 2 * MiB, 6: 1 * MiB, 8: 1 * MiB},
    "10.3": {2: 4 * MiB, 4: 4 * MiB, 6: 8 * MiB, 8: 4 * MiB},
}
# all_reduce_utils.py SYMM_MEM_ALL_REDUCE_MAX_SIZES
VLLM_SYMM_MEM_MAX_SIZES = {
    "9.0": {2: 64 * MiB, 4: 32 * MiB, 6: 64 * MiB, 8: 64 * MiB},
    "10.0": {2: 8 * MiB, 4: 32 * MiB, 6: 128 * MiB, 8: 128 * MiB},
    "10.3": {2: 4 * MiB, 4: 32 * MiB, 6: 32 * MiB, 8: 64 * MiB},
}
# symm_mem.py SymmMemCommunicator._WORLD_SIZES_MULTIMEM
VLLM_MULTIMEM_WORLD_SIZES = {"9.0": (4, 6, 8), "10.0": (6, 8), "10.3": (6, 8)}
# csrc/custom_all_reduce.cuh (vLLM c9eabec7, research notes §3.1): one-stage below these
VLLM_ONESTAGE_MAX = ((4, 512 * KiB), (8, 256 * KiB))  # (largest world size, bytes below)

# -- SGLang 0.5.14 ---------------------------------------------------------------------------
SGLANG_MAX_PULL_SIZE = 16 * MiB      # custom_all_reduce_v2.py CustomAllReduceV2 max_pull_size
INF = 1 << 60
# custom_all_reduce_v2.py _maybe_init_config: world size → (1-shot push, 1-shot pull) thresholds
SGLANG_THRESHOLDS_SM100 = {          # "based on benchmarks on B200 GPUs"
    2: (4 * MiB, INF), 3: (4 * MiB, 4 * MiB), 4: (2 * MiB, 2 * MiB), 5: (2 * MiB, 2 * MiB),
    6: (1 * MiB, 1 * MiB), 7: (896 * KiB, 896 * KiB), 8: (720 * KiB, 720 * KiB)}
SGLANG_THRESHOLDS_OTHER = {          # "based on benchmarks on H200 GPUs"
    2: (2 * MiB, INF), 3: (512 * KiB, 512 * KiB), 4: (384 * KiB, 256 * KiB),
    5: (256 * KiB, 256 * KiB), 6: (192 * KiB, 192 * KiB), 7: (192 * KiB, 192 * KiB),
    8: (160 * KiB, 160 * KiB)}

# -- TensorRT-LLM (FlashInfer 0.7.4's port) --------------------------------------------------
TRTLLM_ONESHOT_MIB = {2: 512, 4: 64, 8: 42}  # flashinfer/comm/trtllm_ar.py _use_oneshot_heuristics
TRTLLM_WORKSPACE = 64 * MiB  # customAllReduceUtils.h fusion workspace (research notes §3.3)


def kernel_demand(hw, algorithm: str, gpus: int, nbytes: float, link: str = "nvlink",
                  engine: str | None = None, copies: int = 0, path: str | None = None,
                  reduces: bool = True) -> Demand:
    """One custom all-reduce kernel of `gpus` GPUs on `link` (module docstring), plus `copies`
    copy kernels of the buffer in HBM (the eager copy into a registered buffer, symm-mem's copy
    in and out), run before and after it (the first copy before, the others after)."""
    g, s = gpus, nbytes
    if algorithm == "oneshot":
        sent = (g - 1) * s
    elif algorithm == "twoshot":
        sent = 2.0 * (g - 1) / g * s
    elif algorithm == "multimem":
        sent = (g + 1) / g * s
    else:
        raise ValueError(f"unknown custom all-reduce kernel {algorithm!r}")
    wire_link = hw.link(link)
    # the switch reduces multimem's operands; the others read them once more from HBM
    hbm = 2 * sent + (sent if reduces and algorithm != "multimem" else 0.0)
    steps = LINK_STEPS[algorithm]
    details = {"bytes_sent_per_gpu": sent, "steps": steps, "hops": {link: steps},
               "algorithm": algorithm, "protocol": None}
    if engine is not None:
        details.update(engine=engine, path=path, copies=copies)
    trips = NVLINK_TRIPS[(path, algorithm)] + RETIRE_TRIPS
    details["nvlink_trips"] = trips
    released = release_trips(hw, path, algorithm, g)
    if released:
        details["release_trips"] = released
    wire = sent / wire_link.achievable_fraction
    if algorithm == "multimem":  # the switch's traffic, at NVLS's efficiency (ops/nccl.py)
        wire /= nccl.nvls_efficiency(hw.compute_capability)
    if (path, algorithm) in PHASED:
        kernel = _phased(hw, algorithm, g, s, link, trips, details, released)
        return _with_copies(kernel, copies, s)
    stages = LOAD_STAGES.get((path, algorithm), 0)
    if stages:
        # Little's law (LOAD_GRIDS): the loads pull `in_flight` bytes per round trip, each stage
        # (G−1)·S (one-shot), (G−1)/G·S (two-shot) or the reduced S/G (multimem). The first
        # pass of each stage is the load round trip NVLINK_TRIPS already counts; each pass
        # beyond it waits for one more load round trip (LOAD_ROUND_TRIP_TRIPS LL hops), and
        # the link's work is what it would carry at its full rate in that time (the longer of
        # that and its bytes at its rate)
        in_flight = loads_in_flight_bytes(hw, path, g, s, algorithm)
        loaded = ((g - 1) * s if algorithm == "oneshot" else s / g if algorithm == "multimem"
                  else stages * (g - 1) / g * s)
        passes = max(0.0, loaded / in_flight - stages)
        details.update(loads_in_flight_bytes=in_flight, load_passes=passes)
        waited = passes * LOAD_ROUND_TRIP_TRIPS * wire_link.protocol_step("ll")
        wire = max(wire, waited * wire_link.step_bytes)
    kernel = Demand(work={f"link:{link}": wire, "hbm": hbm},
                    launch=None, flop=0.0, hbm_bytes=hbm, kernels=0,
                    link_steps={link: (trips + released) * wire_link.protocol_step("ll")},
                    details=details)
    return _with_copies(kernel, copies, s)


def _with_copies(kernel: Demand, copies: int, nbytes: float) -> Demand:
    """`kernel` behind its copy kernels (2·S of HBM each, a launch each): separate kernels on
    the stream, so their times add to the kernel's (the first copy before it, the rest after)."""
    if not copies:
        return kernel
    copy = Demand(work={"hbm": 2 * nbytes}, launch=None, hbm_bytes=2 * nbytes, kernels=1,
                  details={"phase": "copy"})
    parts = (copy, *(kernel.sequence or (kernel,)), *(copy,) * (copies - 1))
    work: dict[str, float] = {}
    for part in parts:
        for r, w in part.work.items():
            work[r] = work.get(r, 0.0) + w
    return replace(kernel, work=work, hbm_bytes=sum(p.hbm_bytes for p in parts),
                   kernels=copies, sequence=parts)


def lamport_phases(algorithm: str, gpus: int, nbytes: float) -> list[tuple[str, float, float]]:
    """The Lamport kernel's phases (PHASED) for `gpus` GPUs and `nbytes` per GPU: (name, bytes
    over the NVLink each way before the link's efficiency, bytes through the GPU's memory)."""
    g, s = gpus, nbytes
    if algorithm == "oneshot":
        return [("push", (g - 1) * s, s + s + (g - 1) * s),
                ("clear", 0.0, g * s),
                ("reduce", 0.0, g * s + s)]
    shard_traffic = 2.0 * (g - 1) / g * s
    return [("copy", 0.0, 2 * s),
            ("reduce_broadcast", shard_traffic, 2 * s),
            ("out", 0.0, 2 * s)]


def lamport_footprint_bytes(algorithm: str, gpus: int, nbytes: float) -> float:
    """The memory a Lamport kernel's call touches (PHASED): input, output and its buffers."""
    if algorithm == "oneshot":
        return (2 * gpus + 2) * nbytes  # the data buffer and the cleared one, G·S each
    return 4 * nbytes  # one buffer of the rows and their sums


def _phased(hw, algorithm: str, g: int, s: float, link: str, trips: float,
            details: dict, released: float = 0.0) -> Demand:
    """A Lamport kernel as its phases back to back (PHASED), its trips and its release
    barriers' trips (`released`) on the phase that crosses the NVLink."""
    wire_link = hw.link(link)
    in_l2 = lamport_footprint_bytes(algorithm, g, s) <= L2_RESIDENT_FRACTION * hw.l2_capacity_bytes
    memory = "l2" if in_l2 else "hbm"
    parts = []
    for name, link_bytes, memory_bytes in lamport_phases(algorithm, g, s):
        work = {memory: memory_bytes}
        steps = {}
        if link_bytes:
            work[f"link:{link}"] = link_bytes / wire_link.achievable_fraction
            steps = {link: (trips + released) * wire_link.protocol_step("ll")}
        parts.append(Demand(work=work, launch=None, kernels=0, link_steps=steps,
                            hbm_bytes=0.0 if in_l2 else memory_bytes,
                            details={"phase": name}))
    total: dict[str, float] = {}
    for part in parts:
        for r, w in part.work.items():
            total[r] = total.get(r, 0.0) + w
    details = {**details, "phases": [p.details["phase"] for p in parts],
               "buffers_in_l2": in_l2}
    return Demand(work=total, launch=None, flop=0.0,
                  hbm_bytes=sum(p.hbm_bytes for p in parts), kernels=0,
                  link_steps=parts[[bool(p.link_steps) for p in parts].index(True)].link_steps,
                  sequence=tuple(parts), details=details)


@dataclass(frozen=True)
class Dispatch:
    """An engine's pick for one message: its kernel (None: NCCL) and whether NCCL's pairs stay
    offered beside it (the engine keeps the faster: TensorRT-LLM's measured table)."""

    kernel: Demand | None
    with_nccl: bool = False


def dispatch(engine: str, hw, gpus: int, nbytes: float, mode: str = "graph",
             link: str = "nvlink") -> Dispatch:
    """What `engine` runs for an all-reduce of `nbytes` per GPU over `gpus` GPUs that sit in one
    NVLink domain on `link` (the caller checks that; a group across domains is always NCCL)."""
    if engine == "vllm":
        return _vllm(hw, gpus, nbytes, mode, link)
    if engine == "sglang":
        return _sglang(hw, gpus, nbytes, mode, link)
    if engine == "trtllm":
        return _trtllm(hw, gpus, nbytes, link)
    raise ValueError(f"unknown engine {engine!r} (expected one of {', '.join(ENGINES)})")


def _vllm(hw, g: int, s: float, mode: str, link: str) -> Dispatch:
    cc = hw.compute_capability
    # torch symm-mem (default on) runs where its tables name the GPU and group and the switch
    # multicasts
    symm = hw.nvls and g in VLLM_SYMM_MEM_MAX_SIZES.get(cc, {})
    if g in VLLM_WORLD_SIZES and g <= hw.gpus_per_host:  # one host (HOST_CHECK)
        max_size = VLLM_MAX_SIZE
        if symm and cc in VLLM_CUSTOM_MAX_SIZES:
            max_size = min(VLLM_CUSTOM_MAX_SIZES[cc][g], max_size)
        if s < max_size:  # should_custom_ar
            one = g == 2 or any(g <= ws and s < below for ws, below in VLLM_ONESTAGE_MAX)
            return _eager(hw, mode, kernel_demand(hw, "oneshot" if one else "twoshot", g, s,
                                                  link, "vllm", copies=int(mode == "eager"),
                                                  path="custom_allreduce"))
    if symm and s <= VLLM_SYMM_MEM_MAX_SIZES[cc][g]:  # should_use_symm_mem
        kernel = "multimem" if g in VLLM_MULTIMEM_WORLD_SIZES.get(cc, ()) else "twoshot"
        return _eager(hw, mode, kernel_demand(hw, kernel, g, s, link, "vllm", copies=2,
                                              path="torch_symm_mem"))
    return Dispatch(None)


def nccl_host_s(engine: str, mode: str, hw) -> float:
    """The host path of an engine's eager call that its dispatch sends to NCCL (vLLM's pynccl,
    SGLang's torch.distributed: the module docstring); 0 in a graph replay and for the engines
    whose NCCL calls the model prices as replayed (TensorRT-LLM)."""
    if mode != "eager":
        return 0.0
    return eager_host_s(engine, NCCL_PATH, hw.host_cpu)


def _eager(hw, mode: str, kernel: Demand) -> Dispatch:
    """The engine's kernel, behind its host path when the call is eager."""
    if mode == "eager":  # the engine prices the floor (Demand.host_floor_s)
        host = eager_host_s(kernel.details["engine"], kernel.details["path"], hw.host_cpu)
        if host > 0.0:
            kernel = replace(kernel, host_floor_s=host,
                             details={**kernel.details, "host_path_s": host})
    return Dispatch(kernel)


def _sglang(hw, g: int, s: float, mode: str, link: str) -> Dispatch:
    table = (SGLANG_THRESHOLDS_SM100 if hw.compute_capability.split(".")[0] == "10"
             else SGLANG_THRESHOLDS_OTHER)
    if g not in table or g > hw.gpus_per_host:  # one host (HOST_CHECK)
        return Dispatch(None)
    push, pull = table[g]
    max_push = push  # max_push_size defaults to the push threshold
    push, pull = min(push, max_push), min(pull, SGLANG_MAX_PULL_SIZE)  # override_shot clips
    if s > max(SGLANG_MAX_PULL_SIZE, max_push):  # should_custom_ar
        return Dispatch(None)
    eager = mode == "eager"
    if s <= push:
        return _eager(hw, mode, kernel_demand(hw, "oneshot", g, s, link, "sglang", path="push"))
    if s <= pull:
        return _eager(hw, mode, kernel_demand(hw, "oneshot", g, s, link, "sglang",
                                              copies=int(eager), path="pull"))
    return _eager(hw, mode, kernel_demand(hw, "twoshot", g, s, link, "sglang",
                                          copies=2 * int(eager), path="pull"))


def _trtllm(hw, g: int, s: float, link: str) -> Dispatch:
    if g not in TRTLLM_ONESHOT_MIB or s > TRTLLM_WORKSPACE:
        return Dispatch(None)
    one = 2 * g * s / MiB <= TRTLLM_ONESHOT_MIB[g]
    return Dispatch(kernel_demand(hw, "oneshot" if one else "twoshot", g, s, link, "trtllm",
                                  path="lamport"), with_nccl=True)
