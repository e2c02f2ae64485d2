"""Continuous batching of one replica, step by step, as vLLM, SGLang and TensorRT-LLM run it.

Each step (`Engine` settings, engines.py):
  1. every running sequence past its prefill decodes one token (decode tokens first); when the
     paged KV cache (blocks of `block_tokens`, held at actual occupancy: prompt + tokens so far)
     has no block for a sequence's next token, the most recently admitted running request is
     preempted and later recomputed (vLLM's default: its KV freed, its prompt plus the tokens it
     had generated prefilled again, ahead of the waiting queue);
  2. running prefills continue, in admission order, in chunks that fill the token budget
     (`max_tokens_per_step`), shrunk to the free blocks;
  3. if nothing was preempted, waiting requests are admitted first come, first served while
     `max_batch` running sequences, the budget and the KV cache allow (with
     `reserve_output_fraction` > 0 admission keeps blocks for that share of every running
     request's remaining output, as SGLang and TensorRT-LLM's GUARANTEED_NO_EVICT do).
  Without `chunked_prefill` a prompt is prefilled whole in one step; without `mixed_batching` a
  step is either all prefill (when any can be scheduled, prefill first) or all decode (vLLM V0,
  SGLang). A request's first token is sampled at the end of the step that completes its prefill.
Under `overlap_schedule` (SGLang's event_loop_overlap) the scheduler forms a step's batch while
the previous step runs, at its start: a request that arrives during a step waits for the next
one too.
The step's time comes from `StepCost` (cost.py); CUDA graphs remove the host's share of the kernel
launches of the steps they capture (full decode steps, or all but attention for piecewise graphs)
after padding the step to the next captured size, each replayed kernel keeping the GPU's own
`graph_kernel_gap_s`; `step_overhead_s` is added per step.

Pipeline parallelism: pp micro-batches are in flight (vLLM's virtual engines): requests go to the
one with the fewest unfinished; each has 1/pp of the KV blocks and of max_batch; its steps flow
through the pp stages, each stage taking one stage time (StepCost.step_times), so a step's
latency is the sum of the stages and the replica's throughput is set by the stage time.

Metrics: TTFT = first token - arrival; E2E = last token - arrival; TPOT = (E2E - TTFT) /
(output - 1) per request; ITL = every gap between a request's consecutive tokens. Throughput is
over the window from the first arrival to the last completion. With ep > tp the builder's
expert-parallel layout has ep/tp data-parallel attention groups; the simulation is one group and
`replica_output_tokens_per_s` scales it by the groups.
"""
from __future__ import annotations

import bisect
import functools
import heapq
import math
from collections import deque
from typing import Any

import numpy as np

from perfmodel.errors import InputError
from perfmodel.hardware import Hardware, hardware
from perfmodel.plan.memory import as_model
from perfmodel.plan.simulator.cost import StepCost
from perfmodel.plan.simulator.kv import KvBudget, check_fits, kv_budget
from perfmodel.plan.simulator.result import SimResult
from perfmodel.plan.simulator.running import RunningColumns
from perfmodel.plan.simulator.engines import (SGLANG_CLIP_MAX_NEW_TOKENS,
                                              SGLANG_INIT_NEW_TOKEN_RATIO,
                                              SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR,
                                              SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS, Engine,
                                              engine_preset)
from perfmodel.plan.simulator.workload import Workload
from perfmodel.workloads.models import ModelSpec
from perfmodel.workloads.builder import Workload as GraphWorkload

WAITING, PREFILL, DECODE, DONE = range(4)
V0_MIN_BATCHED_TOKENS = 2048     # vLLM V0: max(max_model_len, 2048) without chunked prefill
SGLANG_HALF_KV = 2               # SGLang: max_running_requests = KV tokens // 2 ...
SGLANG_MAX_REQUESTS = 4096       # ... at most the request pool
# SGLang's new_token_ratio floor and its decay per decode batch (scheduler.py, engines.py)
SGLANG_RATIO_FLOOR = SGLANG_INIT_NEW_TOKEN_RATIO * SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR
SGLANG_RATIO_DECAY = (SGLANG_INIT_NEW_TOKEN_RATIO - SGLANG_RATIO_FLOOR) / \
    SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS


def expected_tokens_per_step(drafts: int, acceptance: float) -> float:
    """Tokens a speculative decoding step yields per sequence on average: the accepted prefix of
    `drafts` draft tokens, each accepted with probability `acceptance` given the previous ones,
    plus the target model's own token (Leviathan et al. 2023, eq. 1)."""
    if drafts == 0:
        return 1.0
    if acceptance >= 1.0:
        return float(drafts + 1)
    return (1.0 - acceptance ** (drafts + 1)) / (1.0 - acceptance)


@functools.lru_cache(maxsize=64)
def _countdown(n: int) -> np.ndarray:
    """n, n − 1, ..., 1 as int64 (read only): the weights of SGLang's admission test."""
    out = np.arange(n, 0, -1, dtype=np.int64)
    out.flags.writeable = False
    return out


class Remaining:
    """Lane._remaining_sorted's memo: the running requests' tokens left L and held O, sorted
    stably by L, at (version, j); `pending`: the (left, held) of admissions since, in order,
    not merged in yet; `count` and `largest`: how many there are and the largest L in all."""

    __slots__ = ("version", "j", "L", "O", "pending", "count", "largest")

    def __init__(self, version: int, j: int, L: np.ndarray, O: np.ndarray):
        self.version, self.j, self.L, self.O = version, j, L, O
        self.pending: list[tuple[int, int]] = []
        self.count = len(L)
        self.largest = int(L[-1]) if len(L) else 0


