"""`perfmodel plan serve|train`: the ranked table with the best named first, JSON and CSV
shapes, the Pareto plot, and bad input exiting 2 with one line naming the flag."""
from __future__ import annotations

import json

import pytest

from perfmodel.cli.main import main
from perfmodel.cli.plan import parse_duration
from perfmodel.errors import InputError

SERVE = ["plan", "serve", "llama3-8b", "--hw", "h100", "--gpus", "2", "--isl", "512", "--osl",
         "128"]


def test_serve_table(capsys):
    assert main(SERVE + ["--offline"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("llama3-8b on 2x H100-SXM, vllm") and "offline" in out[0]
    assert out[1].startswith("best: TP")
    best_layout = out[1].split(":")[1].split(" x ")[0].strip()
    table = out[out.index(next(x for x in out if x.startswith("layout"))) + 2:]
    assert table[0].startswith(best_layout)  # best first
    assert sum(x.startswith("TP") for x in table) == 3


def test_serve_json_shape(capsys):
    assert main(SERVE + ["--concurrency", "8", "--requests", "16", "--tpot-slo", "40ms",
                         "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d) == {"search", "rows", "best", "pareto"}
    assert d["search"]["workload"]["mode"] == "concurrency"
    assert d["search"]["tpot_slo_s"] == pytest.approx(0.04)
    assert len(d["rows"]) == 3 and all(r["gpus"] == 2 for r in d["rows"])
    assert d["best"] is None or (d["best"]["meets_slo"] and d["best"]["tpot_p99_s"] <= 0.04)
    assert all(p["fits"] for p in d["pareto"])
    for key in ("layout", "replicas", "weights_bytes", "kv_cache_bytes", "activation_bytes",
                "fits", "reason", "output_tokens_per_s", "output_tokens_per_s_per_gpu",
                "output_tokens_per_s_per_user", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s",
                "tpot_p99_s", "e2e_p50_s", "e2e_p99_s", "preemptions", "meets_slo"):
        assert key in d["rows"][0]


def test_serve_csv_and_fixed_layout(capsys):
    assert main(SERVE + ["--tp", "2", "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("layout,tp,pp,ep,replicas") and len(lines) == 2
    assert lines[1].startswith("TP2,2,1,1,1,")


def test_not_fitting_layouts_are_listed_with_their_reason(capsys):
    assert main(["plan", "serve", "llama3-70b", "--hw", "H100", "--gpus", "1", "--isl", "100",
                 "--osl", "10"]) == 0
    out = capsys.readouterr().out
    assert "best: none fits" in out and "not fitting or not valid:" in out
    assert "does not fit: weights 131.4 GiB" in out


def test_sweep_and_plot(tmp_path, capsys):
    png = tmp_path / "pareto.png"
    assert main(SERVE + ["--tp", "2", "--sweep", "--plot", str(png)]) == 0
    out, err = capsys.readouterr()
    assert "Pareto front" in out and png.stat().st_size > 0 and f"wrote {png}" in err


def test_train(capsys):
    assert main(["plan", "train", "llama3-8b", "--hw", "h100", "--gpus", "4", "--batch", "8",
                 "--seq", "2048", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d) == {"search", "plans"}
    rows = d["plans"]
    assert rows and all(r["tp"] * r["pp"] * r["dp"] * r["cp"] == 4 for r in rows)
    assert all(r["memory"]["fits"] for r in rows)
    assert [r["tokens_per_s"] for r in rows] == sorted((r["tokens_per_s"] for r in rows),
                                                       reverse=True)
    assert main(["plan", "train", "llama3-8b", "--hw", "h100", "--gpus", "1", "--batch", "8",
                 "--seq", "8192", "--recompute", "none"]) == 0  # none fits on one GPU
    out = capsys.readouterr().out
    assert "0 fit in memory" in out and "no layout fits" in out


def test_train_recompute_modules(capsys):
    """--recompute-modules recomputes those modules in every layout (recompute selective): the
    activations it keeps are fewer than without recomputation and the step longer."""
    base = ["plan", "train", "llama3-8b", "--hw", "h100", "--gpus", "4", "--batch", "8",
            "--seq", "2048", "--tp", "1", "--pp", "1", "--format", "json"]
    assert main(base + ["--recompute", "none"]) == 0
    none = json.loads(capsys.readouterr().out)["plans"][0]
    assert main(base + ["--recompute-modules", "mlp,layernorm"]) == 0
    d = json.loads(capsys.readouterr().out)
    mods = d["plans"][0]
    assert d["search"]["recompute_modules"] == "mlp,layernorm" and mods["recompute"] == "selective"
    assert mods["memory"]["activation_bytes"] < none["memory"]["activation_bytes"]
    assert mods["step_time_s"] > none["step_time_s"]
    assert main(base + ["--recompute-modules", "bogus"]) == 2
    assert "recompute_modules: unknown module 'bogus'" in capsys.readouterr().err


@pytest.mark.parametrize("argv, flag", [
    (["plan", "serve", "llama9", "--hw", "h100", "--gpus", "2"], "MODEL: unknown model"),
    (["plan", "serve", "llama3-8b", "--hw", "h999", "--gpus", "2"], "--hw: unknown hardware"),
    (["plan", "serve", "llama3-8b", "--hw", "h100", "--gpus", "6", "--tp", "4"], "--gpus: 6"),
    (["plan", "serve", "llama3-8b", "--hw", "h100", "--gpus", "0"], "--gpus: expected"),
    (["plan", "serve", "llama3-8b", "--hw", "h100", "--gpus", "2", "--tpot-slo", "5 parsecs"],
     "--tpot-slo: expected a positive duration"),
    (["plan", "serve", "llama3-8b", "--hw", "h100", "--gpus", "2", "--ttft-slo=-2s"],
     "--ttft-slo: expected a positive duration"),
    (["plan", "serve", "llama3-8b", "--hw", "h100", "--gpus", "2", "--rate", "0"], "--rate:"),
    (["plan", "serve", "llama3-8b", "--hw", "h100", "--gpus", "2", "--engine", "x"],
     "argument --engine"),
    (["plan", "serve", "llama3-8b", "--hw", "h100", "--gpus", "2", "--offline", "--rate", "1"],
     "argument --rate"),
    (["plan", "train", "llama3-8b", "--hw", "h100", "--gpus", "3", "--batch", "4", "--tp",
      "2"], "--gpus: 3"),
])
def test_bad_input_exits_2_naming_the_flag(capsys, argv, flag):
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0] and lines[0].startswith("perfmodel: error:")
    assert "Traceback" not in err


@pytest.mark.parametrize("text, seconds", [("50ms", 0.05), ("2s", 2.0), ("200us", 2e-4),
                                           ("1.5 s", 1.5), ("0.25", 0.25), ("300µs", 3e-4)])
def test_parse_duration(text, seconds):
    assert parse_duration(text, "--x") == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "ms", "5 parsecs", "0s", "-1ms", "inf", "1e999s"])
def test_parse_duration_rejects(text):
    with pytest.raises(InputError, match="--x: expected a positive duration"):
        parse_duration(text, "--x")


def test_plan_serve_disaggregated_and_speculative_flags(capsys):
    from perfmodel.cli.main import main
    rc = main(["plan", "serve", "llama3-8b", "--hw", "H100", "--gpus", "2", "--isl", "500",
               "--osl", "50", "--rate", "2", "--requests", "20", "--disagg", "--tp", "1",
               "--format", "json", "--jobs", "1"])
    assert rc == 0
    import json
    out = json.loads(capsys.readouterr().out)
    assert [r["layout"] for r in out["rows"]] == ["TP1 1P:1D"]
    rc = main(["plan", "serve", "llama3-8b", "--hw", "H100", "--gpus", "1", "--spec-tokens",
               "3"])
    assert rc == 2
    assert "--spec-acceptance" in capsys.readouterr().err


def test_plan_serve_moe_kernel_runs_marlin_and_warns_where_it_does_not_apply(capsys):
    """--moe-kernel marlin reaches gpt-oss's MXFP4 experts (the header says so, and an 8k
    prefill takes longer than on the grouped kernels); on BF16 experts it warns and is
    ignored."""
    from perfmodel.cli.main import main
    base = ["plan", "serve", "gpt-oss-120b", "--hw", "H100-SXM", "--gpus", "4", "--tp", "4",
            "--engine", "vllm", "--isl", "8000", "--osl", "64", "--concurrency", "2",
            "--requests", "4", "--jobs", "1", "--format", "json"]
    import json
    assert main(base + ["--moe-kernel", "marlin"]) == 0
    marlin = json.loads(capsys.readouterr().out)
    assert main(base) == 0
    grouped = json.loads(capsys.readouterr().out)
    assert marlin["search"]["moe_kernel"] == "marlin" and grouped["search"]["moe_kernel"] == "grouped"
    assert marlin["best"]["ttft_mean_s"] > 1.2 * grouped["best"]["ttft_mean_s"]
    assert main(["plan", "serve", "llama3-8b", "--hw", "H100-SXM", "--gpus", "1", "--tp", "1",
                 "--isl", "100", "--osl", "10", "--concurrency", "1", "--requests", "2",
                 "--jobs", "1", "--moe-kernel", "marlin"]) == 0
    assert "--moe-kernel applies to experts stored narrower" in capsys.readouterr().err
