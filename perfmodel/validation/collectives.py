"""Measured serving-engine collectives against the model: TensorRT-LLM's all-reduce as
NVIDIA AIConfigurator measured it (validate/data/aiconfigurator_allreduce.csv: BF16, 2/4/8 GPUs
of one NVLink domain on H100, H200, B200, B300 and GB200) and its DeepEP MoE dispatch and combine
(validate/data/aiconfigurator_moe_a2a.csv: the high-throughput and low-latency kernels, 8 GPUs,
4 on GB200/GB300); validate/data/SOURCES.md.

    python -m perfmodel.validation.collectives    # error per GPU, group size and message size

The engines' own all-reduce (validate/data/aiconfigurator_engine_allreduce.csv: vLLM 0.24.0
(0.27.0 on GB300) and SGLang 0.5.14 custom all-reduce as their communicators dispatch it, BF16,
2/4/8 GPUs, 16 on GB300, replayed from a CUDA graph and eager; and the TensorRT-LLM rows above,
taken as graph-replayed) are judged against `allreduce` with the engine's dispatch
(`algorithm` vllm / sglang / trtllm, perfmodel/ops/custom_allreduce.py): graph rows against
the graph-captured prediction in mode graph, eager rows against the eager prediction in mode
eager, beside the plain roofline of the same op. The eager host path of each engine path
(custom_allreduce.EAGER_HOST_S) is fitted on that engine's small eager H100 SXM calls
(`fit_eager_host_s`, EAGER_HOST_RULE), the engines' NCCL paths on GB300's groups beyond a
tray (`fit_nccl_host_s`, NCCL_HOST_RULE), and the release barriers' trips per peer on vLLM's
latency-bound two-stage calls on H100 SXM and B200 (`release_fit_rows`, RELEASE_RULE); those
rows are left out of the judged table once perfmodel/fitted.yaml holds the constants.

What an eager row times (HARNESS_COPY). Each eager call in these tables carries one device copy
of the message beyond what the engine itself runs: at 64 MiB and more, where neither host path
matters, eager minus graph time is 2·S at the GPU's HBM copy rate (2.9-3.1 TB/s on H100 SXM,
3.9-4.4 on H200 SXM, 5.5-7.4 on the Blackwell GPUs; both engines, NCCL, torch symm-mem and
SGLang's pull paths alike), where the graph rows equal NCCL's own rows
(aiconfigurator_nccl.csv) within 1-9 %. vLLM 0.24.0's eager path copies nothing before NCCL
(vllm/distributed/device_communicators/cuda_communicator.py `CudaCommunicator.all_reduce`:
pynccl's out-of-place all_reduce, pynccl.py), so the copy is the measuring harness's (its
collector is not in the wheel; the in-place calls' input restored each call would be one),
not the engine's: the replay adds it to the GPU time of an eager row (`harness_copy_s`, a
`memcpy` of the row's bytes), the op does not.

A row is the builder's tensor-parallel all-reduce (`allreduce`, algorithm `auto`: NCCL's
algorithms as its tuner picks them and the one-shot custom kernel, the faster kept) of the
row's bytes over its GPUs,
priced both as a decode step replays it from a CUDA graph (its host launch replaced by the GPU's
graph_kernel_gap_s) and eagerly as a prefill step launches it. A DeepEP row is the `deepep` op
(perfmodel/ops/deepep.py: DeepEP's SM-limited copies, its NVLink bytes and the call's fixed
time) in the row's kernel, phase, SM count and wire type (either combine's BF16 whatever the
row's quantization), priced eagerly; beside it the builder's generic
`alltoall` of top_k wire copies per token, as the model priced these rows before. The DeepEP
fixed times are fitted on the H100 rows of at most FIXED_FIT_TOKENS tokens and Blackwell's
copy round on the B200 normal-kernel rows of at least BLACKWELL_ROUND_FIT_MIN_TOKENS
(blackwell_round_fit_rows; perfmodel/fitted.yaml); every other row is judged. SGLang's DeepEP
transmit times on H200
(validate/data/aiconfigurator_sglang_deepep.csv: the normal kernels given 4-24 SMs) fit the
op's copy round on its copy-bound rows (round_fit_rows) and are judged on the rest.

NCCL's own collectives (validate/data/aiconfigurator_nccl.csv: NCCL 2.29.2's all-reduce,
all-gather, reduce-scatter and all-to-all on 2-8 GPUs of one NVLink domain) are reported against
the collective ops (algorithm nccl) by GPU family, collective and size band, then per GPU and GPU
count (`nccl_report`; `perfmodel validate` judges the same rows by op class). Beside them, the
Simple ring's rates read off the rows of at least 64 MiB (`ring_bandwidth_fit`:
time = fixed + sent / link + (S/G) / local): the link comes out at the rate NCCL's topology
gives the NVLink, and the S/G term is the ring's step in the GPU's own memory that leaves a
2-GPU ring furthest below the link. The all-to-all's four p2p rates (perfmodel/ops/nccl.py,
the all-to-all's notes) are fitted jointly on every all-to-all row of H100 SXM and B200
(`p2p_fit`, the op's arithmetic in `p2p_time_s`) and judged on H200 SXM, B300, GB200 and GB300.
"""
from __future__ import annotations

import csv
import io
import json

import numpy as np

