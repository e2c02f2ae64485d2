"""Measured serving-engine modules (a block of kernels run back to back) against the model:
AIConfigurator's TensorRT-LLM DeepSeek-V3 MLA attention block in decode
(validate/data/aiconfigurator_mla_decode.csv) and TensorRT-LLM's GQA attention op in generation
and context (validate/data/aiconfigurator_attention.csv), vLLM's attention layer in generation
(validate/data/aiconfigurator_vllm_attention.csv) and SGLang's
(validate/data/aiconfigurator_sglang_attention.csv); validate/data/SOURCES.md.

    python -m perfmodel.validation.modules        # error per GPU, GEMM type and head count

A row's prediction is the builder's decode graph of DeepSeek-V3 at the row's batch and 1024 keys
with tp = 128 / heads (the block's heads on one GPU), summed over the ops of one layer's attention
block (MLA_ROLES) as the serving simulator prices a captured decode step: each op's time without
its host launch, plus `graph_kernel_gap_s` per kernel (the GPU-side cost of a kernel replayed
from a graph). The block runs 10 kernels (the module's own list, in its notes); small batches
are nearly all per-kernel cost, which is what the gap constants are fitted on
(perfmodel.validation.fit GRAPH_GAP_RULE).

A GQA attention row is the op TensorRT-LLM's attention backend runs per layer: the QKV
preprocessing (RoPE on Q and K, K and V appended to the paged cache: the builder's `rope`
elementwise op, `builder._LayerBuilder._attention`'s neighbour) and the attention kernel (the
builder's attention op; with an FP8 cache in FP8 MMAs, as the engine runs it:
Engine.fp8_attention), priced as TensorRT-LLM's own kernel family (Attention kernel="trtllm":
XQA in generation on Hopper, fmha_v2 / trtllm-gen in context; perfmodel/ops/attention/trtllm.py).
A generation row is priced as the simulator prices a captured decode step (kernel time +
graph_kernel_gap_s per kernel), a context row as an eager prefill step (host launches included).
The family's constants are fitted on some of these rows (H100-SXM: fmha_v2's overlap on context
rows >= 4096 tokens, XQA-FP8's CTA round trips on the FP8 generation rows; B200: trtllm-gen's
overlap on context rows >= 4096 tokens; perfmodel/fitted.yaml); H200, B300 and GB200 are judged.

The block's ops are priced with TensorRT-LLM's attention family (kernel="trtllm": trtllm-gen's
MLA generation kernels on Blackwell, FA3's FlashMLA-class decode on Hopper).

An MLA generation row (aiconfigurator_mla_attention.csv) is TensorRT-LLM's MLA generation op:
the preprocessing kernel (mla_rope_generation: RoPE on the 64 rotary dims of the query heads and
the latent key, the latent row appended to the cache, and with FP8 MMAs the whole query written
in FP8; the builder's MLA `rope` op) and the
builder's MLA decode attention (576-wide latent keys, 512-wide values, one shared KV head) in
TensorRT-LLM's family, with an FP8 cache in FP8 MMAs on tcgen05 GPUs and on converted K/V
elsewhere (StepCost.uses_fp8_attention), under CUDA graphs. Judged only.
"""
from __future__ import annotations

import csv
import functools
import io
import json

from perfmodel import yamlio
from perfmodel.hardware import Hardware, hardware
from perfmodel.plan.memory import as_model
from perfmodel.predict import predict_op
from perfmodel.report.tables import format_table
from perfmodel.validation.measurements import DATA_DIR

MLA_CSV = DATA_DIR / "aiconfigurator_mla_decode.csv"
ATTENTION_CSV = DATA_DIR / "aiconfigurator_attention.csv"
MLA_ATTENTION_CSV = DATA_DIR / "aiconfigurator_mla_attention.csv"
VLLM_ATTENTION_CSV = DATA_DIR / "aiconfigurator_vllm_attention.csv"
SGLANG_ATTENTION_CSV = DATA_DIR / "aiconfigurator_sglang_attention.csv"
ROPE_FLOP_PER_ELEMENT = 3  # as the builder's rope op (workloads/builder.py)
MLA_ROPE_DIMS = 64         # DeepSeek-V3's qk_rope_head_dim (the repo's models/deepseek-v3.yaml)
MLA_ROLES = ("q_a", "q_norm", "q_b", "kv_a", "kv_norm", "rope", "q_absorb", "attn", "v_up",
             "o_proj")
