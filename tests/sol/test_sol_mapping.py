"""Problem → op graph (perfmodel/sol/mapping.py) on the fixture and on benchmark problems."""
from __future__ import annotations

from pathlib import Path

import pytest

from perfmodel.sol.mapping import map_workload
from perfmodel.sol.problems import by_problem, load_definition, read_csv

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def problems():
    return by_problem(read_csv())


def first(problems, prefix):
    return next(w for p, wl in problems.items() if p.startswith(prefix) for w in wl)


def test_fixture_maps_to_a_gemm_a_norm_and_the_residual_stream():
    w = load_definition(FIXTURES / "gemm_rmsnorm" / "definition.json").workload()
    m = map_workload(w)
    assert m.status == "direct" and not m.standins
    kinds = [p.op.name for p in m.parts]
    assert kinds == ["gemm", "norm", "elementwise"]
    g = m.parts[0].op
    assert (g.m, g.n, g.k) == (2048, 4096, 2048)
    assert m.macs == {"fp16": 2048 * 4096 * 2048}
    assert m.dram_bytes == w.io_bytes


def test_flashinfer_gemm_is_a_times_b_transposed(problems):
    m = map_workload(problems["FlashInfer-Bench__007_gemm_n4096_k4096"][40])
    assert [p.op.name for p in m.parts] == ["gemm"]
    g = m.parts[0].op
    assert (g.m, g.n, g.k) == (8192, 4096, 4096) and m.macs["fp16"] == 8192 * 4096 * 4096


def test_paged_decode_counts_the_touched_pages(problems):
    w = first(problems, "FlashInfer-Bench__013_gqa_paged_decode")
    m = map_workload(w)
    pages = w.axes["num_kv_indices"]
    assert m.io_bytes["k_cache"] == pages * 8 * 128 * 2 < w.inputs["k_cache"].bytes
    attn = next(p.op for p in m.parts if p.op.name == "attention")
    assert (attn.heads, attn.kv_heads, attn.seq_q, attn.seq_kv) == (32, 8, 1, pages)


def test_moe_maps_to_grouped_gemms_over_routed_rows(problems):
    w = problems["L1__044_moe_expert_computation"][0]
    m = map_workload(w)
    grouped = [p.op for p in m.parts if p.op.name == "grouped_gemm"]
    assert len(grouped) == 3 and all(g.groups == 256 and g.m == 2048 * 8 for g in grouped)
    assert sorted((g.n, g.k) for g in grouped) == [(2048, 7168), (2048, 7168), (7168, 2048)]
    assert m.macs["fp16"] == 2048 * 8 * 3 * 2048 * 7168


def test_convolution_problem_maps_convs_and_groupnorms(problems):
    m = map_workload(problems["L1__002_vae_conv3x3_groupnorm_silu_residual_fused"][0])
    names = [p.op.name for p in m.parts]
    assert names.count("conv") == 2 and names.count("groupnorm") == 2
    conv = next(p.op for p in m.parts if p.op.name == "conv")
    assert conv.gemm_shape()[:3] == (16 * 64 * 64, 256, 256 * 9)


def test_attention_block_has_projections_and_a_core(problems):
    m = map_workload(problems["L1__092_gqa_attention_with_qk_norm"][0])
    attn = [p.op for p in m.parts if p.op.name == "attention"]
    assert len(attn) == 1 and (attn[0].heads, attn[0].kv_heads, attn[0].seq_q) == (96, 8, 512)
    assert sum(p.op.name == "gemm" for p in m.parts) == 4


def test_unmappable_problems_name_why(problems):
    m = map_workload(problems["L1__007_hyena_fft_size_padding_rfft"][0])
    assert m.status == "none" and "FFT" in m.reason and not m.parts
    assert m.dram_bytes > 0  # its bytes still give SOLAR's memory bound


def test_stand_ins_are_named(problems):
    m = map_workload(first(problems, "FlashInfer-Bench__020_moe"))
    assert m.status == "approximate"
    assert any("experts activated" in s for s in m.standins)
