"""Published end-to-end LLM-serving results as validation cases.

    python -m perfmodel.validation.serving

Rows: validate/data/serving_measurements.csv, conventions in validate/data/serving_SOURCES.md
(MLPerf Inference v4.1/v5.1, the TensorRT-LLM DeepSeek-R1 guide and blog, LMSYS/SGLang blogs,
DataCrunch's raw SGLang outputs, the vLLM blog). Every row becomes either a `ServingCase`, which
names the perfmodel hardware and model, the per-replica parallelism, the lengths, the load and one
metric in SI units, or a `Skipped` with the reason. No row is dropped silently.

Normalisation rules (each guess a rule makes is written into the case's `assumptions`):
- hardware: the source's own system text is read by rules (GH200 and GB300 first, then GB200,
  B300, B200, H200, H100; "PCIe" picks H100-PCIe), then resolved with `hardware()`. GPUs with no
  spec are skipped. An H100 or H200 whose form factor is not stated is taken as SXM.
- model: Llama-3.1 and Llama-3.3 have Llama 3's architecture (llama3-8b/70b/405b); DeepSeek-R1
  (and R1-0528) has DeepSeek-V3's (deepseek-v3). Llama-2-70B, Mixtral-8x7B, gpt-oss-20b,
  Qwen3.5-397B-A17B and DeepSeek-V3.2 (V3 with DeepSeek Sparse Attention) have no model file.
- dtypes: FP8 variants → fp8, BF16 → bf16, NVFP4 → nvfp4, MXFP4 → mxfp4; NVIDIA's "FP4"
  (ModelOpt, TensorRT-LLM) is NVFP4. Mixed recipes keep the MoE/FFN dtype (where the weight bytes
  are) in `weights_dtype` and the source text in `precision_note`. A KV dtype that is not stated
  is None; one the collection only reads ("auto (BF16; not stated)", calibration notes) is given
  with `kv_dtype_stated=False`.
- parallelism: tp, pp, ep are one replica's. "DP attention" rows have tp=1 and `attention_dp`;
  TensorRT-LLM's attention-DP rows keep their tp_size (the rank count) with `attention_dp`. The
  GPUs of a replica are max(tp·pp, ep). Replicas come from the notes ("8 TP1 replicas", "dp=8",
  "9 instances of ...") or else from gpus / GPUs per replica (`replicas_from` says which).
- lengths: plain or nominal lengths are `lengths="fixed"`. Where requests vary, isl/osl hold the
  mean and `lengths="dataset-mean"`: DataCrunch's derived means, vLLM's ~20k/~2k centres, and for
  MLPerf the derived mean output tokens per sample of the result (the throughput row's notes; the
  latency rows of a result take it from there). MLPerf gives no input-length mean: isl is None.
- metric and value: names in `METRICS`; values in seconds or tokens/s. Per-node rates are divided
  by the GPUs per node of the hardware text, so they read per GPU.
- skipped besides hardware and model: FITTED (the vLLM ITL fit parameters), SECONDARY (a quote of
  another blog), SIMULATED (SGLang's MTP estimate), a duplicate of another row, and rows whose
  dtype, parallelism, lengths, load or metric are not stated.

`compare(cases, predict_fn, fitted=...)` and `summarize(...)` judge a serving simulator supplied
by the caller (`predict_fn(case) -> float | None`, in the case's metric and units); rows named in
`fitted` informed a constant and are summarized apart, never counted as validation.
"""
from __future__ import annotations

import csv
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Callable, Iterable, Mapping

from perfmodel.errors import InputError
from perfmodel.hardware import Hardware, hardware
from perfmodel.report.tables import format_table
from perfmodel.workloads.models import list_models

from perfmodel.validation.measurements import DATA_DIR

SERVING_CSV = DATA_DIR / "serving_measurements.csv"

SOURCE_KINDS = {"MLP": "MLPerf", "TRT": "TRT", "SGL": "SGL", "DCR": "DCR", "VLB": "VLB"}
ENGINES = ("vllm", "sglang", "tensorrt-llm")

# Normalised metrics: throughputs in tokens/s (system-wide unless the name says per GPU or per
# user), latencies in seconds. "per_user" is the decode speed a user sees (excluding the
# context phase); "per_user_with_ctx" is output tokens over the whole request (trtllm-bench's
# "[w/ ctx]").
THROUGHPUT_METRICS = (
    "output_tokens_per_s", "output_tokens_per_s_per_gpu", "output_tokens_per_s_per_user",
    "output_tokens_per_s_per_user_with_ctx", "input_tokens_per_s_per_gpu", "total_tokens_per_s",
    "total_tokens_per_s_per_gpu")
LATENCY_METRICS = (
    "ttft_mean_s", "ttft_median_s", "ttft_p99_s", "tpot_mean_s", "tpot_median_s", "tpot_p99_s",
    "itl_mean_s", "itl_median_s", "itl_p99_s", "e2e_mean_s", "e2e_median_s", "e2e_p99_s")
METRICS = THROUGHPUT_METRICS + LATENCY_METRICS
SYSTEM_METRICS = ("output_tokens_per_s", "total_tokens_per_s")  # divide by replicas per replica

