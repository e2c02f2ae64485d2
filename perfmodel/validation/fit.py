"""Fit the model's few fitted constants on their designated rows, and only those.

    python -m validate.fit_constants

Every fitted constant and the rows it was fitted on are listed here and in
`measurements.FITTED_ROWS`; `perfmodel validate` reports those rows apart as "fitted".

`clocks.tensor_sustained_fraction`: the tensor pipe's sustained share of its datasheet rate under
dense MMA load (power/thermal clock limit). Fitted on gemm-mamf-001, Bekman's Maximum Achievable
Matmul FLOPS for BF16 on H100 SXM: a brute-force search for the best shape, so by construction the
row that measures the sustained rate with the least shape overhead. Every other GEMM row is judged
against the value, not fitted. The other GPUs carry it as an assumption until measured.
"""
from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
from scipy.optimize import least_squares

from perfmodel.engine import estimate
from perfmodel.ops.attention import op as attention

from perfmodel.validation.measurements import BLACKWELL_CSV, FITTED_ROWS, PUBLIC_CSV, Case, load_cases

# Attention: per family, how much softmax work hides under the MMAs (SOFTMAX_OVERLAP), the rate
# of Ampere-style mma.sync on Hopper (FA2), how much of FA2's own ldmatrix operand loads hide
# under its mma.sync MMAs (MMA_SYNC_OPERAND_OVERLAP), and the exposed per-CTA start/drain in DRAM
# round trips (CTA_ROUND_TRIPS). Fitted on forward, FP16, non-causal rows: head dim 128 at
# sequence length >= 2048 (all families), head dim 64 >= 2048 (FA2, to separate its softmax and
# mma.sync constants), FA2 head dim 256 >= 2048 (its 64x64 tiles make operand loads as heavy as
# the MMAs: the one shape that separates the operand overlap from the mma.sync rate), and FA3
# head dim 128 below 2048 (the per-CTA cost). Everything else (causal, other head dims, other
# families' short sequences, FP8, backward, forward+backward, A100) is judged only.


def attention_fit_rows(cases: list[Case]) -> list[Case]:
    out = []
    for c in cases:
        o = c.op
        if c.op_class != "attention_fwd":
            continue
        long_hd128 = o.seq_q >= 2048 and o.head_dim == 128
        fa2_hd64 = o.seq_q >= 2048 and o.head_dim == 64 and o.kernel == "fa2"
        fa3_short = o.seq_q < 2048 and o.head_dim == 128 and o.kernel == "fa3"
        fa2_hd256 = o.seq_q >= 2048 and o.head_dim == 256 and o.kernel == "fa2"
        if (c.op_class == "attention_fwd" and o.dtype == "fp16" and not o.causal
                and (long_hd128 or fa2_hd64 or fa3_short or fa2_hd256)):
            out.append(c)
    return out


def fit_attention(cases: list[Case]) -> dict[str, float]:
    rows = attention_fit_rows(cases)
    families = ("fa2", "fa3", "cudnn")

    def residuals(x):
        attention.SOFTMAX_OVERLAP.update(dict(zip(families, x[:3])))
        attention.MMA_SYNC_FRACTION = x[3]
        attention.CTA_ROUND_TRIPS = x[4]
        attention.MMA_SYNC_OPERAND_OVERLAP = x[5]
        return [math.log(estimate(c.op.demand(c.hardware), c.hardware).time_s
                         / c.measured_time_s) for c in rows]

    start = [attention.SOFTMAX_OVERLAP[f] for f in families] + [
        attention.MMA_SYNC_FRACTION, attention.CTA_ROUND_TRIPS, attention.MMA_SYNC_OPERAND_OVERLAP]
    fit = least_squares(residuals, start, bounds=([0, 0, 0, 0.2, 0, 0], [1, 1, 1, 1, 10, 1]))
    names = [f"SOFTMAX_OVERLAP[{f}]" for f in families] + [
        "MMA_SYNC_FRACTION", "CTA_ROUND_TRIPS", "MMA_SYNC_OPERAND_OVERLAP"]
    result = dict(zip(names, np.round(fit.x, 3).tolist()))
    residuals(start)  # leave the module as the source file has it
    return {**result, "rows": [c.id for c in rows],
            "rms_log_error": float(np.sqrt(np.mean(np.square(fit.fun))))}


def _solve_falling(time_at, measured_s: float, lo: float, hi: float, tol: float) -> float:
    """Bisect for the parameter at which a predicted time that falls as the parameter rises
    equals the measured one."""
    while hi - lo > tol:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if time_at(mid) > measured_s else (lo, mid)
    return (lo + hi) / 2


def fit_fa4_overlap(row_id: str = "att-fa4-b200-001", tol: float = 1e-5) -> float:
    """FA4's softmax/MMA overlap on its one published B200 number."""
    cases, _ = load_cases(BLACKWELL_CSV)
    case = next(c for c in cases if c.id == row_id)
    saved = attention.SOFTMAX_OVERLAP["fa4"]

    def time_at(efficiency: float) -> float:
        attention.SOFTMAX_OVERLAP["fa4"] = efficiency
        return estimate(case.op.demand(case.hardware), case.hardware).time_s

    try:
        return _solve_falling(time_at, case.measured_time_s, 0.0, 1.0, tol)
    finally:
        attention.SOFTMAX_OVERLAP["fa4"] = saved


def fit_sustained_fraction(row_id: str = "gemm-mamf-001", tol: float = 1e-5) -> float:
    cases, _ = load_cases(PUBLIC_CSV)
    case = next(c for c in cases if c.id == row_id)

    def time_at(fraction: float) -> float:
        hw = dataclasses.replace(case.hardware, tensor_sustained_fraction=fraction)
        return estimate(case.op.demand(hw), hw, "pipes").time_s

    return _solve_falling(time_at, case.measured_time_s, 0.3, 1.0, tol)


def main() -> None:
    f = fit_sustained_fraction()
    print(f"tensor_sustained_fraction = {f:.4f}  (hwspecs/H100-SXM.yaml clocks; row "
          f"gemm-mamf-001)")
    cases, _ = load_cases(PUBLIC_CSV)
    att = fit_attention(cases)
    print("attention constants (perfmodel/ops/attention.py):")
    print(json.dumps({k: v for k, v in att.items() if k != "rows"}, indent=1))
    print(f"fitted on {len(att['rows'])} rows: {', '.join(att['rows'])}")
    print(f"SOFTMAX_OVERLAP[fa4] = {fit_fa4_overlap():.3f}  (row att-fa4-b200-001, FA4's B200 "
          f"headline)")
    missing = set(att["rows"]) - set(FITTED_ROWS)
    if missing:
        print(f"WARNING: FITTED_ROWS lacks {sorted(missing)}")


if __name__ == "__main__":
    main()
