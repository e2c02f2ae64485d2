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
        # the scalar path's search (perfmodel.predict) agrees
        assert pm.predict_op(g, pm.hardware(gpu)).details["split_k"] == 1


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



def test_decode_nvfp4_gemm_pays_a_full_width_mma_per_kblock_at_any_n():
    """The block-scaled MMA's 256-wide N granule (ops/gemm.py FP4_MMA_N): at decode sizes the
    time grows by the same step per 16 k-blocks whichever N fits one wave, and that step is the
    tensor pipe's time for 16 k-blocks of a 128 x 256 tile (at the kernel's power-limited rate).
    B300's 1.5x FP4 rate makes its step shorter than B200's (measured about 2x shorter, modelled
    about 5 %: B300's power limit eats most of its rate in the model, a known gap)."""
    from perfmodel.ops.gemm import FP4_MMA_N
    steps = {}
    for gpu in ("B200", "B300"):
        hw = pm.hardware(gpu)
        per_n = []
        for n in (1024, 4096):
            t = [pm.predict_op(ops.Gemm(m=32, n=n, k=k, dtype="nvfp4"), hw) for k in
                 (4096, 8192, 12288)]
            assert all(e.bound == "tensor:nvfp4" for e in t)
            per_n += [b.time_s - a.time_s for a, b in zip(t, t[1:])]
        assert max(per_n) / min(per_n) < 1.02  # N does not matter while one wave holds it
        steps[gpu] = per_n[0]
        e = pm.predict_op(ops.Gemm(m=32, n=1024, k=8192, dtype="nvfp4"), hw)
        per_cta = e.resource_time_s["tensor:nvfp4"] / (8192 / 256)  # one CTA per SM: 32 k-blocks
        full = 2.0 * 128 * FP4_MMA_N * 256  # one 128 x 256 x 256 k-block of MMAs
        rate = full / per_cta  # FLOP/s the pipe delivers: at most the datasheet's per-SM rate
        assert rate <= hw.tensor_flop_per_sm_per_clk["nvfp4"] * hw.max_sm_clock_hz * 1.0001
    assert steps["B300"] < steps["B200"]


def test_the_granule_is_only_the_block_scaled_fp4_kernels():
    """FP8 and BF16 on Blackwell and every Hopper GEMM keep their tiles' own N; a 256-wide NVFP4
    tile is unchanged; the NVFP4 MoE's 128-wide grouped-GEMM tiles pay the granule too."""
    b200, h100 = pm.hardware("B200"), pm.hardware("H100-SXM")
    for dtype, hw in (("fp8", b200), ("bf16", b200), ("fp8", h100)):
        g = ops.Gemm(m=32, n=1024, k=12288, dtype=dtype)
        table, index, split = g.candidates(hw)
        w = g._work(hw, table, index, split)
        kb = table["kblock"]
        k_pad = -(-(-(-12288 // split)) // kb) * kb  # each split's K, padded to k-blocks
        expect = w["ctas"] * 2.0 * table["m"][index] * table["n"][index] * k_pad
        assert (w["work"][f"tensor:{dtype}"] == expect).all()
    g = ops.Gemm(m=4096, n=4096, k=4096, dtype="nvfp4")
    table, index, split = g.candidates(b200)
    w = g._work(b200, table, index, split)
    wide = table["n"][index] == 256
    assert (w["work"]["tensor:nvfp4"][wide] == (w["ctas"] * 2.0 * 128 * 256 * 4096)[wide]).all()
    moe = dict(tokens=4096, experts=256, top_k=8, hidden=7168, expert_hidden=2048, gpus=8,
               routing="token_balanced")
    fp4 = ops.Moe(dtype="nvfp4", **moe).demand(b200).options[0].sequence
    fp8 = ops.Moe(dtype="fp8", **moe).demand(b200).options[0].sequence
    gemm4 = next(d for d in fp4 if d.details.get("part") == "grouped GEMMs")
    gemm8 = next(d for d in fp8 if d.details.get("part") == "grouped GEMMs")
    assert gemm4.work["tensor:nvfp4"] == 2 * gemm8.work["tensor:fp8"]
