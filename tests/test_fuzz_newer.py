"""Fuzzing the newer inputs (issue 42): Hugging Face configs (`models import`), SOL-ExecBench
definitions and coverage CSVs (`sol`), the Python planners' arguments, sweep spaces, and
`plan serve` / `moe` options. tests/test_fuzz_more.py fuzzes the older inputs the same way.

Every example asserts the contract (tests/fuzzing.py): exit 0 or 2 with one line per problem
and no traceback (an exception escaping fails the example), or for the Python planners a result
or an InputError; no non-finite number in what is returned or printed; and
where the input is known to be invalid (a value of the wrong type or out of its declared range,
bytes that are not JSON), exit 2 or an InputError whose line names the key, flag or parameter.

Budgets (examples per class under the `ci` profile, derandomized: the same examples every run;
`HYPOTHESIS_PROFILE=nightly` runs 20x as many, fresh ones: 31,000, about 2.5 min), about 5 s in
all on one core of the 2-core CI machine:
  Hugging Face configs  400 (HF_CASES)        planner arguments    400 (PLANNER_CASES)
  SOL definitions       250 (SOL_CASES)       sweep spaces         200 (SWEEP_CASES)
  coverage CSVs         200 (COVERAGE_CASES)  plan serve / moe     100 (OPTION_CASES)
The valid paths run small: a 2-layer model, a few requests, a few points. The planners are never
given workload=None with a small model, whose default 1,000 offline requests make SGLang's
admission check quadratic in the simulator (minutes; issue 42, left to the simulator).
"""
from __future__ import annotations

import atexit
import copy
import csv
import gzip
import io
import json
import math
import shutil
import tempfile
from pathlib import Path

from hypothesis import event, given
from hypothesis import strategies as st

from perfmodel import yamlio
from perfmodel.errors import InputError
from perfmodel.ops.base import MAX_ELEMENTS, MAX_GPUS, MAX_SEED
from perfmodel.sol.problems import DEFAULT_CSV, TORCH_DTYPES
from perfmodel.workloads.hf_config import FIELDS
from perfmodel.workloads.models import parse_model
from tests.fuzzing import JUNK, NUMBERS, cli, finite_numbers, fuzz, names, no_nan

HF_CASES = 400
SOL_CASES = 250
COVERAGE_CASES = 200
PLANNER_CASES = 400
SWEEP_CASES = 200
OPTION_CASES = 100

SCRATCH = Path(tempfile.mkdtemp(prefix="perfmodel-fuzz-newer-"))
atexit.register(shutil.rmtree, SCRATCH, ignore_errors=True)
FIXTURES = Path(__file__).parent / "sol" / "fixtures"


def _write(name: str, data: str | bytes) -> Path:
    p = SCRATCH / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    return p


def log_int(lo: int = 0, bits: int = 44):
    """Integers spread over orders of magnitude, up to 2^bits."""
    return st.integers(0, bits).flatmap(lambda b: st.integers(max(lo, (1 << b) >> 1),
                                                              max(lo, 1 << b)))


ANY_VALUE = st.one_of(st.sampled_from(NUMBERS + JUNK), log_int(), st.text(max_size=6),
                      st.floats(allow_nan=True, allow_infinity=True))


# Two tiny models (a dense one and an MoE one): valid inputs run in milliseconds
TINY = {"schema_version": 1, "name": "tiny", "source": {"title": "fuzz", "url": ""},
        "params_total": {"value": 1e8, "source": "fuzz"}, "hidden": 512, "layers": 2,
        "heads": 8, "kv_heads": 2, "head_dim": 64, "ffn_hidden": 1024, "vocab": 32000}
TINY_MOE = {**TINY, "name": "tiny-moe", "experts": 8, "top_k": 2, "expert_hidden": 256}
TINY_FILE = _write("tiny.yaml", yamlio.dump(TINY))
TINY_MOE_FILE = _write("tiny-moe.yaml", yamlio.dump(TINY_MOE))
TINY_SPEC = parse_model(TINY, "tiny.yaml")
TINY_MOE_SPEC = parse_model(TINY_MOE, "tiny-moe.yaml")


