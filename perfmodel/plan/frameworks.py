"""What a training framework does to the training graph's microbatch: the tensor-parallel
communication it overlaps with GEMMs, the FP8 weight casts it caches across microbatches and the
activation casts it fuses into the norm before. `plan_training` takes the graph's schedule (every
TP collective exposed on the compute stream, every cast its own kernel each microbatch: what
`perfmodel predict --phase train` shows) and applies `microbatch_savings` of its framework.

Frameworks (FRAMEWORKS):

- megatron: Megatron-Core with Transformer Engine, as NeMo's performance recipes and
  Megatron-LM's benchmarks run it (tp_comm_overlap, TE linears, FP8 weight caching).
- pytorch: torchtitan, PyTorch FSDP2, NeMo AutoModel: the graph as it is (no TP userbuffers:
  torchtitan's async TP is off by default; torchao's float8 linears cast weight and activation
  in every forward, each in kernels of their own), plus FSDP2's copies around its collectives
  under ZeRO-3 (below). PyTorch's older FSDP (FlatParameter) is Composer's, below.

**TP communication overlap** (Transformer Engine userbuffers; NeMo's configurations in
nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py, nemo_toolkit 2.3.0, e.g.
`userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192`). With sequence parallelism each all-reduce
of the graph is a reduce-scatter after a row-parallel GEMM (attention output, FC2; in the
backward: the column-parallel dgrad's output) and an all-gather before the next column-parallel
GEMM (QKV, FC1; backward: the dY of the row-parallel dgrad), each half of the all-reduce's time.
TE hides each behind the GEMM beside it:

- ring exchange (all-gathers, forward and backward; the FP8 forward reduce-scatters): the GEMM
  runs in tp chunks and the copy engines pass the next shard around the ring while a chunk
  computes, the local chunk first: exposed (tp − 1)·max(0, C/(tp − 1) − G/tp);
- pipeline (the BF16 forward reduce-scatters, `PipelineOverlapCfg(num_sm, num_splits=4,
  set_sm_margin=True)`): the GEMM runs in 4 splits on all SMs but the communication's and each
  split's reduce-scatter runs on num_sm SMs beside the next split; the last split's is exposed:
  C/4 + 3·max(0, C/4 − G'/4), the GEMM stretched to G' = G·SMs/(SMs − num_sm);
- bulk (the backward reduce-scatters beside the wgrad GEMM, `BulkOverlapCfg(num_sm)`): the
  whole collective runs on num_sm SMs beside the whole GEMM: exposed max(0, C − G'), G' as above.

num_sm: the H100 70B TP4 configuration's, attention output 24 SMs and FC2 16 (pipeline), the
QKV wgrad's 24 and FC1 wgrad's 4 (bulk); the other configurations differ by a few SMs.

**FP8 weight caching**: Megatron-Core passes Transformer Engine `is_first_microbatch`, and TE
casts (and transposes) each weight to FP8 in the first microbatch of a step only, reusing it
for the others: the graph's per-microbatch weight cast runs once per step.

**Norm-fused activation casts**: Megatron's TE layer spec builds QKV and FC1 as
TELayerNormColumnParallelLinear, whose norm kernel writes its output already quantized: a
cast that follows a norm in the graph is not a kernel of its own.

**EP all-to-all overlap** (Megatron-Core `overlap_moe_expert_parallel_comm`, off by default;
the perf recipes turn it on, `ep_overlap`): the combined 1F1B schedule runs one microbatch's
forward beside another's backward, layer by layer, the expert exchanges on a communication
stream (core 0.16.1 pipeline_parallel/combined_1f1b.py; models/common/
model_chunk_schedule_plan.py `TransformerLayerSchedulePlan.run`):

    comm stream: combine_bwd | dispatch_fwd -> dispatch_bwd          | combine_fwd
    comp stream: attn_fwd    | mlp_bwd -> mlp_bwd_dw -> mlp_fwd      | attn_bwd

each op starting when its inputs are ready and its stream is free (`ep_overlap_layer_s`). A
MoE layer's forward and backward then take that schedule's length instead of their sum. Only
the steady 1F1B phase pairs a forward with a backward: the first microbatch's forward and the
last one's backward, and each pipeline rank's warm-up and cool-down microbatches, run alone.
Not modelled: the SMs the exchange kernels take from the computation beside them.

**MoE host synchronisation** (`moe_host_sync`; perfmodel.plan.moe_host): a dropless MoE layer's
token dispatcher makes the host wait for the GPU (the tokens per expert, copied to the host
before the all-to-all: Megatron-Core 0.16.0 token_dispatcher.py `_maybe_dtoh_and_synchronize`),
after which the host issues the layer's kernels one by one, Transformer Engine's GroupedLinear
a quantize and a GEMM per local expert. Where the host issues slower than the GPU runs, the
microbatch takes the host's time: a cost (a negative saving, "moe_host_sync") of
`moe_host.moe_host_extra_s` at the fitted seconds per launched kernel (HOST_LAUNCH_S).

**FSDP2's copies** (`fsdp2_copies`; PyTorch's fully_shard, as torchtitan and NeMo AutoModel run
it, read in torch 2.13.0 torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py). Each
FSDP unit (a transformer block) gathers its parameters into per-parameter tensors and scatters
its gradients out of them, with copies on the compute stream beside the collectives the graph
holds (`fsdp2_copies_s`, per microbatch):

- before each all-gather (the forward's, and the backward's again: reshard_after_forward,
  torchtitan's default), the rank's shard is cast from the FP32 sharded parameter to the
  BF16 param_dtype by a foreach copy (`_get_param_all_gather_inputs`, lines 382-430) and copied
  again into the all-gather's input (`all_gather_copy_in`, 263-277): 4 + 2 bytes read and
  2 + 2 written per shard element;
- after it, `foreach_all_gather_copy_out` (431-520) splits the gathered buffer into the
  parameters, `split_with_sizes_copy` on the current stream: the unit's BF16 parameters read
  and written once per gather;
- before the reduce-scatter, `foreach_reduce_scatter_copy_in` (778-787) chunk-cats the BF16
  gradients into the reduce-scatter's input in the reduce dtype (FP32 in torchtitan:
  mixed_precision_reduce), on the current stream; NCCL averages (ReduceOp.AVG for FP32 and
  BF16, `_get_gradient_divide_factors`, 812-846), so no divide kernel runs. The reduced shard's
  accumulation and cast (1/G of the unit) are not counted.

**Composer (llm-foundry)**: the `composer` framework is PyTorch FSDP as MosaicML's Composer
trainer runs llm-foundry's MPT (llm-foundry 0.4.0, the release before the benchmark tables'
last regeneration on 2024-01-06, which pins mosaicml>=0.17,<0.18; read in composer 0.17.2).
The graph as it is (no TP overlap, no cached or fused casts), plus two things of the trainer's:

- *train metrics* (`train_metrics_s`): after each microbatch's backward the trainer updates the
  model's train metrics on the microbatch's logits (composer/trainer/trainer.py
  `_train_microbatch`, lines 2486-2488, and `_eval_train_metrics`, 2176-2189, under no_grad and
  the autocast context); llm-foundry's ComposerMPTCausalLM keeps two, LanguageCrossEntropy and
  LanguagePerplexity (llmfoundry/models/mpt/modeling_mpt.py, `use_train_metrics` True by
  default), and each update is a torch.nn.CrossEntropyLoss(reduction='sum') over the logits
  (composer/metrics/nlp.py LanguageCrossEntropy.update; LanguagePerplexity inherits it): two
  eager cross-entropy forwards (log_softmax + nll_loss, ops.losses "eager") over tokens x vocab
  per microbatch, beside the loss the graph already holds. The logits are BF16; autocast writes
  log_softmax's output in FP32, priced here at the logits' 2 bytes (a low bound).
- *the optimizer* (`per_param_adamw_s`): the pretrain yamls' decoupled_adamw (as recalled: the
  llm-foundry sdist ships no scripts/; llmfoundry/utils/builders.py builds it) is Composer's
  DecoupledAdamW (composer/optim/decoupled_weight_decay.py, lines 237-264), a Python loop over
  the parameters issuing 8 unfused kernels per parameter (exp_avg mul_, add_; exp_avg_sq mul_,
  addcmul_; sqrt, the division, add_ eps; param addcdiv_; weight decay 0 skips the ninth) after
  `state['step'] += 1` on the GPU (line 313) and `state_steps[i].item()` (line 241), which waits
  for the GPU: the host and the GPU take turns, parameter by parameter. The parameters are
  FSDP's original ones (Composer's `use_orig_params` True, composer/trainer/dist_strategy.py
  line 151), each rank stepping those with elements in its shard of each FSDP unit's flat
  parameter (`fsdp_rank_params`). Before it, the yamls' gradient clipping (norm, as recalled)
  calls the FSDP root's clip_grad_norm_ (composer/algorithms/gradient_clipping/
  gradient_clipping.py, lines 44-51), which in torch 2.1 takes a norm of each gradient and then
  scales each in place: two kernels per parameter with no sync.
  The kernels' HBM traffic is priced as streams of the rank's FP32 shard; the host's seconds per
  issued operation are moe_host's (HOST_LAUNCH_S, fitted on Megatron-Bridge MoE rows, where the
  host also walks a Python loop of eager launches: an assumption, not a measurement of this loop).
"""
from __future__ import annotations

