"""Fused-dropout overhead on the GPU: the same attention with and without dropout, interleaved.

What it measures (docs/studies.md §1.5-1.6; the model's side is
perfmodel.studies.dropout.judged_overheads): PyTorch SDPA's flash backend (FlashAttention-2), its
cuDNN backend where the build has one (the library FA4's PR 2597 compares with), and, where
installed, flash_attn's own `flash_attn_func` (FA2 on Hopper), forward and backward, at the
shapes of the published GB10/GB200 rows (16 heads, head dim 64 and 128, causal and not, 4096 and
8192 tokens per sequence, 16k tokens), p = 0.125 (the GB200 rows' p, a multiple of 1/16 as
cuDNN requires) against p = 0. The variants alternate rep by rep
(quack/rounding.py: sequential runs at 700 W drift 8-15 % thermally, so variants must be
interleaved); each time is the median of REPS CUDA-event timings. Rows use the columns of
validate/data/public_measurements.csv (op attention_fwd / attention_bwd, metric time in ms,
shape_json with torch_bench's keys and dropout_p: `csv_row`), one per variant, so the overhead
is their ratio; perfmodel.validation.measurements.load_cases reads them as attention cases with
their dropout. Each row's notes also carry the median SM clock NVML reported during its runs
(`sm_clock_mhz`): the model raises a kernel's clock when dropout leaves its MMAs idler
(docs/studies.md §1.6, `held_clock_pct`), which silicon confirms or refutes here.

Without torch or without a GPU it prints a note to stderr and exits 0 (the one-shot script's
dry run and CI import it on CPU-only machines).
"""
from __future__ import annotations

import json
import sys

try:  # optional: the harness must import without torch
    import torch
    import torch.nn.functional as F
except ImportError:  # pragma: no cover - exercised where torch is absent
    torch = None
    F = None

from torch_bench import COLUMNS, attention_flop  # noqa: E402  (validate/ is the script's dir)

TOKENS = 16384
HEADS = 16
SHAPES = [(64, 4096), (64, 8192), (128, 4096), (128, 8192)]   # (head dim, seq)
P = 0.125
WARMUP, REPS = 2, 8


def _median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def _sm_clock_mhz():
    """The SM clock NVML reports now (torch.cuda.clock_rate, MHz), None where it cannot."""
    try:
        return float(torch.cuda.clock_rate())
    except Exception:  # no pynvml, or a driver without the query
        return None


def _interleaved(fns, reps=REPS, warmup=WARMUP):
    """Median time (ms) of each callable, alternating them every repetition, and the median SM
    clock (MHz, None where NVML cannot say) read right after each of its runs: whether a
    dropout that idles the MMAs runs at a higher clock, as perfmodel's engine.kernel_clock_hz
    assumes (perfmodel.studies.dropout.held_clock_overhead)."""
    for f in fns:
        for _ in range(warmup):
            f()
    torch.cuda.synchronize()
    times = [[] for _ in fns]
    clocks = [[] for _ in fns]
    for _ in range(reps):
        for i, f in enumerate(fns):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            f()
            b.record()
            c = _sm_clock_mhz()  # sampled while the kernel may still run, before the sync
            b.synchronize()
            times[i].append(a.elapsed_time(b))
            if c is not None:
                clocks[i].append(c)
    return [_median(t) for t in times], [_median(c) if c else None for c in clocks]


