"""Gather, scatter and embedding (perfmodel/ops/indexing.py): bytes follow the indices."""
from __future__ import annotations

import math

import pytest

import perfmodel as pm
from perfmodel.errors import InputError
from perfmodel.ops import Embedding, Gather, Scatter
from perfmodel.ops.indexing import distinct_rows, row_sector_bytes


def test_gather_reads_only_the_indexed_rows(h100):
    small = Gather(rows=1024, cols=4096, dtype="bf16", table_rows=10_000_000).demand(h100)
    # 1024 rows of a 10M-row table: index bytes + ~1024 rows in, 1024 rows out
    row = 4096 * 2
    assert small.hbm_bytes == pytest.approx(1024 * 8 + 1024 * row + 1024 * row, rel=1e-3)
    assert small.cta_dram_round_trips == 1.0  # the row load waits on its index


def test_repeated_indices_are_served_from_l2():
    assert distinct_rows(10, None) == 10
    assert distinct_rows(1_000_000, 8) == pytest.approx(8)
    t, n = 1000, 1000
    assert distinct_rows(n, t) == pytest.approx(t * (1 - (1 - 1 / t) ** n))
    assert row_sector_bytes(3, 2.0) == 32 and row_sector_bytes(17, 2.0) == 64


def test_scatter_add_reads_and_writes_the_destination_rows(h100):
    copy = Scatter(rows=4096, cols=1024, dtype="bf16").demand(h100)
    add = Scatter(rows=4096, cols=1024, dtype="bf16", reduce="add").demand(h100)
    src = 4096 * 1024 * 2
    assert copy.hbm_bytes == pytest.approx(src + 4096 * 8 + src)
    assert add.hbm_bytes == pytest.approx(src + 4096 * 8 + 2 * src)
    assert add.work["fma"] >= 4096 * 1024


def test_scatter_zero_fill_writes_the_whole_destination(h100):
    d = Scatter(rows=16, cols=4096, dtype="bf16", reduce="add", dest_rows=65536,
                zero_fill=True).demand(h100)
    assert d.kernels == 2 and d.hbm_bytes >= 65536 * 4096 * 2
    with pytest.raises(InputError) as e:
        Scatter(rows=16, cols=8, dtype="bf16", zero_fill=True)
    assert e.value.problems == ["zero_fill: needs dest_rows (the destination's size)"]


def test_embedding_forward_is_a_gather_and_backward_sorts_and_accumulates(h100):
    fwd = Embedding(tokens=16384, vocab=65536, dim=4096, dtype="bf16")
    assert fwd.demand(h100) == Gather(rows=16384, cols=4096, dtype="bf16",
                                      table_rows=65536).demand(h100)
    bwd = Embedding(tokens=16384, vocab=65536, dim=4096, dtype="bf16", direction="bwd")
    d = bwd.demand(h100)
    assert d.kernels == 3 and [p.details["part"].split()[0] for p in d.sequence] == \
        ["zero-fill", "radix", "segment"]
    assert d.sequence[1].details["part"].endswith(f"({math.ceil(16 / 8)} passes)")
    assert d.hbm_bytes >= 65536 * 4096 * 2 + 16384 * 4096 * 2  # table gradient + dY
    est = pm.predict_op(bwd, h100)
    assert est.bound == "hbm" and est.time_s > pm.predict_op(fwd, h100).time_s


@pytest.mark.parametrize("cls, params", [
    (Gather, dict(rows=0, cols=8, dtype="bf16")),
    (Scatter, dict(rows=8, cols=8, dtype="bf16", reduce="max")),
    (Embedding, dict(tokens=8, vocab=8, dim=8, dtype="bf16", index_dtype="int16")),
])
def test_bad_parameters_are_one_line_errors(cls, params):
    with pytest.raises(InputError) as e:
        cls(**params)
    assert len(e.value.problems) == 1
