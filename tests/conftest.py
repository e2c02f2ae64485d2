"""Shared fixtures. Tests never need a GPU; they run in a second or two."""
from __future__ import annotations

import pytest

import perfmodel as pm

ALL_HW = [hw.name for hw in pm.list_hardware()]


@pytest.fixture(scope="session")
def h100():
    return pm.hardware("H100-SXM")


@pytest.fixture(params=ALL_HW)
def any_hw(request):
    return pm.hardware(request.param)
