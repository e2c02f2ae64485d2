"""Figures for a scheduled graph: time breakdown, stream timeline, roofline.

Every plot takes a `Prediction` (from `perfmodel.schedule.schedule`) and an optional matplotlib
Axes; with no Axes it makes its own Figure. Figures are built with `matplotlib.figure.Figure`
rather than pyplot, so this module never touches the global backend: it works headless (saving
PNGs through Agg) and still displays inline in a notebook. Times are shown in ms, or µs when the
makespan is under 1 ms; the roofline is in FLOP/byte and FLOP/s.
"""
from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from perfmodel.report.tables import INDEX_PART, role_of
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


# Hatching per resource family as well as colour, so the bound reads in grey-scale prints too.
FAMILY_HATCHES = {"tensor": "", "hbm": "//", "l2": "\\\\", "smem": "..", "pipes": "++",
                  "link": "xx", "latency/launch": "--", "other": "oo"}


def _family_handles(families) -> list[Patch]:
    return [Patch(facecolor=FAMILY_COLORS[f], hatch=FAMILY_HATCHES[f], edgecolor="white",
                  label=f) for f in FAMILY_COLORS if f in families]


def _family_legend(ax: Axes, families, **kw) -> None:
    ax.legend(handles=_family_handles(families), title="bound", fontsize="small", **kw)


# legends sit right of their panel, outside the axes, so they never cover bars or points
OUTSIDE = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "borderaxespad": 0.0}


def op_type(o: ScheduledOp) -> str:
    """The op's type (gemm, attention, allreduce, ...), as `perfmodel predict` totals it."""
    return o.op.name


def _by_type(ops: list[ScheduledOp]) -> list[tuple[str, list[ScheduledOp]]]:
    """Ops per op type, largest summed time first."""
    out: dict[str, list[ScheduledOp]] = defaultdict(list)
    for o in ops:
        out[op_type(o)].append(o)
    return sorted(out.items(), key=lambda kv: (-sum(o.time_s for o in kv[1]), kv[0]))


def _shown_types(ops: list[ScheduledOp], top: int
                 ) -> list[tuple[str, list[ScheduledOp]]]:
    """The op types drawn as their own bar, then "other (N op types)" for the smallest ones.

    Only small types are grouped: the group is never larger than the smallest bar shown (more
    types are shown until it is), and a single leftover type keeps its own name."""
    types = _by_type(ops)
    k = min(max(top, 1), len(types))

    def rest_time(k):
        return sum(o.time_s for _, os in types[k:] for o in os)
    while k < len(types) and (len(types) - k == 1
                              or rest_time(k) > sum(o.time_s for o in types[k - 1][1])):
        k += 1
    shown = types[:k]
    if types[k:]:
        shown.append((f"other ({len(types) - k} op types)",
                      [o for _, os in types[k:] for o in os]))
    return shown


def _fits(ax: Axes, text: str, width: float, span: float, fontsize: float = 7.0) -> bool:
    """Whether `text` fits inside a bar `width` long on an x axis `span` long."""
    inches = ax.get_position().width * ax.figure.get_figwidth() * width / span
    return inches > 0.55 * fontsize / 72 * len(text) + 0.06


def plot_breakdown(pred: Prediction, ax: Axes | None = None, top: int = 12) -> Figure:
    """Horizontal bars, one per op type (largest on top), of the time summed over its ops (ms
    or µs); each bar is stacked by op role (an op's name without its layer index: qkv,
    gate_up.dgrad, ...), every segment coloured and hatched by the resource family binding
    most of its time, the wide ones labelled with their role. Beyond `top` types the smallest
    are summed into "other (N op types)", never larger than the smallest bar shown."""
    shown = _shown_types(pred.ops, top)
    ax = axes_or_new(ax, (10, 0.45 * len(shown) + 1.6))
    scale, unit = _time_unit(pred.total_time_s)
    span = max(sum(o.time_s for o in ops) for _, ops in shown) * scale if shown else 1.0
    fams = set()
    for y, (name, ops) in enumerate(shown):
        left = 0.0
        roles = sorted(_groups(ops).items(), key=lambda kv: -sum(o.time_s for o in kv[1]))
        for role, rops in roles:
            w = sum(o.time_s for o in rops) * scale
            fam = _dominant_family(rops)
            fams.add(fam)
            ax.barh(y, w, left=left, height=0.7, color=FAMILY_COLORS[fam],
                    hatch=FAMILY_HATCHES[fam], edgecolor="white", linewidth=0.6,
                    label=f"{name}/{role}")
            if _fits(ax, role, w, span):
                ax.text(left + w / 2, y, role, ha="center", va="center", fontsize=7,
                        clip_on=True, bbox={"facecolor": "white", "alpha": 0.75, "pad": 0.8,
                                            "edgecolor": "none"})
            left += w
        total = sum(o.time_s for o in ops) * scale
        ax.text(total, y, f" {total:.3g} {unit} ({total / scale / pred.total_time_s:.0%})"
                if pred.total_time_s else f" {total:.3g}", va="center", fontsize=7)
    ax.set_yticks(range(len(shown)), [name for name, _ in shown], fontsize="small")
    ax.set_ylim(len(shown) - 0.5, -0.5)  # largest on top
    ax.set_xlim(0, span * 1.18)  # room for the value labels
    ax.set_xlabel(f"time summed over the ops of each type ({unit}); segments: op roles, "
                  f"largest first")
    ax.set_title(f"{pred.graph} on {pred.hardware.name}: {pred.total_time_s * scale:.4g} {unit}"
                 f" makespan, time by op type and bound")
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    _family_legend(ax, fams, **OUTSIDE)
    return ax.figure


