"""Figures of measured vs predicted: a log-log scatter per class, and attention TFLOPS curves.

Functions take an optional matplotlib Axes and return the Figure (built without pyplot, so they
work headless and inline in notebooks).
"""
from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from perfmodel.report.plots import axes_or_new

from perfmodel.validation.compare import Comparison


def plot_predicted_vs_measured(comps: list[Comparison], ax: Axes | None = None,
                               by: str = "op_class") -> Figure:
    """Every row as a point (measured time, predicted time), log-log, with ±10 % and ±25 % bands;
    fitted rows hollow."""
    ax = axes_or_new(ax, (6.0, 5.0))
    groups: dict[str, list[Comparison]] = {}
    for c in comps:
        groups.setdefault(getattr(c.case, by) if by != "hardware" else c.case.hardware.name,
                          []).append(c)
    lo = min(min(c.case.measured_time_s, c.predicted_time_s) for c in comps) * 1e3
    hi = max(max(c.case.measured_time_s, c.predicted_time_s) for c in comps) * 1e3
    xs = [lo * 0.8, hi * 1.25]
    ax.plot(xs, xs, color="black", lw=1)
    for f, style in ((1.10, ":"), (1.25, "--")):
        ax.plot(xs, [x * f for x in xs], style, color="grey", lw=0.8)
        ax.plot(xs, [x / f for x in xs], style, color="grey", lw=0.8)
    for i, (name, cs) in enumerate(sorted(groups.items())):
        judged = [c for c in cs if not c.case.fitted]
        fitted = [c for c in cs if c.case.fitted]
        ax.scatter([c.case.measured_time_s * 1e3 for c in judged],
                   [c.predicted_time_s * 1e3 for c in judged], s=14, color=f"C{i}",
                   label=f"{name} (n={len(cs)})")
        if fitted:
            ax.scatter([c.case.measured_time_s * 1e3 for c in fitted],
                       [c.predicted_time_s * 1e3 for c in fitted], s=30, facecolors="none",
                       edgecolors=f"C{i}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured time [ms]")
    ax.set_ylabel("predicted time [ms]")
    ax.set_title("predicted vs measured (dotted ±10 %, dashed ±25 %; hollow: fitted rows)",
                 fontsize=9)
    ax.legend(fontsize=7)
    return ax.figure


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
