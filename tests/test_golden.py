"""Golden regression of headline predictions, reviewed like code: single ops, and whole models
(builder + scheduler: a step's total and the bound that takes the most time; the planners: one
serving plan's best point, one training step).

Tolerance: every time (and rate, MFU) within rel 1e-9 of the file (`REL`), bounds and batch sizes
exactly.

A deliberate model change regenerates it:  PERFMODEL_REGEN_GOLDEN=1 python -m pytest
tests/test_golden.py  — then review the diff of tests/golden/headline.json in the commit.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import perfmodel as pm
from perfmodel.plan.serving import plan_serving
from perfmodel.plan.training import plan_training

GOLDEN = Path(__file__).parent / "golden" / "headline.json"
REL = 1e-9  # relative tolerance on every float of the file

HEADLINES = [
    ("H100-SXM", "gemm", dict(m=8192, n=8192, k=8192, dtype="bf16")),
    ("H100-SXM", "gemm", dict(m=1, n=36864, k=7168, dtype="bf16")),
    ("H100-SXM", "gemm", dict(m=16384, n=36864, k=7168, dtype="fp8")),
    ("A100-SXM", "gemm", dict(m=8192, n=8192, k=8192, dtype="bf16")),
    ("B200", "gemm", dict(m=8192, n=8192, k=8192, dtype="nvfp4")),
    ("B300", "gemm", dict(m=8192, n=8192, k=8192, dtype="nvfp4")),
    ("GB200", "gemm", dict(m=64, n=28672, k=8192, dtype="fp8")),
    ("H200-SXM", "elementwise", dict(elements=1 << 28, dtype="bf16", inputs=2)),
    ("H100-SXM", "norm", dict(rows=16384, cols=8192, dtype="bf16")),
    ("H100-SXM", "softmax", dict(rows=16384, cols=131072, dtype="fp32")),
    ("H100-SXM", "rng", dict(elements=1 << 30, generator="philox4x32-7")),
    ("B200", "rng", dict(elements=1 << 30, generator="philox4x32-10")),
    ("B200", "quantize", dict(rows=8192, cols=8192, to="nvfp4", rht=True,
                              stochastic_rounding=True)),
    ("H100-SXM", "attention", dict(batch=4, heads=32, seq_q=4096, head_dim=128, dtype="bf16")),
    ("B200", "attention", dict(batch=64, heads=64, kv_heads=8, seq_q=1, seq_kv=8192,
                               head_dim=128, dtype="bf16")),
    ("H100-SXM", "moe", dict(tokens=256, experts=128, top_k=8, hidden=2048, expert_hidden=768,
                             dtype="bf16", gpus=8)),
    ("B200", "allreduce", dict(bytes=1.6e8, gpus=8)),
]


# model x GPU x build_graph parameters, through pm.build_graph + pm.predict
GRAPHS = [
    ("H100-SXM", "llama3-70b", dict(phase="decode", batch=64, context=8192, tp=8)),
    ("B200", "llama3-8b", dict(phase="prefill", batch=1, seq=4096)),
    ("H200-SXM", "deepseek-v3", dict(phase="decode", batch=32, context=4096, ep=8, dtype="fp8")),
    ("B200", "qwen3-30b-a3b", dict(phase="decode", batch=64, context=4096, ep=8)),
    ("H100-SXM", "llama3-8b", dict(phase="train", batch=8, seq=4096, pp=2, microbatches=4)),
]
SERVING = [("H200-SXM", "llama3-70b", dict(tp=8, dtype="fp8", tpot_slo_s=0.05))]
TRAINING = [("B200", "llama3-70b", dict(batch=16, seq=8192, tp=8, pp=4, dp=32, dtype="fp8"))]


def _top_bound(pred) -> str:
    """The bound that takes the most scheduled time over the graph's ops."""
    by_bound: dict[str, float] = {}
    for o in pred.ops:
        by_bound[o.estimate.bound] = by_bound.get(o.estimate.bound, 0.0) + o.time_s
    return max(by_bound, key=by_bound.get)


def _predict_models() -> list[dict]:
    out = []
    for hw, model, params in GRAPHS:
        pred = pm.predict(pm.build_graph(pm.load_model(model), **params), hw)
        out.append({"kind": "graph", "hardware": hw, "model": model, "params": params,
                    "total_time_s": pred.total_time_s, "bound": _top_bound(pred)})
    for hw, model, params in SERVING:
        best = plan_serving(model, hw, **params).best
        out.append({"kind": "serving", "hardware": hw, "model": model, "params": params,
                    "batch": best.batch, "tpot_s": best.tpot_s, "ttft_s": best.ttft_s,
                    "tokens_per_s_per_gpu": best.tokens_per_s_per_gpu})
    for hw, model, params in TRAINING:
        plan = plan_training(model, hw, **params)
        out.append({"kind": "training", "hardware": hw, "model": model, "params": params,
                    "step_time_s": plan.step_time_s, "tokens_per_s": plan.tokens_per_s,
                    "mfu": plan.mfu})
    return out


def _golden() -> list[dict]:
    """The file's entries; with PERFMODEL_REGEN_GOLDEN=1 (or no file) rewrite it and skip. The
    whole-model entries come first (so adding them left every single-op line as it was)."""
    if os.environ.get("PERFMODEL_REGEN_GOLDEN") or not GOLDEN.exists():
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(_predict_models() + _predict_all(), indent=1) + "\n")
        pytest.skip(f"regenerated {GOLDEN}; review and commit the diff")
    return json.loads(GOLDEN.read_text())


def _predict_all() -> list[dict]:
    out = []
    for hw, name, params in HEADLINES:
        est = pm.predict_op(pm.ops.op(name, **params), hw)
        out.append({"hardware": hw, "op": name, "params": params, "time_s": est.time_s,
                    "bound": est.bound})
    return out


def test_headline_predictions_match_golden():
    got = _predict_all()
    want = [w for w in _golden() if "op" in w]
    assert [(w["hardware"], w["op"], w["params"]) for w in want] == \
        [(g["hardware"], g["op"], g["params"]) for g in got], "headline list changed: regenerate"
    for w, g in zip(want, got):
        label = f"{g['op']} {g['params']} on {g['hardware']}"
        assert g["bound"] == w["bound"], label
        assert g["time_s"] == pytest.approx(w["time_s"], rel=REL), label


def test_model_headlines_match_golden():
    got = _predict_models()
    want = [w for w in _golden() if "kind" in w]
    assert [(w["kind"], w["hardware"], w["model"], w["params"]) for w in want] == \
        [(g["kind"], g["hardware"], g["model"], g["params"]) for g in got], \
        "model headline list changed: regenerate"
    for w, g in zip(want, got):
        label = f"{g['kind']} {g['model']} {g['params']} on {g['hardware']}"
        assert set(g) == set(w), label
        for key, value in g.items():
            if isinstance(value, float):
                assert value == pytest.approx(w[key], rel=REL), f"{label}: {key}"
            else:
                assert value == w[key], f"{label}: {key}"
