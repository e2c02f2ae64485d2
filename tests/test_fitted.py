"""perfmodel/fitted.yaml, the one home of the fitted constants: it is what a fresh fit writes, its
values lie in their ranges, its loader is strict, and everything else reads from it."""
from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest

import perfmodel as pm
from perfmodel import fitted, yamlio
from perfmodel.ops.attention import op as attention
from perfmodel.validation import fit
from perfmodel.validation.measurements import FITTED_ROWS

TEXT = fitted.PATH.read_text()


@pytest.fixture(scope="module")
def fresh():
    """A fresh fit of every constant, in-process (about a second)."""
    return fit.fit_all()


def test_file_is_what_a_fresh_fit_writes(fresh):
    assert list(fresh) == list(fitted.CONSTANTS)
    for key, entry in fresh.items():
        c = fitted.CONSTANTS[key]
        assert c.value == entry["value"], key  # equal after the fit's rounding
        assert list(c.fitted_on) == entry["fitted_on"], key
        assert list(c.range) == entry["range"] and c.rule == entry["rule"], key
    assert fit.render(fresh) == TEXT  # what `--check` compares, comments included


def test_render_round_trips_through_the_loader(fresh):
    parsed = yamlio.loads(fit.render(fresh))
    assert parsed == fresh


def test_fitted_on_comes_from_the_selection_rules(fresh):
    from perfmodel.validation.measurements import PUBLIC_CSV, load_cases
    cases, _ = load_cases(PUBLIC_CSV)
    rows = [c.id for c in fit.attention_fit_rows(cases)]
    for key in fit.ATTENTION_KEYS.values():
        assert list(fitted.CONSTANTS[key].fitted_on) == rows
    assert fitted.CONSTANTS["tensor_sustained_fraction"].fitted_on == (fit.MAMF_ROW,)
    assert fitted.CONSTANTS["attention.softmax_overlap.fa4"].fitted_on == (fit.FA4_ROW,)
    # the training clock: the Megatron-Core configurations, one row each, no PyTorch run
    clock = fitted.CONSTANTS["training.sm_clock_fraction"].fitted_on
    assert list(clock) == [r.id for r in fit.training_clock_fit_rows()] and len(clock) >= 80
    assert not [r for r in clock if r.split("-")[0] in ("LF", "AO", "AM")]


def test_fit_does_not_depend_on_the_values_it_replaces(fresh, monkeypatch):
    """The fit starts from fixed points and sets every constant it depends on: with the module's
    values deleted (NaN) it writes the same file."""
    for f in attention.SOFTMAX_OVERLAP:
        monkeypatch.setitem(attention.SOFTMAX_OVERLAP, f, math.nan)
    for name in ("MMA_SYNC_FRACTION", "MMA_SYNC_FRACTION_TCGEN05", "CTA_ROUND_TRIPS",
                 "MMA_SYNC_OPERAND_OVERLAP"):
        monkeypatch.setattr(attention, name, math.nan)
    from perfmodel.ops import deepep
    monkeypatch.setattr(deepep, "COPY_ROUND_TRIPS", math.nan)
    monkeypatch.setattr(deepep, "COPY_ROUND_TRIPS_BLACKWELL", math.nan)
    for k in deepep.FIXED_S:
        monkeypatch.setitem(deepep.FIXED_S, k, math.nan)
    assert fit.fit_all() == fresh
    assert math.isnan(attention.CTA_ROUND_TRIPS)  # the fit put back what it found


def test_attention_fit_uses_the_sustained_fraction_it_is_given():
    """The hardware's loaded sustained fraction (from fitted.yaml) does not leak into the fit."""
    import dataclasses
    from perfmodel.validation.measurements import PUBLIC_CSV, load_cases
    cases, _ = load_cases(PUBLIC_CSV)
    off = [dataclasses.replace(c, hardware=dataclasses.replace(
        c.hardware, tensor_sustained_fraction=0.9)) for c in cases]
    s = fitted.value("tensor_sustained_fraction")
    assert fit.fit_attention(off, s) == fit.fit_attention(cases, s)


def test_every_value_lies_in_its_range():
    for key, c in fitted.CONSTANTS.items():
        assert c.range[0] <= c.value <= c.range[1], key
        assert c.script == fitted.SCRIPT and c.meaning and c.rule and c.fitted_on, key
        assert tuple(c.range) == fit.SPECS[key][0], key


def test_everything_reads_the_file():
    assert attention.SOFTMAX_OVERLAP == {f: fitted.value(f"attention.softmax_overlap.{f}")
                                         for f in ("fa2", "fa3", "fa4", "cudnn")}
    assert attention.MMA_SYNC_FRACTION == fitted.value("attention.mma_sync_fraction")
    assert attention.MMA_SYNC_OPERAND_OVERLAP == fitted.value(
        "attention.mma_sync_operand_overlap")
    assert attention.CTA_ROUND_TRIPS == fitted.value("attention.cta_round_trips")
    assert attention.MMA_SYNC_FRACTION_TCGEN05 == fitted.value(
        "attention.mma_sync_fraction.tcgen05")
    from perfmodel.ops import deepep
    assert deepep.COPY_ROUND_TRIPS == fitted.value("deepep.copy_round_trips")
    assert deepep.COPY_ROUND_TRIPS_BLACKWELL == fitted.value("deepep.copy_round_trips.blackwell")
    assert deepep.FIXED_S == {(m, p): fitted.value(f"deepep.fixed_s.{m}.{p}")
                              for m in deepep.MODES for p in deepep.PHASES}
    for hw in pm.list_hardware():
        q = hw.quantities["clocks.tensor_sustained_fraction"]
        assert "fitted" in q.provenance, f"{hw.name}: the sustained fraction is fitted"
        key = q.provenance["fitted"]
        assert key == {"B300": "tensor_sustained_fraction.b300",
                       "B200": "tensor_sustained_fraction.b200",
                       "GB200": "tensor_sustained_fraction.b200"}.get(
                           hw.name, "tensor_sustained_fraction")
        assert hw.tensor_sustained_fraction == q.value == fitted.value(key), hw.name
    assert "fitted" in pm.hardware("H100-SXM").quantities[
        "clocks.tensor_sustained_fraction"].provenance


