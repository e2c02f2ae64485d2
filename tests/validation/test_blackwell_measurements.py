"""The published Blackwell kernel measurements (validate/data/blackwell_measurements.csv): every row
maps to an op or is skipped with its reason; conversions follow each row's own convention (checked
against hand arithmetic from the notes); bad rows fail with one InputError line."""
from __future__ import annotations

import csv
import math
from collections import Counter

import pytest

import perfmodel as pm
from perfmodel.validation.compare import compare
from perfmodel.validation.measurements import (BLACKWELL_MEASUREMENTS_CSV, Case, Skipped,
                                               default_sources, load_cases)


@pytest.fixture(scope="module")
def loaded():
    cases, skipped = load_cases(BLACKWELL_MEASUREMENTS_CSV)
    return {c.id: c for c in cases}, {s.id: s for s in skipped}


def rows():
    with BLACKWELL_MEASUREMENTS_CSV.open() as f:
        return list(csv.DictReader(f))


def test_file_is_in_the_default_sources():
    assert BLACKWELL_MEASUREMENTS_CSV in default_sources()
    assert len(rows()) == 224


def test_every_row_maps_or_is_skipped_with_a_reason(loaded):
    cases, skipped = loaded
    ids = [r["id"] for r in rows()]
    assert len(set(ids)) == len(ids)
    assert set(cases) | set(skipped) == set(ids) and not set(cases) & set(skipped)
    assert all(s.reason.strip() for s in skipped.values())
    # the families no op expresses, and only those
    assert {s.op_class for s in skipped.values()} == {
        "moe_dispatch", "moe_dispatch_lowlatency", "moe_combine", "moe_combine_lowlatency",
        "grouped_gemm_mxfp8_wgrad", "grouped_gemm_fwd_bwd", "grouped_gemm_mxfp8_fwd_bwd",
        "mx_scale_rearrange", "attention_fwd", "attention_bwd"}
    attention_skips = {i for i, s in skipped.items() if s.op_class.startswith("attention")}
    assert attention_skips == {"CUDNN-TRN-013", "CUDNN-TRN-014"}  # the two MXFP8 rows
    assert all("MXFP8" in skipped[i].reason for i in attention_skips)
    assert (len(cases), len(skipped)) == (171, 53)


def test_every_case_predicts(loaded):
    cases, _ = loaded
    for comp in compare(cases.values()):
        assert math.isfinite(comp.predicted_time_s) and comp.predicted_time_s > 0
        assert comp.case.measured_time_s > 0


def test_op_and_hardware_of_each_family(loaded):
    cases, _ = loaded
    c = cases["CUDNN-TRN-038"]
    assert isinstance(c.op, pm.ops.Attention) and c.hardware.name == "GB200"
    assert (c.op.kernel, c.op.head_dim, c.op.head_dim_v, c.op.direction) == ("cudnn", 192, 128,
                                                                              "bwd")
    assert cases["CUDNN-TRN-003"].op.dtype == "fp8"
    assert cases["TRITONBENCH171-001"].op.kernel == "fa2"
    dec = cases["CUDNN-DEC-008"].op
    assert (dec.seq_q, dec.seq_kv, dec.kv_heads, dec.kernel) == (1, 131072, 8, "cudnn")
    pre = cases["CUDNN-PRE-005"].op  # chunked prefill: bottom-right causal
    assert (pre.seq_q, pre.seq_kv, pre.causal) == (512, 8192, True)
    assert cases["LIGER-016"].op == pm.ops.Norm(rows=8192, cols=4096, dtype="bf16",
                                                kind="layernorm", direction="bwd",
                                                implementation="eager")
    assert cases["LIGER-040"].op == pm.ops.Softmax(rows=8192, cols=4096, dtype="bf16",
                                                   direction="bwd", implementation="triton")
    assert cases["LIGER-024"].op == pm.ops.CrossEntropy(rows=8192, vocab=128256, dtype="fp32",
                                                        direction="fwd+bwd",
                                                        implementation="eager")
    assert cases["TAO-NVFP4-027"].op.rows == 128 * 2048  # grouped: E × M rows
    assert cases["TAO-NVFP4-021"].op.scaling == "2d"
    assert cases["AZ-NCCL-001"].op == pm.ops.Allreduce(bytes=1048576.0, gpus=4,
                                                       algorithm="ring")