MODEL = "deepseek-v3"
# the rows' GEMM types as the builder's dtype policies (1x128 block FP8 runs as the fp8 policy:
# the builder has no block-scaled policy for serving)
GEMM_DTYPES = {"bfloat16": "bf16", "fp8_block": "fp8", "nvfp4": "nvfp4", "fp8": "fp8"}


def load_rows(path=MLA_CSV) -> list[dict]:
    """The module rows: id, hardware name, GEMM type, heads, batch, keys, measured seconds."""
    out = []
    for r in csv.DictReader(io.StringIO(yamlio.read_text(path))):
        s = json.loads(r["shape_json"])
        out.append({"id": r["id"], "hardware": r["hardware"], "gemm": r["dtype"],
                    "heads": s["heads"], "batch": s["batch"], "keys": s["keys"],
                    "measured_s": float(r["value"]) * 1e-3})
    return out


@functools.lru_cache(maxsize=4096)
def block_parts_s(hw: Hardware, gemm: str, heads: int, batch: int, keys: int,
                  attention_state: tuple = ()) -> tuple[float, int]:
    """(kernel time without host launches, kernels) of one layer's MLA block
    on `hw` (module docstring). `attention_state`: the attention op's fitted constants
    (attention.op.fitted_state), part of the cache's key, since the fits change them between calls."""
    from perfmodel.workloads.builder import inference_op_counts
    tp = 128 // heads
    busy = 0.0
    kernels = 0
    first = None  # the first layer's prefix (`l0.`): every layer runs the same attention block
    for name, o, _ in inference_op_counts(as_model(MODEL), "decode", batch=batch,
                                          context=keys, tp=tp, dtype=GEMM_DTYPES[gemm],
                                          attention_kernel="trtllm"):
        prefix, _, block_role = name.partition(".")
        if block_role not in MLA_ROLES:
            continue
        first = first or prefix
        if prefix != first:
            continue
        e = predict_op(o, hw)
        host = e.resource_time_s.get("launch", 0.0)
        busy += e.time_s - host
        kernels += round(host / hw.kernel_launch_s) if hw.kernel_launch_s else 0
    return busy, kernels


def predicted_s(row: dict, hw: Hardware | None = None, gap_s: float | None = None) -> float:
    """The row's block under CUDA graphs: kernel time + gap per kernel (module docstring)."""
    hw = hw or hardware(row["hardware"])
    from perfmodel.ops.attention.op import fitted_state
    busy, kernels = block_parts_s(hw, row["gemm"], row["heads"], row["batch"], row["keys"],
                                  fitted_state())
    return busy + kernels * (hw.graph_kernel_gap_s if gap_s is None else gap_s)


def load_attention_rows(path=ATTENTION_CSV) -> list[dict]:
    """The GQA attention rows: id, hardware, phase (generation | context), the shape, the KV
    dtype and the measured seconds."""
    out = []
    for r in csv.DictReader(io.StringIO(yamlio.read_text(path))):
        s = json.loads(r["shape_json"])
        out.append({"id": r["id"], "hardware": r["hardware"],
                    "phase": r["op"].split("_")[1], "measured_s": float(r["value"]) * 1e-3,
                    "causal": False, **s})
    return out


def attention_ops(row: dict) -> tuple:
    """The row's kernels: the QKV preprocessing (RoPE + cache append) and the attention."""
    from perfmodel import ops
    tokens = row["batch"] * row["seq_q"]
    rope = ops.Elementwise(elements=tokens * (row["heads"] + row["kv_heads"]) * row["head_dim"],
                           dtype="bf16", flop_per_element=ROPE_FLOP_PER_ELEMENT)
    fp8 = row["kv_dtype"] == "fp8"
    attn = ops.Attention(batch=row["batch"], heads=row["heads"], kv_heads=row["kv_heads"],
                         head_dim=row["head_dim"], seq_q=row["seq_q"], seq_kv=row["seq_kv"],
                         causal=row["causal"], dtype="fp8" if fp8 else "bf16",
                         kernel="trtllm")
    return rope, attn


def attention_predicted_s(row: dict, hw: Hardware | None = None) -> float:
    """The row's op as the simulator prices it (module docstring)."""
    hw = hw or hardware(row["hardware"])
    total = 0.0
    for o in attention_ops(row):
        if row["phase"] == "generation":  # replayed from a CUDA graph
            total += captured_s(o, hw)
        else:
            total += predict_op(o, hw).time_s
    return total


