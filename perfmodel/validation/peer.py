"""The serving simulator beside the best peer tool: NVIDIA AIConfigurator's TensorRT-LLM estimate
of offline maximum throughput (validate/data/aiconfigurator_serving.csv, written by
validate/aiconfigurator_serving.py) for the same Llama and MoE deployments (Mixtral 8x7B with
tensor-parallel experts, Qwen3-30B-A3B and Qwen3-235B-A22B expert-parallel over the TP ranks),
replayed on the simulator's TensorRT-LLM preset.

    python -m perfmodel.validation.peer          # agreement by GPU, model and ISL/OSL
    python -m perfmodel.validation.peer --rows   # and every row

These are a peer tool's predictions, not measurements: the table says where the two models
agree and where they part, which points at a mechanism one of them lacks (AIConfigurator
composes measured TensorRT-LLM ops; perfmodel derives every op from the hardware), never at a
constant to fit. Nothing is fitted on them.

What a row becomes: `simulate(model, hw, Workload("offline", ...), engine="trtllm", tp, ep,
dtype, kv_dtype="fp8")` (ep = tp: the experts spread over the TP group, summed by its
all-reduce; ep = 1: each expert split tp ways) with the preset's scheduler (max_batch_size 2048, max_num_tokens 8192 raised to
the prompt where it is longer: plan/simulator/sim.py), its output tokens/s per GPU against the
row's. AIConfigurator sweeps the batch (to 1024) and the context-token budget for its best point;
the simulator runs the engine's own admission (KV memory, GUARANTEED_NO_EVICT): the two
schedulers are not the same, which is part of what is compared.
"""
from __future__ import annotations

import argparse
import csv
from dataclasses import dataclass
from pathlib import Path

from perfmodel.report.progress import Progress
from perfmodel.report.tables import format_table
from perfmodel.validation.modules import error_table, grouped_errors

PEER_CSV = Path(__file__).resolve().parents[2] / "validate" / "data" / "aiconfigurator_serving.csv"
# requests per simulation: several refills of the batch at steady state (as serving_predict)
REQUESTS = 600
LONG_REQUESTS = 300  # prompts + outputs over 8k tokens: fewer fit at once, each runs longer
LONG_TOKENS = 8000


@dataclass(frozen=True)
class PeerRow:
    model: str
    hardware: str
    gemm_dtype: str
    kv_dtype: str
    tp: int
    ep: int
    isl: int
    osl: int
    peer_tokens_per_s_per_gpu: float
    peer_batch: int


def load_rows(path: Path = PEER_CSV) -> list[PeerRow]:
    with open(path, newline="", encoding="utf-8") as f:
        return [PeerRow(r["model"], r["hardware"], r["gemm_dtype"], r["kv_dtype"], int(r["tp"]),
                        int(r.get("ep") or 1), int(r["isl"]), int(r["osl"]), float(r["output_tokens_per_s_per_gpu"]),
                        int(r["batch_per_replica"])) for r in csv.DictReader(f)]


def predicted_tokens_per_s_per_gpu(row: PeerRow) -> float:
    """The simulator's offline output tokens/s per GPU for the row's deployment."""
    from perfmodel.plan.simulator import Workload, simulate
    n = LONG_REQUESTS if row.isl + row.osl > LONG_TOKENS else REQUESTS
    r = simulate(row.model, row.hardware, Workload("offline", requests=n, isl=row.isl,
                                                    osl=row.osl),
                 engine="trtllm", tp=row.tp, ep=row.ep, dtype=row.gemm_dtype,
                 kv_dtype=row.kv_dtype)
    return r.metrics()["output_tokens_per_s_per_gpu"]


def compare(rows: list[PeerRow], progress: bool = True) -> list[tuple[PeerRow, float]]:
    """(row, perfmodel / peer − 1) for every row."""
    bar = Progress(len(rows), "simulating", force=False) if progress else None
    out = []
    for row in rows:
        out.append((row, predicted_tokens_per_s_per_gpu(row) / row.peer_tokens_per_s_per_gpu - 1))
        if bar:
            bar.update()
    return out


def table(results: list[tuple[PeerRow, float]], key, name: str) -> str:
    """The errors grouped by `key(row)` (modules.error_table: n, MAPE, bias, max)."""
    return error_table(grouped_errors(results, lambda re: re[1], lambda re: (key(re[0]),)),
                       [name])


def report(results: list[tuple[PeerRow, float]], rows: bool = False) -> str:
    out = ["perfmodel's serving simulator (TensorRT-LLM preset, offline) against AIConfigurator "
           "0.12.0's TensorRT-LLM estimate (validate/data/aiconfigurator_serving.csv): output "
           "tokens/s per GPU, error = perfmodel / AIConfigurator - 1 (+: perfmodel faster); a "
           "peer tool's predictions, not measurements", ""]
    for name, key in (("GPU", lambda r: r.hardware), ("model", lambda r: r.model),
                      ("ISL/OSL", lambda r: f"{r.isl}/{r.osl}")):
        out += [f"by {name}", table(results, key, name), ""]
    if rows:
        body = [[r.model, r.hardware, r.gemm_dtype, r.tp, r.ep, f"{r.isl}/{r.osl}",
                 f"{r.peer_tokens_per_s_per_gpu:,.0f}",
                 f"{(1 + e) * r.peer_tokens_per_s_per_gpu:,.0f}", f"{100 * e:+.1f}%"]
                for r, e in results]
        out.append(format_table(["model", "GPU", "GEMM", "TP", "EP", "ISL/OSL", "AIC tok/s/GPU",
                                 "perfmodel", "error"], body))
    return "\n".join(out).rstrip()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m perfmodel.validation.peer",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", action="store_true", help="print every row as well")
    args = ap.parse_args(argv)
    print(report(compare(load_rows()), rows=args.rows))


if __name__ == "__main__":
    main()
