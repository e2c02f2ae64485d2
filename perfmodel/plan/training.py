"""Training steps as Megatron-LM / NeMo / torchtitan run them: step time, tokens/s, MFU (two FLOP
conventions) and time to train for a TP × CP × PP (× VP) × DP (× EP) deployment, with the memory
of weights, gradients, optimizer state and activations (`perfmodel.plan.memory.training_memory`).
A plan that does not fit in memory is refused unless asked for (`allow_oversubscribed`);
`search_training_plans` tries every layout of a GPU count and ranks those that fit.

The step is the training graph of `perfmodel.workloads.builder` (one microbatch of the last
pipeline stage, 1F1B or interleaved 1F1B with its bubble, or DeepSeek-V3's DualPipe
(`dualpipe_step_s`), gradient accumulation without a pipeline; the context-parallel ring overlapped with attention; the recomputation's extra
forward), scheduled by `perfmodel.schedule`, with the per-step data-parallel communication
placed as the frameworks overlap it (`dp_exposed_s`):

- ZeRO 0-2 / Megatron's distributed optimizer (`zero` <= 2; DistributedDataParallelConfig
  overlap_grad_reduce / overlap_param_gather, on in the NeMo recipes): gradients are
  reduce-scattered in buckets of max(40e6, 1e6·dp) parameters (megatron/core/distributed/
  distributed_data_parallel.py: `bucket_size = max(40000000, 1000000 * dp_group.size())`) as the
  last microbatch's backward produces them, and the parameters all-gathered bucket by bucket
  ahead of the next forward. With n buckets of time T_b becoming ready evenly over a window W (the
  microbatch's backward, or forward), the communication ends max(T_b, W/n + n·T_b − W) after the
  window: the last bucket is always exposed, and everything beyond the window too.
- ZeRO-3 / FSDP (`zero` = 3; PyTorch FSDP/FSDP2, Megatron-FSDP, DeepSpeed stage 3): every
  microbatch gathers each layer's parameters before its forward and again before its backward
  and reduce-scatters its gradients after it, prefetching one layer ahead (FSDP's default
  forward/backward prefetch): per pass the first layer's gather is exposed and each later layer
  exposes what its communication takes beyond the layer's compute. FSDP2 (the pytorch
  framework) adds its copies around each gather and reduce-scatter on the compute stream
  (perfmodel.plan.frameworks `fsdp2_copies_s`).
Pipeline splits (`split_pipeline`, docs/design.md "Pipeline splits"): the decoder layers of every
pp rank and virtual chunk as Megatron-Core builds them (even; the embedding and loss counted as
layers; first/last-stage counts; a layout string), refused in one line where its rules
(transformer_config.py:2294-2415) allow none; an uneven split is paced by its rank with the most
work and its memory sized on its fullest rank.
`overlap=False` leaves every data-parallel collective after the pipeline, unoverlapped (what
`perfmodel predict --phase train` shows for the graph).

What the framework adds (`framework`, perfmodel.plan.frameworks): Megatron-Core with Transformer
Engine overlaps the tensor-parallel reduce-scatters and all-gathers with the GEMMs beside them
(userbuffers: ring exchange, pipelined or bulk, as NeMo's tp_overlap_configs choose, with the
SMs the communication kernels take), casts an FP8 weight once per step rather than once per
microbatch, and fuses the input's FP8 cast into the norm before it; the PyTorch frameworks run
the graph as it is.

The clock: a step keeps every SM busy for minutes, at the board's power and thermal limit, below
the clock the kernel benchmarks sustain (Hardware.sustained_sm_clock_hz, fitted on seconds-long
GEMM loops). The planner runs the step's kernels at `sm_clock_fraction` of that clock
(`training_hardware`): TRAINING_SM_CLOCK_FRACTION, fitted on the Megatron frameworks' published
steps (perfmodel/fitted.yaml training.sm_clock_fraction, cross-validated by source in
`python -m perfmodel.validation.training_predict`). It also absorbs the per-kernel costs the
step's graph leaves out (launch gaps, the host's synchronisations, the small kernels of the
optimizer and loss) and so is a share of the whole step, not a clock anyone measured. Not
modelled: the SM and HBM share the overlapped data-parallel NCCL kernels take from the compute.

`recompute` (builder.RECOMPUTE): none (Megatron's default), selective (Megatron: the attention
core again, or the modules `recompute_modules` names: builder.RECOMPUTE_MODULES), op
(torchtitan's per-op SAC: every second GEMM and the non-GEMM ops again), full
(each layer's forward again). MFU: `mfu` counts 6·N + 12·L·h·s FLOP per token (PaLM, Chowdhery
et al. 2022, Appendix B), `mfu_megatron` Megatron-LM's `num_floating_point_operations`
(megatron/training/training.py: 6 FLOP per activated GEMM weight, the logit layer, no input
embedding, and 12·s·(heads·head_dim) per layer for the full, unmasked attention square); both
against the dense BF16 peak whatever the GEMM dtype, the frameworks' convention.
"""
from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

from perfmodel import fitted
from perfmodel.errors import InputError, check_result
from perfmodel.graph import DEFAULT_STREAM
from perfmodel.hardware import Hardware, hardware
from perfmodel.ops import op as make_op
from perfmodel.plan import frameworks, moe_host, optimizers
from perfmodel.plan.arguments import check_arguments
from perfmodel.plan.memory import DEFAULT_RECOMPUTE, DEFAULT_ZERO, MemoryFit, as_model, \
    memory_fit
from perfmodel.predict import predict, predict_op
from perfmodel.ops.deepep import INTERNODE_RANKS
from perfmodel.workloads.builder import RECOMPUTE, Workload, build_graph, \
    recompute_modules_problem
from perfmodel.workloads.models import ModelSpec

# Megatron-Core's default gradient bucket (distributed_data_parallel.py, quoted above):
# max(BUCKET_MIN_PARAMS, BUCKET_PARAMS_PER_DP_RANK · dp) parameters
BUCKET_MIN_PARAMS = 40_000_000
BUCKET_PARAMS_PER_DP_RANK = 1_000_000
# The search's pipeline bounds: deeper pipelines than 16 stages or more than 8 chunks per GPU
# leave the published recipes' range (NeMo's largest: PP16 for 405B-class models, VP <= 8) and
# only add bubble or point-to-point hops
MAX_SEARCH_PP = 16
MAX_SEARCH_VP = 8
# Larger micro-batches are tried only up to this many tokens per GPU and microbatch: beyond it
# the GEMMs are already large (m >= 8192) and a larger micro-batch only adds activations
SEARCH_MICROBATCH_TOKENS = 8192
# The SM clock a training step sustains as a share of the kernel benchmarks' sustained clock
# (Hardware.sustained_sm_clock_hz): fitted on the Megatron frameworks' published steps
# (perfmodel/fitted.yaml, its meaning and rows there)
TRAINING_CLOCK_KEY = "training.sm_clock_fraction"
TRAINING_SM_CLOCK_FRACTION = fitted.value(TRAINING_CLOCK_KEY)
DP_COLLECTIVES = ("grad_reduce_scatter", "param_allgather", "expert_grad_reduce_scatter",
                  "expert_param_allgather")
PIPELINE_SCHEDULES = ("1f1b", "dualpipe")
# Megatron-Core's MoE token dispatchers as the planner prices them (moe_token_dispatcher_type):
# alltoall (MoEAlltoAllTokenDispatcher: NCCL's all-to-all of top_k copies of every token) and
# deepep (the flex dispatcher with its DeepEP or HybridEP backend: DeepEP's normal kernels, a
# token crossing the network once per destination node; ops/deepep.py); auto: as Megatron-
# Bridge's performance recipes choose (`moe_dispatcher_of`)
MOE_DISPATCHERS = ("auto", "alltoall", "deepep")
# DualPipe (DeepSeek-V3 Technical Report, arXiv:2412.19437, §3.2.1-3.2.2): the communication
# each chunk's forward or backward starts (the expert all-to-all's dispatch and combine, the
# pipeline's sends) runs beside the computation of the chunk paired with it, on kernels that
# hold this many SMs ("only 20 SMs are sufficient to fully utilize the bandwidths of IB and
# NVLink", of the H800's 132); the computation gets the rest. The expert exchange is either
# kind the dispatcher runs (moe_dispatcher: the all-to-all, or DeepEP's kernels, which are the
# report's §3.2.2 node-limited dispatch)
DUALPIPE_COMM_SMS = 20
DUALPIPE_OVERLAPPED = ("alltoall", "deepep", "sendrecv")


