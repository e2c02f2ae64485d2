"""Reality check against published pretraining runs (nothing fitted)."""
from __future__ import annotations

from perfmodel.validation.reality import training_reality


def test_pretraining_runs_within_25_percent_of_the_papers():
    """Llama 3 Table 4 and DeepSeek-V3's GPU-hours (nothing fitted): plain 1F1B within 25 %."""
    rows = training_reality()
    assert len(rows) == 3
    for row in rows:
        assert abs(row.error(1)) < 0.25, row
