"""The METRO study on recorded expert loads (perfmodel.studies.moe_decode: real_layers,
real_loads_rows, slo_gain) and `perfmodel moe --loads`."""
from __future__ import annotations

import json

import numpy as np
import pytest

from perfmodel.cli.main import main
from perfmodel.ops.moe.loads import load_expert_loads
from perfmodel.studies.moe_decode import (loads_context, metro_order_gap, real_layers,
                                          real_loads_rows, real_loads_summary, redundant_slots,
                                          slo_gain)

FILE = "decode_in1000out1000.json"
LAYERS = (3, 17, 31, 45, 60)  # spread over the file's 58 MoE layers


def test_redundant_slots_and_context():
    assert [redundant_slots(256, g, 32) for g in (8, 16, 32, 64, 72)] == [32, 32, 32, 64, 32]
    assert [redundant_slots(256, g, 128) for g in (8, 16, 32, 64, 72)] == [128] * 4 + [176]
    assert loads_context(FILE) == 1500 and loads_context("x.json") == 2048


# The paper's condition (docs/studies.md §2.1, §2.7): decode in the memory-bound regime with
# replicated hot experts. There token balancing feeds every replica of an expert with at least
# as many tokens as replicas, while METRO activates one replica per active expert, so METRO's
# largest per-GPU count must not exceed EPLB's. Checked per layer, on both GPU-node layouts
# (8-GPU nodes: EPLB's hierarchical policy at EP16, global at EP72; one NVL72 domain), and the
# expert FFN time with it.
@pytest.mark.parametrize("gpus,tokens_per_gpu", [(16, 4), (16, 32), (72, 8)])
@pytest.mark.parametrize("at_least", [32, 128])
def test_metro_activates_no_more_than_eplb_where_the_paper_says(gpus, tokens_per_gpu, at_least):
    red = redundant_slots(256, gpus, at_least)
    res = real_layers("deepseek-v3", ["H200-SXM", "GB200"], gpus, tokens_per_gpu, FILE, LAYERS,
                      red, policies=("token_balanced", "metro", "optimal"))
    for rows in res.values():
        by = {(r.policy, r.layer): r for r in rows}
        for layer in LAYERS:
            tb, metro, opt = (by[p, layer] for p in ("token_balanced", "metro", "optimal"))
            assert opt.max_activated <= metro.max_activated <= tb.max_activated
            assert metro.mean_activated <= tb.mean_activated
            # FFN time follows λ (weight bytes). At equal λ METRO's slowest GPU may carry more
            # tokens (whole experts): their activations, (2h + 3f)·2 B ≈ 41 kB each, against
            # λ·44 MB of FP8 weights, are a few % at EP72's 4 slots per GPU (the paper puts
            # activations under 0.6 % of the traffic at 1K tokens, §2.1, with more weights)
            assert metro.bound == "hbm"
            if metro.max_activated < tb.max_activated:
                assert metro.ffn_s < tb.ffn_s
            else:
                assert metro.ffn_s <= tb.ffn_s * 1.04


def test_real_layers_prices_every_part_of_the_layer():
    res = real_layers("deepseek-v3", "B200", 16, 32, FILE, (10,), 32)["B200"]
    by = {r.policy: r for r in res}
    assert set(by) == {"contiguous", "token_balanced", "metro", "optimal"}
    for r in res:
        assert r.layer_s == pytest.approx(r.ffn_s + r.dispatch_s + r.gate_s + r.routing_s
                                          + r.combine_s)
    # METRO and the optimum all-gather before top-k and run top-k on every token (§2.5)
    assert by["metro"].gate_s > by["token_balanced"].gate_s
    assert by["token_balanced"].routing_s == 0 < by["metro"].routing_s < by["optimal"].routing_s
    # without replicas every policy activates the experts that got tokens: ≤ 16 per GPU
    assert by["contiguous"].max_activated <= 16
    # EP72: 256 experts do not divide over 72 GPUs, so no contiguous row
    assert {r.policy for r in real_layers("deepseek-v3", "GB200", 72, 4, FILE, (10,))["GB200"]} \
        == {"token_balanced", "metro", "optimal"}


def test_rows_aggregate_layers_and_add_the_rest_of_the_step():
    rows = real_loads_rows(hws=("B200",), gpus_list=(16,), tokens_per_gpu=(4, 64), layers=(20, 40),
                           redundant_at_least=(32,))
    assert {(r["tokens_per_gpu"], r["policy"]) for r in rows} == {
        (t, p) for t in (4, 64) for p in ("contiguous", "token_balanced", "metro", "optimal")}
    for r in rows:
        assert r["layers"] == 2 and r["fits"]
        assert r["tpot_s"] > 58 * r["layer_s"]  # plus attention and the dense layers
    t = {(r["tokens_per_gpu"], r["policy"]): r["tpot_s"] for r in rows}
    assert t[64, "metro"] > t[4, "metro"]
    summary = {s["tokens_per_gpu"]: s for s in real_loads_summary(rows)}
    for tokens, s in summary.items():
        assert s["tpot_change"] == pytest.approx(t[tokens, "metro"] / t[tokens, "token_balanced"]
                                                 - 1)
        # the change splits into the FFN and the rest of the layer, over the 58 MoE layers
        assert s["ffn_change_s"] + s["rest_change_s"] == pytest.approx(
            t[tokens, "metro"] - t[tokens, "token_balanced"])
        assert s["lambda_optimal"] <= s["lambda_metro"] <= s["lambda_eplb"]


