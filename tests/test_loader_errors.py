"""One test per spec-loader failure mode: the message names file, key path and expectation, and
the CLI exits 2 without a traceback."""
from __future__ import annotations

from pathlib import Path

import pytest

import perfmodel as pm
from perfmodel.cli.main import main
from perfmodel.hardware import builtin_spec_dir

GOOD = (builtin_spec_dir() / "H100-SXM.yaml").read_text()


def _spec(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    return p


CASES = [
    ("malformed", GOOD.replace("sm_count: {value: 132", "sm_count: {value: [132"),
     "malformed YAML at line"),
    ("unknown key", GOOD.replace("issue_per_sm_per_clk:", "issue_per_sm_per_clock:"),
     "issue_per_sm_per_clock: unknown key"),
    ("missing key", GOOD.replace("kernel_launch_s:", "# kernel_launch_s:"),
     "kernel_launch_s: missing required key"),
    ("wrong type", GOOD.replace("sm_count: {value: 132", "sm_count: {value: many"),
     "sm_count.value: expected a number, got 'many'"),
    ("out of range", GOOD.replace("boost_clock_hz: {value: 1.98e9", "boost_clock_hz: {value: 1980"),
     "clocks.boost_clock_hz.value: 1980 out of range"),
    ("not an integer", GOOD.replace("sm_count: {value: 132", "sm_count: {value: 132.5"),
     "sm_count.value: expected an integer"),
    ("unresolved source", GOOD.replace("source: CPG-CC, note: \"228 KiB\"",
                                       "source: NOPE, note: \"228 KiB\""),
     "sm_resources.smem_per_sm_bytes.source: 'NOPE' is not defined"),
    ("no provenance", GOOD.replace("max_ctas_per_sm: {value: 32, source: CPG-CC}",
                                   "max_ctas_per_sm: {value: 32}"),
     "sm_resources.max_ctas_per_sm: no provenance"),
    ("bad range", GOOD.replace("range: [0.86, 0.93]", "range: [0.95, 0.99]"),
     "hbm.achievable_fraction.range: expected [lo, hi]"),
    ("schema version", GOOD.replace("schema_version: 1", "schema_version: 7"),
     "schema_version: expected 1, got 7"),
    ("architecture", GOOD.replace("architecture: hopper", "architecture: volta"),
     "architecture: expected one of"),
    ("not a mapping", "- just\n- a list\n", "expected a mapping at the top level"),
]


@pytest.mark.parametrize("label, text, message", CASES, ids=[c[0] for c in CASES])
def test_loader_reports_file_key_and_expectation(tmp_path, label, text, message):
    assert text != GOOD or label == "not a mapping"
    p = _spec(tmp_path, text)
    with pytest.raises(pm.InputError) as e:
        pm.load_spec(p)
    assert str(p) in str(e.value)
    assert message in str(e.value)


@pytest.mark.parametrize("label, text, message", CASES, ids=[c[0] for c in CASES])
def test_cli_hw_show_bad_spec_exits_2_without_traceback(tmp_path, capsys, label, text, message):
    p = _spec(tmp_path, text)
    assert main(["hw", "show", str(p)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert all(line.startswith("perfmodel: error: ") for line in err.strip().splitlines())


def test_missing_file_is_reported(tmp_path, capsys):
    assert main(["hw", "show", str(tmp_path / "nope.yaml")]) == 2
    assert "cannot read hardware spec" in capsys.readouterr().err


def test_all_problems_are_reported_at_once(tmp_path):
    text = GOOD.replace("sm_count: {value: 132", "sm_count: {value: -4").replace(
        "issue_per_sm_per_clk:", "issues:")
    with pytest.raises(pm.InputError) as e:
        pm.load_spec(_spec(tmp_path, text))
    assert len(e.value.problems) >= 3  # bad value, unknown key, missing key
