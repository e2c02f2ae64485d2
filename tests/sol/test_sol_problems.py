"""The definition.json / workload.jsonl reader and the workloads CSV (perfmodel/sol/problems.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfmodel.errors import InputError
from perfmodel.sol.problems import (by_problem, load_definition, parse_definition, read_csv,
                                    read_workloads)

FIXTURES = Path(__file__).parent / "fixtures"
LINEAR = FIXTURES / "gemm_rmsnorm" / "definition.json"


def test_fixture_axes_shapes_and_bytes():
    d = load_definition(LINEAR)
    assert d.name == "fixture_linear_rmsnorm_h2048" and d.var_axes == ["batch_size", "seq_len"]
    assert len(d.workloads) == 3  # a blank line skipped; a trace-wrapped line unwrapped
    w = d.workload()
    assert w.axes == {"batch_size": 4, "seq_len": 512, "hidden_size": 2048, "tokens": 2048,
                      "out_features": 4096}
    assert w.inputs["residual"].shape == (2048, 2048)      # the expr axis
    assert w.inputs["eps"].shape is None and w.inputs["eps"].bytes == 4
    assert w.outputs["output"].shape == (4, 512, 4096)
    assert w.io_bytes == (2 * 2048 * 2048 + 2048 + 4096 * 2048 + 2048 * 4096) * 2 + 4


def test_workload_by_index_and_uuid():
    d = load_definition(LINEAR)
    assert d.workload(1).axes["tokens"] == 7
    assert d.workload("2").axes["tokens"] == 16 * 4096
    assert d.workload("0b0e5a9e-0000-4000-8000-000000000002").index == 1
    with pytest.raises(InputError, match="--workload: index 5 out of range"):
        d.workload(5)
    with pytest.raises(InputError, match="no workload with uuid 'nope'"):
        d.workload("nope")


def _raw(**changes):
    raw = json.loads(LINEAR.read_text())
    raw.update(changes)
    return raw


@pytest.mark.parametrize("change, message", [
    (dict(axes={"M": {"type": "range"}}), "axes.M.type: expected one of const, var, expr"),
    (dict(axes={"M": {"type": "const", "value": -1}}), "axes.M.value: expected a non-negative"),
    (dict(axes={"M": {"type": "expr", "expression": "M.__class__"}}), "axes.M.expression"),
    (dict(inputs={"x": {"shape": ["Q"], "dtype": "bfloat16"}}, outputs={}, axes={}),
     "inputs.x.shape[0]: unknown axis 'Q'"),
    (dict(inputs={"x": {"shape": [4], "dtype": "bf16"}}), "inputs.x.dtype: expected a torch"),
])
def test_bad_definitions_name_the_key(change, message):
    with pytest.raises(InputError) as e:
        parse_definition(_raw(**change), "def.json")
    assert any(message in p for p in e.value.problems), e.value.problems
    assert all(p.startswith("def.json: ") for p in e.value.problems)


def test_missing_var_axis_and_bad_workload_lines(tmp_path):
    d = parse_definition(_raw(), "def.json")
    with pytest.raises(InputError, match="axes.seq_len: missing"):
        d.resolve({"batch_size": 2})
    with pytest.raises(InputError, match="axes.nope: not a var axis"):
        d.resolve({"batch_size": 2, "seq_len": 2, "nope": 1})
    bad = tmp_path / "workload.jsonl"
    bad.write_text('{"uuid": "a", "axes": {"batch_size": 1, "seq_len": 1}}\nnot json\n')
    with pytest.raises(InputError, match=r"workload.jsonl:2: not JSON"):
        read_workloads(bad, d)


def test_the_workloads_csv():
    ws = read_csv()
    assert len(ws) == 3957
    problems = by_problem(ws)
    assert len(problems) == 235
    w = problems["FlashInfer-Bench__004_gemm_n128_k2048"][0]
    assert w.inputs["A"].shape == (6, 2048) and w.inputs["A"].kind == "fp16"
    assert w.published_sol_s == pytest.approx(0.0005e-3)
    fp4 = problems["Quant__020_nvfp4_linear_layer"][0].inputs["weight_fp4"]
    assert fp4.kind == "nvfp4" and fp4.element_bytes == 1.0  # a packed pair per element