from perfmodel import fitted, ops, yamlio
from perfmodel.ops import deepep, nccl
from perfmodel.hardware import Hardware, hardware
from perfmodel.predict import predict_op
from perfmodel.report.tables import format_table
from perfmodel.units import collective_size_band
from perfmodel.validation.measurements import DATA_DIR
from perfmodel.validation.modules import captured_s, error_table, grouped_errors

ALLREDUCE_CSV = DATA_DIR / "aiconfigurator_allreduce.csv"
MOE_A2A_CSV = DATA_DIR / "aiconfigurator_moe_a2a.csv"
SGLANG_DEEPEP_CSV = DATA_DIR / "aiconfigurator_sglang_deepep.csv"
# wire bytes per element of a dispatch/combine dtype (NVFP4: 4 bits + one E4M3 scale per 16)
WIRE_BYTES = {"bfloat16": 2.0, "fp8": 1.0, "nvfp4": 0.5625, "fp4": 0.5625}
ENGINE_ALLREDUCE_CSV = DATA_DIR / "aiconfigurator_engine_allreduce.csv"


def load_rows(path=ALLREDUCE_CSV) -> list[dict]:
    """The all-reduce rows: id, hardware, GPUs, bytes, measured seconds."""
    out = []
    for r in csv.DictReader(io.StringIO(yamlio.read_text(path))):
        s = json.loads(r["shape_json"])
        out.append({"id": r["id"], "hardware": r["hardware"], "gpus": s["gpus"],
                    "bytes": float(s["bytes"]), "measured_s": float(r["value"]) * 1e-3})
    return out


def predicted_s(row: dict, hw: Hardware | None = None, captured: bool = True) -> float:
    """The row's all-reduce as the builder asks for it, captured in a graph or eager."""
    hw = hw or hardware(row["hardware"])
    op = ops.Allreduce(bytes=row["bytes"], gpus=row["gpus"], algorithm="auto")
    return captured_s(op, hw) if captured else predict_op(op, hw).time_s


def load_engine_rows(path=ENGINE_ALLREDUCE_CSV, trtllm_path=ALLREDUCE_CSV) -> list[dict]:
    """vLLM's and SGLang's all-reduce rows (engine, mode graph or eager) and, when
    `trtllm_path` is given, TensorRT-LLM's (engine trtllm, mode graph)."""
    out = []
    for r in csv.DictReader(io.StringIO(yamlio.read_text(path))):
        s = json.loads(r["shape_json"])
        out.append({"id": r["id"], "hardware": r["hardware"], "gpus": s["gpus"],
                    "bytes": float(s["bytes"]), "engine": s["engine"], "mode": s["mode"],
                    "measured_s": float(r["value"]) * 1e-3})
    if trtllm_path is not None:
        out += [{**r, "engine": "trtllm", "mode": "graph"} for r in load_rows(trtllm_path)]
    return out


def engine_op(row: dict) -> ops.Allreduce:
    """The row as the engine's own all-reduce dispatch in the row's mode."""
    return ops.Allreduce(bytes=row["bytes"], gpus=row["gpus"], algorithm=row["engine"],
                         mode=row["mode"])


def engine_predicted_s(row: dict, hw: Hardware | None = None, level: str = "pipes") -> float:
    """The engine's dispatch of the row: graph rows captured in a CUDA graph, eager rows
    launched with the harness's copy of the message (harness_copy_s); `level` roofline: the
    plain roofline of the same op."""
    hw = hw or hardware(row["hardware"])
    op = engine_op(row)
    if level == "roofline":
        return predict_op(op, hw, level="roofline").time_s
    if row["mode"] == "graph":
        return captured_s(op, hw)
    call = predict_op(op, hw)
    # back to back, the call takes the longer of its host path and the GPU's time, which
    # now holds the harness's copy too
    device_s = call.details.get("device_time_s", call.time_s)
    return max(call.time_s, device_s + harness_copy_s(row, hw))


def harness_copy_s(row: dict, hw: Hardware) -> float:
    """The device copy of the message that each eager call of AIConfigurator's engine rows
    carries beyond the engine's own call (HARNESS_COPY): one `memcpy` of the row's bytes."""
    return predict_op(ops.Memcpy(bytes=row["bytes"]), hw).time_s


def engine_report(rows: list[dict]) -> str:
    groups: dict[tuple, list[tuple[float, float]]] = {}
    for r in rows:
        hw = hardware(r["hardware"])
        errs = (engine_predicted_s(r, hw) / r["measured_s"] - 1,
                engine_predicted_s(r, hw, "roofline") / r["measured_s"] - 1)
        # the collectives' message-size bands (NCCL rows' as well): below the engines'
        # smallest one-shot limits, the custom kernels' range, NCCL's (mostly)
        key = (r["engine"], r["mode"], r["hardware"], r["gpus"],
               collective_size_band(r["bytes"]))
        groups.setdefault(key, []).append(errs)
        groups.setdefault((r["engine"], r["mode"], f"[{hw.architecture}]", "",
                           collective_size_band(r["bytes"])), []).append(errs)
        groups.setdefault((r["engine"], r["mode"], "all", "", ""), []).append(errs)
    lines = []
    for key, es in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] == "all",
                                                          kv[0][2].startswith("["),
                                                          kv[0][2:])):
        model, roof = [e[0] for e in es], [e[1] for e in es]
        lines.append((*key, len(es), f"{100 * sum(map(abs, model)) / len(model):.1f}%",
                      f"{100 * sum(model) / len(model):+.1f}%",
                      f"{100 * sum(map(abs, roof)) / len(roof):.1f}%"))
    return format_table(["engine", "mode", "hardware", "GPUs", "message", "n", "MAPE", "bias",
                         "roofline MAPE"], lines)


