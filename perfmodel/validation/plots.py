"""Figures of measured vs predicted: small multiples per op class with a roofline per GPU
(`plot_validation`, what `perfmodel validate --plot` draws), one log-log scatter, and attention
TFLOPS curves.

Functions take an optional matplotlib Axes and return the Figure (built without pyplot, so they
work headless and inline in notebooks).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator

from perfmodel.report.plots import axes_or_new

from perfmodel.validation.compare import Comparison

# The error bands drawn around predicted = measured: (factor, line style, label)
BANDS = ((1.10, ":", "±10 %"), (1.25, "--", "±25 %"))
# roofline markers by kind of op (op class prefix → marker, legend text)
KINDS = (("linear", "o", "GEMM / linear"), ("gemm", "o", "GEMM / linear"),
         ("grouped_gemm", "o", "GEMM / linear"), ("attention", "^", "attention"),
         ("mla", "^", "attention"), ("moe", "s", "MoE experts"))
OTHER_KIND = ("D", "norm, softmax, quantize, ...")
MAX_PX = 2400  # the figure's largest side in pixels at its dpi
# plot_validation's fixed layout, in inches: room for a panel's y tick labels and label beside
# it (wgap), its title above and x tick labels and label below (hgap), the suptitle (top), the
# last row's x labels and the legend's rows (bottom: LEGEND_ROW_IN each) at 7-8 pt text
LEGEND_ROW_IN = 0.24
LEGEND_PAD_IN = 0.08


@dataclass(frozen=True)
class Margins:
    """plot_validation's margins and gaps in inches (above); the bottom grows with the legend's
    rows."""

    legend_rows: int
    left: float = 0.62
    right: float = 0.2
    wgap: float = 0.62
    hgap: float = 0.62
    top: float = 0.5

    @property
    def bottom(self) -> float:
        return 0.5 + LEGEND_PAD_IN + self.legend_rows * LEGEND_ROW_IN


def _legend_columns(width_in: float) -> int:
    """Legend entries per row: about 2.1 inches each, so the legend never runs past the
    figure's sides."""
    return max(1, min(7, int(width_in / 2.1)))


def _kind(op_class: str) -> tuple[str, str]:
    for prefix, marker, text in KINDS:
        if op_class.startswith(prefix):
            return marker, text
    return OTHER_KIND


def _unit(hi_s: float) -> tuple[float, str]:
    """Scale from seconds and unit label that keep the largest time under 10,000."""
    for scale, unit in ((1e6, "µs"), (1e3, "ms"), (1.0, "s")):
        if hi_s * scale < 1e4:
            return scale, unit
    return 1.0, "s"


def _log_ticks(axis, lo: float, hi: float, most: int = 4) -> None:
    """At most about `most` labelled ticks between lo and hi on a log axis, written as plain
    numbers ("0.2", "50", "1e+04"), so that neighbouring labels never overlap; unlabelled minor
    ticks at every 2..9 of each decade on a short axis (two decades at most), at 2 and 5 on a
    longer one (where 2..9 crowd the axis; each tick is an object matplotlib builds and draws)."""
    decades = math.log10(hi / lo)
    for subs in ((1.0, 2.0, 5.0), (1.0, 3.0), (1.0,)):
        ticks = [m * 10.0 ** e for e in range(math.floor(math.log10(lo)) - 1,
                                              math.ceil(math.log10(hi)) + 1)
                 for m in subs if lo <= m * 10.0 ** e <= hi]
        if len(ticks) <= most:
            break
    else:  # many decades: every k-th decade
        k = math.ceil(decades / most)
        ticks = [10.0 ** e for e in range(math.ceil(math.log10(lo)), math.floor(math.log10(hi))
                                          + 1) if e % k == 0]
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(FuncFormatter(_number))
    subs = tuple(range(2, 10)) if decades <= 2 else (2.0, 5.0)
    axis.set_minor_locator(NullLocator() if decades > 6 else
                           _InViewLogLocator(subs=subs, numticks=50))
    axis.set_minor_formatter(NullFormatter())