def test_cudnn_sdpa_time_is_the_published_one_and_matches_its_flop_count(loaded):
    cases, _ = loaded
    # CUDNN-TRN-001: Llama-3.1 fwd, B=2, H=64, S=32768 top-left causal, d=dv=128, 1622 TFLOPS,
    # "time 21.692 ms (published)"; FLOPs 2*B*H*n*(d_qk+d_v), n = S(S+1)/2
    n = 32768 * 32769 / 2
    flop = 2 * 2 * 64 * n * (128 + 128)
    assert cases["CUDNN-TRN-001"].measured_time_s == pytest.approx(21.692e-3, rel=1e-12)
    assert flop / 1622e12 == pytest.approx(21.692e-3, rel=0.005)
    # CUDNN-TRN-038: DeepSeek-V3 bwd, H=128, S=16384, d_qk=192, d_v=128, 1134 TFLOPS, 50.424 ms;
    # FLOPs 2*B*H*n*(3*d_qk+2*d_v)
    n = 16384 * 16385 / 2
    flop = 2 * 2 * 128 * n * (3 * 192 + 2 * 128)
    assert cases["CUDNN-TRN-038"].measured_time_s == pytest.approx(50.424e-3, rel=1e-12)
    assert flop / 1134e12 == pytest.approx(50.424e-3, rel=0.005)
    # ... which is not FlashAttention's 2.5x-forward convention
    fa_flop = 2.5 * 4 * 2 * 128 * 16384 ** 2 * 192 * 0.5
    assert fa_flop / 1134e12 != pytest.approx(50.424e-3, rel=0.02)


def test_prefill_counts_half_for_square_and_dense_for_chunked():
    by_id = {r["id"]: r for r in rows()}
    # CUDNN-PRE-001: 4*B*H*Sq*Sk*D/2 = 4*1*64*2048*2048*128/2 at 914.991 TFLOPS vs 0.075104 ms
    assert 4 * 64 * 2048 ** 2 * 128 / 2 / 914.991e12 == pytest.approx(0.075104e-3, rel=0.005)
    # CUDNN-PRE-005: dense 4*1*64*512*8192*128 at 1217.384 TFLOPS vs 0.112897 ms
    assert 4 * 64 * 512 * 8192 * 128 / 1217.384e12 == pytest.approx(0.112897e-3, rel=0.005)
    assert "0.112897 ms (published)" in by_id["CUDNN-PRE-005"]["notes"]


def test_tritonbench_time_from_its_flop_count(loaded):
    cases, _ = loaded
    # TRITONBENCH171-008: 4*B*H*S^2*D = 4*8*16*16384^2*128 at 330.587 TFLOPS (no time published)
    t = 4 * 8 * 16 * 16384 ** 2 * 128 / 330.587e12
    assert cases["TRITONBENCH171-008"].measured_time_s == pytest.approx(t, rel=1e-12)


def test_cudnn_norm_time_from_the_benchmarks_byte_count(loaded):
    cases, _ = loaded
    # CUDNN-NORM-002: RMSNorm bwd [16384, 4096] BF16 at 6187.3 GB/s; notes: bytes =
    # (2*N*C + C)*2 + N*4 read + (N*C + C)*2 written; published (coarse) 0.065 ms
    n, c = 16384, 4096
    nbytes = (2 * n * c + c) * 2 + n * 4 + (n * c + c) * 2
    t = nbytes / 6187.3e9
    assert cases["CUDNN-NORM-002"].measured_time_s == pytest.approx(t, rel=1e-12)
    assert abs(t - 0.065e-3) <= 0.0005e-3  # within the 3-decimal rounding of the published ms
    # CUDNN-NORM-009: LayerNorm fwd [1024, 12288] at 3758.4 GB/s, 0.013 ms
    n, c = 1024, 12288
    t = ((n * c + 2 * c) * 2 + n * c * 2 + 2 * n * 4) / 3758.4e9
    assert cases["CUDNN-NORM-009"].measured_time_s == pytest.approx(t, rel=1e-12)
    assert abs(t - 0.013e-3) <= 0.0005e-3


