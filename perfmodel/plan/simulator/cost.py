"""The time of one engine step of a serving replica (`StepCost`).

A continuous-batching engine step (vLLM, SGLang, TensorRT-LLM) runs `D` decode tokens, each of a
running sequence at its own context, plus prefill chunks `(chunk_tokens, prior_context)`. The
step is priced from the builder's graphs (`perfmodel.workloads.builder.build_graph`; the tables'
nodes read their ops with `inference_op_counts`, each layer kind once with how many layers run
it, rather than building every layer's nodes) and the op models, in four parts:

  body      every op but attention and the LM head, at T = D + sum(chunk_tokens) tokens: the
            prefill graph of one sequence of T tokens (batch=1, seq=T). Weights are read once per
            step, as in the engine, so a mixed step pays them once. For MLA (DeepSeek) the
            decode tokens take the weight-absorbed path: the ops only the decode graph has
            (q_absorb, v_up) are priced at D, and the ops only the prefill graph has (kv_b, the
            up-projection of the latent into K and V) at the keys the chunks attend to,
            sum(chunk + prior): vLLM's MLA prefill up-projects the cached latent of the prior
            context too.
  head      final norm and LM head at R = D + (number of chunks) rows: logits for each decode
            token and the last token of each chunk (vLLM V1 computes a partial chunk's logits and
            discards them); the builder's prefill graph puts B rows there, not B·seq.
  decode    one paged decode-attention kernel per layer over the decode tokens' KV, priced as the
  attention builder's decode attention op (GQA or MLA's latent form) at batch D and the mean
            context. Paged decode kernels are memory-bound on the total KV bytes, and the op's
            time is linear in batch × context there (H200, Llama-3-70B TP8: 0.119-0.122 ns per
            token·layer from 64 × 8k up to 1024 × 64k), so the mean is exact where it matters;
            small steps sit on the launch/latency floor, which the mean also gets right. A
            quantized KV cache (kv_dtype fp8, nvfp4): the builder's attention ops read K/V in
            it (bytes and conversion work), and kv.py sizes the KV capacity alike; with
            `fp8_attention` (the engine's kernels quantize Q and run FP8 MMAs on an FP8 cache:
            Engine.fp8_attention) the attention is the FP8 op, with no conversion.
  chunk     causal attention of each chunk over prior + chunk keys (seq_q = chunk,
  attention seq_kv = prior + chunk, bottom-right aligned), summed over chunks with one launch per
            layer (one varlen kernel runs all chunks).

Tensor-parallel all-reduces, MoE dispatch/combine and expert GEMMs are in the body (the builder's
MoE op at T tokens; with ep > tp the builder's data-parallel attention groups each route T
tokens, so one simulated scheduler stands for one attention group).

Pipeline parallelism (pp > 1): the step runs every stage in turn, so its latency is the whole
model's time (the pp = 1 graph at the same tp/ep) plus (pp - 1) activation sends of T·hidden·2 B.
Each stage is busy for 1/pp of the compute plus one send (stages taken as equal: the builder
splits layers evenly up to rounding); `step_times` returns both, and the simulator keeps pp
micro-batches in flight (vLLM's virtual engines), so throughput is set by the stage time.

Speed: a simulation prices thousands of steps, so the parts are interpolated from lazily filled,
memoized nodes (interp.py): the body, head and decode-only ops on a TileAxis (every token count up
to 64, then both ends of each 64-token interval up to 4096, geometric above), linear between
nodes; the MoE op on geometric nodes (its routed rows do not follow the tiles, and each
evaluation draws a routing); decode attention bilinear in (batch, context) on geometric nodes,
exact for a + b·batch·context; chunk attention linear in the prior context and log-log in the
chunk (every chunk length up to 32: chunks up to 16 tokens take the attention op's decode path).
`exact=True` evaluates every step at its own sizes. Measured error of whole steps against exact
(random decode, prefill and mixed steps, D ≤ 512, chunks ≤ 8k, contexts ≤ 8k; llama3-8b H100,
llama3-70b TP8 FP8 and qwen3-30b-a3b on H200): max 3.1 %, mean 0.1-0.4 %. Of the parts: the body
max 3.8 % / mean 0.7 %; decode attention max 17 % / mean 0.3 % (split-KV heuristics of kernels of
a few µs); chunk attention max 30 % / mean 0.7 % (few-token chunks crossing a key tile).
tests/plan/test_simulator.py enforces the whole-step bound.
"""
from __future__ import annotations

