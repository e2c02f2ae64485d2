"""Issue 14: no traceback, NaN or blow-up on any input. One regression test per reproducer of
the issue (numbered as there) and per input it found accepted silently: bad input exits 2 with
one line per problem naming what the user wrote (the flag, the file and key path), or exits 0
with a correct result. The fuzz suite that keeps it so is tests/test_fuzz_more.py."""
from __future__ import annotations

import json
import math
import re
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import perfmodel as pm
from perfmodel import yamlio
from perfmodel.cli.main import main
from perfmodel.hardware import builtin_spec_dir
from perfmodel.validation.measurements import PUBLIC_CSV
from perfmodel.workloads.models import builtin_model_dir

H100_SPEC = (builtin_spec_dir() / "H100-SXM.yaml").read_text()
LLAMA_8B = (builtin_model_dir() / "llama3-8b.yaml").read_text()
MOE = ["op", "moe", "tokens=256", "experts=64", "top_k=4", "hidden=2048",
       "expert_hidden=1024", "dtype=bf16", "gpus=8"]


def run(capsys, *argv):
    """(exit code, stdout, stderr lines) of one in-process run: an exception escaping main()
    (a traceback) fails the test."""
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err.splitlines()


def bad(capsys, *argv, says: str, lines: int = 1) -> list[str]:
    """Exit 2 with `lines` error lines, the first containing `says`."""
    code, _, err = run(capsys, *argv)
    errors = [e for e in err if not e.startswith("perfmodel: warning: ")]
    assert code == 2, err
    assert len(errors) == lines and all(e.startswith("perfmodel: error: ") for e in errors), err
    assert says in errors[0], errors
    return errors