MODES = ("offline", "rate", "concurrency", "mlperf-server", "mlperf-interactive", "saturated",
         "sweep-max")
LENGTHS = ("fixed", "dataset-mean")

TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0}
RATE_UNITS = {"tokens/s": 1.0, "tokens/s/gpu": 1.0, "tokens/s/user": 1.0, "tokens/s/node": 1.0}
SUFFIXES = {"": 1.0, "k": 1e3, "m": 1e6}


# ---------------------------------------------------------------------------------------------
# Values and units

_NUMBER = re.compile(r"([+-]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][+-]?\d+)?)\s*([kKmM]?)")


def parse_value(text: str) -> float:
    """The number a source printed: thousands separators ("22,282"), K/M suffixes ("26.2K",
    "2.2k") and scientific notation ("1.80e-05") as written."""
    return parse_value_resolution(text)[0]


def parse_value_resolution(text: str) -> tuple[float, float | None]:
    """(value, ± resolution) of a printed number; the resolution is half a unit of the last digit
    for suffixed headlines (26.2K is 26200 ± 50) and None for numbers printed in full."""
    s = text.strip()
    m = _NUMBER.fullmatch(s)
    if not m or not re.search(r"\d", m.group(1)):
        raise ValueError(f"not a number: {text!r}")
    digits, suffix = m.group(1), m.group(2).lower()
    value = float(digits.replace(",", "")) * SUFFIXES[suffix]
    if not suffix:
        return value, None
    mantissa = digits.split("e")[0].split("E")[0]
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    return value, 0.5 * 10.0 ** -decimals * SUFFIXES[suffix]


def unit_scale(unit: str) -> float:
    """Factor from a source's unit to SI (seconds, tokens/s): ns, µs/us, ms, s, tokens/s[/...],
    "ms per input token" (seconds per token)."""
    u = unit.strip()
    if u in TIME_UNITS:
        return TIME_UNITS[u]
    if u.lower() in RATE_UNITS:
        return RATE_UNITS[u.lower()]
    m = re.fullmatch(r"(\S+) per input token", u)
    if m and m.group(1) in TIME_UNITS:
        return TIME_UNITS[m.group(1)]
    raise ValueError(f"unknown unit {unit!r}")


def to_si(text: str, unit: str) -> float:
    return parse_value(text) * unit_scale(unit)


# ---------------------------------------------------------------------------------------------
# Cases


