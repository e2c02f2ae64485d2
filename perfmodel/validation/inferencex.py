"""SemiAnalysis InferenceX's H200 serving points replayed on the serving simulator
(`perfmodel.plan.simulator`): every row either replayed at its own deployment and load or given
the one-line reason it cannot be, and the errors tabled by model, engine and metric and by
concurrency band.

    python -m perfmodel.validation.inferencex          # error tables, reasons, runtime

Rows: validate/data/inferencex_h200.csv (validate/data/SOURCES.md, "Added by perfmodel:
inferencex_h200.csv"): 1,032 operating points on 8×H200 SXM nodes, from the InferenceX app's
API fixtures (ids `ixf-*`: DeepSeek-R1-0528 on SGLang and TensorRT-LLM, median and mean TTFT and
TPOT, throughput per GPU) and from AIConfigurator's silicon sample (ids `ixa-*`: Llama-3.3-70B,
gpt-oss-120b, DeepSeek-R1/V3 and others, mean TTFT and mean TPOT only).

What a row becomes (`load_cases`):
- the client: InferenceX's closed loop, `10 × CONC` prompts behind a semaphore of CONC (a new
  request the moment one ends), so `Workload("concurrency", concurrency=CONC,
  requests=10·CONC)` (at most MAX_REQUESTS per scheduler; the replayable rows stay under it);
  input and output lengths each uniform on [⌊0.8·L⌋, L] (random_range_ratio 0.8, ignore_eos);
  the warm-up requests finish before the timer and are not simulated (the timed run, like the
  simulation, starts with CONC requests at once on an idle server);
- the deployment: one replica on TP GPUs (`gpus_total` must equal TP: per-GPU throughput divides
  by TP); with attention data parallelism (TensorRT-LLM's enable_attention_dp) the TP ranks are
  attention groups with the experts over them, the simulator's tp=1, ep=ranks, each simulated
  scheduler carrying CONC/ranks of the load (as `serving_predict.layout`);
- models: Llama-3.1/3.3-70B → llama3-70b; DeepSeek-R1, R1-0528 and V3 → deepseek-v3 (one
  architecture: R1 is V3's weights post-trained); gpt-oss-120b → gpt-oss-120b where
  `perfmodel.workloads` has that model (checked at run time); other models are reasons;
- engines: sglang, vllm, trt/trtllm (the `sglang`, `vllm`, `trtllm` presets) with the settings
  InferenceX's launch recipes state (`recipe`, each with its source); dynamo-* rows are
  disaggregated: reasons;
- dtypes: fp8 → fp8 weights; gpt-oss's fp4 is its checkpoint: BF16 attention, router and
  embeddings with MXFP4 experts (the bf16 policy, the experts narrowed by the model file's
  `expert_dtype: mxfp4`; a reason where the model file lacks it); other fp4 → nvfp4 (the
  simulator refuses it on H200, which has no FP4 tensor cores: the refusal is the reason);
  int4 → reason. KV cache: FP8 where the recipe sets it (Llama on vLLM and TensorRT-LLM,
  DeepSeek on TensorRT-LLM), else the engine's `auto` (BF16: DeepSeek on SGLang H200, gpt-oss
  on H200);
- speculative decoding: MTP rows state no acceptance rate (reason); AIConfigurator's DeepSeek
  rows do not record whether MTP ran (reason), except those flagged as the same measurement as
  an `ixf` row, which are that row: their means are compared there (once), never twice;
- layouts AIConfigurator maps ambiguously (`gpus_total` blank: tp_size 16/64, attention DP of
  64) and multinode rows are reasons; so is a run whose throughput is below half the median of
  its configuration's repeats on other dates (`outliers`: a stalled run, not the deployment).
Metrics compared: mean and median TPOT and TTFT, total and output tokens/s per GPU, where the
row has them (the simulator's TPOT is InferenceX's, (E2E − TTFT)/(out − 1) per request; its
throughputs span the first arrival to the last completion, ramp-down included, as the client's
duration does). ITL is not compared: InferenceX's is per streamed chunk (stream_interval 10 or
20 tokens), not per token.

Constants fitted on these rows: each engine's per-request host path
(perfmodel/fitted.yaml `serving.request_overhead_s.{vllm,sglang,trtllm}`), on its lightest-load
TP8 1k/1k rows of one model (REQUEST_OVERHEAD_FIT: Llama-70B for vLLM and TensorRT-LLM,
DeepSeek-R1 for SGLang). The tables report those rows apart (`rows` fitted); every other row is
judged: the other models of the engine, TP sizes, lengths and loads. SGLang's step overhead
came from other rows (DataCrunch's).
"""
from __future__ import annotations