# ---- Hugging Face configs ----------------------------------------------------------------
HF_BASES = {
    "llama": {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
              "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
              "vocab_size": 128256, "hidden_act": "silu", "tie_word_embeddings": False,
              "_name_or_path": "meta-llama/Llama-3.1-8B"},
    "qwen-moe": {"model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144,
                 "moe_intermediate_size": 768, "num_attention_heads": 32, "head_dim": 128,
                 "num_hidden_layers": 48, "num_key_value_heads": 4, "vocab_size": 151936,
                 "hidden_act": "silu", "num_experts": 128, "num_experts_per_tok": 8,
                 "tie_word_embeddings": False, "sliding_window": None,
                 "use_sliding_window": False, "mlp_only_layers": [],
                 "shared_expert_intermediate_size": 0},
    "deepseek": {"model_type": "deepseek_v3", "hidden_size": 7168, "intermediate_size": 18432,
                 "moe_intermediate_size": 2048, "num_attention_heads": 128,
                 "num_hidden_layers": 61, "num_key_value_heads": 128, "vocab_size": 129280,
                 "hidden_act": "silu", "n_routed_experts": 256, "n_shared_experts": 1,
                 "num_experts_per_tok": 8, "first_k_dense_replace": 3, "q_lora_rank": 1536,
                 "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
                 "v_head_dim": 128, "tie_word_embeddings": False},
    "mpt": {"model_type": "mpt", "d_model": 7168, "n_layers": 48, "n_heads": 64,
            "expansion_ratio": 4, "vocab_size": 50432, "attn_config": {"alibi": True}},
}
# keys every config's import reads whatever else it holds (the first name of each family:
# the import takes the first one set)
ALWAYS_READ = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
               "kv_lora_rank", "head_dim", "expansion_ratio", "hidden_act", "model_type",
               "tie_word_embeddings", "vocab_size", "num_local_experts", "sliding_window",
               "use_sliding_window", "_name_or_path", "attn_config")
HF_KEYS = sorted(k for k in FIELDS if "." not in k)
# bytes that make any document not (strict) JSON, spliced into the text
BAD_JSON = ['"x": NaN, ', '"x": Infinity, ', '"x": 1e400, ', '"x": -Infinity, ',
            '"x": ' + "1" * 5000 + ", ", '"x": ' + "[" * 150 + "]" * 150 + ", ",
            '"vocab_size": 8, ']  # a duplicate of a key the bases hold


def hf_value_is_bad(key: str, v) -> bool:
    """Whether `v` breaks the declared schema of `key` (FIELDS), None and unset zeros aside."""
    f = FIELDS[key]
    if v is None or (f.unset_zero and v == 0 and not isinstance(v, bool)):
        return False
    if f.kind in ("int", "number"):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return True
        if isinstance(v, float) and (not math.isfinite(v) or (f.kind == "int"
                                                              and not v.is_integer())):
            return True
        return not f.lo <= v <= f.hi
    kind = {"bool": bool, "str": str, "list": list, "object": dict}[f.kind]
    return not isinstance(v, kind)


