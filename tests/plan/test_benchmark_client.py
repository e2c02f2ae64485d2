"""The benchmark client as the simulator replays it: length ranges, closed-loop and gamma
arrivals, the clients' statistics and the steady-state throughput (docs/cli.md "plan")."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

import perfmodel as pm
from perfmodel.plan.simulator import StepCost, Workload, simulate
from perfmodel.plan.simulator.workload import range_lengths


def test_a_uniform_length_range_is_the_clients_floor_r_l_to_l():
    """InferenceX / SGLang: integers uniform in [floor(0.8 L), L]: 1024 -> [819, 1024], mean
    921.5; the draws' mean is within three standard errors of it."""
    assert range_lengths(1024, 0.8, "--isl-range") == ("uniform", 819, 1024)
    assert range_lengths(1024, None, "--isl-range") == 1024
    assert range_lengths(1024, 1.0, "--isl-range") == 1024
    isl, osl, _ = Workload("offline", 20000, range_lengths(1024, 0.8, "isl"),
                           range_lengths(1000, 0.5, "osl")).draw()
    assert isl.min() == 819 and isl.max() == 1024
    assert osl.min() == 500 and osl.max() == 1000
    sd = math.sqrt(((1024 - 819 + 1) ** 2 - 1) / 12) / math.sqrt(len(isl))
    assert abs(isl.mean() - 921.5) < 3 * sd
    with pytest.raises(pm.InputError, match="--isl-range: expected a range ratio in"):
        range_lengths(1024, 1.5, "--isl-range")


def test_gamma_arrivals_keep_the_rate_and_scale_the_spread_by_the_burstiness():
    """Gaps from Gamma(k, 1 / (rate k)): mean 1 / rate whatever k, coefficient of variation
    1 / sqrt(k) (k = 1 is Poisson)."""
    for k in (0.25, 1.0, 4.0):
        _, _, arrivals = Workload("rate", 40000, 100, 10, rate=5.0, burstiness=k).draw()
        gaps = np.diff(np.concatenate([[0.0], arrivals]))
        assert gaps.mean() == pytest.approx(0.2, rel=0.03)
        assert gaps.std() / gaps.mean() == pytest.approx(1 / math.sqrt(k), rel=0.05)
    with pytest.raises(pm.InputError, match="burstiness: expected a positive number"):
        Workload("rate", 10, 100, 10, rate=5.0, burstiness=0.0)


def test_closed_loop_ttft_at_concurrency_one_is_one_prefill():
    """One client: each request arrives at an idle replica, so its TTFT is exactly the
    prefill of its prompt alone (StepCost.prefill_time_s) under the engine's scheduler, plus
    the request's host path (Engine.request_overhead_s), which a closed loop pays between one
    request's completion and the next one's prefill."""
    cost = StepCost.for_engine("llama3-8b", "H100-SXM", "trtllm")
    for path in (0.0, 0.025):
        r = simulate("llama3-8b", "H100-SXM", Workload("concurrency", 6, 512, 32, concurrency=1),
                     "trtllm", cost=cost, request_overhead_s=path)
        assert np.allclose(r.ttft_s, r.ttft_s[0], rtol=1e-9)
        assert r.ttft_s[0] == pytest.approx(cost.prefill_time_s(512) + path, rel=1e-9)
        # sends: each request the moment the previous one finished (the closed loop)
        assert np.allclose(r.arrival_s[1:], (r.arrival_s + r.e2e_s)[:-1])
        # the GPU idles for the path between requests: the window is the requests' lifetimes
        assert r.duration_s == pytest.approx(r.e2e_s.sum())


def test_batch_waiting_holds_new_prompts_back_for_its_steps():
    """TensorRT-LLM's batch waiting (batch_wait_timeout_iters 20, ratio 0.9 of max_num_tokens):
    at light load a new prompt beside running decodes waits 20 steps before its prefill, so the
    TTFT rises by about 20 decode steps; decodes are untouched, and with no decode running (one
    client) nothing waits."""
    common = dict(tp=4, dtype="fp8", kv_dtype="fp8", max_tokens_per_step=16384)
    w = Workload("concurrency", 40, ("uniform", 819, 1024), ("uniform", 819, 1024), concurrency=4)
    plain = simulate("llama3-70b", "H200", w, "trtllm", **common)
    wait = simulate("llama3-70b", "H200", w, "trtllm", batch_wait_iters=20,
                    batch_wait_tokens_ratio=0.9, **common)
    step = plain.summary()["tpot_s"]["mean"]
    extra = wait.summary()["ttft_s"]["p50"] - plain.summary()["ttft_s"]["p50"]
    assert 17 * step < extra < 22 * step
    assert wait.summary()["tpot_s"]["mean"] == pytest.approx(step, rel=0.02)
    one = Workload("concurrency", 4, 1024, 64, concurrency=1)
    assert simulate("llama3-70b", "H200", one, "trtllm", batch_wait_iters=20,
                    batch_wait_tokens_ratio=0.9, **common).ttft_s == pytest.approx(
        simulate("llama3-70b", "H200", one, "trtllm", **common).ttft_s)