class _InViewLogLocator(matplotlib.ticker.LogLocator):
    """LogLocator's ticks, less those outside the axis's view: LogLocator lists every tick of
    each decade the view touches, and matplotlib builds a Tick (three lines, two texts) for each
    but draws only those inside, so the ones outside cost time and no pixel (in validate --plot,
    460 of its 1350 ticks; building ticks is a third of its drawing). The 1e-6 margin keeps every
    tick that matplotlib's own test (in view within 1e-10 of the log interval) draws."""

    def __call__(self):
        locs = np.asarray(super().__call__())
        lo, hi = sorted(self.axis.get_view_interval())
        return locs[(locs >= lo * (1 - 1e-6)) & (locs <= hi * (1 + 1e-6))]


def _number(v: float, _pos=None) -> str:
    """A tick value as a short plain number: 0.05, 20, 5000, 1e+05."""
    return f"{v:g}" if 1e-3 <= v < 1e5 else f"{v:.0e}"


def _diagonal(ax: Axes, lo: float, hi: float, band_labels: bool = True) -> None:
    """predicted = measured and the ±BANDS lines, each band labelled at its lower-right end."""
    xs = [lo, hi]
    ax.plot(xs, xs, color="black", lw=0.9, zorder=1)
    for f, style, text in BANDS:
        ax.plot(xs, [x * f for x in xs], style, color="grey", lw=0.8, zorder=1)
        ax.plot(xs, [x / f for x in xs], style, color="grey", lw=0.8, zorder=1)
    if band_labels:
        f, _, text = BANDS[-1]
        ax.text(hi / 1.03, hi / f / 1.06, text, ha="right", va="top", fontsize=6.5,
                color="dimgrey")


def _scatter_panel(ax: Axes, comps: list[Comparison], color_of, marker: str = "o",
                   title: str = "", label_of=None, size: float = 16) -> None:
    """predicted against measured of `comps` on log-log axes with equal, square limits: judged
    rows filled, fitted rows hollow, coloured by `color_of(comp)`."""
    hi_s = max(max(c.case.measured_time_s, c.predicted_time_s) for c in comps)
    lo_s = min(min(c.case.measured_time_s, c.predicted_time_s) for c in comps)
    scale, unit = _unit(hi_s)
    lo, hi = lo_s * scale / 1.35, hi_s * scale * 1.35
    if hi / lo < 4:  # at least a factor of 4 across, so the ±25 % band has room
        mid = math.sqrt(lo * hi)
        lo, hi = mid / 2, mid * 2
    # scales and limits first: the lines and points added next then need no autoscaling
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    _diagonal(ax, lo, hi)
    groups: dict = {}
    for c in comps:
        groups.setdefault(color_of(c), []).append(c)
    for color, cs in groups.items():
        judged = [c for c in cs if not c.case.fitted]
        fitted = [c for c in cs if c.case.fitted]
        label = label_of(cs) if label_of else None
        for rows, filled in ((judged, True), (fitted, False)):
            if rows:
                ax.scatter([c.case.measured_time_s * scale for c in rows],
                           [c.predicted_time_s * scale for c in rows], s=size if filled else
                           size * 1.5, marker=marker, linewidths=0.3 if filled else 0.8,
                           facecolors=color if filled else "none",
                           edgecolors="white" if filled else color, zorder=2, label=label)
                label = None
    ax.set_aspect("equal", adjustable="box")
    _log_ticks(ax.xaxis, lo, hi)
    _log_ticks(ax.yaxis, lo, hi)
    ax.tick_params(labelsize=7)
    ax.set_xlabel(f"measured ({unit})", fontsize=7, labelpad=1)
    ax.set_ylabel(f"predicted ({unit})", fontsize=7, labelpad=1)
    ax.grid(alpha=0.25, lw=0.5)
    if title:
        ax.set_title(title, fontsize=7.5, y=1.0)  # a fixed y: no search for a top x axis


def _mape(comps: list[Comparison]) -> str:
    judged = [abs(c.error) for c in comps if not c.case.fitted]
    return f", MAPE {sum(judged) / len(judged):.0%}" if judged else ", all fitted"


