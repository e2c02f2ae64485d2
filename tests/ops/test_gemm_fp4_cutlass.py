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
