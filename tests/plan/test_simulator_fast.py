"""The simulator's fast paths against the plain computations they replace, on many inputs:
the running set's columns (running.py) and the pending admissions of SGLang's admission memo,
the bound that passes most admission tests without the arrays, the token gaps gathered at once,
and the percentiles taken in one call."""
from __future__ import annotations

import random

import numpy as np
import pytest

from perfmodel.plan.simulator import Workload, simulate
from perfmodel.plan.simulator.result import distribution
from perfmodel.plan.simulator.sim import (DECODE, PREFILL, Lane, Request, Simulation,
                                          _countdown)


def _reference_sorted(ln: Lane) -> tuple[np.ndarray, np.ndarray]:
    """remaining_outputs' lists as int64 arrays sorted stably by tokens left."""
    left, held = ln.remaining_outputs()
    L, O = np.asarray(left, dtype=np.int64), np.asarray(held, dtype=np.int64)
    order = np.argsort(L, kind="stable")
    return L[order], O[order]


def _reference_fits(ln: Lane, r: Request) -> bool:
    """SGLang's admission test over the whole sorted arrays (no bound, no memo)."""
    L, O = _reference_sorted(ln)
    L, O = Lane._with(L, O, r)
    t = np.cumsum(O) - O
    t[:-1] -= L[1:] * _countdown(len(L))[:-1]
    t[-1] -= L[-1]
    cur = (ln.capacity - ln.used) * ln.bt - (r.prompt + r.generated)
    return bool(cur + int(t.min()) > 0)


def _random_lane_walk(seed: int, moves: int = 400):
    """A lane driven through admissions, decode starts, decode steps, releases and
    preemptions at random, yielding it after each move."""
    rng = random.Random(seed)
    ln = Lane(capacity_blocks=10**9, max_batch=10**6, block_tokens=1)
    rid = 0
    for _ in range(moves):
        move = rng.random()
        prefilling = [r for r in ln.running.values() if r.state == PREFILL]
        if move < 0.35 or not ln.running:  # few output lengths: ties in tokens left
            r = Request(rid, 0.0, rng.randint(1, 50), rng.choice((8, 16, 40)), 1)
            rid += 1
            r.generated = rng.randint(0, r.output - 1)
            r.state = PREFILL
            ln.add_running(r)
            ln.prefilling.append(r)
            ln.version += 1
            ln.admitted(r, ln.version - 1)
        elif move < 0.55 and prefilling:
            r = rng.choice(prefilling)
            r.generated += 1
            if r.generated >= r.output:
                ln.release(r)
            else:
                r.computed = r.prompt + r.generated
                ln.prefilling.remove(r)
                ln.start_decode(r)
        elif move < 0.75:
            ln.j += 1
        elif move < 0.9:
            ln.release(rng.choice(list(ln.running.values())))
        else:
            ln.preempt_last()
        yield ln, rng


@pytest.mark.parametrize("seed", range(12))
def test_running_columns_and_pending_admissions_give_the_sorted_remaining_outputs(seed):
    read = 0
    for ln, rng in _random_lane_walk(seed):
        if rng.random() < 0.3:  # reads apart: admissions pile up pending in between
            continue
        L, O = ln._remaining_sorted()
        R, P = _reference_sorted(ln)
        assert L.tolist() == R.tolist() and O.tolist() == P.tolist()
        read += 1
    assert read > 100


@pytest.mark.parametrize("seed", range(12))
def test_the_admission_test_with_its_bound_and_memo_is_the_full_test(seed):
    checked = by_bound = 0
    for ln, rng in _random_lane_walk(seed, moves=300):
        L, _ = _reference_sorted(ln)
        r = Request(10**6, 0.0, rng.randint(1, 50), rng.randint(1, 40), 1)
        r.generated = rng.randint(0, r.output - 1)
        # free tokens around the test's threshold, where the bound rarely decides, and far
        # above it, where it does
        need = int(L.sum()) * (len(L) + 1) + r.prompt + 40 * (len(L) + 1)
        for free in (rng.randint(0, need), need + rng.randint(1, 100)):
            ln.capacity = ln.used + free
            ln.version += 1  # a fresh test (the memo is the lane's state at this version)
            cur = free - (r.prompt + r.generated)
            by_bound += ln._passes_bound(r, cur)
            assert ln.sglang_future_fits(r) is _reference_fits(ln, r)
            checked += 1
    assert checked > 100 and 0 < by_bound < checked