@dataclass(frozen=True)
class ServingCase:
    id: str
    source: str                      # MLPerf | TRT | SGL | DCR | VLB
    engine: str                      # vllm | sglang | tensorrt-llm
    engine_version: str              # the source's engine text
    hardware: Hardware
    model: str                       # built-in model name
    weights_dtype: str
    kv_dtype: str | None             # None: not stated
    kv_dtype_stated: bool
    tp: int
    pp: int
    ep: int
    attention_dp: bool
    gpus: int | None                 # GPUs of the whole measured system, where a number
    replicas: int | None
    replicas_from: str               # notes | gpus text | gpus/(tp*pp) | gpus/ep | unknown
    isl: float | None
    osl: float | None
    lengths: str                     # fixed | dataset-mean
    phase: str                       # both | prefill | decode (a disaggregated phase alone)
    mode: str                        # see MODES
    metric: str                      # see METRICS
    value: float                     # SI: seconds or tokens/s
    value_resolution: float | None   # ± of a suffixed headline, SI
    isl_range: tuple[int, int] | None = None  # a "random uniform lo..hi" draw (bench_serving)
    osl_range: tuple[int, int] | None = None
    max_batch_per_rank: int | None = None     # engine limits the source states ("max_batch_size
    max_num_tokens: int | None = None         # 896/rank, max_num_tokens 2048")
    mem_fraction: float | None = None         # the launch's --mem-fraction-static (SGLang)
    rate: float | None = None        # requests/s (Poisson)
    concurrency: int | None = None
    target_qps: float | None = None  # MLPerf Server/Interactive
    scheduled_qps: float | None = None
    num_requests: int | None = None
    batch_per_gpu: int | None = None
    ttft_limit_s: float | None = None   # MLPerf p99 limits
    tpot_limit_s: float | None = None
    spec_decoding: str = "unknown"   # none | mtp | eagle | unknown (not stated)
    draft_tokens: int | None = None
    spec_acceptance: float | None = None
    relaxed_acceptance: bool = False
    disaggregated: bool = False
    division: str | None = None      # MLPerf: closed | open | preview
    precision_note: str = ""
    assumptions: tuple[str, ...] = ()
    raw: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def gpus_per_replica(self) -> int:
        return max(self.tp * self.pp, self.ep)

    @property
    def moe_tp(self) -> int:
        """Tensor parallelism inside each expert (TensorRT-LLM's MoE TP = ranks / EP)."""
        return max(1, self.gpus_per_replica // (self.ep * self.pp))

    @property
    def value_per_replica(self) -> float | None:
        """A system-wide rate divided by the replicas (what one model instance delivered); other
        metrics unchanged; None where the replica count is not known."""
        if self.metric not in SYSTEM_METRICS:
            return self.value
        return self.value / self.replicas if self.replicas else None

    @property
    def is_throughput(self) -> bool:
        return self.metric in THROUGHPUT_METRICS

    @property
    def hw(self) -> str:
        return self.hardware.name


@dataclass(frozen=True)
class Skipped:
    id: str
    reason: str
    source: str = ""
    hardware: str = ""               # the spec's name, or a short label of the source's GPU
    model: str = ""                  # the built-in name, or a short label of the source's model
    reasons: tuple[str, ...] = ()    # every check the row failed, `reason` first


# ---------------------------------------------------------------------------------------------
# Field rules

# (pattern on the lower-cased hardware text, spec name or None, label)
_HARDWARE_RULES = (
    (r"gh200", None, "GH200"),
    (r"gb300", "GB300", "GB300"),
    (r"h800", "H800-SXM", "H800"),
    (r"h20\b", None, "H20"),
    (r"gb200", "GB200", "GB200"),
    (r"b300", "B300", "B300"),
    (r"b200", "B200", "B200"),
    (r"h200", "H200-SXM", "H200"),
    (r"h100.*pcie", "H100-PCIe", "H100-PCIe"),
    (r"h100", "H100-SXM", "H100"),
    (r"a100", "A100-SXM", "A100"),
)

# (pattern on the lower-cased model text, built-in model or None, label)
_MODEL_RULES = (
    (r"llama-2-70b", "llama2-70b", "Llama-2-70B"),
    (r"mixtral-8x7b", "mixtral-8x7b", "Mixtral-8x7B"),
    (r"gpt-oss-20b", None, "gpt-oss-20b"),
    (r"qwen3\.5-397b", None, "Qwen3.5-397B-A17B"),
    (r"deepseek[- ]v3\.2", None, "DeepSeek-V3.2"),
    (r"deepseek.*\b(?:r1|v3)\b", "deepseek-v3", "DeepSeek-V3/R1"),
    (r"llama-3\.[13]-8b", "llama3-8b", "Llama-3.1-8B"),
    (r"llama-3\.[13]-70b", "llama3-70b", "Llama-3.x-70B"),
    (r"llama-3\.[13]-405b", "llama3-405b", "Llama-3.1-405B"),
)
NO_MODEL_FILE = ("gpt-oss-20b", "Qwen3.5-397B-A17B", "DeepSeek-V3.2")


def first_rule(text: str, rules) -> tuple[str | None, str]:
    """(name or None, short label): the first (pattern, name, label) rule whose pattern is found
    in the lower-cased text, else None and the text before any parenthesis."""
    t = text.lower()
    for pattern, name, label in rules:
        if re.search(pattern, t):
            return name, label
    return None, text.split("(")[0].strip() or text


def resolve_hardware(text: str) -> tuple[str | None, str]:
    """(spec name or None, short label) for a source's hardware text."""
    return first_rule(text, _HARDWARE_RULES)


def resolve_model(text: str) -> tuple[str | None, str]:
    """(built-in model name or None, short label) for a source's model text."""
    return first_rule(text, _MODEL_RULES)


def engine_of(text: str) -> str | None:
    """The serving engine named first in the engine text (vLLM + Dynamo is vLLM; Dynamo +
    TensorRT-LLM is TensorRT-LLM)."""
    t = text.lower()
    hits = [(t.find(name), name) for name in ENGINES if name in t]
    return min(hits)[1] if hits else None


def weights_dtype_of(text: str) -> tuple[str | None, str, str]:
    """(dtype, precision note, assumption) for a weights-dtype text."""
    t = text.lower().strip()
    if t.startswith("not stated") or not t:
        return None, "", ""
    mixed = text if ("+" in t or "selected" in t or "mixed" in t
                     or ("moe" in t and not t.startswith("fp8 gemm/moe"))) else ""
    if "mxfp4" in t:
        return "mxfp4", mixed, ""
    if "nvfp4" in t:
        return "nvfp4", mixed, ""
    if t.startswith("fp4"):
        return "nvfp4", mixed, "weights: NVIDIA's FP4 (ModelOpt/TensorRT-LLM) read as NVFP4"
    if t.startswith("fp8"):
        return "fp8", mixed, ("weights: FP8 assumed (source says not stated)"
                              if "not stated" in t else "")
    if t.startswith("bf16"):
        return "bf16", mixed, ""
    return None, "", ""


def kv_dtype_of(text: str) -> tuple[str | None, bool]:
    """(dtype or None, stated) for a KV-cache text."""
    t = text.lower().strip()
    if t.startswith(("not stated", "unspecified")) or not t:
        return None, False  # what the text goes on to say is about attention, not the cache
    dtype = "fp8" if "fp8" in t else "bf16" if ("bf16" in t or "fp16" in t) else None
    read = any(w in t for w in ("not stated", "auto", "calibration"))
    return dtype, dtype is not None and not read


def _leading_int(text: str) -> int | None:
    m = re.match(r"\s*(\d+)\b", text)
    return int(m.group(1)) if m else None


def length_of(text: str) -> tuple[float | None, str, str]:
    """(tokens or None, 'fixed' | 'dataset-mean', assumption) for an isl/osl text."""
    t = text.strip()
    low = t.lower()
    m = re.search(r"mean (\d+(?:\.\d+)?) \(derived\)", low)
    if m:
        return float(m.group(1)), "dataset-mean", ""
    m = re.match(r"~(\d+(?:\.\d+)?)k\b", low)
    if m:
        return (float(m.group(1)) * 1000, "dataset-mean",
                f"lengths: '{t}' is a nominal centre; requests vary around it")
    m = re.search(r"doc sections use (\d+)k", low)
    if m:
        n = int(m.group(1)) * 1024
        return float(n), "fixed", f"lengths: {n} assumed ('{t}')"
    n = _leading_int(t)
    if n is not None:
        if "random" in low or "range_ratio" in low:
            return float(n), "dataset-mean", f"lengths: {n} is nominal ('{t}'); requests vary"
        if "real dataset" in low:
            return float(n), "fixed", f"lengths: {n} nominal for a real dataset ('{t}')"
        return float(n), "fixed", ""
    return None, "dataset-mean" if "variable" in low else "fixed", ""


_UNIFORM = re.compile(r"random uniform (\d+)\s*\.\.\s*(\d+)")


def length_range_of(text: str) -> tuple[int, int] | None:
    """(lo, hi) of a "random uniform lo..hi" length text (sglang.bench_serving's random dataset
    with range_ratio 0 draws each length uniformly in [1, N]), else None."""
    m = _UNIFORM.search(text.lower())
    if not m:
        return None
    lo, hi = int(m.group(1)), int(m.group(2))
    return (lo, hi) if 1 <= lo <= hi else None


def engine_limits_of(text: str) -> dict:
    """The scheduler limits a load description states: max_batch_size per rank and
    max_num_tokens (TensorRT-LLM's trtllm-bench recipes)."""
    low = text.lower()
    out: dict = {}
    m = re.search(r"max_batch_size (\d+)", low)
    if m:
        out["max_batch_per_rank"] = int(m.group(1))
    m = re.search(r"max_num_tokens (\d+)", low)
    if m:
        out["max_num_tokens"] = int(m.group(1))
    return out


def mem_fraction_of(notes: str) -> float | None:
    """The memory fraction a launch command in the notes sets: SGLang's --mem-fraction-static
    (or its prefix --mem-frac, which argparse accepts), None where none is set."""
    m = re.search(r"--mem-frac(?:tion-static|tion|t)?[ =]([0-9.]+)", notes)
    if not m:
        return None
    x = float(m.group(1))
    return x if 0 < x <= 1 else None


def phase_of(metric_text: str, osl_text: str) -> str:
    m, o = metric_text.lower(), osl_text.lower()
    if "prefill" in m or "n/a (prefill" in o:
        return "prefill"
    if "decode" in m or "n/a (decode" in o:
        return "decode"
    return "both"


def metric_of(metric_text: str, unit: str) -> str | None:
    """The normalised metric of a row, or None where it is not one of METRICS."""
    m, u = metric_text.lower(), unit.strip().lower()
    if m.startswith("fitted"):
        return None
    stat = next((s for s in ("mean", "median", "p99") if re.search(rf"\b{s}\b", m)), None)
    if u in TIME_UNITS:
        for key in ("ttft", "tpot", "itl"):
            if m.startswith(key):
                return f"{key}_{stat}_s" if stat else None
        if "request latency" in m:
            return f"e2e_{'mean' if 'average' in m else stat}_s" if ("average" in m or stat) \
                else None
        return None
    if u not in RATE_UNITS:
        return None
    if "total" in m and ("input+output" in m or "tgs" in m or u != "tokens/s"):
        kind = "total"
    elif m.startswith("total tokens"):
        kind = "total"
    elif "input" in m or "prefill" in m:
        kind = "input"
    elif "output" in m or "decode" in m:
        kind = "output"
    else:
        return None
    if u in ("tokens/s/gpu", "tokens/s/node"):
        return f"{kind}_tokens_per_s_per_gpu"
    if u == "tokens/s/user":
        if kind != "output":
            return None
        return "output_tokens_per_s_per_user" + ("_with_ctx" if "w/ ctx" in m else "")
    if kind == "input":
        return None  # a system-wide prefill rate: not in METRICS
    return f"{kind}_tokens_per_s"


def gpus_per_node_of(hardware_text: str) -> int | None:
    m = re.search(r"(\d+)\s*x\s*\w+\s*/\s*node", hardware_text.lower())
    return int(m.group(1)) if m else None


def _mode(text: str) -> dict:
    """Load description: mode plus rate / concurrency / target QPS / request count / batch."""
    t = text.strip()
    low = t.lower()
    out: dict = {}
    m = re.search(r"(\d[\d,]*) (?:queries|prompts|requests)", low)
    if m:
        out["num_requests"] = int(m.group(1).replace(",", ""))
    m = re.match(r"(server|interactive): poisson arrivals, target_qps=([\d.]+)"
                 r"(?: \(scheduled ([\d.]+))?", low)
    if m:
        out.update(mode=f"mlperf-{m.group(1)}", target_qps=float(m.group(2)),
                   scheduled_qps=float(m.group(3)) if m.group(3) else None)
        return out
    if low.startswith("offline"):
        return {**out, "mode": "offline"}
    m = re.search(r"poisson request rate ([\d.]+) req/s", low)
    if m:
        return {**out, "mode": "rate", "rate": float(m.group(1))}
    if "swept" in low or "sweep" in low:
        return {**out, "mode": "sweep-max"}
    m = re.match(r"(?:concurrency|batch size|batch) (\d+)", low)
    if m:
        n = int(m.group(1))
        if "per device" in low:
            return {**out, "mode": "saturated", "batch_per_gpu": n}
        return {**out, "mode": "concurrency", "concurrency": n}
    if "saturated" in low or "fill" in low or "per device per batch" in low:
        return {**out, "mode": "saturated"}
    return {**out, "mode": None}


def _spec_decoding(text: str, source: str) -> dict:
    t = text.lower()
    out: dict = {"relaxed_acceptance": "relax" in t and "acceptance" in t}
    m = re.search(r"~?(\d+)% draft acceptance", t)
    if m:
        out["spec_acceptance"] = int(m.group(1)) / 100
    if re.search(r"without mtp|no mtp|mtp off|no speculative-decoding", t):
        return {**out, "spec_decoding": "none"}
    m = (re.search(r"num_nextn_predict_layers (\d+)", t) or re.search(r"(\d+) nextn layers", t)
         or re.search(r"\bmtp ?=? ?(\d+)\b", t))
    if m:
        return {**out, "spec_decoding": "mtp", "draft_tokens": int(m.group(1))}
    if "mtp" in t and ("on" in t.split() or "speculative" in t):
        return {**out, "spec_decoding": "mtp"}
    m = re.search(r"eagle-?\d*", t)
    if m:
        d = re.search(r"(?:draft|speculative)[_ ](?:len|tokens|length)[= ](\d+)", t)
        return {**out, "spec_decoding": "eagle", "draft_tokens": int(d.group(1)) if d else None}
    if source == "DCR":
        return {**out, "spec_decoding": "none"}  # the launch command is given; no draft flags
    return {**out, "spec_decoding": "unknown"}


def _replicas(row: dict, notes: str, gpus: int | None, per_replica: int) -> tuple[int | None,
                                                                                   str, str]:
    """(replicas, where from, assumption)."""
    n = notes
    g = row["gpus"].lower()
    found = None
    for pattern in (r"(\d+) (?:independent )?TP\d+ replicas", r"(\d+) replicas of ",
                    r"(\d+) instances of ", r"\bdp=(\d+)"):
        m = re.search(pattern, n)
        if m:
            found = int(m.group(1))
            break
    if found is None and re.search(r"single (?:\S+ instance|gpu|gh200)", n.lower()):
        found = 1
    where = "notes"
    if found is None:
        m = re.search(r"(\d+) instances? x (\d+) gpus", g)
        if m:
            found, where = int(m.group(1)), "gpus text"
    if found is not None:
        note = ""
        if gpus and found * per_replica != gpus:
            note = (f"replicas: notes say {found} but gpus/(GPUs per replica) = "
                    f"{gpus}/{per_replica}")
        return found, where, note
    if gpus and gpus % per_replica == 0:
        return gpus // per_replica, "gpus/(tp*pp)" if per_replica == (
            _int(row["tp"], 1) * _int(row["pp"], 1)) else "gpus/ep", ""
    return None, "unknown", ""


