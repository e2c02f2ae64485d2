"""Measured rows → (op, hardware, measured time): the published data and our own GPU results.

Rows share the columns of validate/data/public_measurements.csv (id, source, hardware, library,
op, dtype, shape_json, metric, value, unit, notes). Each row becomes a `Case` with the perfmodel
op describing the same work and the measured time in seconds, converted with the row's own
convention (FLOP for TFLOPS, bytes for GB/s). Rows the model cannot describe yet are returned
with the reason, never silently dropped. The Blackwell kernel benchmarks
(validate/data/blackwell_measurements.csv) have one mapping per family in mappings.py.
"""
from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from perfmodel import fitted, ops, yamlio
from perfmodel.units import collective_size_band
from perfmodel.errors import InputError
from perfmodel.hardware import Hardware, hardware
from perfmodel.ops.gemm_dispatch import DISPATCHES
from perfmodel.shipped import shipped_dir
from perfmodel.validation.mappings import blackwell_case, parse_shape


def _shipped(name: str) -> Path:
    """validate/<name>/ of the repository, shipped inside the wheel as perfmodel/validation/<name>
    (package data, see pyproject.toml) so `perfmodel validate` works after a plain install."""
    return shipped_dir(f"validation/{name}", f"validate/{name}")


DATA_DIR = _shipped("data")
PUBLIC_CSV = DATA_DIR / "public_measurements.csv"
BLACKWELL_CSV = DATA_DIR / "blackwell_attention.csv"  # B200 FA4/cuDNN (validate/data/SOURCES.md)
# published B200/GB200 (and one H200) kernel benchmarks (validate/data/SOURCES.md, "Added by
# perfmodel: blackwell_measurements.csv")
BLACKWELL_MEASUREMENTS_CSV = DATA_DIR / "blackwell_measurements.csv"
# NVIDIA AIConfigurator's measured TensorRT-LLM linear modules on H100/H200/B200/B300/GB200
# (validate/data/SOURCES.md "aiconfigurator_gemm.csv"; validate/import_aiconfigurator.py)
AICONFIGURATOR_CSV = DATA_DIR / "aiconfigurator_gemm.csv"
# and vLLM's per-tensor FP8 linear (CUTLASS kernels by M: ops/gemm_dispatch.py) on H100, H200
# and B200, judged only (validate/data/SOURCES.md "aiconfigurator_vllm_gemm.csv")
AICONFIGURATOR_VLLM_GEMM_CSV = DATA_DIR / "aiconfigurator_vllm_gemm.csv"
# and its fused-MoE module (DeepSeek-V3's routed experts), judged only
AICONFIGURATOR_MOE_CSV = DATA_DIR / "aiconfigurator_moe.csv"
# and vLLM's and TensorRT-LLM's MXFP4 experts of gpt-oss-120b on H100/H200
# (validate/data/SOURCES.md "aiconfigurator_moe_mxfp4.csv")
AICONFIGURATOR_MOE_MXFP4_CSV = DATA_DIR / "aiconfigurator_moe_mxfp4.csv"
# (validate/data/SOURCES.md "aiconfigurator_moe_marlin.csv")
AICONFIGURATOR_MOE_MARLIN_CSV = DATA_DIR / "aiconfigurator_moe_marlin.csv"
# and its NCCL collectives (all-reduce, all-gather, reduce-scatter, all-to-all; NCCL 2.29.2 on
# 2-8 GPUs of one NVLink domain; validate/data/SOURCES.md "aiconfigurator_nccl.csv")
AICONFIGURATOR_NCCL_CSV = DATA_DIR / "aiconfigurator_nccl.csv"
RESULTS_DIR = _shipped("results")
# the collective ops of the NCCL rows (their op class adds the message-size band:
# units.collective_size_band)
COLLECTIVE_OPS = {"allreduce": ops.Allreduce, "allgather": ops.Allgather,
                  "reduce_scatter": ops.ReduceScatter, "alltoall": ops.Alltoall}