import functools
from collections import OrderedDict
from typing import Sequence

from perfmodel.hardware import Hardware, hardware
from perfmodel.ops import op as make_op
from perfmodel.ops.deepep import DeepEP
from perfmodel.plan.memory import as_model
from perfmodel.plan.simulator.interp import Axis, Table1, Table2, TileAxis, nodes_up_to
from perfmodel.plan.simulator.kv import check_kv_dtype
from perfmodel.predict import predict_op
from perfmodel.units import bytes_per_element, tensor_dtype
from perfmodel.workloads.builder import ACT_BYTES, build_graph, inference_op_counts
from perfmodel.workloads.models import ModelSpec

HEAD_ROLES = ("final_norm", "lm_head")
ATTENTION_ROLE = "attn"
MOE_OP = "moe"  # the expert FFN: its own table on geometric nodes (see StepCost)
PER_OCTAVE = 4          # interpolation nodes per doubling of tokens (body, head)
ATTN_PER_OCTAVE = 2     # per doubling of batch, context and chunk (attention tables)
CHUNK_EXACT_TOKENS = 32  # chunk-attention nodes: every chunk length up to this
CLASSIFY_TOKENS = 16    # graph size used to tell prefill-only from decode-only ops
# Filled nodes shared by the StepCosts of one (model, hardware, tp, ep, dtype, kv_dtype, level,
# resolution): a layout search simulates the same tensor/expert parallelism at several pipeline
# depths, and a stage's ops do not depend on pp (only the activation sends do). A few entries:
# one search visits at most a handful of (tp, ep) pairs per process.
SHARED_TABLES = 8
_shared: OrderedDict = OrderedDict()


@functools.lru_cache(maxsize=4096)
def role(node_name: str) -> str:
    """`l12.qkv` → `qkv`; top-level nodes (`embed`, `lm_head`) are their own role."""
    head, _, rest = node_name.partition(".")
    return rest if rest and head[:1] == "l" and head[1:].isdigit() else node_name


