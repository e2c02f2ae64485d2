"""An engine's GEMM dispatch table (ops.gemm_dispatch) and fixed kernels (`tile`, `swap_ab`):
the table's picks by hand from vLLM's dispatch sources, swap-AB as the transposed problem, no
split-K for a fixed kernel, multicast along N, and clear errors."""
from __future__ import annotations

import pytest

import perfmodel as pm
from perfmodel.ops.gemm_dispatch import dispatched_kernel, parse_tile
from perfmodel.workloads.builder import build_graph


@pytest.mark.parametrize("m, n, k, tile, swap, persistent", [
    (1, 10240, 8192, "64x16", True, False),                # M <= 16, N > 1280
    (16, 1280, 8192, "64x16 cluster 1x4", True, False),    # M <= 16, N <= 1280
    (17, 1280, 8192, "64x16 cluster 1x4", True, False),    # 16 < M <= 64, N <= 1280
    (64, 10240, 8192, "64x64", True, False),               # 16 < M <= 64, N > 1280
    (65, 10240, 8192, "64x128 cluster 2x1", False, True),  # 64 < M <= 128: Pingpong
    (129, 10240, 8192, "128x128 cluster 2x1", False, True),
    (9000, 10240, 8192, "128x128 cluster 2x1", False, True),  # 0.10.2: no 256-row config
])
def test_vllm_0_10_2_sm90_table(m, n, k, tile, swap, persistent):
    c = dispatched_kernel("vllm-0.10.2", "wgmma", "fp8", False, m, n, k)
    assert (c.tile, c.swap_ab, c.persistent) == (tile, swap, persistent)


def test_vllm_0_24_0_adds_the_large_cooperative_tile_and_blackwell_swap_ab():
    big = dispatched_kernel("vllm-0.24.0", "wgmma", "fp8", False, 8192, 8192, 6144)
    assert big.tile == "256x128 cluster 2x1"
    assert dispatched_kernel("vllm-0.24.0", "wgmma", "fp8", False, 8192, 8192, 4096).tile \
        == "128x128 cluster 2x1"  # K below 6144
    assert dispatched_kernel("vllm-0.24.0", "tcgen05", "fp8", False, 8, 8192, 8192).swap_ab
    # M = 64 with K < 4096 stays unswapped on sm100
    c = dispatched_kernel("vllm-0.24.0", "tcgen05", "fp8", False, 64, 8192, 2048)
    assert (c.tile, c.swap_ab) == ("64x64", False)
    # 0.10.2 on sm100: by the next power of two of M, never swapped
    c = dispatched_kernel("vllm-0.10.2", "tcgen05", "fp8", False, 17, 8192, 8192)
    assert (c.tile, c.swap_ab) == ("64x64", False)
    assert dispatched_kernel("vllm-0.10.2", "tcgen05", "fp8", False, 257, 8192, 8192).tile \
        == "256x128 cluster 2x2"


def test_the_table_applies_to_per_tensor_fp8_only():
    assert dispatched_kernel("vllm-0.10.2", "wgmma", "bf16", False, 8, 8192, 8192) is None
    assert dispatched_kernel("vllm-0.10.2", "wgmma", "fp8", True, 8, 8192, 8192) is None
    assert dispatched_kernel("vllm-0.10.2", "mma_sync", "fp8", False, 8, 8192, 8192) is None
    bf16 = pm.ops.Gemm(m=8, n=8192, k=8192, dtype="bf16")
    h100 = pm.hardware("H100-SXM")
    assert pm.predict_op(bf16.with_params(dispatch="vllm-0.10.2"), h100).time_s == \
        pm.predict_op(bf16, h100).time_s


def test_swap_ab_is_the_transposed_problem():
    h200 = pm.hardware("H200-SXM")
    swapped = pm.ops.Gemm(m=32, n=10240, k=8192, dtype="fp8", tile="64x64", swap_ab=True)
    plain = pm.ops.Gemm(m=10240, n=32, k=8192, dtype="fp8", tile="64x64")
    assert pm.predict_op(swapped, h200).time_s == pm.predict_op(plain, h200).time_s
    # the same FLOP and bytes either way
    assert swapped.flop == plain.flop
    assert sum(swapped.unique_bytes()) == sum(plain.unique_bytes())


