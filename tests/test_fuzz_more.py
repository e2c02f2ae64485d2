"""Fuzzing every input class but graph files (those are tests/test_fuzz_inputs.py): hardware spec
files, model files, CLI options, op parameters, MoE routing traces and `validate` CSVs (issue 14).

Each test is seeded and bounded: the `ci` hypothesis profile of conftest.py derandomizes it (the
same examples every run) and `max_examples` below bounds it; `HYPOTHESIS_PROFILE=nightly` draws
new examples, 20x as many (tests/fuzzing.py `scale`). Every example asserts the contract of docs/cli.md "Exit codes": exit 0 or 2, one
line per problem (each `perfmodel: error: ...`, or a `perfmodel: warning: ...`), never a
traceback (an exception escaping `main` fails the example), and where the input is accepted,
finite positive times (JSON without NaN or Infinity) and the invariants of the conformance suite
on the shapes drawn: time >= roofline, the roofline counting useful work (never below the useful
FLOP at the fastest peak), time monotone in each size parameter.

Case counts (max_examples, below) and time: 3,750 cases in about 22 s on one core of the CI
machine (2 cores), the ones over 2 s marked slow as the suite's convention has it:
  hwspec files   400 (SPEC_CASES)    op parameters  1,500 (OP_CASES), and 600 (OP_MONOTONE_CASES)
  model files    200 (MODEL_CASES)                  with a size doubled
  CLI options    150 (CLI_CASES),    MoE traces       300 (TRACE_CASES)
                 and 200 workloads   validate CSVs    400 (CSV_CASES)
                 up to 2^44 (WORKLOAD_CASES)
`--hypothesis-show-statistics` shows how many were accepted (exit 0, predicted) and refused.
Monotonicity is asserted where the hardware says so: for ops whose kernels fill at least one
wave of the GPU (`fills_the_gpu`); below that a larger grid may lift the HBM rate faster than the
bytes grow (Little's law), and a bigger problem may run faster.
"""
from __future__ import annotations

import atexit
import contextlib
import csv
import io
import json
import math
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import perfmodel as pm
from perfmodel.cli.main import main
from perfmodel.hardware import builtin_spec_dir
from perfmodel.ops import REGISTRY
from perfmodel.ops.base import MAX_ELEMENTS
from perfmodel.validation.measurements import PUBLIC_CSV
from perfmodel.workloads.models import builtin_model_dir
from tests.fuzzing import scale

SPEC_CASES = 400
MODEL_CASES = 200
CLI_CASES = 150
OP_CASES = 1500
OP_MONOTONE_CASES = 600
TRACE_CASES = 300
CSV_CASES = 400
WORKLOAD_CASES = 200

# One scratch folder for the module (hypothesis examples cannot take function-scoped fixtures)
SCRATCH = Path(tempfile.mkdtemp(prefix="perfmodel-fuzz-"))
atexit.register(shutil.rmtree, SCRATCH, ignore_errors=True)


