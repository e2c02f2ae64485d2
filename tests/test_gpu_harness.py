"""The GPU measurement harness (validate/run_gpu.sh, validate/kernels/, validate/collect.py,
validate/torch_bench.py), checked without a GPU: the kernels compile, a synthetic run goes through
collect.py into rows that validate.measurements reads, and the PyTorch script imports without torch.
"""
from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from validate import collect
from perfmodel.validation.compare import compare
from perfmodel.validation.measurements import Case, Skipped, load_cases

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "validate" / "run_gpu.sh"
KERNELS = ROOT / "validate" / "kernels"
CUBLASLT_PROGRAMS = {"gemm_cublaslt", "rng_gemm"}

no_nvcc = shutil.which("nvcc") is None
skip_reason = ("nvcc not on PATH: the CUDA kernels cannot be compiled here" if no_nvcc else
               "PERFMODEL_SKIP_NVCC is set")


@pytest.fixture(scope="module")
def dry_run():
    """One `run_gpu.sh --dry-run` for the module: {program: (status, detail)}."""
    proc = subprocess.run(["bash", str(SCRIPT), "--dry-run"], cwd=ROOT, capture_output=True,
                          text=True, timeout=900)
    status = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"(BUILT|SKIPPED|FAILED) (\w+)(?::\s*(.*))?$", line)
        if m:
            status[m.group(2)] = (m.group(1), m.group(3) or "")
    return proc, status


@pytest.mark.slow  # nvcc builds every kernel
@pytest.mark.skipif(no_nvcc or bool(os.environ.get("PERFMODEL_SKIP_NVCC")), reason=skip_reason)
def test_dry_run_compiles_every_kernel(dry_run):
    proc, status = dry_run
    failed = {p: d for p, (s, d) in status.items() if s == "FAILED"}
    assert not failed, f"kernels failed to compile: {failed}\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0, proc.stderr[-3000:]
    sources = {p.stem for p in KERNELS.glob("*.cu")}
    assert sources, "no kernels found"
    assert sources <= set(status), f"run_gpu.sh does not build {sorted(sources - set(status))}"
    for prog in sorted(sources - CUBLASLT_PROGRAMS):
        assert status[prog][0] == "BUILT", f"{prog}: {status[prog]}"
        assert (ROOT / "validate" / "build" / prog).is_file()


@pytest.mark.slow
@pytest.mark.skipif(no_nvcc or bool(os.environ.get("PERFMODEL_SKIP_NVCC")), reason=skip_reason)
def test_dry_run_compiles_cublaslt_kernels(dry_run):
    _, status = dry_run
    progs = sorted({p.stem for p in KERNELS.glob("*.cu")} & CUBLASLT_PROGRAMS)
    skipped = [p for p in progs if status.get(p, ("?",))[0] == "SKIPPED"]
    if skipped:
        pytest.skip(f"cuBLASLt headers/library not found ({status[skipped[0]][1]}): "
                    f"{', '.join(skipped)} not compiled; install the nvidia-cublas wheel or set "
                    "CUBLASLT_ROOT")
    for prog in progs:
        assert status[prog][0] == "BUILT", f"{prog}: {status[prog]}"


def _row(rid, op, dtype, shape, value, library="perfmodel microbenchmark", metric="time",
         unit="ms", hw="NVIDIA H200"):
    return {"id": rid, "source": "perfmodel validate/kernels/x.cu", "hardware": hw,
            "library": library, "op": op, "dtype": dtype,
            "shape_json": json.dumps(shape, separators=(",", ":")), "metric": metric,
            "value": value, "unit": unit, "notes": "median of 15 reps after 2 warm-up; min=1; max=2"}