def load_engine_attention_rows(path=VLLM_ATTENTION_CSV) -> list[dict]:
    """vLLM's (or SGLang's: SGLANG_ATTENTION_CSV) generation attention rows: their shape, KV
    dtype and measured seconds."""
    return [dict(r, window=r.get("window")) for r in load_attention_rows(path)]


def engine_attention_ops(row: dict) -> tuple:
    """The kernels of vLLM's or SGLang's attention layer in generation, as the builder writes
    them for an
    engine that appends to the cache in a kernel of its own (builder._LayerBuilder._cache_append:
    reshape_and_cache_flash, and with an FP8 cache the query cast to FP8) and the attention of
    vLLM's family on the row's GPU (engines.engine_attention_kernel: FlashAttention-3 on Hopper,
    FlashInfer's trtllm-gen decode on Blackwell), in FP8 MMAs on an FP8 cache
    (Engine.fp8_attention)."""
    from perfmodel import ops
    from perfmodel.plan.simulator.engines import engine_attention_kernel
    from perfmodel.workloads.builder import cache_append_nodes
    fp8 = row["kv_dtype"] == "fp8"
    kernel = engine_attention_kernel(row["hardware"]) or "fa3"
    side = [ops.op(kind, **params) for _, kind, params in cache_append_nodes(
        row["batch"] * row["seq_q"], row["heads"], row["kv_heads"], row["head_dim"],
        fp8 and kernel != "trtllm")]
    window = row.get("window")
    attn = ops.Attention(batch=row["batch"], heads=row["heads"], kv_heads=row["kv_heads"],
                         head_dim=row["head_dim"], seq_q=row["seq_q"],
                         seq_kv=min(row["seq_kv"], window) if window else row["seq_kv"],
                         causal=False, dtype="fp8" if fp8 else "bf16",
                         kernel=kernel)
    return (*side, attn)


def engine_attention_predicted_s(row: dict, hw: Hardware | None = None) -> float:
    """The row's layer as the simulator prices a captured decode step."""
    hw = hw or hardware(row["hardware"])
    return sum(captured_s(o, hw) for o in engine_attention_ops(row))


def engine_attention_report(rows: list[dict]) -> str:
    return error_table(grouped_errors(
        rows, lambda r: engine_attention_predicted_s(r) / r["measured_s"] - 1,
        lambda r: (r["hardware"], r["head_dim"], r["kv_dtype"],
                   "<20us" if r["measured_s"] < 20e-6 else ">=20us")),
        ["hardware", "head dim", "kv", "measured"])


def grouped_errors(rows, error, key) -> dict[tuple, list[float]]:
    """`error(row)` of every row, grouped by the tuple `key(row)` (error_table's input)."""
    groups: dict[tuple, list[float]] = {}
    for r in rows:
        groups.setdefault(key(r), []).append(error(r))
    return groups


def error_table(errors: dict[tuple, list[float]], key_names: list[str]) -> str:
    """MAPE, mean signed error and worst |error| per group of relative errors (predicted /
    measured - 1), and over all of them."""
    def stats(e: list[float]) -> tuple:
        return (len(e), f"{100 * sum(map(abs, e)) / len(e):.1f}%",
                f"{100 * sum(e) / len(e):+.1f}%", f"{100 * max(map(abs, e)):.1f}%")
    lines = [(*key, *stats(e)) for key, e in sorted(errors.items())]
    lines.append(("all", *[""] * (len(key_names) - 1),
                  *stats([x for e in errors.values() for x in e])))
    return format_table([*key_names, "n", "MAPE", "bias", "max"], lines)


def load_mla_attention_rows(path=MLA_ATTENTION_CSV) -> list[dict]:
    """The MLA generation-kernel rows (their shape, KV dtype and measured seconds)."""
    return load_attention_rows(path)


def mla_attention_op(row: dict, hw: Hardware):
    """The row's attention as the trtllm engine prices it (module docstring)."""
    from perfmodel import ops
    from perfmodel.plan.simulator.cost import StepCost
    fp8 = StepCost.uses_fp8_attention(hw, row["kv_dtype"], True, mla=True)
    kv = row["kv_dtype"] if row["kv_dtype"] != "bf16" and not fp8 else None
    return ops.Attention(batch=row["batch"], heads=row["heads"], kv_heads=1,
                         head_dim=row["head_dim"], head_dim_v=row["head_dim_v"], seq_q=1,
                         seq_kv=row["seq_kv"], shared_kv=True, dtype="fp8" if fp8 else "bf16",
                         kv_dtype=kv, kernel="trtllm")


