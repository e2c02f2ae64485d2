"""`perfmodel plan serve --plot`'s figure: p99 TTFT and TPOT against tokens/s per GPU, the SLOs
as labelled lines, the chosen layout starred and annotated, one legend outside the panels."""
from matplotlib.backends.backend_agg import FigureCanvasAgg
from PIL import Image

from perfmodel.plan.plots import plot_serve_search


def row(layout, replicas, conc, tput, ttft, tpot, meets=True, fits=True):
    return {"layout": layout, "replicas": replicas, "point": f"c={conc}", "mode": "concurrency",
            "concurrency": conc * replicas, "fits": fits, "meets_slo": meets,
            "output_tokens_per_s_per_gpu": tput if fits else None,
            "ttft_p99_s": ttft if fits else None, "tpot_p99_s": tpot if fits else None}


ROWS = [row("TP2", 4, 4, 80.0, 0.2, 0.012), row("TP2", 4, 16, 240.0, 1.6, 0.027),
        row("TP2", 4, 64, 500.0, 25.0, 0.23, meets=False),
        row("TP8", 1, 4, 50.0, 0.1, 0.008), row("TP8", 1, 64, 280.0, 2.4, 0.026, meets=False),
        row("TP1", 8, 4, 0, 0, 0, meets=False, fits=False)]
SEARCH = {"model": "llama3-70b", "hardware": "H200-SXM", "gpus": 8, "engine": "vllm",
          "dtype": "bf16", "ttft_slo_s": 2.0, "tpot_slo_s": 0.05}


def test_latency_against_throughput_with_slos_and_the_chosen_layout(tmp_path, closing):
    out = tmp_path / "serve.png"
    best = dict(ROWS[1])  # a copy, as the JSON's "best" is
    fig = plot_serve_search(ROWS, best, [dict(ROWS[0]), dict(ROWS[3])], SEARCH, out)
    closing(fig)
    ttft, tpot = fig.axes
    assert ttft.get_ylabel().startswith("TTFT p99") and tpot.get_ylabel().startswith("TPOT p99")
    for ax in (ttft, tpot):
        assert ax.get_xlabel().startswith("output tokens/s per GPU")
        assert ax.get_yscale() == "log" and ax.get_legend() is None
    texts = {ax: [t.get_text() for t in ax.texts] for ax in (ttft, tpot)}
    assert "TTFT SLO 2 s (p99)" in texts[ttft] and "TPOT SLO 50 ms (p99)" in texts[tpot]
    slo_lines = [ln for ln in ttft.get_lines() if list(ln.get_ydata()) == [2000.0, 2000.0]]
    assert len(slo_lines) == 1
    chosen = [t for t in texts[ttft] if t.startswith("chosen:")]
    assert chosen == ["chosen: TP2 ×4, 64 in flight\n240 tok/s/GPU, TTFT 1.6 s"]
    assert any(t.startswith("chosen: TP2 ×4") and "TPOT 27 ms" in t for t in texts[tpot])
    stars = [c for c in ttft.collections if c.get_sizes()[0] == 320]
    assert len(stars) == 1 and list(stars[0].get_offsets()[0]) == [240.0, 1600.0]
    assert len(fig.legends) == 1
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert {"TP2", "TP8", "chosen layout", "SLO (p99)", "misses the SLOs"} <= set(legend)
    assert "TP1" not in legend  # does not fit: not drawn
    w, h = Image.open(out).size
    assert 1000 <= w <= 2400 and 400 <= h <= 1200
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    r = canvas.get_renderer()
    box = fig.legends[0].get_window_extent(r)
    assert box.x0 >= max(ax.get_window_extent(r).x1 for ax in fig.axes)
    assert box.x1 <= fig.bbox.width


def test_without_slos_or_a_choice_nothing_is_marked(closing):
    fig = plot_serve_search(ROWS, None, [], {"model": "m"})
    closing(fig)
    for ax in fig.axes:
        assert not [t for t in ax.texts if "SLO" in t.get_text() or "chosen" in t.get_text()]
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "chosen layout" not in legend and "SLO (p99)" not in legend


def test_nothing_fits(closing):
    fig = plot_serve_search([ROWS[-1]], None, [], SEARCH)
    closing(fig)
    assert fig.get_suptitle().endswith("no layout fits")
