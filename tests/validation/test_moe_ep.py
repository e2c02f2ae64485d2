"""The large-scale EP rows replayed with recorded loads (perfmodel.validation.moe_ep)."""
from __future__ import annotations

import csv
import math

from perfmodel.validation import moe_ep


def test_every_row_of_the_file_is_replayed_or_has_a_reason():
    with open(moe_ep.MOE_CSV, encoding="utf-8") as f:
        ids = {r["id"] for r in csv.DictReader(f)}
    replayed = {"lmsys_pre_default", "lmsys_pre_perfect", "lmsys_dec_default"}
    assert ids == replayed | set(moe_ep.NOT_REPLAYED)
    assert not replayed & set(moe_ep.NOT_REPLAYED)


def test_replayed_rows_and_the_eplb_ordering():
    rows = {r.id: r for r in moe_ep.rows()}
    assert all(math.isfinite(r.predicted) and r.predicted > 0 for r in rows.values())
    # perfect balance beats the deployed EPLB, which beats contiguous placement on the loads
    assert rows["lmsys_pre_perfect/default"].predicted > 1.0
    assert rows["(EPLB on/off)"].predicted > 1.0
    assert rows["lmsys_pre_perfect"].predicted > rows["lmsys_pre_default"].predicted