def test_tpot_rises_with_concurrency():
    """More requests in flight: bigger decode batches (more KV to read per step) and more
    prefills interleaved with decodes, so every added client slows every other one."""
    tpot = []
    for c in (1, 4, 16, 64):
        r = simulate("llama3-8b", "H100-SXM",
                     Workload("concurrency", 4 * c, ("uniform", 819, 1024), ("uniform", 200, 256),
                              concurrency=c), "vllm")
        tpot.append(r.summary()["tpot_s"]["mean"])
    assert all(a < b for a, b in zip(tpot, tpot[1:])), tpot


def test_a_mixed_step_costs_more_than_its_decodes_and_less_than_both_alone():
    """A step of 32 decodes and one 512-token prefill chunk runs the weights once for both
    (one pass over the layer GEMMs at 544 tokens), so it costs more than the decode step alone
    and less than the decode step plus the chunk as a step of its own."""
    cost = StepCost("llama3-8b", "H100-SXM")
    decode = cost.step_time_s(32, 32 * 1000.0)
    chunk = cost.step_time_s(0, 0.0, ((512, 0),))
    mixed = cost.step_time_s(32, 32 * 1000.0, ((512, 0),))
    assert decode < mixed < decode + chunk


def test_steady_state_throughput_does_not_depend_on_the_requests_sent():
    """Under a Poisson rate below capacity, the benchmark window's output tokens/s grows with
    the requests sent (the ramp-up is a larger share of a short run), the steady state's stays
    near the offered load (10 requests/s x 1000 tokens)."""
    window, steady = [], []
    for n in (200, 1000, 3000):
        r = simulate("llama3-70b", "H200", Workload("rate", n, 1024, 1000, rate=10.0), "vllm",
                     tp=8)
        assert r.steady_state
        window.append(r.output_tokens_per_s)
        steady.append(r.steady_output_tokens_per_s)
    assert window[0] < 0.8 * window[2]
    assert max(steady) / min(steady) < 1.1
    assert all(abs(s / 10000 - 1) < 0.1 for s in steady), steady


def test_every_statistic_is_reported_and_json_carries_them():
    out = subprocess.run(
        [sys.executable, "-m", "perfmodel.cli", "plan", "serve", "llama3-8b", "--hw", "H100",
         "--gpus", "1", "--concurrency", "8", "--isl", "512", "--isl-range", "0.8", "--osl",
         "64", "--osl-range", "0.8", "--format", "json"], capture_output=True, text=True,
        check=True)
    row = json.loads(out.stdout)["best"]
    for metric in ("ttft", "tpot", "itl", "e2e"):
        stats = [row[f"{metric}_{k}_s"] for k in ("mean", "p50", "p90", "p99")]
        assert all(v > 0 for v in stats)
        assert stats[1] <= stats[2] <= stats[3]
    for key in ("requests_per_s", "total_tokens_per_s", "total_tokens_per_s_per_gpu",
                "steady_output_tokens_per_s_per_gpu", "output_tokens_per_s_per_user"):
        assert row[key] > 0
    assert row["requests"] == 80  # 10 x the concurrency, as InferenceX sends
    assert row["total_tokens_per_s"] > row["output_tokens_per_s"]


