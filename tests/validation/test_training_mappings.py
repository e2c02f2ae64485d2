"""The training rows' GPU and model names → the hardware specs and model files added for them
(issue 41): A100 40GB, llm-foundry's MPT sizes, NeMo's GPT-3, Nemotron-3 and Llama 4 Scout; and
what stays inexpressible says why."""
from __future__ import annotations

import pytest

import perfmodel as pm
from perfmodel.validation.training import (NO_MODEL_FILE, load_training_cases, resolve_hardware,
                                           resolve_model)
from perfmodel.workloads.models import list_models


@pytest.fixture(scope="module")
def by_id():
    cases, skipped = load_training_cases()
    return {r.id: r for r in [*cases, *skipped]}


@pytest.mark.parametrize("text, spec", [
    ("A100 (40GB)", "A100-SXM-40GB"), ("A100 (80GB)", "A100-SXM"), ("H100 (80GB)", "H100-SXM"),
])
def test_hardware_names(text, spec):
    assert resolve_hardware(text)[0] == spec


@pytest.mark.parametrize("text, model", [
    ("MPT-125m", "mpt-125m"), ("MPT-350m", "mpt-350m"), ("MPT-760m", "mpt-760m"),
    ("MPT-1b", "mpt-1b"), ("MPT-3b", "mpt-3b"), ("MPT-7b", "mpt-7b"), ("MPT-13b", "mpt-13b"),
    ("MPT-30b", "mpt-30b"), ("MPT-70b", "mpt-70b"),
    ("GPT3-5B", "gpt3-5b"), ("GPT3-20B", "gpt3-20b"), ("GPT3-175B", "gpt3-175b"),
    ("Nemotron-8B", "nemotron3-8b"), ("Nemotron-22B", "nemotron3-22b"),
    ("LLAMA4-Scout-LLM", "llama4-scout"),
])
def test_model_names_resolve_to_built_in_files(text, model):
    assert resolve_model(text)[0] == model and model in list_models()


@pytest.mark.parametrize("text, label", [
    ("Llama 4 Maverick (400B, 128 experts)", "Llama-4 Maverick"),   # dense/MoE interleaved
    ("MPT-2b", "MPT-2B"),                                           # no such llm-foundry size
    ("GPT3-40B", "GPT-3 40B"),                                      # no row, no file
])
def test_names_without_a_file_keep_their_label(text, label):
    assert resolve_model(text) == (None, label)


def test_a100_40gb_differs_from_the_80gb_spec_in_its_memory_only():
    a40, a80 = pm.hardware("A100-SXM-40GB"), pm.hardware("A100-SXM")
    differ = {k for k in a80.quantities
              if a40.quantities[k].value != a80.quantities[k].value}
    assert differ == {"hbm.capacity_bytes", "hbm.peak_bandwidth_bytes_per_s"}
    assert a40.quantities["hbm.peak_bandwidth_bytes_per_s"].value == 1.555e12
    assert a40.quantities["hbm.capacity_bytes"].value == 40 * 2**30
    assert pm.hardware("NVIDIA A100-SXM4-40GB").name == "A100-SXM-40GB"
    assert pm.hardware("a100").name == "A100-SXM"              # the bare alias stays 80 GB


def test_an_a100_40gb_row_by_hand(by_id):
    # LF-206-tps: MPT-125m on 8 A100 40GB, seq 32768, GBS 32, MBS 1, GA 4, FSDP FULL_SHARD,
    # no recomputation, 32651 tokens/s/GPU; its MFU row (47.27 %) gives the same tokens/s
    # under llm-foundry's 6·N + 12·L·d·s with the file's L and d and the spec's dense BF16 peak
    # (108 SMs × 2048 FLOP/clk × 1.41 GHz = 311.9 TFLOP/s)
    c = by_id["LF-206-tps"]
    assert (c.hw, c.model, c.gpus, c.dp, c.zero, c.recompute) == (
        "A100-SXM-40GB", "mpt-125m", 8, 8, 3, "none")
    assert (c.seq, c.global_batch, c.micro_batch, c.microbatches) == (32768, 32, 1, 4)
    assert c.value == 32651
    assert "hardware: 'A100 (40GB)' taken as A100-SXM-40GB" in c.assumptions
    mfu = by_id["LF-206-mfu"]
    by_hand = 0.4727 * (108 * 2048 * 1.41e9) / (6 * 148904448 + 12 * 12 * 768 * 32768)
    assert mfu.tokens_per_s_per_gpu_from_flops() == pytest.approx(by_hand, rel=1e-9)
    assert by_hand == pytest.approx(32651, rel=0.01)


def test_the_nemo_rows_read_their_layouts(by_id):
    c = by_id["NEMO2407-009-tps"]                   # Nemotron-22B, TP 2, PP 4, VP 10
    assert (c.model, c.tp, c.pp, c.vp, c.dp, c.seq, c.recipe) == (
        "nemotron3-22b", 2, 4, 10, 8, 4096, "fp8")
    assert c.microbatches == 16                     # 256 / (8 · 2)
    c = by_id["NEMOFW-2507-GB200-04-tps"]           # Llama 4 Scout, EP 16 over 64 GB200
    assert (c.model, c.hw, c.ep, c.dp, c.seq, c.recipe) == (
        "llama4-scout", "GB200", 16, 64, 8192, "fp8_current")


def test_what_stays_inexpressible_says_which_file_is_missing(by_id):
    s = by_id["DGXC-2505-L4M-GB200-BF16-128-step"]
    assert s.reason == "no model file: Llama-4 Maverick"
    assert s.reason.split(": ", 1)[1].startswith(NO_MODEL_FILE)
    # no row of the added models or of A100 40GB is skipped for want of a file
    missing = [r.id for r in by_id.values() if getattr(r, "reason", "").startswith(
        ("no model file: MPT", "no model file: GPT-3", "no model file: Nemotron-8B",
         "no model file: Nemotron-22B", "no model file: Llama-4 Scout",
         "no hardware spec: A100 40GB"))]
    assert missing == []
