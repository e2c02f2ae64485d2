"""`perfmodel sol`: the speed of light of an op, a graph or a SOL-ExecBench problem, two ways,
and a measured kernel's SOL score; `perfmodel sol --coverage [CSV]`: which benchmark problems
perfmodel maps, with a cross-check of the published bounds (docs/cli.md "sol")."""
from __future__ import annotations

import json
from pathlib import Path

from perfmodel.cli.format import add_sm_clock_option, fmt_si, resolve_hardware
from perfmodel.cli.op import parse_assignments
from perfmodel.cli.plan import parse_duration
from perfmodel.errors import InputError
from perfmodel.graph import load_graph
from perfmodel.ops import REGISTRY, op
from perfmodel.report.tables import format_table
from perfmodel.sol import coverage as coverage_mod
from perfmodel.sol.estimate import estimate_graph, estimate_op, estimate_workload
from perfmodel.sol.problems import DEFAULT_CSV, load_definition
from perfmodel.sol.score import pole_s, sol_score


def register(sub) -> None:
    s = sub.add_parser("sol", help="speed of light two ways (SOLAR's convention and "
                                   "perfmodel's), SOL score of a measured kernel; --coverage: "
                                   "the SOL-ExecBench problems perfmodel maps")
    s.add_argument("target", nargs="?", help="an op name (then key=value parameters), a graph "
                                             "file (.yaml) or a definition.json")
    s.add_argument("params", nargs="*", help="op parameters, key=value")
    s.add_argument("--hw", help="the GPU (required unless --coverage)")
    add_sm_clock_option(s)
    s.add_argument("--workload", help="definition.json: the workload.jsonl line, by index or "
                                      "UUID (default: the first)")
    s.add_argument("--measured", help="the kernel's measured time, e.g. 0.2ms")
    s.add_argument("--baseline", help="the scoring baseline's time, e.g. 0.4ms (with "
                                      "--measured: the SOL score)")
    s.add_argument("--coverage", nargs="?", const=str(DEFAULT_CSV), metavar="CSV",
                   help="cross-check every problem of the SOL-ExecBench workloads CSV "
                        "(default: the copy shipped with perfmodel)")
    s.add_argument("--format", choices=("table", "json"), default="table")
    s.set_defaults(fn=run_sol)


def run_sol(args) -> int:
    if args.coverage is not None:
        if args.target or args.params:
            raise InputError("--coverage: takes no op, graph or definition (got "
                             f"'{args.target}')")
        # the cross-check runs on SOLAR's own B200 arch file: these would be ignored
        given = [f for f, v in (("--hw", args.hw), ("--sm-clock", args.sm_clock),
                                ("--workload", args.workload), ("--measured", args.measured),
                                ("--baseline", args.baseline)) if v is not None]
        if given:
            raise InputError([f"{f}: applies to an op, a graph or a definition; --coverage "
                              f"cross-checks on SOLAR's B200 arch file (1.5 GHz)"
                              for f in given])
        return run_coverage(args)
    if not args.target:
        raise InputError("sol: expected an op name, a graph file (.yaml) or a definition.json "
                         "(or --coverage)")
    if not args.hw:
        raise InputError("--hw: required (the GPU to take the speed of light on)")
    measured = parse_duration(args.measured, "--measured")
    baseline = parse_duration(args.baseline, "--baseline")
    if baseline is not None and measured is None:
        raise InputError("--baseline: needs --measured (the SOL score compares the two)")
    hw = resolve_hardware(args.hw, args.sm_clock)
    target = args.target
    path = Path(target)
    if target.endswith(".json"):
        if args.params:
            raise InputError(f"{target}: a definition takes no key=value parameters (got "
                             f"{args.params[0]})")
        d = load_definition(path)
        est = estimate_workload(d.workload(args.workload), hw)
    elif target.endswith((".yaml", ".yml")):
        if args.workload:
            raise InputError("--workload: applies to a definition.json only")
        est = estimate_graph(load_graph(path), hw)
    elif target.lower() in REGISTRY:
        if args.workload:
            raise InputError("--workload: applies to a definition.json only")
        est = estimate_op(op(target, **parse_assignments(args.params)), hw)
    else:
        raise InputError(f"sol: '{target}' is not an op name, a graph file (.yaml) or a "
                         f"definition.json (ops: {', '.join(sorted(REGISTRY))})")
    result = est.to_dict()
    result["measured_s"], result["baseline_s"] = measured, baseline
    result["fraction_of_sol"] = est.sol_time_s / measured if measured else None
    result["sol_score"] = None
    if measured is not None and baseline is not None:
        result["sol_score"] = sol_score(measured, baseline, est.sol_time_s)
        if est.roofline_time_s:
            result["sol_score_roofline"] = sol_score(measured, baseline, est.roofline_time_s)
    if args.format == "json":
        print(json.dumps(result, indent=2, default=str))
        return 0
    print(_table(est, result))
    return 0