def _int(text: str, default: int | None = None) -> int | None:
    t = text.strip()
    return int(t) if t.isdigit() else default


def _ep_of(text: str, gpus_text: str) -> tuple[int | None, str]:
    t = text.strip()
    if not t:
        return 1, ""
    n = _leading_int(t)
    if n is not None:
        return n, (f"ep: {n} ('{t}')" if "assumed" in t.lower() else "")
    m = re.search(r"DEP(\d+)", t)
    if m:
        return int(m.group(1)), ""
    m = re.search(r"instances of (\d+) ranks", gpus_text)
    if m and "per-instance" in t.lower():
        return int(m.group(1)), f"ep: {m.group(1)} from the gpus text ('{gpus_text}')"
    return None, ""


def _lower_notes(row: dict) -> str:
    return " ".join(row[k] for k in ("notes", "metric", "engine+version", "gpus",
                                     "concurrency_or_rate", "tp")).lower()


def _qualifier(row: dict) -> str | None:
    """Skip reason for rows that are not single measurements of their own."""
    notes, metric = row["notes"], row["metric"]
    if "FITTED" in notes or metric.lower().startswith("fitted"):
        return "FITTED by the source: a parameter of a linear ITL fit, not a measurement"
    if "SECONDARY" in notes:
        return "SECONDARY: quoted from another benchmark, setup not stated"
    if re.search(r"same as .* row above", notes):
        return "duplicate of another row (same measurement)"
    if notes.startswith("SIMULATED") or "SIMULATED" in metric:
        return "SIMULATED by the source: not a real run"
    return None


