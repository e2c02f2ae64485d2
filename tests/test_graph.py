"""Graph files: loading, every validation failure mode, the dependency/stream DAG view."""
from __future__ import annotations

import pytest

import perfmodel as pm
from perfmodel.graph import parse_graph


def g(*ops, **top):
    return {"schema_version": 1, "name": "t", "ops": list(ops), **top}


GEMM = {"op": "gemm", "m": 4096, "n": 4096, "k": 4096, "dtype": "bf16"}


@pytest.mark.parametrize("raw, message", [
    (g({**GEMM, "op": "gemmm"}), "ops[0] (gemmm0): unknown op 'gemmm'"),
    (g({**GEMM, "mm": 1}), "ops[0] (gemm0).mm: unknown parameter for op 'gemm'"),
    (g({**GEMM, "m": -3}), "ops[0] (gemm0).m: expected an integer >= 1, got -3"),
    (g({**GEMM, "dtype": 7}), "ops[0] (gemm0).dtype: expected a dtype (fp32"),
    (g({k: v for k, v in GEMM.items() if k != "k"}), "ops[0] (gemm0).k: missing required"),
    (g({**GEMM, "name": "a"}, {**GEMM, "name": "a"}), "ops[1] (a).name: duplicate name"),
    (g({**GEMM, "name": "a", "after": ["nope"]}), "ops[0] (a).after: unknown op 'nope'"),
    (g({**GEMM, "name": "a", "after": ["b"]}, {**GEMM, "name": "b", "after": ["a"]}),
     "dependency cycle"),
    (g({**GEMM, "name": "a", "after": "a"}), "depends on itself"),
    (g(), "ops: expected a non-empty list"),
    (g(GEMM, extra=1), "extra: unknown key"),
    (g(GEMM, schema_version=3), "schema_version: expected 1"),
    (g("gemm"), "ops[0]: expected a mapping"),
])
def test_bad_graphs_name_the_key_path(raw, message):
    with pytest.raises(pm.InputError) as e:
        parse_graph(raw, "bad.yaml")
    assert message in str(e.value)
    assert all(p.startswith("bad.yaml") for p in e.value.problems)


def test_dag_view_has_dependency_and_stream_edges():
    raw = g({**GEMM, "name": "a"}, {**GEMM, "name": "b", "after": [], "stream": "s2"},
            {**GEMM, "name": "c", "after": ["a", "b"]}, {**GEMM, "name": "d", "stream": "s2",
                                                           "after": []})
    dag = parse_graph(raw).dag()
    assert set(dag.edges) == {("a", "c"), ("b", "c"), ("b", "d"), ("a", "c")}
