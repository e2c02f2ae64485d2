"""Shared fixtures and the hypothesis profiles. Tests never need a GPU.

Hypothesis profiles (env HYPOTHESIS_PROFILE; `ci` when it is unset, so every run is
deterministic unless asked otherwise, CI included):
  ci       derandomized (the same examples every run), no deadline, 100 examples per test
  nightly  random examples, 20x as many; a failure prints the blob that reproduces it
Tests set their own max_examples only where one example is expensive; the fuzz suites set theirs
through tests/fuzzing.py `fuzz`, which scales them by the profile (20x in nightly too).
"""
from __future__ import annotations

import os

import pytest
from hypothesis import settings

import perfmodel as pm

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=100,
                          print_blob=True, database=None)
settings.register_profile("nightly", derandomize=False, deadline=None, max_examples=2000,
                          print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or "ci")

ALL_HW = [hw.name for hw in pm.list_hardware()]


@pytest.fixture(scope="session")
def h100():
    return pm.hardware("H100-SXM")


@pytest.fixture(scope="session")
def b200():
    return pm.hardware("B200")


@pytest.fixture
def closing():
    """Collects matplotlib figures a test makes and closes them after it (pyplot keeps every
    open figure alive)."""
    import matplotlib.pyplot as plt
    figs = []
    yield figs.append
    for f in figs:
        plt.close(f)


@pytest.fixture(params=ALL_HW)
def any_hw(request):
    return pm.hardware(request.param)