class StepCost:
    """Time of one engine step of one replica of `model` on `hw` at (tp, ep, pp, dtype).

    `step_time_s(decode, decode_context_sum, chunks)` is the step's latency;
    `step_times(...)` gives (latency, busy time of one pipeline stage). See the module docstring
    for the parts and their approximations."""

    def __init__(self, model: ModelSpec | str, hw: Hardware | str, tp: int = 1, ep: int = 1,
                 pp: int = 1, dtype: str = "bf16", kv_dtype: str = "bf16", level: str = "pipes",
                 per_octave: int = PER_OCTAVE, attn_per_octave: int = ATTN_PER_OCTAVE,
                 exact: bool = False, moe_routing: str = "token_balanced",
                 fp8_attention: bool = False, fusion: str = "none",
                 attention_kernel: str | None = None, moe_loads: str | None = None,
                 moe_replication: float = 1.0, moe_variation: float = 0.0,
                 moe_exchange: str = "alltoall", allreduce: str = "auto",
                 gemm_dispatch: str = "best", moe_kernel: str = "grouped"):
        self.model, self.hw = as_model(model), hardware(hw)
        self.tp, self.ep, self.pp, self.dtype, self.level = tp, ep, pp, dtype, level
        check_kv_dtype(kv_dtype)
        self.kv_dtype, self.exact = kv_dtype, exact
        self._graph_kw = dict(tp=tp, ep=ep, pp=1, dtype=dtype, moe_routing=moe_routing)
        # MoE routing from recorded expert loads (Workload.moe_loads): every MoE layer its own
        # op, priced on the experts' geometric nodes like the synthetic routing's one
        self.moe_loads, self.moe_replication = moe_loads, moe_replication
        self.moe_variation = moe_variation
        if moe_replication != 1.0:
            self._graph_kw["moe_replication"] = moe_replication
        if moe_loads is not None:
            self._graph_kw.update(moe_loads=moe_loads, moe_variation=moe_variation)
        if bytes_per_element(kv_dtype) != ACT_BYTES:  # a cache narrower than the activations
            self._graph_kw["kv_dtype"] = kv_dtype
            if self.uses_fp8_attention(self.hw, kv_dtype, fp8_attention, self.model.is_mla):
                self._graph_kw["fp8_attention"] = True
        self.fp8_attention = self._graph_kw.get("fp8_attention", False)
        self.fusion = fusion  # the engine's fused kernels (builder.FUSIONS)
        if fusion != "none":
            self._graph_kw["fusion"] = fusion
        # the engine's GQA attention family where it runs on this GPU (uses_attention_kernel)
        self.attention_kernel = self.uses_attention_kernel(self.hw, attention_kernel)
        if self.attention_kernel is not None:
            self._graph_kw["attention_kernel"] = self.attention_kernel
        # the engine's MoE dispatch and combine (builder.MOE_EXCHANGES); DeepEP's where its
        # kernels run this EP group on this GPU (ops/deepep.py DeepEP.runs_on: not a group of
        # 8 < ep <= 72 inside an NVL72 domain), else the all-to-all
        if moe_exchange == "deepep" and ep > 1 and not DeepEP.runs_on(ep, self.hw):
            moe_exchange = "alltoall"
        self.moe_exchange = moe_exchange
        if moe_exchange != "alltoall":
            self._graph_kw["moe_exchange"] = moe_exchange
        # the engine's tensor-parallel all-reduce dispatch (builder.ALLREDUCE_DISPATCH)
        self.allreduce = allreduce
        if allreduce != "auto":
            self._graph_kw["allreduce"] = allreduce
        # the engine's GEMM kernels by M (builder Workload.gemm_dispatch, ops.gemm_dispatch)
        self.gemm_dispatch = gemm_dispatch
        if gemm_dispatch != "best":
            self._graph_kw["gemm_dispatch"] = gemm_dispatch
        # the mixed-input experts' kernel (builder Workload.moe_kernel: vLLM's Marlin MoE)
        self.moe_kernel = moe_kernel
        if moe_kernel != "grouped":
            self._graph_kw["moe_kernel"] = moe_kernel
        self._op_kw = {k: v for k, v in self._graph_kw.items() if k != "pp"}
        # the share of a kernel's launch a CUDA graph removes: the host's; each replayed kernel
        # keeps the GPU's own graph_kernel_gap_s (the grid launched after the previous drains)
        self._graph_removes = (1.0 - self.hw.graph_kernel_gap_s / self.hw.kernel_launch_s
                               if self.hw.kernel_launch_s > 0 else 1.0)
        pre = build_graph(self.model, "prefill", batch=1, seq=CLASSIFY_TOKENS, **self._graph_kw)
        self._last_ops = None  # see _prefill_ops
        dec = build_graph(self.model, "decode", batch=CLASSIFY_TOKENS, context=CLASSIFY_TOKENS,
                          **self._graph_kw)
        pre_roles = {role(n.name) for n in pre.nodes}
        dec_roles = {role(n.name) for n in dec.nodes}
        skip = {ATTENTION_ROLE, *HEAD_ROLES}
        self.prefill_only = frozenset(pre_roles - dec_roles - skip)
        self.decode_only = frozenset(dec_roles - pre_roles - skip)
        self.attention_layers = sum(role(n.name) == ATTENTION_ROLE for n in pre.nodes)
        # (op, layers) of each attention kind, full attention first: a sliding-window layer
        # (ModelSpec.window) attends over the window's last keys only, so the attention tables
        # hold the mean per layer over the kinds (_attention_mean)
        self._prefill_attn_kinds = _attention_kinds(pre.nodes)
        self._decode_attn_kinds = _attention_kinds(dec.nodes)
        self._prefill_attn = self._prefill_attn_kinds[0][0]
        self._decode_attn = self._decode_attn_kinds[0][0]
        self._head_ops = [n.op for n in pre.nodes if n.name in HEAD_ROLES]
        tokens_axis = TileAxis(per_octave)
        attn_axis = Axis(attn_per_octave)
        self.body = Table1(self._eval_body, tokens_axis, exact)
        # the MoE op's routed rows per expert do not follow the 64-token tiles, and each of its
        # evaluations draws a routing (tens of ms at thousands of tokens): geometric nodes
        self.experts = (Table1(self._eval_experts, Axis(per_octave), exact)
                        if any(n.op.name == MOE_OP for n in pre.nodes) else None)
        self.decode_ops = Table1(self._eval_decode_only, tokens_axis, exact)
        self.head = Table1(self._eval_head, tokens_axis, exact)
        self.decode_attention = Table2(self._eval_decode_attention, attn_axis, attn_axis, exact)
        # chunks up to the attention op's DECODE_MAX_SEQ_Q (16) take its decode (split-KV) path,
        # longer ones the prefill kernel: exact nodes up to 32 keep the two apart
        self.chunk_attention = Table2(self._eval_chunk_attention,
                                      TileAxis(attn_per_octave, exact_to=CHUNK_EXACT_TOKENS),
                                      Axis(attn_per_octave, lo=0), exact, log_x=True)
        self.sends = Table1(self._eval_send, tokens_axis, exact)
        self._verify: dict[int, Table2] = {}
        # a decode-only step's parts but the attention, per (decode, graphs, pad): a lane
        # decodes the same batch for hundreds of steps while only the contexts grow
        self._decode_fixed: dict[tuple[int, str, int], tuple[float, float]] = {}
        self._share((self.model, self.hw, tp, ep, dtype, kv_dtype, level, per_octave,
                     attn_per_octave, exact, moe_routing, self.fp8_attention, fusion,
                     attention_kernel, moe_loads, moe_replication, moe_variation, moe_exchange,
                     allreduce, gemm_dispatch, moe_kernel))

    @classmethod
    def for_engine(cls, model: ModelSpec | str, hw: Hardware | str, engine="vllm", tp: int = 1,
                   ep: int = 1, pp: int = 1, dtype: str = "bf16", kv_dtype: str = "bf16",
                   level: str = "pipes", **kw) -> "StepCost":
        """The StepCost `simulate(..., engine=engine)` builds: with the kernels that engine
        runs (its preset's or the Engine's fp8_attention and kernel_fusion), to price several
        simulations of one deployment once."""
        from perfmodel.plan.simulator.engines import engine_preset
        eng = engine_preset(engine, hw, tp, pp) if isinstance(engine, str) else engine
        return cls(model, hw, tp, ep, pp, dtype, kv_dtype, level,
                   fp8_attention=eng.fp8_attention, fusion=eng.kernel_fusion,
                   attention_kernel=eng.attention_kernel, moe_exchange=eng.moe_exchange,
                   allreduce=eng.allreduce, gemm_dispatch=eng.gemm_dispatch,
                   moe_kernel=eng.moe_kernel, **kw)

    @staticmethod
    def uses_attention_kernel(hw: Hardware, kernel: str | None) -> str | None:
        """The attention family an engine asks for (Engine.attention_kernel) where it is written
        for this GPU's tensor cores, else None (the GPU's default family): TensorRT-LLM's own
        kernels are modelled for wgmma and tcgen05 GPUs only (ops/attention/trtllm.py), so an
        engine preset naming them still prices an A100 with the default family."""
        from perfmodel.ops.attention.op import KERNEL_MMA
        if kernel is None or hw.mma_instruction not in KERNEL_MMA[kernel]:
            return None
        return kernel

    @staticmethod
    def uses_fp8_attention(hw: Hardware, kv_dtype: str, fp8_attention: bool,
                           mla: bool = False) -> bool:
        """Whether an engine that runs FP8 attention on an FP8 cache (Engine.fp8_attention)
        does so here: an FP8 cache on a GPU with FP8 tensor cores (else K/V are converted),
        and for MLA's latent cache only on tcgen05 GPUs. AIConfigurator's measured
        TensorRT-LLM MLA generation kernels (generation_mla_perf, 1.3.0rc20) show it: with an
        FP8 cache on H100 and H200 they take the time of the conversion path (BF16 MMAs on
        converted K/V: 0.94-1.06x of it at 16 and 128 heads, batch 64-1024, 2-8k keys), on
        B200 that of FP8 MMAs (1.00-1.05x at 16 heads), where the GQA kernels (XQA) read an
        FP8 cache at the BF16 cache's bytes per second on both."""
        if not (fp8_attention and tensor_dtype(kv_dtype) == "fp8" and hw.supports("fp8")):
            return False
        return not mla or hw.mma_instruction == "tcgen05"

    def _share(self, key) -> None:
        """Take the filled nodes of an earlier StepCost of the same stage (SHARED_TABLES)."""
        tables = {"body": self.body, "experts": self.experts, "decode_ops": self.decode_ops,
                  "head": self.head, "decode_attention": self.decode_attention,
                  "chunk_attention": self.chunk_attention}
        try:
            store = _shared.pop(key)
        except KeyError:
            store = {k: (t.nodes, getattr(t, "memo", None)) for k, t in tables.items()
                     if t is not None}
        except TypeError:  # an unhashable model or hardware: nothing to share
            return
        _shared[key] = store
        while len(_shared) > SHARED_TABLES:
            _shared.popitem(last=False)
        for k, t in tables.items():
            if t is not None:
                t.nodes = store[k][0]
                if store[k][1] is not None:
                    t.memo = store[k][1]

    # -- exact evaluations at one node --------------------------------------------------------
    def _est(self, o) -> tuple[float, float]:
        e = predict_op(o, self.hw, self.level)
        return e.time_s, e.resource_time_s.get("launch", 0.0)

    def _sum_ops(self, counted) -> tuple[float, float]:
        """Summed (time, launch) of (name, op, count) entries (inference_op_counts)."""
        t = lt = 0.0
        for _, o, k in counted:
            e = self._est(o)
            t, lt = t + k * e[0], lt + k * e[1]
        return t, lt

    def _prefill_ops(self, tokens: int):
        """The builder's prefill ops of one sequence of `tokens` tokens with their counts
        (`inference_op_counts`: each layer kind once, not every layer's nodes); the last one
        kept, as the body and experts tables often want a node at the same token count in
        turn."""
        last = self._last_ops
        if last is not None and last[0] == tokens:
            return last[1]
        ops = inference_op_counts(self.model, "prefill", batch=1, seq=tokens, **self._op_kw)
        self._last_ops = (tokens, ops)
        return ops

    def _eval_body(self, tokens: int) -> tuple[float, float, float, float]:
        """(time, launch) of the shared ops and of the prefill-only ops at `tokens`."""
        st = sl = pt = pl = 0.0
        for name, o, k in self._prefill_ops(tokens):
            r = role(name)
            if r == ATTENTION_ROLE or r in HEAD_ROLES or o.name == MOE_OP:
                continue
            e = self._est(o)
            if r in self.prefill_only:
                pt, pl = pt + k * e[0], pl + k * e[1]
            else:
                st, sl = st + k * e[0], sl + k * e[1]
        return st, sl, pt, pl

    def _eval_send(self, tokens: int) -> tuple[float]:
        """One pipeline activation send of `tokens` tokens to the next stage."""
        return (self._est(make_op("sendrecv",
                                  bytes=float(tokens * self.model.hidden * ACT_BYTES)))[0],)

    def _eval_experts(self, tokens: int) -> tuple[float, float]:
        return self._sum_ops(e for e in self._prefill_ops(tokens) if e[1].name == MOE_OP)

    def _eval_decode_only(self, batch: int) -> tuple[float, float]:
        if not self.decode_only:
            return 0.0, 0.0
        ops = inference_op_counts(self.model, "decode", batch=batch, context=CLASSIFY_TOKENS,
                                  **self._op_kw)
        return self._sum_ops(e for e in ops if role(e[0]) in self.decode_only)

    def _eval_head(self, rows: int) -> tuple[float, float]:
        t = lt = 0.0
        for o in self._head_ops:
            e = self._est(o.with_params(rows=rows) if o.name == "norm" else o.with_params(m=rows))
            t, lt = t + e[0], lt + e[1]
        return t, lt

    def _attention_mean(self, kinds, params) -> tuple[float, float]:
        """(time, launch) per attention layer, the mean over the layer kinds (op, layers):
        `params(keys)` gives an op's parameters from the keys a query sees before the window
        (`keys(n)`: n on a full layer, min(n, window) on a sliding-window one)."""
        if len(kinds) == 1:
            return self._est(kinds[0][0].with_params(**params(lambda n: n)))
        t = lt = 0.0
        for o, n in kinds:
            w = o.window
            e = self._est(o.with_params(**params(lambda k, w=w: min(k, w) if w else k)))
            t, lt = t + n * e[0], lt + n * e[1]
        layers = sum(n for _, n in kinds)
        return t / layers, lt / layers

    def _eval_decode_attention(self, batch: int, context: int) -> tuple[float, float]:
        return self._attention_mean(self._decode_attn_kinds,
                                    lambda keys: dict(batch=batch, seq_kv=keys(context)))

    def _eval_chunk_attention(self, chunk: int, prior: int) -> tuple[float, float]:
        # a sliding-window layer's chunk reads the window's keys before it, not the whole prior
        return self._attention_mean(self._prefill_attn_kinds, lambda keys: dict(
            batch=1, seq_q=chunk, seq_kv=keys(prior) + chunk, causal=True))

    # -- one step ------------------------------------------------------------------------------
    def step_times(self, decode: int, decode_context_sum: float = 0.0,
                   chunks: Sequence[tuple[int, int]] = (), graphs: str = "none",
                   pad_tokens: int = 0, spec_tokens: int = 0) -> tuple[float, float]:
        """(latency, one pipeline stage's busy time) of a step of `decode` decode sequences
        whose contexts (keys each one's first query attends to, itself included) sum to
        `decode_context_sum`, and prefill `chunks` of (tokens, prior context). `graphs`: the
        kernels whose host launch a CUDA graph removes (each keeps hw.graph_kernel_gap_s):
        "none", "body" (piecewise graphs: all but attention) or "all" (a fully captured decode
        step); `pad_tokens`: the captured size the step is padded to. `spec_tokens` k > 0: a
        speculative decoding step, the k draft passes (`draft_time_s`) then one verification
        forward of 1 + k query tokens per sequence:
        every op at decode·(1 + k) tokens and each sequence's attention a (1 + k)-query causal
        decode over its context plus the drafts (one multi-query decode kernel reads its KV
        once, as FlashMLA's and FlashInfer's do)."""
        if decode and not chunks and not spec_tokens:
            return self._decode_step_times(decode, decode_context_sum, graphs, pad_tokens)
        draft = 0.0
        queries = 1 + spec_tokens if decode else 1
        if queries > 1:
            draft = self.draft_time_s(decode, decode_context_sum / decode, spec_tokens)
        verify = decode
        decode = decode * queries  # decode tokens of the step
        tokens = decode
        for c, _ in chunks:
            tokens += c
        st, sl, _, _ = self.body(max(tokens, pad_tokens))
        t, launch_body, launch_attn = st, sl, 0.0
        if self.experts is not None:
            et, el = self.experts(max(tokens, pad_tokens))
            t, launch_body = t + et, launch_body + el
        if chunks and self.prefill_only:
            keys = 0
            for c, p in chunks:
                keys += c + p
            _, _, pt, pl = self.body(keys)
            t, launch_body = t + pt, launch_body + pl
        if decode and self.decode_only:
            dt, dl = self.decode_ops(max(decode, pad_tokens))
            t, launch_body = t + dt, launch_body + dl
        ht, hl = self.head(max(decode + len(chunks), pad_tokens))
        t, launch_body = t + ht, launch_body + hl
        layers = self.attention_layers
        if decode and queries == 1:
            mean = max(1.0, decode_context_sum / decode)
            at, al = self.decode_attention(decode, mean)
            t, launch_attn = t + layers * at, layers * al
        elif decode:
            mean = max(1.0, decode_context_sum / verify)
            at, al = self._verify_table(queries)(verify, mean)
            t, launch_attn = t + layers * at, layers * al
        if chunks:
            busy = first_launch = 0.0
            for c, p in chunks:
                ct, cl = self.chunk_attention(c, p)
                busy += ct - cl
                first_launch = max(first_launch, cl)
            t += layers * (busy + first_launch)
            launch_attn += layers * first_launch
        return self._finish(t, launch_body, launch_attn, graphs, max(tokens, pad_tokens), draft)

    def _finish(self, t: float, launch_body: float, launch_attn: float, graphs: str,
                padded_tokens: int, draft: float = 0.0) -> tuple[float, float]:
        """A step's (latency, stage time) from its kernels' time `t`: less the host launches
        its CUDA graphs remove, plus the draft passes, plus the pipeline sends."""
        if graphs == "all":
            t -= (launch_body + launch_attn) * self._graph_removes
        elif graphs == "body":
            t -= launch_body * self._graph_removes
        if draft:
            t += draft
        if self.pp == 1:
            return t, t
        p2p = self.sends(padded_tokens)[0]
        return t + (self.pp - 1) * p2p, t / self.pp + p2p

    def _decode_step_times(self, decode: int, decode_context_sum: float, graphs: str,
                           pad_tokens: int) -> tuple[float, float]:
        """`step_times` of a decode-only step (no chunks, no drafts): the same parts in the same
        order of floating-point operations, the ones that do not depend on the contexts summed
        once per (decode, graphs, pad) (_decode_fixed)."""
        key = (decode, graphs, pad_tokens)
        fixed = self._decode_fixed.get(key)
        if fixed is None:
            padded = max(decode, pad_tokens)
            t, launch_body = self.body(padded)[:2]
            if self.experts is not None:
                et, el = self.experts(padded)
                t, launch_body = t + et, launch_body + el
            if self.decode_only:
                dt, dl = self.decode_ops(padded)
                t, launch_body = t + dt, launch_body + dl
            ht, hl = self.head(padded)
            fixed = self._decode_fixed[key] = (t + ht, launch_body + hl)
        t, launch_body = fixed
        layers = self.attention_layers
        at, al = self.decode_attention(decode, max(1.0, decode_context_sum / decode))
        t, launch_attn = t + layers * at, layers * al
        return self._finish(t, launch_body, launch_attn, graphs, max(decode, pad_tokens))

    def _verify_table(self, queries: int) -> Table2:
        """Decode attention of `queries` causal queries per sequence (bilinear nodes like
        decode_attention), the keys of the first query given."""
        table = self._verify.get(queries)
        if table is None:
            def fn(batch: int, context: int) -> tuple[float, float]:
                return self._attention_mean(self._decode_attn_kinds, lambda keys: dict(
                    batch=batch, seq_q=queries, seq_kv=keys(context) + queries - 1,
                    causal=True))
            table = self._verify[queries] = Table2(fn, self.decode_attention.ax,
                                                   self.decode_attention.ay, self.exact)
        return table

    def draft_time_s(self, decode: int, context: float, drafts: int) -> float:
        """The draft passes of a speculative step: `drafts` sequential passes of one decoder
        layer and the LM head over the `decode` sequences (DeepSeek-V3's multi-token-prediction
        module is one transformer block sharing the output head, DeepSeek-V3 Technical Report
        §2.2; EAGLE's draft is one decoder layer too), each priced as one layer of the target's
        decode step (its body, experts and attention over the layers) plus the head.

        The verification that follows is a decode step of decode·(1 + drafts) query tokens
        (step_times): every op at that many tokens, each sequence's queries attending to its
        context plus the drafts before them (priced as that many single-query decodes: exact
        for the memory-bound GEMMs' weight reads, conservative for the attention, which a
        multi-query decode kernel reads the KV for once)."""
        step = self.step_time_s(decode, decode * max(1.0, context))
        head = self.head(decode)[0]
        per_layer = (step - head) / max(1, self.model.layers)
        return drafts * (per_layer + head)

    def step_time_s(self, decode: int, decode_context_sum: float = 0.0,
                    chunks: Sequence[tuple[int, int]] = (), graphs: str = "none",
                    pad_tokens: int = 0) -> float:
        """Latency of one step (see `step_times`)."""
        return self.step_times(decode, decode_context_sum, chunks, graphs, pad_tokens)[0]

    def prefill_time_s(self, prompt: int) -> float:
        """One prompt prefilled alone in one step (TTFT on an idle replica, no queueing)."""
        return self.step_time_s(0, 0.0, ((prompt, 0),))

    def decode_time_s(self, batch: int, context: float) -> float:
        """A decode-only step of `batch` sequences at mean context `context`."""
        return self.step_time_s(batch, batch * context)

    def breakdown(self, decode: int, decode_context_sum: float = 0.0,
                  chunks: Sequence[tuple[int, int]] = ()) -> dict[str, float]:
        """The step's parts in seconds (no CUDA graphs, latency of all stages)."""
        tokens = decode + sum(c for c, _ in chunks)
        st = self.body(tokens)[0]
        p2p = self.sends(tokens)[0] if self.pp > 1 else 0.0
        pre = self.body(sum(c + p for c, p in chunks))[2] if chunks and self.prefill_only else 0
        dec = self.decode_ops(decode)[0] if decode and self.decode_only else 0.0
        moe = self.experts(tokens)[0] if self.experts is not None else 0.0
        out = {"body_s": st + pre + dec + moe, "head_s": self.head(decode + len(chunks))[0],
               "decode_attention_s": 0.0, "chunk_attention_s": 0.0,
               "pipeline_sends_s": (self.pp - 1) * p2p}
        if decode:
            mean = max(1.0, decode_context_sum / decode)
            out["decode_attention_s"] = self.attention_layers * self.decode_attention(
                decode, mean)[0]
        if chunks:
            parts = [self.chunk_attention(c, p) for c, p in chunks]
            out["chunk_attention_s"] = self.attention_layers * (
                sum(a - b for a, b in parts) + max(b for _, b in parts))
        out["total_s"] = self.step_time_s(decode, decode_context_sum, chunks)
        return out

    def warm(self, max_tokens: int, max_batch: int, max_context: int) -> None:
        """Fill the body and head nodes up to `max_tokens` and the decode-attention nodes up to
        (max_batch, max_context) now rather than on first use."""
        tables = [(self.body, max_tokens), (self.head, max_batch), (self.decode_ops, max_batch)]
        if self.experts is not None:
            tables.append((self.experts, max_tokens))
        for table, hi in tables:
            for x in nodes_up_to(table.axis, hi):
                table.at_node(x)
        ab = self.decode_attention.ax
        for b in nodes_up_to(ab, max_batch):
            for c in nodes_up_to(ab, max_context):
                self.decode_attention.at_node(b, c)


def _attention_kinds(nodes) -> list[tuple[object, int]]:
    """(op, layers) of the attention kinds among a graph's `nodes`: full attention first, then
    each sliding window (one op per kind, as the builder writes it for each layer kind)."""
    kinds: dict[object, list] = {}
    for n in nodes:
        if role(n.name) == ATTENTION_ROLE:
            k = kinds.setdefault(n.op.window, [n.op, 0])
            k[1] += 1
    return sorted(((o, c) for o, c in kinds.values()), key=lambda x: x[0].window or 0)