# ---------------------------------------------------------------------------------------------
# Pipeline splits: which decoder layers each (pp rank, virtual chunk) builds, as Megatron-Core
# allows (NVIDIA/Megatron-LM@d98e8a64, megatron/core/transformer/transformer_config.py, the
# Bridge r0.6.0 pin cd4afffa unchanged in substance; docs/design.md "Pipeline splits")

SPLIT_MODES = ("auto", "even", "account")  # or "F,L" (first/last counts) or a layout string
_SPLIT_CITE = {
    "even": "arguments.py:985-997, transformer_block.py:175-178",
    "account": "transformer_config.py:2371-2415",
    "first_last": "transformer_config.py:2294-2369",
    "layout": "pipeline_parallel_layer_layout.py:41-151",
}


@dataclass(frozen=True)
class PipelineSplit:
    """The decoder layers of every pipeline stage: `chunks[r][v]` for pp rank r and virtual
    chunk v (Megatron-Core's get_num_layers_to_build, transformer_block.py:76-208). The
    embedding is on rank 0's chunk 0 and the output layer with the loss on the last rank's last
    chunk. `mode`: even, account_embedding_loss, account_embedding, account_loss (the
    embedding and/or loss counted as a layer: account_for_*_in_pipeline_split), first_last
    (num_layers_in_first/last_pipeline_stage) or layout (pipeline_model_parallel_layout)."""

    layers: int
    pp: int
    vp: int
    mode: str
    chunks: tuple[tuple[int, ...], ...]
    first: int | None = None
    last: int | None = None

    @property
    def rank_layers(self) -> tuple[int, ...]:
        """Decoder layers per pp rank (all its chunks)."""
        return tuple(sum(c) for c in self.chunks)

    @property
    def even(self) -> bool:
        """Paced by the last rank as the builder builds it (an even split; or "builder", a
        PyTorch framework's own split, not Megatron-Core's)."""
        return self.mode in ("even", "builder")

    def describe(self) -> str:
        """One line: the mode and the decoder layers of each rank's chunks, repeats folded,
        e.g. 'account_for_embedding+loss: 3+4+4+4 | 4+4+4+4 x6 | 4+4+4+3'."""
        name = {"even": "even", "account_embedding_loss": "account_for_embedding+loss",
                "account_embedding": "account_for_embedding", "account_loss": "account_for_loss",
                "first_last": f"first/last stage {self.first},{self.last}",
                "layout": "layout",
                "builder": "the framework's own (last rank ceil(layers/pp))"}[self.mode]
        runs: list[list] = []
        for c in self.chunks:
            text = "+".join(map(str, c))
            if runs and runs[-1][0] == text:
                runs[-1][1] += 1
            else:
                runs.append([text, 1])
        return f"{name}: " + " | ".join(t if k == 1 else f"{t} x{k}" for t, k in runs)

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "chunks": [list(c) for c in self.chunks],
                "rank_layers": list(self.rank_layers), "first": self.first, "last": self.last,
                "description": self.describe()}


