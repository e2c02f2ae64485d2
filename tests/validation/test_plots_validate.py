"""`perfmodel validate --plot`'s figure: small multiples per op class plus a roofline per GPU,
one legend outside the grid, labelled bands, ticks that do not overlap, a bounded PNG size."""
import dataclasses
import itertools

import matplotlib.pyplot as plt
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from PIL import Image

from perfmodel.validation import plots
from perfmodel.validation.compare import compare
from perfmodel.validation.measurements import default_sources, load_cases

CLASSES = ("linear_bf16", "attention_fwd", "allreduce <64KiB")


@pytest.fixture(scope="module")
def comps():
    """A few rows of three classes (GEMM, attention, a collective) on two GPUs."""
    cases = [c for src in default_sources() for c in load_cases(src)[0]
             if c.op_class in CLASSES and c.hardware.name in ("H100-SXM", "B200")]
    picked = [c for cls in CLASSES for c in [c for c in cases if c.op_class == cls][:8]]
    return compare(picked)


def test_small_multiples_per_class_and_roofline_per_gpu(comps, tmp_path, closing):
    out = tmp_path / "validate.png"
    fig = plots.plot_validation(comps, out)
    closing(fig)
    titles = [ax.get_title() for ax in fig.axes]
    classes = sorted({c.case.op_class for c in comps})
    gpus = sorted({c.case.hardware.name for c in comps})
    assert len(fig.axes) == len(classes) + len(gpus)
    for cls, title in zip(classes, titles):
        n = sum(c.case.op_class == cls for c in comps)
        assert title.startswith(f"{cls}: n={n}")
    assert all(t.startswith("roofline ") for t in titles[len(classes):])
    for ax in fig.axes[:len(classes)]:
        assert ax.get_xscale() == ax.get_yscale() == "log"
        assert ax.get_xlabel().startswith("measured (") and ax.get_ylabel().startswith(
            "predicted (")
        assert ax.get_xlim() == ax.get_ylim()  # square: the diagonal at 45 degrees
        assert "±25 %" in [t.get_text() for t in ax.texts]  # the band named on the panel
        assert ax.get_legend() is None
    roof = fig.axes[len(classes)]
    assert roof.get_xlabel() == "FLOP / HBM byte" and roof.get_ylabel() == "measured FLOP/s"
    assert len(fig.legends) == 1  # one legend for the whole grid
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert {"±10 %", "±25 %", "predicted = measured", *gpus} <= set(legend)
    w, h = Image.open(out).size
    assert (w, h) == tuple(round(v * 100) for v in fig.get_size_inches())
    assert w <= plots.MAX_PX and h <= plots.MAX_PX
    # nothing clipped or overlapping: the legend below every panel, tick labels apart
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    r = canvas.get_renderer()
    box = fig.legends[0].get_window_extent(r)
    assert box.y1 <= min(ax.get_tightbbox(r).y0 for ax in fig.axes if ax.axison) + 1
    assert box.x0 >= 0 and box.x1 <= fig.bbox.width
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            boxes = [t.get_window_extent(r) for t in axis.get_ticklabels() if t.get_text()]
            assert len(boxes) >= 2
            assert not any(a.overlaps(b) for a, b in itertools.combinations(boxes, 2))


def test_grid_stays_within_the_size_limit_for_many_classes(comps, closing):
    many = [dataclasses.replace(c, case=dataclasses.replace(c.case, op_class=f"class {i}"))
            for i, c in enumerate(comps)] * 2  # 24 classes, 2 rows each
    fig = plots.plot_validation(many)
    closing(fig)
    w, h = fig.get_size_inches() * fig.dpi
    assert w <= plots.MAX_PX and h <= plots.MAX_PX
    assert len(fig.axes) == 24 + len({c.case.hardware.name for c in comps})


def test_log_ticks_are_few_and_plain():
    fig = plt.figure()
    ax = fig.add_subplot(xscale="log")
    for lo, hi, most in ((3.0, 20.0, 4), (0.01, 5000.0, 4), (1e-3, 1e9, 4)):
        plots._log_ticks(ax.xaxis, lo, hi)
        ticks = ax.xaxis.get_major_locator()()
        assert 1 <= len([t for t in ticks if lo <= t <= hi]) <= most + 1
    assert plots._number(0.05) == "0.05" and plots._number(2000) == "2000"
    plt.close(fig)


def test_one_scatter_keeps_its_legend_outside(comps, closing):
    fig = plots.plot_predicted_vs_measured(comps, by="hardware")
    closing(fig)
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "±10 %" in texts and "±25 %" in texts
    assert any(t.startswith("H100-SXM (n=") for t in texts)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    r = canvas.get_renderer()
    assert ax.get_legend().get_window_extent(r).x0 >= ax.get_window_extent(r).x1


def test_no_rows_still_draws(tmp_path, closing):
    fig = plots.plot_validation([], tmp_path / "empty.png")
    closing(fig)
    assert (tmp_path / "empty.png").stat().st_size > 0
