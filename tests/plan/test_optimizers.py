"""Optimizers in the training planner (perfmodel.plan.optimizers): Muon's Newton–Schulz GEMMs,
SOAP's GEMMs, the optimizer state per parameter, Megatron-Core's layer-wise assignment, AdamW
unchanged, and the CLI's --optimizer. No published step time exists for these optimizers: every
case is worked by hand."""
from __future__ import annotations

import dataclasses
import json

import pytest

from perfmodel.cli.main import main
from perfmodel.errors import InputError
from perfmodel.hardware import hardware
from perfmodel.ops import op
from perfmodel.plan.memory import memory_fit
from perfmodel.plan.optimizers import (check_optimizer, layer_matrices, layerwise_assignment,
                                       newton_schulz_gemms, optimizer_step, soap_gemms)
from perfmodel.plan.training import plan_training
from perfmodel.predict import predict_op
from perfmodel.workloads.builder import Workload, build_graph
from perfmodel.workloads.models import load_model

H100 = "H100-SXM"


def tiny():
    """A 2-layer Llama-shaped model small enough to count by hand: hidden 64, 4 heads and 2 KV
    heads of 16, SwiGLU FFN 128, vocabulary 256 (untied)."""
    return dataclasses.replace(load_model("llama3-8b"), name="tiny", hidden=64, layers=2, heads=4,
                               kv_heads=2, head_dim=16, ffn_hidden=128, vocab=256,
                               params_total_stated=106496)


def test_newton_schulz_of_a_4096_by_14336_matrix_by_hand():
    gemms = newton_schulz_gemms(4096, 14336)
    # 5 iterations x 3 GEMMs: X·Xᵀ (m, m, k=n), A·A (m, m, k=m), B·X (m, n, k=m), m <= n
    assert len(gemms) == 15
    assert [(g["m"], g["n"], g["k"]) for g in gemms[:3]] == [
        (4096, 4096, 14336), (4096, 4096, 4096), (4096, 14336, 4096)]
    assert gemms[3:] == gemms[:3] * 4 and all(g["dtype"] == "bf16" for g in gemms)
    assert newton_schulz_gemms(14336, 4096) == gemms  # transposed so the Gram is 4096 x 4096
    # 4m²n + 2m³ per iteration = 14·2^36 + 2·2^36 = 2^40 FLOP
    flop = sum(2 * g["m"] * g["n"] * g["k"] for g in gemms)
    assert flop == 5 * 2**40
    hw = hardware(H100)
    assert sum(predict_op(op("gemm", **g), hw).flop for g in gemms[:3]) == 2**40


def test_soap_gemms_per_step_by_hand():
    r, c, f = 256, 1024, 10
    gemms = soap_gemms(r, c, f)
    every = [g for g, k in gemms if k == 1]
    # G·Gᵀ, Gᵀ·G, and the gradient in and the update out: two one-sided rotations each
    assert [(g["m"], g["n"], g["k"]) for g in every] == [
        (r, r, c), (c, c, r), (r, c, r), (r, c, c), (r, c, r), (r, c, c)]
    assert all(g["dtype"] == "tf32" for g in every)
    refresh = [g for g, k in gemms if k == 1 / f]
    assert len(refresh) == 8  # first moment out and in (4), L·Q_L, R·Q_R, two QRs
    qr = [g for g in refresh if g["dtype"] == "fp32"]
    # Householder QR and its explicit Q: 8n³/3 FLOP = a GEMM (n, n, 4n/3)
    assert [(g["m"], g["k"]) for g in qr] == [(r, round(4 * r / 3)), (c, round(4 * c / 3))]
    flop = sum(k * 2 * g["m"] * g["n"] * g["k"] for g, k in gemms)
    by_hand = (2 * r * r * c + 2 * c * c * r + 2 * (2 * r * c * r + 2 * r * c * c)
               + (2 * (2 * r * c * r + 2 * r * c * c) + 2 * r**3 + 2 * c**3
                  + 2 * r * r * round(4 * r / 3) + 2 * c * c * round(4 * c / 3)) / f)
    assert flop == pytest.approx(by_hand, rel=1e-12)


def test_the_matrices_of_a_layer_by_hand():
    m = tiny()
    muon = layer_matrices(m, 0, split_qkv=True)
    assert [(x.name, x.rows, x.cols) for x in muon] == [
        ("qkv", 128, 64), ("o", 64, 64), ("fc1", 256, 64), ("fc2", 64, 128)]
    assert muon[0].blocks == ((64, 64), (32, 64), (32, 64))  # Q, K, V orthogonalized apart
    assert layer_matrices(m, 0, split_qkv=False)[0].blocks == ((128, 64),)
    # the matrices hold every layer parameter the model counts
    assert sum(x.numel for x in muon) == m.attention_params() + m.ffn_params(0) == 36864
    # tensor parallelism: each GPU's shard
    assert [(x.rows, x.cols) for x in layer_matrices(m, 0, tp=2)] == [
        (64, 64), (64, 32), (128, 64), (64, 64)]