def _impls():
    from torch.nn.attention import SDPBackend, sdpa_kernel
    out = []

    def sdpa(q, k, v, p, causal):
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            return F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=causal)
    out.append(("sdpa_flash", f"FlashAttention-2 (PyTorch {torch.__version__} SDPA flash)",
                sdpa, "bhsd"))
    if hasattr(SDPBackend, "CUDNN_ATTENTION") and torch.backends.cudnn.is_available():
        def cudnn(q, k, v, p, causal):
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                return F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=causal)
        out.append(("sdpa_cudnn", f"cuDNN {torch.backends.cudnn.version()} (PyTorch "
                                  f"{torch.__version__} SDPA cudnn)", cudnn, "bhsd"))
    try:
        import flash_attn
        from flash_attn import flash_attn_func

        def fa(q, k, v, p, causal):
            return flash_attn_func(q, k, v, dropout_p=p, causal=causal)
        out.append(("flash_attn", f"flash_attn {flash_attn.__version__} flash_attn_func", fa,
                    "bshd"))
    except ImportError:
        print("dropout_bench: flash_attn not installed; SDPA only", file=sys.stderr)
    return out


def csv_row(row_id: int, hw: str, lib: str, batch: int, seq: int, head_dim: int, causal: bool,
            direction: str, p: float, time_ms: float, sm_clock_mhz: float | None = None
            ) -> list[str]:
    """One measured variant as a row of COLUMNS (torch_bench's shape keys, so
    perfmodel.validation.measurements prices it as attention with this dropout)."""
    op = f"attention_{direction}"
    shape = {"batch": batch, "nheads": HEADS, "nheads_kv": HEADS, "seqlen_q": seq,
             "seqlen_k": seq, "headdim": head_dim, "causal": causal, "pass": direction,
             "dropout_p": p}
    flop = attention_flop(batch, HEADS, seq, seq, head_dim, causal, direction)
    return [f"dropout_bench-{op}-{row_id:03d}", "perfmodel validate/dropout_bench.py", hw, lib,
            op, "bf16", json.dumps(shape, separators=(",", ":")), "time", f"{time_ms:.9g}", "ms",
            f"median of {REPS} interleaved reps (p=0 and p={P} alternating); "
            f"bwd = (fwd+bwd) - fwd; flop={flop:.6g}; "
            f"achieved={flop / (time_ms * 1e-3) / 1e12:.4g} TFLOP/s"
            + (f"; sm_clock_mhz={sm_clock_mhz:.0f}" if sm_clock_mhz else "")]


def main() -> int:
    if torch is None or not torch.cuda.is_available():
        print("dropout_bench: no PyTorch with CUDA; nothing to measure", file=sys.stderr)
        return 0
    import csv
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(COLUMNS)
    hw = torch.cuda.get_device_name()
    seq_id = 0
    torch.manual_seed(0)
    for name, lib, fn, layout in _impls():
        for d, s in SHAPES:
            for causal in (False, True):
                b = TOKENS // s
                dims = (b, HEADS, s, d) if layout == "bhsd" else (b, s, HEADS, d)
                q, k, v = (torch.randn(dims, device="cuda", dtype=torch.bfloat16,
                                       requires_grad=True) for _ in range(3))
                try:
                    fwd = [lambda p=p: fn(q, k, v, p, causal) for p in (0.0, P)]
                    o = fn(q, k, v, 0.0, causal)
                    g = torch.randn_like(o)
                    bwd = [lambda p=p: torch.autograd.grad(fn(q, k, v, p, causal), (q, k, v), g)
                           for p in (0.0, P)]
                    t_fwd, c_fwd = _interleaved(fwd)
                    # forward + backward; backward = difference (its clock: the pair's)
                    t_all, c_all = _interleaved(bwd)
                except RuntimeError as e:  # a backend refusing a shape is reported, not fatal
                    print(f"dropout_bench: {name} d={d} s={s} causal={causal}: {e}",
                          file=sys.stderr)
                    continue
                for i, p in enumerate((0.0, P)):
                    for t, c, direction in ((t_fwd[i], c_fwd[i], "fwd"),
                                            (t_all[i] - t_fwd[i], c_all[i], "bwd")):
                        seq_id += 1
                        w.writerow(csv_row(seq_id, hw, lib, b, s, d, causal, direction, p, t,
                                           sm_clock_mhz=c))
                        sys.stdout.flush()
                del q, k, v
                torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
