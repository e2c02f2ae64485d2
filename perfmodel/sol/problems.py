"""SOL-ExecBench problems: a definition.json with its workload.jsonl, or the workloads CSV.

A problem (NVIDIA/SOL-ExecBench, the FlashInfer-Bench definition format it adopts) is a
`definition.json`:

    {"name": "gemm_n128_k2048", "op_type": "gemm", "description": "...",
     "axes": {"M": {"type": "var"},
              "N": {"type": "const", "value": 128},
              "K": {"type": "const", "value": 2048},
              "KB": {"type": "expr", "expression": "K // 128"}},
     "inputs":  {"A": {"shape": ["M", "K"], "dtype": "float16"},
                 "B": {"shape": ["N", "K"], "dtype": "float16"},
                 "alpha": {"shape": null, "dtype": "float32"}},
     "outputs": {"C": {"shape": ["M", "N"], "dtype": "float16"}},
     "reference": "def run(A, B): ..."}

Axes are `const` (a fixed value), `var` (set by each workload) or `expr` (an arithmetic
expression of other axes: + − * / // % ** and parentheses). A shape lists axis names or integers;
`null` is a scalar. Each line of `workload.jsonl` is one workload, `{"uuid": ..., "axes": {...}}`,
or the same wrapped as `{"definition": NAME, "workload": {...}}` (a FlashInfer-Bench trace line);
its `axes` give every `var` axis.

The workloads CSV (perfmodel/sol/data/solexec_workloads.csv.gz, gzip: 3.8 MB of text, from the mirrors named in
perfmodel/sol/data/SOURCES.md) has one row per workload with its axes, every
tensor's resolved shape and dtype, and `T_SOL_ms`, the bound the benchmark publishes (computed by
NVlabs/SOLAR for B200 at 1.5 GHz).

Element sizes follow the tensor's torch dtype. A `float4_e2m1fn_x2` element is one byte: a packed
pair of FP4 values (its shape counts pairs).

Bounds (the declared schema of both inputs, `_size_problem`): every axis value and dimension is
an integer in [0, MAX_ELEMENTS] (perfmodel.ops.base: no GPU holds a larger tensor), every tensor
at most MAX_ELEMENTS elements, an axis expression at most MAX_EXPRESSION characters whose every
intermediate value stays within 2^MAX_EXPRESSION_BITS (`2 ** 2 ** 40` would take forever); the
CSV's T_SOL_ms a finite time in [MIN_T_SOL_MS, MAX_T_SOL_MS] or empty. JSON text (definitions,
workload lines, the CSV's JSON cells) is read by perfmodel.jsonio. A value outside its bounds is
one line naming the file, the key (or line and column) and the expectation.
"""
from __future__ import annotations

import ast
import csv
import io
import math
import operator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from perfmodel import jsonio, yamlio
from perfmodel.errors import InputError, show
from perfmodel.ops.base import ELEMENTS_WHY, MAX_ELEMENTS, bound_text

DEFAULT_CSV = Path(__file__).resolve().parent / "data" / "solexec_workloads.csv.gz"

