"""Top-k (perfmodel/ops/topk.py): PyTorch's radix select, RADIX_BITS = 2 per pass."""
from __future__ import annotations

import pytest

import perfmodel as pm
from perfmodel.errors import InputError
from perfmodel.ops import TopK


def test_passes_follow_the_key_width():
    assert TopK(rows=8, cols=256, k=8, dtype="fp32").passes == 16 + 1
    assert TopK(rows=8, cols=256, k=8, dtype="bf16").passes == 8 + 1


def test_bytes_are_one_read_of_the_scores_and_the_winners_out(h100):
    d = TopK(rows=4096, cols=256, k=8, dtype="fp32").demand(h100)
    assert d.hbm_bytes == 4096 * 256 * 4 + 4096 * 8 * (4 + 8)
    assert d.work["alu"] >= 4096 * 256 * 4 * 17
    assert d.launch.ctas == 4096  # one CTA per row


def test_wide_rows_reread_from_l2(h100):
    narrow = TopK(rows=64, cols=256, k=8, dtype="fp32").demand(h100)
    wide = TopK(rows=64, cols=131072, k=8, dtype="fp32").demand(h100)
    assert narrow.work["l2"] == pytest.approx(narrow.hbm_bytes)
    assert wide.work["l2"] > 10 * wide.hbm_bytes
    assert pm.predict_op(TopK(rows=4096, cols=256, k=8, dtype="fp32"), h100).time_s > 0


def test_k_beyond_the_row_is_a_one_line_error():
    with pytest.raises(InputError) as e:
        TopK(rows=8, cols=4, k=8, dtype="fp32")
    assert e.value.problems == ["k: k = 8 exceeds cols = 4"]
