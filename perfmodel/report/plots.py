"""Figures for a scheduled graph: time breakdown, stream timeline, roofline.

Every plot takes a `Prediction` (from `perfmodel.schedule.schedule`) and an optional matplotlib
Axes; with no Axes it makes its own Figure. Figures are built with `matplotlib.figure.Figure`
rather than pyplot, so this module never touches the global backend: it works headless (saving
PNGs through Agg) and still displays inline in a notebook. Times are shown in ms, or µs when the
makespan is under 1 ms; the roofline is in FLOP/byte and FLOP/s.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from perfmodel.report.tables import role_of
from perfmodel.schedule import Prediction, ScheduledOp

# One color per resource family, so "what binds" reads the same in every panel.
FAMILY_COLORS = {
    "tensor": "#4c72b0",
    "hbm": "#dd8452",
    "l2": "#c44e52",
    "smem": "#8172b3",
    "pipes": "#55a868",        # CUDA-core pipes and issue slots
    "link": "#937860",
    "latency/launch": "#8c8c8c",
    "other": "#cccccc",
}
_PIPES = {"fma", "fma_heavy", "alu", "xu", "fp64", "lsu", "issue"}
_ANNOTATE = 5  # roofline points labelled with their name (largest stand-alone time first)


def family(bound: str) -> str:
    """Resource family of a bound ("tensor:bf16" -> "tensor", "fma_heavy" -> "pipes")."""
    if bound.startswith("tensor:"):
        return "tensor"
    if bound.startswith("link:"):
        return "link"
    if bound in _PIPES:
        return "pipes"
    if bound in ("latency", "launch"):
        return "latency/launch"
    return bound if bound in FAMILY_COLORS else "other"


def group_name(op: ScheduledOp) -> str:
    """Op name without its layer index, so every layer's copy of an op falls in one group."""
    return role_of(op.name, op.op.name)


def _groups(ops: list[ScheduledOp]) -> dict[str, list[ScheduledOp]]:
    out: dict[str, list[ScheduledOp]] = defaultdict(list)
    for o in ops:
        out[group_name(o)].append(o)
    return out


def _dominant_family(ops: list[ScheduledOp], standalone: bool = False) -> str:
    """Family that binds the most of these ops' time."""
    t: dict[str, float] = defaultdict(float)
    for o in ops:
        t[family(o.estimate.bound)] += o.estimate.time_s if standalone else o.time_s
    return max(t, key=t.get)


def _time_unit(total_s: float) -> tuple[float, str]:
    """Scale factor from seconds and its label: ms, or µs below 1 ms."""
    return (1e3, "ms") if total_s >= 1e-3 else (1e6, "µs")


def axes_or_new(ax: Axes | None, size: tuple[float, float]) -> Axes:
    """The given Axes, or one on a new pyplot-free Figure (headless, inline in notebooks)."""
    return ax if ax is not None else Figure(figsize=size).add_subplot()


def _family_legend(ax: Axes, families, **kw) -> None:
    handles = [Patch(color=FAMILY_COLORS[f], label=f) for f in FAMILY_COLORS if f in families]
    ax.legend(handles=handles, title="bound", fontsize="small", **kw)


def plot_breakdown(pred: Prediction, ax: Axes | None = None, top: int = 15) -> Figure:
    """Horizontal bars: scheduled time (ms or µs) summed per op group, top `top` plus "other".

    Bar color is the resource family binding most of the group's time.
    """
    ax = axes_or_new(ax, (9, 0.35 * min(top + 1, 40) + 1.5))
    groups = sorted(_groups(pred.ops).items(), key=lambda kv: -sum(o.time_s for o in kv[1]))
    shown = groups[:top]
    rest = [o for _, ops in groups[top:] for o in ops]
    if rest:
        shown.append(("other", rest))
    scale, unit = _time_unit(pred.total_time_s)
    names = [name for name, _ in shown][::-1]  # largest at the top
    values = [sum(o.time_s for o in ops) * scale for _, ops in shown][::-1]
    fams = [_dominant_family(ops) for _, ops in shown][::-1]
    ax.barh(range(len(names)), values, color=[FAMILY_COLORS[f] for f in fams])
    ax.set_yticks(range(len(names)), names, fontsize="small")
    ax.set_xlabel(f"scheduled time summed over ops ({unit})")
    ax.set_title(f"{pred.graph} on {pred.hardware.name}: "
                 f"{pred.total_time_s * scale:.4g} {unit} total")
    _family_legend(ax, set(fams), loc="lower right")
    return ax.figure


