"""Mixture-of-experts FFN layer under expert parallelism (METRO, arXiv:2512.09277).

Tokens pick `top_k` of `experts`: seeded synthetic routing (uniform, or Zipf-skewed popularity),
a trace file (`perfmodel.ops.moe.traces`), or draws from a recorded expert-loads file (`loads`,
one `layer` of it; DeepSeek's group-limited routing with `expert_groups` / `group_top_k` and
batch-to-batch `variation`; `perfmodel.ops.moe.loads`). Experts, plus redundant replicas
(`replication` or `redundant_experts`), sit on `gpus` by a placement:
  contiguous      no replication: expert e on GPU ⌊e·G/E⌋;
  balanced        replicas in proportion to this step's load, largest first onto the least loaded
                  GPU, at most one replica of an expert per GPU (`routing.place_eplb`);
  eplb            DeepSeek's published EPLB (`perfmodel.ops.moe.eplb`): groups packed to nodes of
                  `gpus_per_node`, hot experts replicated, replicas packed to GPUs; from the loads
                  file's long-run statistics of the layer (what SGLang deploys from these files),
                  else from this step's load;
  auto            contiguous without redundancy, else eplb with a loads file, else balanced.
A routing policy (`perfmodel.ops.moe.routing`) sends each expert's tokens to replicas:
  token_balanced  split every expert's tokens evenly over its replicas (EPLB);
  metro           each active expert goes whole to the replica whose GPU has the fewest activated
                  replicas so far (METRO, Algorithm 1);
  optimal         minimum over routings of the max activated replicas per GPU (max-flow);
  uniform         each token to a random replica.
Per GPU the grouped GEMM reads every activated replica's gate/up/down weights (3·h·f elements)
and multiplies its tokens (rows padded to the 64-row MMA tile; the OpenAI Triton experts' own
row tile under `kernel="triton"`, TRITON_BLOCK_M), between the fused-MoE runner's
other kernels (ROUTING_SORT_KERNELS and _gpu_demand: routing sort, expand-and-cast, gated activation, finalize). In decode the weight bytes
dominate, so time follows activated experts per GPU, not tokens (METRO's observation). The layer
waits for its slowest GPU: the op returns every GPU's demand and the engine keeps the slowest.
"""
from __future__ import annotations

import functools
import hashlib
import math
from collections import OrderedDict
from pathlib import Path

import numpy as np

from dataclasses import replace

from perfmodel import fitted
from perfmodel.demand import Choice, Demand, LaunchShape, Overlap, sequence_demand
from perfmodel.errors import InputError
from perfmodel.units import bytes_per_element, tensor_dtype
from perfmodel.ops.moe.eplb import eplb_placement, nodes_for, route_token_balanced_slots
from perfmodel.ops.moe.loads import (LoadsRouting, check_group_limit, load_expert_loads,
                                     resolve_loads_path)
from perfmodel.ops.moe.routing import (POLICIES, Routing, place_contiguous, place_eplb,
                                       total_replicas)
from perfmodel.ops.moe.routing import route as route_tokens
from perfmodel.ops.moe.traces import load_trace, popularity, trace_prefix
from perfmodel.ops.base import GPUS_WHY, MAX_GPUS, MAX_SEED, Op, Param, positive
from perfmodel.ops.gemm import FP8_BLOCK, fp4_mma_n, fp8_blocks_promoted
from perfmodel.ops.streaming import stream_demand

