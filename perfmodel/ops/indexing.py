"""Index-driven memory ops: gather, scatter, embedding lookup and its backward.

Their bytes follow the indices, not the tensors' sizes: a gather reads only the rows it is asked
for (each row rounded up to whole 32-byte DRAM sectors), however large the table it gathers from
(an embedding table, a paged KV cache); a scatter writes only the rows it addresses, and with
accumulation reads them first. Each row's load waits on its index load: one more DRAM round trip
per CTA round than a plain stream (the dependent load, as the NLL kernels of losses.py count it).

PyTorch's kernels (pytorch/pytorch, aten/src/ATen/native/cuda/):
  * gather / index_select / embedding forward (Indexing.cu `indexSelectLargeIndex`,
    Embedding.cu `embedding_forward`): one thread per output element, indices read once per row;
  * scatter (index_copy_, index_put_) and scatter-add (index_add_, scatter_add_ with atomicAdd:
    Indexing.cu `indexFuncLargeIndex`, ScatterGatherKernel.cu): the addressed destination rows are
    read and written through L2 atomics (`red.global.add`), each distinct row's sectors moving
    through DRAM once;
  * embedding backward (EmbeddingBackwardKernel.cu `embedding_backward_cuda_kernel`, the dense
    deterministic path): zero-fill the weight gradient (`at::zeros`), radix-sort the indices with
    their positions (cub::DeviceRadixSort over `get_num_bits(num_weights)` key bits, 8 bits a
    pass in cub's onesweep), sum each segment of equal indices in FP32 partial sums of at most
    NROWS_PER_THREAD rows, then add the partials of each segment into its gradient row.
Distinct rows under uniform random indices: n draws from T rows hit T·(1 − (1 − 1/T)^n) of them
(the expected occupancy of T bins); without `table_rows` every index is taken as distinct.
"""
from __future__ import annotations

import dataclasses
import math

from perfmodel.demand import sequence_demand
from perfmodel.units import bytes_per_element
from perfmodel.ops.base import Op, Param, positive
from perfmodel.ops.streaming import stream_demand

SECTOR_BYTES = 32            # DRAM/L2 access granularity: a row moves whole sectors
INDEX_DTYPES = {"int64": 8.0, "int32": 4.0}
NROWS_PER_THREAD = 10        # EmbeddingBackwardKernel.cu: rows summed per partial segment
RADIX_BITS_PER_PASS = 8      # cub onesweep radix sort: one 8-bit digit per pass
SORT_ALU_PER_KEY_PASS = 6.0  # digit extract, histogram/rank, scatter address per key per pass


def row_sector_bytes(cols: int, element_bytes: float) -> float:
    """Bytes a gathered row moves: its payload rounded up to whole DRAM sectors."""
    return math.ceil(cols * element_bytes / SECTOR_BYTES) * SECTOR_BYTES


def distinct_rows(draws: float, table_rows: int | None) -> float:
    """Expected distinct rows of `draws` uniform random indices into `table_rows` rows."""
    if table_rows is None:
        return float(draws)
    t = float(table_rows)
    return min(float(draws), t * -math.expm1(draws * math.log1p(-1.0 / t)) if t > 1 else 1.0)


def _index_param() -> Param:
    return Param("choice", default="int64", choices=tuple(INDEX_DTYPES),
                 doc="index type (torch.long unless the caller narrows it)")


class Gather(Op):
    """out[i, :] = table[index[i], :] — index_select, torch.gather along rows, paged-KV reads."""

    name = "gather"
    EXAMPLE = dict(rows=16384, cols=4096, dtype="bf16", table_rows=131072)
    PARAMS = {
        "rows": positive("rows", "rows gathered (indices)"),
        "cols": positive("elements", "elements per row"),
        "dtype": Param("dtype", required=True),
        "table_rows": Param("int", default=None, nullable=True, lo=1,
                            doc="rows of the source table (none: every index distinct); "
                                "repeated indices are served from L2"),
        "index_dtype": _index_param(),
    }
    SIZE_PARAMS = ("rows", "cols")
    TENSORS = (("rows", "cols"), ("table_rows", "cols"))

    def demand(self, hw):
        b = bytes_per_element(self.dtype)
        n = float(self.rows) * self.cols
        unique = distinct_rows(self.rows, self.table_rows)
        row = row_sector_bytes(self.cols, b)
        index = self.rows * INDEX_DTYPES[self.index_dtype]
        read_hbm = index + unique * row
        d = stream_demand(n, index + self.rows * row, n * b, {"alu": 1.0 / self.cols}, b,
                          flop=0.0, details={"distinct_rows": unique})
        work = {**d.work, "hbm": read_hbm + n * b}
        return dataclasses.replace(d, work=work, hbm_bytes=read_hbm + n * b,
                                   cta_dram_round_trips=1.0)


