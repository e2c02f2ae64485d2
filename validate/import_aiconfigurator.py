"""Sample NVIDIA AIConfigurator's measured op database into validate/data/aiconfigurator_gemm.csv
(TensorRT-LLM's linears), validate/data/aiconfigurator_vllm_gemm.csv (vLLM's per-tensor FP8
linears) and validate/data/aiconfigurator_mla_decode.csv (its DeepSeek-V3 MLA attention block in
decode), among others (the *_OUT paths below).

AIConfigurator (ai-dynamo/aiconfigurator, Apache-2.0) ships per-GPU, per-framework tables of
measured op latencies, collected on the GPU with the framework's own modules. This script reads
the TensorRT-LLM GEMM tables (`systems/data/<gpu>/gemm/trtllm/<version>/gemm_perf.parquet`: the
latency in ms of TensorRT-LLM's Linear module for m x n x k, in BF16, per-tensor FP8, 1x128
block FP8 and NVFP4) from the unpacked `aiconfigurator-core` wheel and writes a stratified sample
in the columns of public_measurements.csv (op `linear`: the module quantizes its activation,
then runs the GEMM; perfmodel.ops.linear).

    pip download aiconfigurator-core==0.12.0 --no-deps -d /tmp/aic
    unzip -q /tmp/aic/aiconfigurator_core-0.12.0-*.whl -d /tmp/aic/core
    python validate/import_aiconfigurator.py /tmp/aic/core     # needs pandas + pyarrow

Sampling: n and k from 1024 to 32768 (the layer shapes of the models served), every m; per GPU
and dtype, PER_BIN rows drawn at random (seed 0) in each of six bins of m, so decode-sized and
prefill-sized GEMMs are both judged.
"""
from __future__ import annotations

import csv
import glob
import json
import re
import sys
from pathlib import Path

WHEEL = "aiconfigurator-core 0.12.0"
GPUS = {"h100_sxm": "H100-SXM", "h200_sxm": "H200-SXM", "b200_sxm": "B200", "b300_sxm": "B300",
        "gb200": "GB200"}
DTYPES = {"bfloat16": "bf16", "fp8": "fp8_e4m3", "fp8_block": "fp8_e4m3_block",
          "nvfp4": "nvfp4"}
M_BINS = (0, 16, 64, 256, 1024, 4096, 1 << 30)
# and every dtype at the same compute-bound shapes, so dtypes compare on equal terms (the
# power-limit fit, perfmodel.validation.fit POWER_RULE, uses these pairs)
PAIRED = [(m, n, k) for m in (4096, 8192) for n in (4096, 8192) for k in (4096, 8192)] + [
    (16384, 16384, 16384)]
PER_BIN = 8
OUT = Path(__file__).resolve().parent / "data" / "aiconfigurator_gemm.csv"
MLA_OUT = OUT.with_name("aiconfigurator_mla_decode.csv")
MOE_OUT = OUT.with_name("aiconfigurator_moe.csv")
ATTENTION_OUT = OUT.with_name("aiconfigurator_attention.csv")
MLA_ATTENTION_OUT = OUT.with_name("aiconfigurator_mla_attention.csv")
ALLREDUCE_OUT = OUT.with_name("aiconfigurator_allreduce.csv")
MOE_A2A_OUT = OUT.with_name("aiconfigurator_moe_a2a.csv")
SGLANG_DEEPEP_OUT = OUT.with_name("aiconfigurator_sglang_deepep.csv")
NCCL_OUT = OUT.with_name("aiconfigurator_nccl.csv")
MXFP4_MOE_OUT = OUT.with_name("aiconfigurator_moe_mxfp4.csv")
# vLLM's per-tensor FP8 linear (CutlassFP8ScaledMMLinearKernel: the activation cast, then
# cutlass_scaled_mm, whose kernel vLLM picks by M: perfmodel/ops/gemm_dispatch.py) on H100, H200
# and B200; n and k as the TensorRT-LLM sample, VLLM_PER_BIN rows drawn (seed 0) in each bin of
# m, the bins split at the dispatch table's boundaries so each configuration is judged
VLLM_GEMM_OUT = OUT.with_name("aiconfigurator_vllm_gemm.csv")
VLLM_GEMM_GPUS = {"h100_sxm": "H100-SXM", "h200_sxm": "H200-SXM", "b200_sxm": "B200"}
VLLM_M_BINS = (0, 16, 64, 128, 256, 1024, 4096, 1 << 30)
VLLM_PER_BIN = 10
# gpt-oss-120b's routed experts with MXFP4 weights and BF16 activations (moe_dtype w4a16_mxfp4:
# hidden 2880, expert width 2880, top-4 of 128) as vLLM 0.24.0 (the OpenAI Triton MXFP4 experts)
# and TensorRT-LLM 1.3.0rc20 run them on H100/H200, balanced routing, experts over EP ranks
MXFP4_MOE_TABLES = (("vllm", "0.24.0", "vLLM"), ("trtllm", "1.3.0rc20", "TensorRT-LLM"))
MXFP4_MOE_GPUS = {"h100_sxm": "H100-SXM", "h200_sxm": "H200-SXM"}
MXFP4_MOE_EP, MXFP4_MOE_TOKENS = (1, 8), (1, 4, 16, 64, 256, 1024, 4096, 16384)
ENGINE_ALLREDUCE_OUT = OUT.with_name("aiconfigurator_engine_allreduce.csv")
# vLLM's attention layer in generation (generation_attention_perf, vLLM 0.24.0: the cache append,
# then FlashAttention-3 on Hopper, the vllm_flash_attn_fa3 rows, or FlashInfer's trtllm-gen
# decode on Blackwell, the vllm_flashinfer_trtllmdecode rows), H100, H200, B200, B300 and GB200:
# the (query heads, KV heads) of ATTENTION_HEADS at head dim 128 (Llama), and gpt-oss's 64/8 ...
# 8/1 at head dim 64, full or 128-token sliding window; per GPU, head dim and KV dtype
# ATTENTION_PER_BIN rows drawn (seed 0) in each KV-bytes bin
VLLM_ATTENTION_OUT = OUT.with_name("aiconfigurator_vllm_attention.csv")
VLLM_ATTENTION_GPUS = {"h100_sxm": "H100-SXM", "h200_sxm": "H200-SXM", "b200_sxm": "B200",
                       "b300_sxm": "B300", "gb200": "GB200"}