@st.composite
def hf_cases(draw):
    """(config bytes, flags, what a line must name or None): None where the input is not known
    to be invalid; else the first thing the import checks that is wrong (-o, then --params,
    then the document as JSON, then every key read), '' where no name is certain."""
    base = draw(st.sampled_from(sorted(HF_BASES)))
    cfg = copy.deepcopy(HF_BASES[base])
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["value", "value", "value", "drop", "valid"]))
        key = draw(st.sampled_from(HF_KEYS))
        if kind == "drop":
            cfg.pop(key, None)
        elif kind == "valid":  # plausible: the import must give a model or one line each
            cfg[key] = draw(st.one_of(log_int(0, 20), st.sampled_from(
                [None, True, False, "gelu", "relu2", "mpt", []])))
        else:
            cfg[key] = draw(ANY_VALUE)
    bad_keys = [k for k, v in cfg.items() if k in FIELDS and hf_value_is_bad(k, v) and (
        k in ALWAYS_READ or (k == "intermediate_size" and (base != "mpt" or v)))]
    text = json.dumps(cfg, allow_nan=True)
    bad_doc = any(isinstance(v, float) and not math.isfinite(v) for v in cfg.values())
    data = text.encode()
    splice = draw(st.sampled_from([None] * 6 + ["json", "utf8", "bom", "cut", "deep"]))
    if splice == "json":
        bad = draw(st.sampled_from(BAD_JSON))
        if bad.startswith('"vocab_size"') and "vocab_size" not in cfg:
            bad = BAD_JSON[0]  # (the duplicate needs the key)
        data = ("{" + bad + text[1:]).encode()
    elif splice == "utf8":
        pos = draw(st.integers(0, len(data)))
        data = data[:pos] + b"\xff" + data[pos:]
    elif splice == "bom":
        data = b"\xef\xbb\xbf" + data
    elif splice == "cut":
        data = data[:draw(st.integers(0, len(data) - 1))]
    elif splice == "deep":
        data = b"[" * draw(st.integers(101, 5000))
    bad_doc |= splice in ("json", "utf8", "cut", "deep")
    flags: list[str] = []
    bad_params = False
    if draw(st.booleans()):
        p = draw(st.sampled_from(["8.03e9", "1", "1e15", "nan", "inf", "-1", "0", "1e16", "x"]))
        flags += ["--params", p]
        try:
            bad_params = not 1 <= float(p) <= 1e15
        except ValueError:
            bad_params = "usage"  # argparse refuses it before anything runs
    out = draw(st.sampled_from([None, None, "file", "dir", "missing"]))
    if out == "dir":
        flags += ["-o", str(SCRATCH)]
    elif out == "missing":
        flags += ["-o", str(SCRATCH / "no" / "such" / "m.yaml")]
    elif out == "file":
        flags += ["-o", str(SCRATCH / "imported.yaml")]
    if draw(st.booleans()):
        flags += ["--name", draw(st.sampled_from(["x", "My-Model", "ü", "a/b"]))]
    first = ("--params" if bad_params == "usage" else "--output" if out in ("dir", "missing")
             else "--params" if bad_params
             else "" if bad_doc else bad_keys[0] if bad_keys else None)
    return data, flags, first


@fuzz(HF_CASES)
@given(hf_cases())
def test_hf_configs(case):
    data, flags, first = case
    path = _write("hf/config.json", data)
    out_file = SCRATCH / "imported.yaml"
    out_file.unlink(missing_ok=True)
    code, out, err = cli("models", "import", path, *flags)
    if first is not None:
        assert code == 2, (first, out[:200])
        assert names(err, first), (first, err)
        return
    if code == 2:
        event("refused (a combination)")
        return
    text = out_file.read_text() if "-o" in flags else out
    model = parse_model(yamlio.loads(text, "imported.yaml"), "imported.yaml")
    assert math.isfinite(model.params_total_stated) and model.params_total_stated >= 1
    assert model.params() > 0


# ---- SOL-ExecBench definitions -------------------------------------------------------------
SOL_BASES = {d.name: (json.loads((d / "definition.json").read_text()),
                      (d / "workload.jsonl").read_text().splitlines())
             for d in sorted(FIXTURES.iterdir()) if d.is_dir()}
EXPRESSIONS = ["K // 128", "K * 2", "K ** K", "2 ** 2 ** 40", "M // 0", "K % 0", "(-8) ** 0.5",
               "1e308 * 10", "K / 3", "K - 100000", "M.__class__", "x" * 300, "nope + 1",
               "(" * 300 + "1" + ")" * 300, "1" * 5000, "K -", "", 3]


def _size_is_bad(v) -> bool:
    return isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_ELEMENTS


def sol_is_invalid(raw, lines) -> bool:
    """Whether a definition and its workload lines break the declared schema in a way the
    reader must refuse: a required key missing, a const value, a torch dtype, a literal
    dimension or a workload's axis value out of its type or range."""
    if not isinstance(raw, dict) or not {"name", "axes", "inputs", "outputs"} <= set(raw):
        return True
    for spec in raw["axes"].values():
        if isinstance(spec, dict) and spec.get("type") == "const" \
                and _size_is_bad(spec.get("value")):
            return True
    for group in ("inputs", "outputs"):
        for spec in raw[group].values():
            if not isinstance(spec, dict):
                return True
            dt, shape = spec.get("dtype"), spec.get("shape")
            if not isinstance(dt, str) or dt not in TORCH_DTYPES:
                return True
            if shape is not None and (not isinstance(shape, list) or any(
                    not isinstance(d, str) and _size_is_bad(d) for d in shape)):
                return True
    for line in lines:
        w = json.loads(line) if line.strip() else {}
        w = w.get("workload", w)
        if any(_size_is_bad(v) for v in w.get("axes", {}).values()):
            return True
    return False