def _us(t: float | None) -> str:
    return "—" if t is None else f"{t * 1e6:.4g} us"


def _table(est, r: dict) -> str:
    hw = est.hardware
    lock = f", SM clock locked at {hw.sm_clock_hz / 1e6:.0f} MHz" if hw.sm_clock_hz else ""
    s = est.solar
    macs = ", ".join(f"{fmt_si(n, 'MAC')} {p}" for p, n in s.macs.items() if n) or "no MACs"
    lines = [f"{est.name} on {hw.name}{lock}"]
    if est.mapping is not None:
        m = est.mapping
        lines.append(f"  mapping   {m.status}" + (f": {m.reason}" if m.reason else ""))
        for x in m.standins:
            lines.append(f"            stand-in: {x}")
    lines += [
        f"  speed of light, SOLAR's convention  {_us(s.time_s)}   bound: {s.bound}   "
        f"(tensor {_us(s.compute_s)}: {macs}; DRAM {_us(s.memory_s)}: "
        f"{fmt_si(s.dram_bytes, 'B')})",
        f"  perfmodel roofline (CUDA cores too) {_us(est.roofline_time_s)}   bound: "
        f"{est.roofline_bound or '—'}   (op by op: {_us(est.unfused_roofline_time_s)})",
        f"  perfmodel attainable (pipes)        {_us(est.attainable_time_s)}   bound: "
        f"{est.bound or '—'}"]
    if est.mapping is not None and est.mapping.workload.published_sol_s:
        lines.append(f"  published T_SOL                     "
                     f"{_us(est.mapping.workload.published_sol_s)}")
    if r["measured_s"]:
        lines.append(f"  measured  {_us(r['measured_s'])}: {r['fraction_of_sol']:.0%} of the "
                     f"speed of light")
    if r["sol_score"] is not None:
        pole = pole_s(r["baseline_s"], est.sol_time_s)
        extra = f" (the score's pole is at {_us(pole)})" if pole else ""
        lines.append(f"  baseline  {_us(r['baseline_s'])}: SOL score {r['sol_score']:.4g}"
                     + (f", {r['sol_score_roofline']:.4g} against perfmodel's roofline"
                        if r.get("sol_score_roofline") is not None else "") + extra)
    if est.ops:
        lines.append(format_table(["op", "kernel", "attainable_us", "bound", "roofline_us"],
                                  [[o["name"], o["op"]["op"], f"{o['attainable_time_s'] * 1e6:.4g}",
                                    o["bound"], f"{o['roofline_time_s'] * 1e6:.4g}"]
                                   for o in est.ops]))
    return "\n".join(lines)


def run_coverage(args) -> int:
    checks = coverage_mod.check(coverage_mod.read(args.coverage))
    summary = coverage_mod.summary(checks)
    if args.format == "json":
        rows = [{"problem": c.problem, "status": c.status, "workloads": len(c.workloads),
                 "verdict": c.verdict, "explanation": c.explanation, "reason": c.reason,
                 "standins": c.standins,
                 "ratio_median": sorted(c.ratios)[len(c.ratios) // 2],
                 "ratio_min": min(c.ratios), "ratio_max": max(c.ratios)} for c in checks]
        print(json.dumps({"summary": summary, "problems": rows}, indent=2, default=str))
        return 0
    rows = []
    for c in checks:
        r = sorted(c.ratios)
        note = c.reason or c.explanation or "; ".join(c.standins[:1])
        rows.append([c.problem, c.status, len(c.workloads), c.verdict,
                     f"{r[len(r) // 2]:.3f}", f"{r[0]:.3f}–{r[-1]:.3f}", note[:90]])
    print("ours / published: SOLAR's convention on SOLAR's B200 arch file (1.5 GHz), plus the "
          "table's 0.4 µs floor where its rows carry one")
    print(format_table(["problem", "mapping", "workloads", "verdict", "ours/pub", "range",
                        "note"], rows))
    p, w = summary["problems"], summary["workloads"]
    print(f"\nproblems: {p['total']}: {p['direct']} direct, {p['approximate']} approximate, "
          f"{p['none']} not mapped; workloads: {w['total']}: {w['direct']} direct, "
          f"{w['approximate']} approximate, {w['none']} not mapped")
    print("stand-ins (problems): " + "; ".join(f"{k} ({n})"
                                                for k, n in summary["standins"].items()))
    for pid, why in summary["unmapped"].items():
        print(f"not mapped: {pid}: {why}")
    v = summary["verdicts"]
    print("workload verdicts: " + ", ".join(f"{k} {n}" for k, n in v.items()))
    ca = summary["conventions_agree"]
    worst = ca["largest_disagreement"]
    print(f"where the conventions agree (direct mapping, no published defect): "
          f"{ca['agree']} of {ca['workloads']} workloads agree"
          + (f"; largest disagreement {worst['workload']}: ours {_us(worst['ours_s'])}, "
             f"published {_us(worst['published_s'])} ({worst['explanation']})" if worst else ""))
    return 0
