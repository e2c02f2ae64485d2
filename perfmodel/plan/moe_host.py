"""The host's share of a Megatron-Core MoE microbatch: the kernels it launches one by one, and
the synchronisation each dropless MoE layer makes it wait at.

**The synchronisation.** A dropless MoE layer's token dispatcher needs the number of tokens each
local expert receives on the host, before its all-to-all (the splits are Python lists) and its
grouped GEMMs (`m_splits`). Megatron-Core 0.16.0 transformer/moe/token_dispatcher.py:

- alltoall (MoEAlltoAllTokenDispatcher, dropless: `moe_pad_expert_input_to_capacity` off):
  `preprocess` sets `cuda_sync_point = "before_ep_alltoall"` when ep > 1 (`"before_finish"`
  otherwise); `_maybe_dtoh_and_synchronize` copies tokens_per_expert and the splits to the
  host on a side stream after the router and, at the sync point, `self.d2h_event.synchronize()`:
  the host waits until the GPU has run everything up to the router.
- flex with DeepEP (`_DeepepManager.dispatch`, fused_a2a.py:110-135): DeepEP's dispatch
  returns `num_recv_tokens_per_expert_list`, a Python list the host waits for.

So each MoE layer's forward (and its recomputed forward) starts its expert half with an idle
host: the graph's `l<i>.dispatch` op (its `l<i>.experts` where the experts need no exchange)
is issued only once the GPU has drained the ops before it. The backward has no such wait (the
splits are saved in the forward), so there the host runs ahead as far as its own issue rate
allows. Padded (token-dropping) dispatch removes the wait (megatron-core 0.14.0
token_dispatcher.py: `drop_and_pad` keeps cuda_sync_point "no_sync"; plan_training
`moe_capacity_factor`): the host then runs ahead and paces the microbatch only where its issue
time outruns the GPU's (`moe_host_extra_s` with synced False); CUDA graphs over the layer
remove the host's issue too.

**The host's issue time.** Every host operation costs the host `launch_s` (Python, PyTorch's
dispatch, Transformer Engine's module code, the launches) before the GPU can start its work. A
graph op is one operation, but the experts: Transformer Engine 2.12 GroupedLinear
(transformer_engine/pytorch/module/grouped_linear.py) quantizes its input split by split
(`tex.split_quantize`, csrc/extensions/cast.cpp: per local expert a quantizer converted, a
quantized tensor object created, and its quantize launched by `multi_tensor_quantize_impl`)
and runs one cuBLAS GEMM per local expert (`general_grouped_gemm`, csrc/extensions/gemm.cpp
`te_general_grouped_gemm`). The expert MLP has two GroupedLinears (FC1, FC2; Megatron-Core
experts.py TEGroupedMLP), so per local expert:

- forward (`experts`): 2 · (q + 1): each linear's input quantize and its GEMM;
- backward dgrad (`experts_dgrad`): 2 · (q + 1): the output gradient's quantize and the dgrad;
- backward wgrad (`experts_wgrad`): 2: the wgrad GEMMs (the inputs were quantized column-wise
  in the forward);

with q = 1 for a quantized recipe (QUANTIZE_OPS: FP8, MXFP8, NVFP4 each quantize one tensor
object per split) and 0 for BF16 (`torch.split` views, no quantize). A quantize counts once
whatever kernels it launches inside its C++ call (FP8 current scaling's three, csrc/
quantizer.cpp Float8CurrentScalingQuantizer::quantize_impl: amax, scale, cast; MXFP8's one;
NVFP4's fused split quantize): on the Megatron-Bridge rows one fitted cost per operation fits
both the H100 FP8 and the B200 MXFP8 MoE rows, one per kernel does not (H100 would want 0.6 of
B200's).

**The schedule** (`host_bound_s`): the ops in issue order, each n launches of launch_s on the
host and g seconds on the GPU split evenly over them. With the host's clock H and the GPU's G,
an op ends at max(G + g, H + launch_s + g, H + n·launch_s + g/n) (its launches one after the
other, each kernel starting when issued and when the GPU is free: the latest of the first and
the last kernel bounds the rest) and the host moves to H + n·launch_s; a synchronisation first
sets H = max(H, G). The microbatch takes max(H, G) at its end; what it takes beyond the GPU's
serial sum is the host's share (`moe_host_extra_s`). `launch_s` is fitted (perfmodel/
fitted.yaml training.moe_host_launch_s, on the H100 Megatron-Bridge rows; module constant
HOST_LAUNCH_S): it stands for everything the host does per launched kernel, not a measured
launch latency.

The unfused calls Megatron-Core makes around some models' experts (gpt-oss's clamp and
down-projection bias) are host operations too, one per torch call (workloads.builder
EXPERT_EXTRAS: the bias's per local expert, from the layer's moe op).

Not modelled: a dense model's host time (no synchronisation in its microbatch: the host runs
ahead of a GPU-bound step), CUDA graphs (the Megatron-Bridge recipes from 26.06 capture MXFP8
MoE steps whole), the launch queue's depth, and the PyTorch frameworks' MoE (plan_training's
framework "pytorch" leaves the graph as it is).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

from perfmodel import fitted
from perfmodel.errors import InputError
from perfmodel.graph import DEFAULT_STREAM
from perfmodel.workloads.builder import EXPERT_EXTRAS

HOST_LAUNCH_KEY = "training.moe_host_launch_s"
HOST_LAUNCH_S = fitted.value(HOST_LAUNCH_KEY)
# host operations one quantize of an expert's split takes, by the GEMM policy (module docstring)
QUANTIZE_OPS = {"bf16": 0, "fp16": 0, "fp8": 1, "mxfp8": 1, "nvfp4": 1}
# host operations per local expert of the expert ops, as (GEMMs, quantizes): module docstring
EXPERT_LAUNCHES = {"experts": (2, 2), "experts_dgrad": (2, 2), "experts_wgrad": (2, 0)}
# the op a dropless MoE layer's host waits before (the dispatch; the experts without one)
SYNC_ROLES = ("dispatch", "experts")


@dataclass(frozen=True)
class HostStep:
    """One op as the host issues it: `launches` kernels, `gpu_s` seconds of GPU work, and
    whether the host first waits for the GPU to drain (`sync`)."""
    name: str
    launches: float
    gpu_s: float
    sync: bool = False


def launch_seconds(value: float | None) -> float:
    """The host's seconds per launched kernel: `value`, or HOST_LAUNCH_S where None; InputError
    (naming moe_host_launch_s) unless a finite number >= 0."""
    v = HOST_LAUNCH_S if value is None else value
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise InputError(f"moe_host_launch_s: expected seconds >= 0 (a number), got {v!r}")
    return float(v)


def role(name: str) -> str:
    """An op's role in its layer: 'l3.experts_dgrad' -> 'experts_dgrad'."""
    return name.rsplit(".", 1)[-1]


