"""`perfmodel models list|show`: the built-in catalogue and one model's sizes."""
from __future__ import annotations

import json

import perfmodel as pm
from perfmodel.cli.main import main


def test_list_names_every_builtin_model(capsys):
    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    for name in pm.list_models():
        assert name in out
    assert "MoE 256x top-8, MLA" in out  # deepseek-v3's kind


def test_show_json_matches_the_model(capsys):
    assert main(["models", "show", "llama3-70b", "--format", "json"]) == 0
    info = json.loads(capsys.readouterr().out)
    m = pm.load_model("llama3-70b")
    assert info["params"] == m.params() and info["layers"] == 80
    # GQA: 8 KV heads × 128 dims × K and V × 2 bytes × 80 layers
    assert info["kv_cache_bytes_per_token"] == 8 * 128 * 2 * 2 * 80


def test_unknown_model_is_bad_input(capsys):
    assert main(["models", "show", "llama9"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown model 'llama9'" in err


def test_bare_models_and_hw_list_them(capsys):
    """`perfmodel models` and `perfmodel hw` with no subcommand list, as their `list` does."""
    assert main(["models", "list"]) == 0
    listed = capsys.readouterr().out
    assert main(["models"]) == 0
    assert capsys.readouterr().out == listed
    assert main(["hw", "list"]) == 0
    listed = capsys.readouterr().out
    assert main(["hw"]) == 0
    assert capsys.readouterr().out == listed