@st.composite
def sol_cases(draw):
    name = draw(st.sampled_from(sorted(SOL_BASES)))
    raw, lines = copy.deepcopy(SOL_BASES[name][0]), list(SOL_BASES[name][1])
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["const", "expr", "dtype", "shape", "dim", "tensor",
                                     "workload", "drop"]))
        if kind == "drop":
            raw.pop(draw(st.sampled_from(["name", "axes", "inputs", "outputs", "op_type"])), None)
            continue
        if kind in ("const", "expr") and isinstance(raw.get("axes"), dict):
            axis = draw(st.sampled_from(sorted(raw["axes"]) + ["NEW"]))
            raw["axes"][axis] = ({"type": "const", "value": draw(st.one_of(ANY_VALUE,
                                                                         log_int(0, 44)))}
                                 if kind == "const" else
                                 {"type": "expr", "expression": draw(st.sampled_from(
                                     EXPRESSIONS))})
        elif kind in ("dtype", "shape", "dim", "tensor"):
            group = draw(st.sampled_from(["inputs", "outputs"]))
            if not raw.get(group):
                continue
            t = draw(st.sampled_from(sorted(raw[group])))
            if kind == "dtype":
                raw[group][t]["dtype"] = draw(st.one_of(st.sampled_from(sorted(TORCH_DTYPES)),
                                                        ANY_VALUE))
            elif kind == "shape":
                raw[group][t]["shape"] = draw(st.one_of(
                    st.none(), st.lists(st.one_of(log_int(0, 12), st.sampled_from(
                        sorted(raw.get("axes") or {}) + ["K // 2", "Q"])), max_size=4),
                    ANY_VALUE))
            elif kind == "dim":
                shape = raw[group][t].get("shape")
                if isinstance(shape, list) and shape:
                    shape[draw(st.integers(0, len(shape) - 1))] = draw(
                        st.one_of(ANY_VALUE, log_int(0, 44)))
            else:
                raw[group].pop(t)
        elif kind == "workload" and lines:
            i = draw(st.integers(0, len(lines) - 1))
            w = json.loads(lines[i]) if lines[i].strip() else {}
            axes = w.get("workload", w).get("axes")
            if isinstance(axes, dict) and axes:
                axes[draw(st.sampled_from(sorted(axes)))] = draw(st.one_of(ANY_VALUE,
                                                                           log_int(0, 44)))
                lines[i] = json.dumps(w)
    must_fail = sol_is_invalid(raw, lines)
    text = json.dumps(raw)
    splice = draw(st.sampled_from([None] * 8 + ["json", "deep", "line"]))
    if splice == "json":
        text = "{" + draw(st.sampled_from(BAD_JSON[:6])) + text[1:]
    elif splice == "deep":
        text = "[" * 4000
    elif splice == "line":
        lines.append(draw(st.sampled_from(["{", "[" * 3000, '{"axes": NaN}', "3", "\udcff"])))
    must_fail |= splice is not None
    # NaN or Infinity written by json.dumps: not JSON
    must_fail |= any(t in text or any(t in x for x in lines) for t in ("NaN", "Infinity"))
    return name, text, "\n".join(lines) + "\n", must_fail


@fuzz(SOL_CASES)
@given(sol_cases())
def test_sol_definitions(case):
    name, text, workloads, must_fail = case
    path = _write(f"sol/{name}/definition.json", text)
    _write(f"sol/{name}/workload.jsonl", workloads)
    code, out, err = cli("sol", path, "--hw", "B200", "--format", "json")
    if must_fail:
        assert code == 2, (text[:300], out[:200])
        return
    if code == 0:
        d = no_nan(out)
        for k in ("sol_time_s", "roofline_time_s", "attainable_time_s"):
            assert d[k] is None or d[k] >= 0, (k, d[k])


# ---- coverage CSVs -------------------------------------------------------------------------
with io.StringIO(gzip.decompress(DEFAULT_CSV.read_bytes()).decode()) as _f:
    _ALL = list(csv.reader(_f))
CSV_HEADER, CSV_ROWS = _ALL[0], _ALL[1:]
COL = {c: i for i, c in enumerate(CSV_HEADER)}
CELL_JUNK = ["", "x", "0", "-1", "nan", "inf", "1e400", "1" * 400, "[]", "{}", "null",
             "[" * 3000, '{"a": NaN}', "\x00", "6e-08", "1e-13", "1e13"]