def _token_gaps_reference(sim: Simulation) -> tuple[np.ndarray, np.ndarray]:
    """Each request's token times concatenated and differenced on their own."""
    ends = [np.asarray(ln.decode_end_s) for ln in sim.lanes]
    gaps, generated = [], np.zeros(len(sim.requests), dtype=np.int64)
    for i, r in enumerate(sim.requests):
        times = np.concatenate([np.array([p]) if isinstance(p, float) else ends[r.lane][p[0]:p[1]]
                                for p in r.pieces] or [np.zeros(0)])
        generated[i] = len(times)
        if len(times) > 1:
            gaps.append(np.diff(times))
    return generated, np.concatenate(gaps) if gaps else np.zeros(0)


@pytest.mark.parametrize("seed", range(8))
def test_token_gaps_gathered_at_once_are_each_requests_own(seed):
    rng = random.Random(seed)
    sim = Simulation.__new__(Simulation)
    sim.lanes = [Lane(1, 1, 1) for _ in range(rng.randint(1, 3))]
    for ln in sim.lanes:
        t = 0.0
        for _ in range(rng.randint(0, 60)):
            t += rng.random()
            ln.decode_end_s.append(t)
    sim.requests = []
    for i in range(rng.randint(0, 40)):
        r = Request(i, 0.0, 10, 10, 1)
        r.lane = rng.randrange(len(sim.lanes))
        size = len(sim.lanes[r.lane].decode_end_s)
        for _ in range(rng.randint(0, 4)):
            if rng.random() < 0.4:
                r.pieces.append(rng.random() * 100)
            else:
                j0 = rng.randint(0, size + 2)
                r.pieces.append((j0, j0 + rng.randint(0, 8)))  # may run past the ends
        sim.requests.append(r)
    generated, gaps = sim.token_gaps()
    ref_generated, ref_gaps = _token_gaps_reference(sim)
    assert generated.tolist() == ref_generated.tolist()
    assert gaps.dtype == ref_gaps.dtype and gaps.tolist() == ref_gaps.tolist()


def test_percentiles_in_one_call_are_the_separate_ones():
    rng = np.random.default_rng(0)
    for n in list(range(1, 40)) + [1000, 4097]:
        for values in (rng.random(n), rng.exponential(1e-3, n), np.round(rng.random(n) * 7),
                       np.where(rng.random(n) < 0.2, np.nan, rng.random(n))):
            v = values[np.isfinite(values)]
            got = distribution(values)
            if not len(v):
                assert all(np.isnan(x) for x in got.values())
                continue
            assert got == {"mean": float(v.mean()), "p50": float(np.percentile(v, 50)),
                           "p90": float(np.percentile(v, 90)),
                           "p99": float(np.percentile(v, 99))}


def _plain(monkeypatch) -> None:
    """The simulator without its shortcuts: the admission test always in full, the running
    set's tokens from a pass over it."""
    monkeypatch.setattr(Lane, "_passes_bound", lambda self, r, cur: False)

    def remaining(self):
        L, O = _reference_sorted(self)
        return type("Memo", (), {"L": L, "O": O, "pending": [], "count": len(L),
                                 "largest": int(L[-1]) if len(L) else 0})()
    monkeypatch.setattr(Lane, "_remaining", remaining)
    monkeypatch.setattr(Lane, "admitted", lambda self, r, version: None)


@pytest.mark.parametrize("workload", [
    Workload("offline", 600, 512, 64),
    Workload("concurrency", 300, ("uniform", 256, 1024), 64, concurrency=48),
    Workload("rate", 300, 512, ("uniform", 16, 128), rate=40.0),
])
def test_sglang_simulations_equal_the_plain_scheduler(monkeypatch, workload):
    kw = dict(engine="sglang", tp=1, pp=2, kv_blocks_override=2500, block_tokens=16)
    fast = simulate("llama3-8b", "H100", workload, **kw)
    _plain(monkeypatch)
    plain = simulate("llama3-8b", "H100", workload, **kw)
    assert fast.steps == plain.steps and fast.preemptions == plain.preemptions
    for k in ("ttft_s", "tpot_s", "e2e_s", "itl_s", "generated"):
        a, b = getattr(fast, k), getattr(plain, k)
        assert np.array_equal(a, b, equal_nan=True), k
