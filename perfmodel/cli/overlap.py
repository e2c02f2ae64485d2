"""`perfmodel overlap`: one transformer block under the four dropout schedules (sequential,
fused, overlap, rng_in_gemm; docs/cli.md "overlap", docs/studies.md §1.6)."""
from __future__ import annotations

import json

from perfmodel.cli.format import add_sm_clock_option, resolve_hardware
from perfmodel.errors import InputError
from perfmodel.report.tables import format_table


def register(sub) -> None:
    o = sub.add_parser("overlap", help="one transformer block under the four dropout schedules "
                                       "(sequential, fused, overlap, rng_in_gemm)")
    o.add_argument("--model", required=True, help="built-in model name or model file")
    o.add_argument("--hw", required=True)
    add_sm_clock_option(o)
    o.add_argument("--dtype", default="fp8", choices=("fp8", "bf16"), help="GEMM dtype")
    o.add_argument("--batch", type=int, default=1)
    o.add_argument("--seq", type=int, default=4096)
    o.add_argument("--tp", type=int, default=1)
    o.add_argument("--dropout", type=float, default=0.1)
    o.add_argument("--generator", default="philox4x32-7",
                   choices=("philox4x32-7", "philox4x32-10"))
    o.add_argument("--mask", default="bytes", choices=("bytes", "bits"))
    o.add_argument("--bits-per-element", type=int, default=8,
                   help="random bits per dropout decision (8: 16 per Philox call, as FA2; "
                        "128: one call per element)")
    o.add_argument("--no-lop3", action="store_true", help="unfused 3-input XORs in Philox")
    o.add_argument("--backward", action="store_true", help="include the block's backward")
    o.add_argument("--format", choices=("table", "json"), default="table")
    o.set_defaults(fn=run_overlap)


def run_overlap(args) -> int:
    from perfmodel.studies.dropout import DropoutConfig, best_schedule, evaluate, speedups
    if not 0 < args.dropout < 1:
        raise InputError(f"--dropout: expected a probability in (0, 1), got {args.dropout}")
    if not 1 <= args.bits_per_element <= 128:
        raise InputError("--bits-per-element: expected 1..128")
    from perfmodel.workloads.builder import Workload
    from perfmodel.workloads.models import load_model
    model = load_model(args.model)
    # the block is one layer of a training step: the workload checks, naming the flags
    Workload("train", batch=args.batch, seq=args.seq, tp=args.tp, dtype=args.dtype).check(
        model, names={"batch": "--batch", "seq": "--seq", "tp": "--tp", "dtype": "--dtype"})
    cfg = DropoutConfig(p=args.dropout, generator=args.generator, mask=args.mask,
                        bits_per_element=args.bits_per_element, lop3_fold=not args.no_lop3,
                        backward=args.backward)
    results = evaluate(model, resolve_hardware(args.hw, args.sm_clock), batch=args.batch,
                       seq=args.seq, dtype=args.dtype, tp=args.tp, cfg=cfg)
    sp = speedups(results)
    if args.format == "json":
        print(json.dumps({"model": args.model, "hardware": args.hw, "dtype": args.dtype,
                          "batch": args.batch, "seq": args.seq,
                          "dropout": cfg.__dict__,
                          "schedules": {k: r.to_dict() for k, r in results.items()},
                          "speedup": sp, "best": best_schedule(results)}, indent=2))
        return 0
    o = results["overlap"]
    print(f"{args.model} block ({'fwd+bwd' if args.backward else 'fwd'}), batch {args.batch}, "
          f"seq {args.seq}, {args.dtype} GEMMs on {args.hw}; dropout {args.dropout}, "
          f"{args.generator}, {args.bits_per_element} bits/decision, mask {args.mask}")
    print(format_table(["schedule", "time_us", "note"], [
        ["sequential", f"{results['sequential'].time_s * 1e6:.1f}",
         f"RNG kernel {o.rng_time_s * 1e6:.1f} us, then attention reads the mask"],
        ["fused", f"{results['fused'].time_s * 1e6:.1f}", "Philox inside attention"],
        ["overlap", f"{o.time_s * 1e6:.1f}",
         f"{o.mode}; {o.hidden_fraction:.0%} of the RNG hidden; saturated: {o.saturated}"],
        ["rng_in_gemm", f"{results['rng_in_gemm'].time_s * 1e6:.1f}",
         f"Philox in the GEMMs' producer warps; {results['rng_in_gemm'].hidden_fraction:.0%} "
         f"of the RNG hidden; bound: {results['rng_in_gemm'].saturated}"],
    ]))
    v = o.variants
    print(f"overlap variants: two streams {v['streams_s'] * 1e6:.1f} us, SM partition "
          f"{v['partition_s'] * 1e6:.1f} us (RNG on {v['partition_rng_sms']} SMs), ideal "
          f"co-location (no co-residency limit) {v['ideal_colocated_s'] * 1e6:.1f} us")
    print(f"speedup: overlap vs sequential {sp['overlap_vs_sequential']:.3f}x, "
          f"vs fused {sp['overlap_vs_fused']:.3f}x; rng_in_gemm vs sequential "
          f"{sp['rng_in_gemm_vs_sequential']:.3f}x, vs fused {sp['rng_in_gemm_vs_fused']:.3f}x, "
          f"vs overlap {sp['rng_in_gemm_vs_overlap']:.3f}x; best: {best_schedule(results)}")
    return 0