import math

from dataclasses import dataclass
from typing import Sequence

from perfmodel.errors import InputError
from perfmodel.graph import DEFAULT_STREAM
from perfmodel.ops import op as make_op
from perfmodel.plan import moe_host

# NeMo's userbuffers configuration for Llama 3 70B TP4 on H100 (module docstring)
PIPELINE_SPLITS = 4
PIPELINE_NUM_SM = {"o_proj": 24, "down": 16}   # forward reduce-scatters, BF16
BULK_NUM_SM = {"qkv": 24, "gate_up": 4}        # backward reduce-scatters beside the wgrad
TP_COLLECTIVES = ("allreduce",)


@dataclass(frozen=True)
class TrainingFramework:
    name: str
    tp_comm_overlap: bool      # TE userbuffers around the TP GEMMs
    fp8_weight_cache: bool     # one weight cast per step, not per microbatch
    norm_fused_casts: bool     # a cast after a norm runs inside it
    meaning: str
    moe_host_sync: bool = False  # a MoE layer's host waits for the tokens per expert
    train_metric_passes: int = 0  # eager cross-entropy forwards over the logits per microbatch
    per_param_optimizer: bool = False  # Composer's DecoupledAdamW: a host sync per parameter
    fsdp2_copies: bool = False  # FSDP2's copy-in/copy-out around its collectives (ZeRO-3)


