"""Figures for capacity planning: a serving plan's batch sweep, TPOT/throughput Pareto fronts
and a `plan serve` search's latency against throughput with its SLOs and chosen layout.

Each takes an optional matplotlib Axes and returns the Figure (built without pyplot, so it works
headless and inline in notebooks). Times in ms; throughput in output tokens/s per GPU.
"""
from __future__ import annotations

import math
from typing import Any

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, NullFormatter

from perfmodel.report.plots import axes_or_new


def plot_serving_plan(plan, ax: Axes | None = None) -> Figure:
    """TPOT and throughput per GPU against batch; the SLO, the memory limit and the chosen batch
    are marked."""
    ax = axes_or_new(ax, (7.0, 4.2))
    fits = [p for p in plan.points if p.memory.fits]
    over = [p for p in plan.points if not p.memory.fits]
    ax.plot([p.batch for p in fits], [p.tpot_s * 1e3 for p in fits], "o-", color="#4c72b0",
            label="TPOT (fits in HBM)")
    if over:
        ax.plot([p.batch for p in over], [p.tpot_s * 1e3 for p in over], "x", color="#c44e52",
                label="TPOT (exceeds HBM)")
    if plan.tpot_slo_s:
        ax.axhline(plan.tpot_slo_s * 1e3, ls="--", color="#c44e52", lw=1, label="TPOT SLO")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch (sequences decoding together)")
    ax.set_ylabel("TPOT [ms]")
    twin = ax.twinx()
    twin.plot([p.batch for p in plan.points], [p.tokens_per_s_per_gpu for p in plan.points],
              "s:", color="#55a868", label="tokens/s/GPU")
    twin.set_ylabel("output tokens/s per GPU")
    best = plan.best
    if best:
        ax.axvline(best.batch, color="#8c8c8c", lw=1)
        ax.annotate(f"best: batch {best.batch}\n{best.tokens_per_s_per_gpu:.0f} tok/s/GPU",
                    (best.batch, best.tpot_s * 1e3), textcoords="offset points", xytext=(6, 8),
                    fontsize=8)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = twin.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=8, loc="upper left")
    ax.set_title(f"{plan.model} on {plan.gpus_per_replica}x {plan.hardware} "
                 f"(TP{plan.tp}{f' EP{plan.ep}' if plan.ep > 1 else ''}, {plan.dtype}, "
                 f"prompt {plan.prompt}, output {plan.output})", fontsize=9)
    return ax.figure


def plot_pareto(rows: list[dict[str, Any]], ax: Axes | None = None, by: str = "hardware"
                ) -> Figure:
    """Throughput per GPU against TPOT for every configuration that fits, with each group's
    Pareto front (lower TPOT, higher throughput) drawn as a line."""
    from perfmodel.plan.serving import pareto_front
    ax = axes_or_new(ax, (7.0, 4.2))
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(str(r[by]), []).append(r)
    for i, (name, rs) in enumerate(sorted(groups.items())):
        color = f"C{i}"
        fit = [r for r in rs if r["fits"]]
        ax.scatter([r["tpot_s"] * 1e3 for r in fit], [r["tokens_per_s_per_gpu"] for r in fit],
                   s=10, alpha=0.35, color=color)
        front = pareto_front(rs)
        ax.plot([r["tpot_s"] * 1e3 for r in front], [r["tokens_per_s_per_gpu"] for r in front],
                "-o", ms=3, color=color, label=f"{name} (Pareto front)")
    ax.set_xlabel("TPOT [ms] (lower is more interactive)")
    ax.set_ylabel("output tokens/s per GPU")
    ax.set_xscale("log")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return ax.figure


def _layout_text(r: dict[str, Any]) -> str:
    """A row's layout as the table prints it: layout, replicas and the load point."""
    text = str(r.get("layout", "?"))
    if r.get("replicas", 1) and r.get("replicas", 1) > 1:
        text += f" ×{r['replicas']}"
    if r.get("concurrency"):
        text += f", {r['concurrency']} in flight"
    elif r.get("mode") == "offline":
        text += ", offline"
    return text


