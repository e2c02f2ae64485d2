"""Serving-engine scheduler settings and their defaults, named per engine with their sources.

Read from the released packages (pip download --no-deps; file and line of the release named):
  vLLM 0.10.1 (V1 engine, the default since 0.8):
    max_num_seqs / max_num_batched_tokens: engine/arg_utils.py:1638-1657, for GPUs of at least
      70 GiB other than A100: 1024 / 8192 for `vllm serve` (UsageContext.OPENAI_API_SERVER),
      1024 / 16384 for the offline `LLM` class; other GPUs 256 / 2048 (serve), 256 / 8192 (LLM);
    chunked prefill on, decode and prefill chunks in one step: v1/core/sched/scheduler.py
      schedule() (running requests first, then waiting ones, one token budget);
    preemption: the last running request (`self.running.pop()`), recomputed later
      (num_computed_tokens = 0, prepended to the waiting queue): scheduler.py:255-271;
    block_size 16 on CUDA: platforms/cuda.py:137-138 (64 for FlashMLA, 128 for CUTLASS MLA);
    gpu_memory_utilization 0.9: config/cache.py:43;
    CUDA graphs: cudagraph_mode PIECEWISE by default (config/__init__.py:3553-3558: attention
      runs outside the graphs), capture sizes [1, 2, 4] + multiples of 8 up to
      min(2 · max_num_seqs, 512) (config/scheduler.py:79, cuda_graph_sizes).
  vLLM 0.6.3 (V0 engine):
    max_num_seqs 256, block_size 16, gpu_memory_utilization 0.90: engine/arg_utils.py:107-115;
    chunked prefill off below 32k max_model_len (arg_utils.py:937-960), then
      max_num_batched_tokens = max(max_model_len, 2048) (config.py:985-987), and a step is
      either a prefill batch or a decode batch (core/scheduler.py _schedule_default);
    preemption by recompute of the last running group (scheduler.py:580, 1470-1481);
    admission leaves a watermark of 1 % of the blocks free (core/block_manager_v2.py:65,
      138-142);
    full CUDA graphs of decode batches up to max_num_seqs, padded to [1, 2, 4, 8, 16, ...]
      (worker/model_runner.py:66-75, 985).
  SGLang 0.4.9:
    chunked_prefill_size 8192 below 160 GiB of GPU memory, 16384 above (server_args.py:331-341);
      prefill and decode batches are separate (enable_mixed_chunk off);
    page_size 1 (server_args.py:82);
    mem_fraction_static = (GPU memory - reserved) / GPU memory, reserved (9.5 + tp·pp/2) GiB
      below 90 GiB, (12 + tp·pp/2) GiB below 160 GiB, 32 GiB above (server_args.py:283-319); it
      covers weights and the KV pool, the reserve holds activations and CUDA-graph buffers;
    max_running_requests = min(KV tokens // 2, request pool of 2048-4096) (managers/
      tp_worker.py:122-130, model_executor/model_runner.py:1024-1032);
    admission (`admission="sglang"`): PrefillAdder.add_one_req_ignore_eos for requests that
      ignore EOS, as benchmarks send them (managers/schedule_policy.py:385-460): the cache must
      hold every running request to its end while the shorter ones finish (new_token_ratio 1.0
      for them, lines 393-396), and the free tokens must exceed the new requests' prompts and
      outputs plus the running requests' remaining outputs at new_token_ratio, 0.7 decaying to
      0.098 (line 309; global_config.py:24-31);
    CUDA graphs of decode batches [1, 2, 4, 8] + 16..160 step 8, + 168..256 above 90 GiB, +
      ..512 above 160 GB (model_executor/cuda_graph_runner.py:138-162).
  SGLang 0.4.1 (December 2024; `sglang-0.4.1`), where it differs from 0.4.9:
    mem_fraction_static by TP alone: 0.88 at TP1, 0.87 at TP2, 0.85 at TP4, 0.81 at TP8, 0.79
      at TP16 (server_args.py:170-180);
    chunked_prefill_size 8192 (server_args.py:183-187);
    CUDA graphs of decode batches [1, 2, 4] + 8..160 step 8 (cuda_graph_max_bs 160:
      server_args.py:190-198; model_executor/cuda_graph_runner.py:134);
    attention through FlashInfer 0.1.6 (server_args.py:205-208; the wheel's
      `flashinfer==0.1.6` requirement), whose prefill and tensor-core decode kernels are its
      FlashAttention-2-style mma.sync templates (FlashInfer's Hopper FA3 templates came with
      0.2): the fa2 family, and an FP8 cache converted per tile;
    max_running_requests, page size, admission and the separate prefill and decode batches as
      0.4.9 (managers/tp_worker.py:92-99, model_runner.py:526-535).
  TensorRT-LLM (its wheels are not on PyPI, so not read from source here; the documented
  defaults of the LLM API, to be checked): max_batch_size 2048, max_num_tokens 8192,
  KvCacheConfig.free_gpu_memory_fraction 0.9 of the memory left after the model, tokens_per_block
  32, enable_chunked_prefill False, in-flight batching of context and generation requests in one
  step, capacity_scheduler_policy GUARANTEED_NO_EVICT (a request is admitted only with KV blocks
  for its whole prompt + max output, so nothing is preempted); CUDA graphs of generation-only
  batches (assumed here up to 128).

FP8 attention on an FP8 KV cache (`fp8_attention`): vLLM V1's FlashAttention backend views the
cache as FP8, quantizes the query with `ops.scaled_fp8_quant(query, layer._q_scale)` and passes
q/k/v descales to FlashAttention-3's FP8 kernel (vLLM 0.10.1 sdist,
vllm/v1/attention/backends/flash_attn.py:511-521 and 550); TensorRT-LLM's generation kernels (XQA, trtllm-gen) read the FP8 cache at the bandwidth of
its bytes with no conversion cost visible: AIConfigurator's measured generation attention
(validate/data/aiconfigurator_attention.csv) runs an FP8 cache at the same achieved bytes/s as
a BF16 one on H100, H200 and B200 (`python -m perfmodel.validation.modules`). SGLang 0.4.9 picks
FlashAttention-3 on Hopper for MHA models (model_executor/model_runner.py:369-376) and casts the
query to the FP8 cache's type (layers/attention/flashattention_backend.py:668-675): on. vLLM
V0's backends: off.

Per-step framework overhead (`step_overhead_s`: scheduling, input preparation, sampling,
detokenization on the CPU, serial with the GPU unless the engine overlaps it): none of these
sources states a number. SGLang's is fitted on two light-load published rows
(perfmodel/fitted.yaml `serving.step_overhead_s.sglang`); vLLM's and TensorRT-LLM's stay 0
until rows that isolate them are fitted.

Per-request path (`request_overhead_s`): what a benchmark client's TTFT holds beside the engine's
steps, from its send to the scheduler and from the first token back: the client's connection
(InferenceX's client opens a new aiohttp session per request: utils/bench_serving
backend_request_func.py), the HTTP server, tokenization, the hand-off to the scheduler process
(vLLM V1's AsyncLLM -> EngineCore over ZMQ; SGLang's TokenizerManager -> Scheduler;
trtllm-serve's executor queue), detokenization and the server-sent event. No source states a
number; each engine's is fitted on its lightest-load InferenceX H200 rows (perfmodel/fitted.yaml
`serving.request_overhead_s.*`, rows named there), where queueing is nil and the prefill of a
1k prompt at TP8 is small beside it. The simulator holds each request back from the scheduler by
it and counts it in TTFT and E2E; a closed loop's client sends its next request on completion.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from perfmodel import fitted
from perfmodel.errors import InputError
from perfmodel.hardware import Hardware, hardware
from perfmodel.units import GiB
from perfmodel.ops.gemm_dispatch import DISPATCHES as GEMM_DISPATCHES
from perfmodel.ops.moe.op import MOE_KERNELS
from perfmodel.workloads.builder import ALLREDUCE_DISPATCH, MOE_EXCHANGES

GRAPH_MODES = ("none", "full_decode", "piecewise", "full_and_piecewise")
ADMISSIONS = ("reserve", "sglang")
# SGLang's new-token-ratio schedule (global_config.py, the same in 0.4.1 and 0.4.9): the share of
# a running request's remaining output the admission budget keeps, from its initial value down
# to initial x factor over the decay steps, one step per decode batch, back to the initial value
# when the scheduler idles; and the clip on any one request's remaining output
# (schedule_policy.py CLIP_MAX_NEW_TOKENS_ESTIMATION)
SGLANG_INIT_NEW_TOKEN_RATIO = 0.7
SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR = 0.14
SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS = 600
SGLANG_CLIP_MAX_NEW_TOKENS = 4096
# vLLM V0 and V1 capture [1, 2, 4] and multiples of 8 (worker/model_runner.py:73-75;
# config/scheduler.py:79-81)
VLLM_SMALL_GRAPHS = (1, 2, 4)
VLLM_GRAPH_STEP = 8
# the smallest GPU memory that gets vLLM V1's larger defaults (arg_utils.py:1638)
VLLM_LARGE_GPU_BYTES = 70 * GiB
SGLANG_MAX_REQUEST_POOL = 4096
TRTLLM_GRAPH_MAX_BATCH = 128  # assumed, see the module docstring
SGLANG_STEP_OVERHEAD_S = fitted.value("serving.step_overhead_s.sglang")  # see the docstring
# each engine's per-request path (the docstring; fitted.yaml serving.request_overhead_s.*)
REQUEST_OVERHEAD_ENGINES = ("vllm", "sglang", "trtllm")
REQUEST_OVERHEAD_S = {e: fitted.value(f"serving.request_overhead_s.{e}")
                      for e in REQUEST_OVERHEAD_ENGINES}


def vllm_graph_sizes(largest: int) -> tuple[int, ...]:
    return VLLM_SMALL_GRAPHS + tuple(range(VLLM_GRAPH_STEP, largest + 1, VLLM_GRAPH_STEP))


@dataclass(frozen=True)
class Engine:
    """How one replica's scheduler batches requests (see the module docstring for sources).

    max_batch                running sequences at most (max_num_seqs, max_running_requests,
                             max_batch_size); None: SGLang's rule, min(KV tokens // 2, 4096)
    max_tokens_per_step      token budget of one step (max_num_batched_tokens, chunked_prefill_
                             size, max_num_tokens); None: vLLM V0's max(max_model_len, 2048),
                             max_model_len taken as the longest request
    chunked_prefill          a prompt may be split over steps to fill the budget
    mixed_batching           prefill chunks ride in decode steps (else a step is all prefill or
                             all decode, prefill first)
    block_tokens             KV-cache page size in tokens
    gpu_memory_utilization   share of HBM planned with (fraction_of_free: share of the HBM left
                             after weights, activations and workspace, TensorRT-LLM's way)
    activations_in_reserve   the memory fraction already leaves activations and workspace out
                             (SGLang's mem_fraction_static)
    reserve_output_fraction  admission keeps KV for this share of every running request's
                             remaining output (0: allocate at occupancy and preempt on shortage)
    cuda_graph_sizes         captured batch sizes (empty: eager); a step is padded up to one
    cuda_graph_mode          full_decode: decode-only steps fully captured; piecewise: every
                             step of a captured size runs all but attention in graphs;
                             full_and_piecewise: both
    step_overhead_s          CPU time per step, serial with the GPU (0: see the docstring)
    request_overhead_s       a request's host path, from the client's send to the scheduler and
                             its first token back (see the docstring): added to TTFT and E2E,
                             the request reaching the scheduler that much after its send
    admission                "reserve": a request is admitted while its KV blocks and
                             `reserve_output_fraction` of every running request's remaining
                             output fit; "sglang": SGLang's PrefillAdder for requests that
                             ignore EOS without a prefix cache (managers/schedule_policy.py,
                             add_one_req_ignore_eos, as benchmarks run it; sim.py
                             `sglang_future_fits`): admitted while the cache holds every
                             running request to its end as the shorter ones finish and free
                             theirs, and while the free tokens exceed the new requests'
                             prompts and outputs plus the running ones' remaining outputs at
                             SGLang's decaying new_token_ratio (0.7 down to 0.098 over 600
                             decode steps: global_config.py)
    overlap_schedule         the scheduler forms the next batch while the GPU runs this one
                             (SGLang's event_loop_overlap, on by default since 0.4: scheduler.py
                             event_loop_overlap, disable_overlap_schedule False; vLLM V1's
                             async scheduling, max_concurrent_batches = PP + 1, on by default in
                             recent releases and set by InferenceX's recipes: v1/engine/core.py,
                             config/vllm.py; TensorRT-LLM's overlap scheduler, on by default:
                             TorchLlmArgs disable_overlap_scheduler False, docs
                             features/overlap-scheduler): a request arriving during a step joins
                             the step after the next
    batch_wait_iters         TensorRT-LLM's batch waiting (TorchLlmArgs batch_wait_timeout_iters,
    batch_wait_tokens_ratio  batch_wait_max_tokens_ratio; default 0, off): while generation
                             requests run, new context requests are held back for up to this
                             many steps until the step's tokens reach the ratio x
                             max_num_tokens (PyExecutor `_waiting_requests`); InferenceX's
                             trtllm-serve recipes set 20 / 0.9 (Llama-3.3-70B 1k/1k, TP < 8)
                             and 40 / 0.8 (DeepSeek-R1 FP8 on B200, 1k/1k, conc >= 64)
    kv_blocks_override       KV blocks of the replica instead of those memory leaves (vLLM's
                             num_gpu_blocks_override; for what-ifs and tests)
    admission_watermark      share of the blocks a new request must leave free (vLLM V0's
                             block-manager watermark, against preempting right after admitting)
    spec_tokens              speculative decoding: draft tokens proposed per decode step (MTP
                             or EAGLE layers; 0: off), verified in one target forward of
                             1 + spec_tokens tokens per sequence
    spec_acceptance          probability that a draft token is accepted given the previous
                             ones were (the i.i.d. acceptance of Leviathan et al. 2023)
    fp8_attention            with an FP8 KV cache the attention kernels quantize Q to FP8 and
                             run FP8 MMAs on the cache as stored (else each K/V tile is
                             converted to the activation dtype, FlashInfer's way)
    kernel_fusion            the kernels the engine fuses in each layer (workloads.builder
                             FUSIONS): add_norm (vLLM, SGLang), trtllm, none
    attention_kernel         the GQA attention's kernel family (ops.attention KERNELS; None:
                             the GPU's default, FlashAttention-3/4's designs): TensorRT-LLM's
                             own kernels for trtllm (XQA in generation, fmha_v2 / trtllm-gen in
                             context: ops/attention/trtllm.py; Hopper and Blackwell only, the
                             default family elsewhere); MLA's latent-cache generation keeps
                             the default except under trtllm (trtllm-gen's MLA kernels on
                             Blackwell)
    moe_exchange             expert parallelism over data-parallel attention: NCCL's all-to-all
                             ("alltoall") or DeepEP's normal intranode kernels ("deepep", the
                             `deepep` op; workloads.builder MOE_EXCHANGES): TensorRT-LLM's
                             wide-EP MoE runs DeepEP, which AIConfigurator prices from its
                             measured DeepEP calls; vLLM and SGLang keep the all-to-all
    allreduce                who picks the tensor-parallel all-reduce (workloads.builder
                             ALLREDUCE_DISPATCH): the engine's own dispatch, its custom kernels
                             where its source's rules take the message and NCCL otherwise
                             (vllm, sglang, trtllm: perfmodel/ops/custom_allreduce.py, read
                             from vLLM 0.24.0, SGLang 0.5.14 and FlashInfer 0.7.4's port of
                             TensorRT-LLM's kernels); "auto": NCCL or a generic one-shot kernel,
                             the faster (the builder's default)
    gemm_dispatch            which kernel the linears' GEMMs run (ops.gemm_dispatch
                             DISPATCHES): "best", the fastest the model offers (cuBLAS's
                             heuristic idealized), or an engine's own table by M: vllm-0.10.2
                             for vllm (its per-tensor FP8 CUTLASS kernels, swap-AB below 64
                             tokens, no split-K: the InferenceX Llama recipe's image)
    moe_kernel               the experts' kernel (ops.moe MOE_KERNELS): "grouped", the
                             engine's grouped GEMMs on 64-row tiles; "triton", the OpenAI
                             Triton experts with matmul_ogs's own row tile (vLLM's default on
                             Hopper for MXFP4 experts, quantization/mxfp4.py
                             get_mxfp4_backend, vLLM 0.18.0; TensorRT-LLM's TRITON backend);
                             or "marlin", vLLM's Marlin MoE (VLLM_MXFP4_USE_MARLIN=1)
    """

    name: str
    max_batch: int | None = 256
    max_tokens_per_step: int | None = 8192
    chunked_prefill: bool = True
    mixed_batching: bool = True
    block_tokens: int = 16
    gpu_memory_utilization: float = 0.9
    fraction_of_free: bool = False
    activations_in_reserve: bool = False
    reserve_output_fraction: float = 0.0
    cuda_graph_sizes: tuple[int, ...] = ()
    cuda_graph_mode: str = "full_decode"
    step_overhead_s: float = 0.0
    request_overhead_s: float = 0.0
    admission: str = "reserve"
    overlap_schedule: bool = False
    batch_wait_iters: int = 0
    batch_wait_tokens_ratio: float = 0.0
    kv_blocks_override: int | None = None
    admission_watermark: float = 0.0
    spec_tokens: int = 0
    spec_acceptance: float = 0.0
    fp8_attention: bool = False
    kernel_fusion: str = "none"
    attention_kernel: str | None = None
    moe_exchange: str = "alltoall"
    allreduce: str = "auto"
    gemm_dispatch: str = "best"
    moe_kernel: str = "grouped"

    def check(self) -> None:
        p = []
        for k in ("max_batch", "max_tokens_per_step", "kv_blocks_override"):
            v = getattr(self, k)
            if v is not None and (not isinstance(v, int) or v < 1):
                p.append(f"{k}: expected a positive integer or None, got {v!r}")
        if self.admission not in ADMISSIONS:
            p.append(f"admission: expected one of {', '.join(ADMISSIONS)}, got "
                     f"{self.admission!r}")
        if not isinstance(self.block_tokens, int) or self.block_tokens < 1:
            p.append(f"block_tokens: expected a positive integer, got {self.block_tokens!r}")
        if not 0 < self.gpu_memory_utilization <= 1:
            p.append(f"gpu_memory_utilization: expected a fraction in (0, 1], got "
                     f"{self.gpu_memory_utilization!r}")
        if not 0 <= self.admission_watermark < 1:
            p.append(f"admission_watermark: expected a fraction in [0, 1), got "
                     f"{self.admission_watermark!r}")
        if not isinstance(self.batch_wait_iters, int) or not 0 <= self.batch_wait_iters <= 10000:
            p.append(f"batch_wait_iters: expected an integer in [0, 10000], got "
                     f"{self.batch_wait_iters!r}")
        if not 0 <= self.batch_wait_tokens_ratio <= 1:
            p.append(f"batch_wait_tokens_ratio: expected a fraction in [0, 1], got "
                     f"{self.batch_wait_tokens_ratio!r}")
        if self.batch_wait_iters and not self.mixed_batching:
            p.append("batch_wait_iters: batch waiting holds contexts back beside running "
                     "decodes, which needs mixed batching (mixed_batching True)")
        if not 0 <= self.request_overhead_s <= 10:
            p.append(f"request_overhead_s: expected seconds in [0, 10], got "
                     f"{self.request_overhead_s!r}")
        if not 0 <= self.reserve_output_fraction <= 1:
            p.append(f"reserve_output_fraction: expected a fraction in [0, 1], got "
                     f"{self.reserve_output_fraction!r}")
        if self.moe_exchange not in MOE_EXCHANGES:
            p.append(f"moe_exchange: expected one of {', '.join(MOE_EXCHANGES)}, got "
                     f"{self.moe_exchange!r}")
        if self.allreduce not in ALLREDUCE_DISPATCH:
            p.append(f"allreduce: expected one of {', '.join(ALLREDUCE_DISPATCH)}, got "
                     f"{self.allreduce!r}")
        if self.gemm_dispatch not in GEMM_DISPATCHES:
            p.append(f"gemm_dispatch: expected one of {', '.join(GEMM_DISPATCHES)}, got "
                     f"{self.gemm_dispatch!r}")
        if self.moe_kernel not in MOE_KERNELS:
            p.append(f"moe_kernel: expected one of {', '.join(MOE_KERNELS)}, got "
                     f"{self.moe_kernel!r}")
        if self.cuda_graph_mode not in GRAPH_MODES:
            p.append(f"cuda_graph_mode: expected one of {', '.join(GRAPH_MODES)}, got "
                     f"{self.cuda_graph_mode!r}")
        if any(not isinstance(s, int) or s < 1 for s in self.cuda_graph_sizes):
            p.append(f"cuda_graph_sizes: expected positive integers, got "
                     f"{self.cuda_graph_sizes!r}")
        if not isinstance(self.spec_tokens, int) or not 0 <= self.spec_tokens <= 16:
            p.append(f"spec_tokens: expected an integer in [0, 16], got {self.spec_tokens!r}")
        if not 0 <= self.spec_acceptance <= 1:
            p.append(f"spec_acceptance: expected a probability in [0, 1], got "
                     f"{self.spec_acceptance!r}")
        if self.spec_tokens and self.spec_acceptance == 0:
            p.append("spec_acceptance: speculative decoding (spec_tokens > 0) needs the draft "
                     "acceptance rate")
        from perfmodel.workloads.builder import FUSIONS
        if self.kernel_fusion not in FUSIONS:
            p.append(f"kernel_fusion: expected one of {', '.join(FUSIONS)}, got "
                     f"{self.kernel_fusion!r}")
        from perfmodel.ops.attention.op import KERNELS
        if self.attention_kernel is not None and self.attention_kernel not in KERNELS:
            p.append(f"attention_kernel: expected one of {', '.join(KERNELS)} or None, got "
                     f"{self.attention_kernel!r}")
        if self.step_overhead_s < 0:
            p.append(f"step_overhead_s: expected ≥ 0, got {self.step_overhead_s!r}")
        if p:
            raise InputError([f"engine {self.name}: {x}" for x in p])

    def replace(self, **changes: Any) -> "Engine":
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise InputError(f"engine {self.name}: unknown setting(s) {', '.join(unknown)}")
        e = dataclasses.replace(self, **changes)
        e.check()
        return e

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


ENGINES = ("vllm", "vllm-offline", "vllm-v0", "sglang", "sglang-0.4.1", "trtllm")
# SGLang 0.4.1's mem_fraction_static: (smallest TP, fraction), largest first (server_args.py)
SGLANG_041_MEM_FRACTION = ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88))
ALIASES = {"tensorrt-llm": "trtllm", "vllm-v1": "vllm"}


def engine_attention_kernel(hw: Hardware | str) -> str | None:
    """The attention family vLLM and SGLang run on `hw` by default: on Blackwell (compute
    capability 10) TensorRT-LLM's trtllm-gen kernels, the "trtllm" family. vLLM's backend
    priority there puts FlashInfer first (vLLM 0.18.0 platforms/cuda.py
    _get_backend_priorities), whose decode runs trtllm-gen (utils/flashinfer.py
    use_trtllm_attention: with sinks, an FP8 query, or a 16-bit cache and at most 256 decode
    tokens; supports_trtllm_attention: SM100 only); SGLang picks trtllm_mha for MHA/GQA models on
    SM100 (SGLang 0.5.14 server_args.py _get_default_attn_backend; InferenceX's B200 DeepSeek
    recipes name trtllm_mla). Elsewhere FlashAttention leads (None: the GPU's default family, FA3
    on Hopper, as SGLang's default there). Evidence: AIConfigurator's vLLM 0.24.0 B200/B300/GB200
    generation attention (python -m perfmodel.validation.modules). Not priced: SGLang's
    trtllm_mha casts the query to FP8 in a kernel of its own with an FP8 cache
    (trtllm_mha_backend.py _maybe_quantize_q), which vLLM's FlashInfer path does not run."""
    return "trtllm" if hardware(hw).mma_instruction == "tcgen05" else None


def engine_preset(name: str, hw: Hardware | str, tp: int = 1, pp: int = 1) -> Engine:
    """The defaults of `name` (one of ENGINES) on `hw`: several depend on the GPU's memory."""
    mem = hardware(hw).hbm_capacity_bytes
    name = ALIASES.get(name, name)
    if name in ("vllm", "vllm-offline"):
        large = mem >= VLLM_LARGE_GPU_BYTES  # (the A100 exception needs the name: not applied)
        seqs = 1024 if large else 256
        tokens = (16384 if large else 8192) if name == "vllm-offline" else (8192 if large
                                                                             else 2048)
        return Engine(name, max_batch=seqs, max_tokens_per_step=tokens, chunked_prefill=True,
                      mixed_batching=True, block_tokens=16, gpu_memory_utilization=0.9,
                      cuda_graph_sizes=vllm_graph_sizes(min(2 * seqs, 512)),
                      cuda_graph_mode="piecewise", fp8_attention=True,
                      attention_kernel=engine_attention_kernel(hw),
                      kernel_fusion="add_norm", allreduce="vllm", gemm_dispatch="vllm-0.10.2",
                      request_overhead_s=REQUEST_OVERHEAD_S["vllm"], overlap_schedule=True)
    if name == "vllm-v0":
        return Engine(name, max_batch=256, max_tokens_per_step=None, chunked_prefill=False,
                      mixed_batching=False, block_tokens=16, gpu_memory_utilization=0.9,
                      admission_watermark=0.01,
                      cuda_graph_sizes=vllm_graph_sizes(256), cuda_graph_mode="full_decode",
                      kernel_fusion="add_norm")
    if name == "sglang":
        mib = mem / 2**20
        if mib < 90 * 1024:
            reserved = (9.5 + tp * pp / 2) * GiB
        elif mib < 160 * 1024:
            reserved = (12 + tp * pp / 2) * GiB
        else:
            reserved = 32 * GiB
        graphs = (1, 2, 4, 8) + tuple(range(16, 161, 8))
        if mib > 90 * 1024:
            graphs += tuple(range(168, 257, 8))
        if mib > 160 * 1000:
            graphs += tuple(range(272, 513, 16))
        return Engine(name, max_batch=None, max_tokens_per_step=16384 if mib >= 160 * 1024
                      else 8192, chunked_prefill=True, mixed_batching=False, block_tokens=1,
                      gpu_memory_utilization=round((mem - reserved) / mem, 3),
                      activations_in_reserve=True, admission="sglang",
                      cuda_graph_sizes=graphs, cuda_graph_mode="full_decode",
                      step_overhead_s=SGLANG_STEP_OVERHEAD_S, overlap_schedule=True,
                      kernel_fusion="add_norm", fp8_attention=True, allreduce="sglang",
                      attention_kernel=engine_attention_kernel(hw),
                      request_overhead_s=REQUEST_OVERHEAD_S["sglang"])
    if name == "sglang-0.4.1":
        fraction = next(f for least, f in SGLANG_041_MEM_FRACTION if tp >= least)
        return Engine(name, max_batch=None, max_tokens_per_step=8192, chunked_prefill=True,
                      mixed_batching=False, block_tokens=1, gpu_memory_utilization=fraction,
                      activations_in_reserve=True, admission="sglang",
                      cuda_graph_sizes=(1, 2, 4) + tuple(range(8, 161, 8)),
                      cuda_graph_mode="full_decode", step_overhead_s=SGLANG_STEP_OVERHEAD_S,
                      overlap_schedule=True, kernel_fusion="add_norm", fp8_attention=False,
                      attention_kernel="fa2")
    if name == "trtllm":
        return Engine(name, max_batch=2048, max_tokens_per_step=8192, chunked_prefill=False,
                      mixed_batching=True, block_tokens=32, gpu_memory_utilization=0.9,
                      fraction_of_free=True, reserve_output_fraction=1.0,
                      cuda_graph_sizes=(1, 2, 4) + tuple(range(8, TRTLLM_GRAPH_MAX_BATCH + 1,
                                                               8)),
                      cuda_graph_mode="full_decode", fp8_attention=True,
                      kernel_fusion="trtllm", attention_kernel="trtllm",
                      moe_exchange="deepep", allreduce="trtllm",
                      request_overhead_s=REQUEST_OVERHEAD_S["trtllm"], overlap_schedule=True)
    raise InputError(f"engine: expected one of {', '.join(ENGINES)}, got {name!r}")
