"""`perfmodel validate`: measured vs predicted over the public data and validate/results/."""
from __future__ import annotations

import contextlib
import csv
import gc
import io
import json
import sys

from perfmodel.engine import LEVELS
from perfmodel.report.tables import format_table


def register(sub) -> None:
    v = sub.add_parser("validate", help="measured vs predicted error tables")
    v.add_argument("results", nargs="*", help="measurement CSVs (default: public data and "
                   "validate/results/)")
    v.add_argument("--level", choices=LEVELS, default="pipes")
    v.add_argument("--format", choices=("table", "json", "csv"), default="table")
    v.add_argument("--rows", action="store_true", help="also list every row's error")
    v.add_argument("--worst", type=int, default=5, help="worst judged rows listed (default 5)")
    v.add_argument("--plot", help="write a predicted-vs-measured log-log plot per class (PNG)")
    v.add_argument("--by", metavar="PARAMS", help="also split each class by op parameters, "
                   "comma-separated (e.g. kernel,dtype or head_dim,causal)")
    v.add_argument("--jobs", type=int, help="worker processes that predict the rows (default: "
                   "the CPUs, on Linux, from 500 rows)")
    v.set_defaults(fn=run_validate)


def run_validate(args) -> int:
    with _without_cyclic_gc():
        return _run_validate(args)


@contextlib.contextmanager
def _without_cyclic_gc():
    """Python's cycle collector paused while validate works: it builds thousands of cases,
    demands and (--plot) matplotlib artists that live to the end, and the collector frees almost
    nothing of them (a few hundred cyclic objects, ~3 MB of peak memory), yet each full
    collection rescans them all: 0.5 s of the ~5 s of `validate --plot`. Reference counting
    still frees everything else; the collector's state is restored afterwards (a test calling
    main() in-process gets it back)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _run_validate(args) -> int:
    from perfmodel.validation.compare import compare, summarize
    from perfmodel.validation.measurements import default_sources, load_cases

    from perfmodel.cli.format import check_output, writing
    from perfmodel.errors import InputError
    if args.worst < 0:
        raise InputError(f"--worst: expected a number of rows >= 0, got {args.worst}")
    from perfmodel.plan.search import check_jobs
    check_jobs(args.jobs)  # before the rows load
    if args.plot:
        check_output(args.plot, "--plot", plot=True)
    sources = args.results or default_sources()
    cases, skipped = [], []
    for src in sources:
        c, s = load_cases(src)
        cases += c
        skipped += s
    comps = compare(cases, args.level, jobs=args.jobs)
    by = _split_by(args.by, comps)
    summary = summarize(comps, group_by=(lambda case: tuple(
        "-" if getattr(case.op, f, None) is None else str(getattr(case.op, f)) for f in by))
        if by else None)
    if args.format == "json":
        print(json.dumps({"level": args.level, "summary": summary,
                          "rows": [c.to_dict() for c in comps],
                          "skipped": [s.__dict__ for s in skipped]}, indent=2))
        return 0
    if args.format == "csv":
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(comps[0].to_dict()) if comps else ["id"])
        w.writeheader()
        for c in comps:
            w.writerow(c.to_dict())
        sys.stdout.write(buf.getvalue())
        return 0
    print(f"measured vs predicted ({args.level}); errors are |predicted/measured − 1|")
    print(format_table(
        ["op class", "hardware", "rows", *by, "n", "MAPE", "median", "max", "bias",
         "roofline MAPE"],
        [[s["op_class"], s["hardware"], s["rows"], *s.get("group", ()), s["n"],
          f"{s['mape']:.1%}", f"{s['median_ape']:.1%}", f"{s['max_ape']:.1%}",
          f"{s['bias']:+.1%}", f"{s['roofline_mape']:.1%}"] for s in summary]))
    judged = sorted((c for c in comps if not c.case.fitted), key=lambda c: -abs(c.error))
    if judged and args.worst > 0:
        print(f"\nworst {min(args.worst, len(judged))} judged rows:")
        print(format_table(["id", "class", "hardware", "measured_us", "predicted_us", "error",
                            "bound"],
                           [[c.case.id, c.case.op_class, c.case.hardware.name,
                             f"{c.case.measured_time_s * 1e6:.4g}",
                             f"{c.predicted_time_s * 1e6:.4g}", f"{c.error:+.1%}", c.bound]
                            for c in judged[:args.worst]]))
    if args.plot:
        from perfmodel.validation.plots import plot_validation
        with writing(args.plot, "--plot"):
            plot_validation(comps, args.plot, level=args.level)
        print(f"\nwrote {args.plot}", file=sys.stderr)
    if args.rows:
        print()
        print(format_table(["id", "hardware", "library", "measured_us", "predicted_us", "error",
                            "roofline", "bound"],
                           [[c.case.id, c.case.hardware.name, c.case.library[:28],
                             f"{c.case.measured_time_s * 1e6:.4g}",
                             f"{c.predicted_time_s * 1e6:.4g}", f"{c.error:+.1%}",
                             f"{c.roofline_error:+.1%}", c.bound] for c in comps]))
    if skipped:
        print()
        print("\n".join(_skipped_lines(skipped, every_id=args.rows)))
    return 0


# a reason shared by more rows than this lists its count, not its ids (unless --rows)
SKIPPED_IDS_LISTED = 3


def _skipped_lines(skipped, every_id: bool = False) -> list[str]:
    """The rows not modeled, one line per reason with its count and op classes; the ids where
    a reason has few rows (or all of them with --rows)."""
    by_reason: dict[str, list] = {}
    for s in skipped:
        by_reason.setdefault(s.reason, []).append(s)
    lines = [f"not modeled ({len(skipped)} rows, {len(by_reason)} reasons):"]
    width = len(str(max(len(v) for v in by_reason.values())))
    for reason, rows in sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        classes = ", ".join(sorted({s.op_class for s in rows}))
        ids = ""
        if every_id or len(rows) <= SKIPPED_IDS_LISTED:
            ids = f" [{', '.join(s.id for s in rows)}]"
        lines.append(f"  {len(rows):>{width}}  {classes}: {reason}{ids}")
    if not every_id and any(len(v) > SKIPPED_IDS_LISTED for v in by_reason.values()):
        lines.append("  (--rows lists every id; --format json gives them as 'skipped')")
    return lines


def _split_by(spec: str | None, comps) -> list[str]:
    """The op parameters named by --by; each must be a parameter of some compared op."""
    if not spec:
        return []
    from perfmodel.errors import InputError
    fields = [f.strip() for f in spec.split(",") if f.strip()]
    known = set().union(*(type(c.case.op).PARAMS for c in comps)) if comps else set()
    unknown = [f for f in fields if f not in known]
    if unknown or not fields:
        raise InputError(f"--by: unknown op parameter(s) {', '.join(unknown) or repr(spec)}; "
                         f"expected comma-separated names from: {', '.join(sorted(known))}")
    return fields
