"""Calibration: leave-one-source-out cross-validation, the accuracy file, prediction bands."""
from __future__ import annotations

from pathlib import Path

import pytest

import perfmodel as pm
from perfmodel import intervals
from perfmodel.validation import calibrate as cal_mod
from perfmodel.validation import fit

README = Path(__file__).resolve().parents[2] / "README.md"


def test_a_source_is_the_row_id_without_its_number():
    assert cal_mod.source_of("att-fa3p-fwd16-003") == "att-fa3p-fwd16"
    assert cal_mod.source_of("CUDNN-TRN-014") == "CUDNN-TRN"
    assert cal_mod.source_of("CUTLASS2917-001") == "CUTLASS2917"


def test_a_held_out_source_leaves_its_constants_at_their_priors():
    """The MAMF row and the B200 stream row are their constants' only rows: holding them out
    fits those constants on nothing, so they take their priors, and no entry cites them."""
    entries = fit.fit_all(exclude=frozenset({fit.MAMF_ROW, fit.STREAM_ROW}), serving=False)
    assert entries["tensor_sustained_fraction"]["value"] == fit.prior("tensor_sustained_fraction")
    assert entries["tensor_sustained_fraction"]["fitted_on"] == []
    assert entries["hbm_achievable_fraction.b200"]["value"] == pytest.approx(
        fit.prior("hbm_achievable_fraction.b200"))
    assert all(fit.MAMF_ROW not in e["fitted_on"] for e in entries.values())


def test_the_accuracy_file_and_the_readme_block_agree():
    """perfmodel calibrate writes both; the README block is rendered from the file."""
    doc = cal_mod.load_accuracy()
    assert doc is not None, "perfmodel/accuracy.yaml missing: run perfmodel calibrate"
    text = README.read_text(encoding="utf-8")
    assert cal_mod.readme_block(doc) in text
    overall = doc["table"][-1]
    assert overall["op_class"] == "all" and overall["n"] >= 400
    assert overall["cv_mape"] < overall["roofline_mape"]  # beats the plain roofline, judged
    for row in doc["table"]:
        assert row["fitted"] <= row["n"]
        # nothing of its sources informed a constant (no fold refits them): CV is in-sample
        if row["fitted"] == 0 and not set(row["sources"]) & set(doc["folds"]):
            assert row["cv_mape"] == pytest.approx(row["in_sample_mape"], abs=1e-4)


def test_an_estimate_carries_the_band_of_its_class():
    op = pm.ops.op("attention", batch=2, heads=16, seq_q=4096, head_dim=128, dtype="bf16")
    est = pm.predict_op(op, "H100-SXM")
    lo, hi = est.interval_s
    assert 0 < lo < hi
    assert est.interval_basis == "attention_fwd@hopper"
    doc = cal_mod.load_accuracy()
    band = doc["intervals"]["by_class"]["attention_fwd@hopper"]
    assert lo == pytest.approx(est.time_s * 2.718281828459045 ** band["log_q10"])
    assert pm.predict_op(op, "H100-SXM", "roofline").interval_s is None
    assert "interval_s" in est.to_dict()


def test_a_class_without_rows_falls_back_to_its_architecture():
    op = pm.ops.op("rng", elements=1e8)
    b = intervals.band(op, pm.hardware("H100-SXM"))
    assert b is not None and b.basis == "hopper"
    g = pm.build_graph(pm.load_model("llama3-8b"), phase="decode", batch=8, context=1024)
    pred = pm.predict(g, "H100-SXM")
    iv = pred.to_dict()["interval_s"]
    assert 0 < iv[0] < iv[1]  # the band need not contain the prediction: a biased class's
    # residuals sit on one side of it


@pytest.mark.slow
def test_calibration_is_what_the_files_hold():
    """A fresh calibration (kernel rows; serving constants as written) reproduces the accuracy
    file: what `perfmodel calibrate --check` checks."""
    cal = cal_mod.calibrate(serving=False)
    assert cal_mod.render(cal_mod.accuracy_document(cal)) == cal_mod.ACCURACY_PATH.read_text()
    for source, ids in cal.folds.items():  # each refitted source's rows were fit rows
        assert all(cal_mod.source_of(i) == source for i in ids)


def test_a_gemm_takes_the_band_of_the_library_linears_of_its_dtype():
    """The gemm op prices a library GEMM: its band comes from the 171 AIConfigurator linears of
    its dtype on Blackwell, not from the gemm class's 8 user kernels of bug reports (which would
    put the whole band above the prediction)."""
    b200 = pm.hardware("B200")
    for dtype, cls in (("bf16", "linear_bf16"), ("fp8", "linear_fp8"), ("nvfp4", "linear_nvfp4")):
        est = pm.predict_op(pm.ops.op("gemm", m=8192, n=8192, k=8192, dtype=dtype), b200)
        assert est.interval_basis == f"{cls}@blackwell", dtype
        lo, hi = est.interval_s
        assert lo < est.time_s < hi, dtype
    block = pm.ops.op("gemm", m=4096, n=4096, k=4096, dtype="fp8", fp8_scaling="block")
    assert intervals.band(block, pm.hardware("H100-SXM")).basis == "linear_fp8_block@hopper"
    # no linear rows for the dtype: the gemm class, then the architecture
    tf32 = pm.ops.op("gemm", m=4096, n=4096, k=4096, dtype="tf32")
    assert intervals.band(tf32, pm.hardware("H100-SXM")).basis == "gemm@hopper"
    assert intervals.band_classes(tf32) == ("gemm",)
