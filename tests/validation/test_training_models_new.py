"""Training rows that were refused for want of a model file (issue 41): Megatron-LM's GPT
weak-scaling family (models/megatron-gpt-*.yaml) and AutoModel's GPT-OSS 20B/120B (the serving
files). Each row's text picks its file, the file is the model the row states (sizes, parameter
count), and what stays refused says why."""
from __future__ import annotations

import csv
import re

import pytest

from perfmodel.validation.training import (
    BRIDGE_CSV, NO_MODEL_FILE, TRAINING_CSV, Skipped, TrainingCase,
    load_bridge_cases, load_training_cases, resolve_model)
from perfmodel.workloads.models import list_models, load_model


def _rows(path=TRAINING_CSV) -> dict[str, dict]:
    with path.open(newline="", encoding="utf-8") as f:
        return {r["id"]: r for r in csv.DictReader(f)}


ROWS = _rows()
# every configuration of the Megatron-LM table and the AutoModel GPT-OSS rows: (row, file)
MLM = [(f"MLM-README-{n:02d}-mfu", f"megatron-gpt-{size}") for n, size in enumerate(
    ("1.7b", "7.1b", "16b", "32b", "70b", "119b", "177b", "314b", "462b"), start=1)]
GPT_OSS = [("AM-08-tps", "gpt-oss-20b"), ("AM-09-tps", "gpt-oss-120b")]


@pytest.fixture(scope="module")
def by_id():
    cases, skipped = load_training_cases()
    return {r.id: r for r in [*cases, *skipped]}


def _stated_params(text: str) -> float:
    """The total size a row's params column states: '1.7B', '~117B total / ~5.1B active'."""
    m = re.match(r"~?([\d.]+)B\b", text)
    assert m, text
    return float(m.group(1)) * 1e9


@pytest.mark.parametrize("rid, model", MLM + GPT_OSS)
def test_the_row_text_picks_the_file_and_the_row_is_read_with_it(rid, model, by_id):
    assert model in list_models()
    assert resolve_model(ROWS[rid]["model"])[0] == model
    assert by_id[rid].model == model
    # the only reasons left are the row's own, never the model's
    reasons = getattr(by_id[rid], "reasons", ())
    assert not [r for r in reasons if r.startswith(("no model file", "model:"))], reasons


@pytest.mark.parametrize("rid, model", MLM + GPT_OSS)
def test_the_file_has_the_size_the_row_states(rid, model):
    m = load_model(model)
    assert m.params() == pytest.approx(_stated_params(ROWS[rid]["params"]), rel=0.03)


@pytest.mark.parametrize("rid, model", MLM)
def test_the_megatron_files_have_the_dimensions_the_rows_state(rid, model):
    # "GPT (Megatron-LM weak-scaling family) 1.7B: 24 layers, hidden 2048, 16 heads, vocab 131072"
    layers, hidden, heads, vocab = map(int, re.search(
        r"(\d+) layers, hidden (\d+), (\d+) heads, vocab (\d+)", ROWS[rid]["model"]).groups())
    m = load_model(model)
    assert (m.layers, m.hidden, m.heads, m.vocab) == (layers, hidden, heads, vocab)
    # Megatron-LM's GPT defaults where the table says nothing: MHA, 4h GELU FFN, untied
    assert (m.kv_heads, m.head_dim * m.heads, m.ffn_hidden, m.activation) == (
        heads, hidden, 4 * hidden, "gelu")
    assert not m.tie_embeddings and not m.is_moe


def test_the_megatron_rows_stay_skipped_for_what_the_table_does_not_state(by_id):
    """Mapped, the rows fail on their own gaps: precision and micro-batch (and VP with PP > 1)
    are not stated, so no Megatron-Core fit (training.sm_clock_fraction) reads them."""
    for rid, _ in MLM:
        s = by_id[rid]
        assert isinstance(s, Skipped)
        assert s.reasons[0] == "precision not stated"
        assert "micro-batch size not stated" in s.reasons


def test_the_automodel_gpt_oss_rows_are_refused_for_their_unstated_ep(by_id):
    """AutoModel's GPT-OSS rows print EP '-' while their notes name DeepEP, an expert-parallel
    all-to-all: the run's EP is unknown, so the row is refused for it, not read as EP 1."""
    for rid, _ in GPT_OSS:
        s = by_id[rid]
        assert isinstance(s, Skipped)
        assert ("parallelism not stated (ep: '-', but the notes name DeepEP, an "
                "expert-parallel all-to-all)") in s.reasons


def test_a_model_column_that_contradicts_the_file_is_refused(tmp_path):
    """The model column's sizes must be the file's: a row stating 25 layers for the 1.7B file
    (24) is skipped with the conflict named."""
    rows = list(ROWS.values())
    row = next(r for r in rows if r["id"] == "MLM-README-01-mfu")
    row["model"] = row["model"].replace("24 layers", "25 layers").replace("hidden 2048",
                                                                          "hidden 2304")
    p = tmp_path / "training_measurements.csv"
    with p.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    _, skipped = load_training_cases(p)
    s = next(s for s in skipped if s.id == "MLM-README-01-mfu")
    assert s.reason == "model: the model column's layers 25 differs from megatron-gpt-1.7b's 24"
    assert "model: the model column's hidden 2304 differs from megatron-gpt-1.7b's 2048" in \
        s.reasons


def test_bridge_gpt_oss_rows_are_judged_and_left_out_of_the_moe_host_fit():
    """Megatron-Bridge's GPT-OSS-120B rows are answered (judged), but the host's fit
    (training.moe_host_launch_s) leaves them out: their steps miss the plan on B200 as on H100,
    a mechanism other than the host's."""
    from perfmodel.validation.fit import MOE_HOST_LEFT_OUT, moe_host_fit_rows
    rows = _rows(BRIDGE_CSV)
    ids = {rid for rid, r in rows.items() if resolve_model(r["model"])[0] == "gpt-oss-120b"}
    cases, skipped = load_bridge_cases()
    mapped = {c.id for c in cases if c.model == "gpt-oss-120b"}
    assert mapped and mapped <= ids
    assert not [s.id for s in skipped if s.id in ids and "gpt-oss" in s.reason.lower()]
    assert "gpt-oss-120b" in MOE_HOST_LEFT_OUT
    assert not [c.id for c in moe_host_fit_rows() if c.model == "gpt-oss-120b"]


@pytest.mark.parametrize("rid, label", [
    ("NT-01-mfu", "nanotron Llama-style 1.34B"),      # the figure states no dimensions
    ("NT-22-mfu", "nanotron Llama-style 80.0B"),
    ("AM-06-tps", "Kimi K2"),                         # no source here states its sizes
])
def test_models_without_stated_dimensions_stay_refused(rid, label, by_id):
    s = by_id[rid]
    assert s.reason == f"no model file: {label}" and label.startswith(NO_MODEL_FILE)
