"""`perfmodel ops`: the op vocabulary with every parameter's type, unit, default and meaning."""
from __future__ import annotations

from perfmodel.ops import REGISTRY
from perfmodel.ops.base import MAX_ELEMENTS


def register(sub) -> None:
    sub.add_parser("ops", help="the op vocabulary with parameters").set_defaults(fn=run_ops)


def run_ops(args) -> int:
    for name, cls in sorted(REGISTRY.items()):
        example = " ".join(f"{k}={v}" for k, v in cls.EXAMPLE.items())
        print(f"{name}  ({cls.__name__})   e.g. perfmodel op {name} {example} --hw h100")
        for key, p in cls.PARAMS.items():
            req = "required" if p.required else f"default {p.default!r}"
            unit = f" [{p.unit}]" if p.unit else ""
            limit = f", {p.limit()}" if p.hi_why and p.hi != MAX_ELEMENTS else ""
            print(f"    {key:20s} {p.expectation()}{limit}{unit}; {req}"
                  + (f" — {p.doc}" if p.doc else ""))
    return 0
