"""Whole-workload reality check: predicted training throughput against published runs.

    python -m perfmodel.validation.reality

Rows: validate/data/training_reality.csv — Llama 3 405B pretraining (Llama 3 paper, Table 4:
model TFLOPS per GPU, 6·N + 12·L·h·s FLOP per token) and DeepSeek-V3 pretraining (its technical
report: H800 GPU-hours per trillion tokens, predicted on hwspecs/H800-SXM.yaml: the H100 SXM5's
SM with NVLink cut to 400 GB/s). Pipeline
schedules in both papers are more elaborate than 1F1B (interleaved with unstated virtual stages;
DualPipe), so predictions are shown for plain 1F1B (v=1) and v=2. Context-parallel rows are not
modelled and are skipped. No constant was fitted on these rows (the planner's training clock,
training.sm_clock_fraction, is fitted on the Megatron-Core runs of training_measurements.csv).
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from perfmodel.workloads.models import load_model
from perfmodel.plan.training import model_flop_per_token, plan_training
from perfmodel.report.tables import format_table

from perfmodel.validation.measurements import DATA_DIR

TRAINING_CSV = DATA_DIR / "training_reality.csv"


@dataclass(frozen=True)
class RealityRow:
    id: str
    metric: str
    measured: float
    predicted: dict[int, float]  # by virtual stages

    def error(self, virtual_stages: int) -> float:
        return self.predicted[virtual_stages] / self.measured - 1


def training_reality(path: Path = TRAINING_CSV, virtual_stages=(1, 2)) -> list[RealityRow]:
    rows = []
    with path.open() as f:
        table = list(csv.DictReader(f))
    for r in table:
        if int(r["cp"]) != 1:
            continue
        seq = int(r["seq"])
        predicted = {}
        for v in virtual_stages:
            plan = plan_training(r["model"], r["hardware"], batch=int(r["batch_per_dp"]),
                                 seq=seq, tp=int(r["tp"]), pp=int(r["pp"]), dp=int(r["dp"]),
                                 ep=int(r["ep"]), dtype=r["dtype"], virtual_stages=v,
                                 # these runs happened: their throughput is judged even where
                                 # plan.memory's estimate exceeds the HBM (their memory tricks,
                                 # e.g. DeepSeek-V3's recomputation and FP8 activations, are
                                 # not modelled)
                                 allow_oversubscribed=True)
            if r["metric"] == "tflops_per_gpu":
                per_token = model_flop_per_token(load_model(r["model"]), seq)
                predicted[v] = per_token * plan.tokens_per_s / plan.gpus / 1e12
            elif r["metric"] == "gpu_hours_per_trillion_tokens":
                predicted[v] = 1e12 / plan.tokens_per_s * plan.gpus / 3600
            else:
                raise ValueError(f"{path}: unknown metric {r['metric']!r}")
        rows.append(RealityRow(r["id"], r["metric"], float(r["value"]), predicted))
    return rows


def main() -> None:
    rows = training_reality()
    print("pretraining runs, predicted vs published (no constant fitted on them)")
    print(format_table(["row", "metric", "measured", "pred 1F1B", "error", "pred v=2", "error"],
                       [[r.id, r.metric, f"{r.measured:.4g}", f"{r.predicted[1]:.4g}",
                         f"{r.error(1):+.1%}", f"{r.predicted[2]:.4g}", f"{r.error(2):+.1%}"]
                        for r in rows]))


if __name__ == "__main__":
    main()