def _emptiest_corner(ax: Axes, rows: list[dict[str, Any]], ys: str) -> dict[str, Any]:
    """Where a note box (about a third of the width, a sixth of the height) covers the fewest
    points: one of the four corners of `ax` (its limits as autoscaled now)."""
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    pts = [((r["output_tokens_per_s_per_gpu"] - x0) / (x1 - x0),
            math.log(r[ys] * 1e3 / y0) / math.log(y1 / y0)) for r in rows]
    corners = [(0.03, 0.97, "left", "top"), (0.97, 0.03, "right", "bottom"),
               (0.03, 0.03, "left", "bottom"), (0.97, 0.97, "right", "top")]

    def covered(c):
        fx, fy, ha, va = c
        xl = (fx, fx + 0.4) if ha == "left" else (fx - 0.4, fx)
        yl = (fy - 0.2, fy) if va == "top" else (fy, fy + 0.2)
        return sum(xl[0] <= px <= xl[1] and yl[0] <= py <= yl[1] for px, py in pts)
    fx, fy, ha, va = min(corners, key=covered)  # first of the least covered
    return {"xytext": (fx, fy), "ha": ha, "va": va}


def _row_key(r: dict[str, Any]) -> tuple:
    """What tells a search's rows apart (a row and its copy in the front compare equal)."""
    return tuple(str(r.get(k)) for k in ("layout", "replicas", "point", "mode", "concurrency"))


def _seconds(v: float) -> str:
    """A duration as "27.3 ms" or "1.64 s"."""
    return f"{v * 1e3:.3g} ms" if v < 1 else f"{v:.3g} s"


