"""The coverage of the SOL-ExecBench problems and the cross-check of the published bounds
(perfmodel/sol/coverage.py)."""
from __future__ import annotations

import pytest

from perfmodel.sol import coverage


@pytest.fixture(scope="module")
def checks():
    return coverage.check(coverage.read())


@pytest.fixture(scope="module")
def summary(checks):
    return coverage.summary(checks)


def by_name(checks, prefix):
    return next(c for c in checks if c.problem.startswith(prefix))


def test_coverage_counts(summary):
    p, w = summary["problems"], summary["workloads"]
    assert p["total"] == 235 and w["total"] == 3957
    assert p["direct"] + p["approximate"] + p["none"] == 235
    assert p["direct"] + p["approximate"] >= 180   # the bar
    assert p["none"] == len(summary["unmapped"]) == 5
    assert w["direct"] + w["approximate"] + w["none"] == 3957
    assert all(summary["unmapped"].values())        # every unmapped problem says why


def test_where_the_conventions_agree_most_workloads_agree(summary):
    ca = summary["conventions_agree"]
    assert ca["workloads"] > 1500
    assert ca["agree"] / ca["workloads"] > 0.85
    assert ca["median_ratio"] == pytest.approx(1.0, abs=0.01)
    assert ca["largest_disagreement"]["workload"]


def test_published_defects_are_flagged_not_inherited(checks):
    # FlashInfer-Bench GEMM: the bound leaves out the activation read
    gemm = by_name(checks, "FlashInfer-Bench__005_gemm")
    assert gemm.verdict == "below_io" and "(A) read left out" in gemm.explanation
    # a paged prefill below the time to read Q and write O
    assert by_name(checks, "FlashInfer-Bench__015").verdict == "below_io"
    # published rows copied from another problem
    copied = by_name(checks, "Quant__010")
    assert copied.verdict == "copied" and "Quant__001" in copied.explanation
    # an NVFP4 bound at half the MACs
    assert by_name(checks, "Quant__020").verdict == "fp4_pair"


def test_a_memory_bound_and_a_compute_bound_problem_agree(checks):
    for prefix in ("L1__069_rms_norm", "L1__044_moe_expert_computation",
                   "L2__004_fused_residual_rms_mlp", "Quant__001"):
        c = by_name(checks, prefix)
        assert c.status == "direct" and c.verdict == "agree", prefix
        assert sorted(c.ratios)[len(c.ratios) // 2] == pytest.approx(1.0, abs=0.01)


def test_standin_kinds_drop_names_and_numbers():
    assert coverage.standin_kind("conv1d_weight: the depthwise conv over 20480 of the 37120 "
                                 "channels of in_proj_weight out") == \
        "the depthwise conv over N of the N channels of X"