class Request:
    """One request's progress. `computed`: tokens whose KV is in the cache; a decoding request
    advances with its engine's decode-step counter (j0, c0, g0 at the step it started)."""

    __slots__ = ("id", "arrival", "prompt", "output", "generated", "computed", "blocks",
                 "state", "j0", "c0", "g0", "epoch", "first_s", "finish_s", "pieces",
                 "preempted", "total_blocks", "lane", "slot")

    def __init__(self, rid: int, arrival: float, prompt: int, output: int, block_tokens: int):
        self.id, self.arrival, self.prompt, self.output = rid, arrival, prompt, output
        self.generated = self.computed = self.blocks = 0
        self.state = WAITING
        self.j0 = self.c0 = self.g0 = self.epoch = self.preempted = 0
        self.first_s = self.finish_s = math.nan
        self.pieces: list[Any] = []   # token times: floats, or (j0, j1) decode-step ranges
        self.total_blocks = -(-(prompt + output) // block_tokens)
        self.lane = 0
        self.slot = -1  # its slot in its lane's RunningColumns while it runs


class Lane:
    """One scheduler (a pipeline virtual engine when pp > 1) and its KV blocks."""

    def __init__(self, capacity_blocks: int, max_batch: int, block_tokens: int,
                 watermark: float = 0.0):
        self.capacity, self.max_batch, self.bt = capacity_blocks, max_batch, block_tokens
        self.watermark = int(watermark * capacity_blocks)
        self.waiting: deque[Request] = deque()
        self.running: dict[int, Request] = {}   # admission order
        self.prefilling: list[Request] = []
        self.used = self.peak = 0
        self.reserved_total = 0                 # sum of total_blocks over running
        self.j = 0                              # decode tokens per decoder so far (one per
                                                # step, or a speculative step's accepted ones)
        self.decode_steps = 0
        self.n = 0                              # decoding requests
        self.a = 0                              # sum of (c0 - j0) over decoders
        self.residue = [0] * block_tokens       # decoders needing a block when j % bt == r
        self.finish_at: dict[int, list[tuple[Request, int]]] = {}
        self.decode_end_s: list[float] = []
        self.ready_s = 0.0
        self.wake_s = 0.0                       # arrival that ended its last idle spell
        self.batch_wait = 0                     # steps new contexts have waited (Engine
        #                                         batch_wait_iters)
        self.formed_s = 0.0                     # when its next batch is formed (Engine
                                                # overlap_schedule: the last step's start)
        self.token_ratio = SGLANG_INIT_NEW_TOKEN_RATIO  # SGLang's new_token_ratio
        self.version = 0                        # bumped when the running set changes
        self.blocked_memo: tuple | None = None  # (version, request id, blocked)
        # remaining_outputs as int64 arrays sorted (stably) by tokens left, per (version, j):
        # SGLang's admission test reads them for every request it tries (_remaining_sorted)
        self.remaining_memo: Remaining | None = None
        self.tested: tuple | None = None  # (request, running L, L and O with it): the last test
        # the running set as columns (running.py), built at the first admission test and kept
        # up to date by add_running, start_decode and release from then on
        self.columns: RunningColumns | None = None
        self.unfinished = 0

    # -- moves ----------------------------------------------------------------------------------
    def add_running(self, r: Request) -> None:
        """`r` joins the running set, last in admission order."""
        self.running[r.id] = r
        if self.columns is not None:
            self.columns.add(r)

    def start_decode(self, r: Request) -> None:
        self.version += 1
        r.state, r.j0, r.c0, r.g0 = DECODE, self.j, r.computed, r.generated
        if self.columns is not None and self.columns.owns(r):
            self.columns.decode(r)
        self.n += 1
        self.a += r.c0 - r.j0
        self.residue[(r.j0 - r.c0) % self.bt] += 1
        last = r.j0 + r.output - r.g0 - 1
        self.finish_at.setdefault(last, []).append((r, r.epoch))

    def stop_decode(self, r: Request) -> int:
        """Leave decoding at the current token count; returns the tokens its KV blocks were
        allocated for (a speculative step that completes a request mid-step allocated for the
        whole step's tokens; its own tokens stop at its output)."""
        steps = self.j - r.j0
        own = min(steps, r.output - r.g0)
        self.n -= 1
        self.a -= r.c0 - r.j0
        self.residue[(r.j0 - r.c0) % self.bt] -= 1
        r.pieces.append((r.j0, r.j0 + own))
        r.computed, r.generated = r.c0 + own, r.g0 + own
        return r.c0 + steps

    def release(self, r: Request) -> None:
        """Free a running request's blocks and its reservation."""
        self.version += 1
        if r.state == DECODE:
            blocks = -(-self.stop_decode(r) // self.bt)
        else:
            blocks = r.blocks
            if r.state == PREFILL:
                self.prefilling.remove(r)
        self.used -= blocks
        self.reserved_total -= r.total_blocks
        del self.running[r.id]
        if self.columns is not None and self.columns.owns(r):
            self.columns.remove(r)
        r.blocks = 0

    def preempt_last(self) -> int | None:
        """Preempt the last admitted running request; its block-boundary residue if it was
        decoding (the caller counts the blocks it no longer needs this step), else None."""
        r = self.running[next(reversed(self.running))]
        was_decode = r.state == DECODE
        res = (r.j0 - r.c0) % self.bt
        self.release(r)
        r.computed, r.state, r.epoch = 0, WAITING, r.epoch + 1
        r.preempted += 1
        self.waiting.appendleft(r)
        return res if was_decode else None

    def blocks_due(self, tokens: int) -> int:
        """New KV blocks the decoders need to write their next `tokens` tokens: a decoder
        crosses a block boundary at counter values j ≡ residue (mod block_tokens)."""
        if tokens == 1:
            return self.residue[self.j % self.bt]
        return sum(self.residue[(self.j + i) % self.bt] for i in range(tokens))

    def due_of(self, res: int, tokens: int) -> int:
        """Of `blocks_due(tokens)`, those of one decoder with residue `res`."""
        return sum((self.j + i) % self.bt == res for i in range(tokens))

    def remaining_outputs(self) -> tuple[list[int], list[int]]:
        """(tokens left to generate, tokens held: prompt + generated) of each running request
        with output left, as SGLang's PrefillAdder counts them."""
        left, held, j = [], [], self.j
        add_left, add_held = left.append, held.append
        for r in self.running.values():
            # a decoder's g = min(output, g0 + j - j0): one with output left has g < output
            g = r.g0 + j - r.j0 if r.state == DECODE else r.generated
            out = r.output
            if out > g:
                add_left(out - g)
                add_held(r.prompt + g)
        return left, held

    def _remaining_sorted(self) -> tuple[np.ndarray, np.ndarray]:
        """`remaining_outputs` as int64 arrays (L, O) in the stable order of L, memoized per
        (version, j): the running set and every running request's tokens are fixed between a
        version bump and the next decode step (`admitted` extends it by an admission)."""
        memo = self._remaining()
        if memo.pending:  # admissions since the arrays were sorted: merge them in
            memo.L, memo.O = self._merged(memo.L, memo.O, memo.pending)
            memo.pending = []
        return memo.L, memo.O

    def _remaining(self) -> Remaining:
        """The memo of `_remaining_sorted` for the current (version, j), admissions since its
        arrays were sorted maybe pending."""
        memo = self.remaining_memo
        if memo is not None and memo.version == self.version and memo.j == self.j:
            return memo
        cols = self.columns
        if cols is None or cols.count != len(self.running):
            # first use, or the running set was changed behind add_running (tests fill it
            # directly): the columns from the running set itself
            cols = self.columns = RunningColumns(self.running, DECODE)
        L, O = cols.remaining(self.j)
        memo = self.remaining_memo = Remaining(self.version, self.j, L, O)
        return memo

    @staticmethod
    def _merged(L: np.ndarray, O: np.ndarray, pending: list[tuple[int, int]]
                ) -> tuple[np.ndarray, np.ndarray]:
        """(L, O) with the (left, held) of later admissions, in admission order, each after
        every equal L: a stable sort of them all after the sorted ones, which is where `_with`
        puts each one in turn."""
        k = len(pending)
        L2 = np.concatenate((L, np.fromiter((p[0] for p in pending), np.int64, k)))
        O2 = np.concatenate((O, np.fromiter((p[1] for p in pending), np.int64, k)))
        order = np.argsort(L2, kind="stable")
        return L2[order], O2[order]

    @staticmethod
    def _with(L: np.ndarray, O: np.ndarray, r: Request) -> tuple[np.ndarray, np.ndarray]:
        """The running requests' (L, O) with `r`'s added last in admission order: inserted
        after every equal L, where a stable sort of the running requests then `r` puts it."""
        left, held = r.output - r.generated, r.prompt + r.generated
        k = int(L.searchsorted(left, side="right"))
        n = len(L)
        L2, O2 = np.empty(n + 1, dtype=np.int64), np.empty(n + 1, dtype=np.int64)
        L2[:k], L2[k], L2[k + 1:] = L[:k], left, L[k:]
        O2[:k], O2[k], O2[k + 1:] = O[:k], held, O[k:]
        return L2, O2

    def admitted(self, r: Request, version: int) -> None:
        """`r` joined the running set (admission order: last) since `version`, its generated
        tokens those it held when tested: the memo of `_remaining_sorted` follows it."""
        memo = self.remaining_memo
        if memo is None or memo.version != version or memo.j != self.j:
            return
        left = r.output - r.generated
        if left > 0:  # remaining_outputs keeps requests with output left
            tested = self.tested
            if (tested is not None and tested[0] is r and tested[1] is memo.L
                    and not memo.pending):
                memo.L, memo.O = tested[2], tested[3]  # the arrays its admission test built
            else:  # merged in when the arrays are next read
                memo.pending.append((left, r.prompt + r.generated))
            memo.count += 1
            if left > memo.largest:
                memo.largest = left
        memo.version = self.version

    def sglang_future_fits(self, r: Request) -> bool:
        """SGLang's admission test for a request that ignores EOS with no prefix cache
        (schedule_policy.py PrefillAdder.add_one_req_ignore_eos, 0.4.1 lines 273-313): with the
        running requests and `r` sorted by the tokens they have left, L_1 <= ... <= L_n, and
        the tokens they hold O_i, the cache must keep
            free − prompt(r) + O_1 + ... + O_(i−1) − L_(i+1) · (n − i + 1) > 0   for every i
        (L_(n+1) := L_n): when request i + 1 finishes, the n − i + 1 still running have each
        grown by L_(i+1) tokens, and the shorter ones have freed theirs.

        Every term is at least −max(L) · (n + 1) (freed ≥ 0, 0 ≤ L ≤ max(L), a factor at most
        n + 1): where cur exceeds that, as in most tests of a cache with room, the request
        fits without the arrays (exact integers: the same answer as the full test)."""
        cur = (self.capacity - self.used) * self.bt - (r.prompt + r.generated)
        if self._passes_bound(r, cur):
            self.tested = None
            return True
        running = self._remaining_sorted()
        L, O = self._with(*running, r)
        self.tested = (r, running[0], L, O)
        # freed_i − L_(i+1) · (n − i) for every i, in int64 (exact): the test is that cur plus
        # each is positive, i.e. cur plus their minimum
        t = np.cumsum(O)
        t -= O  # freed_i = O_1 + ... + O_(i−1)
        t[:-1] -= L[1:] * _countdown(len(L))[:-1]
        t[-1] -= L[-1]  # L_(n+1) := L_n, times 1
        return bool(cur + int(t.min()) > 0)

    def _passes_bound(self, r: Request, cur: int) -> bool:
        """Whether `sglang_future_fits(r)` holds by the bound of its docstring alone."""
        memo = self._remaining()
        return cur - max(memo.largest, r.output - r.generated) * (memo.count + 1) > 0

    def sglang_budget(self) -> float:
        """SGLang's PrefillAdder.rem_total_tokens before this step's admissions: the free
        tokens less every running request's remaining output (clipped) at new_token_ratio."""
        L, _ = self._remaining_sorted()
        return ((self.capacity - self.used) * self.bt
                - self.token_ratio * int(np.minimum(L, SGLANG_CLIP_MAX_NEW_TOKENS).sum()))

    def decayed_token_ratio(self) -> None:
        """One decode batch later (scheduler.py update_running_batch)."""
        self.token_ratio = max(self.token_ratio - SGLANG_RATIO_DECAY, SGLANG_RATIO_FLOOR)

    def admits(self, r: Request, blocks: int, reserve: float, sglang: bool) -> bool:
        """Whether `r`, taking `blocks` KV blocks now, passes admission: SGLang's test
        (`sglang_future_fits`, and the blocks free) or `admissible` at `reserve`."""
        if sglang:
            return self.sglang_future_fits(r) and self.used + blocks <= self.capacity
        return self.admissible(blocks, r.total_blocks, reserve)

    def admissible(self, blocks_now: int, total_blocks: int, reserve: float) -> bool:
        held = self.used + reserve * (self.reserved_total - self.used)
        need = blocks_now + reserve * (total_blocks - blocks_now) + self.watermark
        return held + need <= self.capacity


def simulate(model: ModelSpec | str, hw: Hardware | str, workload: Workload | None = None,
             engine: Engine | str = "vllm", tp: int = 1, ep: int = 1, pp: int = 1,
             dtype: str = "bf16", kv_dtype: str = "bf16", level: str = "pipes",
             cost: StepCost | None = None, moe_loads: str | None = None,
             moe_replication: float = 1.0, **engine_settings: Any) -> SimResult:
    """Replay `workload` on one replica of `model` on `hw` under `engine` (a preset name from
    engines.ENGINES or an Engine; keyword settings override its fields). `cost` reuses a
    StepCost built for the same deployment (its nodes are memoized across simulations).
    `moe_loads`: route the MoE layers from a recorded expert-loads file, each layer its own
    row (Workload.moe_loads of the graph builder); `moe_replication` > 1: EPLB's placement
    with (replication − 1)·experts redundant slots, from the file's statistics."""
    m, h = as_model(model), hardware(hw)
    workload = workload or Workload()
    eng = engine_preset(engine, h, tp, pp) if isinstance(engine, str) else engine
    eng = eng.replace(**engine_settings) if engine_settings else eng
    eng.check()
    isl, osl, arrivals = workload.draw()
    longest = int((isl + osl).max())
    notes = []
    if (isinstance(engine, str) and "max_tokens_per_step" not in engine_settings
            and not eng.chunked_prefill and eng.max_tokens_per_step is not None
            and int(isl.max()) > eng.max_tokens_per_step):
        # a preset's step budget below the longest prompt, without chunked prefill: the engine
        # would reject the prompt, so a deployment for these lengths is configured with a
        # budget that holds it (TensorRT-LLM's max_num_tokens, sized by trtllm-bench from the
        # dataset); an explicit max_tokens_per_step stays an error below
        notes.append(f"max_tokens_per_step raised from the {eng.name} default "
                     f"{eng.max_tokens_per_step} to the longest prompt, {int(isl.max())} "
                     f"tokens (no chunked prefill: a prompt runs in one step)")
        eng = eng.replace(max_tokens_per_step=int(isl.max()))
    budget_tokens = eng.max_tokens_per_step or max(longest, V0_MIN_BATCHED_TOKENS)
    what = f"{m.name} on {h.name} tp={tp} ep={ep} pp={pp} dtype={dtype}"
    in_reserve = eng.activations_in_reserve
    redundant = (GraphWorkload("decode", moe_loads=moe_loads, moe_replication=moe_replication)
                 .redundant_experts(m))
    kv = kv_budget(m, h, tp, ep, pp, dtype, kv_dtype, eng.block_tokens,
                   eng.gpu_memory_utilization, eng.fraction_of_free, budget_tokens,
                   redundant_experts=redundant, max_seqs=eng.max_batch,
                   **({"workspace_bytes": 0.0, "activations": False} if in_reserve else {}))
    check_fits(kv, what)
    blocks = eng.kv_blocks_override or kv.blocks
    max_batch = eng.max_batch or min(blocks * eng.block_tokens // SGLANG_HALF_KV,
                                     SGLANG_MAX_REQUESTS)
    lanes_n = pp
    lane_blocks = blocks // lanes_n
    lane_batch = max(1, max_batch // lanes_n)
    problems = []
    if eng.mixed_batching and budget_tokens < lane_batch:
        problems.append(f"max_tokens_per_step {budget_tokens} < max_batch {lane_batch}: the "
                        f"decode tokens of a full batch must fit one step")
    need = -(-longest // eng.block_tokens)
    if need > lane_blocks - int(eng.admission_watermark * lane_blocks):
        problems.append(f"the longest request ({longest} tokens) needs {need} KV blocks, the "
                        f"cache has {lane_blocks} per scheduler "
                        f"({blocks * eng.block_tokens} tokens in all)")
    if not eng.chunked_prefill and int(isl.max()) > budget_tokens:
        problems.append(f"a prompt of {int(isl.max())} tokens exceeds max_tokens_per_step "
                        f"{budget_tokens} without chunked prefill")
    if problems:
        raise InputError([f"{what}: {p}" for p in problems])
    if cost is None:
        cost = StepCost.for_engine(m, h, eng, tp, ep, pp, dtype, kv_dtype, level,
                                   moe_loads=moe_loads, moe_replication=moe_replication)
    elif (cost.model.name, cost.hw.name, cost.tp, cost.ep, cost.pp, cost.dtype, cost.kv_dtype,
          cost.level, cost.fp8_attention, cost.fusion, cost.attention_kernel,
          cost.moe_loads, cost.moe_replication) != (
            m.name, h.name, tp, ep, pp, dtype, kv_dtype, level,
            StepCost.uses_fp8_attention(h, kv_dtype, eng.fp8_attention, m.is_mla),
            eng.kernel_fusion, StepCost.uses_attention_kernel(h, eng.attention_kernel),
            moe_loads, moe_replication):
        raise InputError(f"{what}: the StepCost given is for {cost.model.name} on "
                         f"{cost.hw.name} tp={cost.tp} ep={cost.ep} pp={cost.pp} "
                         f"dtype={cost.dtype} kv_dtype={cost.kv_dtype} level={cost.level} "
                         f"fp8_attention={cost.fp8_attention} fusion={cost.fusion} "
                         f"attention_kernel={cost.attention_kernel} moe_loads="
                         f"{cost.moe_loads} moe_replication={cost.moe_replication}; engine "
                         f"{eng.name} runs moe_loads={moe_loads} moe_replication="
                         f"{moe_replication} "
                         f"kv_dtype={kv_dtype} fp8_attention={eng.fp8_attention} "
                         f"fusion={eng.kernel_fusion} attention_kernel={eng.attention_kernel} "
                         f"(StepCost.for_engine builds the one it needs)")
    result = Simulation(cost, eng, kv, isl, osl, arrivals, workload, lanes_n, lane_blocks,
                        lane_batch, budget_tokens).run(m, h, tp, ep, pp, dtype, kv_dtype)
    if notes:
        result.extra["notes"] = notes
    return result


class Simulation:
    """The event loop of `simulate` (one run)."""

    def __init__(self, cost: StepCost, eng: Engine, kv: KvBudget, isl, osl, arrivals,
                 workload: Workload, lanes: int, lane_blocks: int, lane_batch: int,
                 budget_tokens: int):
        self.cost, self.eng, self.kv, self.workload = cost, eng, kv, workload
        bt = eng.block_tokens
        self.lanes = [Lane(lane_blocks, lane_batch, bt, eng.admission_watermark)
                      for _ in range(lanes)]
        self.budget = budget_tokens
        self.requests = [Request(i, 0.0, int(isl[i]), int(osl[i]), bt) for i in range(len(isl))]
        self.prefilled = workload.prefilled
        self.admitted_decoders = 0
        if self.prefilled:  # the first token came with the KV cache (disaggregated decode)
            for r in self.requests:
                r.generated = 1
        self.pending: list[tuple[float, int]] = []
        self.concurrency_queue: deque[int] = deque()
        # a client's request reaches the scheduler `request_overhead_s` after its send (the
        # pending times are the scheduler's; a request's `arrival` stays its send, so TTFT and
        # E2E hold the overhead): not for requests another pool hands over (trace, prefilled)
        self.request_overhead = (eng.request_overhead_s
                                 if workload.mode in ("offline", "rate", "concurrency")
                                 and not workload.prefilled else 0.0)
        if arrivals is None:  # concurrency mode
            first = min(workload.concurrency, len(isl))
            self.pending = [(self.request_overhead, i) for i in range(first)]
            self.concurrency_queue = deque(range(first, len(isl)))
        else:
            self.pending = [(float(a) + self.request_overhead, i)
                            for i, a in enumerate(arrivals)]
        heapq.heapify(self.pending)
        self.graph_sizes = sorted(eng.cuda_graph_sizes)
        self.expected_tokens = expected_tokens_per_step(eng.spec_tokens, eng.spec_acceptance)
        self.stage_free = [0.0] * lanes
        self.steps = self.decode_steps = self.prefill_steps = self.mixed_steps = 0
        self.busy = 0.0
        self.peak = self.peak_running = 0
        self.done = 0

    def deliver(self, until: float) -> bool:
        """Hand the arrivals up to `until` to the lanes with the fewest unfinished requests."""
        delivered = False
        pending, requests, lanes = self.pending, self.requests, self.lanes
        overhead, many = self.request_overhead, len(lanes) > 1
        while pending and pending[0][0] <= until:
            t, i = heapq.heappop(pending)
            r = requests[i]
            r.arrival = t - overhead  # its send
            # the first lane with the fewest unfinished (min's choice among ties)
            k = min(range(len(lanes)), key=lambda x: lanes[x].unfinished) if many else 0
            ln = lanes[k]
            if not (ln.running or ln.waiting):
                ln.wake_s = t
                ln.token_ratio = SGLANG_INIT_NEW_TOKEN_RATIO  # SGLang: re-init when idle
            r.lane = k
            ln.unfinished += 1
            ln.waiting.append(r)
            delivered = True
        return delivered

    def start_s(self, ln: Lane) -> float:
        return max(ln.ready_s + self.eng.step_overhead_s, self.stage_free[0], ln.wake_s)

    def run(self, m, h, tp, ep, pp, dtype, kv_dtype) -> SimResult:
        total = len(self.requests)
        lanes, pending, stage_free = self.lanes, self.pending, self.stage_free
        overhead = self.eng.step_overhead_s
        # the lanes with work and the earliest to start (start_s; ties to the lowest index, as
        # min over (start, k) pairs), the arrivals up to that start delivered first
        fast = self.expected_tokens == 1.0 and not self.eng.spec_tokens
        overlap = self.eng.overlap_schedule
        while self.done < total:
            while True:
                start = k = None
                free0 = stage_free[0]
                for i, ln in enumerate(lanes):
                    if ln.running or ln.waiting:
                        s = ln.ready_s + overhead
                        if s < free0:
                            s = free0
                        if s < ln.wake_s:
                            s = ln.wake_s
                        if start is None or s < start:
                            start, k = s, i
                if start is None:
                    if not pending:
                        raise RuntimeError("simulation stalled with requests unfinished")
                    self.deliver(pending[0][0])
                    continue
                # the arrivals the step's batch can hold: those before it was formed, at its
                # start, or under the overlap schedule, when the lane went on from its last
                # step, at that step's start (the batch is formed while the last one runs)
                ln = lanes[k]
                seen = ln.formed_s if overlap and start <= ln.ready_s + overhead else start
                if not (pending and pending[0][0] <= seen) or not self.deliver(seen):
                    break
            ln = lanes[k]
            ln.formed_s = start
            if fast and self.decode_step(ln, start):
                continue
            if not self.step(ln, start) and not ln.running:
                raise RuntimeError("simulation stalled: a waiting request can never be admitted")
        return self.result(m, h, tp, ep, pp, dtype, kv_dtype)

    # -- one step of one lane -------------------------------------------------------------------
    def step(self, ln: Lane, start: float) -> bool:
        """Schedule and run one step of `ln`; False if nothing could run."""
        eng = self.eng
        chunks: list[tuple[Request, int]] = []
        budget = self.budget
        self.admitted_decoders = 0
        preempted = False
        decode = 0
        prefill_first = not eng.mixed_batching
        if prefill_first:
            chunks = self.schedule_prefill(ln, budget, allow_admission=True)
        if not chunks:
            g = self.tokens_this_step(ln)
            need = ln.blocks_due(g) if ln.n else 0
            while ln.n and ln.capacity - ln.used < need:
                res = ln.preempt_last()
                preempted = True
                if res is not None:
                    need -= ln.due_of(res, g)
            decode = ln.n
            ln.used += need if decode else 0
            if eng.mixed_batching:
                left = budget - decode * (1 + eng.spec_tokens)
                admit = not preempted and not (decode and self.batch_waits(ln, decode, left))
                chunks = self.schedule_prefill(ln, left, admit)
        if not decode and not chunks:
            if self.admitted_decoders:  # prefilled requests just joined: they decode next
                self.admitted_decoders = 0
                return False
            if ln.running:  # prefills hold the cache and none can go on: recompute one later
                ln.preempt_last()
            return False
        ln.peak = max(ln.peak, ln.used)
        self.peak = max(self.peak, sum(x.used for x in self.lanes))
        self.peak_running = max(self.peak_running, sum(len(x.running) for x in self.lanes))
        ctx_sum = ln.a + ln.n * (ln.j + 1) if decode else 0.0  # keys of each first query
        latency, stage = self.price(decode, ctx_sum, chunks)
        t = start
        for s in range(len(self.stage_free) - 1):
            t = max(t, self.stage_free[s]) + stage
            self.stage_free[s] = t
        t = max(t, self.stage_free[-1]) + (latency - (len(self.stage_free) - 1) * stage)
        self.stage_free[-1] = t
        end = ln.ready_s = t
        self.busy += stage if len(self.stage_free) > 1 else latency
        self.steps += 1
        if decode:
            self.decode_steps += 1
            self.mixed_steps += bool(chunks)
            if eng.admission == "sglang":
                ln.decayed_token_ratio()
            ln.decode_end_s.extend([end] * g)
            ln.j += g
            ln.decode_steps += 1
            for jj in range(ln.j - g, ln.j):
                for r, epoch in ln.finish_at.pop(jj, ()):
                    if r.epoch == epoch and r.state == DECODE:
                        self.finish(ln, r, end)
        else:
            self.prefill_steps += 1
        for r, c in chunks:
            r.computed += c
            if r.computed == r.prompt + r.generated:
                r.generated += 1
                r.pieces.append(end)
                if r.generated == 1:
                    r.first_s = end
                if r.generated >= r.output:
                    self.finish(ln, r, end)
                else:
                    ln.prefilling.remove(r)
                    ln.start_decode(r)
        return True

    def decode_step(self, ln: Lane, start: float) -> bool:
        """`step` of a lane whose step is decode only (no prefill running, none admitted, no
        preemption, one token per decoder): the same state changes and floats as `step`, its
        scheduling shortcut. False, with nothing changed, when the step is not such a one."""
        if not ln.n or ln.prefilling:
            return False
        eng = self.eng
        mixed = eng.mixed_batching
        if not mixed and not self.admission_blocked(ln, self.budget):
            return False
        need = ln.residue[ln.j % ln.bt]
        if ln.capacity - ln.used < need:
            return False  # preemption: step() does it
        decode = ln.n
        ln.used += need
        if mixed and not self.admission_blocked(ln, self.budget - decode):
            ln.used -= need
            return False
        self.admitted_decoders = 0
        if ln.peak < ln.used:
            ln.peak = ln.used
        lanes = self.lanes
        if len(lanes) == 1:
            used, running = ln.used, len(ln.running)
        else:
            used = running = 0
            for x in lanes:
                used += x.used
                running += len(x.running)
        if self.peak < used:
            self.peak = used
        if self.peak_running < running:
            self.peak_running = running
        # price() of a decode-only step: StepCost.step_times takes _decode_step_times for it
        graphs, pad = self.graphs_of(decode, decode, False)
        latency, stage = self.cost._decode_step_times(decode, ln.a + ln.n * (ln.j + 1),
                                                      graphs, pad)
        stage_free = self.stage_free
        t = start
        last = len(stage_free) - 1
        for s in range(last):
            t = max(t, stage_free[s]) + stage
            stage_free[s] = t
        t = max(t, stage_free[-1]) + (latency - last * stage)
        stage_free[-1] = t
        ln.ready_s = t
        self.busy += stage if last else latency
        self.steps += 1
        self.decode_steps += 1
        if eng.admission == "sglang":
            ln.decayed_token_ratio()
        ln.decode_end_s.append(t)
        j = ln.j
        ln.j = j + 1
        ln.decode_steps += 1
        done = ln.finish_at.pop(j, None)
        if done:
            for r, epoch in done:
                if r.epoch == epoch and r.state == DECODE:
                    self.finish(ln, r, t)
        elif len(lanes) == 1:
            self.decode_run(ln, start, t)
        return True

    def decode_run(self, ln: Lane, start: float, t: float) -> None:
        """The decode-only steps that follow one (`decode_step` of the only lane, which began at
        `start` and ended at `t`) while nothing can change the batch: no arrival the scheduler
        would see, no request finishing before the last of them, a KV block for every decoder.
        Admission stays blocked over them: the cache only fills, and SGLang keeps a refusal
        until the running set changes (`admission_blocked`). The same state changes and floats
        as that many passes of `run` through `decode_step`, without the passes."""
        eng, pending, stage_free = self.eng, self.pending, self.stage_free
        overhead, overlap = eng.step_overhead_s, eng.overlap_schedule
        sglang = eng.admission == "sglang"
        decode, capacity, residue, bt = ln.n, ln.capacity, ln.residue, ln.bt
        graphs, pad = self.graphs_of(decode, decode, False)
        price = self.cost._decode_step_times  # what price() reaches for such a step
        finish_at, ends = ln.finish_at, ln.decode_end_s
        while True:
            s = t + overhead  # run's start of the lane: stage_free[0] is t, its wake earlier
            if ln.wake_s > s:
                return
            seen = start if overlap else s
            if pending and pending[0][0] <= seen:
                return
            j = ln.j
            need = residue[j % bt]
            if capacity - ln.used < need:
                return
            ln.formed_s = start = s
            ln.used += need
            if ln.peak < ln.used:
                ln.peak = ln.used
            if self.peak < ln.used:
                self.peak = ln.used
            latency = price(decode, ln.a + decode * (j + 1), graphs, pad)[0]
            t = max(s, stage_free[-1]) + latency
            stage_free[-1] = ln.ready_s = t
            self.busy += latency
            self.steps += 1
            self.decode_steps += 1
            if sglang:
                ln.decayed_token_ratio()
            ends.append(t)
            ln.j = j + 1
            ln.decode_steps += 1
            done = finish_at.pop(j, None)
            if done:
                for r, epoch in done:
                    if r.epoch == epoch and r.state == DECODE:
                        self.finish(ln, r, t)
                return

    def admission_blocked(self, ln: Lane, budget: int) -> bool:
        """Whether `schedule_prefill`'s admission loop admits no one (with no prefill running
        and no chunk scheduled before it): its first test, without its side effects."""
        if not ln.waiting or budget <= 0 or len(ln.running) >= ln.max_batch:
            return True
        eng, bt = self.eng, ln.bt
        r = ln.waiting[0]
        if eng.admission == "sglang":
            # SGLang does not try again once a request is refused for tokens until the running
            # set changes (scheduler.py: batch_is_full, set on NO_TOKEN, cleared when a
            # running request finishes, 0.4.1 lines 751-808 and 862-898): the refusal is kept
            if ln.blocked_memo is not None and ln.blocked_memo[:2] == (ln.version, r.id):
                return ln.blocked_memo[2]
            blocked = not ln.sglang_future_fits(r)
            ln.blocked_memo = (ln.version, r.id, blocked)
            return blocked
        tokens = r.prompt + r.generated
        c = min(tokens, budget)
        if not eng.chunked_prefill and c < tokens:
            c = tokens
        if self.prefilled and r.preempted == 0:
            blocks = -(-tokens // bt)
        else:
            blocks = -(-c // bt)
        return not ln.admissible(blocks, r.total_blocks, eng.reserve_output_fraction)

    def tokens_this_step(self, ln: Lane) -> int:
        """Tokens each decoder gains this step: 1, or with speculative decoding the accepted
        drafts plus the verified token, E = (1 - a^(k+1)) / (1 - a) on average for k drafts
        accepted each with probability a given the previous ones (Leviathan et al. 2023,
        "Fast Inference from Transformers via Speculative Decoding", eq. 1), spread evenly over
        the lane's steps: floor((s + 1) E) - floor(s E) at its step s."""
        e = self.expected_tokens
        if e == 1.0:
            return 1
        s = ln.decode_steps
        return max(1, math.floor((s + 1) * e + 1e-9) - math.floor(s * e + 1e-9))

    def batch_waits(self, ln: Lane, decode: int, budget: int) -> bool:
        """Whether TensorRT-LLM's batch waiting holds this step's new context requests back
        (Engine.batch_wait_iters / batch_wait_tokens_ratio; PyExecutor `_waiting_requests`,
        applied only while generation requests run): held while fewer than batch_wait_iters
        steps have waited and the step's tokens, the decodes' and the contexts' it would admit,
        stay below batch_wait_tokens_ratio x max_num_tokens; admitting resets the count."""
        eng = self.eng
        if not eng.batch_wait_iters or not ln.waiting:
            return False
        ctx = 0  # the prompt tokens the budget would admit, in order
        for r in ln.waiting:
            if ctx >= budget:
                break
            ctx += min(r.prompt + r.generated, budget - ctx)
        if (ln.batch_wait < eng.batch_wait_iters
                and decode + ctx < eng.batch_wait_tokens_ratio * self.budget):
            ln.batch_wait += 1
            return True
        ln.batch_wait = 0
        return False

    def schedule_prefill(self, ln: Lane, budget: int, allow_admission: bool
                         ) -> list[tuple[Request, int]]:
        eng, bt = self.eng, ln.bt
        chunks: list[tuple[Request, int]] = []
        for r in ln.prefilling:
            if budget <= 0:
                break
            left = r.prompt + r.generated - r.computed
            c = min(left, budget)
            room = (ln.capacity - ln.used) * bt + r.blocks * bt - r.computed
            c = min(c, room)
            if c <= 0:
                continue
            blocks = -(-(r.computed + c) // bt)
            ln.used += blocks - r.blocks
            r.blocks = blocks
            chunks.append((r, c))
            budget -= c
        if not allow_admission:
            return chunks
        reserve = eng.reserve_output_fraction
        sglang = eng.admission == "sglang"
        rem_total = ln.sglang_budget() if sglang and ln.waiting else 0.0
        while ln.waiting and budget > 0 and len(ln.running) < ln.max_batch:
            r = ln.waiting[0]
            tokens = r.prompt + r.generated
            c = min(tokens, budget)
            if not eng.chunked_prefill and c < tokens:
                if chunks:
                    break
                c = tokens  # a recompute longer than the budget runs alone
            if self.prefilled and r.preempted == 0:  # its KV arrived: admit straight to decode
                blocks = -(-tokens // bt)
                if not ln.admits(r, blocks, reserve, sglang):
                    break
                ln.waiting.popleft()
                r.blocks, r.computed = blocks, tokens
                before = ln.version
                ln.add_running(r)
                ln.version += 1
                ln.used += blocks
                ln.reserved_total += r.total_blocks
                if math.isnan(r.first_s):
                    r.first_s = r.arrival
                    r.pieces.append(r.arrival)
                ln.start_decode(r)
                ln.admitted(r, before)
                self.admitted_decoders += 1
                continue
            blocks = -(-c // bt)
            if not ln.admits(r, blocks, reserve, sglang):
                break
            ln.waiting.popleft()
            r.state, r.blocks, r.computed = PREFILL, blocks, 0
            ln.add_running(r)
            ln.version += 1
            ln.admitted(r, ln.version - 1)
            ln.prefilling.append(r)
            ln.used += blocks
            ln.reserved_total += r.total_blocks
            chunks.append((r, c))
            budget -= c
            if sglang:
                # a chunked prompt reserves no output yet (PrefillAdder.add_one_req_ignore_eos:
                # _prefill_one_req(0, trunc_len, 0)); the budget stops the admissions after
                # the request that exhausts it
                rem_total -= c + (min(r.output - r.generated, SGLANG_CLIP_MAX_NEW_TOKENS)
                                  if c == tokens else 0)
                if rem_total <= 0:
                    break
        return chunks

    def graphs_of(self, decode: int, tokens: int, chunks: bool) -> tuple[str, int]:
        """The CUDA graphs a step of `decode` decoders and `tokens` tokens replays (StepCost
        step_times `graphs`) and the captured size it is padded to."""
        sizes = self.graph_sizes
        if sizes:
            mode = self.eng.cuda_graph_mode
            full = mode in ("full_decode", "full_and_piecewise")
            piece = mode in ("piecewise", "full_and_piecewise")
            if full and not chunks and decode <= sizes[-1]:
                return "all", sizes[bisect.bisect_left(sizes, decode)]
            if piece and tokens <= sizes[-1]:
                return "body", sizes[bisect.bisect_left(sizes, tokens)]
        return "none", 0

    def price(self, decode: int, ctx_sum: float, chunks) -> tuple[float, float]:
        tokens = decode
        for _, c in chunks:
            tokens += c
        graphs, pad = self.graphs_of(decode, tokens, bool(chunks))
        return self.cost.step_times(decode, ctx_sum, [(c, r.computed) for r, c in chunks],
                                    graphs, pad, spec_tokens=self.eng.spec_tokens)

    def finish(self, ln: Lane, r: Request, end: float) -> None:
        ln.release(r)
        r.state, r.finish_s = DONE, end
        ln.unfinished -= 1
        self.done += 1
        if self.concurrency_queue:
            # the client sends its next request as this one completes
            heapq.heappush(self.pending, (end + self.request_overhead,
                                          self.concurrency_queue.popleft()))

    # -- results --------------------------------------------------------------------------------
    def token_gaps(self) -> tuple[np.ndarray, np.ndarray]:
        """(tokens each request received, every gap between a request's consecutive tokens in
        request order): its token times are its `pieces` in turn, a float one time, a (j0, j1)
        range its lane's decode_end_s[j0:j1] (clipped as a slice clips). Inside a range the
        gaps are a slice of the lane's differenced decode ends, computed once; across pieces
        one subtraction each: the same subtractions as differencing each request's times."""
        ends = [ln.decode_end_s for ln in self.lanes]
        steps = [np.diff(np.asarray(e, dtype=float)) for e in ends]
        parts: list[np.ndarray] = []
        generated = np.zeros(len(self.requests), dtype=np.int64)
        for i, r in enumerate(self.requests):
            e, d = ends[r.lane], steps[r.lane]
            size, got, last = len(e), 0, 0.0
            across: list[float] = []  # gaps between pieces since the last slice
            for p in r.pieces:
                if isinstance(p, float):
                    if got:
                        across.append(p - last)
                    last = p
                    got += 1
                    continue
                j0, j1 = min(p[0], size), min(p[1], size)
                if j1 <= j0:
                    continue
                if got:
                    across.append(e[j0] - last)
                if j1 - j0 > 1:
                    if across:
                        parts.append(np.array(across))
                        across = []
                    parts.append(d[j0:j1 - 1])
                last = e[j1 - 1]
                got += j1 - j0
            if across:
                parts.append(np.array(across))
            generated[i] = got
        return generated, np.concatenate(parts) if parts else np.zeros(0)

    def result(self, m, h, tp, ep, pp, dtype, kv_dtype) -> SimResult:
        reqs = self.requests
        n = len(reqs)
        arrival = np.array([r.arrival for r in reqs])
        first = np.array([r.first_s for r in reqs])
        finish = np.array([r.finish_s for r in reqs])
        osl = np.array([r.output for r in reqs], dtype=np.int64)
        generated, itl = self.token_gaps()
        tpot = np.full(n, np.nan)
        many = osl > 1
        tpot[many] = (finish[many] - first[many]) / (osl[many] - 1)
        duration = float(finish.max() - arrival.min())
        return SimResult(
            m.name, h.name, tp, ep, pp, dtype, kv_dtype, self.eng, self.workload.to_dict(),
            max(tp, ep) * pp, max(1, ep // tp), self.kv, sum(ln.capacity for ln in self.lanes),
            arrival, np.array([r.prompt for r in reqs], dtype=np.int64), osl, first - arrival,
            tpot, finish - arrival, itl, generated,
            duration, self.steps, self.decode_steps, self.prefill_steps, self.mixed_steps,
            sum(r.preempted for r in reqs), self.peak, self.busy,
            self.peak_running, {"max_batch": sum(ln.max_batch for ln in self.lanes),
                                "max_tokens_per_step": self.budget})
