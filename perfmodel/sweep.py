"""Design-space sweeps: a space file (docs/cli.md "sweep") → one row per point.

A space is a list of grids. An op grid crosses the values of an op's parameters and GPUs; a model
grid crosses models, GPUs, phases and the workload (batch, lengths, parallelism, dtypes). Each
grid is the cartesian product of its keys' values (a scalar is one value), the last key varying
fastest, and the space is its grids one after another, so point i of the space is found by index
arithmetic (`Space.point`): a chunk of points is two integers, which is what lets a Dask cluster
(`dask_chunks`) evaluate a space of millions of points without the points ever being listed.

Every key a grid names becomes a column; the outputs follow (OUTPUT_COLUMNS). A point the model
refuses as a combination (a TP degree that does not divide the heads, FP8 on a GPU without it, a
tensor too large) is a row with `error` set and no time: a grid's product is expected to hold
some. A value wrong on its own (an unknown GPU, model, op or parameter, a negative size, a
misspelt key) is an InputError naming the file and key path before anything runs.
"""
from __future__ import annotations

import bisect
import inspect
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from perfmodel import yamlio
from perfmodel.engine import LEVELS
from perfmodel.errors import InputError, show, where
from perfmodel.hardware import Hardware, hardware
from perfmodel.ops import REGISTRY
from perfmodel.ops.base import ELEMENTS_WHY, GPUS_WHY, MAX_ELEMENTS, MAX_GPUS, bound_text
from perfmodel.predict import prefetch_gemms, predict, predict_op
from perfmodel.workloads.builder import KV_DTYPES, PHASES, RECOMPUTE, Workload, build_graph
from perfmodel.workloads.models import ModelSpec, load_model
from perfmodel.units import GEMM_DTYPES

TOP_KEYS = ("grids", "level", "description")
# Model-grid keys besides model, hw and phase: the Workload fields, and isl/osl/gpus
MODEL_INT_KEYS = ("batch", "seq", "context", "isl", "osl", "tp", "ep", "pp", "dp", "gpus",
                  "microbatches", "virtual_stages")
# their upper bounds, the builder's (Workload.problems): GPUs at most MAX_GPUS, sizes at most
# MAX_ELEMENTS; a larger value is wrong on its own, not as a combination
MODEL_INT_BOUNDS = {k: (MAX_GPUS, GPUS_WHY) if k in ("tp", "ep", "pp", "dp", "gpus",
                                                      "virtual_stages")
                    else (MAX_ELEMENTS, ELEMENTS_WHY) for k in MODEL_INT_KEYS}
MODEL_CHOICE_KEYS = {"dtype": GEMM_DTYPES, "kv_dtype": KV_DTYPES, "recompute": RECOMPUTE,
                     "phase": PHASES}
MODEL_KEYS = ("model", "hw", "phase", *MODEL_INT_KEYS, "dtype", "kv_dtype", "recompute")
# A single axis of more values than this is a typo (a range step of 1 over 1e12), not a sweep
MAX_AXIS_VALUES = 10_000_000
DEFAULT_CHUNK = 1000  # points per chunk: one write, one progress step, one Dask task

# Outputs of every row, after the point's own columns. Op rows: the op's Estimate. Model rows:
# one GPU's step (the schedule's makespan), its op time by bound (the largest names `bound`),
# its FLOP and HBM bytes summed over the step's ops, tokens per second over all the point's
# GPUs, and the memory one GPU needs against its HBM (perfmodel.plan.memory).
OUTPUT_COLUMNS = ("time_s", "bound", "roofline_time_s", "flop", "hbm_bytes", "tokens_per_s",
                  "replicas", "memory_bytes", "fits", "error")
OUTPUT_TYPES = {"time_s": float, "bound": str, "roofline_time_s": float, "flop": float,
                "hbm_bytes": float, "tokens_per_s": float, "replicas": int,
                "memory_bytes": float, "fits": bool, "error": str}
LEAD_COLUMNS = ("point", "grid", "kind")


@dataclass(frozen=True)
class Grid:
    """One grid of a space: its kind (`op` or `model`), keys in file order, each key's values
    (one for a fixed key) and where its points start in the space."""

    index: int
    kind: str
    keys: tuple[str, ...]
    values: tuple[tuple, ...]
    start: int
    size: int


