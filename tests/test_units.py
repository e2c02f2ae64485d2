"""One dtype vocabulary: every other list derives from perfmodel.units."""
from __future__ import annotations

import importlib

from perfmodel import units
from perfmodel.studies.numerics import quantizers
from perfmodel.workloads import recipes


def test_dtype_lists_derive_from_units():
    hardware = importlib.import_module("perfmodel.hardware")
    builder = importlib.import_module("perfmodel.workloads.builder")
    assert hardware.TENSOR_DTYPES is units.TENSOR_DTYPES
    assert builder.GEMM_DTYPES is units.GEMM_DTYPES
    assert set(units.TENSOR_DTYPES) <= set(units.DTYPES)
    assert set(units.GEMM_DTYPES) <= set(units.LINEAR_RECIPES)
    assert set(recipes.TE_FORMATS) <= set(units.LINEAR_RECIPES)
    for r in units.LINEAR_RECIPES.values():
        assert r.gemm_dtype in units.TENSOR_DTYPES
    # every recipe that quantizes has an emulator in the numerics study
    assert {n for n, r in units.LINEAR_RECIPES.items() if r.quantized} <= set(quantizers.FORMATS)