def _streams(pred: Prediction) -> list[str]:
    """Stream names in order of first appearance."""
    return list(dict.fromkeys(o.stream for o in pred.ops))


def plot_timeline(pred: Prediction, ax: Axes | None = None, max_ops: int = 2000) -> Figure:
    """Gantt chart: one row per stream, each op from start to end (ms or µs), colored by bound.

    Ops on the critical path get a black edge. Above `max_ops` ops, bars are drawn as one
    `broken_barh` collection per stream and family, which is much faster, and the critical path
    is a thin black strip along the bottom of its bars.
    """
    streams = _streams(pred)
    ax = axes_or_new(ax, (11, 0.6 * len(streams) + 1.8))
    row = {s: i for i, s in enumerate(streams)}
    scale, unit = _time_unit(pred.total_time_s)
    fams = {family(o.estimate.bound) for o in pred.ops}
    marker = "black edge"
    if len(pred.ops) <= max_ops:
        ax.barh([row[o.stream] for o in pred.ops], [o.time_s * scale for o in pred.ops],
                left=[o.start_s * scale for o in pred.ops], height=0.7,
                color=[FAMILY_COLORS[family(o.estimate.bound)] for o in pred.ops],
                edgecolor=["black" if o.critical else "none" for o in pred.ops], linewidth=0.8)
    else:
        # thousands of thin bars would be all edge, so the critical path becomes a black strip
        # along the bottom of its bars instead
        marker = "black strip"
        spans: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
        for o in pred.ops:
            span = (o.start_s * scale, o.time_s * scale)
            spans[(o.stream, family(o.estimate.bound))].append(span)
            if o.critical:
                spans[(o.stream, "critical")].append(span)
        for (stream, fam), xs in spans.items():
            crit = fam == "critical"
            ax.broken_barh(xs, (row[stream] + (0.25 if crit else -0.35), 0.1 if crit else 0.7),
                           facecolors="black" if crit else FAMILY_COLORS[fam])
    ax.set_yticks(range(len(streams)), streams)
    ax.set_ylim(len(streams) - 0.5, -0.5)  # first stream on top
    ax.set_xlim(0, max(pred.total_time_s * scale, 1e-12))
    ax.set_xlabel(f"time ({unit}); {marker} = critical path")
    ax.set_title(f"{pred.graph} timeline: makespan {pred.total_time_s * scale:.4g} {unit}")
    # outside the axes: inside, the legend would cover the bars of the first stream
    _family_legend(ax, fams, loc="upper left", bbox_to_anchor=(1.005, 1.0))
    return ax.figure


def _main_tensor_dtype(pred: Prediction) -> str:
    """Tensor dtype with the most tensor-pipe time in the graph ("bf16" if none is used)."""
    t: dict[str, float] = defaultdict(float)
    for o in pred.ops:
        for r, s in o.estimate.resource_time_s.items():
            if r.startswith("tensor:"):
                t[r.split(":", 1)[1]] += s
    return max(t, key=t.get) if t else "bf16"