def _mlperf_osl(rows: list[dict]) -> dict[str, tuple[float, str]]:
    """Derived mean output tokens per sample of each MLPerf result (keyed by `source`), from the
    result's throughput row."""
    out = {}
    for r in rows:
        m = re.search(r"derived mean output tokens/sample = (?:tokens/s / samples/s = )?"
                      r"([\d.]+)", r["notes"])
        if m:
            out[r["source"]] = (float(m.group(1)), r["id"])
    return out


def _case(row: dict, mlperf_osl: dict) -> ServingCase | Skipped:
    rid = row["id"]
    prefix = rid.split("-")[0]
    if prefix not in SOURCE_KINDS:
        raise InputError(f"{SERVING_CSV.name}: row {rid}: unknown id prefix '{prefix}'")
    source = SOURCE_KINDS[prefix]
    value_raw, resolution = parse_value_resolution(row["value"])
    if row["value_num"].strip():
        if abs(value_raw - float(row["value_num"])) > 1e-9 * max(1.0, abs(value_raw)):
            raise InputError(f"{SERVING_CSV.name}: row {rid}: value '{row['value']}' reads "
                             f"{value_raw}, value_num says {row['value_num']}")
    notes = row["notes"]
    assumptions: list[str] = []
    reasons: list[str] = []

    qualifier = _qualifier(row)
    if qualifier:
        reasons.append(qualifier)
    spec_name, hw_label = resolve_hardware(row["hardware"])
    if spec_name is None:
        reasons.append(f"no hardware spec: {hw_label}")
    model, model_label = resolve_model(row["model"])
    if model is None:
        reasons.append(f"no model file: {model_label}" if model_label in NO_MODEL_FILE
                       else f"model not recognised: {model_label}")
    elif model not in list_models():
        reasons.append(f"no model file: {model}")
    engine = engine_of(row["engine+version"])
    if engine is None:
        reasons.append("engine not recognised")
    weights, precision_note, w_assumption = weights_dtype_of(row["weights_dtype"])
    if weights is None:
        reasons.append("weights dtype not stated")
    if w_assumption:
        assumptions.append(w_assumption)
    if weights == "fp8" and model == "deepseek-v3":
        precision_note = precision_note or "block-scaled FP8 (DeepSeek's native checkpoint)"
    kv, kv_stated = kv_dtype_of(row["kv_dtype"])
    if kv is not None and not kv_stated:
        assumptions.append(f"kv dtype: {kv} read from '{row['kv_dtype']}'")

    tp_text = row["tp"].strip()
    attention_dp = ("dp attention" in tp_text.lower() or "attention dp" in notes.lower()
                    or "enable_attention_dp" in notes or bool(re.search(r"\bDEP\d", row["ep"])))
    tp = 1 if tp_text.lower() == "dp attention" else _int(tp_text)
    if tp is None:
        reasons.append(f"parallelism not stated (tp '{tp_text}')")
    pp = _int(row["pp"], 1 if not row["pp"].strip() else None)
    if pp is None:
        reasons.append(f"parallelism not stated (pp '{row['pp']}')")
    ep, ep_assumption = _ep_of(row["ep"], row["gpus"])
    if ep is None:
        reasons.append(f"parallelism not stated (ep '{row['ep']}')")
    if ep_assumption:
        assumptions.append(ep_assumption)

    metric = metric_of(row["metric"], row["unit"])
    if metric is None and not qualifier:
        reasons.append(f"metric not expressible: '{row['metric']}' [{row['unit']}]")
    if (metric == "output_tokens_per_s_per_user" and source == "TRT"
            and 'trtllm-bench "Expected Results"' in notes):
        metric += "_with_ctx"
        assumptions.append("metric: trtllm-bench's per-user throughput includes the context "
                           "phase (it equals osl / average request latency of the same run)")
    phase = phase_of(row["metric"], row["osl"])
    value = value_raw * unit_scale(row["unit"])
    resolution = resolution * unit_scale(row["unit"]) if resolution is not None else None
    if row["unit"].strip().lower() == "tokens/s/node":
        per_node = gpus_per_node_of(row["hardware"])
        if per_node is None:
            reasons.append("per-node rate, GPUs per node not stated")
        else:
            value /= per_node
            resolution = resolution / per_node if resolution is not None else None
            assumptions.append(f"value: per node / {per_node} GPUs per node (hardware text)")

    isl, isl_kind, a = length_of(row["isl"])
    assumptions += [a] if a else []
    osl, osl_kind, a = length_of(row["osl"])
    assumptions += [a] if a else []
    lengths = "dataset-mean" if "dataset-mean" in (isl_kind, osl_kind) else "fixed"
    if source == "MLPerf":
        hit = mlperf_osl.get(row["source"])
        if hit is None:
            reasons.append("MLPerf result without a derived mean output length")
        else:
            osl = hit[0]
            lengths = "dataset-mean"
            if hit[1] != rid:
                assumptions.append(f"osl: mean output tokens/sample of the result's throughput "
                                   f"row {hit[1]}")
        assumptions.append("isl: MLPerf dataset lengths; no input-length mean in the data")
    elif isl is None:
        reasons.append("input length not stated")
    elif osl is None and phase == "both":
        reasons.append("output length not stated")

    load = _mode(row["concurrency_or_rate"])
    if load["mode"] is None:
        reasons.append(f"load not stated ('{row['concurrency_or_rate']}')")

    m = re.match(r"\s*(\d+)\b(?!\s*-)", row["gpus"])  # "72 (9 decode nodes)"; not "16-24"
    gpus = int(m.group(1)) if m else None
    replicas, replicas_from = None, "unknown"
    if tp is not None and pp is not None and ep is not None:
        replicas, replicas_from, a = _replicas(row, notes, gpus, max(tp * pp, ep))
        assumptions += [a] if a else []
    disaggregated = any(k in _lower_notes(row) for k in ("disaggregat", "dynamo",
                                                          "assumed unlimited", "in isolation"))
    if disaggregated and source == "MLPerf" and replicas_from != "notes":
        assumptions.append("replicas: disaggregated; the prefill/decode split is not known")

    if reasons:
        return Skipped(rid, reasons[0], source, spec_name or hw_label, model or model_label,
                       tuple(reasons))
    if spec_name in ("H100-SXM", "H200-SXM") and "sxm" not in row["hardware"].lower():
        assumptions.append(f"hardware: '{row['hardware']}' taken as {spec_name}")
    m = re.search(r"(closed|open) division", notes)
    division = ("preview" if "preview category" in notes else m.group(1) if m else None) \
        if source == "MLPerf" else None
    ttft_limit = tpot_limit = None
    m = re.search(r"p99 TTFT<=([\d.]+)(m?s), p99 TPOT<=([\d.]+)(m?s)", notes)
    if m:
        ttft_limit = round(float(m.group(1)) * TIME_UNITS[m.group(2)], 12)
        tpot_limit = round(float(m.group(3)) * TIME_UNITS[m.group(4)], 12)
    spec = _spec_decoding(" ".join((notes, row["metric"])), source)
    return ServingCase(
        id=rid, source=source, engine=engine, engine_version=row["engine+version"],
        hardware=hardware(spec_name), model=model, weights_dtype=weights, kv_dtype=kv,
        kv_dtype_stated=kv_stated, tp=tp, pp=pp, ep=ep, attention_dp=attention_dp, gpus=gpus,
        replicas=replicas, replicas_from=replicas_from, isl=isl, osl=osl, lengths=lengths,
        isl_range=length_range_of(row["isl"]), osl_range=length_range_of(row["osl"]),
        **engine_limits_of(row["concurrency_or_rate"]), mem_fraction=mem_fraction_of(notes),
        phase=phase, mode=load.pop("mode"), metric=metric, value=value,
        value_resolution=resolution, ttft_limit_s=ttft_limit, tpot_limit_s=tpot_limit,
        disaggregated=disaggregated, division=division, precision_note=precision_note,
        assumptions=tuple(assumptions), raw=dict(row), **load, **spec)