def plot_predicted_vs_measured(comps: list[Comparison], ax: Axes | None = None,
                               by: str = "op_class") -> Figure:
    """Every row as a point (measured time, predicted time), log-log, with the ±10 % and ±25 %
    bands; coloured by `by` (an attribute of the case, or "hardware"), fitted rows hollow, the
    legend right of the axes."""
    ax = axes_or_new(ax, (7.5, 5.0))

    def key(c):
        return c.case.hardware.name if by == "hardware" else str(getattr(c.case, by))
    names = sorted({key(c) for c in comps})
    cmap = matplotlib.colormaps["tab10" if len(names) <= 10 else "tab20"]
    color = {n: cmap(i % cmap.N) for i, n in enumerate(names)}
    _scatter_panel(ax, comps, lambda c: color[key(c)], size=20,
                   label_of=lambda cs: f"{key(cs[0])} (n={len(cs)})")
    ax.tick_params(labelsize=8)
    ax.set_title(f"predicted vs measured ({', '.join(t for _, _, t in BANDS)} bands; hollow: "
                 f"fitted rows)", fontsize=9)
    handles, labels = ax.get_legend_handles_labels()
    handles += [Line2D([], [], color="grey", ls=st, lw=0.8, label=t) for _, st, t in BANDS]
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0),
              borderaxespad=0.0)
    return ax.figure


def _roofline_panel(ax: Axes, comps: list[Comparison], color, level: str = "pipes") -> int:
    """Measured FLOP/s against arithmetic intensity (FLOP per HBM byte) of the rows of one GPU
    that have both, under its HBM roof, its tensor peaks of the dtypes measured and its FP32 FMA
    peak; returns the number of points."""
    hw = comps[0].case.hardware
    pts, dtypes = [], {}
    for c in comps:
        d = _resolved(c, hw, level)
        flop, nbytes = d.flop * d.repeat, d.hbm_bytes * d.repeat
        if flop <= 0 or nbytes <= 0:
            continue
        tensor = {k.split(":", 1)[1]: w for k, w in d.work.items() if k.startswith("tensor:")}
        if tensor:
            dt = max(tensor, key=tensor.get)
            dtypes[dt] = dtypes.get(dt, 0) + 1
        pts.append((flop / nbytes, flop / c.case.measured_time_s, _kind(c.case.op_class)[0],
                    bool(c.case.fitted)))
    if not pts:
        return 0
    bw = hw.hbm_peak_bandwidth_bytes_per_s
    roofs = [(f"FP32 FMA {_si(2 * hw.pipe_peak_per_s('fma'))}", 2 * hw.pipe_peak_per_s("fma"),
              "--")]
    peaks: dict[float, list[str]] = {}  # dtypes with the same peak share one roof
    for dt in sorted(dtypes):
        if hw.supports(dt):
            peaks.setdefault(hw.tensor_peak_flop_per_s(dt), []).append(dt)
    roofs += [(f"{'/'.join(dts)} {_si(peak)}", peak, "-") for peak, dts in peaks.items()]
    xs = [p[0] for p in pts] + [peak / bw for _, peak, _ in roofs]
    lo, hi = min(xs) / 4, max(xs) * 4
    top = max(peak for _, peak, _ in roofs)
    ax.loglog([lo, hi], [bw * lo, bw * hi], ":", color="black", lw=0.7)
    for text, peak, style in roofs:
        ax.plot([peak / bw, hi], [peak, peak], style, color="black", lw=0.9)
        ax.text(hi / 1.1, peak * 1.08, text, ha="right", va="bottom", fontsize=6, zorder=3,
                bbox={"facecolor": "white", "alpha": 0.8, "pad": 0.5, "edgecolor": "none"})
    for marker in dict.fromkeys(p[2] for p in pts):
        for fitted in (False, True):
            sel = [p for p in pts if p[2] == marker and p[3] == fitted]
            if sel:
                ax.scatter([p[0] for p in sel], [p[1] for p in sel], marker=marker,
                           s=16 if not fitted else 24, linewidths=0.3 if not fitted else 0.8,
                           facecolors="none" if fitted else color,
                           edgecolors=color if fitted else "white", zorder=2)
    ylo = min([p[1] for p in pts] + [bw * lo]) / 2
    ax.set_xlim(lo, hi)
    ax.set_ylim(ylo, top * 4)
    _log_ticks(ax.xaxis, lo, hi)
    _log_ticks(ax.yaxis, ylo, top * 4)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: _si(v)))
    ax.tick_params(labelsize=7)
    ax.set_xlabel("FLOP / HBM byte", fontsize=7, labelpad=1)
    ax.set_ylabel("measured FLOP/s", fontsize=7, labelpad=1)
    ax.grid(alpha=0.25, lw=0.5)
    ax.set_title(f"roofline {hw.name} (HBM {bw / 1e12:.3g} TB/s; {len(pts)} rows)",
                 fontsize=7.5, y=1.0)
    return len(pts)