def test_all_reduce_time_from_bus_bandwidth(loaded):
    cases, _ = loaded
    # AZ-NCCL-014: 8 GiB on 4 GPUs, busbw 679.61 GB/s = algbw*2(n-1)/n, algbw = bytes/time
    t = 8589934592 * 2 * 3 / 4 / 679.61e9
    assert cases["AZ-NCCL-014"].measured_time_s == pytest.approx(t, rel=1e-12)
    assert t == pytest.approx(18.96e-3, rel=0.001)


def test_gemm_prefers_the_published_time(loaded):
    cases, _ = loaded
    # TILELANG1787-001: 885.9 TFLOPS, "published time 0.155 ms"; 2*4096^3 / 885.9e12 = 0.15514 ms
    assert cases["TILELANG1787-001"].measured_time_s == pytest.approx(0.155e-3, rel=1e-12)
    assert 2 * 4096 ** 3 / 885.9e12 == pytest.approx(0.155e-3, rel=0.005)
    # FBTRITON3648-003 publishes no time: 2*M*N*K / TFLOPS
    assert cases["FBTRITON3648-003"].measured_time_s == pytest.approx(
        2 * 1024 * 20480 * 6144 / 1021e12, rel=1e-12)


def test_grouped_gemms_split_m_over_ragged_groups(loaded):
    cases, skipped = loaded
    # TILEOPS1567-001: H200, E=256, M_total=262144 routed rows, N=4096, K=6144 at 603 TFLOPS:
    # 2*M*N*K / TFLOPS (no time published); group sizes not given -> the op's ragged groups
    c = cases["TILEOPS1567-001"]
    assert c.hardware.name == "H200-SXM"  # "H200 SXM 141GB"
    assert c.op == pm.ops.op("grouped_gemm", groups=256, m=262144, n=4096, k=6144, dtype="bf16")
    assert c.measured_time_s == pytest.approx(2 * 262144 * 4096 * 6144 / 603e12, rel=1e-12)
    # torchao 2D x 3D MXFP8 forward and dgrad; the 2D x 2D wgrad splits K: skipped
    assert cases["TAO-MXFP8-005"].op == pm.ops.op("grouped_gemm", groups=8, m=131072, n=2048,
                                                  k=7168, dtype="mxfp8", out_dtype="bf16")
    assert cases["TAO-MXFP8-010"].op.params["n"] == 7168
    assert "split K" in skipped["TAO-MXFP8-015"].reason
    assert all("composite" in skipped[f"TAO-GMM-{i:03d}"].reason for i in range(1, 17))


def test_time_rows_keep_their_value(loaded):
    cases, _ = loaded
    assert cases["CUDNN-DEC-001"].measured_time_s == pytest.approx(0.094464e-3, rel=1e-12)
    assert cases["TAO-NVFP4-027"].measured_time_s == pytest.approx(2621.47e-6, rel=1e-12)
    assert cases["CUTLASS2917-001"].measured_time_s == pytest.approx(329.54e-6, rel=1e-12)


# ---- the loader on rows it must refuse or resolve ---------------------------------------------

HEADER = ["id", "source", "hardware", "library", "op", "dtype", "shape_json", "metric", "value",
          "unit", "notes"]
GOOD = {"id": "T-001", "source": "https://github.com/tile-ai/tilelang/issues/1787 (test)",
        "hardware": "B200", "library": "Triton matmul", "op": "gemm", "dtype": "bf16",
        "shape_json": '{"M":4096,"N":4096,"K":4096}', "metric": "throughput",
        "value": "885.9", "unit": "TFLOPS", "notes": "published time 0.155 ms"}


