"""The optimizer step of a training plan: AdamW, Muon and SOAP, with Megatron's element-wise
distributed optimizer or the layer-wise one, as time per step and as optimizer-state memory.

Which parameters each optimizer takes (Keller Jordan's Muon, github.com/KellerJordan/Muon;
Moonlight, arXiv:2502.16982 §2; Megatron-Core 0.19.2 megatron/core/optimizer/emerging_optimizers.py
`_is_nonlinear_or_embedding`, layer_wise_optimizer.py `is_managed_by_layer_wise_optimizer`):
every 2-D hidden weight matrix (attention, dense and expert FFN, router) runs Muon or SOAP; the
embedding, the LM head, norms and biases stay on AdamW. A GPU holds its tensor-parallel shard of
each matrix and Muon orthogonalizes that shard (Megatron-Core's default muon_tp_mode "blockwise",
optimizer_config.py: no tensor-parallel gather). Megatron-Core splits the fused QKV weight into
Q, K and V for Muon (muon_split_qkv True, emerging_optimizers.py `_get_qkv_split_shapes`) and
keeps the fused gate/up fc1 whole; SOAP preconditions each parameter as it is stored (fused QKV).

Muon (Emerging-Optimizers 0.3.0, orthogonalized_optimizers/orthogonalized_optimizer.py step,
muon_utils.py newton_schulz / newton_schulz_step): momentum lerp, then MUON_NS_STEPS
Newton–Schulz iterations on X (m × n, transposed so m <= n), each A = X·Xᵀ, B = b·A + c·A·A,
X <- a·X + B·X: three GEMMs, (m × n)·(n × m), (m × m)·(m × m), (m × m)·(m × n), 4m²n + 2m³
FLOP, in BF16 (fp32_matmul_prec "medium" casts X to BF16 for the iterations). State: the FP32
momentum, beside the FP32 master weight: 8 bytes a matrix parameter.

SOAP (Vyas et al., arXiv:2409.11321, Algorithm 1; Emerging-Optimizers 0.3.0 soap/soap.py
SOAP.step, update_eigenbasis_and_exp_avgs, utils/eig.py orthogonal_iteration), per m × n
gradient G, each step: the Kronecker factors L += G·Gᵀ (m×m) and R += Gᵀ·G (n×n), G rotated
into the eigenbasis (Q_Lᵀ·G·Q_R) and the Adam update rotated back (Q_L·N·Q_Rᵀ): six GEMMs; every
`precondition_frequency` steps (SOAP_PRECONDITION_FREQUENCY, the paper's f = 10; Emerging-
Optimizers 0.3.0 refreshes every step, precondition_frequency 1) the first moment is rotated
out of the old basis and into the new one (four GEMMs), and each basis is refreshed by one
power iteration and a QR (L·Q_L, then QR; soap.py power_iter_steps 1), the QR's Householder
factorization and explicit Q (Golub & Van Loan, Matrix Computations 4th ed. §5.2.1-5.2.2:
4n³/3 FLOP each for n × n) priced as an FP32 GEMM of the same FLOP (the eigenvalue re-sort,
soap_utils.py sort_eigenbasis_by_approx_eigvals, left out). The GEMMs run in TF32
(fp32_matmul_prec "high", soap.py). State: Adam's two moments and the master weight (12 bytes a
parameter) plus L, R, Q_L and Q_R in FP32: 8·(m² + n²) bytes a matrix.

Distributed optimizers (`distributed_optimizer`):
- "elementwise": Megatron's distributed optimizer (ZeRO-1): every parameter's state split
  evenly over the data-parallel ranks. AdamW runs on its shard; Muon and SOAP need whole
  matrices, so each rank all-gathers the FP32 input of every matrix over the group (Moonlight's
  "Distributed Muon", arXiv:2502.16982 §2.3: DP gather, full update, keep the local part) and
  computes every matrix's Newton–Schulz or SOAP step itself. Muon's momentum stays sharded; SOAP's
  state (two-sided rotations mix every element) is held whole on every rank.
- "layerwise": the layer-wise distributed optimizer of "SOAP, Muon, and Beyond" (arXiv
  2607.20548; Megatron-Core 0.19.2 optimizer/layer_wise_optimizer.py, which `--use-distributed-
  optimizer` selects for an emerging optimizer: optimizer_config.py
  use_layer_wise_distributed_optimizer): whole matrices are assigned to data-parallel ranks (the
  expert matrices to expert-data-parallel ranks), bucket by bucket in backprop order, each
  bucket's parameters by LPT on their element count (largest first, to the least-loaded rank:
  `_compute_per_buffer_param_layout`, a bucket closed at max(bucket_size, 0.9·dp·largest)
  elements). A rank runs Muon or SOAP on its own matrices only: the step takes the most loaded
  rank's time (`layerwise_assignment`; with experts, the busiest data-parallel rank's dense
  matrices plus the busiest expert-data-parallel rank's, an upper bound). Gradients are
  reduce-scattered and parameters all-gathered through the same overlapped buckets as the
  element-wise optimizer, each rank's part padded to the bucket's largest shard: the padding's
  extra time is counted exposed (an upper bound; it rides in buckets the planner overlaps).
The default (None) is the seed paper's pairing: elementwise for AdamW, layerwise for Muon and
SOAP.
ZeRO 0 runs the whole optimizer on every rank with its state replicated; Muon and SOAP do not
run with ZeRO 2/3 (element-wise sharded gradients or weights).
"""
from __future__ import annotations