def fuzz(examples: int) -> settings:
    """The profile's settings (derandomized in CI) with this test's number of examples, times
    the profile's multiplier (tests/fuzzing.py: 20 in nightly)."""
    return settings(max_examples=examples * scale(),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Values that broke something once or sit on a boundary, as YAML / CLI text
LITERALS = ["0", "-1", "1", "2", "3", "0.5", "-0.0", "1e-300", "5e-324", "1e308", "1e400",
            "1" + "0" * 400, "-1" + "0" * 30, "9223372036854775808", str(2 ** 40),
            str(2 ** 40 + 1), "1e30", "1e15", ".nan", ".inf", "-.inf", "nan", "inf", "true",
            "false", "null", "~", "'12'", '"x"', "[1, 2]", "{a: 1}", "[]", "{}", "0x10",
            "1_000", "2.5e9", "&a 1", "*a", "x: y", "\t", "'\\x00'"]
NUMBERS = [0, -1, 1, 2, 3, 7, 0.5, -0.0, 1e-300, 5e-324, 1e308, 1e30, 2 ** 31, 2 ** 40,
           2 ** 40 + 1, 2 ** 63, 10 ** 400, -10 ** 400, math.nan, math.inf, -math.inf]
JUNK = [True, False, None, "x", "", "1e3", [1], {"a": 1}]


def log_int(lo: int = 0, bits: int = 44):
    """Integers spread over orders of magnitude, up to 2^bits."""
    return st.integers(0, bits).flatmap(lambda b: st.integers(max(lo, (1 << b) >> 1),
                                                              max(lo, 1 << b)))


def log_float():
    """Positive floats over every order of magnitude, denormals and 1e308 included."""
    return st.floats(-323.5, 308.2).map(lambda e: 10.0 ** e)


def cli(*argv) -> tuple[int, str, list[str]]:
    """One in-process run: (exit code, stdout, stderr lines). An exception escaping main fails
    the example; the exit code and every stderr line are checked here."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    lines = err.getvalue().splitlines()
    assert code in (0, 2), (argv, code)
    assert all(line.startswith(("perfmodel: error: ", "perfmodel: warning: ")) for line in lines), \
        lines
    errors = [line for line in lines if line.startswith("perfmodel: error: ")]
    assert (code == 2) == bool(errors), (code, lines)
    assert "Traceback" not in err.getvalue()
    event("exit 0" if code == 0 else "exit 2")
    return code, out.getvalue(), lines


def _no_nan(text: str) -> object:
    """JSON with no NaN or Infinity (json.loads takes them by default)."""
    def refuse(name):
        raise AssertionError(f"non-finite number {name} in the JSON output")
    return json.loads(text, parse_constant=refuse)


def check_estimate(est, roof=None) -> None:
    """Finite positive time at or above the roofline: its own kernel's, and the roofline
    level's (which resolves a Choice by roofline time: the fastest option's roofline is at most
    the pipes pick's, the slowest option's at most the pipes pick's pipes time)."""
    assert math.isfinite(est.time_s) and est.time_s > 0
    assert all(math.isfinite(t) and t >= 0 for t in est.resource_time_s.values())
    assert est.time_s >= est.roofline_time_s * (1 - 1e-9)
    if roof is not None:
        assert math.isfinite(roof.time_s) and roof.time_s > 0
        assert est.time_s >= roof.time_s * (1 - 1e-9)


def useful_flop_floor(est, hw) -> float:
    """The least time `est.flop` can take on `hw`: at the fastest of its tensor and FP32 peaks."""
    peaks = [hw.tensor_peak_flop_per_s(d) for d in hw.tensor_flop_per_sm_per_clk]
    return est.flop / max(peaks + [2 * hw.pipe_peak_per_s("fma")])


# ---- hardware spec files -------------------------------------------------------------------
SPECS = {p.stem: p.read_text() for p in sorted(builtin_spec_dir().glob("*.yaml"))}
VALUE = re.compile(r"(value: )([^,}\n]+)")


@st.composite
def spec_texts(draw):
    text = SPECS[draw(st.sampled_from(sorted(SPECS)))]
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["value", "value", "value", "drop", "dup", "bytes", "cut"]))
        lines = text.splitlines(keepends=True) or [""]
        i = draw(st.integers(0, len(lines) - 1))
        hits = list(VALUE.finditer(text))
        if kind == "value" and hits:
            m = hits[draw(st.integers(0, len(hits) - 1))]
            new = draw(st.one_of(st.sampled_from(LITERALS), log_float().map(repr),
                                 log_int().map(str)))
            text = text[:m.start(2)] + new + text[m.end(2):]
        elif kind in ("drop", "value"):
            text = "".join(lines[:i] + lines[i + 1:])
        elif kind == "dup":
            text = "".join(lines[:i + 1] + lines[i:])
        elif kind == "bytes":
            pos = draw(st.integers(0, len(text)))
            junk = draw(st.sampled_from(["\x00", "\x07", "\ufeff", "\udcff", "&a", "*b", ":", "'"]))
            text = text[:pos] + junk + text[pos:]
        else:
            text = text[:draw(st.integers(0, len(text)))]
    return text


