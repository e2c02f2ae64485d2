"""Issue 42: the newer inputs — Hugging Face configs, SOL-ExecBench definitions and coverage
CSVs, the Python planners' arguments, `plan serve` / `moe` / `sweep` options — give exit 2 (CLI)
or an InputError (API) with one line naming the key, flag or parameter, never a traceback; and
no result is ever a non-finite or negative number (the guard: InternalError). One regression
test per root cause of the issue; tests/test_fuzz_newer.py is the fuzz suite that keeps it so."""
from __future__ import annotations

import copy
import csv
import dataclasses
import gzip
import io
import json
import math

import pytest

import perfmodel as pm
from perfmodel.errors import InputError, InternalError, check_result
from perfmodel.sol.problems import DEFAULT_CSV
from tests.fuzzing import cli

LLAMA = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
         "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
         "vocab_size": 128256, "hidden_act": "silu", "tie_word_embeddings": False}
GEMM_DEF = {"name": "g", "op_type": "gemm", "axes": {"M": {"type": "var"},
                                                     "N": {"type": "const", "value": 256},
                                                     "K": {"type": "const", "value": 256}},
            "inputs": {"A": {"shape": ["M", "K"], "dtype": "float16"},
                       "B": {"shape": ["N", "K"], "dtype": "float16"}},
            "outputs": {"C": {"shape": ["M", "N"], "dtype": "float16"}}}


def _error(code_out_err) -> str:
    code, _, err = code_out_err
    assert code == 2 and len([e for e in err if "error" in e]) >= 1, err
    return err[0]


# ---- models import ---------------------------------------------------------------------------
@pytest.mark.parametrize("change, says", [
    (dict(hidden_size=[]), "hidden_size: expected an integer, got []"),
    (dict(hidden_size="x"), "hidden_size: expected an integer, got 'x'"),
    (dict(vocab_size=None), "vocab_size: missing"),
    (dict(num_attention_heads=0), "num_attention_heads: expected an integer >= 1, got 0"),
    (dict(hidden_size=64.5), "hidden_size: expected an integer, got 64.5 (not a whole number)"),
    (dict(num_hidden_layers=5000), "num_hidden_layers: expected an integer <= 4096"),
    (dict(tie_word_embeddings="false"), "tie_word_embeddings: expected true or false"),
    (dict(num_experts=8), "num_experts_per_tok: missing"),
    (dict(kv_lora_rank=512), "qk_nope_head_dim: missing"),
    (dict(attn_config=[1]), "attn_config: expected an object, got [1]"),
    (dict(hidden_size=16), "a head dimension of 0"),
    (dict(num_key_value_heads=3), "(as a model file): kv_heads: must divide heads"),
    (dict(q_lora_rank=2 ** 33, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
          v_head_dim=128), "params_total.value: expected a parameter count in [1, 1e+15]"),
])
def test_hf_config_values_name_the_key(tmp_path, change, says):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({k: v for k, v in {**LLAMA, **change}.items() if v is not None}))
    line = _error(cli("models", "import", p))
    assert str(p) in line and says in line, line


@pytest.mark.parametrize("data, says", [
    (b'{"hidden_size": 1e400}', "number 1e400 is out of range"),
    (b'{"a": "\xff"}', "not UTF-8 text (byte 0xff at line 1, column 8)"),
    (b"[" * 3000, "nested deeper than 100 levels"),
    (b'{"hidden_size": NaN}', "NaN is not a JSON number"),
])
def test_hf_config_bytes_are_read_by_the_json_reader(tmp_path, data, says):
    p = tmp_path / "config.json"
    p.write_bytes(data)
    assert says in _error(cli("models", "import", p))


def test_hf_import_output_and_params_are_checked_first(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(LLAMA))
    assert "--output" in _error(cli("models", "import", p, "-o", tmp_path))
    assert "no such directory" in _error(cli("models", "import", p, "-o",
                                             tmp_path / "missing" / "x.yaml"))
    for bad in ("nan", "inf", "-1", "0", "1e16"):
        assert _error(cli("models", "import", p, "--params", bad)).startswith(
            "perfmodel: error: --params: expected a parameter count in [1, 1e+15]")
    out = tmp_path / "m.yaml"
    assert cli("models", "import", p, "-o", out, "--params", "8.03e9")[0] == 0
    assert pm.load_model(str(out)).params_total_stated == 8.03e9


