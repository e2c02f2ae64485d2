"""The published serving measurements as cases: every row is a case or skipped with its reason,
values and units parse as printed, known rows map to the expected hardware, model and
parallelism, and the comparison computes its errors exactly with fitted rows apart."""
from __future__ import annotations

import csv
import dataclasses

import pytest

from perfmodel.workloads.models import list_models
from perfmodel.validation.serving import (
    LENGTHS, METRICS, MODES, NO_MODEL_FILE, SERVING_CSV, ServingCase, Skipped, compare,
    comparison_report, id_ranges, load_serving_cases, main, parse_value,
    parse_value_resolution, summarize, summary_table, to_si, unit_scale)


@pytest.fixture(scope="module")
def loaded():
    return load_serving_cases()


@pytest.fixture(scope="module")
def by_id(loaded):
    cases, skipped = loaded
    return {r.id: r for r in [*cases, *skipped]}


def csv_rows():
    with SERVING_CSV.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_every_row_is_a_case_or_skipped_with_a_reason(loaded):
    cases, skipped = loaded
    ids = [r["id"] for r in csv_rows()]
    assert len(ids) == 364
    assert sorted([c.id for c in cases] + [s.id for s in skipped]) == sorted(ids)
    assert all(isinstance(s, Skipped) and s.reason.strip() and s.reasons[0] == s.reason
               for s in skipped)
    assert len(cases) == 318 and len(skipped) == 46


def test_cases_are_well_formed(loaded):
    cases, _ = loaded
    models = set(list_models())
    for c in cases:
        assert isinstance(c, ServingCase)
        assert c.model in models and c.hardware.name
        assert c.metric in METRICS and c.mode in MODES and c.lengths in LENGTHS, c.id
        assert c.engine in ("vllm", "sglang", "tensorrt-llm")
        assert c.value > 0 and c.tp >= 1 and c.pp >= 1 and c.ep >= 1
        if c.replicas_from.startswith("gpus/"):
            assert c.replicas * c.gpus_per_replica == c.gpus, c.id
        if c.source == "MLPerf":
            assert c.osl and c.isl is None and c.lengths == "dataset-mean"
        assert c.raw["id"] == c.id


def test_skip_reasons_name_what_is_missing(loaded):
    _, skipped = loaded
    reasons = {s.reason for s in skipped}
    no_model = {r.split(": ", 1)[1] for r in reasons if r.startswith("no model file")}
    assert no_model == set(NO_MODEL_FILE)
    assert {r for r in reasons if r.startswith("no hardware spec")} == {
        "no hardware spec: GH200"}
    n = {r: sum(s.reason == r for s in skipped) for r in reasons}
    assert n["no hardware spec: GH200"] == 12
    assert n["no model file: DeepSeek-V3.2"] == 7
    assert sum(v for r, v in n.items() if r.startswith("FITTED")) == 8


@pytest.mark.parametrize("text, value", [
    ("22,282", 22282.0), ("26.2K", 26200.0), ("2.2k", 2200.0), ("1.80e-05", 1.8e-5),
    ("25,000", 25000.0), ("1,256,640", 1256640.0), ("274.4168", 274.4168), ("7.90", 7.9),
    ("746551096", 746551096.0), ("9.72e-06", 9.72e-6),
])
def test_value_parsing(text, value):
    assert parse_value(text) == pytest.approx(value, rel=1e-12)


def test_suffixed_headlines_keep_their_precision():
    assert parse_value_resolution("26.2K") == (pytest.approx(26200.0), pytest.approx(50.0))
    assert parse_value_resolution("10.1K")[1] == pytest.approx(50.0)
    assert parse_value_resolution("2.2k")[1] == pytest.approx(50.0)
    assert parse_value_resolution("22,282")[1] is None


@pytest.mark.parametrize("bad", ["", "abc", "1,23", "12 ms", "K"])
def test_unparseable_values_raise(bad):
    with pytest.raises(ValueError):
        parse_value(bad)


