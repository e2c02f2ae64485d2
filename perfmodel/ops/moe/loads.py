"""Routing from recorded expert loads: a trace source that samples tokens × top-k expert ids per
layer from per-layer, per-expert token counts.

The files (perfmodel/ops/moe/data/; validate/data/SOURCES.md, section MOE-LOADS) are the SGLang
team's statistics of DeepSeek-V3/R1 under large-scale expert parallelism (sgl-project/sglang
issue #6017): `{"logical_count": [[...E counts...] × layers]}`, the tokens routed to each expert
of each layer summed over a whole run. Layers without routed tokens are dense (DeepSeek-V3's
first 3). They give long-run expert shares only: no per-batch or per-token order, so which
experts fire together and how bursty a batch is are not in them.

The sampler, per layer:
  * a random-utility gate: token t's key for expert e is log w_e + Gumbel noise (the top-k of
    such keys is Plackett–Luce sampling without replacement from w, the same Gumbel-top-k as
    `perfmodel.ops.moe.traces`);
  * DeepSeek-V3's group-limited routing (DeepSeek-V3 Technical Report, arXiv:2412.19437, §2.1.2
    and config.json n_group = 8, topk_group = 4; the inference code scores a group by the sum of
    its top-2 affinities): the 256 experts form `groups` groups of consecutive ids, each group
    is scored by the sum of its two largest keys, the `group_top_k` best groups are kept and the
    top-k experts are taken among their experts only. The key stands in for the gate's
    affinity; summing log-domain keys instead of sigmoid affinities is our analog;
  * calibration: group limiting concentrates tokens on hot groups, so w = file shares would
    overshoot hot experts (by up to ~35 % on these files). The log-weights are fitted so that
    the sampler's expected shares equal the file's: stochastic approximation
    log w ← log w + a_i·(log p − log m̂), m̂ the shares of CALIBRATION_TOKENS fresh tokens per
    iteration, a_i = 1 for the first third and then decaying as i^−0.6, with the last half of
    the iterates averaged (Polyak–Ruppert). Its own error is that of a sample of roughly
    CALIBRATION_TOKENS · CALIBRATION_ITERATIONS / 2 tokens (measured in the tests);
  * batch-to-batch variation: each batch multiplies every expert's weight by exp(σ·z), z ~ N(0,1)
    drawn per batch, expert and layer (`variation` = σ; 0: every batch draws from the long-run
    shares). The files cannot pin σ down; it is a knob for the burstiness they lose. σ ≈ 0.1
    reproduces TensorRT-LLM's measured per-rank imbalance after EPLB (docs/studies.md §2.8).
Seeds: a batch is seeded by (seed, layer); its noise comes from independent streams, so the same
seed reproduces the same trace, and the first rows of a larger batch are the smaller batch.
Batches above EXACT_TOKENS tokens draw per-expert counts from a multinomial over the batch's
shares instead (every expert is active there, so per-token structure no longer matters).
"""
from __future__ import annotations

import functools
import math
import os
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from perfmodel import jsonio
from perfmodel.errors import InputError, show
from perfmodel.ops.moe.traces import TraceError
from perfmodel.yamlio import is_file, read_text

LOADS_KEY = "logical_count"  # SGLang's expert-distribution dump (expert_distribution.py)
DATA_DIR = Path(__file__).resolve().parent / "data"
# Calibration: per-iteration sample and iterations (about 1 s per layer of 256 experts on one
# core; precomputed for the shipped files, `calibrated.py`, and cached per process); the
# averaged half of the iterates is worth a sample of ~100k tokens.
CALIBRATION_TOKENS = 8192
CALIBRATION_ITERATIONS = 24
CALIBRATION_SEED = 20251209  # fixed: the calibration is part of the model, not of a draw
# Exact per-token sampling up to this many tokens per batch; larger batches draw counts.
EXACT_TOKENS = 8192
CHUNK_TOKENS = 4096  # sampling memory: CHUNK_TOKENS × experts float32 keys at a time
COUNTS_CACHE = 8192  # batches kept (E int64 each: 16 MB at E = 256)
_COUNTS: OrderedDict = OrderedDict()


class LoadsError(TraceError):
    """An expert-loads file that cannot be used (an InputError: one line, naming the file and
    the key; and a ValueError)."""


def resolve_loads_path(name: str | os.PathLike) -> str:
    """A loads file by path, or by the name of a file shipped in perfmodel/ops/moe/data."""
    path = os.fspath(name)
    if os.path.exists(path) or os.sep in path or "/" in path:
        return path
    shipped = DATA_DIR / path
    if is_file(shipped):  # (a name too long for a path is no file either)
        return str(shipped)
    known = ", ".join(sorted(p.name for p in DATA_DIR.glob("*.json")))
    raise LoadsError(f"{path}: no such expert-loads file (nor in perfmodel/ops/moe/data: {known})")