FRAMEWORKS = {
    "megatron": TrainingFramework("megatron", True, True, True,
                                  "Megatron-Core + Transformer Engine (NeMo, Megatron-LM)",
                                  moe_host_sync=True),
    "pytorch": TrainingFramework("pytorch", False, False, False,
                                 "torchtitan, PyTorch FSDP2, NeMo AutoModel", fsdp2_copies=True),
    "composer": TrainingFramework("composer", False, False, False,
                                  "llm-foundry's MPT on Composer with PyTorch FSDP",
                                  train_metric_passes=2, per_param_optimizer=True),
}


def framework(name: str) -> TrainingFramework:
    from perfmodel.plan.arguments import check_arguments
    check_arguments(framework, {"framework": name})  # a name of FRAMEWORKS (a str)
    return FRAMEWORKS[name]


def ring_exchange_exposed_s(comm_s: float, gemm_s: float, tp: int) -> float:
    """A ring-exchange all-gather or reduce-scatter of comm_s beside a GEMM of gemm_s split in
    tp chunks (module docstring)."""
    if tp < 2:
        return comm_s
    return (tp - 1) * max(0.0, comm_s / (tp - 1) - gemm_s / tp)


def sm_margin_s(gemm_s: float, num_sm: int, sms: int) -> float:
    """What a GEMM loses running on sms − num_sm SMs (the communication holds num_sm)."""
    return gemm_s * num_sm / max(1, sms - num_sm)


