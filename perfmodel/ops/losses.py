"""Cross-entropy over logits (rows × vocab), the LM-head GEMM not included.

Two implementations, as a sequence of memory-streaming kernels (streaming.stream_demand):

* `eager`: PyTorch's torch.nn.CrossEntropyLoss on class indices, which autograd runs as
  log_softmax followed by nll_loss (pytorch/pytorch aten/src/ATen/native/cuda/SoftMax.cu and
  aten/src/ATen/native/cuda/Loss.cu, as in the PyTorch 2.x releases; the rows do not record their
  torch version):
  - forward: `cunn_SoftMaxForward`, the block kernel for rows too long for shared memory (a
    128k-vocab FP32 row is 513 kB), makes three passes over each row: ilpReduce(MaxFloat) for the
    max, ilpReduce(SumExpFloat) for the sum of exponentials, then WriteFpropResults, which reads
    the row again and writes logp = x − max − log(sum). That is 3 reads and 1 write of the logits.
    Then `nll_loss_forward_reduce_cuda_kernel_2d`: one block of NLL_LOSS_THREADS = 32 threads
    gathers logp[i, target[i]] and reduces it to the mean.
  - backward: autograd seeds the scalar loss's gradient with a one-element fill. `nll_loss_backward`
    zero-fills grad_logp (1 write) and scatters −1/n at each target, again in one 32-thread block.
    `cunn_SoftMaxBackward` (log-softmax epilogue) then reduces grad_logp over the row (1 read) and
    writes dx = g − exp(logp)·Σg (2 reads, 1 write).
* `fused`: Liger-Kernel's `liger_cross_entropy_kernel` (linkedin/Liger-Kernel@ead96b618e5c,
  src/liger_kernel/ops/cross_entropy.py). It runs one program of 32 warps per row.
  - A first loop over the row keeps the running max and the sum of exponentials online
    (Milakov & Gimelshein, arXiv:1805.02867): 1 read.
  - With gradients (HAS_GRADIENTS, i.e. the input requires grad), a second loop reads the row
    again and writes (softmax − one-hot)/n over the logits in place: 1 more read and 1 write.
  - The backward then has nothing left to stream: with a grad_output of 1.0 (a scalar loss)
    Liger skips the rescale.
  Only this kernel is counted; the small launches around it (the per-row loss buffer's fill and
  its sum) are left out.

Neither implementation is assumed to re-read a row from L2. The rows in flight (148 SMs, one or
two blocks each, one 513 kB FP32 row per block at a 128k vocabulary) hold 76–152 MB, about B200's
whole L2. The PyTorch rows of Liger-Kernel's B200 benchmark data
(validate/data/blackwell_measurements.csv, LIGER-017..024) check this.
Each of the 32-thread NLL blocks handles 32 rows per loop trip. A trip waits on its target load
before it can use the value: the forward then waits again on the gathered logp, the backward
issues a store. With the device assert between the two loads, we assume nvcc does not overlap
trips.
"""
from __future__ import annotations

import dataclasses
import math

from perfmodel.demand import Demand, sequence_demand
from perfmodel.units import bytes_per_element
from perfmodel.ops.base import Op, Param, positive
from perfmodel.ops.streaming import VECTOR_BYTES, stream_demand

TARGET_BYTES = 8            # int64 class indices (torch.long, what CrossEntropyLoss takes)
SECTOR_BYTES = 32           # a gathered or scattered element moves one DRAM sector
NLL_LOSS_THREADS = 32       # Loss.cu: nll_loss_*_reduce_cuda_kernel_2d<<<1, NLL_LOSS_THREADS>>>
NLL_FWD_ROUND_TRIPS_PER_TRIP = 2  # target load, then the dependent gather of logp
NLL_BWD_ROUND_TRIPS_PER_TRIP = 1  # target load; the scatter store does not wait
MAX_BLOCK_THREADS = 1024    # CUDA_NUM_THREADS (SoftMax.cu max_threads)
LIGER_THREADS = 32 * 32     # num_warps=32 (cross_entropy.py launch)
SHUFFLE_STEPS = 5.0         # log2(32): one warp-shuffle tree per reduction per warp

# FMA-pipe and XU operations per logit in each pass (the max, the subtract-and-scale FFMA before
# ex2, the sum, the epilogue's subtraction or scaling; one MUFU.EX2 per exponential):
EAGER_FWD_FMA, EAGER_FWD_XU = 4.0, 1.0   # max (1); x·log2e − m FFMA + sum (2), ex2; logp (1)
EAGER_BWD_FMA, EAGER_BWD_XU = 3.0, 1.0   # Σg (1); logp·log2e (1), ex2, g − e·Σg FFMA (1)
FUSED_FWD_FMA, FUSED_FWD_XU = 3.0, 1.0   # online max (1), FFMA (1), rescaled sum (1), ex2
FUSED_GRAD_FMA, FUSED_GRAD_XU = 3.0, 1.0  # FFMA (1), ex2, ·1/d (1), ·1/n (1)
DIRECTIONS = ("fwd", "fwd+bwd")


