"""perfmodel/workloads/hf_config.py: the Hugging Face config import reads every key through its
declared Field (type, integer, range); what HF writes for "not set" stays so. The round trips of
the shipped models' configs are tests/plan/test_training_terms.py's."""
from __future__ import annotations

import pytest

from perfmodel.errors import InputError
from perfmodel.workloads.hf_config import FIELDS, model_from_hf_config

LLAMA = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
         "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
         "vocab_size": 128256, "hidden_act": "silu", "tie_word_embeddings": False}


def test_not_set_reads_as_before():
    out, _ = model_from_hf_config(LLAMA, "x")
    # null and 0 are "not set" where HF writes them so; integral floats are integers
    same, _ = model_from_hf_config({**LLAMA, "head_dim": None, "q_lora_rank": 0,
                                    "hidden_size": 4096.0}, "x")
    assert same == out and isinstance(same["hidden"], int)
    assert model_from_hf_config({**LLAMA, "num_key_value_heads": 0}, "x")[0]["kv_heads"] == 32
    # an explicit null tie reads as false (bool(None)), an absent one as the type's default
    assert model_from_hf_config({**LLAMA, "tie_word_embeddings": None}, "x")[0][
        "tie_embeddings"] is False
    untied = {k: v for k, v in LLAMA.items() if k != "tie_word_embeddings"}
    assert model_from_hf_config(untied, "x")[0]["tie_embeddings"] is False  # llama
    assert model_from_hf_config({**untied, "model_type": None}, "x")[0]["tie_embeddings"]


def test_every_problem_of_a_config_at_once():
    with pytest.raises(InputError) as e:
        model_from_hf_config({**LLAMA, "hidden_size": "4096", "vocab_size": -1,
                              "tie_word_embeddings": "no"}, "x", file="c.json")
    assert sorted(p.split(": ")[1] for p in e.value.problems) == [
        "hidden_size", "tie_word_embeddings", "vocab_size"]
    assert all(p.startswith("c.json: ") and "\n" not in p for p in e.value.problems)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 10 ** 400, -1, "x", True])
def test_params_total_is_a_count(bad):
    with pytest.raises(InputError, match=r"^params_total: expected a parameter count"):
        model_from_hf_config(LLAMA, "x", params_total=bad)


def test_fields_are_declared():
    assert all(f.kind in ("int", "number", "bool", "str", "list", "object")
               for f in FIELDS.values())
    assert FIELDS["num_hidden_layers"].hi == 4096  # the model file's own bound
