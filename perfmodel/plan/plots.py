"""Figures for capacity planning: a serving plan's batch sweep and TPOT/throughput Pareto fronts.

Each takes an optional matplotlib Axes and returns the Figure (built without pyplot, so it works
headless and inline in notebooks). Times in ms; throughput in output tokens/s per GPU.
"""
from __future__ import annotations

from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure

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