import functools
import heapq
import math
from dataclasses import dataclass

from perfmodel.errors import InputError
from perfmodel.hardware import Hardware
from perfmodel.ops import op as make_op
from perfmodel.predict import predict_op
from perfmodel.workloads.builder import ADAM_FLOP_PER_PARAM
from perfmodel.workloads.models import ModelSpec

OPTIMIZERS = ("adamw", "muon", "soap")
DISTRIBUTED_OPTIMIZERS = ("elementwise", "layerwise")
# Newton–Schulz iterations per Muon step (Emerging-Optimizers 0.3.0 / Megatron-Core 0.19.2
# muon_num_ns_steps = 5; Keller Jordan's muon.py ns_steps=5) and GEMMs per iteration
MUON_NS_STEPS = 5
NS_GEMMS_PER_STEP = 3
# SOAP's eigenbasis refresh interval in steps (Vyas et al. arXiv:2409.11321, f = 10)
SOAP_PRECONDITION_FREQUENCY = 10
# Optimizer state, bytes per parameter: FP32 master weight, momentum and variance (AdamW; the
# planner's memory.OPTIMIZER_BYTES_PER_PARAM, ZeRO §3.1), FP32 master and momentum (Muon)
ADAMW_STATE_BYTES = 12
MUON_STATE_BYTES = 8
# SOAP's Kronecker factors and eigenbases L, R, Q_L, Q_R in FP32 (soap.py _init_group): two
# m × m and two n × n matrices of 4-byte elements
SOAP_FACTOR_BYTES = 4
SOAP_FACTORS_PER_SIDE = 2
# The FP32 matrix an element-wise (ZeRO-1) rank gathers for Muon or SOAP: EO's newton_schulz
# takes an FP32 input (muon_utils.py), SOAP casts the gradient to FP32 (soap.py)
GATHER_BYTES_PER_PARAM = 4
# The graph's parameter all-gather carries BF16 weights (workloads.builder param_allgather)
AG_BYTES_PER_PARAM = 2
# Muon's element-wise work per matrix parameter (orthogonalized_optimizer.py step, muon_utils.py
# newton_schulz), FMA-pipe operations: decoupled weight decay 1, momentum lerp 2, Frobenius
# normalization 2 (square-accumulate, scale), spectral scale 1, update 1; reads the FP32 weight,
# gradient and momentum and writes the weight and momentum (as one fused kernel: a lower bound)
MUON_FLOP_PER_PARAM = 7
# Householder QR of an n × n matrix and its explicit Q: 4n³/3 FLOP each (Golub & Van Loan §5.2)
QR_FLOP_PER_CUBE = 8 / 3
# Megatron-Core 0.19.2 layer_wise_optimizer.py: a bucket closes at max(bucket_size,
# PADDING_FLOOR · dp · its largest parameter) elements
LAYERWISE_PADDING_FLOOR = 0.9


@dataclass(frozen=True)
class Matrix:
    """One 2-D weight parameter a GPU holds: `rows` × `cols` (its tensor-parallel shard),
    `blocks` the matrices its optimizer works on (Muon's Q, K, V of a fused QKV weight), and
    whether expert parallelism shards it (reduced over the expert-data-parallel group)."""

    name: str
    rows: int
    cols: int
    blocks: tuple[tuple[int, int], ...]
    expert: bool = False

    @property
    def numel(self) -> int:
        return self.rows * self.cols


