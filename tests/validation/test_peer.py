"""The serving simulator against AIConfigurator's TensorRT-LLM estimate
(perfmodel.validation.peer): the file is the generator's, and the two models agree where the
deployment is plain (decode-heavy lengths, one GPU or TP within a node; Qwen3's experts
over the TP group, summed by its all-reduce)."""
import math

import pytest

from perfmodel.validation import peer


def test_the_peer_file_covers_the_grid_its_generator_names():
    rows = peer.load_rows()
    assert len(rows) == 264
    assert {r.hardware for r in rows} == {"H100-SXM", "H200-SXM", "B200"}
    assert {r.model for r in rows} == {"llama3-8b", "llama3-70b", "llama3-405b", "mixtral-8x7b",
                                       "qwen3-30b-a3b", "qwen3-235b-a22b"}
    # Mixtral's experts tensor-parallel (ep 1), Qwen3's expert-parallel over the TP ranks
    assert {r.ep for r in rows if r.model == "mixtral-8x7b"} == {1}
    assert all(r.ep == r.tp for r in rows if r.model.startswith("qwen3"))
    assert all(r.ep == 1 for r in rows if r.model.startswith("llama"))
    assert {r.gemm_dtype for r in rows if r.hardware == "B200"} == {"nvfp4"}
    assert all(r.peer_tokens_per_s_per_gpu > 0 and 1 <= r.peer_batch <= 1024 for r in rows)
    # throughput falls as the prompt grows at a fixed output (same deployment)
    by = {(r.model, r.hardware, r.tp, r.isl, r.osl): r.peer_tokens_per_s_per_gpu for r in rows}
    assert by[("llama3-70b", "H200-SXM", 1, 128, 128)] > by[("llama3-70b", "H200-SXM", 1,
                                                             2048, 128)]


# Plain means not held by the KV pool either: at TP2 the H100's 70B deployments are
# memory-bound, and since the specs read "80 GB" as the 80 GiB the device exposes the simulator's
# TensorRT-LLM pool admits ~200 sequences of 500/2000 where the peer's budget stops at 176
# (+25 %); TP4 is not memory-bound.
@pytest.mark.parametrize("key", [("llama3-8b", "H200-SXM", 1, 1000, 1000),
                                 ("llama3-70b", "H100-SXM", 4, 500, 2000),
                                 ("llama3-70b", "B200", 2, 128, 2048),
                                 ("mixtral-8x7b", "H200-SXM", 2, 1000, 1000),
                                 ("qwen3-235b-a22b", "H200-SXM", 8, 1000, 1000)])
def test_the_simulator_agrees_with_the_peer_within_15_percent_on_plain_deployments(key):
    row = next(r for r in peer.load_rows() if (r.model, r.hardware, r.tp, r.isl, r.osl) == key)
    ours = peer.predicted_tokens_per_s_per_gpu(row)
    assert math.isfinite(ours)
    assert abs(ours / row.peer_tokens_per_s_per_gpu - 1) < 0.15


def test_report_groups_and_signs():
    rows = peer.load_rows()[:2]
    text = peer.report([(rows[0], 0.1), (rows[1], -0.1)], rows=True)
    assert "by GPU" in text and "+10.0%" in text and "-10.0%" in text