# torch dtype names → (bytes per element, perfmodel dtype); bytes per element of the tensor as
# stored (a float4_e2m1fn_x2 element is a byte holding two FP4 values)
TORCH_DTYPES: dict[str, tuple[float, str]] = {
    "float64": (8.0, "fp64"), "float32": (4.0, "fp32"), "float16": (2.0, "fp16"),
    "bfloat16": (2.0, "bf16"), "float8_e4m3fn": (1.0, "fp8_e4m3"),
    "float8_e5m2": (1.0, "fp8_e5m2"), "float4_e2m1fn_x2": (1.0, "nvfp4"),
    "int64": (8.0, "int64"), "int32": (4.0, "int32"), "int16": (2.0, "int16"),
    "int8": (1.0, "int8"), "uint8": (1.0, "uint8"), "bool": (1.0, "bool"),
}
FLOAT_DTYPES = ("fp64", "fp32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "nvfp4")
AXIS_TYPES = ("const", "var", "expr")
CSV_COLUMNS = ("problem_id", "subset", "workload_index", "workload_uuid", "model_source",
               "op_kind", "direction", "axes_json", "shapes_dtypes_json", "T_SOL_ms")
# an axis expression ("K // 128", "num_pages * page_size"): a line of arithmetic, not a program
MAX_EXPRESSION = 256
MAX_EXPRESSION_BITS = 128
# the published bounds run from 6e-8 ms to seconds; these bounds keep every ratio finite
MIN_T_SOL_MS, MAX_T_SOL_MS = 1e-12, 1e12
# workload indices: a workload.jsonl line or the CSV's index, far below this
MAX_INDEX = 2**31 - 1


def _size_problem(v: Any) -> str:
    """What is wrong with `v` as an axis value or dimension, or ''."""
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        return f"expected a non-negative integer, got {show(v)}"
    if v > MAX_ELEMENTS:
        return f"expected an integer <= {bound_text(MAX_ELEMENTS)} ({ELEMENTS_WHY}), got {show(v)}"
    return ""


def _numel_problem(dims: tuple[int, ...]) -> str:
    n = math.prod(dims)
    if n > MAX_ELEMENTS:
        return (f"{' x '.join(map(str, dims))} = {show(n)} elements: expected at most "
                f"{bound_text(MAX_ELEMENTS)} in one tensor ({ELEMENTS_WHY})")
    return ""


@dataclass(frozen=True)
class Tensor:
    """One input or output of a workload, shape resolved (None: a scalar)."""

    name: str
    shape: tuple[int, ...] | None
    dtype: str  # the torch name

    @property
    def numel(self) -> int:
        return 1 if self.shape is None else math.prod(self.shape)

    @property
    def element_bytes(self) -> float:
        return TORCH_DTYPES[self.dtype][0]

    @property
    def bytes(self) -> float:
        return self.numel * self.element_bytes

    @property
    def kind(self) -> str:
        """The perfmodel dtype name (fp32, bf16, nvfp4, int64, ...)."""
        return TORCH_DTYPES[self.dtype][1]

    @property
    def is_float(self) -> bool:
        return self.kind in FLOAT_DTYPES

    @property
    def rank(self) -> int:
        return 0 if self.shape is None else len(self.shape)

    @property
    def last(self) -> int:
        return 1 if not self.shape else self.shape[-1]


@dataclass(frozen=True)
class Workload:
    """One workload of a problem: axes and tensors resolved, the published bound if known."""

    problem: str
    index: int
    uuid: str
    axes: Mapping[str, int]
    inputs: Mapping[str, Tensor]
    outputs: Mapping[str, Tensor]
    op_kind: str = ""
    direction: str = ""
    subset: str = ""
    model_source: str = ""
    published_sol_s: float | None = None

    @property
    def tensors(self) -> dict[str, Tensor]:
        return {**self.inputs, **self.outputs}

    @property
    def io_bytes(self) -> float:
        return sum(t.bytes for t in self.tensors.values())

    @property
    def name(self) -> str:
        return f"{self.problem}[{self.index}]"


@dataclass(frozen=True)
class Definition:
    """A problem definition: its axes and tensor specs, unresolved."""

    name: str
    axes: Mapping[str, Mapping[str, Any]]
    inputs: Mapping[str, Mapping[str, Any]]
    outputs: Mapping[str, Mapping[str, Any]]
    op_type: str = ""
    description: str = ""
    file: str = ""
    workloads: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)

    @property
    def var_axes(self) -> list[str]:
        return [a for a, spec in self.axes.items() if spec["type"] == "var"]

    def resolve(self, values: Mapping[str, Any], index: int = 0, uuid: str = "") -> Workload:
        """The workload with `values` for the var axes (extra keys are bad input)."""
        at = f"{self.file or self.name}: workload {uuid or index}"
        problems = [f"{at}.axes.{k}: not a var axis of '{self.name}' (var axes: "
                    f"{', '.join(self.var_axes) or 'none'})" for k in values
                    if k not in self.var_axes]
        axes: dict[str, int] = {}
        for a in self.var_axes:
            v = values.get(a)
            if v is None:
                problems.append(f"{at}.axes.{a}: missing (a var axis needs a value)")
            elif _size_problem(v):
                problems.append(f"{at}.axes.{a}: {_size_problem(v)}")
            else:
                axes[a] = v
        if problems:
            raise InputError(problems)
        for a, spec in self.axes.items():
            if spec["type"] == "const":
                axes[a] = spec["value"]
        pending = {a: spec["expression"] for a, spec in self.axes.items()
                   if spec["type"] == "expr"}
        while pending:
            done = [a for a, e in pending.items() if set(_names(e)) <= set(axes)]
            if not done:
                raise InputError(f"{self.file or self.name}: axes {', '.join(pending)}: "
                                 f"expressions refer to unknown or circular axes")
            for a in done:
                axes[a] = _eval_axis(pending.pop(a), axes, f"{self.file}: axes.{a}")
        inputs = {n: self._tensor(n, s, axes, "inputs") for n, s in self.inputs.items()}
        outputs = {n: self._tensor(n, s, axes, "outputs") for n, s in self.outputs.items()}
        return Workload(self.name, index, uuid, axes, inputs, outputs, op_kind=self.op_type)

    def _tensor(self, name: str, spec: Mapping[str, Any], axes: Mapping[str, int],
                group: str) -> Tensor:
        shape = spec.get("shape")
        if shape is None:
            return Tensor(name, None, spec["dtype"])
        dims = []
        at = f"{self.file or self.name}: {group}.{name}.shape"
        for d in shape:
            if isinstance(d, int):
                dims.append(d)
            else:
                dims.append(_eval_axis(str(d), axes, at))
        if _numel_problem(tuple(dims)):
            raise InputError(f"{at}: {_numel_problem(tuple(dims))}")
        return Tensor(name, tuple(dims), spec["dtype"])

    def workload(self, selector: str | int | None = None) -> Workload:
        """One workload of workload.jsonl: by index (int or digits) or UUID; default the first."""
        if not self.workloads:
            if self.var_axes:
                raise InputError(f"{self.file or self.name}: no workload.jsonl beside it; its "
                                 f"var axes ({', '.join(self.var_axes)}) need values "
                                 f"(--workload)")
            return self.resolve({})
        chosen = None
        if selector is None:
            chosen = 0
        elif isinstance(selector, int) or (str(selector).isascii() and str(selector).isdigit()):
            chosen = int(selector) if len(str(selector)) <= 18 else len(self.workloads)
            if chosen >= len(self.workloads):
                raise InputError(f"--workload: index {show(selector)} out of range ({self.name} has "
                                 f"{len(self.workloads)} workloads, 0..{len(self.workloads) - 1})")
        else:
            hits = [i for i, w in enumerate(self.workloads) if w.get("uuid") == selector]
            if not hits:
                raise InputError(f"--workload: no workload with uuid '{selector}' in "
                                 f"{self.name}'s workload.jsonl")
            chosen = hits[0]
        w = self.workloads[chosen]
        return self.resolve(w.get("axes", {}), chosen, str(w.get("uuid", "")))


