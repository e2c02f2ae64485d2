"""The published training measurements as cases and their replay on the planner: every row is a
case or skipped with its reason, known rows parse to the layout and SI value the CSV states, a
malformed row is one InputError line, the new model files match their stated parameter counts,
and a small named subset replays to finite positive predictions with the roofline above them."""
from __future__ import annotations

import csv
import dataclasses
import math
import shutil

import pytest

from perfmodel.errors import InputError
from perfmodel.workloads.models import list_models, load_model
from perfmodel.validation.training import (
    FLOP_METRICS, LF_FLOP_CONVENTION, METRICS, NO_MODEL_FILE, RECIPES, RECOMPUTE, SHARDING,
    TRAINING_CSV, Skipped, TrainingCase, load_training_cases, main, summary_table)
from perfmodel.validation.training_predict import (
    NOT_FIT, TrainingComparison, compare_case, plan_case, report, run, summarize,
    throughput_rows, training_fitted_rows, why_not)


@pytest.fixture(scope="module")
def loaded():
    return load_training_cases()


@pytest.fixture(scope="module")
def by_id(loaded):
    cases, skipped = loaded
    return {r.id: r for r in [*cases, *skipped]}


def csv_rows():
    with TRAINING_CSV.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_every_row_is_a_case_or_skipped_with_a_reason(loaded):
    cases, skipped = loaded
    ids = [r["id"] for r in csv_rows()]
    assert len(ids) == 777
    assert sorted([c.id for c in cases] + [s.id for s in skipped]) == sorted(ids)
    assert all(isinstance(s, Skipped) and s.reason.strip() and s.reasons[0] == s.reason
               for s in skipped)
    assert len(cases) == 640 and len(skipped) == 137


def test_cases_are_well_formed(loaded):
    cases, _ = loaded
    models = set(list_models())
    for c in cases:
        assert isinstance(c, TrainingCase)
        assert c.model in models and c.hardware.name, c.id
        assert c.metric in METRICS and c.recipe in RECIPES and c.sharding in SHARDING, c.id
        assert c.recompute in (*RECOMPUTE, None) and c.zero in (0, 1, 2, 3), c.id
        assert c.value > 0 and math.isfinite(c.value), c.id
        assert c.gpus == c.tp * c.pp * c.cp * c.dp, c.id
        assert c.microbatches * c.micro_batch * c.dp == c.global_batch, c.id
        assert c.config == c.id.rsplit("-", 1)[0] and c.raw["id"] == c.id
        if c.flop_convention is not None:
            assert c.metric in FLOP_METRICS and c.source == "LF"


def test_skip_reasons_name_what_is_missing(loaded):
    _, skipped = loaded
    n: dict[str, int] = {}
    for s in skipped:
        n[s.reason] = n.get(s.reason, 0) + 1
    assert "no hardware spec: A100 40GB" not in n       # hwspecs/A100-SXM-40GB.yaml
    assert n["no hardware spec: B200 power-limited"] == 10
    assert n["no model file: Llama-4 Maverick"] == 16    # interleaved dense/MoE layers
    assert n["micro-batch size not stated"] == 16
    assert n["fine-tuning (SFT) on packed sequences: per-document attention, not a "
             "pretraining step"] == 6
    for r in n:
        if r.startswith("no model file: "):
            assert r.split(": ", 1)[1].startswith(NO_MODEL_FILE), r
    # nanotron's figure states neither the sequence length nor the precision
    nt = next(s for s in skipped if s.id == "NT-01-mfu")
    assert "sequence length not stated" in nt.reasons and "precision not stated" in nt.reasons


