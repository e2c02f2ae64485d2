"""Fit the model's few fitted constants on their designated rows, and only those.

    python -m validate.fit_constants

`clocks.tensor_sustained_fraction`: the tensor pipe's sustained share of its datasheet rate under
dense MMA load (power/thermal clock limit). Fitted on gemm-mamf-001, Bekman's Maximum Achievable
Matmul FLOPS for BF16 on H100 SXM: a brute-force search for the best shape, so by construction the
row that measures the sustained rate with the least shape overhead. Every other GEMM row is judged
against the value, not fitted. The other GPUs carry it as an assumption until measured.
"""
from __future__ import annotations

import dataclasses

from perfmodel.engine import estimate

from .measurements import FITTED_ROWS, PUBLIC_CSV, load_cases


def fit_sustained_fraction(row_id: str = "gemm-mamf-001", tol: float = 1e-5) -> float:
    cases, _ = load_cases(PUBLIC_CSV)
    case = next(c for c in cases if c.id == row_id)
    lo, hi = 0.3, 1.0
    while hi - lo > tol:  # predicted time falls monotonically as the fraction rises
        mid = (lo + hi) / 2
        hw = dataclasses.replace(case.hardware, tensor_sustained_fraction=mid)
        t = estimate(case.op.demand(hw), hw, "pipes").time_s
        lo, hi = (mid, hi) if t > case.measured_time_s else (lo, mid)
    return (lo + hi) / 2


def main() -> None:
    for row, what in FITTED_ROWS.items():
        print(f"{row}: informs {what}")
    f = fit_sustained_fraction()
    print(f"tensor_sustained_fraction = {f:.4f}  (hwspecs/H100-SXM.yaml clocks)")


if __name__ == "__main__":
    main()