# One row of each kind the harness emits, in the programs' own shape formats.
SYNTHETIC = [
    _row("hbm-load_stream-001", "load_stream", "fp32",
         {"pattern": "A", "elements": 1 << 30, "element_bytes": 4, "inputs": 1, "outputs": 0,
          "passes": 1, "bytes": 4 << 30}, 1.05),
    _row("hbm-store_stream-002", "store_stream", "fp32",
         {"pattern": "A", "elements": 1 << 30, "element_bytes": 4, "inputs": 0, "outputs": 1,
          "passes": 1, "bytes": 4 << 30}, 1.0),
    _row("hbm-copy-003", "copy", "fp32",
         {"pattern": "A", "elements": 1 << 30, "element_bytes": 4, "inputs": 1, "outputs": 1,
          "passes": 1, "bytes": 8 << 30}, 2.1),
    _row("hbm-triad-004", "triad", "fp32",
         {"pattern": "A", "elements": 1 << 30, "element_bytes": 4, "inputs": 2, "outputs": 1,
          "passes": 1, "bytes": 12 << 30}, 3.1),
    _row("hbm-load_stream-005", "load_stream", "fp32",
         {"pattern": "A", "elements": 3932160, "element_bytes": 4, "inputs": 1, "outputs": 0,
          "passes": 200, "bytes": 3145728000, "level": "l2"}, 0.4),
    _row("pipes-pipe_throughput-001", "pipe_throughput", "u32",
         {"instr": ["IMAD.WIDE.U32", "FFMA"], "ratio": [1, 1], "chains_per_thread": 8,
          "threads_per_sm": 1536}, 96.0, metric="thread_ops_per_sm_per_clk", unit="ops/clk/SM"),
    _row("wgmma-wgmma_kblock-001", "wgmma_kblock", "fp8_e4m3",
         {"mode": "drain", "warpgroups": 2, "m": 128, "n": 128, "k_block": 128,
          "wgmma": "m64n128k32.f32.e4m3.e4m3", "iters": 4096}, 1.4),
    _row("philox-rng-001", "rng", "u8",
         {"elements": 1 << 30, "generator": "philox4x32-7", "bits_per_element": 8,
          "output": "bytes", "lop3_fold": True, "xor_source": "explicit_lop3",
          "precomputed_keys": True}, 0.3),
    _row("philox-rng-002", "rng", "u8",
         {"elements": 1 << 30, "generator": "philox4x32-10", "bits_per_element": 8,
          "output": "mask_bits", "lop3_fold": True, "xor_source": "plain_xor",
          "precomputed_keys": True}, 0.2),
    _row("gemm_cublaslt-gemm-001", "gemm", "bf16",
         {"M": 8192, "N": 8192, "K": 8192, "layout": "TN", "out": "bf16", "tag": "square"}, 1.45,
         library="cuBLASLt 130100"),
    _row("gemm_cublaslt-gemm-002", "gemm", "fp8_e4m3",
         {"M": 16, "N": 6144, "K": 4096, "layout": "TN", "out": "bf16",
          "tag": "llama3-8b.qkv.tp1"}, 0.012, library="cuBLASLt 130100"),
    _row("rng_gemm-rng_gemm_concurrent-001", "rng_gemm_concurrent", "bf16",
         {"M": 8192, "N": 8192, "K": 8192, "rng_elements": 1 << 28, "rng_ctas": 8,
          "generator": "philox4x32-7", "output": "bytes", "mode": "concurrent"}, 1.6),
    _row("rowwise-norm_fwd-001", "norm_fwd", "bf16",
         {"rows": 16384, "cols": 4096, "kind": "rmsnorm", "direction": "fwd"}, 0.07),
    _row("rowwise-norm_fwd-002", "norm_fwd", "bf16",
         {"rows": 16384, "cols": 8192, "kind": "layernorm", "direction": "fwd"}, 0.13),
    _row("rowwise-softmax_fwd-003", "softmax_fwd", "fp32", {"M": 16384, "N": 4096}, 0.13),
    _row("rowwise-elementwise-004", "elementwise", "bf16",
         {"elements": 1 << 28, "inputs": 2, "outputs": 1, "flop_per_element": 1, "fn": "add"},
         0.38),
    _row("torch_bench-attention_fwd-001", "attention_fwd", "bf16",
         {"batch": 4, "nheads": 16, "nheads_kv": 16, "seqlen_q": 4096, "seqlen_k": 4096,
          "headdim": 128, "causal": True, "pass": "fwd", "dropout_p": 0.1}, 0.9,
         library="FlashAttention-2 (PyTorch 2.11.0 SDPA flash backend)"),
    _row("torch_bench-attention_bwd-002", "attention_bwd", "bf16",
         {"batch": 1, "nheads": 32, "nheads_kv": 8, "seqlen_q": 4096, "seqlen_k": 4096,
          "headdim": 128, "causal": False, "pass": "bwd", "dropout_p": 0.0}, 2.5,
         library="cuDNN 91300 (PyTorch 2.11.0 SDPA cudnn backend)"),
]
SKIPPED_IDS = {"hbm-load_stream-005", "pipes-pipe_throughput-001", "wgmma-wgmma_kblock-001",
               "rng_gemm-rng_gemm_concurrent-001"}


