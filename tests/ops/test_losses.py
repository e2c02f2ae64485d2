"""Cross-entropy over logits: PyTorch eager's kernel sequence and Liger-Kernel's fused kernel."""
from __future__ import annotations

import math

import pytest

import perfmodel as pm
from perfmodel.ops.losses import (NLL_LOSS_THREADS, SECTOR_BYTES, TARGET_BYTES,
                                  softmax_block_threads)

ROWS, VOCAB = 4096, 128256


def ce(**kw):
    return pm.ops.CrossEntropy(**{"rows": ROWS, "vocab": VOCAB, "dtype": "fp32", **kw})


def logit_bytes(dtype_bytes=4):
    return ROWS * VOCAB * dtype_bytes


@pytest.mark.parametrize("impl, direction, passes", [
    ("eager", "fwd", 4),       # log_softmax: 3 reads + 1 write
    ("eager", "fwd+bwd", 9),   # + zero fill (1 write) + log_softmax backward (3 reads + 1 write)
    ("fused", "fwd", 1),       # Liger, no gradient: one online read
    ("fused", "fwd+bwd", 3),   # + the gradient pass: read again, write in place
])
def test_logit_passes(impl, direction, passes):
    d = ce(implementation=impl, direction=direction).demand(pm.hardware("B200"))
    side = d.hbm_bytes - passes * logit_bytes()
    assert 0 < side < 1e-3 * logit_bytes()  # targets, gathered terms, per-row losses
    assert d.details["logit_passes"] == pytest.approx(passes, rel=1e-3)


def test_eager_is_a_sequence_of_its_kernels():
    fwd = ce().demand(pm.hardware("B200"))
    assert [p.details["part"].split(" (")[0] for p in fwd.sequence] == [
        "log_softmax forward", "nll_loss forward"]
    full = ce(direction="fwd+bwd").demand(pm.hardware("B200"))
    assert full.kernels == 6 and len(full.sequence) == 6
    # the nll kernels: one 32-thread block, two dependent DRAM round trips per 32 rows forward
    # (target, then the gathered logp), one backward (the target the scatter waits on)
    nll_fwd, nll_bwd = full.sequence[1], full.sequence[4]
    assert nll_fwd.launch.ctas == 1 and nll_fwd.launch.threads_per_cta == NLL_LOSS_THREADS
    assert nll_fwd.cta_dram_round_trips == 2 * math.ceil(ROWS / NLL_LOSS_THREADS)
    assert nll_bwd.cta_dram_round_trips == math.ceil(ROWS / NLL_LOSS_THREADS)
    assert nll_fwd.hbm_bytes == ROWS * (TARGET_BYTES + SECTOR_BYTES) + 8


def test_softmax_block_size_follows_pytorch():
    # SoftMax_getBlockSize: ILP = 16 B / element, min(cols / ILP, 1024), halved, power of two
    assert softmax_block_threads(128256, 4) == 512
    assert softmax_block_threads(4096, 2) == 256
    assert softmax_block_threads(64, 4) == 32


def test_large_loss_is_hbm_bound_and_fused_beats_eager(any_hw):
    eager = pm.predict_op(ce(direction="fwd+bwd"), any_hw)
    fused = pm.predict_op(ce(direction="fwd+bwd", implementation="fused"), any_hw)
    assert eager.bound == "hbm" and fused.bound == "hbm"
    assert fused.time_s < eager.time_s / 2
    # fused: 3 passes of the logits near HBM speed
    assert fused.time_s == pytest.approx(3 * logit_bytes() / any_hw.hbm_bandwidth_bytes_per_s,
                                         rel=0.15)


def test_bf16_logits_move_half_the_bytes():
    b200 = pm.hardware("B200")
    assert ce(dtype="bf16").demand(b200).hbm_bytes == pytest.approx(
        ce().demand(b200).hbm_bytes / 2, rel=1e-3)


def test_bad_parameters_are_input_errors():
    with pytest.raises(pm.InputError, match="implementation"):
        ce(implementation="liger")
    with pytest.raises(pm.InputError, match="direction"):
        ce(direction="bwd")
    with pytest.raises(pm.InputError, match="dtype"):
        ce(dtype="fp8")
