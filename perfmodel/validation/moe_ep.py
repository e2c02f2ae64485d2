"""The published large-scale expert-parallel rows (validate/data/moe_measurements.csv, section
MOE-SERVE of validate/data/SOURCES.md) that the serving model can express, replayed with the
recorded expert loads (`Workload.moe_loads`), EPLB on and off:

    python -m perfmodel.validation.moe_ep

  * LMSYS's DeepSeek-V3 prefill pool (SGLang, EP32 over 4 H100 nodes, DP attention, 16,384
    tokens per GPU of 4,096-token prompts): with the deployed routing (SGLang's EPLB, 32
    redundant experts, from the recorded prefill loads validate/data/moe_loads/
    prefill_in4096.json) and with "perfect" balance (uniform routing), and their ratio;
  * its decode pool (EP72 over 9 H100 nodes, 256 sequences per GPU at KV length 2,000, EPLB
    with 32 redundant experts; the recorded decode_in2000out100 loads): one decode step's
    throughput per node.
A row's prediction is per node (8 GPUs) as the blog reports it. The other rows of the file are
listed with why they are not replayed (`NOT_REPLAYED`). Nothing here is fitted.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass

from perfmodel.report.tables import format_table
from perfmodel.validation.measurements import DATA_DIR

MOE_CSV = DATA_DIR / "moe_measurements.csv"
PREFILL_LOADS = DATA_DIR / "moe_loads" / "prefill_in4096.json"
DECODE_LOADS = "decode_in2000out100.json"  # shipped (perfmodel/ops/moe/data)
GPUS_PER_NODE = 8
SGLANG_REDUNDANT = 32  # the blog's repro scripts: --ep-num-redundant-experts 32
NOT_REPLAYED = {
    "lmsys_dec_mtp": "a simulated MTP run (dummy attention kernels), not a real engine step",
    "lmsys_dec_dsblog": "DeepSeek's production numbers: batch, overlap and kernels not stated",
    "lmsys_dec_dsprofile": "derived from DeepSeek's profile data, not a measurement",
    "lmsys_eplb_pre_speedup": "read from a figure without its scale or batch",
    "lmsys_eplb_dec_speedup": "read from a figure without its scale or batch",
    "k2_dec": "Kimi-K2: no model file",
    "gb200_dec": "the batch per GPU is in a figure only",
    "trt_noeplb_rank": "an imbalance ratio on TensorRT-LLM's machine-translation routing "
                       "(docs/studies.md §2.8 compares it with the recorded loads)",
    "trt_noeplb_slot": "as trt_noeplb_rank",
    "trt_eplb288_rank": "as trt_noeplb_rank", "trt_eplb288_slot": "as trt_noeplb_rank",
    "trt_eplb_ep36_rank": "as trt_noeplb_rank", "trt_eplb_ep36_slot": "as trt_noeplb_rank",
    "trt_gemm_noeplb": "one grouped-GEMM kernel at '32 or 64' tokens per GPU on another "
                       "data set's routing",
    "trt_gemm_onlineeplb_pre": "a NUMA page-size artefact of online EPLB",
    "vllm_async_s0": "vLLM EPLB rearrangement stalls (not modelled)",
    "vllm_sync_s0": "vLLM EPLB rearrangement stalls (not modelled)",
    "vllm_async_s1": "vLLM EPLB rearrangement stalls (not modelled)",
    "vllm_sync_s1": "vLLM EPLB rearrangement stalls (not modelled)",
    "sgl5295_base_r1": "total throughput of 1-token outputs with the prompt count only",
    "sgl5295_base_r2": "as sgl5295_base_r1",
    "metro_dec_lat": "the METRO paper's claims (docs/studies.md §2)",
    "metro_tput": "the METRO paper's claims (docs/studies.md §2)",
    "metro_slo": "the METRO paper's claims (docs/studies.md §2)",
    "vllm_blog_h200": "wide-EP stack throughput without the batch or lengths",
}


@dataclass(frozen=True)
class EpRow:
    id: str
    what: str
    measured: float
    predicted: float

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1.0


def _measured() -> dict[str, float]:
    with open(MOE_CSV, encoding="utf-8") as f:
        return {r["id"]: float(r["value"].replace(",", "")) for r in csv.DictReader(f)
                if r["id"].startswith("lmsys_")}


def prefill_per_node(loads: str | None, redundant: int) -> float:
    """Prompt tokens/s per node of the LMSYS prefill pool (EP32 on H100, DP attention, 4 prompts
    of 4,096 tokens per GPU per step), routed from `loads` with EPLB's `redundant` slots, or
    uniformly (loads None)."""
    from perfmodel.plan.simulator import Workload, simulate
    experts = 256
    kw = dict(moe_loads=str(loads), moe_replication=(experts + redundant) / experts) \
        if loads else {}
    wl = Workload("offline", requests=64, isl=4096, osl=1)
    r = simulate("deepseek-v3", "H100-SXM", wl, engine="sglang", tp=1, ep=32, dtype="fp8",
                 kv_dtype="bf16", max_tokens_per_step=16384, **kw)
    return r.metrics()["input_tokens_per_s_per_gpu"] * GPUS_PER_NODE


def decode_per_node(batch_per_gpu: int = 256, context: int = 2000, gpus: int = 72) -> float:
    """Output tokens/s per node of one decode step of the LMSYS decode pool (EP72 on H100, DP
    attention, EPLB with 32 redundant slots from the recorded decode loads)."""
    from perfmodel.plan.simulator import StepCost
    cost = StepCost.for_engine("deepseek-v3", "H100-SXM", "sglang", tp=1, ep=gpus,
                               dtype="fp8", kv_dtype="bf16", moe_loads=DECODE_LOADS,
                               moe_replication=(256 + SGLANG_REDUNDANT) / 256)
    step = cost.step_time_s(batch_per_gpu, batch_per_gpu * context, graphs=True)
    return batch_per_gpu / step * GPUS_PER_NODE


def rows() -> list[EpRow]:
    m = _measured()
    default = prefill_per_node(PREFILL_LOADS, SGLANG_REDUNDANT)
    contiguous = prefill_per_node(PREFILL_LOADS, 0)
    perfect = prefill_per_node(None, 0)
    return [
        EpRow("lmsys_pre_default", "prefill EP32 H100, recorded loads, EPLB (32 redundant)",
              m["lmsys_pre_default"], default),
        EpRow("lmsys_pre_perfect", "prefill EP32 H100, perfect balance (uniform routing)",
              m["lmsys_pre_perfect"], perfect),
        EpRow("lmsys_pre_perfect/default", "perfect balance over the deployed EPLB",
              m["lmsys_pre_perfect"] / m["lmsys_pre_default"], perfect / default),
        EpRow("(EPLB on/off)", "EPLB over contiguous placement, same loads (no measurement "
              "at this scale; the blog's figure: 1.49x)", 1.49, default / contiguous),
        EpRow("lmsys_dec_default", "decode EP72 H100, 256 seqs/GPU, KV 2000, EPLB",
              m["lmsys_dec_default"], decode_per_node()),
    ]


def main() -> None:
    table = rows()
    print("Large-scale expert parallelism, DeepSeek-V3 on H100 (LMSYS 2025-05-05), replayed "
          "with recorded loads (nothing fitted)\n")
    print(format_table(["row", "what", "measured", "predicted", "error"],
                       [[r.id, r.what, f"{r.measured:.4g}", f"{r.predicted:.4g}",
                         f"{r.error:+.1%}"] for r in table]))
    print("\nnot replayed:")
    print(format_table(["row", "why"], sorted(NOT_REPLAYED.items())))


if __name__ == "__main__":
    main()