def layer_of(name: str) -> str | None:
    """The decoder layer prefix of a graph op ('l3' of 'l3.recompute.experts'), or None."""
    prefix = name.split(".", 1)[0]
    return prefix if prefix.startswith("l") and prefix[1:].isdigit() else None


def local_experts(op) -> int:
    """Experts one GPU holds for a `moe` op: experts / ep, rounded up."""
    return math.ceil(op.params["experts"] / max(1, op.params.get("gpus", 1)))


def launches(name: str, op, dtype: str, local: int = 1) -> float:
    """Host operations of a graph op (module docstring): an expert op's per local
    expert; the unfused ops around the experts their torch calls (workloads.builder
    EXPERT_EXTRAS, `local` the layer's local experts); any other op one."""
    r = role(name)
    if r in EXPERT_EXTRAS:
        extra = EXPERT_EXTRAS[r]
        return float(extra.calls_per_expert * local + extra.calls)
    if op.name == "moe" and r in EXPERT_LAUNCHES:
        if dtype not in QUANTIZE_OPS:
            raise InputError(f"dtype: expected one of {', '.join(QUANTIZE_OPS)}, got {dtype!r}")
        gemms, quantizes = EXPERT_LAUNCHES[r]
        return (gemms + quantizes * QUANTIZE_OPS[dtype]) * local_experts(op)
    return 1.0


