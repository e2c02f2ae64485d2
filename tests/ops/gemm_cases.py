"""Random GEMM cases the scalar-path tests share (tests/ops/test_gemm_scalar.py, the plain
search against the engine; test_gemm_scalar_fast.py, the pruned search against the full one):
every GPU and dtype, random shapes and flags, both levels."""
from __future__ import annotations

import dataclasses
import random

import perfmodel as pm
from perfmodel import intervals
from perfmodel.engine import estimate, resolve

HW = [pm.hardware(h.name) for h in pm.list_hardware()]
DTYPES = ("bf16", "fp16", "fp8", "fp8_e4m3", "tf32", "int8", "fp32", "mxfp8", "nvfp4")


def exact(est):
    """An Estimate's every field by repr (floats exactly, -0.0 apart from 0.0)."""
    return repr([(f.name, getattr(est, f.name)) for f in dataclasses.fields(est)])


def engine_estimate(op, hw, level):
    """The engine's resolve and estimate (its numpy search), with the band at the pipes level:
    what predict_op gave before the scalar path, the scalar tests' reference."""
    est = estimate(resolve(op.demand(hw), hw, level), hw, level)
    band = intervals.band(op, hw) if level == "pipes" else None
    if band is not None:
        est = dataclasses.replace(est, interval_s=band.around(est.time_s),
                                  interval_basis=band.basis)
    return est


def random_gpu_dtype(rng: random.Random):
    """A GPU of HW and a dtype of DTYPES it runs (fp32 runs everywhere), drawn until they fit."""
    while True:
        hw = rng.choice(HW)
        dtype = rng.choice(DTYPES)
        if dtype == "fp32" or hw.supports(dtype):
            return hw, dtype


def random_size(rng: random.Random, hi: int) -> int:
    """A GEMM dimension: tiny (1-64), any up to `hi`, or a power of two up to 2^15."""
    return rng.choice((rng.randint(1, 64), rng.randint(1, hi), 1 << rng.randint(0, 15)))


def random_gemms(seed: int, n: int, short: bool = False, kernels: bool = False):
    """(op, hw, level): any sizes (tiny, any, powers of two), or where `short` few rows and
    columns over a long K (split-K's shapes, and ties between memory-bound tiles); with
    `kernels`, also block-scaled FP8 and an engine's dispatch table or a fixed (swap-AB) tile,
    else now and then a fixed tile."""
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        hw, dtype = random_gpu_dtype(rng)
        if short:
            params = dict(m=rng.randint(1, 300), n=rng.choice((rng.randint(1, 4096),
                                                                 rng.randint(1, 40000))),
                          k=rng.choice((rng.randint(1, 1 << 16), 1 << rng.randint(8, 17))),
                          dtype=dtype)
        else:
            params = dict(m=random_size(rng, 1 << 17), n=random_size(rng, 1 << 16),
                          k=random_size(rng, 1 << 16), dtype=dtype)
        if rng.random() < 0.2:
            params["batch"] = rng.randint(1, 64)
        if rng.random() < 0.1:
            params["count"] = rng.randint(1, 8)
        if rng.random() < 0.2:
            params["persistent"] = rng.choice((True, False))
        if rng.random() < 0.2:
            params["out_dtype"] = rng.choice(("fp32", "fp16", "fp8"))
        if dtype == "bf16" and rng.random() < 0.2:
            params["b_dtype"] = rng.choice(("int4", "fp8", "int8"))
        if kernels:
            if dtype in ("fp8", "fp8_e4m3") and rng.random() < 0.2:
                params["fp8_scaling"] = "block"
            if dtype != "fp32" and rng.random() < 0.15:  # an engine's table, or one fixed kernel
                if rng.random() < 0.5:
                    params["dispatch"] = rng.choice(("vllm-0.10.2", "vllm-0.24.0"))
                else:
                    params["tile"] = rng.choice(("64x16", "64x128", "128x64"))
                    params["swap_ab"] = rng.random() < 0.5
        elif dtype != "fp32" and rng.random() < 0.1:
            params["tile"] = rng.choice(("64x16", "64x128", "128x64"))
        try:
            op = pm.ops.Gemm(**params)
        except pm.InputError:  # a tensor too large
            continue
        out.append((op, hw, rng.choice(("pipes", "roofline"))))
    return out


def candidate_rows(op, hw) -> list[tuple]:
    """Every candidate of the full kernel search (Gemm.kernel_candidates: Gemm.candidates'
    tiles and splits, their work from Gemm._work), in its order, as the engine scores them:
    (tile index, split, valid, tensor FLOP (None for fp32), FMA thread-ops, shared-memory
    bytes, L2 bytes, HBM bytes, CTAs, kernels)."""
    table, index, split = op.candidates(hw)
    w = op._work(hw, table, index, split)
    work = w["work"]
    tensor = next((v for r, v in work.items() if r.startswith("tensor:")), None)
    return [(int(i), int(s), bool(w["valid"][j]),
             None if tensor is None else float(tensor[j]), float(work["fma"][j]),
             float(work["smem"][j]), float(work["l2"][j]), float(work["hbm"][j]),
             int(w["ctas"][j]), int(w["kernels"][j]))
            for j, (i, s) in enumerate(zip(index.tolist(), split.tolist()))]