def softmax_block_threads(cols: int, element_bytes: float) -> int:
    """SoftMax.cu SoftMax_getBlockSize: ILP = 16 B / element; the largest power of two below
    min(cols / ILP, 1024), halved for vectorized rows, at least one warp."""
    ilp = max(1, int(VECTOR_BYTES // element_bytes))
    cap = min(cols // ilp, MAX_BLOCK_THREADS)
    if ilp > 1:
        cap //= 2
    threads = 1
    while threads < cap:
        threads *= 2
    return max(threads, 32)


def _row_pass(rows: int, cols: int, reads: int, writes: int, fma: float, xu: float,
              reductions: int, element_bytes: float, threads: int, part: str) -> Demand:
    """One kernel making `reads` reads and `writes` writes of a rows × cols matrix, one CTA per
    row."""
    n = float(rows) * cols
    per_elem = {"fma": fma, "xu": xu, "lsu": 2 * SHUFFLE_STEPS * reductions / max(cols, 1)}
    return stream_demand(n, reads * n * element_bytes, writes * n * element_bytes, per_elem,
                         element_bytes, flop=fma * n, ctas=rows, threads=threads,
                         details={"part": part})


def _nll_kernel(rows: int, read_bytes: float, write_bytes: float, round_trips_per_trip: int,
                part: str) -> Demand:
    """A single 32-thread block walking the rows NLL_LOSS_THREADS at a time."""
    d = stream_demand(float(rows), read_bytes, write_bytes, {"alu": 2.0}, TARGET_BYTES,
                      flop=0.0, ctas=1, threads=NLL_LOSS_THREADS, details={"part": part})
    trips = math.ceil(rows / NLL_LOSS_THREADS)
    return dataclasses.replace(d, cta_dram_round_trips=float(round_trips_per_trip * trips))


class CrossEntropy(Op):
    """Mean cross-entropy of rows × vocab logits against one class index per row."""

    name = "cross_entropy"
    EXAMPLE = dict(rows=4096, vocab=128256, dtype="bf16")
    PARAMS = {
        "rows": positive("rows", "rows (tokens)"),
        "vocab": positive("elements", "classes per row (vocabulary)"),
        "dtype": Param("dtype", required=True, choices=("fp32", "bf16", "fp16"),
                       doc="logits type"),
        "direction": Param("choice", default="fwd", choices=DIRECTIONS,
                           doc="fwd: the loss; fwd+bwd: the loss and the logits' gradient"),
        "implementation": Param("choice", default="eager", choices=("eager", "fused"),
                                doc="eager: PyTorch log_softmax + nll_loss; fused: Liger-Kernel's "
                                    "one-kernel loss with the gradient written in place"),
    }
    SIZE_PARAMS = ("rows", "vocab")
    TENSORS = (("rows", "vocab"),)

    def demand(self, hw):
        kernels = (self._fused() if self.implementation == "fused" else self._eager())
        n = float(self.rows) * self.vocab
        flop = sum(k.flop for k in kernels)
        details = {"implementation": self.implementation, "direction": self.direction,
                   "logit_passes": sum(k.hbm_bytes for k in kernels) /
                   (n * bytes_per_element(self.dtype))}
        if len(kernels) == 1:
            return dataclasses.replace(kernels[0], details={**kernels[0].details, **details})
        return sequence_demand(kernels, flop=flop, details=details)

    def _eager(self) -> list[Demand]:
        rows, v, b = self.rows, self.vocab, bytes_per_element(self.dtype)
        threads = softmax_block_threads(v, b)
        out = [_row_pass(rows, v, 3, 1, EAGER_FWD_FMA, EAGER_FWD_XU, 2, b, threads,
                         "log_softmax forward (cunn_SoftMaxForward: max, sum-exp, write)"),
               _nll_kernel(rows, rows * (TARGET_BYTES + SECTOR_BYTES), 2 * 4.0,
                           NLL_FWD_ROUND_TRIPS_PER_TRIP, "nll_loss forward (gather, mean)")]
        if self.direction == "fwd":
            return out
        n = float(rows) * v
        seed = stream_demand(1.0, 0.0, 4.0, {}, 4.0, flop=0.0,
                             details={"part": "autograd seed: ones_like(loss)"})
        zero = stream_demand(n, 0.0, n * b, {}, b, flop=0.0,
                             details={"part": "nll_loss backward: zero grad_logp"})
        scatter = _nll_kernel(rows, rows * TARGET_BYTES + 4.0, rows * SECTOR_BYTES,
                              NLL_BWD_ROUND_TRIPS_PER_TRIP, "nll_loss backward (scatter −1/n)")
        back = _row_pass(rows, v, 3, 1, EAGER_BWD_FMA, EAGER_BWD_XU, 1, b, threads,
                         "log_softmax backward (cunn_SoftMaxBackward: Σg, write dx)")
        return out + [seed, zero, scatter, back]

    def _fused(self) -> list[Demand]:
        rows, v, b = self.rows, self.vocab, bytes_per_element(self.dtype)
        grad = self.direction == "fwd+bwd"
        n = float(rows) * v
        fma = FUSED_FWD_FMA + (FUSED_GRAD_FMA if grad else 0.0)
        xu = FUSED_FWD_XU + (FUSED_GRAD_XU if grad else 0.0)
        per_elem = {"fma": fma, "xu": xu, "lsu": 2 * SHUFFLE_STEPS * 2 / max(v, 1)}
        # per row: the target index and the target logit (its own load, one sector) in, the
        # row's loss (FP32) out
        side_read, side_write = rows * (TARGET_BYTES + SECTOR_BYTES), rows * 4.0
        return [stream_demand(n, (2 if grad else 1) * n * b + side_read,
                              (n * b if grad else 0.0) + side_write, per_elem, b, flop=fma * n,
                              ctas=rows, threads=LIGER_THREADS,
                              details={"part": "liger_cross_entropy_kernel"})]
