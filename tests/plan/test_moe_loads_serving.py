"""Recorded expert loads through the graph builder, the serving simulator and `perfmodel plan
serve` (Workload.moe_loads): each MoE layer routes as its own row of the file, with the model's
group-limited gate, contiguous placement or EPLB's from the file's statistics."""
from __future__ import annotations

import json

import pytest

import perfmodel as pm
from perfmodel.cli.main import main
from perfmodel.errors import InputError
from perfmodel.ops.moe.loads import load_expert_loads
from perfmodel.plan.simulator import Workload, simulate
from perfmodel.workloads.builder import build_graph

LOADS = "decode_in1000out1000.json"


@pytest.fixture(scope="module")
def ds():
    return pm.load_model("deepseek-v3")


def _experts(g):
    return [n.op for n in g.nodes if n.op.name == "moe"]


def test_every_moe_layer_routes_its_own_row_of_the_file(ds):
    g = build_graph(ds, "decode", batch=8, context=1024, ep=16, dtype="fp8", moe_loads=LOADS)
    ops = _experts(g)
    layers = [i for i in range(ds.layers) if ds.is_moe_layer(i)]
    assert [o.params["layer"] for o in ops] == layers  # 58 distinct ops, in layer order
    assert all(o.loads == LOADS and o.expert_groups == 8 and o.group_top_k == 4 for o in ops)
    assert {o.placement_kind for o in ops} == {"contiguous"}  # no redundant slots: EPLB off
    file = load_expert_loads(LOADS)
    hot = [int(file.counts[i].argmax()) for i in layers]
    # the routed tokens follow each layer's own hottest expert
    assert all(int(o.expert_counts().argmax()) == h or o.expert_counts()[h] > 0
               for o, h in zip(ops, hot))
    eplb = _experts(build_graph(ds, "decode", batch=8, context=1024, ep=16, dtype="fp8",
                                moe_loads=LOADS, moe_replication=288 / 256))
    assert {o.placement_kind for o in eplb} == {"eplb"} and eplb[0].redundant == 32
    plain = _experts(build_graph(ds, "decode", batch=8, context=1024, ep=16, dtype="fp8"))
    assert len({id(o) for o in plain}) == 1  # without loads one op stands for every layer


def test_loads_problems_name_the_field(ds, tmp_path):
    with pytest.raises(InputError, match="moe_loads: llama3-8b has no experts"):
        build_graph(pm.load_model("llama3-8b"), "decode", batch=1, context=64,
                    moe_loads=LOADS)
    short = tmp_path / "short.json"
    short.write_text(json.dumps({"logical_count": [[1] * 256] * 10}))
    with pytest.raises(InputError, match="moe_loads: .*10 layers.*61 layers"):
        build_graph(ds, "decode", batch=1, context=64, ep=8, moe_loads=str(short))
    with pytest.raises(InputError, match="moe_variation: applies to routing from an "
                                         "expert-loads file"):
        build_graph(ds, "decode", batch=1, context=64, ep=8, moe_variation=0.1)
    with pytest.raises(InputError, match="no such expert-loads file"):
        build_graph(ds, "decode", batch=1, context=64, ep=8, moe_loads="nope.json")


def test_model_files_declare_a_consistent_group_limit(tmp_path):
    from perfmodel.workloads.models import load_model
    base = (pm.load_model("deepseek-v3").path)
    text = open(base).read()
    for bad, message in (("expert_groups: 7", "expert_groups: 7 must divide"),
                         ("group_top_k: 9", "group_top_k: 9 exceeds expert_groups")):
        key = bad.split(":")[0]
        lines = [bad if ln.startswith(key + ":") else ln for ln in text.splitlines()]
        f = tmp_path / f"{key}.yaml"
        f.write_text("\n".join(lines) + "\n")
        with pytest.raises(InputError, match=message):
            load_model(str(f))
    assert pm.load_model("deepseek-v3").group_limit == (8, 4)
    assert pm.load_model("qwen3-30b-a3b").group_limit == (1, None)


