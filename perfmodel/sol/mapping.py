"""A problem's workload → a perfmodel op graph, with the MACs and bytes SOLAR's convention needs.

The benchmark publishes each problem's tensors (names, shapes, dtypes) and axes, not its PyTorch
reference, so the graph is inferred from them, the way a kernel engineer reads a definition:

* **linear layers**: every 2-D parameter `[N, K]` (`*_weight`, `*_proj`, `w1`…; torch Linear's
  out × in) is a GEMM whose M is the rows of the activation of width K: an input, or the output
  of an earlier GEMM (a chain: fc1 → fc2, gate/up → down). A `[K, N]` parameter is recognised when
  only its first dimension matches an activation. Packed NVFP4 weights (`float4_e2m1fn_x2`)
  hold two values per element (K is twice the last dimension). A backward problem runs each
  GEMM twice (dX and dW) where the weight's gradient is an output, else once (dX);
* **experts** (`[E, N, K]` parameters with E the expert axis): grouped GEMMs over the T·top-k
  routed rows (dense over T·E rows when the problem routes every token to every expert, a
  `[T, E]` routing-weight input and no top-k axis), the router GEMM and top-k, the dispatch
  gather and the weighted combine scatter-add;
* **attention**: each query projection (q, query, to_q, qkv, c_attn) with its key/value
  projections gives one attention core; heads, KV heads and head dims from the axes, query and
  key lengths from the projections' rows. Attention inputs without projections (query/key/value
  states, FlashInfer's paged and ragged layouts) give the core directly;
* **convolutions** (`[K, C/g, (T,) R, S]` parameters): implicit GEMMs over the input's spatial
  extent (same padding, stride 1 unless the problem says strided/downsampling/patch);
* **norms** (1-D `*norm*` parameters, `ln_*`): RMSNorm, LayerNorm (with a bias), GroupNorm
  (with a groups axis), per head for q/k norms;
* **indexing**: token-embedding tables, paged KV caches and in-place cache updates, expert
  weights: index-driven bytes (the rows, pages, slots and experts the indices touch);
* the rest of the inputs and outputs: one streaming (elementwise) pass.

Every guess is named in `standins`; a problem whose core computation perfmodel has no op for
(FFTs, sorts, scans and recurrences) is not mapped and `reason` says why. `status` is `direct`
(every part an op that models that computation), `approximate` (stand-ins named) or `none`.

SOLAR-convention quantities ride along: each part's tensor-core MACs as the reference's einsums
count them (attention's two products in full, causal or not; a backward's own products, plus the
forward's where the inputs hold no saved activations) at its precision class, and the graph's
I/O bytes with index-driven tensors at the bytes they touch.

FP32 problems: their GEMMs and attention run here on the 16-bit tensor cores (the leaderboard
prices them at the 16-bit rate, and its FP32 baselines run faster than TF32 allows), named as a
stand-in; their streaming parts keep FP32 bytes.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from perfmodel.errors import InputError
from perfmodel.ops import (Attention, Conv, Elementwise, Embedding, Gather, Gemm, GroupedGemm,
                           GroupNorm, Norm, Op, Quantize, Scatter, Softmax, TopK)
from perfmodel.sol.problems import Tensor, Workload
from perfmodel.sol.solar import precision_of

STATUSES = ("direct", "approximate", "none")
TOKENS = 4096  # fallback tokens when no activation gives M (named as a stand-in when used)

# axis aliases, first match wins
AXES = {
    "batch": ("batch_size", "batch", "B", "bsz", "N", "num_images"),
    "heads": ("num_attention_heads", "num_heads", "num_qo_heads", "n_heads", "qformer_num_heads"),
    "kv_heads": ("num_key_value_heads", "num_kv_heads", "num_k_heads"),
    "head_dim": ("head_dim", "attention_head_dim", "dim_head", "qformer_head_dim",
                 "head_k_dim"),
    "experts": ("num_experts", "n_routed_experts", "num_local_experts"),
    "topk": ("num_experts_per_tok", "top_k", "topk"),
    "groups": ("num_groups", "norm_num_groups", "groups"),
}

# problems whose core computation perfmodel has no op for: (name pattern, why)
UNMAPPABLE = (
    (r"rfft|fft_size", "a real FFT: perfmodel has no FFT op (butterfly passes, not a GEMM or a "
                       "stream)"),
    (r"radix_sort", "a radix sort with prefix sums: perfmodel has no sort op"),
    (r"chunk_scan|selective_scan_only", "a chunked state-space scan: its inter-chunk recurrence "
                                        "has no perfmodel op"),
    (r"delta_rule", "a gated delta-rule linear attention: a chunked recurrence with no "
                    "perfmodel op"),
    (r"time_decay", "an RWKV time-decay recurrence over the sequence: no perfmodel op for a "
                    "sequential scan"),
)

# work whose structure the streaming pass stands in for: (name pattern, the stand-in named)
STREAM_STANDINS = (
    (r"hyena_complete|long_conv", "the Hyena long convolution (an FFT convolution) as a "
                                  "streaming pass"),
    (r"ssm|segsum|discretization|mamba2_selective", "the SSM scan / segment sums as a "
                                                    "streaming pass"),
    (r"position_calculation|position_computation|grid_based", "position-index arithmetic as a "
                                                              "streaming pass"),
    (r"score_aggregation|load_balancing", "group top-k, masks and counts as a streaming pass"),
    (r"gaussian_topk", "the threshold's mean/std reduction and mask as a streaming pass"),
    (r"relative_position|rel_pos", "relative-position bias terms as streaming passes"),
)

PARAM_RE = re.compile(r"(weight|weights|_proj$|_projs$|^proj|_proj_\d|^w\d?$|^w\d_|^w_|"
                      r"gate_up_proj$|down_proj$|up_proj$|gate_proj$|^unembed)")
NOT_PARAM_RE = re.compile(r"(norm|^ln_|_ln_|layernorm|layer_norm|scale|coef|routing|topk|"
                          r"expert_weights|attn_weights|attention_weights|^grad_|pos_emb|"
                          r"embed_pos|embedding|embeddings|rel_pos|grn|_q$|_k$|bias|"
                          r"selected_weights|hyper_weights|_output$|_out$)")
EMBED_TABLE_RE = re.compile(r"(word_embeddings|text_embedding_weight|embed_tokens|"
                            r"token_embedding|wte)")
CONV_RE = re.compile(r"(conv|patch|filter|dwconv|res_weight|proj_weight$)")
NORM_RE = re.compile(r"(norm(?!alized)|^ln_|_ln_|^ln$|layernorm|layer_norm|_gn_|^gn_|rms)")
Q_RE = re.compile(r"(^|_)(q|query|to_q|q_proj|q_b_proj|qkv|to_qkv|c_attn|in_proj_qkv|"
                  r"q_weight|query_weight)(_|$)")
K_RE = re.compile(r"(^|_)(k|key|to_k|k_proj|kv|to_kv|kv_a_proj|kv_b_proj|k_weight|"
                  r"key_weight|kv_weight)(_|$)")
O_RE = re.compile(r"(^|_)(o|out|to_out|o_proj|out_proj|proj|output|dense|c_proj|o_weight|"
                  r"out_weight)(_|$)")
V_RE = re.compile(r"(^|_)(v|value|to_v|v_proj|v_weight|value_weight)(_|$)")


@dataclass
class Part:
    """One op of the mapped graph and the tensor-core MACs SOLAR's convention counts for it."""

    name: str
    op: Op
    macs: float = 0.0
    precision: str = "fp16"


