"""Attention through PyTorch SDPA on the GPU: the library kernels themselves.

Times `torch.nn.functional.scaled_dot_product_attention` with the flash backend (PyTorch's
FlashAttention-2) and the cuDNN backend forced through `torch.nn.attention.sdpa_kernel`, forward
and backward, without and with dropout, over FA3-paper-like shapes (hidden 2048, head dim 64 and
128, seqlen 512..16k, batch = 16k tokens / seqlen, causal and not) and decode shapes (one query
token against a KV cache, grouped-query heads). CUDA events, warm-up then repetitions, median.
Prints CSV rows with the columns of validate/data/public_measurements.csv to stdout (op
attention_fwd / attention_bwd, metric time in ms, shape_json with the public rows' keys plus
dropout_p); the notes carry the FLOP convention and the achieved TFLOP/s. A backend that refuses
a shape is reported on stderr and skipped. Each configuration is checked once against the math
backend on a slice before timing (outputs and, for bwd, dQ).

Without torch (or without a GPU) it prints a message to stderr and exits 0, so it imports and
runs cleanly on machines without either.
"""
from __future__ import annotations

import csv
import json
import sys

try:  # optional: the harness must import without torch
    import torch
    import torch.nn.functional as F
except ImportError:  # pragma: no cover - exercised where torch is absent
    torch = None
    F = None

COLUMNS = ["id", "source", "hardware", "library", "op", "dtype", "shape_json", "metric", "value",
           "unit", "notes"]
TOKENS = 16384
HIDDEN = 2048
SEQLENS = (512, 1024, 2048, 4096, 8192, 16384)
HEADDIMS = (64, 128)
DECODE = [  # (batch, kv length): Llama-3-8B-like GQA, 32 query heads over 8 KV heads, d = 128
    (1, 4096), (8, 4096), (32, 4096), (64, 2048), (8, 16384), (32, 16384)]
WARMUP, REPS = 3, 10


def attention_flop(batch, heads, sq, sk, d, causal, direction):
    """FlashAttention convention (validate/data/SOURCES.md): 4·B·H·Sq·Sk·D, ×0.5 causal, bwd 2.5×."""
    f = 4.0 * batch * heads * sq * sk * d * (0.5 if causal else 1.0)
    return f * (2.5 if direction == "bwd" else 1.0)


def _backends():
    from torch.nn.attention import SDPBackend
    out = [("flash", SDPBackend.FLASH_ATTENTION,
            f"FlashAttention-2 (PyTorch {torch.__version__} SDPA flash backend)")]
    if hasattr(SDPBackend, "CUDNN_ATTENTION"):
        ver = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        out.append(("cudnn", SDPBackend.CUDNN_ATTENTION,
                    f"cuDNN {ver} (PyTorch {torch.__version__} SDPA cudnn backend)"))
    return out


def _time(fn, warmup=WARMUP, reps=REPS):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    n = len(times)
    med = times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])
    return med, times[0], times[-1], n


class CheckFailed(Exception):
    """A result differs from the reference: reported, its row dropped, exit status non-zero."""