def _write(name: str, data: str | bytes) -> Path:
    p = SCRATCH / name
    if isinstance(data, str):
        p.write_bytes(data.encode("utf-8", "surrogateescape"))
    else:
        p.write_bytes(data)
    return p


@pytest.mark.slow  # ~6 s
@fuzz(SPEC_CASES)
@given(spec_texts())
def test_spec_files(text):
    path = _write("spec.yaml", text)
    code, out, _ = cli("hw", "show", path, "--format", "json")
    if code == 2:
        return
    _no_nan(out)
    hw = pm.load_spec(path)
    for name in ("gemm", "attention", "rng", "softmax", "allreduce", "moe"):
        o = pm.ops.op(name, **REGISTRY[name].EXAMPLE)
        try:
            est = pm.predict_op(o, hw)
        except pm.InputError:  # e.g. a dtype this spec's tensor cores lack
            continue
        check_estimate(est, pm.predict_op(o, hw, "roofline"))


# ---- model files ---------------------------------------------------------------------------
MODELS = {n: (builtin_model_dir() / f"{n}.yaml").read_text()
          for n in ("llama3-8b", "qwen3-30b-a3b")}
MODEL_KEYS = re.compile(r"^(\w+): (.+)$", re.M)


@st.composite
def model_texts(draw):
    text = MODELS[draw(st.sampled_from(sorted(MODELS)))]
    for _ in range(draw(st.integers(1, 2))):
        hits = list(MODEL_KEYS.finditer(text))
        m = hits[draw(st.integers(0, len(hits) - 1))]
        kind = draw(st.sampled_from(["value", "value", "drop", "dup"]))
        if kind == "value":
            new = draw(st.one_of(st.sampled_from(LITERALS), log_int().map(str)))
            text = text[:m.start(2)] + new + text[m.end(2):]
        elif kind == "drop":
            text = text[:m.start()] + text[m.end():]
        else:
            text = text[:m.end()] + "\n" + m.group(0) + text[m.end():]
    return text


@pytest.mark.slow  # ~8 s: each accepted model builds and predicts a decode step
@fuzz(MODEL_CASES)
@given(model_texts(), st.sampled_from(["decode", "prefill"]))
def test_model_files(text, phase):
    path = _write("model.yaml", text)
    code, out, _ = cli("predict", path, "--phase", phase, "--seq", "128", "--hw", "h100",
                       "--format", "json")
    if code == 0:
        d = _no_nan(out)
        assert d["total_time_s"] > 0
        assert all(o["time_s"] > 0 and o["hidden_s"] >= 0 for o in d["ops"])


# ---- CLI options ---------------------------------------------------------------------------
def option_value():
    return st.one_of(st.sampled_from(["0", "-1", "1", "2", "3", "4", "8", "1e3", "x", "",
                                      "999999999999999999999", str(2 ** 40), "nan", "-0"]),
                     log_int(1, 24).map(str))


WORKLOAD_FLAGS = ["--batch", "--seq", "--context", "--tp", "--ep", "--pp", "--dp",
                  "--microbatches", "--virtual-stages"]


