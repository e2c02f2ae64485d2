"""Plots: each returns a Figure with the expected content; plot_prediction writes a readable PNG
(its size, labels and legends read back)."""
import re

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image

import perfmodel
from perfmodel.report import plots
from perfmodel.graph import parse_graph
from perfmodel.schedule import ScheduledOp, schedule

GEMM = {"op": "gemm", "m": 4096, "n": 4096, "k": 4096, "dtype": "bf16"}
SMALL = {"op": "gemm", "m": 64, "n": 1024, "k": 1024, "dtype": "bf16"}
ELEM = {"op": "elementwise", "elements": 1 << 20, "dtype": "bf16"}


@pytest.fixture(scope="module")
def pred():
    graph = parse_graph({"name": "t", "ops": [
        {"name": "l1.qkv", **GEMM},
        {"name": "l2.qkv", **GEMM},
        {"name": "side.scale", "op": "elementwise", "elements": 16777216, "dtype": "bf16",
         "after": [], "stream": "side"},
    ]})
    return schedule(graph, perfmodel.hardware("H100-SXM"))


def layered(layers: int, name: str = "m"):
    """embed, then `layers` layers of norm / qkv / up, then lm_head, on one stream."""
    ops = [{"name": "embed", **ELEM}]
    for i in range(layers):
        ops += [{"name": f"l{i}.norm", "op": "norm", "rows": 256, "cols": 4096,
                 "dtype": "bf16"}, {"name": f"l{i}.qkv", **GEMM}, {"name": f"l{i}.up", **SMALL}]
    ops.append({"name": "lm_head", **GEMM})
    return schedule(parse_graph({"name": name, "ops": ops}), perfmodel.hardware("H100-SXM"))


@pytest.fixture(scope="module")
def deep():
    return layered(80, "deep")


