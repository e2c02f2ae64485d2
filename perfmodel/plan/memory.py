"""Memory per GPU of a deployment: weights (sharded by TP and PP; experts by EP), KV cache,
activations, workspace and optimizer state, against the usable HBM.

`memory_fit(model, hw, workload)` sizes what one GPU holds for the step a `Workload` describes
(the graph `build_graph` writes for it): `serving_memory` for prefill and decode, `training_memory`
for training. Training state per parameter is mixed-precision Adam's (ZeRO paper, Rajbhandari et
al. SC20 §3.1): BF16 weights (2 bytes) and gradients (2) and FP32 master weights, momentum and
variance (12; Muon's and SOAP's hidden matrices hold theirs: perfmodel.plan.optimizers); ZeRO
stage 1 shards the 12 over the data-parallel ranks, stage 2 the gradients as well, stage 3 the
weights too (§5). Stage 1 is the default: it is Megatron-LM's distributed
optimizer, which the training graph models (gradients reduce-scattered, parameters all-gathered).
Activations kept for the backward are counted tensor by tensor from the layer's shapes
(`activation_bytes_per_token`), as Korthikanti et al. (arXiv:2205.05198, §4) count them for GPT
(their 34·s·b·h/t with sequence parallelism, without the 5·a·s/h attention-score term because
FlashAttention never stores the scores): each norm's input, each GEMM's input, Q, K, V and the
attention output for the FlashAttention backward, the FFN's pre-activation (gate and up for a
gated FFN) and, in a MoE layer, the routed copies of each token (top_k rows of the expert
GEMMs' inputs, pre-activations and outputs). With sequence parallelism every tensor is split
over the t tensor-parallel ranks. A GEMM input is saved in the GEMM's dtype: Transformer
Engine keeps the quantized (FP8/FP4) column-wise copy of a Linear's input for the Wgrad GEMM
and discards the BF16 one (transformer_engine/pytorch/module/linear.py, TE 2.20.2, lines
693-717: "Discard row-wise data since it is not needed in backward pass"; `saved_inputmat =
inputmat`). For a dense Llama layer in BF16 this is 33.5·s·b·h/t, Korthikanti's 34 less the
dropout masks Llama has none of. Full recomputation keeps only each layer's 2·s·b·h/t input,
plus one layer's activations while that layer is recomputed. Selective recomputation by module
(Megatron-Core's recompute_modules) drops what each module's checkpoint discards
(`recomputed_bytes_per_token`), plus one layer's dropped tensors while it is recomputed.
torchtitan's per-op SAC ("op") is sized
as no recomputation (an upper bound: it drops the non-GEMM outputs and every second GEMM's).
Context parallelism divides every activation by cp (each rank holds seq/cp tokens) and shards
the distributed optimizer over dp·cp (Megatron-Core's data-parallel group with context
parallelism). Under interleaved 1F1B the first stage holds pp microbatches' activations times
1 + (pp − 1)/(pp·vp) (Megatron-LM, Korthikanti et al. arXiv:2205.05198 §4.2.3: interleaving
raises the first stage's in-flight activations by that factor).
Training plans against the whole HBM: a training framework allocates through PyTorch's caching
allocator up to the device's capacity (no engine-style reserved fraction as vLLM's
gpu_memory_utilization); the CUDA context, NCCL buffers and cuBLAS workspace are WORKSPACE_BYTES.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from perfmodel.errors import InputError
from perfmodel.hardware import Hardware, hardware
from perfmodel.units import GB, LINEAR_RECIPES, GiB, bytes_per_element
from perfmodel.workloads.builder import (ACT_BYTES, Workload, expert_weight_dtype,
                                         kv_cache_bytes, recomputed_modules)
from perfmodel.workloads.models import ModelSpec, load_model
from perfmodel.plan.optimizers import check_optimizer, state_bytes_per_gpu

# vLLM's default gpu_memory_utilization: the share of HBM the engine plans with.
HBM_USABLE_FRACTION = 0.90
# Training: PyTorch's caching allocator may take the whole device (module docstring)
TRAINING_HBM_USABLE_FRACTION = 1.0
# CUDA graphs, NCCL buffers, cuBLAS workspace and allocator slack (vLLM reserves ~1-3 GiB).
WORKSPACE_BYTES = 2 * GiB
# Mixed-precision Adam, bytes per parameter (ZeRO §3.1): BF16 weights and gradients, and the
# FP32 master weights, momentum and variance
WEIGHT_BYTES_PER_PARAM = 2
GRAD_BYTES_PER_PARAM = 2
OPTIMIZER_BYTES_PER_PARAM = 12
ZERO_STAGES = (0, 1, 2, 3)
DEFAULT_ZERO = 1            # Megatron's distributed optimizer (the training graph's DP traffic)
DEFAULT_RECOMPUTE = "none"  # Megatron-Core's TransformerConfig.recompute_granularity = None
# ZeRO-3 gathers a layer's weights before using it and prefetches the next (PyTorch FSDP's
# default backward prefetch, DeepSpeed's parameter prefetch): two layers' full BF16 weights live
ZERO3_LIVE_LAYERS = 2
# Full recomputation keeps each layer's BF16 input: bytes per token × hidden (Korthikanti et al.
# §5: 2·s·b·h per layer)
FULL_RECOMPUTE_BYTES_PER_TOKEN_HIDDEN = 2
# The router's FP32 probabilities over the experts, kept for the softmax / top-k backward
ROUTER_PROB_BYTES = 4


@dataclass(frozen=True)
class MemoryFit:
    weights_bytes: float
    kv_cache_bytes: float
    activation_bytes: float
    workspace_bytes: float
    optimizer_bytes: float
    capacity_bytes: float

    @property
    def total_bytes(self) -> float:
        return (self.weights_bytes + self.kv_cache_bytes + self.activation_bytes
                + self.workspace_bytes + self.optimizer_bytes)

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "total_bytes": self.total_bytes, "fits": self.fits}

    def summary(self) -> str:
        """`needs X GB per GPU (weights A, KV B, activations C, workspace D), has Y GB usable`
        (GB = 1e9 bytes). A training fit (optimizer state > 0) names its weights with their
        gradients and its optimizer state instead of a KV cache."""
        train = self.optimizer_bytes > 0
        parts = [("weights+grads" if train else "weights", self.weights_bytes),
                 ("optimizer", self.optimizer_bytes) if train else ("KV", self.kv_cache_bytes),
                 ("activations", self.activation_bytes), ("workspace", self.workspace_bytes)]
        return (f"needs {_gb(self.total_bytes)} GB per GPU ("
                + ", ".join(f"{k} {_gb(v)}" for k, v in parts)
                + f"), has {_gb(self.capacity_bytes)} GB usable")


def _gb(x: float) -> str:
    return f"{x / GB:,.1f}"


def weight_bytes_per_gpu(model: ModelSpec, dtype: str, tp: int, ep: int, pp: int,
                         redundant_experts: int = 0, phase: str = "decode",
                         stage_layers: float | None = None) -> float:
    """Weights one GPU holds: GEMM weights in the dtype policy, routed experts in the model's
    `expert_dtype` where narrower (gpt-oss's MXFP4: 4.25 bits per weight with the E8M0 scale
    per 32; builder.expert_weight_dtype), embeddings in bf16; `redundant_experts`: EPLB's extra
    expert slots per MoE layer, spread over the ep GPUs. `stage_layers`: the decoder layers of
    the stage sized (default layers/pp; an uneven pipeline split's fullest rank, with an end
    stage's embedding as well: an upper bound)."""
    w = bytes_per_element(dtype)
    layers = model.layers / pp if stage_layers is None else stage_layers
    attn = model.attention_params() / tp
    if model.is_moe:
        moe_layers = model.layers - model.dense_layers
        per_expert = model.ffn_matrices * model.hidden * model.expert_hidden
        # experts over ep GPUs, each split tp / ep ways when 1 < ep < tp (builder moe_tp)
        routed = ((model.experts + redundant_experts) * per_expert / (ep * max(1, tp // ep))
                  * bytes_per_element(expert_weight_dtype(model, dtype, phase)) / w)
        shared = model.shared_experts * per_expert / tp
        dense = model.ffn_matrices * model.hidden * model.ffn_hidden / tp
        ffn_all = moe_layers * (routed + shared) + model.dense_layers * dense
        # an uneven stage holds the model's mean layer mix over its layers
        ffn_total = ffn_all / pp if stage_layers is None else ffn_all * stage_layers / model.layers
        per_layer_attn = attn * layers
        body = (per_layer_attn + ffn_total) * w
    else:
        body = (attn + model.ffn_matrices * model.hidden * model.ffn_hidden / tp) * layers * w
    embeddings = model.vocab * model.hidden * ACT_BYTES * (1 if model.tie_embeddings else 2) / tp
    return body + embeddings / (1 if pp == 1 else 2)  # embedding and LM head on end stages


def serving_memory(model: ModelSpec, hw: Hardware, batch: int, context: int, tp: int = 1,
                   ep: int = 1, pp: int = 1, dtype: str = "bf16",
                   prefill_tokens: int = 0, kv_dtype: str | None = None,
                   occupancy: float = 1.0, redundant_experts: int = 0) -> MemoryFit:
    """Serving memory of one GPU: `batch` sequences' KV caches of up to `context` tokens each in
    `kv_dtype` (None: bf16), the transient activations of max(batch, prefill_tokens) tokens
    (two buffers of hidden + ffn_hidden/tp), the weights in the `dtype` policy and the
    workspace. `occupancy` is the mean share of `context` the caches hold: 1 (the default) is
    the worst case, every sequence at full length, which a static allocation reserves; a paged
    cache (vLLM's PagedAttention) holds each sequence's current length, under continuous
    batching (prompt + output/2) / (prompt + output) on average."""
    if not 0 < occupancy <= 1:
        raise InputError(f"occupancy: expected a share of the context in (0, 1], "
                         f"got {occupancy!r}")
    # sliding-window layers hold at most their window per sequence (builder.kv_cache_bytes)
    kv = batch * kv_cache_bytes(model, context, tp, kv_dtype) / pp * occupancy
    act = max(batch, prefill_tokens) * (model.hidden + model.ffn_hidden / tp) * ACT_BYTES * 2
    return MemoryFit(weight_bytes_per_gpu(model, dtype, tp, ep, pp, redundant_experts), kv, act,
                     WORKSPACE_BYTES, 0.0, hw.hbm_capacity_bytes * HBM_USABLE_FRACTION)


def training_memory(model: ModelSpec, hw: Hardware, workload: Workload,
                    zero: int = DEFAULT_ZERO, stage_layers: int | None = None,
                    optimizer: str = "adamw",
                    distributed_optimizer: str | None = None) -> MemoryFit:
    """Training memory of one GPU (module docstring): BF16 weights and gradients in
    `weights_bytes`, FP32 optimizer state in `optimizer_bytes`, each sharded over the
    data-parallel ranks from its ZeRO stage on; the activations of the microbatches in flight
    (min(pp, microbatches) under 1F1B) for the stage's layers, by `workload.recompute`.
    `stage_layers`: the decoder layers of the fullest pipeline rank of an uneven split
    (plan.training.split_pipeline; default layers/pp), sized with an end stage's embedding and
    the first stage's microbatches in flight (an upper bound). `optimizer` (adamw, muon, soap)
    and `distributed_optimizer` (elementwise, layerwise; None: the optimizer's default): the
    hidden matrices' state as perfmodel.plan.optimizers sizes it (Muon 8 bytes a parameter,
    SOAP 12 plus its FP32 Kronecker factors and eigenbases), the rest AdamW's 12."""
    w = workload
    if zero not in ZERO_STAGES:
        raise InputError(f"zero: expected a ZeRO stage, one of {', '.join(map(str, ZERO_STAGES))},"
                         f" got {zero!r}")
    distributed = check_optimizer(optimizer, distributed_optimizer, zero)
    dp = w.dp * w.cp  # the optimizer's sharding group (module docstring)
    params = weight_bytes_per_gpu(model, "bf16", w.tp, w.ep, w.pp, phase="train",
                                  stage_layers=stage_layers) / ACT_BYTES
    stage = model.layers / w.pp if stage_layers is None else stage_layers
    weights = params * WEIGHT_BYTES_PER_PARAM / (dp if zero >= 3 else 1)
    if zero >= 3 and dp > 1:  # the gathered layers in use and prefetched
        weights += params / max(1.0, stage) * ZERO3_LIVE_LAYERS \
            * WEIGHT_BYTES_PER_PARAM
    grads = params * GRAD_BYTES_PER_PARAM / (dp if zero >= 2 else 1)
    optimizer_bytes = params * OPTIMIZER_BYTES_PER_PARAM / (dp if zero >= 1 else 1)
    if optimizer != "adamw":  # Muon's or SOAP's hidden matrices (plan.optimizers)
        optimizer_bytes += state_bytes_per_gpu(model, optimizer, distributed, w.tp, w.ep,
                                               w.moe_tp, dp if zero >= 1 else 1, stage)
    mb_seqs = w.batch // w.n_microbatches
    in_flight = min(w.pp, w.n_microbatches)
    if w.pp > 1 and w.virtual_stages > 1:  # interleaved 1F1B's longer warm-up
        in_flight *= 1 + (w.pp - 1) / (w.pp * w.virtual_stages)
    tokens = w.seq // w.cp * mb_seqs  # a context-parallel rank holds seq/cp of each sequence
    # per token of one microbatch, over the stage's layers (the mean layer × layers/pp: with
    # dense and MoE layers the stage's mix is the model's)
    per_layer = sum(activation_bytes_per_token(model, i, w.tp, w.ep, w.dtype)
                    for i in range(model.layers)) / model.layers
    modules = recomputed_modules(w.recompute, w.recompute_modules)
    if (w.recompute or DEFAULT_RECOMPUTE) == "full":
        act = tokens * (FULL_RECOMPUTE_BYTES_PER_TOKEN_HIDDEN * model.hidden / w.tp
                        * stage * in_flight + per_layer)
    elif modules:
        # selective by module: each layer keeps its activations less what its modules
        # discard, plus, while one layer's backward runs, what it recomputed (at most one
        # layer's worth at a time)
        dropped = [recomputed_bytes_per_token(model, i, w.tp, w.ep, w.dtype, modules)
                   for i in range(model.layers)]
        act = tokens * ((per_layer - sum(dropped) / model.layers) * stage * in_flight
                        + max(dropped))
    else:
        act = tokens * per_layer * stage * in_flight
    return MemoryFit(weights + grads, 0.0, act, WORKSPACE_BYTES, optimizer_bytes,
                     hw.hbm_capacity_bytes * TRAINING_HBM_USABLE_FRACTION)


def activation_bytes_per_token(model: ModelSpec, layer: int, tp: int = 1, ep: int = 1,
                               dtype: str = "bf16") -> float:
    """Bytes one GPU keeps for the backward of layer `layer` per token of its microbatch, with
    no recomputation (module docstring): Megatron-Core / Transformer Engine with sequence
    parallelism (every tensor split over the `tp` ranks; moe_layer.py requires it for MoE with
    TP) and FlashAttention; GEMM inputs in the `dtype` policy's element size (quantized copies
    for FP8/FP4: TE linear.py 693-717), everything else in BF16. A MoE layer keeps, per token,
    top_k routed rows (top_k·tp/ep when 1 < ep < tp: the TP group's tokens are gathered and
    each GPU computes its experts' slice, builder moe_tp) of the expert input, the expert
    pre-activation and activation, and the expert output the combine's backward weights by the
    router probabilities (and, with a clamped SwiGLU, the clamped pre-activation:
    clamp_saved_elements); its shared experts are a dense FFN of shared_experts·expert_hidden."""
    m, a = model, ACT_BYTES
    g = bytes_per_element(dtype) if LINEAR_RECIPES[dtype].quantized else ACT_BYTES
    h = m.hidden
    gated = m.ffn_matrices - 1             # pre-activation tensors: gate and up, or one
    per = 2 * h * a + 2 * h * g            # the two norms' inputs, the two GEMM-input norm outputs
    if m.is_mla:
        qk, rope = m.qk_nope_head_dim + m.qk_rope_head_dim, m.qk_rope_head_dim
        per += (m.q_lora_rank * (a + g)                          # q_norm input, q_b input
                + (m.kv_lora_rank + rope) * a + m.kv_lora_rank * g  # kv_a out, kv_b input
                + m.heads * (2 * qk + 2 * m.v_head_dim) * a)       # Q, K, V, O
        o = m.heads * m.v_head_dim
    else:
        per += (m.heads + 2 * m.kv_heads) * m.head_dim * a + m.heads * m.head_dim * a  # QKV, O
        o = m.heads * m.head_dim
    if g != a:
        per += o * g  # the o_proj's quantized input beside FlashAttention's BF16 output
    per /= tp
    if m.is_moe_layer(layer):
        moe_tp = max(1, tp // ep)
        rows = m.top_k * moe_tp / tp       # routed rows per token of the microbatch, per GPU
        eh = m.expert_hidden / moe_tp
        per += rows * (h * g + gated * eh * a + eh * g + h * a) + m.experts * ROUTER_PROB_BYTES / tp
        per += rows * clamp_saved_elements(m, eh) * a
        se = m.shared_experts * m.expert_hidden
        per += (gated * se * a + se * g) / tp if se else 0.0
    else:
        per += (gated * m.ffn_hidden * a + m.ffn_hidden * g) / tp
    return per


def clamp_saved_elements(model: ModelSpec, expert_hidden: float) -> float:
    """Elements per routed row the clamp of a model with `swiglu_limit` adds to what a MoE
    layer keeps (builder EXPERT_EXTRAS, megatron-core 0.16.1 fusions/fused_bias_geglu.py
    weighted_bias_quick_geglu_impl): the fused activation saves the clamped, concatenated
    pre-activation (WeightedQuickGeGLUFunction.forward), a tensor of its own beside FC1's output,
    which the two clamps keep for their backward; 0 without a clamp."""
    return (model.ffn_matrices - 1) * expert_hidden if model.swiglu_limit else 0.0


def recomputed_bytes_per_token(model: ModelSpec, layer: int, tp: int = 1, ep: int = 1,
                               dtype: str = "bf16", modules=frozenset()) -> float:
    """Bytes per token of layer `layer` that Megatron-Core's selective recomputation of
    `modules` (builder.RECOMPUTE_MODULES) no longer keeps, out of activation_bytes_per_token's
    count (megatron-core 0.16.0, what each checkpoint discards; a checkpoint's own input stays):
    core_attn nothing counted here (Q, K, V are its inputs, its output the o_proj's saved input;
    FlashAttention stores no scores); layernorm the two norm outputs the GEMMs after them keep;
    mla_up_proj the q/kv up-projections' inputs (norm outputs) and Q, K, V; mlp (dense layers)
    the FFN's pre-activation and the down projection's input; moe (MoE layers) every routed
    row's tensors, the router's probabilities and the shared experts'; moe_act the routed
    experts' FC2 input (experts.py keeps the original input for TE to discard:
    set_save_original_input) and a clamped SwiGLU's saved copy (clamp_saved_elements);
    shared_experts the shared experts' pre-activation and FC2 input."""
    m, a = model, ACT_BYTES
    g = bytes_per_element(dtype) if LINEAR_RECIPES[dtype].quantized else ACT_BYTES
    h, gated = m.hidden, m.ffn_matrices - 1
    out = 0.0
    if "layernorm" in modules:
        out += 2 * h * g / tp
    if "mla_up_proj" in modules and m.is_mla:
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        out += ((m.q_lora_rank + m.kv_lora_rank) * g
                + m.heads * (2 * qk + m.v_head_dim) * a) / tp
    moe_layer = m.is_moe_layer(layer)
    if "mlp" in modules and not moe_layer:
        out += (gated * m.ffn_hidden * a + m.ffn_hidden * g) / tp
    if moe_layer:
        moe_tp = max(1, tp // ep)
        rows, eh = m.top_k * moe_tp / tp, m.expert_hidden / moe_tp
        se = m.shared_experts * m.expert_hidden
        if "moe" in modules:  # the whole MoE block but its input
            out += (rows * (h * g + gated * eh * a + eh * g + h * a
                            + clamp_saved_elements(m, eh) * a)
                    + m.experts * ROUTER_PROB_BYTES / tp + (gated * se * a + se * g) / tp)
        else:
            if "moe_act" in modules:  # the activation's checkpoint keeps only FC1's output
                out += rows * (eh * g + clamp_saved_elements(m, eh) * a)
            if "shared_experts" in modules:
                out += (gated * se * a + se * g) / tp
    return out


def memory_fit(model: ModelSpec | str, hw: Hardware | str, workload: Workload,
               zero: int = DEFAULT_ZERO, occupancy: float = 1.0,
               stage_layers: int | None = None, optimizer: str = "adamw",
               distributed_optimizer: str | None = None) -> MemoryFit:
    """What one GPU holds for the step `workload` describes, against its usable HBM. Prefill:
    the KV cache its prompts write and one microbatch's tokens of activations; decode: `batch`
    caches of `context` tokens (× `occupancy`, serving_memory); train: training_memory with
    ZeRO stage `zero`, the workload's recompute, `stage_layers` (an uneven pipeline
    split's fullest rank), `optimizer` and `distributed_optimizer`."""
    m, h = as_model(model), hardware(hw)
    w = workload
    w.check(m)
    if w.phase == "train":
        return training_memory(m, h, w, zero, stage_layers, optimizer, distributed_optimizer)
    if w.phase == "prefill":
        tokens = w.batch // w.n_microbatches * w.seq
        return serving_memory(m, h, w.batch, w.seq, w.tp, w.ep, w.pp, w.dtype, tokens,
                              w.kv_dtype, occupancy)
    return serving_memory(m, h, w.batch, w.context or w.seq, w.tp, w.ep, w.pp, w.dtype, 0,
                          w.kv_dtype, occupancy)


def as_model(model: ModelSpec | str) -> ModelSpec:
    return model if isinstance(model, ModelSpec) else load_model(model)
