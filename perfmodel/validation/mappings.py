"""Published Blackwell kernel measurements → (op, measured time): one mapping per row family.

The rows of validate/data/blackwell_measurements.csv (its section of validate/data/SOURCES.md,
"Added by perfmodel: blackwell_measurements.csv") come from a dozen benchmarks. Each states its
value with its own convention, and the row's `notes` give it:
  * throughput rows: the FLOP count the benchmark divides by (cuDNN's SDPA benchmarks count
    2·B·H·n·(d_qk + d_v) forward and 2·B·H·n·(3·d_qk + 2·d_v) backward over the n unmasked scores;
    tritonbench counts 4·B·H·S²·D; GEMMs 2·M·N·K). The published time is used wherever the row
    gives it ("time X ms (published)", "published time X ms"): it carries more digits than the
    printed rate.
  * bandwidth rows: the benchmark's own byte count (cuDNN's norm benchmark,
    `compute_bandwidth_bytes`). Their ms has 3 decimals only and the notes flag it as coarse, so
    the GB/s is used instead.
  * busbw rows: nccl-tests' bus bandwidth, busbw = algbw·2(n−1)/n with algbw = bytes / time.
  * time rows: the value.
Where the notes name a formula, the mapping checks that the notes state the one it applies, and
a row that states another is refused rather than converted wrongly.

A family the op vocabulary cannot express gets a Skipped with the reason: a row is never forced
onto an op that describes different work.
`blackwell_case` returns None for rows from other sources, which keep the general mapping of
measurements.py.
"""
from __future__ import annotations

import json
import re
from typing import Callable

from perfmodel import ops
from perfmodel.ops.quantize import RHT_MAC_PER_ELEMENT
from perfmodel.units import bytes_per_element

# Benchmarks by the start of the row's `source` (and a path inside it): key, prefix, path part.
SOURCES = (
    ("cudnn_sdpa_training", "NVIDIA/cudnn-frontend@", "benchmark/sdpa_benchmark_training/"),
    ("cudnn_norms", "NVIDIA/cudnn-frontend@", "benchmark/norms/"),
    ("cudnn_attention_inference", "NVIDIA/cudnn-frontend@", "benchmark/attention_inference/"),
    ("nccl_tests", "Azure/AI-benchmarking-guide@", ""),
    ("liger", "linkedin/Liger-Kernel@", ""),
    ("flashinfer_ep", "flashinfer-ai/flashinfer@", ""),
    ("torchao", "pytorch/ao@", ""),
    ("tilelang", "https://github.com/tile-ai/tilelang/issues/1787", ""),
    ("cutlass", "https://github.com/NVIDIA/cutlass/pull/2917", ""),
    ("tritonbench", "https://github.com/meta-pytorch/tritonbench/pull/171", ""),
    ("fb_triton", "https://github.com/facebookexperimental/triton/pull/3648", ""),
    ("tileops", "https://github.com/tile-ai/TileOPs/pull/1567", ""),
)
UNIT_SCALE_S = {"ms": 1e-3, "us": 1e-6, "s": 1.0}
RATE_SCALE = {"TFLOPS": 1e12, "GB/s": 1e9}

# Library text (lower case) → attention kernel family of the op
ATTENTION_KERNEL = (("cudnn", "cudnn"), ("flash_attn_v2", "fa2"), ("flashattention-2", "fa2"))

# The FLOP conventions the notes state, as they state them.
CUDNN_SDPA_FLOP_TEXT = "2*B*H*n*(d_qk+d_v) fwd and 2*B*H*n*(3*d_qk+2*d_v) bwd"
PREFILL_SQUARE_FLOP_TEXT = "4*B*H*Sq*Sk*D/2 / time"
PREFILL_DENSE_FLOP_TEXT = "4*B*H*Sq*Sk*D / time (dense count"
TRITONBENCH_FLOP_TEXT = "4*B*H*S^2*D"

# cuDNN norm benchmark byte counts (cudnn-frontend benchmark/norms, compute_bandwidth_bytes), as
# the notes spell them, with e the element size (BF16: 2 bytes) and FP32 statistics.
NORM_BYTES: dict[tuple[str, str], tuple[str, Callable[[float, float, float], float]]] = {
    ("rms_norm", "fwd"): ("bytes = (N*C + C)*2 read + N*C*2 + N*4 written",
                          lambda n, c, e: (n * c + c) * e + n * c * e + n * 4),
    ("layer_norm", "fwd"): ("bytes = (N*C + 2*C)*2 read + N*C*2 + 2*N*4 written",
                            lambda n, c, e: (n * c + 2 * c) * e + n * c * e + 2 * n * 4),
    ("rms_norm", "bwd"): ("bytes = (2*N*C + C)*2 + N*4 read + (N*C + C)*2 written",
                          lambda n, c, e: (2 * n * c + c) * e + n * 4 + (n * c + c) * e),
    ("layer_norm", "bwd"): ("bytes = (2*N*C + C)*2 + 2*N*4 read + (N*C + 2*C)*2 written",
                            lambda n, c, e: (2 * n * c + c) * e + 2 * n * 4 + (n * c + 2 * c) * e),
}