def test_a_moe_layer_holds_its_router_local_experts_and_shared_experts():
    m = load_model("qwen3-30b-a3b")
    mats = layer_matrices(m, m.dense_layers, tp=1, ep=8)
    experts = [x for x in mats if x.expert]
    assert len(experts) == 2 * m.experts // 8
    assert ("router", m.experts, m.hidden) in [(x.name, x.rows, x.cols) for x in mats]
    assert sum(x.numel for x in mats) == (m.attention_params() + m.ffn_params(m.dense_layers)
                                          - (m.experts - m.experts // 8) * 3 * m.hidden
                                          * m.expert_hidden)


def _optimizer_bytes(model, optimizer, dp, distributed=None):
    w = Workload("train", dp, 64, None, 1, 1, 1, dp, "bf16", 1)
    return memory_fit(model, H100, w, optimizer=optimizer,
                      distributed_optimizer=distributed).optimizer_bytes


def test_optimizer_state_per_parameter_by_hand():
    m = tiny()
    # 2 layers x 36,864 matrix parameters; the embedding and LM head 2 x 256 x 64 on AdamW
    matrices, rest = 2 * 36864, 2 * 256 * 64
    assert _optimizer_bytes(m, "adamw", 1) == 12 * (matrices + rest) == 1277952
    # Muon: FP32 master + momentum (8 bytes) on the matrices
    assert _optimizer_bytes(m, "muon", 1) == 8 * matrices + 12 * rest == 983040
    # SOAP: Adam's 12 bytes + L, R, Q_L, Q_R in FP32, 8·(r² + c²) a matrix (fused QKV 128 x 64)
    factors = 8 * ((128**2 + 64**2) + 2 * 64**2 + (256**2 + 64**2) + (64**2 + 128**2))
    assert factors == 950272
    assert _optimizer_bytes(m, "soap", 1) == 12 * (matrices + rest) + 2 * factors == 3178496
    # over 2 data-parallel ranks: the layer-wise optimizer halves it all (the mean rank)...
    assert _optimizer_bytes(m, "soap", 2) == pytest.approx(3178496 / 2)
    assert _optimizer_bytes(m, "muon", 2) == pytest.approx(983040 / 2)
    assert _optimizer_bytes(m, "muon", 2, "elementwise") == pytest.approx(983040 / 2)
    # ...the element-wise one keeps SOAP's matrices whole on every rank
    assert _optimizer_bytes(m, "soap", 2, "elementwise") == pytest.approx(
        12 * rest / 2 + 12 * matrices + 2 * factors)


def test_layerwise_assignment_by_hand():
    # one bucket: largest first to the least-loaded rank, the lowest on a tie
    # 5 -> r0, 4 -> r1, 3 -> r1 (4 < 5), 3 -> r0 (5 < 7), 3 -> r1 (7 < 8): loads 8 and 10
    owner, padded = layerwise_assignment([5, 4, 3, 3, 3], 2, bucket_numel=100)
    assert owner == [0, 1, 1, 0, 1]
    loads = [sum(n for n, r in zip([5, 4, 3, 3, 3], owner) if r == k) for k in (0, 1)]
    assert max(loads) == 10 and padded == 2 * 10
    # buckets of 7 in backprop order: {3, 3, 3} (loads 6 and 3), then {4, 5} closes at
    # max(7, int(0.9·2·5)) = 9 elements (loads 5 and 4)
    owner, padded = layerwise_assignment([5, 4, 3, 3, 3], 2, bucket_numel=7)
    assert owner == [0, 1, 0, 1, 0] and padded == 2 * 6 + 2 * 5
    with pytest.raises(InputError, match="ranks"):
        layerwise_assignment([1], 0, 10)


def test_layerwise_step_is_paced_by_the_busiest_rank():
    m = load_model("llama3-8b")
    hw = hardware(H100)
    g = build_graph(m, "train", batch=8, seq=4096, dp=8, microbatches=8)
    layer = optimizer_step(m, g, hw, "pipes", "muon", "layerwise", 1, 1, 1, 40_000_000)
    every = optimizer_step(m, g, hw, "pipes", "muon", "elementwise", 1, 1, 1, 40_000_000)
    alone = optimizer_step(m, g, hw, "pipes", "muon", "replicated", 1, 1, 1, 40_000_000)
    assert layer.matrices == 32 * 4
    # the 8 ranks' Newton–Schulz work adds up to one rank doing all of it, the busiest above
    # the mean
    ns_s = _ns_s(m, hw)
    assert (layer.mean_rank_s - layer.elementwise_s) * 8 == pytest.approx(ns_s, rel=1e-9)
    assert ns_s / 8 < layer.compute_s - layer.elementwise_s < ns_s
    assert every.compute_s - every.elementwise_s == pytest.approx(ns_s, rel=1e-9)
    assert layer.compute_s < every.compute_s <= alone.compute_s
    # element-wise gathers every matrix in FP32 (exposed); the layer-wise padding costs less
    assert every.comm_s > layer.comm_s >= 0 and alone.comm_s == 0


def _ns_s(model, hw) -> float:
    """The Newton–Schulz seconds of all the model's matrices, GEMM by GEMM."""
    total = 0.0
    for x in layer_matrices(model, 0):
        for b in x.blocks:
            total += sum(predict_op(op("gemm", **g), hw).time_s for g in newton_schulz_gemms(*b))
    return total * model.layers


def test_adamw_is_the_default_and_bit_identical_to_before():
    kw = dict(batch=8, seq=4096, tp=1, dp=8, microbatches=8)
    base = plan_training("llama3-8b", H100, **kw)
    # pinned before the optimizers were added (perfmodel 2026-12-07 working tree), re-pinned
    # when NCCL's ring local step (ops/nccl.py ring_local_step_s) lengthened the DP collectives
    # and again when the collectives ran the pair NCCL's tuner picks (nccl.tuner_cost_s)
    assert base.step_time_s == 2.890992359881721
    assert base.optimizer_s == 0.00871547546003315
    assert base.memory.optimizer_bytes == 12044992512.0
    assert base.optimizer == "adamw" and base.distributed_optimizer == "elementwise"
    assert "optimizer_comm" not in base.breakdown
    assert plan_training("llama3-8b", H100, optimizer="adamw", **kw) == base
    assert plan_training("llama3-8b", H100, optimizer="adamw",
                         distributed_optimizer="elementwise", **kw) == base


def test_muon_and_soap_steps_in_the_plan():
    # (SOAP's FP32 factors of the 28,672-row fused fc1 do not fit an H100 at TP1: 101 GB)
    kw = dict(batch=8, seq=4096, tp=1, dp=8, microbatches=8, allow_oversubscribed=True)
    adamw = plan_training("llama3-8b", H100, **kw)
    muon = plan_training("llama3-8b", H100, optimizer="muon", **kw)
    soap = plan_training("llama3-8b", H100, optimizer="soap", **kw)
    assert muon.distributed_optimizer == soap.distributed_optimizer == "layerwise"
    assert adamw.optimizer_s < muon.optimizer_s < soap.optimizer_s
    for p in (muon, soap):
        b = p.breakdown
        assert p.optimizer_s == pytest.approx(b["optimizer"] + b["optimizer_comm"])
        assert p.step_time_s == pytest.approx(adamw.step_time_s - adamw.optimizer_s
                                              + p.optimizer_s)
        assert sum(b.values()) == pytest.approx(p.step_time_s, rel=1e-9)
    assert muon.memory.optimizer_bytes < adamw.memory.optimizer_bytes \
        < soap.memory.optimizer_bytes
    # more data-parallel ranks: less Newton–Schulz per rank
    wide = plan_training("llama3-8b", H100, optimizer="muon", batch=4, seq=4096, dp=16,
                         microbatches=4)
    assert not soap.memory.fits and muon.memory.fits
    assert wide.breakdown["optimizer"] < muon.breakdown["optimizer"]


def test_bad_optimizer_settings_are_refused_in_one_line():
    kw = dict(batch=8, seq=4096, dp=8, microbatches=8)
    with pytest.raises(InputError, match="^optimizer: expected one of adamw, muon, soap"):
        plan_training("llama3-8b", H100, optimizer="bogus", **kw)
    with pytest.raises(InputError, match="^distributed_optimizer: expected one of"):
        plan_training("llama3-8b", H100, optimizer="muon", distributed_optimizer="rows", **kw)
    with pytest.raises(InputError, match="AdamW runs elementwise"):
        plan_training("llama3-8b", H100, distributed_optimizer="layerwise", **kw)
    with pytest.raises(InputError, match="^zero: muon needs whole matrices"):
        plan_training("llama3-8b", H100, optimizer="muon", zero=2, **kw)
    with pytest.raises(InputError, match="ZeRO stage 0"):
        check_optimizer("soap", "layerwise", 0)
    assert check_optimizer("soap", None, 0) == "replicated"


def test_cli_optimizer_flag(capsys):
    args = ["plan", "train", "llama3-8b", "--hw", "h100", "--gpus", "8", "--batch", "8",
            "--seq", "4096", "--tp", "1", "--pp", "1", "--micro-batch", "1"]
    assert main(args + ["--optimizer", "soap"]) == 0
    out = capsys.readouterr().out
    assert "soap (layerwise)" in out and "optimizer s" in out
    assert main(args + ["--optimizer", "bogus"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--optimizer" in err and "bogus" in err
    assert main(args + ["--optimizer", "muon", "--distributed-optimizer", "elementwise",
                        "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["search"]["optimizer"] == "muon"
    assert {p["distributed_optimizer"] for p in d["plans"]} == {"elementwise"}