def roofline_s(row: dict, hw: Hardware | None = None) -> float:
    """The plain roofline of the row's all-reduce (the builder's, algorithm auto)."""
    hw = hw or hardware(row["hardware"])
    op = ops.Allreduce(bytes=row["bytes"], gpus=row["gpus"], algorithm="auto")
    return predict_op(op, hw, level="roofline").time_s


def report(rows: list[dict]) -> str:
    """Error per GPU, group size and the collectives' size band (perfmodel.units
    collective_size_band: < 64 KiB, 64 KiB - 4 MiB, > 4 MiB), then per GPU family and band,
    with the plain roofline beside."""
    groups: dict[tuple, list[tuple[float, float, float]]] = {}
    for r in rows:
        hw = hardware(r["hardware"])
        errs = (predicted_s(r, hw) / r["measured_s"] - 1,
                predicted_s(r, hw, captured=False) / r["measured_s"] - 1,
                roofline_s(r, hw) / r["measured_s"] - 1)
        size = collective_size_band(r["bytes"])
        groups.setdefault((r["hardware"], r["gpus"], size), []).append(errs)
        groups.setdefault((f"[{hw.architecture}]", "", size), []).append(errs)
    lines = []
    everything = [e for k, es in groups.items() if not k[0].startswith("[") for e in es]
    for key, es in [*sorted(groups.items(), key=lambda kv: (kv[0][0].startswith("["), kv[0])),
                    (("all", "", ""), everything)]:
        cap, eag, roof = ([e[i] for e in es] for i in range(3))
        lines.append((*key, len(es), f"{100 * sum(map(abs, cap)) / len(cap):.1f}%",
                      f"{100 * sum(cap) / len(cap):+.1f}%",
                      f"{100 * sum(map(abs, eag)) / len(eag):.1f}%",
                      f"{100 * sum(eag) / len(eag):+.1f}%",
                      f"{100 * sum(map(abs, roof)) / len(roof):.1f}%"))
    return format_table(["hardware", "GPUs", "message", "n", "captured MAPE", "bias",
                         "eager MAPE", "bias", "roofline MAPE"], lines)


def load_a2a_rows(path=MOE_A2A_CSV) -> list[dict]:
    """DeepEP rows (TensorRT-LLM's, or `path`'s): id, hardware, kernel, phase, wire dtype,
    tokens, shape, seconds."""
    out = []
    for r in csv.DictReader(io.StringIO(yamlio.read_text(path))):
        s = json.loads(r["shape_json"])
        out.append({"id": r["id"], "hardware": r["hardware"], "dtype": r["dtype"],
                    "phase": r["op"].rsplit("_", 1)[1], "measured_s": float(r["value"]) * 1e-3,
                    **s})
    return out


# the deepep op's names of the rows' kernels and wire types
DEEPEP_MODE = {"deepep_normal": "normal", "deepep_ll": "low_latency"}
DEEPEP_DTYPE = {"bfloat16": "bf16", "fp8": "fp8", "nvfp4": "nvfp4", "fp4": "nvfp4"}
FIXED_FIT_GPU = "H100-SXM"
FIXED_FIT_TOKENS = 16  # calls this small are nearly all fixed time


def deepep_op(row: dict) -> deepep.DeepEP:
    """The row as the `deepep` op: its kernel, phase and wire type (either combine sends BF16,
    DeepEP's only combine type, whatever the row's quantization: deep_ep 1.0.0 buffer.py,
    `combine` and `low_latency_combine` take `x` "with `torch.bfloat16`"; the row's dtype is
    its dispatch's)."""
    mode = DEEPEP_MODE[row["kernel"]]
    dtype = "bf16" if row["phase"] == "combine" else DEEPEP_DTYPE[row["dtype"]]
    return deepep.DeepEP(tokens=row["tokens"], hidden=row["hidden"], top_k=row["top_k"],
                         experts=row["experts"], ep=row["ep"], phase=row["phase"], mode=mode,
                         dtype=dtype, num_sms=row.get("num_sms", deepep.DEFAULT_NUM_SMS))


def a2a_predicted_s(row: dict, hw: Hardware | None = None) -> float:
    """The row's dispatch or combine as DeepEP's kernels run it (the `deepep` op)."""
    return predict_op(deepep_op(row), hw or hardware(row["hardware"])).time_s


def alltoall_predicted_s(row: dict, hw: Hardware | None = None) -> float:
    """The row as the builder's generic all-to-all of top_k wire copies per token."""
    hw = hw or hardware(row["hardware"])
    nbytes = row["tokens"] * row["top_k"] * row["hidden"] * WIRE_BYTES[row["dtype"]]
    return predict_op(ops.Alltoall(bytes=float(nbytes), gpus=row["ep"]), hw).time_s


# Blackwell's copy round (deepep.copy_round_trips.blackwell) is fitted on the B200 rows of the
# normal kernels at least this large: the copies' rounds bind there (the NVLink's 900 GB/s is
# not reached) and the fixed time is at most a few per cent
BLACKWELL_ROUND_FIT_GPU = "B200"
BLACKWELL_ROUND_FIT_MIN_TOKENS = 8192