import csv
import functools
import math
import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Callable

from perfmodel import fitted
from perfmodel.errors import InputError
from perfmodel.plan.simulator import Workload, simulate
from perfmodel.plan.simulator.engines import vllm_graph_sizes
from perfmodel.plan.simulator.workload import range_lengths
from perfmodel.report.tables import format_table
from perfmodel.units import GEMM_DTYPES
from perfmodel.validation.measurements import DATA_DIR
from perfmodel.workloads.models import list_models, load_model

INFERENCEX_CSV = DATA_DIR / "inferencex_h200.csv"
# rows that informed a fitted constant (perfmodel/fitted.yaml fitted_on)
FITTED_ROWS = frozenset(fitted.fitted_rows())
HARDWARE = "H200-SXM"

# (pattern on the lower-cased `model` column, built-in model)
MODEL_RULES = (
    (re.compile(r"llama-3\.[13]-70b|llama70b"), "llama3-70b"),
    (re.compile(r"^dsr1$|deepseek-r1|deepseek-v3"), "deepseek-v3"),
    (re.compile(r"gpt-oss-120b"), "gpt-oss-120b"),
)
ENGINES = {"sglang": "sglang", "vllm": "vllm", "trt": "trtllm", "trtllm": "trtllm"}

# the CSV's metric columns → the simulator's metric names, and their scale to SI
MEASURED = (
    ("mean_tpot_s", "tpot_mean_s", 1.0), ("median_tpot_s", "tpot_median_s", 1.0),
    ("mean_ttft_s", "ttft_mean_s", 1.0), ("median_ttft_s", "ttft_median_s", 1.0),
    ("aic_mean_tpot_ms", "tpot_mean_s", 1e-3), ("aic_mean_ttft_ms", "ttft_mean_s", 1e-3),
    ("tput_total_tok_s_per_gpu", "total_tokens_per_s_per_gpu", 1.0),
    ("tput_output_tok_s_per_gpu", "output_tokens_per_s_per_gpu", 1.0),
)
METRICS = ("tpot_mean_s", "tpot_median_s", "ttft_mean_s", "ttft_median_s",
           "total_tokens_per_s_per_gpu", "output_tokens_per_s_per_gpu")
LATENCY_METRICS = METRICS[:4]
# concurrency bands of the load tables: (label, lowest, highest)
BANDS = (("<=16", 1, 16), ("17-127", 17, 127), (">=128", 128, 10**9))

RANGE_RATIO = 0.8      # InferenceX's --random-range-ratio
PROMPTS_PER_CONC = 10  # --num-prompts 10 × CONC
# Requests per simulated scheduler at most (10 × its concurrency below this). The replayable
# rows reach a concurrency of 128 per scheduler (Llama-70B on TensorRT-LLM): 1,280 requests.
MAX_REQUESTS = 1280
# a row whose throughput is below this share of the median of its configuration's repeats (at
# least this many rows) is a failed run, not a measurement of the deployment (`outliers`)
OUTLIER_FRACTION = 0.5
OUTLIER_REPEATS = 3


def trtllm_graph_sizes(max_batch: int) -> tuple[int, ...]:
    """TensorRT-LLM's CUDA-graph batch sizes with `enable_padding` (llmapi/llm_args.py
    CudaGraphConfig._generate_cuda_graph_batch_sizes): 1, 2, 4, 8..128 step 8, then powers of
    two from 256 below max_batch, then max_batch itself."""
    sizes = [1, 2, 4] + [8 * i for i in range(1, 17)]
    sizes += [2 ** i for i in range(8, math.ceil(math.log2(max_batch)))] if max_batch > 1 else []
    sizes = sorted(s for s in set(sizes) if s <= max_batch)
    if not sizes or sizes[-1] != max_batch:
        sizes.append(max_batch)
    return tuple(sizes)