def test_metro_order_gap():
    """Counting the experts that have no choice first never leaves METRO's greedy below the
    optimum and, on these loads, closes most of its gap at EP32 with 1.5× replication."""
    g = metro_order_gap(gpus=32, layers=LAYERS)
    assert g["optimal"] <= g["metro_forced_first"] <= g["metro"]
    assert g["metro_forced_first"] - g["optimal"] < 0.5 * (g["metro"] - g["optimal"])


def _row(policy, tokens, tpot):
    return dict(hardware="X", gpus=8, redundant=32, policy=policy, tokens_per_gpu=tokens,
                tpot_s=tpot, fits=True)


def test_slo_gain_grid_and_interpolated():
    """EPLB reaches 10 ms at 8 tokens and 20 ms at 16; METRO 10 ms at 16 tokens, 20 at 32.
    At a 10 ms SLO the grid gives METRO 16/10 against EPLB's 8/10: 2×. Interpolated, any batch:
    at SLO s METRO fits 1.6·s tokens (s in ms) and EPLB 0.8·s, 2× again."""
    rows = [_row("token_balanced", 8, 0.010), _row("token_balanced", 16, 0.020),
            _row("metro", 16, 0.010), _row("metro", 32, 0.020)]
    (g,) = slo_gain(rows)
    assert g["grid_ratio"] == pytest.approx(2.0) and g["grid_slo_s"] == pytest.approx(0.010)
    assert g["interpolated_ratio"] == pytest.approx(2.0, rel=0.01)
    # memory-bound: TPOT nearly flat in the batch, METRO 0.4 ms faster at every batch. At a
    # 10.6 ms SLO METRO runs 32 tokens and EPLB only 16 (10.5 ms): the grid gives
    # (32/10.6)/(16/10.5) = 1.98×. Any batch allowed, the best SLO is 10.0 or 10.5 ms:
    # METRO 14.4 (28.8) tokens against 8 (16), 1.8×.
    rows = [_row("token_balanced", 8, 0.0100), _row("token_balanced", 16, 0.0105),
            _row("token_balanced", 32, 0.0110),
            _row("metro", 8, 0.0096), _row("metro", 16, 0.0101), _row("metro", 32, 0.0106)]
    (g,) = slo_gain(rows)
    assert g["grid_ratio"] == pytest.approx((32 / 0.0106) / (16 / 0.0105))
    assert g["interpolated_ratio"] == pytest.approx(1.8, rel=0.01)


def test_cli_moe_loads(capsys):
    assert main(["moe", "--model", "deepseek-v3", "--hw", "B200", "--gpus", "16", "--loads",
                 FILE, "--layers", "3", "30", "--tokens-per-gpu", "32"]) == 0
    out = capsys.readouterr().out
    assert "routed from decode_in1000out1000.json (2 MoE layers" in out
    for policy in ("contiguous", "token_balanced", "metro", "optimal"):
        assert policy in out
    assert main(["moe", "--model", "deepseek-v3", "--hw", "B200", "--gpus", "16", "--loads",
                 FILE, "--layers", "3", "--tokens-per-gpu", "8", "--replication", "1.5",
                 "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert {r["redundant"] for r in rows} == {0, 128} and rows[0]["layers"] == [3]
    metro = next(r for r in rows if r["policy"] == "metro")
    eplb = next(r for r in rows if r["policy"] == "token_balanced")
    assert metro["max_activated"] <= eplb["max_activated"]


@pytest.mark.parametrize("extra,message", [
    (["--loads", "nope.json"], "nope.json: no such expert-loads file"),
    (["--loads", FILE, "--layers", "1"], "logical_count[1]: no routed tokens"),
    (["--loads", FILE, "--skew", "1.0"], "--skew"),
    (["--layers", "3"], "--layers: applies with --loads only"),
])
def test_cli_moe_loads_errors(capsys, extra, message):
    assert main(["moe", "--model", "deepseek-v3", "--hw", "B200", "--gpus", "16", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_cli_bad_loads_file_names_file_and_key(tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"logical_count": [[1] * 256, [1] * 255]}))
    assert main(["moe", "--model", "deepseek-v3", "--hw", "B200", "--gpus", "16", "--loads",
                 str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(f"{path}: logical_count[1]: 255 expert counts, expected 256 (as in "
                        f"layer 0)") and len(err.splitlines()) == 1


def test_shipped_decode_files_load():
    for name in ("decode_in1000out1000.json", "decode_in1800out100.json",
                 "decode_in2000out100.json", "decode_in500out1500.json"):
        loads = load_expert_loads(name)
        assert loads.moe_layers == list(range(3, 61))
        assert np.allclose(loads.counts[3:].sum(1), loads.counts[3].sum())  # 8 per token