def test_eplb_speeds_up_a_prefill_pool_on_skewed_loads(ds):
    """A prefill batch of 32 GPUs x 4096 tokens activates every expert; the step waits for the
    GPU with the most routed rows. The recorded loads (hot experts at 5-8x the mean) make the
    contiguous placement slower than uniform routing, and EPLB's 32 redundant slots win much of
    it back (the LMSYS large-scale EP measurements: 1.18x from perfect balance over their
    EPLB deployment)."""
    wl = Workload("offline", requests=64, isl=4096, osl=1)
    kw = dict(engine="sglang", tp=1, ep=32, dtype="fp8", kv_dtype="bf16")
    rate, weights = {}, {}
    for name, extra in (("uniform", {}), ("contiguous", dict(moe_loads=LOADS)),
                        ("eplb", dict(moe_loads=LOADS, moe_replication=288 / 256))):
        r = simulate(ds, "H100-SXM", wl, **kw, **extra)
        rate[name] = r.metrics()["input_tokens_per_s_per_gpu"]
        weights[name] = r.budget.weights_bytes
    assert rate["contiguous"] < rate["eplb"] < rate["uniform"]
    # the 32 redundant slots hold one more expert per GPU in each of the 58 MoE layers
    one_expert = 3 * ds.hidden * ds.expert_hidden * 1.0  # FP8
    assert weights["eplb"] - weights["contiguous"] == pytest.approx(58 * one_expert)
    assert weights["contiguous"] == weights["uniform"]


def test_plan_serve_options(capsys):
    assert main(["plan", "serve", "deepseek-v3", "--hw", "B200", "--gpus", "8",
                 "--moe-replication", "1.125"]) == 2
    assert "--moe-replication: EPLB's redundant slots" in capsys.readouterr().err
    assert main(["plan", "serve", "llama3-8b", "--hw", "B200", "--gpus", "1",
                 "--moe-loads", LOADS]) == 2
    assert "--moe-loads: llama3-8b has no experts to route" in capsys.readouterr().err
    assert main(["plan", "serve", "deepseek-v3", "--hw", "B200", "--gpus", "16",
                 "--disagg", "--moe-loads", LOADS]) == 2
    assert "--moe-loads: not simulated with --disagg" in capsys.readouterr().err


def test_the_exchange_waits_for_the_gpu_that_receives_the_most(ds):
    """Each rank sends its tokens x top_k, but the all-to-all ends when the GPU holding the hot
    experts has received its rows: with recorded loads the dispatch and combine carry the
    busiest GPU's share, less under EPLB's slots than with contiguous placement."""
    kw = dict(batch=64, context=1024, ep=16, dtype="fp8")

    def dispatch(**extra):
        g = build_graph(ds, "decode", **kw, **extra)
        d = [n.op.bytes for n in g.nodes if n.name.endswith(".dispatch")]
        c = [n.op.bytes for n in g.nodes if n.name.endswith(".combine")]
        assert d == c and len(d) == 58
        return d

    even = dispatch()
    contiguous = dispatch(moe_loads=LOADS)
    eplb = dispatch(moe_loads=LOADS, moe_replication=288 / 256)
    assert len(set(even)) == 1
    assert all(e <= b < a for e, b, a in zip(even, eplb, contiguous))


def test_predict_and_build_take_the_loads(capsys, tmp_path):
    base = ["deepseek-v3", "--phase", "decode", "--batch", "16", "--context", "1024", "--ep",
            "8", "--dtype", "fp8", "--hw", "B200", "--format", "json"]
    assert main(["predict", *base]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main(["predict", *base, "--moe-loads", LOADS, "--moe-replication", "1.125"]) == 0
    loads = json.loads(capsys.readouterr().out)
    assert loads["total_time_s"] != plain["total_time_s"]
    out = tmp_path / "g.yaml"
    assert main(["build", *base[:-2], "--moe-loads", LOADS, "-o", str(out)]) == 0
    assert "decode_in1000out1000.json" in out.read_text()
    for extra, message in ((["--moe-variation", "0.2"], "--moe-variation: applies to routing"),
                           (["--moe-replication", "nan"], "--moe-replication: expected")):
        capsys.readouterr()
        assert main(["predict", *base, *extra]) == 2
        assert message in capsys.readouterr().err
