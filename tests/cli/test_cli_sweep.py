"""`perfmodel sweep`: a design space → one row per point (CSV, Parquet), in this process and on a
Dask LocalCluster with identical rows; bad spaces are one-line errors naming file and key path."""
from __future__ import annotations

import csv
import io
import textwrap

import pytest

import perfmodel as pm
from perfmodel import sweep
from perfmodel.cli.main import main

SPACE = """\
grids:
  - op: gemm
    hw: [h100, B200, a100]
    m: {geometric: [1, 4096, 16]}
    n: 4096
    k: [1024, 8192]
    dtype: [bf16, fp8]
  - op: attention
    hw: h100
    batch: 1
    heads: 32
    seq_q: {range: [1024, 4096, 1024]}
    head_dim: 128
    dtype: bf16
    causal: [true, false]
  - model: [llama3-8b]
    hw: H200
    phase: [prefill, decode]
    batch: [1, 8]
    isl: 1024
    osl: 128
    tp: [1, 3]
    gpus: 2
"""


def write_space(tmp_path, text=SPACE, name="space.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


def test_rows_one_per_point_with_the_predictions(tmp_path, capsys):
    space = write_space(tmp_path)
    out = tmp_path / "out.csv"
    code, _, err = run(capsys, "sweep", space, "-o", out)
    assert code == 0 and "wrote 64 rows" in err
    header, *rows = read_csv(out)
    assert len(rows) == 3 * 4 * 2 * 2 + 4 * 2 + 2 * 2 * 2
    assert [int(r[0]) for r in rows] == list(range(len(rows)))
    col = {c: i for i, c in enumerate(header)}
    assert header[:3] == ["point", "grid", "kind"] and header[-1] == "error"
    # an op row holds predict_op's numbers exactly (floats written by repr)
    r = next(r for r in rows if r[col["hw"]] == "B200" and r[col["m"]] == "256"
             and r[col["k"]] == "8192" and r[col["dtype"]] == "fp8")
    est = pm.predict_op(pm.ops.Gemm(m=256, n=4096, k=8192, dtype="fp8"), "B200")
    assert float(r[col["time_s"]]) == est.time_s and r[col["bound"]] == est.bound
    # combinations the model refuses are rows with an error: FP8 on A100, TP 3 on 2 GPUs
    fp8_a100 = [r for r in rows if r[col["hw"]] == "A100-SXM" and r[col["dtype"]] == "fp8"]
    assert fp8_a100 and all("not supported" in r[col["error"]] and not r[col["time_s"]]
                            for r in fp8_a100)
    model = [r for r in rows if r[col["kind"]] == "model"]
    assert {r[col["error"]] != "" for r in model} == {True, False}
    ok = [r for r in model if not r[col["error"]]]
    assert all(float(r[col["tokens_per_s"]]) > 0 and r[col["replicas"]] == "2" for r in ok)


def test_decode_isl_osl_is_the_middle_token_step(tmp_path):
    """isl/osl: a decode point runs at context isl + osl // 2, prefill at seq isl; gpus sets
    the replicas."""
    w, replicas = sweep.workload_of({"phase": "decode", "isl": 1024, "osl": 128, "tp": 2,
                                     "gpus": 8})
    assert (w.context, w.tp, replicas) == (1088, 2, 4)
    w, replicas = sweep.workload_of({"phase": "train", "isl": 4096, "tp": 2, "pp": 2,
                                     "gpus": 16})
    assert (w.seq, w.dp, replicas) == (4096, 4, 4)


def test_stdout_csv_and_count(tmp_path, capsys):
    space = write_space(tmp_path)
    code, out, _ = run(capsys, "sweep", space, "--count")
    assert code == 0 and out.strip() == "64"
    code, out, _ = run(capsys, "sweep", space, "--chunk", "7")
    assert code == 0 and len(list(csv.reader(io.StringIO(out)))) == 65


@pytest.mark.parametrize("text, where", [
    ("grids:\n  - op: gemm\n    hw: h100\n    m: 1\n    n: 1\n    k: 1\n    dtype: bf16\n"
     "    mm: 3\n", "grids[0].mm: unknown parameter of op 'gemm'"),
    ("grids:\n  - op: gemmx\n    hw: h100\n", "grids[0].op: unknown op 'gemmx'"),
    ("grids:\n  - op: gemm\n    hw: h100\n    m: [1, -4]\n    n: 1\n    k: 1\n"
     "    dtype: bf16\n", "grids[0].m[1]: expected an integer >= 1, got -4"),
    ("grids:\n  - op: gemm\n    hw: [h100, h999]\n    m: 1\n    n: 1\n    k: 1\n"
     "    dtype: bf16\n", "grids[0].hw[1]: unknown hardware 'h999'"),
    ("grids:\n  - model: llama3-8b\n    hw: h100\n    phase: decode\n    tp: two\n",
     "grids[0].tp: expected a positive integer, got 'two'"),
    ("grids:\n  - model: llama9\n    hw: h100\n    phase: decode\n",
     "grids[0].model: unknown model 'llama9'"),
    ("grids:\n  - model: llama3-8b\n    hw: h100\n    phase: decode\n    batch: "
     "{range: [4, 1, 1]}\n", "grids[0].batch.range: expected step > 0 and stop >= start"),
    ("grids:\n  - model: llama3-8b\n    hw: h100\n    phase: decode\n    gpu: 8\n",
     "grids[0].gpu: unknown key of a model grid"),
    ("grid: []\n", "grid: unknown key"),
    ("level: fast\ngrids:\n  - op: rng\n    hw: h100\n    elements: 10\n",
     "level: expected one of roofline, pipes"),
])
def test_bad_spaces_are_one_line_errors_naming_file_and_key(tmp_path, capsys, text, where):
    space = write_space(tmp_path, text, "bad.yaml")
    code, out, err = run(capsys, "sweep", space)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert any(line.startswith(f"perfmodel: error: {space}: {where}") for line in lines), err
    assert "Traceback" not in err


class InlineClient:
    """The few Client methods dask_chunks uses, run inline, completing tasks in reverse order
    of submission (as a cluster may), to check the rows still stream in point order."""

    def __init__(self):
        self.submitted = 0

    def nthreads(self):
        return {"w1": 1, "w2": 1}

    def scatter(self, data, broadcast=False):
        return data

    def submit(self, fn, *args, pure=True):
        self.submitted += 1

        class Done:
            def result(self_inner):
                return fn(*args)
        return Done()


def test_dask_chunks_keep_point_order(tmp_path):
    space = sweep.load_space(write_space(tmp_path))
    client = InlineClient()
    got = [r for rows in sweep.dask_chunks(space, client, chunk=3) for r in rows]
    assert got == [r for rows in sweep.chunks(space, 5) for r in rows]
    assert client.submitted == -(-space.size // 3)


@pytest.mark.slow
def test_local_dask_cluster_rows_equal_in_process(tmp_path, capsys):
    pytest.importorskip("dask.distributed")
    space = write_space(tmp_path)
    here, there = tmp_path / "here.csv", tmp_path / "there.csv"
    assert run(capsys, "sweep", space, "-o", here)[0] == 0
    code, _, err = run(capsys, "sweep", space, "-o", there, "--dask", "local", "--workers", "2",
                       "--chunk", "6")
    assert code == 0, err
    assert there.read_bytes() == here.read_bytes()


def test_parquet_holds_the_csv_rows(tmp_path, capsys):
    pq = pytest.importorskip("pyarrow.parquet")
    space = write_space(tmp_path)
    assert run(capsys, "sweep", space, "-o", tmp_path / "t.csv")[0] == 0
    assert run(capsys, "sweep", space, "-o", tmp_path / "t.parquet", "--chunk", "8")[0] == 0
    table = pq.read_table(tmp_path / "t.parquet")
    header, *rows = read_csv(tmp_path / "t.csv")
    assert table.column_names == header and table.num_rows == len(rows)
    as_csv = [[sweep.csv_cell(v) for v in row.values()] for row in table.to_pylist()]
    assert as_csv == rows
