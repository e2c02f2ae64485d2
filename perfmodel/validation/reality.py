"""Whole-workload reality check: predicted training throughput against published runs.

    python -m perfmodel.validation.reality

Rows: validate/data/training_reality.csv — Llama 3 405B pretraining (Llama 3 paper, Table 4:
model TFLOPS per GPU, 6·N + 12·L·h·s FLOP per token) and DeepSeek-V3 pretraining (its technical
report: H800 GPU-hours per trillion tokens, predicted on hwspecs/H800-SXM.yaml: the H100 SXM5's
SM with NVLink cut to 400 GB/s). Each row is predicted on plain 1F1B (v=1), on v=2, and on the
schedule the run used (AS_RUN: Llama 3's interleaved 1F1B, at the least interleaving since its
virtual stages are not stated; DeepSeek-V3's DualPipe, `plan_training(pipeline_schedule=
"dualpipe")`). Context-parallel rows are not modelled and are skipped. No constant was fitted on these rows (the planner's training clock,
training.sm_clock_fraction, is fitted on the Megatron-Core runs of training_measurements.csv).
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from perfmodel.workloads.models import load_model
from perfmodel.plan.training import can_split, model_flop_per_token, plan_training
from perfmodel.report.tables import format_table

from perfmodel.validation.measurements import DATA_DIR

TRAINING_CSV = DATA_DIR / "training_reality.csv"
# The pipeline schedule each run used: (plan_training pipeline_schedule, virtual stages).
# Llama 3 (arXiv:2407.21783 §3.3.2): an interleaved 1F1B schedule, its virtual stages unstated;
# DeepSeek-V3 (arXiv:2412.19437 §3.2.1): DualPipe
AS_RUN = {"llama3-t4-1": ("1f1b", 2), "llama3-t4-2": ("1f1b", 2), "dsv3-cost": ("dualpipe", 1)}


@dataclass(frozen=True)
class RealityRow:
    id: str
    metric: str
    measured: float
    predicted: dict  # by virtual stages (1, 2), and "as run" (AS_RUN)

    def error(self, virtual_stages) -> float | None:
        """predicted / measured − 1 at `virtual_stages` (1, 2) or "as run"; None where that
        schedule cannot run the model (plan.training.can_split)."""
        p = self.predicted[virtual_stages]
        return None if p is None else p / self.measured - 1


def training_reality(path: Path = TRAINING_CSV, virtual_stages=(1, 2)) -> list[RealityRow]:
    rows = []
    with path.open() as f:
        table = list(csv.DictReader(f))
    for r in table:
        if int(r["cp"]) != 1:
            continue
        seq = int(r["seq"])
        predicted = {}
        schedules = [(v, "1f1b", v) for v in virtual_stages]
        if r["id"] in AS_RUN:
            schedules.append(("as run", *AS_RUN[r["id"]]))
        for key, schedule, v in schedules:
            if v > 1 and not can_split(load_model(r["model"]).layers, int(r["pp"]), v):
                predicted[key] = None  # Megatron-Core cannot split its layers so (DeepSeek-V3's
                continue               # 61 over PP16 x VP2); the run itself did not use it
            plan = plan_training(r["model"], r["hardware"], batch=int(r["batch_per_dp"]),
                                 seq=seq, tp=int(r["tp"]), pp=int(r["pp"]), dp=int(r["dp"]),
                                 ep=int(r["ep"]), dtype=r["dtype"], virtual_stages=v,
                                 pipeline_schedule=schedule,
                                 # these runs happened: their throughput is judged even where
                                 # plan.memory's estimate exceeds the HBM (their memory tricks,
                                 # e.g. DeepSeek-V3's recomputation and FP8 activations, are
                                 # not modelled)
                                 allow_oversubscribed=True)
            if r["metric"] == "tflops_per_gpu":
                per_token = model_flop_per_token(load_model(r["model"]), seq)
                predicted[key] = per_token * plan.tokens_per_s / plan.gpus / 1e12
            elif r["metric"] == "gpu_hours_per_trillion_tokens":
                predicted[key] = 1e12 / plan.tokens_per_s * plan.gpus / 3600
            else:
                raise ValueError(f"{path}: unknown metric {r['metric']!r}")
        rows.append(RealityRow(r["id"], r["metric"], float(r["value"]), predicted))
    return rows


def main() -> None:
    rows = training_reality()
    print("pretraining runs, predicted vs published (no constant fitted on them)")
    print(format_table(["row", "metric", "measured", "pred 1F1B", "error", "pred v=2", "error",
                        "as run", "pred as run", "error"],
                       [[r.id, r.metric, f"{r.measured:.4g}", f"{r.predicted[1]:.4g}",
                         f"{r.error(1):+.1%}", *_cells(r, 2),
                         *([_as_run_label(r.id), f"{r.predicted['as run']:.4g}",
                            f"{r.error('as run'):+.1%}"] if "as run" in r.predicted
                           else ["-"] * 3)] for r in rows]))


def _cells(r: RealityRow, key) -> list[str]:
    """The prediction and error cells at `key`, dashes where the schedule cannot run."""
    if r.predicted[key] is None:
        return ["-", "-"]
    return [f"{r.predicted[key]:.4g}", f"{r.error(key):+.1%}"]


def _as_run_label(row_id: str) -> str:
    schedule, v = AS_RUN[row_id]
    return "DualPipe" if schedule == "dualpipe" else f"interleaved v={v}"


if __name__ == "__main__":
    main()