def _strict_json(text):
    def refuse(name):
        raise ValueError(name)
    return json.loads(text, parse_constant=refuse)


def coverage_row_is_invalid(row) -> bool:
    """Whether a CSV row breaks the declared columns (perfmodel/sol/problems.py `read_csv`)."""
    if len(row) != len(CSV_HEADER) or not row[COL["problem_id"]]:
        return True
    index = row[COL["workload_index"]]
    if not (index.isascii() and index.isdigit() and len(index) <= 10
            and int(index) < 2 ** 31):
        return True
    try:
        axes = _strict_json(row[COL["axes_json"]])
        sd = _strict_json(row[COL["shapes_dtypes_json"]])
        ms = float(row[COL["T_SOL_ms"]])
    except (ValueError, RecursionError):
        return True
    if not 1e-12 <= ms <= 1e12 or not isinstance(axes, dict) \
            or any(_size_is_bad(v) for v in axes.values()):
        return True
    if not isinstance(sd, dict) or set(sd) != {"inputs", "outputs"}:
        return True
    for block in sd.values():
        if not isinstance(block, dict):
            return True
        for spec in block.values():
            if not (isinstance(spec, list) and len(spec) == 2) \
                    or not isinstance(spec[1], str) or spec[1] not in TORCH_DTYPES:
                return True
            if spec[0] is not None and (not isinstance(spec[0], list) or any(
                    _size_is_bad(d) for d in spec[0]) or math.prod(spec[0]) > MAX_ELEMENTS):
                return True
    return False


@st.composite
def coverage_cases(draw):
    rows = [list(CSV_ROWS[i]) for i in draw(st.lists(st.integers(0, len(CSV_ROWS) - 1),
                                                     min_size=1, max_size=2))]
    for _ in range(draw(st.integers(1, 2))):
        row = rows[draw(st.integers(0, len(rows) - 1))]
        if len(row) != len(CSV_HEADER):
            continue
        kind = draw(st.sampled_from(["cell", "tsol", "axis", "dim", "dtype", "short", "long"]))
        if kind == "cell":
            row[COL[draw(st.sampled_from(CSV_HEADER))]] = draw(st.sampled_from(CELL_JUNK))
        elif kind == "tsol":
            row[COL["T_SOL_ms"]] = draw(st.one_of(st.sampled_from(CELL_JUNK),
                                                  st.floats(1e-12, 1e12).map(repr)))
        elif kind in ("axis", "dim", "dtype"):
            try:
                axes = _strict_json(row[COL["axes_json"]])
                sd = _strict_json(row[COL["shapes_dtypes_json"]])
            except (ValueError, RecursionError):
                continue
            v = draw(st.one_of(st.sampled_from(NUMBERS + JUNK), log_int(0, 44)))
            if kind == "axis" and isinstance(axes, dict) and axes:
                axes[draw(st.sampled_from(sorted(axes)))] = v
            tensors = [(g, n) for g in ("inputs", "outputs") for n in sd[g]] \
                if isinstance(sd, dict) and set(sd) == {"inputs", "outputs"} else []
            if kind == "dim" and tensors:
                g, n = draw(st.sampled_from(tensors))
                if sd[g][n][0]:
                    sd[g][n][0][draw(st.integers(0, len(sd[g][n][0]) - 1))] = v
            if kind == "dtype" and tensors:
                g, n = draw(st.sampled_from(tensors))
                sd[g][n][1] = draw(st.sampled_from(sorted(TORCH_DTYPES) + ["bf16", None, 3]))
            row[COL["axes_json"]] = json.dumps(axes)  # NaN, Infinity: a careless writer's
            row[COL["shapes_dtypes_json"]] = json.dumps(sd)
        elif kind == "short":
            del row[draw(st.integers(0, COL["T_SOL_ms"])):]
        else:
            row.append("extra")
    buf = io.StringIO()
    csv.writer(buf).writerows([CSV_HEADER, *rows])
    rows = [r for r in rows if r]  # an empty row is a blank line: CSV readers skip it
    return buf.getvalue(), not rows or any(coverage_row_is_invalid(r) for r in rows)