def blackwell_round_fit_rows(rows: list[dict]) -> list[dict]:
    """The rows `deepep.copy_round_trips.blackwell` is fitted on (perfmodel/fitted.yaml)."""
    return [r for r in rows if r["hardware"] == BLACKWELL_ROUND_FIT_GPU
            and r["kernel"] == "deepep_normal" and r["tokens"] >= BLACKWELL_ROUND_FIT_MIN_TOKENS]


def fixed_fit_rows(rows: list[dict], mode: str, phase: str) -> list[dict]:
    """The rows `deepep.fixed_s.<mode>.<phase>` is fitted on (module docstring)."""
    return [r for r in rows if r["hardware"] == FIXED_FIT_GPU
            and DEEPEP_MODE[r["kernel"]] == mode and r["phase"] == phase
            and r["tokens"] <= FIXED_FIT_TOKENS]


def load_sglang_deepep_rows(path=SGLANG_DEEPEP_CSV) -> list[dict]:
    """SGLang's DeepEP normal-kernel transmit times on H200 (validate/data/SOURCES.md), in the
    DeepEP rows' fields (their shape adds `num_sms`)."""
    return load_a2a_rows(path)


def transmit_predicted_s(row: dict, hw: Hardware | None = None) -> float:
    """An SGLang transmit row as the deepep op's kernel time: the call without its fixed time
    (the table's notify time is 0: no layout, notify or host wait in it), its launches or its
    first DRAM round trip."""
    hw = hw or hardware(row["hardware"])
    e = predict_op(deepep_op(row), hw)
    return (e.time_s - e.resource_time_s.get("launch", 0.0)
            - deepep.FIXED_S[("normal", row["phase"])] - hw.hbm_latency_s)


# The eager host path of each engine path (ops/custom_allreduce.py EAGER_HOST_KEYS) is fitted on
# the engine's eager calls of at most EAGER_HOST_FIT_MAX_BYTES on EAGER_HOST_FIT_GPU (an x86
# host), the path the engine's dispatch sends them to: calls this small are host-bound (the
# model's graph-replayed kernels take under 0.7 of the eager time, most under a third; the
# measured graph replays reach 0.63 of it, the 1 MiB two-stage calls on 4 GPUs), so the
# host path is the median measured time. Every other row (the larger calls, the other GPUs) is
# judged.
EAGER_HOST_FIT_GPU = "H100-SXM"
EAGER_HOST_FIT_MAX_BYTES = 1 << 20
EAGER_HOST_RULE = (
    "the AIConfigurator eager rows of {engine}'s all-reduce on {gpu} of at most {limit} bytes "
    "that the engine's dispatch sends to its {path} kernel (aiconfigurator_engine_allreduce.csv; "
    "{n} rows): host-bound calls, whose graph-replayed kernels take under 0.7 of the eager time; "
    "the value is their median measured time. Judged on the larger eager calls and the other "
    "GPUs (GB200/GB300 hosts are Grace CPUs: custom_allreduce.eager_host_ratio.grace)")
# The engines' NCCL paths (custom_allreduce.NCCL_PATH): host-bound only where the custom
# kernels stop at a GB300 tray (HOST_CHECK), so fitted on one GB300 group size each, kept as
# their x86 value (over the Grace ratio). SGLang's 16-GPU rows are judged; vLLM's NCCL runs at
# or below 1 MiB only at 16 GPUs (torch symm-mem takes 8), so nothing of vLLM's is left to judge
# it on at the small sizes.
NCCL_HOST_KEYS = ("custom_allreduce.eager_host_s.vllm_nccl",
                  "custom_allreduce.eager_host_s.sglang_nccl")
NCCL_HOST_FIT = {"sglang": ("GB300", 8), "vllm": ("GB300", 16)}
NCCL_HOST_RULE = (
    "the AIConfigurator eager rows of {engine}'s all-reduce on {gpu} over {gpus} GPUs of at "
    "most {limit} bytes that the engine's dispatch sends to NCCL ({how}; "
    "aiconfigurator_engine_allreduce.csv; {n} rows, all host-bound): their median measured "
    "time over custom_allreduce.eager_host_ratio.grace, the x86 value ({fit:.4g} s). "
    "{judged}")
# The release barriers' trips per peer (custom_allreduce.RELEASE_BARRIERS), per GPU family:
# fitted on vLLM's two-stage kernel replayed from a CUDA graph on one GPU of the family, where
# its loads fit in one pass (latency-bound: the barriers and trips are the time); the family's
# other GPUs, vLLM's eager rows and TensorRT-LLM's two-shot rows are judged.
RELEASE_FIT_GPU = {9: "H100-SXM", 10: "B200"}
RELEASE_RULE = (
    "the AIConfigurator rows of vLLM's all-reduce on {gpu} replayed from a CUDA graph that the "
    "engine's dispatch sends to its two-stage custom kernel, its loads in one pass "
    "(aiconfigurator_engine_allreduce.csv; {n} rows: {sizes}): bisection for the NVLink trips "
    "per peer at which their mean log error is zero ({fit:.4g}). Judged on the family's other "
    "GPUs, the eager rows and TensorRT-LLM's two-shot (two release barriers)")