@st.composite
def command_lines(draw):
    kind = draw(st.sampled_from(["predict", "predict", "build", "overlap", "moe", "op", "hw",
                                 "validate", "plan"]))
    if kind in ("predict", "build"):
        argv = [kind, "llama3-8b", "--phase", draw(st.sampled_from(["decode", "prefill",
                                                                     "train", "nope"]))]
        flags = WORKLOAD_FLAGS
        argv += ["--dtype", draw(st.sampled_from(["bf16", "fp8", "nvfp4", "int3"]))]
        if kind == "predict":
            argv += ["--hw", draw(st.sampled_from(["h100", "b200", "a100", "v100"])),
                     "--format", "json"]
    elif kind == "overlap":
        argv, flags = ["overlap", "--model", "llama3-8b", "--hw", "h100", "--format",
                       "json"], ["--batch", "--seq", "--tp", "--bits-per-element", "--dropout"]
    elif kind == "hw":
        argv, flags = ["hw", "show", "h100", "--format", "json"], ["--sm-clock"]
        clock = draw(st.sampled_from(["1500MHz", "1.5GHz", "0Hz", "1e400MHz", "-5MHz", "nanGHz",
                                      "99GHz", "100MHz", "MHz", "1500"]))
        return argv + ["--sm-clock", clock]
    elif kind == "validate":
        argv, flags = ["validate", str(PUBLIC_CSV), "--format", "json"], ["--worst"]
        if draw(st.booleans()):
            argv += ["--by", draw(st.sampled_from(["kernel", "dtype,causal", "nope", ",", ""]))]
    elif kind == "plan":
        argv = ["plan", "train", "llama3-8b", "--hw", "h100", "--jobs", "1", "--format", "json",
                "--gpus", draw(st.sampled_from(["1", "2", "4", "0", "-1", "9" * 22]))]
        flags = ["--batch", "--seq", "--tp", "--pp", "--dp", "--microbatches"]
        if draw(st.booleans()):
            argv += ["--batch", "8"]
    elif kind == "moe":
        argv, flags = ["moe", "--model", "qwen3-30b-a3b", "--hw", "h100", "--format",
                       "json"], ["--gpus", "--tokens-per-gpu", "--replication", "--skew",
                                 "--seed"]
    else:
        name = draw(st.sampled_from(sorted(REGISTRY)))
        params = [f"{k}={v}" for k, v in REGISTRY[name].EXAMPLE.items()]
        key = draw(st.sampled_from(sorted(REGISTRY[name].PARAMS)))
        params.append(f"{key}={draw(st.sampled_from(LITERALS))}")
        return ["op", name, *params, "--hw", "h100", "--format", "json"]
    for flag in draw(st.lists(st.sampled_from(flags), max_size=3, unique=True)):
        argv += [flag, draw(option_value())]
    return argv


# Workload sizes whose prediction is slow only because it is big: each example stays short
SMALL = {"--batch": 64, "--seq": 8192, "--context": 8192, "--tokens-per-gpu": 256,
         "--gpus": 8}


@pytest.mark.slow  # ~10 s
@fuzz(CLI_CASES)
@given(command_lines())
def test_command_lines(argv):
    for flag, most in SMALL.items():  # keep accepted examples quick (huge ones are refused)
        if flag in argv:
            i = argv.index(flag) + 1
            if argv[i].isdigit() and most < int(argv[i]) <= 2 ** 40:
                argv[i] = str(most)
    code, out, _ = cli(*argv)
    if code == 0 and argv[0] != "build":
        times = list(_times(_no_nan(out)))
        assert all(t >= 0 for t in times), times
        assert all(t > 0 for k, t in _times(_no_nan(out), with_keys=True)
                   if k in ("time_s", "total_time_s", "layer_s", "step_time_s")), out[:300]


def _times(d, with_keys: bool = False):
    """Every number of a JSON document under a key ending in `_s` (seconds)."""
    if isinstance(d, dict):
        for k, v in d.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k.endswith("_s"):
                yield (k, v) if with_keys else v
            else:
                yield from _times(v, with_keys)
    elif isinstance(d, list):
        for v in d:
            yield from _times(v, with_keys)


# ---- op parameters -------------------------------------------------------------------------
OPS = sorted(REGISTRY)
HW = ["H100-SXM", "B200", "A100-SXM"]


def param_value(p, nasty: bool = True):
    bad = st.sampled_from(NUMBERS + JUNK)
    if p.kind == "int":
        good = log_int(int(p.lo or 0))
    elif p.kind == "float":
        good = st.one_of(log_float(), st.floats(p.lo or 0.0, p.hi or 1e9))
    elif p.kind == "bool":
        good = st.booleans()
    elif p.kind in ("choice", "dtype"):
        from perfmodel.units import DTYPES
        good = st.sampled_from(list(p.choices or DTYPES))
    else:
        return st.just(None)
    return st.one_of(good, good, good, bad) if nasty else good