@dataclass
class Mapped:
    """A workload's op graph, how faithful it is, and its SOLAR-convention MACs and bytes."""

    workload: Workload
    status: str
    parts: list[Part] = field(default_factory=list)
    standins: list[str] = field(default_factory=list)
    reason: str = ""
    io_bytes: dict[str, float] = field(default_factory=dict)  # tensor → bytes it moves
    notes: list[str] = field(default_factory=list)

    @property
    def macs(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for p in self.parts:
            if p.macs:
                out[p.precision] = out.get(p.precision, 0.0) + p.macs
        return out

    @property
    def dram_bytes(self) -> float:
        return sum(self.io_bytes.values())


@dataclass
class _Act:
    """An activation a GEMM may read: rows × width (an input, or an earlier op's output)."""

    name: str
    rows: int
    width: int
    dtype: str
    produced: bool


class _Builder:
    def __init__(self, w: Workload):
        self.w = w
        self.name = w.problem.lower()
        self.bwd = w.direction == "bwd" or "backward" in self.name
        self.parts: list[Part] = []
        self.standins: list[str] = []
        self.notes: list[str] = []
        self.consumed: set[str] = set()
        self.io_bytes = {n: t.bytes for n, t in w.tensors.items()}
        self.acts: list[_Act] = [
            _Act(n, t.numel // max(t.last, 1), t.last, t.kind, False)
            for n, t in w.inputs.items() if t.is_float and t.rank >= 2 and not _is_param(n, t)]
        self.mma = self._mma_dtype()

    # ---- axes and dtypes -------------------------------------------------------------------
    def axis(self, role: str, default=None):
        for a in AXES.get(role, (role,)):
            if a in self.w.axes and self.w.axes[a] > 0:
                return self.w.axes[a]
        return default

    def _mma_dtype(self) -> str:
        kinds = {t.kind for n, t in self.w.inputs.items() if t.is_float and t.rank >= 2}
        if "nvfp4" in kinds or "fp4" in self.name or "nvfp4" in self.name:
            return "nvfp4"
        if "fp8_e4m3" in kinds or self.name.startswith("quant__") and "fp8" in self.name:
            return "fp8"
        floats = [t for t in self.w.inputs.values() if t.is_float and t.rank >= 1]
        big = max(floats, key=lambda t: t.bytes, default=None)
        if big is not None and big.kind == "fp16":
            return "fp16"
        if big is not None and big.kind == "fp32":
            self.standin("FP32 matmuls on the 16-bit tensor cores (BF16), the leaderboard's "
                         "pricing of FP32 problems")
        return "bf16"

    def standin(self, text: str) -> None:
        if text not in self.standins:
            self.standins.append(text)

    def stream_dtype(self) -> str:
        floats = [t for t in self.w.tensors.values() if t.is_float and t.rank >= 1]
        big = max(floats, key=lambda t: t.bytes, default=None)
        if big is None:
            return "fp32"
        return {"nvfp4": "bf16", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}.get(
            big.kind, big.kind)

    def stream_dtype_bf(self) -> str:
        """The streaming dtype among fp32/bf16/fp16 (norms, gathers)."""
        d = self.stream_dtype()
        return d if d in ("fp32", "bf16", "fp16") else "bf16"

    # ---- parts -----------------------------------------------------------------------------
    def add(self, name: str, op: Op, macs: float = 0.0, precision: str | None = None) -> None:
        self.parts.append(Part(name, op, macs, precision or precision_of(self.mma)))

    def gemm(self, name: str, m: int, n: int, k: int, batch: int = 1, count: int = 1,
             dtype: str | None = None) -> None:
        dtype = dtype or self.mma
        if dtype == "nvfp4" and not any(p.op.name == "quantize" for p in self.parts):
            pass
        op = Gemm(m=max(1, m), n=max(1, n), k=max(1, k), batch=batch, count=count, dtype=dtype,
                  out_dtype="bf16" if dtype in ("nvfp4", "fp8") else
                  ("fp16" if dtype == "fp16" else "bf16"))
        self.add(name, op, float(m) * n * k * batch * count, precision_of(dtype))

    def produce(self, name: str, rows: int, width: int) -> None:
        self.acts.append(_Act(name, rows, width, self.mma, True))
        for n, t in self.w.outputs.items():
            if n not in self.consumed and t.numel == rows * width:
                self.consumed.add(n)
                break

    def find(self, width: int, prefer: str = "") -> _Act | None:
        """The activation of `width` for a GEMM: a name-affine one first, then the latest
        produced, then inputs (a choice among inputs of different rows is named)."""
        exact = [a for a in self.acts if a.width == width]
        if prefer:
            hits = [a for a in exact if _affine(prefer, a.name)]
            if "cross" in self.name and (K_RE.search(prefer.lower())
                                         or V_RE.search(prefer.lower())):
                hits = hits or [a for a in exact if re.search(
                    r"encoder|text|context|cross|memory|kv", a.name.lower())]
            if hits:
                return hits[-1]
        produced = [a for a in exact if a.produced]
        if produced:
            return produced[-1]
        inputs = [a for a in exact if not a.produced]
        saved = [a for a in inputs if not a.name.startswith("grad")] or inputs
        if saved:
            pick = max(saved, key=lambda a: a.rows)
            others = sorted({a.rows for a in saved if a.rows != pick.rows})
            if others and prefer:
                self.standin(f"{prefer}: M = {pick.rows} rows of {pick.name} (other inputs of "
                             f"width {width} have {', '.join(map(str, others))})")
            return pick
        # the rows of a sequence model's inner activation (no tensor of that width): its tokens
        tokens = self._axis_tokens()
        if tokens and any(a.rows == tokens for a in self.acts):
            self.standin(f"M = {tokens} tokens from the axes for a K = {width} operand the "
                         f"definition does not hold")
            return _Act("tokens", tokens, width, self.mma, True)
        # a reshaped activation (heads merged, patches merged): numel divisible by the width
        shaped = [a for a in self.acts if not a.produced and a.name in self.w.inputs
                  and self.w.inputs[a.name].numel % width == 0
                  and self.w.inputs[a.name].numel >= width]
        if shaped:
            best = max(shaped, key=lambda a: (_has_factor(self.w.inputs[a.name].shape or (),
                                                          width),
                                              self.w.inputs[a.name].numel))
            t = self.w.inputs[best.name]
            if not _has_factor(t.shape or (), width):
                self.standin(f"{best.name} {list(t.shape)} read as rows of {width} "
                             f"(a reshape the definition does not spell out)")
            return _Act(best.name, t.numel // width, width, best.dtype, False)
        return None

    def _axis_tokens(self) -> int | None:
        for a in ("num_tokens", "batch_seq_len"):
            if self.w.axes.get(a):
                return self.w.axes[a]
        s = self.w.axes.get("seq_len")
        return self.axis("batch", 1) * s if s else None

    def tokens(self) -> int:
        for a in ("num_tokens", "batch_seq_len", "total_q", "M", "total_seq_len", "N"):
            if a in self.w.axes and self.w.axes[a] > 0:
                return self.w.axes[a]
        b = self.axis("batch", 1)
        s = self.w.axes.get("seq_len") or self.w.axes.get("seq_length")
        if s:
            return b * s
        self.standin(f"M = {TOKENS} tokens (no activation or axis gives the rows)")
        return TOKENS

    def consume(self, *names: str) -> None:
        self.consumed.update(n for n in names if n)

    def stream(self, name: str, in_bytes: float, out_bytes: float, fma: float = 2.0,
               xu: float = 0.0, dtype: str | None = None) -> None:
        """An elementwise pass moving these bytes (a stand-in's shape: the largest of them as
        `elements` of `dtype`, inputs and outputs as multiples of it)."""
        dtype = dtype or self.stream_dtype()
        b = _bytes(dtype)
        big = max(in_bytes, out_bytes)
        if big <= 0:
            return
        elements = max(1, math.ceil(big / b))
        ins = max(0, round(in_bytes / (elements * b))) if in_bytes else 0
        outs = max(0, round(out_bytes / (elements * b))) if out_bytes else 0
        if in_bytes and not ins:
            ins = 1
            elements = max(1, math.ceil(max(out_bytes, in_bytes) / b))
        if out_bytes and not outs:
            outs = 1
        self.add(name, Elementwise(elements=elements, dtype=dtype, inputs=ins, outputs=outs,
                                   flop_per_element=fma, xu_per_element=xu))

    def leftover(self, name: str = "elementwise", fma: float = 2.0, xu: float = 0.0) -> None:
        """One streaming pass over the inputs and outputs no op has read or written."""
        ins = sum(self.io_bytes.get(n, t.bytes) for n, t in self.w.inputs.items()
                  if n not in self.consumed and t.rank >= 1)
        outs = sum(self.io_bytes.get(n, t.bytes) for n, t in self.w.outputs.items()
                   if n not in self.consumed and t.rank >= 1)
        if ins + outs > 0:
            self.stream(name, ins, outs, fma, xu)
        self.consumed.update(self.w.tensors)

    def result(self, status: str | None = None, reason: str = "") -> Mapped:
        if status is None:
            status = "approximate" if [s for s in self.standins
                                       if not s.startswith("FP32 matmuls")] else "direct"
        return Mapped(self.w, status, self.parts, self.standins, reason, self.io_bytes,
                      self.notes)


# ---- helpers -----------------------------------------------------------------------------
def _bytes(dtype: str) -> float:
    from perfmodel.units import bytes_per_element
    return bytes_per_element(dtype)


def _is_param(name: str, t: Tensor) -> bool:
    n = name.lower()
    if t.rank < 2 or not t.is_float:
        return False
    if t.shape and all(d == 1 for d in t.shape[:-1]) and t.rank >= 3:
        return False  # broadcast parameters ([1, 1, 1, C]: GRN γ)
    return bool(PARAM_RE.search(n)) and not NOT_PARAM_RE.search(n) \
        and not EMBED_TABLE_RE.search(n)


def _has_factor(shape: tuple[int, ...], width: int) -> bool:
    """Whether some set of the shape's dimensions multiplies to `width`."""
    dims = list(shape)
    products = {1}
    for d in dims:
        products |= {p * d for p in products if p * d <= width}
    return width in products


def _affine(weight: str, act: str) -> bool:
    pairs = (("context", ("encoder", "context", "text")), ("encoder", ("encoder",)),
             ("cross", ("encoder", "context", "text", "key")), ("add_", ("encoder", "context")),
             ("text", ("text",)), ("language", ("language", "lang")),
             ("vision", ("vision",)), ("image", ("image",)), ("audio", ("audio", "input_feat")),
             ("pooled", ("pooled",)), ("temb", ("temb", "time")), ("time", ("time", "temb")),
             ("timestep", ("timestep",)), ("t2i", ("queries",)), ("i2t", ("keys",)),
             ("adaln", ("temb", "emb", "timestep")), ("modulation", ("temb", "emb")),
             ("norm1", ("temb", "emb")), ("linear_weight", ("temb",)),
             ("emb", ("emb",)))
    w, a = weight.lower(), act.lower()
    return any(k in w and any(x in a for x in v) for k, v in pairs)


def _dims_of_weight(t: Tensor) -> tuple[int, int]:
    """(first, last) of a 2-D parameter, the last doubled for packed FP4."""
    shape = [d for d in (t.shape or ())]
    while len(shape) > 2 and shape[0] == 1:
        shape = shape[1:]
    first, last = shape[-2], shape[-1]
    if t.kind == "nvfp4":
        last *= 2
    return first, last


# ---- the mapper --------------------------------------------------------------------------
def map_workload(w: Workload) -> Mapped:
    """The op graph of one workload (module docstring)."""
    name = w.problem.lower()
    for pattern, why in UNMAPPABLE:
        if re.search(pattern, name):
            return Mapped(w, "none", reason=why,
                          io_bytes={n: t.bytes for n, t in w.tensors.items()})
    b = _Builder(w)
    try:
        for family in (_flashinfer_attention, _operand_gemm, _moe, _embedding_backward,
                       _kv_cache_update):
            if family(b):
                return b.result()
        _layers(b)
    except InputError as e:  # a shape the op cannot take: the mapping failed, say why
        return Mapped(w, "none", reason=f"inferred op rejected: {e.problems[0]}",
                      io_bytes={n: t.bytes for n, t in w.tensors.items()})
    except ZeroDivisionError:
        # a zero-size dimension (an empty cache, cache_len 0) the families' shape inference
        # divides by: no op is inferred, and SOLAR's memory bound of the I/O still applies
        return Mapped(w, "none", reason="no op inferred: a zero-size dimension",
                      io_bytes={n: t.bytes for n, t in w.tensors.items()})
    return b.result()


def _flashinfer_attention(b: _Builder) -> bool:
    """FlashInfer-Bench paged/ragged attention: q [tokens, H, D] with a paged cache or ragged
    K/V and indptr arrays."""
    ins = b.w.inputs
    if "kv_indptr" not in ins:
        return False
    ax = b.w.axes
    mla = "ckv_cache" in ins
    q = ins["q_nope"] if mla else ins["q"]
    heads = q.shape[1]
    requests = max(1, ins["kv_indptr"].numel - 1)
    total_q = q.shape[0]
    if mla:
        dk, dv, kvh = ax["head_dim_ckv"] + ax["head_dim_kpe"], ax["head_dim_ckv"], 1
    else:
        dk = dv = ax["head_dim"]
        kvh = ax["num_kv_heads"]
    eb = q.element_bytes
    if "kv_indices" in ins:
        page = ax.get("page_size", 1)
        kv_tokens = ax["num_kv_indices"] * page
        per_token = (dk if mla else 2 * dk) * kvh * eb
        for n in ("k_cache", "v_cache", "ckv_cache", "kpe_cache"):
            if n in ins:
                t = ins[n]
                b.io_bytes[n] = kv_tokens * (t.numel // (t.shape[0] * t.shape[1])) * page * \
                    t.element_bytes / page
        b.add("kv page gather", Gather(rows=kv_tokens, cols=int(per_token // eb), dtype="bf16",
                                       table_rows=ins[next(n for n in ("k_cache", "ckv_cache")
                                                           if n in ins)].shape[0] * page))
        b.notes.append("KV caches counted at the pages kv_indices touch")
    else:
        kv_tokens = ins["k"].shape[0]
    if requests > 1:
        b.standin(f"{requests} requests of equal lengths (their means)")
    sq = max(1, math.ceil(total_q / requests))
    skv = max(1, math.ceil(kv_tokens / requests))
    causal = "causal" in b.name
    op = Attention(batch=requests, heads=heads, kv_heads=kvh, seq_q=sq, seq_kv=skv,
                   head_dim=dk, head_dim_v=dv, dtype="bf16", causal=causal and sq > 1,
                   shared_kv=mla)
    b.add("attention", op, float(requests) * heads * sq * skv * (dk + dv), "fp16")
    b.consumed.update(b.w.tensors)
    return True


def _operand_gemm(b: _Builder) -> bool:
    """C = A·Bᵀ of two operand inputs (FlashInfer-Bench's GEMMs: A [M, K], B [N, K])."""
    ins = b.w.inputs
    if not ("A" in ins and "B" in ins and ins["A"].rank == 2 and ins["B"].rank == 2
            and b.w.op_kind == "gemm"):
        return False
    m, k = ins["A"].shape
    n, k2 = ins["B"].shape
    if k != k2:
        return False
    b.gemm("A·Bᵀ", m, n, k)
    b.consumed.update(b.w.tensors)
    return True


def _moe(b: _Builder) -> bool:
    """Expert FFNs over routed tokens (module docstring)."""
    ins = b.w.inputs
    experts = {n: t for n, t in ins.items() if t.rank == 3 and t.is_float and t.shape[0] > 1
               and (t.shape[0] == b.axis("experts") or "expert" in n or "gemm" in n)
               and _is_param(n, t)}
    if not experts:
        return False
    e = next(iter(experts.values())).shape[0]
    hidden = b.w.axes.get("hidden_size") or next(
        (t.last for n, t in ins.items() if "hidden" in n and t.is_float), None)
    x = next((ins[n] for n in ("hidden_states", "x", "selected_tokens") if n in ins), None)
    if hidden is None and x is not None:
        hidden = x.last
    t_rows = x.numel // x.last if x is not None else b.tokens()
    topk = b.axis("topk")
    named = re.search(r"topk(\d+)", b.name)
    if topk is None and named:
        topk = int(named.group(1))
    dense_routing = next((n for n, t in ins.items() if "routing_weight" in n and t.rank == 2
                          and t.shape[-1] == e), None)
    if topk is None and dense_routing:
        routed = t_rows * e
        b.notes.append("every token through every expert (dense [T, E] routing weights)")
    else:
        topk = topk or 1
        routed = t_rows * topk
    local = b.w.axes.get("num_local_experts")
    if local and b.w.axes.get("num_experts", e) > local:
        total = b.w.axes["num_experts"]
        routed_local = routed * local / total
        b.standin(f"tokens routed uniformly: {local} of {total} experts local")
    else:
        routed_local = routed
    # experts the routed rows touch (uniform routing's expected distinct experts)
    active = e * -math.expm1(routed_local * math.log1p(-1.0 / e)) \
        if routed_local < 50 * e and e > 1 else float(e)
    if active < e - 0.5:
        b.standin(f"{active:.1f} of {e} experts activated (uniform routing's expectation)")
        for n, t in experts.items():
            b.io_bytes[n] = t.bytes * active / e
        for n, t in ins.items():
            if n not in experts and t.rank == 3 and t.shape[0] == e:
                b.io_bytes[n] = t.bytes * active / e  # their block scales
    dtype = b.mma
    m = max(1, round(routed_local))
    order = sorted(experts.items(), key=lambda kv: (0 if re.search("gate|up|w1|w3|gemm1", kv[0])
                                                    else 1))
    macs_per_row = 0.0
    grouped = []
    for n, t in order:
        _, a, c = t.shape
        if t.kind == "nvfp4":
            c *= 2
        down = bool(re.search(r"down|w2|gemm2", n))
        if not down:  # gate/up read the hidden state: K = hidden
            nn, kk = (a, c) if c == hidden or a != hidden else (c, a)
        else:         # down writes it: N = hidden
            nn, kk = (a, c) if a == hidden or c != hidden else (c, a)
        grouped.append((n, nn, kk))
        macs_per_row += nn * kk
    passes = 1
    if b.bwd:
        passes = 3 if not any(k.startswith(("grad_", "gate_output", "w1_output"))
                              for k in ins if k != "grad_output") else 2
    for n, nn, kk in grouped:
        op = GroupedGemm(groups=e, m=m, n=nn, k=kk, dtype=dtype if dtype != "fp16" else "fp16",
                         out_dtype="bf16")
        b.add(f"experts {n}", op, float(m) * nn * kk, precision_of(dtype))
        if passes > 1:
            for i in range(passes - 1):
                b.add(f"experts {n} ({'dX' if i == 0 else 'dW'})", op, float(m) * nn * kk,
                      precision_of(dtype))
        b.consume(n)
    if hidden:
        b.add("dispatch gather", Gather(rows=m, cols=hidden, dtype=b.stream_dtype_bf(),
                                        table_rows=t_rows))
        b.add("combine scatter-add", Scatter(rows=m, cols=hidden, dtype=b.stream_dtype_bf(),
                                             reduce="add", dest_rows=t_rows))
    if x is not None:
        b.consume(next(n for n in ("hidden_states", "x", "selected_tokens") if n in ins))
    # router and shared experts: the 2-D parameters
    _dense(b)
    if any(p.op.name == "gemm" and p.op.n == e for p in b.parts) or "routing" in b.name:
        if topk:
            b.add("router top-k", TopK(rows=t_rows, cols=e, k=min(topk, e), dtype="fp32"))
    b.leftover()
    return True


def _embedding_backward(b: _Builder) -> bool:
    out = next(((n, t) for n, t in b.w.outputs.items() if "embed" in n and t.rank == 2), None)
    ids = next(((n, t) for n, t in b.w.inputs.items() if "ids" in n and not t.is_float), None)
    if out is None or ids is None or not b.bwd:
        return False
    n, t = out
    vocab, dim = t.shape
    b.add("embedding backward", Embedding(tokens=ids[1].numel, vocab=vocab, dim=dim,
                                          dtype=t.kind if t.kind in ("fp32", "bf16", "fp16")
                                          else "bf16", direction="bwd"))
    b.consume(n, ids[0], "grad_output")
    _norms(b)
    b.leftover()
    return True


def _kv_cache_update(b: _Builder) -> bool:
    """An in-place cache update: the cache in and out have one shape; only the new slots move."""
    ins, outs = b.w.inputs, b.w.outputs
    pairs = [(i, o) for i in ins for o in outs
             if "cache" in i and "cache" in o and ins[i].shape == outs[o].shape
             and not i.startswith("grad")]
    if not pairs or b.bwd:
        return False
    new = next((t for n, t in ins.items() if n in ("key", "key_states")), None)
    for i, o in pairs:
        t = ins[i]
        rows = new.numel // t.last if new is not None else 1
        b.io_bytes[i] = 0.0
        b.io_bytes[o] = rows * t.last * t.element_bytes
        b.add(f"{o} slot write", Scatter(rows=rows, cols=t.last, dtype=t.kind
                                         if t.kind in ("bf16", "fp16", "fp32") else "bf16"))
        b.consume(i, o)
    b.notes.append("caches updated in place: only the new slots are written")
    _norms(b)
    b.leftover("rope and norms", fma=6.0)
    return True


def _layers(b: _Builder) -> None:
    """Attention cores, dense layers, convolutions, embeddings, norms and the streaming rest."""
    _embedding(b)
    _convs(b)
    cores = _attention_cores(b)
    _dense(b)
    _convs(b, sequence=True)
    for core in cores:
        core()
    _activation_matmuls(b)
    _norms(b)
    _special_streams(b)
    for pattern, what in STREAM_STANDINS:
        if re.search(pattern, b.name):
            b.standin(what)
    b.leftover()


def _embedding(b: _Builder) -> None:
    ids = next(((n, t) for n, t in b.w.inputs.items() if "ids" in n and not t.is_float
                and "position" not in n), None)
    table = next(((n, t) for n, t in b.w.inputs.items()
                  if t.rank == 2 and EMBED_TABLE_RE.search(n.lower())), None)
    if ids is None or table is None:
        return
    n, t = table
    tokens = ids[1].numel
    b.add("embedding", Embedding(tokens=tokens, vocab=t.shape[0], dim=t.shape[1],
                                 dtype=t.kind if t.kind in ("fp32", "bf16", "fp16") else "bf16"))
    b.io_bytes[n] = min(t.bytes, tokens * t.shape[1] * t.element_bytes)
    b.notes.append(f"{n}: the rows the token ids gather")
    b.consume(n, ids[0])
    b.acts.append(_Act(n, tokens, t.shape[1], t.kind, True))


def _dense(b: _Builder) -> None:
    """Every 2-D parameter (and [G, N, K] batched ones) as a GEMM; backward: dX and dW."""
    params = [(n, t) for n, t in b.w.inputs.items() if _is_param(n, t) and n not in b.consumed
              and not _is_conv_weight(n, t)]
    grads = set(b.w.outputs)
    for n, t in params:
        if t.rank == 3 and t.shape[0] > 1:
            _batched_weight(b, n, t)
            continue
        first, last = _dims_of_weight(t)
        act = b.find(last, n)
        if act is not None:
            nn, kk = first, last
        else:
            act = b.find(first, n)
            if act is not None:
                nn, kk = last, first
                b.standin(f"{n} {list(t.shape)} read as [K, N] (only its first dimension "
                          f"matches an activation)")
            else:
                nn, kk = first, last
        m = act.rows if act is not None else b.tokens()
        q_rows = _query_rows(b, n)
        if q_rows:
            m = q_rows  # an attention output projection: the attention's query rows
        streams = b.w.axes.get("altup_num_inputs")
        if streams and n.startswith("unembed") and act is not None and not act.produced:
            m = act.rows // streams  # AltUp: each projection maps one of the streams
        if act is not None and not act.produced:
            b.consume(act.name)
        if b.mma == "nvfp4" and act is not None and act.dtype in ("bf16", "fp32", "fp16") \
                and t.kind == "nvfp4":
            b.add(f"quantize {act.name}", Quantize(rows=max(1, m), cols=kk, to="nvfp4",
                                                   **{"from": act.dtype}))
        dtype = b.mma if (b.mma != "nvfp4" or t.kind == "nvfp4") else "bf16"
        if b.mma == "nvfp4" and t.kind != "nvfp4":
            dtype = "bf16"
        if b.bwd and _recomputes(b) and not O_RE.search(n.lower()) and (
                Q_RE.search(n.lower()) or K_RE.search(n.lower()) or V_RE.search(n.lower())):
            # a backward from the block's inputs re-runs the forward projections that feed
            # the attention (its output projection's forward is not needed)
            b.gemm(f"{n} (forward recompute)", m, nn, kk, dtype=dtype)
        b.gemm(n, m, nn, kk, dtype=dtype)
        if b.bwd:
            if any(g.startswith("grad_") and n.replace("_weight", "") in g for g in grads) \
                    or f"grad_{n}" in grads:
                b.gemm(f"{n} (dW)", nn, kk, m, dtype=dtype)
                b.consume(f"grad_{n}")
        b.consume(n)
        b.produce(f"{n} out", m, nn)


def _query_rows(b: _Builder, name: str) -> int | None:
    """The rows of the query projection of the same attention module, for its output
    projection (cross-attention: the queries', not the keys')."""
    n = name.lower()
    if not O_RE.search(n):
        return None
    prefix = _prefix(n)
    for p in b.parts:
        pn = p.name.lower()
        if p.op.name == "gemm" and Q_RE.search(pn) and not K_RE.search(pn) \
                and _prefix(pn) == prefix and "(dw)" not in pn:
            return p.op.m
    return None


def _recomputes(b: _Builder) -> bool:
    """A backward whose inputs hold no saved attention activations: it re-runs the forward."""
    return b.bwd and b.axis("heads") is not None and not _has_saved(b) \
        and "attention" in b.name and not any(
            n in b.w.inputs for n in ("grad_query", "grad_key", "grad_value",
                                      "grad_query_states"))


def _batched_weight(b: _Builder, n: str, t: Tensor) -> None:
    g, first, last = t.shape
    act = b.find(last, n)
    if act is None:
        rows = b.tokens()
    else:
        rows = act.rows
        if not act.produced:
            b.consume(act.name)
    m = max(1, rows // g)
    b.gemm(n, m, first, last, batch=g)
    if b.bwd:
        b.gemm(f"{n} (dW)", first, last, m, batch=g)
    b.consume(n)
    b.produce(f"{n} out", rows, first)


def _is_conv_weight(n: str, t: Tensor) -> bool:
    if t.rank < 3 or not t.is_float:
        return False
    if t.rank == 3 and (t.shape[0] == 1 or "expert" in n or "hyper" in n):
        return False
    n = n.lower()
    if not (PARAM_RE.search(n) or CONV_RE.search(n)) or NOT_PARAM_RE.search(n):
        return False
    return bool(CONV_RE.search(n)) or t.rank >= 4


def _is_sequence_conv(t: Tensor) -> bool:
    """A depthwise 1-D conv over a sequence ([C, 1, k]: Mamba/Hyena/LFM short convs)."""
    return t.rank == 3 and t.shape[1] == 1


def _convs(b: _Builder, sequence: bool = False) -> None:
    """Image/volume convolutions (before the dense layers), or with `sequence` the depthwise
    1-D convs of sequence models (after them: they read a projection's output)."""
    convs = [(n, t) for n, t in b.w.inputs.items() if _is_conv_weight(n, t)
             and _is_sequence_conv(t) == sequence and n not in b.consumed]
    if not convs:
        return
    if sequence:
        for n, t in convs:
            c, _, k = t.shape
            act = b.find(c, n)
            if act is None:  # a projection wider than the conv (Mamba: in_proj ⊃ conv_dim)
                act = max((a for a in b.acts if a.width > c), key=lambda a: a.rows,
                          default=None)
                if act is not None:
                    b.standin(f"{n}: the depthwise conv over {c} of the {act.width} "
                              f"channels of {act.name}")
            rows = act.rows if act is not None else b.tokens()
            batch = b.axis("batch", 1)
            if rows % batch:
                batch = 1
            op = Conv(batch=batch, in_channels=c, out_channels=c, width=max(1, rows // batch),
                      kernel_w=k, padding=k - 1, groups=c,
                      dtype=b.mma if b.mma not in ("nvfp4", "fp8") else "bf16")
            b.add(n, op, 0.0)
            b.consume(n)
        return
    dims = max(t.rank for _, t in convs) - 2
    cands = [t for n, t in b.w.inputs.items() if t.is_float and t.rank >= 3
             and not _is_conv_weight(n, t) and not _is_param(n, t)]
    x = max(cands, key=lambda t: (t.rank == dims + 2, t.numel), default=None)
    if x is None:
        b.standin("convolution input extent guessed (no activation tensor)")
        return
    batch = x.shape[0]
    spatial = list(x.shape[2:]) if x.rank >= 3 else [x.shape[-1]]
    channels = x.shape[1]
    if x.rank == 3 and b.w.axes.get("seq_len") == x.shape[1]:
        spatial, channels = [x.shape[1]], x.shape[2]  # [B, L, C]
    b.consume(next(n for n, t in b.w.inputs.items() if t is x))
    strided = re.search(r"strid|downsampl|down\d|_down", b.name)
    patch = b.w.axes.get("patch_size")
    halvings = _halvings(b, max(spatial), sum(1 for _, t in convs if max(t.shape[2:]) > 1))
    guessed = halvings > 0
    for n, t in convs:
        cout, cin_g = t.shape[0], t.shape[1]
        ks = list(t.shape[2:])
        kd = len(ks)
        if "upsample" in n:  # transposed conv [C_in, C_out, k, k]
            cout, cin_g = t.shape[1], t.shape[0]
        groups = max(1, channels // cin_g) if cin_g and channels % cin_g == 0 else 1
        if cin_g != channels and groups == 1:
            channels = cin_g  # a branch of the block reads another width: follow the filter
            guessed = True
        sp = spatial[-kd:] if len(spatial) >= kd else [1] * (kd - len(spatial)) + spatial
        while len(sp) < 3:
            sp = [1] + sp
            ks = [1] + ks
        stride = 1
        if patch and ks[-1] == patch:
            stride = patch
        elif halvings and ks[-1] > 1:
            stride, halvings = 2, halvings - 1
        elif strided and ("down" in n or "strid" in b.name) and ks[-1] > 1:
            stride = b.w.axes.get("stride", 2)
            guessed = True
        kw = dict(batch=batch, in_channels=channels, out_channels=cout, depth=sp[0],
                  height=sp[1], width=sp[2], kernel_d=ks[0], kernel_h=ks[1], kernel_w=ks[2],
                  stride=stride, stride_d=1 if ks[0] == 1 else stride, groups=groups,
                  dtype=b.mma if b.mma not in ("nvfp4", "fp8") else "bf16",
                  padding=0 if stride > 1 and stride == ks[-1] else None)
        if "upsample" in n:
            kw.update(stride=1, padding=None)
            guessed = True
        op = Conv(**kw)
        b.add(n, op, op.flop / 2 if op.case != "depthwise" else 0.0, precision_of(op.dtype))
        b.consume(n)
        z, p, q = op.output_extent
        spatial = [z, p, q][-len(spatial):] if len(spatial) < 3 else [z, p, q]
        channels = cout
        b.produce(f"{n} out", batch * math.prod(spatial), cout)
    if guessed or len(convs) > 2:
        b.standin("convolution chain geometry inferred (same padding; strides from the name "
                  "and the output's extent)")


def _halvings(b: _Builder, extent: int, convs: int) -> int:
    """Stride-2 convs the outputs imply: an output dimension (or a *_after_conv axis) equal to
    the input extent halved c times (rounding up), c ≤ the convs with a filter > 1."""
    dims = [v for k, v in b.w.axes.items() if "after_conv" in k]
    for t in b.w.outputs.values():  # spatial or sequence extents: not batch, not channels
        if t.rank >= 3:
            dims += list(t.shape[1:-1]) + list(t.shape[2:])
    for c in range(convs, 0, -1):
        x = extent
        for _ in range(c):
            x = -(-x // 2)
        if x in dims and x != extent:
            return c
    return 0


def _attention_cores(b: _Builder) -> list:
    """Deferred attention cores (run after the projections they read are counted)."""
    if not re.search(r"atten|attn|decoder|encoder|transformer|block|layer|sdpa|gqa|mha|"
                     r"two_way|qformer|vision", b.name):
        return []
    heads = b.axis("heads")
    ins = b.w.inputs
    if not heads and "attention" in b.name and any(
            _is_param(n, t) and Q_RE.search(n.lower()) for n, t in ins.items()):
        heads = 1  # single-head attention (VAE mid-block): head_dim is the channels
        b.notes.append("one attention head (no heads axis)")
    if not heads or re.search(r"matmul|score_value", b.name):
        return []
    outs = b.w.outputs
    qkv_out = [n for n in outs if re.search(r"(^|_)(query|key|value|q|k|v)(_states|_nope|_pe)?$"
                                            r"|^(keys|values|kv_expanded|k_pe|q_pe|q_nope)$", n)]
    if qkv_out and not any(re.search(r"(^|_)(attn|attention)_?output|^output$|context", n)
                           for n in outs):
        return []  # a projection problem: the states are its outputs
    if any(n in ins for n in ("grad_query", "grad_key", "grad_value", "grad_query_states")):
        return []  # the backward of the projections, from the states' gradients
    qs = [(n, t) for n, t in ins.items() if _is_param(n, t) and Q_RE.search(n.lower())
          and not K_RE.search(n.lower())]
    states = [n for n in ("query_states", "query", "q", "queries") if n in ins
              and ins[n].rank == 4]
    cores = []
    if not qs and states:
        q = ins[states[0]]
        k = next((ins[n] for n in ("key_states", "key", "k", "keys") if n in ins), q)
        kvh = b.axis("kv_heads") or (k.shape[1] if k.rank == 4 else heads)
        d = q.shape[-1]
        cores.append(_core(b, "attention", q.shape[0], heads, kvh, q.shape[2],
                           k.shape[2] if k.rank == 4 else q.shape[2], d, d,
                           saved=_has_saved(b)))
        b.consume(states[0])
        return cores
    for qn, qt in qs:
        prefix = _prefix(qn)
        fused = "qkv" in qn.lower() or "c_attn" in qn.lower()
        first, last = _dims_of_weight(qt)
        hd = b.axis("head_dim") or (first // (3 if fused else 1)) // heads
        if b.w.axes.get("attention_head_dim") == 1 and heads == first:
            hd = first  # diffusers' VAE: "heads" of dim 1 are one head over the channels
            heads = 1
        h = heads
        if prefix and any(x in prefix for x in ("cross", "qformer", "t2i", "i2t")):
            h = b.w.axes.get("cross_num_attention_heads", b.w.axes.get("qformer_num_heads", h))
        q_dim = first // 3 if fused else first
        if q_dim % hd == 0:
            h = q_dim // hd
        ks = [(n, t) for n, t in ins.items() if _is_param(n, t) and K_RE.search(n.lower())
              and _prefix(n) == prefix]
        kvh = h
        if ks and not fused:
            kd = _dims_of_weight(ks[0][1])[0]
            if "kv" in ks[0][0] and "kv_a" not in ks[0][0] and "kv_b" not in ks[0][0]:
                kd //= 2
            kvh = max(1, min(h, kd // hd)) if kd % hd == 0 else h
            while h % kvh:
                kvh -= 1
        cores.append(_deferred_core(b, qn, ks[0][0] if ks else None, h, kvh, hd, prefix,
                                    fused))
    if "window" in b.name and b.w.axes.get("window_size"):
        b.standin("window attention as independent windows of window_size²")
    return cores


def _prefix(name: str) -> str:
    n = name.lower()
    for tok in ("q_proj", "k_proj", "v_proj", "o_proj", "out_proj", "to_q", "to_k", "to_v",
                "to_kv", "to_out", "qkv", "query", "key", "value", "output", "q_weight",
                "k_weight", "v_weight", "kv_weight", "o_weight", "out_weight", "q_b_proj",
                "kv_a_proj", "kv_b_proj", "q", "k", "v", "kv", "o", "out"):
        m = re.search(rf"(^|_){tok}(_|$)", n)
        if m:
            return n[:m.start()]
    return n


def _has_saved(b: _Builder) -> bool:
    return any(n in b.w.inputs for n in ("attn_weights", "attention_probs", "attn_output",
                                         "attention_output", "p_attn", "query_states", "q",
                                         "query"))


def _deferred_core(b: _Builder, qn: str, kn: str | None, heads: int, kvh: int, hd: int,
                   prefix: str, fused: bool):
    def run():
        q = next((p for p in b.parts if p.name == qn), None)
        k = next((p for p in b.parts if p.name == kn), None) if kn else None
        if q is None:
            return
        batch = b.axis("batch", 1)
        rows_q, rows_k = q.op.m, (k.op.m if k is not None else q.op.m)
        windows = b.w.axes.get("window_size")
        if "window" in b.name and windows:
            seq_q = seq_k = windows * windows
            batch = max(1, math.ceil(rows_q / seq_q))
        elif "num_chunks" in b.w.axes and "chunk" in b.name:
            batch = b.w.axes["num_chunks"]
        elif any(a in b.w.axes for a in ("num_seqs", "num_sequences")) and \
                ("cu_seqlens" in b.w.inputs or "varlen" in b.name):
            batch = b.w.axes.get("num_seqs") or b.w.axes.get("num_sequences")
            b.standin(f"{batch} sequences of equal length (cu_seqlens not read)")
        if rows_q % batch or rows_k % batch:
            batch = math.gcd(rows_q, rows_k)
        seq_q, seq_k = max(1, rows_q // batch), max(1, rows_k // batch)
        b.parts.append(_core(b, f"attention {prefix}".strip(), batch, heads, kvh, seq_q, seq_k,
                             hd, hd, saved=_has_saved(b), deferred=True))
    return run


def _core(b: _Builder, name: str, batch: int, heads: int, kvh: int, sq: int, skv: int,
          d: int, dv: int, saved: bool, deferred: bool = False):
    dtype = "fp16" if b.mma == "fp16" else "bf16"
    if b.mma == "fp8" and "fp8" in b.name:
        dtype = "bf16"
    while heads % kvh:
        kvh -= 1
    causal = "causal" in b.name
    direction = "fwd"
    macs = float(batch) * heads * sq * skv * (d + dv)
    if b.bwd:
        direction = "bwd" if saved else "fwd+bwd"
        macs = macs * (2 if saved else 3)
    op = Attention(batch=batch, heads=heads, kv_heads=kvh, seq_q=sq, seq_kv=skv, head_dim=d,
                   head_dim_v=dv, dtype=dtype, causal=causal, direction=direction)
    part = Part(name, op, macs, "fp16")
    if deferred:
        return part

    def run():
        b.parts.append(part)
    return run


def _activation_matmuls(b: _Builder) -> None:
    """Matmuls between activations with no parameter (scores·V, Q·Kᵀ, per-chunk SSD products)."""
    ins, outs = b.w.inputs, b.w.outputs
    if any(p.op.name in ("attention", "gemm", "conv", "grouped_gemm") for p in b.parts):
        return
    name = b.name
    q = next((ins[n] for n in ("query", "query_states", "q") if n in ins and ins[n].rank == 4),
             None)
    k = next((ins[n] for n in ("key", "key_states", "k") if n in ins and ins[n].rank == 4), None)
    w = next((ins[n] for n in ("attn_weights", "attention_weights", "attn_weights_dropped",
                               "p_attn", "attention_probs") if n in ins and ins[n].rank == 4),
             None)
    v = next((ins[n] for n in ("value", "value_states", "v") if n in ins and ins[n].rank == 4),
             None)
    heads = b.axis("heads")
    if "matmul" in name or "score_value" in name or "softmax" in name and b.bwd:
        if q is not None and k is not None and ("qk" in name or "repeat_kv" in name):
            bb, h, sq, d = q.shape
            skv = k.shape[2]
            if not (b.bwd and w is not None):  # the backward reads the saved probabilities
                b.gemm("Q·Kᵀ", sq, skv, d, batch=bb * h)
            if b.bwd:
                b.gemm("dQ", sq, d, skv, batch=bb * h)
                b.gemm("dK", skv, d, sq, batch=bb * h)
            b.consume(*(n for n in ("query", "key", "query_states", "key_states") if n in ins))
            return
        if w is not None and v is not None:
            bb, h, sq, skv = w.shape
            dv = v.shape[-1]
            b.gemm("P·V", sq, dv, skv, batch=bb * h)
            if b.bwd:
                b.gemm("dP = dO·Vᵀ", sq, skv, dv, batch=bb * h)
                b.gemm("dV = Pᵀ·dO", skv, dv, sq, batch=bb * h)
            return
    if "intra_chunk" in name and "C" in ins and "B" in ins:
        bb, c, l, g, n = ins["C"].shape
        hdim = ins["hidden_states"].shape[-1]
        h = ins["hidden_states"].shape[3]
        b.gemm("C·Bᵀ per chunk", l, l, n, batch=bb * c * g)
        b.gemm("(L∘CBᵀ)·X per chunk", l, hdim, l, batch=bb * c * h)
        b.standin("SSD intra-chunk einsums as batched GEMMs (groups broadcast to heads)")


def _norms(b: _Builder) -> None:
    ins = b.w.inputs
    norm_ws = [(n, t) for n, t in ins.items() if t.rank in (1, 2) and t.is_float
               and NORM_RE.search(n.lower()) and "bias" not in n and n not in b.consumed
               and not _is_param(n, t)]
    if b.w.problem.lower().find("rms_norm") >= 0 or "rmsnorm" in b.name:
        norm_ws = norm_ws or [(n, t) for n, t in ins.items() if n == "weight" and t.rank == 1]
    groups = b.axis("groups")
    for n, t in norm_ws:
        width = t.shape[-1]
        layer = any(m.startswith(n.replace("weight", "bias")) for m in ins) \
            or "layer" in n.lower() or "ln" in n.lower() or "layernorm" in b.name
        dtype = b.stream_dtype_bf()
        if groups and ("group" in b.name or "gn" in n.lower() or "norm" in n.lower()) \
                and re.search(r"group|vae|resnet|unet|conv|gn", b.name + n.lower()):
            x = max((u for u in b.w.tensors.values() if u.rank == 4 and u.shape[1] == width),
                    key=lambda u: u.numel, default=None)
            if x is not None:
                b.add(f"{n}", GroupNorm(batch=x.shape[0], channels=width,
                                        spatial=x.shape[2] * x.shape[3], groups=groups,
                                        dtype=dtype, direction="bwd" if b.bwd else "fwd"))
                b.consume(n)
                continue
        rows = _norm_rows(b, width)
        if rows is None:
            continue
        if b.bwd and any(u.startswith("grad_") and "weight" in u for u in b.w.outputs):
            direction = "bwd"
        else:
            direction = "fwd"
        b.add(f"{n}", Norm(rows=rows, cols=width, dtype=dtype,
                           kind="layernorm" if layer else "rmsnorm", direction=direction))
        b.consume(n)


def _norm_rows(b: _Builder, width: int) -> int | None:
    best = None
    for n, t in b.w.tensors.items():
        if _is_param(n, t):
            continue
        if t.is_float and t.rank >= 2 and t.last == width:
            rows = t.numel // width
            best = max(best or 0, rows)
    for a in b.acts:
        if a.width == width:
            best = max(best or 0, a.rows)
    if best is None:
        for n, t in b.w.tensors.items():
            if _is_param(n, t):
                continue
            if t.is_float and t.rank >= 2 and t.numel % width == 0 and t.numel > width:
                best = max(best or 0, t.numel // width)
    return best


def _special_streams(b: _Builder) -> None:
    """Softmax and top-k problems keep their own ops; the rest is the leftover stream."""
    name = b.name
    ins, outs = b.w.inputs, b.w.outputs
    if "softmax" in name and not any(p.op.name in ("attention", "gemm") for p in b.parts):
        x = max((t for t in ins.values() if t.is_float and t.rank >= 2), key=lambda t: t.numel,
                default=None)
        if x is not None:
            d = x.kind if x.kind in ("fp32", "bf16", "fp16") else "bf16"
            b.add("softmax", Softmax(rows=x.numel // x.last, cols=x.last, dtype=d,
                                     direction="bwd" if b.bwd else "fwd"))
            b.consume(*(n for n, t in ins.items() if t.is_float and t.numel == x.numel))
            b.consume(*(n for n, t in outs.items() if t.numel == x.numel))
    if "topk" in name or "top_k" in name:
        if "routing" in name or "group" in name:
            return
        x = max((t for t in ins.values() if t.is_float and t.rank >= 2), key=lambda t: t.numel,
                default=None)
        if x is not None and x.kind in ("fp32", "bf16", "fp16"):
            b.add("top-k", TopK(rows=x.numel // x.last, cols=x.last,
                                k=max(1, x.last // 20), dtype=x.kind))
            b.standin("top-k of 5% of each row (the sparsity target is a runtime scalar)")


def map_problem(workloads: list[Workload]) -> list[Mapped]:
    return [map_workload(w) for w in workloads]
