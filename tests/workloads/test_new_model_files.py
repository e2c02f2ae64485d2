"""The model files added for the published training rows (llm-foundry's MPT sizes, NeMo's GPT-3,
Nemotron-3 and Llama 4 Scout) against numbers published independently of the files: the
NumParams column of llm-foundry's benchmark table (exact), and the FLOP per token that NeMo's
performance tables imply (model TFLOP/s over tokens/s) under NeMo's own FLOP formulas. Where a
file's `params_total` is derived (no total published beyond a rounded name), these are the
checks that can fail."""
from __future__ import annotations

import csv

import pytest

import perfmodel as pm
from perfmodel.validation.training import TRAINING_CSV

MPT = ("mpt-125m", "mpt-350m", "mpt-760m", "mpt-1b", "mpt-3b", "mpt-7b", "mpt-13b", "mpt-70b")


def rows() -> dict[str, dict]:
    with TRAINING_CSV.open(newline="", encoding="utf-8") as f:
        return {r["id"]: r for r in csv.DictReader(f)}


def test_mpt_sizes_give_llm_foundrys_numparams_exactly():
    """llm-foundry's MPT (configuration_mpt.py defaults: learned positions, biases) has
    d·(V + max_seq_len) + L·(12 d² + 13 d) + 2 d parameters: the file's count (embedding and
    the 12 d² of each layer's matrices) plus the positions, biases and LayerNorm weights the
    format does not carry. Every LF row of a size with a file must give its NumParams."""
    n = 0
    for r in rows().values():
        name = r["model"].lower()
        if not r["id"].startswith("LF-") or name not in MPT:
            continue
        m = pm.load_model(name)
        d, seq = m.hidden, int(r["seq_len"])
        assert (m.vocab, m.ffn_hidden, m.tie_embeddings) == (50368, 4 * d, True)
        expected = m.params() + seq * d + m.layers * 13 * d + 2 * d
        assert expected == int(r["params"].split()[0]), r["id"]
        n += 1
    assert n == 400      # the 432 LF rows less mpt-30b's 32 (the released model's file)


def nemo_flop_per_token(m, seq: int, vocab: int, causal: bool) -> float:
    """Model FLOP per token as NeMo's performance tables count it (nemo_toolkit 2.4.0
    nemo/utils/flops_formulas.py: `gpt3` and `nemotron` are 6 × the per-token matrix
    parameters of the layers + 12·L·s·(heads·head_dim) for the attention scores and values,
    halved where causal as in `transformer(causal_self_attn=True)`, + 6·V·h for the LM head)."""
    layer = sum(m.attention_params() + m.ffn_params(i, active=True) - m.hidden * m.experts
                for i in range(m.layers))
    attention = 12 * m.layers * seq * m.heads * m.head_dim * (0.5 if causal else 1.0)
    return 6 * layer + attention + 6 * vocab * m.hidden


@pytest.mark.parametrize("config, name, vocab, causal", [
    # GPT-3 counts its LM head with LLM_VOCAB_SIZE_MAP["gpt3"] = 51200, not the file's padded
    # 50304 (nemo/collections/common/parts/perf_metrics_utils.py); Nemotron with 256000
    ("NEMO2407-001", "gpt3-5b", 51200, False),
    ("NEMO2407-002", "gpt3-20b", 51200, False),
    ("NEMO2407-003", "gpt3-175b", 51200, False),
    ("NEMOFW-2502-H100-01", "gpt3-175b", 51200, False),
    ("NEMO2407-008", "nemotron3-8b", None, False),
    ("NEMO2407-009", "nemotron3-22b", None, False),
    ("NEMOFW-2507-GB200-04", "llama4-scout", None, True),
])
def test_nemo_tables_flop_per_token_matches_the_file(config, name, vocab, causal):
    table = rows()
    tps, tflops = table[f"{config}-tps"], table[f"{config}-tflops"]
    assert tps["unit"] == "tokens/s/GPU" and tflops["unit"].startswith("TFLOP/s/GPU")
    published = float(tflops["value"]) * 1e12 / float(tps["value"])
    m = pm.load_model(name)
    ours = nemo_flop_per_token(m, int(tps["seq_len"]), vocab or m.vocab, causal)
    # the table prints 3-4 significant digits: 0.3 % covers the rounding of both cells
    assert ours == pytest.approx(published, rel=0.003), (ours, published)


def test_nemotron_vocabulary_is_pinned_by_the_flop_count():
    """With a 50k vocabulary the 8B's FLOP per token falls 10 % short of the table's."""
    m = pm.load_model("nemotron3-8b")
    published = 643e12 / 12507
    assert nemo_flop_per_token(m, 4096, 50304, False) < 0.92 * published


def test_llama4_scout_against_metas_card():
    """Meta's card: 17B active, 109B total with the vision encoder the file leaves out (the
    text model is 1.1 % smaller); one shared and one routed expert of 8192 per token."""
    m = pm.load_model("llama4-scout")
    assert m.params(active=True) == pytest.approx(17e9, rel=0.03)
    assert 0.98 * 109e9 < m.params() < 109e9
    assert (m.experts, m.top_k, m.shared_experts, m.dense_layers) == (16, 1, 1, 0)


def test_gpt3_175b_is_brown_et_al_table_2_1():
    m = pm.load_model("gpt3-175b")
    assert (m.layers, m.hidden, m.heads, m.head_dim) == (96, 12288, 96, 128)
    assert m.params() == pytest.approx(175.0e9, rel=0.01)
