"""Bad input never escapes as anything but an InputError (SPEC: exit 2, no traceback)."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import perfmodel as pm
from perfmodel.graph import parse_graph
from perfmodel.hardware import parse_spec
from perfmodel.workloads.models import parse_model
from tests.fuzzing import fuzz

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10, 10**6),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8))
values = st.recursive(scalars, lambda c: st.one_of(st.lists(c, max_size=3),
                                                   st.dictionaries(st.text(max_size=6), c,
                                                                   max_size=3)), max_leaves=8)
op_names = st.sampled_from(["gemm", "attention", "rng", "moe", "norm", "nope", 3])
param_names = st.sampled_from(["m", "n", "k", "dtype", "batch", "heads", "seq_q", "head_dim",
                               "elements", "tokens", "experts", "top_k", "gpus", "after",
                               "stream", "name", "rows", "cols", "x"])
op_entries = st.dictionaries(param_names, values, max_size=6).flatmap(
    lambda d: op_names.map(lambda o: {**d, "op": o}))


# fuzzing keeps its own, larger budgets (the profile's derandomization still applies; nightly
# runs 20x as many: tests/fuzzing.py `fuzz`)
@pytest.mark.slow  # ~3 s: every example parses and predicts a graph
@fuzz(300)
@given(st.lists(op_entries, max_size=4), st.one_of(st.none(), values))
def test_graphs_fail_only_with_input_errors(entries, extra):
    raw = {"ops": entries}
    if extra is not None:
        raw["hardware"] = extra
    try:
        g = parse_graph(raw, "fuzz.yaml")
    except pm.InputError:
        return
    try:
        pm.predict(g, "H100-SXM")
    except pm.InputError:
        pass


@fuzz(150)
@given(values)
def test_specs_and_models_fail_only_with_input_errors(raw):
    for parse in (parse_spec, parse_model):
        try:
            parse(raw, "fuzz.yaml")
        except pm.InputError:
            pass


def _param_value(p):
    if p.kind == "int":
        return st.integers(1 if (p.lo or 0) >= 1 else 0, 70000)
    if p.kind == "float":
        return st.floats(0.0, 1e9, allow_nan=False)
    if p.kind == "bool":
        return st.booleans()
    if p.kind in ("choice", "dtype"):
        from perfmodel.units import DTYPES
        return st.sampled_from(list(p.choices or DTYPES))
    return st.just(None)


OPS = sorted(pm.ops.REGISTRY)


@pytest.mark.slow  # 1-5 s: 400 ops built and predicted
@fuzz(400)
@given(st.sampled_from(OPS), st.data(), st.sampled_from(["H100-SXM", "B200", "A100-SXM"]))
def test_ops_with_arbitrary_valid_typed_parameters(name, data, hw):
    cls = pm.ops.REGISTRY[name]
    params = dict(cls.EXAMPLE)
    for key in data.draw(st.lists(st.sampled_from(sorted(cls.PARAMS)), max_size=3, unique=True)):
        if cls.PARAMS[key].kind == "path":
            continue
        params[key] = data.draw(_param_value(cls.PARAMS[key]))
    try:
        op = pm.ops.op(name, **params)
        est = pm.predict_op(op, hw)
    except pm.InputError:
        return
    assert est.time_s > 0
