"""Collectives: ring bytes, and the algorithm NCCL's auto choice would take."""
from __future__ import annotations

import pytest

import perfmodel as pm


def test_collectives_follow_ring_bytes(h100):
    ar = pm.predict_op(pm.ops.Allreduce(bytes=1e9, gpus=8), h100)
    ag = pm.predict_op(pm.ops.Allgather(bytes=1e9, gpus=8), h100)
    assert ar.bound == "link:nvlink"
    assert ar.resource_time_s["link:nvlink"] == pytest.approx(
        2 * ag.resource_time_s["link:nvlink"])


def test_allreduce_auto_picks_oneshot_for_small_and_ring_for_large(h100):
    def t(nbytes, algorithm):
        return pm.predict_op(pm.ops.Allreduce(bytes=nbytes, gpus=8, algorithm=algorithm),
                             h100).time_s
    assert t(1e6, "oneshot") < t(1e6, "ring")
    assert t(1e9, "ring") < t(1e9, "oneshot")
    for nbytes in (1e4, 1e6, 1e8, 1e9):
        assert t(nbytes, "auto") == pytest.approx(min(t(nbytes, a) for a in
                                                      ("ring", "tree", "oneshot")))
    with pytest.raises(pm.InputError, match="'oneshot' is not an algorithm of allgather"):
        pm.ops.Allgather(bytes=1e6, gpus=8, algorithm="oneshot")