@fuzz(COVERAGE_CASES)
@given(coverage_cases())
def test_coverage_csvs(case):
    text, must_fail = case
    path = _write("coverage.csv", text)
    code, out, err = cli("sol", "--coverage", path, "--format", "json")
    if must_fail:
        assert code == 2 and all(str(path) in line for line in err if "error" in line), err
        return
    if code == 0:
        d = no_nan(out)
        assert all(r["ratio_min"] >= 0 for r in d["problems"])


# ---- planner arguments ---------------------------------------------------------------------
def _planners():
    from perfmodel.plan.frameworks import framework
    from perfmodel.plan.search import search_serving
    from perfmodel.plan.serving import plan_serving
    from perfmodel.plan.simulator import Workload
    from perfmodel.plan.training import plan_training, search_training_plans
    small = Workload("offline", 8, 64, 8)
    return {
        "plan_serving": (plan_serving, dict(model=TINY_SPEC, hw="H100-SXM", batches=[1, 8],
                                            prompt=128, output=16)),
        "plan_training": (plan_training, dict(model=TINY_SPEC, hw="H100-SXM", batch=2,
                                              seq=256)),
        "search_serving": (search_serving, dict(model=TINY_SPEC, hw="H100-SXM", gpus=1,
                                                workload=small, jobs=1)),
        "search_training_plans": (search_training_plans, dict(model=TINY_SPEC, hw="H100-SXM",
                                                              gpus=2, global_batch=4, seq=256)),
        "framework": (framework, dict(name="megatron")),
    }


def _parameter_pools():
    """parameter → (valid values, invalid values): the valid ones small enough to run fast."""
    from perfmodel.plan.simulator import Workload
    size = ([1, 2, 7, 16, 64, 2 ** 20, 2 ** 40],
            [0, -1, "8", 8.0, 2.5, math.inf, math.nan, 10 ** 400, 2 ** 40 + 1, True, [1]])
    gpus = ([1, 2, 3, 4, 8], [0, -1, "2", 2.0, MAX_GPUS + 1, 10 ** 400, True, [2]])
    slo = ([0.05, 1, 10 ** 6], [0, -1, math.nan, math.inf, 10 ** 400, "1s", True])

    def choice(valid):
        return list(valid), ["x", "", ["bf16"], 3, True, 2.5]
    return {
        **{k: size for k in ("prompt", "output", "batch", "seq", "global_batch", "micro_batch",
                             "microbatches", "top")},
        **{k: gpus for k in ("tp", "pp", "ep", "dp", "cp", "gpus", "vp", "virtual_stages")},
        "jobs": ([1], [0, -1, "1", 1.5, True]),
        "tpot_slo_s": slo, "ttft_slo_s": slo,
        "batches": ([[1], [1, 8], (4,), range(1, 3), {2, 4}],
                    [[], [0], [-1], [2 ** 40], 5, "1", [1.5], iter([1]), [True], [None]]),
        "sweep": ([False, (1, 4), [2]], [[0], [2 ** 40], "yes", 3, [1.5]]),
        "kv_occupancy": ([0.5, 1], [0, 1.5, math.nan, -1, "0.5"]),
        "sm_clock_fraction": ([0.8, 1], [0, 1.5, math.nan, True, "0.8"]),
        "moe_replication": ([1.0], [0.5, 9, math.nan, "1"]),
        "dtype": choice(["bf16", "fp8", "nvfp4"]),
        "kv_dtype": choice(["bf16", "fp8"]),
        "level": choice(["pipes", "roofline"]),
        "engine": choice(["vllm", "sglang", "trtllm", "vllm-v0"]),
        "framework": choice(["megatron", "pytorch"]),
        "name": choice(["megatron", "pytorch"]),
        "recompute": choice(["none", "full", "selective"]),
        "grad_reduce_dtype": choice(["bf16", "fp32"]),
        "attention_kernel": choice(["fa2", "fa3", "cudnn"]),
        "pipeline_schedule": choice(["1f1b", "dualpipe"]),
        "zero": ([0, 1, 2, 3], [4, -1, "1", 1.5, True, None]),
        "pipeline_split": (["auto", "even", "1,1", "garbage"], ["", 3, ["auto"]]),
        "allow_oversubscribed": ([False, True], [0, 1, "yes"]),
        "overlap": ([False, True], [0, "no"]),
        "progress": ([False], [1, "yes"]),
        "workload": ([Workload("offline", 8, 64, 8), Workload("concurrency", 8, 32, 4,
                                                              concurrency=2),
                      Workload("rate", 8, 64, 8, rate=10.0)],
                     ["offline", 3, Workload("trace", pairs=[(8, 4)], arrivals=[0.0])]),
        "model": ([TINY_SPEC, TINY_MOE_SPEC, str(TINY_FILE)], [None, 3, ["tiny"], ""]),
        "hw": (["H100-SXM", "B200"], [None, 3, [], ""]),
        "moe_loads": ([None], [3, "", []]),
    }


