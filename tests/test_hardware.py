"""Built-in specs: they load, resolve by every name, carry provenance, and reproduce datasheets."""
from __future__ import annotations

import pytest

import perfmodel as pm
from perfmodel.hardware import PROVENANCE_KINDS, builtin_spec_dir

EXPECTED = {"A100-SXM", "H100-SXM", "H100-PCIe", "H200-SXM", "B200", "GB200", "B300"}


def test_catalogue_has_every_gpu_of_the_mission():
    assert {hw.name for hw in pm.list_hardware()} == EXPECTED
    assert len(list(builtin_spec_dir().glob("*.yaml"))) == len(EXPECTED)


@pytest.mark.parametrize("name, canonical", [
    ("h100", "H100-SXM"), ("H100-SXM", "H100-SXM"), ("h100-sxm5", "H100-SXM"),
    ("NVIDIA H100 80GB HBM3", "H100-SXM"), ("NVIDIA H200", "H200-SXM"), ("NVIDIA B200", "B200"),
    ("h200", "H200-SXM"), ("a100", "A100-SXM"), ("b300", "B300"), ("gb200", "GB200"),
    ("H100 SXM5 80GB", "H100-SXM"), ("A100 SXM4 80GB", "A100-SXM"),
])
def test_names_aliases_and_driver_device_names_resolve(name, canonical):
    assert pm.hardware(name).name == canonical


# Dense datasheet peaks (research/hardware.md §1) the per-SM rates × SMs × tensor clock must give.
DATASHEET_TFLOPS = [
    ("A100-SXM", "bf16", 312), ("H100-SXM", "bf16", 989.4), ("H100-SXM", "fp8", 1978.9),
    ("H100-PCIe", "bf16", 756), ("H200-SXM", "fp8", 1979), ("B200", "bf16", 2250),
    ("B200", "nvfp4", 9000), ("GB200", "bf16", 2500), ("GB200", "nvfp4", 10000),
    ("B300", "bf16", 2250), ("B300", "nvfp4", 13500),
]


@pytest.mark.parametrize("name, dtype, tflops", DATASHEET_TFLOPS)
def test_derived_tensor_peaks_match_datasheets(name, dtype, tflops):
    peak = pm.hardware(name).tensor_peak_flop_per_s(dtype)
    assert peak == pytest.approx(tflops * 1e12, rel=0.01)


def test_every_quantity_has_resolvable_provenance(any_hw):
    assert any_hw.quantities, "no quantities loaded"
    for key, q in any_hw.quantities.items():
        assert set(q.provenance) & set(PROVENANCE_KINDS), key
        if "source" in q.provenance:
            src = any_hw.sources[q.provenance["source"]]
            assert src["url"].startswith("http"), (key, src)
        if q.range:
            assert q.range[0] <= q.value <= q.range[1], key


def test_hopper_has_no_fp4_and_blackwell_has_it():
    assert not pm.hardware("H100-SXM").supports("nvfp4")
    assert pm.hardware("B200").supports("nvfp4") and pm.hardware("B200").supports("mxfp8")
    assert pm.hardware("B300").pipes_per_sm_per_clk["xu"] == 2 * pm.hardware(
        "B200").pipes_per_sm_per_clk["xu"]  # Blackwell Ultra doubles MUFU (NV-BWU-blog)


def test_ridge_points_and_smem_bandwidth_are_derived(h100):
    assert h100.ridge_point_flop_per_byte("bf16") == pytest.approx(989.4e12 / 3.35e12, rel=0.01)
    assert h100.smem_bandwidth_bytes_per_s == pytest.approx(132 * 128 * 1.98e9)
    assert h100.hbm_bandwidth_bytes_per_s < h100.hbm_peak_bandwidth_bytes_per_s


def test_unknown_hardware_is_an_input_error():
    with pytest.raises(pm.InputError, match="unknown hardware 'h900'"):
        pm.hardware("h900")