VLLM_ATTENTION_KERNELS = ("vllm_flash_attn_fa3", "vllm_flashinfer_trtllmdecode")
# SGLang's attention layer in generation, the same sample from its 0.5.14 tables: FA3 on Hopper
# (the fa3 rows), trtllm_mha on Blackwell (its SM100 defaults, server_args.py
# _get_default_attn_backend)
SGLANG_ATTENTION_OUT = OUT.with_name("aiconfigurator_sglang_attention.csv")
SGLANG_ATTENTION_KERNELS = ("fa3", "trtllm_mha")
# vLLM's Marlin MoE on MXFP4 experts with BF16 activations (moe_perf, vLLM 0.24.0, the
# compressed-tensors W4A4-MXFP4 method's Marlin rows: the only Marlin MXFP4 MoE tables, of a
# 896-expert top-16 model, hidden 3584, expert width 3072), H100 and H200, balanced routing, one
# GPU (EP1, TP1), every token count
MARLIN_MOE_OUT = OUT.with_name("aiconfigurator_moe_marlin.csv")
MARLIN_MOE_SOURCE = "vllm_compressedtensorsw4a4mxfp4moe_marlin_marlinexperts_situ_as_silu"
MARLIN_MOE_GPUS = {"h100_sxm": "H100-SXM", "h200_sxm": "H200-SXM"}
GPT_OSS_HEADS = ((64, 8), (32, 4), (16, 2), (8, 1))
# NCCL's collectives (nccl_perf) at the newest NCCL version each GPU's table has, GB300 included;
# FP16 buffers (the table's `half`; its int8 rows repeat the same byte counts)
NCCL_GPUS = {**GPUS, "gb300": "GB300"}
NCCL_OPS = {"all_reduce": "allreduce", "all_gather": "allgather",
            "reduce_scatter": "reduce_scatter", "alltoall": "alltoall"}
# vLLM's and SGLang's custom all-reduce tables (custom_allreduce_perf), the newest version of
# each engine per GPU, both the CUDA-graph and the eager rows
ENGINE_ALLREDUCE = {"vllm": "vLLM", "sglang": "SGLang"}
# SGLang's DeepEP normal kernels on one H200 node (wideep_deepep_normal_perf, SGLang 0.5.12):
# DeepSeek-V3's shape at these tokens per rank, every SM count the table sweeps
SGLANG_DEEPEP_TOKENS = (16, 256, 1024, 4096, 16384, 65536)
# DeepEP's dispatch/combine as TensorRT-LLM runs them (moe_a2a_perf): DeepSeek-V3's MoE shape
# (hidden 7168, top-8 of 256), at these tokens per rank
MOE_A2A_TOKENS = (1, 16, 128, 256, 1024, 8192, 65536)
# the fused-MoE rows kept: DeepSeek-V3's routed experts (7168 hidden, 2048 per expert, top-8 of
# 256), balanced routing, experts split over EP 8/16/32 GPUs (no TP), CUTLASS kernels
MOE_EP, MOE_TOKENS = (8, 16, 32), (1, 16, 64, 256, 1024, 4096, 16384)
# the GQA attention rows kept: head dim 128, full attention, the (query heads, KV heads) one GPU
# holds for Llama-3 8B (32/8 at TP1, 8/2 at TP4), 70B (64/8 TP1 ... 8/1 TP8) and 405B (16/1 at
# TP8); per GPU, phase and KV dtype ATTENTION_PER_BIN rows drawn (seed 0) in each bin of the
# KV bytes a call reads, so launch-bound and bandwidth-bound calls are both judged
ATTENTION_HEADS = ((32, 8), (8, 2), (64, 8), (32, 4), (16, 2), (8, 1), (16, 1))
ATTENTION_KV_BINS = (0, 1e6, 1e7, 1e8, 1e9, 1e12)
ATTENTION_PER_BIN = 12
# the MLA generation-kernel rows kept: DeepSeek-V3's 128 heads (TP1 / attention DP) and 16
# (TP8), a BF16 or FP8 latent cache, decode batches and key counts on a grid
MLA_ATTENTION_HEADS = (16, 128)
MLA_ATTENTION_BATCHES = (1, 8, 64, 256, 1024)
MLA_ATTENTION_STEPS = (127, 1023, 4095, 16383)
# the MLA block rows kept: TP8 and TP1 head counts, decode batches, 1024 keys, a BF16 cache
MLA_HEADS, MLA_BATCHES, MLA_KEYS = (16, 128), (1, 2, 4, 8, 32, 128), 1024