# The op-less families, with the reason.
NO_OP = {
    "mx_scale_rearrange": "no op models the MX scale-factor rearrangement (E8M0 scales into the "
                          "blocked tcgen05 layout) yet",
    "moe_dispatch": "no op models MoE expert-parallel dispatch yet (routing-dependent bytes; "
                    "alltoall is a uniform exchange)",
    "moe_combine": "no op models MoE expert-parallel combine yet (routing-dependent bytes; "
                   "alltoall is a uniform exchange)",
    "grouped_gemm_ragged": "no op models a grouped GEMM with ragged groups yet",
    "grouped_gemm_wgrad": "no op models a grouped GEMM whose groups split K (the 2D×2D wgrad) "
                          "yet; grouped_gemm groups split M",
    "grouped_gemm_composite": "composite fwd+bwd of three grouped GEMMs (and MXFP8 casts): no "
                              "single op describes it",
}


def source_key(row: dict) -> str | None:
    """Which benchmark a row comes from (SOURCES), or None."""
    src = row.get("source") or ""
    for key, prefix, part in SOURCES:
        if src.startswith(prefix) and part in src:
            return key
    return None


def dtype_of(text: str) -> str:
    """The op dtype a row's dtype text names; block-scaled formats before their element type."""
    t = text.lower()
    for key, name in (("mxfp8", "mxfp8"), ("nvfp4", "nvfp4"), ("fp8", "fp8"), ("bf16", "bf16"),
                      ("bfloat16", "bf16"), ("fp16", "fp16"), ("float16", "fp16"),
                      ("fp32", "fp32"), ("float32", "fp32")):
        if key in t:
            return name
    raise ValueError(f"unrecognized dtype '{text}'")


def published_time_s(notes: str) -> float | None:
    """The time a row's notes publish beside its rate ("time X ms (published)" or "published time
    X ms"), or None. A time the notes flag as coarse ("(published with 3 decimals, ...") does not
    match."""
    m = (re.search(r"(?<![\w-])time ([0-9]*\.?[0-9]+) (ms|us) \(published\)", notes)
         or re.search(r"(?<![\w-])published time ([0-9]*\.?[0-9]+) (ms|us)\b", notes))
    return float(m.group(1)) * UNIT_SCALE_S[m.group(2)] if m else None


def _require(notes: str, text: str, what: str) -> None:
    if text not in notes:
        raise ValueError(f"notes do not state the {what} this mapping applies ('{text}')")


def _value(row: dict, metric: str) -> float:
    """The row's value in SI units (seconds, FLOP/s or bytes/s) for the metric it must have."""
    if row.get("metric") != metric:
        raise ValueError(f"metric '{row.get('metric')}' where this family has '{metric}'")
    unit = row.get("unit")
    scale = UNIT_SCALE_S.get(unit) if metric == "time" else RATE_SCALE.get(unit)
    if scale is None:
        raise ValueError(f"unit '{unit}' is not one of "
                         f"{', '.join(UNIT_SCALE_S if metric == 'time' else RATE_SCALE)}")
    v = float(row["value"])
    if not v > 0:
        raise ValueError(f"value {row['value']!r} is not a positive number")
    return v * scale


def _time_from_rate(row: dict, work: float) -> float:
    """Measured seconds of a throughput row: its published time, else work / rate."""
    rate = _value(row, "throughput")
    published = published_time_s(row.get("notes") or "")
    return published if published is not None else work / rate


# ---- attention --------------------------------------------------------------------------------

def cudnn_sdpa_flop(s: dict) -> float:
    """cuDNN SDPA training benchmark: 2·B·H·n·(d_qk+d_v) forward, 2·B·H·n·(3·d_qk+2·d_v) backward,
    n = unmasked scores, S(S+1)/2 top-left causal, S² unmasked (square only)."""
    sq, sk = s["seqlen_q"], s["seqlen_k"]
    if sq != sk:
        raise ValueError(f"the cuDNN SDPA FLOP count is stated for square shapes, got "
                         f"seqlen_q {sq} and seqlen_k {sk}")
    n = sq * (sq + 1) / 2 if s.get("causal") else float(sq) * sk
    d, dv = s["headdim"], s.get("headdim_v", s["headdim"])
    per = {"fwd": d + dv, "bwd": 3 * d + 2 * dv}[s["pass"]]
    return 2.0 * s["batch"] * s["nheads"] * n * per