def release_fit_rows(rows: list[dict], major: int) -> list[dict]:
    """The rows custom_allreduce.release_peer_trips of the compute-capability `major` family is
    fitted on (RELEASE_RULE)."""
    from perfmodel.ops import custom_allreduce
    out = []
    for r in rows:
        if r["engine"] != "vllm" or r["mode"] != "graph" \
                or r["hardware"] != RELEASE_FIT_GPU[major]:
            continue
        hw = hardware(r["hardware"])
        pick = custom_allreduce.dispatch("vllm", hw, r["gpus"], r["bytes"], "graph")
        k = pick.kernel
        if k is not None and k.details.get("path") == "custom_allreduce" \
                and k.details.get("algorithm") == "twoshot" \
                and k.details.get("load_passes", 0.0) == 0.0:
            out.append(r)
    return out


# The GPU whose eager rows fit each host CPU's ratio to the x86 path (the others judged)
EAGER_HOST_RATIO_FIT_GPU = {"grace": "GB200"}
EAGER_HOST_RATIO_RULE = (
    "the AIConfigurator eager rows of vLLM's and SGLang's all-reduce on {gpu} ({cpu} hosts) of "
    "at most {limit} bytes that the engines' dispatch sends to a kernel with a host path "
    "(aiconfigurator_engine_allreduce.csv; {n} rows, all host-bound): the median over them of "
    "the measured time / the path's x86 value (custom_allreduce.eager_host_s.*, fitted on "
    "{x86_gpu}). Judged on GB300's eager rows and the larger calls")


def eager_host_path(row: dict) -> str | None:
    """The engine path (custom_allreduce.EAGER_HOST_KEYS) an engine row's dispatch runs:
    its kernel's, custom_allreduce.NCCL_PATH where the dispatch sends the call to NCCL, None
    where NCCL's pairs compete with the kernel (TensorRT-LLM)."""
    from perfmodel.ops import custom_allreduce
    hw = hardware(row["hardware"])
    pick = custom_allreduce.dispatch(row["engine"], hw, row["gpus"], row["bytes"], "graph")
    if pick.with_nccl:
        return None
    if pick.kernel is None:
        return custom_allreduce.NCCL_PATH
    return pick.kernel.details.get("path")


def eager_host_fit_rows(rows: list[dict], key: str) -> list[dict]:
    """The rows `key` (a custom_allreduce.EAGER_HOST_KEYS value) is fitted on: an NCCL path's
    on its Grace GPU and group (NCCL_HOST_FIT), the kernels' on EAGER_HOST_FIT_GPU."""
    from perfmodel.ops import custom_allreduce
    paths = {p for p, k in custom_allreduce.EAGER_HOST_KEYS.items() if k == key}
    nccl_fit = {NCCL_HOST_FIT[e] for e, p in paths if p == custom_allreduce.NCCL_PATH}
    return [r for r in rows if r["mode"] == "eager" and r["bytes"] <= EAGER_HOST_FIT_MAX_BYTES
            and ((r["hardware"], r["gpus"]) in nccl_fit if nccl_fit
                 else r["hardware"] == EAGER_HOST_FIT_GPU)
            and (r["engine"], eager_host_path(r)) in paths]


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def fit_eager_host_s(rows: list[dict] | None = None) -> dict[str, tuple[float, list[str]]]:
    """Each kernel's eager host path (s) and the row ids it is fitted on (EAGER_HOST_RULE);
    the NCCL paths are fitted after the Grace ratio (fit_nccl_host_s)."""
    from perfmodel.ops import custom_allreduce
    rows = load_engine_rows(trtllm_path=None) if rows is None else rows
    out = {}
    for key in dict.fromkeys(custom_allreduce.EAGER_HOST_KEYS.values()):
        if key in NCCL_HOST_KEYS:
            continue
        fit = eager_host_fit_rows(rows, key)
        if fit:
            out[key] = (_median([r["measured_s"] for r in fit]), [r["id"] for r in fit])
    return out


def fit_nccl_host_s(rows: list[dict], grace_ratio: float
                    ) -> dict[str, tuple[float, list[str]]]:
    """Each engine's NCCL host path as its x86 value (s): the median of its Grace fit rows
    (NCCL_HOST_FIT) over the Grace ratio; and the row ids (NCCL_HOST_RULE)."""
    out = {}
    for key in NCCL_HOST_KEYS:
        fit = eager_host_fit_rows(rows, key)
        if fit:
            out[key] = (_median([r["measured_s"] for r in fit]) / grace_ratio,
                        [r["id"] for r in fit])
    return out


def eager_host_ratio_fit_rows(rows: list[dict], cpu: str) -> list[dict]:
    """The rows the `cpu` host's eager ratio (custom_allreduce.EAGER_HOST_RATIO_KEYS) is fitted
    on."""
    from perfmodel.ops import custom_allreduce
    gpu = EAGER_HOST_RATIO_FIT_GPU[cpu]
    return [r for r in rows if r["mode"] == "eager" and r["hardware"] == gpu
            and r["bytes"] <= EAGER_HOST_FIT_MAX_BYTES
            and custom_allreduce.EAGER_HOST_KEYS.get((r["engine"], eager_host_path(r)))
            not in (None, *NCCL_HOST_KEYS)]


def fit_eager_host_ratio(rows: list[dict], x86_s: dict[str, float]
                         ) -> dict[str, tuple[float, list[str]]]:
    """Each host CPU's ratio to the x86 eager paths `x86_s` (fitted.yaml key -> s) and the row
    ids it is fitted on (EAGER_HOST_RATIO_RULE)."""
    from perfmodel.ops import custom_allreduce
    out = {}
    for cpu, key in custom_allreduce.EAGER_HOST_RATIO_KEYS.items():
        fit = eager_host_ratio_fit_rows(rows, cpu)
        ratios = [r["measured_s"] / x86_s[custom_allreduce.EAGER_HOST_KEYS[
            (r["engine"], eager_host_path(r))]] for r in fit]
        if ratios:
            out[key] = (_median(ratios), [r["id"] for r in fit])
    return out


