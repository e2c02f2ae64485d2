"""Training plans: MFU, time to train, data-parallel scaling."""
from __future__ import annotations

import pytest

from perfmodel.plan.training import plan_training


def test_training_plan_mfu_and_time_to_train():
    tr = plan_training("llama3-8b", "H100-SXM", batch=8, seq=4096, tp=1, dp=8)
    assert 0.2 < tr.mfu < 0.85 and tr.gpus == 8
    assert tr.time_to_train_s(1e9) == pytest.approx(1e9 / tr.tokens_per_s)
    assert set(tr.to_dict()) >= {"step_time_s", "tokens_per_s", "mfu", "memory", "gpus"}


def test_more_data_parallel_gpus_raise_throughput():
    a = plan_training("llama3-8b", "H100-SXM", batch=4, seq=4096, dp=8)
    b = plan_training("llama3-8b", "H100-SXM", batch=4, seq=4096, dp=16)
    assert b.tokens_per_s > 1.8 * a.tokens_per_s
