"""Routing from recorded expert loads (perfmodel.ops.moe.loads) and the moe op's `loads=`: the
sampler reproduces the file's shares, obeys group-limited routing, is seeded; bad files are
one-line input errors naming the file and the key."""
from __future__ import annotations

import json

import numpy as np
import pytest

import perfmodel as pm
from perfmodel.engine import estimate
from perfmodel.errors import InputError
from perfmodel.ops.moe import loads as L
from perfmodel.ops.moe.loads import (LoadsError, LoadsRouting, group_limited_top_k,
                                     load_expert_loads, resolve_loads_path)

FILE = "decode_in1000out1000.json"  # shipped in perfmodel/ops/moe/data
DEEPSEEK = dict(top_k=8, groups=8, group_top_k=4)  # DeepSeek-V3 config.json


@pytest.fixture(scope="module")
def loads():
    return load_expert_loads(FILE)


def test_shipped_file(loads):
    assert (loads.layers, loads.experts) == (61, 256)
    assert loads.moe_layers == list(range(3, 61))  # DeepSeek-V3's first 3 layers are dense
    assert loads.shares(30).sum() == pytest.approx(1.0)
    assert resolve_loads_path(FILE).endswith(f"perfmodel/ops/moe/data/{FILE}")


# Sampling error: N tokens × 8 picks; a share p is estimated with s.d. sqrt(p(1 − p)/(8N))
# (binomial; the no-repeat rule and the group limit change it little). The calibration is
# itself a sample (~100k tokens, loads.py), so the z-scores against the file spread a little
# wider than N(0, 1): mean z² ≈ 1 + N/100k. Bounds: mean z² < 2.2 and max |z| < 5 over the
# 256 experts. Without calibration (weights = file shares) the group limit biases hot experts
# and the same test fails by far (mean z² > 6 at this N): the test can tell.
@pytest.mark.parametrize("layer", [3, 40])
def test_sampled_shares_match_the_file_within_sampling_error(loads, layer):
    n = 32768
    src = LoadsRouting(loads, **DEEPSEEK)
    ids = src.trace(layer, n, seed=11)
    p = loads.shares(layer)
    m = np.bincount(ids.ravel(), minlength=256) / ids.size
    z = (m - p) / np.sqrt(p * (1 - p) / ids.size)
    assert (z ** 2).mean() < 2.2 and np.abs(z).max() < 5
    # uncalibrated: Gumbel keys on log(file share) directly
    rng = np.random.default_rng([11, layer])
    raw = group_limited_top_k(np.log(p).astype(np.float32) + L._gumbel(rng, (n, 256)), 8, 8, 4)
    z_raw = (np.bincount(raw.ravel(), minlength=256) / raw.size - p) / np.sqrt(
        p * (1 - p) / raw.size)
    assert (z_raw ** 2).mean() > 6