def spec(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def sub(pattern: str, repl: str, text: str = H100_SPEC) -> str:
    out, n = re.subn(pattern, repl, text, count=1, flags=re.M)
    assert n == 1, pattern
    return out


# ---- 1. files that are not UTF-8 ------------------------------------------------------------
def test_1_random_bytes_as_a_spec_name_the_file(capsys, tmp_path):
    junk = tmp_path / "junk.yaml"
    junk.write_bytes(bytes(np.random.default_rng(14).integers(128, 256, 300, dtype=np.uint8)))
    bad(capsys, "hw", "show", junk, says=f"{junk}: not UTF-8 text (byte 0x")


def test_1_every_reader_takes_the_one_utf8_check(capsys, tmp_path):
    junk = tmp_path / "junk.csv"
    junk.write_bytes(b"id,hardware\n\xff\xfe\x80")
    bad(capsys, "validate", junk, says=f"{junk}: not UTF-8 text (byte 0xff at line 2, column 1)")
    bad(capsys, *MOE, f"trace={junk}", "--hw", "h100", says=f"{junk}: not UTF-8 text")
    with pytest.raises(pm.InputError, match="not UTF-8 text"):
        pm.ops.op("moe", **_moe_params(loads=str(junk))).expert_counts()


def _moe_params(**kw):
    return dict(tokens=256, experts=64, top_k=4, hidden=2048, expert_hidden=1024, dtype="bf16",
                gpus=8, **kw)


# ---- 2. huge integer literals --------------------------------------------------------------
def test_2_a_huge_integer_in_a_spec_is_out_of_range(capsys, tmp_path):
    p = spec(tmp_path, sub(r"(sm_count: \{value: )\d+", r"\g<1>1" + "0" * 400))
    bad(capsys, "hw", "show", p, says="sm_count.value: 1.000e+400 out of range [1, 1024]")


def test_2_a_huge_integer_op_parameter_names_the_bound(capsys):
    bad(capsys, "op", "sendrecv", "bytes=1" + "0" * 400, "--hw", "h100",
        says="bytes: expected a number <= 1e+15 (1 PB")


# ---- 3. declared upper bounds of sizes -----------------------------------------------------
@pytest.mark.parametrize("argv, says", [
    (["op", "norm", "rows=1e30", "cols=4096", "dtype=bf16"], "rows: expected an integer <= 2^40"),
    (["op", "gemm", "m=9223372036854775808", "n=8", "k=8", "dtype=bf16"],
     "m: expected an integer <= 2^40"),
    (["op", "gemm", "m=2097152", "n=1048576", "k=8", "dtype=bf16"],
     "m: batch x m x n = 2199023255552 elements: expected at most 2^40 in one tensor"),
    (["op", "allgather", "bytes=1e308", "gpus=8"], "bytes: expected a number <= 1e+15"),
    (["op", "moe", "tokens=256", "experts=64", "top_k=4", "hidden=2048", "expert_hidden=1024",
      "dtype=bf16", "gpus=8", f"shared_experts={2 ** 40}"],
     "shared_experts: shared_experts x hidden x expert_hidden"),
    (["op", "attention", "batch=64", "heads=64", f"seq_q={2 ** 31}", "head_dim=128",
      "dtype=bf16"], "seq_q: batch x heads x seq_q x head_dim"),
])
def test_3_sizes_beyond_any_gpu_are_refused(capsys, argv, says):
    bad(capsys, *argv, "--hw", "h100", says=says)


def test_3_a_model_with_a_huge_size_names_the_key(capsys, tmp_path):
    p = spec(tmp_path, sub(r"^ffn_hidden: \d+", "ffn_hidden: 9223372036854775808", LLAMA_8B),
             "m.yaml")
    bad(capsys, "predict", p, "--phase", "decode", "--hw", "h100",
        says=f"{p}: ffn_hidden: expected an integer <= 2^40")


def test_3_a_huge_batch_names_the_flag(capsys):
    bad(capsys, "overlap", "--model", "llama3-8b", "--hw", "h100", "--batch",
        "999999999999999999999", says="--batch: expected an integer <= 2^40")


def test_3_long_attention_is_closed_form_not_a_row_loop():
    """seq_q = 2^27 took 4 GB and 14 s, 2^31 tried to allocate 16 GiB: the tile counts are
    closed-form now (perfmodel/ops/attention/tiles.py `visited`)."""
    tracemalloc.start()
    for seq in (2 ** 27, 2 ** 31):
        est = pm.predict_op(pm.ops.op("attention", batch=1, heads=1, seq_q=seq, head_dim=128,
                                      dtype="bf16", causal=True), "H100-SXM")
        assert math.isfinite(est.time_s) and est.time_s > 0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 50e6  # a row loop would hold O(seq_q) tiles: GBs at these lengths


def test_3_many_shared_experts_are_counted_not_listed():
    """shared_experts = 2^40 built a list of 2^40 row counts (MemoryError); the count is a
    product now, and the bound refuses weights beyond any GPU."""
    est = pm.predict_op(pm.ops.op("moe", **_moe_params(shared_experts=1000)), "H100-SXM")
    one = pm.predict_op(pm.ops.op("moe", **_moe_params(shared_experts=1)), "H100-SXM")
    assert math.isfinite(est.time_s) and est.time_s > one.time_s


# ---- 4. pipe rates of 0 or absurdly small -------------------------------------------------
@pytest.mark.parametrize("pipe, value", [("fma_heavy", "0"), ("lsu", "0"), ("lsu", "1e-300")])
def test_4_pipe_rates_have_a_lower_bound(capsys, tmp_path, pipe, value):
    p = spec(tmp_path, sub(rf"(  {pipe}: \{{value: )[0-9.e]+", rf"\g<1>{value}"))
    bad(capsys, "op", "rng", "elements=1e9", "--hw", p,
        says=f"pipes_per_sm_per_clk.{pipe}.value: {value} out of range [0.5, 1024]")


# ---- 5. YAML errors on one line ------------------------------------------------------------
def test_5_a_nul_byte_is_one_line_with_its_position(capsys, tmp_path):
    p = tmp_path / "nul.yaml"
    p.write_text(H100_SPEC[:200] + "\x00" + H100_SPEC[200:])
    bad(capsys, "hw", "show", p, says=f"{p}: not YAML text: character #x0000 at line")


@pytest.mark.parametrize("text, says", [
    ("a: [1, 2\nb: 3\n", "malformed YAML at line 2, column 2"),
    ("a:\n\t- 1\n", "malformed YAML at line 2, column 1"),
])
def test_5_syntax_errors_are_one_line(text, says):
    with pytest.raises(pm.InputError) as e:
        yamlio.loads(text, "f.yaml")
    assert len(e.value.problems) == 1 and "\n" not in str(e.value) and says in str(e.value)


# ---- 6. alias bombs and duplicate keys -----------------------------------------------------
def bomb(levels: int = 25) -> str:
    lines = ["a0: &a0 [x, x, x]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}]" for i in range(1, levels)]
    return "\n".join(lines)


def test_6_an_alias_bomb_graph_is_refused_at_once(capsys, tmp_path):
    p = spec(tmp_path, bomb() + "\nops: [*a24]\n", "bomb.yaml")
    tracemalloc.start()
    bad(capsys, "predict", p, "--hw", "h100", says=f"{p}: aliases expand the document to")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 50e6  # refused from the node graph, before 3·2^24 nodes are built


def test_6_an_alias_bomb_in_a_spec_note_is_refused(capsys, tmp_path):
    text = bomb() + "\n" + sub(r'(sm_count: \{value: 132, source: NV-H100-DS, note: )"[^"]*"',
                               r"\g<1>*a24")
    bad(capsys, "hw", "show", spec(tmp_path, text), says="aliases expand the document to")


def test_6_small_aliases_and_merge_keys_still_work():
    assert yamlio.loads("a: &x {b: 1}\nc: *x\nd: {<<: *x, b: 2}\n") == {
        "a": {"b": 1}, "c": {"b": 1}, "d": {"b": 2}}


@pytest.mark.parametrize("text, says", [
    ("a: &a [*a]\n", "an alias refers to the node that contains it"),
    ("[" * 200 + "]" * 200, "nested deeper than 100 levels"),
])
def test_6_recursive_and_deep_documents_are_refused(text, says):
    with pytest.raises(pm.InputError, match=says):
        yamlio.loads(text, "f.yaml")


def test_6_duplicate_keys_are_refused_with_both_lines(capsys, tmp_path):
    p = spec(tmp_path, H100_SPEC + "\nsm_count: {value: 100, source: NCU}\n")
    err = bad(capsys, "hw", "show", p, says="duplicate key 'sm_count' at line")
    first = 1 + next(i for i, line in enumerate(H100_SPEC.splitlines())
                     if line.startswith("sm_count:"))
    assert f"(first at line {first})" in err[0]


# ---- 7, 8. moe: GPUs and replication ------------------------------------------------------
def test_7_zero_gpus_names_the_flag(capsys):
    bad(capsys, "moe", "--model", "qwen3-30b-a3b", "--hw", "h100", "--gpus", "0",
        says="--gpus: expected an integer in [1, 2^20], got 0")


def test_8_one_gpu_routes_without_replicas(capsys):
    code, out, _ = run(capsys, "moe", "--model", "qwen3-30b-a3b", "--hw", "h100", "--gpus", "1",
                       "--tokens-per-gpu", "8", "--format", "json")
    rows = json.loads(out)["rows"]
    assert code == 0 and {r["replication"] for r in rows} == {1.0}


def test_8_replication_beyond_the_gpus_names_the_flag_and_the_key(capsys):
    bad(capsys, "moe", "--model", "qwen3-30b-a3b", "--hw", "h100", "--gpus", "1",
        "--replication", "1.5", says="--replication: 1.5 needs more than one replica")
    with pytest.raises(pm.InputError, match=r"^replication: 192 redundant replicas"):
        pm.ops.op("moe", **{**_moe_params(), "gpus": 2, "replication": 4})


# ---- 9. workload checks name the flags -----------------------------------------------------
@pytest.mark.parametrize("argv, says, lines", [
    (["overlap", "--model", "llama3-8b", "--tp", "0"], "--tp: expected a positive integer", 1),
    (["overlap", "--model", "llama3-8b", "--tp", "3"], "--tp: 3 must divide the 32", 2),
    (["overlap", "--model", "llama3-8b", "--batch", "-2"], "--batch: expected a positive", 1),
    (["predict", "llama3-8b", "--phase", "train", "--microbatches", "-1"],
     "--microbatches: expected a positive integer, got -1", 1),
    (["predict", "llama3-8b", "--phase", "train", "--dp", "1000000000000000000000"],
     "--dp: expected an integer <= 2^20", 1),
])
def test_9_workload_errors_name_the_flag(capsys, argv, says, lines):
    bad(capsys, *argv, "--hw", "h100", says=says, lines=lines)


# ---- 10. output paths ----------------------------------------------------------------------
@pytest.mark.parametrize("flag, path, says", [
    ("-o", ".", "--output .: is a directory"),
    ("-o", "/nonexistent/x.json", "--output /nonexistent/x.json: no such directory"),
    ("--plot", "/nonexistent/x.png", "--plot /nonexistent/x.png: no such directory"),
    ("--plot", "chart.xyz", "--plot chart.xyz: cannot write a '.xyz' image"),
])
def test_10_predict_outputs_are_guarded(capsys, flag, path, says):
    bad(capsys, "predict", "llama3-8b", "--phase", "decode", "--hw", "h100", flag, path,
        says=says)


@pytest.mark.skipif(not Path("/proc/version").exists(), reason="needs /proc")
def test_10_an_unwritable_file_names_the_flag(capsys):
    bad(capsys, "build", "llama3-8b", "--phase", "decode", "-o", "/proc/version",
        says="--output /proc/version: cannot write")


def test_10_validate_and_plan_plots_are_guarded(capsys):
    bad(capsys, "validate", "--plot", "/nonexistent/v.png", says="--plot /nonexistent/v.png")


# ---- 11. broken NPZ traces -----------------------------------------------------------------
def _npz_bytes(tmp_path: Path) -> bytes:
    np.savez(tmp_path / "good.npz", experts=np.tile(np.arange(4), (256, 1)))
    return (tmp_path / "good.npz").read_bytes()


@pytest.mark.parametrize("kind", ["empty", "npy", "truncated"])
def test_11_broken_npz_traces_name_the_file(capsys, tmp_path, kind):
    p = tmp_path / f"{kind}.npz"
    if kind == "empty":
        p.write_bytes(b"")
    elif kind == "npy":
        np.save(tmp_path / "a.npy", np.arange(10))
        p.write_bytes((tmp_path / "a.npy").read_bytes())
    else:
        p.write_bytes(_npz_bytes(tmp_path)[:200])
    bad(capsys, *MOE, f"trace={p}", "--hw", "h100", says=f"{p}: not an NPZ archive")


def test_11_a_trace_with_fewer_rows_than_tokens_is_refused(capsys, tmp_path):
    p = tmp_path / "few.npz"
    np.savez(p, experts=np.tile(np.arange(4), (10, 1)))
    bad(capsys, *MOE, f"trace={p}", "--hw", "h100",
        says=f"trace: {p} has 10 rows, one per token, but tokens is 256")


# ---- 12. validate on malformed rows --------------------------------------------------------
def _csv(tmp_path: Path, **changes) -> Path:
    import csv
    with PUBLIC_CSV.open(newline="") as f:
        rows = list(csv.reader(f))
    header, row = rows[0], list(rows[1])
    for k, v in changes.items():
        row[header.index(k)] = v
    p = tmp_path / "rows.csv"
    with p.open("w", newline="") as f:
        csv.writer(f).writerows([header, row])
    return p


@pytest.mark.parametrize("changes, says", [
    (dict(shape_json="null"), "shape_json is not a JSON object"),
    (dict(shape_json="[1, 2]"), "shape_json is not a JSON object"),
    (dict(shape_json="3"), "shape_json is not a JSON object"),
    (dict(value="0"), "value: expected a positive finite number, got '0'"),
    (dict(value="1e-400"), "value: expected a positive finite number, got '1e-400'"),
    (dict(value="inf"), "value: expected a positive finite number, got 'inf'"),
    (dict(value="nan"), "value: expected a positive finite number, got 'nan'"),
    (dict(value="-5"), "value: expected a positive finite number, got '-5'"),
    (dict(notes="x" * 200_000), "row 2: not CSV (field larger than field limit"),
])
def test_12_malformed_rows_name_file_row_and_column(capsys, tmp_path, changes, says):
    p = _csv(tmp_path, **changes)
    err = bad(capsys, "validate", p, "--format", "json", says=f"{p}: row 2")
    assert says in err[0]


def test_12_a_short_row_says_how_many_fields(capsys, tmp_path):
    p = tmp_path / "short.csv"
    p.write_text(PUBLIC_CSV.read_text().splitlines()[0] + "\nT-1,src,H100 SXM\n")
    bad(capsys, "validate", p, says=f"{p}: row 2: 3 fields, expected 11")


def test_12_validate_json_has_no_nan(capsys):
    code, out, _ = run(capsys, "validate", PUBLIC_CSV, "--format", "json")
    assert code == 0 and "NaN" not in out and "Infinity" not in out


def test_12_worst_must_not_be_negative(capsys):
    bad(capsys, "validate", "--worst", "-1", says="--worst: expected a number of rows >= 0")


# ---- 13. invariants ------------------------------------------------------------------------
def test_13_hidden_time_is_never_negative(capsys):
    code, out, _ = run(capsys, "predict", "llama3-70b", "--phase", "decode", "--hw", "b200",
                       "--format", "json")
    ops = json.loads(out)["ops"]
    assert code == 0 and min(o["hidden_s"] for o in ops) >= 0.0


def test_13_the_fp32_gemm_roofline_counts_useful_work():
    """At m = 3 the roofline counted the padded tile's FMAs (51x the useful FLOP)."""
    hw = pm.hardware("A100-SXM")
    peak = hw.pipe_peak_per_s("fma")
    for m in (1, 3, 64, 200, 4096):
        g = pm.ops.Gemm(m=m, n=4096, k=4096, dtype="fp32")
        roof = pm.predict_op(g, hw, "roofline")
        useful_fma = g.flop / 2 + m * 4096  # one FFMA per multiply-add, the epilogue per output
        assert roof.resource_time_s["fma"] == pytest.approx(useful_fma / peak)
        assert pm.predict_op(g, hw).time_s >= roof.time_s


def test_13_the_pipes_level_is_monotone_in_k_at_skinny_shapes():
    """A100 fp32 20 x 1598: k 109 -> 218 got 10 % faster. Split-K factors were capped by
    k // (2 k-blocks) per shape, so a factor K made available vanished for a larger K; every
    factor that keeps two k-blocks a part is a candidate now."""
    hw = pm.hardware("A100-SXM")
    times = [pm.predict_op(pm.ops.Gemm(m=20, n=1598, k=k, dtype="fp32"), hw).time_s
             for k in range(1, 700, 3)]
    assert all(b >= a for a, b in zip(times, times[1:]))


# ---- accepted silently before --------------------------------------------------------------
def test_smem_per_cta_above_the_sm_is_refused(capsys, tmp_path):
    p = spec(tmp_path, sub(r"(smem_per_cta_bytes: \{value: )\d+", r"\g<1>300000"))
    bad(capsys, "hw", "show", p,
        says="sm_resources.smem_per_cta_bytes.value: 300000 exceeds sm_resources.smem_per_sm")


@pytest.mark.parametrize("pattern, repl, says", [
    (r"^tie_embeddings: false", 'tie_embeddings: "false"',
     "tie_embeddings: expected true or false, got 'false'"),
    (r"^layers: 32", "layers: 32\ndense_layers: 40", "dense_layers: 40 exceeds layers (32)"),
    (r"value: 8\.03e9", "value: -8.03e9", "params_total.value: expected a parameter count"),
])
def test_model_files_refuse_what_they_read_wrongly(capsys, tmp_path, pattern, repl, says):
    p = spec(tmp_path, sub(pattern, repl, LLAMA_8B), "m.yaml")
    bad(capsys, "predict", p, "--phase", "decode", "--hw", "h100", says=f"{p}: {says}")


def test_build_refuses_an_unknown_gpu(capsys):
    bad(capsys, "build", "llama3-8b", "--phase", "decode", "--hw", "v100",
        says="--hw: unknown hardware 'v100'")


def test_options_that_do_not_apply_are_warned_in_stderr_and_json(capsys):
    code, out, err = run(capsys, "predict", "llama3-8b", "--phase", "decode", "--hw", "h100",
                         "--dp", "4", "--virtual-stages", "3", "--format", "json")
    warnings = json.loads(out)["warnings"]
    assert code == 0 and len(warnings) == 2
    assert warnings[0].startswith("--dp: ") and warnings[1].startswith("--virtual-stages: ")
    assert err == [f"perfmodel: warning: {w}" for w in warnings]
    code, _, err = run(capsys, "predict", "llama3-8b", "--phase", "prefill", "--hw", "h100",
                       "--context", "100")
    assert code == 0 and err[0].startswith("perfmodel: warning: --context: ")


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"perfmodel {pm.__version__}"


# ---- found by the fuzz suite (tests/test_fuzz_more.py) ------------------------------------
def test_a_sustained_clock_below_half_of_boost_is_refused(capsys, tmp_path):
    """A100 with tensor_clock_hz 100 MHz: the pipes level interpolated the SM clock up to boost
    under partial tensor work, so an attention ran faster than its own roofline."""
    p = spec(tmp_path, sub(r"(  tensor_clock_hz: \{value: )[0-9.e+]+", r"\g<1>1.0e+8",
                           (builtin_spec_dir() / "A100-SXM.yaml").read_text()))
    bad(capsys, "hw", "show", p, says="clocks.tensor_clock_hz.value: the sustained clock")


def test_names_too_long_for_a_path_are_unknown_names(capsys):
    name = "1" * 400  # Path.is_file() raised OSError (ENAMETOOLONG)
    bad(capsys, "op", "gemm", "m=8", "n=8", "k=8", "dtype=bf16", "--hw", name,
        says="unknown hardware '111")
    bad(capsys, "moe", "--model", name, "--hw", "h100", says="unknown model '111")
    bad(capsys, "predict", "llama3-8b", "--phase", "decode", "--hw", "h100", "-o", name,
        says=f"--output {name}: ")


def test_control_characters_of_the_input_stay_on_one_line(capsys, tmp_path):
    p = _csv(tmp_path, id="T\x1e1", hardware="Z900\u2028SXM")  # splitlines() breaks on both
    err = bad(capsys, "validate", p, says=r"row 2 (T\x1e1)")
    assert "hardware 'Z900 SXM'" in err[0]  # a line separator inside a message: a space


def test_plan_sizes_have_upper_bounds(capsys):
    bad(capsys, "plan", "serve", "llama3-8b", "--hw", "h100", "--gpus", "9" * 21, "--offline",
        says="--gpus: expected an integer <= 2^20")


def test_ragged_grouped_gemm_does_not_get_faster_with_more_groups():
    """Expected ragged tiles were divided over the rounded-up CTAs: each CTA did a fraction of
    a tile's work, and 2 groups of 16384 rows came out faster than 1."""
    one, two = (pm.predict_op(pm.ops.op("grouped_gemm", groups=g, m=16384, n=4096, k=2048,
                                        dtype="bf16"), "H100-SXM").time_s for g in (1, 2))
    assert two >= one


def test_a_gz_input_is_read_as_its_text_and_bad_gzip_is_one_line(tmp_path):
    """Shipped data may be gzip-compressed (perfmodel/sol/data/solexec_workloads.csv.gz): the
    one reader decompresses a .gz file, and refuses one that is not gzip, naming it."""
    import gzip
    good = tmp_path / "t.csv.gz"
    good.write_bytes(gzip.compress("a,b\n1,2\n".encode()))
    assert yamlio.read_text(good, "table") == "a,b\n1,2\n"
    broken = tmp_path / "u.csv.gz"
    broken.write_bytes(b"a,b\n1,2\n")
    with pytest.raises(pm.InputError) as e:
        yamlio.read_text(broken, "table")
    assert str(broken) in str(e.value) and "\n" not in str(e.value)
