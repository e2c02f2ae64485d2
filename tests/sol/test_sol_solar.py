"""SOLAR's convention (perfmodel/sol/solar.py): a GEMM's and an elementwise problem's bound by
hand."""
from __future__ import annotations

import pytest

import perfmodel as pm
from perfmodel.sol.problems import by_problem, read_csv
from perfmodel.sol.solar import (B200_SOLAR, PUBLISHED_FLOOR_S, arch_from_hardware,
                                 precision_of, published_floor_s, solar_bound)


def test_gemm_bound_by_hand():
    # 8192³ BF16 on SOLAR's B200: 603,751 MAC/cycle at 1.5 GHz
    m = n = k = 8192
    b = solar_bound({"fp16": m * n * k}, 3 * m * n * 2.0, B200_SOLAR)
    assert b.compute_s == pytest.approx(8192 ** 3 / (603_751 * 1.5e9))   # 607.0 µs
    assert b.memory_s == pytest.approx(3 * 8192 ** 2 * 2 / (5111.6 * 1.5e9))  # 52.5 µs
    assert b.time_s == b.compute_s and b.bound == "tensor"
    assert b.compute_s == pytest.approx(607.0e-6, rel=1e-3)
    fp8 = solar_bound({"fp8": m * n * k}, 0.0, B200_SOLAR)
    assert fp8.compute_s == pytest.approx(b.compute_s / 2, rel=1e-5)


def test_elementwise_bound_by_hand_matches_the_published_row():
    # L1__025 video latent GELU, workload 0: x [2, 512, 4096] FP32 in, the same out: bytes only
    w = by_problem(read_csv())["L1__025_video_latent_gelu_activation"][0]
    assert w.axes == {"batch_size": 2, "intermediate_size": 4096, "seq_len": 512}
    nbytes = 2 * (2 * 512 * 4096 * 4)
    b = solar_bound({}, nbytes, B200_SOLAR)
    assert b.compute_s == 0 and b.bound == "dram"
    assert b.time_s == pytest.approx(nbytes / 7.6674e12)          # 4.376 µs
    floor = published_floor_s(w.subset, w.op_kind)
    assert floor == PUBLISHED_FLOOR_S
    assert b.time_s + floor == pytest.approx(w.published_sol_s, abs=0.05e-6)  # 4.8 µs published


def test_the_convention_on_a_perfmodel_gpu_follows_its_lock():
    hw = pm.hardware("B200").locked(1.5e9)
    arch = arch_from_hardware(hw)
    assert arch.mac_per_cycle["fp16"] == 148 * 8192 / 2
    assert arch.mac_per_s("fp16") == pytest.approx(148 * 4096 * 1.5e9)
    assert arch.dram_bytes_per_s == pytest.approx(hw.hbm_peak_bandwidth_bytes_per_s)
    assert arch.mac_per_s("nvfp4") == pytest.approx(4 * arch.mac_per_s("fp16"))


def test_precision_classes():
    assert [precision_of(d) for d in ("bf16", "fp16", "fp32", "fp8_e4m3", "nvfp4")] == \
        ["fp16", "fp16", "fp16", "fp8", "nvfp4"]


def test_floor_per_subset():
    assert published_floor_s("L1", "gemm") == published_floor_s("L2", "moe") == 0.4e-6
    assert published_floor_s("FlashInfer-Bench", "norm") == 0.4e-6
    assert published_floor_s("FlashInfer-Bench", "attention") == 0.0
    assert published_floor_s("Quant", "gemm") == 0.0