# ---- definition.json / workload.jsonl ----------------------------------------------------
def load_definition(path: str | Path, workloads: str | Path | None = None) -> Definition:
    """Read a definition.json (and the workload.jsonl beside it, or `workloads`)."""
    path = Path(path)
    d = parse_definition(jsonio.load(path, "problem definition"), str(path))
    wl = Path(workloads) if workloads else path.with_name("workload.jsonl")
    if workloads or wl.exists():
        d = Definition(d.name, d.axes, d.inputs, d.outputs, d.op_type, d.description, d.file,
                       tuple(read_workloads(wl, d)))
    return d


def parse_definition(raw: Any, file: str = "<definition>") -> Definition:
    """A definition.json's content, validated (every problem reported, one line each)."""
    if not isinstance(raw, dict):
        raise InputError(f"{file}: expected a JSON object with name, axes, inputs, outputs")
    problems: list[str] = []
    for key in ("name", "axes", "inputs", "outputs"):
        if key not in raw:
            problems.append(f"{file}: {key}: missing required key")
    if problems:
        raise InputError(problems)
    if not isinstance(raw["name"], str) or not raw["name"]:
        problems.append(f"{file}: name: expected a non-empty string")
    axes: dict[str, dict[str, Any]] = {}
    if not isinstance(raw["axes"], dict):
        problems.append(f"{file}: axes: expected an object of axis name → {{type, ...}}")
    else:
        for a, spec in raw["axes"].items():
            at = f"{file}: axes.{a}"
            if not isinstance(spec, dict) or spec.get("type") not in AXIS_TYPES:
                problems.append(f"{at}.type: expected one of {', '.join(AXIS_TYPES)}")
                continue
            t = spec["type"]
            if t == "const":
                v = spec.get("value")
                if _size_problem(v):
                    problems.append(f"{at}.value: {_size_problem(v)}")
                    continue
                axes[a] = {"type": t, "value": v}
            elif t == "expr":
                e = spec.get("expression", spec.get("expr", spec.get("value")))
                if not isinstance(e, str) or not e.strip():
                    problems.append(f"{at}.expression: expected an arithmetic expression of "
                                    f"other axes")
                    continue
                try:
                    _check_expr(e)
                except ValueError as err:
                    problems.append(f"{at}.expression: {err}")
                    continue
                axes[a] = {"type": t, "expression": e}
            else:
                axes[a] = {"type": t}
    tensors: dict[str, dict[str, dict[str, Any]]] = {"inputs": {}, "outputs": {}}
    for group in ("inputs", "outputs"):
        block = raw[group]
        if not isinstance(block, dict):
            problems.append(f"{file}: {group}: expected an object of tensor name → "
                            f"{{shape, dtype}}")
            continue
        for n, spec in block.items():
            at = f"{file}: {group}.{n}"
            if not isinstance(spec, dict):
                problems.append(f"{at}: expected {{shape, dtype}}")
                continue
            dt = spec.get("dtype")
            if not isinstance(dt, str) or dt not in TORCH_DTYPES:
                problems.append(f"{at}.dtype: expected a torch dtype ({', '.join(TORCH_DTYPES)}), "
                                f"got {dt!r}")
            shape = spec.get("shape")
            if shape is not None:
                if not isinstance(shape, list):
                    problems.append(f"{at}.shape: expected a list of axis names or integers, "
                                    f"or null")
                else:
                    for i, d in enumerate(shape):
                        if isinstance(d, bool) or not isinstance(d, (int, str)):
                            problems.append(f"{at}.shape[{i}]: expected an axis name or an "
                                            f"integer, got {show(d)}")
                        elif isinstance(d, int) and _size_problem(d):
                            problems.append(f"{at}.shape[{i}]: {_size_problem(d)}")
                        elif isinstance(d, str) and isinstance(raw["axes"], dict):
                            unknown = [x for x in _names_or_bad(d) if x not in raw["axes"]]
                            if unknown:
                                problems.append(f"{at}.shape[{i}]: unknown axis "
                                                f"'{unknown[0]}' (axes: "
                                                f"{', '.join(raw['axes'])})")
            tensors[group][n] = {"shape": shape, "dtype": dt}
    if isinstance(raw["axes"], dict):
        for a, spec in axes.items():
            if spec["type"] == "expr":
                unknown = [x for x in _names(spec["expression"]) if x not in raw["axes"]]
                if unknown:
                    problems.append(f"{file}: axes.{a}.expression: unknown axis '{unknown[0]}'")
    if problems:
        raise InputError(problems)
    return Definition(raw["name"], axes, tensors["inputs"], tensors["outputs"],
                      str(raw.get("op_type", "")), str(raw.get("description", "")), file)


