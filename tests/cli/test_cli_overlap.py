"""`perfmodel overlap`: the dropout RNG schedules from the command line."""
from __future__ import annotations

import json

from perfmodel.cli.main import main


def test_cli_json_matches_spec(capsys):
    assert main(["overlap", "--model", "llama3-8b", "--hw", "B200", "--dtype", "fp8",
                 "--seq", "2048", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    for s in ("sequential", "fused", "overlap", "rng_in_gemm"):
        assert d["schedules"][s]["time_s"] > 0
    assert set(d["speedup"]) == {"overlap_vs_sequential", "overlap_vs_fused",
                                 "rng_in_gemm_vs_sequential", "rng_in_gemm_vs_fused",
                                 "rng_in_gemm_vs_overlap"}
    assert d["best"] in d["schedules"]


def test_cli_rejects_bad_dropout(capsys):
    assert main(["overlap", "--model", "llama3-8b", "--hw", "h100", "--dropout", "1.5"]) == 2
    assert "--dropout" in capsys.readouterr().err