# Rows that informed a constant: judged separately, never counted as validation. Derived from
# perfmodel/fitted.yaml's `fitted_on` lists (written by `python -m perfmodel.validation.fit`):
# row id -> the constants fitted on it.
FITTED_ROWS = {row: "perfmodel/fitted.yaml: " + ", ".join(keys)
               for row, keys in fitted.fitted_rows().items()}

KERNEL_OF_LIBRARY = {"flashattention-2": "fa2", "flashattention-3": "fa3", "cudnn": "cudnn",
                     "flashattention-4": "fa4"}
UNIT_SCALE = {"TFLOPS": 1e12, "GB/s": 1e9, "TB/s": 1e12, "ms": 1e-3, "us": 1e-6, "s": 1.0}


@dataclass(frozen=True)
class Case:
    id: str
    op_class: str
    hardware: Hardware
    op: ops.Op
    measured_time_s: float
    library: str
    fitted: str = ""  # what constant this row informed, if any


@dataclass(frozen=True)
class Skipped:
    id: str
    op_class: str
    reason: str


def _hardware(text: str) -> Hardware:
    """The built-in GPU a row's hardware text names: the text itself (a name, alias or driver
    name), else its first two words as one name ("H200 SXM 141GB" → H200-SXM)."""
    try:
        return hardware(text)
    except InputError:
        pass
    words = str(text).split()
    if len(words) > 2:
        try:
            return hardware("-".join(words[:2]))
        except InputError:
            pass
    raise ValueError(f"hardware '{text}' names no built-in GPU")


def _dtype(text: str) -> str:
    t = text.lower()
    for key, name in (("nvfp4", "nvfp4"), ("fp8", "fp8"), ("bf16", "bf16"), ("fp16", "fp16"),
                      ("fp32", "fp32")):
        if key in t:
            return name
    raise ValueError(f"unrecognized dtype '{text}'")


def _attention_flop(s: dict) -> float:
    """FlashAttention convention (validate/data/SOURCES.md): 4·B·H·Sq·Skv·D forward, ×0.5
    causal, backward 2.5×."""
    d = s.get("headdim", s.get("headdim_qk"))
    f = 4.0 * s["batch"] * s["nheads"] * s["seqlen_q"] * s["seqlen_k"] * d
    f *= 0.5 if s.get("causal") else 1.0
    return f * {"fwd": 1.0, "bwd": 2.5, "fwd+bwd": 3.5}[s["pass"]]


# Op kinds our own GPU runs emit (validate/run_gpu.sh) that are not compared with predictions yet.
_LATER = {
    "pipe_throughput": "per-SM pipe rates feed hwspecs/, not a per-op time comparison",
    "rng_gemm_concurrent": "two-stream overlap is not an op of the model yet",
    "moe_expert_ffn": "grouped expert FFN timing is not compared with the model yet",
    "wgmma_kblock": "tensor-pipe drain per k-block: evidence for the block-scaled GEMM model, "
                    "not a per-op time",
}
_STREAM_IO = {"load_stream": (1, 0), "store_stream": (0, 1), "copy": (1, 1), "triad": (2, 1)}