def test_three_rows_by_hand(by_id):
    # DGXC-2505-DSV3-H100-512-step: H100, 512 GPUs, DeepSeek-V3, GBS 4096, MBS 1, TP 2, PP 8,
    # VP 1, CP 1, EP 64, dp=32 (inferred), BF16, 48.948 s/step, notes "ETP=1"
    c = by_id["DGXC-2505-DSV3-H100-512-step"]
    assert (c.hw, c.model, c.recipe, c.dtype, c.gpus) == ("H100-SXM", "deepseek-v3", "bf16",
                                                          "bf16", 512)
    assert (c.tp, c.pp, c.vp, c.cp, c.ep, c.dp, c.expert_tp) == (2, 8, 1, 1, 64, 32, 1)
    assert (c.micro_batch, c.global_batch, c.seq, c.microbatches) == (1, 4096, 4096, 128)
    assert (c.metric, c.value) == ("step_time_s", 48.948)
    assert (c.sharding, c.zero, c.sharding_stated, c.recompute) == (
        "distributed-optimizer", 1, False, None)

    # DGXC-2411-L70B-FP8-64-tput: 95239 tokens/s over all 64 H100; TP 4, PP 4, CP 2, VP 5,
    # MBS 1, GA 64, GBS 128
    c = by_id["DGXC-2411-L70B-FP8-64-tput"]
    assert (c.model, c.recipe, c.tp, c.pp, c.vp, c.cp, c.dp) == ("llama3-70b", "fp8", 4, 4, 5,
                                                                 2, 2)
    assert (c.global_batch, c.microbatches, c.seq) == (128, 64, 8192)
    assert c.metric == "tokens_per_s_per_gpu" and c.value == pytest.approx(95239 / 64)
    assert c.parallelism == "TP+PP+VP+CP+DP"

    # LF-004-mfu: MPT-30B on 512 H100 80GB, FSDP FULL_SHARD, seq 2048, GBS 4096, MBS 8, full
    # activation checkpointing, MFU 40.27 % under llm-foundry's stated convention
    c = by_id["LF-004-mfu"]
    assert (c.hw, c.model, c.dp, c.zero, c.sharding) == ("H100-SXM", "mpt-30b", 512, 3,
                                                         "fsdp-full-shard")
    assert (c.micro_batch, c.global_batch, c.seq, c.microbatches, c.recompute) == (
        8, 4096, 2048, 1, "full")
    assert (c.metric, c.flop_convention) == ("mfu", LF_FLOP_CONVENTION)
    assert c.value == pytest.approx(0.4027) and c.params_stated == 29975214080
    assert c.tokens_per_s_per_gpu_from_flops() == pytest.approx(
        by_id["LF-004-tps"].value, rel=0.005)


def test_recipes_and_sharding_as_stated(by_id):
    c = by_id["AO-F8-H100-2-tps"]    # torchao FP8 tensorwise, FSDP2 over 8 H100, per-op SAC
    assert (c.recipe, c.dtype, c.sharding, c.zero, c.recompute) == (
        "fp8_tensorwise", "fp8", "fsdp2", 3, "op")
    assert by_id["AO-F8-H100-3-tps"].recipe == "fp8_rowwise"
    assert by_id["NEMOFW-2504-GB200-02-tps"].recipe == "fp8_current"
    assert by_id["NEMOFW-2504-GB200-03-tps"].zero == 3       # FSDP=1
    assert by_id["NEMOFW-2504-GB200-02-tps"].zero == 1       # FSDP=0: distributed optimizer
    c = by_id["NEMOFW-2502-B200-08-tps"]                     # the swapped GBS/MBS cells
    assert (c.global_batch, c.micro_batch, c.microbatches) == (64, 1, 16)
    assert any("swapped" in a for a in c.assumptions)
    c = by_id["AM-04-tps"]                                   # LBS 8 × GA 4, MBS 1 with PP 4
    assert (c.dp, c.pp, c.vp, c.ep, c.microbatches) == (256, 4, 8, 64, 32)


def test_flop_convention_is_consistent_with_the_throughput_rows(loaded):
    """llm-foundry's MFU rows give back their configuration's tokens/s under the stated
    6·N + 12·L·d·s FLOP per token and the spec's dense peak."""
    cases, _ = loaded
    tps = {c.config: c for c in cases if c.metric == "tokens_per_s_per_gpu"}
    mfu = [c for c in cases if c.flop_convention == LF_FLOP_CONVENTION]
    assert len(mfu) == 216                               # every LF configuration
    for c in mfu:
        assert c.tokens_per_s_per_gpu_from_flops() == pytest.approx(tps[c.config].value,
                                                                    rel=0.01), c.id


def test_step_time_and_throughput_rows_agree(loaded):
    """Where a source prints both, tokens/s/GPU × GPUs × step time = global batch × seq."""
    cases, _ = loaded
    tps = {c.config: c for c in cases if c.metric == "tokens_per_s_per_gpu"}
    pairs = [(c, tps[c.config]) for c in cases if c.metric == "step_time_s" and c.config in tps]
    assert len(pairs) >= 25
    for step, rate in pairs:
        assert rate.value * rate.gpus * step.value == pytest.approx(step.tokens_per_step,
                                                                    rel=0.02), step.id


def test_summary_prints_counts_and_reasons(loaded, capsys):
    text = summary_table(*loaded)
    assert "777 rows, 640 expressible, 137 skipped" in text
    assert "no model file: Llama-4 Maverick" in text and "DGXC 16" in text
    main()
    assert "training measurements: 777 rows" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------
# Malformed input


def _broken_copy(tmp_path, edit):
    rows = csv_rows()
    header = list(rows[0].keys())
    edit(rows, header)
    p = tmp_path / "training_measurements.csv"
    with p.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=header)
        w.writeheader()
        w.writerows(rows)
    return p