def host_steps(ops: Sequence, dtype: str, microbatches: int, weight_cache: bool,
               fused_casts: bool, synced: bool = True) -> list[HostStep]:
    """The microbatch's compute-stream ops as the host issues them: each MoE layer's forward
    dispatch (or experts, with no exchange) a synchronisation (none where not `synced`: a
    padded dispatcher's, plan_training moe_capacity_factor); a weight cast cached across
    microbatches (`weight_cache`) once in `microbatches`; a cast after a norm that the norm
    writes (`fused_casts`) none (perfmodel.plan.frameworks, the same savings)."""
    out: list[HostStep] = []
    waited: set[str] = set()
    local: dict[str | None, int] = {}  # a layer's local experts, from its forward moe op
    prev = None
    m = max(1, microbatches)
    for o in ops:
        if o.stream != DEFAULT_STREAM:
            continue
        share = 1.0
        if weight_cache and o.name.endswith(".quant_w"):
            share = 1.0 / m
        if fused_casts and o.name.endswith(".quant_x") and prev is not None \
                and prev.op.name == "norm":
            share = 0.0
        prev = o
        if share == 0.0:
            continue
        layer, r = layer_of(o.name), role(o.name)
        if o.op.name == "moe":
            local.setdefault(layer, local_experts(o.op))
        # one wait per forward pass of a layer: the forward's and the recomputed forward's
        key = f"{layer}.{'recompute' if '.recompute.' in o.name else 'forward'}"
        sync = (synced and layer is not None and r in SYNC_ROLES and key not in waited
                and (r == "dispatch" or o.op.name == "moe"))
        if sync:
            waited.add(key)
        out.append(HostStep(o.name, launches(o.name, o.op, dtype, local.get(layer, 1)) * share,
                            o.time_s * share, sync))
    return out


def host_bound_s(steps: Iterable[HostStep], launch_s: float) -> tuple[float, float]:
    """(the microbatch's time with the host's issue and waits, the GPU's serial sum): the
    schedule of the module docstring."""
    host = gpu = serial = 0.0
    for s in steps:
        if s.sync:
            host = max(host, gpu)
        n = max(s.launches, 0.0)
        if n == 0:
            gpu += s.gpu_s
        else:
            first = host + min(1.0, n) * launch_s
            gpu = max(gpu + s.gpu_s, first + s.gpu_s, host + n * launch_s + s.gpu_s / max(1.0, n))
            host += n * launch_s
        serial += s.gpu_s
    return max(host, gpu), serial


def moe_host_extra_s(ops: Sequence, dtype: str, microbatches: int, launch_s: float,
                     weight_cache: bool = True, fused_casts: bool = True,
                     synced: bool = True) -> float:
    """Seconds a microbatch takes beyond its compute-stream ops' serial sum because the host
    issues them (module docstring); 0 for a graph with no MoE layer or launch_s 0. Not
    `synced` (a padded dispatcher): no layer waits, and the host paces the microbatch only
    where its issue time outruns the GPU's."""
    launch_s = launch_seconds(launch_s)
    if launch_s == 0:
        return 0.0
    steps = host_steps(ops, dtype, microbatches, weight_cache, fused_casts, synced)
    if synced and not any(s.sync for s in steps):
        return 0.0
    total, serial = host_bound_s(steps, launch_s)
    return max(0.0, total - serial)