def main(root: str) -> None:
    import pandas as pd
    rows = []
    base = Path(root) / "aiconfigurator_core" / "systems" / "data"
    for folder, gpu in GPUS.items():
        tables = sorted(glob.glob(str(base / folder / "gemm" / "trtllm" / "*"
                                      / "gemm_perf.parquet")))
        if not tables:
            raise SystemExit(f"{base / folder}: no TensorRT-LLM gemm_perf.parquet")
        path = Path(tables[-1])
        version = path.parent.name
        d = pd.read_parquet(path)
        d = d[(d.n >= 1024) & (d.n <= 32768) & (d.k >= 1024) & (d.k <= 32768)]
        paired = d.set_index(["m", "n", "k"]).index.isin(PAIRED)
        for dt, g in sorted(d.groupby("gemm_dtype")):
            if dt not in DTYPES:
                continue
            g = g.assign(bin=pd.cut(g.m, M_BINS, labels=False))
            picks = [b.sample(min(PER_BIN, len(b)), random_state=0)
                     for _, b in sorted(g.groupby("bin"))]
            picks.append(g[paired[d.gemm_dtype == dt]])
            chosen = pd.concat(picks).drop_duplicates(["m", "n", "k"])
            number = 0
            for _, s in sorted(chosen.groupby("bin")):
                s = s.sort_values(["m", "n", "k"])
                for r in s.itertuples():
                    number += 1  # ids as elsewhere: source, then a number (calibrate.source_of)
                    rows.append(_row(
                        f"AIC-{gpu}-{dt}-{number:03d}", gpu,
                        f"{folder}/gemm/trtllm/{version}/gemm_perf.parquet",
                        f"TensorRT-LLM {version} Linear ({r.kernel_source})", "linear",
                        DTYPES[dt], {"M": int(r.m), "N": int(r.n), "K": int(r.k)}, r.latency,
                        f"AIConfigurator measured latency of TensorRT-LLM's {dt} linear module "
                        f"on {r.device} (activation quantization included for the quantized "
                        f"types); sampled by validate/import_aiconfigurator.py"))
    _write(OUT, rows)
    _write(MLA_OUT, mla_rows(base))
    _write(MOE_OUT, moe_rows(base))
    _write(ATTENTION_OUT, attention_rows(base))
    _write(MLA_ATTENTION_OUT, mla_attention_rows(base))
    _write(ALLREDUCE_OUT, allreduce_rows(base))
    _write(MOE_A2A_OUT, moe_a2a_rows(base))
    _write(SGLANG_DEEPEP_OUT, sglang_deepep_rows(base))
    _write(NCCL_OUT, nccl_rows(base))
    _write(MXFP4_MOE_OUT, mxfp4_moe_rows(base))
    _write(VLLM_GEMM_OUT, vllm_gemm_rows(base))
    _write(ENGINE_ALLREDUCE_OUT, engine_allreduce_rows(base))
    _write(VLLM_ATTENTION_OUT, vllm_attention_rows(base))
    _write(SGLANG_ATTENTION_OUT, vllm_attention_rows(base, "sglang"))
    _write(MARLIN_MOE_OUT, marlin_moe_rows(base))


def _newest(folder: Path) -> Path:
    """The newest version folder under `folder` (numeric order: 2.29.2 after 2.27.3)."""
    def key(p: Path):
        return [int(x) if x.isdigit() else x for x in re.split(r"[.]|(?<=\d)(?=[a-z])", p.name)]
    return max((p for p in folder.iterdir() if p.is_dir()), key=key)


def vllm_gemm_rows(base: Path) -> list[dict]:
    """vLLM's per-tensor FP8 linear module (VLLM_GEMM_GPUS, the newest vLLM table of each),
    VLLM_PER_BIN rows per bin of m (VLLM_M_BINS)."""
    import pandas as pd
    rows = []
    for folder, gpu in VLLM_GEMM_GPUS.items():
        path = _newest(base / folder / "gemm" / "vllm") / "gemm_perf.parquet"
        version = path.parent.name
        d = pd.read_parquet(path)
        d = d[(d.gemm_dtype == "fp8") & (d.n >= 1024) & (d.n <= 32768) & (d.k >= 1024)
              & (d.k <= 32768)]
        d = d.assign(bin=pd.cut(d.m, VLLM_M_BINS, labels=False))
        chosen = pd.concat([b.sample(min(VLLM_PER_BIN, len(b)), random_state=0)
                            for _, b in sorted(d.groupby("bin"))])
        for n, r in enumerate(chosen.sort_values(["m", "n", "k"]).itertuples(), start=1):
            rows.append(_row(
                f"AICVLLM-{gpu}-fp8-{n:03d}", gpu, f"{folder}/gemm/vllm/{version}/gemm_perf.parquet",
                f"vLLM {version} Linear ({r.kernel_source})", "linear", "fp8_e4m3",
                {"M": int(r.m), "N": int(r.n), "K": int(r.k)}, r.latency,
                f"AIConfigurator measured latency of vLLM's per-tensor FP8 linear module on "
                f"{r.device} (activation quantization included); sampled by "
                f"validate/import_aiconfigurator.py"))
    return rows


