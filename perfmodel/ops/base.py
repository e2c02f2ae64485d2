"""Op base class: typed parameters, strict validation, and the registry of op names.

Each op declares PARAMS (name → Param: type, unit, default, doc). Construction validates every
parameter and reports all problems at once with their key path, so a graph file gets one line per
problem (docs/cli.md "Exit codes"). Subclasses implement `demand(hw)`: they count work and never
compute time, and they read the GPU only through its capacities and declared ISA capabilities.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, ClassVar

from perfmodel.demand import Choice, Demand, KernelCandidates
from perfmodel.errors import InputError, show, where
from perfmodel.hardware import Hardware
from perfmodel.units import DTYPES

REGISTRY: dict[str, type["Op"]] = {}

KINDS = ("int", "float", "bool", "str", "dtype", "choice", "path")

# Upper bounds of sizes: no input is refused for being large but possible, only for being larger
# than any GPU could hold or move, where numbers would overflow or run for hours.
# One tensor on one GPU: 2^40 (1.1e12) elements is over 1 TB even at one byte an element, more
# than any GPU's memory (B300: 288 GB). Every size parameter is at most this, and so is every
# tensor an op declares in TENSORS (the product of its dimensions).
MAX_ELEMENTS = 2**40
ELEMENTS_WHY = "a larger tensor exceeds any GPU's memory"
# Bytes one op moves or copies: 1e15 (1 PB) is 3,000 B300s' memory
MAX_BYTES = 1e15
BYTES_WHY = "1 PB, more than the memory of any GPU or NVLink domain"
# A count or number of any other kind without a bound of its own (Param.__post_init__)
DEFAULT_WHY = "more than one GPU holds or runs in one op"
# GPUs in one group: 2^20, ten times the largest clusters built (~10^5 GPUs)
MAX_GPUS = 2**20
GPUS_WHY = "ten times the largest GPU clusters"
# Seeds: numpy's generators take any integer below 2^63
MAX_SEED = 2**63 - 1


def bound_text(x: float) -> str:
    """A bound as written in messages: 2^40 for a large power of two, else %g."""
    if float(x).is_integer() and x >= 2**20:
        n = int(x)
        if n & (n - 1) == 0:
            return f"2^{n.bit_length() - 1}"
        if (n + 1) & n == 0:
            return f"2^{n.bit_length()} - 1"
    return f"{x:g}"


@dataclass(frozen=True)
class Param:
    kind: str
    required: bool = False
    default: Any = None
    unit: str = ""
    doc: str = ""
    choices: tuple = ()
    lo: float | None = None
    hi: float | None = None
    nullable: bool = False  # None is a meaningful value (e.g. "no window")
    # Why `hi` is the limit, for a size limit (MAX_ELEMENTS, MAX_BYTES): such a bound is named
    # in the message for a value above it (not in `expectation`), and `perfmodel ops` lists the
    # ones other than MAX_ELEMENTS
    hi_why: str = ""

    def __post_init__(self):
        # every number has an upper bound: one not declared is MAX_ELEMENTS (module constants)
        if self.kind in ("int", "float") and self.hi is None:
            object.__setattr__(self, "hi", MAX_ELEMENTS)
            object.__setattr__(self, "hi_why", DEFAULT_WHY)

    def expectation(self) -> str:
        if self.kind == "choice":
            return f"one of {', '.join(map(str, self.choices))}"
        if self.kind == "dtype":
            return f"a dtype ({', '.join(self.choices or DTYPES)})"
        rng = ""
        if self.lo is not None and self.hi is not None and not self.hi_why:
            rng = f" in [{self.lo:g}, {self.hi:g}]"
        elif self.lo is not None:
            rng = f" >= {self.lo:g}"
        return {"int": "an integer", "float": "a number", "bool": "true or false",
                "str": "a string", "path": "a file path"}[self.kind] + rng

    def limit(self) -> str:
        """The size limit and why (empty without one), e.g. `at most 2^40 (a larger ...)`."""
        return f"at most {bound_text(self.hi)} ({self.hi_why})" if self.hi_why else ""

    def problem(self, value: Any) -> str:
        """What is wrong with `value` (which `coerce` refused): the bound it exceeds, else the
        expectation."""
        if self.kind in ("int", "float") and self.hi is not None and _number(value) \
                and value > self.hi:
            kind = "an integer" if self.kind == "int" else "a number"
            why = f" ({self.hi_why})" if self.hi_why else ""
            return f"expected {kind} <= {bound_text(self.hi)}{why}, got {show(value)}"
        return f"expected {self.expectation()}, got {show(value)}"

    def coerce(self, value: Any) -> Any:
        """Return the validated value or raise ValueError (`problem` says why)."""
        if value is None and self.nullable:
            return None
        k = self.kind
        if k == "int":
            ok = isinstance(value, int) and not isinstance(value, bool)
            if not ok and isinstance(value, float) and value.is_integer():
                value, ok = int(value), True
            if not ok:
                raise ValueError
        elif k == "float":
            if not _number(value):
                raise ValueError
            if (self.hi is not None and value > self.hi) or \
                    (self.lo is not None and value < self.lo):  # before float(): 10**400
                raise ValueError
            value = float(value)
        elif k == "bool":
            if not isinstance(value, bool):
                raise ValueError
        elif k in ("str", "path"):
            if not isinstance(value, str) or not value:
                raise ValueError
        elif k == "dtype":
            if not isinstance(value, str) or value.lower() not in (self.choices or DTYPES):
                raise ValueError
            value = value.lower()
        elif k == "choice":
            if isinstance(value, str):
                value = value.lower()
            if value not in self.choices:
                raise ValueError
        if k in ("int", "float"):
            if (self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi):
                raise ValueError
        return value


def _number(value: Any) -> bool:
    """A finite int or float; an int of any size is finite (compared exactly, never converted)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isfinite(value) if isinstance(value, float) else True