def plot_serve_search(rows: list[dict[str, Any]], best: dict[str, Any] | None = None,
                      front: list[dict[str, Any]] | None = None,
                      search: dict[str, Any] | None = None,
                      path=None) -> Figure:
    """What `perfmodel plan serve --plot` draws from its rows (`perfmodel.plan.search`): p99 TTFT
    (left) and p99 TPOT (right) against output tokens/s per GPU, every point that fits, one
    colour per layout (its load points joined, in order of load); filled where the point meets
    the SLOs, hollow where it misses them; black-edged: on the Pareto front (`front`). The SLOs
    of `search` (`ttft_slo_s`, `tpot_slo_s`) are dashed red lines labelled with their value;
    the chosen row (`best`) is a star annotated with its layout. One legend, right of the
    panels. Saved to `path` (PNG) when given."""
    search = search or {}
    fits = [r for r in rows if r.get("fits") and r.get("output_tokens_per_s_per_gpu")
            and r.get("ttft_p99_s") is not None and r.get("tpot_p99_s") is not None]
    on_front = {_row_key(r) for r in front or ()}
    slos = {"ttft": search.get("ttft_slo_s"), "tpot": search.get("tpot_slo_s")}
    any_slo = any(slos.values())
    fig = Figure(figsize=(13.0, 5.2), layout="constrained")
    axes = fig.subplots(1, 2)
    layouts = list(dict.fromkeys(str(r.get("layout")) for r in sorted(
        fits, key=lambda r: -r["output_tokens_per_s_per_gpu"])))
    cmap = matplotlib.colormaps["tab10" if len(layouts) <= 10 else "tab20"]
    color = {name: cmap(i % cmap.N) for i, name in enumerate(layouts)}
    handles = []
    for ax, key, name in ((axes[0], "ttft", "TTFT"), (axes[1], "tpot", "TPOT")):
        ys = f"{key}_p99_s"
        for lay in layouts:
            rs = sorted((r for r in fits if str(r.get("layout")) == lay),
                        key=lambda r: (r.get("replicas") or 0, r.get("concurrency") or 1e18))
            for reps in dict.fromkeys(r.get("replicas") for r in rs):
                line = [r for r in rs if r.get("replicas") == reps]
                ax.plot([r["output_tokens_per_s_per_gpu"] for r in line],
                        [r[ys] * 1e3 for r in line], "-", color=color[lay], lw=0.8, alpha=0.6)
            for r in rs:
                miss = any_slo and not r.get("meets_slo", True)
                ax.scatter(r["output_tokens_per_s_per_gpu"], r[ys] * 1e3, s=30, zorder=3,
                           facecolors="none" if miss else color[lay],
                           edgecolors="black" if _row_key(r) in on_front else color[lay],
                           linewidths=1.2 if _row_key(r) in on_front or miss else 0.5)
        ax.set_yscale("log")
        ax.set_xlim(left=0)
        if slos[key]:
            v = slos[key]
            ax.axhline(v * 1e3, color="#c44e52", ls="--", lw=1.2, zorder=2)
            ax.annotate(f"{name} SLO {_seconds(v)} (p99)", (0.01, v * 1e3),
                        xycoords=("axes fraction", "data"), xytext=(0, 3),
                        textcoords="offset points", color="#c44e52", fontsize=8, va="bottom",
                        bbox={"facecolor": "white", "alpha": 0.85, "pad": 1.0,
                              "edgecolor": "none"}, zorder=4)
        if best is not None and best.get(ys) is not None:
            x, y = best["output_tokens_per_s_per_gpu"], best[ys] * 1e3
            ax.scatter(x, y, marker="*", s=320, color="gold", edgecolors="black",
                       linewidths=0.9, zorder=4)
            ax.annotate(f"chosen: {_layout_text(best)}\n{x:,.0f} tok/s/GPU, {name} "
                        f"{_seconds(best[ys])}", (x, y), **_emptiest_corner(ax, fits, ys),
                        textcoords="axes fraction", fontsize=8,
                        bbox={"boxstyle": "round,pad=0.3", "facecolor": "white",
                              "edgecolor": "grey", "alpha": 0.9},
                        arrowprops={"arrowstyle": "->", "lw": 0.8}, zorder=5)
        lo, hi = ax.get_ylim()
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: _seconds(v / 1e3)))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: _seconds(v / 1e3))
                                     if hi / lo < 15 else NullFormatter())
        ax.tick_params(axis="y", which="both", labelsize=8)
        ax.set_xlabel("output tokens/s per GPU (higher is cheaper)")
        ax.set_ylabel(f"{name} p99 (lower is more interactive)")
        ax.set_title(f"{name} against throughput per GPU", fontsize=10)
        ax.grid(alpha=0.3, which="both", lw=0.5)
    handles += [Line2D([], [], ls="-", marker="o", color=color[lay], label=lay)
                for lay in layouts]
    handles.append(Line2D([], [], ls="", marker="o", markerfacecolor="lightgrey",
                          markeredgecolor="black", markeredgewidth=1.2,
                          label="on the Pareto front\n(tok/s/GPU vs tok/s/user)"))
    if any_slo:
        handles.append(Line2D([], [], ls="", marker="o", markerfacecolor="none",
                              markeredgecolor="grey", label="misses the SLOs"))
        handles.append(Line2D([], [], ls="--", color="#c44e52", label="SLO (p99)"))
    if best is not None:
        handles.append(Line2D([], [], ls="", marker="*", markersize=13, color="gold",
                              markeredgecolor="black", label="chosen layout"))
    fig.legend(handles=handles, loc="outside right upper", fontsize=8, title="layout",
               title_fontsize=8)
    title = f"{search.get('model', '')} on {search.get('gpus', '')}x {search.get('hardware', '')}"
    if search.get("engine"):
        title += f", {search['engine']} {search.get('dtype', '')}"
    if not fits:
        title += ": no layout fits"
    fig.suptitle(title.strip(" ,x"), fontsize=11)
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig
