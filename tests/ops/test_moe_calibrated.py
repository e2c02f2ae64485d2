"""The shipped table of calibrated routing log-weights (perfmodel/ops/moe/calibrated.py): it
covers every MoE layer of every shipped loads file, an entry is what a fresh calibration
computes bit for bit, and anything else (another file, other constants) is calibrated afresh."""
from __future__ import annotations

import numpy as np

from perfmodel.ops.moe import calibrated, loads as loads_mod
from perfmodel.ops.moe.loads import DATA_DIR, LoadsRouting, calibrate_log_weights, \
    load_expert_loads


def test_the_table_covers_every_shipped_layer():
    entries = calibrated.shipped_entries()
    # four shipped decode files and the checkout's LMSYS prefill loads, 58 MoE layers each
    assert len(entries) == 5 * 58
    missing = [v for k, v in entries.items() if calibrated.lookup(k) is None]
    assert not missing, ("stale perfmodel/ops/moe/data/calibrated.npz: run "
                         "`python -m perfmodel.ops.moe.calibrated`", missing[:3])


def test_an_entry_is_a_fresh_calibration_bit_for_bit():
    name, layer = "decode_in2000out100.json", 30
    shares = load_expert_loads(DATA_DIR / name).shares(layer)
    key = calibrated.digest(layer, *calibrated.SHIPPED_ROUTING, shares.tobytes())
    fresh = calibrate_log_weights(layer, *calibrated.SHIPPED_ROUTING, shares.tobytes())
    assert np.array_equal(calibrated.lookup(key), fresh)
    routed = LoadsRouting(DATA_DIR / name, *calibrated.SHIPPED_ROUTING)
    assert np.array_equal(routed.log_weights(layer), fresh)


def test_other_inputs_miss_the_table(monkeypatch, tmp_path):
    shares = load_expert_loads(DATA_DIR / "decode_in2000out100.json").shares(30)
    key = calibrated.digest(30, *calibrated.SHIPPED_ROUTING, shares.tobytes())
    assert calibrated.digest(31, *calibrated.SHIPPED_ROUTING, shares.tobytes()) != key
    assert calibrated.digest(30, 6, 8, 4, shares.tobytes()) != key
    monkeypatch.setattr(loads_mod, "CALIBRATION_ITERATIONS", 12)
    assert calibrated.lookup(calibrated.digest(30, *calibrated.SHIPPED_ROUTING,
                                               shares.tobytes())) is None