@st.composite
def op_cases(draw, nasty: bool = True):
    name = draw(st.sampled_from(OPS))
    cls = REGISTRY[name]
    params = dict(cls.EXAMPLE)
    keys = sorted(k for k in cls.PARAMS if cls.PARAMS[k].kind != "path")
    for key in draw(st.lists(st.sampled_from(keys), max_size=3, unique=True)):
        params[key] = draw(param_value(cls.PARAMS[key], nasty))
    return name, params, draw(st.sampled_from(HW))


def _build(name, params):
    try:
        return pm.ops.op(name, **params)
    except pm.InputError as e:
        assert e.problems and all("\n" not in p for p in e.problems)
        event("refused")
        return None


def _predict(o, hw, level="pipes"):
    try:
        est = pm.predict_op(o, hw, level)
    except pm.InputError as e:  # e.g. a dtype this GPU lacks, a launch it cannot run
        assert e.problems and all("\n" not in p for p in e.problems)
        event("refused")
        return None
    event("predicted")
    return est


@pytest.mark.slow  # ~8 s
@fuzz(OP_CASES)
@given(op_cases())
def test_op_parameters(case):
    name, params, hw_name = case
    o = _build(name, params)
    if o is None:
        return
    hw = pm.hardware(hw_name)
    est = _predict(o, hw)
    if est is None:
        return
    roof = _predict(o, hw, "roofline")
    check_estimate(est, roof)
    assert roof.time_s >= useful_flop_floor(roof, hw) * (1 - 1e-9)


def fills_the_gpu(est) -> bool:
    """Every kernel of the op runs at least one full wave of CTAs (an op on no SM, a transfer,
    counts as full). Below that, a larger problem may launch a larger grid whose extra bytes in
    flight lift the HBM rate (Little's law) faster than its bytes grow: the hardware makes a
    small kernel faster when it grows, and the time need not be monotone."""
    parts = [est.details, *est.details.get("parts", ())]
    return all(p.get("waves", 1.0) >= 1.0 for p in parts)


@fuzz(OP_MONOTONE_CASES)
@given(op_cases(nasty=False), st.data())
def test_ops_are_monotone_in_their_sizes(case, data):
    name, params, hw_name = case
    o = _build(name, params)
    if o is None or not o.SIZE_PARAMS:
        return
    hw = pm.hardware(hw_name)
    est = _predict(o, hw)
    if est is None or not fills_the_gpu(est):
        return
    size = data.draw(st.sampled_from(o.SIZE_PARAMS))
    value = o.params[size]
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value * 2 > MAX_ELEMENTS:
        return
    bigger = _build(name, {**o.params, size: value * 2})
    if bigger is None:  # doubling left the valid range (a divisibility, a tensor bound)
        return
    grown = _predict(bigger, hw)
    event("compared")
    if grown is not None:
        assert grown.time_s >= est.time_s * (1 - 1e-9), f"{o!r}: doubling {size} made it faster"


# ---- MoE routing traces --------------------------------------------------------------------
TOKENS, EXPERTS, TOP_K = 64, 16, 4