# the SGLang rows the copy round is fitted on: copy-bound calls (many tokens, fewer SMs than
# saturate the NVLink)
ROUND_FIT_MIN_TOKENS = 4096
ROUND_FIT_MAX_SMS = 16


def round_fit_rows(rows: list[dict]) -> list[dict]:
    """The rows `deepep.copy_round_trips` is fitted on (perfmodel/fitted.yaml)."""
    return [r for r in rows if r["tokens"] >= ROUND_FIT_MIN_TOKENS
            and r["num_sms"] <= ROUND_FIT_MAX_SMS]


def sglang_report(rows: list[dict]) -> str:
    fit = {r["id"] for r in round_fit_rows(rows)}
    judged = [r for r in rows if r["id"] not in fit and r["tokens"] >= 1024]
    table = error_table(grouped_errors(
        judged, lambda r: transmit_predicted_s(r) / r["measured_s"] - 1,
        lambda r: (r["phase"], f"{r['num_sms']} SMs")), ["phase", "SMs"])
    return (f"{table}\n\n({len(judged)} rows of >= 1024 tokens judged, {len(fit)} fit rows of "
            f">= {ROUND_FIT_MIN_TOKENS} tokens on <= {ROUND_FIT_MAX_SMS} SMs left out; smaller "
            f"calls carry the kernel's own barriers, which its transmit time holds and the "
            f"op's fixed time prices)")


def a2a_report(rows: list[dict]) -> str:
    fit = {r["id"] for m in deepep.MODES for p in deepep.PHASES
           for r in fixed_fit_rows(rows, m, p)} | {r["id"] for r in blackwell_round_fit_rows(rows)}

    def key(r: dict) -> tuple:
        small = "<= 256 tokens" if r["tokens"] <= 256 else "> 256 tokens"
        return r["hardware"], r["kernel"], r["phase"], small
    judged = [r for r in rows if r["id"] not in fit]
    table = error_table(grouped_errors(judged, lambda r: a2a_predicted_s(r) / r["measured_s"]
                                       - 1, key), ["hardware", "kernel", "phase", "tokens/rank"])
    base = [alltoall_predicted_s(r) / r["measured_s"] - 1 for r in judged]
    return (f"{table}\n\n({len(judged)} rows judged; left out: the fixed times' and Blackwell's "
            f"copy-round fit rows, {len(fit)}; "
            f"the generic all-to-all on the judged rows: "
            f"{100 * sum(abs(e) for e in base) / len(base):.1f} % MAPE, "
            f"{100 * sum(base) / len(base):+.1f} % bias)")


# -- NCCL's own collectives (AIConfigurator's NCCL 2.29.2 tables) ------------------------------
# validate/data/aiconfigurator_nccl.csv: all-reduce, all-gather, reduce-scatter and all-to-all of
# 512 B-512 MiB over 2, 4 and 8 GPUs of one NVLink domain (2 and 4 on GB200/GB300), the buffer
# sized as nccl-tests sizes it (validate/data/SOURCES.md). `perfmodel validate` judges them by op class and
# size band; the report here adds the GPU count and the ring's bandwidth read off the rows.
NCCL_CSV = DATA_DIR / "aiconfigurator_nccl.csv"
NCCL_OPS = {"allreduce": ops.Allreduce, "allgather": ops.Allgather,
            "reduce_scatter": ops.ReduceScatter, "alltoall": ops.Alltoall}
# the bytes each GPU sends on NCCL's ring per byte of the buffer, x (G-1)/G
RING_SEND_FACTOR = {"allreduce": 2.0, "allgather": 1.0, "reduce_scatter": 1.0}
# Messages this large run NCCL's ring with the Simple protocol (the model and NCCL's tuner agree
# from 64 MiB on every GPU here but the 8-GPU all-reduce, which is NVLS on these NVSwitch
# boards), many chunk loops deep, so their time is a fixed time plus bytes over rates.
RING_FIT_MIN_BYTES = 64 << 20


def load_nccl_rows(path=NCCL_CSV) -> list[dict]:
    """NCCL's collective rows: id, hardware, collective, GPUs, bytes, measured seconds."""
    out = []
    for r in csv.DictReader(io.StringIO(yamlio.read_text(path))):
        s = json.loads(r["shape_json"])
        out.append({"id": r["id"], "hardware": r["hardware"], "collective": r["op"],
                    "gpus": int(s["gpus"]), "bytes": float(s["bytes"]),
                    "measured_s": float(r["value"]) * 1e-3})
    return out


def nccl_predicted_s(row: dict, hw: Hardware | None = None, level: str = "pipes") -> float:
    """The row as the model's collective (algorithm nccl: the pair NCCL's tuner picks)."""
    op = NCCL_OPS[row["collective"]](bytes=row["bytes"], gpus=row["gpus"])
    return predict_op(op, hw or hardware(row["hardware"]), level=level).time_s