def check_optimizer(optimizer: str, distributed: str | None, zero: int) -> str:
    """The distributed optimizer the plan runs (module docstring): "elementwise", "layerwise",
    or "replicated" (ZeRO 0). Raises InputError naming the parameter."""
    if optimizer not in OPTIMIZERS:
        raise InputError(f"optimizer: expected one of {', '.join(OPTIMIZERS)}, got "
                         f"{optimizer!r}")
    if distributed is not None and distributed not in DISTRIBUTED_OPTIMIZERS:
        raise InputError(f"distributed_optimizer: expected one of "
                         f"{', '.join(DISTRIBUTED_OPTIMIZERS)}, got {distributed!r}")
    if zero == 0:
        if distributed is not None:
            raise InputError(f"distributed_optimizer: {distributed!r} shards the optimizer "
                             f"state, which ZeRO stage 0 does not; use zero=1")
        return "replicated"
    if optimizer == "adamw":
        if distributed == "layerwise":
            raise InputError("distributed_optimizer: the layer-wise optimizer serves Muon and "
                             "SOAP (Megatron-Core's LayerWiseDistributedOptimizer); AdamW runs "
                             "elementwise")
        return "elementwise"
    if zero >= 2:
        raise InputError(f"zero: {optimizer} needs whole matrices; ZeRO {zero} shards "
                         f"{'gradients' if zero == 2 else 'weights'} element-wise (use zero=1 "
                         f"with the layer-wise or element-wise distributed optimizer)")
    return distributed or "layerwise"