def sglang_graph_sizes(max_bs: int) -> tuple[int, ...]:
    """SGLang's decode CUDA-graph sizes up to --cuda-graph-max-bs (1, 2, 4, 8, 16..256 step 8,
    272..512 step 16: model_executor/cuda_graph_runner.py, engines.py)."""
    sizes = (1, 2, 4, 8) + tuple(range(16, 257, 8)) + tuple(range(272, 513, 16))
    return tuple(s for s in sizes if s <= max_bs)


def recipe(model: str, engine: str, conc: int, isl: int, osl: int, attention_dp: bool,
           groups: int, tp: int = 8) -> tuple[str, dict]:
    """(kv_dtype, engine settings) of InferenceX's H200 launch recipe for the row (SemiAnalysis
    InferenceX benchmarks/*.sh and configs, as summarised in the serving-engine fact sheet's
    "InferenceX launch recipes": Llama-70B @c198b20e, DeepSeek-R1 and gpt-oss @843c6254).
    `conc` is the load of one simulated scheduler (an attention group's share under DP); `tp`
    the row's tensor parallelism."""
    if model == "llama3-70b" and engine == "vllm":
        # vllm 0.10.2: --kv-cache-dtype fp8, --max-num-batched-tokens 8192,
        # --gpu-memory-utilization 0.9, --max-num-seqs CONC, PIECEWISE graphs ≤ min(2·CONC, 512)
        return "fp8", {"max_batch": conc, "max_tokens_per_step": 8192,
                       "cuda_graph_sizes": vllm_graph_sizes(min(2 * conc, 512))}
    if model == "llama3-70b" and engine == "trtllm":
        # trtllm-serve 1.1.0rc2: --max_num_tokens 16384; cuda_graph_config enable_padding,
        # max_batch_size 1024; kv_cache_config dtype fp8; for 1k/1k below TP8
        # batch_wait_timeout_iters 20, batch_wait_max_tokens_ratio 0.9
        wait = ({"batch_wait_iters": 20, "batch_wait_tokens_ratio": 0.9}
                if (isl, osl) == (1024, 1024) and tp < 8 else {})
        return "fp8", {"max_tokens_per_step": 16384, "cuda_graph_sizes": trtllm_graph_sizes(1024),
                       **wait}
    if model == "deepseek-v3" and engine == "sglang":
        # sglang (v0.5.x) dsr1_fp8_h200: --max-running-requests and --cuda-graph-max-bs 512 for
        # 1k/1k else 256, --chunked-prefill-size 32768, --mem-fraction-static 0.82; no KV dtype
        # flag on H200 (auto: BF16)
        bs = 512 if (isl, osl) == (1024, 1024) else 256
        return "bf16", {"max_batch": bs, "max_tokens_per_step": 32768,
                        "gpu_memory_utilization": 0.82, "cuda_graph_sizes": sglang_graph_sizes(bs)}
    if model == "deepseek-v3" and engine == "trtllm":
        # trtllm 1.3.0rc14 dsr1_fp8_h200: KV fp8, free_gpu_memory_fraction 0.75, cuda graphs
        # padded to 128, max_num_tokens = max(8192, ⌈(CONC + ISL + 64)/64⌉·64) (CONC the
        # client's)
        total = conc * groups
        return "fp8", {"max_tokens_per_step": max(8192, -(-(total + isl + 64) // 64) * 64),
                       "gpu_memory_utilization": 0.75,
                       "cuda_graph_sizes": trtllm_graph_sizes(128)}
    if model == "gpt-oss-120b" and engine == "vllm":
        # vllm gptoss_fp4_h200: --max-num-seqs CONC, --max-num-batched-tokens 8192, util 0.9,
        # capture size 2048 (capped by the batch), KV auto; env VLLM_MXFP4_USE_MARLIN=1: the
        # MXFP4 experts run vLLM's Marlin MoE
        return "bf16", {"max_batch": conc, "max_tokens_per_step": 8192,
                        "cuda_graph_sizes": vllm_graph_sizes(min(2 * conc, 512)),
                        "moe_kernel": "marlin"}
    if model == "gpt-oss-120b" and engine == "trtllm":
        # trtllm gptoss_fp4_h200: --max_batch_size CONC --max_num_tokens 20000, graphs padded to
        # CONC, KV auto, free_gpu_memory_fraction 0.85
        return "bf16", {"max_batch": conc, "max_tokens_per_step": 20000,
                        "gpu_memory_utilization": 0.85,
                        "cuda_graph_sizes": trtllm_graph_sizes(conc)}
    return "bf16", {}


@dataclass(frozen=True)
class Deployment:
    """One distinct simulation: a replica's layout, engine settings and one scheduler's load."""

    model: str
    engine: str            # simulator preset
    tp: int
    ep: int
    dtype: str
    kv_dtype: str
    isl: int               # nominal L: lengths uniform on [⌊0.8·L⌋, L]
    osl: int
    concurrency: int       # per simulated scheduler
    requests: int
    settings: tuple        # sorted (name, value) engine overrides

    def workload(self) -> Workload:
        return Workload("concurrency", requests=self.requests, concurrency=self.concurrency,
                        isl=range_lengths(self.isl, RANGE_RATIO, "isl"),
                        osl=range_lengths(self.osl, RANGE_RATIO, "osl"))


@dataclass
class Case:
    """A replayable row: its deployment and the metrics it measured (SI units)."""

    id: str
    model: str
    engine: str            # sglang | vllm | trtllm
    tp: int
    ep: int
    attention_dp: bool
    isl: int
    osl: int
    concurrency: int       # the client's CONC
    deployment: Deployment
    measured: dict[str, float]
    merged_from: tuple[str, ...] = ()   # ixa rows of the same measurement whose means it holds
    assumptions: tuple[str, ...] = ()

    @property
    def band(self) -> str:
        return next(b for b, lo, hi in BANDS if lo <= self.concurrency <= hi)

    @property
    def layout(self) -> str:
        return f"TP{self.tp}" + (f" EP{self.ep}" if self.ep > 1 else "") + \
            (" DPA" if self.attention_dp else "")

    @property
    def lengths(self) -> str:
        return f"{self.isl}/{self.osl}"


@dataclass(frozen=True)
class Skip:
    id: str
    reason: str            # one line
    model: str = ""
    engine: str = ""


@dataclass(frozen=True)
class Comparison:
    case: Case
    metric: str
    measured: float
    predicted: float | None   # None: the simulator refused the deployment

    @property
    def error(self) -> float | None:
        return None if self.predicted is None else self.predicted / self.measured - 1.0

    @property
    def rows(self) -> str:
        """"fitted" where the row informed a constant (perfmodel/fitted.yaml), else "judged"."""
        return "fitted" if self.case.id in FITTED_ROWS else "judged"


def model_of(text: str) -> str | None:
    t = text.lower()
    return next((name for pattern, name in MODEL_RULES if pattern.search(t)), None)


def model_label(text: str) -> str:
    """A short name of the row's model ("MiniMax-M2.5" of "MiniMaxAI/MiniMax-M2.5 (source ...)")."""
    return text.split(" (")[0].split("/")[-1]


def _float(text: str) -> float | None:
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) and v > 0 else None


def _measured(row: dict) -> dict[str, float]:
    out = {}
    for column, metric, scale in MEASURED:
        v = _float(row.get(column, ""))
        if v is not None and metric not in out:
            out[metric] = v * scale
    return out


def _same_as(row: dict) -> str | None:
    for f in row["flags"].split(";"):
        if f.startswith("same_measurement_as:"):
            return f.split(":", 1)[1]
    return None


def _spec(row: dict) -> str:
    s = row["spec_method"].split("(")[0].strip().lower()
    return s or "unknown"


def weights_dtype(model: str, precision: str) -> str | None:
    """The simulator's GEMM dtype policy for the row's precision. gpt-oss's "fp4" checkpoint
    keeps attention, router, embeddings and LM head in BF16 and stores the experts in MXFP4:
    the policy is bf16 and the model file's `expert_dtype: mxfp4` narrows the experts' weights
    (builder.expert_weight_dtype: 4-bit weights converted to the MMA type in the mainloop, as
    Hopper runs them); a model file without that field cannot express it (None)."""
    if precision == "fp8":
        return "fp8"
    if precision == "fp4":
        if model == "gpt-oss-120b":
            return "bf16" if getattr(load_model(model), "expert_dtype", None) == "mxfp4" \
                else None
        return "nvfp4"
    return None


def _config(row: dict) -> tuple:
    return tuple(row[k] for k in ("model", "framework", "precision", "spec_method", "tp", "ep",
                                  "dp_attention", "disaggregated", "isl", "osl", "concurrency"))


def outliers(rows: list[dict]) -> dict[str, str]:
    """Rows whose total throughput is below OUTLIER_FRACTION of the median of the same
    configuration re-measured on other dates (at least OUTLIER_REPEATS rows), with the reason:
    a run that stalled (ixf-8205b9b83e70: median TTFT 189 s where its 11 repeats give 0.7 s)."""
    groups: dict[tuple, list[tuple[str, float]]] = {}
    for r in rows:
        v = _float(r["tput_total_tok_s_per_gpu"])
        if v is not None:
            groups.setdefault(_config(r), []).append((r["id"], v))
    out = {}
    for members in groups.values():
        if len(members) < OUTLIER_REPEATS:
            continue
        m = median(v for _, v in members)
        for rid, v in members:
            if v < OUTLIER_FRACTION * m:
                out[rid] = (f"measurement outlier: throughput below {OUTLIER_FRACTION:.0%} of "
                            f"the median of its configuration's repeats")
    return out


def why_not(row: dict, rows_by_id: dict[str, dict] | None = None,
            models: tuple[str, ...] | None = None,
            outlier: dict[str, str] | None = None) -> str | None:
    """Why the simulator cannot replay this row (one line), or None. `models`: the built-in
    model names (default: `list_models()` now, so a model added later becomes replayable);
    `outlier`: `outliers(rows)`."""
    models = tuple(list_models()) if models is None else models
    fw = row["framework"]
    if row["disaggregated"] == "true" or fw.startswith("dynamo"):
        return "disaggregated prefill/decode deployment (dynamo): not one aggregated replica"
    if row["multinode"] == "true":
        return "multinode deployment"
    model = model_of(row["model"])
    if model is None or model not in models:
        return f"not a built-in model ({model or model_label(row['model'])})"
    same = _same_as(row)
    if same and rows_by_id is not None and same in rows_by_id:
        return "same measurement as an ixf row (its means are compared on that row)"
    spec = _spec(row)
    if spec == "unknown":
        return "speculative decoding not recorded (AIConfigurator's DeepSeek rows)"
    if spec != "none":
        return f"speculative decoding ({spec}) without a stated acceptance rate"
    if fw not in ENGINES:
        return f"engine {fw} has no preset"
    if not row["gpus_total"]:
        return "parallel layout ambiguous in AIConfigurator's mapping (no GPU count)"
    tp, ep, gpus = int(row["tp"]), int(row["ep"] or 1), int(row["gpus_total"])
    if gpus != tp:
        return f"GPU count {gpus} is not TP {tp}"
    if row["dp_attention"] == "true" and ep != tp:
        return f"attention DP with EP {ep} != TP {tp}"
    dtype = weights_dtype(model, row["precision"])
    if dtype is None:
        return f"weights dtype {row['precision']} of {model} is not simulated"
    if dtype not in GEMM_DTYPES:
        return f"weights dtype {dtype} is not a simulator GEMM dtype"
    if not _measured(row):
        return "no TTFT, TPOT or throughput measured"
    if outlier and row["id"] in outlier:
        return outlier[row["id"]]
    return None


def deployment_of(row: dict) -> tuple[Deployment, tuple[str, ...]]:
    model = model_of(row["model"])
    engine = ENGINES[row["framework"]]
    tp, ep = int(row["tp"]), int(row["ep"] or 1)
    conc, isl, osl = int(row["concurrency"]), int(row["isl"]), int(row["osl"])
    notes = []
    attention_dp = row["dp_attention"] == "true"
    sim_tp, groups = (1, ep) if attention_dp else (tp, 1)
    c = max(1, round(conc / groups))
    if c * groups != conc:
        notes.append(f"concurrency {conc} over {groups} attention groups taken as {c} each")
    kv, settings = recipe(model, engine, c, isl, osl, attention_dp, groups, tp)
    requests = min(MAX_REQUESTS, PROMPTS_PER_CONC * c)
    if requests < PROMPTS_PER_CONC * c:
        notes.append(f"{requests} requests simulated of {PROMPTS_PER_CONC * c}")
    if row["source_kind"].startswith("aiconfigurator") and _spec(row) == "none" \
            and "inferred" in row["spec_method"]:
        notes.append("no speculative decoding (inferred by the collection)")
    dep = Deployment(model, engine, sim_tp, ep, weights_dtype(model, row["precision"]), kv,
                     isl, osl, c, requests, tuple(sorted(settings.items())))
    return dep, tuple(notes)


def load_cases(path: str | Path = INFERENCEX_CSV,
               models: tuple[str, ...] | None = None) -> tuple[list[Case], list[Skip]]:
    """Every row as a replayable `Case` or a `Skip` with its reason. An ixa row that is the same
    measurement as an ixf row is a Skip; its means join that row's metrics where the ixf row
    lacks them (history rows keep medians only)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    by_id = {r["id"]: r for r in rows}
    models = tuple(list_models()) if models is None else models
    outlier = outliers(rows)
    cases: dict[str, Case] = {}
    skipped: list[Skip] = []
    for r in rows:
        reason = why_not(r, by_id, models, outlier)
        if reason is not None:
            skipped.append(Skip(r["id"], reason, model_label(r["model"]), r["framework"]))
            continue
        dep, notes = deployment_of(r)
        cases[r["id"]] = Case(r["id"], dep.model, ENGINES[r["framework"]], int(r["tp"]),
                              int(r["ep"] or 1), r["dp_attention"] == "true", int(r["isl"]),
                              int(r["osl"]), int(r["concurrency"]), dep, _measured(r),
                              assumptions=notes)
    for s in skipped:  # the means of ixa duplicates join their ixf row
        target = _same_as(by_id[s.id]) if s.reason.startswith("same measurement") else None
        if target in cases:
            c = cases[target]
            for metric, v in _measured(by_id[s.id]).items():
                if metric not in c.measured:
                    c.measured[metric] = v
                    if s.id not in c.merged_from:
                        c.merged_from += (s.id,)
    return list(cases.values()), skipped


# The rows each engine's per-request path is fitted on (perfmodel/fitted.yaml
# serving.request_overhead_s.*): its model's TP8 rows (no attention DP) of 1k/1k at the lightest
# loads, where nothing queues and a 1k prompt's prefill is small beside the path; the metric is
# the TTFT statistic the rows carry. Every other row is judged.
REQUEST_OVERHEAD_FIT = {"vllm": ("llama3-70b", "ttft_mean_s"),
                        "trtllm": ("llama3-70b", "ttft_mean_s"),
                        "sglang": ("deepseek-v3", "ttft_median_s")}
REQUEST_OVERHEAD_FIT_MAX_CONC = 8


def request_overhead_fit_rows(engine: str, cases: list[Case] | None = None) -> list[Case]:
    """REQUEST_OVERHEAD_FIT's rows of `engine`."""
    model, metric = REQUEST_OVERHEAD_FIT[engine]
    cases = load_cases()[0] if cases is None else cases
    return [c for c in cases if c.engine == engine and c.model == model and c.tp == 8
            and not c.attention_dp and (c.isl, c.osl) == (1024, 1024)
            and c.concurrency <= REQUEST_OVERHEAD_FIT_MAX_CONC and metric in c.measured]


@functools.lru_cache(maxsize=None)
def simulate_deployment(dep: Deployment, overrides: tuple = ()) -> dict[str, float] | str:
    """The simulator's metrics for one deployment (engine settings `overrides`, (name, value)
    pairs, over the recipe's), or the first line of its refusal."""
    try:
        r = simulate(dep.model, HARDWARE, dep.workload(), engine=dep.engine, tp=dep.tp, ep=dep.ep,
                     dtype=dep.dtype, kv_dtype=dep.kv_dtype,
                     **{**dict(dep.settings), **dict(overrides)})
    except InputError as e:
        return str(e).strip().splitlines()[0]
    return r.metrics()


def run(cases: list[Case]) -> tuple[list[Comparison], dict[str, str]]:
    """Comparisons of every measured metric of every case (predicted None where the simulator
    refused the deployment), and the refusals by case id."""
    out, refused = [], {}
    for c in cases:
        m = simulate_deployment(c.deployment)
        if isinstance(m, str):
            refused[c.id] = m
        for metric, value in c.measured.items():
            p = None if isinstance(m, str) else m.get(metric)
            out.append(Comparison(c, metric, value, None if p is None else float(p)))
    return out, refused


def summarize(comparisons: list[Comparison], key: Callable[[Comparison], tuple]) -> list[tuple]:
    """(key..., n, unpredicted, MAPE, median APE, bias) per group, sorted by key."""
    groups: dict[tuple, list[Comparison]] = {}
    for c in comparisons:
        groups.setdefault(key(c), []).append(c)
    rows = []
    for k in sorted(groups, key=lambda t: tuple(map(str, t))):
        errs = [c.error for c in groups[k] if c.error is not None]
        ape = [abs(e) for e in errs]
        rows.append((*k, len(errs), len(groups[k]) - len(errs),
                     sum(ape) / len(ape) if ape else None, median(ape) if ape else None,
                     sum(errs) / len(errs) if errs else None))
    return rows


def _table(names: list[str], rows: list[tuple]) -> str:
    pct = lambda x: "-" if x is None else f"{x:.1%}"  # noqa: E731
    return format_table(names + ["n", "unpredicted", "MAPE", "median APE", "bias"],
                        [[*r[:-3], pct(r[-3]), pct(r[-2]),
                          "-" if r[-1] is None else f"{r[-1]:+.1%}"] for r in rows])


BAND_ORDER = {b: i for i, (b, _, _) in enumerate(BANDS)}


def report(comparisons: list[Comparison]) -> str:
    order = {m: i for i, m in enumerate(METRICS)}
    by_metric = summarize(comparisons, lambda c: (c.case.model, c.case.engine, c.metric,
                                                  c.rows))
    by_metric.sort(key=lambda r: (r[0], r[1], order[r[2]], r[3]))
    judged = [c for c in comparisons if c.rows == "judged"]
    lat = [c for c in judged if c.metric in LATENCY_METRICS]
    by_band = summarize(lat, lambda c: (c.case.model, c.case.engine, c.metric, c.case.band))
    by_band.sort(key=lambda r: (r[0], r[1], order[r[2]], BAND_ORDER[r[3]]))
    by_layout = summarize(judged, lambda c: (c.case.model, c.case.engine, c.case.layout,
                                             c.metric))
    by_layout.sort(key=lambda r: (r[0], r[1], r[2], order[r[3]]))
    by_len = summarize(lat, lambda c: (c.case.model, c.case.engine, c.metric, c.case.lengths))
    by_len.sort(key=lambda r: (r[0], r[1], order[r[2]], r[3]))
    return "\n\n".join([
        "By model, engine and metric (rows that informed a constant apart):\n"
        + _table(["model", "engine", "metric", "rows"], by_metric),
        "Judged rows' TPOT and TTFT by concurrency band (the client's CONC):\n"
        + _table(["model", "engine", "metric", "conc"], by_band),
        "Judged rows' TPOT and TTFT by ISL/OSL:\n" + _table(["model", "engine", "metric", "isl/osl"], by_len),
        "Judged rows by layout (the row's TP, EP, attention DP):\n"
        + _table(["model", "engine", "layout", "metric"], by_layout),
    ])


def worst(comparisons: list[Comparison], n: int = 12) -> str:
    rows = sorted((c for c in comparisons if c.error is not None),
                  key=lambda c: -abs(c.error))[:n]
    return format_table(["id", "model", "engine", "tp", "ep", "dpa", "isl/osl", "conc", "metric",
                         "measured", "predicted", "error"],
                        [[c.case.id, c.case.model, c.case.engine, c.case.tp, c.case.ep,
                          "y" if c.case.attention_dp else "", c.case.lengths,
                          c.case.concurrency, c.metric, f"{c.measured:.4g}",
                          f"{c.predicted:.4g}", f"{c.error:+.1%}"] for c in rows])


def main() -> None:
    t0 = time.perf_counter()
    cases, skipped = load_cases()
    comparisons, refused = run(cases)
    elapsed = time.perf_counter() - t0
    n_rows = len(cases) + len(skipped)
    sims = len({c.deployment for c in cases})
    print(f"InferenceX H200 rows replayed on the serving simulator ({HARDWARE}); the rows of "
          f"each engine's fitted per-request path are reported apart\n")
    print(report(comparisons))
    print("\nLargest errors:")
    print(worst(comparisons))
    reasons = Counter(s.reason for s in skipped)
    reasons.update(f"the simulator refused the deployment: {m}" for m in refused.values())
    print(f"\n{n_rows} rows: {len(cases) - len(refused)} replayed "
          f"({sum(1 for c in comparisons if c.predicted is not None)} metric values compared, "
          f"{sims} distinct simulations); the rest:")
    print(format_table(["reason", "rows"], sorted(reasons.items(), key=lambda kv: -kv[1])))
    print(f"\n{elapsed:.0f} s")


if __name__ == "__main__":
    main()