def write(tmp_path, **changes):
    p = tmp_path / "rows.csv"
    with p.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=HEADER)
        w.writeheader()
        w.writerow({**GOOD, **changes})
    return p


def test_a_good_row_loads(tmp_path):
    cases, skipped = load_cases(write(tmp_path))
    assert not skipped and isinstance(cases[0], Case) and cases[0].hardware.name == "B200"


def test_hardware_text_resolves_to_the_built_in_spec(tmp_path):
    cases, _ = load_cases(write(tmp_path, hardware="H200 SXM 141GB"))
    assert cases[0].hardware.name == "H200-SXM"


@pytest.mark.parametrize("changes, problem", [
    ({"shape_json": '{"M":4096,"N":4096}'}, "'K'"),
    ({"shape_json": '{"M":4096,'}, "shape_json is not valid JSON"),
    ({"shape_json": "[1, 2]"}, "shape_json is not a JSON object"),
    ({"value": "fast"}, "fast"),
    ({"unit": "PFLOPS"}, "unit 'PFLOPS'"),
    ({"hardware": "Z900 SXM 1TB"}, "hardware 'Z900 SXM 1TB'"),
    ({"shape_json": '{"M":-1,"N":4096,"K":4096}'}, "m: expected an integer >= 1"),
])
def test_a_malformed_row_fails_with_one_line_naming_file_row_and_problem(tmp_path, changes,
                                                                         problem):
    path = write(tmp_path, **changes)
    with pytest.raises(pm.InputError) as e:
        load_cases(path)
    msg = str(e.value)
    assert "\n" not in msg and len(e.value.problems) == 1
    assert msg.startswith(f"{path}: row 2 (T-001): ") and problem in msg, msg


def test_a_row_stating_another_flop_count_is_refused(tmp_path):
    row = next(r for r in rows() if r["id"] == "CUDNN-TRN-001")
    fields = {k: row[k] for k in HEADER}
    fields["notes"] = row["notes"].replace("2*B*H*n*(d_qk+d_v) fwd", "4*B*H*S^2*D fwd")
    path = write(tmp_path, **fields)
    with pytest.raises(pm.InputError, match="notes do not state the FLOP count"):
        load_cases(path)


def test_skipped_rows_carry_their_family(loaded):
    _, skipped = loaded
    reasons = Counter(s.reason for s in skipped.values())
    assert all(isinstance(s, Skipped) for s in skipped.values())
    assert sum(reasons.values()) == 53 and len(reasons) == 6
    assert all(r.startswith(("no op models", "composite")) for r in reasons)


def test_a_causal_flag_written_as_a_string_reads_as_written(tmp_path):
    """shape_json's `causal` is a truth value: "false" is not causal (a string used to read as
    True), and anything but a truth value is one line naming the key."""
    from perfmodel.validation.measurements import load_cases
    head = "id,hardware,library,op,dtype,shape_json,metric,value,unit\n"
    shape = ('"{""batch"": 2, ""nheads"": 16, ""seqlen_q"": 4096, ""seqlen_k"": 4096, '
             '""headdim"": 128, ""causal"": %s, ""pass"": ""fwd""}"')
    rows = {flag: f"r-{i},H100-SXM,FlashAttention-2,attention_fwd,bf16,{shape % flag},"
                  f"tflops,300,TFLOPS\n" for i, flag in enumerate(('""false""', "false",
                                                                      '""true""'))}
    path = tmp_path / "rows.csv"
    path.write_text(head + "".join(rows.values()))
    cases, skipped = load_cases(path)
    causal = {c.id: c.op.causal for c in cases}
    assert causal == {"r-0": False, "r-1": False, "r-2": True}, (cases, skipped)
    path.write_text(head + rows['""false""'].replace('""false""', '""maybe""'))
    with pytest.raises(pm.InputError, match="causal: expected true or false"):
        load_cases(path)
