"""`perfmodel sweep SPACE.yaml`: every point of a design space (docs/cli.md "sweep") as one row
of a CSV or Parquet table, streamed to disk chunk by chunk, in this process or on a Dask
cluster."""
from __future__ import annotations

import sys
import time


def register(sub) -> None:
    s = sub.add_parser("sweep", help="predict every point of a design space (ops or models) "
                                     "into a CSV/Parquet table")
    s.add_argument("space", help="space file (docs/cli.md \"sweep\")")
    s.add_argument("--output", "-o", help="table to write: .csv, or .parquet (needs pyarrow); "
                                          "default CSV on stdout")
    s.add_argument("--format", choices=("csv", "parquet"),
                   help="default: from the --output suffix (csv otherwise)")
    s.add_argument("--dask", metavar="ADDRESS",
                   help="partition the points over a Dask cluster: `local` (a LocalCluster on "
                        "this machine) or a scheduler address (tcp://host:8786)")
    s.add_argument("--workers", type=int, help="--dask local: worker processes (default: one "
                                               "per core)")
    s.add_argument("--chunk", type=int, default=None,
                   help="points per chunk: one write, one Dask task (default 1000)")
    s.add_argument("--progress", action="store_true",
                   help="draw the progress bar even when stderr is not a terminal")
    s.add_argument("--count", action="store_true", help="print the number of points and stop")
    s.add_argument("--html", metavar="FILE", help="also write a self-contained HTML report: the "
                                                  "inputs, the rows, interactive charts of the "
                                                  "model points")
    s.set_defaults(fn=run_sweep)


# a sweep projected to run longer than this after its first chunk says so once on stderr
# (without the bar: stderr not a terminal), so a mistyped space is stopped, not waited for
LONG_RUN_S = 30.0


class Bar:
    """A one-line progress bar on stderr, redrawn at most ten times a second: points done, rate,
    time left. Without it, a run projected past LONG_RUN_S after its first chunk prints its
    estimate once."""

    def __init__(self, total: int, enabled: bool):
        self.total, self.n, self.enabled = max(total, 1), 0, enabled
        self.start = self.drawn = time.perf_counter()
        self.warned = False

    def __call__(self, n: int) -> None:
        self.n += n
        now = time.perf_counter()
        if not self.enabled and not self.warned and self.n < self.total:
            self.warned = True
            rate = self.n / max(now - self.start, 1e-9)
            left = (self.total - self.n) / rate
            if left > LONG_RUN_S:
                sys.stderr.write(f"sweep: {self.total:,} points at {rate:,.0f}/s: about "
                                 f"{_duration(left)} to go (--count counts a space without "
                                 f"running it)\n")
                sys.stderr.flush()
        if not self.enabled or (now - self.drawn < 0.1 and self.n < self.total):
            return
        self.drawn = now
        rate = self.n / max(now - self.start, 1e-9)
        left = (self.total - self.n) / rate if rate > 0 else 0.0
        done = int(30 * self.n / self.total)
        sys.stderr.write(f"\rsweep [{'#' * done}{'.' * (30 - done)}] {self.n:,}/{self.total:,} "
                         f"points, {rate:,.0f}/s, {left:,.0f} s left ")
        if self.n >= self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def _duration(seconds: float) -> str:
    """A duration as people read it: 45 s, 12 min, 3.5 h, 2.0 days, 3.1e+04 years."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    if seconds < 3.15e7:
        return f"{seconds / 86400:.1f} days"
    return f"{seconds / 3.15e7:.3g} years"


def run_sweep(args) -> int:
    from perfmodel import sweep
    from perfmodel.cli.format import check_output
    from perfmodel.errors import InputError
    chunk = sweep.DEFAULT_CHUNK if args.chunk is None else args.chunk
    if chunk < 1:
        raise InputError(f"--chunk: expected a positive integer, got {chunk}")
    if args.workers is not None and (args.workers < 1 or args.dask != "local"):
        raise InputError("--workers: expected a positive integer, with --dask local")
    fmt = args.format or ("parquet" if (args.output or "").lower().endswith(".parquet")
                          else "csv")
    if fmt == "parquet":
        if not args.output:
            raise InputError("--format parquet: needs --output FILE")
        if not sweep.has_pyarrow():
            raise InputError("--format parquet: needs pyarrow (pip install pyarrow), or write "
                             "a .csv")
    if args.output:
        check_output(args.output, "--output")
    if args.html:
        from perfmodel.report.html import require_plotly
        check_output(args.html, "--html")
        require_plotly("--html")
    space = sweep.load_space(args.space)
    if args.count:
        print(space.size)
        return 0
    kept: list[tuple] = []
    if args.html:
        from perfmodel.report.html import check_sweep_size
        check_sweep_size(space.size, "--html")
    client = sweep.dask_client(args.dask, args.workers) if args.dask else None
    try:
        if fmt == "parquet":
            sink = sweep.ParquetSink(args.output, space)
        else:
            try:
                stream = (open(args.output, "w", encoding="utf-8", newline="")
                          if args.output else sys.stdout)
            except OSError as e:
                raise InputError(f"--output {args.output}: cannot write "
                                 f"({e.strerror or e})") from None
            sink = sweep.CsvSink(stream, space.header)
        source = (sweep.dask_chunks(space, client, chunk) if client is not None
                  else sweep.chunks(space, chunk))
        if args.html:
            from perfmodel.report.html import keeping
            source = keeping(source, kept)
        bar = Bar(space.size, args.progress or sys.stderr.isatty())
        n = sweep.run(space, sink, source, bar)
        if args.output:
            sink_stream = getattr(sink, "stream", None)
            if sink_stream is not None and sink_stream is not sys.stdout:
                sink_stream.close()
            print(f"wrote {n:,} rows to {args.output}", file=sys.stderr)
        if args.html:
            from perfmodel.cli.format import write_output
            from perfmodel.report.html import sweep_report
            write_output(args.html, sweep_report(space, kept, vars(args)), "--html")
            print(f"wrote {args.html}", file=sys.stderr)
    finally:
        if client is not None:
            cluster = getattr(client, "cluster", None)
            client.close()
            if cluster is not None:
                cluster.close()
    return 0