def mxfp4_moe_rows(base: Path) -> list[dict]:
    """gpt-oss-120b's MXFP4 experts (MXFP4_MOE_TABLES) at MXFP4_MOE_EP x MXFP4_MOE_TOKENS,
    balanced routing, no expert TP."""
    import pandas as pd
    rows = []
    for folder, gpu in MXFP4_MOE_GPUS.items():
        for engine, version, name in MXFP4_MOE_TABLES:
            table = f"{folder}/moe/{engine}/{version}/moe_perf.parquet"
            if not (base / table).is_file():
                continue
            d = pd.read_parquet(base / table)
            d = d[(d.moe_dtype == "w4a16_mxfp4") & (d.hidden_size == 2880)
                  & (d.inter_size == 2880) & (d.num_experts == 128) & (d.topk == 4)
                  & (d.distribution == "balanced") & (d.moe_tp_size == 1)
                  & d.moe_ep_size.isin(MXFP4_MOE_EP) & d.num_tokens.isin(MXFP4_MOE_TOKENS)]
            for n, r in enumerate(d.sort_values(["moe_ep_size", "num_tokens"]).itertuples(),
                                  start=1):
                rows.append(_row(
                    f"AICMXFP4-{engine}-{gpu}-{n:03d}", gpu, table,
                    f"{name} {version} fused MoE ({r.kernel_source})", "moe_module",
                    "w4a16_mxfp4", {"tokens": int(r.num_tokens), "hidden": int(r.hidden_size),
                                    "expert_hidden": int(r.inter_size),
                                    "experts": int(r.num_experts), "top_k": int(r.topk),
                                    "ep": int(r.moe_ep_size), "routing": "balanced"},
                    r.latency,
                    f"AIConfigurator measured latency of {name}'s fused MoE module with MXFP4 "
                    f"weights and BF16 activations (gpt-oss-120b's experts) on {r.device}"))
    return rows


def nccl_rows(base: Path) -> list[dict]:
    """NCCL's all-reduce, all-gather, reduce-scatter and all-to-all (nccl_perf: FP16, 2/4/8
    GPUs of one NVLink domain, 4 at most on GB200/GB300, 256 to 512M elements), at the newest
    NCCL version of each GPU's table. `message_size` counts elements of the op's buffer as
    nccl-tests sizes it (the per-GPU buffer of an all-reduce and an all-to-all, the whole
    gathered output of an all-gather, the whole input of a reduce-scatter); `bytes` = 2 x
    elements."""
    import pandas as pd
    rows = []
    for folder, gpu in NCCL_GPUS.items():
        version = _newest(base / folder / "comm" / "nccl").name
        table = f"{folder}/comm/nccl/{version}/nccl_perf.parquet"
        d = pd.read_parquet(base / table)
        d = d[d.nccl_dtype == "half"].sort_values(["op_name", "num_gpus", "message_size"])
        for n, r in enumerate(d.itertuples(), start=1):
            rows.append(_row(
                f"AICNCCL-{gpu}-{n:03d}", gpu, table, f"NCCL {version}", NCCL_OPS[r.op_name],
                "fp16", {"gpus": int(r.num_gpus), "elements": int(r.message_size),
                         "bytes": 2 * int(r.message_size), "nccl": version}, r.latency,
                f"AIConfigurator measured latency of NCCL {version}'s {r.op_name} of "
                f"{int(r.message_size)} FP16 elements over {int(r.num_gpus)} GPUs"
                + (f" on {r.device}" if hasattr(r, "device") else "")))
    return rows


def engine_allreduce_rows(base: Path) -> list[dict]:
    """vLLM's and SGLang's custom all-reduce (custom_allreduce_perf: BF16, 2/4/8 GPUs, 128 to
    the engine's size limit in elements), the newest version of each engine per GPU, replayed
    from a CUDA graph and eagerly (`kernel_source` ..._graph / ..._eager)."""
    import pandas as pd
    rows = []
    for engine, name in ENGINE_ALLREDUCE.items():
        for folder, gpu in NCCL_GPUS.items():
            root = base / folder / "comm" / engine
            if not root.is_dir():
                continue
            version = _newest(root).name
            table = f"{folder}/comm/{engine}/{version}/custom_allreduce_perf.parquet"
            if not (base / table).is_file():
                continue
            d = pd.read_parquet(base / table).sort_values(["kernel_source", "num_gpus",
                                                           "message_size"])
            for n, r in enumerate(d.itertuples(), start=1):
                mode = "graph" if r.kernel_source.endswith("graph") else "eager"
                rows.append(_row(
                    f"AICEAR-{engine}-{gpu}-{n:03d}", gpu, table,
                    f"{name} {version} custom all-reduce ({mode})", f"{engine}_allreduce", "bf16",
                    {"gpus": int(r.num_gpus), "elements": int(r.message_size),
                     "bytes": 2 * int(r.message_size), "engine": engine, "version": version,
                     "mode": mode}, r.latency,
                    f"AIConfigurator measured latency of {name} {version}'s custom all-reduce "
                    f"({r.kernel_source}) of {int(r.message_size)} BF16 elements over "
                    f"{int(r.num_gpus)} GPUs on {r.device}"))
    return rows