def _own_case(row: dict, s: dict) -> Case | Skipped | None:
    """Rows from validate/kernels/ (metric 'time', value = median ms); None for all other rows."""
    rid, kind = row["id"], row["op"]
    if kind in _LATER:
        return Skipped(rid, kind, _LATER[kind])
    if s.get("level") == "l2":
        return Skipped(rid, kind, "L2-resident stream: no op models it yet")
    if row.get("metric") != "time" or kind not in (*_STREAM_IO, "rng", "norm_fwd", "elementwise"):
        return None
    t = float(row["value"]) * UNIT_SCALE[row["unit"]]
    hw = _hardware(row["hardware"])
    if kind in _STREAM_IO:
        inputs, outputs = _STREAM_IO[kind]
        o = ops.Elementwise(elements=int(s["elements"]), dtype=_dtype(row["dtype"]),
                            inputs=inputs, outputs=outputs,
                            flop_per_element=2 if kind == "triad" else 0)
        op_class = "memory"
    elif kind == "rng":
        o = ops.Rng(elements=int(s["elements"]), bits_per_element=int(s["bits_per_element"]),
                    generator=s["generator"], output=s["output"],
                    lop3_fold=bool(s["lop3_fold"]),
                    precomputed_keys=bool(s.get("precomputed_keys", False)))
        op_class = "rng"
    elif kind == "norm_fwd":
        o = ops.Norm(rows=int(s["rows"]), cols=int(s["cols"]), dtype=_dtype(row["dtype"]),
                     kind=s.get("kind", "rmsnorm"), direction=s.get("direction", "fwd"))
        op_class = "norm_fwd"
    else:
        o = ops.Elementwise(elements=int(s["elements"]), dtype=_dtype(row["dtype"]),
                            inputs=int(s.get("inputs", 1)), outputs=int(s.get("outputs", 1)),
                            flop_per_element=float(s.get("flop_per_element", 1.0)))
        op_class = "elementwise"
    return Case(rid, op_class, hw, o, t, row["library"], FITTED_ROWS.get(rid, ""))


