"""`perfmodel op NAME key=value ... --hw GPU`: one op's time, bound, resource times and kernels."""
from __future__ import annotations

import json
from typing import Any, Sequence

from perfmodel import yamlio
from perfmodel.cli.format import add_sm_clock_option, fmt_si, resolve_hardware
from perfmodel.engine import LEVELS
from perfmodel.predict import predict_op
from perfmodel.errors import InputError
from perfmodel.ops import op
from perfmodel.report.tables import format_table


def register(sub) -> None:
    o = sub.add_parser("op", help="predict one op: perfmodel op gemm m=8192 n=8192 k=8192 "
                                  "dtype=bf16 --hw h100")
    o.add_argument("name")
    o.add_argument("params", nargs="*", help="key=value parameters (see `perfmodel ops`)")
    o.add_argument("--hw", required=True)
    add_sm_clock_option(o)
    o.add_argument("--level", choices=LEVELS, default="pipes")
    o.add_argument("--format", choices=("table", "json"), default="table")
    o.set_defaults(fn=run_op)


def parse_assignments(items: Sequence[str]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise InputError(f"op parameter '{item}': expected key=value")
        key, value = item.split("=", 1)
        params[key.strip()] = yamlio.loads(value, f"parameter {key}") if value else None
    return params


def run_op(args) -> int:
    hw = resolve_hardware(args.hw, args.sm_clock)
    o = op(args.name, **parse_assignments(args.params))
    from perfmodel.cli.workload import warn
    warn(f"{key}: {note}" for key, note in o.warnings())
    est = predict_op(o, hw, args.level)  # with its 80 % band (perfmodel.intervals)
    if args.format == "json":
        print(json.dumps({"op": o.to_dict(), "hardware": hw.name, **est.to_dict(),
                          "details": {k: v for k, v in est.details.items()}}, indent=2,
                         default=str))
        return 0
    lock = f", SM clock locked at {hw.sm_clock_hz / 1e6:.0f} MHz" if hw.sm_clock_hz else ""
    print(f"{o!r} on {hw.name} ({args.level}{lock})")
    print(f"  time      {est.time_s * 1e6:.4g} us   bound: {est.bound}   "
          f"{est.fraction_of_roofline:.0%} of roofline ({est.roofline_time_s * 1e6:.4g} us)")
    if est.interval_s is not None:
        lo, hi = est.interval_s
        print(f"  80 % band {lo * 1e6:.4g} - {hi * 1e6:.4g} us (cross-validated residuals of "
              f"{est.interval_basis})")
    if est.flop:
        print(f"  achieved  {fmt_si(est.achieved_flop_per_s, 'FLOP/s')}")
    print(f"  HBM       {fmt_si(est.hbm_bytes, 'B')}  "
          f"({fmt_si(est.hbm_bytes / est.time_s, 'B/s')})")
    rows = [[r, f"{t * 1e6:.4g}", f"{t / est.time_s:.0%}"]
            for r, t in sorted(est.resource_time_s.items(), key=lambda kv: -kv[1])]
    print(format_table(["resource", "time_us", "busy"], rows))
    parts = kernel_parts(est.details)
    if parts:
        print(format_table(["kernel", "part", "time_us", "bound"],
                           [[str(i + 1), name, f"{t * 1e6:.4g}", bound]
                            for i, (name, t, bound) in enumerate(parts)]))
    shown = {k: v for k, v in est.details.items() if k != "parts"}
    if shown:
        print("  " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                               for k, v in shown.items()))
    return 0


def kernel_parts(details: dict) -> list[tuple[str, float, str]]:
    """(name, time, bound) of each kernel of an op that runs several in sequence, flattened."""
    out = []
    for part in details.get("parts", ()):
        if part.get("parts"):
            out += kernel_parts(part)
        else:
            name = part.get("part") or " ".join(str(part[k]) for k in ("kernel", "direction")
                                                 if k in part) or "kernel"
            out.append((name, part["time_s"], part["bound"]))
    return out