def positive(unit: str, doc: str, required: bool = True, default: Any = None,
             hi: float = MAX_ELEMENTS, hi_why: str = ELEMENTS_WHY) -> Param:
    """A size: an integer from 1 to `hi` (default MAX_ELEMENTS)."""
    return Param("int", required=required, default=default, unit=unit, doc=doc, lo=1, hi=hi,
                 hi_why=hi_why)


def byte_count(doc: str, required: bool = True, default: Any = None) -> Param:
    """Bytes an op moves: a number from 1 to MAX_BYTES."""
    return Param("float", required=required, default=default, unit="bytes", doc=doc, lo=1,
                 hi=MAX_BYTES, hi_why=BYTES_WHY)


class Op:
    """One kernel-level operation. Parameters are attributes; `demand(hw)` is the work."""

    name: ClassVar[str] = ""
    PARAMS: ClassVar[dict[str, Param]] = {}
    # parameters that grow the problem: the conformance suite checks time is monotone in them
    SIZE_PARAMS: ClassVar[tuple[str, ...]] = ()
    # a representative instance (Llama-3-class shapes): `perfmodel ops`, tests, benchmarks
    EXAMPLE: ClassVar[dict[str, Any]] = {}
    # the op's tensors as the parameters whose product is each one's element count (each at most
    # MAX_ELEMENTS; e.g. gemm's A is ("batch", "m", "k"))
    TENSORS: ClassVar[tuple[tuple[str, ...], ...]] = ()
    # other names a parameter is accepted under (alias -> parameter): graph files and scripts
    # written before a rename keep working; the op stores and writes the parameter's own name
    ALIASES: ClassVar[dict[str, str]] = {}

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if cls.name:
            REGISTRY[cls.name] = cls

    def __init__(self, _context: str = "", **params: Any):
        problems: list[str] = []
        at = (lambda key: where(None, f"{_context}.{key}" if _context else key))
        for alias, key in self.ALIASES.items():
            if alias in params:
                value = params.pop(alias)
                if key in params:
                    problems.append(f"{at(alias)}: the same parameter as {key} (its other "
                                    f"name); give one of them")
                else:
                    params[key] = value
        for key in params:
            if key not in self.PARAMS:
                problems.append(f"{at(key)}: unknown parameter for op '{self.name}' "
                                f"(expected one of {', '.join(self.PARAMS)})")
        values: dict[str, Any] = {}
        for key, p in self.PARAMS.items():
            if key not in params or (params[key] is None and not p.nullable):
                if p.required:
                    problems.append(f"{at(key)}: missing required parameter of op '{self.name}' "
                                    f"(expected {p.expectation()}"
                                    f"{', unit ' + p.unit if p.unit else ''})")
                values[key] = p.default
                continue
            try:
                values[key] = p.coerce(params[key])
            except ValueError:
                problems.append(f"{at(key)}: {p.problem(params[key])}")
        if not problems:
            problems += [f"{at(k)}: {msg}" for k, msg in self.tensor_problems(values)]
        if not problems:
            problems += [f"{at(k)}: {msg}" for k, msg in self.check(values)]
        if problems:
            raise InputError(problems)
        self.params = values
        for k, v in values.items():
            setattr(self, k, v)

    def check(self, values: dict[str, Any]) -> list[tuple[str, str]]:
        """Cross-parameter checks: (key, message) pairs. Override where needed."""
        return []

    def warnings(self) -> list[tuple[str, str]]:
        """(key, note) for parameters set away from their defaults that change nothing for this
        op as its other parameters stand (the CLI prints them as warnings). Override where
        needed."""
        return []

    def tensor_problems(self, values: dict[str, Any]) -> list[tuple[str, str]]:
        """Tensors of more than MAX_ELEMENTS elements (TENSORS: the parameters whose product is
        one tensor's element count; a parameter left None is not counted)."""
        out = []
        for dims in self.TENSORS:
            sizes = [values[d] for d in dims if values.get(d) is not None]
            n = math.prod(sizes)
            if n > MAX_ELEMENTS:  # named by its largest dimension, the likely culprit
                key = max((d for d in dims if values.get(d) is not None), key=values.get)
                out.append((key, f"{' x '.join(dims)} = {show(n)} elements: expected at "
                                     f"most {bound_text(MAX_ELEMENTS)} in one tensor "
                                     f"(larger than any GPU's memory)"))
        return out

    def demand(self, hw: Hardware) -> Demand | Choice | KernelCandidates:
        """The op's work on `hw`, or the alternatives a library would choose among (the engine
        resolves them, `perfmodel.engine.resolve`)."""
        raise NotImplementedError

    def with_params(self, **changes: Any) -> "Op":
        return type(self)(**{**self.params, **changes})

    def to_dict(self) -> dict[str, Any]:
        """Parameters that differ from defaults, plus `op` (for graph files and reports)."""
        out: dict[str, Any] = {"op": self.name}
        for k, p in self.PARAMS.items():
            v = self.params[k]
            if p.required or v != p.default:
                out[k] = v
        return out

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items() if k != "op")
        return f"{type(self).__name__}({args})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.params == other.params  # type: ignore

    def __hash__(self) -> int:
        h = self.__dict__.get("_hash")  # made once: ops are not changed after construction
        if h is None:
            h = self.__dict__["_hash"] = hash(
                (self.name, tuple(sorted((k, repr(v)) for k, v in self.params.items()))))
        return h

    def cache_key(self) -> int:
        """A small integer naming the op's class and parameter values, the same for equal ops
        (their parameters compared by type and value, -0.0 apart from 0.0, lists by items): the
        key of the prediction caches (perfmodel.schedule.op_entry). Made once per object; ops
        are not changed after construction."""
        key = self.__dict__.get("_cache_key")
        if key is None:
            # repr tells the parameter kinds' values apart exactly (1, 1.0, True, '1'; -0.0 from
            # 0.0; lists by their items), as __hash__ does
            frozen = (type(self), *map(repr, self.params.values()))
            key = _INTERNED.get(frozen)
            if key is None:
                if len(_INTERNED) >= INTERNED_KEYS:
                    _INTERNED.clear()  # ids are never reused: old keys stay unique
                key = _INTERNED[frozen] = next(_NEXT_KEY)
            self.__dict__["_cache_key"] = key
        return key

    def kernel_hardware(self, hw):
        """The GPU as the op's kernel sees it (a GEMM whose rows TMA cannot address runs the
        legacy tensor path: Gemm.kernel_hardware); `hw` itself for every other op. The
        prediction entry points (predict_op, the schedule's op_entry, gemm_batch) price the op
        on it."""
        return hw

    def cache_state(self) -> tuple:
        """Module state besides the parameters that `demand` reads when called (fitted constants
        a calibration may set), as a hashable value: part of the prediction caches' key. An op
        whose demand depends on nothing else returns ()."""
        return ()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_cache_key", None)  # an id of this process's table, meaningless elsewhere
        state.pop("_hash", None)  # str hashes are salted per process
        return state


# Parameter tuples -> cache ids (Op.cache_key); cleared when full, the ids counting on
INTERNED_KEYS = 1 << 16  # a few times the estimate cache (perfmodel.schedule.CACHE_SIZE)
_INTERNED: dict[tuple, int] = {}
_NEXT_KEY = itertools.count(1)


def op(name: str, _context: str = "", **params: Any) -> Op:
    """Build any op from its YAML name (`pm.ops.op("gemm", m=..., ...)`)."""
    cls = REGISTRY.get(str(name).lower())
    if cls is None:
        raise InputError(f"{where(None, _context) if _context else '<op>'}: unknown op "
                         f"'{name}' (expected one of {', '.join(sorted(REGISTRY))})")
    return cls(_context=_context, **params)