@dataclass(frozen=True)
class Space:
    """A parsed space file: its grids, the level, the input columns (every grid's keys, in order
    of first appearance) and the GPUs and models its values name, resolved."""

    file: str
    level: str
    grids: tuple[Grid, ...]
    columns: tuple[str, ...]
    hardware: Mapping[str, Hardware]
    models: Mapping[str, ModelSpec]

    @property
    def size(self) -> int:
        return sum(g.size for g in self.grids)

    @property
    def header(self) -> tuple[str, ...]:
        return (*LEAD_COLUMNS, *self.columns, *OUTPUT_COLUMNS)

    def point(self, i: int) -> tuple[Grid, dict[str, Any]]:
        """The grid of point `i` and its value of each of the grid's keys."""
        if not 0 <= i < self.size:
            raise IndexError(f"point {i} outside the space's {self.size}")
        for g in self.grids:
            if i < g.start + g.size:
                j, out = i - g.start, {}
                for key, vals in zip(reversed(g.keys), reversed(g.values)):
                    j, r = divmod(j, len(vals))
                    out[key] = vals[r]
                return g, {k: out[k] for k in g.keys}
        raise AssertionError("unreachable")

    def column_types(self) -> dict[str, type]:
        """One type per column (the Parquet schema): a column's values over every grid, all
        bool, all int, all numbers (float) or else text."""
        seen: dict[str, set] = {c: set() for c in self.columns}
        for g in self.grids:
            for key, vals in zip(g.keys, g.values):
                if key in ("hw", "model"):
                    seen[key].add(str)  # written by canonical name
                    continue
                if isinstance(vals, range):  # an integer range axis (_axis): ints only
                    seen[key].add(int)
                    continue
                seen[key].update(type(v) for v in vals if v is not None)
        types: dict[str, type] = {"point": int, "grid": int, "kind": str}
        for c, ts in seen.items():
            types[c] = (bool if ts == {bool} else int if ts == {int}
                        else float if ts and ts <= {int, float} else str)
        return {**types, **OUTPUT_TYPES}


# ---- reading a space ------------------------------------------------------------------------
def load_space(path: str | Path) -> Space:
    """Read and check a space file (docs/cli.md "sweep"); InputError naming file and key path."""
    return parse_space(yamlio.load(path, "space file"), str(path))