def pipelined_exposed_s(comm_s: float, gemm_s: float, splits: int = PIPELINE_SPLITS) -> float:
    """A reduce-scatter split with its GEMM in `splits` pieces, each piece's collective beside the
    next piece's GEMM: the last piece's collective is exposed (module docstring)."""
    c, g = comm_s / splits, gemm_s / splits
    return c + (splits - 1) * max(0.0, c - g)


def bulk_exposed_s(comm_s: float, gemm_s: float) -> float:
    return max(0.0, comm_s - gemm_s)


def _role(name: str) -> str:
    """The GEMM's role in its layer: 'l3.recompute.o_proj.dgrad' -> 'o_proj'."""
    parts = [p for p in name.split(".") if p not in ("dgrad", "wgrad")]
    return parts[-1]


# ops a search for the GEMM beside a collective passes over (kernels between the GEMM and the
# collective that the framework fuses or that are short); any other op ends the search
_PASS_OVER = ("elementwise", "norm", "quantize")


def _nearest_gemm(ops: Sequence, i: int, step: int):
    """The GEMM on the compute stream next to ops[i] in direction `step`, or None."""
    j = i + step
    while 0 <= j < len(ops):
        o = ops[j]
        if o.stream == DEFAULT_STREAM:
            if o.op.name == "gemm":
                return o
            if o.op.name not in _PASS_OVER:
                return None
        j += step
    return None


def tp_overlap_savings_s(ops: Sequence, tp: int, sms: int, dtype: str,
                         backward_at: int) -> float:
    """Seconds per microbatch TE's userbuffers take off the graph's exposed TP all-reduces
    (module docstring): each all-reduce's reduce-scatter half beside the GEMM before it, its
    all-gather half beside the GEMM after it. `ops`: the microbatch's scheduled ops in order;
    `backward_at`: the index of the first backward op. Can be negative where the SMs the
    communication holds cost the GEMM more than the overlap saves."""
    if tp < 2:
        return 0.0
    saved = 0.0
    for i, o in enumerate(ops):
        if o.op.name not in TP_COLLECTIVES or o.stream != DEFAULT_STREAM:
            continue
        half = o.time_s / 2
        before, after = _nearest_gemm(ops, i, -1), _nearest_gemm(ops, i, +1)
        exposed = 0.0
        if before is None:
            exposed += half
        elif i < backward_at:
            role = _role(before.name)
            if dtype == "bf16" and role in PIPELINE_NUM_SM:
                n = PIPELINE_NUM_SM[role]
                stretch = sm_margin_s(before.time_s, n, sms)
                exposed += stretch + pipelined_exposed_s(half, before.time_s + stretch)
            else:
                exposed += ring_exchange_exposed_s(half, before.time_s, tp)
        else:
            n = BULK_NUM_SM.get(_role(before.name), 0)
            stretch = sm_margin_s(before.time_s, n, sms)
            exposed += stretch + bulk_exposed_s(half, before.time_s + stretch)
        exposed += half if after is None else ring_exchange_exposed_s(half, after.time_s, tp)
        saved += o.time_s - exposed
    return saved


def weight_cache_savings_s(ops: Sequence, microbatches: int) -> float:
    """Seconds per microbatch saved by casting each weight once per step: (m − 1)/m of the
    microbatch's weight casts."""
    if microbatches <= 1:
        return 0.0
    casts = sum(o.time_s for o in ops if o.name.endswith(".quant_w")
                and o.stream == DEFAULT_STREAM)
    return casts * (microbatches - 1) / microbatches


def fused_cast_savings_s(ops: Sequence) -> float:
    """Seconds per microbatch of the activation casts right after a norm (the norm writes the
    quantized output itself)."""
    return sum(o.time_s for prev, o in zip(ops, ops[1:])
               if o.name.endswith(".quant_x") and prev.op.name == "norm"
               and o.stream == DEFAULT_STREAM)


# a MoE layer's parts in the training graph (workloads.builder: `l<i>.` ops), by the node
# names of Megatron-Core's schedule plan
EP_EXCHANGES = {"dispatch": "Df", "combine": "Cf", "combine_bwd": "Cb", "dispatch_bwd": "Db"}
EP_MLP = {"experts": "Mf", "experts_dgrad": "Mb", "experts_wgrad": "Mbdw"}