# Above this many token × expert draws, route by per-expert counts instead of per token
# (prefill and training batches: every expert is active anyway).
EXACT_ROUTING_LIMIT = 1 << 21
MMA_ROWS = 64  # smallest MMA tile in M (Hopper wgmma m64; tcgen05 M = 64)
# FMA-pipe thread operations a mixed-input MoE mainloop spends per weight element it converts
# to the MMA type, by stored type: the generic convert + scale (ops.gemm's mixed-input count),
# and MXFP4's, fitted (perfmodel/fitted.yaml moe.convert_ops.mxfp4): the E2M1 nibbles unpacked,
# widened and scaled by their block's E8M0 exponent (the OpenAI Triton MXFP4 experts vLLM runs,
# TensorRT-LLM's on Hopper), several instructions an element where an 8-bit cast takes one. Its
# rows are Hopper's; a GPU whose MMAs take the type block-scaled (isa.block_scaled_mma: tcgen05
# kind::mxf8f6f4) also converts E2M1 pairs in one instruction (PTX ISA 8.6 cvt ... .e2m1x2,
# sm_100a), so it keeps the generic count
CONVERT_OPS = {"mxfp4": fitted.value("moe.convert_ops.mxfp4")}
DEFAULT_CONVERT_OPS = 2.0
# The row tile of the OpenAI Triton experts (`Moe(kernel="triton")`: triton_kernels' matmul_ogs,
# the MXFP4 experts vLLM runs by default on Hopper and TensorRT-LLM's TRITON backend), as
# matmul_ogs picks it (vLLM 0.24.0 vllm/third_party/triton_kernels/
# matmul_ogs_details/opt_flags.py, make_default_opt_flags_nvidia): block_m = max(16,
# min(next_pow2(tokens_per_expt), 128)), tokens_per_expt = m // n_expts_tot, where m is every
# gathered row (tokens x top_k) and n_expts_tot the rank's local experts
# (gpt_oss_triton_kernels_moe.py make_routing_data(num_local_experts)). Under expert
# parallelism without an all-to-all each rank gathers all tokens, its non-local experts' picks
# masked (expert_map), so the estimate counts every pick against the local experts: it is G
# times the rows an expert gets. The op's row tile is max(MMA_ROWS, block_m): a block_m of 16
# or 32 keeps the wgmma's 64-row tile (Triton's narrower tiles, and the mma.sync they would
# run, are not modelled), 128 takes its own; each row tile converts the weight tiles it
# multiplies and runs its MMAs over its rows.
TRITON_BLOCK_M = (16, 128)
# The expert GEMMs' kernel (`Moe(kernel=)`): "grouped", the engines' grouped-GEMM runners
# (CUTLASS, DeepGEMM, the OpenAI Triton MXFP4 experts) on the GPU's native MMA; "marlin", vLLM's
# Marlin MoE (model_executor/layers/fused_moe/fused_marlin_moe.py, vLLM 0.18.0), the mixed-input
# W4A16/W8A16 kernel vLLM runs for MXFP4 experts with VLLM_MXFP4_USE_MARLIN=1
# (quantization/mxfp4.py get_mxfp4_backend): Ampere-style mma.sync MMAs (m16n8k16) on every GPU,
# each expert's rows cut into blocks of MARLIN_BLOCK_M[i] rows, the smallest whose block count
# M·top_k/E / block stays below MARLIN_BLOCK_FILL (else 64: fused_marlin_moe lines 306-313),
# every block converting the weights it multiplies and running MMAs over its whole rows (at
# least the MMA's 16). Its MMAs reach the fitted share MARLIN_MMA_FRACTION (perfmodel/fitted.yaml
# moe.marlin_mma_fraction) of the GPU's mma.sync rate (isa.mma_sync_flop_per_sm_per_clk)
MOE_KERNELS = ("grouped", "marlin", "triton")
MARLIN_BLOCK_M = (8, 16, 32, 48, 64)
MARLIN_BLOCK_FILL = 0.9
MARLIN_MMA_ROWS = 16
MARLIN_MMA_FRACTION = fitted.value("moe.marlin_mma_fraction")
TILE_N = 128
PLACEMENTS = ("auto", "contiguous", "balanced", "eplb")
# Routings kept per process (`Moe.routing_result`), keyed by every parameter but the expert
# shapes, dtype and kernel (hidden, expert_hidden, dtype, shared_experts, kernel: the routing
# does not read them) and the trace/loads files' size and modification time: a new op of the
# same routing, or of another layer shape, does not draw again. Entries are shared, so read
# only.
ROUTING_CACHE = 1024
ROUTING_FREE_PARAMS = ("hidden", "expert_hidden", "dtype", "weight_dtype", "fp8_scaling",
                       "fp8_block_quant", "shared_experts", "kernel")
_ROUTINGS: OrderedDict = OrderedDict()


def routed_counts(tokens: int, experts: int, top_k: int, skew: float, seed: int) -> np.ndarray:
    """Tokens per expert for large batches: tokens·top_k picks from the popularity (the
    no-repeat-per-token constraint is negligible when tokens ≫ experts)."""
    kind = "zipf" if skew > 0 else "uniform"
    p = popularity(experts, kind, skew, np.random.default_rng(seed))
    return np.random.default_rng(seed).multinomial(tokens * top_k, p)



def _file_digest(path) -> tuple:
    """A trace or loads file as it is now: its size and a digest of its bytes (a file rewritten
    within one timestamp tick at the same size must not hit a stale routing; these files are a
    few hundred kB, hashed in well under a millisecond)."""
    data = Path(path).read_bytes()
    return len(data), hashlib.blake2b(data, digest_size=16).hexdigest()