# ---- sol definitions and coverage CSVs -------------------------------------------------------
def _definition(tmp_path, raw, workloads='{"uuid": "a", "axes": {"M": 64}}\n'):
    d = tmp_path / "definition.json"
    d.write_text(raw if isinstance(raw, str) else json.dumps(raw))
    (tmp_path / "workload.jsonl").write_text(workloads)
    return d


@pytest.mark.parametrize("change, workloads, says", [
    (("inputs", "A", "dtype", []), None, "inputs.A.dtype: expected a torch dtype"),
    (("inputs", "A", "shape", ["M", 10 ** 400]), None,
     "inputs.A.shape[1]: expected an integer <= 2^40"),
    (("inputs", "A", "shape", ["M", -4]), None,
     "inputs.A.shape[1]: expected a non-negative integer, got -4"),
    (("axes", "K", "value", 10 ** 400), None, "axes.K.value: expected an integer <= 2^40"),
    (("axes", "X", None, {"type": "expr", "expression": "2 ** 2 ** 40"}), None,
     "leaves the integers perfmodel can size (beyond 2^128"),
    (("axes", "X", None, {"type": "expr", "expression": "(-8) ** 0.5"}), None,
     "not a real number"),
    (None, '{"uuid": "a", "axes": {"M": ' + "9" * 400 + "}}\n",
     "axes.M: expected an integer <= 2^40"),
    (None, "[" * 3000 + "\n", "workload.jsonl:1: nested deeper than 100 levels"),
    (("inputs", "A", "shape", ["M", "K", "K", "K"]), '{"uuid": "a", "axes": {"M": 65537}}\n',
     "elements: expected at most 2^40 in one tensor"),
])
def test_sol_definitions_name_the_key(tmp_path, change, workloads, says):
    raw = copy.deepcopy(GEMM_DEF)
    if change:
        group, name, key, value = change
        if key is None:
            raw[group][name] = value
        else:
            raw[group][name][key] = value
    d = _definition(tmp_path, raw, workloads or '{"uuid": "a", "axes": {"M": 64}}\n')
    line = _error(cli("sol", d, "--hw", "B200"))
    assert says in line, line


def test_sol_deep_definition_and_coverage_flags(tmp_path):
    assert "nested deeper" in _error(cli("sol", _definition(tmp_path, "[" * 3000), "--hw",
                                         "B200"))
    # --coverage runs on SOLAR's arch file: a --sm-clock (nan or not) is refused, not ignored
    for argv in (["--sm-clock", "nanMHz"], ["--sm-clock", "1500MHz"], ["--hw", "h100"]):
        assert "--coverage cross-checks on SOLAR's B200" in _error(cli("sol", "--coverage",
                                                                       *argv))


with io.StringIO(gzip.decompress(DEFAULT_CSV.read_bytes()).decode()) as _f:
    _CSV = list(csv.reader(_f))


@pytest.mark.parametrize("column, value, says", [
    ("axes_json", "[]", "axes_json: expected an object of axis name → integer, got []"),
    ("axes_json", '{"batch_size": 1e400}', "axes_json: not JSON: number 1e400"),
    ("T_SOL_ms", "0", "T_SOL_ms: expected a time in ms in [1e-12, 1e+12] or empty, got '0'"),
    ("T_SOL_ms", "nan", "T_SOL_ms: expected a time in ms"),
    ("T_SOL_ms", "", "T_SOL_ms: missing (the cross-check compares with the published bound)"),
    ("shapes_dtypes_json", "[" * 3000, "shapes_dtypes_json: nested deeper than 100 levels"),
    ("shapes_dtypes_json", '{"inputs": {"x": [[6, 2048], []]}, "outputs": {}}',
     "shapes_dtypes_json.inputs.x: dtype: expected a torch dtype"),
    ("shapes_dtypes_json", '{"inputs": {"x": [[6.5], "float32"]}, "outputs": {}}',
     "shapes_dtypes_json.inputs.x: shape[0]: expected a non-negative integer, got 6.5"),
    ("workload_index", "-1", "workload_index: expected an integer in [0, 2147483647], got '-1'"),
])
def test_coverage_csv_cells_name_the_column(tmp_path, column, value, says):
    row = list(_CSV[1])
    row[_CSV[0].index(column)] = value
    p = tmp_path / "w.csv"
    with p.open("w", newline="") as f:
        csv.writer(f).writerows([_CSV[0], row])
    line = _error(cli("sol", "--coverage", p))
    assert f"{p}:2: " in line and says in line, line