def sglang_deepep_rows(base: Path) -> list[dict]:
    """SGLang's DeepEP normal dispatch and combine on H200 (wideep_deepep_normal_perf, SGLang
    0.5.12: one node, EP8), DeepSeek-V3's shape (hidden 7168, top-8 of 256) at
    SGLANG_DEEPEP_TOKENS tokens per rank and every `dispatch_sms` / `combine_sms` the table
    sweeps (4-24). The table gives the kernels' transmit time in microseconds (its notify time
    is 0: the layout, notify and host wait are not in it)."""
    import pandas as pd
    table = base / "h200_sxm" / "comm" / "sglang" / "0.5.12" / "wideep_deepep_normal_perf.parquet"
    d = pd.read_parquet(table)
    d = d[(d.hidden_size == 7168) & (d.num_topk == 8) & (d.num_experts == 256)
          & d.num_token.isin(SGLANG_DEEPEP_TOKENS)]
    rows, n = [], 0
    for phase in ("dispatch", "combine"):
        for r in d.sort_values([f"{phase}_sms", "num_token"]).itertuples():
            n += 1
            sms = int(getattr(r, f"{phase}_sms"))
            rows.append(_row(
                f"AICSGEP-H200-SXM-{n:03d}", "H200-SXM",
                "h200_sxm/comm/sglang/0.5.12/wideep_deepep_normal_perf.parquet",
                f"SGLang 0.5.12 DeepEP normal {phase} (transmit)", f"sglang_deepep_{phase}",
                "bfloat16", {"tokens": int(r.num_token), "hidden": int(r.hidden_size),
                             "top_k": int(r.num_topk), "experts": int(r.num_experts), "ep": 8,
                             "num_sms": sms, "kernel": "deepep_normal"},
                getattr(r, f"{phase}_transmit_us") / 1e3,  # the table gives us
                f"AIConfigurator measured transmit time of SGLang's DeepEP normal {phase} of "
                f"{int(r.num_token)} tokens per rank over 8 GPUs on {r.device}, {sms} SMs"))
    return rows


def moe_a2a_rows(base: Path) -> list[dict]:
    """TensorRT-LLM's DeepEP dispatch and combine (moe_a2a_perf, 1.3.0rc11: the high-throughput
    `trtllm_deepep_ht` and low-latency `trtllm_deepep_ll` kernels over one node's EP group, 8
    GPUs, 4 on GB200/GB300) for DeepSeek-V3's shape at MOE_A2A_TOKENS tokens per rank, every
    wire dtype the table has. Unlike the op tables this one gives microseconds (its `latency`
    equals `transmit_us` + `notify_us`)."""
    import pandas as pd
    rows = []
    for folder, gpu in {**GPUS, "gb300": "GB300"}.items():
        tables = sorted(glob.glob(str(base / folder / "comm" / "trtllm" / "*"
                                      / "moe_a2a_perf.parquet")))
        if not tables:
            continue
        path = Path(tables[-1])
        version = path.parent.name
        d = pd.read_parquet(path)
        d = d[(d.hidden_size == 7168) & (d.topk == 8) & (d.num_experts == 256)
              & d.num_tokens.isin(MOE_A2A_TOKENS)]
        for n, r in enumerate(d.sort_values(["comm_backend", "phase", "comm_dtype",
                                             "num_tokens"]).itertuples(), start=1):
            kernel = {"trtllm_deepep_ht": "deepep_normal", "trtllm_deepep_ll": "deepep_ll"}[
                r.comm_backend]
            rows.append(_row(
                f"AICA2A-{gpu}-{n:03d}", gpu,
                f"{folder}/comm/trtllm/{version}/moe_a2a_perf.parquet",
                f"TensorRT-LLM {version} DeepEP {r.phase} ({r.comm_backend})",
                f"trtllm_moe_{r.phase}", str(r.comm_dtype),
                {"tokens": int(r.num_tokens), "hidden": int(r.hidden_size),
                 "top_k": int(r.topk), "experts": int(r.num_experts), "ep": int(r.ep_size),
                 "kernel": kernel}, r.latency / 1e3,  # the table's latency is in us
                f"AIConfigurator measured latency of TensorRT-LLM's DeepEP {r.phase} "
                f"({r.comm_backend}, {r.comm_dtype} on the wire) of {int(r.num_tokens)} tokens "
                f"per rank over {int(r.ep_size)} GPUs on {r.device}"))
    return rows


