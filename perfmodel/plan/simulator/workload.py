"""The request stream a serving simulation replays: lengths and arrivals, seeded.

Lengths (prompt = input sequence length `isl`, output `osl`, in tokens), each one of:
  an int                 fixed;
  ("uniform", lo, hi)    integers uniform in [lo, hi] (`range_lengths`: the benchmark clients'
                         range ratio);
  ("normal", mean, std)  rounded, clipped to ≥ 1;
or `pairs`, a list of (isl, osl) replayed in order (cycled if `requests` asks for more).
Arrivals (`mode`):
  offline       every request at t = 0: the maximum-throughput test (MLPerf Inference Offline);
  rate          `rate` requests/s: gaps drawn from Gamma(shape = burstiness, scale =
                1 / (rate · burstiness)), first at t = 0 + gap; burstiness 1 (the default) is a
                Poisson process, below 1 burstier, above 1 steadier (vLLM's benchmark_serving
                `get_request`, as InferenceX's client runs it);
  concurrency   `concurrency` requests in flight: the first ones at t = 0, then a new one the
                moment one completes (vLLM's benchmark_serving --max-concurrency with an
                unbounded request rate);
  trace         each request at its given `arrivals` time (with `pairs`): a replayed trace, or
                the decode pool of a disaggregated deployment fed by its prefill pool.
`prefilled`: requests arrive with their prompt's KV cache and their first token (produced by a
disaggregated prefill pool), so a replica only decodes their remaining output.
All draws come from one numpy Generator seeded with `seed`, in a fixed order (isl, osl,
arrivals), so a workload is reproducible.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from perfmodel.errors import InputError

MODES = ("offline", "rate", "concurrency", "trace")
LENGTH_KINDS = ("fixed", "uniform", "normal")
DEFAULT_REQUESTS = 1000


@dataclass(frozen=True)
class Lengths:
    kind: str
    a: float
    b: float = 0.0

    @classmethod
    def parse(cls, value: Any, what: str) -> "Lengths":
        if isinstance(value, Lengths):
            return value
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            if value < 1:
                raise InputError(f"{what}: expected a length ≥ 1, got {value}")
            return cls("fixed", int(value))
        if (isinstance(value, (tuple, list)) and len(value) == 3
                and value[0] in ("uniform", "normal")):
            kind, a, b = value
            if kind == "uniform" and not 1 <= a <= b:
                raise InputError(f"{what}: uniform bounds need 1 ≤ lo ≤ hi, got {a}, {b}")
            if kind == "normal" and (a <= 0 or b < 0):
                raise InputError(f"{what}: normal needs mean > 0 and std ≥ 0, got {a}, {b}")
            return cls(kind, float(a), float(b))
        raise InputError(f"{what}: expected an int, ('uniform', lo, hi) or ('normal', mean, "
                         f"std), got {value!r}")

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        if self.kind == "fixed":
            return np.full(n, int(self.a), dtype=np.int64)
        if self.kind == "uniform":
            return rng.integers(int(self.a), int(self.b) + 1, size=n, dtype=np.int64)
        return np.maximum(1, np.rint(rng.normal(self.a, self.b, size=n))).astype(np.int64)


def range_lengths(length: int, ratio: float | None, what: str) -> Any:
    """A length with a range ratio as InferenceX's and SGLang's benchmark clients draw it:
    integers uniform in [⌊ratio·L⌋, L] (InferenceX utils/bench_serving benchmark_serving.py
    sample_random_requests; SGLang bench_serving: the same with the lower bound at least 1),
    mean (⌊ratio·L⌋ + L) / 2; None or 1: the fixed length L. (vLLM's own `vllm bench serve`
    draws [⌊L(1−r)⌋, ⌈L(1+r)⌉] instead: give those bounds as ("uniform", lo, hi).)"""
    if ratio is None or ratio == 1:
        return length
    if not (isinstance(ratio, (int, float)) and 0 <= ratio <= 1):
        raise InputError(f"{what}: expected a range ratio in [0, 1], got {ratio!r}")
    return ("uniform", max(1, math.floor(ratio * length)), length)


def normal_lengths(mean: int, std: float | None, what: str) -> Any:
    """Lengths drawn from a normal distribution of this mean and standard deviation, rounded
    and clipped to ≥ 1 (`Lengths` "normal"); None: the fixed length `mean`."""
    if std is None:
        return mean
    if not (isinstance(std, (int, float)) and math.isfinite(std) and std > 0):
        raise InputError(f"{what}: expected a standard deviation > 0 in tokens, got {std!r}")
    return ("normal", mean, float(std))


# Columns a lengths file may name each length by: ours, then the names benchmark clients and
# dataset dumps use (vLLM's benchmark_serving `prompt_len`/`output_len`, genai-perf's
# `input_tokens`/`output_tokens`)
LENGTH_COLUMNS = {"isl": ("isl", "prompt_len", "input_tokens", "input_len"),
                  "osl": ("osl", "output_len", "output_tokens")}


def read_length_pairs(path: str, what: str = "--lengths", max_rows: int = 10_000_000
                      ) -> list[tuple[int, int]]:
    """(isl, osl) per request from a CSV file with a header naming an input-length column and
    an output-length column (LENGTH_COLUMNS), one request a row: a dataset's lengths replayed
    in order (`Workload.pairs`). Every problem is an InputError naming the file (and row)."""
    import csv
    try:
        with open(path, newline="") as f:
            reader = csv.reader(f)
            header = [h.strip().lower() for h in next(reader, [])]
            cols = {}
            for key, names in LENGTH_COLUMNS.items():
                found = [header.index(n) for n in names if n in header]
                if not found:
                    raise InputError(f"{what}: {path}: expected a header with an {key} column "
                                     f"(one of {', '.join(names)}), got "
                                     f"{', '.join(header) or 'an empty file'}")
                cols[key] = found[0]
            pairs = []
            for line, row in enumerate(reader, start=2):
                if not any(c.strip() for c in row):
                    continue
                if len(pairs) >= max_rows:
                    raise InputError(f"{what}: {path}: at most {max_rows:,} requests, got more")
                try:
                    pair = tuple(int(row[cols[k]]) for k in ("isl", "osl"))
                except (IndexError, ValueError):
                    raise InputError(f"{what}: {path}: row {line}: expected integer isl and "
                                     f"osl, got {', '.join(row)!r}") from None
                if min(pair) < 1:
                    raise InputError(f"{what}: {path}: row {line}: expected lengths ≥ 1, got "
                                     f"{pair[0]}, {pair[1]}")
                pairs.append(pair)
    except OSError as e:
        raise InputError(f"{what}: cannot read {path}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise InputError(f"{what}: {path}: expected a text CSV file") from None
    if not pairs:
        raise InputError(f"{what}: {path}: no requests (expected a row per request under the "
                         f"header)")
    return pairs


@dataclass(frozen=True)
class Workload:
    """A seeded request stream (see the module docstring)."""

    mode: str = "offline"
    requests: int | None = None
    isl: Any = 1024
    osl: Any = 128
    pairs: Sequence[tuple[int, int]] | None = None
    rate: float | None = None
    concurrency: int | None = None
    seed: int = 0
    arrivals: Sequence[float] | None = None
    prefilled: bool = False
    burstiness: float = 1.0

    def __post_init__(self):
        p = []
        if self.mode not in MODES:
            p.append(f"mode: expected one of {', '.join(MODES)}, got {self.mode!r}")
        if self.mode == "rate" and not (self.rate and self.rate > 0):
            p.append(f"rate: mode 'rate' needs a positive rate in requests/s, got {self.rate!r}")
        if not (isinstance(self.burstiness, (int, float)) and 0 < self.burstiness < math.inf):
            p.append(f"burstiness: expected a positive number (1: Poisson), got "
                     f"{self.burstiness!r}")
        if self.mode == "concurrency" and not (isinstance(self.concurrency, int)
                                               and self.concurrency >= 1):
            p.append(f"concurrency: mode 'concurrency' needs a positive integer, got "
                     f"{self.concurrency!r}")
        if self.requests is not None and (not isinstance(self.requests, int)
                                          or self.requests < 1):
            p.append(f"requests: expected a positive integer, got {self.requests!r}")
        if self.pairs is not None:
            if not len(self.pairs) or any(len(x) != 2 or min(x) < 1 for x in self.pairs):
                p.append("pairs: expected a non-empty list of (isl, osl) with lengths ≥ 1")
        if self.mode == "trace":
            a = self.arrivals
            if self.pairs is None or a is None or len(a) != len(self.pairs):
                p.append("arrivals: mode 'trace' needs `pairs` and one arrival time per pair")
            elif any(not (isinstance(t, (int, float)) and math.isfinite(t) and t >= 0)
                     for t in a):
                p.append("arrivals: expected finite times ≥ 0 in seconds")
        if p:
            raise InputError([f"workload: {x}" for x in p])
        if self.pairs is None:
            Lengths.parse(self.isl, "workload: isl")
            Lengths.parse(self.osl, "workload: osl")

    @property
    def n(self) -> int:
        if self.requests is not None:
            return self.requests
        return len(self.pairs) if self.pairs is not None else DEFAULT_REQUESTS

    def draw(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(isl, osl, arrival_s) per request; arrival_s is None in concurrency mode (the
        simulator releases requests as others complete)."""
        rng = np.random.default_rng(self.seed)
        n = self.n
        if self.pairs is not None:
            arr = np.asarray(self.pairs, dtype=np.int64)
            idx = np.arange(n) % len(arr)
            isl, osl = arr[idx, 0], arr[idx, 1]
        else:
            isl = Lengths.parse(self.isl, "isl").draw(n, rng)
            osl = Lengths.parse(self.osl, "osl").draw(n, rng)
        if self.mode == "trace":
            arrivals = np.asarray(self.arrivals, dtype=float)[np.arange(n) % len(self.pairs)]
        elif self.mode == "offline":
            arrivals = np.zeros(n)
        elif self.mode == "rate" and self.burstiness == 1.0:
            arrivals = np.cumsum(rng.exponential(1.0 / self.rate, size=n))
        elif self.mode == "rate":
            k = float(self.burstiness)
            arrivals = np.cumsum(rng.gamma(k, 1.0 / (self.rate * k), size=n))
        else:
            arrivals = None
        return isl, osl, arrivals

    def to_dict(self) -> dict[str, Any]:
        d = {"mode": self.mode, "requests": self.n, "seed": self.seed}
        if self.pairs is not None:
            d["pairs"] = len(self.pairs)
        else:
            d["isl"], d["osl"] = _length_dict(self.isl), _length_dict(self.osl)
        if self.mode == "rate":
            d["rate"] = self.rate
            if self.burstiness != 1.0:
                d["burstiness"] = self.burstiness
        if self.mode == "concurrency":
            d["concurrency"] = self.concurrency
        if self.prefilled:
            d["prefilled"] = True
        return d


def _length_dict(value: Any) -> Any:
    v = Lengths.parse(value, "length")
    return int(v.a) if v.kind == "fixed" else [v.kind, v.a, v.b]