PLANNERS = _planners()
POOLS = _parameter_pools()


@st.composite
def planner_calls(draw):
    import inspect
    name = draw(st.sampled_from(sorted(PLANNERS)))
    fn, base = PLANNERS[name]
    kwargs = dict(base)
    params = [p for p in inspect.signature(fn).parameters if p in POOLS]
    bad = []
    for p in draw(st.lists(st.sampled_from(params), min_size=1, max_size=3, unique=True)):
        valid, invalid = POOLS[p]
        if draw(st.integers(0, 2)) == 0:
            kwargs[p] = draw(st.sampled_from(invalid))
            bad.append(p)
        else:
            kwargs[p] = draw(st.sampled_from(valid))
    return name, kwargs, bad


@fuzz(PLANNER_CASES)
@given(planner_calls())
def test_planner_arguments(call):
    name, kwargs, bad = call
    fn = PLANNERS[name][0]
    try:
        result = fn(**kwargs)
    except InputError as e:
        assert e.problems and all("\n" not in p for p in e.problems)
        # a parameter known to be wrong is named at the start of a line
        # (framework(name) names what plan_training calls it: `framework`)
        bad = ["framework" if k == "name" else k for k in bad]
        assert all(any(p.startswith(f"{k}: ") for p in e.problems) for k in bad), \
            (bad, e.problems)
        event("InputError")
        return
    assert not bad, (name, bad, "accepted")
    event("returned")
    if isinstance(result, tuple):  # search_training_plans: (plans, tried, refused)
        result = result[0]
    for r in result if isinstance(result, list) else [result]:
        d = r.to_dict() if hasattr(r, "to_dict") else (r if isinstance(r, dict) else {})
        finite_numbers(d, name)


# ---- sweep spaces --------------------------------------------------------------------------
SWEEP_INT_VALUES = st.one_of(st.sampled_from([1, 2, 4, 16, 128, 2 ** 20, 2 ** 40]),
                             st.sampled_from(NUMBERS + JUNK), log_int(1, 44))
RANGES = st.one_of(
    st.fixed_dictionaries({"range": st.lists(st.sampled_from(NUMBERS[:16] + [1, 4, 16, 64]),
                                             min_size=3, max_size=3)}),
    st.fixed_dictionaries({"geometric": st.lists(st.sampled_from(NUMBERS[:16] + [1, 2, 64]),
                                                 min_size=3, max_size=3)}),
    st.just({"range": [1, 10 ** 400, 1]}), st.just({"geometric": [1, 10 ** 400, 2]}),
    st.just({"range": [-1e300, 1e300, 1e-300]}))


def _bad_model_int(key, v) -> bool:
    if isinstance(v, list):
        return any(_bad_model_int(key, x) for x in v)
    if isinstance(v, dict):
        return False  # a range form: its own rules
    hi = MAX_GPUS if key in ("tp", "ep", "pp", "dp", "gpus", "virtual_stages") else MAX_ELEMENTS
    return isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= hi


@st.composite
def sweep_spaces(draw):
    grids, must_fail = [], False
    for _ in range(draw(st.integers(1, 2))):
        if draw(st.booleans()):
            g = {"model": draw(st.sampled_from(["tiny.yaml", "tiny-moe.yaml", ["tiny.yaml"],
                                                "nope", 3])),
                 "hw": draw(st.sampled_from(["h100", ["h100", "b200"], "v100", None])),
                 "phase": draw(st.sampled_from(["decode", "prefill", "train", ["decode",
                                                                               "prefill"],
                                                "nope"]))}
            for key in draw(st.lists(st.sampled_from(["batch", "seq", "context", "isl", "osl",
                                                      "tp", "ep", "pp", "dp", "gpus",
                                                      "microbatches", "virtual_stages"]),
                                     max_size=3, unique=True)):
                v = draw(st.one_of(SWEEP_INT_VALUES, st.lists(SWEEP_INT_VALUES, min_size=1,
                                                              max_size=3), RANGES))
                g[key] = v
                must_fail |= _bad_model_int(key, v)
        else:
            g = {"op": "gemm", "hw": "h100", "dtype": draw(st.sampled_from(["bf16", "fp8", 3])),
                 "m": draw(st.one_of(SWEEP_INT_VALUES, RANGES)), "n": 256, "k": 256}
            must_fail |= g["dtype"] == 3
        grids.append(g)
    return {"grids": grids}, must_fail


