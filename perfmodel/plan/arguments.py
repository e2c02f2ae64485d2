"""The Python planners' arguments, checked once at each public entry (`check_arguments`), with
the messages the CLI gives for its flags: one InputError line per problem naming the parameter,
the value and what was expected (`prompt: expected a positive integer, got '8'`).

Without it a wrong type or value reached arithmetic deep inside a planner: `prompt='8'` a
TypeError, `output=0` a ZeroDivisionError, `prompt=inf` or `output=10**400` an OverflowError,
`batches=[2**40]` a MemoryError, `batches=[-1]` a negative throughput returned as a result.

Each parameter name means the same thing in every planner, so one table (PARAMETERS) declares
its check; a parameter whose default is None in the planner's signature may also be None
("searched" or "not set"). Only each value on its own is checked here: combinations (tp must
divide the heads, a layout that does not fit) stay with the code that knows them. The bounds
are the CLI's (perfmodel/cli/plan.py `_resolve`, perfmodel.ops.base): GPUs and processes at
most MAX_GPUS, tokens, sequences and requests at most MAX_ELEMENTS.
"""
from __future__ import annotations

import functools
import inspect
import math
import numbers
import os
from typing import Any, Callable, Iterator

from perfmodel.errors import InputError, show
from perfmodel.ops.base import ELEMENTS_WHY, GPUS_WHY, MAX_ELEMENTS, MAX_GPUS, bound_text

# A decode batch (plan_serving's `batches`): a serving engine holds thousands of sequences at
# most, and a batch is priced with its refill chunks listed (batch / output of them)
MAX_BATCH = 2**20
BATCH_WHY = "more sequences than a serving engine batches in one step"
# Concurrencies of search_serving's `sweep`: each point simulates 4x its requests
MAX_CONCURRENCY = 2**20
CONCURRENCY_WHY = "more requests in flight than one replica's schedulers hold"


def _integer(lo: int, hi: int, why: str) -> Callable[[Any], str]:
    def check(v: Any) -> str:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < lo:
            kind = "a positive integer" if lo == 1 else f"an integer >= {lo}"
            return f"expected {kind}, got {show(v)}"
        if v > hi:
            return f"expected an integer <= {bound_text(hi)} ({why}), got {show(v)}"
        return ""
    return check