def nccl_report(rows: list[dict]) -> str:
    """Error per GPU family (architecture), collective and size band, then per GPU, collective,
    GPU count and band, with the plain roofline beside."""
    groups: dict[tuple, list[tuple[float, float]]] = {}
    for r in rows:
        hw = hardware(r["hardware"])
        errs = (nccl_predicted_s(r, hw) / r["measured_s"] - 1,
                nccl_predicted_s(r, hw, "roofline") / r["measured_s"] - 1)
        band = collective_size_band(r["bytes"])
        groups.setdefault((f"[{hw.architecture}]", r["collective"], "", band), []).append(errs)
        groups.setdefault((r["hardware"], r["collective"], r["gpus"], band), []).append(errs)
    lines = []
    for key, es in sorted(groups.items(), key=lambda kv: (not kv[0][0].startswith("["),
                                                          tuple(map(str, kv[0])))):
        model, roof = [e[0] for e in es], [e[1] for e in es]
        lines.append((*key, len(es), f"{100 * sum(map(abs, model)) / len(model):.1f}%",
                      f"{100 * sum(model) / len(model):+.1f}%",
                      f"{100 * sum(map(abs, roof)) / len(roof):.1f}%"))
    return format_table(["hardware", "collective", "GPUs", "message", "n", "MAPE", "bias",
                         "roofline MAPE"], lines)


def ring_link_rate(hw: Hardware) -> float:
    """The NVLink rate NCCL's topology gives a GPU (bytes/s per direction: the spec's link
    bandwidth x its achievable fraction, 18 x 20.6 GB/s on Hopper, 18 x 40.1 on Blackwell)."""
    link = hw.link("nvlink")
    return link.bandwidth_bytes_per_s * link.achievable_fraction


def ring_rows(rows: list[dict], gpu: str, collective: str) -> list[dict]:
    """The rows of `collective` on `gpu` that NCCL runs on its Simple ring (module notes)."""
    return [r for r in rows if r["hardware"] == gpu and r["collective"] == collective
            and r["bytes"] >= RING_FIT_MIN_BYTES
            and not (collective == "allreduce" and r["gpus"] >= 8)]


def ring_terms(row: dict) -> tuple[float, float]:
    """(bytes each GPU sends on the ring, one GPU's shard of the buffer S/G)."""
    g, s = row["gpus"], row["bytes"]
    return RING_SEND_FACTOR[row["collective"]] * (g - 1) / g * s, s / g


def ring_bandwidth_fit(rows: list[dict], link_rate: float | None = None
                       ) -> tuple[float, float, float]:
    """Least squares of the measured time of Simple-ring rows (ring_rows) on
    time = fixed + sent / link_rate + (S/G) / local_rate: (fixed s, link rate, local rate), in
    bytes/s. `link_rate` None fits it too; given, only the fixed time and the local rate are
    fitted. The S/G term is one step per chunk loop that touches only the GPU's own memory (the
    step that puts its own chunk on the ring, or takes the reduced one off it), during which its
    inbound link idles: with G GPUs it is 1/G of the loop, so it slows 2 GPUs most."""
    if len({r["gpus"] for r in rows}) < 2:
        raise ValueError("the local step's share needs rows of at least two GPU counts")
    sent, shard = np.array([ring_terms(r) for r in rows]).T
    t = np.array([r["measured_s"] for r in rows])
    if link_rate is None:
        a = np.column_stack([np.ones_like(t), sent, shard])
        fixed, per_sent, per_shard = np.linalg.lstsq(a, t, rcond=None)[0]
        return float(fixed), float(1 / per_sent), float(1 / per_shard)
    a = np.column_stack([np.ones_like(t), shard])
    fixed, per_shard = np.linalg.lstsq(a, t - sent / link_rate, rcond=None)[0]
    return float(fixed), float(link_rate), float(1 / per_shard)


def ring_bandwidth_report(rows: list[dict]) -> str:
    """Per GPU and collective: the ring's link rate and local-step rate fitted freely on its
    Simple-ring rows, beside the NVLink rate NCCL's topology gives the GPU."""
    lines = []
    for gpu in sorted({r["hardware"] for r in rows}):
        hw = hardware(gpu)
        for collective in RING_SEND_FACTOR:
            sel = ring_rows(rows, gpu, collective)
            if len({r["gpus"] for r in sel}) < 2:
                continue
            fixed, link, local = ring_bandwidth_fit(sel)
            _, _, local_at_link = ring_bandwidth_fit(sel, ring_link_rate(hw))
            lines.append((gpu, collective, len(sel), f"{fixed * 1e6:.1f}", f"{link / 1e9:.0f}",
                          f"{ring_link_rate(hw) / 1e9:.0f}", f"{local / 1e9:.0f}",
                          f"{local_at_link / 1e9:.0f}"))
    return format_table(["hardware", "collective", "n", "fixed us", "link GB/s",
                         "NCCL's link GB/s", "local GB/s", "local at NCCL's link GB/s"], lines)


# NCCL's all-to-all (grouped send/receive, perfmodel/ops/nccl.py's notes): its four p2p
# rates (nccl.P2P) are fitted jointly on every all-to-all row of one GPU per family and judged
# on the family's other GPUs
P2P_FIT_GPUS = ("H100-SXM", "B200")
# The fit's start and the constants' priors (what the model takes with no rows to fit): no cost
# per peer, LL at its line format's half of NCCL's Hopper NVLink rate (18 x 20.6 GB/s), Simple at
# NCCL's link rate, the channels' copy at NCCL's Blackwell NVLink rate (18 x 40.1 GB/s), so no
# bound of its own on Hopper; (peer_s, ll_rate, link_efficiency, copy_rate)
P2P_PRIOR = (0.0, 185.0e9, 1.0, 722.0e9)
P2P_BOUNDS = ((0.0, 1.0e9, 0.3, 1.0e11), (5.0e-6, 1.0e12, 1.0, 5.0e12))


