"""MoE routing traces: which experts each token of a decode step picks, and how many get activated.

A trace is an int array of shape (tokens, top_k): row t holds the expert ids token t is routed to by
the gate's top-k, with no expert repeated within a row. Generators here are seeded and vectorized
(Gumbel-top-k, i.e. sampling without replacement from a popularity); `load_trace` reads recorded
traces. A closed form gives the expected activated experts under uniform routing; METRO (arXiv
2512.09277, docs/studies.md §2.1) explains why this count, not tokens, sets decode MoE time.
"""
from __future__ import annotations

import io
import os
import warnings
import zipfile
import zlib
from collections import OrderedDict

import numpy as np

from perfmodel.errors import InputError
from perfmodel.yamlio import one_line, read_text

KINDS = ("uniform", "zipf", "correlated")


class TraceError(InputError, ValueError):
    """A routing trace file that cannot be used. Both an InputError (the CLI prints it as one
    line, exit 2) and a ValueError (what plain-numpy callers expect)."""


def popularity(experts: int, kind: str = "uniform", skew: float = 1.0,
               rng: np.random.Generator | None = None) -> np.ndarray:
    """Routing probability of each expert (sums to 1), shape (experts,).

    uniform: 1/E each. zipf / correlated: p_e ∝ (rank_e + 1)^−skew, where the rank of each
    expert comes from a seeded random permutation, so the hottest expert is not always expert 0
    (real gates have no reason to favour low ids, and placements must not get that for free).
    skew = 0 gives uniform popularity."""
    if kind not in KINDS:
        raise ValueError(f"trace kind must be one of {KINDS}, got {kind!r}")
    if kind == "uniform" or skew == 0:
        return np.full(experts, 1.0 / experts)
    rng = rng if rng is not None else np.random.default_rng(0)
    p = np.empty(experts)
    p[rng.permutation(experts)] = np.arange(1, experts + 1, dtype=float) ** -float(skew)
    return p / p.sum()


def _gumbel_top_k(log_p: np.ndarray, tokens: int, top_k: int, rng: np.random.Generator,
                  forced: np.ndarray | None = None) -> np.ndarray:
    """tokens × top_k expert ids, each row a draw without replacement from exp(log_p) (Gumbel-top-k:
    the top-k of log p + Gumbel noise is distributed like sequential sampling without replacement).
    Rows come sorted by key, most likely first. `forced` (tokens × E bool) excludes experts."""
    keys = log_p[None, :] + rng.gumbel(size=(tokens, log_p.size))
    if forced is not None:
        keys[forced] = -np.inf
    top = np.argpartition(-keys, top_k - 1, axis=1)[:, :top_k]
    order = np.argsort(-np.take_along_axis(keys, top, axis=1), axis=1, kind="stable")
    return np.take_along_axis(top, order, axis=1)


def _check_draw(tokens: int, experts: int, top_k: int) -> None:
    """ValueError unless `tokens` rows of `top_k` distinct experts of `experts` can be drawn."""
    if not 1 <= top_k <= experts:
        raise ValueError(f"top_k must be in 1..experts ({experts}), got {top_k}")
    if tokens < 0:
        raise ValueError(f"tokens must be >= 0, got {tokens}")


def synthetic_trace(tokens: int, experts: int, top_k: int, kind: str = "uniform",
                    skew: float = 1.0, seed: int = 0, correlation: float = 0.5,
                    previous: np.ndarray | None = None,
                    popularity_seed: int | None = None) -> np.ndarray:
    """One decode step's routing, int64 array (tokens, top_k) of expert ids, no repeats per row.

    kind="uniform": every expert equally likely (the closed form's assumption).
    kind="zipf": popularity ∝ (rank+1)^−skew over a seeded permutation of ranks (`popularity`).
    kind="correlated": temporal correlation between decode steps. Token t keeps each expert of
    its reference row (previous[t], or a seeded draw from the Zipf popularity when previous is
    None) with probability `correlation`, in the same slot; the other slots are filled from the
    popularity without repeating a kept expert. correlation=1 repeats the reference exactly.
    Seeds: the rank permutation comes from `popularity_seed` (default `seed`) and the sampling
    noise from `seed`, on independent streams, so consecutive steps can share hot experts while
    drawing fresh noise (see `correlated_steps`). Same seeds, same trace."""
    _check_draw(tokens, experts, top_k)
    if not 0.0 <= correlation <= 1.0:
        raise ValueError(f"correlation must be in [0, 1], got {correlation}")
    pseed = seed if popularity_seed is None else popularity_seed
    log_p = np.log(popularity(experts, kind, skew, np.random.default_rng([pseed, 0])))
    rng = np.random.default_rng([seed, 1])
    if kind != "correlated":
        return _gumbel_top_k(log_p, tokens, top_k, rng)
    if previous is None:
        ref = _gumbel_top_k(log_p, tokens, top_k, rng)
    else:
        ref = check_trace(np.asarray(previous), top_k, experts, "previous")
        if ref.shape[0] != tokens:
            raise ValueError(f"previous has {ref.shape[0]} tokens, expected {tokens}")
    keep = rng.random(ref.shape) < correlation
    rows = np.arange(tokens)
    kept = np.zeros((tokens, experts), bool)
    kept[np.repeat(rows, top_k)[keep.ravel()], ref[keep]] = True
    fresh = _gumbel_top_k(log_p, tokens, top_k, rng, forced=kept)
    # The j-th free slot of a row takes that row's j-th fresh pick (free slots ≤ top_k − kept).
    slot_rank = np.cumsum(~keep, axis=1) - 1
    out = ref.copy()
    out[~keep] = np.take_along_axis(fresh, np.maximum(slot_rank, 0), axis=1)[~keep]
    return out


