"""Build the op graph of one GPU for a model, phase, batch, lengths, dtype policy and parallelism.

The graph is what one GPU runs for one step (the last pipeline stage, one tensor-parallel rank):
  prefill  B sequences of `seq` tokens, causal attention, logits for the last token of each;
  decode   one new token for each of B sequences against a KV cache of `context` tokens;
  train    forward, backward (dgrad + wgrad per GEMM, attention backward) and the optimizer step
           over B sequences of `seq` tokens.
Parallelism (Megatron-LM conventions, Shoeybi et al. arXiv:1909.08053; Narayanan et al.
arXiv:2104.04473): tensor parallelism splits heads and FFN columns over `tp` GPUs with an
all-reduce after attention and after the FFN (forward and backward); expert parallelism places
experts on `ep` GPUs with all-to-all dispatch and combine; pipeline parallelism gives each GPU
layers/pp layers and splits the batch into microbatches (1F1B: the step takes
microbatches + (pp − 1)/virtual_stages microbatch times, the interleaved schedule's bubble); data
parallelism reduce-scatters gradients and all-gathers parameters (distributed optimizer) over
`dp` GPUs. Each group's collectives are priced on the link it spans (`link: auto`): NVLink inside
one NVLink domain, the network across domains, from where the group sits in rank order
(`group_placements`: TP, then EP, then PP, then DP).
Dtype policy (`units.GEMM_DTYPES`): GEMMs in bf16, fp16, fp8 (per-tensor scaled), mxfp8 or
nvfp4; attention, norms and activations in bf16. In training, low-precision policies add the
quantization kernels of the Transformer Engine recipe of that name (`units.LINEAR_RECIPES`,
`workloads.recipes`). In serving the KV cache may be stored narrower (`kv_dtype`: fp8, nvfp4):
the attention ops read K and V in it.

`build_graph` gives the whole step; `layer_nodes` gives one layer's ops, for studies that
rearrange a block (`studies.dropout`).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass
from typing import Any, Mapping, NamedTuple

from perfmodel.errors import InputError, show
from perfmodel.graph import DEFAULT_STREAM, Node, OpGraph, Pipeline
from perfmodel.workloads.models import ModelSpec
from perfmodel.ops import REGISTRY, Op, op as make_op
from perfmodel.ops.base import ELEMENTS_WHY, GPUS_WHY, MAX_ELEMENTS, MAX_GPUS, bound_text
from perfmodel.ops.deepep import INTERNODE_RANKS, INTRANODE_RANKS
from perfmodel.ops.gemm_dispatch import DISPATCHES as GEMM_DISPATCHES
from perfmodel.ops.moe.op import MOE_KERNELS
from perfmodel.ops.moe.routing import total_replicas
from perfmodel.workloads.recipes import quantize_op
from perfmodel.units import GEMM_DTYPES, LINEAR_RECIPES, bytes_per_element, tensor_dtype

PHASES = ("prefill", "decode", "train")
# KV-cache storage types: the attention op's kv_dtype choices (16-bit, FP8 E4M3, NVFP4)
KV_DTYPES = REGISTRY["attention"].PARAMS["kv_dtype"].choices
# Activation recomputation in training, each with the forward work it repeats before the layer's
# backward (the graph gets those ops):
#   none       nothing (Megatron-Core's TransformerConfig.recompute_granularity = None, the
#              default);
#   selective  Megatron's selective recomputation (Korthikanti et al. arXiv:2205.05198 §5;
#              megatron/core/transformer/attention.py checkpoints `core_attention` when
#              recompute_granularity="selective"): the attention core's forward runs again
#              before its backward;
#   op         torchtitan's per-op selective activation checkpointing (torchtitan/distributed/
#              activation_checkpoint.py, "recomputes every second matmul"): every second linear
#              GEMM of the layer and every non-GEMM forward op (norms, RoPE, activation,
#              residuals) again; attention and communication outputs are saved;
#   full       each layer's whole forward again from its stored input.
RECOMPUTE = ("none", "selective", "op", "full")
# Megatron-Core's selective recomputation by module (Workload.recompute_modules, with recompute
# "selective"; megatron-core 0.16.0 transformer/transformer_config.py recompute_modules, default
# ["core_attn"]). Each module's forward runs again before its backward; what it keeps for the
# backward shrinks to its input (plan.memory.recomputed_bytes_per_token):
#   core_attn       the attention core (attention.py: tensor_parallel.checkpoint of
#                   core_attention; Q, K, V stay as the checkpoint's inputs);
#   layernorm       the input and pre-MLP norms (transformer_layer.py: CheckpointWithoutOutput,
#                   the norm outputs discarded once the GEMMs after them ran);
#   mla_up_proj     MLA's q/kv up-projections with their norms and RoPE
#                   (multi_latent_attention.py: CheckpointWithoutOutput of
#                   qkv_up_proj_and_rope_apply, Q, K, V discarded after the attention);
#   mlp             a dense layer's MLP (transformer_layer.py: tensor_parallel.checkpoint of
#                   self.mlp; `recompute_mlp` only where the layer is not a MoE layer), its
#                   tensor-parallel communication included;
#   moe             a MoE layer's whole MoE block: router, dispatch, experts, combine
#                   (transformer_layer.py / moe_layer.py: checkpoint of the MoE layer);
#   moe_act         the routed experts' activation (moe/experts.py: CheckpointWithoutOutput of
#                   activation_func_with_probs, the FC2 input discarded);
#   shared_experts  the shared experts' MLP (moe/shared_experts.py: checkpoint).
RECOMPUTE_MODULES = ("core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe",
                     "shared_experts")
DEFAULT_RECOMPUTE_MODULES = ("core_attn",)  # TransformerConfig.recompute_modules = None


def recomputed_modules(recompute: str | None, modules) -> frozenset[str]:
    """The modules a layer recomputes: `modules` (None: DEFAULT_RECOMPUTE_MODULES) under
    recompute "selective", none otherwise ("full" and "op" repeat their own forward work)."""
    if recompute != "selective":
        return frozenset()
    return frozenset(DEFAULT_RECOMPUTE_MODULES if modules is None else modules)


def recompute_modules_problem(recompute: str | None, modules, model: ModelSpec) -> str | None:
    """Why `modules` (Workload.recompute_modules) cannot run, None if they can: names from
    RECOMPUTE_MODULES under recompute "selective"; mla_up_proj needs MLA
    (transformer_config.py refuses it without multi_latent_attention)."""
    if modules is None:
        return None
    if isinstance(modules, str) or not isinstance(modules, (tuple, list, frozenset, set)):
        return (f"expected a tuple of module names from {', '.join(RECOMPUTE_MODULES)}, "
                f"got {modules!r}")
    unknown = [m for m in modules if m not in RECOMPUTE_MODULES]
    if unknown:
        return (f"unknown module{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(map(repr, unknown))}: expected names from "
                f"{', '.join(RECOMPUTE_MODULES)}")
    if recompute != "selective":
        return (f"Megatron-Core recomputes modules under recompute='selective' "
                f"(recompute_granularity), got recompute={recompute!r}")
    if "mla_up_proj" in modules and not model.is_mla:
        return f"mla_up_proj needs multi-head latent attention ({model.name} has none)"
    return None
# Kernels a serving engine fuses in each layer (Workload.fusion):
#   none      every op its own kernel (training graphs; a what-if);
#   add_norm  the residual add and the next RMSNorm in one kernel: vLLM's fused_add_rms_norm
#             (vLLM 0.10.1 model_executor/layers/layernorm.py:33-37, RMSNorm called with a
#             residual; models/llama.py:294-303: layer 0's input norm alone, every later input
#             norm and each post-attention norm fused with the residual add), SGLang's
#             sgl-kernel fused_add_rmsnorm;
#   trtllm    add_norm, and the inputs of the attention output projection and the down
#             projection produced already quantized by the kernel before (the attention and
#             the SwiGLU write FP8/FP4): NVIDIA AIConfigurator's model of TensorRT-LLM's Llama
#             step (aiconfigurator-core 0.12.0 sdk/models/llama.py: add_norm_1/2 elementwise
#             ops, `low_precision_input=True` on proj and ffn2), so only the QKV and gate/up
#             linears cast their BF16 input.
FUSIONS = ("none", "add_norm", "trtllm")
# How tokens move to their experts' GPUs (Workload.moe_exchange): NCCL's all-to-all (vLLM's and
# SGLang's default all-to-all backends price as one; Megatron-Core's MoEAlltoAllTokenDispatcher)
# or DeepEP's normal kernels (ops/deepep.py), which TensorRT-LLM's wide-EP MoE runs
# (AIConfigurator's TensorRT-LLM model prices its dispatch and combine from measured DeepEP
# calls: validate/data/aiconfigurator_moe_a2a.csv) and Megatron-Core's flex dispatcher with its
# DeepEP or HybridEP backend (MoEFlexTokenDispatcher: each token crosses the network once per
# destination node, then NVLink; core 0.16.1 transformer/moe/token_dispatcher.py)
MOE_EXCHANGES = ("alltoall", "deepep")
# who picks the tensor-parallel all-reduce (Workload.allreduce): the op's `auto`, or a serving
# engine's own dispatch (perfmodel/ops/custom_allreduce.py ENGINES)
ALLREDUCE_DISPATCH = ("auto", "vllm", "sglang", "trtllm")
# the normal kernels' rank counts: the intranode templates and the internode configs (whole
# 8-GPU nodes over the network), as the op defines them
DEEPEP_RANKS = INTRANODE_RANKS + INTERNODE_RANKS
# the dispatch's wire type by the MoE's GEMM policy: TensorRT-LLM quantizes the tokens before
# the dispatch for its FP8 and NVFP4 experts; BF16 otherwise
DEEPEP_WIRE = {"fp8": "fp8", "nvfp4": "nvfp4"}
ACT = "bf16"          # activations, attention, norms
# Megatron-Core 0.16.1's unfused work around a MoE layer's experts in training, for models whose
# experts clamp their SwiGLU inputs (ModelSpec.swiglu_limit: gpt-oss) or carry biases
# (ModelSpec.expert_bias), as Megatron-Bridge trains gpt-oss (its gpt_oss_provider, 0.3.1:
# add_bias_linear, bias_activation_fusion, activation_func_clamp_value 7.0). Per role: the
# model field that adds it, the tensors read and written per element of the op, in BF16 (the
# router's probabilities are in the activations' type: moe_router_dtype None, router.py), over
# N routed rows per GPU of 2F (clamp) or H (bias) elements, and the torch calls the host makes
# for it (plan.moe_host), per local expert and besides:
#   experts_clamp      fusions/fused_bias_geglu.py weighted_bias_quick_geglu_impl: the input's
#                      two halves clamped (x_glu.clamp(max=v), x_linear.clamp(-v, v)), then
#                      torch.cat before the fused activation: each element read and written
#                      twice; 3 calls;
#   experts_bias       transformer/moe/experts.py TEGroupedMLP._apply_bias (FC2 built with
#                      skip_bias_add=True): per local expert bias * probs and t + that, then
#                      torch.cat: read 3, written 3; 2 calls a local expert + 1;
#   experts_bias_bwd   autograd of it: per local expert the bias's gradient (grad * probs, summed
#                      over the rows) and the probabilities' (grad * bias, summed over H): read 4,
#                      written 2; 4 calls a local expert (the cat's and the add's backward are
#                      views);
#   experts_clamp_bwd  the clamps' backward (grad where the input is inside the bounds: grad and
#                      input read, grad written) and the chunk's (torch.cat of the two halves'
#                      gradients): read 3, written 2; 3 calls.
# Each is one graph op (its bytes; its calls' launches are the host's). The serving engines fuse
# both into their MoE kernels: not added there.


class ExpertExtra(NamedTuple):
    needs: str                # the ModelSpec field that adds the op
    inputs: int               # BF16 tensors read per element
    outputs: int              # BF16 tensors written per element
    calls_per_expert: int     # host calls per local expert
    calls: int                # host calls besides


EXPERT_EXTRAS = {"experts_clamp": ExpertExtra("swiglu_limit", 2, 2, 0, 3),
                 "experts_bias": ExpertExtra("expert_bias", 3, 3, 2, 1),
                 "experts_bias_bwd": ExpertExtra("expert_bias", 4, 2, 4, 0),
                 "experts_clamp_bwd": ExpertExtra("swiglu_limit", 3, 2, 0, 3)}
EXPERT_EXTRAS_FWD = ("experts_clamp", "experts_bias")
ACT_BYTES = 2.0
ADAM_FLOP_PER_PARAM = 12  # two moment updates, bias correction, update (fp32)


# The largest expert capacity factor taken (Workload.moe_capacity_factor): 64 times the
# balanced rows an expert would pad to; any run's factor is near 1 (Megatron-Bridge's token
# drop 1.0), so more is a mistyped input, not a recipe.
MAX_CAPACITY_FACTOR = 64.0


@dataclass(frozen=True)
class Workload:
    phase: str
    batch: int = 1
    seq: int = 2048
    context: int | None = None
    tp: int = 1
    ep: int = 1
    pp: int = 1
    dp: int = 1
    dtype: str = "bf16"
    microbatches: int | None = None
    virtual_stages: int = 1  # interleaved 1F1B: model chunks per GPU (Narayanan et al. §2.2)
    moe_routing: str = "token_balanced"  # MoE decode: token_balanced (EPLB) | metro | optimal
    moe_replication: float = 1.0
    moe_skew: float = 0.0                # Zipf exponent of synthetic expert popularity
    kv_dtype: str | None = None          # K/V cache storage (None: the activation dtype)
    recompute: str | None = None         # train: the forward work recomputed (RECOMPUTE)
    cp: int = 1                          # train: context-parallel ranks sharing each sequence
    # serving with an FP8 KV cache: the attention kernels quantize Q to FP8 and run FP8 MMAs on
    # the cache as stored (TensorRT-LLM's XQA and FP8 context FMHA, vLLM's FlashAttention-3
    # backend) rather than converting each K/V tile to the activation dtype (FlashInfer)
    fp8_attention: bool = False
    # serving: the kernels the engine fuses (FUSIONS); training graphs keep every op apart
    fusion: str = "none"
    # the attention kernel family of GQA attention (ops.attention KERNELS; None: the GPU's
    # default): a serving engine's, or in training the framework's (no "trtllm": forward
    # only); MLA keeps the default family except under TensorRT-LLM's
    attention_kernel: str | None = None
    # MoE routing from recorded expert loads (perfmodel.ops.moe.loads: a path or a shipped
    # name): MoE layer i routes as layer i of the file (DeepSeek's group-limited gate from the
    # model file), with EPLB's placement from the file's statistics when moe_replication > 1
    # (else contiguous); `moe_variation`: the batch-to-batch log-normal sigma of popularity
    moe_loads: str | None = None
    moe_variation: float = 0.0
    # serving with expert parallelism over data-parallel attention (ep > tp): how the engine
    # moves tokens to their experts (MOE_EXCHANGES): NCCL's all-to-all of top_k copies per
    # token, or DeepEP's intranode kernels (the `deepep` op: TensorRT-LLM's wide-EP dispatch)
    moe_exchange: str = "alltoall"
    # serving: who picks the tensor-parallel all-reduce (ALLREDUCE_DISPATCH): "auto", NCCL or
    # the generic one-shot kernel, the faster; or an engine's own dispatch (vllm, sglang,
    # trtllm: its custom kernels where its rules take the message, else NCCL;
    # perfmodel/ops/custom_allreduce.py)
    allreduce: str = "auto"
    # serving: which kernel the linears' GEMMs run (ops.gemm_dispatch): the best the model
    # offers, or an engine's own table by M (vLLM's per-tensor FP8 CUTLASS kernels)
    gemm_dispatch: str = "best"
    # training with a quantized recipe: the (first, last) decoder layers whose linears stay in
    # BF16, Megatron-Core's first_last_layers_bf16 with num_layers_at_start/end_in_bf16
    # (transformer_config.py; off by default, and in Megatron-Bridge's performance recipes; the
    # NVFP4 pretraining paper's 12B model keeps the first 2 and last 8 of 62, arXiv:2509.25149
    # §4)
    bf16_layers: tuple[int, int] = (0, 0)
    # train, recompute "selective": Megatron-Core's recompute_modules (RECOMPUTE_MODULES; None:
    # DEFAULT_RECOMPUTE_MODULES, the attention core)
    recompute_modules: tuple[str, ...] | None = None
    # serving: the expert GEMMs' kernel (ops.moe MOE_KERNELS): the engines' grouped GEMMs,
    # vLLM's Marlin MoE for mixed-input experts (VLLM_MXFP4_USE_MARLIN=1), or the OpenAI Triton
    # experts (vLLM's default for MXFP4 experts on Hopper, TensorRT-LLM's TRITON backend)
    moe_kernel: str = "grouped"
    # train, MoE: Megatron-Core's moe_expert_capacity_factor with
    # moe_pad_expert_input_to_capacity (drop and pad, `_capacity_padding`), in (0,
    # MAX_CAPACITY_FACTOR]; None: dropless
    moe_capacity_factor: float | None = None

    def check(self, model: ModelSpec, names: Mapping[str, str] | None = None) -> None:
        """Refuse a workload this model cannot run: InputError, one line per problem naming the
        field as `names` maps it (the CLI passes its flags: "tp" → "--tp"; default
        "workload: tp")."""
        problems = self.problems(model)
        if problems:
            label = (lambda k: (names or {}).get(k) or f"workload: {k}")
            raise InputError([f"{label(k)}: {msg}" for k, msg in problems])

    def problems(self, model: ModelSpec) -> list[tuple[str, str]]:
        """(field, problem) of every problem of this workload on `model` (`check`)."""
        p: list[tuple[str, str]] = []
        if self.phase not in PHASES:
            p.append(("phase", f"expected one of {', '.join(PHASES)}, got {self.phase!r}"))
        if self.dtype not in GEMM_DTYPES:
            p.append(("dtype", f"expected one of {', '.join(GEMM_DTYPES)}, got {self.dtype!r}"))
        for k, hi, why in (("batch", MAX_ELEMENTS, ELEMENTS_WHY),
                           ("seq", MAX_ELEMENTS, ELEMENTS_WHY),
                           ("context", MAX_ELEMENTS, ELEMENTS_WHY),
                           ("microbatches", MAX_ELEMENTS, ELEMENTS_WHY),
                           ("tp", MAX_GPUS, GPUS_WHY), ("ep", MAX_GPUS, GPUS_WHY),
                           ("pp", MAX_GPUS, GPUS_WHY), ("dp", MAX_GPUS, GPUS_WHY),
                           ("cp", MAX_GPUS, GPUS_WHY),
                           ("virtual_stages", MAX_GPUS, "more model chunks than layers")):
            v = getattr(self, k)
            if v is None and k in ("context", "microbatches"):
                continue
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                p.append((k, f"expected a positive integer, got {show(v)}"))
            elif v > hi:
                p.append((k, f"expected an integer <= {bound_text(hi)} ({why}), got {show(v)}"))
        if self.kv_dtype is not None and self.kv_dtype not in KV_DTYPES:
            p.append(("kv_dtype", f"expected one of {', '.join(KV_DTYPES)}, "
                                  f"got {self.kv_dtype!r}"))
        elif self.kv_dtype is not None and self.phase == "train":
            p.append(("kv_dtype", "training keeps K and V as activations (no KV cache); "
                                  "it applies to prefill and decode"))
        if self.moe_exchange not in MOE_EXCHANGES:
            p.append(("moe_exchange", f"expected one of {', '.join(MOE_EXCHANGES)}, got "
                                      f"{self.moe_exchange!r}"))
        # the serving engine's settings: one of their choices, and their default in training
        for name, choices, default, why in (
                ("fusion", FUSIONS, "none", "kernel fusion is a serving engine's (prefill and "
                                            "decode); training graphs keep every op"),
                ("allreduce", ALLREDUCE_DISPATCH, "auto", "an engine's all-reduce dispatch is a "
                                                          "serving engine's (prefill and decode); "
                                                          "training graphs use auto"),
                ("moe_kernel", MOE_KERNELS, "grouped", "a serving engine's MoE kernel (vLLM's "
                                                       "Marlin or the Triton experts): not for "
                                                       "training"),
                ("gemm_dispatch", GEMM_DISPATCHES, "best", "an engine's GEMM table is a serving "
                                                           "engine's (prefill and decode); "
                                                           "training graphs use best")):
            value = getattr(self, name)
            if value not in choices:
                p.append((name, f"expected one of {', '.join(choices)}, got {value!r}"))
            elif value != default and self.phase == "train":
                p.append((name, why))
        if self.attention_kernel == "trtllm" and self.phase == "train":
            p.append(("attention_kernel", "TensorRT-LLM's attention kernels are inference "
                                          "kernels (forward only): prefill and decode"))
        p += self._bf16_layers_problems(model)
        if not (isinstance(self.moe_replication, (int, float))
                and 1.0 <= self.moe_replication <= 8.0):  # nan fails both comparisons
            p.append(("moe_replication", f"expected a number in [1, 8], got "
                                         f"{show(self.moe_replication)}"))
        elif self.moe_loads is not None:
            p += self._loads_problems(model)
        elif self.moe_variation:
            p.append(("moe_variation", "applies to routing from an expert-loads file "
                                       "(moe_loads)"))
        p += self._capacity_problems(model)
        if self.recompute is not None and self.recompute not in RECOMPUTE:
            p.append(("recompute", f"expected one of {', '.join(RECOMPUTE)}, "
                                   f"got {self.recompute!r}"))
        else:
            why = recompute_modules_problem(self.recompute, self.recompute_modules, model)
            if why:
                p.append(("recompute_modules", why))
        if p:
            return p
        gpus = self.tp * self.pp * self.dp * self.cp
        if gpus > MAX_GPUS:
            p.append(("dp", f"tp x pp x dp{' x cp' if self.cp > 1 else ''} = {gpus} GPUs: "
                            f"expected at most {bound_text(MAX_GPUS)} ({GPUS_WHY})"))
        if self.cp > 1 and self.phase != "train":
            p.append(("cp", "context parallelism applies to training (ring attention over the "
                            "sequence); serving graphs have none"))
        elif self.cp > 1 and model.sliding_window:
            p.append(("cp", "ring attention over a sliding window is not modelled (the "
                            "chunks' masks differ); use cp 1 for a sliding-window model"))
        elif self.cp > 1 and self.seq % (2 * self.cp):
            # TE's load-balanced split: 2·cp chunks, rank r holds chunks r and 2·cp − 1 − r
            p.append(("cp", f"{self.cp} ranks split each sequence into {2 * self.cp} chunks: "
                            f"seq {self.seq} must be a multiple of {2 * self.cp}"))
        # the largest activation tensor of one microbatch: its tokens times the widest layer
        # output (QKV, the gated FFN's gate and up, the MoE dispatch, the logits of the tokens
        # that produce them)
        seqs = self.batch // max(1, self.n_microbatches if self.microbatches is None
                                 or self.microbatches >= 1 else 1)
        tokens = max(1, seqs) * (1 if self.phase == "decode" else self.seq)
        if self.cp > 1 and self.phase == "train":
            tokens = max(1, tokens // self.cp)
        tp = max(1, self.tp)
        widest = max(model.hidden, (model.heads + 2 * model.kv_heads) * model.head_dim // tp,
                     model.ffn_matrices * model.ffn_hidden // tp, model.top_k * model.hidden)
        logits = (tokens if self.phase == "train" else max(1, seqs)) * -(-model.vocab // tp)
        largest = max(tokens * widest, logits)
        if largest > MAX_ELEMENTS:
            what = "batch" if self.phase == "decode" else "batch x seq"
            p.append(("batch", f"{what} = {tokens} tokens per microbatch make an activation "
                               f"tensor of {show(largest)} elements: expected at most "
                               f"{bound_text(MAX_ELEMENTS)} ({ELEMENTS_WHY})"))
        if self.phase != "train":
            kv = self.batch * (self.context or self.seq)
            per = model.kv_heads * (model.head_dim or 1)
            if kv * per > MAX_ELEMENTS:
                p.append(("context" if self.context else "seq",
                          f"a KV cache of {kv} tokens x {per} elements = {show(kv * per)}: "
                          f"expected at most {bound_text(MAX_ELEMENTS)} ({ELEMENTS_WHY})"))
        if model.heads % self.tp:
            p.append(("tp", f"{self.tp} must divide the {model.heads} attention heads"))
        if self.pp > model.layers:
            p.append(("pp", f"{self.pp} stages for {model.layers} layers"))
        if self.ep > 1 and not model.is_moe:
            p.append(("ep", f"{model.name} has no experts to place"))
        if self.ep > 1 and self.ep % self.tp and self.tp % self.ep:
            p.append(("ep", f"{self.ep} and tp: {self.tp} must divide one another"))
        slots = model.experts + self.redundant_experts(model)
        if model.is_moe and slots % self.ep:
            p.append(("ep", f"{self.ep} must divide the {model.experts} experts"
                            + (f" and {slots - model.experts} redundant slots" if
                               slots > model.experts else "")))
        if model.is_moe and model.expert_hidden % self.moe_tp:
            p.append(("tp", f"{self.moe_tp} (tp / ep, each expert's tensor-parallel split) "
                            f"must divide expert_hidden {model.expert_hidden}"))
        if self.ffn_shard(model) and model.ffn_hidden % self.tp:
            p.append(("tp", f"{self.tp} must divide ffn_hidden {model.ffn_hidden}"))
        m = self.n_microbatches
        if self.batch % m:
            p.append(("microbatches", f"{m} must divide the batch {self.batch}"))
        return p

    def _capacity_problems(self, model: ModelSpec) -> list[tuple[str, str]]:
        """moe_capacity_factor: a positive number, for a MoE model's training step routed by
        the capacity alone (no recorded loads)."""
        cf = self.moe_capacity_factor
        if cf is None:
            return []
        if isinstance(cf, bool) or not isinstance(cf, (int, float)) \
                or not 0 < cf <= MAX_CAPACITY_FACTOR:
            return [("moe_capacity_factor", f"expected a number in (0, {MAX_CAPACITY_FACTOR:g}], "
                                            f"got {show(cf)}")]
        if self.phase != "train":
            return [("moe_capacity_factor", "Megatron-Core's token dropping applies to "
                                            "training steps")]
        if not model.experts:
            return [("moe_capacity_factor", f"applies to MoE models; {model.name} has no "
                                            f"experts")]
        if self.moe_loads is not None:
            return [("moe_capacity_factor", "a padded capacity fixes every expert's rows; "
                                            "recorded loads (moe_loads) do not apply")]
        return []

    def _bf16_layers_problems(self, model: ModelSpec) -> list[tuple[str, str]]:
        v = self.bf16_layers
        if (not isinstance(v, tuple) or len(v) != 2
                or any(isinstance(x, bool) or not isinstance(x, int) or x < 0 for x in v)):
            return [("bf16_layers", f"expected two non-negative integers (first, last), got "
                                    f"{show(v)}")]
        if sum(v) == 0:
            return []
        if self.phase != "train" or not LINEAR_RECIPES[self.dtype].quantized:
            return [("bf16_layers", f"keeps layers of a quantized training recipe in BF16; "
                                    f"this is {self.phase} in {self.dtype}")]
        if sum(v) > model.layers:
            return [("bf16_layers", f"{v[0]} + {v[1]} layers kept in BF16, but {model.name} has "
                                    f"{model.layers}")]
        return []

    def _loads_problems(self, model: ModelSpec) -> list[tuple[str, str]]:
        """An expert-loads file must match the model: one row per layer, routed tokens in
        exactly its MoE layers, one count per routed expert."""
        from perfmodel.ops.moe.loads import load_expert_loads
        if not model.is_moe:
            return [("moe_loads", f"{model.name} has no experts to route")]
        if not (math.isfinite(self.moe_variation) and 0 <= self.moe_variation <= 4):
            return [("moe_variation", f"expected a number in [0, 4], got "
                                      f"{show(self.moe_variation)}")]
        loads = load_expert_loads(self.moe_loads)  # its own one-line errors name the file
        if loads.experts != model.experts:
            return [("moe_loads", f"{loads.path}: {loads.experts} expert counts per layer, "
                                  f"but {model.name} has {model.experts} routed experts")]
        moe = [i for i in range(model.layers) if model.is_moe_layer(i)]
        if loads.layers != model.layers or loads.moe_layers != moe:
            return [("moe_loads", f"{loads.path}: {loads.layers} layers with routed tokens in "
                                  f"{len(loads.moe_layers)}, but {model.name} has "
                                  f"{model.layers} layers, MoE from layer {moe[0]}")]
        return []

    def warnings(self, given: "set[str] | None" = None) -> list[tuple[str, str]]:
        """(field, note) for options that do not apply to this workload and change nothing:
        data parallelism outside training, a KV-cache length outside decode, interleaved
        stages without a pipeline. `given`: the fields the user set (default: those that differ
        from their defaults)."""
        if given is None:
            given = {f.name for f in dataclasses.fields(self)
                     if getattr(self, f.name) != f.default}
        out = []
        if "dp" in given and self.phase != "train" and self.dp != 1:
            out.append(("dp", f"data parallelism applies to training; a {self.phase} step of "
                              f"one replica is predicted (replicas do not change it)"))
        if "context" in given and self.context is not None and self.phase != "decode":
            out.append(("context", f"the KV-cache length applies to decode; {self.phase} "
                                   f"uses seq"))
        if "virtual_stages" in given and self.virtual_stages > 1 and self.pp == 1:
            out.append(("virtual_stages", f"{self.virtual_stages} interleaved stages need "
                                          f"pipeline parallelism (pp > 1); ignored"))
        return out

    def redundant_experts(self, model: ModelSpec) -> int:
        """EPLB's redundant expert slots: (moe_replication − 1)·experts with recorded loads
        (the moe op's rounding, `routing.total_replicas`), none otherwise (synthetic routing
        places the replicas of `moe_replication` on the experts' own GPUs' slots)."""
        if self.moe_loads is None or not model.is_moe:
            return 0
        return total_replicas(model.experts, self.moe_replication) - model.experts

    @property
    def moe_tp(self) -> int:
        """GPUs each routed expert's FFN is split over: tp with ep = 1, tp / ep when
        1 < ep < tp (TensorRT-LLM's hybrid MoE parallelism, moe_tensor_parallel_size ×
        moe_expert_parallel_size = tp_size), 1 with ep ≥ tp."""
        return max(1, self.tp // self.ep)

    @property
    def moe_all_to_all(self) -> bool:
        """Tokens move to their experts' GPUs, or every GPU already holds every token and one
        all-reduce sums the experts' partial outputs.

        Training (Megatron-Core) runs MoE with sequence parallelism, so with ep >= tp each rank
        holds t/tp tokens and dispatches them (MoEAlltoAllTokenDispatcher): an all-to-all.
        Serving with ep <= tp has no sequence parallelism: after the attention all-reduce every
        rank of the TP group holds all tokens, computes the tokens routed to its own experts (or
        expert slices, 1 < ep < tp) and the TP all-reduce sums the outputs: TensorRT-LLM's
        MoE without attention DP (modules/fused_moe, reduce_results over the TP group), vLLM's
        FusedMoE with expert parallelism and no data parallelism (an all-reduce after the
        experts), SGLang without an all-to-all backend. Serving only dispatches when ep > tp:
        data-parallel attention, ep/tp attention replicas sending their own tokens."""
        if self.ep <= 1:
            return False
        return self.ep >= self.tp if self.phase == "train" else self.ep > self.tp

    def ffn_shard(self, model: ModelSpec) -> bool:
        return not model.is_moe or model.dense_layers > 0

    @property
    def n_microbatches(self) -> int:
        if self.microbatches:
            return self.microbatches
        if self.pp == 1:
            return 1
        # enough microbatches to keep the bubble small, as many as the batch allows
        return max(d for d in range(1, min(self.batch, 4 * self.pp) + 1) if self.batch % d == 0)


# ops built by _GraphWriter.add, by (kind, parameters): ops are not changed after construction,
# so graphs share them; cleared when full
BUILT_OPS = 1 << 14
_BUILT: dict[tuple, Op] = {}


class _GraphWriter:
    """Appends ops in order; identical ops share one object so the scheduler predicts once."""

    def __init__(self):
        self.nodes: list[Node] = []
        self._ops: dict[tuple, Op] = {}
        self._templates: dict[object, list[tuple[str, Op, str]]] = {}

    def layer(self, prefix: str, kind: object, build) -> None:
        """Add one layer's ops: built once per layer kind, then replayed under new names
        (every layer of a kind is the same op sequence). A replayed op keeps its dependencies
        inside the layer (a context-parallel KV transfer on its own stream beside the attention
        it feeds); a dependency on an op before the layer becomes the op just before the
        replayed layer. A layer of one chain (every op after the previous one) replays as
        that chain."""
        template = self._templates.get(kind)
        if template is None:
            start = len(self.nodes)
            build(prefix)
            inside = {n.name for n in self.nodes[start:]}
            self._templates[kind] = [
                (n.name[len(prefix):], n.op, n.stream,
                 tuple(a[len(prefix):] if a in inside else None for a in n.after))
                for n in self.nodes[start:]]
            return
        prev = self.nodes[-1].name if self.nodes else None
        append = self.nodes.append
        for suffix, o, stream, deps in template:
            if len(deps) == 1 and deps[0] is not None:  # the common case: one dependency inside
                append(Node(prefix + suffix, o, (prefix + deps[0],), stream))
                continue
            after: list[str] = []
            for a in deps:
                dep = prefix + a if a is not None else prev
                if dep is not None and dep not in after:
                    after.append(dep)
            append(Node(prefix + suffix, o, tuple(after), stream))

    def add(self, name: str, kind: str, after: list[str] | None = None,
            stream: str = DEFAULT_STREAM, **params: Any) -> str:
        key = (kind, tuple(sorted(params.items())))
        o = self._ops.get(key)
        if o is None:
            # one object per distinct op across graphs too (_BUILT): the serving simulator
            # builds a graph's ops at every token count it prices, most of them seen before
            o = _BUILT.get(key)
            if o is None:
                if len(_BUILT) >= BUILT_OPS:
                    _BUILT.clear()
                o = _BUILT[key] = make_op(kind, **params)
            self._ops[key] = o
        return self.add_op(name, o, after, stream)

    def add_op(self, name: str, o: Op, after: list[str] | None = None,
               stream: str = DEFAULT_STREAM) -> str:
        """Append an op object already built (e.g. by `perfmodel.workloads.recipes`)."""
        o = self._ops.setdefault(("op", o), o)  # one object per distinct op
        if after is None:
            after = [self.nodes[-1].name] if self.nodes else []
        self.nodes.append(Node(name, o, tuple(after), stream))
        return name


class _LayerBuilder:
    """Forward and backward ops of one transformer layer on one GPU."""

    def __init__(self, model: ModelSpec, w: Workload, out: _GraphWriter, tokens: int,
                 seqs: int):
        self.m, self.w, self.g = model, w, out
        self.t, self.b = tokens, seqs
        self.tp = w.tp
        self.gemms: list[tuple[str, int, int]] = []  # (name, n, k) of this layer, for backward
        # the context-parallel ring: cp ranks tp apart (rank order TP, CP, ...: group_placements)
        self.cp_placement = f"{w.cp}x{w.tp}"

    # -- helpers ------------------------------------------------------------------------------
    def gemm(self, name: str, n: int, k: int, dtype: str | None = None, batch: int = 1,
             quantized_input: bool = False):
        """A linear layer; `quantized_input`: its activation arrives already in the GEMM's type
        (an engine that fuses the cast into the kernel before: Workload.fusion trtllm)."""
        d = dtype or self.w.dtype
        if self.w.phase == "train" and LINEAR_RECIPES[d].quantized:
            # TE recipe (workloads.recipes): the activation (rowwise + columnwise for Wgrad) and
            # the weight are quantized on the fly in every forward
            self.g.add_op(f"{name}.quant_x", quantize_op(d, self.t * batch, k, "activation"))
            self.g.add_op(f"{name}.quant_w", quantize_op(d, k, n * batch, "weight"))
        if self.w.phase != "train" and LINEAR_RECIPES[d].quantized and batch == 1:
            # serving: the weights are stored quantized; the BF16 activation is cast in a kernel
            # of its own before the GEMM (ops.linear: TensorRT-LLM's and vLLM's FP8/NVFP4
            # linear methods; fusion of the cast into the norm before is not modelled)
            self.g.add(name, "linear", m=self.t, n=n, k=k, dtype=d,
                       **({"quantize_input": False} if quantized_input else {}),
                       **({"fp8_scaling": "block"} if self._block_fp8(d) else {}),
                       **({"dispatch": self.w.gemm_dispatch}
                          if self.w.gemm_dispatch != "best" else {}))
        else:
            self.g.add(name, "gemm", m=self.t, n=n, k=k, dtype=d, batch=batch)
        self.gemms.append((name, n, k, d, batch))

    def _block_fp8(self, dtype: str) -> bool:
        """Serving an FP8 checkpoint stored with block scales (ModelSpec.fp8_weight_block:
        DeepSeek-V3/R1): its linears and experts run block-scaled FP8 GEMMs."""
        return (self.w.phase != "train" and dtype == "fp8"
                and bool(self.m.fp8_weight_block))

    def allreduce(self, name: str):
        if self.tp > 1:
            # serving engines and Megatron pick the all-reduce algorithm by message size
            # (an engine's dispatch: Workload.allreduce; priced as replayed from a CUDA graph,
            # its buffers registered, the op's default mode)
            self.g.add(name, "allreduce", bytes=float(self.t * self.m.hidden * ACT_BYTES),
                       gpus=self.tp, algorithm=self.w.allreduce)

    def elementwise(self, name: str, elements: int, **kw):
        self.g.add(name, "elementwise", elements=elements, dtype=ACT, **kw)

    # -- forward ------------------------------------------------------------------------------
    def forward(self, p: str, layer: int):
        m, h = self.m, self.m.hidden
        # fused add + norm (Workload.fusion): each norm takes the residual add before it, the
        # previous layer's FFN residual at the input norm (layer 0 adds the embedding: one
        # tensor read more than vLLM's first layer, which skips it) and the attention
        # residual at the FFN norm; the last layer's FFN residual goes to the final norm
        fused = self.w.fusion != "none"
        norm = dict(rows=self.t, cols=h, dtype=ACT, **({"residual": True} if fused else {}))
        self.g.add(f"{p}attn_norm", "norm", **norm)
        if m.is_mla:
            self._mla(p)
        else:
            self._gqa(p, layer)
        self.allreduce(f"{p}attn_allreduce")
        if not fused:
            self.elementwise(f"{p}attn_residual", self.t * h, inputs=2)
        self.g.add(f"{p}ffn_norm", "norm", **norm)
        if m.is_moe_layer(layer):
            self._moe(p, layer)
        else:
            f = m.ffn_hidden // self.tp
            gated = m.ffn_matrices == 3
            self.gemm(f"{p}gate_up", n=(2 if gated else 1) * f, k=h)
            # SiLU(gate)·up: sigmoid's exp on the XU, a few FMAs
            self.elementwise(f"{p}act", self.t * f, inputs=2 if gated else 1,
                             flop_per_element=4, xu_per_element=1)
            self.gemm(f"{p}down", n=h, k=f, quantized_input=self.w.fusion == "trtllm")
            self.allreduce(f"{p}ffn_allreduce")
        if not fused:
            self.elementwise(f"{p}ffn_residual", self.t * h, inputs=2)

    @property
    def fp8_attention(self) -> bool:
        """Serving runs the attention's MMAs in FP8 on an FP8 cache (Workload.fp8_attention)."""
        return (self.w.kv_dtype is not None and self.w.fp8_attention
                and tensor_dtype(self.w.kv_dtype) == "fp8")

    def _attention(self, p: str, direction: str = "fwd", **shape):
        if self.w.attention_kernel is not None and (not shape.get("shared_kv")
                                                    or self.w.attention_kernel == "trtllm"):
            # the engine's or framework's GQA kernels; TensorRT-LLM's family also runs MLA's
            # latent-cache generation (trtllm-gen's MLA kernels on tcgen05: ops/attention/
            # trtllm.py)
            shape = dict(shape, kernel=self.w.attention_kernel)
        if self.w.cp > 1:
            return self._ring_attention(p, direction, **shape)
        decode = self.w.phase == "decode"
        seq_q = 1 if decode else self.w.seq
        seq_kv = (self.w.context or self.w.seq) if decode else self.w.seq
        if decode and shape.get("window"):
            # a sliding-window layer's query reads only the window's last keys: the cache
            # keeps just those (ModelSpec.kv_tokens) and a paged decode kernel starts at the
            # window's first block (FlashAttention's window_size, FlashInfer's
            # window_left), so the op's keys are the window's
            seq_kv = min(seq_kv, shape["window"])
        dtype = ACT
        if self.w.kv_dtype is not None:  # serving: K and V read from the cache in kv_dtype
            if self.fp8_attention:
                dtype = "fp8"  # Q quantized, FP8 MMAs on the cache (Workload.fp8_attention)
            else:
                shape = dict(shape, kv_dtype=self.w.kv_dtype)
        self.g.add(f"{p}attn" if direction == "fwd" else f"{p}attn_bwd", "attention",
                   batch=self.b, seq_q=seq_q, seq_kv=seq_kv, dtype=dtype, causal=not decode,
                   direction=direction, **shape)

    def _ring_attention(self, p: str, direction: str, **shape):
        """Context parallelism as Transformer Engine runs it (AttnFuncWithCPAndKVP2P,
        transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py): each
        sequence is cut into 2·cp chunks and rank r holds chunks r and 2·cp − 1 − r (the
        load-balanced DUAL_CHUNK_SWAP split), so every rank does 1/cp of the causal work. The
        attention runs in cp steps: step 0 is the rank's own queries against its own keys
        (causal); each later step is its queries against half of a received KV block (the
        other half is masked), s/cp × s/(2·cp) unmasked. While step i computes, the ring
        passes the KV block of step i + 1 to the next rank on a stream of its own (the
        forward sends K and V; the backward K, V and the accumulated dK, dV: twice the bytes),
        so a transfer is hidden unless it is longer than the step it overlaps. After the last
        backward step the accumulated dK, dV travel one more hop to their owner (exposed)."""
        w = self.w
        sq = w.seq // w.cp
        kv_heads, head_dim = shape["kv_heads"], shape["head_dim"]
        head_dim_v = shape.get("head_dim_v") or head_dim
        block = float(self.b * sq * kv_heads * (head_dim + head_dim_v) * ACT_BYTES)
        block *= 2 if direction == "bwd" else 1
        name = f"{p}attn" if direction == "fwd" else f"{p}attn_bwd"
        before = self.g.nodes[-1].name if self.g.nodes else None
        ring, step, prev_send = before, None, None
        for i in range(w.cp):
            send = None
            if i < w.cp - 1:  # the next step's block, in flight while this step computes
                send = self.g.add(f"{name}.cp_send{i}", "sendrecv", bytes=block,
                                  placement=self.cp_placement, stream="cp",
                                  after=[ring] if ring else [])
                ring = send
            after = [step, prev_send] if step else ([before] if before else [])
            kv = sq if i == 0 else sq // 2
            step = self.g.add(f"{name}.cp{i}", "attention", after=after, batch=self.b,
                              seq_q=sq, seq_kv=kv, dtype=ACT, causal=i == 0,
                              direction=direction, **shape)
            prev_send = send
        if direction == "bwd":
            self.g.add(f"{name}.cp_dkv_home", "sendrecv", bytes=block / 2,
                       placement=self.cp_placement)

    def _gqa(self, p: str, layer: int = 0):
        m, h = self.m, self.m.hidden
        hq, hkv = m.heads // self.tp, max(1, m.kv_heads // self.tp)
        self.gemm(f"{p}qkv", n=(hq + 2 * hkv) * m.head_dim, k=h)
        self.elementwise(f"{p}rope", self.t * (hq + hkv) * m.head_dim, flop_per_element=3)
        if self.w.phase in ("prefill", "decode") and self.w.fusion != "trtllm":
            self._cache_append(p, hq, hkv)
        window = m.window(layer)  # sliding-window layers (ModelSpec.window)
        self.attn_shape = dict(heads=hq, kv_heads=hkv, head_dim=m.head_dim,
                               **({"window": window} if window else {}))
        self._attention(p, **self.attn_shape)
        self.gemm(f"{p}o_proj", n=h, k=hq * m.head_dim,
                  quantized_input=self.w.fusion == "trtllm")

    def _cache_append(self, p: str, hq: int, hkv: int):
        """The engine's cache append and query cast (cache_append_nodes) after this layer's
        RoPE."""
        for role, kind, params in cache_append_nodes(
                self.t, hq, hkv, self.m.head_dim,
                self.fp8_attention and self.w.attention_kernel != "trtllm"):
            self.g.add(f"{p}{role}", kind, **params)

    def _mla(self, p: str):
        """DeepSeek-V2/V3 multi-head latent attention (arXiv:2405.04434 §2.1); decode uses the
        weight-absorbed form over the 576-wide latent cache (FlashMLA)."""
        m, h = self.m, self.m.hidden
        hq = m.heads // self.tp
        rope, nope, v = m.qk_rope_head_dim, m.qk_nope_head_dim, m.v_head_dim
        self.gemm(f"{p}q_a", n=m.q_lora_rank, k=h)
        self.g.add(f"{p}q_norm", "norm", rows=self.t, cols=m.q_lora_rank, dtype=ACT)
        self.gemm(f"{p}q_b", n=hq * (nope + rope), k=m.q_lora_rank)
        self.gemm(f"{p}kv_a", n=m.kv_lora_rank + rope, k=h)
        self.g.add(f"{p}kv_norm", "norm", rows=self.t, cols=m.kv_lora_rank, dtype=ACT)
        if self.w.phase == "decode" and self.fp8_attention:
            # FP8 MMAs take Q in FP8: the preprocessing kernel (TensorRT-LLM's
            # mla_rope_generation) reads the whole absorbed query (latent + rotary dims) and
            # writes it in FP8, besides rotating the rotary dims: one kernel streaming it
            self.g.add(f"{p}rope", "quantize", rows=self.t * hq, cols=m.kv_lora_rank + rope,
                       to="fp8")
        else:
            self.elementwise(f"{p}rope", self.t * (hq + 1) * rope, flop_per_element=3)
        if self.w.phase == "decode":
            self.gemm(f"{p}q_absorb", n=m.kv_lora_rank, k=nope, dtype=ACT, batch=hq)
            self.attn_shape = dict(heads=hq, kv_heads=1, head_dim=m.kv_lora_rank + rope,
                                   head_dim_v=m.kv_lora_rank, shared_kv=True)
            self._attention(p, **self.attn_shape)
            self.gemm(f"{p}v_up", n=v, k=m.kv_lora_rank, dtype=ACT, batch=hq)
        else:
            self.gemm(f"{p}kv_b", n=hq * (nope + v), k=m.kv_lora_rank)
            self.attn_shape = dict(heads=hq, kv_heads=hq, head_dim=nope + rope, head_dim_v=v)
            self._attention(p, **self.attn_shape)
        self.gemm(f"{p}o_proj", n=h, k=hq * v, quantized_input=self.w.fusion == "trtllm")

    def _moe(self, p: str, layer: int):
        m, h, w = self.m, self.m.hidden, self.w
        self.g.add(f"{p}router", "gemm", m=self.t, n=m.experts, k=h, dtype=ACT)
        self.g.add(f"{p}topk", "softmax", rows=self.t, cols=m.experts, dtype="fp32")
        eh = m.expert_hidden // w.moe_tp
        # expert parallelism with data-parallel attention: the ep/tp attention replicas each
        # route their own tokens to the shared pool of experts
        moe = dict(tokens=self.t * max(1, w.ep // self.tp), experts=m.experts, top_k=m.top_k,
                   hidden=h, expert_hidden=eh, dtype=w.dtype, gpus=w.ep, shared_experts=m.shared_experts,
                   routing=w.moe_routing, replication=w.moe_replication, skew=w.moe_skew)
        weights = expert_weight_dtype(m, w.dtype, w.phase)
        if weights != w.dtype:  # stored narrower (gpt-oss's MXFP4 experts), MMAs in w.dtype
            moe["weight_dtype"] = weights
            if w.moe_kernel != "grouped":
                moe["kernel"] = w.moe_kernel
        elif self._block_fp8(w.dtype):
            moe["fp8_scaling"] = "block"
            if w.fusion == "trtllm":  # TensorRT-LLM's runner quantizes in its own kernels
                moe["fp8_block_quant"] = "trtllm"
        a2a = self.dispatch_bytes
        if w.moe_capacity_factor is not None:
            pad = self._capacity_padding()
            moe.update(tokens=moe["tokens"] * pad, skew=0.0)
            a2a *= pad
        if w.moe_loads is not None:  # this layer of the recorded loads, the model's gate
            groups, group_top_k = m.group_limit
            del moe["skew"]
            moe.update(loads=w.moe_loads, layer=layer, expert_groups=groups,
                       group_top_k=group_top_k, variation=w.moe_variation)
            if w.moe_all_to_all:
                a2a *= _receive_imbalance(make_op("moe", **moe))
        deepep_call = self._deepep_call() if w.moe_all_to_all else None
        if deepep_call is not None:
            # TensorRT-LLM quantizes before its dispatch; Megatron-Core's flex dispatcher sends
            # the BF16 hidden states and its experts quantize them after (TEGroupedMLP)
            wire = DEEPEP_WIRE.get(w.dtype, "bf16") if w.phase != "train" else "bf16"
            self.g.add(f"{p}dispatch", "deepep", phase="dispatch", dtype=wire, **deepep_call)
        elif w.moe_all_to_all:
            self.g.add(f"{p}dispatch", "alltoall", bytes=a2a, gpus=w.ep)
        self.moe_params = moe
        self.g.add(f"{p}experts", "moe", **moe)
        if w.phase == "train":
            self._expert_extras(p, EXPERT_EXTRAS_FWD)
        if deepep_call is not None:  # the normal combine sends BF16
            self.g.add(f"{p}combine", "deepep", phase="combine", dtype="bf16", **deepep_call)
        elif w.moe_all_to_all:
            self.g.add(f"{p}combine", "alltoall", bytes=a2a, gpus=w.ep)
        else:
            self.allreduce(f"{p}ffn_allreduce")

    def _capacity_padding(self) -> float:
        """The rows a padded expert computes over the rows balanced routing gives it
        (Workload.moe_capacity_factor). Megatron-Core's drop-and-pad dispatch
        (megatron-core 0.14.0 transformer/moe/token_dispatcher.py MoEAlltoAllTokenDispatcher.
        preprocess, `drop_and_pad`) sends each expert exactly `capacity` tokens from every
        rank, capacity = ceil(local tokens · top_k / experts · factor) (moe_utils.py
        get_capacity), the local tokens being the rank's t/tp under sequence parallelism
        (dispatch_bytes): tokens over it are dropped, the shortfall is padding the experts
        compute and the all-to-all carries. So every expert's rows are the same, whatever the
        router does: the balanced rows times this ratio (1 where the capacity divides
        evenly)."""
        m, w = self.m, self.w
        local = self.t / self.tp
        capacity = math.ceil(local * m.top_k / m.experts * w.moe_capacity_factor)
        return capacity * m.experts / (local * m.top_k)

    def _expert_extras(self, p: str, roles: tuple[str, ...]):
        """The ops of `roles` (EXPERT_EXTRAS) that this model's experts need in a training graph:
        Megatron-Core's unfused work around TEGroupedMLP's grouped GEMMs (module notes at
        EXPERT_EXTRAS), over the GPU's routed rows N = t·top_k/tp (as _recompute_experts) of
        F = expert_hidden/moe_tp (the gated activation's two halves) or the hidden size H."""
        m = self.m
        rows = max(1, self.t * m.top_k // self.tp)
        for role in roles:
            extra = EXPERT_EXTRAS[role]
            if not getattr(m, extra.needs):
                continue
            cols = (2 * (m.expert_hidden // self.w.moe_tp) if extra.needs == "swiglu_limit"
                    else m.hidden)
            self.elementwise(f"{p}{role}", rows * cols, inputs=extra.inputs,
                             outputs=extra.outputs)

    def _deepep_call(self) -> dict | None:
        """The `deepep` op's shape for this layer's exchange where the workload asks for DeepEP
        and its normal kernels run the group: 2, 4 or 8 ranks (the intranode kernels' rank
        templates) or 16-160 (the internode kernels over 8-GPU nodes; ops/deepep.py); None:
        the all-to-all prices it. Each rank dispatches its attention replica's tokens once per
        destination rank (and, across nodes, once per destination node), the experts drawn
        uniformly within the gate's group limit (the op's ranks_per_token and nodes_per_token;
        recorded loads' imbalance is not carried)."""
        w, m = self.w, self.m
        if w.moe_exchange != "deepep" or w.ep not in DEEPEP_RANKS:
            return None
        # training: each TP rank dispatches its sequence-parallel share (dispatch_bytes)
        tokens = self.t // self.tp if w.phase == "train" else self.t
        call = dict(tokens=max(1, int(tokens)), hidden=m.hidden, top_k=m.top_k,
                    experts=m.experts, ep=w.ep, mode="normal")
        groups, group_top_k = m.group_limit
        if w.ep in INTERNODE_RANKS and group_top_k is not None and groups > 1:
            call.update(expert_groups=groups, group_top_k=group_top_k)
        return call

    @property
    def dispatch_bytes(self) -> float:
        """Bytes one GPU sends in a MoE dispatch (and its combine): top_k copies of each of its
        tokens. In training with tensor parallelism Megatron-Core runs MoE with sequence
        parallelism (megatron/core/transformer/moe/moe_layer.py, core 0.16.1, line 379 refuses
        TP without it), so each TP rank permutes and dispatches only its t/tp tokens
        (token_dispatcher.py, MoEAlltoAllTokenDispatcher.dispatch_preprocess / token_dispatch:
        the local hidden_states, all-to-all over the EP group)."""
        tokens = self.t / self.tp if self.w.phase == "train" else self.t
        return float(tokens * self.m.top_k * self.m.hidden * ACT_BYTES)

    def recompute_op(self, p: str, layer: int):
        """torchtitan's per-op SAC (RECOMPUTE "op"): the layer's forward again without its
        attention, its communication and every second linear GEMM (those outputs are saved);
        quantization kernels go with the GEMM they feed."""
        scratch = _GraphWriter()
        saved = (self.g, self.gemms)
        self.g, self.gemms = scratch, []
        try:
            self.forward(p, layer)
        finally:
            self.g, self.gemms = saved
        # torchtitan counts the matmuls from 1 and recomputes the even ones (count % 2 == 0)
        gemm_ops = [n for n in scratch.nodes if n.op.name == "gemm"]
        again = {n.name for k, n in enumerate(gemm_ops, start=1) if k % 2 == 0}
        for n in scratch.nodes:
            kind = n.op.name
            if kind in ("attention", "moe", "allreduce", "alltoall", "allgather",
                        "reduce_scatter", "sendrecv"):
                continue
            base = n.name.split(".quant_", 1)[0]
            if (kind == "gemm" or ".quant_" in n.name) and base not in again:
                continue
            self.g.add_op(n.name, n.op)

    # roles of the forward ops (names after the layer prefix, quantization kernels with their
    # GEMM) each Megatron-Core module re-runs (RECOMPUTE_MODULES); moe_act and shared_experts
    # are priced apart (_recompute_experts): the `moe` op holds them inside
    MODULE_ROLES = {"layernorm": ("attn_norm", "ffn_norm"),
                    "mla_up_proj": ("q_norm", "q_b", "kv_norm", "kv_b", "rope"),
                    "mlp": ("gate_up", "act", "down", "ffn_allreduce"),
                    "moe": ("router", "topk", "dispatch", "experts", *EXPERT_EXTRAS_FWD,
                            "combine", "ffn_allreduce")}

    def _recompute_roles(self, p: str, layer: int, roles: set[str]):
        """The layer's forward ops of `roles` again (named {p}recompute.<role>), in forward
        order: the forward is written to a scratch graph and the roles' ops copied."""
        if not roles:
            return
        scratch = _GraphWriter()
        saved = (self.g, self.gemms)
        self.g, self.gemms = scratch, []
        q = f"{p}recompute."
        try:
            self.forward(q, layer)
        finally:
            self.g, self.gemms = saved
        for n in scratch.nodes:
            if n.name[len(q):].split(".quant_", 1)[0] in roles:
                self.g.add_op(n.name, n.op)

    def _recompute_experts(self, p: str, modules: frozenset[str]):
        """moe_act: the routed experts' activation again over the GPU's routed rows (t·top_k/tp
        rows of expert_hidden/moe_tp with sequence parallelism: plan.memory's count), SwiGLU as
        the dense `act`; shared_experts: the shared experts' MLP again, a dense FFN of
        shared_experts·expert_hidden split over tp (its communication is not repeated)."""
        m, h = self.m, self.m.hidden
        gated = m.ffn_matrices == 3
        if "moe_act" in modules:
            self.elementwise(f"{p}recompute.experts_act",
                             max(1, self.t * m.top_k * m.expert_hidden // self.tp),
                             inputs=2 if gated else 1, flop_per_element=4, xu_per_element=1)
            # the clamp is inside the checkpointed activation (experts.py bias_act_func)
            self._expert_extras(f"{p}recompute.", ("experts_clamp",))
        se = m.shared_experts * m.expert_hidden // self.tp
        if "shared_experts" in modules and se:
            kept = len(self.gemms)
            self.gemm(f"{p}recompute.shared_gate_up", n=(2 if gated else 1) * se, k=h)
            self.elementwise(f"{p}recompute.shared_act", self.t * se, inputs=2 if gated else 1,
                             flop_per_element=4, xu_per_element=1)
            self.gemm(f"{p}recompute.shared_down", n=h, k=se)
            del self.gemms[kept:]  # forward work only: the backward's GEMM list is the layer's

    # -- backward -----------------------------------------------------------------------------
    def backward(self, p: str, layer: int):
        """Reverse order: per GEMM a dgrad (dX = dY·Wᵀ) and a wgrad (dW = Xᵀ·dY) GEMM. Under
        selective recomputation each module's forward runs again before its backward
        (RECOMPUTE_MODULES)."""
        m, h = self.m, self.m.hidden
        modules = recomputed_modules(self.w.recompute, self.w.recompute_modules)
        moe_layer = m.is_moe_layer(layer)
        ffn_roles = {"ffn_norm"} if "layernorm" in modules else set()
        if "mlp" in modules and not moe_layer:  # recompute_mlp: dense layers only
            ffn_roles |= set(self.MODULE_ROLES["mlp"])
        if "moe" in modules and moe_layer:
            ffn_roles |= set(self.MODULE_ROLES["moe"])
        self._recompute_roles(p, layer, ffn_roles)
        if moe_layer and "moe" not in modules:
            self._recompute_experts(p, modules)
        self.elementwise(f"{p}ffn_residual_bwd", self.t * h, inputs=2)
        ffn = [g for g in self.gemms if g[0].endswith(("gate_up", "down"))]
        attn = [g for g in self.gemms if g not in ffn]
        if m.is_moe_layer(layer):
            # the exchanges run backward: the combine's gradient is sent out to the experts as
            # a dispatch is, the dispatch's summed back as a combine is, both in BF16
            deepep_call = self._deepep_call() if self.w.moe_all_to_all else None
            if deepep_call is not None:
                self.g.add(f"{p}combine_bwd", "deepep", phase="dispatch", dtype="bf16",
                           **deepep_call)
            elif self.w.moe_all_to_all:
                self.g.add(f"{p}combine_bwd", "alltoall", bytes=self.dispatch_bytes,
                           gpus=self.w.ep)
            # expert dgrad and wgrad: each the FLOP and weight traffic of the forward pass; the
            # down-projection bias's gradients before them, the clamp's between the activation's
            # backward and FC1's dgrad (inside experts_dgrad: after it here)
            self._expert_extras(p, ("experts_bias_bwd",))
            self.g.add(f"{p}experts_dgrad", "moe", **self.moe_params)
            self._expert_extras(p, ("experts_clamp_bwd",))
            self.g.add(f"{p}experts_wgrad", "moe", **self.moe_params)
            if deepep_call is not None:
                self.g.add(f"{p}dispatch_bwd", "deepep", phase="combine", dtype="bf16",
                           **deepep_call)
            elif self.w.moe_all_to_all:
                self.g.add(f"{p}dispatch_bwd", "alltoall", bytes=self.dispatch_bytes,
                           gpus=self.w.ep)
        else:
            self._gemm_bwd(ffn[1:], p)
            self.elementwise(f"{p}act_bwd", self.t * (m.ffn_hidden // self.tp), inputs=3,
                             outputs=2, flop_per_element=8, xu_per_element=1)
            self._gemm_bwd(ffn[:1], p)
            self.allreduce(f"{p}ffn_allreduce_bwd")
        self.g.add(f"{p}ffn_norm_bwd", "norm", rows=self.t, cols=h, dtype=ACT, direction="bwd")
        self._gemm_bwd(attn[-1:], p)
        attn_roles = set(self.MODULE_ROLES["mla_up_proj"]) if "mla_up_proj" in modules else set()
        if "layernorm" in modules:
            attn_roles.add("attn_norm")
        self._recompute_roles(p, layer, attn_roles)
        if "core_attn" in modules:  # Megatron's checkpointed core attention (RECOMPUTE_MODULES)
            self._attention(f"{p}recompute.", **self.attn_shape)
        self._attention(p, direction="bwd", **self.attn_shape)
        self._gemm_bwd(list(reversed(attn[:-1])), p)
        self.allreduce(f"{p}attn_allreduce_bwd")
        self.g.add(f"{p}attn_norm_bwd", "norm", rows=self.t, cols=h, dtype=ACT, direction="bwd")

    def _gemm_bwd(self, gemms, p: str):
        for fwd_name, n, k, d, batch in gemms:
            name = p + fwd_name.split(".", 1)[1]  # this layer's prefix, the forward op's role
            if LINEAR_RECIPES[d].quantized:
                self.g.add_op(f"{name}.quant_dy", quantize_op(d, self.t * batch, n, "gradient"))
            self.g.add(f"{name}.dgrad", "gemm", m=self.t, n=k, k=n, dtype=d, batch=batch)
            self.g.add(f"{name}.wgrad", "gemm", m=k, n=n, k=self.t, dtype=d, batch=batch,
                       out_dtype="fp32")


def cache_append_nodes(tokens: int, heads: int, kv_heads: int, head_dim: int,
                       query_cast: bool) -> list[tuple[str, str, dict]]:
    """(role, op kind, parameters) of the kernels an engine's attention layer runs beside the
    attention kernel itself, where they are kernels of their own (TensorRT-LLM fuses both into
    its QKV preprocessing, the `rope` op; Workload.fusion "trtllm"): the new tokens' K and V
    appended to the paged cache (vLLM 0.18.0 v1/attention/backends/flash_attn.py
    do_kv_cache_update -> reshape_and_cache_flash; SGLang's set_kv_buffer), and with
    `query_cast` (FP8 MMAs on an FP8 cache in FlashAttention-3) the query cast to FP8 (vLLM
    0.10's ops.scaled_fp8_quant in FlashAttentionImpl.forward; SGLang's flashattention_backend
    casts q to the cache's type). Not before TensorRT-LLM's kernels (vLLM's FlashInfer backend
    on Blackwell: engines.engine_attention_kernel), which take the query as it comes:
    AIConfigurator's vLLM 0.24.0 B200 rows run an FP8 cache ~1 us above a BF16 one at batch 1,
    not a cast kernel's ~3 us. perfmodel.validation.modules judges them as written here."""
    nodes = [("kv_append", "elementwise", dict(elements=tokens * kv_heads * 2 * head_dim,
                                               dtype=ACT, flop_per_element=0))]
    if query_cast:
        nodes.append(("q_quant", "quantize", dict(rows=tokens * heads, cols=head_dim, to="fp8")))
    return nodes


def build_graph(model: ModelSpec, phase: str, batch: int = 1, seq: int = 2048,
                context: int | None = None, tp: int = 1, ep: int = 1, pp: int = 1,
                dp: int = 1, dtype: str = "bf16", microbatches: int | None = None,
                virtual_stages: int = 1, hardware: str | None = None,
                moe_routing: str = "token_balanced", moe_replication: float = 1.0,
                moe_skew: float = 0.0, kv_dtype: str | None = None,
                recompute: str | None = None, cp: int = 1,
                fp8_attention: bool = False, grad_reduce_dtype: str = ACT,
                fusion: str = "none", attention_kernel: str | None = None,
                moe_loads: str | None = None, moe_variation: float = 0.0,
                moe_exchange: str = "alltoall", allreduce: str = "auto",
                gemm_dispatch: str = "best", bf16_layers: tuple[int, int] = (0, 0),
                recompute_modules: tuple[str, ...] | None = None,
                moe_kernel: str = "grouped",
                moe_capacity_factor: float | None = None) -> OpGraph:
    """The op graph one GPU runs for one step of `phase` (see module docstring). `kv_dtype`:
    the KV cache's storage type in serving (None: the activation dtype); `recompute`
    (training): the forward work repeated before each layer's backward (RECOMPUTE); `cp`
    (training): context-parallel ranks per sequence, each holding seq/cp of its tokens with
    ring attention (`_LayerBuilder._ring_attention`); `fp8_attention` (serving, an FP8
    `kv_dtype`): attention in FP8 MMAs on the cache (Workload.fp8_attention); `fusion`
    (serving): the kernels the engine fuses (FUSIONS); `attention_kernel` (serving): the GQA
    attention's kernel family (Workload.attention_kernel); `moe_loads`, `moe_variation`: MoE
    routing from recorded expert loads (Workload.moe_loads); `moe_exchange`: the MoE dispatch and
    combine, NCCL's all-to-all or DeepEP's kernels (Workload.moe_exchange);
    `allreduce` (serving): who picks the tensor-parallel all-reduce (Workload.allreduce);
    `gemm_dispatch` (serving): the linears' GEMM kernels (Workload.gemm_dispatch);
    `bf16_layers` (training, a quantized recipe): the first and last decoder layers kept in BF16
    (Workload.bf16_layers). `recompute_modules` (training, recompute "selective"): Megatron-
    Core's modules recomputed (RECOMPUTE_MODULES; None: the attention core). `moe_kernel`
    (serving): the mixed-input experts' kernel (Workload.moe_kernel). `moe_capacity_factor`
    (training, MoE): Megatron-Core's padded token dropping (Workload.moe_capacity_factor).
    `grad_reduce_dtype` (training): the dtype gradients are reduce-scattered in, bf16 (Megatron-
    Core's DistributedDataParallelConfig.grad_reduce_in_fp32 = False) or fp32 (PyTorch FSDP's
    MixedPrecision reduce_dtype as torchtitan and Composer set it)."""
    if grad_reduce_dtype not in ("bf16", "fp32"):
        raise InputError(f"grad_reduce_dtype: expected bf16 or fp32, got {grad_reduce_dtype!r}")
    w = Workload(phase, batch, seq, context, tp, ep, pp, dp, dtype, microbatches, virtual_stages,
                 moe_routing, moe_replication, moe_skew, kv_dtype, recompute, cp, fp8_attention,
                 fusion, attention_kernel, moe_loads, moe_variation, moe_exchange, allreduce,
                 gemm_dispatch, tuple(bf16_layers) if isinstance(bf16_layers, list)
                 else bf16_layers,
                 tuple(recompute_modules) if isinstance(recompute_modules, list)
                 else recompute_modules, moe_kernel, moe_capacity_factor)
    w.check(model)
    mb = w.n_microbatches
    seqs = batch // mb
    tokens = seqs * (1 if phase == "decode" else seq) // cp  # cp > 1: training only
    out = _GraphWriter()
    stage_layers = range(model.layers - math.ceil(model.layers / pp), model.layers)  # last stage
    h = model.hidden
    ranks = group_placements(tp, ep, pp, dp, cp)  # which link each group spans (link: auto)

    if pp == 1:
        out.add("embed", "elementwise", elements=tokens * h, dtype=ACT, flop_per_element=0)
    else:  # receive the previous stage's activations
        _stage_transfer(out, "recv_activations", tokens * h * ACT_BYTES, tp, ranks["pp"])
    high = _high_precision_layers(model, w)

    def layer_kind(i: int) -> tuple:
        return ((model.is_moe_layer(i), "bf16" if i in high else w.dtype)
                + _loads_layer(model, w, i) + _window_kind(model, i))

    builders = _forward_layers(out, model, w, tokens, seqs, stage_layers, layer_kind)
    if phase == "train":
        out.add("loss", "softmax", rows=tokens, cols=math.ceil(model.vocab / tp), dtype="fp32")
        out.add("lm_head.dgrad", "gemm", m=tokens, n=h, k=math.ceil(model.vocab / tp), dtype=ACT)
        out.add("lm_head.wgrad", "gemm", m=h, n=math.ceil(model.vocab / tp), k=tokens, dtype=ACT,
                out_dtype="fp32")
        out.add("final_norm_bwd", "norm", rows=tokens, cols=h, dtype=ACT, direction="bwd")
        for i in reversed(stage_layers):
            kind = layer_kind(i)
            if recompute == "full":  # the layer's forward again, from its stored input
                out.layer(f"l{i}.recompute.", kind,
                          lambda p, lb=builders[kind], i=i: lb.forward(p, i))
            elif recompute == "op":  # torchtitan's per-op SAC (RECOMPUTE)
                out.layer(f"l{i}.recompute.", ("op", *kind),
                          lambda p, lb=builders[kind], i=i: lb.recompute_op(p, i))
            out.layer(f"l{i}.", ("bwd", *kind), lambda p, lb=builders[kind], i=i: lb.backward(p, i))
        if pp > 1:
            _stage_transfer(out, "send_grads", tokens * h * ACT_BYTES, tp, ranks["pp"])
    per_microbatch = len(out.nodes)
    if phase == "train":
        # Dense parameters are sharded by tp and reduced over the dp replicas; routed experts
        # are sharded by ep (and each split moe_tp ways) and reduced over the expert-data-
        # parallel group of tp·dp / (ep·moe_tp) GPUs that hold the same experts (Megatron-Core's
        # expert_data_parallel_size): with EP each GPU syncs only its own experts' gradients.
        dense_params, expert_params = _stage_params_split(model, stage_layers)
        dense = dense_params / tp
        expert = expert_params / (ep * w.moe_tp) if model.is_moe else 0.0
        # context parallelism: the cp ranks of a sequence hold the same weights, so gradients
        # are reduced (and the distributed optimizer sharded) over dp·cp (Megatron-Core's
        # data-parallel group with context parallelism)
        edp = max(1, tp * dp * cp // (ep * w.moe_tp)) if model.is_moe else dp * cp
        syncs = [("", dense, dp * cp, ranks["dp"])] + (
            # with cp > 1 and an expert group other than dp·cp, the placement is not derived
            # (priced as consecutive GPUs): an approximation
            [("expert_", expert, edp, ranks["edp"] if cp == 1 or edp == dp * cp else None)]
            if expert else [])
        for prefix, params, group, where in syncs:
            if group > 1:
                out.add(f"{prefix}grad_reduce_scatter", "reduce_scatter",
                        bytes=float(params * bytes_per_element(grad_reduce_dtype)),
                        gpus=group, placement=where)
        out.add("optimizer", "elementwise",
                elements=int(math.ceil(sum(p / g for _, p, g, _ in syncs))),
                dtype="fp32", inputs=4, outputs=3, flop_per_element=ADAM_FLOP_PER_PARAM,
                xu_per_element=1)
        for prefix, params, group, where in syncs:
            if group > 1:
                out.add(f"{prefix}param_allgather", "allgather",
                        bytes=float(params * ACT_BYTES), gpus=group, placement=where)
    # graph files keep the meta as YAML/JSON, which has lists, not tuples
    meta = {"model": model.name, **{k: list(v) if isinstance(v, tuple) else v
                                    for k, v in asdict(w).items()
                                    if v is not None and not (k == "cp" and v == 1)},
            "tokens_per_microbatch": tokens, "microbatches": mb}
    if phase == "train":  # where the microbatch's backward starts (plan.training's overlap)
        meta["backward_op"] = next(k for k, n in enumerate(out.nodes) if n.name == "loss") + 1
    # the step repeats the microbatch's ops: 1F1B over pp stages, or plain gradient accumulation
    # over microbatches without pipeline parallelism (a one-stage pipeline, no bubble); a
    # training step always has its pipeline, so that its microbatch time is reported
    pipeline = (Pipeline(per_microbatch, pp, mb, virtual_stages)
                if pp > 1 or mb > 1 or phase == "train" else None)
    name = f"{model.name}-{phase}-b{batch}" + (f"-s{seq}" if phase != "decode" else
                                                f"-ctx{context or seq}")
    if tp * ep * pp * dp > 1:
        name += f"-tp{tp}" + (f"-ep{ep}" if ep > 1 else "") + (f"-pp{pp}" if pp > 1 else "") \
            + (f"-dp{dp}" if dp > 1 else "")
    if cp > 1:
        name += f"-cp{cp}"
    return OpGraph(name, out.nodes, hardware, meta, pipeline)


def _receive_imbalance(experts: Op) -> float:
    """How much more than its share the busiest GPU receives in a dispatch (and sends back in
    the combine): its routed rows over the mean. Every rank sends its own tokens × top_k (the
    op's bytes), but a pairwise exchange ends when the GPU holding the hot experts has received
    theirs; ≥ 1 (with recorded loads; synthetic routing keeps the even exchange)."""
    rows = [sum(r) for r in experts.per_gpu_rows()]
    mean = sum(rows) / len(rows)
    return max(1.0, max(rows) / mean) if mean > 0 else 1.0


def _loads_layer(model: ModelSpec, w: Workload, i: int) -> tuple:
    """A layer kind's extra key: each MoE layer routes its own row of an expert-loads file, so
    none stands for another (without loads, every MoE layer of a dtype is one kind)."""
    return (i,) if w.moe_loads is not None and model.is_moe_layer(i) else ()


def _window_kind(model: ModelSpec, i: int) -> tuple:
    """A layer kind's extra key: a sliding-window layer's attention differs from a full one's
    (ModelSpec.window), so the two are separate kinds."""
    w = model.window(i)
    return ("window", w) if w else ()


def expert_weight_dtype(model: ModelSpec, dtype: str, phase: str) -> str:
    """The storage type of the routed experts' weights under the GEMM dtype policy `dtype`:
    the model's `expert_dtype` where it is narrower than the policy in serving (gpt-oss ships
    MXFP4 experts: the GEMMs read 4-bit weights and their E8M0 scales, converting them to the
    MMA type in the mainloop), else the policy's. Training keeps the policy's weights."""
    e = model.expert_dtype
    if (e is None or phase == "train" or tensor_dtype(e) == tensor_dtype(dtype)
            or bytes_per_element(e) >= bytes_per_element(dtype)):
        return dtype
    return e


def _forward_layers(out: _GraphWriter, model: ModelSpec, w: Workload, tokens: int, seqs: int,
                    layers, layer_kind) -> dict[tuple, "_LayerBuilder"]:
    """The forward of `layers` (one layer builder per layer kind: dense / MoE, GEMM dtype),
    then the final norm and LM head; returns the builders by kind."""
    builders: dict[tuple, _LayerBuilder] = {}
    for i in layers:
        kind = layer_kind(i)
        lb = builders.get(kind)
        if lb is None:  # one builder per kind (not one made per layer and dropped)
            lb = builders[kind] = _LayerBuilder(model, dataclasses.replace(w, dtype=kind[1]),
                                                out, tokens, seqs)
        out.layer(f"l{i}.", kind, lambda p, lb=lb, i=i: lb.forward(p, i))
    h, tp = model.hidden, w.tp
    logits = tokens if w.phase == "train" else seqs  # serving samples from the last position
    out.add("final_norm", "norm", rows=logits, cols=h, dtype=ACT,
            **({"residual": True} if w.fusion != "none" else {}))
    out.add("lm_head", "gemm", m=logits, n=model.vocab // tp if model.vocab % tp == 0
            else math.ceil(model.vocab / tp), k=h, dtype=ACT)
    return builders


class _CountingWriter(_GraphWriter):
    """A _GraphWriter that writes the first layer of each kind and counts the others (which
    build_graph replays op for op: _GraphWriter.layer)."""

    def __init__(self):
        super().__init__()
        self.layer_nodes: dict[object, list[Node]] = {}
        self.layer_count: dict[object, int] = {}

    def layer(self, prefix: str, kind: object, build) -> None:
        if kind not in self.layer_count:
            start = len(self.nodes)
            super().layer(prefix, kind, build)
            self.layer_nodes[kind] = self.nodes[start:]
        self.layer_count[kind] = self.layer_count.get(kind, 0) + 1


def inference_op_counts(model: ModelSpec, phase: str, batch: int = 1, seq: int = 2048,
                        context: int | None = None, tp: int = 1, ep: int = 1,
                        dtype: str = "bf16", moe_routing: str = "token_balanced",
                        moe_replication: float = 1.0, moe_skew: float = 0.0,
                        kv_dtype: str | None = None, fp8_attention: bool = False,
                        fusion: str = "none", attention_kernel: str | None = None,
                        moe_loads: str | None = None, moe_variation: float = 0.0,
                        moe_exchange: str = "alltoall", allreduce: str = "auto",
                        gemm_dispatch: str = "best",
                        moe_kernel: str = "grouped") -> list[tuple[str, Op, int]]:
    """(node name, op, how many times it runs) for the ops of `build_graph(model, phase, ...)`
    with pp = 1, phase prefill or decode: the first layer of each kind stands for every layer
    of its kind, as build_graph replays it, so a caller that only sums op times (the serving
    simulator's StepCost) prices ~15 ops instead of building every layer's nodes."""
    if phase not in ("prefill", "decode"):
        raise ValueError(f"inference_op_counts: phase prefill or decode, got {phase!r}")
    w = Workload(phase, batch, seq, context, tp, ep, 1, 1, dtype, None, 1, moe_routing,
                 moe_replication, moe_skew, kv_dtype, None, 1, fp8_attention, fusion,
                 attention_kernel, moe_loads, moe_variation, moe_exchange, allreduce,
                 gemm_dispatch, moe_kernel=moe_kernel)
    w.check(model)
    seqs = batch
    tokens = seqs * (1 if phase == "decode" else seq)
    out = _CountingWriter()
    out.add("embed", "elementwise", elements=tokens * model.hidden, dtype=ACT,
            flop_per_element=0)
    _forward_layers(out, model, w, tokens, seqs, range(model.layers),
                    lambda i: ((model.is_moe_layer(i), w.dtype) + _loads_layer(model, w, i)
                               + _window_kind(model, i)))
    counts = {id(n): out.layer_count[k] for k, ns in out.layer_nodes.items() for n in ns}
    return [(n.name, n.op, counts.get(id(n), 1)) for n in out.nodes]


def layer_nodes(model: ModelSpec, workload: Workload, prefix: str = "", layer: int = 0,
                backward: bool = False) -> list[Node]:
    """The ops of layer `layer` of `model` on one GPU, as `build_graph` writes them for
    `workload` (its phase, GEMM dtype policy and parallelism; one microbatch of
    batch / microbatches sequences): the forward, then the backward if `backward`. Nodes are
    named `prefix` + role (`b0.` → `b0.qkv`, `b0.attn`, ...), each after the previous one, on
    the default stream; the first depends on nothing."""
    workload.check(model)
    seqs = workload.batch // workload.n_microbatches
    tokens = seqs * (1 if workload.phase == "decode" else workload.seq)
    out = _GraphWriter()
    lb = _LayerBuilder(model, workload, out, tokens, seqs)
    lb.forward(prefix, layer)
    if backward:
        lb.backward(prefix, layer)
    return out.nodes


def _high_precision_layers(model: ModelSpec, w: Workload) -> set[int]:
    """The decoder layers whose linears a quantized training recipe keeps in BF16
    (Workload.bf16_layers: the first and the last so many)."""
    first, last = w.bf16_layers
    if w.phase != "train" or not LINEAR_RECIPES[w.dtype].quantized or not first + last:
        return set()
    return set(range(first)) | set(range(model.layers - last, model.layers))


def _stage_transfer(out: _GraphWriter, name: str, nbytes: float, tp: int,
                    placement: str | None) -> None:
    """A pipeline hop of one microbatch's activations (or their gradients). The TP ranks hold
    identical copies, so with TP each sends only its 1/tp slice to its peer of the next stage
    and the receivers all-gather the slices over NVLink: Megatron-LM's scatter/gather
    optimization (Narayanan et al., SC'21, §4.1), which cuts the bytes on the inter-node link
    by tp."""
    out.add(name, "sendrecv", bytes=float(nbytes / tp), placement=placement)
    if tp > 1:
        out.add(f"{name}.allgather", "allgather", bytes=float(nbytes), gpus=tp)


def group_placements(tp: int, ep: int, pp: int, dp: int, cp: int = 1) -> dict[str, str | None]:
    """Where the pipeline's and a data-parallel group's GPUs sit in rank order (the ops'
    `placement`; None: consecutive), from which `link: auto` prices each group on NVLink inside
    one NVLink domain and on the network across domains (perfmodel.ops.comm). Ranks are laid
    out TP innermost, then the ep/tp data-parallel attention replicas an expert-parallel group
    spans, then the pipeline stages, then the other data-parallel replicas: Llama 3's order
    [TP, CP, PP, DP] (arXiv:2407.21783 §3.3.2), with an EP group on consecutive GPUs as
    DeepSeek-V3's 64-way EP spans 8 whole nodes (arXiv:2412.19437 §3.2). So TP and EP groups are
    consecutive (a TP group larger than the domain is priced across domains, not refused),
    pipeline neighbours are max(tp, ep) GPUs apart, and a data-parallel group is the replicas
    inside one EP group plus the rest, max(tp, ep)·pp apart; the expert-data-parallel group
    (`edp`) only the rest. Context parallelism (cp > 1, training) sits next to TP as in
    Llama 3's order: a stage replica is tp·cp GPUs, and the gradient group holds its cp ranks
    too (dp·cp GPUs)."""
    if cp > 1:
        block = max(tp * cp, ep)
        inner = math.gcd(block // (tp * cp), dp)

        def lv(*pairs: tuple[int, int]) -> str | None:
            return ",".join(f"{c}x{s}" for c, s in pairs if c > 1) or None
        dp_cp = lv((cp, tp), (inner, tp * cp), (dp // inner, block * pp))
        return {"pp": lv((pp, block)), "dp": dp_cp,
                "edp": lv((dp // inner, block * pp)) if ep > tp * cp else dp_cp}
    block = max(tp, ep)                 # GPUs of one stage replica: TP × EP's attention replicas
    inner = math.gcd(block // tp, dp)   # data-parallel replicas inside that block

    def levels(*lv: tuple[int, int]) -> str | None:
        return ",".join(f"{c}x{s}" for c, s in lv if c > 1) or None
    dp_levels = levels((inner, tp), (dp // inner, block * pp))
    # the expert-data-parallel group (the GPUs holding the same experts): with ep > tp the same
    # position in every EP block, max(tp, ep)·pp apart; else the data-parallel group itself
    edp = levels((dp // inner, block * pp)) if ep > tp else dp_levels
    return {"pp": levels((pp, block)), "dp": dp_levels, "edp": edp}


def _stage_params(model: ModelSpec, layers) -> float:
    """Parameters held by one pipeline stage (before tensor/expert sharding)."""
    p = sum(model.attention_params() + model.ffn_params(i) for i in layers)
    return float(p + model.vocab * model.hidden)  # LM head (last stage)


def _stage_params_split(model: ModelSpec, layers) -> tuple[float, float]:
    """(dense, routed-expert) parameters of one pipeline stage, before sharding: the routed
    experts are what expert parallelism shards; attention, shared experts, routers, dense FFNs
    and the LM head are the rest."""
    total = _stage_params(model, layers)
    per_expert = model.ffn_matrices * model.hidden * model.expert_hidden
    routed = float(sum(model.experts * per_expert for i in layers if model.is_moe_layer(i)))
    return total - routed, routed


def kv_cache_bytes_per_token(model: ModelSpec, tp: int = 1, kv_dtype: str | None = None,
                             full_only: bool = False) -> float:
    """KV cache bytes per token per GPU in `kv_dtype` (None: the activation dtype, bf16; NVFP4
    with its block scales): MLA keeps the 576-wide latent, GQA K and V. Every layer's, as a
    cache without sliding windows holds them; `full_only`: the full-attention layers' only
    (a sliding-window layer keeps at most its window per sequence: kv_cache_bytes)."""
    layers = model.layers - (model.window_layers() if full_only else 0)
    return _kv_bytes_per_layer_token(model, tp, kv_dtype) * layers


def _kv_bytes_per_layer_token(model: ModelSpec, tp: int, kv_dtype: str | None) -> float:
    if model.is_mla:
        per_layer = model.kv_lora_rank + model.qk_rope_head_dim  # not sharded by TP
    else:
        per_layer = 2 * max(1, model.kv_heads // tp) * model.head_dim
    return per_layer * bytes_per_element(kv_dtype or ACT)


def kv_cache_bytes(model: ModelSpec, context: int, tp: int = 1, kv_dtype: str | None = None,
                   layers=None) -> float:
    """KV cache bytes per GPU of one sequence of `context` tokens over `layers` (default all):
    a full-attention layer keeps every token, a sliding-window layer the window's last ones
    (ModelSpec.kv_tokens)."""
    layers = range(model.layers) if layers is None else layers
    tokens = sum(model.kv_tokens(i, context) for i in layers)
    return _kv_bytes_per_layer_token(model, tp, kv_dtype) * tokens
