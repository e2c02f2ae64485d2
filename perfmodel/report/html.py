"""One self-contained HTML page for planners (`plan serve --html`, `sweep --html`): the inputs,
the table of what was considered and interactive Plotly charts (throughput per GPU against TPOT
and TTFT, the chosen point starred, the SLOs drawn; latency against load where the plan has more
than one load per layout). plotly.js is embedded once, inline: the file opens with no server and
no network. Every string of the input is escaped (html.escape) before it reaches the page.

The page builders take what the commands computed (rows as dicts, the sweep's row tuples) and
return text; the CLI checks and writes the path (perfmodel.cli.format)."""
from __future__ import annotations

import html
import importlib.util
from typing import Any, Iterable, Iterator, Mapping, Sequence

from perfmodel.errors import InputError
from perfmodel.report.tables import (FRONT_COLUMNS, LATENCY_HEADS, SERVE_COLUMNS, column_heads,
                                     latency_cells, number, row_cells)

# a sweep's --html page holds every row in memory and in its table: more points belong in a
# CSV/Parquet table (--output) and a notebook
MAX_SWEEP_POINTS = 20_000
# parsed arguments that are not flags of the run: the subcommand, its function, the page itself,
# and the positional MODEL and SPACE (inputs of their own)
NOT_FLAGS = ("fn", "command", "plan_command", "html", "model", "space")
# one colour per series, the same in every panel (Plotly's qualitative palette)
PALETTE = ("#636efa", "#ef553b", "#00cc96", "#ab63fa", "#ffa15a", "#19d3f3", "#ff6692",
           "#b6e880", "#ff97ff", "#fecb52")
CHART_HEIGHT = 460
STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px;
       color: #1d2330; max-width: 1500px; }