@pytest.mark.parametrize("column, text, expect", [
    ("value", "abc", "value: expected a number, got 'abc'"),
    ("tp", "four", "tp: expected a positive integer, got 'four'"),
    ("ep", "lots", "ep: expected a positive integer, 'n/a', '-' or 'not stated', got 'lots'"),
    ("dp_or_fsdp", "unknown", "dp_or_fsdp: no data-parallel degree in 'unknown'"),
])
def test_a_malformed_row_is_one_input_error_line(tmp_path, column, text, expect):
    def edit(rows, _):
        rows[1][column] = text
    p = _broken_copy(tmp_path, edit)
    with pytest.raises(InputError) as e:
        load_training_cases(p)
    assert len(e.value.problems) == 1 and "\n" not in str(e.value)
    rid = csv_rows()[1]["id"]
    assert str(e.value) == f"training_measurements.csv: row 3 ({rid}): {expect}"


def test_repeated_ids_and_missing_columns_are_input_errors(tmp_path):
    def dup(rows, _):
        rows[2]["id"] = rows[0]["id"]
    with pytest.raises(InputError, match=r"row 4 \(NEMO2407-001-tps\): id: appears twice "
                                         r"\(also row 2\)"):
        load_training_cases(_broken_copy(tmp_path, dup))

    def drop(rows, header):
        header.remove("cp")
        for r in rows:
            del r["cp"]
    with pytest.raises(InputError, match="training_measurements.csv: missing columns: cp"):
        load_training_cases(_broken_copy(tmp_path, drop))


def test_the_shipped_csv_is_the_collection_unchanged(tmp_path):
    """A copy of the shipped file reads the same: nothing depends on its location."""
    p = tmp_path / "copy.csv"
    shutil.copy(TRAINING_CSV, p)
    cases, skipped = load_training_cases(p)
    assert len(cases) == 640 and len(skipped) == 137


# ---------------------------------------------------------------------------------------------
# Model files added for these rows


@pytest.mark.parametrize("name", ["llama2-7b", "llama2-13b", "llama2-70b", "mixtral-8x7b",
                                  "mixtral-8x22b", "nemotron4-15b", "nemotron4-340b",
                                  "mpt-30b"])
def test_new_model_files_match_their_stated_parameter_counts(name):
    m = load_model(name)
    assert m.params() == pytest.approx(m.params_total_stated, rel=0.005)


@pytest.mark.parametrize("name, active", [("mixtral-8x7b", 12.9e9), ("mixtral-8x22b", 39e9)])
def test_mixtral_active_parameters(name, active):
    assert load_model(name).params(active=True) == pytest.approx(active, rel=0.01)


# ---------------------------------------------------------------------------------------------
# Replay on the planner

SUBSET = ("NEMO2407-007-tps",               # Llama-2 70B, TP4 PP4 VP20, FP8, H100
          "LF-081-tps",                     # MPT-30B, FSDP FULL_SHARD, full recompute, A100
          "NEMOFW-2502-B200-07-tps",        # Mixtral 8x7B, EP8 DP64, FP8, B200
          "AM-07-step",                     # Qwen3-30B-A3B, EP8 FSDP2, BF16, H100
          "DGXC-2505-N340B-GB200-weak-FP8-512-step")  # Nemotron-4 340B, TP8 PP4 VP12, GB200


@pytest.fixture(scope="module")
def compared(loaded):
    return throughput_rows(loaded[0])


def test_a_named_subset_replays_to_finite_positive_predictions(by_id, compared):
    for rid in SUBSET:
        cmp = compare_case(by_id[rid], compared)
        assert cmp.reason is None, (rid, cmp.reason, cmp.detail)
        assert cmp.predicted > 0 and math.isfinite(cmp.predicted), rid
        assert cmp.roofline > 0 and math.isfinite(cmp.roofline), rid
        # the speed of light is at least as fast as the kernel model
        assert cmp.roofline_error >= cmp.error - 1e-9, rid
        plan = plan_case(by_id[rid])
        assert plan.gpus == by_id[rid].gpus and not isinstance(plan, str)


