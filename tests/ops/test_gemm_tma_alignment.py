"""A GEMM whose rows TMA cannot address (a stride not a multiple of 16 bytes: CUDA's
cuTensorMapEncodeTiled) runs the GPU's legacy tensor path, cp.async and mma.sync
(Gemm.kernel_hardware, Hardware.without_tma): a vocabulary projection of 51,866 columns in BF16
on B200 is about 3x slower than one of 51,872."""
from __future__ import annotations

import pytest

import perfmodel as pm
from perfmodel.ops.gemm import TMA_ALIGN_BYTES


def _gemm(**kw):
    return pm.ops.Gemm(**{"m": 4096, "k": 4096, "dtype": "bf16", **kw})


def test_a_vocabulary_of_51866_by_hand_on_b200():
    """C's rows hold 51,866 x 2 = 103,732 bytes, 4 past a multiple of 16: no TMA kernel runs
    it. Priced on the legacy path it takes at least its FLOP at B200's mma.sync rate (2,731
    FLOP per SM per clock, 148 SMs, the 1,965 MHz max clock): 2 x 4096 x 51866 x 4096 /
    (2731 x 148 x 1.965e9) = 2.19 ms, a bound the aligned 51,872 beats (tcgen05, 8,192)."""
    b200 = pm.hardware("B200")
    odd, even = _gemm(n=51866), _gemm(n=51872)
    assert odd.row_bytes()[2] == 103_732 and 103_732 % TMA_ALIGN_BYTES == 4
    assert not odd.tma_aligned() and even.tma_aligned()
    legacy_floor_s = 2 * 4096 * 51866 * 4096 / (2731 * 148 * 1.965e9)
    assert legacy_floor_s == pytest.approx(2.19e-3, rel=0.01)
    t_odd = pm.predict_op(odd, b200).time_s
    t_even = pm.predict_op(even, b200).time_s
    assert t_odd >= legacy_floor_s > t_even
    assert 2.5 < t_odd / t_even < 3.5
    # Hopper's mma.sync runs at 2/3 of its wgmma rate: the same GEMM loses less there
    h100 = pm.hardware("H100")
    ratio = pm.predict_op(odd, h100).time_s / pm.predict_op(even, h100).time_s
    assert 1.3 < ratio < 1.7


def test_which_gemms_leave_tma():
    b200 = pm.hardware("B200")
    legacy = _gemm(n=51866).kernel_hardware(b200)
    assert legacy is b200.without_tma() and legacy.mma_instruction == "mma_sync"
    assert dict(legacy.tensor_flop_per_sm_per_clk) == dict(b200.mma_sync_flop_per_sm_per_clk)
    assert legacy.block_scaled_mma == ()
    assert _gemm(n=51872).kernel_hardware(b200) is b200             # aligned
    assert _gemm(n=4096, k=4100).kernel_hardware(b200) is legacy    # A's rows: 8,200 bytes
    assert _gemm(n=51866, dtype="fp32").kernel_hardware(b200) is b200   # SIMT: no TMA
    assert _gemm(n=51866, dtype="nvfp4").kernel_hardware(b200) is b200  # no legacy FP4 MMA
    a100 = pm.hardware("A100")
    assert _gemm(n=51866).kernel_hardware(a100) is a100 is a100.without_tma()


def test_the_array_pass_prices_misaligned_shapes_as_predict_op_does():
    hw = pm.hardware("H100")
    n = [51866, 51872, 4096, 4098, 8190, 8192, 12289, 12288]
    table = pm.gemm_batch(hw, m=[512] * len(n), n=n, k=[4096] * len(n), dtype="bf16")
    for j, nj in enumerate(n):
        assert table.estimate(j).time_s == pm.predict_op(_gemm(m=512, n=nj), hw).time_s
