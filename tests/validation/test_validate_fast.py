"""`perfmodel validate --plot`'s shortcuts draw what the long way draws: the roofline panels reuse
the demands compare() resolved, the log axes build only the minor ticks in view, and validate
pauses the cycle collector only while it works."""
import dataclasses
import gc
import itertools
import math

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, LogLocator

from perfmodel.cli import validate as validate_cli
from perfmodel.engine import LEVELS
from perfmodel.validation import plots
from perfmodel.validation.compare import compare
from perfmodel.validation.measurements import default_sources, load_cases

# classes whose ops resolve a Choice (linear), a kernel search (gemm, grouped GEMM), per-GPU
# parts (MoE), an attention kernel and a collective: every way a demand is resolved
PREFIXES = ("linear_", "moe_", "gemm", "grouped_gemm", "attention_fwd", "allreduce")
GPUS = ("H100-SXM", "H200-SXM", "B200")


@pytest.fixture(scope="module")
def cases():
    """Up to 6 rows of each class of PREFIXES per GPU."""
    rows = [c for src in default_sources() for c in load_cases(src)[0]
            if c.op_class.startswith(PREFIXES) and c.hardware.name in GPUS]
    picked = []
    for _, group in itertools.groupby(sorted(rows, key=lambda c: (c.op_class, c.hardware.name)),
                                      key=lambda c: (c.op_class, c.hardware.name)):
        picked += list(group)[:6]
    assert {c.op_class.split("_")[0] for c in picked} >= {"linear", "moe", "gemm", "attention"}
    return picked


def _without_demands(comps):
    """The comparisons as a caller who built them by hand has them: no resolved demand."""
    return [dataclasses.replace(c, demand=None, level=None) for c in comps]


def _roofline_points(fig, n_classes):
    """Every roofline panel's scatter points, in drawing order."""
    return [[c.get_offsets().tolist() for c in ax.collections] for ax in fig.axes[n_classes:]]


@pytest.mark.parametrize("level", LEVELS)
def test_roofline_panels_reuse_the_compared_demands(cases, level, closing):
    comps = compare(cases, level)
    for c in comps:  # the shortcut is taken: the very Demand compare() resolved
        assert c.level == level and plots._resolved(c, c.case.hardware, level) is c.demand
    n_classes = len({c.case.op_class for c in comps})
    fast = plots.plot_validation(comps, level=level)
    slow = plots.plot_validation(_without_demands(comps), level=level)
    closing(fast)
    closing(slow)
    points = _roofline_points(fast, n_classes)
    assert sum(len(p) for panel in points for p in panel) > 0
    assert points == _roofline_points(slow, n_classes)
    assert [ax.get_title() for ax in fast.axes] == [ax.get_title() for ax in slow.axes]


def test_roofline_panels_resolve_again_at_another_level(cases, closing):
    """Comparisons made at pipes, plotted at roofline: their kept demands are not reused."""
    comps = compare(cases, "pipes")
    n_classes = len({c.case.op_class for c in comps})
    kept = plots.plot_validation(comps, level="roofline")
    bare = plots.plot_validation(_without_demands(comps), level="roofline")
    closing(kept)
    closing(bare)
    assert _roofline_points(kept, n_classes) == _roofline_points(bare, n_classes)


def test_kept_demand_is_not_part_of_a_comparison(cases):
    comps = compare(cases[:20])
    for c, bare in zip(comps, _without_demands(comps)):
        assert c == bare and repr(c) == repr(bare)
        assert c.to_dict() == bare.to_dict()
        assert "demand" not in c.to_dict() and "level" not in c.to_dict()


def _log_axis_pixels(lo: float, hi: float, subs, locator_type) -> np.ndarray:
    """A small log-log axes over [lo, hi] with `_log_ticks`'s major ticks and a minor locator
    of `locator_type`, rendered."""
    fig = Figure(figsize=(2.0, 2.0), dpi=60)
    ax = fig.add_subplot(xscale="log", yscale="log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    plots._log_ticks(ax.xaxis, lo, hi)
    plots._log_ticks(ax.yaxis, lo, hi)
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_minor_locator(locator_type(subs=subs, numticks=50))
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba()).copy()


# ranges of a fraction of a decade to six, some ending exactly on a minor tick (2, 300, 0.05)
RANGES = [(2.0, 300.0), (0.05, 0.9), (1.0, 100.0), (3.7, 4.9), (0.013, 5000.0),
          (2.0 * (1 + 1e-12), 300.0 * (1 - 1e-12)), (7e-4, 2e2), (1e3, 1e9)] + [
    (10 ** a, 10 ** (a + w)) for a, w in zip(np.linspace(-3.3, 4.1, 12),
                                             np.linspace(0.2, 5.5, 12))]


@pytest.mark.parametrize("lo,hi", RANGES)
def test_in_view_minor_ticks_draw_what_log_locator_draws(lo, hi):
    for subs in (tuple(range(2, 10)), (2.0, 5.0)):
        assert np.array_equal(_log_axis_pixels(lo, hi, subs, LogLocator),
                              _log_axis_pixels(lo, hi, subs, plots._InViewLogLocator))


@pytest.mark.parametrize("lo,hi", RANGES)
def test_in_view_minor_ticks_are_log_locators_inside_the_view(lo, hi):
    fig = Figure()
    ax = fig.add_subplot(xscale="log")
    ax.set_xlim(lo, hi)
    ax.xaxis.set_major_locator(FixedLocator([]))
    every = LogLocator(subs=tuple(range(2, 10)), numticks=50)
    every.set_axis(ax.xaxis)
    in_view = plots._InViewLogLocator(subs=tuple(range(2, 10)), numticks=50)
    in_view.set_axis(ax.xaxis)
    inside = [v for v in every() if math.isclose(v, lo, rel_tol=1e-9) or
              math.isclose(v, hi, rel_tol=1e-9) or lo <= v <= hi]
    assert list(in_view()) == inside


def test_validate_pauses_the_cycle_collector_only_while_it_works():
    enabled = gc.isenabled()
    try:
        for before in (True, False):
            (gc.enable if before else gc.disable)()
            with validate_cli._without_cyclic_gc():
                assert not gc.isenabled()
            assert gc.isenabled() == before
            with pytest.raises(RuntimeError):
                with validate_cli._without_cyclic_gc():
                    raise RuntimeError("a failing validate")
            assert gc.isenabled() == before
    finally:
        (gc.enable if enabled else gc.disable)()


def test_forked_workers_predict_what_one_process_does(cases):
    """compare() over worker processes gives every row the same prediction, bound and resolved
    demand, in row order, as in this process; a worker count that is no positive integer is
    refused by name."""
    from perfmodel.errors import InputError
    one, three = compare(cases, jobs=1), compare(cases, jobs=3)
    assert one == three and [c.case for c in three] == list(cases)
    assert all(a.demand == b.demand and b.level == "pipes" for a, b in zip(one, three))
    for bad in (0, -1, 1.5, True):
        with pytest.raises(InputError, match="--jobs: expected a positive integer"):
            compare(cases[:2], jobs=bad)
    # and at most MAX_GPUS processes, the bound `perfmodel validate --jobs` checks too
    from perfmodel.ops.base import MAX_GPUS
    with pytest.raises(InputError, match=r"--jobs: expected a positive integer <= 2\^20"):
        compare(cases[:2], jobs=MAX_GPUS + 1)