def _case(row: dict) -> Case | Skipped:
    rid, kind, lib = row["id"], row["op"], row["library"]
    s = parse_shape(row["shape_json"] or "")
    own = _own_case(row, s)
    if own is not None:
        return own
    mapped = blackwell_case(row, s)
    if isinstance(mapped, str):
        return Skipped(rid, kind, mapped)
    if mapped is not None:
        o, t = mapped
        return Case(rid, kind, _hardware(row["hardware"]), o, t, lib, FITTED_ROWS.get(rid, ""))
    value = float(row["value"]) * UNIT_SCALE[row["unit"]]
    hw = _hardware(row["hardware"])
    if kind in ("gemm", "gemm_fp8_blockscaled"):
        o = ops.Gemm(m=s["M"], n=s["N"], k=s["K"], dtype=_dtype(row["dtype"]),
                     fp8_scaling="block" if kind == "gemm_fp8_blockscaled" else "tensor")
        t = o.flop / value
    elif kind == "linear":  # a framework's linear module: activation cast + GEMM (ops.linear)
        dt = row["dtype"].lower()
        block = "block" in dt
        # AIConfigurator's per-tensor FP8 TensorRT-LLM rows run a dynamic activation scale:
        # its collector loads no input scale, and its SDK derives static FP8 from them by
        # taking off the separately measured amax kernel (ops/linear.py module docstring). Its
        # vLLM rows do not: at M <= 16 they take 5.8-7 us, less than an amax pass, a cast and
        # a GEMM launched apart (validate/data/SOURCES.md "aiconfigurator_vllm_gemm.csv")
        o = ops.Linear(m=s["M"], n=s["N"], k=s["K"], dtype=_dtype(dt),
                       fp8_scaling="block" if block else "tensor",
                       activation_scale="dynamic" if _dtype(dt) == "fp8" and not block
                       and "aiconfigurator" in row.get("source", "").lower()
                       and lib.startswith("TensorRT-LLM") else "static",
                       dispatch=_dispatch_of(lib))
        t = o.flop / value
        kind = "linear_" + dt.replace("_e4m3", "")
    elif kind == "moe_module":  # a framework's fused MoE over one GPU's experts (ops.moe)
        dt = row["dtype"].lower()
        # w4a16_mxfp4: MXFP4 weights converted in the mainloop to BF16 MMAs (gpt-oss's experts)
        mma, weights = ("bf16", "mxfp4") if dt == "w4a16_mxfp4" else (_dtype(dt), None)
        o = ops.Moe(tokens=s["tokens"], hidden=s["hidden"], expert_hidden=s["expert_hidden"],
                    experts=s["experts"], top_k=s["top_k"], gpus=s["ep"], dtype=mma,
                    weight_dtype=weights, routing="token_balanced",
                    # vLLM's Marlin MoE (ops.moe MOE_KERNELS), by the library's kernel name
                    # (and vLLM's OpenAI Triton MXFP4 experts, `oaitritonmxfp4experts`)
                    **({"kernel": "marlin"} if "marlin" in lib.lower() else
                       {"kernel": "triton"} if "oaitriton" in lib.lower() else {}),
                    fp8_scaling="block" if dt == "fp8_block" else "tensor",
                    # TensorRT-LLM's block-FP8 runner quantizes each GEMM's BF16 input in its
                    # own kernel (ops.moe `fp8_block_quant`)
                    **({"fp8_block_quant": "trtllm"} if dt == "fp8_block"
                       and lib.startswith("TensorRT-LLM") else {}))
        t = value
        kind = "moe_" + dt.replace("_e4m3", "")
    elif kind.startswith("attention_"):
        kernel = next((k for name, k in KERNEL_OF_LIBRARY.items() if lib.lower().startswith(name)),
                      None)
        if kernel is None:
            return Skipped(rid, kind, f"no model of library '{lib}'")
        o = ops.Attention(batch=s["batch"], heads=s["nheads"], kv_heads=s.get("nheads_kv"),
                          seq_q=s["seqlen_q"], seq_kv=s["seqlen_k"], head_dim=s["headdim"],
                          dtype=_dtype(row["dtype"]), causal=bool(s.get("causal")),
                          direction=s["pass"], kernel=kernel,
                          dropout_p=float(s.get("dropout_p", 0.0)))  # torch_bench rows carry it
        t = _attention_flop(s) / value
    elif kind == "mla_decode":
        o = ops.Attention(batch=s["batch"], heads=s["nheads_q"], kv_heads=s["nheads_kv"],
                          seq_q=s["s_q"], seq_kv=s["mean_s_k"], head_dim=s["d_qk"],
                          head_dim_v=s["d_v"], dtype="bf16", causal=bool(s["causal"]),
                          shared_kv=True)
        t = value
    elif kind == "copy":
        elements = s["M"] * s["N"]
        o = ops.Elementwise(elements=elements, dtype=_dtype(row["dtype"]), inputs=1, outputs=1,
                            flop_per_element=0)
        t = o.demand(hw).hbm_bytes / value
    elif kind in ("load_stream", "store_stream"):
        if s.get("pattern") != "A":
            return Skipped(rid, kind, "uncoalesced access pattern (DRAM locality) is not modeled")
        gib = 2**30
        o = ops.Elementwise(elements=gib // 4, dtype="fp32", flop_per_element=0,
                            inputs=1 if kind == "load_stream" else 0,
                            outputs=0 if kind == "load_stream" else 1)
        t = gib / value
    elif kind == "softmax_fwd":
        o = ops.Softmax(rows=s["M"], cols=s["N"], dtype=_dtype(row["dtype"]))
        t = o.demand(hw).hbm_bytes / value
    elif kind in COLLECTIVE_OPS:  # a library's collective, timed per call: NCCL's own choice
        o = COLLECTIVE_OPS[kind](bytes=float(s["bytes"]), gpus=int(s["gpus"]))
        t = value
        kind = f"{kind} {collective_size_band(float(s['bytes']))}"
    else:
        return Skipped(rid, kind, f"no op mapping for '{kind}'")
    if row.get("metric") == "time":  # our runs report the median time itself (as mla_decode rows)
        t = value
    op_class = {"copy": "memory", "load_stream": "memory", "store_stream": "memory"}.get(kind, kind)
    return Case(rid, op_class, hw, o, t, lib, FITTED_ROWS.get(rid, ""))


def _dispatch_of(library: str) -> str:
    """The GEMM dispatch table of a library's linear (ops.gemm_dispatch): vLLM's own CUTLASS
    table for the release the row names where one is modelled, else the best kernel."""
    match = re.match(r"vLLM (\S+)", library)
    name = f"vllm-{match[1]}" if match else "best"
    return name if name in DISPATCHES else "best"


# Columns every measurements CSV has (module docstring); `source` and `notes` may be missing
COLUMNS = ("id", "hardware", "library", "op", "dtype", "shape_json", "metric", "value", "unit")