def prefill_flop(s: dict, notes: str) -> float:
    """cuDNN inference (prefill) benchmark: 4·B·H·Sq·Sk·D, halved for the square causal rows."""
    f = 4.0 * s["batch"] * s["nheads"] * s["seqlen_q"] * s["seqlen_k"] * s["headdim"]
    if PREFILL_SQUARE_FLOP_TEXT in notes:
        return f / 2
    _require(notes, PREFILL_DENSE_FLOP_TEXT, "FLOP count")
    return f


def tritonbench_flop(s: dict) -> float:
    """tritonbench flash_attention (non-causal): 4·B·H·S²·D."""
    if s.get("causal"):
        raise ValueError("tritonbench's 4·B·H·S²·D count is for the unmasked shape")
    return 4.0 * s["batch"] * s["nheads"] * s["seqlen_q"] * s["seqlen_k"] * s["headdim"]


def _attention(row: dict, s: dict, src: str):
    lib, notes = row["library"].lower(), row.get("notes") or ""
    kernel = next((k for name, k in ATTENTION_KERNEL if name in lib), None)
    if kernel is None:
        return f"no attention kernel family models library '{row['library']}'"
    dtype = dtype_of(s.get("dtype") or row["dtype"])
    allowed = ops.Attention.PARAMS["dtype"].choices
    if dtype not in allowed:
        return (f"no op models {dtype.upper()} attention yet (attention dtypes: "
                f"{', '.join(allowed)})")
    mask = s.get("mask", "causal" if s.get("causal") else "no_mask")
    if mask == "top_left" and s["seqlen_q"] != s["seqlen_k"]:
        return ("top-left causal mask with seq_q ≠ seq_kv: the attention op aligns masks "
                "bottom-right")
    o = ops.Attention(batch=s["batch"], heads=s["nheads"], kv_heads=s.get("nheads_kv"),
                      seq_q=s["seqlen_q"], seq_kv=s["seqlen_k"], head_dim=s["headdim"],
                      head_dim_v=s.get("headdim_v"), dtype=dtype, causal=bool(s.get("causal")),
                      direction=s["pass"], kernel=kernel)
    if row["metric"] == "time":
        return o, _value(row, "time")
    if src == "cudnn_sdpa_training":
        _require(notes, CUDNN_SDPA_FLOP_TEXT, "FLOP count")
        flop = cudnn_sdpa_flop(s)
    elif src == "cudnn_attention_inference":
        flop = prefill_flop(s, notes)
    elif src == "tritonbench":
        _require(notes, TRITONBENCH_FLOP_TEXT, "FLOP count")
        flop = tritonbench_flop(s)
    else:
        raise ValueError(f"no FLOP convention known for source '{row['source']}'")
    return o, _time_from_rate(row, flop)


# ---- GEMM -------------------------------------------------------------------------------------

def _gemm(row: dict, s: dict, src: str):
    dtype = dtype_of(row["dtype"])
    o = ops.Gemm(m=s["M"], n=s["N"], k=s["K"], dtype=dtype, out_dtype=dtype)
    return o, _time_from_rate(row, 2.0 * s["M"] * s["N"] * s["K"])  # 2·M·N·K


def _grouped_gemm(row: dict, s: dict, src: str):
    """Grouped GEMMs whose groups share N and K and split M (the expert FFN's forward and dgrad:
    TileOPs' m-grouped sweep, torchao's 2D×3D `_scaled_grouped_mm`) as the grouped_gemm op. No row
    gives the group sizes, so the op's ragged groups stand in: rows routed to the groups
    uniformly at random. The wgrad (2D×2D: groups split K) and the fwd+bwd composites are
    skipped."""
    if row["op"].endswith("_fwd_bwd"):
        return NO_OP["grouped_gemm_composite"]
    if row["op"].endswith("_wgrad"):
        return NO_OP["grouped_gemm_wgrad"]
    if "grouped_gemm" not in ops.REGISTRY:
        return NO_OP["grouped_gemm_ragged"]
    m = s.get("M_total", s.get("total_M"))
    if m is None:
        raise KeyError("M_total")
    groups = s.get("experts", s.get("groups"))
    if groups is None:
        raise KeyError("experts")
    dtype = dtype_of(row["dtype"].split(" in")[0])  # "mxfp8 (...) in, bf16 out": the inputs
    out = "bf16" if " out" not in row["dtype"] else dtype_of(row["dtype"].split("in,")[-1])
    o = ops.op("grouped_gemm", groups=groups, m=m, n=s["N"], k=s["K"], dtype=dtype,
               out_dtype=out)
    if row["metric"] == "time":
        return o, _value(row, "time")
    return o, _time_from_rate(row, 2.0 * m * s["N"] * s["K"])  # 2·M·N·K over all groups