def _resolved(c: Comparison, hw, level: str):
    """The demand of `c`'s op that runs on `hw` at `level`: the one compare() resolved, when it
    was for this very GPU object and level (a resolved demand depends on nothing but the op,
    the GPU and the level, and resolving is deterministic, so it is the same Demand), else
    resolved again (a Comparison built by hand, or plotted at another level)."""
    if c.demand is not None and c.level == level and c.case.hardware is hw:
        return c.demand
    from perfmodel.engine import resolve
    return resolve(c.case.op.demand(hw), hw, level)


def _si(v: float) -> str:
    for div, suffix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if v >= div:
            return f"{v / div:.3g}{suffix}"
    return f"{v:.3g}"


def plot_validation(comps: list[Comparison], path: str | Path | None = None,
                    level: str = "pipes", dpi: int = 100) -> Figure:
    """Small multiples: one predicted-vs-measured panel per op class (log-log, equal axes, the
    ±10 % and ±25 % bands, titled with the class, its rows and their MAPE), then one roofline
    panel per GPU with the measured points that have FLOP and HBM bytes (`_roofline_panel`).
    Colours are GPUs throughout; markers the kind of op; fitted rows hollow. One legend, below
    the grid. The grid has as many columns as make it about square, and the panel size keeps
    the figure within MAX_PX pixels a side at `dpi`. Saved to `path` when given."""
    if not comps:
        fig = Figure(figsize=(4, 1.5), dpi=dpi)
        fig.text(0.5, 0.5, "no measured rows to compare", ha="center", va="center")
        if path is not None:
            fig.savefig(path, dpi=dpi)
        return fig
    by_class: dict[str, list[Comparison]] = {}  # one pass over the rows, each in row order
    by_gpu: dict[str, list[Comparison]] = {}
    for c in comps:
        by_class.setdefault(c.case.op_class, []).append(c)
        by_gpu.setdefault(c.case.hardware.name, []).append(c)
    classes, gpus = sorted(by_class), sorted(by_gpu)
    cmap = matplotlib.colormaps["tab10" if len(gpus) <= 10 else "tab20"]
    color = {g: cmap(i % cmap.N) for i, g in enumerate(gpus)}
    n = len(classes) + len(gpus)
    cols = max(1, min(8, math.ceil(math.sqrt(n * 1.1))))
    rows = math.ceil(len(classes) / cols) + math.ceil(len(gpus) / cols)
    handles = [Line2D([], [], color="black", lw=0.9, label="predicted = measured")]
    handles += [Line2D([], [], color="grey", ls=st, lw=0.8, label=t) for _, st, t in BANDS]
    handles += [Line2D([], [], ls="", marker="o", color=color[g], label=g) for g in gpus]
    handles.append(Line2D([], [], ls="", marker="o", markerfacecolor="none",
                          markeredgecolor="black", label="fitted row (hollow)"))
    kinds = dict.fromkeys([_kind(c)[::-1] for c in classes])
    handles += [Line2D([], [], ls="", marker=mk, color="dimgrey", label=t) for t, mk in kinds]
    handles += [Line2D([], [], color="black", ls=":", lw=0.7, label="roof: HBM bandwidth"),
                Line2D([], [], color="black", ls="-", lw=0.9, label="roof: tensor peak (dtype)"),
                Line2D([], [], color="black", ls="--", lw=0.9, label="roof: FP32 FMA peak")]
    # the legend's rows at the width the grid would have at the largest panel
    m0 = Margins(0)
    widest = min(MAX_PX / dpi, m0.left + m0.right + cols * 3.3 + (cols - 1) * m0.wgap)
    per_row = _legend_columns(widest)
    m = Margins(math.ceil(len(handles) / per_row))
    side = min(3.3, (MAX_PX / dpi - m.left - m.right - (cols - 1) * m.wgap) / cols,
               (MAX_PX / dpi - m.top - m.bottom - (rows - 1) * m.hgap) / rows)
    width = m.left + m.right + cols * side + (cols - 1) * m.wgap
    per_row = min(per_row, _legend_columns(width))
    m = Margins(math.ceil(len(handles) / per_row))
    height = m.top + m.bottom + rows * side + (rows - 1) * m.hgap
    # a fixed layout: every panel is the same size with room for its own labels, so the
    # margins are known in inches (matplotlib's constrained layout measured every tick label
    # of every panel twice, two thirds of the figure's time)
    fig = Figure(figsize=(width, height), dpi=dpi)
    grid = fig.add_gridspec(rows, cols, left=m.left / width, right=1 - m.right / width,
                            bottom=m.bottom / height, top=1 - m.top / height,
                            wspace=m.wgap / side, hspace=m.hgap / side)
    for i, cls in enumerate(classes):
        ax = fig.add_subplot(grid[i // cols, i % cols])
        cs = by_class[cls]
        _scatter_panel(ax, cs, lambda c: color[c.case.hardware.name], _kind(cls)[0],
                       title=f"{cls}: n={len(cs)}{_mape(cs)}")
    first = math.ceil(len(classes) / cols)
    for i, g in enumerate(gpus):
        ax = fig.add_subplot(grid[first + i // cols, i % cols])
        if not _roofline_panel(ax, by_gpu[g], color[g], level):
            ax.set_axis_off()
            ax.set_title(f"roofline {g}: no row with FLOP and HBM bytes", fontsize=7.5)
    fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, LEGEND_PAD_IN / height),
               ncols=min(len(handles), per_row), fontsize=8, frameon=False)
    fig.suptitle(f"perfmodel validate ({level}): predicted vs measured per op class, "
                 f"{len(comps)} rows; colour = GPU", fontsize=10, y=1 - 0.12 / height, va="top")
    if path is not None:
        fig.savefig(path, dpi=dpi)
    return fig


def plot_tflops_curves(comps: list[Comparison], ax: Axes | None = None,
                       title: str = "") -> Figure:
    """Attention TFLOPS (FlashAttention FLOP convention) against sequence length: measured as
    markers, predicted as lines, one colour per kernel family."""
    ax = axes_or_new(ax, (6.0, 4.0))
    fams: dict[str, list[Comparison]] = {}
    for c in comps:
        fams.setdefault(c.case.op.kernel or "default", []).append(c)
    for i, (fam, cs) in enumerate(sorted(fams.items())):
        cs = sorted(cs, key=lambda c: c.case.op.seq_q)
        seq = [c.case.op.seq_q for c in cs]
        flop = [_fa_flop(c) for c in cs]
        ax.plot(seq, [f / c.case.measured_time_s / 1e12 for f, c in zip(flop, cs)], "o",
                color=f"C{i}", label=f"{fam} measured")
        ax.plot(seq, [f / c.predicted_time_s / 1e12 for f, c in zip(flop, cs)], "-",
                color=f"C{i}", label=f"{fam} predicted")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length")
    ax.set_ylabel("TFLOPS")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return ax.figure


def _fa_flop(c: Comparison) -> float:
    """FlashAttention convention: 4·B·H·S²·D forward, ×0.5 causal, bwd 2.5×, fwd+bwd 3.5×."""
    o = c.case.op
    f = 4.0 * o.batch * o.heads * o.seq_q * (o.seq_kv or o.seq_q) * o.head_dim
    f *= 0.5 if o.causal else 1.0
    return f * {"fwd": 1.0, "bwd": 2.5, "fwd+bwd": 3.5}[o.direction]
