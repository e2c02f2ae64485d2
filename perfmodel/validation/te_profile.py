"""Transformer Engine's B300 GEMM profiling (docs/studies.md §3.6) against the recipe model.

    python -m perfmodel.validation.te_profile

The TE run: hidden 4096, intermediate 16384 (ungated MLP), 15,872 tokens; per linear layer the
Fprop/Dgrad/Wgrad GEMMs in BF16, FP8 block, MXFP8 and NVFP4, with on-the-fly quantization
("autocast") and without ("prequantized", kernel only). Every row is judged: B300's
`tensor_sustained_fraction` is fitted on AIConfigurator's compute-bound B300 BF16 linears
(perfmodel/fitted.yaml). `fit_b300_sustained_fraction` fits it on the BF16 prequantized per-layer
total (the three BF16 kernel-only rows, FIT_ROWS), the value the fit falls back to where those
linears are held out, and the one the project ran on before (0.672).
"""
from __future__ import annotations

import csv
import dataclasses
from dataclasses import dataclass

from perfmodel import fitted
from perfmodel.engine import estimate
from perfmodel.hardware import Hardware, hardware
from perfmodel.workloads.recipes import linear_layer
from perfmodel.report.tables import format_table

from perfmodel.validation.measurements import DATA_DIR

TE_CSV = DATA_DIR / "te_b300_gemm_profile.csv"
TOKENS = 15872
LAYERS = {"qkv": (4096, 12288), "attn_out": (4096, 4096), "mlp_up": (4096, 16384),
          "mlp_down": (16384, 4096)}
FIT_ROWS = ("te-b300-pq-fprop-bf16", "te-b300-pq-dgrad-bf16", "te-b300-pq-wgrad-bf16")


@dataclass(frozen=True)
class TeRow:
    id: str
    mode: str
    scope: str
    op: str
    format: str
    measured_s: float
    predicted_s: float
    fitted: bool

    @property
    def error(self) -> float:
        return self.predicted_s / self.measured_s - 1


def predict(hw: Hardware, mode: str, scope: str, op: str, fmt: str) -> float:
    quantize = mode == "autocast"
    pass_ = scope.split("_")[0]
    names = LAYERS if op == "all" else {op: LAYERS[op]}
    total = 0.0
    for d_in, d_out in names.values():
        for o in linear_layer(TOKENS, d_in, d_out, fmt, quantize)[pass_]:
            total += estimate(o.demand(hw), hw).time_s
    return total


def te_rows(hw: Hardware | None = None) -> list[TeRow]:
    hw = hw or hardware("B300")
    out = []
    with TE_CSV.open() as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        t = predict(hw, r["mode"], r["scope"], r["op"], r["format"])
        out.append(TeRow(r["id"], r["mode"], r["scope"], r["op"], r["format"],
                         float(r["value_ms"]) * 1e-3, t, r["id"] in _fitted_rows()))
    return out


def _fitted_rows() -> frozenset[str]:
    """The rows of this file a constant is fitted on now (perfmodel/fitted.yaml)."""
    return frozenset(r for r in fitted.fitted_rows() if r.startswith("te-b300-"))


def fit_b300_sustained_fraction(tol: float = 1e-4) -> float:
    """Bisection: the fraction at which the BF16 kernel-only layer total matches TE's."""
    base = hardware("B300")
    measured = sum(r.measured_s for r in te_rows(base) if r.id in FIT_ROWS)
    lo, hi = 0.3, 1.0
    while hi - lo > tol:
        mid = (lo + hi) / 2
        hw = dataclasses.replace(base, tensor_sustained_fraction=mid)
        t = sum(predict(hw, "prequantized", f"{p}_layer", "all", "bf16")
                for p in ("fprop", "dgrad", "wgrad"))
        lo, hi = (mid, hi) if t > measured else (lo, mid)
    return (lo + hi) / 2


def main() -> None:
    rows = te_rows()
    print("TE B300 GEMM profiling vs model (ms; error = predicted/measured - 1)")
    print(format_table(["row", "mode", "scope", "op", "format", "measured", "predicted", "error",
                        ""],
                       [[r.id, r.mode, r.scope, r.op, r.format, f"{r.measured_s * 1e3:.3f}",
                         f"{r.predicted_s * 1e3:.3f}", f"{r.error:+.1%}",
                         "fitted" if r.fitted else ""] for r in rows]))
    for mode in ("prequantized", "autocast"):
        for fmt in ("bf16", "fp8_block", "mxfp8", "nvfp4"):
            judged = [r for r in rows if r.mode == mode and r.format == fmt and not r.fitted]
            if judged:
                mape = sum(abs(r.error) for r in judged) / len(judged)
                print(f"{mode:12s} {fmt:9s} n={len(judged)} MAPE {mape:.1%}")


if __name__ == "__main__":
    main()