# ---- norms, softmax, cross-entropy -------------------------------------------------------------

def row_implementation(library: str) -> str:
    """The norm/softmax `implementation` a row's library names: PyTorch eager → ATen's kernels,
    Liger → its Triton kernels, anything else (cuDNN, CUTLASS, quack) → fused."""
    lib = library.lower()
    if "eager" in lib:
        return "eager"
    if "liger" in lib:
        return "triton"
    return "fused"


def _norm(row: dict, s: dict, src: str):
    kind, direction = row["op"].rsplit("_", 1)  # rms_norm_fwd → (rms_norm, fwd)
    dtype = dtype_of(row["dtype"])
    rows, cols = (s["N"], s["C"]) if "C" in s else (s["M"], s["N"])
    o = ops.Norm(rows=rows, cols=cols, dtype=dtype, direction=direction,
                 kind={"rms_norm": "rmsnorm", "layer_norm": "layernorm"}[kind],
                 implementation=row_implementation(row["library"]))
    if row["metric"] == "time":
        return o, _value(row, "time")
    if src != "cudnn_norms":
        raise ValueError(f"no byte convention known for source '{row['source']}'")
    text, count = NORM_BYTES[(kind, direction)]
    _require(row.get("notes") or "", text, "byte count")
    return o, count(rows, cols, bytes_per_element(dtype)) / _value(row, "bandwidth")


def _softmax(row: dict, s: dict, src: str):
    direction = row["op"].rsplit("_", 1)[1]
    if direction not in ops.Softmax.PARAMS["direction"].choices:
        return f"no op models softmax {direction} yet"
    o = ops.Softmax(rows=s["M"], cols=s["N"], dtype=dtype_of(row["dtype"]), direction=direction,
                    implementation=row_implementation(row["library"]))
    return o, _value(row, "time")


def _cross_entropy(row: dict, s: dict, src: str):
    lib = row["library"].lower()
    if "crossentropyloss" in lib and "eager" in lib:
        impl = "eager"
    elif "liger" in lib:
        impl = "fused"
    else:
        return f"no cross-entropy implementation models library '{row['library']}'"
    if s.get("reduction", "mean") != "mean":
        return f"the cross_entropy op models the mean reduction, not '{s['reduction']}'"
    direction = {"cross_entropy_fwd": "fwd", "cross_entropy_fwd_bwd": "fwd+bwd"}[row["op"]]
    o = ops.CrossEntropy(rows=s["BT"], vocab=s["V"], dtype=dtype_of(row["dtype"]),
                         direction=direction, implementation=impl)
    return o, _value(row, "time")


# ---- quantization -------------------------------------------------------------------------------

def _rows_cols(s: dict) -> tuple[int, int]:
    """A 2-D view of the quantized tensor: leading dimensions fold into rows."""
    if "input_shape" in s:
        *lead, cols = s["input_shape"]
        rows = 1
        for d in lead:
            rows *= d
        return rows, cols
    rows = s["M"] * s.get("E", 1)  # grouped (per-expert) quantizers: E × M rows
    return rows, s.get("N", s.get("K"))


def _quantize(row: dict, s: dict, src: str):
    """MXFP8 casts (torchao: dim0 rowwise or dim1 columnwise, the same bytes) and NVFP4 quantizers
    (fused RHT + rowwise and columnwise copies; 16×16 2D weight scaling). The NVFP4 kernels take
    the tensor amax from the separate rht_amax kernel (their own rows): the README's byte count
    has one read of the input, so no amax pass."""
    rows, cols = _rows_cols(s)
    to = {"quantize_mxfp8": "mxfp8", "quantize_nvfp4": "nvfp4"}[row["op"]]
    lib = row["library"].lower()
    if to == "mxfp8":
        o = ops.Quantize(rows=rows, cols=cols, to="mxfp8", **{"from": "bf16"})
    else:
        two_d = "weight_quantize_2d" in lib
        o = ops.Quantize(rows=rows, cols=cols, to="nvfp4", **{"from": "bf16"},
                         scaling="2d" if two_d else "1d", rht=not two_d, amax_pass=False,
                         transpose=True)
    return o, _value(row, "time")