@st.composite
def traces(draw):
    kind = draw(st.sampled_from(["npz", "csv", "bytes"]))
    rows = draw(st.sampled_from([0, 1, TOKENS - 1, TOKENS, TOKENS + 1]))
    cols = draw(st.sampled_from([TOP_K, TOP_K, 1, TOP_K + 1]))
    base = np.array([np.random.default_rng(r).permutation(EXPERTS)[:cols] for r in range(rows)],
                    dtype=np.int64).reshape(rows, cols)
    ids = base.astype(float)
    if rows and draw(st.booleans()):
        i, j = draw(st.integers(0, rows - 1)), draw(st.integers(0, cols - 1))
        ids[i, j] = draw(st.sampled_from([-1, EXPERTS, 1.5, math.nan, math.inf, 1e300,
                                          float(ids[i, (j + 1) % cols])]))
    if kind == "npz":
        buf = io.BytesIO()
        key = draw(st.sampled_from(["experts", "experts", "ids"]))
        np.savez(buf, **{key: ids if draw(st.booleans()) else base})
        data = buf.getvalue()
        cut = draw(st.sampled_from([None, None, 0, 10, len(data) // 2]))
        return "t.npz", data if cut is None else data[:cut]
    if kind == "csv":
        text = "# expert ids\n" + "\n".join(",".join(repr(float(v)) for v in r)
                                              for r in ids) + "\n"
        return "t.csv", text.encode()
    return draw(st.sampled_from(["t.npz", "t.csv"])), draw(st.binary(max_size=200))


@fuzz(TRACE_CASES)
@given(traces())
def test_moe_traces(trace):
    name, data = trace
    path = _write(name, data)
    o = pm.ops.op("moe", tokens=TOKENS, experts=EXPERTS, top_k=TOP_K, hidden=512,
                  expert_hidden=256, dtype="bf16", gpus=4, trace=str(path))
    est = _predict(o, pm.hardware("H100-SXM"))
    if est is not None:
        check_estimate(est)


# ---- validate CSVs -------------------------------------------------------------------------
with PUBLIC_CSV.open(newline="") as _f:
    _ROWS = list(csv.reader(_f))
HEADER, ROWS = _ROWS[0], _ROWS[1:]


@st.composite
def csv_files(draw):
    row = list(ROWS[draw(st.integers(0, len(ROWS) - 1))])
    for _ in range(draw(st.integers(1, 2))):
        kind = draw(st.sampled_from(["field", "shape", "shape", "short", "long"]))
        if not row or (kind == "shape" and len(row) != len(HEADER)):
            break
        col = draw(st.integers(0, len(row) - 1))
        if kind == "field":
            row[col] = draw(st.one_of(st.sampled_from(LITERALS + ["", "x" * 140_000]),
                                      st.text(max_size=10)))
        elif kind == "shape":
            i = HEADER.index("shape_json")
            try:
                shape = json.loads(row[i])
            except ValueError:
                continue
            if isinstance(shape, dict) and shape:
                key = draw(st.sampled_from(sorted(shape)))
                shape[key] = draw(st.sampled_from(NUMBERS + JUNK + [4096, 128, "fwd"]))
                row[i] = json.dumps(shape)  # NaN, Infinity: what a careless writer emits
        elif kind == "short":
            row = row[:col]
        else:
            row = row + ["extra"]
    buf = io.StringIO()
    csv.writer(buf).writerows([HEADER, row])
    return buf.getvalue()


@fuzz(CSV_CASES)
@given(csv_files())
def test_validate_csvs(text):
    path = _write("rows.csv", text)
    code, out, err = cli("validate", path, "--format", "json")
    if code == 0:
        d = _no_nan(out)
        assert all(r["measured_time_s"] > 0 and r["predicted_time_s"] > 0 for r in d["rows"])
    else:
        assert len(err) == 1 and str(path) in err[0]


# ---- workload sizes: every problem names a flag -------------------------------------------


@st.composite
def big_workloads(draw):
    argv = ["build", draw(st.sampled_from(["llama3-8b", "qwen3-30b-a3b", "deepseek-v3"])),
            "--phase", draw(st.sampled_from(["decode", "prefill", "train"]))]
    for flag in draw(st.lists(st.sampled_from(["--batch", "--seq", "--context", "--tp", "--ep",
                                               "--pp", "--dp", "--microbatches"]),
                              min_size=1, max_size=3, unique=True)):
        argv += [flag, str(draw(log_int(1, 44)))]
    return argv


@fuzz(WORKLOAD_CASES)
@given(big_workloads())
def test_workload_sizes_name_the_flags(argv):
    """Sizes up to 2^44: the step's graph is built (its ops accept their sizes) or refused with
    lines naming the flags, never an op's derived key. (`perfmodel build` without printing the
    graph: the YAML dump is the slow part and is not input handling.)"""
    from perfmodel.cli.main import build_parser
    from perfmodel.cli.workload import read_input
    try:
        graph = read_input(build_parser(argv).parse_args(argv)).graph
    except pm.InputError as e:
        event("refused")
        assert all(p.startswith("--") and "\n" not in p for p in e.problems), e.problems
        return
    event("built")
    assert len(graph) > 0