def test_traces_obey_group_limited_routing_and_seeds(loads):
    src = LoadsRouting(loads, **DEEPSEEK)
    t = src.trace(10, 3000, seed=3)
    assert t.shape == (3000, 8) and t.dtype == np.int64 and 0 <= t.min() and t.max() < 256
    s = np.sort(t, axis=1)
    assert not (s[:, 1:] == s[:, :-1]).any()               # no expert twice in a token
    groups = np.sort(t // 32, axis=1)
    assert (1 + (np.diff(groups, axis=1) > 0).sum(1)).max() <= 4  # at most 4 of 8 groups
    assert np.array_equal(t, src.trace(10, 3000, seed=3))
    assert not np.array_equal(t, src.trace(10, 3000, seed=4))
    assert np.array_equal(t[:1000], src.trace(10, 1000, seed=3))  # smaller batch: first rows
    assert not np.array_equal(t, src.trace(11, 3000, seed=3))     # layers draw independently
    plain = LoadsRouting(loads, 8).trace(10, 3000, seed=3)        # no group limit
    assert (1 + (np.diff(np.sort(plain // 32, axis=1), axis=1) > 0).sum(1)).max() > 4


def test_counts_exact_and_multinomial_and_variation(loads):
    src = LoadsRouting(loads, **DEEPSEEK)
    small = src.counts(5, 100, seed=1)
    assert small.sum() == 800 and np.array_equal(
        small, np.bincount(src.trace(5, 100, seed=1).ravel(), minlength=256))
    big = src.counts(5, L.EXACT_TOKENS + 1, seed=1)  # above the exact limit: a multinomial
    assert big.sum() == 8 * (L.EXACT_TOKENS + 1)
    # batch-to-batch variation: per-batch shares spread more around the file's than sampling
    # alone makes them, while the mean over batches stays near the file
    p = loads.shares(5)
    def spread(source):
        shares = np.array([source.counts(5, 4096, seed=s) for s in range(12)]) / (4096 * 8)
        return np.abs(shares / p - 1).mean(), shares.mean(0)
    still, _ = spread(src)
    moving, mean = spread(LoadsRouting(loads, **DEEPSEEK, variation=0.5))
    assert moving > 2 * still
    assert np.abs(mean / p - 1).mean() < 0.25


def _moe(**kw):
    base = dict(tokens=512, experts=256, top_k=8, hidden=7168, expert_hidden=2048, dtype="fp8",
                gpus=16, shared_experts=1, loads=FILE, expert_groups=8, group_top_k=4)
    return pm.ops.Moe(**{**base, **kw})


def test_moe_op_accepts_loads():
    o = _moe(layer=20, redundant_experts=32)
    assert o.placement_kind == "eplb" and o.redundant == 32 and o.loads_layer == 20
    assert o.expert_counts().sum() == 512 * 8
    assert np.array_equal(o.expert_counts(),
                          LoadsRouting(load_expert_loads(FILE), **DEEPSEEK).counts(20, 512, 0))
    b200 = pm.hardware("B200")
    est = estimate(o.demand(b200), b200)
    assert est.time_s > 0 and est.bound == "hbm"
    assert _moe().loads_layer == 3                   # default: the file's first MoE layer
    assert _moe().placement_kind == "contiguous"     # no redundancy
    assert _moe(replication=1.125).redundant == 32   # replication still works with loads
    # EPLB placement needs equal slots per GPU, not experts divisible by the GPUs
    assert _moe(gpus=72, redundant_experts=32).routing_result.placement.gpus == 72


@pytest.mark.parametrize("kw,key,message", [
    (dict(trace="t.csv"), "loads", "not both"),
    (dict(loads=None, layer=3), "layer", "expert-loads file"),
    (dict(loads=None, variation=0.5), "variation", "expert-loads file"),
    (dict(redundant_experts=32, replication=1.5), "redundant_experts", "not both"),
    (dict(gpus=72), "gpus", "must divide"),
    (dict(gpus=72, redundant_experts=31), "gpus", "256 + 31"),
    (dict(expert_groups=7), "expert_groups", "7 equal groups"),
    (dict(group_top_k=9), "expert_groups", "group_top_k"),
    (dict(placement="contiguous", redundant_experts=32), "placement", "no redundant"),
])
def test_moe_op_parameter_errors(kw, key, message):
    with pytest.raises(InputError) as err:
        _moe(**kw)
    assert key in str(err.value) and message in str(err.value)


def _write(tmp_path, content) -> str:
    path = tmp_path / "loads.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


ROW = [1] * 4


@pytest.mark.parametrize("content,key,message", [
    ("{", "", "not JSON"),
    ([[1, 2]], "", "expected a JSON object with key 'logical_count'"),
    ({}, "logical_count", "missing"),
    ({"logical_count": [ROW], "physical_count": []}, "physical_count", "unknown key"),
    ({"logical_count": []}, "logical_count", "an empty list"),
    ({"logical_count": [ROW, 5]}, "logical_count[1]", "got int"),
    ({"logical_count": [ROW, [1, 2, 3]]}, "logical_count[1]", "3 expert counts, expected 4"),
    ({"logical_count": [ROW, [1, -2, 3, 4]]}, "logical_count[1][1]", "got -2"),
    ({"logical_count": [ROW, [1, "x", 3, 4]]}, "logical_count[1][1]", "got 'x'"),
    ({"logical_count": [ROW, [1, True, 3, 4]]}, "logical_count[1][1]", "got True"),
    ({"logical_count": [[0] * 4, [0] * 4]}, "logical_count", "all zeros"),
])
def test_bad_loads_files_are_one_line_input_errors(tmp_path, content, key, message):
    path = _write(tmp_path, content)
    with pytest.raises(LoadsError) as err:
        load_expert_loads(path)
    text = str(err.value)
    assert isinstance(err.value, InputError) and "\n" not in text
    assert text.startswith(path) and f"{path}: {key}" in text and message in text


def test_loads_errors_naming_layers_and_experts(tmp_path, loads):
    with pytest.raises(LoadsError, match=r"logical_count\[1\]: no routed tokens \(a dense layer; "
                                         r"MoE layers 3\.\.60\)"):
        loads.check_layer(1)
    with pytest.raises(LoadsError, match=r"logical_count\[61\]: no such layer"):
        loads.check_layer(61)
    small = _write(tmp_path, {"logical_count": [ROW]})
    with pytest.raises(LoadsError, match=r"logical_count\[0\]: 4 expert counts per layer, but "
                                         r"the model has 256"):
        load_expert_loads(small).check_experts(256)
    with pytest.raises(LoadsError, match="no such expert-loads file"):
        load_expert_loads("nonexistent.json")
    missing = str(tmp_path / "gone.json")
    with pytest.raises(LoadsError, match="gone.json: cannot read expert loads"):
        load_expert_loads(missing)
    # through the op: the error surfaces as the same InputError when the op routes
    with pytest.raises(InputError, match=r"logical_count\[0\]: 4 expert counts"):
        _moe(loads=small).demand(pm.hardware("B200"))
    with pytest.raises(InputError, match=r"logical_count\[2\]: no routed tokens"):
        _moe(layer=2).demand(pm.hardware("B200"))