def captured_s(op, hw: Hardware) -> float:
    """An op's time replayed from a CUDA graph: without its host launches, with the GPU's
    graph_kernel_gap_s per kernel."""
    e = predict_op(op, hw)
    host = e.resource_time_s.get("launch", 0.0)
    kernels = round(host / hw.kernel_launch_s) if hw.kernel_launch_s else 0
    return e.time_s - host + kernels * hw.graph_kernel_gap_s


def mla_rope_op(row: dict, hw: Hardware):
    """TensorRT-LLM's MLA generation preprocessing before the kernel (mla_rope_generation: RoPE
    on the query heads' and the latent key's 64 rotary dims, the latent row appended to the
    cache), as the builder's MLA `rope` op prices it: with FP8 MMAs it also writes the whole
    query in FP8, so it streams the query's 576 dims (a quantize op)."""
    from perfmodel import ops
    if mla_attention_op(row, hw).dtype == "fp8":
        return ops.Quantize(rows=row["batch"] * row["heads"], cols=row["head_dim"], to="fp8")
    return ops.Elementwise(elements=row["batch"] * (row["heads"] + 1) * MLA_ROPE_DIMS,
                           dtype="bf16", flop_per_element=ROPE_FLOP_PER_ELEMENT)


def mla_attention_predicted_s(row: dict, hw: Hardware | None = None) -> float:
    """The row's op under CUDA graphs: the preprocessing and the attention kernel."""
    hw = hw or hardware(row["hardware"])
    return captured_s(mla_rope_op(row, hw), hw) + captured_s(mla_attention_op(row, hw), hw)


def _mla_attention_error(r: dict) -> float:
    return mla_attention_predicted_s(r) / r["measured_s"] - 1


def mla_attention_report(rows: list[dict]) -> str:
    return error_table(grouped_errors(rows, _mla_attention_error,
                                      lambda r: (r["hardware"], r["kv_dtype"], r["heads"])),
                       ["hardware", "kv", "heads"])


def attention_report(rows: list[dict]) -> str:
    return error_table(grouped_errors(rows,
                                      lambda r: attention_predicted_s(r) / r["measured_s"] - 1,
                                      lambda r: (r["phase"], r["hardware"], r["kv_dtype"])),
                       ["phase", "hardware", "kv"])


def report(rows: list[dict]) -> str:
    return error_table(grouped_errors(rows, lambda r: predicted_s(r) / r["measured_s"] - 1,
                                      lambda r: (r["hardware"], r["gemm"], r["heads"])),
                       ["hardware", "gemm", "heads"])


def main() -> None:
    rows = load_rows()
    print("TensorRT-LLM's DeepSeek-V3 MLA block in decode (AIConfigurator), predicted under CUDA "
          "graphs\n")
    print(report(rows))
    print(f"\n({len(rows)} rows; the gap constants are fitted on the 16-head BF16 rows at batch "
          f"<= 8 of H100-SXM (hopper) and B200 (blackwell): perfmodel/fitted.yaml)")
    attention = load_attention_rows()
    print("\nTensorRT-LLM's GQA attention op (AIConfigurator): RoPE + cache append, then the "
          "attention kernel (FP8 MMAs on an FP8 cache); generation under CUDA graphs, context "
          "eager\n")
    print(attention_report(attention))
    print(f"\n({len(attention)} rows; the trtllm family's constants are fitted on H100-SXM and "
          f"B200 rows, perfmodel/fitted.yaml; H200, B300 and GB200 are judged only)")
    mla = load_mla_attention_rows()
    print("\nTensorRT-LLM's MLA generation op (AIConfigurator): RoPE + cache append, then the "
          "kernel (trtllm-gen's on tcgen05 GPUs, FP8 MMAs on an FP8 cache there, converted K/V "
          "elsewhere); under CUDA graphs\n")
    print(mla_attention_report(mla))
    print(f"\n({len(mla)} rows, all judged)")
    for engine, path in (("vLLM 0.24.0", VLLM_ATTENTION_CSV),
                         ("SGLang 0.5.14", SGLANG_ATTENTION_CSV)):
        rows = load_engine_attention_rows(path)
        print(f"\n{engine}'s attention layer in generation (AIConfigurator): the cache append "
              f"(and the FP8 query cast before FA3), then FA3 on Hopper or trtllm-gen on "
              f"Blackwell (engines.engine_attention_kernel); under CUDA graphs\n")
        print(engine_attention_report(rows))
        print(f"\n({len(rows)} rows, all judged)")


if __name__ == "__main__":
    main()