# The fused-MoE runner's kernels around its two grouped GEMMs (TensorRT-LLM cpp/tensorrt_llm/
# kernels/cutlass_kernels/moe_gemm/moe_kernels.cu: the expert maps and sort of the routing,
# threeStepBuildExpertMapsSortFirstToken, 3 kernels; expandInputRowsKernel, gathering each
# expert's rows and casting them to the GEMM type; doActivationKernel, the SwiGLU of GEMM1's
# output cast for GEMM2; finalizeMoeRoutingKernel, the top-k weighted sum back in token order.
# vLLM's fused_moe runs the same stages: moe_align_block_size, two fused_moe_kernel GEMMs,
# silu_and_mul, moe_sum)
ROUTING_SORT_KERNELS = 3
# shared memory of the grouped GEMM's CTA (its pipeline stages) where the GPU allows it, and the
# 4/5 of it in flight from HBM (the stages not being consumed): 160 / 128 KiB as before
GROUPED_GEMM_SMEM_BYTES = 160 * 1024
# Block-scaled FP8 experts on Hopper under TensorRT-LLM's fused-MoE runner (1.3.0rc20; its copy in
# flashinfer 0.7.2.post1, csrc/fused_moe/cutlass_backend/cutlass_fused_moe_kernels.cuh
# BlockScaleFC1/FC2 and csrc/nv_internal/tensorrt_llm/kernels/cutlass_kernels/
# fp8_blockscale_gemm/): the runner is instantiated with BF16 activations (ElementA bf16, so
# `internal_quantize_a` in fp8_blockscale_gemm.cu moeGemm), so the expand and the activation
# write BF16 and each grouped GEMM is preceded by its own quantization launch,
# fp8_grouped_gemm_run's `scale_1x128_kernel` (fp8_blockscale_gemm_kernel.cuh:895-1004,
# launched at :1519-1533): min(SMs, groups / 8) CTAs of 256 threads (one CTA per SM), one warp
# per 1x128 group, each lane loading 4 scalar BF16 values, a warp max-reduction, then the FP8
# values and the group's FP32 scale stored; a grid-stride loop with no unrolling, so each warp
# has one group in flight per DRAM round trip (Little's law on the bytes it moves per trip).
BLOCK_QUANT_THREADS = 256
BLOCK_QUANT_WARPS_PER_CTA = BLOCK_QUANT_THREADS // 32
BLOCK_QUANT_VECTOR_BYTES = 2.0  # scalar BF16 loads (`input_line[lane_id]`)
BLOCK_QUANTS = ("trtllm", "fused")