def p2p_rows(rows: list[dict], gpus: tuple[str, ...] = P2P_FIT_GPUS) -> list[dict]:
    """The all-to-all rows on `gpus` (p2p_fit's rows)."""
    return [r for r in rows if r["collective"] == "alltoall" and r["hardware"] in gpus]


def p2p_terms(row: dict, hw: Hardware) -> dict[str, tuple[float, float]]:
    """Per protocol, what the all-to-all's time takes from the spec: (the peers' bytes over
    NCCL's link rate at efficiency 1, the latency of its steps), as Alltoall._demand builds
    them (p2p_time_s adds the fitted rates)."""
    link = hw.link("nvlink")
    g, s = row["gpus"], row["bytes"]
    rate = link.bandwidth_bytes_per_s * link.achievable_fraction
    return {p: ((g - 1) / g * s / rate,
                link.latency_s * (nccl.base_steps("nvlink", "ring", p, link)
                                  + nccl.P2P_HOPS[p] * link.protocol_step(p)))
            for p in nccl.P2P_PROTOCOLS}


def p2p_time_s(x, row: dict, terms: dict[str, tuple[float, float]]) -> float:
    """The all-to-all's time with p2p rates x = (peer_s, ll_rate, link_efficiency, copy_rate):
    the faster of LL and Simple, each its link time at nccl.p2p_efficiency, its latency and
    nccl.p2p_extra_s at those rates (the test suite checks it against the op)."""
    p2p = dict(zip(nccl.P2P_KEYS, x))
    g, s = row["gpus"], row["bytes"]
    times = []
    for protocol in nccl.P2P_PROTOCOLS:
        link_s, latency = terms[protocol]
        link_s /= nccl.p2p_efficiency(protocol, p2p)
        times.append(link_s + latency + nccl.p2p_extra_s(protocol, s, g, link_s, p2p))
    return min(times)


def p2p_fit(rows: list[dict], hws: dict[str, Hardware]) -> tuple[float, ...]:
    """(peer_s, ll_rate, link_efficiency, copy_rate) by least squares of the relative error
    (soft L1: the rows' occasional doubled small-message times weigh little) over `rows`, from
    P2P_PRIOR; `hws` by GPU name (the fit's hardware, its NCCL latencies fitted)."""
    from scipy.optimize import least_squares
    terms = [p2p_terms(r, hws[r["hardware"]]) for r in rows]
    scale = np.array([1e-6, 1e9, 1.0, 1e9])  # the solver's units: us, GB/s, 1, GB/s

    def residuals(z):
        x = z * scale
        return [p2p_time_s(x, r, t) / r["measured_s"] - 1 for r, t in zip(rows, terms)]

    lo, hi = (np.array(b) / scale for b in P2P_BOUNDS)
    sol = least_squares(residuals, np.array(P2P_PRIOR) / scale, bounds=(lo, hi),
                        loss="soft_l1", f_scale=0.1)
    return tuple(float(v) for v in sol.x * scale)


def main() -> None:
    rows = load_rows()
    print("TensorRT-LLM's all-reduce (AIConfigurator) against the builder's tensor-parallel "
          "all-reduce, replayed from a CUDA graph and launched eagerly\n")
    print(report(rows))
    print(f"\n({len(rows)} rows, all judged)")
    engine_rows = load_engine_rows()
    fit_ids = set(fitted.fitted_rows())
    fit_n = sum(r["id"] in fit_ids for r in engine_rows)
    engine_rows = [r for r in engine_rows if r["id"] not in fit_ids]
    print("\nThe engines' own all-reduce (AIConfigurator: vLLM, SGLang custom all-reduce; the "
          "TensorRT-LLM rows above as graph-replayed) against each engine's dispatch "
          "(perfmodel/ops/custom_allreduce.py), graph rows captured, eager rows eager\n")
    print(engine_report(engine_rows))
    print(f"\n({len(engine_rows)} rows judged; {fit_n} fit rows left out: the eager host "
          f"paths' and the release barriers', perfmodel/fitted.yaml)")
    a2a = load_a2a_rows()
    print("\nTensorRT-LLM's DeepEP dispatch and combine (AIConfigurator) against the deepep op "
          "(eager)\n")
    print(a2a_report(a2a))
    sgl = load_sglang_deepep_rows()
    print("\nSGLang's DeepEP normal kernels on H200 (AIConfigurator, transmit time) against the "
          "deepep op's kernel time, by SMs given to the kernel\n")
    print(sglang_report(sgl))
    nccl_rows = load_nccl_rows()
    print("\nNCCL 2.29.2's collectives (AIConfigurator) against the collective ops (algorithm "
          "nccl), by GPU family, then GPU and GPU count\n")
    print(nccl_report(nccl_rows))
    print(f"\n({len(nccl_rows)} rows; the all-reduce rows of at most 4 KiB on H100 SXM and B200 "
          f"fit the NVLink LL base and hop, perfmodel/fitted.yaml)")
    print("\nThe Simple ring's rates read off the rows of at least 64 MiB (time = fixed + "
          "sent / link + shard / local; the 8-GPU all-reduce, NVLS, left out)\n")
    print(ring_bandwidth_report(nccl_rows))


if __name__ == "__main__":
    main()