def read_workloads(path: str | Path, definition: Definition | None = None
                   ) -> list[dict[str, Any]]:
    """The workloads of a workload.jsonl: one JSON object a line (blank lines skipped)."""
    path = Path(path)
    lines = yamlio.read_text(path, "workloads").splitlines()
    out, problems = [], []
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            raw = jsonio.loads(line, f"{path}:{no}")
        except InputError as e:
            problems += e.problems
            continue
        if isinstance(raw, dict) and isinstance(raw.get("workload"), dict):
            raw = raw["workload"]
        if not isinstance(raw, dict) or not isinstance(raw.get("axes", {}), dict):
            problems.append(f"{path}:{no}: expected an object with uuid and axes")
            continue
        out.append({"uuid": str(raw.get("uuid", "")), "axes": raw.get("axes", {})})
    if problems:
        raise InputError(problems[:20])
    if definition is not None:
        for i, w in enumerate(out):  # every line resolves (reports the first bad one)
            Definition(definition.name, definition.axes, definition.inputs, definition.outputs,
                       file=str(path)).resolve(w["axes"], i, w["uuid"])
    return out


# ---- the workloads CSV ------------------------------------------------------------------
def read_csv(path: str | Path | None = None, published: bool = False) -> list[Workload]:
    """Every workload of the SOL-ExecBench workloads CSV (default: the copy shipped here), each
    row checked against the columns' schema (`_csv_workload`); the first 20 problems reported,
    one line each naming the file, line and column. `published`: every row must carry its
    T_SOL_ms (the coverage cross-check compares with it)."""
    path = Path(path) if path else DEFAULT_CSV
    reader = csv.DictReader(io.StringIO(yamlio.read_text(path, "workloads CSV"), newline=""))
    try:
        missing = [c for c in CSV_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(f"{path}: missing column(s) {', '.join(missing)} (expected "
                             f"{', '.join(CSV_COLUMNS)})")
        rows = list(reader)
    except csv.Error as e:
        raise InputError(f"{path}: line {reader.line_num}: not CSV ({yamlio.one_line(e)})") \
            from None
    out, problems = [], []
    for no, row in enumerate(rows, 2):
        at = f"{path}:{no}"
        try:
            w = _csv_workload(row, at)
        except InputError as e:
            problems += e.problems
            continue
        if published and w.published_sol_s is None:
            problems.append(f"{at}: T_SOL_ms: missing (the cross-check compares with the "
                            f"published bound)")
        out.append(w)
    if problems:
        raise InputError(problems[:20])
    return out


def _csv_workload(row: Mapping[str, Any], at: str) -> Workload:
    """One CSV row as a Workload: the columns' schema checked (module docstring), every problem
    of the row reported."""
    problems: list[str] = []
    if row.get(None):  # csv.DictReader files cells beyond the header under the key None
        problems.append(f"{at}: {len(row[None])} cell(s) beyond the header's "
                        f"{len(row) - 1} columns")
    cells = {c: row.get(c) for c in CSV_COLUMNS}
    for c in ("problem_id", "workload_index", "axes_json", "shapes_dtypes_json"):
        if not cells[c]:
            problems.append(f"{at}: {c}: missing (a required column)")
    if problems:
        raise InputError(problems)
    index = cells["workload_index"]
    if not (index.isascii() and index.isdigit() and len(index) <= 10
            and int(index) <= MAX_INDEX):
        problems.append(f"{at}: workload_index: expected an integer in [0, {MAX_INDEX}], got "
                        f"{show(index)}")
    axes = _csv_json(cells["axes_json"], f"{at}: axes_json", problems)
    if axes is not _UNREAD:
        if not isinstance(axes, dict):
            problems.append(f"{at}: axes_json: expected an object of axis name → integer, got "
                            f"{show(axes)}")
        else:
            problems += [f"{at}: axes_json.{k}: {_size_problem(v)}" for k, v in axes.items()
                         if _size_problem(v)]
    groups = _csv_tensors(_csv_json(cells["shapes_dtypes_json"], f"{at}: shapes_dtypes_json",
                                    problems), f"{at}: shapes_dtypes_json", problems)
    t = cells["T_SOL_ms"] or ""
    published = None
    if t.strip():
        try:
            ms = float(t)
        except ValueError:
            ms = math.nan
        if not MIN_T_SOL_MS <= ms <= MAX_T_SOL_MS:  # nan and inf fail too
            problems.append(f"{at}: T_SOL_ms: expected a time in ms in [{MIN_T_SOL_MS:g}, "
                            f"{MAX_T_SOL_MS:g}] or empty, got {show(t)}")
        else:
            published = ms * 1e-3
    if problems:
        raise InputError(problems)
    return Workload(cells["problem_id"], int(index), cells["workload_uuid"] or "", dict(axes),
                    groups["inputs"], groups["outputs"], op_kind=cells["op_kind"] or "",
                    direction=cells["direction"] or "", subset=cells["subset"] or "",
                    model_source=cells["model_source"] or "", published_sol_s=published)


_UNREAD = object()  # a JSON cell that is not JSON (its problem recorded)


def _csv_json(text: str, at: str, problems: list[str]) -> Any:
    try:
        return jsonio.loads(text, at)
    except InputError as e:
        problems += e.problems
        return _UNREAD


def _csv_tensors(sd: Any, at: str, problems: list[str]) -> dict[str, dict[str, Tensor]]:
    """{"inputs": {name: [shape or null, dtype]}, "outputs": {...}} as Tensors by group."""
    groups: dict[str, dict[str, Tensor]] = {"inputs": {}, "outputs": {}}
    if sd is _UNREAD:
        return groups
    if not isinstance(sd, dict) or set(sd) != set(groups):
        problems.append(f"{at}: expected an object with exactly inputs and outputs, got "
                        f"{show(sd)}")
        return groups
    for g, block in sd.items():
        if not isinstance(block, dict):
            problems.append(f"{at}.{g}: expected an object of tensor name → [shape, dtype], got "
                            f"{show(block)}")
            continue
        for name, spec in block.items():
            here = f"{at}.{g}.{name}"
            if not (isinstance(spec, list) and len(spec) == 2):
                problems.append(f"{here}: expected [shape or null, dtype], got {show(spec)}")
                continue
            shape, dtype = spec
            if not isinstance(dtype, str) or dtype not in TORCH_DTYPES:
                problems.append(f"{here}: dtype: expected a torch dtype "
                                f"({', '.join(TORCH_DTYPES)}), got {show(dtype)}")
                continue
            if shape is not None:
                if not isinstance(shape, list):
                    problems.append(f"{here}: shape: expected a list of integers or null, got "
                                    f"{show(shape)}")
                    continue
                bad = next((f"[{i}]: {_size_problem(d)}" for i, d in enumerate(shape)
                            if _size_problem(d)), None)
                if bad is None and _numel_problem(tuple(shape)):
                    bad = f": {_numel_problem(tuple(shape))}"
                if bad is not None:
                    problems.append(f"{here}: shape{bad}")
                    continue
                shape = tuple(shape)
            groups[g][name] = Tensor(name, shape, dtype)
    return groups


def by_problem(workloads: Iterable[Workload]) -> dict[str, list[Workload]]:
    """Workloads grouped by problem, in file order."""
    out: dict[str, list[Workload]] = {}
    for w in workloads:
        out.setdefault(w.problem, []).append(w)
    return out


# ---- axis expressions -------------------------------------------------------------------
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.FloorDiv: operator.floordiv, ast.Div: operator.truediv, ast.Mod: operator.mod,
           ast.Pow: operator.pow}


