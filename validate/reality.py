"""Whole-workload reality check: predicted training throughput against published runs.

    python -m validate.reality

Rows: validate/data/training_reality.csv (Llama 3 405B pretraining, Table 4 of the Llama 3
paper). Throughput per GPU is model FLOP (6·N + 12·L·h·s per token, the paper's MFU convention)
per second per GPU. The paper's pipeline schedule is interleaved with an unstated number of
virtual stages, so the prediction is shown for plain 1F1B (v=1) and v=2. Context-parallel rows
(cp > 1) are not modelled and are skipped. Nothing here was fitted.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from perfmodel.models import load_model
from perfmodel.plan import model_flop_per_token, plan_training
from perfmodel.report import format_table

from .measurements import DATA_DIR

TRAINING_CSV = DATA_DIR / "training_reality.csv"


@dataclass(frozen=True)
class RealityRow:
    id: str
    measured_tflops_per_gpu: float
    predicted_tflops_per_gpu: dict[int, float]  # by virtual stages

    def error(self, virtual_stages: int) -> float:
        return self.predicted_tflops_per_gpu[virtual_stages] / self.measured_tflops_per_gpu - 1


def training_reality(path: Path = TRAINING_CSV, virtual_stages=(1, 2)) -> list[RealityRow]:
    rows = []
    for r in csv.DictReader(path.open()):
        if int(r["cp"]) != 1:
            continue
        seq, tp, pp, dp = int(r["seq"]), int(r["tp"]), int(r["pp"]), int(r["dp"])
        predicted = {}
        for v in virtual_stages:
            plan = plan_training(r["model"], r["hardware"], batch=int(r["batch_per_dp"]),
                                 seq=seq, tp=tp, pp=pp, dp=dp, virtual_stages=v)
            per_token = model_flop_per_token(load_model(r["model"]), seq)
            predicted[v] = per_token * plan.tokens_per_s / plan.gpus / 1e12
        rows.append(RealityRow(r["id"], float(r["value"]), predicted))
    return rows


def main() -> None:
    rows = training_reality()
    print("Llama 3 405B pretraining on H100 (model TFLOPS per GPU), predicted vs published")
    print(format_table(["row", "measured", "pred 1F1B", "error", "pred v=2", "error"],
                       [[r.id, f"{r.measured_tflops_per_gpu:.0f}",
                         f"{r.predicted_tflops_per_gpu[1]:.0f}", f"{r.error(1):+.1%}",
                         f"{r.predicted_tflops_per_gpu[2]:.0f}", f"{r.error(2):+.1%}"]
                        for r in rows]))


if __name__ == "__main__":
    main()
