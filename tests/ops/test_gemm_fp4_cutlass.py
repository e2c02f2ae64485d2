"""The CUTLASS sm100 NVFP4 GEMM's kernel set (ops/gemm.py FP4_CUTLASS_TILES): 128-row tiles
only, no split-K; other types and GPUs keep their own tiles and split-K."""
import perfmodel as pm
from perfmodel import ops
from perfmodel.ops.gemm import FP4_CUTLASS_TILES


def _cands(dtype, gpu, m=16, n=1024, k=16384):
    g = ops.Gemm(m=m, n=n, k=k, dtype=dtype)
    table, index, split = g.candidates(pm.hardware(gpu))
    return g, table, index, split


def test_nvfp4_on_tcgen05_has_no_split_k_and_no_64_row_tile():
    for gpu in ("B200", "B300", "GB200"):
        g, table, index, split = _cands("nvfp4", gpu)
        assert set(split.tolist()) == {1}
        assert set(table["m"][index].tolist()) == {128}
        assert table["tiles"] == FP4_CUTLASS_TILES
        _, out = g.scalar_candidates(pm.hardware(gpu))
        assert {c[1] for c in out} == {1}  # the scalar mirror agrees


def test_short_nvfp4_gemm_streams_all_of_k_per_cta():
    # without split-K, a GEMM with fewer tiles than SMs gets slower in proportion to K once
    # K dominates: doubling K at 8 tiles more than 1.5x the time
    hw = pm.hardware("B200")
    t = [pm.predict_op(ops.Gemm(m=16, n=1024, k=k, dtype="nvfp4"), hw) for k in (16384, 32768)]
    assert all(e.details["split_k"] == 1 for e in t)
    assert t[1].time_s > 1.5 * t[0].time_s


def test_other_types_keep_split_k():
    for dtype, gpu in (("bf16", "B200"), ("fp8", "B200"), ("bf16", "H100-SXM")):
        _, table, index, split = _cands(dtype, gpu)
        assert split.max() > 1
        assert table["tiles"] != FP4_CUTLASS_TILES


def test_decode_nvfp4_gemm_is_bound_by_the_block_scaled_kblock_chain():
    """The single tensor-memory scale buffer serializes k-blocks (ops/gemm.py
    BLOCKSCALED_KBLOCK_CYCLES): at decode sizes the time grows by the same step per k-block at
    any N that fits one wave, the bound is the chain, and with no chain the kernel is faster."""
    from perfmodel.ops import gemm
    hw = pm.hardware("B200")
    assert gemm.BLOCKSCALED_KBLOCK_CYCLES > 0
    steps = []
    for n in (1024, 4096):
        t = [pm.predict_op(ops.Linear(m=32, n=n, k=k, dtype="nvfp4"), hw) for k in
             (4096, 8192, 12288)]
        assert all(e.bound == "mma_chain" for e in t)
        steps.append([b.time_s - a.time_s for a, b in zip(t, t[1:])])
    # 16 more k-blocks cost the same whichever N (one CTA chain per SM either way), 2 %
    flat = [s for pair in steps for s in pair]
    assert max(flat) / min(flat) < 1.02
    # and that step is 16 k-blocks of the chain at the kernel's clock (its SM clock)
    clock = pm.predict_op(ops.Gemm(m=32, n=1024, k=8192, dtype="nvfp4"), hw) \
        .details["sm_clock_hz"]
    assert abs(flat[0] - 4096 / 256 * gemm.BLOCKSCALED_KBLOCK_CYCLES / clock) < 0.02 * flat[0]
    op = ops.Linear(m=32, n=1024, k=12288, dtype="nvfp4")
    with_chain = pm.predict_op(op, hw).time_s
    old = gemm.set_blockscaled_kblock_cycles(0.0)
    try:
        assert pm.predict_op(op, hw).time_s < 0.7 * with_chain  # the memo follows the constant
    finally:
        gemm.set_blockscaled_kblock_cycles(old)
    assert pm.predict_op(op, hw).time_s == with_chain


def test_the_chain_is_only_the_block_scaled_fp4_kernels():
    """FP8 and BF16 on Blackwell and every Hopper GEMM have no chain; the NVFP4 MoE's grouped
    GEMMs (the same collective, arrayed) do; a compute-bound NVFP4 GEMM stays tensor-sized."""
    from perfmodel.demand import CHAIN_RESOURCE
    b200, h100 = pm.hardware("B200"), pm.hardware("H100-SXM")
    for dtype, hw in (("fp8", b200), ("bf16", b200), ("fp8", h100), ("bf16", h100)):
        e = pm.predict_op(ops.Gemm(m=32, n=1024, k=12288, dtype=dtype), hw)
        assert CHAIN_RESOURCE not in e.resource_time_s
    moe = ops.Moe(tokens=256, experts=256, top_k=8, hidden=7168, expert_hidden=2048,
                  dtype="nvfp4", gpus=8, routing="token_balanced")
    assert pm.predict_op(moe, b200).resource_time_s.get(CHAIN_RESOURCE, 0) > 0
    big = pm.predict_op(ops.Gemm(m=8192, n=8192, k=8192, dtype="nvfp4"), b200)
    times = big.resource_time_s
    assert times[CHAIN_RESOURCE] < 1.25 * times["tensor:nvfp4"]