def load_cases(path: str | Path) -> tuple[list[Case], list[Skipped]]:
    """Read one measurements CSV into cases (and the rows that could not be modeled). An
    InputError, one line naming the file, the row (its CSV line) and the column, for a file
    that is not UTF-8 or not CSV, a missing column, a short or long row, a value that is not a
    positive finite number, or a row the model cannot take."""
    p = Path(path)
    text = yamlio.read_text(p, "measurements")
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, [])
        missing = [c for c in COLUMNS if c not in header]
        if missing:
            raise InputError(f"{p}: missing column(s) {', '.join(missing)} (expected a header "
                             f"with {', '.join(COLUMNS)})")
        rows = []
        for fields in reader:
            if not fields:
                continue  # a blank line
            if len(fields) != len(header):
                raise InputError(f"{p}: row {reader.line_num}: {len(fields)} fields, expected "
                                 f"{len(header)} ({', '.join(header)})")
            rows.append((reader.line_num, dict(zip(header, fields))))
    except csv.Error as e:
        raise InputError(f"{p}: row {reader.line_num}: not CSV ({yamlio.one_line(e)})") from None
    cases, skipped = [], []
    for line, row in rows:
        try:
            _check_value(row)
            got = _case(row)
            if isinstance(got, Case) and not 0 < got.measured_time_s < math.inf:
                raise ValueError(f"value: {row['value']} {row['unit']} gives a measured time "
                                 f"of {got.measured_time_s!r} s (expected positive and finite)")
        except (KeyError, ValueError, TypeError, ZeroDivisionError, OverflowError,
                InputError) as e:
            raise InputError(f"{p}: row {line} ({row.get('id') or '?'}): "
                             f"{_problem(e)}") from None
        (cases if isinstance(got, Case) else skipped).append(got)
    return cases, skipped


def _check_value(row: dict) -> None:
    """The row's `value`: a positive finite number (a time, or a rate whose time is work /
    rate), or ValueError naming the column."""
    text = row["value"]
    try:
        v = float(text)
    except ValueError:
        raise ValueError(f"value: expected a number, got {text!r}") from None
    if not 0 < v < math.inf:  # nan fails too; 1e-400 reads as 0
        raise ValueError(f"value: expected a positive finite number, got {text!r}")


def _problem(e: Exception) -> str:
    """One line saying what is wrong with a row."""
    if isinstance(e, KeyError):
        return f"missing {e} (a shape_json key, a column or a unit this row's family needs)"
    if isinstance(e, json.JSONDecodeError):
        return f"shape_json is not valid JSON ({e.msg} at character {e.pos})"
    if isinstance(e, InputError):
        return yamlio.one_line("; ".join(e.problems))
    if isinstance(e, ValueError) and str(e).startswith(("value: ", "shape_json")):
        return yamlio.one_line(e)
    return f"cannot interpret ({type(e).__name__}: {yamlio.one_line(e)})"


# The published kernel measurements: what `perfmodel validate` judges by default and
# `perfmodel calibrate` cross-validates (the public rows, our B200 attention rows, the published
# Blackwell kernel benchmarks, AIConfigurator's TensorRT-LLM and vLLM linears, MoE modules and
# NCCL collectives)
PUBLISHED_CSVS = (PUBLIC_CSV, BLACKWELL_CSV, BLACKWELL_MEASUREMENTS_CSV, AICONFIGURATOR_CSV,
                  AICONFIGURATOR_VLLM_GEMM_CSV,
                  AICONFIGURATOR_MOE_CSV, AICONFIGURATOR_MOE_MXFP4_CSV,
                  AICONFIGURATOR_MOE_MARLIN_CSV, AICONFIGURATOR_NCCL_CSV)


def default_sources() -> list[Path]:
    """The published data (PUBLISHED_CSVS) plus every results CSV under validate/results/."""
    return [*PUBLISHED_CSVS, *sorted(RESULTS_DIR.glob("**/*.csv"))]
