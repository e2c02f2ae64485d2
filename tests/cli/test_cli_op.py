"""`perfmodel op`: one op's prediction as a table or JSON, each kernel of a multi-kernel op."""
from __future__ import annotations

import json

import pytest

from perfmodel.cli.main import main


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_op_prediction_table_and_json(capsys):
    code, out, _ = run(capsys, "op", "gemm", "m=8192", "n=8192", "k=8192", "dtype=bf16",
                       "--hw", "h100")
    assert code == 0 and "bound: tensor:bf16" in out
    code, out, _ = run(capsys, "op", "rng", "elements=1e9", "--hw", "b200", "--format", "json")
    got = json.loads(out)  # 1e9 is an integral number: accepted as an integer count
    assert code == 0 and got["op"]["elements"] == 10**9 and got["time_s"] > 0
    assert got["bound"] in got["resource_time_s"]


def test_op_lists_each_kernel_of_a_multi_kernel_op(capsys):
    """Attention fwd+bwd runs 4 kernels: forward, backward preprocess, main, postprocess; the
    table lists each with its time, and the times add up to the op's."""
    code, out, _ = run(capsys, "op", "attention", "batch=2", "heads=16", "seq_q=2048",
                       "head_dim=128", "dtype=bf16", "direction=fwd+bwd", "--hw", "h100")
    assert code == 0
    table = out[out.index("kernel  part"):].splitlines()[2:6]
    assert [row.split()[0] for row in table] == ["1", "2", "3", "4"]
    assert "bwd preprocess" in table[1] and "bwd postprocess" in table[3]
    total_us = float(out.split("time")[1].split()[0])
    parts_us = [float(row.split()[-2]) for row in table]
    assert sum(parts_us) == pytest.approx(total_us, rel=0.01)


def test_sm_clock_locks_the_gpu_of_the_prediction(capsys):
    """An exp-bound attention locked below B200's sustained clock (tensor_sustained_fraction.b200
    x the tensor clock, ~1.24 GHz) runs at the lock: it slows by the clock ratio, 1200 MHz
    against 800 MHz; the lock (`--sm-clock 1500MHz`, SOL-ExecBench's B200 lock) shows in the
    table and the JSON."""
    args = ("op", "attention", "batch=4", "heads=32", "seq_q=8192", "head_dim=64", "dtype=bf16",
            "--hw", "b200", "--format", "json")
    times = {}
    for clock in ("1200MHz", "800MHz"):
        code, out, _ = run(capsys, *args, "--sm-clock", clock)
        got = json.loads(out)
        assert code == 0 and got["bound"] == "xu"
        times[clock] = got["time_s"]
    assert got["details"]["sm_clock_hz"] == 8e8  # the clock the kernel ran at
    assert times["800MHz"] / times["1200MHz"] == pytest.approx(1.5, rel=0.02)
    code, out, _ = run(capsys, *args[:-2], "--sm-clock", "1500MHz")
    assert code == 0 and "SM clock locked at 1500 MHz" in out


@pytest.mark.parametrize("clock, message", [
    ("1500", "--sm-clock: expected a clock with its unit, such as 1500MHz or 1.5GHz, got '1500'"),
    ("2.1GHz", "--sm-clock: B200: SM clock lock 2100 MHz is above its max boost clock "
               "(1965 MHz)"),
    ("fast", "--sm-clock: expected a clock with its unit")])
def test_bad_sm_clock_is_one_line_and_exit_2(capsys, clock, message):
    code, out, err = run(capsys, "op", "gemm", "m=1024", "n=1024", "k=1024", "dtype=bf16",
                         "--hw", "b200", "--sm-clock", clock)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and message in lines[0] and "Traceback" not in err


@pytest.mark.parametrize("argv", [
    ("predict", "llama3-8b", "--phase", "decode", "--batch", "8", "--context", "1024",
     "--hw", "h100"),
    ("hw", "show", "h100"),
    ("moe", "--model", "qwen3-30b-a3b", "--hw", "h100", "--tokens-per-gpu", "32",
     "--replication", "1.0"),
    ("overlap", "--model", "llama3-8b", "--hw", "h100", "--seq", "1024"),
])
def test_every_command_that_chooses_a_gpu_takes_sm_clock(capsys, argv):
    code, _, err = run(capsys, *argv, "--sm-clock", "1410MHz")
    assert code == 0, err
    code, _, err = run(capsys, *argv, "--sm-clock", "5GHz")
    assert code == 2 and "--sm-clock: H100-SXM: SM clock lock 5000 MHz is above" in err


def test_plan_takes_sm_clock_and_reports_a_bad_one_against_the_flag(capsys):
    code, _, err = run(capsys, "plan", "serve", "llama3-8b", "--hw", "h100", "--gpus", "1",
                       "--sm-clock", "5GHz")
    assert code == 2 and err.count("\n") == 1
    assert "--sm-clock: H100-SXM: SM clock lock 5000 MHz is above" in err


def test_options_that_change_nothing_warn_on_stderr(capsys, tmp_path):
    """An option set away from its default that the op, as its other parameters stand, ignores
    gets one warning line on stderr naming it (`perfmodel op`, and a graph file's op by its
    file and name); the prediction is the one without it, and the exit code 0."""
    def op_time(*params):
        code, out, err = run(capsys, "op", *params, "--hw", "h100", "--format", "json")
        assert code == 0
        return json.loads(out)["time_s"], [x for x in err.splitlines()
                                           if x.startswith("perfmodel: warning:")]
    plain, none = op_time("allreduce", "bytes=1e6", "gpus=8")
    eager, warned = op_time("allreduce", "bytes=1e6", "gpus=8", "mode=eager")
    assert none == [] and eager == plain
    assert warned == ["perfmodel: warning: mode: applies to an engine's own dispatch (algorithm "
                      "vllm or sglang); algorithm nccl ignores it"]
    engine, quiet = op_time("allreduce", "bytes=1e6", "gpus=8", "algorithm=vllm", "mode=eager")
    assert quiet == [] and engine != op_time("allreduce", "bytes=1e6", "gpus=8",
                                             "algorithm=vllm")[0]
    graph = tmp_path / "g.yaml"
    graph.write_text("schema_version: 1\nops:\n  - name: attn\n    op: attention\n"
                     "    batch: 2\n    heads: 8\n    seq_q: 1024\n    head_dim: 64\n"
                     "    dtype: bf16\n    dropout_mask: bits\n")
    code = main(["predict", str(graph), "--hw", "h100"])
    err = capsys.readouterr().err
    assert code == 0 and f"perfmodel: warning: {graph}: op attn: dropout_mask: applies to " \
        f"dropout (dropout_p > 0); with none it changes nothing" in err