@pytest.mark.parametrize("args, message", [
    (["--requests", "100000000"], "--requests: at most 100,000 requests are simulated"),
    (["--isl-range", "1.2"], "--isl-range: expected a range ratio in (0, 1]"),
    (["--rate", "2", "--burstiness", "-1"], "--burstiness: expected a positive number"),
])
def test_unbounded_or_absurd_client_flags_are_one_line_errors(args, message):
    out = subprocess.run([sys.executable, "-m", "perfmodel.cli", "plan", "serve", "llama3-8b",
                          "--hw", "H100", "--gpus", "1", *args], capture_output=True, text=True)
    assert out.returncode == 2
    assert message in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("settings, message", [
    (dict(batch_wait_iters=-1), "batch_wait_iters: expected an integer in [0, 10000]"),
    (dict(batch_wait_tokens_ratio=1.5), "batch_wait_tokens_ratio: expected a fraction"),
    (dict(request_overhead_s=-0.1), "request_overhead_s: expected seconds in [0, 10]"),
])
def test_client_engine_settings_are_checked(settings, message):
    with pytest.raises(pm.InputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        simulate("llama3-8b", "H100-SXM", Workload("concurrency", 4, 64, 8, concurrency=2),
                 "trtllm", **settings)


def test_normal_lengths_have_the_given_mean_and_spread_clipped_at_one():
    """--isl-std: lengths from N(ISL, S), rounded and clipped to >= 1; without S the length is
    fixed."""
    from perfmodel.plan.simulator.workload import normal_lengths
    assert normal_lengths(1024, None, "--isl-std") == 1024
    isl, _, _ = Workload("offline", 20000, normal_lengths(1000, 100.0, "--isl-std"), 10).draw()
    assert isl.mean() == pytest.approx(1000, abs=3 * 100 / math.sqrt(len(isl)))
    assert isl.std() == pytest.approx(100, rel=0.03)
    wide, _, _ = Workload("offline", 5000, normal_lengths(10, 50.0, "--isl-std"), 10).draw()
    assert wide.min() == 1  # clipped, never zero or negative
    with pytest.raises(pm.InputError, match="--isl-std: expected a standard deviation > 0"):
        normal_lengths(1000, 0.0, "--isl-std")


def test_a_lengths_file_is_replayed_in_order_and_cycled(tmp_path):
    """--lengths FILE: one (isl, osl) a row, under any of the clients' column names, replayed
    in order and cycled when more requests are simulated than the file has rows."""
    from perfmodel.plan.simulator.workload import read_length_pairs
    f = tmp_path / "lengths.csv"
    f.write_text("id,prompt_len,output_len\na,100,7\nb,2000,30\n\nc,5,500\n")
    pairs = read_length_pairs(str(f))
    assert pairs == [(100, 7), (2000, 30), (5, 500)]
    isl, osl, _ = Workload("concurrency", 7, 1, 1, pairs, concurrency=2).draw()
    assert isl.tolist() == [100, 2000, 5, 100, 2000, 5, 100]
    assert osl.tolist() == [7, 30, 500, 7, 30, 500, 7]
    for text, message in (("a,b\n1,2\n", "expected a header with an isl column"),
                          ("isl,osl\n1,x\n", "row 2: expected integer isl and osl"),
                          ("isl,osl\n0,5\n", "row 2: expected lengths ≥ 1"),
                          ("isl,osl\n", "no requests")):
        f.write_text(text)
        with pytest.raises(pm.InputError, match=message):
            read_length_pairs(str(f))
    with pytest.raises(pm.InputError, match="--lengths: cannot read"):
        read_length_pairs(str(tmp_path / "missing.csv"))


def test_plan_serve_takes_lengths_from_a_file_and_from_a_normal(tmp_path, capsys):
    """The CLI's --lengths and --isl-std/--osl-std reach the simulated requests: the token
    counts the JSON reports are the file's rows, cycled."""
    from perfmodel.cli.main import main
    f = tmp_path / "lengths.csv"
    f.write_text("isl,osl\n300,20\n700,60\n")
    argv = ["plan", "serve", "llama3-8b", "--hw", "h100", "--gpus", "1", "--concurrency", "2",
            "--requests", "6", "--format", "json"]
    assert main(argv + ["--lengths", str(f)]) == 0
    row = json.loads(capsys.readouterr().out)["rows"][0]
    assert row["requests"] == 6
    # tokens in and out of the file's rows cycled over 6 requests: 3 x (300 + 700) prompt
    # tokens beside 3 x (20 + 60) output tokens
    assert row["total_tokens_per_s"] / row["output_tokens_per_s"] == \
        pytest.approx((3000 + 240) / 240)
    assert main(argv + ["--isl-std", "50", "--osl-std", "5"]) == 0
    assert json.loads(capsys.readouterr().out)["search"]["workload"]["isl"] == \
        ["normal", 1024.0, 50.0]
    assert main(argv + ["--lengths", str(f), "--isl-range", "0.8"]) == 2
    assert "--lengths: the file gives every request's lengths; drop --isl-range" in \
        capsys.readouterr().err