def ep_overlap_layer_s(t: dict[str, float]) -> float:
    """One MoE layer's forward (of one microbatch) beside its backward (of another) as the
    combined 1F1B schedule runs them (module docstring); `t` holds the parts' seconds: Af, Df,
    Mf, Cf (forward: attention with router and norms, dispatch, experts, combine), Cb, Mb, Mbdw,
    Db, Ab (backward: combine, experts' dgrad and wgrad, dispatch, the rest)."""
    g = {k: t.get(k, 0.0) for k in ("Af", "Df", "Mf", "Cf", "Cb", "Mb", "Mbdw", "Db", "Ab")}
    t1 = max(g["Cb"], g["Af"])                 # combine_bwd | attn_fwd
    df_end = t1 + g["Df"]                      # comm: dispatch_fwd
    mb_end = t1 + g["Mb"]                      # comp: mlp_bwd, then its wgrad
    dw_end = mb_end + g["Mbdw"]
    db_end = max(df_end, mb_end) + g["Db"]     # comm: dispatch_bwd needs mlp_bwd's dgrad
    mf_end = max(df_end, dw_end) + g["Mf"]     # comp: mlp_fwd needs the dispatched tokens
    cf_end = max(mf_end, db_end) + g["Cf"]     # comm: combine_fwd needs mlp_fwd
    ab_end = max(db_end, mf_end) + g["Ab"]     # comp: attn_bwd needs dispatch_bwd
    return max(cf_end, ab_end)


def ep_overlap_savings_s(ops: Sequence, backward_at: int, paired: float) -> float:
    """Seconds per microbatch the EP all-to-all overlap takes off the graph's schedule: each MoE
    layer's sum of parts less `ep_overlap_layer_s`, for the share `paired` of microbatches whose
    forward runs beside another's backward."""
    if paired <= 0:
        return 0.0
    layers: dict[str, dict[str, float]] = {}
    for i, o in enumerate(ops):
        prefix, _, role = o.name.partition(".")
        if not prefix.startswith("l") or not prefix[1:].isdigit():
            continue
        parts = layers.setdefault(prefix, {})
        key = EP_EXCHANGES.get(role) or EP_MLP.get(role) or ("Af" if i < backward_at else "Ab")
        parts[key] = parts.get(key, 0.0) + o.time_s
    saved = 0.0
    for parts in layers.values():
        if "Df" not in parts or "Db" not in parts:
            continue  # a dense layer, or experts without an exchange (ep = 1)
        saved += sum(parts.values()) - ep_overlap_layer_s(parts)
    return saved * paired


def ep_overlap_paired_share(microbatches: int, pp: int, vp: int) -> float:
    """The share of a pipeline rank's microbatch chunks whose forward runs beside a backward: all
    but the warm-up's (the last rank's, (vp - 1)·pp + 1 with the overlap's extra one: Megatron-
    Core schedules.py get_pp_rank_microbatches) and, with no pipeline, all but the first."""
    chunks = microbatches * max(1, vp)
    warmup = (max(1, vp) - 1) * pp + 1
    return max(0, chunks - warmup) / chunks


# Composer's DecoupledAdamW per parameter (module docstring): host operations (the step's
# increment, its .item(), 8 kernels) and the FP32 tensors its 8 kernels read and write
# (mul_ 1/1, add_ 2/1, mul_ 1/1, addcmul_ 3/1, sqrt 1/1, division 1/1, add_ 1/1, addcdiv_ 3/1)
ADAMW_HOST_OPS = 10
ADAMW_READS, ADAMW_WRITES = 13, 8
ADAMW_FLOP_PER_PARAM = 12
# FSDP's clip_grad_norm_ per parameter: a norm (1 read) and the in-place scale (1 read, 1 write)
CLIP_HOST_OPS = 2
CLIP_READS, CLIP_WRITES = 2, 1