class Scatter(Op):
    """dest[index[i], :] = src[i, :] (`reduce=none`: index_copy_, index_put_) or += (`add`:
    index_add_, scatter_add_, the combine of MoE expert outputs)."""

    name = "scatter"
    EXAMPLE = dict(rows=16384, cols=4096, dtype="bf16", reduce="add", dest_rows=2048)
    PARAMS = {
        "rows": positive("rows", "source rows scattered (indices)"),
        "cols": positive("elements", "elements per row"),
        "dtype": Param("dtype", required=True),
        "reduce": Param("choice", default="none", choices=("none", "add"),
                        doc="none: copy into the row; add: accumulate (atomics at L2)"),
        "dest_rows": Param("int", default=None, nullable=True, lo=1,
                           doc="rows of the destination (none: every index distinct)"),
        "zero_fill": Param("bool", default=False,
                           doc="first write the whole destination (a fresh zeros tensor)"),
        "index_dtype": _index_param(),
    }
    SIZE_PARAMS = ("rows", "cols")
    TENSORS = (("rows", "cols"), ("dest_rows", "cols"))

    def check(self, v):
        if v["zero_fill"] and v["dest_rows"] is None:
            return [("zero_fill", "needs dest_rows (the destination's size)")]
        return []

    def demand(self, hw):
        b = bytes_per_element(self.dtype)
        n = float(self.rows) * self.cols
        row = row_sector_bytes(self.cols, b)
        unique = distinct_rows(self.rows, self.dest_rows)
        index = self.rows * INDEX_DTYPES[self.index_dtype]
        add = self.reduce == "add"
        # destination rows: read before the first accumulation, written once (DRAM), every
        # scattered row's update at L2 (the atomics, or the copy's stores)
        dest_hbm = unique * row * (2 if add else 1)
        per_elem = {"fma": 1.0} if add else {}
        d = stream_demand(n, n * b + index, self.rows * row, per_elem, b, flop=n if add else 0.0,
                          details={"distinct_rows": unique, "reduce": self.reduce})
        work = {**d.work, "hbm": n * b + index + dest_hbm,
                "l2": d.work["l2"] + (self.rows * row if add else 0.0)}
        scatter = dataclasses.replace(d, work=work, hbm_bytes=n * b + index + dest_hbm,
                                      cta_dram_round_trips=1.0)
        if not self.zero_fill:
            return scatter
        fill_bytes = float(self.dest_rows) * self.cols * b
        fill = stream_demand(fill_bytes / b, 0.0, fill_bytes, {}, b, flop=0.0,
                             details={"part": "zero-fill destination"})
        return sequence_demand((fill, scatter),
                               details={"distinct_rows": unique, "reduce": self.reduce})


class Embedding(Op):
    """Token embedding: forward gathers `tokens` rows of a vocab × dim table; backward
    accumulates the output gradient into a zero-filled table gradient (PyTorch's sort-based
    deterministic path, module docstring)."""

    name = "embedding"
    EXAMPLE = dict(tokens=16384, vocab=128256, dim=4096, dtype="bf16")
    PARAMS = {
        "tokens": positive("tokens", "indices looked up"),
        "vocab": positive("rows", "table rows (vocabulary)"),
        "dim": positive("elements", "embedding width"),
        "dtype": Param("dtype", required=True),
        "direction": Param("choice", default="fwd", choices=("fwd", "bwd"),
                           doc="bwd: the table's gradient from the output's"),
        "index_dtype": _index_param(),
    }
    SIZE_PARAMS = ("tokens", "dim")
    TENSORS = (("tokens", "dim"), ("vocab", "dim"))

    def demand(self, hw):
        if self.direction == "fwd":
            return Gather(rows=self.tokens, cols=self.dim, dtype=self.dtype,
                          table_rows=self.vocab, index_dtype=self.index_dtype).demand(hw)
        b = bytes_per_element(self.dtype)
        ib = INDEX_DTYPES[self.index_dtype]
        t, v, dim = float(self.tokens), float(self.vocab), self.dim
        fill = stream_demand(v * dim, 0.0, v * dim * b, {}, b, flop=0.0,
                             details={"part": "zero-fill weight gradient"})
        passes = max(1, math.ceil(max(1, (self.vocab - 1).bit_length()) / RADIX_BITS_PER_PASS))
        pair = ib + 8.0  # key and its position (int64)
        sort = stream_demand(t, passes * t * pair, passes * t * pair,
                             {"alu": passes * SORT_ALU_PER_KEY_PASS}, pair, flop=0.0,
                             details={"part": f"radix sort of the indices ({passes} passes)"})
        unique = distinct_rows(t, self.vocab)
        segments = math.ceil(t / NROWS_PER_THREAD) + unique
        partials = segments * dim * 4.0
        spill = 2 * partials > hw.l2_capacity_bytes
        rows_out = unique * row_sector_bytes(dim, b)
        reduce = stream_demand(t * dim, t * dim * b + t * 8.0 + (partials if spill else 0.0),
                               rows_out * 2 + (partials if spill else 0.0), {"fma": 1.0}, b,
                               flop=t * dim, details={"part": "segment sums into the rows"})
        reduce = dataclasses.replace(reduce, work={**reduce.work,
                                                   "l2": reduce.work["l2"] + 2 * partials},
                                     cta_dram_round_trips=1.0)
        return sequence_demand((fill, sort, reduce),
                               details={"distinct_rows": unique, "sort_passes": passes})