def allreduce_rows(base: Path) -> list[dict]:
    """Every row of TensorRT-LLM's all-reduce table (custom_allreduce_perf: its AllReduce op,
    BF16, 2/4/8 GPUs of one NVLink domain, 128 to 512M elements; `message_size` counts BF16
    elements, as AIConfigurator's CustomAllReduce queries it with tokens x hidden)."""
    import pandas as pd
    rows = []
    for folder, gpu in GPUS.items():
        path = base / folder / "comm" / "trtllm" / "1.3.0rc20" / "custom_allreduce_perf.parquet"
        d = pd.read_parquet(path)
        for n, r in enumerate(d.sort_values(["num_gpus", "message_size"]).itertuples(), start=1):
            rows.append(_row(
                f"AICAR-{gpu}-{n:03d}", gpu,
                f"{folder}/comm/trtllm/1.3.0rc20/custom_allreduce_perf.parquet",
                f"TensorRT-LLM 1.3.0rc20 AllReduce ({r.implementation})", "trtllm_allreduce",
                "bf16", {"gpus": int(r.num_gpus), "elements": int(r.message_size),
                         "bytes": 2 * int(r.message_size)}, r.latency,
                f"AIConfigurator measured latency of TensorRT-LLM's all-reduce of "
                f"{int(r.message_size)} BF16 elements over {int(r.num_gpus)} GPUs on "
                f"{r.device}"))
    return rows


def mla_attention_rows(base: Path) -> list[dict]:
    """TensorRT-LLM's MLA generation kernel alone (generation_mla_perf: the weight-absorbed
    attention of `batch` queries per head over the 576-wide latent cache, `step` cached tokens
    + 1) at MLA_ATTENTION_HEADS x MLA_ATTENTION_BATCHES x MLA_ATTENTION_STEPS, BF16 and FP8
    caches."""
    import pandas as pd
    rows = []
    for folder, gpu in GPUS.items():
        path = base / folder / "mla" / "trtllm" / "1.3.0rc20" / "generation_mla_perf.parquet"
        d = pd.read_parquet(path)
        d = d[d.num_heads.isin(MLA_ATTENTION_HEADS) & d.batch_size.isin(MLA_ATTENTION_BATCHES)
              & d.step.isin(MLA_ATTENTION_STEPS)]
        for n, r in enumerate(d.sort_values(["kv_cache_dtype", "num_heads", "batch_size",
                                             "step"]).itertuples(), start=1):
            kv = {"bfloat16": "bf16", "fp8": "fp8"}[r.kv_cache_dtype]
            rows.append(_row(
                f"AICMLAK-{gpu}-{n:03d}", gpu,
                f"{folder}/mla/trtllm/1.3.0rc20/generation_mla_perf.parquet",
                "TensorRT-LLM 1.3.0rc20 MLA generation kernel", "trtllm_mla_generation", kv,
                {"batch": int(r.batch_size), "heads": int(r.num_heads), "kv_heads": 1,
                 "head_dim": 576, "head_dim_v": 512, "seq_q": 1, "seq_kv": int(r.step) + 1,
                 "kv_dtype": kv}, r.latency,
                f"AIConfigurator measured latency of TensorRT-LLM's MLA generation attention "
                f"({r.kv_cache_dtype} latent cache) on {r.device}"))
    return rows


def attention_rows(base: Path) -> list[dict]:
    """TensorRT-LLM's attention op in the PyTorch flow (its QKV preprocessing, RoPE and the
    paged-KV append, then the attention kernel: XQA / trtllm-gen in generation, the context
    FMHA in prefill), per phase, GPU and KV-cache dtype: a stratified sample of ATTENTION_HEADS
    shapes (module constants). Generation rows: `batch` sequences of one query at `step` cached
    tokens (keys = step + 1); context rows: `batch` prompts of `isl` tokens, causal."""
    import pandas as pd
    rows = []
    kv_dtypes = {"bfloat16": "bf16", "fp8": "fp8"}
    for folder, gpu in GPUS.items():
        for phase in ("generation", "context"):
            tables = sorted(glob.glob(str(base / folder / "attention" / "trtllm" / "*"
                                          / f"{phase}_attention_perf.parquet")))
            if not tables:
                raise SystemExit(f"{base / folder}: no TensorRT-LLM {phase}_attention_perf")
            path = Path(tables[-1])
            version = path.parent.name
            d = pd.read_parquet(path)
            pairs = pd.MultiIndex.from_frame(d[["num_heads", "num_key_value_heads"]])
            d = d[(d.head_dim == 128) & (d.window_size == 0) & (d.beam_width == 1)
                  & pairs.isin(ATTENTION_HEADS)]
            # a context row in FP8 runs FP8 attention on an FP8 cache, else BF16 on BF16
            # (generation rows are all BF16 queries, on either cache)
            if phase == "context":
                d = d[(d.attn_dtype == "bfloat16") == (d.kv_cache_dtype == "bfloat16")]
            keys = d.step + 1 if phase == "generation" else d.isl
            kv_bytes = (2 * d.batch_size * keys * d.num_key_value_heads * 128
                        * d.kv_cache_dtype.map({"bfloat16": 2, "fp8": 1}))
            d = d.assign(bin=pd.cut(kv_bytes, ATTENTION_KV_BINS, labels=False))
            number = 0
            for kv, g in sorted(d.groupby("kv_cache_dtype")):
                picks = [b.sample(min(ATTENTION_PER_BIN, len(b)), random_state=0)
                         for _, b in sorted(g.groupby("bin"))]
                for r in pd.concat(picks).sort_values(["batch_size", "isl", "step"]).itertuples():
                    number += 1
                    seq_q = 1 if phase == "generation" else int(r.isl)
                    seq_kv = int(r.step) + 1 if phase == "generation" else int(r.isl)
                    rows.append(_row(
                        f"AICATTN-{gpu}-{phase[:3]}-{number:03d}", gpu,
                        f"{folder}/attention/trtllm/{version}/{phase}_attention_perf.parquet",
                        f"TensorRT-LLM {version} {phase} attention ({r.kernel_source})",
                        f"trtllm_{phase}_attention", kv_dtypes[kv],
                        {"batch": int(r.batch_size), "heads": int(r.num_heads),
                         "kv_heads": int(r.num_key_value_heads), "head_dim": 128,
                         "seq_q": seq_q, "seq_kv": seq_kv, "causal": phase == "context",
                         "kv_dtype": kv_dtypes[kv]}, r.latency,
                        f"AIConfigurator measured latency of TensorRT-LLM's attention op in "
                        f"{phase} (QKV preprocessing with RoPE and the KV-cache append, then "
                        f"the attention kernel; {kv} KV cache) on {r.device}"))
    return rows


