"""Reality check against published pretraining runs (no constant fitted on them)."""
from __future__ import annotations

import pytest

from perfmodel.validation.reality import training_reality

ROWS = {row.id: row for row in training_reality()}


def test_every_published_run_is_checked():
    assert set(ROWS) == {"llama3-t4-1", "llama3-t4-2", "dsv3-cost"}


@pytest.mark.parametrize("row_id, bound", [("llama3-t4-1", 0.15), ("llama3-t4-2", 0.15),
                                           ("dsv3-cost", 0.25)])
def test_pretraining_runs_within_bounds_on_the_schedule_they_ran(row_id, bound):
    """Llama 3 Table 4 (TP8 PP16 on 8,192 and 16,384 H100s) on the interleaved schedule the
    paper ran (§3.3.2; its virtual stages unstated: the least, 2), PP hops and DP groups on the
    inter-node network with Megatron's scatter/gather, within 15 %; DeepSeek-V3 (PP16 EP64 DP128
    on 2,048 H800s) on DualPipe, its node-limited dispatch (DeepEP's internode kernels) beside
    the paired chunk's compute (§3.2.1), within 25 %: with the exchange hidden the MoE
    computation binds, 23 % faster than the report (README "Whole workloads")."""
    row = ROWS[row_id]
    assert abs(row.error("as run")) < bound, row


def test_the_plain_schedules_are_slower_than_the_ones_run():
    for row_id in ("llama3-t4-1", "llama3-t4-2"):  # TFLOPS: higher is faster
        assert ROWS[row_id].predicted[1] < ROWS[row_id].predicted["as run"]
    dsv3 = ROWS["dsv3-cost"]  # GPU-hours: lower is faster; 1F1B leaves the all-to-all exposed
    assert dsv3.predicted["as run"] < 0.6 * dsv3.predicted[1]