def test_coverage_of_a_zero_size_cache_maps_to_none():
    """A zero-size dimension (cache_len 0 is in the shipped table) makes no op, not a
    ZeroDivisionError: SOLAR's memory bound of the I/O still applies."""
    from perfmodel.sol.mapping import map_workload
    from perfmodel.sol.problems import Tensor, Workload
    w = Workload("FlashInfer-Bench__012_gqa_paged_decode", 0, "u",
                 {"batch_size": 1, "head_dim": 128, "num_kv_heads": 4, "num_kv_indices": 7,
                  "page_size": 1},
                 {"q": Tensor("q", (1, 32, 128), "bfloat16"),
                  "k_cache": Tensor("k_cache", (0, 1, 4, 128), "bfloat16"),
                  "v_cache": Tensor("v_cache", (8, 1, 4, 128), "bfloat16"),
                  "kv_indptr": Tensor("kv_indptr", (2,), "int32"),
                  "kv_indices": Tensor("kv_indices", (7,), "int32")},
                 {"output": Tensor("output", (1, 32, 128), "bfloat16")})
    m = map_workload(w)
    assert m.status == "none" and "zero-size" in m.reason


# ---- the planners ----------------------------------------------------------------------------
def test_planner_arguments_name_the_parameter():
    from perfmodel.plan.search import search_serving
    from perfmodel.plan.serving import plan_serving
    from perfmodel.plan.simulator import Workload
    from perfmodel.plan.training import plan_training
    for kw, key in ((dict(prompt="8"), "prompt"), (dict(pp="2"), "pp"), (dict(output=0), "output"),
                    (dict(prompt=math.inf), "prompt"), (dict(output=10 ** 400), "output"),
                    (dict(ttft_slo_s=10 ** 400), "ttft_slo_s"), (dict(batches=[2 ** 40]),
                                                                 "batches"),
                    (dict(batches=[-1]), "batches"), (dict(ttft_slo_s=-1), "ttft_slo_s"),
                    (dict(tpot_slo_s=math.nan), "tpot_slo_s"), (dict(prompt=-1), "prompt"),
                    (dict(batches=[0]), "batches")):
        with pytest.raises(InputError, match=f"^{key}: "):
            plan_serving("llama3-8b", "H100-SXM", **kw)
    with pytest.raises(InputError, match="^batch: expected a positive integer, got None"):
        plan_training("llama3-8b", "H100-SXM", batch=None)
    with pytest.raises(InputError, match="^gpus: "):
        search_serving("llama3-8b", "H100-SXM", None, jobs=1)
    with pytest.raises(InputError, match="^engine: "):
        search_serving("llama3-8b", "H100-SXM", 1, engine=["vllm"], jobs=1)
    # a valid trace workload: refused at the entry, not a TypeError inside a layout
    with pytest.raises(InputError, match="^workload: mode 'trace'"):
        search_serving("llama3-8b", "H100-SXM", 1, Workload("trace", pairs=[(8, 4)],
                                                              arrivals=[0.0]), jobs=1)


# ---- CLI options -----------------------------------------------------------------------------
def test_cli_options_name_the_flag(tmp_path):
    assert _error(cli("plan", "serve", "llama3-8b", "--hw", "h100", "--gpus", "1", "--seed",
                      "-1")).startswith("perfmodel: error: --seed: expected an integer in [0, ")
    assert _error(cli("moe", "--model", "qwen3-30b-a3b", "--hw", "h100", "--dtype", "")) \
        .startswith("perfmodel: error: --dtype: expected one of")
    space = tmp_path / "s.yaml"
    space.write_text("grids:\n  - {model: llama3-8b, hw: h100, phase: decode, gpus: 1"
                     + "0" * 400 + "}\n")
    assert "grids[0].gpus: expected an integer <= 2^20" in _error(cli("sweep", space))
    space.write_text("grids:\n  - {model: llama3-8b, hw: h100, phase: decode, batch: "
                     "{geometric: [1, 1" + "0" * 400 + ", 2]}}\n")
    assert "of magnitude at most 1e300" in _error(cli("sweep", space))