h1 { font-size: 22px; margin: 0 0 6px; } h2 { font-size: 17px; margin: 28px 0 8px; }
p.note { color: #555; margin: 4px 0 10px; }
.scroll { overflow-x: auto; border: 1px solid #dde2ea; }
table { border-collapse: collapse; font-size: 13px; }
th, td { padding: 3px 9px; border-bottom: 1px solid #e6e9ef; white-space: nowrap; }
th { background: #f2f4f8; position: sticky; top: 0; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.chosen td { background: #fff4d6; font-weight: 600; }
table.inputs th { position: static; width: 1%; }
.chart { min-height: 470px; }
"""


# ---- checks ----------------------------------------------------------------------------------
def require_plotly(flag: str = "--html") -> None:
    """InputError naming `flag` where plotly (the `report` extra) is not installed."""
    if importlib.util.find_spec("plotly") is None:
        raise InputError(f"{flag}: the report page needs plotly (pip install plotly, or "
                         f"pip install \"perfmodel[report]\")")


def check_sweep_size(points: int, flag: str = "--html") -> None:
    """InputError naming `flag` where a sweep has too many points for one page."""
    if points > MAX_SWEEP_POINTS:
        raise InputError(f"{flag}: a report page holds at most {MAX_SWEEP_POINTS:,} points, "
                         f"this space has {points:,} (write them with --output instead)")


def keeping(source: Iterable[list[tuple]], kept: list[tuple]) -> Iterator[list[tuple]]:
    """The chunks of `source` as they come, each one's rows also appended to `kept`."""
    for rows in source:
        kept.extend(rows)
        yield rows


# ---- page pieces -----------------------------------------------------------------------------
def esc(value: Any) -> str:
    """`value` as text safe inside an element or a quoted attribute."""
    return html.escape(str(value), quote=True)


def cell(value: Any) -> str:
    """A sweep cell: a float to 6 significant digits, booleans as true/false, None empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _is_number(text: str) -> bool:
    try:
        float(text.replace(",", ""))
    except ValueError:
        return False
    return True


def table(heads: Sequence[str], rows: Sequence[Sequence[Any]], table_id: str,
          chosen: int | None = None) -> str:
    """An HTML table, numbers right-aligned, row `chosen` (an index) highlighted."""
    head = "".join(f"<th>{esc(h)}</th>" for h in heads)
    body = []
    for i, row in enumerate(rows):
        cells = "".join(f'<td class="num">{esc(v)}</td>' if _is_number(str(v)) and str(v)
                        else f"<td>{esc(v)}</td>" for v in row)
        body.append(f'<tr class="chosen">{cells}</tr>' if i == chosen else f"<tr>{cells}</tr>")
    return (f'<div class="scroll"><table id="{esc(table_id)}"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>')


def inputs_table(items: Sequence[tuple[str, Any]]) -> str:
    """The inputs as a two-column table of name and value."""
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in items)
    return f'<table class="inputs" id="inputs"><tbody>{rows}</tbody></table>'


def flags(args: Mapping[str, Any]) -> str:
    """The run's flags as a command line tail (`--isl 512 --sweep`): set ones only."""
    out = []
    for key, value in args.items():
        if key in NOT_FLAGS or callable(value) or value is None or value is False:
            continue
        name = "--" + key.replace("_", "-")
        out.append(name if value is True else f"{name} {value}")
    return " ".join(out)


def section(title: str, *parts: str, note: str | None = None) -> str:
    """A titled section: the heading, an optional note, the parts."""
    text = f"<p class=\"note\">{esc(note)}</p>" if note else ""
    return f"<section><h2>{esc(title)}</h2>{text}{''.join(parts)}</section>"


def figure(fig, div_id: str) -> str:
    """A Plotly figure as a <div> and its script, plotly.js not included (page() has it)."""
    return ('<div class="chart">'
            + fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id,
                          config={"displaylogo": False, "responsive": True})
            + "</div>")


def page(title: str, parts: Sequence[str]) -> str:
    """The whole document: plotly.js inline once in the head, then the parts."""
    from plotly.offline import get_plotlyjs
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{esc(title)}</title><style>{STYLE}</style>"
            f"<script type=\"text/javascript\">{get_plotlyjs()}</script></head><body>"
            f"<h1>{esc(title)}</h1>{''.join(parts)}</body></html>\n")


# ---- charts ----------------------------------------------------------------------------------
def front(points: Sequence[tuple[float, float, Any]]) -> list[tuple[float, float, Any]]:
    """The (latency, throughput, label) points no other point beats in both (lower latency,
    higher throughput), by latency."""
    out: list[tuple[float, float, Any]] = []
    for p in sorted(points, key=lambda p: (p[0], -p[1])):
        if not out or p[1] > out[-1][1]:
            out.append(p)
    return out


def _subplots(titles: Sequence[str]):
    from plotly.subplots import make_subplots
    fig = make_subplots(rows=1, cols=len(titles), subplot_titles=list(titles),
                        horizontal_spacing=0.08)
    fig.update_layout(template="plotly_white", height=CHART_HEIGHT,
                      margin=dict(l=60, r=20, t=60, b=50),
                      legend=dict(orientation="h", yanchor="top", y=-0.16, x=0))
    return fig


Point = tuple[float, float, str]  # latency, throughput, hover label


def scatter_panel(fig, col: int, groups: Sequence[tuple[str, Sequence[Point], str]],
                  chosen: Point | None, chosen_name: str) -> None:
    """One Pareto panel: each group of points (name, points, colour; an empty one left out),
    the front through all of them, the chosen point starred."""
    import plotly.graph_objects as go
    show = col == 1
    for name, points, colour in groups:
        if not points:
            continue
        fig.add_trace(go.Scatter(
            x=[p[0] for p in points], y=[p[1] for p in points], mode="markers", name=name,
            hovertext=[p[2] for p in points], hoverinfo="text+x+y", legendgroup=name,
            showlegend=show, marker=dict(size=8, color=colour, opacity=0.8)), row=1, col=col)
    line = front([p for _, points, _ in groups for p in points])
    fig.add_trace(go.Scatter(
        x=[p[0] for p in line], y=[p[1] for p in line], mode="lines+markers",
        name="Pareto front", hovertext=[p[2] for p in line], hoverinfo="text+x+y",
        legendgroup="front", showlegend=show, line=dict(color="#e45756", shape="hv"),
        marker=dict(size=6, color="#e45756")), row=1, col=col)
    if chosen is not None:
        fig.add_trace(go.Scatter(
            x=[chosen[0]], y=[chosen[1]], mode="markers", name=chosen_name,
            hovertext=[chosen[2]], hoverinfo="text+x+y", legendgroup="chosen", showlegend=show,
            marker=dict(symbol="star", size=18, color="#f2b701",
                        line=dict(width=1, color="#333"))), row=1, col=col)


def slo_line(fig, col: int, value_s: float | None, label: str, vertical: bool) -> None:
    """A dashed SLO line at `value_s` (ms on a log axis), labelled at its end. (Plotly places
    an annotation on a log axis at log10 of the value, a shape at the value itself.)"""
    if value_s is None:
        return
    import math
    ms = value_s * 1e3
    line = dict(color="#54a24b", dash="dash", width=1.5)
    text = f"{label} {ms:g} ms"
    suffix = "" if col == 1 else str(col)
    if vertical:
        fig.add_shape(type="line", x0=ms, x1=ms, y0=0, y1=1, xref=f"x{suffix}",
                      yref=f"y{suffix} domain", line=line)
        fig.add_annotation(x=math.log10(ms), y=1, xref=f"x{suffix}", yref=f"y{suffix} domain",
                           text=text, showarrow=False, xanchor="left", yanchor="top",
                           font=dict(color="#2f6f2a", size=11))
    else:
        fig.add_shape(type="line", y0=ms, y1=ms, x0=0, x1=1, yref=f"y{suffix}",
                      xref=f"x{suffix} domain", line=line)
        fig.add_annotation(y=math.log10(ms), x=0, yref=f"y{suffix}", xref=f"x{suffix} domain",
                           text=text, showarrow=False, xanchor="left", yanchor="bottom",
                           font=dict(color="#2f6f2a", size=11))


# ---- plan serve ------------------------------------------------------------------------------
def serve_layout_table(rows, top, slo: bool) -> tuple[list[str], list[list[str]], int | None]:
    """The text table's heads and the cells of the layouts that fit; the chosen row's index."""
    fit = [r for r in rows if r["point"] == "workload" and r["fits"]]
    heads = column_heads(SERVE_COLUMNS, slo)
    chosen = next((i for i, r in enumerate(fit) if r is top or r == top), None)
    return heads, [row_cells(r, SERVE_COLUMNS, slo) for r in fit], chosen


def length_text(value: Any) -> str:
    """A workload length as Workload.to_dict gives it: a count, or [kind, a, b] (uniform a..b,
    normal of mean a and deviation b)."""
    if isinstance(value, (list, tuple)) and len(value) == 3:
        kind, a, b = value
        return f"{a:g}..{b:g} uniform" if kind == "uniform" else f"{kind} ({a:g}, {b:g})"
    return str(value)


def describe_workload(w: Mapping[str, Any]) -> str:
    """The workload as the inputs list shows it: each of its fields, lengths in words."""
    return ", ".join(f"{k} {length_text(v)}" for k, v in w.items() if v is not None)


def serve_inputs(search: Mapping[str, Any], args: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The inputs of a `plan serve` run, name and value."""
    def slo(v: float | None) -> str:
        return "-" if v is None else f"{v * 1e3:g} ms p99"
    items = [("model", search["model"]), ("hardware", search["hardware"]),
             ("GPUs", search["gpus"]), ("engine", search["engine"]),
             ("weights", search["dtype"] + (f" (experts {search['expert_weights']})"
                                            if search.get("expert_weights", search["dtype"])
                                            != search["dtype"] else "")),
             ("KV cache", search["kv_dtype"]),
             ("workload", describe_workload(search["workload"])),
             ("TPOT SLO", slo(search.get("tpot_slo_s"))),
             ("TTFT SLO", slo(search.get("ttft_slo_s")))]
    if search.get("moe_loads"):
        items.append(("MoE loads", f"{search['moe_loads']} (replication "
                                   f"{search.get('moe_replication')})"))
    items.append(("flags", flags(args) or "-"))
    return items


def best_summary(top: Mapping[str, Any] | None, slo: bool) -> str:
    """The chosen layout in one sentence."""
    if top is None:
        return "No layout " + ("meets the SLOs." if slo else "fits.")
    point = "" if top["point"] == "workload" else f" at {top['concurrency']} in flight"
    return (f"Chosen: {top['layout']} x {top['replicas']} replica"
            f"{'s' * (top['replicas'] > 1)}{point}: "
            f"{number(top['output_tokens_per_s_per_gpu'])} output tokens/s per GPU, "
            f"{number(top['output_tokens_per_s_per_user'], 1, 1)} per user; TTFT p99 "
            f"{number(top['ttft_p99_s'], 1e3)} ms, TPOT p99 "
            f"{number(top['tpot_p99_s'], 1e3, 1)} ms.")


def statistics_table(top: Mapping[str, Any]) -> str:
    """Mean, median, p90, p99 of the chosen layout's TTFT, TPOT, ITL and E2E."""
    return table(LATENCY_HEADS, latency_cells(top), "statistics")


def point_label(row: Mapping[str, Any]) -> str:
    """A serving point's hover label: layout, replicas, load."""
    load = "" if row["point"] == "workload" else f", {row['concurrency']} in flight"
    return esc(f"{row['layout']} x {row['replicas']}{load}")


EVERY, MEETS, MISSES = "every point that fits", "meets the SLOs", "misses an SLO"


def serve_pareto_figure(rows, top, tpot_slo_s: float | None, ttft_slo_s: float | None):
    """Output tokens/s per GPU against p99 TPOT and p99 TTFT for every point that fits, the
    front, the chosen point and the SLO lines."""
    fig = _subplots(["tokens/s/GPU vs TPOT p99", "tokens/s/GPU vs TTFT p99"])
    fits = [r for r in rows if r["fits"] and r.get("output_tokens_per_s_per_gpu") is not None]
    with_slo = tpot_slo_s is not None or ttft_slo_s is not None
    for col, (key, label, slo) in enumerate((("tpot_p99_s", "TPOT p99 ms", tpot_slo_s),
                                             ("ttft_p99_s", "TTFT p99 ms", ttft_slo_s)), 1):
        def pts(keep):
            return [(r[key] * 1e3, r["output_tokens_per_s_per_gpu"], point_label(r))
                    for r in fits if r.get(key) and keep(r)]
        groups = ([(MISSES, pts(lambda r: not r.get("meets_slo")), "#a8a8a8"),
                   (MEETS, pts(lambda r: r.get("meets_slo")), "#4c78a8")] if with_slo
                  else [(EVERY, pts(lambda r: True), "#4c78a8")])
        chosen = ((top[key] * 1e3, top["output_tokens_per_s_per_gpu"], point_label(top))
                  if top is not None and top.get(key) else None)
        scatter_panel(fig, col, groups, chosen, f"chosen: {point_label(top)}" if top else "")
        slo_line(fig, col, slo, label.split()[0] + " SLO", vertical=True)
        fig.update_xaxes(type="log", title_text=f"{label} (log)", row=1, col=col)
        fig.update_yaxes(title_text="output tokens/s per GPU", rangemode="tozero", row=1,
                         col=col)
    return fig


def serve_load_figure(rows, tpot_slo_s: float | None, ttft_slo_s: float | None):
    """p99 TPOT and TTFT against the requests in flight, one line per layout; None where no
    layout was simulated at two loads or more."""
    import plotly.graph_objects as go
    by_layout: dict[str, list] = {}
    for r in rows:
        if r["fits"] and r.get("concurrency"):
            by_layout.setdefault(r["layout"], []).append(r)
    if not any(len(v) >= 2 for v in by_layout.values()):
        return None
    fig = _subplots(["TPOT p99 vs requests in flight", "TTFT p99 vs requests in flight"])
    for col, (key, label, slo) in enumerate((("tpot_p99_s", "TPOT p99 ms", tpot_slo_s),
                                             ("ttft_p99_s", "TTFT p99 ms", ttft_slo_s)), 1):
        for i, (layout, pts) in enumerate(by_layout.items()):
            pts = sorted((r for r in pts if r.get(key) is not None),
                         key=lambda r: r["concurrency"])
            fig.add_trace(go.Scatter(
                x=[r["concurrency"] for r in pts], y=[r[key] * 1e3 for r in pts],
                mode="lines+markers", name=esc(layout), legendgroup=layout,
                line=dict(color=PALETTE[i % len(PALETTE)]),
                showlegend=col == 1, hovertext=[point_label(r) for r in pts],
                hoverinfo="text+y"), row=1, col=col)
        slo_line(fig, col, slo, label.split()[0] + " SLO", vertical=False)
        fig.update_xaxes(type="log", title_text="requests in flight, deployment (log)", row=1,
                         col=col)
        fig.update_yaxes(type="log", title_text=f"{label} (log)", row=1, col=col)
    return fig


def serve_report(rows: list[dict[str, Any]], top: dict[str, Any] | None,
                 pareto_rows: list[dict[str, Any]], search: Mapping[str, Any],
                 args: Mapping[str, Any]) -> str:
    """The `plan serve --html` page: inputs, the chosen layout, the charts, the tables."""
    slo = search.get("tpot_slo_s") is not None or search.get("ttft_slo_s") is not None
    title = f"{search['model']} on {search['gpus']}x {search['hardware']}: serving plan"
    parts = [section("Inputs", inputs_table(serve_inputs(search, args))),
             section("Chosen layout", f"<p id=\"chosen\">{esc(best_summary(top, slo))}</p>",
                     statistics_table(top) if top else "")]
    if any(r["fits"] for r in rows):
        parts.append(section(
            "Throughput against latency", figure(serve_pareto_figure(
                rows, top, search.get("tpot_slo_s"), search.get("ttft_slo_s")), "pareto"),
            note="every layout and load point that fits (with SLOs: whether its p99 TTFT and "
                 "TPOT meet them); the front: no other point has both lower latency and more "
                 "tokens/s per GPU; the star: the chosen layout, the most steady-state tokens/s "
                 "per GPU that meets the SLOs"))
        load = serve_load_figure(rows, search.get("tpot_slo_s"), search.get("ttft_slo_s"))
        if load is not None:
            parts.append(section("Latency against load", figure(load, "load"),
                                 note="each layout at every load it was simulated at"))
    heads, cells, chosen = serve_layout_table(rows, top, slo)
    parts.append(section(
        "Layouts", table(heads, cells, "layouts", chosen) if cells else "<p>(no layout fits)</p>",
        note="memory per GPU; throughput of the deployment; requests simulated per replica"))
    rest = [r for r in rows if r["point"] == "workload" and not r["fits"]]
    if rest:
        parts.append(section("Not fitting or not valid", table(
            ["layout", "replicas", "reason"],
            [[r["layout"], r["replicas"], r["reason"]] for r in rest], "not-fitting")))
    if search.get("sweep"):
        parts.append(section(
            "Pareto front", table(column_heads(FRONT_COLUMNS, slo),
                                  [row_cells(r, FRONT_COLUMNS, slo) for r in pareto_rows],
                                  "front"),
            note="tokens/s/GPU against tokens/s/user, every point that fits"))
    return page(title, parts)


# ---- sweep -----------------------------------------------------------------------------------
def values_text(values: Sequence[Any]) -> str:
    """A grid axis in a few words: every value, or the first two, the last and the count."""
    vals = list(values)
    if len(vals) <= 6:
        return ", ".join(map(str, vals))
    return f"{vals[0]}, {vals[1]}, ..., {vals[-1]} ({len(vals):,} values)"


def space_description(path: str) -> str | None:
    """The `description` of a space file (the parsed Space keeps none); None where unreadable."""
    from perfmodel import yamlio
    try:
        raw = yamlio.load(path, "space file")
    except (InputError, OSError):
        return None
    text = raw.get("description") if isinstance(raw, dict) else None
    return None if text is None else str(text)


def sweep_inputs(space, args: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The inputs of a sweep: the file, level, description, each grid's axes, the flags."""
    items: list[tuple[str, Any]] = [("space file", space.file), ("level", space.level),
                                    ("points", f"{space.size:,}")]
    description = space_description(space.file)
    if description:
        items.append(("description", description))
    for g in space.grids:
        axes = "; ".join(f"{k}: {values_text(v)}" for k, v in zip(g.keys, g.values))
        items.append((f"grid {g.index} ({g.kind}, {g.size:,} points)", axes))
    items.append(("flags", flags(args) or "-"))
    return items


def gpus_of(row: Mapping[str, Any]) -> int:
    """The GPUs of a model point: replicas x tp x pp."""
    return (row.get("replicas") or 1) * (row.get("tp") or 1) * (row.get("pp") or 1)


def model_points(header: Sequence[str], rows: Sequence[tuple]) -> list[dict[str, Any]]:
    """The model rows of a sweep that have a time and a throughput, as dicts."""
    out = []
    for t in rows:
        r = dict(zip(header, t))
        if r.get("kind") == "model" and r.get("time_s") and r.get("tokens_per_s"):
            out.append(r)
    return out


SWEEP_PANELS = (("decode", "decode step = TPOT ms"), ("prefill", "prefill step = TTFT ms"))


def series_keys(points: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> list[str]:
    """The input columns (batch and phase aside) that vary among the points: a series' name."""
    return [c for c in columns if c not in ("batch", "phase")
            and len({p.get(c) for p in points}) > 1]


def sweep_label(row: Mapping[str, Any], columns: Sequence[str]) -> str:
    """A model point's hover label: model, GPU, phase, and the other inputs set."""
    return esc(", ".join(f"{c}={row[c]}" for c in columns if row.get(c) is not None))


def sweep_pareto_figure(points, columns: Sequence[str]):
    """tokens/s per GPU against the step time of every model point (decode: TPOT, prefill:
    TTFT), those that fit and not, the front of those that fit, the best that fits starred;
    None where the sweep has no decode or prefill point."""
    import plotly.graph_objects as go
    panels = [(phase, label) for phase, label in SWEEP_PANELS
              if any(p["phase"] == phase for p in points)]
    if not panels:
        return None
    fig = _subplots([f"{phase}: tokens/s/GPU vs step time" for phase, _ in panels])
    for col, (phase, label) in enumerate(panels, 1):
        mine = [p for p in points if p["phase"] == phase]
        pts = [(p["time_s"] * 1e3, p["tokens_per_s"] / gpus_of(p), sweep_label(p, columns))
               for p in mine if p.get("fits") is not False]
        best = max(pts, key=lambda p: p[1], default=None)
        scatter_panel(fig, col, [(EVERY, pts, "#4c78a8")], best, "best tokens/s/GPU that fits")
        over = [p for p in mine if p.get("fits") is False]
        if over:
            fig.add_trace(go.Scatter(
                x=[p["time_s"] * 1e3 for p in over],
                y=[p["tokens_per_s"] / gpus_of(p) for p in over], mode="markers",
                name="does not fit in memory", legendgroup="over",
                hovertext=[sweep_label(p, columns) for p in over], hoverinfo="text+x+y",
                marker=dict(symbol="x", size=8, color="#9d9d9d")), row=1, col=col)
        fig.update_xaxes(type="log", title_text=f"{label} (log)", row=1, col=col)
        fig.update_yaxes(title_text="tokens/s per GPU", rangemode="tozero", row=1, col=col)
    return fig


def sweep_load_figure(points, columns: Sequence[str]):
    """Step time against batch, one line per series of the other inputs; None where no series
    has two batches."""
    import plotly.graph_objects as go
    keys = series_keys(points, columns)
    panels = []
    for phase, label in SWEEP_PANELS:
        series: dict[tuple, list] = {}
        for p in points:
            if p["phase"] == phase and p.get("batch") is not None:
                series.setdefault(tuple(p.get(k) for k in keys), []).append(p)
        series = {k: v for k, v in series.items() if len({p["batch"] for p in v}) >= 2}
        if series:
            panels.append((phase, label, series))
    if not panels:
        return None
    fig = _subplots([f"{phase}: step time vs batch" for phase, _, _ in panels])
    colours: dict[tuple, str] = {}
    for col, (phase, label, series) in enumerate(panels, 1):
        for key, pts in series.items():
            pts = sorted(pts, key=lambda p: p["batch"])
            name = ", ".join(f"{k}={v}" for k, v in zip(keys, key)) or "all points"
            first = key not in colours
            colour = colours.setdefault(key, PALETTE[len(colours) % len(PALETTE)])
            fig.add_trace(go.Scatter(
                x=[p["batch"] for p in pts], y=[p["time_s"] * 1e3 for p in pts],
                mode="lines+markers", name=esc(name), legendgroup=name, showlegend=first,
                line=dict(color=colour), hovertext=[sweep_label(p, columns) for p in pts],
                hoverinfo="text+x+y"), row=1, col=col)
        fig.update_xaxes(type="log", title_text="batch (log)", row=1, col=col)
        fig.update_yaxes(type="log", title_text=f"{label} (log)", row=1, col=col)
    return fig


def sweep_report(space, rows: Sequence[tuple], args: Mapping[str, Any]) -> str:
    """The `sweep --html` page: inputs, charts of the model points, every row."""
    header = list(space.header)
    columns = list(space.columns)
    points = model_points(header, rows)
    parts = [section("Inputs", inputs_table(sweep_inputs(space, args)))]
    pareto = sweep_pareto_figure(points, columns) if points else None
    if pareto is not None:
        parts.append(section(
            "Throughput against latency", figure(pareto, "pareto"),
            note="each model point's tokens/s per GPU against its step time (one GPU's "
                 "predicted step); the front: no other point that fits has both a shorter step "
                 "and more tokens/s per GPU; the star: the most tokens/s per GPU that fits"))
        load = sweep_load_figure(points, columns)
        if load is not None:
            parts.append(section("Latency against load", figure(load, "load"),
                                 note="step time against batch, the other inputs fixed"))
    else:
        parts.append(section("Charts", "<p>(no decode or prefill model point: no charts)</p>"))
    parts.append(section("Rows", table(header, [[cell(v) for v in r] for r in rows], "rows"),
                         note="the sweep's table, one row per point (floats to 6 digits)"))
    name = space.file.replace("\\", "/").rsplit("/", 1)[-1]
    return page(f"sweep {name}: {space.size:,} points", parts)

