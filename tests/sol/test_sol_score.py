"""SOL-ExecBench's SOL score (perfmodel/sol/score.py) against hand-worked values, edge cases
included."""
from __future__ import annotations

import pytest

from perfmodel.errors import InputError
from perfmodel.sol.score import SolScoreUndefined, pole_s, sol_score


def test_half_at_the_baseline_one_at_the_bound():
    assert sol_score(2.0, 2.0, 1.0) == 0.5
    assert sol_score(1.0, 2.0, 1.0) == 1.0


def test_hand_worked_values():
    # T_SOL 1, T_b 3: T_k 2 closes half the gap -> 1 / (1 + 1/2) = 2/3
    assert sol_score(2.0, 3.0, 1.0) == pytest.approx(2 / 3)
    # T_k 5: 1 / (1 + 4/2) = 1/3
    assert sol_score(5.0, 3.0, 1.0) == pytest.approx(1 / 3)
    # the units cancel: milliseconds as seconds
    assert sol_score(0.2e-3, 0.4e-3, 0.1e-3) == pytest.approx(1 / (1 + 0.1 / 0.3))


def test_no_clamp_above_one():
    # faster than the bound: 1 / (1 + (0.5 - 1)/(3 - 1)) = 1 / 0.75 = 4/3
    assert sol_score(0.5, 3.0, 1.0) == pytest.approx(4 / 3)


def test_baseline_at_or_below_the_bound_gives_one_or_zero():
    assert sol_score(1.0, 1.0, 1.0) == 1.0          # T_b = T_SOL, T_k = T_SOL
    assert sol_score(0.9, 0.8, 1.0) == 1.0          # T_b < T_SOL, T_k below the bound
    assert sol_score(1.1, 0.8, 1.0) == 0.0          # T_b < T_SOL, T_k above it
    assert sol_score(1.0 + 1e-12, 1.0, 1.0) == 0.0


def test_the_pole_at_two_sol_minus_baseline():
    # T_SOL 1, T_b 1.5: the pole is at 2·1 − 1.5 = 0.5
    assert pole_s(1.5, 1.0) == 0.5
    with pytest.raises(SolScoreUndefined) as e:
        sol_score(0.5, 1.5, 1.0)
    assert "pole" in e.value.problems[0]
    # just above it S → +∞, below it S is negative: 1 / (1 + (0.4 − 1)/0.5) = −5
    assert sol_score(0.5 + 1e-9, 1.5, 1.0) > 1e6
    assert sol_score(0.4, 1.5, 1.0) == pytest.approx(-5.0)
    # T_b ≥ 2·T_SOL puts the pole at or below zero: no reachable pole
    assert pole_s(3.0, 1.0) is None and pole_s(0.5, 1.0) is None


@pytest.mark.parametrize("args", [(0.0, 1.0, 1.0), (1.0, -1.0, 1.0), (1.0, 1.0, float("nan")),
                                  (True, 1.0, 1.0)])
def test_bad_times_are_input_errors(args):
    with pytest.raises(InputError):
        sol_score(*args)