def load_serving_cases(path: str | Path = SERVING_CSV) -> tuple[list[ServingCase], list[Skipped]]:
    """Every row of the serving CSV as a case or a skip with its reason, in file order."""
    path = Path(path)
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    mlperf_osl = _mlperf_osl([r for r in rows if r["id"].startswith("MLP")])
    cases: list[ServingCase] = []
    skipped: list[Skipped] = []
    seen = set()
    for r in rows:
        if r["id"] in seen:
            raise InputError(f"{path.name}: row id {r['id']} appears twice")
        seen.add(r["id"])
        c = _case(r, mlperf_osl)
        (skipped if isinstance(c, Skipped) else cases).append(c)
    return cases, skipped


# ---------------------------------------------------------------------------------------------
# Summary of what is expressible


def id_ranges(ids: Iterable[str]) -> str:
    """'MLP-0201..0206, MLP-0219' for consecutive ids of one prefix."""
    parsed = sorted((i.split("-")[0], int(i.split("-")[1]), i) for i in ids)
    out: list[list] = []
    for prefix, n, rid in parsed:
        if out and out[-1][0] == prefix and out[-1][2] == n - 1:
            out[-1][2] = n
        else:
            out.append([prefix, n, n, rid])
    width = {p: len(rid.split("-")[1]) for p, _, _, rid in out}
    return ", ".join(f"{p}-{a:0{width[p]}d}" + (f"..{b:0{width[p]}d}" if b != a else "")
                     for p, a, b, _ in out)


