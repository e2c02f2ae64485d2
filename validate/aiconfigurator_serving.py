"""Run NVIDIA AIConfigurator's TensorRT-LLM serving estimate over a grid of Llama and MoE
deployments (Mixtral 8x7B with its experts tensor-parallel, Qwen3-30B-A3B and Qwen3-235B-A22B with
theirs expert-parallel over the TP ranks) and write its predictions to validate/data/aiconfigurator_serving.csv: the best peer tool's answer to
the planner's main question (offline maximum throughput of one replica at fixed ISL/OSL), for
`python -m perfmodel.validation.peer` to compare the serving simulator against.

These are a peer tool's *predictions*, not measurements: AIConfigurator composes its measured
per-op database (collected on the GPUs with TensorRT-LLM's own modules) through its in-flight-
batching model (`sdk/backends/base_backend.py` run_agg: mixed context + generation steps, a
context-token budget swept, KV memory checked at TensorRT-LLM's free_gpu_memory_fraction 0.9).
Nothing in perfmodel is fitted on them.

    pip download aiconfigurator-core==0.12.0 --no-deps -d /tmp/aic
    unzip -q /tmp/aic/aiconfigurator_core-0.12.0-*.whl -d /tmp/aic/core
    python validate/aiconfigurator_serving.py /tmp/aic/core     # needs pandas, pyarrow, scipy

What one row is: `TRTLLMBackend.find_best_agg_result_under_constraints` for the model's
published config (AIConfigurator's model_configs), TP ranks of one replica, the batch swept to
1024 and the context-token budget swept (its defaults), with no TTFT/TPOT limit: the point of
highest tokens/s/GPU that fits in memory. GEMMs FP8 (per-tensor) on Hopper and NVFP4 on B200,
FP8 KV cache and FP8 context attention everywhere: TensorRT-LLM's perf-overview recipes.
"""
from __future__ import annotations

import csv
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path

WHEEL = "aiconfigurator-core 0.12.0"
OUT = Path(__file__).resolve().parent / "data" / "aiconfigurator_serving.csv"
MODELS = {"llama3-8b": "meta-llama/Meta-Llama-3.1-8B",
          "llama3-70b": "meta-llama/Meta-Llama-3.1-70B",
          "llama3-405b": "meta-llama/Meta-Llama-3.1-405B",
          "mixtral-8x7b": "mistralai/Mixtral-8x7B-v0.1",
          "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B",
          "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B"}
# MoE layouts as TensorRT-LLM's perf-overview recipes run them: Mixtral's 8 experts split
# tensor-parallel over the TP ranks (moe_tp = tp), Qwen3's 128 placed expert-parallel
# (moe_ep = tp, each rank holding tp-th of the experts; no attention DP). The `ep` column is
# perfmodel's --ep: 1 for moe_tp, tp for moe_ep.
MOE_EP = {"mixtral-8x7b": False, "qwen3-30b-a3b": True, "qwen3-235b-a22b": True}
# perfmodel hardware -> (AIConfigurator system, GEMM quant mode)
SYSTEMS = {"H100-SXM": ("h100_sxm", "fp8"), "H200-SXM": ("h200_sxm", "fp8"),
           "B200": ("b200_sxm", "nvfp4")}
# TP of one replica per model and GPU: the layouts that fit (70B TP1 does not on H100, 405B
# needs TP8 on H100)
TPS = {("llama3-8b", g): (1,) for g in SYSTEMS} | {
    ("llama3-70b", "H100-SXM"): (2, 4), ("llama3-70b", "H200-SXM"): (1, 2, 4),
    ("llama3-70b", "B200"): (1, 2, 4), ("llama3-405b", "H100-SXM"): (8,),
    ("llama3-405b", "H200-SXM"): (4, 8), ("llama3-405b", "B200"): (4, 8),
    **{("mixtral-8x7b", g): (1, 2) for g in SYSTEMS},
    **{("qwen3-30b-a3b", g): (1, 2) for g in SYSTEMS},
    ("qwen3-235b-a22b", "H100-SXM"): (8,), ("qwen3-235b-a22b", "H200-SXM"): (4, 8),
    ("qwen3-235b-a22b", "B200"): (4, 8)}