@dataclass(frozen=True, eq=False)
class ExpertLoads:
    """counts (layers × experts) float: tokens routed to each expert of each layer; path: the
    file it came from (for messages and cache keys)."""
    path: str
    counts: np.ndarray
    key: tuple = ()

    @property
    def layers(self) -> int:
        return self.counts.shape[0]

    @property
    def experts(self) -> int:
        return self.counts.shape[1]

    @property
    def moe_layers(self) -> list[int]:
        """Layers with routed tokens (the others are dense layers, all zeros)."""
        return [int(i) for i in np.flatnonzero(self.counts.sum(1) > 0)]

    def check_layer(self, layer: int | None) -> int:
        """The layer to use (None: the first MoE layer); LoadsError if it has no tokens."""
        moe = self.moe_layers
        if layer is None:
            return moe[0]
        if not 0 <= layer < self.layers:
            raise LoadsError(f"{self.path}: {LOADS_KEY}[{layer}]: no such layer (the file has "
                             f"{self.layers}, MoE layers {_span(moe)})")
        if layer not in moe:
            raise LoadsError(f"{self.path}: {LOADS_KEY}[{layer}]: no routed tokens (a dense "
                             f"layer; MoE layers {_span(moe)})")
        return layer

    def shares(self, layer: int) -> np.ndarray:
        """Long-run share of the layer's routed tokens per expert (E,), sums to 1."""
        c = self.counts[self.check_layer(layer)]
        return c / c.sum()

    def check_experts(self, experts: int) -> None:
        if self.experts != experts:
            raise LoadsError(f"{self.path}: {LOADS_KEY}[0]: {self.experts} expert counts per "
                             f"layer, but the model has {experts} routed experts")


def _span(layers: list[int]) -> str:
    contiguous = layers == list(range(layers[0], layers[-1] + 1))
    return f"{layers[0]}..{layers[-1]}" if contiguous else ", ".join(map(str, layers))


def load_expert_loads(path: str | os.PathLike) -> ExpertLoads:
    """Read and validate a loads file (path or shipped name). LoadsError, one line naming the
    file and the key: unreadable, not JSON, not an object with exactly the key `logical_count`,
    not a non-empty list of equal-length lists of finite non-negative numbers, or all zeros."""
    p = resolve_loads_path(path)
    try:
        st = os.stat(p)
    except OSError as e:
        raise LoadsError(f"{p}: cannot read expert loads ({e.strerror})") from None
    return _load(p, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=32)
def _load(path: str, mtime_ns: int, size: int) -> ExpertLoads:
    try:  # perfmodel.jsonio: UTF-8, nesting and finite numbers checked, one-line errors
        raw = jsonio.loads(read_text(path, "expert loads"), path)
    except InputError as e:
        raise LoadsError(e.problems) from None
    expect = "a list of layers, each a list of per-expert token counts"
    if not isinstance(raw, dict):
        raise LoadsError(f"{path}: expected a JSON object with key '{LOADS_KEY}' ({expect}), "
                         f"got {type(raw).__name__}")
    extra = sorted(k for k in raw if k != LOADS_KEY)
    if extra:
        raise LoadsError(f"{path}: {extra[0]}: unknown key (expected only '{LOADS_KEY}')")
    if LOADS_KEY not in raw:
        raise LoadsError(f"{path}: {LOADS_KEY}: missing ({expect})")
    rows = raw[LOADS_KEY]
    if not isinstance(rows, list) or not rows:
        raise LoadsError(f"{path}: {LOADS_KEY}: expected {expect}, got {_kind(rows)}")
    width = None
    for i, row in enumerate(rows):
        if not isinstance(row, list) or not row:
            raise LoadsError(f"{path}: {LOADS_KEY}[{i}]: expected a non-empty list of "
                             f"per-expert token counts, got {_kind(row)}")
        if width is None:
            width = len(row)
        elif len(row) != width:
            raise LoadsError(f"{path}: {LOADS_KEY}[{i}]: {len(row)} expert counts, expected "
                             f"{width} (as in layer 0)")
        for j, v in enumerate(row):
            # at most 2^53: exact as the float the counts become (and a 400-digit integer
            # would not convert at all)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 2**53:
                raise LoadsError(f"{path}: {LOADS_KEY}[{i}][{j}]: expected a non-negative "
                                 f"token count (at most 2^53), got {show(v)}")
    counts = np.array(rows, dtype=float)
    if not counts.sum() > 0:
        raise LoadsError(f"{path}: {LOADS_KEY}: every layer is all zeros (no routed tokens)")
    counts.setflags(write=False)
    return ExpertLoads(path, counts, (path, mtime_ns, size))