def _streams(pred: Prediction) -> list[str]:
    """Stream names in order of first appearance."""
    return list(dict.fromkeys(o.stream for o in pred.ops))


def layer_of(name: str) -> int | None:
    """The layer index in an op's name (`l12.qkv` → 12, `blocks.3.mlp` → 3), None outside the
    repeated layers (`embed`, `lm_head`, `optimizer`)."""
    for part in re.split(r"[./]", name):
        if INDEX_PART.match(part):
            return int(re.sub(r"\D", "", part))
    return None


@dataclass
class Block:
    """A run of consecutive ops of one stream in one layer (or outside the layers)."""
    stream: str
    layer: int | None
    ops: list[ScheduledOp]

    @property
    def start_s(self) -> float:
        return self.ops[0].start_s

    @property
    def end_s(self) -> float:
        return max(o.end_s for o in self.ops)

    @property
    def label(self) -> str:
        if self.layer is not None:
            return f"L{self.layer}"
        names = list(dict.fromkeys(group_name(o) for o in self.ops))
        return names[0] if len(names) == 1 else f"{names[0]} +{len(names) - 1}"

    @property
    def signature(self) -> tuple[str, ...]:
        """The block's op roles in order: repeated layers of one kind share it."""
        return tuple(group_name(o) for o in self.ops)


def layer_blocks(pred: Prediction) -> list[Block]:
    """Each stream's ops in start order, cut wherever the layer index changes: an 80-layer
    decode step is 80 layer blocks plus the ops before and after; a training step has each layer
    twice (forward, then backward)."""
    blocks: list[Block] = []
    for stream in _streams(pred):
        cur = None
        for o in sorted((o for o in pred.ops if o.stream == stream), key=lambda o: o.start_s):
            layer = layer_of(o.name)
            if cur is None or layer != cur.layer:
                cur = Block(stream, layer, [])
                blocks.append(cur)
            cur.ops.append(o)
    return blocks


def type_colors(pred: Prediction) -> dict[str, str]:
    """One colour per op type, largest total time first (shared by the timeline panels)."""
    names = [t for t, _ in _by_type(pred.ops)]
    cmap = matplotlib.colormaps["tab10" if len(names) <= 10 else "tab20"]
    return {t: cmap(i % cmap.N) for i, t in enumerate(names)}


def plot_timeline(pred: Prediction, ax: Axes | None = None, max_labels: int = 12) -> Figure:
    """Gantt chart with repeated layers collapsed: one row per stream, one band per layer block
    (`layer_blocks`) from its first op's start to its last op's end, stacked by op type (each
    type's summed time, in order of first appearance, coloured by `type_colors`); the grey band
    behind shows the block's span (any gap in it: the stream waiting). Bands alternate in shade
    and about `max_labels` per row are labelled with their layer (L0, L10, ...)."""
    streams = _streams(pred)
    ax = axes_or_new(ax, (12, 0.7 * len(streams) + 1.8))
    row = {s: i for i, s in enumerate(streams)}
    scale, unit = _time_unit(pred.total_time_s)
    colors = type_colors(pred)
    blocks = layer_blocks(pred)
    spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
    backs: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
    for i, b in enumerate(blocks):
        backs[(b.stream, i % 2)].append((b.start_s * scale, (b.end_s - b.start_s) * scale))
        left = b.start_s * scale
        for t, ops in _types_in_order(b.ops):
            w = sum(o.time_s for o in ops) * scale
            spans[(b.stream, t)].append((left, w))
            left += w
    for (stream, shade), xs in backs.items():
        ax.broken_barh(xs, (row[stream] - 0.42, 0.84),
                       facecolors="#e6e6e6" if shade else "#c8c8c8", edgecolor="none")
    for (stream, t), xs in spans.items():
        ax.broken_barh(xs, (row[stream] - 0.32, 0.64), facecolors=colors[t], edgecolor="none")
    total = max(pred.total_time_s * scale, 1e-12)
    inch = ax.get_position().width * ax.figure.get_figwidth() / total  # inches per unit
    for stream in streams:
        bs = [b for b in blocks if b.stream == stream]
        step = _label_step(len({b.layer for b in bs if b.layer is not None}), max_labels)
        free = -total  # where the last label ends: labels never overlap
        for b in bs:
            x = b.start_s * scale
            wide = (b.end_s - b.start_s) * scale > 0.04 * total
            if ((b.layer is not None and b.layer % step == 0) or (b.layer is None and wide)) \
                    and x >= free:
                ax.text(x, row[stream] - 0.45, b.label, ha="left", va="bottom", fontsize=7)
                free = x + (0.6 * 7 / 72 * len(b.label) + 0.08) / inch
    ax.set_yticks(range(len(streams)), streams)
    ax.set_ylim(len(streams) - 0.45, -0.85)  # first stream on top, room for the labels
    ax.set_xlim(0, total)
    layers = len({b.layer for b in blocks if b.layer is not None})
    ax.set_xlabel(f"time ({unit})")
    ax.set_title(f"timeline: {len(pred.ops)} ops as {len(blocks)} bands ({layers} layers; one "
                 f"band per layer block, stacked by op type)")
    handles = [Patch(color=colors[t], label=t) for t in colors]
    handles.append(Patch(facecolor="#d6d6d6", label="layer block span\n(gap: stream waits)"))
    ax.legend(handles=handles, title="op type", fontsize="small", **OUTSIDE)
    return ax.figure