def split_pipeline(layers: int, pp: int, vp: int = 1, split: str = "auto") -> PipelineSplit:
    """The decoder layers per (pp rank, virtual chunk) Megatron-Core builds for `layers`
    decoder layers over `pp` ranks with `vp` chunks each (docs/design.md "Pipeline splits").
    `split`: "even" (layers/pp a rank, /vp a chunk); "account" (account_for_embedding_in_
    pipeline_split and account_for_loss_in_pipeline_split: layers + 2 split evenly, rank 0's
    first chunk and the last rank's last chunk build one layer fewer; else only one of them, +1);
    "F,L" (num_layers_in_first/last_pipeline_stage = F, L, the middle ranks splitting the rest
    evenly); a pipeline_model_parallel_layout string ("Et*4|(t*4|)*14tL"); or "auto": even,
    else account (both, then embedding only, then loss only), else the first/last counts that
    give the fewest layers to the fullest rank (the first as full as the middle ones, the last
    lighter: it holds the output layer). Raises InputError in one line naming the rule broken
    (Megatron-Core's validation, transformer_config.py:2294-2415)."""
    for k, v in (("layers", layers), ("pp", pp), ("vp", vp)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise InputError(f"pipeline split: {k}: expected a positive integer, got {v!r}")
    if not isinstance(split, str) or not split.strip():
        raise InputError(f"pipeline_split: expected auto, even, account, 'first,last' or a "
                         f"layout string, got {split!r}")
    s = split.strip()
    where = f"{layers} decoder layers over PP{pp}" + (f" x VP{vp}" if vp > 1 else "")
    if s == "even":
        return _even_split(layers, pp, vp, where)
    if pp == 1:
        if s not in SPLIT_MODES:
            raise InputError(f"pipeline_split: {s!r} needs pipeline parallelism (pp > 1)")
        return PipelineSplit(layers, 1, 1, "even", ((layers,),))
    if s == "account":
        return _account_split(layers, pp, vp, where, both_only=False)
    if re.fullmatch(r"\s*\d+\s*,\s*\d+\s*", s):
        f, l_ = (int(x) for x in s.split(","))
        return _first_last_split(layers, pp, vp, f, l_, where)
    if s == "auto":
        try:
            return _even_split(layers, pp, vp, where)
        except InputError as even_error:
            try:
                return _account_split(layers, pp, vp, where, both_only=False)
            except InputError as account_error:
                try:
                    return _auto_first_last(layers, pp, vp, where)
                except InputError as fl_error:
                    raise InputError(
                        f"{where} cannot be split as Megatron-Core allows: "
                        + "; ".join(_reason(e) for e in (even_error, account_error, fl_error))
                        + "; pass a pipeline_model_parallel_layout (pipeline_split="
                          "'Et*..|..L')") from None
    if re.fullmatch(r"[EtLm|()*\d,\s]+", s):
        return _layout_split(layers, pp, vp, s, where)
    raise InputError(f"pipeline_split: expected auto, even, account, 'first,last' or a layout "
                     f"string such as 'Et*4|(t*4|)*14tL', got {split!r}")


def _builder_split(layers: int, pp: int, vp: int) -> PipelineSplit:
    """The split the training graph's builder assumes where Megatron-Core's rules do not
    apply: the last rank ceil(layers/pp) layers, the rest as even as they go (a PyTorch
    framework's pipeline; its own rule is not modelled)."""
    q, r = divmod(layers, pp)
    ranks = [q + (1 if i >= pp - r else 0) for i in range(pp)]
    return PipelineSplit(layers, pp, vp, "builder",
                         tuple(tuple(n // vp + (1 if v < n % vp else 0) for v in range(vp))
                               for n in ranks))


def _reason(e: InputError) -> str:
    """An InputError's text after its 'N decoder layers over PPp: ' prefix, its citation
    without the repeated 'Megatron-Core'."""
    return str(e).split(": ", 1)[-1].replace("(Megatron-Core ", "(")


def _even_split(layers: int, pp: int, vp: int, where: str) -> PipelineSplit:
    if layers % pp or (layers // pp) % vp:
        rule = (f"even split needs layers % pp == 0 ({layers} % {pp} = {layers % pp})"
                if layers % pp else
                f"even split needs layers/pp % vp == 0 ({layers // pp} % {vp} = "
                f"{(layers // pp) % vp})")
        raise InputError(f"{where}: {rule} (Megatron-Core {_SPLIT_CITE['even']})")
    c = layers // pp // vp
    return PipelineSplit(layers, pp, vp, "even", tuple((c,) * vp for _ in range(pp)))


def _account_split(layers: int, pp: int, vp: int, where: str,
                   both_only: bool) -> PipelineSplit:
    """account_for_embedding/loss_in_pipeline_split (transformer_block.py:148-158, 188-206):
    both, else the embedding only, else the loss only."""
    tried = []
    for mode, emb, loss in (("account_embedding_loss", 1, 1), ("account_embedding", 1, 0),
                            ("account_loss", 0, 1))[:1 if both_only else 3]:
        units = layers + emb + loss
        if units % pp or (units // pp) % vp or units // pp // vp < 1:
            tried.append(f"+{emb + loss}")
            continue
        c = units // pp // vp
        chunks = [[c] * vp for _ in range(pp)]
        chunks[0][0] -= emb
        chunks[-1][-1] -= loss
        if min(min(r) for r in chunks) < 0:
            tried.append(f"+{emb + loss}")
            continue
        return PipelineSplit(layers, pp, vp, mode, tuple(tuple(r) for r in chunks))
    units = " and ".join(sorted({str(layers + int(t)) for t in tried}, reverse=True))
    raise InputError(f"{where}: account_for_embedding/loss needs the layers + 2 (or + 1) units "
                     f"% pp == 0 and the units a rank % vp == 0 ({units} units do not split; "
                     f"Megatron-Core {_SPLIT_CITE['account']})")


def _first_last_problem(layers: int, pp: int, vp: int, f: int, l_: int) -> str | None:
    """The first of Megatron-Core's rules for num_layers_in_first/last_pipeline_stage that
    (f, l_) breaks (transformer_config.py:2294-2369), or None."""
    if pp < 2:
        return "first/last stage counts need pp >= 2"
    if f < 1 or l_ < 1:
        return ("num_layers_in_first/last_pipeline_stage must be larger than 0 "
                "(transformer_config.py:2304, :2323)")
    if f % vp or l_ % vp:
        return (f"first/last stage counts {f},{l_} must be divisible by the virtual pipeline "
                f"degree {vp} (transformer_config.py:2307-2335)")
    middle, ranks = layers - f - l_, pp - 2
    if middle < 0 or (middle == 0) != (ranks == 0):
        return (f"Mismatch: {middle} middle layers remaining but {ranks} middle PP stages "
                f"available (transformer_config.py:2341-2345)")
    if ranks and middle % ranks:
        return (f"the {middle} middle layers must be divisible by the {ranks} middle pipeline "
                f"ranks (transformer_config.py:2349-2353)")
    if ranks and (middle // ranks) % vp:
        return (f"the {middle // ranks} layers on each middle rank must be divisible by the "
                f"virtual pipeline degree {vp} (transformer_config.py:2357-2369)")
    return None


def _first_last_split(layers: int, pp: int, vp: int, f: int, l_: int,
                      where: str) -> PipelineSplit:
    problem = _first_last_problem(layers, pp, vp, f, l_)
    if problem:
        raise InputError(f"{where} with first/last stage counts {f},{l_}: {problem}")
    mid = (layers - f - l_) // (pp - 2) if pp > 2 else 0
    ranks = [f] + [mid] * (pp - 2) + [l_]
    return PipelineSplit(layers, pp, vp, "first_last",
                         tuple((n // vp,) * vp for n in ranks), f, l_)


def _auto_first_last(layers: int, pp: int, vp: int, where: str) -> PipelineSplit:
    """The valid first/last counts whose fullest rank holds the fewest layers; of those, the
    first rank fullest (the last holds the output layer) — Megatron-Bridge's DeepSeek-V3 splits
    (16|16|16|13 at PP4, 8|6x8|5 at PP8, 4|14x4|1 at PP16)."""
    best = None
    for f in range(vp, layers, vp):
        for l_ in range(vp, layers - f + 1, vp):
            if _first_last_problem(layers, pp, vp, f, l_) is None:
                mid = (layers - f - l_) // (pp - 2) if pp > 2 else 0
                key = (max(f, l_, mid), -f)
                if best is None or key < best[0]:
                    best = (key, f, l_)
    if best is None:
        raise InputError(f"{where}: no first/last stage counts satisfy Megatron-Core's rules "
                         f"(each a multiple of vp, the middle ranks' layers a multiple of vp; "
                         f"{_SPLIT_CITE['first_last']})")
    return _first_last_split(layers, pp, vp, best[1], best[2], where)


def _expand_layout(text: str) -> str:
    """A layout string with its repetitions written out: 'x*n' and '(...)*n'; commas and
    spaces are cosmetic (pipeline_parallel_layer_layout.py:283-321)."""
    s = re.sub(r"[,\s]", "", text)
    pattern = re.compile(r"\(([^()]*)\)\*(\d+)")
    while "(" in s:
        new = pattern.sub(lambda m: m.group(1) * int(m.group(2)), s)
        if new == s:
            raise InputError(f"pipeline_split: unbalanced parentheses in layout {text!r}")
        s = new
    return re.sub(r"([EtLm])\*(\d+)", lambda m: m.group(1) * int(m.group(2)), s)


def _layout_split(layers: int, pp: int, vp: int, text: str, where: str) -> PipelineSplit:
    """A pipeline_model_parallel_layout (pipeline_parallel_layer_layout.py:40-151): stages
    separated by '|', vp-major (stage i is rank i % pp, chunk i // pp)."""
    s = _expand_layout(text)
    if re.search(r"[^EtLm|]", s):
        raise InputError(f"pipeline_split: layout {text!r}: expected E, t, L, m, '|', "
                         f"'x*n' and '(...)*n'")
    stages = s.split("|")
    cite = f"Megatron-Core {_SPLIT_CITE['layout']}"
    problem = None
    if len(stages) % pp:
        problem = f"{len(stages)} stages are not a multiple of PP{pp}"
    elif len(stages) // pp != vp:
        problem = (f"{len(stages)} stages make VP{len(stages) // pp}, which conflicts with "
                   f"VP{vp} (transformer_config.py:2274-2288)")
    elif "m" in s:
        problem = "MTP layers (m): the model files have none"
    elif s.count("E") != 1 or not stages[0].startswith("E"):
        problem = "E (the embedding) must come first, once"
    elif s.count("L") != 1 or not stages[-1].endswith("L"):
        problem = "L (the loss) must come last, once"
    elif s.count("t") != layers:
        problem = f"it places {s.count('t')} decoder layers (t), the model has {layers}"
    if problem:
        raise InputError(f"{where} with layout {text!r}: {problem} ({cite})")
    chunks = tuple(tuple(stages[v * pp + r].count("t") for v in range(vp)) for r in range(pp))
    return PipelineSplit(layers, pp, vp, "layout", chunks)


@dataclass(frozen=True)
class TrainingPlan:
    model: str
    hardware: str
    tp: int
    pp: int
    dp: int
    dtype: str
    global_batch: int
    seq: int
    step_time_s: float
    tokens_per_s: float
    mfu: float
    memory: MemoryFit
    ep: int = 1
    cp: int = 1
    vp: int = 1
    microbatches: int = 1
    recompute: str = DEFAULT_RECOMPUTE
    zero: int = DEFAULT_ZERO
    mfu_megatron: float = 0.0
    pipeline_s: float = 0.0          # the microbatches with the bubble
    dp_exposed_s: float = 0.0        # data-parallel communication not hidden behind compute
    optimizer_s: float = 0.0
    breakdown: dict[str, float] = field(default_factory=dict)
    # the pipeline split (split_pipeline): its one-line description, the decoder layers of
    # every (pp rank, virtual chunk), and the rank whose work paces the pipeline
    pipeline_split: str = ""
    stage_layers: tuple[tuple[int, ...], ...] = ()
    pacing_rank: int = 0
    # the optimizer (plan.optimizers): its name, the distributed optimizer that runs it
    # (elementwise, layerwise, or replicated at ZeRO 0) and, in optimizer_s, its step with the
    # communication it adds
    optimizer: str = "adamw"
    distributed_optimizer: str = "elementwise"

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_s / self.gpus

    @property
    def micro_batch(self) -> int:
        """Sequences per microbatch."""
        return self.global_batch // (self.dp * self.microbatches)

    @property
    def layout(self) -> str:
        parts = [f"TP{self.tp}"] + ([f"CP{self.cp}"] if self.cp > 1 else []) \
            + ([f"EP{self.ep}"] if self.ep > 1 else []) + [f"PP{self.pp}"] \
            + ([f"VP{self.vp}"] if self.vp > 1 else []) + [f"DP{self.dp}"]
        return " ".join(parts)

    def time_to_train_s(self, tokens: float) -> float:
        return tokens / self.tokens_per_s

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["memory"] = self.memory.to_dict()
        d.update(gpus=self.gpus, tokens_per_s_per_gpu=self.tokens_per_s_per_gpu,
                 micro_batch=self.micro_batch, layout=self.layout)
        return d


def model_flop_per_token(model: ModelSpec, seq: int) -> float:
    """Training FLOP per token: 6·N (activated params) + 12·L·h·s for attention (PaLM,
    Chowdhery et al. 2022, Appendix B)."""
    return 6 * model.params(active=True) + 12 * model.layers * model.hidden * seq


def megatron_flop_per_token(model: ModelSpec, seq: int) -> float:
    """Megatron-LM's model FLOP per token (megatron/training/training.py,
    num_floating_point_operations: 3 passes × 2 FLOP per multiply-add): 6 per activated GEMM
    weight of the layers (QKV, output, FFN or the routed top-k and shared experts), 6·V·h for
    the logit layer (the input embedding is a lookup, not counted), and per layer
    3 · 2·2·s·heads·(d_qk + d_v)/2 = 6·s·heads·(d_qk + d_v) for QKᵀ and PV over the whole s × s
    square (causal masking not discounted)."""
    m = model
    layers = sum(m.attention_params() + m.ffn_params(i, active=True) for i in range(m.layers))
    if m.is_mla:
        d_qk, d_v = m.qk_nope_head_dim + m.qk_rope_head_dim, m.v_head_dim
    else:
        d_qk = d_v = m.head_dim
    attention = 6 * m.layers * seq * m.heads * (d_qk + d_v)
    return 6 * layers + 6 * m.vocab * m.hidden + attention


def bucket_params(dp: int) -> int:
    """Megatron-Core's gradient bucket in parameters for a data-parallel group of `dp`."""
    return max(BUCKET_MIN_PARAMS, BUCKET_PARAMS_PER_DP_RANK * dp)


def bucketed_exposed_s(total_s: float, buckets: int, window_s: float) -> float:
    """Time a bucketed collective runs past its compute window (module docstring): `buckets`
    equal buckets of total_s/buckets each become ready evenly over `window_s` and go out one
    after another; the last is always exposed, and whatever does not fit in the window."""
    n = max(1, buckets)
    t_b = total_s / n
    return max(t_b, window_s / n + total_s - window_s)


def prefetched_exposed_s(comm_per_layer_s: float, compute_per_layer_s: float,
                         layers: int) -> float:
    """FSDP's one-layer-ahead prefetch over `layers` layers (module docstring): the first
    layer's communication is exposed, each later one by what it takes beyond its layer's
    compute."""
    return comm_per_layer_s + max(0, layers - 1) * max(0.0, comm_per_layer_s
                                                       - compute_per_layer_s)


def checked_recompute_modules(recompute: str | None, modules, model: ModelSpec
                              ) -> tuple[str, ...] | None:
    """`modules` as a tuple (a list taken), or InputError naming recompute_modules where they
    cannot run with `recompute` on `model` (builder.recompute_modules_problem)."""
    if isinstance(modules, list):
        modules = tuple(modules)
    why = recompute_modules_problem(recompute, modules, model)
    if why:
        raise InputError(f"recompute_modules: {why}")
    return modules


def plan_training(model: ModelSpec | str, hw: Hardware | str, batch: int, seq: int = 4096,
                  tp: int = 1, pp: int = 1, dp: int = 1, dtype: str = "bf16", ep: int = 1,
                  microbatches: int | None = None, virtual_stages: int = 1,
                  level: str = "pipes", recompute: str = DEFAULT_RECOMPUTE,
                  zero: int = DEFAULT_ZERO, allow_oversubscribed: bool = False,
                  cp: int = 1, overlap: bool = True,
                  grad_reduce_dtype: str = "bf16",
                  attention_kernel: str | None = None,
                  framework: str = "megatron",
                  sm_clock_fraction: float | None = None,
                  pipeline_schedule: str = "1f1b",
                  pipeline_split: str = "auto",
                  moe_dispatcher: str = "auto",
                  ep_overlap: bool = False,
                  bf16_layers: tuple[int, int] = (0, 0),
                  optimizer: str = "adamw",
                  distributed_optimizer: str | None = None,
                  moe_host_launch_s: float | None = None,
                  recompute_modules: tuple[str, ...] | None = None,
                  moe_capacity_factor: float | None = None) -> TrainingPlan:
    """One training step; `batch` sequences per model replica (global batch = batch·dp), each
    split over `cp` context-parallel ranks (GPUs = tp·cp·pp·dp). Raises InputError with the
    memory per GPU when the plan does not fit in the usable HBM, unless `allow_oversubscribed`
    (then `memory.fits` is False). `recompute`, `zero`, `overlap` and the MFU conventions:
    module docstring. `grad_reduce_dtype`: the gradient reduce-scatter's dtype, bf16
    (Megatron-Core's default) or fp32 (FSDP's reduce_dtype in torchtitan: torchtitan/config/
    configs.py `mixed_precision_reduce = "float32"`; Composer's mixed_precision DEFAULT:
    composer/distributed/mosaic_parallelism.py, get_mixed_precision, `reduce_dtype =
    torch.float32`): twice the bytes on the wire. `attention_kernel`: the attention's kernel
    family (ops.attention KERNELS but TensorRT-LLM's inference "trtllm"; None: the GPU's
    default design), as the framework trains with it (Transformer Engine's cuDNN attention,
    FlashAttention-2 through flash-attn or PyTorch's SDPA). `framework`
    (perfmodel.plan.frameworks.FRAMEWORKS): megatron (Megatron-Core + Transformer Engine: TP
    communication overlapped with the GEMMs, FP8 weights cast once per step, casts fused into
    the norms) or pytorch (torchtitan, FSDP: the graph as it is). `sm_clock_fraction`: the SM
    clock of the step as a share of the GPU's sustained clock (None: the fitted
    TRAINING_SM_CLOCK_FRACTION; module docstring); level "roofline" keeps the datasheet clocks.
    `pipeline_schedule`: "1f1b" (interleaved with `virtual_stages` > 1) or "dualpipe"
    (DeepSeek-V3's bidirectional schedule, `dualpipe_step_s`: an even pp, one virtual stage,
    an even number of microbatches). `pipeline_split`: how the decoder layers are split over
    the pp ranks and their virtual chunks (split_pipeline: "auto", "even", "account",
    "first,last" or a layout string); InputError naming Megatron-Core's rule where the split is
    not possible. An uneven split is paced by its slowest rank (`_pacing_rank`): the step takes
    that rank's microbatch time per microbatch and in the bubble; memory is sized on its
    fullest rank. `moe_dispatcher` (MoE with ep > 1): Megatron-Core's token dispatcher,
    "alltoall" or "deepep" (the flex dispatcher with DeepEP or HybridEP: MOE_DISPATCHERS);
    "auto" as the performance recipes choose (`moe_dispatcher_of`); `ep_overlap`: Megatron-
    Core's EP all-to-all overlap (`overlap_moe_expert_parallel_comm`, off by default;
    perfmodel.plan.frameworks `ep_overlap_layer_s`), which needs ep > 1 and no full
    recomputation. The recipes set it for some cross-node layouts, but with it the measured
    Qwen3-235B H100 EP 32 rows go from 10-16 % too slow to 86 % too fast, so it stays off
    unless asked. `bf16_layers` (a quantized recipe): the (first, last) decoder layers whose
    linears stay in BF16 (Megatron-Core's first_last_layers_bf16; none by default, as
    Megatron-Core and the Megatron-Bridge performance recipes run). `optimizer`: adamw (the
    graph's fused Adam kernel), muon or soap (perfmodel.plan.optimizers: Newton–Schulz or SOAP's
    GEMMs at each hidden matrix's shape, the rest on AdamW); `distributed_optimizer`:
    elementwise (Megatron's distributed optimizer) or layerwise (whole matrices per
    data-parallel rank, the step paced by the most loaded rank); None: elementwise for AdamW,
    layerwise for Muon and SOAP. `moe_host_launch_s`: the host's seconds per launched kernel
    of a MoE step (perfmodel.plan.moe_host: each dropless MoE layer's host waits for the GPU,
    then issues the layer's kernels, a quantize and a GEMM per local expert); None: the fitted
    HOST_LAUNCH_S, 0: the host never paces the GPU (a run whose MoE layers are CUDA-graphed).
    `recompute_modules` (with recompute "selective"): Megatron-Core's recompute_modules, a
    tuple of builder.RECOMPUTE_MODULES names (core_attn, moe_act, layernorm, mla_up_proj, mlp,
    moe, shared_experts): each listed module's forward runs again before its backward and its
    layer keeps only the module's input (plan.memory.recomputed_bytes_per_token); None: the
    attention core, Megatron-Core's default. `moe_capacity_factor` (MoE): Megatron-Core's
    token dropping with its experts' input padded to the capacity (moe_expert_capacity_factor
    with moe_pad_expert_input_to_capacity, as Megatron-Bridge's apply_moe_token_drop sets them:
    training/utils/moe_token_drop.py, 0.3.0, defaults 1.0 and padded): every expert computes
    ceil(tokens · top_k / experts · factor) rows per rank (builder Workload.moe_capacity_factor),
    and the dispatcher knows its splits without the host waiting for the GPU (megatron-core
    0.14.0 token_dispatcher.py: `drop_and_pad` leaves cuda_sync_point "no_sync"), so the MoE
    host synchronisation (perfmodel.plan.moe_host) does not apply (its issue time still may,
    where it outruns the GPU); the all-to-all dispatcher
    only (the flex dispatcher refuses padding: token_dispatcher.py MoEFlexTokenDispatcher);
    None: dropless."""
    check_arguments(plan_training, locals())  # types and ranges, one line per problem
    m, h = as_model(model), hardware(hw)
    recompute_modules = checked_recompute_modules(recompute, recompute_modules, m)
    fw = frameworks.framework(framework)
    run_hw = training_hardware(h, sm_clock_fraction)  # validates the fraction at any level
    host_launch_s = moe_host.launch_seconds(moe_host_launch_s)  # or its one-line refusal
    if level == "roofline":  # the speed-of-light baseline: datasheet clocks, no host
        run_hw, host_launch_s = h, 0.0
    if ep > 1 and (tp * dp * cp) % ep:
        raise InputError(f"ep: {ep} must divide tp·dp·cp = {tp * dp * cp} (experts are spread "
                         f"over the data-, context- and tensor-parallel ranks)")
    if recompute not in RECOMPUTE:
        raise InputError(f"recompute: expected one of {', '.join(RECOMPUTE)}, got {recompute!r}")
    moe_dispatcher = moe_dispatcher_of(m, h, ep, moe_dispatcher, moe_capacity_factor)
    if moe_capacity_factor is not None and moe_dispatcher == "deepep":
        raise InputError("moe_capacity_factor: Megatron-Core's flex dispatcher (moe_dispatcher "
                         "deepep) does not pad experts to a capacity; use moe_dispatcher "
                         "alltoall")
    why = ep_overlap_refusal(ep, recompute, pipeline_schedule) if ep_overlap else None
    if why:
        raise InputError(f"ep_overlap: Megatron-Core's EP all-to-all overlap needs {why}")
    if pipeline_schedule not in PIPELINE_SCHEDULES:
        raise InputError(f"pipeline_schedule: expected one of {', '.join(PIPELINE_SCHEDULES)}, "
                         f"got {pipeline_schedule!r}")
    if pipeline_schedule == "dualpipe":
        n_mb = microbatches if microbatches is not None else batch
        if pp < 2 or pp % 2 or virtual_stages != 1 or n_mb % 2:
            raise InputError(f"pipeline_schedule: dualpipe needs an even pp >= 2, "
                             f"virtual_stages 1 and an even number of microbatches (got pp "
                             f"{pp}, virtual_stages {virtual_stages}, microbatches {n_mb})")
    try:
        split = split_pipeline(m.layers, pp, virtual_stages if pp > 1 else 1, pipeline_split)
    except InputError:
        if fw.name == "megatron" or pipeline_split != "auto":
            raise
        # the PyTorch frameworks split their own way (not Megatron-Core's rules): the last
        # rank as the builder has it, ceil(layers/pp) layers with the output layer
        split = _builder_split(m.layers, pp, virtual_stages)
    w = Workload("train", batch, seq, None, tp, ep, pp, dp, dtype, microbatches, virtual_stages,
                 recompute=recompute, cp=cp, attention_kernel=attention_kernel,
                 recompute_modules=recompute_modules, moe_capacity_factor=moe_capacity_factor)
    dist_opt = optimizers.check_optimizer(optimizer, distributed_optimizer, zero)
    mem = memory_fit(m, h, w, zero, stage_layers=_memory_stage_layers(split),
                     optimizer=optimizer, distributed_optimizer=distributed_optimizer)
    if not (mem.fits or allow_oversubscribed):
        raise InputError(f"{m.name} train on {h.name} (batch {batch}, seq {seq}, tp {tp}, "
                         f"cp {cp}, pp {pp}, vp {virtual_stages}, dp {dp}, ep {ep}, zero {zero}, "
                         f"recompute {recompute}): {mem.summary()}; shard more (tp, cp, pp, dp "
                         f"with zero >= 2), use recompute='full' or more microbatches, or pass "
                         f"allow_oversubscribed=True")
    def stage(model: ModelSpec):
        """The builder's graph of the last rank of `model` (its last ceil(layers/pp) layers, the
        output layer and loss), predicted, with the framework's savings per microbatch."""
        g = build_graph(model, "train", batch=batch, seq=seq, tp=tp, ep=ep, pp=pp, dp=dp,
                        dtype=dtype, microbatches=microbatches, virtual_stages=virtual_stages,
                        recompute=recompute, cp=cp, grad_reduce_dtype=grad_reduce_dtype,
                        attention_kernel=attention_kernel, bf16_layers=bf16_layers,
                        recompute_modules=recompute_modules,
                        moe_capacity_factor=moe_capacity_factor,
                        **({"moe_exchange": "deepep"} if moe_dispatcher == "deepep" else {}))
        pred = predict(g, run_hw, level)
        k = g.pipeline.per_microbatch_ops
        # what the framework hides or removes from each microbatch (perfmodel.plan.frameworks)
        paired = (frameworks.ep_overlap_paired_share(w.n_microbatches, pp, virtual_stages)
                  if ep_overlap else 0.0)
        saved = frameworks.microbatch_savings_s(fw, pred.ops[:k], tp, h.sm_count, dtype,
                                                w.n_microbatches, g.meta["backward_op"],
                                                ep_overlap=paired,
                                                host_launch_s=host_launch_s,
                                                hw=run_hw, level=level,
                                                # a padded dispatcher never waits (docstring)
                                                moe_synced=moe_capacity_factor is None)
        if zero == 3 and fw.fsdp2_copies:  # a cost: a negative saving
            copies = frameworks.fsdp2_copies_s(g.nodes[k:], math.ceil(model.layers / pp),
                                               run_hw, level)
            if copies:
                saved["fsdp2_copies"] = -copies
        return g, pred, saved

    g, pred, saved = stage(m)
    mb = w.n_microbatches
    k = g.pipeline.per_microbatch_ops
    mb_s = pred.microbatch_time_s - sum(saved.values())
    # an uneven split: the rank with the most work paces the pipeline (docs/design.md
    # "Pipeline splits"); the graph is rebuilt for its layer count where that differs from
    # the builder's ceil(layers/pp), and loses the output layer and loss (or gains the
    # embedding) where the pacing rank is not the last
    pace, n_pace, head_s, emb_s = _pacing_rank(split, pred.ops[:k], mb_s,
                                               g.meta["tokens_per_microbatch"], m, run_hw,
                                               level)
    if n_pace != math.ceil(m.layers / pp) and n_pace > 0:
        g, pred, saved = stage(dataclasses.replace(m, layers=n_pace * pp))
        k = g.pipeline.per_microbatch_ops
        mb_s = pred.microbatch_time_s - sum(saved.values())
        head_s = _head_s(pred.ops[:k])
    stage_ops = list(pred.ops[:k])
    if pace != pp - 1:
        mb_s -= head_s
        stage_ops = [o for o in stage_ops if o.name not in HEAD_OPS]
    if pace == 0 and pp > 1:
        mb_s += emb_s
    bwd_at = g.meta["backward_op"]
    tail = {o.name: o for o in pred.ops[k:]}
    # the bubble is (pp − 1)/vp microbatch times of the pacing rank, so it shrinks with the
    # framework's savings
    bubble_s = pred.pipeline_bubble_s * mb_s / pred.microbatch_time_s
    hidden = 0.0
    if pipeline_schedule == "dualpipe":
        pair_s, bubble_s = dualpipe_step_s(pred.ops[:k], bwd_at, mb_s, pp, h.sm_count)
        hidden, mb_s = mb_s - pair_s, pair_s
    pipeline_s = mb_s * mb + bubble_s
    optimizer_s = tail["optimizer"].time_s if "optimizer" in tail else 0.0
    if fw.per_param_optimizer and optimizer == "adamw" and "optimizer" in tail:
        # Composer's DecoupledAdamW, a host sync per parameter (perfmodel.plan.frameworks)
        optimizer_s = frameworks.per_param_adamw_s(
            frameworks.mpt_rank_params(m, seq, max(1, n_pace), dp * cp if zero >= 1 else 1),
            tail["optimizer"].op.elements, run_hw, level, host_launch_s)
    opt = None
    if optimizer != "adamw":  # Muon or SOAP instead of the graph's Adam (plan.optimizers)
        opt = optimizers.optimizer_step(m, g, run_hw, level, optimizer, dist_opt, tp, ep,
                                        w.moe_tp, bucket_params(dp * cp))
        optimizer_s = opt.time_s
    comm = {n: tail[n].time_s for n in DP_COLLECTIVES if n in tail}
    if not overlap:
        dp_exposed = sum(comm.values())
        if zero == 3 and dp * cp > 1:
            dp_exposed += _zero3_extra_comm_s(g, run_hw, level, mb)
    else:
        fwd_s = sum(o.time_s for o in pred.ops[:bwd_at])
        bwd_s = sum(o.time_s for o in pred.ops[bwd_at:k])
        ops = {n.name: n.op for n in g.nodes[k:]}
        layers = max(1, n_pace)
        dp_exposed = 0.0
        for prefix in ("", "expert_"):
            rs, ag = f"{prefix}grad_reduce_scatter", f"{prefix}param_allgather"
            if rs not in ops:
                continue
            if zero == 3:
                # per layer and microbatch: gather for the forward, gather again and
                # reduce-scatter for the backward, each a layer ahead of the compute
                ag_l = _resized_s(ops[ag], ops[ag].bytes / layers, run_hw, level)
                rs_l = _resized_s(ops[rs], ops[rs].bytes / layers, run_hw, level)
                per_mb = (prefetched_exposed_s(ag_l, fwd_s / layers, layers)
                          + prefetched_exposed_s(ag_l + rs_l, bwd_s / layers, layers))
                dp_exposed += mb * per_mb
            else:
                group = ops[rs].gpus
                # buckets hold parameters: count them from the BF16 all-gather (the
                # reduce-scatter's bytes depend on its dtype)
                n = max(1, math.ceil(ops[ag].bytes / 2 / bucket_params(group)))
                rs_b = _resized_s(ops[rs], ops[rs].bytes / n, run_hw, level)
                ag_b = _resized_s(ops[ag], ops[ag].bytes / n, run_hw, level)
                dp_exposed += bucketed_exposed_s(n * rs_b, n, bwd_s)
                dp_exposed += bucketed_exposed_s(n * ag_b, n, fwd_s)
    step = pipeline_s + dp_exposed + optimizer_s
    tokens = batch * seq * dp
    gpus = tp * pp * dp * cp
    peak = step * gpus * h.tensor_peak_flop_per_s("bf16")
    mfu = model_flop_per_token(m, seq) * tokens / peak
    mfu_megatron = megatron_flop_per_token(m, seq) * tokens / peak
    breakdown = _breakdown(stage_ops, mb, bubble_s)
    if pace == 0 and pp > 1:
        breakdown["embedding"] = emb_s * mb
    breakdown.update({k_: -v * mb for k_, v in saved.items()})
    if pipeline_schedule == "dualpipe":
        breakdown["dualpipe_overlap"] = -hidden * mb
    breakdown.update(dp_exposed=dp_exposed, optimizer=optimizer_s)
    if opt is not None:  # the optimizer's kernels and the communication it adds
        breakdown.update(optimizer=opt.compute_s, optimizer_comm=opt.comm_s)
    # (the breakdown holds the framework's savings as negative terms: only its sum is checked)
    check_result(f"plan_training({m.name})", {
        "step_time_s": step, "tokens_per_s": tokens / step, "mfu": mfu,
        "mfu_megatron": mfu_megatron, "pipeline_s": pipeline_s, "dp_exposed_s": dp_exposed,
        "optimizer_s": optimizer_s, "memory": mem.total_bytes,
        "breakdown (sum)": sum(breakdown.values())})
    return TrainingPlan(m.name, h.name, tp, pp, dp, dtype, batch * dp, seq, step,
                        tokens / step, mfu, mem, ep, cp, virtual_stages, mb, recompute, zero,
                        mfu_megatron, pipeline_s, dp_exposed, optimizer_s, breakdown,
                        split.describe(), split.chunks, pace, optimizer=optimizer,
                        distributed_optimizer=dist_opt)


# The ops of the output layer and loss in the builder's training graph (build_graph: on the
# last pipeline rank only)
HEAD_OPS = frozenset(("final_norm", "lm_head", "loss", "lm_head.dgrad", "lm_head.wgrad",
                      "final_norm_bwd"))


def _head_s(ops) -> float:
    """Seconds per microbatch of the output layer and loss on the compute stream."""
    return sum(o.time_s for o in ops if o.name in HEAD_OPS and o.stream == DEFAULT_STREAM)


def _memory_stage_layers(split: PipelineSplit) -> int | None:
    """The decoder layers memory is sized on: None (layers/pp) for an even split, else the
    fullest rank's."""
    return None if split.even else max(split.rank_layers)


def _pacing_rank(split: PipelineSplit, ops, microbatch_s: float, tokens: int,
                 model: ModelSpec, hw: Hardware, level: str) -> tuple[int, int, float, float]:
    """(rank, its decoder layers, output layer + loss seconds, embedding seconds) of the
    pipeline rank with the most work per microbatch: its layers at the graph's mean layer time
    (the last rank's graph: microbatch time less the output layer and loss, over its
    ceil(layers/pp) layers), plus the embedding's lookup and gradient on rank 0 and the output
    layer and loss on the last. The last rank wins a tie, so an even split is paced by the
    graph as built."""
    ranks = split.rank_layers
    last = len(ranks) - 1
    head_s = _head_s(ops)
    if split.even:
        return last, ranks[last], head_s, 0.0
    n_graph = max(1, math.ceil(model.layers / split.pp))
    layer_s = max(0.0, microbatch_s - head_s) / n_graph
    # the input embedding: a row gather forward, a scatter-add of its gradient backward
    emb_s = 2 * predict_op(make_op("elementwise", elements=tokens * model.hidden, dtype="bf16",
                                   flop_per_element=0), hw, level).time_s
    work = [n * layer_s + (emb_s if r == 0 else 0.0) + (head_s if r == last else 0.0)
            for r, n in enumerate(ranks)]
    pace = max(range(len(ranks)), key=lambda r: (work[r], r))
    return pace, ranks[pace], head_s, emb_s


def ep_overlap_refusal(ep: int, recompute: str, pipeline_schedule: str = "1f1b") -> str | None:
    """What Megatron-Core's EP all-to-all overlap needs that this layout lacks, None if it can
    run (core 0.16.1 transformer/transformer_config.py:1852-1906)."""
    if ep < 2:
        return "ep > 1 (it overlaps the expert-parallel all-to-all)"
    if recompute in ("full", "op"):
        return f"no full recomputation (recompute {recompute!r})"
    if pipeline_schedule == "dualpipe":
        return "the 1f1b schedule (dualpipe overlaps its own way)"
    return None


def moe_dispatcher_of(model: ModelSpec, hw: Hardware, ep: int, dispatcher: str = "auto",
                      capacity_factor: float | None = None) -> str:
    """The MoE token dispatcher a step runs: as given, or for "auto" as Megatron-Bridge's
    performance recipes choose it. Their DeepSeek-V3 recipes run the flex dispatcher with DeepEP
    or HybridEP (H100 at EP 64 and B200 at EP 32 across 8-GPU nodes: Megatron-Bridge r0.1.0-
    r0.5.0 scripts/performance configs), whose internode kernels send a token over the network
    once per destination node: built for DeepSeek's node-limited, group-limited gate
    (arXiv:2412.19437 §2.1.2, at most 4 nodes a token). Their Qwen3 and GPT-OSS recipes keep the
    all-to-all. So "auto" takes DeepEP for a group-limited gate whose expert-parallel group spans
    NVLink domains where DeepEP's internode kernels run it, the all-to-all otherwise; and the
    all-to-all for a padded capacity (`capacity_factor`: plan_training moe_capacity_factor),
    which Megatron-Bridge's apply_moe_token_drop asserts."""
    if dispatcher != "auto":
        return dispatcher
    if capacity_factor is not None:
        return "alltoall"
    groups, _ = model.group_limit
    spans = ep > (hw.nvlink_domain_gpus or 8)
    return "deepep" if spans and groups > 1 and ep in INTERNODE_RANKS else "alltoall"


def training_hardware(hw: Hardware, sm_clock_fraction: float | None = None) -> Hardware:
    """The GPU as a training step runs it: its SM clock held at `sm_clock_fraction` (None: the
    fitted TRAINING_SM_CLOCK_FRACTION) of its sustained clock under dense MMA load, a locked
    clock's too (the fraction also stands for the step's per-kernel costs; module
    docstring)."""
    f = TRAINING_SM_CLOCK_FRACTION if sm_clock_fraction is None else sm_clock_fraction
    if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f <= 1:
        raise InputError(f"sm_clock_fraction: expected a number in (0, 1], got {f!r}")
    return hw.locked(min(hw.sustained_sm_clock_hz * f, hw.max_sm_clock_hz))


def dualpipe_step_s(ops, backward_at: int, microbatch_s: float, pp: int,
                    sms: int) -> tuple[float, float]:
    """(time per microbatch, bubble) of DualPipe (DeepSeek-V3 Technical Report §3.2.1): the
    forward chunk of one microbatch and the backward chunk of another run as a pair whose
    communication (DUALPIPE_OVERLAPPED ops on the compute stream: the expert all-to-all and the
    pipeline sends) overlaps the other's computation, which runs on the SMs the communication
    kernels leave (DUALPIPE_COMM_SMS): per microbatch max(C·s, X) for computation C, stretch
    s = SMs/(SMs − 20) and communication X. The bubble is Table 2's (PP/2 − 1)(F&B + B − 3W),
    with F&B that pair's time and B and W the chunk's backward and its weight-gradient GEMMs
    (stretched), against 1F1B's (PP − 1)(F + B). `microbatch_s`: the microbatch's time as the
    schedule and the framework have it."""
    stretch = sms / max(1, sms - DUALPIPE_COMM_SMS)
    comm = sum(o.time_s for o in ops
               if o.op.name in DUALPIPE_OVERLAPPED and o.stream == DEFAULT_STREAM)
    backward = sum(o.time_s for o in ops[backward_at:] if o.op.name not in DUALPIPE_OVERLAPPED
                   and o.stream == DEFAULT_STREAM)
    wgrad = sum(o.time_s for o in ops[backward_at:] if o.name.endswith(".wgrad")
                and o.stream == DEFAULT_STREAM)
    pair = max((microbatch_s - comm) * stretch, comm)
    bubble = (pp / 2 - 1) * max(0.0, pair + stretch * (backward - 3 * wgrad))
    return pair, bubble


def _breakdown(ops, microbatches: int, bubble_s: float) -> dict[str, float]:
    """Seconds per step by op type of the microbatch work (time on the critical stream: a
    hidden transfer counts only what it was exposed), plus the bubble."""
    out: dict[str, float] = {}
    for o in ops:
        t = o.time_s if o.stream == DEFAULT_STREAM else o.exposed_s
        out[o.op.name] = out.get(o.op.name, 0.0) + t * microbatches
    out["pipeline_bubble"] = bubble_s
    return out


def _resized_s(collective, nbytes: float, hw: Hardware, level: str) -> float:
    """The time of `collective` (a graph op) moving `nbytes` instead (one bucket, one layer)."""
    params = {**collective.params, "bytes": float(nbytes)}
    return predict_op(make_op(collective.name, **params), hw, level).time_s


def _zero3_extra_comm_s(graph, hw: Hardware, level: str, microbatches: int) -> float:
    """ZeRO-3 without overlap: beyond the graph's one reduce-scatter and all-gather per step,
    per microbatch a parameter all-gather before its forward and its backward and a gradient
    reduce-scatter (ZeRO §7.2.2): (2·microbatches − 1) more all-gathers and
    (microbatches − 1) more reduce-scatters."""
    ops = {n.name: n.op for n in graph.nodes}
    gather = scatter = 0.0
    for prefix in ("", "expert_"):  # dense, and the routed experts over their own group
        if f"{prefix}param_allgather" in ops:
            gather += predict_op(ops[f"{prefix}param_allgather"], hw, level).time_s
            scatter += predict_op(ops[f"{prefix}grad_reduce_scatter"], hw, level).time_s
    return (2 * microbatches - 1) * gather + (microbatches - 1) * scatter


# ---------------------------------------------------------------------------------------------
# Search


def _divisors(n: int, limit: int | None = None) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0 and (limit is None or d <= limit)]


def can_split(layers: int, pp: int, vp: int, split: str = "auto") -> bool:
    """Whether `split_pipeline(layers, pp, vp, split)` gives a split (rather than its refusal)."""
    try:
        split_pipeline(layers, pp, vp, split)
    except InputError:
        return False
    return True


def _search_chunks(layers: int, p: int, split: str) -> list[int]:
    """The virtual stages tried for `p` ranks: 1 where the split allows it; with an even
    split (layers % p == 0) the divisors of layers/p up to MAX_SEARCH_VP with at least two
    layers a chunk; otherwise the VP up to MAX_SEARCH_VP that account_for_embedding/loss
    splits (Megatron-Bridge's Llama 3.1 405B and Qwen3-235B recipes: PP8 x VP4, PP16 x VP8
    with one unit a chunk)."""
    out = [1] if can_split(layers, p, 1, split) else []
    if p == 1:
        return out
    if layers % p == 0 and split in ("auto", "even"):
        return out + [v for v in _divisors(layers // p, MAX_SEARCH_VP)
                      if 1 < v and layers // p // v >= 2]
    if split in ("auto", "account"):
        return out + [v for v in range(2, MAX_SEARCH_VP + 1)
                      if can_split(layers, p, v, "account")]
    return out + [v for v in range(2, MAX_SEARCH_VP + 1) if can_split(layers, p, v, split)]


def training_layouts(model: ModelSpec, gpus: int, seq: int, global_batch: int,
                     tp: int | None = None, cp: int | None = None, pp: int | None = None,
                     vp: int | None = None, dp: int | None = None, ep: int | None = None,
                     micro_batch: int | None = None, nvlink_gpus: int = 8,
                     pipeline_split: str = "auto",
                     ) -> Iterable[tuple[int, int, int, int, int, int, int]]:
    """(tp, cp, pp, vp, dp, ep, micro_batch) layouts of exactly `gpus` GPUs, Megatron's rules:
    TP inside one NVLink domain dividing the heads; CP a power of two up to 8 with seq a
    multiple of 2·cp; PP up to MAX_SEARCH_PP where Megatron-Core can split the layers over it
    (split_pipeline: even, else the embedding and loss counted as layers, else first/last
    stage counts); VP (pp > 1, up to MAX_SEARCH_VP) dividing layers/pp with at least two
    layers a chunk, or, where the layers do not divide over pp, the VP an
    account_for_embedding/loss split allows (`_search_chunks`); DP the rest, dividing the
    global batch; EP (MoE) dividing the experts and tp·cp·dp; micro-batch 1, 2 or 4 sequences
    dividing batch/dp (above 1 only while a microbatch holds at most SEARCH_MICROBATCH_TOKENS
    tokens per GPU). Given values are fixed; a given pp and vp that `pipeline_split` cannot
    split raise split_pipeline's InputError."""
    m = model
    if pp and vp:
        split_pipeline(m.layers, pp, vp if pp > 1 else 1, pipeline_split)  # or its one line
    # the virtual stages each pipeline size splits with (none: the size is not tried)
    chunks_of = {p: (([vp] if can_split(m.layers, p, vp if p > 1 else 1, pipeline_split)
                      else []) if vp else _search_chunks(m.layers, p, pipeline_split))
                 for p in ([pp] if pp else range(1, min(MAX_SEARCH_PP, m.layers) + 1))}
    if pp and not chunks_of[pp]:
        split_pipeline(m.layers, pp, 1, pipeline_split)  # raises: no VP splits these layers
    pps = [p for p, chunks in chunks_of.items() if chunks]
    for t in ([tp] if tp else [d for d in _divisors(m.heads, nvlink_gpus)
                               if d & (d - 1) == 0]):
        for c in ([cp] if cp else [c for c in (1, 2, 4, 8) if seq % (2 * c) == 0]):
            for p in pps:
                if gpus % (t * c * p):
                    continue
                d = gpus // (t * c * p)
                if dp and d != dp or global_batch % d:
                    continue
                for v in chunks_of[p]:
                    for e in ([ep] if ep else ([x for x in _divisors(m.experts)
                                                if (t * d * c) % x == 0 and x <= t * d * c]
                                               if m.is_moe else [1])):
                        for b in ([micro_batch] if micro_batch else (1, 2, 4)):
                            if (global_batch // d) % b or (
                                    not micro_batch and b > 1
                                    and b * seq // c > SEARCH_MICROBATCH_TOKENS):
                                continue
                            yield t, c, p, v, d, e, b


def search_training_plans(model: ModelSpec | str, hw: Hardware | str, gpus: int,
                          global_batch: int, seq: int = 4096, dtype: str = "bf16",
                          tp: int | None = None, cp: int | None = None, pp: int | None = None,
                          vp: int | None = None, dp: int | None = None, ep: int | None = None,
                          micro_batch: int | None = None, recompute: str | None = None,
                          zero: int = DEFAULT_ZERO, progress: bool = False,
                          top: int | None = None, framework: str = "megatron",
                          pipeline_split: str = "auto", moe_dispatcher: str = "auto",
                          ep_overlap: bool = False, bf16_layers: tuple[int, int] = (0, 0),
                          optimizer: str = "adamw", distributed_optimizer: str | None = None,
                          recompute_modules: tuple[str, ...] | None = None,
                          moe_capacity_factor: float | None = None
                          ) -> tuple[list[TrainingPlan], int, int]:
    """Every layout of `gpus` GPUs (`training_layouts`) with the least recomputation that fits
    (none, then full; a given `recompute` is fixed), predicted and ranked by tokens/s:
    (plans that fit, fastest first; layouts tried; layouts that fit with no recomputation
    choice). The memory check runs before the step is predicted, so the layouts that do not
    fit cost almost nothing. `framework`: plan_training's (perfmodel.plan.frameworks);
    `pipeline_split`: plan_training's (split_pipeline), for every layout; a given pp and vp it
    cannot split raise its InputError. `moe_dispatcher`, `ep_overlap`: plan_training's, the
    overlap on every MoE layout that allows it (ep > 1, no full recomputation); `bf16_layers`,
    `optimizer`, `distributed_optimizer`: plan_training's; `recompute_modules`: plan_training's,
    every layout recomputing those modules (recompute "selective", the only choice then);
    `moe_capacity_factor`: plan_training's, on every layout."""
    check_arguments(search_training_plans, locals())  # types and ranges, one line each
    from perfmodel.report.progress import Progress
    m, h = as_model(model), hardware(hw)
    frameworks.framework(framework)  # an unknown one fails before the search
    optimizers.check_optimizer(optimizer, distributed_optimizer, zero)  # and a bad optimizer
    for k, v in (("gpus", gpus), ("global_batch", global_batch), ("seq", seq)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise InputError(f"{k}: expected a positive integer, got {v!r}")
    if recompute is not None and recompute not in RECOMPUTE:
        raise InputError(f"recompute: expected one of {', '.join(RECOMPUTE)}, got {recompute!r}")
    if recompute_modules is not None:
        recompute = recompute or "selective"  # the modules are a selective recomputation's
        recompute_modules = checked_recompute_modules(recompute, recompute_modules, m)
    layouts = list(training_layouts(m, gpus, seq, global_batch, tp, cp, pp, vp, dp, ep,
                                    micro_batch, h.nvlink_domain_gpus or 8, pipeline_split))
    choices = (recompute,) if recompute else ("none", "full")
    bar = Progress(len(layouts), f"{m.name} train on {gpus}x {h.name}", force=progress) \
        if progress else None
    plans: list[TrainingPlan] = []
    refused = 0
    for t, c, p, v, d, e, b in layouts:
        batch = global_batch // d
        stage = _memory_stage_layers(split_pipeline(m.layers, p, v if p > 1 else 1,
                                                    pipeline_split))
        for rc in choices:
            w = Workload("train", batch, seq, None, t, e, p, d, dtype, batch // b, v,
                         recompute=rc, cp=c, recompute_modules=recompute_modules,
                         moe_capacity_factor=moe_capacity_factor)
            if w.problems(m):
                break
            if (t * d * c) % e or not memory_fit(
                    m, h, w, zero, stage_layers=stage, optimizer=optimizer,
                    distributed_optimizer=distributed_optimizer).fits:
                continue
            plans.append(plan_training(m, h, batch, seq, t, p, d, dtype, e, batch // b, v,
                                       recompute=rc, zero=zero, cp=c, framework=framework,
                                       pipeline_split=pipeline_split,
                                       moe_dispatcher=moe_dispatcher,
                                       ep_overlap=(ep_overlap
                                                   and ep_overlap_refusal(e, rc) is None),
                                       bf16_layers=bf16_layers, optimizer=optimizer,
                                       distributed_optimizer=distributed_optimizer,
                                       recompute_modules=recompute_modules,
                                       moe_capacity_factor=moe_capacity_factor))
            break
        else:
            refused += 1
        if bar:
            bar.update()
    plans.sort(key=lambda pl: -pl.tokens_per_s)
    return (plans[:top] if top else plans), len(layouts), refused