def layer_matrices(model: ModelSpec, layer: int, tp: int = 1, ep: int = 1, moe_tp: int = 1,
                   split_qkv: bool = True) -> list[Matrix]:
    """The 2-D weight matrices one GPU holds for decoder layer `layer`, in the forward order
    Megatron-Core defines them, as the training graph shards them (workloads.builder: heads and
    FFN columns over tp, kv heads max(1, kv_heads/tp), MLA's down-projections whole, experts over
    ep and each split moe_tp ways). Rows are the output dimension (Megatron's weight layout)."""
    m, h = model, model.hidden
    out: list[Matrix] = []
    if m.is_mla:
        hq = m.heads // tp
        qk, v = m.qk_nope_head_dim + m.qk_rope_head_dim, m.v_head_dim
        if m.q_lora_rank:
            out.append(_mat("q_a", m.q_lora_rank, h))
            out.append(_mat("q_b", hq * qk, m.q_lora_rank))
        else:
            out.append(_mat("q", hq * qk, h))
        out.append(_mat("kv_a", m.kv_lora_rank + m.qk_rope_head_dim, h))
        out.append(_mat("kv_b", hq * (m.qk_nope_head_dim + v), m.kv_lora_rank))
        out.append(_mat("o", h, hq * v))
    else:
        hq, hkv = m.heads // tp, max(1, m.kv_heads // tp)
        q, kv = hq * m.head_dim, hkv * m.head_dim
        blocks = ((q, h), (kv, h), (kv, h)) if split_qkv else ((q + 2 * kv, h),)
        out.append(Matrix("qkv", q + 2 * kv, h, blocks))
        out.append(_mat("o", h, q))
    gated = m.ffn_matrices - 1  # fc1 rows per FFN column: gate and up, or up
    if not m.is_moe_layer(layer):
        f = m.ffn_hidden // tp
        return out + [_mat("fc1", gated * f, h), _mat("fc2", h, f)]
    out.append(_mat("router", m.experts, h))
    eh = m.expert_hidden // moe_tp
    for e in range(m.experts // ep):
        out.append(_mat(f"expert{e}.fc1", gated * eh, h, expert=True))
    for e in range(m.experts // ep):
        out.append(_mat(f"expert{e}.fc2", h, eh, expert=True))
    if m.shared_experts:
        se = m.shared_experts * m.expert_hidden // tp
        out += [_mat("shared.fc1", gated * se, h), _mat("shared.fc2", h, se)]
    return out


def _mat(name: str, rows: int, cols: int, expert: bool = False) -> Matrix:
    return Matrix(name, rows, cols, ((rows, cols),), expert)


def newton_schulz_gemms(rows: int, cols: int, steps: int = MUON_NS_STEPS
                        ) -> list[dict[str, int | str]]:
    """The GEMMs (perfmodel Gemm: C[m,n] = A[m,k]·B[k,n]) of Muon's Newton–Schulz on one
    rows × cols matrix, transposed so m = min <= n = max (muon_utils.py newton_schulz): per
    iteration A = X·Xᵀ (m, m, k=n), A·A (m, m, k=m), B·X (m, n, k=m), in BF16."""
    m, n = min(rows, cols), max(rows, cols)
    one = [dict(m=m, n=m, k=n), dict(m=m, n=m, k=m), dict(m=m, n=n, k=m)]
    return [dict(g, dtype="bf16") for _ in range(steps) for g in one]


def soap_gemms(rows: int, cols: int, precondition_frequency: int = SOAP_PRECONDITION_FREQUENCY
               ) -> list[tuple[dict[str, int | str], float]]:
    """(GEMM, times per step) of SOAP on one rows × cols gradient (module docstring): each step
    the factor updates G·Gᵀ and Gᵀ·G and the four one-sided rotations of the gradient in and the
    update out; every `precondition_frequency` steps the first moment's four rotations (out of
    the old basis, into the new), L·Q_L and R·Q_R, and the two QRs as FP32 GEMMs of 8n³/3
    FLOP (n, n, 4n/3). TF32 except the QRs."""
    r, c, f = rows, cols, 1.0 / precondition_frequency
    tf = dict(dtype="tf32", out_dtype="fp32")
    rotations = [dict(m=r, n=c, k=r), dict(m=r, n=c, k=c)] * 2  # into or out of the basis
    every = [dict(m=r, n=r, k=c), dict(m=c, n=c, k=r)] + rotations
    refresh = rotations + [dict(m=r, n=r, k=r), dict(m=c, n=c, k=c)]
    qr = [dict(m=d, n=d, k=max(1, round(d * QR_FLOP_PER_CUBE / 2)), dtype="fp32",
               out_dtype="fp32") for d in (r, c)]
    return ([(dict(g, **tf), 1.0) for g in every] + [(dict(g, **tf), f) for g in refresh]
            + [(g, f) for g in qr])


def layerwise_assignment(numels: list[int], ranks: int, bucket_numel: int
                         ) -> tuple[list[int], int]:
    """Megatron-Core 0.19.2's layer-wise layout (layer_wise_optimizer.py
    `_compute_per_buffer_param_layout`): `numels` in forward order are walked in backprop order
    (reversed) into buckets, a bucket closing once it holds max(bucket_numel, 0.9·ranks·its
    largest) elements; each bucket's parameters, largest first (stable), go to the rank with the
    fewest elements of that bucket so far (the lowest on a tie). Returns (the rank of each
    parameter, in the order given; the padded elements of all buckets: ranks × each bucket's
    largest shard). The 64-element alignment of each parameter start is left out."""
    if ranks < 1:
        raise InputError(f"layer-wise optimizer: ranks: expected a positive integer, got "
                         f"{ranks!r}")
    owner = [0] * len(numels)
    padded = 0
    chunk: list[int] = []
    total = largest = 0

    def emit() -> None:
        nonlocal padded
        if not chunk:
            return
        heap = [(0, r) for r in range(ranks)]
        for i in sorted(chunk, key=lambda i: -numels[i]):
            load, r = heapq.heappop(heap)
            owner[i] = r
            heapq.heappush(heap, (load + numels[i], r))
        padded += ranks * max(load for load, _ in heap)

    for i in reversed(range(len(numels))):
        chunk.append(i)
        total += numels[i]
        largest = max(largest, numels[i])
        if total >= max(bucket_numel, int(ranks * largest * LAYERWISE_PADDING_FLOOR)):
            emit()
            chunk, total, largest = [], 0, 0
    emit()
    return owner, padded


def stage_matrices(model: ModelSpec, layers, tp: int, ep: int, moe_tp: int,
                   split_qkv: bool) -> list[Matrix]:
    """Every layer's matrices (layer_matrices) over `layers`, in forward order."""
    return [x for i in layers for x in layer_matrices(model, i, tp, ep, moe_tp, split_qkv)]


def state_bytes_per_gpu(model: ModelSpec, optimizer: str, distributed: str, tp: int, ep: int,
                        moe_tp: int, shards: int, stage_layers: float) -> float:
    """Optimizer state one GPU holds for the hidden matrices of `stage_layers` decoder layers
    (the model's mean layer mix) beyond AdamW's 12 bytes a parameter, which the planner's memory
    already counts over `shards` ranks (module docstring): Muon −4 bytes a parameter, SOAP
    8·(m² + n²) bytes a matrix over the shards; under the element-wise optimizer SOAP's matrices
    keep their whole state (factors and Adam moments) on every rank. Layer-wise: the mean rank
    (the buckets' LPT balances elements to within the largest parameter)."""
    if optimizer == "adamw":
        return 0.0
    moe = model.layers - model.dense_layers if model.is_moe else 0
    kinds = [(model.layers - moe, False), (moe, True)]
    extra = sum(n * _layer_extra_bytes(model, optimizer, distributed, tp, ep, moe_tp, shards,
                                       model.dense_layers if is_moe else 0)
                for n, is_moe in kinds if n)
    return extra * stage_layers / model.layers


@functools.lru_cache(maxsize=256)
def _layer_extra_bytes(model: ModelSpec, optimizer: str, distributed: str, tp: int, ep: int,
                       moe_tp: int, shards: int, layer: int) -> float:
    """state_bytes_per_gpu's bytes for one decoder layer (`layer`: one of its kind)."""
    extra = 0.0
    for x in layer_matrices(model, layer, tp, ep, moe_tp, optimizer == "muon"):
        if optimizer == "muon":
            extra += (MUON_STATE_BYTES - ADAMW_STATE_BYTES) * x.numel / shards
            continue
        factors = SOAP_FACTORS_PER_SIDE * SOAP_FACTOR_BYTES * (x.rows ** 2 + x.cols ** 2)
        if distributed == "elementwise":  # held whole on every rank
            extra += factors + ADAMW_STATE_BYTES * x.numel * (1 - 1 / shards)
        else:
            extra += factors / shards
    return extra


@dataclass(frozen=True)
class OptimizerStep:
    """The optimizer step of one GPU of the pacing stage: `compute_s` its kernels (the most
    loaded data-parallel rank's under the layer-wise optimizer), `comm_s` the communication it
    adds beyond the data-parallel reduce-scatter and all-gather the planner prices (exposed);
    `mean_rank_s` the mean rank's compute, `elementwise_s` the element-wise kernels within
    compute_s (the rest: the matrices' GEMMs), `matrices` the hidden matrices of the stage."""

    optimizer: str
    distributed: str
    compute_s: float
    comm_s: float
    mean_rank_s: float
    elementwise_s: float
    matrices: int

    @property
    def time_s(self) -> float:
        return self.compute_s + self.comm_s


def optimizer_step(model: ModelSpec, graph, hw: Hardware, level: str, optimizer: str,
                   distributed: str, tp: int, ep: int, moe_tp: int, bucket_numel: int,
                   precondition_frequency: int = SOAP_PRECONDITION_FREQUENCY) -> OptimizerStep:
    """Muon's or SOAP's step on one GPU of the training graph `graph` (the builder's last
    pipeline stage: its decoder layers, the LM head on AdamW), `distributed` as check_optimizer
    resolves it (module docstring). The data-parallel groups, and the collectives the added
    communication is priced like, are the graph's (grad_reduce_scatter, param_allgather and
    their expert_ twins; ops.comm); GEMMs and element-wise kernels through predict_op."""
    if optimizer not in ("muon", "soap"):
        raise InputError(f"optimizer_step: expected muon or soap, got {optimizer!r}")
    if isinstance(precondition_frequency, bool) or not isinstance(precondition_frequency, int) \
            or precondition_frequency < 1:
        raise InputError(f"precondition_frequency: expected a positive integer, got "
                         f"{precondition_frequency!r}")
    ops = {n.name: n.op for n in graph.nodes}
    meta = graph.meta
    pp, dp, cp = meta.get("pp", 1), meta.get("dp", 1), meta.get("cp", 1)
    layers = range(model.layers - math.ceil(model.layers / pp), model.layers)
    mats = stage_matrices(model, layers, tp, ep, moe_tp, optimizer == "muon")
    groups = {False: ops["grad_reduce_scatter"].gpus if "grad_reduce_scatter" in ops else 1,
              True: (ops["expert_grad_reduce_scatter"].gpus
                     if "expert_grad_reduce_scatter" in ops else 1)}
    if distributed == "replicated":
        groups = {False: 1, True: 1}
    if dp * cp > 1 and distributed != "replicated" and "grad_reduce_scatter" not in ops:
        raise InputError("optimizer_step: the graph has no data-parallel reduce-scatter")

    cost: dict[tuple[int, int], float] = {}

    def matrix_s(x: Matrix) -> float:
        key = (x.rows, x.cols)
        if key not in cost:
            if optimizer == "muon":
                t = sum(_gemm_s(g, hw, level) for b in x.blocks
                        for g in newton_schulz_gemms(*b))
            else:
                t = sum(k * _gemm_s(g, hw, level)
                        for g, k in soap_gemms(x.rows, x.cols, precondition_frequency))
            cost[key] = t
        return cost[key]

    total_s = mean_s = 0.0
    comm_s = 0.0
    owned_numel = 0.0
    for expert in (False, True):
        part = [x for x in mats if x.expert == expert]
        if not part:
            continue
        group = groups[expert]
        prefix = "expert_" if expert else ""
        if distributed == "layerwise" and group > 1:
            owner, padded = layerwise_assignment([x.numel for x in part], group, bucket_numel)
            loads = [0.0] * group
            numel = [0] * group
            for x, r in zip(part, owner):
                loads[r] += matrix_s(x)
                numel[r] += x.numel
            worst = max(range(group), key=lambda r: (loads[r], -r))
            total_s += loads[worst]
            mean_s += sum(loads) / group
            owned_numel += numel[worst]
            # each rank's part of every bucket padded to the bucket's largest shard
            extra = padded - sum(x.numel for x in part)
            rs, ag = ops[f"{prefix}grad_reduce_scatter"], ops[f"{prefix}param_allgather"]
            params = ag.bytes / AG_BYTES_PER_PARAM  # the collectives' parameters
            comm_s += _longer_s(rs, rs.bytes * (1 + extra / params), hw, level)
            comm_s += _longer_s(ag, ag.bytes * (1 + extra / params), hw, level)
        else:  # every rank runs every matrix (element-wise: after gathering it)
            t = sum(matrix_s(x) for x in part)
            total_s += t
            mean_s += t
            owned_numel += sum(x.numel for x in part) / group
            if distributed == "elementwise" and group > 1:
                gather = ops[f"{prefix}param_allgather"]
                comm_s += _longer_s(gather, sum(x.numel for x in part)
                                    * GATHER_BYTES_PER_PARAM, hw, level, base_s=0.0)
    # element-wise kernels: Muon's momentum and update, SOAP's Adam in the rotated basis; the
    # LM head (the stage's parameters beside its matrices, as the builder counts them) on AdamW,
    # sharded over the data-parallel group unless replicated
    adamw_elements = model.vocab * model.hidden / tp / groups[False]
    elementwise_s = _adam_s(adamw_elements, hw, level)
    if optimizer == "muon":
        elementwise_s += _elementwise_s(owned_numel, 3, 2, MUON_FLOP_PER_PARAM, hw, level)
    else:
        elementwise_s += _adam_s(owned_numel, hw, level)
    return OptimizerStep(optimizer, distributed, total_s + elementwise_s, comm_s,
                         mean_s + elementwise_s, elementwise_s, len(mats))


def _gemm_s(g: dict, hw: Hardware, level: str) -> float:
    return predict_op(make_op("gemm", **g), hw, level).time_s


def _elementwise_s(elements: float, inputs: int, outputs: int, flop: float, hw: Hardware,
                   level: str) -> float:
    if elements < 1:
        return 0.0
    return predict_op(make_op("elementwise", elements=int(math.ceil(elements)), dtype="fp32",
                              inputs=inputs, outputs=outputs, flop_per_element=flop,
                              xu_per_element=1), hw, level).time_s


def _adam_s(elements: float, hw: Hardware, level: str) -> float:
    """The builder's fused Adam kernel (workloads.builder "optimizer" op) over `elements`."""
    return _elementwise_s(elements, 4, 3, ADAM_FLOP_PER_PARAM, hw, level)


def _longer_s(collective, nbytes: float, hw: Hardware, level: str,
              base_s: float | None = None) -> float:
    """How much longer `collective` (a graph op) takes moving `nbytes` than as it is (or than
    `base_s`)."""
    params = {**collective.params, "bytes": float(nbytes)}
    now = predict_op(collective, hw, level).time_s if base_s is None else base_s
    return max(0.0, predict_op(make_op(collective.name, **params), hw, level).time_s - now)