def _types_in_order(ops: list[ScheduledOp]) -> list[tuple[str, list[ScheduledOp]]]:
    out: dict[str, list[ScheduledOp]] = {}
    for o in ops:
        out.setdefault(op_type(o), []).append(o)
    return list(out.items())


def _label_step(n: int, most: int) -> int:
    """A round step (1, 2, 5, 10, 20, ...) labelling at most `most` of `n` layers."""
    for step in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000):
        if n / step <= most:
            return step
    return max(1, n // most)


def typical_layers(pred: Prediction, most: int = 4) -> list[tuple[Block, int]]:
    """One block per kind of layer (same op roles in the same order), with how many blocks are
    of its kind: the block of median length, kinds in order of first appearance, at most
    `most` kinds (the most numerous)."""
    kinds: dict[tuple, list[Block]] = {}
    for b in layer_blocks(pred):
        if b.layer is not None:
            kinds.setdefault((b.stream, b.signature), []).append(b)
    chosen = sorted(kinds.values(), key=len, reverse=True)[:most]
    chosen.sort(key=lambda bs: bs[0].start_s)
    return [(sorted(bs, key=lambda b: b.end_s - b.start_s)[len(bs) // 2], len(bs))
            for bs in chosen]


def plot_layer(pred: Prediction, ax: Axes | None = None, most: int = 4) -> Figure:
    """One typical layer of each kind (`typical_layers`: e.g. a forward and a backward layer,
    or a dense and an MoE layer) at full resolution: its ops from the block's start, coloured by
    op type (`type_colors`) and labelled with their role where the label fits."""
    kinds = typical_layers(pred, most)
    ax = axes_or_new(ax, (12, 0.7 * max(len(kinds), 1) + 1.8))
    colors = type_colors(pred)
    longest = max((b.end_s - b.start_s for b, _ in kinds), default=0.0)
    scale, unit = _time_unit(longest)
    span = max(longest * scale, 1e-12)
    for y, (b, n) in enumerate(kinds):
        for o in b.ops:
            x, w = (o.start_s - b.start_s) * scale, o.time_s * scale
            ax.barh(y, w, left=x, height=0.64, color=colors[op_type(o)], edgecolor="white",
                    linewidth=0.5)
            role = group_name(o)
            if _fits(ax, role, w, span, 6.5):
                ax.text(x + w / 2, y, role, ha="center", va="center", fontsize=6.5,
                        clip_on=True)
    ax.set_yticks(range(len(kinds)), [f"{b.label} ({n} alike)" if b.stream == "main" else
                                       f"{b.label} {b.stream} ({n} alike)" for b, n in kinds],
                  fontsize="small")
    ax.set_ylim(len(kinds) - 0.5, -0.5)
    ax.set_xlim(0, span)
    ax.set_xlabel(f"time since the layer's first op ({unit})")
    ax.set_title("one layer of each kind, op by op (colours: op type, as in the timeline)")
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
    ax.legend(handles=handles, fontsize="small", **OUTSIDE)
    return ax.figure


def save(fig: Figure, path: str | Path) -> None:
    """Write `fig` to `path` (format from the suffix) at 120 dpi, trimmed to its content."""
    fig.savefig(path, dpi=120, bbox_inches="tight")


def plot_prediction(pred: Prediction, path: str | Path | None = None) -> Figure:
    """Four panels in one figure, saved to `path` when given: time by op type and bound
    (`plot_breakdown`), the timeline with one band per layer (`plot_timeline`), one layer of each
    kind op by op (`plot_layer`) and the roofline (`plot_roofline`)."""
    bars = len(_shown_types(pred.ops, 12))
    kinds = len(typical_layers(pred))
    heights = [0.42 * bars + 1.3, 0.6 * len(_streams(pred)) + 1.3]
    heights += [0.55 * kinds + 1.2] if kinds else []
    heights.append(5.5)
    fig = Figure(figsize=(13, sum(heights) + 0.5), layout="constrained")
    axes = list(fig.subplots(len(heights), 1, height_ratios=heights))
    plot_breakdown(pred, axes.pop(0))
    plot_timeline(pred, axes.pop(0))
    if kinds:
        plot_layer(pred, axes.pop(0))
    plot_roofline(pred, axes.pop(0))
    if path is not None:
        save(fig, path)
    return fig
