"""Model zoo: the mission's models, parameter counts against the model cards."""
from __future__ import annotations

import pytest

import perfmodel as pm


MODELS = pm.list_models()


def test_zoo_has_the_mission_models():
    assert set(MODELS) >= {"llama3-8b", "llama3-70b", "llama3-405b", "qwen3-30b-a3b",
                           "qwen3-235b-a22b", "deepseek-v3"}


@pytest.mark.parametrize("name", MODELS)
def test_parameter_count_matches_the_stated_total(name):
    m = pm.load_model(name)
    assert m.params() == pytest.approx(m.params_total_stated, rel=0.01)


@pytest.mark.parametrize("name, active", [("qwen3-30b-a3b", 3.3e9), ("qwen3-235b-a22b", 22e9),
                                          ("deepseek-v3", 37e9)])
def test_activated_parameters_match_model_cards(name, active):
    assert pm.load_model(name).params(active=True) == pytest.approx(active, rel=0.03)


def test_unknown_model_is_named():
    with pytest.raises(pm.InputError, match="unknown model 'llama5'"):
        pm.load_model("llama5")


def test_a_model_file_is_parsed_once_per_version(tmp_path):
    """load_model caches a parsed file by its path, modification time and size: loading it
    again gives the same (frozen) spec, and a file rewritten since gives the new one."""
    import os

    from perfmodel.workloads.models import builtin_model_dir, load_model
    text = (builtin_model_dir() / "llama3-8b.yaml").read_text()
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    first = load_model(path)
    assert load_model(path) is first and load_model(str(path)) is first
    assert load_model("llama3-8b") is load_model("LLaMA3-8B")
    path.write_text(text.replace("layers: 32", "layers: 16"))
    stat = path.stat()  # a rewrite within the clock's resolution still moves the stamp
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    second = load_model(path)
    assert (first.layers, second.layers) == (32, 16)