def _legend_outside(fig, ax) -> bool:
    """The axes' legend lies right of the axes (drawn, so both have their final place)."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    r = canvas.get_renderer()
    return ax.get_legend().get_window_extent(r).x0 >= ax.get_window_extent(r).x1


def test_group_name_strips_layer_index():
    class Op:
        name = "gemm"

    def g(name):
        return plots.group_name(ScheduledOp(name, Op(), "main", None))

    assert g("l3.qkv") == g("l17.qkv") == "qkv"
    assert g("layer12.mlp.up") == "mlp.up"
    assert g("blocks.3.mlp.up") == g("blocks.11.mlp.up") == "blocks.mlp.up"
    assert g("attn_3") == "attn"
    assert g("fc1") != g("fc2")  # digits that are part of a name are kept
    assert g("7") == "gemm"      # a bare index falls back to the op type


def test_layer_of_reads_the_layer_index():
    assert plots.layer_of("l12.qkv.dgrad") == 12
    assert plots.layer_of("layer3.mlp.up") == 3
    assert plots.layer_of("blocks.7.attn") == 7
    assert plots.layer_of("embed") is None and plots.layer_of("fc2") is None


def test_breakdown_one_bar_per_op_type_stacked_by_role(pred, closing):
    fig = plots.plot_breakdown(pred)
    closing(fig)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["gemm", "elementwise"]  # largest on top
    assert len(ax.patches) == 2  # one segment per role: qkv (both layers), side.scale
    gemm = sum(p.get_width() for p in ax.patches if p.get_y() < 0.5)
    total_qkv = sum(o.time_s for o in pred.ops if o.name.endswith("qkv"))
    assert gemm == pytest.approx(total_qkv * 1e6)  # makespan < 1 ms -> µs
    assert "µs" in ax.get_xlabel()
    assert ax.patches[0].get_hatch() in ("", None)  # tensor-bound: plain; hbm: hatched
    assert ax.patches[1].get_hatch() == plots.FAMILY_HATCHES["hbm"]
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert texts == ["tensor", "hbm"] and ax.get_legend().get_title().get_text() == "bound"
    assert _legend_outside(fig, ax)


def test_other_groups_only_small_types(pred):
    shown = plots._shown_types(pred.ops, top=1)
    # one leftover type keeps its name: no "other (1 op types)"
    assert [n for n, _ in shown] == ["gemm", "elementwise"]
    ops = layered(2).ops
    shown = plots._shown_types(ops, top=1)
    names = [n for n, _ in shown]
    assert names[0] == "gemm" and names[-1] == "other (2 op types)"
    times = [sum(o.time_s for o in os) for _, os in shown]
    assert times[-1] <= min(times[:-1])  # "other" never hides the biggest share


def test_breakdown_other_is_labelled_with_its_count(closing):
    p = layered(2)
    fig = plots.plot_breakdown(p, top=1)
    closing(fig)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["gemm",
                                                                   "other (2 op types)"]


def test_layer_blocks_collapse_repeated_layers(deep):
    blocks = plots.layer_blocks(deep)
    assert len(deep.ops) == 242
    assert [b.label for b in blocks[:3]] == ["embed", "L0", "L1"]
    assert len(blocks) == 82 and blocks[-1].label == "lm_head"
    assert all(len(b.ops) == 3 for b in blocks[1:-1])
    kinds = plots.typical_layers(deep)
    assert len(kinds) == 1 and kinds[0][1] == 80


def test_timeline_one_band_per_layer(deep, closing):
    fig = plots.plot_timeline(deep)
    closing(fig)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["main"]
    assert not ax.patches  # no per-op bars: one collection per op type and band shade
    assert len(ax.collections) == 2 + 3  # two alternating band shades, three op types
    spans = sum(len(c.get_paths()) for c in ax.collections[:2])
    assert spans == 82  # 80 layers plus embed and lm_head
    labels = [t.get_text() for t in ax.texts]
    assert "L0" in labels and "L70" in labels and len(labels) <= 14  # every 10th layer
    assert "82 bands" in ax.get_title() and "80 layers" in ax.get_title()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[:3] == ["gemm", "norm", "elementwise"]
    assert _legend_outside(fig, ax)


def test_timeline_rows_per_stream(pred, closing):
    fig = plots.plot_timeline(pred)
    closing(fig)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["main", "side"]


def test_layer_panel_draws_one_layer_op_by_op(deep, closing):
    fig = plots.plot_layer(deep)
    closing(fig)
    ax = fig.axes[0]
    assert len(ax.patches) == 3
    assert re.fullmatch(r"L\d+ \(80 alike\)", ax.get_yticklabels()[0].get_text())
    assert "qkv" in [t.get_text() for t in ax.texts]


def test_roofline_has_points(pred, closing):
    fig = plots.plot_roofline(pred)
    closing(fig)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    points = [c for c in ax.collections if len(c.get_offsets())]
    assert len(points) == 2  # qkv (deduplicated) and side.scale
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert any("bf16" in t.get_text() for t in ax.get_legend().get_texts())
    assert _legend_outside(fig, ax)


def test_plot_on_given_axes(pred, closing):
    fig = Figure()
    ax = fig.add_subplot()
    assert plots.plot_roofline(pred, ax, dtype="fp8") is fig


def test_plot_prediction_writes_a_readable_png(tmp_path, closing):
    out = tmp_path / "pred.png"
    fig = plots.plot_prediction(layered(8), out)
    closing(fig)
    assert len(fig.axes) == 4
    titles = [ax.get_title() for ax in fig.axes]
    assert "time by op type and bound" in titles[0] and titles[1].startswith("timeline")
    assert titles[2].startswith("one layer") and titles[3].startswith("roofline")
    assert [ax.get_legend() is not None for ax in fig.axes] == [True, True, False, True]
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    r = canvas.get_renderer()
    for ax in fig.axes:
        if ax.get_legend() is not None:
            assert ax.get_legend().get_window_extent(r).x0 >= ax.get_window_extent(r).x1
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = Image.open(out).size
    assert 1000 <= w <= 2400 and 800 <= h <= 2400