# TensorRT-LLM's perf-overview ISL/OSL pairs
LENGTHS = ((128, 128), (128, 2048), (500, 2000), (1000, 1000), (2048, 128), (2048, 2048),
           (5000, 500), (20000, 2000))
MAX_BATCH = 1024
COLUMNS = ("model", "hardware", "gemm_dtype", "kv_dtype", "tp", "ep", "isl", "osl",
           "output_tokens_per_s_per_gpu", "batch_per_replica", "ctx_tokens_per_step",
           "tpot_ms", "memory_gib", "tool", "database")


def rows(core: Path):
    sys.path.insert(0, str(core))
    logging.disable(logging.WARNING)
    from aiconfigurator_core.sdk.backends.trtllm_backend import TRTLLMBackend
    from aiconfigurator_core.sdk.config import RuntimeConfig
    from aiconfigurator_core.sdk.config_builders import build_model_config
    from aiconfigurator_core.sdk.models import get_model
    from aiconfigurator_core.sdk.perf_database import get_database
    configs = Path(tempfile.mkdtemp(prefix="aic-configs-"))
    for model, hf_id in MODELS.items():
        path = local_config(core, hf_id, configs)
        for hw, (system, gemm) in SYSTEMS.items():
            db = get_database(system, "trtllm", "current")
            for tp in TPS[(model, hw)]:
                ep = tp if MOE_EP.get(model) else 1
                moe_tp = tp // ep if model in MOE_EP else 1
                mc = build_model_config(
                    tp_size=tp, pp_size=1, attention_dp_size=1, moe_tp_size=moe_tp,
                    moe_ep_size=ep if model in MOE_EP else 1,
                    gemm_quant_mode=gemm, kvcache_quant_mode="fp8", fmha_quant_mode="fp8",
                    # the experts in the GEMMs' type (unset, AIConfigurator runs them in BF16)
                    moe_quant_mode=gemm if model in MOE_EP else None, comm_quant_mode=None, forward_model=None,
                    attention_backend=None)
                m = get_model(path, mc, "trtllm")
                for isl, osl in LENGTHS:
                    rc = RuntimeConfig(batch_size=1, isl=isl, osl=osl, ttft=1e9, tpot=1e9)
                    df = TRTLLMBackend().find_best_agg_result_under_constraints(
                        m, db, rc, max_batch_size=MAX_BATCH).get_summary_df()
                    if df.empty:
                        continue
                    r = df.iloc[0]
                    yield {"model": model, "hardware": hw, "gemm_dtype": gemm, "kv_dtype": "fp8",
                           "tp": tp, "ep": ep, "isl": isl, "osl": osl,
                           "output_tokens_per_s_per_gpu": round(float(r["tokens/s/gpu"]), 3),
                           "batch_per_replica": int(r["bs"]),
                           "ctx_tokens_per_step": int(r["ctx_tokens"]),
                           "tpot_ms": round(float(r["tpot"]), 3),
                           "memory_gib": round(float(r["memory"]), 3), "tool": WHEEL,
                           "database": f"{system}/trtllm/{db.version}"}


def local_config(core: Path, hf_id: str, folder: Path) -> str:
    """A folder holding the wheel's cached HuggingFace config of `hf_id` as config.json:
    AIConfigurator reads a local folder offline, where a HuggingFace id outside its default
    list (Mixtral) would be downloaded."""
    cached = core / "aiconfigurator_core" / "model_configs" / f"{hf_id.replace('/', '--')}_config.json"
    out = folder / hf_id.replace("/", "--")
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(cached, out / "config.json")
    return str(out)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python validate/aiconfigurator_serving.py UNPACKED_WHEEL_DIR",
              file=sys.stderr)
        return 2
    t = time.time()
    with OUT.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        n = 0
        for row in rows(Path(argv[0])):
            w.writerow(row)
            n += 1
            print(f"\r{n} rows", end="", file=sys.stderr, flush=True)
    print(f"\nwrote {OUT} ({n} rows, {time.time() - t:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