def test_fitted_rows_are_the_union_of_fitted_on():
    union = {r for c in fitted.CONSTANTS.values() for r in c.fitted_on}
    assert set(FITTED_ROWS) == union
    for row, label in FITTED_ROWS.items():
        names = label.split(": ", 1)[1].split(", ")
        for key, c in fitted.CONSTANTS.items():
            assert (key in names) == (row in c.fitted_on), (row, key)


def _copy(tmp_path: Path, old: str, new: str) -> Path:
    assert TEXT.count(old) >= 1, old
    p = tmp_path / "fitted.yaml"
    p.write_text(TEXT.replace(old, new, 1))
    return p


def _value_line(key: str) -> str:
    """The `value:` line of a constant as fitted.yaml has it (the values move with every refit)."""
    return f"  value: {fitted.CONSTANTS[key].value!r}\n"


BAD = [
    ("out of range", _value_line("attention.cta_round_trips"), "  value: 12.5\n",
     "attention.cta_round_trips.value: 12.5 out of range [0, 10]"),
    ("unknown key", "  rule: ", "  rules: ",
     "tensor_sustained_fraction.rules: unknown key"),
    ("missing key", _value_line("attention.mma_sync_fraction"), "",
     "attention.mma_sync_fraction.value: missing required key"),
    ("missing meaning", "  meaning: \"cuDNN", "  note: \"cuDNN",
     "attention.softmax_overlap.cudnn.meaning: missing required key"),
    ("not a number", _value_line("attention.softmax_overlap.fa2"), "  value: lots\n",
     "attention.softmax_overlap.fa2.value: expected a number, got 'lots'"),
    ("bad range", "  range: [0.2, 1.0]\n", "  range: [1.0, 0.2]\n",
     "attention.mma_sync_fraction.range: expected [lo, hi]"),
    ("empty fitted_on", "  fitted_on:\n    - gemm-mamf-001\n", "  fitted_on: []\n",
     "tensor_sustained_fraction.fitted_on: expected a non-empty list"),
    ("malformed", "  value: 0.85\n", "  value: [0.85\n", "malformed YAML at line"),
]


@pytest.mark.parametrize("label, old, new, message", BAD, ids=[b[0] for b in BAD])
def test_loader_names_file_key_and_expectation(tmp_path, label, old, new, message):
    p = _copy(tmp_path, old, new)
    with pytest.raises(pm.InputError) as e:
        fitted.load(p)
    assert str(p) in str(e.value) and message in str(e.value)
    assert all("\n" not in problem for problem in e.value.problems)  # one line each


def test_unknown_constant_and_bad_hwspec_reference_are_input_errors(tmp_path):
    with pytest.raises(pm.InputError, match="no such fitted constant"):
        fitted.value("attention.softmax_overlap.fa9")
    spec = pm.hardware("H100-SXM").path
    text = Path(spec).read_text()
    p = tmp_path / "h.yaml"
    p.write_text(text.replace("fitted: tensor_sustained_fraction",
                              "fitted: tensor_sustained_fractoin"))
    with pytest.raises(pm.InputError, match=r"clocks\.tensor_sustained_fraction\.fitted: "
                                            r"'tensor_sustained_fractoin' is not a constant"):
        pm.load_spec(p)
    p.write_text(text.replace("fitted: tensor_sustained_fraction",
                              "fitted: tensor_sustained_fraction\n    value: 0.85"))
    with pytest.raises(pm.InputError, match=r"tensor_sustained_fraction\.value: not allowed"):
        pm.load_spec(p)


def test_check_flag_reports_a_stale_file(fresh, tmp_path, monkeypatch, capsys):
    # the module's fresh fit stands for the three `fit.main` runs (the fit is deterministic and
    # test_file_is_what_a_fresh_fit_writes checks it): this test is about the flag
    monkeypatch.setattr(fit, "fit_all", lambda *a, **k: copy.deepcopy(fresh))
    fa4 = _value_line("attention.softmax_overlap.fa4")
    p = _copy(tmp_path, fa4, "  value: 0.5\n")
    monkeypatch.setattr(fitted, "PATH", p)
    assert fit.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert "-  value: 0.5\n" in out and "+" + fa4 in out and "differs" in out
    assert p.read_text() != TEXT  # --check writes nothing
    assert fit.main([]) == 0 and p.read_text() == TEXT
    assert fit.main(["--check"]) == 0
