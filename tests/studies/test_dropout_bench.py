"""validate/dropout_bench.py, the silicon check of fused dropout's cost: its rows load as
attention cases with their dropout, and the model prices them (docs/studies.md §1.6)."""
from __future__ import annotations

import csv
import importlib
import sys
from pathlib import Path

import pytest

from perfmodel.validation.measurements import load_cases

VALIDATE = Path(__file__).resolve().parents[2] / "validate"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)   # the harness imports without torch
    monkeypatch.syspath_prepend(str(VALIDATE))
    for name in ("dropout_bench", "torch_bench"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    mod = importlib.import_module("dropout_bench")
    yield mod
    for name in ("dropout_bench", "torch_bench"):
        sys.modules.pop(name, None)


def test_rows_load_as_attention_cases_with_their_dropout(bench, tmp_path):
    lib = "FlashAttention-2 (PyTorch 2.11.0 SDPA flash)"
    rows = [bench.csv_row(i + 1, "NVIDIA H200", lib, 4, 4096, 128, False, direction, p, t)
            for i, (direction, p, t) in enumerate((("fwd", 0.0, 1.0), ("fwd", bench.P, 1.2),
                                                  ("bwd", 0.0, 2.5), ("bwd", bench.P, 3.4)))]
    path = tmp_path / "dropout.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(bench.COLUMNS)
        w.writerows(rows)
    cases, skipped = load_cases(path)
    assert not skipped and len(cases) == 4
    assert [c.op.dropout_p for c in cases] == [0.0, bench.P, 0.0, bench.P]
    assert [c.op.direction for c in cases] == ["fwd", "fwd", "bwd", "bwd"]
    assert all(c.op.kernel == "fa2" and c.op.seq_q == 4096 for c in cases)
    assert cases[1].measured_time_s == pytest.approx(1.2e-3)


def test_bench_covers_both_passes_libraries_and_the_published_p(bench):
    assert bench.P == 0.125                       # the GB200 rows' p (a multiple of 1/16)
    assert {d for d, _ in bench.SHAPES} == {64, 128}
    src = (VALIDATE / "dropout_bench.py").read_text()
    for backend in ("SDPBackend.FLASH_ATTENTION", "SDPBackend.CUDNN_ATTENTION",
                    "flash_attn_func"):
        assert backend in src
    assert "dropout_bench.py" in (VALIDATE / "run_gpu.sh").read_text()