# One growing draw per (experts, top_k, kind, skew, seed): its trace rows so far, the noise
# stream where it stopped, and the log-popularity (trace_prefix). The most recently used
# PREFIX_CACHE draws are kept (a study over many seeds would otherwise hold every trace); an
# evicted draw is drawn again from its seed, the same rows.
_PREFIXES: OrderedDict[tuple, tuple[np.ndarray, np.random.Generator, np.ndarray]] = \
    OrderedDict()
PREFIX_CACHE = 64


def trace_prefix(tokens: int, experts: int, top_k: int, kind: str = "uniform",
                 skew: float = 1.0, seed: int = 0) -> np.ndarray:
    """`synthetic_trace(tokens, experts, top_k, kind, skew, seed)` for kind uniform or zipf,
    read-only, as the first `tokens` rows of one growing draw per (experts, top_k, kind, skew,
    seed). The Gumbel noise fills the (tokens, E) keys in C order from one stream, and each
    row's top-k reads its own row only, so the first n rows of a longer draw are the n-token
    draw bit for bit, and a draw continued from where the stream stopped is the longer draw:
    a search's many token counts draw each row once instead of once per count."""
    if kind not in ("uniform", "zipf"):
        raise ValueError(f"trace_prefix draws uniform or zipf traces, not {kind!r}")
    _check_draw(tokens, experts, top_k)
    key = (experts, top_k, kind, float(skew), seed)
    if key not in _PREFIXES:
        # synthetic_trace's seeds: the popularity's stream and the noise's
        log_p = np.log(popularity(experts, kind, skew, np.random.default_rng([seed, 0])))
        _PREFIXES[key] = (np.empty((0, top_k), dtype=np.int64),
                          np.random.default_rng([seed, 1]), log_p)
        while len(_PREFIXES) > PREFIX_CACHE:
            _PREFIXES.popitem(last=False)
    _PREFIXES.move_to_end(key)
    rows, rng, log_p = _PREFIXES[key]
    if tokens > rows.shape[0]:
        more = _gumbel_top_k(log_p, tokens - rows.shape[0], top_k, rng)
        rows = np.concatenate([rows, more])
        rows.setflags(write=False)
        _PREFIXES[key] = (rows, rng, log_p)
    return rows[:tokens]


def correlated_steps(steps: int, tokens: int, experts: int, top_k: int, skew: float = 1.0,
                     correlation: float = 0.5, seed: int = 0) -> list[np.ndarray]:
    """`steps` consecutive decode steps (list of (tokens, top_k) arrays), each correlated with the
    one before; all share one Zipf popularity (rank permutation from `seed`), noise per step."""
    out = [synthetic_trace(tokens, experts, top_k, "zipf", skew, seed)]
    for s in range(1, steps):
        out.append(synthetic_trace(tokens, experts, top_k, "correlated", skew, seed + s,
                                   correlation, previous=out[-1], popularity_seed=seed))
    return out