def test_units_to_si():
    assert to_si("742.8", "ms") == pytest.approx(0.7428)
    assert to_si("746551096", "ns") == pytest.approx(0.746551096)
    assert to_si("12.5", "µs") == pytest.approx(12.5e-6)
    assert to_si("12.5", "us") == pytest.approx(12.5e-6)
    assert to_si("3", "s") == 3.0
    assert to_si("22,282", "tokens/s/node") == 22282.0
    assert unit_scale("ms per input token") == pytest.approx(1e-3)
    with pytest.raises(ValueError):
        unit_scale("furlongs")


def test_every_printed_value_reads_as_value_num():
    for r in csv_rows():
        assert parse_value(r["value"]) == pytest.approx(float(r["value_num"]), rel=1e-12), r["id"]


def test_known_rows(by_id):
    c = by_id["MLP-0052"]  # B200 x8, 405B Interactive, 2 replicas of TP4
    assert (c.hw, c.model, c.tp, c.pp, c.ep, c.replicas, c.replicas_from) == (
        "B200", "llama3-405b", 4, 1, 1, 2, "notes")
    assert (c.mode, c.target_qps, c.metric, c.weights_dtype, c.kv_dtype) == (
        "mlperf-interactive", 1.15, "output_tokens_per_s", "nvfp4", "fp8")
    assert c.osl == 653.4 and c.lengths == "dataset-mean" and c.division == "closed"
    assert c.ttft_limit_s == 4.5 and c.tpot_limit_s == 0.08
    assert c.value_per_replica == pytest.approx(c.value / 2)

    c = by_id["MLP-0053"]  # its TTFT mean, in seconds, the mean output length from MLP-0052
    assert c.metric == "ttft_mean_s" and c.value == pytest.approx(int(c.raw["value"]) * 1e-9)
    assert c.osl == 653.4 and any("MLP-0052" in a for a in c.assumptions)

    c = by_id["MLP-0096"]  # GB200 NVL72 Offline, 18 replicas of TP2xPP2
    assert (c.hw, c.model, c.tp, c.pp, c.replicas, c.gpus, c.mode) == (
        "GB200", "llama3-405b", 2, 2, 18, 72, "offline")

    c = by_id["MLP-0185"]  # Krai open division: Llama-3.1-70B with vLLM, 4 replicas of TP2
    assert (c.hw, c.model, c.engine, c.tp, c.replicas, c.division, c.weights_dtype) == (
        "H100-SXM", "llama3-70b", "vllm", 2, 4, "open", "fp8")

    c = by_id["DCR-0311"]  # DataCrunch 405B BF16 TP8, Poisson 1 req/s
    assert (c.hw, c.model, c.engine, c.tp, c.mode, c.rate, c.isl, c.osl, c.lengths) == (
        "H200-SXM", "llama3-405b", "sglang", 8, "rate", 1.0, 509.0, 534.0, "dataset-mean")

    c = by_id["TRT-0252"]  # B200 max-throughput DeepSeek-R1-0528, attention DP, FP8 KV
    assert (c.hw, c.model, c.tp, c.ep, c.attention_dp, c.concurrency, c.kv_dtype) == (
        "B200", "deepseek-v3", 8, 8, True, 7168, "fp8")
    assert c.spec_decoding == "none" and c.moe_tp == 1

    c = by_id["TRT-0248"]  # B200 min-latency: TP8/EP2, MTP with 3 next-token layers
    assert (c.tp, c.ep, c.moe_tp, c.spec_decoding, c.draft_tokens, c.concurrency) == (
        8, 2, 4, "mtp", 3, 1)
    assert by_id["TRT-0249"].metric == "output_tokens_per_s_per_user_with_ctx"
    assert by_id["TRT-0271"].relaxed_acceptance

    c = by_id["SGL-0276"]  # 22,282 decode tokens/s per node of 8 H100: per GPU
    assert (c.hw, c.model, c.tp, c.ep, c.attention_dp, c.phase) == (
        "H100-SXM", "deepseek-v3", 1, 72, True, "decode")
    assert c.metric == "output_tokens_per_s_per_gpu" and c.value == pytest.approx(22282 / 8)
    assert c.disaggregated and c.batch_per_gpu == 256

    c = by_id["VLB-0352"]  # "26.2K" prefill tokens per GPU-second
    assert (c.hw, c.metric, c.phase, c.value, c.value_resolution) == (
        "GB200", "input_tokens_per_s_per_gpu", "prefill", 26200.0, 50.0)


