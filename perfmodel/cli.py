"""`perfmodel` command line (SPEC.md "Command line").

Exit codes: 0 success; 2 bad input (one line per problem on stderr, naming file, key path and
expectation; never a traceback); 1 internal error.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Sequence

from . import yamlio
from .engine import LEVELS, estimate
from .errors import InputError
from .hardware import hardware, list_hardware
from .ops import REGISTRY, op
from .report import format_table


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as bad input (exit 2) in our one-line style."""

    def error(self, message: str):
        raise InputError(f"usage: {message} (see `{self.prog} --help`)")


def _hw_list(args) -> int:
    rows = [[hw.name, hw.architecture, hw.compute_capability, ", ".join(hw.aliases),
             ", ".join(hw.device_names)] for hw in list_hardware()]
    print(format_table(["name", "arch", "cc", "aliases", "device names"], rows))
    return 0


def _fmt_si(x: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.4g} {prefix}{unit}"
    return f"{x:.4g} {unit}"


def _hw_show(args) -> int:
    hw = hardware(args.name)
    info = hw.summary()
    if args.format == "json":
        print(json.dumps(info, indent=2))
        return 0
    print(f"{hw.name}  ({hw.architecture}, compute capability {hw.compute_capability})")
    print(f"  file: {hw.path}")
    print(f"  aliases: {', '.join(hw.aliases)}")
    rows = []
    for key, q in hw.quantities.items():
        prov = "; ".join(f"{k}: {v}" for k, v in q.provenance.items())
        rng = f"[{q.range[0]:.4g}, {q.range[1]:.4g}]" if q.range else ""
        rows.append([key, f"{q.value:.6g}", rng, prov[:70]])
    print(format_table(["quantity", "value", "range", "provenance"], rows))
    d = info["derived"]
    print("\nderived:")
    for dt, peak in d["tensor_peak_flop_per_s"].items():
        print(f"  tensor {dt:6s} {_fmt_si(peak, 'FLOP/s'):>16}   ridge "
              f"{d['ridge_point_flop_per_byte'][dt]:7.1f} FLOP/byte")
    print(f"  fp32 (FMA pipe)  {_fmt_si(d['fp32_peak_flop_per_s'], 'FLOP/s')}")
    print(f"  HBM achievable   {_fmt_si(d['hbm_achievable_bandwidth_bytes_per_s'], 'B/s')}")
    print(f"  shared memory    {_fmt_si(d['smem_aggregate_bandwidth_bytes_per_s'], 'B/s')}")
    print(f"  MUFU/XU          {_fmt_si(d['xu_peak_per_s'], 'op/s')}")
    if info["assumed"]:
        print(f"\nassumed (not sourced; ranges given): {', '.join(info['assumed'])}")
    return 0


def _ops(args) -> int:
    for name, cls in sorted(REGISTRY.items()):
        example = " ".join(f"{k}={v}" for k, v in cls.EXAMPLE.items())
        print(f"{name}  ({cls.__name__})   e.g. perfmodel op {name} {example} --hw h100")
        for key, p in cls.PARAMS.items():
            req = "required" if p.required else f"default {p.default!r}"
            unit = f" [{p.unit}]" if p.unit else ""
            print(f"    {key:20s} {p.expectation()}{unit}; {req}" + (f" — {p.doc}" if p.doc else ""))
    return 0


def _parse_assignments(items: Sequence[str]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise InputError(f"op parameter '{item}': expected key=value")
        key, value = item.split("=", 1)
        params[key.strip()] = yamlio.loads(value, f"parameter {key}") if value else None
    return params


def _op(args) -> int:
    hw = hardware(args.hw)
    o = op(args.name, **_parse_assignments(args.params))
    est = estimate(o.demand(hw), hw, args.level)
    if args.format == "json":
        print(json.dumps({"op": o.to_dict(), "hardware": hw.name, **est.to_dict(),
                          "details": {k: v for k, v in est.details.items()}}, indent=2,
                         default=str))
        return 0
    print(f"{o!r} on {hw.name} ({args.level})")
    print(f"  time      {est.time_s * 1e6:.4g} us   bound: {est.bound}   "
          f"{est.fraction_of_roofline:.0%} of roofline ({est.roofline_time_s * 1e6:.4g} us)")
    if est.flop:
        print(f"  achieved  {_fmt_si(est.achieved_flop_per_s, 'FLOP/s')}")
    print(f"  HBM       {_fmt_si(est.hbm_bytes, 'B')}  "
          f"({_fmt_si(est.hbm_bytes / est.time_s, 'B/s')})")
    rows = [[r, f"{t * 1e6:.4g}", f"{t / est.time_s:.0%}"]
            for r, t in sorted(est.resource_time_s.items(), key=lambda kv: -kv[1])]
    print(format_table(["resource", "time_us", "busy"], rows))
    if est.details:
        print("  " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                               for k, v in est.details.items()))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="perfmodel", description="Analytical GPU performance model for AI "
                "workloads (Hopper, Blackwell).")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    hw = sub.add_parser("hw", help="hardware specs")
    hwsub = hw.add_subparsers(dest="hw_command", required=True, parser_class=_Parser)
    hwsub.add_parser("list", help="built-in hardware names and aliases").set_defaults(fn=_hw_list)
    show = hwsub.add_parser("show", help="a resolved spec with derived peaks")
    show.add_argument("name", help="name, alias, driver device name or spec path")
    show.add_argument("--format", choices=("table", "json"), default="table")
    show.set_defaults(fn=_hw_show)

    sub.add_parser("ops", help="the op vocabulary with parameters").set_defaults(fn=_ops)

    o = sub.add_parser("op", help="predict one op: perfmodel op gemm m=8192 n=8192 k=8192 "
                                  "dtype=bf16 --hw h100")
    o.add_argument("name")
    o.add_argument("params", nargs="*", help="key=value parameters (SPEC.md op vocabulary)")
    o.add_argument("--hw", required=True)
    o.add_argument("--level", choices=LEVELS, default="pipes")
    o.add_argument("--format", choices=("table", "json"), default="table")
    o.set_defaults(fn=_op)

    from .validation_cli import add_validate_parser
    add_validate_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return args.fn(args)
    except InputError as e:
        for line in e.problems:
            print(f"perfmodel: error: {line}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