def check_trace(ids: np.ndarray, top_k: int, experts: int | None = None,
                name: str = "trace") -> np.ndarray:
    """Validate a trace array and return it as int64; ValueError (TraceError) naming `name`."""
    if ids.size == 0:
        raise TraceError(f"{name}: no tokens")
    if ids.ndim != 2 or ids.shape[1] != top_k:
        raise TraceError(f"{name}: expected one row of {top_k} expert ids per token, got shape "
                         f"{ids.shape}")
    if not np.issubdtype(ids.dtype, np.integer):
        if not np.issubdtype(ids.dtype, np.floating) or not np.all(np.isfinite(ids)) or \
                np.any(ids != np.round(ids)):
            raise TraceError(f"{name}: expert ids must be integers (dtype {ids.dtype})")
    ids = ids.astype(np.int64)
    hi = experts if experts is not None else np.iinfo(np.int64).max
    bad = np.flatnonzero(((ids < 0) | (ids >= hi)).any(axis=1))
    if bad.size:
        limit = f"0..{experts - 1}" if experts is not None else ">= 0"
        raise TraceError(f"{name}: token {bad[0]} has expert id(s) outside {limit}: "
                         f"{ids[bad[0]].tolist()} ({bad.size} bad rows)")
    srt = np.sort(ids, axis=1)
    rep = np.flatnonzero((srt[:, 1:] == srt[:, :-1]).any(axis=1))
    if rep.size:
        raise TraceError(f"{name}: token {rep[0]} repeats an expert: {ids[rep[0]].tolist()} "
                         f"({rep.size} rows with repeats)")
    return ids


def load_trace(path: str, top_k: int, experts: int | None = None) -> np.ndarray:
    """Read a routing trace: CSV (one row of top_k comma-separated expert ids per token, '#'
    comments allowed) or NPZ (int array named `experts`, shape tokens × top_k). Returns int64
    (tokens, top_k). Raises TraceError (a ValueError) naming the file and the problem: unreadable,
    not UTF-8 (CSV), not an NPZ archive or a damaged one, missing array, larger than
    MAX_TRACE_BYTES, wrong shape, non-integer, out-of-range (needs `experts`; negative ids always
    fail) or repeated ids within a token (token = 0-based data row)."""
    path = os.fspath(path)
    try:
        if path.endswith(".npz"):
            ids = _read_npz(path)
        else:
            text = read_text(path, "routing trace")
            with warnings.catch_warnings():  # an empty file is reported below, not warned
                warnings.simplefilter("ignore", UserWarning)
                ids = np.loadtxt(io.StringIO(text), delimiter=",", ndmin=2, comments="#",
                                 dtype=float)
    except InputError as e:
        raise TraceError(e.problems) from None
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zlib.error) as e:
        raise TraceError(f"{path}: cannot read routing trace ({one_line(e)})") from None
    return check_trace(ids, top_k, experts, path)


# A trace is at most 1 GiB of expert ids (2^27 tokens of top-8 int64 ids): larger is not a decode
# step's routing, and would be read into memory whole
MAX_TRACE_BYTES = 1 << 30


def _read_npz(path: str) -> np.ndarray:
    """The `experts` array of an NPZ archive; TraceError for a file that is not one."""
    try:
        z = np.load(path, allow_pickle=False)
    except (EOFError, zipfile.BadZipFile):
        raise TraceError(f"{path}: not an NPZ archive (empty, truncated or damaged); expected "
                         f"np.savez output with an int array 'experts'") from None
    if not isinstance(z, np.lib.npyio.NpzFile):
        raise TraceError(f"{path}: not an NPZ archive (a single .npy array?); expected np.savez "
                         f"output with an int array 'experts'")
    with z:
        if "experts" not in z.files:
            raise TraceError(f"{path}: NPZ has no array 'experts' (has {z.files})")
        size = z.zip.getinfo(next(n for n in z.zip.namelist()
                                  if n in ("experts", "experts.npy"))).file_size
        if size > MAX_TRACE_BYTES:
            raise TraceError(f"{path}: array 'experts' holds {size} bytes (at most "
                             f"{MAX_TRACE_BYTES}: 2^27 tokens of top-8 ids)")
        try:
            return z["experts"]
        except ValueError:  # an object array: np.load refuses to unpickle it
            raise TraceError(f"{path}: array 'experts' holds Python objects (pickled), not "
                             f"integers") from None


def expected_activated(experts: int, top_k: int, tokens):
    """Expected number of distinct experts hit by `tokens` tokens under uniform top-k routing:
    E·(1 − (1 − k/E)^B). Each token includes a given expert with probability k/E, independently
    across tokens, so the expert stays idle with probability (1 − k/E)^B. Unit: experts.
    `tokens` may be an array (broadcasts)."""
    b = np.asarray(tokens, dtype=float)
    return experts * (1.0 - (1.0 - top_k / experts) ** b)


def expected_activated_per_gpu(experts: int, top_k: int, tokens, gpus: int):
    """Expected activated experts on one GPU when the E experts are split evenly over G GPUs
    without replication: (E/G)·(1 − (1 − k/E)^B) (linearity of expectation). Unit: experts."""
    return expected_activated(experts, top_k, tokens) / gpus
