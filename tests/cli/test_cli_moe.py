"""`perfmodel moe`: the MoE decode study from the command line."""
from __future__ import annotations

import json

from perfmodel.cli.main import main


def test_cli_json(capsys):
    assert main(["moe", "--model", "qwen3-30b-a3b", "--hw", "B200", "--tokens-per-gpu", "32",
                 "--replication", "1.5", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert {r["policy"] for r in rows} == {"token_balanced", "metro", "optimal"}


def test_cli_rejects_dense_models(capsys):
    assert main(["moe", "--model", "llama3-8b", "--hw", "B200"]) == 2
    assert "has no experts" in capsys.readouterr().err