def _rht_amax(row: dict, s: dict, src: str):
    """The amax of the 16×16 Random-Hadamard-transformed tensor: one read of the input, per
    element the transform's multiply-adds (quantize.RHT_MAC_PER_ELEMENT, as the quantize op counts
    them) and the |x| max, one FP32 word out."""
    rows, cols = _rows_cols(s)
    o = ops.Elementwise(elements=rows * cols, dtype=dtype_of(row["dtype"]), inputs=1, outputs=0,
                        flop_per_element=RHT_MAC_PER_ELEMENT + 1.0)
    return o, _value(row, "time")


# ---- communication ------------------------------------------------------------------------------

def nccl_all_reduce_time_s(size_bytes: float, ranks: int, busbw_bytes_per_s: float) -> float:
    """nccl-tests all-reduce: busbw = algbw·2(n−1)/n, algbw = bytes / time (nccl-tests
    NVIDIA/nccl-tests:doc/PERFORMANCE.md)."""
    return size_bytes * 2 * (ranks - 1) / ranks / busbw_bytes_per_s


def _all_reduce(row: dict, s: dict, src: str):
    if row.get("metric") != "busbw":
        raise ValueError(f"metric '{row.get('metric')}' where all_reduce rows have 'busbw'")
    unit = row.get("unit")
    if unit not in RATE_SCALE or unit == "TFLOPS":
        raise ValueError(f"unit '{unit}' for busbw (expected GB/s)")
    busbw = float(row["value"]) * RATE_SCALE[unit]
    if not busbw > 0:
        raise ValueError(f"value {row['value']!r} is not a positive number")
    algo = str(s.get("algo", "ring")).lower()
    o = ops.Allreduce(bytes=float(s["bytes"]), gpus=s["nranks"], algorithm=algo)
    return o, nccl_all_reduce_time_s(float(s["bytes"]), s["nranks"], busbw)


FAMILIES: dict[str, Callable] = {
    "attention_fwd": _attention, "attention_bwd": _attention, "attention_decode": _attention,
    "gemm": _gemm,
    "grouped_gemm": _grouped_gemm, "grouped_gemm_mxfp8": _grouped_gemm,
    "grouped_gemm_mxfp8_wgrad": _grouped_gemm, "grouped_gemm_fwd_bwd": _grouped_gemm,
    "grouped_gemm_mxfp8_fwd_bwd": _grouped_gemm,
    "rms_norm_fwd": _norm, "rms_norm_bwd": _norm, "layer_norm_fwd": _norm,
    "layer_norm_bwd": _norm,
    "softmax_fwd": _softmax, "softmax_bwd": _softmax,
    "cross_entropy_fwd": _cross_entropy, "cross_entropy_fwd_bwd": _cross_entropy,
    "quantize_mxfp8": _quantize, "quantize_nvfp4": _quantize,
    "rht_amax": _rht_amax,
    "all_reduce": _all_reduce,
}


def family_reason(kind: str) -> str | None:
    """The reason for op-less families (NO_OP), by the row's op name."""
    if kind == "mx_scale_rearrange":
        return NO_OP[kind]
    for base in ("moe_dispatch", "moe_combine"):
        if kind.startswith(base):  # and their _lowlatency variants
            return NO_OP[base]
    return None


def blackwell_case(row: dict, s: dict):
    """(op, measured_time_s) for a row of a known Blackwell benchmark, a reason string for a row
    no op describes, or None for rows of other sources."""
    src = source_key(row)
    if src is None:
        return None
    kind = row["op"]
    reason = family_reason(kind)
    if reason is not None:
        return reason
    fn = FAMILIES.get(kind)
    if fn is None:
        return f"no op mapping for '{kind}'"
    return fn(row, s, src)


# shape_json flags whose value is a truth value; a string such as "false" must not read as true
FLAGS = ("causal",)
TRUE, FALSE = (True, 1, "true", "True", "1"), (False, 0, "false", "False", "0", None)


def parse_shape(text: str) -> dict:
    """shape_json as a dict (a JSON object), its FLAGS as bools, or ValueError naming the key."""
    s = json.loads(text)
    if not isinstance(s, dict):
        raise ValueError("shape_json is not a JSON object")
    for key in FLAGS:
        if key not in s:
            continue
        v = s[key]
        if isinstance(v, (dict, list)) or v not in TRUE + FALSE:
            raise ValueError(f"shape_json: {key}: expected true or false, got {v!r}")
        s[key] = v in TRUE and v is not None
    return s