def _check_expr(text: str) -> ast.AST:
    if len(text) > MAX_EXPRESSION:
        raise ValueError(f"an expression of {len(text)} characters (at most {MAX_EXPRESSION})")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise ValueError(f"{show(text)} is not an arithmetic expression") from None
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Expression, ast.BinOp, ast.UnaryOp, ast.USub, ast.UAdd,
                                 ast.Name, ast.Load, ast.Constant, *_BINOPS)):
            raise ValueError(f"{show(text)}: only + - * / // % ** and parentheses of axes and "
                             f"integers are allowed")
        if isinstance(node, ast.Constant) and (isinstance(node.value, bool)
                                               or not isinstance(node.value, (int, float))):
            raise ValueError(f"{show(text)}: constants must be numbers")
    return tree


def _names(text: str) -> list[str]:
    return [n.id for n in ast.walk(_check_expr(text)) if isinstance(n, ast.Name)]


def _names_or_bad(text: str) -> list[str]:
    try:
        return _names(text)
    except ValueError:
        return [text]


def _bounded(value: Any, text: str, at: str) -> int | float:
    """An intermediate value of an expression: a finite real within 2^MAX_EXPRESSION_BITS."""
    if not isinstance(value, (int, float)) or (isinstance(value, float)
                                                and not math.isfinite(value)) \
            or abs(value) > 2 ** MAX_EXPRESSION_BITS:
        raise InputError(f"{at}: {show(text)} leaves the integers perfmodel can size "
                         f"(beyond 2^{MAX_EXPRESSION_BITS}, or not a real number)")
    return value


