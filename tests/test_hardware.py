"""Built-in specs: they load, resolve by every name, carry provenance, and reproduce datasheets.
Spec-loader failure modes: one test each; the message names file, key path and expectation, and
the CLI exits 2 without a traceback. ISA capabilities: strictly loaded, shown, and the only thing
ops branch on — a GPU that differs from a built-in one only in its declared capabilities gets the
other behaviour."""
from __future__ import annotations

from pathlib import Path

import pytest

import perfmodel as pm
from perfmodel import yamlio
from perfmodel.cli.main import main
from perfmodel.hardware import MMA_INSTRUCTIONS, PROVENANCE_KINDS, builtin_spec_dir, parse_spec


EXPECTED = {"A100-SXM", "A100-SXM-40GB", "H100-SXM", "H100-PCIe", "H200-SXM", "H800-SXM", "B200",
            "GB200", "B300", "GB300", "GB10"}


def test_catalogue_has_every_gpu_of_the_mission():
    assert {hw.name for hw in pm.list_hardware()} == EXPECTED
    assert len(list(builtin_spec_dir().glob("*.yaml"))) == len(EXPECTED)


@pytest.mark.parametrize("name, canonical", [
    ("h100", "H100-SXM"), ("H100-SXM", "H100-SXM"), ("h100-sxm5", "H100-SXM"),
    ("NVIDIA H100 80GB HBM3", "H100-SXM"), ("NVIDIA H200", "H200-SXM"), ("NVIDIA B200", "B200"),
    ("h200", "H200-SXM"), ("a100", "A100-SXM"), ("b300", "B300"), ("gb200", "GB200"),
    ("H100 SXM5 80GB", "H100-SXM"), ("A100 SXM4 80GB", "A100-SXM"), ("h800", "H800-SXM"),
    ("NVIDIA H800", "H800-SXM"),
])
def test_names_aliases_and_driver_device_names_resolve(name, canonical):
    assert pm.hardware(name).name == canonical