def summary_table(cases: list[ServingCase], skipped: list[Skipped]) -> str:
    """Counts per source kind × GPU × model of expressible and skipped rows, then the skipped
    rows by reason."""
    groups: dict[tuple, Counter] = {}
    for c in cases:
        groups.setdefault((c.source, c.hw, c.model), Counter())[c.lengths] += 1
    for s in skipped:
        groups.setdefault((s.source, s.hardware, s.model), Counter())["skipped"] += 1
    order = {k: i for i, k in enumerate(SOURCE_KINDS.values())}
    rows = []
    for (src, hw, model), n in sorted(groups.items(), key=lambda kv: (order[kv[0][0]],
                                                                        kv[0][1:])):
        cases_n = n["fixed"] + n["dataset-mean"]
        rows.append([src, hw, model, cases_n, n["fixed"], n["dataset-mean"], n["skipped"]])
    total = [sum(r[i] for r in rows) for i in range(3, 7)]
    rows.append(["all", "", "", *total])
    lines = [f"serving measurements: {len(cases) + len(skipped)} rows, {len(cases)} expressible, "
             f"{len(skipped)} skipped",
             format_table(["source", "GPU", "model", "cases", "fixed len", "dataset len",
                           "skipped"], rows)]
    by_reason: dict[str, list[str]] = {}
    for s in skipped:
        by_reason.setdefault(s.reason, []).append(s.id)
    lines.append("\nskipped rows by reason (first failed check)")
    lines.append(format_table(["reason", "n", "rows"],
                              [[r, len(ids), id_ranges(ids)] for r, ids in
                               sorted(by_reason.items(), key=lambda kv: -len(kv[1]))]))
    metrics = Counter(c.metric for c in cases)
    lines.append("\nexpressible rows by metric")
    lines.append(format_table(["metric", "n"], sorted(metrics.items(), key=lambda kv: -kv[1])))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Comparison against a caller's serving simulator

