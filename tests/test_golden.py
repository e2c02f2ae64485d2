"""Golden regression of headline predictions, reviewed like code.

A deliberate model change regenerates it:  PERFMODEL_REGEN_GOLDEN=1 python -m pytest
tests/test_golden.py  — then review the diff of tests/golden/headline.json in the commit.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import perfmodel as pm

GOLDEN = Path(__file__).parent / "golden" / "headline.json"

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


def _predict_all() -> list[dict]:
    out = []
    for hw, name, params in HEADLINES:
        est = pm.predict_op(pm.ops.op(name, **params), hw)
        out.append({"hardware": hw, "op": name, "params": params, "time_s": est.time_s,
                    "bound": est.bound})
    return out


def test_headline_predictions_match_golden():
    got = _predict_all()
    if os.environ.get("PERFMODEL_REGEN_GOLDEN") or not GOLDEN.exists():
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(got, indent=1) + "\n")
        pytest.skip(f"regenerated {GOLDEN}; review and commit the diff")
    want = json.loads(GOLDEN.read_text())
    assert [(w["hardware"], w["op"], w["params"]) for w in want] == \
        [(g["hardware"], g["op"], g["params"]) for g in got], "headline list changed: regenerate"
    for w, g in zip(want, got):
        label = f"{g['op']} {g['params']} on {g['hardware']}"
        assert g["bound"] == w["bound"], label
        assert g["time_s"] == pytest.approx(w["time_s"], rel=1e-9), label