class Moe(Op):
    name = "moe"
    EXAMPLE = dict(tokens=256, experts=64, top_k=4, hidden=2048, expert_hidden=1024, dtype="bf16",
                   gpus=8)
    PARAMS = {
        "tokens": positive("tokens", "tokens in the batch (all GPUs)"),
        "experts": positive("experts", "routed experts", hi=2 ** 20,
                            hi_why="the most fine-grained MoE published, PEER, has 1024^2; "
                                   "routing keeps arrays of one entry per expert"),
        "top_k": positive("experts", "experts per token"),
        "hidden": positive("elements", "model hidden size"),
        "expert_hidden": positive("elements", "expert FFN intermediate size"),
        "dtype": Param("dtype", required=True, choices=("bf16", "fp16", "fp8", "fp8_e4m3",
                                                        "mxfp8", "nvfp4", "mxfp4")),
        "gpus": positive("GPUs", "expert-parallel GPUs", hi=MAX_GPUS, hi_why=GPUS_WHY),
        "weight_dtype": Param("dtype", default=None, nullable=True,
                              choices=("bf16", "fp16", "fp8", "fp8_e4m3", "mxfp8", "nvfp4",
                                       "mxfp4"),
                              doc="expert weights' storage type (= dtype); narrower than dtype "
                                  "means dequant in the GEMM mainloop (e.g. gpt-oss's MXFP4 "
                                  "experts with BF16 activations: dtype bf16, weight_dtype "
                                  "mxfp4)"),
        "fp8_scaling": Param("choice", default="tensor", choices=("tensor", "block"),
                             doc="fp8 experts: one scale per tensor, or FP32 scales per 1x128 "
                                 "activation and 128x128 weight block (DeepSeek-V3's FP8 "
                                 "checkpoints), promoted on the CUDA cores where the MMA takes "
                                 "no scales (ops.gemm)"),
        "fp8_block_quant": Param("choice", default="fused", choices=BLOCK_QUANTS,
                                 doc="block-scaled fp8 experts promoted on the CUDA cores "
                                     "(Hopper): how each grouped GEMM's BF16 input is quantized "
                                     "per 1x128 group: fused, cast in the expand and activation "
                                     "kernels at HBM speed; trtllm, TensorRT-LLM's fp8 "
                                     "block-scale runner's own kernel before each GEMM (one CTA "
                                     "per SM, a warp per group: latency-bound)"),
        "replication": Param("float", default=1.0, lo=1.0, hi=8.0,
                             doc="expert replicas / experts"),
        "routing": Param("choice", default="token_balanced", choices=POLICIES),
        "shared_experts": Param("int", default=0, lo=0),
        "skew": Param("float", default=0.0, lo=0.0, hi=8.0,
                      doc="Zipf exponent of expert popularity (0: uniform)"),
        "seed": Param("int", default=0, lo=0, hi=MAX_SEED, hi_why="numpy's seeds"),
        "trace": Param("path", default=None, nullable=True, doc="routing trace (CSV or NPZ)"),
        "loads": Param("path", default=None, nullable=True,
                       doc="expert-loads JSON (SGLang logical_count), sampled per batch"),
        "layer": Param("int", default=None, nullable=True, lo=0,
                       doc="layer of the loads file (default: its first MoE layer)"),
        "expert_groups": Param("int", default=1, lo=1,
                               doc="expert groups of group-limited routing (DeepSeek-V3: 8)"),
        "group_top_k": Param("int", default=None, nullable=True, lo=1,
                             doc="groups a token may use (DeepSeek-V3: 4; default: all)"),
        "variation": Param("float", default=0.0, lo=0.0, hi=4.0,
                           doc="batch-to-batch log-normal sigma of expert popularity (loads)"),
        "placement": Param("choice", default="auto", choices=PLACEMENTS),
        "redundant_experts": Param("int", default=None, nullable=True, lo=0,
                                   doc="extra expert slots (instead of replication)"),
        "gpus_per_node": Param("int", default=8, lo=1, unit="GPUs",
                               doc="GPUs per node (NVLink domain), for EPLB's node packing"),
        "kernel": Param("choice", default="grouped", choices=MOE_KERNELS,
                        doc="expert GEMM kernel: grouped (the engines' grouped GEMMs on the "
                            "native MMA), marlin (vLLM's Marlin MoE: mixed-input weights on "
                            "mma.sync) or triton (the OpenAI Triton experts, matmul_ogs: its "
                            "own row tile)"),
    }
    SIZE_PARAMS = ("hidden", "expert_hidden")
    TENSORS = (("tokens", "hidden"), ("experts", "hidden", "expert_hidden"),
               ("shared_experts", "hidden", "expert_hidden"), ("tokens", "top_k"))

    def check(self, v):
        out = []
        e, g = v["experts"], v["gpus"]
        if v["top_k"] > e:
            out.append(("top_k", f"top_k ({v['top_k']}) exceeds experts ({e})"))
        wd = v["weight_dtype"]
        if wd is not None and bytes_per_element(wd) > bytes_per_element(v["dtype"]):
            out.append(("weight_dtype", f"{wd} weights wider than the MMA dtype {v['dtype']}: "
                                        f"weights are stored in dtype or narrower"))
        if v["fp8_scaling"] == "block" and tensor_dtype(v["dtype"]) != "fp8":
            out.append(("fp8_scaling", f"block scaling applies to fp8 experts, not "
                                       f"{v['dtype']}"))
        if v["fp8_block_quant"] != "fused" and v["fp8_scaling"] != "block":
            out.append(("fp8_block_quant", "applies to block-scaled fp8 experts "
                                           "(fp8_scaling block) only"))
        if v["kernel"] == "marlin" and (wd is None or bytes_per_element(wd) >= bytes_per_element(
                v["dtype"]) or tensor_dtype(v["dtype"]) not in ("bf16", "fp16")):
            out.append(("kernel", "marlin runs 16-bit activations on narrower weights (dtype bf16 "
                                  "or fp16, weight_dtype narrower)"))
        if v["trace"] and v["loads"]:
            out.append(("loads", "give a routing trace or an expert-loads file, not both"))
        if not v["loads"]:
            for key, default in (("layer", None), ("variation", 0.0)):
                if v[key] != default:
                    out.append((key, "applies to an expert-loads file (loads) only"))
        try:
            check_group_limit(e, min(v["top_k"], e), v["expert_groups"], v["group_top_k"])
        except ValueError as err:
            out.append(("expert_groups", str(err)))
        if v["redundant_experts"] is not None and v["replication"] != 1.0:
            out.append(("redundant_experts", "give replication or redundant_experts, not both"))
        redundant = _redundant(v)
        if redundant > e * (g - 1):
            given = ("redundant_experts" if v["redundant_experts"] is not None
                     else "replication")  # the key the user wrote
            out.append((given, f"{redundant} redundant replicas of {e} experts need more "
                               f"than one replica of an expert per GPU ({g} GPUs hold at most "
                               f"{e * (g - 1)} redundant replicas: replication at most {g})"))
        kind = _placement(v, redundant)
        if kind == "contiguous" and redundant:
            out.append(("placement", "contiguous placement has no redundant replicas"))
        if kind == "eplb":
            nodes = nodes_for(g, v["gpus_per_node"])
            if (e + redundant) % g:
                out.append(("gpus", f"experts + redundant ({e} + {redundant}) must divide "
                                    f"evenly over gpus ({g}) for EPLB's equal slots per GPU"))
            elif g % nodes:
                out.append(("gpus", f"{g} GPUs do not fill {nodes} nodes of "
                                    f"{v['gpus_per_node']} evenly (EPLB packs per node)"))
        elif e % g:
            out.append(("gpus", f"experts ({e}) must divide evenly over gpus ({g})"))
        return out

    @property
    def redundant(self) -> int:
        """Redundant replicas beyond one per expert (from `redundant_experts` or
        `replication`)."""
        return _redundant(self.params)

    @property
    def placement_kind(self) -> str:
        """The placement used: contiguous, balanced or eplb (`auto` resolved)."""
        return _placement(self.params, self.redundant)

    @functools.cached_property
    def loads_source(self) -> LoadsRouting | None:
        """The expert-loads trace source (None without a loads file)."""
        if not self.loads:
            return None
        loads = load_expert_loads(self.loads)
        loads.check_experts(self.experts)
        return LoadsRouting(loads, self.top_k, self.expert_groups, self.group_top_k,
                            self.variation)

    @property
    def loads_layer(self) -> int | None:
        """The loads file's layer this op routes (None without a loads file)."""
        src = self.loads_source
        return None if src is None else src.loads.check_layer(self.layer)

    def expert_counts(self) -> np.ndarray:
        """Tokens routed to each expert in this step (trace, loads file, or seeded synthetic
        routing)."""
        if self.loads:
            return self.loads_source.counts(self.loads_layer, self.tokens, self.seed)
        if self.trace:
            ids = load_trace(self.trace, self.top_k, self.experts)
            if len(ids) != self.tokens:
                raise InputError(f"trace: {self.trace} has {len(ids)} rows, one per token, but "
                                 f"tokens is {self.tokens}")
        else:
            return _synthetic_counts(self.tokens, self.experts, self.top_k, self.skew,
                                     self.seed)
        return np.bincount(ids.ravel(), minlength=self.experts)

    @functools.cached_property
    def routing_result(self) -> Routing:
        """The placement (module docstring; without a loads file its statistics are this step's
        load, an oracle for EPLB's) and the routing policy's assignment of tokens to replicas.
        On an EPLB placement, token balancing runs over EPLB's slots (`eplb`); the other
        policies send an expert's tokens whole to one replica, so slots of one expert on one
        GPU are one replica to them. Memoized per routing (ROUTING_CACHE)."""
        key = self._routing_key()
        hit = _ROUTINGS.get(key) if key is not None else None
        if hit is not None:
            try:
                _ROUTINGS.move_to_end(key)
            except KeyError:  # evicted meanwhile by another thread
                pass
            return hit
        hit = self._route()
        if key is not None:
            _ROUTINGS[key] = hit
            while len(_ROUTINGS) > ROUTING_CACHE:
                _ROUTINGS.popitem(last=False)
        return hit

    def _routing_key(self) -> tuple | None:
        """What the routing depends on: the parameters but ROUTING_FREE_PARAMS, and the
        trace/loads files as they are now (None where one cannot be read: no memo, the read
        reports it)."""
        files = []
        for path in (self.trace, self.loads):
            if path:
                try:
                    files.append(_file_digest(resolve_loads_path(path) if path == self.loads
                                              else path))
                except (OSError, ValueError):
                    return None
        return (tuple(v for k, v in self.params.items() if k not in ROUTING_FREE_PARAMS),
                tuple(files))

    def _route(self) -> Routing:
        counts = self.expert_counts()
        kind = self.placement_kind
        if kind == "contiguous":
            placement = place_contiguous(self.experts, self.gpus)
        elif kind == "balanced":
            placement = place_eplb(counts.astype(float), self.gpus,
                                   (self.experts + self.redundant) / self.experts)
        elif self.loads:  # EPLB from the file's statistics: one placement per layer
            ep = _file_eplb(self.loads_source.loads, self.loads_layer, self.gpus, self.redundant,
                            self.expert_groups, self.gpus_per_node)
        else:
            ep = eplb_placement(counts.astype(float), self.gpus, self.redundant,
                                self.expert_groups, self.gpus_per_node)
        if kind == "eplb":
            if self.routing == "token_balanced":
                return route_token_balanced_slots(counts, ep)
            placement = ep.placement
        return route_tokens(self.routing, counts, placement, self.seed)

    def per_gpu_rows(self) -> list[list[int]]:
        return self.routing_result.gpu_rows()

    def demand(self, hw) -> Choice:
        if not hw.supports(self.dtype):
            raise InputError(f"moe dtype '{self.dtype}' is not supported by {hw.name}'s tensor "
                             f"cores")
        # GPUs with the same row groups (as a multiset) do the same work: price each once
        distinct = dict.fromkeys(tuple(sorted(rows)) for rows in self.per_gpu_rows())
        smem = min(GROUPED_GEMM_SMEM_BYTES, hw.smem_per_cta_bytes)
        return Choice(tuple(self._gpu_demand(list(rows), smem, hw) for rows in distinct),
                      pick="slowest")

    def _gpu_demand(self, rows: list[int], smem_bytes: int, hw) -> Demand:
        """One GPU's share as the fused-MoE runner runs it (RUNNER_KERNELS): the routing sort,
        the expand of each expert's rows (cast to the GEMM type), the two grouped GEMMs, the
        gated activation (cast again) and the finalize back to token order."""
        h, f = self.hidden, self.expert_hidden
        w = bytes_per_element(self.dtype)
        # the weights as stored (block scales included): a narrower type is converted to the
        # MMA type tile by tile in the mainloop (a mixed-input grouped GEMM: vLLM's Marlin and
        # Triton MXFP4 MoE kernels on Hopper)
        wb = bytes_per_element(self.weight_dtype or self.dtype)
        act = 2.0  # activations in BF16
        shared = self.shared_experts  # each runs this GPU's share of the tokens
        shared_rows = math.ceil(self.tokens / self.gpus) if shared else 0
        tokens = float(sum(rows) + shared * shared_rows)
        weights = (len(rows) + shared) * 3.0 * h * f * wb
        block = MMA_ROWS
        if self.kernel == "marlin":
            block = marlin_block_m(sum(rows) / max(1, len(rows)))
        elif self.kernel == "triton":  # the OpenAI Triton experts' row tile (TRITON_BLOCK_M)
            block = max(MMA_ROWS, triton_block_m(self.tokens * self.top_k,
                                                 math.ceil(self.experts / self.gpus)))
        row_tiles = sum(math.ceil(t / block) for t in rows) \
            + shared * math.ceil(shared_rows / block)
        padded = row_tiles * max(MMA_ROWS, block)  # Marlin's blocks are at most 64 rows
        tiles = row_tiles * (math.ceil(2 * f / TILE_N) + math.ceil(h / TILE_N))
        # the GEMMs read the cast rows and the weights, write GEMM1's gate/up in BF16 and GEMM2's
        # output; the activation's cast output is GEMM2's A
        hbm = weights + tokens * (h * w + 2 * f * act + f * w + h * act)
        # the CUTLASS NVFP4 grouped GEMMs' TILE_N-wide tiles at the block-scaled MMA's granule
        # (ops/gemm.py FP4_MMA_N; the array collective is the GEMM's, arrayed)
        n_granule = fp4_mma_n(hw, tensor_dtype(self.dtype), TILE_N) / TILE_N
        mma = 2.0 * padded * 3 * h * f * n_granule
        if self.kernel == "marlin":  # mma.sync at m16 granularity, at its share of that rate
            # (a block's MMAs cover its whole rows: the kernel's m-blocks are set by the block)
            padded = row_tiles * max(MARLIN_MMA_ROWS, block)
            mma = 2.0 * padded * 3 * h * f / marlin_rate_share(hw, self.dtype)
        work = {f"tensor:{tensor_dtype(self.dtype)}": mma, "l2": hbm, "hbm": hbm}
        overlap = None
        promoted = self.fp8_scaling == "block" and fp8_blocks_promoted(hw)
        # TensorRT-LLM's block-scale runner quantizes the BF16 GEMM inputs itself
        # (BLOCK_QUANT_THREADS): the expand and the activation write BF16, not the GEMM type
        runner_quant = promoted and self.fp8_block_quant == "trtllm"
        cast = act if runner_quant else w  # bytes per element the expand/activation write
        if promoted:
            # block-scaled FP8 on an MMA that takes no scales (wgmma): every 128 of K the
            # partial sums of each output leave the tensor core and are scaled into the FP32
            # accumulators on the CUDA cores, one FFMA per output and K block, serial with the
            # MMAs they wait for (DeepSeek-V3 §3.3.2; ops.gemm's promotion, as DeepGEMM's and
            # CUTLASS's sm90 blockwise grouped GEMMs run it): GEMM1's 2f outputs over K = h,
            # GEMM2's h outputs over K = f, per padded row
            work["fma"] = padded * (2 * f * math.ceil(h / FP8_BLOCK)
                                    + h * math.ceil(f / FP8_BLOCK))
            overlap = Overlap((f"tensor:{tensor_dtype(self.dtype)}",), ("fma",), 0.0)
        if wb < w:
            # each row tile converts the weight tiles it multiplies (CONVERT_OPS per element on
            # the FMA pipe, as ops.gemm's mixed-input mainloop)
            ops_per = (DEFAULT_CONVERT_OPS if self.weight_dtype in hw.block_scaled_mma
                       else CONVERT_OPS.get(self.weight_dtype, DEFAULT_CONVERT_OPS))
            work["fma"] = work.get("fma", 0.0) + row_tiles * 3.0 * h * f * ops_per
        launch = LaunchShape(ctas=max(1, tiles), threads_per_cta=384, registers_per_thread=168,
                             smem_per_cta_bytes=smem_bytes,
                             bytes_in_flight_per_cta=smem_bytes * 4 // 5)
        gemms = Demand(work=work, launch=launch, flop=2.0 * tokens * 3 * h * f, hbm_bytes=hbm,
                       overlap=overlap,
                       kernels=2,  # grouped GEMM gate/up, grouped GEMM down
                       details={"activated_replicas": len(rows), "tokens_on_gpu": tokens,
                                "part": "grouped GEMMs"})
        picks = float(self.tokens * self.top_k)  # (token, expert) pairs the sort orders
        sort = stream_demand(picks, picks * 4.0, picks * 8.0, {}, 4.0, 0.0,
                             details={"part": "routing sort"})
        sort = replace(sort, kernels=ROUTING_SORT_KERNELS)
        expand = stream_demand(tokens * h, tokens * h * act, tokens * h * cast, {}, act, 0.0,
                               details={"part": "expand rows (cast)"})
        # SwiGLU: silu(gate) * up, one exp (XU) and a few FMAs per output element
        activation = stream_demand(tokens * f, tokens * 2 * f * act, tokens * f * cast,
                                   {"fma": 4.0, "xu": 1.0}, act, 4.0 * tokens * f,
                                   details={"part": "gated activation (cast)"})
        out_tokens = min(float(self.tokens), tokens)  # token rows this GPU writes back
        finalize = stream_demand(tokens * h, tokens * h * act, out_tokens * h * act,
                                 {"fma": 1.0}, act, tokens * h,
                                 details={"part": "finalize (top-k weighted sum)"})
        parts = (sort, expand, gemms, activation, finalize)
        if runner_quant:
            parts = (sort, expand, block_quant_demand(tokens, h, w, hw, "quantize GEMM1 input"),
                     gemms, activation,
                     block_quant_demand(tokens, f, w, hw, "quantize GEMM2 input"), finalize)
        return sequence_demand(parts, launch_from=parts.index(gemms), details=gemms.details)


def triton_block_m(picks: int, local_experts: int) -> int:
    """The Triton MXFP4 experts' block_m (TRITON_BLOCK_M) for `picks` gathered rows (tokens x
    top_k, every rank's under expert parallelism) over a rank's `local_experts`."""
    per_expert = max(1, int(picks) // max(1, int(local_experts)))
    lo, hi = TRITON_BLOCK_M
    return max(lo, min(1 << (per_expert - 1).bit_length(), hi))


def marlin_block_m(rows_per_expert: float) -> int:
    """The rows of one of Marlin's expert blocks (fused_marlin_moe: the first of
    MARLIN_BLOCK_M whose blocks per expert, M·top_k/E / block, fall below MARLIN_BLOCK_FILL;
    else the last)."""
    for block in MARLIN_BLOCK_M:
        if rows_per_expert / block < MARLIN_BLOCK_FILL:
            return block
    return MARLIN_BLOCK_M[-1]


def marlin_rate_share(hw, dtype: str) -> float:
    """Marlin's MMA rate as a share of the native tensor rate the work is counted at: the GPU's
    mma.sync rate times MARLIN_MMA_FRACTION."""
    d = tensor_dtype(dtype)
    if d not in hw.mma_sync_flop_per_sm_per_clk:
        raise InputError(f"moe kernel 'marlin' issues mma.sync, for which {hw.name}'s spec "
                         f"declares no {d} rate (isa.mma_sync_flop_per_sm_per_clk has: "
                         f"{', '.join(sorted(hw.mma_sync_flop_per_sm_per_clk))})")
    return (MARLIN_MMA_FRACTION * hw.mma_sync_flop_per_sm_per_clk[d]
            / hw.tensor_flop_per_sm_per_clk[d])


def block_quant_demand(rows: float, cols: int, out_bytes: float, hw, part: str) -> Demand:
    """TensorRT-LLM's `scale_1x128_kernel` over `rows` BF16 rows of `cols` (BLOCK_QUANT_THREADS):
    one warp per 1x128 group, min(SMs, groups / 8) CTAs of 8 warps. A warp's loop iteration
    loads its group (256 B), reduces it and stores the FP8 values and the FP32 scale; its next
    load waits for this one, so each warp moves one group per DRAM round trip: the CTA's bytes
    in flight are its 8 warps' groups, read and written (Little's law in the engine)."""
    groups = rows * math.ceil(cols / FP8_BLOCK)
    ctas = max(1, min(hw.sm_count, math.ceil(groups / BLOCK_QUANT_WARPS_PER_CTA)))
    read, write = rows * cols * 2.0, rows * cols * out_bytes + groups * 4.0
    d = stream_demand(rows * cols, read, write, {"fma": 2.0}, 2.0, 0.0, ctas=ctas,
                      threads=BLOCK_QUANT_THREADS, vector_bytes=BLOCK_QUANT_VECTOR_BYTES,
                      details={"part": part})
    per_group = FP8_BLOCK * (2.0 + out_bytes) + 4.0
    return replace(d, launch=replace(d.launch, bytes_in_flight_per_cta=(
        BLOCK_QUANT_WARPS_PER_CTA * per_group)))


@functools.lru_cache(maxsize=4096)
def _synthetic_counts(tokens: int, experts: int, top_k: int, skew: float,
                      seed: int) -> np.ndarray:
    """Tokens per expert of a seeded synthetic routing: a function of these alone (not of the
    GPUs or the placement), so a search's layouts and a serving simulation's step-cost nodes
    share one draw per token count (read-only: the cached array is never written)."""
    if tokens * experts <= EXACT_ROUTING_LIMIT:
        ids = trace_prefix(tokens, experts, top_k, "zipf" if skew > 0 else "uniform", skew,
                           seed)
        counts = np.bincount(ids.ravel(), minlength=experts)
    else:  # many tokens: per-expert counts from a multinomial over the popularity
        counts = routed_counts(tokens, experts, top_k, skew, seed)
    counts.setflags(write=False)
    return counts


def _redundant(v) -> int:
    """Redundant replicas of a parameter dict: redundant_experts, else round(E·replication) − E
    (`routing.total_replicas`)."""
    if v["redundant_experts"] is not None:
        return int(v["redundant_experts"])
    return total_replicas(v["experts"], v["replication"]) - v["experts"]


def _placement(v, redundant: int) -> str:
    if v["placement"] != "auto":
        return v["placement"]
    if redundant == 0:
        return "contiguous"
    return "eplb" if v["loads"] else "balanced"


_EPLB_CACHE: dict = {}


def _file_eplb(loads, layer: int, gpus: int, redundant: int, groups: int, gpus_per_node: int):
    """EPLB placement of a loads file's layer, cached per file and layout (it depends on nothing
    else, and a study prices the same layer many times)."""
    key = (loads.key or (loads.path, id(loads)), layer, gpus, redundant, groups, gpus_per_node)
    if key not in _EPLB_CACHE:
        if len(_EPLB_CACHE) > 4096:
            _EPLB_CACHE.clear()
        _EPLB_CACHE[key] = eplb_placement(loads.counts[layer], gpus, redundant, groups,
                                          gpus_per_node)
    return _EPLB_CACHE[key]
