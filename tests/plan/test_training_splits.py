"""Uneven pipeline splits as Megatron-Core builds them (perfmodel.plan.training.split_pipeline,
docs/design.md "Pipeline splits"): the embedding and loss counted as layers (Llama 3.1 405B),
first/last-stage counts (DeepSeek-V3), layout strings, one-line refusals naming the rule, a
step paced by the slowest rank, memory on the fullest rank and the search trying the splits."""
from __future__ import annotations

import dataclasses
import json

import pytest

from perfmodel.cli.main import main
from perfmodel.errors import InputError
from perfmodel.plan.training import (plan_training, search_training_plans, split_pipeline,
                                     training_layouts)
from perfmodel.workloads.models import load_model


def test_126_layers_at_pp8_vp4_count_the_embedding_and_loss_as_layers():
    # 126 + 2 = 128 units, 16 a rank, 4 a chunk; rank 0's first chunk and the last rank's
    # last chunk build one decoder layer fewer (transformer_block.py:148-158, 188-206)
    s = split_pipeline(126, 8, 4)
    assert s.mode == "account_embedding_loss"
    assert s.chunks == ((3, 4, 4, 4),) + ((4, 4, 4, 4),) * 6 + ((4, 4, 4, 3),)
    assert s.rank_layers == (15,) + (16,) * 6 + (15,)
    assert s.describe() == ("account_for_embedding+loss: 3+4+4+4 | 4+4+4+4 x6 | 4+4+4+3")
    # Qwen3-235B's 94 layers at PP8 x VP4: 96 units, 3 a chunk, 2 in the end chunks
    assert split_pipeline(94, 8, 4).chunks[0] == (2, 3, 3, 3)
    # 405B's PP16 x VP8 recipe: one unit a chunk, the end chunks hold only E and L
    s = split_pipeline(126, 16, 8)
    assert s.chunks[0] == (0,) + (1,) * 7 and s.chunks[-1] == (1,) * 7 + (0,)
    # an even split stays even; "account" may be asked for where even would do
    assert split_pipeline(80, 8, 5).chunks == ((2,) * 5,) * 8
    assert split_pipeline(78, 4, 1, "account").rank_layers == (19, 20, 20, 19)
    assert split_pipeline(80, 2, 1, "account").rank_layers == (40, 40)
    with pytest.raises(InputError, match=r"even split needs layers % pp == 0 \(126 % 8 = 6\)"):
        split_pipeline(126, 8, 4, "even")


def test_61_layers_at_pp16_take_first_and_last_stage_counts():
    # no even or account split: 61, 63, 62 are not multiples of 16; the middle 14 ranks take
    # 4 each (56), the first 4 and the last 1, as Megatron-Bridge's DeepSeek-V3 layout
    s = split_pipeline(61, 16, 1)
    assert (s.mode, s.first, s.last) == ("first_last", 4, 1)
    assert s.rank_layers == (4,) * 15 + (1,)
    assert split_pipeline(61, 16, 1, "4,1") == s
    assert split_pipeline(61, 4, 1).rank_layers == (16, 16, 16, 13)
    assert split_pipeline(61, 8, 1).rank_layers == (8,) * 7 + (5,)
    with pytest.raises(InputError, match=r"the 59 middle layers must be divisible by the 14 "
                                         r"middle pipeline ranks \(transformer_config.py:"
                                         r"2349-2353\)"):
        split_pipeline(61, 16, 1, "1,1")
    with pytest.raises(InputError, match=r"must be divisible by the virtual pipeline degree 2"):
        split_pipeline(61, 8, 2, "3,2")


def test_a_layout_string_places_every_stage():
    # Megatron-Bridge's DeepSeek-V3 PP8 x VP2 layout (the MTP layer dropped): vp-major stages
    s = split_pipeline(61, 8, 2, "Et*4|(t*4|)*14tL")
    assert s.mode == "layout" and s.chunks == ((4, 4),) * 7 + ((4, 1),)
    # Llama 3 70B H100 FP8 (Megatron-Bridge main): stage 35 = rank 3's chunk 4 holds 3 layers
    s = split_pipeline(80, 8, 5, "Et*2|(t*2|)*34,t*3|(t*2|)*3,tL")
    assert s.chunks[3] == (2, 2, 2, 2, 3) and s.chunks[7] == (2, 2, 2, 2, 1)
    with pytest.raises(InputError, match=r"16 stages make VP2, which conflicts with VP4"):
        split_pipeline(61, 8, 4, "Et*4|(t*4|)*14tL")
    with pytest.raises(InputError, match=r"places 60 decoder layers \(t\), the model has 61"):
        split_pipeline(61, 8, 2, "Et*4|(t*4|)*14L")
    with pytest.raises(InputError, match=r"MTP layers"):
        split_pipeline(61, 8, 2, "Et*4|(t*4|)*14tmL")