def marlin_moe_rows(base: Path) -> list[dict]:
    """vLLM's Marlin MoE on MXFP4 experts (MARLIN_MOE_OUT's comment), one GPU's module."""
    import pandas as pd
    rows = []
    for folder, gpu in MARLIN_MOE_GPUS.items():
        path = base / folder / "moe" / "vllm" / "0.24.0" / "moe_perf.parquet"
        d = pd.read_parquet(path)
        d = d[(d.kernel_source == MARLIN_MOE_SOURCE) & (d.moe_dtype == "w4a16_mxfp4")
              & (d.distribution == "balanced") & (d.moe_ep_size == 1) & (d.moe_tp_size == 1)]
        for number, r in enumerate(d.sort_values("num_tokens").itertuples(), 1):
            rows.append(_row(
                f"AICMARLIN-vllm-{gpu}-{number:03d}", gpu,
                f"{folder}/moe/vllm/0.24.0/moe_perf.parquet",
                f"vLLM 0.24.0 fused MoE ({r.kernel_source})", "moe_module", "w4a16_mxfp4",
                {"tokens": int(r.num_tokens), "hidden": int(r.hidden_size),
                 "expert_hidden": int(r.inter_size), "experts": int(r.num_experts),
                 "top_k": int(r.topk), "ep": 1, "routing": "balanced"}, r.latency,
                f"AIConfigurator measured latency of vLLM's Marlin MoE module with MXFP4 weights "
                f"and BF16 activations on {r.device}"))
    return rows


def vllm_attention_rows(base: Path, engine: str = "vllm") -> list[dict]:
    """vLLM's (or SGLang's) attention layer in generation (VLLM_ATTENTION_OUT's and
    SGLANG_ATTENTION_OUT's comments): one query per sequence at `step` cached tokens (keys =
    step + 1; a sliding-window row reads the last `window` of them)."""
    version, kernels, prefix, name = (("0.24.0", VLLM_ATTENTION_KERNELS, "AICVATTN", "vLLM")
                                      if engine == "vllm" else
                                      ("0.5.14", SGLANG_ATTENTION_KERNELS, "AICSATTN", "SGLang"))
    import pandas as pd
    rows = []
    kv_dtypes = {"bfloat16": "bf16", "fp8": "fp8"}
    for folder, gpu in VLLM_ATTENTION_GPUS.items():
        path = base / folder / "attention" / engine / version / "generation_attention_perf.parquet"
        d = pd.read_parquet(path)
        pairs = pd.MultiIndex.from_frame(d[["num_heads", "num_key_value_heads"]])
        llama = (d.head_dim == 128) & (d.window_size == 0) & pairs.isin(ATTENTION_HEADS)
        gpt_oss = (d.head_dim == 64) & d.window_size.isin((0, 128)) & pairs.isin(GPT_OSS_HEADS)
        d = d[d.kernel_source.isin(kernels) & (d.beam_width == 1)
              & (llama | gpt_oss)]
        keys = (d.step + 1).where(d.window_size == 0, (d.step + 1).clip(upper=d.window_size))
        kv_bytes = (2 * d.batch_size * keys * d.num_key_value_heads * d.head_dim
                    * d.kv_cache_dtype.map({"bfloat16": 2, "fp8": 1}))
        d = d.assign(bin=pd.cut(kv_bytes, ATTENTION_KV_BINS, labels=False))
        number = 0
        for (hd, kv), g in sorted(d.groupby(["head_dim", "kv_cache_dtype"])):
            picks = [b.sample(min(ATTENTION_PER_BIN, len(b)), random_state=0)
                     for _, b in sorted(g.groupby("bin"))]
            for r in pd.concat(picks).sort_values(["batch_size", "step", "window_size"]).itertuples():
                number += 1
                shape = {"batch": int(r.batch_size), "heads": int(r.num_heads),
                         "kv_heads": int(r.num_key_value_heads), "head_dim": int(hd),
                         "seq_q": 1, "seq_kv": int(r.step) + 1, "causal": False,
                         "kv_dtype": kv_dtypes[kv]}
                if r.window_size:
                    shape["window"] = int(r.window_size)
                rows.append(_row(
                    f"{prefix}-{gpu}-{number:03d}", gpu,
                    f"{folder}/attention/{engine}/{version}/generation_attention_perf.parquet",
                    f"{name} {version} generation attention ({r.kernel_source})",
                    f"{engine}_generation_attention", kv_dtypes[kv], shape, r.latency,
                    f"AIConfigurator measured latency of {name}'s attention layer in generation "
                    f"({r.kernel_source} on the paged cache; {kv} KV cache, BF16 queries) on "
                    f"{r.device}"))
    return rows