@fuzz(SWEEP_CASES)
@given(sweep_spaces())
def test_sweep_spaces(case):
    space, must_fail = case
    path = _write("space.yaml", yamlio.dump(space))
    code, out, err = cli("sweep", path, "--count")
    if must_fail:
        assert code == 2, (space, out)
        return
    if code == 2 or int(out) > 12:  # a space that is big but valid: counted, not run
        return
    code, out, err = cli("sweep", path)
    assert code == 0, err
    for row in csv.DictReader(io.StringIO(out)):
        if not row["error"]:
            t = float(row["time_s"])
            assert math.isfinite(t) and t > 0, row
            if row["tokens_per_s"]:
                assert math.isfinite(float(row["tokens_per_s"]))


# ---- plan serve and moe options ------------------------------------------------------------
OPTION_VALUES = ["0", "-1", "1", "2", "8", "x", "", "nan", "inf", "1e400", str(2 ** 63),
                 str(MAX_SEED), "9" * 30, "0.5", "-0"]
SERVE_FLAGS = {"--seed": (0, MAX_SEED), "--requests": (1, 100_000), "--isl": (1, MAX_ELEMENTS),
               "--osl": (1, MAX_ELEMENTS), "--concurrency": (1, MAX_ELEMENTS),
               "--gpus": (1, MAX_GPUS), "--tp": (1, MAX_GPUS)}
FAST = {"--requests": 16, "--isl": 256, "--osl": 32, "--concurrency": 16, "--gpus": 2,
        "--tp": 2}


@st.composite
def option_lines(draw):
    if draw(st.booleans()):
        argv = ["plan", "serve", TINY_FILE, "--hw", "h100", "--gpus", "1", "--jobs", "1",
                "--requests", "8", "--isl", "64", "--osl", "8", "--format", "json"]
        must_fail = []
        for flag in draw(st.lists(st.sampled_from(sorted(SERVE_FLAGS)), min_size=1,
                                  max_size=2, unique=True)):
            v = draw(st.sampled_from(OPTION_VALUES))
            lo, hi = SERVE_FLAGS[flag]
            try:
                n = int(v)
            except ValueError:
                must_fail.append(f"usage {flag}")
            else:
                if not lo <= n <= hi:
                    must_fail.append(flag)
                elif flag in FAST and n > FAST[flag]:
                    v = str(FAST[flag])  # valid but slow: keep the example short
            argv += [flag, v]
        return argv, must_fail
    argv = ["moe", "--model", TINY_MOE_FILE, "--hw", "h100", "--gpus", "2",
            "--tokens-per-gpu", "4", "--format", "json"]
    dtype = draw(st.sampled_from(["bf16", "FP8", "nvfp4", "", "int3", "x"]))
    seed = draw(st.sampled_from(["0", "-1", str(MAX_SEED), str(2 ** 63)]))
    argv += ["--dtype", dtype, "--seed", seed]
    must_fail = ([] if dtype.lower() in ("bf16", "fp8", "nvfp4") else ["--dtype"]) + \
        ([] if 0 <= int(seed) <= MAX_SEED else ["--seed"])
    return argv, must_fail


@fuzz(OPTION_CASES)
@given(option_lines())
def test_plan_serve_and_moe_options(case):
    argv, must_fail = case
    code, out, err = cli(*argv)
    if must_fail:
        # argparse stops at the first value that is not an integer; the rest are all named
        usage = [f for f in must_fail if f.startswith("usage ")]
        assert code == 2, (argv, out[:200])
        assert any(names(err, f[6:]) for f in usage) if usage else \
            all(names(err, f) for f in must_fail), (argv, err)
        return
    if code == 0:
        d = no_nan(out)
        finite_numbers(d)