def _eval_axis(text: str, axes: Mapping[str, int], at: str) -> int:
    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant):
            return _bounded(node.value, text, at)
        if isinstance(node, ast.Name):
            if node.id not in axes:
                raise InputError(f"{at}: unknown axis '{node.id}'")
            return axes[node.id]
        if isinstance(node, ast.UnaryOp):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Pow) and abs(a) > 1 and \
                    abs(b) * math.log2(abs(a)) > MAX_EXPRESSION_BITS:  # before computing it
                return _bounded(math.inf, text, at)
            try:
                return _bounded(_BINOPS[type(node.op)](a, b), text, at)
            except ZeroDivisionError:
                raise InputError(f"{at}: {show(text)} divides by zero") from None
            except (OverflowError, ValueError):
                return _bounded(math.inf, text, at)
        raise InputError(f"{at}: cannot evaluate {show(text)}")
    try:
        value = ev(_check_expr(text))
    except ValueError as e:
        raise InputError(f"{at}: {e}") from None
    if isinstance(value, float):
        if not value.is_integer():
            raise InputError(f"{at}: {show(text)} = {value:g} is not an integer")
        value = int(value)
    if value < 0:
        raise InputError(f"{at}: {show(text)} = {value} is negative")
    if value > MAX_ELEMENTS:
        raise InputError(f"{at}: {show(text)} = {show(value)}: expected at most "
                         f"{bound_text(MAX_ELEMENTS)} ({ELEMENTS_WHY})")
    return value