def test_shared_memory_below_what_a_cta_has_always_had_is_refused(tmp_path):
    """The schema's minimum (48 KiB, every GPU since compute capability 2.0) is a GPU the
    kernels can run on: no numpy division-by-zero warning and source line before an error."""
    from perfmodel.hardware import builtin_spec_dir
    import re
    import warnings
    text = (builtin_spec_dir() / "H100-SXM.yaml").read_text()
    low = re.sub(r"(smem_per_(?:cta|sm)_bytes: \{value: )\d+", r"\g<1>1024", text)
    (tmp_path / "low.yaml").write_text(low)
    assert "out of range [49152" in _error(cli("hw", "show", tmp_path / "low.yaml"))
    floor = re.sub(r"(smem_per_(?:cta|sm)_bytes: \{value: )\d+", r"\g<1>49152", text)
    (tmp_path / "floor.yaml").write_text(floor)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning would fail here
        code, _, err = cli("op", "gemm", "m=4096", "n=4096", "k=4096", "dtype=bf16", "--hw",
                           tmp_path / "floor.yaml")
    assert code == 2 and len(err) == 1 and "shared memory" in err[0]


# ---- the guard: no non-finite or negative result ---------------------------------------------
def test_check_result_refuses_non_finite_and_negative_numbers():
    check_result("ok", {"a": 0, "b": 1.5, "c": None, "d": True, "e": "text", "f": 10 ** 400})
    for bad in (math.nan, math.inf, -math.inf, -1e-9, -1):
        with pytest.raises(InternalError, match="a result must be a finite, non-negative"):
            check_result("x", {"t": bad})


def test_predictions_refuse_a_bad_number(monkeypatch):
    import importlib
    predict_mod = importlib.import_module("perfmodel.predict")  # (pm.predict is the function)
    gemm = pm.ops.op("gemm", m=64, n=64, k=64, dtype="bf16")
    est, est_hw = pm.predict_op(gemm, "H100-SXM"), pm.hardware("H100-SXM")
    with pytest.raises(InternalError, match=r"Gemm\(m=64.* on H100-SXM: time_s = nan"):
        predict_mod.check_estimate(dataclasses.replace(est, time_s=math.nan), gemm, est_hw)
    graph = pm.build_graph(pm.load_model("llama3-8b"), "decode", batch=1, seq=128)
    real = predict_mod.schedule
    monkeypatch.setattr(predict_mod, "schedule", lambda *a: dataclasses.replace(
        real(*a), total_time_s=-1.0))
    with pytest.raises(InternalError, match="total_time_s = -1.0"):
        pm.predict(graph, "H100-SXM")


def test_planners_refuse_a_bad_number(monkeypatch):
    from perfmodel.plan import frameworks
    from perfmodel.plan.search import checked
    from perfmodel.plan.serving import plan_serving
    from perfmodel.plan.simulator.cost import StepCost
    from perfmodel.plan.training import plan_training
    monkeypatch.setattr(StepCost, "step_times", lambda self, *a, **k: (math.nan, math.nan))
    with pytest.raises(InternalError, match="plan_serving batch 1: tpot_s = nan"):
        plan_serving("llama3-8b", "H100-SXM", batches=[1])
    # savings larger than the step: a negative step time is refused, not returned
    monkeypatch.setattr(frameworks, "microbatch_savings_s", lambda *a, **k: {"saved": 1e3})
    with pytest.raises(InternalError, match="plan_training.*step_time_s = -"):
        plan_training("llama3-8b", "H100-SXM", batch=1, seq=1024, allow_oversubscribed=True)
    with pytest.raises(InternalError, match="search row TP1"):
        checked([{"layout": "TP1", "point": "workload", "tpot_p50_s": math.inf}])