def test_known_skips(by_id):
    assert by_id["MLP-0008"].model == "llama2-70b"  # a case now: the model file exists
    assert by_id["MLP-0001"].hardware.name == "GB300"  # and so does GB300's spec
    s = by_id["MLP-0219"]  # GH200 running Llama-2-70B: no spec for the GPU
    assert s.reason == "no hardware spec: GH200" and s.model == "llama2-70b"
    assert by_id["VLB-0344"].reason.startswith("FITTED")
    assert by_id["VLB-0354"].reason.startswith("SECONDARY")
    assert by_id["SGL-0277"].reason.startswith("SIMULATED")
    assert by_id["SGL-0278"].reason.startswith("duplicate")
    assert by_id["VLB-0362"].reason == "no model file: DeepSeek-V3.2"


def test_summary_table_counts_and_reasons(loaded):
    cases, skipped = loaded
    text = summary_table(cases, skipped)
    assert "364 rows, 318 expressible, 46 skipped" in text
    for s in skipped:
        assert s.reason in text
    assert id_ranges(["MLP-0201", "MLP-0203", "MLP-0202", "SGL-0277"]) == \
        "MLP-0201..0203, SGL-0277"


def test_module_prints_the_summary(capsys):
    main()
    out = capsys.readouterr().out
    assert "expressible" in out and "no hardware spec: GH200" in out


def hand_cases(by_id):
    base = by_id["DCR-0284"]
    return [dataclasses.replace(base, id=f"X-{i}", value=v, lengths=ln)
            for i, (v, ln) in enumerate([(100.0, "fixed"), (200.0, "fixed"), (400.0, "fixed"),
                                         (50.0, "dataset-mean")], 1)]


def test_compare_computes_mape_exactly(by_id):
    predicted = {"X-1": 110.0, "X-2": 150.0, "X-3": None, "X-4": 60.0}
    cmps = compare(hand_cases(by_id), lambda c: predicted[c.id])
    assert [c.error for c in cmps] == [pytest.approx(0.1), pytest.approx(-0.25), None,
                                       pytest.approx(0.2)]
    rows = {r["lengths"]: r for r in summarize(cmps, "lengths")}
    fixed = rows["fixed"]
    assert (fixed["rows"], fixed["n"], fixed["n_unpredicted"]) == ("judged", 2, 1)
    assert fixed["mape"] == pytest.approx(0.175)
    assert fixed["median_ape"] == pytest.approx(0.175)
    assert fixed["max_ape"] == pytest.approx(0.25)
    assert fixed["bias"] == pytest.approx(-0.075)
    assert rows["dataset-mean"]["mape"] == pytest.approx(0.2)
    (one,) = summarize(cmps, ("source", "model"))
    assert (one["source"], one["model"], one["n"]) == ("DCR", "llama3-70b", 3)
    assert one["mape"] == pytest.approx((0.1 + 0.25 + 0.2) / 3)
    assert "MAPE" in comparison_report(cmps)


def test_fitted_rows_are_reported_apart(by_id):
    predicted = {"X-1": 110.0, "X-2": 150.0, "X-3": 400.0, "X-4": 60.0}
    cmps = compare(hand_cases(by_id), lambda c: predicted[c.id], fitted={"X-2"})
    assert [c.fitted for c in cmps] == [False, True, False, False]
    rows = {(r["lengths"], r["rows"]): r for r in summarize(cmps, "lengths")}
    assert rows[("fixed", "judged")]["n"] == 2
    assert rows[("fixed", "judged")]["mape"] == pytest.approx(0.05)  # 0.1 and 0.0
    assert rows[("fixed", "fitted")]["n"] == 1
    assert rows[("fixed", "fitted")]["mape"] == pytest.approx(0.25)
    with pytest.raises(ValueError, match="not among the cases"):
        compare(hand_cases(by_id), lambda c: 1.0, fitted={"NOPE-1"})
    with pytest.raises(ValueError, match="unknown group keys"):
        summarize(cmps, "colour")