def _synthetic_run(d: Path) -> Path:
    d.mkdir(parents=True)
    with (d / "results.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=collect.COLUMNS)
        w.writeheader()
        w.writerows(SYNTHETIC)
    (d / "provenance.json").write_text(json.dumps({
        "device_name": "NVIDIA H200", "driver_version": "580.159.04",
        "cuda_driver_api": "CUDA Version: 13.0", "nvcc": "Build cuda_13.0",
        "git_sha": "0123456789abcdef", "git_dirty": False, "date_utc": "2026-12-01T10:00:00Z",
        "command": "validate/run_gpu.sh", "programs": {}}))
    (d / "clocks.csv").write_text(
        "timestamp, clocks.current.sm [MHz], clocks.current.memory [MHz], power.draw [W], "
        "temperature.gpu, utilization.gpu [%]\n"
        "2026/12/01 10:00:00.000, 1980 MHz, 3201 MHz, 650.00 W, 60, 100 %\n"
        "2026/12/01 10:00:00.500, 1755 MHz, 3201 MHz, 700.00 W, 62, 100 %\n"
        "2026/12/01 10:00:01.000, 1830 MHz, 3201 MHz, 690.00 W, 63, 100 %\n")
    (d / "sass_counts.txt").write_text("== pipes\n")
    return d


def test_collect_then_load_cases(tmp_path):
    run = _synthetic_run(tmp_path / "run")
    target = collect.collect(run, tmp_path / "results")
    assert target == tmp_path / "results" / "nvidia-h200" / "2026-12-01"
    # only the measurement file is a .csv (every *.csv under results/ is read as measurements)
    assert [p.name for p in target.glob("*.csv")] == ["results.csv"]
    assert (target / "clocks.txt").is_file() and (target / "provenance.json").is_file()
    with (target / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(SYNTHETIC)
    assert all(r["id"].startswith("nvidia-h200-2026-12-01-") for r in rows)
    assert all("sm_clock_median=1830 MHz" in r["notes"] and "git=0123456789abcdef" in r["notes"]
               for r in rows)

    cases, skipped = load_cases(target / "results.csv")
    assert len(cases) + len(skipped) == len(SYNTHETIC)
    assert {s.id.split("2026-12-01-")[1] for s in skipped} == SKIPPED_IDS
    assert all(isinstance(s, Skipped) and s.reason for s in skipped)
    by_id = {c.id.split("2026-12-01-")[1]: c for c in cases}
    for r in SYNTHETIC:
        if r["id"] in by_id:  # metric 'time' in ms: the measured time is the value itself
            assert by_id[r["id"]].measured_time_s == pytest.approx(float(r["value"]) * 1e-3)
    assert isinstance(by_id["hbm-triad-004"], Case)
    assert by_id["hbm-triad-004"].op.flop_per_element == 2
    assert by_id["philox-rng-002"].op.output == "mask_bits"
    assert by_id["torch_bench-attention_fwd-001"].op.dropout_p == 0.1
    # the model predicts every case
    comps = compare(cases)
    assert len(comps) == len(cases) and all(c.predicted_time_s > 0 for c in comps)

    with pytest.raises(SystemExit):  # a second collect of the same run does not overwrite
        collect.collect(run, tmp_path / "results")


def test_torch_bench_imports_without_torch():
    code = ("import sys; sys.modules['torch'] = None\n"  # makes `import torch` fail
            "import validate.torch_bench as t\n"
            "assert t.torch is None\n"
            "sys.exit(t.main())\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "PyTorch is not installed" in proc.stderr
    assert proc.stdout == ""


def test_sass_counter_finds_hot_loop(tmp_path):
    """sass_counts.awk counts the opcodes inside the largest backward branch separately."""
    if shutil.which("awk") is None:
        pytest.skip("awk not on PATH")
    sass = (
        "\t\tFunction : _Z3fooPj\n"
        "        /*0000*/                   IMAD.MOV.U32 R1, RZ, RZ, c[0x0][0x28] ;\n"
        "        /*0010*/                   IMAD.WIDE.U32 R2, R3, R4, RZ ;\n"
        "        /*0020*/                   LOP3.LUT R5, R2, R3, R6, 0x96, !PT ;\n"
        "        /*0030*/                   IMAD.WIDE.U32 R2, R5, R4, RZ ;\n"
        "        /*0040*/              @P0 BRA 0x10 ;\n"
        "        /*0050*/                   STG.E [R8.64], R5 ;\n"
        "        /*0060*/                   EXIT ;\n")
    (tmp_path / "x.sass").write_text(sass)
    out = subprocess.run(["awk", "-f", str(KERNELS / "sass_counts.awk"), str(tmp_path / "x.sass")],
                         capture_output=True, text=True, check=True).stdout
    loop = next(line for line in out.splitlines() if " loop(" in line)
    assert "loop(4 instr)" in loop and "IMAD.WIDE.U32=2" in loop and "LOP3.LUT=1" in loop
    assert "STG" not in loop
    whole = next(line for line in out.splitlines() if " all(" in line)
    assert "STG.E=1" in whole and "IMAD.MOV.U32=1" in whole