def _real(v: Any) -> float | None:
    """`v` as a finite float, or None (not a number, a bool, NaN, ±inf, or 10**400)."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        return None
    try:
        f = float(v)
    except (OverflowError, ValueError, TypeError):
        return None
    return f if math.isfinite(f) else None


def _duration(v: Any) -> str:
    f = _real(v)
    return "" if f is not None and f > 0 else \
        f"expected a positive duration in seconds, got {show(v)}"


def _fraction(what: str) -> Callable[[Any], str]:
    def check(v: Any) -> str:
        f = _real(v)
        return "" if f is not None and 0 < f <= 1 else \
            f"expected a number in (0, 1] ({what}), got {show(v)}"
    return check


def _number_in(lo: float, hi: float, what: str) -> Callable[[Any], str]:
    def check(v: Any) -> str:
        f = _real(v)
        return "" if f is not None and lo <= f <= hi else \
            f"expected {what} in [{lo:g}, {hi:g}], got {show(v)}"
    return check


def _capacity_factor(v: Any) -> str:
    """An expert capacity factor: a number in (0, builder.MAX_CAPACITY_FACTOR]
    (Workload.moe_capacity_factor)."""
    from perfmodel.workloads.builder import MAX_CAPACITY_FACTOR
    f = _real(v)
    return "" if f is not None and 0 < f <= MAX_CAPACITY_FACTOR else \
        f"expected an expert capacity factor in (0, {MAX_CAPACITY_FACTOR:g}], got {show(v)}"


def _choice(choices: Callable[[], tuple]) -> Callable[[Any], str]:
    """One of `choices()` (a function: the vocabularies live in modules imported lazily)."""
    def check(v: Any) -> str:
        options = choices()
        if not isinstance(v, (str, numbers.Integral)) or isinstance(v, bool) \
                or v not in options:
            return f"expected one of {', '.join(map(str, options))}, got {show(v)}"
        return ""
    return check


def _flag(v: Any) -> str:
    return "" if isinstance(v, bool) else f"expected true or false (a bool), got {show(v)}"


def _text(what: str, path: bool = False) -> Callable[[Any], str]:
    """A non-empty string (`path`: or an os.PathLike)."""
    def check(v: Any) -> str:
        ok = isinstance(v, (str, os.PathLike) if path else str) and str(v)
        return "" if ok else f"expected {what}, got {show(v)}"
    return check


def _sizes(hi: int, why: str, what: str) -> Callable[[Any], str]:
    """A non-empty collection (list, tuple, set, range; not a one-shot iterator, which the
    check would use up) of positive integers at most `hi`."""
    one = _integer(1, hi, why)

    def check(v: Any) -> str:
        if isinstance(v, (str, bytes, dict, Iterator)) or not hasattr(v, "__iter__") \
                or not hasattr(v, "__len__") or not len(v):
            return f"expected a non-empty list of {what}, got {show(v)}"
        for x in v:
            if one(x):
                return f"{one(x)} (in {show(v)})"
        return ""
    return check


def _sweep(v: Any) -> str:
    if isinstance(v, bool):
        return ""
    return _sizes(MAX_CONCURRENCY, CONCURRENCY_WHY, "concurrencies")(v)


def _of_type(module: str, name: str, what: str, also: tuple = ()) -> Callable[[Any], str]:
    def check(v: Any) -> str:
        import importlib
        cls = getattr(importlib.import_module(module), name)
        return "" if isinstance(v, (cls, *also)) and (not isinstance(v, str) or v) else \
            f"expected {what}, got {show(v)}"
    return check


def _serving_workload(v: Any) -> str:
    from perfmodel.plan.simulator import Workload
    if not isinstance(v, Workload):
        return f"expected a perfmodel.plan.simulator.Workload, got {show(v)}"
    if v.mode == "trace":  # its arrival times are one stream; a search splits traffic
        return ("mode 'trace' replays fixed arrival times, which a search cannot split over "
                "replicas; give offline, rate or concurrency (or simulate the trace with "
                "perfmodel.plan.simulator.simulate)")
    return ""


def _vocab(module: str, name: str, extra: tuple = ()) -> Callable[[], tuple]:
    def choices() -> tuple:
        import importlib
        v = getattr(importlib.import_module(module), name)
        return tuple(v) + extra
    return choices


_SIZE = _integer(1, MAX_ELEMENTS, ELEMENTS_WHY)
_GPUS = _integer(1, MAX_GPUS, GPUS_WHY)

# parameter name → its check (module docstring)
PARAMETERS: dict[str, Callable[[Any], str]] = {
    **{k: _SIZE for k in ("batch", "seq", "prompt", "output", "global_batch", "micro_batch",
                          "microbatches", "top")},
    **{k: _GPUS for k in ("gpus", "tp", "pp", "ep", "dp", "cp", "jobs", "virtual_stages",
                          "vp")},
    "batches": _sizes(MAX_BATCH, BATCH_WHY, "positive batch sizes"),
    "sweep": _sweep,
    "tpot_slo_s": _duration, "ttft_slo_s": _duration,
    "kv_occupancy": _fraction("a share of the worst-case KV cache"),
    "sm_clock_fraction": _fraction("a share of the sustained SM clock"),
    "moe_replication": _number_in(1.0, 8.0, "expert slots per expert"),
    "moe_capacity_factor": _capacity_factor,
    "zero": _choice(_vocab("perfmodel.plan.memory", "ZERO_STAGES")),
    "dtype": _choice(_vocab("perfmodel.units", "GEMM_DTYPES")),
    "kv_dtype": _choice(_vocab("perfmodel.plan.simulator.kv", "KV_DTYPES")),
    "level": _choice(_vocab("perfmodel.engine", "LEVELS")),
    "engine": _choice(lambda: _vocab("perfmodel.plan.simulator.engines", "ENGINES")()
                      + tuple(_vocab("perfmodel.plan.simulator.engines", "ALIASES")())),
    "framework": _choice(_vocab("perfmodel.plan.frameworks", "FRAMEWORKS")),
    "recompute": _choice(_vocab("perfmodel.workloads.builder", "RECOMPUTE")),
    "grad_reduce_dtype": _choice(lambda: ("bf16", "fp32")),
    "attention_kernel": _choice(_vocab("perfmodel.ops.attention.op", "KERNELS")),
    "pipeline_schedule": _choice(_vocab("perfmodel.plan.training", "PIPELINE_SCHEDULES")),
    "moe_dispatcher": _choice(_vocab("perfmodel.plan.training", "MOE_DISPATCHERS")),
    "pipeline_split": _text("a pipeline split (auto, even, account, F,L or a layout)"),
    "moe_loads": _text("an expert-loads file (a path or a shipped name)", path=True),
    **{k: _flag for k in ("progress", "allow_oversubscribed", "overlap", "ep_overlap")},
    "workload": _serving_workload,
    "model": _of_type("perfmodel.workloads.models", "ModelSpec",
                      "a model name, model file path or ModelSpec", (str, os.PathLike)),
    "hw": _of_type("perfmodel.hardware", "Hardware",
                   "a GPU name, spec file path or Hardware", (str, os.PathLike)),
}


@functools.lru_cache(maxsize=64)
def _optional(fn: Callable) -> frozenset[str]:
    """The parameters of `fn` whose default is None (they may be None)."""
    return frozenset(n for n, p in inspect.signature(fn).parameters.items()
                     if p.default is None)


def check_arguments(fn: Callable, values: dict[str, Any]) -> None:
    """Check the arguments of planner `fn` (its `locals()` at entry) against PARAMETERS; raise
    one InputError with every problem, each line naming the parameter."""
    optional = _optional(fn)
    problems = []
    for name, v in values.items():
        check = PARAMETERS.get(name)
        if check is None or (v is None and name in optional):
            continue
        problem = check(v)
        if problem:
            problems.append(f"{name}: {problem}")
    if problems:
        raise InputError(problems)