def mpt_block_param_sizes(hidden: int, qkv_out: int, ffn_hidden: int) -> list[int]:
    """The parameters of one MPTBlock in registration order, FSDP's flat-parameter order
    (llm-foundry 0.4.0 layers/blocks.py: norm_1, attn, norm_2, ffn; attention.py: Wqkv,
    out_proj; ffn.py MPTMLP: up_proj, down_proj; LayerNorm weight and bias; every Linear with
    its bias, MPTConfig no_bias False)."""
    d = hidden
    return [d, d, qkv_out * d, qkv_out, d * d, d, d, d, ffn_hidden * d, ffn_hidden,
            d * ffn_hidden, d]


def fsdp_rank_params(sizes: Sequence[int], ranks: int) -> int:
    """The most parameters any rank holds elements of, when FSDP flattens `sizes` (elements, in
    order) into one flat parameter padded to a multiple of `ranks` and gives each rank one
    contiguous 1/ranks chunk (torch.distributed.fsdp FlatParamHandle's sharding): with
    use_orig_params, the optimizer of a rank steps only those."""
    if ranks < 1 or any(n < 0 for n in sizes):
        raise InputError(f"fsdp_rank_params: expected ranks >= 1 and sizes >= 0, got {ranks}, "
                         f"{list(sizes)}")
    chunk = -(-sum(sizes) // ranks)
    spans, start = [], 0
    for n in sizes:
        if n:
            spans.append((start, start + n))
        start += n
    return max(sum(1 for a, b in spans if a < (r + 1) * chunk and b > r * chunk)
               for r in range(ranks))


def mpt_rank_params(model, seq: int, layers: int, ranks: int) -> int:
    """The parameters the most loaded rank's optimizer steps (`fsdp_rank_params`): `layers`
    MPTBlocks, each its own FSDP unit (MPTModel.fsdp_wrap_fn), and the root unit's token and
    position embeddings (seq positions) and final LayerNorm. A model that is not MPT is counted
    as if built from MPTBlocks of its widths."""
    d = model.hidden
    qkv = (model.heads + 2 * model.kv_heads) * model.head_dim
    block = fsdp_rank_params(mpt_block_param_sizes(d, qkv, model.ffn_hidden), ranks)
    root = fsdp_rank_params([model.vocab * d, seq * d, d, d], ranks)
    return layers * block + root


# FSDP2's gathers per microbatch: the forward's and the backward's (reshard_after_forward)
FSDP2_GATHERS_PER_MICROBATCH = 2
# bytes per sharded parameter the all-gather's copy-in reads and writes (FP32 shard cast to
# BF16, then copied into the all-gather input: module docstring)
FSDP2_COPY_IN_READ_BYTES = 4 + 2
FSDP2_COPY_IN_WRITE_BYTES = 2 + 2


def fsdp2_copies_s(tail: Sequence, layers: int, hw, level: str,
                   gathers: int = FSDP2_GATHERS_PER_MICROBATCH) -> float:
    """Seconds per microbatch of FSDP2's copies (module docstring) around the step's
    parameter all-gathers and gradient reduce-scatters in `tail` (the graph's per-step ops:
    `param_allgather` with the stage's BF16 parameters, `grad_reduce_scatter` with them in the
    reduce dtype, and their expert_ twins), each unit's a layer's share of the stage's
    `layers`: per layer and gather a copy-in over the shard and a copy-out over the layer's
    parameters, and per layer a chunk-cat of its gradients. 0 without the collectives."""
    from perfmodel.predict import predict_op
    ops = {o.name: o.op for o in tail}
    layers = max(1, int(layers))

    def copy_s(elements: float, read_bytes: int, write_bytes: int) -> float:
        # a copy as a stream of 1-byte elements: the bytes read and written per element
        n = int(math.ceil(elements))
        if n <= 0:
            return 0.0
        o = make_op("elementwise", elements=n, dtype="fp8", inputs=read_bytes,
                    outputs=write_bytes, flop_per_element=0.0)
        return predict_op(o, hw, level).time_s

    total = 0.0
    for prefix in ("", "expert_"):
        ag, rs = ops.get(f"{prefix}param_allgather"), ops.get(f"{prefix}grad_reduce_scatter")
        if ag is None or rs is None:
            continue
        params = ag.bytes / 2 / layers     # BF16 parameters of one unit
        reduce_bytes = 2 * rs.bytes / ag.bytes  # the reduce dtype's bytes per element
        per_gather = (copy_s(params / ag.gpus, FSDP2_COPY_IN_READ_BYTES,
                             FSDP2_COPY_IN_WRITE_BYTES)
                      + copy_s(params, 2, 2))
        chunk_cat = copy_s(params, 2, int(round(reduce_bytes)))
        total += layers * (gathers * per_gather + chunk_cat)
    return total


def train_metrics_s(ops: Sequence, passes: int, hw, level: str) -> float:
    """Seconds per microbatch of `passes` eager cross-entropy forwards over the logits of the
    graph's loss op (rows: the microbatch's tokens, cols: the vocabulary; module docstring)."""
    from perfmodel.predict import predict_op
    loss = next((o for o in ops if o.name == "loss"), None)
    if passes <= 0 or loss is None:
        return 0.0
    ce = make_op("cross_entropy", rows=loss.op.rows, vocab=loss.op.cols, dtype="bf16",
                 direction="fwd", implementation="eager")
    return passes * predict_op(ce, hw, level).time_s


def per_param_adamw_s(rank_params: int, elements: int, hw, level: str,
                      host_launch_s: float) -> float:
    """Seconds per step of Composer's DecoupledAdamW and FSDP's gradient clipping on a rank
    holding `rank_params` parameters of `elements` FP32 elements in all (module docstring): the
    optimizer's host operations and kernels one after the other (a sync per parameter), the
    clipping's host beside its kernels."""
    from perfmodel.predict import predict_op
    if elements <= 0:
        return 0.0

    def stream_s(reads: int, writes: int, flop: float) -> float:
        o = make_op("elementwise", elements=int(elements), dtype="fp32", inputs=reads,
                    outputs=writes, flop_per_element=flop)
        return predict_op(o, hw, level).time_s

    adamw = (stream_s(ADAMW_READS, ADAMW_WRITES, ADAMW_FLOP_PER_PARAM)
             + rank_params * ADAMW_HOST_OPS * host_launch_s)
    clip = max(stream_s(CLIP_READS, CLIP_WRITES, 3.0), rank_params * CLIP_HOST_OPS * host_launch_s)
    return adamw + clip


def microbatch_savings_s(fw: TrainingFramework, ops: Sequence, tp: int, sms: int, dtype: str,
                         microbatches: int, backward_at: int,
                         ep_overlap: float = 0.0,
                         host_launch_s: float = 0.0, hw=None,
                         level: str = "pipes", moe_synced: bool = True) -> dict[str, float]:
    """Per-microbatch seconds the framework takes off the graph's schedule, by mechanism;
    `ep_overlap`: the share of microbatches paired by the EP all-to-all overlap (0: off);
    `host_launch_s`: the host's seconds per launched kernel of the MoE host synchronisation
    (module docstring; 0: not modelled), whose cost enters as a negative "moe_host_sync"
    (`moe_synced` False: a padded dispatcher's layers never wait, moe_host.moe_host_extra_s);
    `hw`, `level`: where the framework's own kernels are priced (Composer's train metrics, a
    negative "train_metrics"; None: not priced)."""
    out = {}
    if fw.tp_comm_overlap:
        out["tp_comm_overlap"] = tp_overlap_savings_s(ops, tp, sms, dtype, backward_at)
    if fw.fp8_weight_cache:
        out["fp8_weight_cache"] = weight_cache_savings_s(ops, microbatches)
    if fw.norm_fused_casts:
        out["norm_fused_casts"] = fused_cast_savings_s(ops)
    if ep_overlap > 0:
        out["ep_overlap"] = ep_overlap_savings_s(ops, backward_at, ep_overlap)
    if fw.moe_host_sync and host_launch_s > 0 and any(o.op.name == "moe" for o in ops):
        out["moe_host_sync"] = -moe_host.moe_host_extra_s(
            ops, dtype, microbatches, host_launch_s, weight_cache=fw.fp8_weight_cache,
            fused_casts=fw.norm_fused_casts, synced=moe_synced)
    if fw.train_metric_passes and hw is not None:
        out["train_metrics"] = -train_metrics_s(ops, fw.train_metric_passes, hw, level)
    return out
