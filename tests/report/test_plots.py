"""Plots: each returns a Figure with the expected content; plot_prediction writes a PNG."""
import matplotlib.pyplot as plt
import pytest
from matplotlib.figure import Figure

import perfmodel
from perfmodel.report import plots
from perfmodel.graph import parse_graph
from perfmodel.schedule import ScheduledOp, schedule

GEMM = {"op": "gemm", "m": 4096, "n": 4096, "k": 4096, "dtype": "bf16"}


@pytest.fixture(scope="module")
def pred():
    graph = parse_graph({"name": "t", "ops": [
        {"name": "l1.qkv", **GEMM},
        {"name": "l2.qkv", **GEMM},
        {"name": "side.scale", "op": "elementwise", "elements": 16777216, "dtype": "bf16",
         "after": [], "stream": "side"},
    ]})
    return schedule(graph, perfmodel.hardware("H100-SXM"))


@pytest.fixture
def closing():
    figs = []
    yield figs.append
    for f in figs:
        plt.close(f)


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


def test_breakdown_one_bar_per_group(pred, closing):
    fig = plots.plot_breakdown(pred)
    closing(fig)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert sorted(labels) == ["qkv", "side.scale"]
    assert len(ax.patches) == 2
    qkv = ax.patches[labels.index("qkv")].get_width()
    total_qkv = sum(o.time_s for o in pred.ops if o.name.endswith("qkv"))
    assert qkv == pytest.approx(total_qkv * 1e6)  # makespan < 1 ms -> µs
    assert "µs" in ax.get_xlabel()


def test_breakdown_top_collapses_rest_into_other(pred, closing):
    fig = plots.plot_breakdown(pred, top=1)
    closing(fig)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == ["other", "qkv"]  # largest on top (last y index)


def test_timeline_one_row_per_stream(pred, closing):
    fig = plots.plot_timeline(pred)
    closing(fig)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["main", "side"]
    assert len(ax.patches) == len(pred.ops)
    edges = [p.get_edgecolor()[3] > 0 for p in ax.patches]  # black edge only on critical ops
    assert edges == [o.critical for o in pred.ops]


def test_timeline_broken_barh_above_max_ops(pred, closing):
    fig = plots.plot_timeline(pred, max_ops=1)
    closing(fig)
    ax = fig.axes[0]
    assert not ax.patches and ax.collections
    assert [t.get_text() for t in ax.get_yticklabels()] == ["main", "side"]


def test_roofline_has_points(pred, closing):
    fig = plots.plot_roofline(pred)
    closing(fig)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    points = [c for c in ax.collections if len(c.get_offsets())]
    assert len(points) == 2  # qkv (deduplicated) and side.scale
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert any("bf16" in t.get_text() for t in ax.get_legend().get_texts())


def test_plot_on_given_axes(pred, closing):
    fig = Figure()
    ax = fig.add_subplot()
    assert plots.plot_roofline(pred, ax, dtype="fp8") is fig


def test_plot_prediction_writes_png(pred, tmp_path, closing):
    out = tmp_path / "pred.png"
    fig = plots.plot_prediction(pred, out)
    closing(fig)
    assert len(fig.axes) == 3
    assert out.stat().st_size > 1000
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