def _check(q, k, v, causal, gqa, backend, direction):
    """Compare one slice (first sequence, first KV head and its query heads) with the math
    backend in fp32; raise CheckFailed on mismatch."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    group = q.shape[1] // k.shape[1]
    q, k, v = q[:1, :group], k[:1, :1], v[:1, :1]
    qs, ks, vs = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    with sdpa_kernel([backend]):
        o = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal, enable_gqa=gqa)
    q32, k32, v32 = (t.detach().float().requires_grad_(True) for t in (q, k, v))
    with sdpa_kernel([SDPBackend.MATH]):
        r = F.scaled_dot_product_attention(q32, k32, v32, is_causal=causal, enable_gqa=gqa)
    err = ((o.float() - r).norm() / r.norm()).item()
    if not err < 2e-2:
        raise CheckFailed(f"forward relative error {err:.3g} vs math backend")
    if direction == "bwd":
        g = torch.randn_like(r)
        o.backward(g.to(o.dtype))
        r.backward(g)
        e = ((qs.grad.float() - q32.grad).norm() / q32.grad.norm()).item()
        if not e < 5e-2:
            raise CheckFailed(f"dQ relative error {e:.3g} vs math backend")


class Emitter:
    def __init__(self, out):
        self.w = csv.writer(out, lineterminator="\n")
        self.w.writerow(COLUMNS)
        self.seq = 0
        self.hw = torch.cuda.get_device_name()

    def row(self, op, dtype, shape, lib, med, lo, hi, n, flop):
        self.seq += 1
        notes = (f"median of {n} reps after {WARMUP} warm-up; min={lo:.6g} ms; max={hi:.6g} ms; "
                 f"flop={flop:.6g} (4*B*H*Sq*Sk*D, x0.5 causal, bwd 2.5x); "
                 f"achieved={flop / (med * 1e-3) / 1e12:.4g} TFLOP/s; CUDA events")
        self.w.writerow([f"torch_bench-{op}-{self.seq:03d}", "perfmodel validate/torch_bench.py",
                         self.hw, lib, op, dtype, json.dumps(shape, separators=(",", ":")),
                         "time", f"{med:.9g}", "ms", notes])
        sys.stdout.flush()


def bench_one(em, name, backend, lib, batch, heads, kv_heads, sq, sk, d, causal, dropout) -> bool:
    """Time one configuration (fwd, and bwd for sq > 1); False if a result check failed."""
    from torch.nn.attention import sdpa_kernel
    dev, dt = "cuda", torch.bfloat16
    gqa = kv_heads != heads
    q = torch.randn(batch, heads, sq, d, device=dev, dtype=dt)
    k = torch.randn(batch, kv_heads, sk, d, device=dev, dtype=dt)
    v = torch.randn(batch, kv_heads, sk, d, device=dev, dtype=dt)
    directions = ("fwd",) if sq == 1 else ("fwd", "bwd")
    ok = True
    for direction in directions:
        where = (f"{name} B={batch} H={heads}/{kv_heads} Sq={sq} Sk={sk} d={d} causal={causal} "
                 f"p={dropout} {direction}")
        try:
            if dropout == 0.0:
                _check(q, k, v, causal, gqa, backend, direction)
            if direction == "fwd":
                def fn():
                    with sdpa_kernel([backend]):
                        F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                       dropout_p=dropout, enable_gqa=gqa)
            else:
                qg, kg, vg = (t.detach().requires_grad_(True) for t in (q, k, v))
                with sdpa_kernel([backend]):
                    o = F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal,
                                                       dropout_p=dropout, enable_gqa=gqa)
                g = torch.randn_like(o)

                def fn():  # backward only: the graph is kept and replayed
                    torch.autograd.grad(o, (qg, kg, vg), g, retain_graph=True)
            med, lo, hi, n = _time(fn)
        except CheckFailed as e:
            print(f"torch_bench: CHECK FAILED {where}: {e}", file=sys.stderr)
            ok = False
            continue
        except RuntimeError as e:  # the backend refused the shape (unsupported, out of memory)
            msg = (str(e).splitlines() or [""])[0][:200]
            print(f"torch_bench: skipped {where}: {msg}", file=sys.stderr)
            continue
        shape = {"batch": batch, "nheads": heads, "nheads_kv": kv_heads, "seqlen_q": sq,
                 "seqlen_k": sk, "headdim": d, "causal": causal, "pass": direction,
                 "dropout_p": dropout}
        em.row(f"attention_{direction}", "bf16", shape, lib, med, lo, hi, n,
               attention_flop(batch, heads, sq, sk, d, causal, direction))
    del q, k, v
    torch.cuda.empty_cache()
    return ok


def main() -> int:
    if torch is None:
        print("torch_bench: PyTorch is not installed; nothing to measure", file=sys.stderr)
        return 0
    if not torch.cuda.is_available():
        print("torch_bench: no CUDA device; nothing to measure", file=sys.stderr)
        return 0
    torch.manual_seed(0)
    em = Emitter(sys.stdout)
    ok = True
    for name, backend, lib in _backends():
        for d in HEADDIMS:
            heads = HIDDEN // d
            for causal in (False, True):
                for s in SEQLENS:
                    ok &= bench_one(em, name, backend, lib, TOKENS // s, heads, heads, s, s, d,
                                    causal, 0.0)
        # dropout (p = 0.1): head dim 128, causal and not, three lengths (no reference check:
        # the dropout mask is the backend's own)
        for causal in (False, True):
            for s in (1024, 4096, 16384):
                ok &= bench_one(em, name, backend, lib, TOKENS // s, 16, 16, s, s, 128, causal,
                                0.1)
        for batch, sk in DECODE:
            ok &= bench_one(em, name, backend, lib, batch, 32, 8, 1, sk, 128, False, 0.0)
    return 0 if ok else 3


if __name__ == "__main__":
    sys.exit(main())
