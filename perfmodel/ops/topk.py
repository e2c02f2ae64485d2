"""Top-k along the last dimension (torch.topk): MoE routers, sparse activations, sampling.

PyTorch's kernel (pytorch/pytorch aten/src/ATen/native/cuda/TensorTopK.cu `gatherTopK`, with the
radix selection of SortingRadixSelect.cuh) runs one CTA per row ("slice"):
  * `radixSelect` finds the k-th largest value digit by digit, RADIX_BITS = 2 bits a pass from
    the most significant: a 32-bit key takes 16 passes, a 16-bit key 8. Each pass reads the
    whole row again (`countRadixUsingMask`: convert to the order-preserving radix key, extract
    the digit, match it against the prefix found so far, count with warp ballots);
  * then one more pass over the row writes the values ≥ the k-th with their int64 indices, and
    `sort` orders the k winners when `sorted=True` (negligible for the k of a router).
Only the first pass comes from DRAM when the row fits in L1 (the row of a 256-expert router is
1 KB); later passes re-read it from L1/L2, counted as L2 traffic for rows too wide for L1.
"""
from __future__ import annotations

import dataclasses
import math

from perfmodel.units import bytes_per_element
from perfmodel.ops.base import Op, Param, positive
from perfmodel.ops.streaming import stream_demand

RADIX_BITS = 2                 # SortingRadixSelect.cuh: RADIX_BITS 2, RADIX_SIZE 4
ALU_PER_ELEMENT_PER_PASS = 4.0  # radix-key conversion, digit extract, prefix match, count
INDEX_BYTES = 8.0               # int64 indices out
L1_ROW_BYTES = 64 * 1024        # rows up to this size are re-read from L1, not L2
MAX_THREADS = 1024


class TopK(Op):
    """The k largest values of each row and their indices."""

    name = "topk"
    EXAMPLE = dict(rows=4096, cols=256, k=8, dtype="fp32")
    PARAMS = {
        "rows": positive("rows", "rows (tokens)"),
        "cols": positive("elements", "candidates per row (experts, vocabulary)"),
        "k": positive("elements", "values kept per row"),
        "dtype": Param("dtype", required=True, choices=("fp32", "bf16", "fp16"),
                       doc="score type (sets the radix key width)"),
    }
    SIZE_PARAMS = ("rows", "cols")
    TENSORS = (("rows", "cols"),)

    def check(self, v):
        if v["k"] > v["cols"]:
            return [("k", f"k = {v['k']} exceeds cols = {v['cols']}")]
        return []

    @property
    def passes(self) -> int:
        """Radix passes over each row: the key bits two at a time, plus the gather pass."""
        return int(8 * bytes_per_element(self.dtype)) // RADIX_BITS + 1

    def demand(self, hw):
        b = bytes_per_element(self.dtype)
        n = float(self.rows) * self.cols
        out = self.rows * self.k * (b + INDEX_BYTES)
        threads = min(MAX_THREADS, max(32, 32 * math.ceil(self.cols / 32)))
        d = stream_demand(n, n * b, out, {"alu": ALU_PER_ELEMENT_PER_PASS * self.passes}, b,
                          flop=0.0, ctas=self.rows, threads=threads,
                          details={"radix_passes": self.passes})
        rereads = 0.0 if self.cols * b <= L1_ROW_BYTES else (self.passes - 1) * n * b
        work = {**d.work, "l2": d.work["l2"] + rereads,
                "lsu": d.work.get("lsu", 0.0) + n * self.passes / 32.0}  # ballots per warp
        return dataclasses.replace(d, work=work)