def test_rows_not_predicted_say_why(by_id, compared):
    # context parallelism is modelled now (ring attention): the row is predicted
    assert why_not(by_id["DGXC-2411-L70B-FP8-64-tput"], compared) is None
    assert "compared on its tokens/s row" in why_not(by_id["NEMO2407-007-tflops"], compared)
    assert "compared on its tokens/s row" in why_not(by_id["LF-004-mfu"], compared)
    assert "peak memory" in why_not(by_id["AO-F8-H100-1-mem"], compared)
    # Nemotron-4 340B on 128 H100 (80 GiB each), its recomputation not stated: it fits
    # without any, so it is replayed with none (training_predict.replayed_recompute) ...
    row = by_id["NEMO2407-010-tps"]
    cmp = compare_case(row, compared)
    assert cmp.reason is None and plan_case(row).recompute == "none"
    # ... NeMo AutoModel's DeepSeek-V3 on H100 does not fit without recomputation, so it is
    # replayed with full recomputation ...
    row = by_id["AM-04-tps"]
    assert compare_case(row, compared).reason is None and plan_case(row).recompute == "full"
    # ... and stated as none it is refused for memory, with the planner's estimate
    cmp = compare_case(dataclasses.replace(row, recompute="none"), compared)
    assert cmp.reason == NOT_FIT and "GB per GPU" in cmp.detail and cmp.predicted is None


def test_a_flop_row_with_a_stated_convention_and_no_twin_is_converted(by_id):
    """Alone in its configuration, llm-foundry's MFU row is compared as the tokens/s its stated
    FLOP convention implies."""
    c = dataclasses.replace(by_id["LF-081-mfu"], config="LF-081-alone")
    cmp = compare_case(c, {})
    assert cmp.reason is None and cmp.metric == "tokens_per_s_per_gpu"
    assert cmp.measured == pytest.approx(by_id["LF-081-tps"].value, rel=0.01)
    twin = compare_case(by_id["LF-081-tps"], {})
    assert cmp.predicted == pytest.approx(twin.predicted)


def test_errors_are_in_throughput_terms(by_id):
    c = by_id["AM-07-step"]
    faster = TrainingComparison(c, "step_time_s", 2.0, 1.0, 0.5)
    assert faster.error == pytest.approx(1.0) and faster.roofline_error == pytest.approx(3.0)
    c = by_id["AM-07-tps"]
    assert TrainingComparison(c, "tokens_per_s_per_gpu", 100.0, 50.0, 80.0).error == \
        pytest.approx(-0.5)


def test_full_replay_and_report(loaded):
    cases, skipped = loaded
    comparisons = run(cases, progress=False)
    assert len(comparisons) == len(cases)
    # the clock fraction is fitted on the Megatron-Core runs (their whole configurations), the
    # PyTorch frameworks' are judged only
    fitted_rows = training_fitted_rows(cases)
    assert {c.source for c in cases if c.id in fitted_rows} == {"DGXC", "NEMOFW", "NEMO2407",
                                                                   "MLM"}
    assert not {c.id for c in cases if c.source in ("LF", "AO", "AM")} & fitted_rows
    assert all(c.fitted == (c.case.id in fitted_rows) for c in comparisons)
    done = [c for c in comparisons if c.error is not None]
    assert len(done) >= 60
    assert all(c.predicted > 0 and math.isfinite(c.predicted) for c in done)
    assert all(c.reason for c in comparisons if c.error is None)
    rows = summarize(comparisons, "source")
    assert {r["source"] for r in rows if r["n"]} >= {"NEMO2407", "NEMOFW", "DGXC", "LF", "AM"}
    folds = [{"source": "MLM", "n": 3, "fraction": 0.8, "mape": 0.1, "median_ape": 0.1,
              "bias": -0.1, "fitted_mape": 0.1, "fitted_median_ape": 0.1, "fitted_bias": -0.1}]
    text = report(comparisons, len(skipped), folds)
    assert "10 configurations furthest" in text and "not predicted, by reason" in text
    assert "refitted without it" in text and "0.800" in text and "every configuration judged" in text


@pytest.mark.slow
def test_a_source_held_out_of_the_clock_fit_is_judged_at_the_refitted_fraction():
    """Leave Megatron-LM's 3 configurations out: the fraction refits on the other 80 within
    its range, and the held-out rows' errors are theirs at that fraction."""
    from perfmodel import fitted
    from perfmodel.validation import fit
    from perfmodel.validation.training_predict import cross_validated
    (fold,) = cross_validated(["MLM"], progress=False)
    assert fold["source"] == "MLM" and fold["n"] == 3
    lo, hi = fitted.CONSTANTS["training.sm_clock_fraction"].range
    assert lo <= fold["fraction"] <= hi
    # one of 83 configurations moves the median little: within 0.01 of the fitted value
    assert fold["fraction"] == pytest.approx(fitted.value("training.sm_clock_fraction"),
                                             abs=0.01)
    held = [r for r in fit.training_clock_fit_rows() if r.source == "MLM"]
    errors = [abs(plan_case(r, sm_clock_fraction=fold["fraction"]).tokens_per_s / r.gpus
                  / r.value - 1) for r in held]
    assert fold["mape"] == pytest.approx(sum(errors) / 3)
    with pytest.raises(InputError, match="sources"):
        cross_validated(["LF"], progress=False)