GROUP_KEYS: dict[str, Callable[[ServingCase], str]] = {
    "source": lambda c: c.source,
    "hardware": lambda c: c.hw,
    "model": lambda c: c.model,
    "lengths": lambda c: c.lengths,
    "metric": lambda c: c.metric,
    "engine": lambda c: c.engine,
    "mode": lambda c: c.mode,
}


@dataclass(frozen=True)
class ServingComparison:
    case: ServingCase
    predicted: float | None   # None: the simulator declined the row
    fitted: bool = False

    @property
    def error(self) -> float | None:
        """Signed relative error predicted / measured − 1."""
        return None if self.predicted is None else self.predicted / self.case.value - 1.0

    def to_dict(self) -> dict:
        c = self.case
        return {"id": c.id, "source": c.source, "hardware": c.hw, "model": c.model,
                "metric": c.metric, "lengths": c.lengths, "measured": c.value,
                "predicted": self.predicted, "error": self.error, "fitted": self.fitted}


def compare(cases: Iterable[ServingCase], predict_fn: Callable[[ServingCase], float | None],
            fitted: Iterable[str] = ()) -> list[ServingComparison]:
    """predict_fn(case) in the case's metric and SI units, or None where it cannot predict it.
    `fitted` names the rows that informed a fitted constant: they are marked and summarized
    apart. Naming a row that is not among the cases is an error."""
    cases = list(cases)
    fitted = set(fitted)
    unknown = fitted - {c.id for c in cases}
    if unknown:
        raise ValueError(f"fitted rows not among the cases: {sorted(unknown)}")
    out = []
    for c in cases:
        p = predict_fn(c)
        out.append(ServingComparison(c, None if p is None else float(p), c.id in fitted))
    return out


def summarize(comparisons: list[ServingComparison],
              by: str | tuple[str, ...] | Callable[[ServingCase], tuple] = "source") -> list[dict]:
    """One row per group × judged|fitted: n (predicted rows), n_unpredicted, MAPE, median and
    max absolute error, bias (mean signed error). `by`: a key of GROUP_KEYS, a tuple of them, or
    a function of the case returning a tuple."""
    if callable(by):
        key_fn = by
        names: tuple[str, ...] = ("group",)
    else:
        names = (by,) if isinstance(by, str) else tuple(by)
        unknown = [n for n in names if n not in GROUP_KEYS]
        if unknown:
            raise ValueError(f"unknown group keys {unknown}; known: {sorted(GROUP_KEYS)}")

        def key_fn(c):
            return tuple(GROUP_KEYS[n](c) for n in names)
    groups: dict[tuple, list[ServingComparison]] = {}
    for cmp in comparisons:
        key = (*key_fn(cmp.case), "fitted" if cmp.fitted else "judged")
        groups.setdefault(key, []).append(cmp)
    rows = []
    for key, cs in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0]))):
        errs = [c.error for c in cs if c.error is not None]
        ape = [abs(e) for e in errs]
        group = (dict(zip(names, key[:-1])) if not callable(by) else {"group": key[:-1]})
        rows.append({**group, "rows": key[-1], "n": len(errs),
                     "n_unpredicted": len(cs) - len(errs),
                     "mape": sum(ape) / len(ape) if ape else None,
                     "median_ape": median(ape) if ape else None,
                     "max_ape": max(ape) if ape else None,
                     "bias": sum(errs) / len(errs) if errs else None})
    return rows


def comparison_report(comparisons: list[ServingComparison],
                      groupings=("source", "hardware", "model", "lengths")) -> str:
    """Plain-text tables of `summarize` for each grouping, judged and fitted rows apart."""
    def pct(x):
        return "-" if x is None else f"{x:.1%}"
    out = []
    for g in groupings:
        rows = summarize(comparisons, g)
        out.append(format_table([g, "rows", "n", "unpredicted", "MAPE", "median", "max", "bias"],
                                [[r[g], r["rows"], r["n"], r["n_unpredicted"], pct(r["mape"]),
                                  pct(r["median_ape"]), pct(r["max_ape"]), pct(r["bias"])]
                                 for r in rows]))
    return "\n\n".join(out)


def main() -> None:
    cases, skipped = load_serving_cases()
    print(summary_table(cases, skipped))


if __name__ == "__main__":
    main()