def plot_roofline(pred: Prediction, ax: Axes | None = None, dtype: str | None = None) -> Figure:
    """Log-log roofline of `pred.hardware`: FLOP/byte (x) against achieved FLOP/s (y).

    Ceilings: HBM peak bandwidth (diagonal), the tensor peak of `dtype` (default: the graph's
    main tensor dtype) and the FP32 FMA-pipe peak. One point per op group (as in
    `plot_breakdown`), from its stand-alone estimates: total FLOP / total HBM bytes against total
    FLOP / total stand-alone time. Ops with no FLOP or no HBM bytes have no place here.
    """
    ax = axes_or_new(ax, (8, 6))
    hw = pred.hardware
    dtype = dtype or _main_tensor_dtype(pred)
    bw = hw.hbm_peak_bandwidth_bytes_per_s
    ceilings = [(f"FP32 FMA {2 * hw.pipe_peak_per_s('fma') / 1e12:.3g} TFLOP/s",
                 2 * hw.pipe_peak_per_s("fma"), "--")]
    if hw.supports(dtype):
        peak = hw.tensor_peak_flop_per_s(dtype)
        ceilings.insert(0, (f"tensor {dtype} {peak / 1e12:.4g} TFLOP/s", peak, "-"))

    points = []  # (name, intensity FLOP/B, FLOP/s, stand-alone s, family)
    for name, ops in _groups(pred.ops).items():
        ops = [o for o in ops if o.estimate.flop > 0 and o.estimate.hbm_bytes > 0]
        if not ops:
            continue
        flop = sum(o.estimate.flop for o in ops)
        t = sum(o.estimate.time_s for o in ops)
        points.append((name, flop / sum(o.estimate.hbm_bytes for o in ops), flop / t, t,
                       _dominant_family(ops, standalone=True)))

    # x range: cover every point and every ridge point, with a decade of margin
    ridges = [p / bw for _, p, _ in ceilings]
    xs = [p[1] for p in points] + ridges
    lo, hi = min(xs + [1.0]) / 10, max(xs) * 10
    ax.loglog([lo, hi], [bw * lo, bw * hi], color="black", lw=0.8, ls=":",
              label=f"HBM {bw / 1e12:.3g} TB/s")
    for label, peak, ls in ceilings:
        # the roof: bandwidth-bound left of the ridge point, compute-bound right of it
        ax.loglog([lo, peak / bw, hi], [bw * lo, peak, peak], color="black", ls=ls, lw=1.2,
                  label=label)
    for name, x, y, _, fam in points:
        ax.scatter(x, y, color=FAMILY_COLORS[fam], edgecolor="black", linewidth=0.5, zorder=3)
    # layers of one model sit close together: stagger the labels and point at the marker
    for i, (name, x, y, _, _) in enumerate(sorted(points, key=lambda p: -p[3])[:_ANNOTATE]):
        ax.annotate(name, (x, y), xytext=(8, -14 - 11 * i), textcoords="offset points",
                    fontsize="small", arrowprops={"arrowstyle": "-", "lw": 0.5})
    ax.set_xlim(lo, hi)
    top = max(p for _, p, _ in ceilings)
    ax.set_ylim(min([bw * lo] + [p[2] for p in points]) / 2, top * 3)
    ax.set_xlabel("arithmetic intensity (FLOP / HBM byte)")
    ax.set_ylabel("achieved FLOP/s (stand-alone)")
    ax.set_title(f"roofline: {pred.graph} on {hw.name}")
    ax.grid(True, which="major", alpha=0.3)
    handles, _ = ax.get_legend_handles_labels()
    handles += [Patch(color=FAMILY_COLORS[f], label=f"bound: {f}") for f in FAMILY_COLORS
                if f in {p[4] for p in points}]
    ax.legend(handles=handles, fontsize="small", loc="lower right")
    return ax.figure


def save(fig: Figure, path: str | Path) -> None:
    """Write `fig` to `path` (format from the suffix) at 120 dpi, trimmed to its content."""
    fig.savefig(path, dpi=120, bbox_inches="tight")


def plot_prediction(pred: Prediction, path: str | Path) -> Figure:
    """Breakdown, timeline and roofline stacked in one figure, saved to `path`."""
    bars = min(len(_groups(pred.ops)), 16)  # breakdown rows: top 15 plus "other"
    heights = [0.35 * bars + 1.5, 0.5 * len(_streams(pred)) + 1.5, 6]
    fig = Figure(figsize=(11, sum(heights) + 1), layout="constrained")
    axes = fig.subplots(3, 1, height_ratios=heights)
    plot_breakdown(pred, axes[0])
    plot_timeline(pred, axes[1])
    plot_roofline(pred, axes[2])
    save(fig, path)
    return fig