def moe_rows(base: Path) -> list[dict]:
    """TensorRT-LLM's fused MoE module (the routed experts of one GPU: permute, grouped GEMMs,
    activation, finalize) at MOE_EP x MOE_TOKENS, for every GEMM type the table has."""
    import pandas as pd
    rows = []
    for folder, gpu in GPUS.items():
        path = base / folder / "moe" / "trtllm" / "1.3.0rc20" / "moe_perf.parquet"
        d = pd.read_parquet(path)
        d = d[(d.hidden_size == 7168) & (d.inter_size == 2048) & (d.num_experts == 256)
              & (d.topk == 8) & (d.distribution == "balanced") & (d.moe_tp_size == 1)
              & d.moe_ep_size.isin(MOE_EP) & d.num_tokens.isin(MOE_TOKENS)
              & (d.kernel_source == "moe_torch_flow_cutlass")]
        for n, r in enumerate(d.sort_values(["moe_dtype", "moe_ep_size", "num_tokens"])
                              .itertuples(), start=1):
            rows.append(_row(
                f"AICMOE-{gpu}-{n:03d}", gpu, f"{folder}/moe/trtllm/1.3.0rc20/moe_perf.parquet",
                f"TensorRT-LLM 1.3.0rc20 fused MoE ({r.kernel_source})", "moe_module",
                r.moe_dtype, {"tokens": int(r.num_tokens), "hidden": int(r.hidden_size),
                              "expert_hidden": int(r.inter_size), "experts": int(r.num_experts),
                              "top_k": int(r.topk), "ep": int(r.moe_ep_size),
                              "routing": "balanced"}, r.latency,
                "AIConfigurator measured latency of TensorRT-LLM's fused MoE module (routed "
                "experts only) on " + r.device))
    return rows


def mla_rows(base: Path) -> list[dict]:
    """Every row of the MLA generation-module tables at MLA_HEADS x MLA_BATCHES, MLA_KEYS keys
    and a BF16 KV cache: the latency of TensorRT-LLM's whole attention block of DeepSeek-V3 in
    decode (q_a, q_norm, q_b, kv_a, kv_norm, rope, the q absorb, the attention, the v up
    projection, o_proj), per GEMM type."""
    import pandas as pd
    rows = []
    for folder, gpu in GPUS.items():
        path = (base / folder / "mla" / "trtllm" / "1.3.0rc20"
                / "mla_generation_module_perf.parquet")
        d = pd.read_parquet(path)
        d = d[d.num_heads.isin(MLA_HEADS) & d.batch_size.isin(MLA_BATCHES)
              & (d.step == MLA_KEYS) & (d.kv_cache_dtype == "bfloat16")]
        for n, r in enumerate(d.sort_values(["gemm_type", "num_heads", "batch_size"])
                              .itertuples(), start=1):
            rows.append(_row(
                f"AICMLA-{gpu}-{n:03d}", gpu,
                f"{folder}/mla/trtllm/1.3.0rc20/mla_generation_module_perf.parquet",
                "TensorRT-LLM 1.3.0rc20 MLA generation module", "mla_generation_module",
                r.gemm_type, {"heads": int(r.num_heads), "batch": int(r.batch_size),
                              "keys": int(r.step), "kv_cache_dtype": r.kv_cache_dtype,
                              "model": r.model}, r.latency,
                "AIConfigurator measured latency of TensorRT-LLM's DeepSeek-V3 MLA attention "
                "block in decode (q_a, q_norm, q_b, kv_a, kv_norm, rope, q absorb, attention, v "
                "up, o_proj) on " + r.device))
    return rows


def _row(row_id: str, gpu: str, table: str, library: str, op: str, dtype: str, shape: dict,
         latency_ms: float, notes: str) -> dict:
    """One measurement row in public_measurements.csv's columns: a table's latency (ms)."""
    return {"id": row_id, "source": f"ai-dynamo/aiconfigurator ({WHEEL} wheel): systems/data/"
                                    f"{table}",
            "hardware": gpu, "library": library, "op": op, "dtype": dtype,
            "shape_json": json.dumps(shape), "metric": "time",
            "value": f"{float(latency_ms):.6g}", "unit": "ms", "notes": notes}


def _write(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    print(f"{path}: {len(rows)} rows")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(sys.argv[1])