def _axis(value: Any, file: str, at: str) -> Sequence:
    """A key's values: a scalar (one value), a list, or {range: [start, stop, step]} /
    {geometric: [start, stop, factor]} (stop included when reached). A range of integers is a
    Python `range` (start + i·step computed when read, never listed: a space's size and its
    checks cost the same at 10 values or 10 million); the others are tuples."""
    if isinstance(value, list):
        if not value:
            raise InputError(f"{where(file, at)}: empty list (expected at least one value)")
        for i, v in enumerate(value):
            if isinstance(v, (list, dict)):
                raise InputError(f"{where(file, f'{at}[{i}]')}: expected a scalar value, got "
                                 f"{type(v).__name__}")
        return tuple(value)
    if isinstance(value, dict):
        if len(value) != 1 or next(iter(value)) not in ("range", "geometric"):
            raise InputError(f"{where(file, at)}: expected a value, a list of values, "
                             f"{{range: [start, stop, step]}} or {{geometric: [start, stop, "
                             f"factor]}}, got keys {', '.join(map(str, value)) or 'none'}")
        form, args = next(iter(value.items()))
        at = f"{at}.{form}"
        if (not isinstance(args, list) or len(args) != 3
                or not all(isinstance(a, (int, float)) and not isinstance(a, bool)
                           and abs(a) <= 1e300 for a in args)):  # finite, and nan fails
            raise InputError(f"{where(file, at)}: expected three numbers [start, stop, "
                             f"{'step' if form == 'range' else 'factor'}] of magnitude at most "
                             f"1e300, got {show(args)}")
        start, stop, step = args
        if form == "range":
            if step <= 0 or stop < start:
                raise InputError(f"{where(file, at)}: expected step > 0 and stop >= start, got "
                                 f"{show(args)}")
            count = lambda: int((stop - start) // step) + 1  # noqa: E731
        else:
            if start <= 0 or step <= 1 or stop < start:
                raise InputError(f"{where(file, at)}: expected start > 0, factor > 1 and stop "
                                 f">= start, got {show(args)}")
            count = lambda: int(math.floor(math.log(stop / start, step) + 1e-9)) + 1  # noqa
        try:
            n = count()
        except (OverflowError, ValueError):  # (1e300 - -1e300) // 1e-300: as many as that
            n = MAX_AXIS_VALUES + 1
        if n > MAX_AXIS_VALUES:
            raise InputError(f"{where(file, at)}: {n} values; expected at most "
                             f"{MAX_AXIS_VALUES:,} on one key")
        if form == "range":
            if type(start) is int and type(step) is int:
                return range(start, start + n * step, step)
            return tuple(start + i * step for i in range(n))
        out, v = [], start
        for _ in range(n):  # by repeated products: integer start and factor stay integers
            out.append(v)
            v = v * step
        return tuple(x for x in out if x <= stop)
    return (value,)


def _first_refused(vals: Sequence, refused: Callable[[Any], bool],
                   bounds: tuple | None = None) -> int | None:
    """The index of the first of `vals` that `refused` refuses, or None. `bounds` (lo, hi,
    either None): `refused` refuses an integer exactly when it is below lo or above hi, so an
    integer range (`_axis`), whose values increase, is searched by its ends (the refused values
    are a prefix and a suffix) rather than value by value."""
    if bounds is not None and isinstance(vals, range):
        lo, hi = bounds
        if not vals:
            return None
        if lo is not None and vals[0] < lo:
            return 0
        if hi is not None and vals[-1] > hi:
            return bisect.bisect_right(vals, hi)
        return None
    for i, v in enumerate(vals):
        if refused(v):
            return i
    return None


def _int_bounds(p) -> tuple | None:
    """(lo, hi) of a Param that refuses an integer exactly outside them (`_first_refused`): an
    integer parameter, or a number whose bounds are exact doubles (it compares the integer,
    then its double, with them), else None."""
    if p.kind == "int" or (p.kind == "float" and all(b is None or float(b) == b
                                                       for b in (p.lo, p.hi))):
        return p.lo, p.hi
    return None


def _coerce_refuses(p) -> Callable[[Any], bool]:
    """Whether Param `p` refuses a value."""
    def refused(v: Any) -> bool:
        try:
            p.coerce(v)
        except ValueError:
            return True
        return False
    return refused


def _check_op_values(name: str, keys: list[str], values: list[tuple], file: str, at: str
                     ) -> list[str]:
    cls = REGISTRY[name]
    problems = []
    for key, vals in zip(keys, values):
        if key in ("op", "hw"):
            continue
        p = cls.PARAMS.get(key)
        if p is None:
            problems.append(f"{where(file, f'{at}.{key}')}: unknown parameter of op '{name}' "
                            f"(expected one of {', '.join(cls.PARAMS)})")
            continue
        i = _first_refused(vals, _coerce_refuses(p), _int_bounds(p))
        if i is not None:
            idx = f"[{i}]" if len(vals) > 1 else ""
            problems.append(f"{where(file, f'{at}.{key}{idx}')}: {p.problem(vals[i])}")
    missing = [k for k, p in cls.PARAMS.items() if p.required and k not in keys]
    if missing:
        problems.append(f"{where(file, at)}: op '{name}' needs {', '.join(missing)}")
    return problems


def _check_model_values(keys: list[str], values: list[tuple], file: str, at: str) -> list[str]:
    problems = []
    for key, vals in zip(keys, values):
        if key not in MODEL_KEYS:
            problems.append(f"{where(file, f'{at}.{key}')}: unknown key of a model grid "
                            f"(expected one of {', '.join(MODEL_KEYS)})")
            continue
        items: Any = enumerate(vals)
        if key in MODEL_INT_KEYS and isinstance(vals, range):  # refused outside [1, bound]
            first = _first_refused(vals, bool, (1, MODEL_INT_BOUNDS[key][0]))
            items = () if first is None else ((first, vals[first]),)
        for i, v in items:
            bad = None
            if key in MODEL_INT_KEYS:
                hi, why = MODEL_INT_BOUNDS[key]
                if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                    bad = "expected a positive integer"
                elif v > hi:
                    bad = f"expected an integer <= {bound_text(hi)} ({why})"
            elif key in MODEL_CHOICE_KEYS:
                if key == "kv_dtype" and v is None:
                    continue
                if not isinstance(v, str) or v not in MODEL_CHOICE_KEYS[key]:
                    bad = f"expected one of {', '.join(MODEL_CHOICE_KEYS[key])}"
            if bad:
                idx = f"[{i}]" if len(vals) > 1 else ""
                problems.append(f"{where(file, f'{at}.{key}{idx}')}: {bad}, got {show(v)}")
                break
    given = set(keys)
    for need in ("hw", "phase"):
        if need not in given:
            problems.append(f"{where(file, at)}: a model grid needs `{need}`")
    for a, b in (("seq", "isl"), ("context", "isl"), ("dp", "gpus")):
        if a in given and b in given:
            problems.append(f"{where(file, f'{at}.{b}')}: give `{a}` or `{b}`, not both")
    if "osl" in given and "isl" not in given:
        problems.append(f"{where(file, f'{at}.osl')}: `osl` needs `isl` (the prompt length)")
    return problems



def _load_names(names, key: str, expected: str, load, loaded: dict, base, file, at) -> list[str]:
    """Load each of a grid's `key` values (a built-in name, or a YAML file relative to the
    space file) into `loaded` once; one problem line per value that is not a string or does
    not load."""
    problems = []
    for i, name in enumerate(names):
        here = where(file, f"{at}.{key}" + (f"[{i}]" if len(names) > 1 else ""))
        if not isinstance(name, str):
            problems.append(f"{here}: expected {expected}, got {show(name)}")
        elif name not in loaded:
            path = base / name if name.endswith((".yaml", ".yml")) else name
            try:
                loaded[name] = load(path)
            except InputError as e:
                problems += [f"{here}: {p}" for p in e.problems]
    return problems

def parse_space(raw: Any, file: str = "<space>") -> Space:
    """Check a space's parsed YAML and resolve the GPUs and models it names."""
    if not isinstance(raw, dict):
        raise InputError(f"{file}: expected a mapping with `grids:` at the top level")
    problems = [f"{where(file, str(k))}: unknown key (expected one of {', '.join(TOP_KEYS)})"
                for k in raw if k not in TOP_KEYS]
    level = raw.get("level", "pipes")
    if level not in LEVELS:
        problems.append(f"{where(file, 'level')}: expected one of {', '.join(LEVELS)}, got "
                        f"{show(level)}")
    grids_raw = raw.get("grids")
    if not isinstance(grids_raw, list) or not grids_raw:
        problems.append(f"{where(file, 'grids')}: expected a non-empty list of grids")
        raise InputError(problems)
    base = Path(file).parent
    hw_by_name: dict[str, Hardware] = {}
    models: dict[str, ModelSpec] = {}
    grids, columns, start = [], {}, 0
    for gi, graw in enumerate(grids_raw):
        at = f"grids[{gi}]"
        if not isinstance(graw, dict) or not graw:
            problems.append(f"{where(file, at)}: expected a mapping of keys to values")
            continue
        kinds = [k for k in ("op", "model") if k in graw]
        if len(kinds) != 1:
            problems.append(f"{where(file, at)}: expected exactly one of `op` (an op grid) or "
                            f"`model` (a model grid)")
            continue
        kind = kinds[0]
        keys, values, bad = [], [], False
        for key, value in graw.items():
            key = str(key)
            try:
                vals = _axis(value, file, f"{at}.{key}")
            except InputError as e:
                problems += e.problems
                bad = True
                continue
            keys.append(key)
            values.append(vals)
        if bad:
            continue
        vals_of = dict(zip(keys, values))
        if kind == "op":
            names = vals_of["op"]
            if len(names) != 1 or not isinstance(names[0], str):
                problems.append(f"{where(file, f'{at}.op')}: expected one op name per grid "
                                f"(its parameters differ from other ops'), got {show(names)}")
                continue
            name = names[0].lower()
            if name not in REGISTRY:
                problems.append(f"{where(file, f'{at}.op')}: unknown op '{names[0]}' (expected "
                                f"one of {', '.join(sorted(REGISTRY))})")
                continue
            values[keys.index("op")] = (name,)
            if "hw" not in vals_of:
                problems.append(f"{where(file, at)}: an op grid needs `hw`")
            found = _check_op_values(name, keys, values, file, at)
        else:
            found = _check_model_values(keys, values, file, at)
        if found:
            problems += found
            continue
        problems += _load_names(vals_of.get("hw", ()), "hw", "a GPU name or spec path",
                                hardware, hw_by_name, base, file, at)
        problems += _load_names(vals_of.get("model", ()), "model", "a model name or file",
                                load_model, models, base, file, at)
        size = math.prod(len(v) for v in values)
        grids.append(Grid(gi, kind, tuple(keys), tuple(values), start, size))
        start += size
        for k in keys:
            columns.setdefault(k, None)
    if problems:
        raise InputError(problems)
    return Space(file, level, tuple(grids), tuple(columns), hw_by_name, models)


# ---- evaluating points ----------------------------------------------------------------------
def _op_of(values: dict[str, Any]):
    """The op of an op point (InputError where its parameters are refused)."""
    return REGISTRY[values["op"]](**{k: v for k, v in values.items() if k not in ("op", "hw")})


def _op_outputs(space: Space, values: dict[str, Any], op=None) -> dict[str, Any]:
    hw = space.hardware[values["hw"]]
    est = predict_op(op if op is not None else _op_of(values), hw, space.level)
    return {"time_s": est.time_s, "bound": est.bound, "roofline_time_s": est.roofline_time_s,
            "flop": est.flop, "hbm_bytes": est.hbm_bytes}


def workload_of(values: Mapping[str, Any]) -> tuple[Workload, int]:
    """The Workload of a model point and its data-parallel replicas (docs/cli.md "sweep"):
    isl sets the prompt (prefill) or training sequence; a decode step with isl and osl runs at
    context isl + osl // 2, the middle output token's KV length (attention grows linearly in it,
    so that step is the mean step of the osl); gpus sets dp (train) or the serving replicas as
    gpus / (tp · pp)."""
    v = dict(values)
    phase = v["phase"]
    tp, pp = v.get("tp", 1), v.get("pp", 1)
    replicas = v.get("dp", 1)
    if "gpus" in v:
        if v["gpus"] % (tp * pp):
            raise InputError(f"gpus {v['gpus']} is not a multiple of tp x pp = {tp * pp}")
        replicas = v["gpus"] // (tp * pp)
    fields: dict[str, Any] = {k: v[k] for k in ("batch", "seq", "context", "tp", "ep", "pp",
                                                "dtype", "kv_dtype", "microbatches",
                                                "virtual_stages", "recompute") if k in v}
    if "isl" in v:
        if phase == "decode":
            fields["context"] = v["isl"] + v.get("osl", 0) // 2
        else:
            fields["seq"] = v["isl"]
    if phase == "train":
        fields["dp"] = replicas
    return Workload(phase, **fields), replicas


def _model_outputs(space: Space, values: dict[str, Any]) -> dict[str, Any]:
    from perfmodel.plan.memory import memory_fit
    model, hw = space.models[values["model"]], space.hardware[values["hw"]]
    w, replicas = workload_of(values)
    w.check(model)
    # the Workload's fields that build_graph takes (by its signature: a field added to one
    # before the other must not break the sweep)
    args = inspect.signature(build_graph).parameters
    graph = build_graph(model, **{k: getattr(w, k) for k in Workload.__dataclass_fields__
                                  if k in args})
    pred = predict(graph, hw, space.level)
    t = pred.total_time_s
    by_bound = pred.totals_by("bound")
    tokens = w.batch * (1 if w.phase == "decode" else w.seq) * replicas
    fit = memory_fit(model, hw, w)
    return {"time_s": t, "bound": next(iter(by_bound), None),
            "flop": sum(o.estimate.flop for o in pred.ops),
            "hbm_bytes": sum(o.estimate.hbm_bytes for o in pred.ops),
            "tokens_per_s": tokens / t if t > 0 else None, "replicas": replicas,
            "memory_bytes": fit.total_bytes, "fits": fit.fits}


def evaluate(space: Space, start: int, stop: int) -> list[tuple]:
    """The rows of points [start, stop) in `header` order. A point the model refuses as a
    combination (InputError) is a row with `error` and no outputs."""
    points = [(i, *space.point(i)) for i in range(start, min(stop, space.size))]
    # the chunk's op points built first, so that its GEMMs are priced together, a family per
    # GPU in one array pass (predict_ops, perfmodel.batch), before each row reads its own
    ops: dict[int, Any] = {}
    gemms: dict[str, list] = {}
    for i, g, values in points:
        if g.kind == "op":
            try:
                ops[i] = _op_of(values)
            except InputError as e:
                ops[i] = e
                continue
            if values["op"] == "gemm":
                gemms.setdefault(values["hw"], []).append(ops[i])
    for name, batch in gemms.items():
        prefetch_gemms(batch, space.hardware[name], space.level)
    rows = []
    for i, g, values in points:
        try:
            if g.kind != "op":
                out = _model_outputs(space, values)
            elif isinstance(ops[i], InputError):
                raise ops[i]
            else:
                out = _op_outputs(space, values, ops[i])
        except InputError as e:
            out = {"error": "; ".join(e.problems)}
        shown = dict(values)
        if "hw" in shown:  # canonical names, so rows of aliases join
            shown["hw"] = space.hardware[shown["hw"]].name
        if "model" in shown:
            shown["model"] = space.models[shown["model"]].name
        rows.append((i, g.index, g.kind, *(shown.get(c) for c in space.columns),
                     *(out.get(c) for c in OUTPUT_COLUMNS)))
    return rows


def chunks(space: Space, chunk: int = DEFAULT_CHUNK) -> Iterator[list[tuple]]:
    """The space's rows in order, `chunk` points at a time, evaluated in this process."""
    for a in range(0, space.size, chunk):
        yield evaluate(space, a, a + chunk)


def dask_chunks(space: Space, client, chunk: int = DEFAULT_CHUNK) -> Iterator[list[tuple]]:
    """The same rows as `chunks`, in the same order, each chunk a task on a Dask distributed
    cluster (`client`): the space is sent to every worker once and a task is just its point
    range. At most a few tasks per worker thread are outstanding, so results stream to the
    writer and a space of millions of points never sits in memory."""
    from collections import deque
    threads = sum(client.nthreads().values()) or 1
    remote = client.scatter(space, broadcast=True)
    starts = iter(range(0, space.size, chunk))
    pending: deque = deque()

    def submit() -> bool:
        a = next(starts, None)
        if a is None:
            return False
        pending.append(client.submit(evaluate, remote, a, a + chunk, pure=False))
        return True

    while len(pending) < 2 * threads + 1 and submit():
        pass
    while pending:
        rows = pending.popleft().result()
        submit()
        yield rows


def dask_client(address: str, workers: int | None = None):
    """A dask.distributed Client: of a new LocalCluster (`local`, one thread per worker process:
    the predictions are pure Python and hold the GIL), or of the scheduler at `address`."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise InputError("--dask: needs dask.distributed (pip install 'perfmodel[dask]')") \
            from None
    import logging
    if address == "local":
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=logging.ERROR)
        return Client(cluster)
    try:
        return Client(address, timeout=30)
    except (OSError, ValueError, TimeoutError) as e:
        raise InputError(f"--dask {address}: cannot reach the scheduler ({e})") from None


# ---- writing rows ---------------------------------------------------------------------------
def csv_cell(v: Any) -> str:
    """A CSV cell: floats by repr (they read back exactly), booleans as true/false, None empty."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    return str(v)


class CsvSink:
    """Rows to a CSV text stream, a header first."""

    def __init__(self, stream, header: tuple[str, ...]):
        import csv
        self.stream = stream
        self.writer = csv.writer(stream, lineterminator="\n")
        self.writer.writerow(header)

    def write(self, rows: list[tuple]) -> None:
        self.writer.writerows([csv_cell(v) for v in r] for r in rows)
        self.stream.flush()

    def close(self) -> None:
        self.stream.flush()


class ParquetSink:
    """Rows to a Parquet file (pyarrow), one row group per chunk, typed by Space.column_types."""

    def __init__(self, path: str, space: Space):
        import pyarrow as pa
        import pyarrow.parquet as pq
        arrow = {bool: pa.bool_(), int: pa.int64(), float: pa.float64(), str: pa.string()}
        self.types = space.column_types()
        self.header = space.header
        self.pa = pa
        self.schema = pa.schema([(c, arrow[self.types[c]]) for c in self.header])
        self.writer = pq.ParquetWriter(path, self.schema)

    def write(self, rows: list[tuple]) -> None:
        cols = list(zip(*rows)) if rows else [() for _ in self.header]
        arrays = []
        for c, vals in zip(self.header, cols):
            t = self.types[c]
            conv = (lambda v, t=t: None if v is None else (csv_cell(v) if t is str else t(v)))
            arrays.append(self.pa.array([conv(v) for v in vals], type=self.schema.field(c).type))
        self.writer.write_table(self.pa.Table.from_arrays(arrays, schema=self.schema))

    def close(self) -> None:
        self.writer.close()


def has_pyarrow() -> bool:
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return False
    return True


def run(space: Space, sink, source: Iterator[list[tuple]],
        on_chunk: Callable[[int], None] | None = None) -> int:
    """Write every chunk of `source` to `sink` as it arrives; the number of rows written."""
    n = 0
    try:
        for rows in source:
            sink.write(rows)
            n += len(rows)
            if on_chunk is not None:
                on_chunk(len(rows))
    finally:
        sink.close()
    return n