# Dense datasheet peaks (docs/hardware-notes.md §1) the per-SM rates × SMs × tensor clock must give.
DATASHEET_TFLOPS = [
    ("A100-SXM", "bf16", 312), ("H100-SXM", "bf16", 989.4), ("H100-SXM", "fp8", 1978.9),
    ("H100-PCIe", "bf16", 756), ("H200-SXM", "fp8", 1979), ("H800-SXM", "fp8", 1979), ("B200", "bf16", 2250),
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


def test_b300_fp4_rate_is_1_5x_b200_per_clock_and_fp4_without_scales_is_not_offered():
    b200, b300 = pm.hardware("B200"), pm.hardware("B300")
    assert b300.tensor_flop_per_sm_per_clk["nvfp4"] == pytest.approx(
        1.5 * b200.tensor_flop_per_sm_per_clk["nvfp4"], rel=0.05)
    assert b200.tensor_flop_per_sm_per_clk["mxfp8"] == b200.tensor_flop_per_sm_per_clk["fp8"]


def test_ridge_points_and_smem_bandwidth_are_derived(h100):
    assert h100.ridge_point_flop_per_byte("bf16") == pytest.approx(989.4e12 / 3.35e12, rel=0.01)
    assert h100.smem_bandwidth_bytes_per_s == pytest.approx(132 * 128 * 1.98e9)
    assert h100.hbm_bandwidth_bytes_per_s < h100.hbm_peak_bandwidth_bytes_per_s


def test_unknown_hardware_is_an_input_error():
    with pytest.raises(pm.InputError, match="unknown hardware 'h900'"):
        pm.hardware("h900")


# ------------------------------------------------------------------- spec-loader failures --


GOOD = (builtin_spec_dir() / "H100-SXM.yaml").read_text()


def _spec(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    return p


CASES = [
    ("malformed", GOOD.replace("sm_count: {value: 132", "sm_count: {value: [132"),
     "malformed YAML at line"),
    ("unknown key", GOOD.replace("issue_per_sm_per_clk:", "issue_per_sm_per_clock:"),
     "issue_per_sm_per_clock: unknown key"),
    ("missing key", GOOD.replace("kernel_launch_s:", "# kernel_launch_s:"),
     "kernel_launch_s: missing required key"),
    ("wrong type", GOOD.replace("sm_count: {value: 132", "sm_count: {value: many"),
     "sm_count.value: expected a number, got 'many'"),
    ("out of range", GOOD.replace("boost_clock_hz: {value: 1.98e9", "boost_clock_hz: {value: 1980"),
     "clocks.boost_clock_hz.value: 1980 out of range"),
    ("not an integer", GOOD.replace("sm_count: {value: 132", "sm_count: {value: 132.5"),
     "sm_count.value: expected an integer"),
    ("unresolved source", GOOD.replace("source: CPG-CC, note: \"228 KiB\"",
                                       "source: NOPE, note: \"228 KiB\""),
     "sm_resources.smem_per_sm_bytes.source: 'NOPE' is not defined"),
    ("no provenance", GOOD.replace("max_ctas_per_sm: {value: 32, source: CPG-CC}",
                                   "max_ctas_per_sm: {value: 32}"),
     "sm_resources.max_ctas_per_sm: no provenance"),
    ("bad range", GOOD.replace("range: [0.86, 0.93]", "range: [0.95, 0.99]"),
     "hbm.achievable_fraction.range: expected [lo, hi]"),
    ("schema version", GOOD.replace("schema_version: 1", "schema_version: 7"),
     "schema_version: expected 1, got 7"),
    ("architecture", GOOD.replace("architecture: hopper", "architecture: volta"),
     "architecture: expected one of"),
    ("not a mapping", "- just\n- a list\n", "expected a mapping at the top level"),
]


@pytest.mark.parametrize("label, text, message", CASES, ids=[c[0] for c in CASES])
def test_loader_reports_file_key_and_expectation(tmp_path, label, text, message):
    assert text != GOOD or label == "not a mapping"
    p = _spec(tmp_path, text)
    with pytest.raises(pm.InputError) as e:
        pm.load_spec(p)
    assert str(p) in str(e.value)
    assert message in str(e.value)


@pytest.mark.parametrize("label, text, message", CASES, ids=[c[0] for c in CASES])
def test_cli_hw_show_bad_spec_exits_2_without_traceback(tmp_path, capsys, label, text, message):
    p = _spec(tmp_path, text)
    assert main(["hw", "show", str(p)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert all(line.startswith("perfmodel: error: ") for line in err.strip().splitlines())


def test_missing_file_is_reported(tmp_path, capsys):
    assert main(["hw", "show", str(tmp_path / "nope.yaml")]) == 2
    assert "cannot read hardware spec" in capsys.readouterr().err


def test_all_problems_are_reported_at_once(tmp_path):
    text = GOOD.replace("sm_count: {value: 132", "sm_count: {value: -4").replace(
        "issue_per_sm_per_clk:", "issues:")
    with pytest.raises(pm.InputError) as e:
        pm.load_spec(_spec(tmp_path, text))
    assert len(e.value.problems) >= 3  # bad value, unknown key, missing key


EXPECTED_MMA = {"A100-SXM": "mma_sync", "A100-SXM-40GB": "mma_sync",
            "H100-SXM": "wgmma", "H100-PCIe": "wgmma",
            "H200-SXM": "wgmma", "H800-SXM": "wgmma", "B200": "tcgen05", "GB200": "tcgen05", "B300": "tcgen05",
            "GB300": "tcgen05", "GB10": "mma_sync"}


def _raw(name: str) -> dict:
    return yamlio.load(builtin_spec_dir() / f"{name}.yaml", "hardware spec")


def test_every_builtin_spec_declares_its_isa_with_provenance():
    for hw in pm.list_hardware():
        assert hw.mma_instruction == EXPECTED_MMA[hw.name]
        assert hw.mma_instruction in MMA_INSTRUCTIONS
        for key in ("isa.mma_instruction", "isa.packed_fp32", "isa.block_scaled_mma",
                    "isa.stochastic_rounding"):
            assert hw.capabilities[key].provenance, f"{hw.name} {key} has no provenance"
        # packed FP32, block-scaled MMAs and hardware SR arrive together with tcgen05 here;
        # GB10 (sm_121) has Blackwell's block-scaled MMAs on mma.sync, without tcgen05
        blackwell = hw.mma_instruction == "tcgen05"
        assert hw.packed_fp32 is blackwell and hw.stochastic_rounding is blackwell
        scaled = blackwell or hw.name == "GB10"
        assert set(hw.block_scaled_mma) == ({"mxfp8", "nvfp4", "mxfp4"} if scaled else set())


@pytest.mark.parametrize("key, value, expect", [
    ("mma_instruction", "hgmma", "expected one of mma_sync, wgmma, tcgen05"),
    ("packed_fp32", "yes", "expected true or false"),
    ("block_scaled_mma", ["nvfp4", "fp6"], "expected a list of"),
])
def test_bad_capability_values_are_rejected_with_their_key_path(key, value, expect):
    raw = _raw("H100-SXM")
    raw["isa"][key]["value"] = value
    with pytest.raises(pm.InputError) as err:
        parse_spec(raw, "h100-bad.yaml")
    assert any(f"h100-bad.yaml: isa.{key}.value" in p and expect in p for p in err.value.problems)


def test_missing_capability_and_missing_provenance_are_rejected():
    raw = _raw("B200")
    del raw["isa"]["packed_fp32"]
    raw["isa"]["stochastic_rounding"] = {"value": True}
    with pytest.raises(pm.InputError) as err:
        parse_spec(raw, "b200-bad.yaml")
    text = "\n".join(err.value.problems)
    assert "isa.packed_fp32: missing required key" in text
    assert "isa.stochastic_rounding: no provenance" in text


def _variant(base: str, **isa) -> pm.Hardware:
    raw = _raw(base)
    raw["name"] = f"{base}-variant"
    raw["aliases"], raw["device_names"] = [], []
    for key, value in isa.items():
        raw["isa"][key] = {"value": value, "assumed": "test variant"}
    return parse_spec(raw, f"{base}-variant.yaml")


def test_attention_family_follows_the_declared_mma_instruction():
    """A Hopper-sized GPU declaring tcgen05 defaults to FA4 and refuses FA3: the op reads the
    capability, not the architecture name (which stays 'hopper' here)."""
    hw = _variant("H100-SXM", mma_instruction="tcgen05", packed_fp32=True)
    assert hw.architecture == "hopper"
    op = pm.ops.op("attention", batch=2, heads=16, seq_q=4096, head_dim=128, dtype="bf16")
    assert pm.predict_op(op, hw).details["kernel"] == "fa4"
    with pytest.raises(pm.InputError, match="needs wgmma"):
        pm.predict_op(op.with_params(kernel="fa3"), hw)


def test_packed_fp32_halves_fa4_softmax_issue_slots():
    plain = _variant("B200", packed_fp32=False)
    packed = pm.hardware("B200")
    op = pm.ops.op("attention", batch=2, heads=16, seq_q=4096, head_dim=128, dtype="bf16")
    w_plain, w_packed = op.demand(plain).work, op.demand(packed).work
    assert w_plain["fma"] == w_packed["fma"]
    fma_issue = w_plain["fma"] / 32
    assert w_plain["issue"] - w_packed["issue"] == pytest.approx(fma_issue / 2, rel=1e-9)


def test_block_scaled_fp8_promotes_only_without_a_block_scaled_mma():
    hw = _variant("B200", block_scaled_mma=[])
    gemm = pm.ops.Gemm(m=4096, n=4096, k=4096, dtype="fp8", fp8_scaling="block")
    assert gemm.promotes_on_cuda_cores(hw) and not gemm.promotes_on_cuda_cores(pm.hardware("B200"))
    assert pm.predict_op(gemm, hw).time_s > pm.predict_op(gemm, pm.hardware("B200")).time_s


def test_stochastic_rounding_in_hardware_is_cheaper_than_emulated():
    op = pm.ops.op("quantize", rows=8192, cols=8192, to="nvfp4", stochastic_rounding=True)
    soft = _variant("B200", stochastic_rounding=False)
    assert op.demand(soft).work["alu"] > op.demand(pm.hardware("B200")).work["alu"]


def test_hw_show_lists_capabilities(capsys):
    assert main(["hw", "show", "gb200"]) == 0
    out = capsys.readouterr().out
    assert "isa.mma_instruction" in out and "tcgen05" in out
    assert main(["hw", "show", "a100", "--format", "json"]) == 0
    assert '"mma_instruction": "mma_sync"' in capsys.readouterr().out


# ----------------------------------------------------- scale-out network and NVLink domain --


NETWORK = {  # NVLink domain (GPUs), NIC per GPU per direction (bytes/s)
    "A100-SXM": (8, 25e9), "A100-SXM-40GB": (8, 25e9),
    "H100-SXM": (8, 50e9), "H100-PCIe": (2, 50e9),
    "H200-SXM": (8, 50e9), "H800-SXM": (8, 50e9), "B200": (8, 50e9), "GB200": (72, 50e9), "B300": (8, 100e9),
    "GB300": (72, 100e9), "GB10": (1, 25e9)}


def test_every_builtin_spec_has_a_network_link_and_an_nvlink_domain():
    assert set(NETWORK) == EXPECTED
    for hw in pm.list_hardware():
        domain, nic = NETWORK[hw.name]
        net = hw.link("network")
        assert hw.nvlink_domain_gpus == domain
        assert net.bandwidth_bytes_per_s == nic < hw.link("nvlink").bandwidth_bytes_per_s
        assert net.latency_s >= hw.link("nvlink").latency_s
        for key in ("topology.nvlink_domain_gpus", "links.network.bandwidth_bytes_per_s",
                    "links.network.latency_s"):
            assert hw.quantities[key].provenance, f"{hw.name} {key}"
        assert hw.summary()["topology"] == {"nvlink_domain_gpus": domain}


def _drop(d, key):
    del d[key]


@pytest.mark.parametrize("change, expect", [
    (lambda raw: _drop(raw, "topology"), "topology: missing required key"),
    (lambda raw: _drop(raw["topology"], "nvlink_domain_gpus"),
     "topology.nvlink_domain_gpus: missing required key"),
    (lambda raw: raw["topology"]["nvlink_domain_gpus"].update(value=0),
     "topology.nvlink_domain_gpus.value: 0 out of range [1, 576]"),
    (lambda raw: raw["topology"]["nvlink_domain_gpus"].update(value=7.5),
     "topology.nvlink_domain_gpus.value: expected an integer, got 7.5"),
    (lambda raw: _drop(raw["topology"]["nvlink_domain_gpus"], "source"),
     "topology.nvlink_domain_gpus: no provenance"),
    (lambda raw: raw["topology"].update(nvlink_domain=8), "topology.nvlink_domain: unknown key"),
    (lambda raw: raw["links"]["network"]["bandwidth_bytes_per_s"].update(value=400),
     "links.network.bandwidth_bytes_per_s.value: 400 out of range"),
    (lambda raw: raw["links"].update(auto=raw["links"]["network"]),
     "links.auto: 'auto' is not a link name"),
])
def test_bad_nvlink_domain_or_network_is_rejected_with_its_key_path(change, expect):
    raw = _raw("H100-SXM")
    change(raw)
    with pytest.raises(pm.InputError) as err:
        parse_spec(raw, "h100-bad.yaml")
    assert any(p.startswith("h100-bad.yaml: ") and expect in p for p in err.value.problems), \
        err.value.problems


def test_hw_show_lists_the_network_and_the_nvlink_domain(capsys):
    assert main(["hw", "show", "gb200"]) == 0
    out = capsys.readouterr().out
    assert "links.network.bandwidth_bytes_per_s" in out and "topology.nvlink_domain_gpus" in out
    assert "NVLink domain: 72 GPUs" in out
    assert main(["hw", "show", "h100", "--format", "json"]) == 0
    assert '"nvlink_domain_gpus": 8' in capsys.readouterr().out


# ------------------------------------------------------------------ clocks and locked clocks --


def test_sm_clock_domain_endpoints():
    """A kernel without tensor work runs at max boost; under dense MMA load the whole SM runs at
    the sustained clock, tensor_clock_hz × tensor_sustained_fraction."""
    for hw in pm.list_hardware():
        assert hw.max_sm_clock_hz == hw.boost_clock_hz and hw.sm_clock_hz is None
        assert hw.sustained_sm_clock_hz == pytest.approx(
            hw.tensor_clock_hz * hw.tensor_sustained_fraction)
        assert hw.sustained_sm_clock_hz < hw.max_sm_clock_hz


def test_a_locked_clock_caps_every_sm_clocked_rate():
    b200 = pm.hardware("B200")
    locked = pm.hardware("B200", sm_clock_hz=1.2e9)  # below B200's sustained ~1.24 GHz
    assert locked is pm.hardware("b200", sm_clock_hz=1.2e9)  # one object per spec and clock
    assert locked.name == "B200" and locked.sm_clock_hz == 1.2e9
    assert locked.max_sm_clock_hz == locked.sustained_sm_clock_hz == 1.2e9  # below sustained
    assert locked.smem_bandwidth_bytes_per_s == pytest.approx(148 * 128 * 1.2e9)
    assert locked.tensor_peak_flop_per_s("bf16") == pytest.approx(148 * 8192 * 1.2e9)
    assert locked.hbm_bandwidth_bytes_per_s == b200.hbm_bandwidth_bytes_per_s
    sol = pm.hardware("B200", sm_clock_hz=1.5e9)  # SOL-ExecBench's lock: above sustained
    assert sol.max_sm_clock_hz == 1.5e9 and sol.sustained_sm_clock_hz == b200.sustained_sm_clock_hz
    above = pm.hardware("B200", sm_clock_hz=1.755e9)  # FA4's authors' clock: above sustained
    assert above.sustained_sm_clock_hz == b200.sustained_sm_clock_hz
    assert above.tensor_peak_flop_per_s("bf16") == pytest.approx(148 * 8192 * 1.755e9)  # < 1856
    assert pm.hardware(locked) is locked and locked.locked(None) is locked
    assert locked.summary()["sm_clock_hz"] == 1.2e9


@pytest.mark.parametrize("hz, message", [
    (2.5e9, "B200: SM clock lock 2500 MHz is above its max boost clock (1965 MHz)"),
    (1e6, "is below 100 MHz"), (float("nan"), "is not a number of Hz")])
def test_bad_locked_clocks_are_one_line_input_errors(hz, message):
    with pytest.raises(pm.InputError) as e:
        pm.hardware("B200", sm_clock_hz=hz)
    assert message in str(e.value) and len(e.value.problems) == 1


@pytest.mark.parametrize("text, hz", [("1500MHz", 1.5e9), ("1.5GHz", 1.5e9), ("1.5e9Hz", 1.5e9),
                                      (" 1755 mhz ", 1.755e9), ("1500000kHz", 1.5e9)])
def test_clock_text_parses_with_its_unit(text, hz):
    from perfmodel.hardware import parse_clock_hz
    assert parse_clock_hz(text) == pytest.approx(hz)


@pytest.mark.parametrize("text", ["1500", "fast", "-5MHz", "0MHz", "1.5 GB", ""])
def test_clock_text_without_a_unit_or_value_is_an_input_error(text):
    from perfmodel.hardware import parse_clock_hz
    with pytest.raises(pm.InputError, match="--sm-clock: expected a"):
        parse_clock_hz(text)


# ------------------------------------------------------- mma.sync rates and the FP8 pack pipe --


def test_every_gpu_declares_its_mma_sync_rate_with_provenance(any_hw):
    """mma.sync (FA2's MMA) has its own per-SM rate: the native rate on Ampere, 2/3 of wgmma's on
    Hopper (FA3 paper), on Blackwell the legacy path's, not tcgen05's."""
    rates = any_hw.mma_sync_flop_per_sm_per_clk
    assert {"fp16", "bf16"} <= set(rates)
    for d, r in rates.items():
        q = any_hw.quantities[f"isa.mma_sync_flop_per_sm_per_clk.{d}"]
        assert q.value == r and set(q.provenance) & set(PROVENANCE_KINDS)
    native = any_hw.tensor_flop_per_sm_per_clk["bf16"]
    if any_hw.mma_instruction == "mma_sync":
        assert rates["bf16"] == native
    elif any_hw.mma_instruction == "wgmma":
        assert rates["bf16"] == pytest.approx(2 / 3 * native, rel=0.001)
    else:
        assert rates["bf16"] <= pm.hardware("H100-SXM").mma_sync_flop_per_sm_per_clk["bf16"]


def test_fp8_convert_pipe_is_a_per_architecture_fact():
    for hw in pm.list_hardware():
        if not hw.supports("fp8"):
            assert hw.fp8_convert_pipe is None
            continue
        cap = hw.capabilities["isa.fp8_convert_pipe"]
        assert cap.provenance and "e4m3x2" in cap.note
        assert hw.fp8_convert_pipe == {"hopper": "xu", "blackwell": "alu"}[hw.architecture]


def test_a_spec_without_fa2_s_mma_sync_rate_is_rejected(tmp_path):
    text = GOOD.replace("    bf16: {value: 2731, derivation:", "    bf16x: {value: 2731, derivation:")
    with pytest.raises(pm.InputError) as e:
        pm.load_spec(_spec(tmp_path, text))
    assert "isa.mma_sync_flop_per_sm_per_clk.bf16: missing required key" in str(e.value)


def test_gb300_is_b300s_die_at_1400_w_in_one_nvl72_domain():
    """GB300 shares B300's per-SM rates and clocks, but its 1400 W lifts the power cap behind
    HGX B300's own sustained fraction, so its BF16 GEMM is faster than B200's and B300's (whose
    own fits, 0.669 and 0.726, put B300 ~8 % ahead of B200 at 1100 W against 1000 W); its NVLink
    domain is the rack."""
    gb300, b300, b200 = pm.hardware("GB300"), pm.hardware("B300"), pm.hardware("B200")
    assert gb300.tensor_flop_per_sm_per_clk == b300.tensor_flop_per_sm_per_clk
    assert gb300.nvlink_domain_gpus == 72 and b300.nvlink_domain_gpus == 8
    gemm = pm.ops.op("gemm", m=8192, n=8192, k=8192, dtype="bf16")
    t = {h.name: pm.predict_op(gemm, h).time_s for h in (gb300, b300, b200)}
    assert t["GB300"] < t["B200"] and t["GB300"] < t["B300"]
    assert t["B300"] < t["B200"]
    assert t["B300"] == pytest.approx(t["B200"] * 0.669 / 0.726, rel=0.05)


def test_h800_is_the_h100_sm_with_a_narrower_nvlink_and_no_fp64():
    """The export part: every SM-side rate and the memory are the H100 SXM5's, so a kernel that
    stays on one GPU takes the same time; NVLink carries 400 of the H100's 900 GB/s (a large
    8-GPU all-reduce takes ~2.25x as long) and FP64 runs at 1 of its 67 TFLOPS."""
    h800, h100 = pm.hardware("H800"), pm.hardware("H100-SXM")
    assert h800.tensor_flop_per_sm_per_clk == h100.tensor_flop_per_sm_per_clk
    assert h800.hbm_peak_bandwidth_bytes_per_s == h100.hbm_peak_bandwidth_bytes_per_s
    gemm = pm.ops.op("grouped_gemm", group_m=[4096] * 8, n=4096, k=7168, dtype="fp8",
                     fp8_scaling="block")
    assert pm.predict_op(gemm, h800).time_s == pm.predict_op(gemm, h100).time_s
    ar = pm.ops.op("allreduce", bytes=1e9, gpus=8)
    ratio = pm.predict_op(ar, h800).time_s / pm.predict_op(ar, h100).time_s
    assert 1.8 < ratio < 2.6
    assert h800.pipe_peak_per_s("fp64") * 2 == pytest.approx(1.0e12, rel=0.1)


def test_hw_list_reads_the_headers_and_they_agree_with_the_parsed_specs(capsys):
    """`hw list` prints the catalogue from each file's identity lines without parsing a spec
    (perfmodel.spec_headers); those lines must say what the full load says."""
    from perfmodel.spec_headers import builtin_spec_files, header_fields
    files = builtin_spec_files()
    assert len(files) == len(EXPECTED)
    for f in files:
        fields = header_fields(f.read_text(encoding="utf-8"))
        hw = pm.load_spec(f)
        assert (fields["name"], fields["architecture"], fields["compute_capability"],
                fields["aliases"], fields["device_names"]) == (
            hw.name, hw.architecture, hw.compute_capability, hw.aliases, hw.device_names)
    assert main(["hw", "list"]) == 0
    out = capsys.readouterr().out
    # the name column is as wide as the longest name (A100-SXM-40GB)
    assert all(name in out for name in EXPECTED) and "H800-SXM       hopper      9.0" in out


def test_hw_list_names_a_spec_without_its_identity_line(tmp_path, monkeypatch, capsys):
    import perfmodel.cli.hw as cli_hw
    bad = tmp_path / "X.yaml"
    bad.write_text("name: X\narchitecture: hopper\naliases: [x]\ndevice_names: []\n",
                   encoding="utf-8")
    monkeypatch.setattr(cli_hw, "builtin_spec_files", lambda: [bad])
    assert main(["hw", "list"]) == 2
    err = capsys.readouterr().err
    assert "X.yaml: compute_capability: missing top-level identity line" in err
    assert "Traceback" not in err