def _kind(v) -> str:
    return "an empty list" if v == [] else type(v).__name__


# ------------------------------------------------------------------------------- sampling ----

def _gumbel(rng: np.random.Generator, shape) -> np.ndarray:
    """Standard Gumbel noise in float32 (−log(−log U)); U = 0 gives −inf, never picked."""
    with np.errstate(divide="ignore"):
        return -np.log(-np.log(rng.random(shape, dtype=np.float32)))


def group_limited_top_k(keys: np.ndarray, top_k: int, groups: int = 1,
                        group_top_k: int | None = None) -> np.ndarray:
    """Top-k expert ids (rows unordered) of each row of keys (tokens × E), restricted to the
    `group_top_k` groups (consecutive blocks of E/groups experts) with the largest sum of their
    two largest keys (DeepSeek-V3's group score). groups = 1 or group_top_k = groups: plain
    top-k."""
    n, e = keys.shape
    if groups <= 1 or group_top_k is None or group_top_k >= groups:
        return np.argpartition(-keys, top_k - 1, axis=1)[:, :top_k]
    size = e // groups
    grouped = keys.reshape(n, groups, size)
    best2 = np.partition(grouped, size - 2, axis=2)[:, :, size - 2:] if size > 1 else grouped
    score = best2.sum(axis=2)
    chosen = np.argpartition(-score, group_top_k - 1, axis=1)[:, :group_top_k]  # (n, tg)
    rows = np.arange(n)[:, None]
    kept = grouped[rows, chosen].reshape(n, -1)  # the kept groups' keys, (n, tg·size)
    pick = np.argpartition(-kept, top_k - 1, axis=1)[:, :top_k]
    return chosen[rows, pick // size] * size + pick % size


def check_group_limit(experts: int, top_k: int, groups: int, group_top_k: int | None) -> None:
    """ValueError unless the experts split into `groups` equal groups and the kept groups hold
    at least top_k experts."""
    if groups < 1 or experts % groups:
        raise ValueError(f"{experts} experts do not split into {groups} equal groups")
    if group_top_k is not None and not 1 <= group_top_k <= groups:
        raise ValueError(f"group_top_k must be in 1..{groups}, got {group_top_k}")
    kept = experts if group_top_k is None else group_top_k * (experts // groups)
    if top_k > kept:
        raise ValueError(f"top_k ({top_k}) exceeds the {kept} experts of the kept groups")
    if groups > 1 and experts // groups < 2:
        raise ValueError("group-limited routing scores groups by their top-2 experts: groups "
                         "need at least 2 experts")


@functools.lru_cache(maxsize=512)
def _calibrated(key: tuple, layer: int, top_k: int, groups: int, group_top_k: int | None,
                shares_bytes: bytes) -> np.ndarray:
    """A layer's calibrated log-weights: from the shipped table where it holds them (the
    shipped files, `perfmodel.ops.moe.calibrated`), else calibrated here (about 1 s)."""
    from perfmodel.ops.moe import calibrated
    shipped = calibrated.lookup(calibrated.digest(layer, top_k, groups, group_top_k,
                                                  shares_bytes))
    if shipped is not None:
        shipped.setflags(write=False)
        return shipped
    return calibrate_log_weights(layer, top_k, groups, group_top_k, shares_bytes)


def calibrate_log_weights(layer: int, top_k: int, groups: int, group_top_k: int | None,
                          shares_bytes: bytes) -> np.ndarray:
    """The calibration of the module docstring for one layer (shares as float64 bytes): the
    log-weights (E,) whose group-limited Gumbel-top-k shares equal the file's; −inf for
    experts the file never used. Deterministic: seeded by (CALIBRATION_SEED, layer)."""
    p = np.frombuffer(shares_bytes, dtype=float)
    e = p.size
    # Calibrated even without group limiting: top-k without replacement bends shares too (an
    # expert cannot take more than one of a token's k picks).
    floor = 0.5 / (CALIBRATION_TOKENS * top_k)  # an unseen expert counts as half a token
    positive = p > 0
    log_p = np.log(np.where(positive, p, 1.0))
    log_w = log_p.copy()
    rng = np.random.default_rng([CALIBRATION_SEED, layer])
    acc, n_acc = np.zeros(e), 0
    burn = CALIBRATION_ITERATIONS // 3
    for it in range(CALIBRATION_ITERATIONS):
        keys = np.where(positive, log_w, -np.inf).astype(np.float32) + \
            _gumbel(rng, (CALIBRATION_TOKENS, e))
        ids = group_limited_top_k(keys, top_k, groups, group_top_k)
        m = np.bincount(ids.ravel(), minlength=e) / ids.size
        step = 1.0 if it < burn else (1.0 + it - burn) ** -0.6
        log_w = log_w + step * np.where(positive, log_p - np.log(np.maximum(m, floor)), 0.0)
        log_w -= log_w[positive].max()
        if it >= CALIBRATION_ITERATIONS // 2:
            acc += log_w
            n_acc += 1
    out = np.where(positive, acc / n_acc, -np.inf)
    out.setflags(write=False)
    return out


class LoadsRouting:
    """Trace source from an expert-loads file (module docstring). One object per (file, top_k,
    group limit, variation); `trace(layer, tokens, seed)` and `counts(...)` give one batch."""

    def __init__(self, loads: ExpertLoads | str | os.PathLike, top_k: int, groups: int = 1,
                 group_top_k: int | None = None, variation: float = 0.0):
        self.loads = loads if isinstance(loads, ExpertLoads) else load_expert_loads(loads)
        e = self.loads.experts
        if not 1 <= top_k <= e:
            raise ValueError(f"top_k must be in 1..{e}, got {top_k}")
        check_group_limit(e, top_k, groups, group_top_k)
        if not (math.isfinite(variation) and variation >= 0):
            raise ValueError(f"variation must be >= 0, got {variation}")
        self.top_k, self.groups, self.group_top_k = top_k, groups, group_top_k
        self.variation = float(variation)

    def log_weights(self, layer: int) -> np.ndarray:
        """The calibrated log-weights of a layer (E,), −inf for experts the file never used."""
        p = self.loads.shares(layer)
        return _calibrated(self.loads.key or (self.loads.path, id(self.loads)), layer,
                           self.top_k, self.groups, self.group_top_k, p.tobytes())

    def _batch_log_weights(self, layer: int, seed: int) -> np.ndarray:
        lw = self.log_weights(layer)
        if self.variation == 0:
            return lw
        z = np.random.default_rng([seed, layer, 1]).standard_normal(lw.size)
        return lw + self.variation * z

    def trace(self, layer: int, tokens: int, seed: int = 0) -> np.ndarray:
        """One batch: (tokens, top_k) int64 expert ids, no repeats per row, group-limited."""
        if tokens < 1:
            raise ValueError(f"tokens must be >= 1, got {tokens}")
        lw = self._batch_log_weights(self.loads.check_layer(layer), seed).astype(np.float32)
        rng = np.random.default_rng([seed, layer, 2])
        out = []
        for start in range(0, tokens, CHUNK_TOKENS):
            n = min(CHUNK_TOKENS, tokens - start)
            out.append(group_limited_top_k(lw + _gumbel(rng, (n, lw.size)), self.top_k,
                                           self.groups, self.group_top_k))
        return np.concatenate(out).astype(np.int64)

    def counts(self, layer: int, tokens: int, seed: int = 0) -> np.ndarray:
        """Tokens routed to each expert (E,) int64 in one batch: exact sampling up to
        EXACT_TOKENS tokens; above, a multinomial of tokens·top_k over the batch's shares (the
        file's shares, times the batch's exp(σ·z) when variation > 0). Cached (read-only):
        studies price one batch under several policies and GPUs."""
        layer = self.loads.check_layer(layer)
        key = (self.loads.key or (self.loads.path, id(self.loads)), layer, tokens, seed,
               self.top_k, self.groups, self.group_top_k, self.variation)
        hit = _COUNTS.get(key)
        if hit is None:
            hit = self._counts(layer, tokens, seed)
            hit.setflags(write=False)
            _COUNTS[key] = hit
            while len(_COUNTS) > COUNTS_CACHE:
                _COUNTS.popitem(last=False)
        else:
            _COUNTS.move_to_end(key)
        return hit

    def _counts(self, layer: int, tokens: int, seed: int) -> np.ndarray:
        if tokens <= EXACT_TOKENS:
            return np.bincount(self.trace(layer, tokens, seed).ravel(),
                               minlength=self.loads.experts)
        p = self.loads.shares(layer)
        if self.variation:
            z = np.random.default_rng([seed, layer, 1]).standard_normal(p.size)
            p = p * np.exp(self.variation * z)
            p = p / p.sum()
        return np.random.default_rng([seed, layer, 3]).multinomial(tokens * self.top_k, p)
