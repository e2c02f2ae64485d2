"""Reality check against published pretraining runs (no constant fitted on them)."""
from __future__ import annotations

import pytest

from perfmodel.validation.reality import training_reality

ROWS = {row.id: row for row in training_reality()}


def test_every_published_run_is_checked():
    assert set(ROWS) == {"llama3-t4-1", "llama3-t4-2", "dsv3-cost"}


@pytest.mark.parametrize("row_id", ["llama3-t4-1", "llama3-t4-2"])
def test_llama3_pretraining_within_15_percent_of_the_paper(row_id):
    """Llama 3 Table 4 (TP8 PP16 on 8,192 and 16,384 H100s) on the interleaved schedule the
    paper ran (§3.3.2; its virtual stages unstated: the least, 2), PP hops and DP groups on the
    inter-node network with Megatron's scatter/gather. Plain 1F1B is slower: its bubble."""
    row = ROWS[row_id]
    assert abs(row.error(2)) < 0.15, row
    assert row.predicted[1] < row.predicted[2]


@pytest.mark.xfail(strict=True, reason="DeepSeek-V3 hides its EP64 all-to-all under compute with "
                   "DualPipe (arXiv:2412.19437 §3.2.1); the model prices it exposed on the 50 GB/s "
                   "NICs the group crosses, and has no such overlap yet")
def test_deepseek_v3_pretraining_within_25_percent_of_the_report():
    assert abs(ROWS["dsv3-cost"].error(1)) < 0.25, ROWS["dsv3-cost"]