def test_a_fixed_kernel_runs_no_split_k_and_is_never_faster_than_the_best():
    h100 = pm.hardware("H100-SXM")
    best = pm.ops.Gemm(m=16, n=1024, k=16384, dtype="fp8")  # few tiles: the search splits K
    assert pm.predict_op(best, h100).details["split_k"] > 1
    for tile in ("64x128 cluster 2x1", "128x128 cluster 2x1"):  # tiles the search offers
        fixed = best.with_params(tile=tile)
        est = pm.predict_op(fixed, h100)
        assert est.details["split_k"] == 1
        assert est.time_s >= pm.predict_op(best, h100).time_s


def test_vllm_dispatch_pads_a_160_row_gemm_to_two_128_row_tiles():
    # hand-worked: M = 160 > 128 runs 128x128 tiles: ceil(160/128) x 10240/128 = 160 CTAs on
    # 132 SMs, two rounds on the busiest SM; the search's best (64x256 tiles, 3 x 40 = 120 CTAs,
    # one round) is ~half the time
    h200 = pm.hardware("H200-SXM")
    g = pm.ops.Gemm(m=160, n=10240, k=8192, dtype="fp8")
    vllm = pm.predict_op(g.with_params(dispatch="vllm-0.10.2"), h200)
    assert vllm.details["tiles"] == 160
    assert vllm.time_s > 1.6 * pm.predict_op(g, h200).time_s


def test_multicast_along_n_reads_a_once_per_cluster():
    from perfmodel.engine import resolve
    h100 = pm.hardware("H100-SXM")
    one = pm.ops.Gemm(m=4096, n=4096, k=4096, dtype="fp8", tile="64x16")
    four = one.with_params(tile="64x16 cluster 1x4")
    l2_one = resolve(one.demand(h100), h100, "pipes").work["l2"]
    l2_four = resolve(four.demand(h100), h100, "pipes").work["l2"]
    assert l2_four < l2_one


@pytest.mark.parametrize("text, fragment", [
    ("64", "expected 'MxN'"), ("96x128", "rows"), ("64x12", "multiple of 8"),
    ("64x512", "multiple of 8"), ("64x64 cluster 8x8", "cluster")])
def test_bad_tiles_are_one_clear_error(text, fragment):
    with pytest.raises(pm.InputError, match=fragment):
        parse_tile(text, "wgmma")


def test_bad_combinations_are_refused_at_construction():
    with pytest.raises(pm.InputError, match="tile"):
        pm.ops.Gemm(m=8, n=8, k=8, dtype="fp8", tile="64x64", dispatch="vllm-0.10.2")
    with pytest.raises(pm.InputError, match="swap_ab"):
        pm.ops.Gemm(m=8, n=8, k=8, dtype="fp8", fp8_scaling="block", swap_ab=True)
    with pytest.raises(pm.InputError, match="dispatch"):
        pm.ops.Gemm(m=8, n=8, k=8, dtype="fp8", dispatch="cublas")
    with pytest.raises(pm.InputError, match="CTA pair"):
        pm.predict_op(pm.ops.Gemm(m=512, n=512, k=512, dtype="fp8", tile="256x128"), "B200")


def test_the_vllm_preset_runs_its_table_in_serving_graphs_only():
    g = build_graph(pm.load_model("llama3-8b"), "decode", batch=8, context=512, dtype="fp8",
                    gemm_dispatch="vllm-0.10.2")
    linears = [n.op for n in g.nodes if n.op.name == "linear"]
    assert linears and all(o.dispatch == "vllm-0.10.2" for o in linears)
    with pytest.raises(pm.InputError, match="gemm_dispatch"):
        build_graph(pm.load_model("llama3-8b"), "train", batch=1, seq=512, gemm_dispatch="vllm-0.10.2")
    from perfmodel.plan.simulator.engines import engine_preset
    assert engine_preset("vllm", "H200-SXM").gemm_dispatch == "vllm-0.10.2"
    assert engine_preset("trtllm", "H200-SXM").gemm_dispatch == "best"
