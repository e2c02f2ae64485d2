"""SOL-ExecBench's SOL score of a kernel (NVIDIA/SOL-ExecBench@8d2237d2 src/sol_execbench/
sol_score.py; the formula and its T_b ≤ T_SOL rule as perfmodel/sol/data/SOURCES.md records them):

    S = 1 / (1 + (T_k − T_SOL) / (T_b − T_SOL))

T_k is the candidate kernel's time, T_b the scoring baseline's (an optimized PyTorch
implementation of the reference), T_SOL the speed-of-light bound, all in one unit. S is 0.5 at
the baseline and 1 at the bound: the fraction of the baseline's gap to the bound a kernel closes,
on a hyperbolic scale. Its edge cases, computed as the benchmark does:

* T_b ≤ T_SOL (a baseline at or below the bound, so there is no gap to close): S = 1 when
  T_k ≤ T_SOL, else 0. The formula is not used.
* No clamp above 1: a kernel faster than the bound (T_SOL < T_b) scores S > 1 — that flags a
  bound that is not one (or a kernel that skipped work), and the benchmark reports it as is.
* No clamp below: S → 0 as T_k → ∞, and S < 0.5 past the baseline.
* The formula has a pole at T_k = 2·T_SOL − T_b, where 1 + (T_k − T_SOL)/(T_b − T_SOL) = 0:
  below T_SOL by the whole baseline gap. It is reachable only when T_b < 2·T_SOL (else the pole
  sits at T_k ≤ 0). Approaching it from above S → +∞; below it S is negative. At the pole S is
  undefined: `sol_score` raises (SolScoreUndefined), as the benchmark's division by zero does.
"""
from __future__ import annotations

import math

from perfmodel.errors import InputError


class SolScoreUndefined(InputError):
    """T_k sits at the formula's pole, 2·T_SOL − T_b."""


def sol_score(t_kernel_s: float, t_baseline_s: float, t_sol_s: float) -> float:
    """The SOL score of a kernel time against a baseline time and a bound (module docstring)."""
    for name, v in (("measured (T_k)", t_kernel_s), ("baseline (T_b)", t_baseline_s),
                    ("speed of light (T_SOL)", t_sol_s)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                or v <= 0:
            raise InputError(f"{name}: expected a positive time, got {v!r}")
    if t_baseline_s <= t_sol_s:
        return 1.0 if t_kernel_s <= t_sol_s else 0.0
    denominator = 1.0 + (t_kernel_s - t_sol_s) / (t_baseline_s - t_sol_s)
    if denominator == 0.0:
        raise SolScoreUndefined(
            f"measured (T_k) = {t_kernel_s:g} s is the SOL score's pole 2·T_SOL − T_b = "
            f"{2 * t_sol_s - t_baseline_s:g} s: S is undefined there")
    return 1.0 / denominator


def pole_s(t_baseline_s: float, t_sol_s: float) -> float | None:
    """The kernel time at which S is undefined, 2·T_SOL − T_b, when it is positive."""
    if t_baseline_s <= t_sol_s:
        return None
    p = 2.0 * t_sol_s - t_baseline_s
    return p if p > 0 else None