def test_a_split_megatron_refuses_is_one_line_naming_the_rule():
    # 32 layers over PP8 x VP3: 4 a rank is not a multiple of 3, 34/33 units do not divide
    # over 8 ranks, and first/last counts and middle ranks all multiples of 3 cannot sum to 32
    with pytest.raises(InputError) as e:
        split_pipeline(32, 8, 3)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("32 decoder layers over PP8 x VP3 cannot be split as Megatron-Core "
                          "allows: even split needs layers/pp % vp == 0 (4 % 3 = 1)")
    assert "transformer_config.py:2371-2415" in msg and "transformer_config.py:2294-2369" in msg
    with pytest.raises(InputError, match="cannot be split as Megatron-Core allows"):
        plan_training("llama3-8b", "H100-SXM", batch=64, seq=2048, pp=8, virtual_stages=3,
                      microbatches=64)
    with pytest.raises(InputError, match="cannot be split as Megatron-Core allows"):
        search_training_plans("llama3-8b", "H100-SXM", 64, 512, seq=2048, pp=8, vp=3)
    # 7 layers over 8 ranks: only the embedding counted as a layer splits them, leaving rank 0
    # empty (Megatron-Core allows an empty stage, transformer_block.py:764-767); evenly, no
    s = split_pipeline(7, 8, 1)
    assert s.mode == "account_embedding" and s.rank_layers == (0,) + (1,) * 7
    with pytest.raises(InputError, match=r"7 decoder layers over PP8: even split needs layers "
                                         r"% pp == 0 \(7 % 8 = 7\) \(Megatron-Core arguments"):
        split_pipeline(7, 8, 1, "even")


def test_the_405b_gb200_recipe_layout_now_plans(capsys):
    argv = ["plan", "train", "llama3-405b", "--hw", "gb200", "--gpus", "256", "--tp", "4",
            "--pp", "8", "--vp", "4", "--dp", "8", "--global-batch", "1536", "--seq", "8192"]
    assert main(argv + ["--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["search"]["layouts_tried"] == 1 and len(d["plans"]) == 1
    p = d["plans"][0]
    assert (p["tp"], p["pp"], p["vp"], p["dp"]) == (4, 8, 4, 8)
    assert p["pipeline_split"].startswith("account_for_embedding+loss")
    assert p["stage_layers"][0] == [3, 4, 4, 4] and p["stage_layers"][7] == [4, 4, 4, 3]
    assert 1 <= p["pacing_rank"] <= 6  # a middle rank: 16 layers beat 15 + the output layer
    assert p["memory"]["fits"] and p["tokens_per_s_per_gpu"] > 0
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "1 layouts tried, 1 fit in memory" in out
    assert "pipeline split account_for_embedding+loss: 3+4+4+4 | 4+4+4+4 x6 | 4+4+4+3" in out
    # VP5: 16 layers a rank, 128 units, first/last counts and the middle ranks' all multiples
    # of 5: none sums to 126
    argv[argv.index("--vp") + 1] = "5"
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "126 decoder layers over PP8 x VP5 cannot be" in err


def _model(layers: int, vocab: int | None = None):
    m = load_model("llama3-8b")
    return dataclasses.replace(m, layers=layers, vocab=vocab or m.vocab,
                               name=f"llama3-8b-{layers}l")


def test_the_slowest_rank_paces_an_uneven_split():
    kw = dict(batch=16, seq=2048, tp=1, pp=4, dp=1, microbatches=16, recompute="full")
    # a 32k vocabulary: the output layer weighs less than a decoder layer
    even28, uneven30, even32 = (plan_training(_model(n, 32000), "H100-SXM", **kw)
                                for n in (28, 30, 32))
    # 30 layers over PP4: 32 units, ranks 7, 8, 8, 7 (+ E, + L); a middle rank paces: 8 layers,
    # no output layer (the last of the tied middle ranks)
    assert uneven30.stage_layers == ((7,), (8,), (8,), (7,)) and uneven30.pacing_rank == 2
    assert even28.pacing_rank == 3 and even28.stage_layers == ((7,),) * 4
    # the slowest rank holds one layer more than the even split of a model one layer smaller a
    # rank: its step is longer; without the output layer it is shorter than 8 layers + head
    assert even28.step_time_s < uneven30.step_time_s < even32.step_time_s
    per_layer = (even32.step_time_s - even28.step_time_s)
    assert uneven30.step_time_s - even28.step_time_s > 0.5 * per_layer
    # each microbatch and the (pp - 1) bubble slots take the pacing rank's time
    mb_s = uneven30.pipeline_s / (16 + 3)
    assert uneven30.breakdown["pipeline_bubble"] == pytest.approx(3 * mb_s)
    # the pacing rank has no output layer and loss (the loss: the graph's one softmax op)
    assert "softmax" not in uneven30.breakdown and even32.breakdown["softmax"] > 0
    # memory on the fullest rank: 8 layers, as the even 32-layer split's
    assert uneven30.memory.total_bytes == pytest.approx(even32.memory.total_bytes)
    assert uneven30.memory.total_bytes > even28.memory.total_bytes
    # Llama 3's 128k vocabulary: the output layer outweighs a layer, so the last rank (7 layers
    # + output layer and loss) paces, exactly as the even 28-layer split's last rank
    even28, uneven30 = (plan_training(_model(n), "H100-SXM", **kw) for n in (28, 30))
    assert uneven30.pacing_rank == 3
    assert uneven30.step_time_s == pytest.approx(even28.step_time_s, rel=1e-12)


def test_the_search_tries_the_uneven_splits_megatron_recipes_use():
    m = load_model("llama3-405b")  # 126 layers: PP 4, 8, 16 only with the account split
    lays = {(p, v) for _, _, p, v, *_ in training_layouts(m, 256, 8192, 1536, tp=4, cp=1,
                                                          micro_batch=1)}
    assert {(8, 4), (8, 8), (16, 8), (8, 1), (16, 1), (2, 1)} <= lays
    assert (8, 3) not in lays and (4, 3) not in lays
    # an even split keeps the search's even chunks (two layers a chunk at least)
    lays = {(p, v) for _, _, p, v, *_ in training_layouts(load_model("llama3-70b"), 64, 4096,
                                                          64, tp=8, cp=1, micro_batch=1)}
    assert {(8, 1), (8, 2), (8, 5)} <= lays and (8, 10) not in lays
