"""`plan serve --html` and `sweep --html`: one self-contained page (plotly.js inline once, no
script from the network), the inputs, the same table the text output shows, escaped strings,
bad paths exiting 2 naming the flag; and, in a real headless Chromium, the charts drawn with the
expected number of points (skipped only where no Chromium is installed)."""
from __future__ import annotations

import contextlib
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from perfmodel.cli.main import main
from perfmodel.report import html as report

SERVE = ["plan", "serve", "llama3-8b", "--hw", "h100", "--gpus", "2", "--isl", "512", "--osl",
         "128"]
SLOS = ["--tpot-slo", "20ms", "--ttft-slo", "1s"]
SPACE = """\
description: Llama <serving> & friends
grids:
  - op: gemm
    hw: h100
    m: [1, 64]
    n: 4096
    k: 4096
    dtype: bf16
  - model: llama3-8b
    hw: [H100, H200]
    phase: [prefill, decode]
    batch: [1, 8, 64]
    isl: 1024
    osl: 128
    tp: [1, 2, 3]
    gpus: 2
"""
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]


def cli(*argv) -> tuple[int, str, str]:
    """`perfmodel ARGV`: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


class Tables(HTMLParser):
    """Every <table id=...> of a page: its head cells and its body rows' cells."""

    def __init__(self):
        super().__init__()
        self.tables: dict[str, dict] = {}
        self.current = self.row = self.text = None
        self.in_head = False
        self.classes: dict[str, list[str]] = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and a.get("id"):
            self.current = self.tables.setdefault(a["id"], {"heads": [], "rows": []})
            self.classes[a["id"]] = []
        elif self.current is not None and tag == "thead":
            self.in_head = True
        elif self.current is not None and tag == "tr":
            self.row = []
            self.classes[next(reversed(self.tables))].append(a.get("class") or "")
        elif self.current is not None and tag in ("td", "th"):
            self.text = ""

    def handle_data(self, data):
        if self.text is not None:
            self.text += data

    def handle_endtag(self, tag):
        if self.current is None:
            return
        if tag in ("td", "th") and self.text is not None:
            self.row.append(self.text)
            self.text = None
        elif tag == "thead":
            self.in_head = False
        elif tag == "tr" and self.row is not None:
            self.current["heads" if self.in_head else "rows"].extend(
                self.row if self.in_head else [self.row])
            self.row = None
        elif tag == "table":
            self.current = None


def tables_of(text: str) -> Tables:
    parser = Tables()
    parser.feed(text)
    return parser


def text_table(out: str) -> list[list[str]]:
    """The ranked table of `plan serve`'s text output: heads and rows, cells split on 2+
    spaces."""
    lines = out.splitlines()
    start = next(i for i, x in enumerate(lines) if re.match(r"layout\s+replicas\s+weights", x))
    block = []
    for x in lines[start:]:
        if not x.strip():
            break
        block.append(x)
    return [re.split(r"\s{2,}", x.strip()) for x in block[:1] + block[2:]]


def assert_self_contained(text: str) -> None:
    assert text.startswith("<!DOCTYPE html>")
    assert "<script src" not in text and 'src="http' not in text
    assert text.count("/**\n* plotly.js v") == 1  # the bundle once, inline


@pytest.fixture(scope="module")
def serve_page(tmp_path_factory):
    """A --sweep search with both SLOs: its page, its JSON and its text table."""
    d = tmp_path_factory.mktemp("serve")
    path = d / "report.html"
    code, out, err = cli(*SERVE, "--sweep", *SLOS, "--format", "json", "--html", path)
    assert code == 0 and f"wrote {path}" in err
    code, text, _ = cli(*SERVE, "--sweep", *SLOS)
    assert code == 0
    return path, json.loads(out), text


@pytest.fixture(scope="module")
def sweep_page(tmp_path_factory):
    """A sweep of two op points and a model grid: its page and its CSV."""
    d = tmp_path_factory.mktemp("sweep")
    space = d / "space.yaml"
    space.write_text(SPACE)
    path, table = d / "sweep.html", d / "sweep.csv"
    code, _, err = cli("sweep", space, "-o", table, "--html", path)
    assert code == 0 and f"wrote {path}" in err
    import csv
    with open(table, newline="") as f:
        header, *rows = list(csv.reader(f))
    return path, header, rows


# ---- the page, everywhere --------------------------------------------------------------------
def test_serve_page_is_one_self_contained_file_with_the_inputs(serve_page):
    path, _, _ = serve_page
    text = path.read_text(encoding="utf-8")
    assert_self_contained(text)
    inputs = dict(tables_of(text).tables["inputs"]["rows"])
    assert inputs["model"] == "llama3-8b" and inputs["hardware"] == "H100-SXM"
    assert inputs["GPUs"] == "2" and inputs["engine"] == "vllm" and inputs["KV cache"] == "bf16"
    assert inputs["TPOT SLO"] == "20 ms p99" and inputs["TTFT SLO"] == "1000 ms p99"
    assert "isl 512" in inputs["workload"] and "osl 128" in inputs["workload"]
    assert "--sweep" in inputs["flags"] and "--tpot-slo 20ms" in inputs["flags"]
    assert 'id="pareto"' in text and 'id="load"' in text  # the sweep has loads per layout


def test_serve_page_table_is_the_text_table(serve_page):
    path, d, text = serve_page
    tables = tables_of(path.read_text(encoding="utf-8")).tables
    heads, *rows = text_table(text)
    assert tables["layouts"]["heads"] == heads
    assert tables["layouts"]["rows"] == rows
    assert len(rows) == sum(r["point"] == "workload" and r["fits"] for r in d["rows"])
    # the sweep's Pareto front table, as the text prints it
    assert len(tables["front"]["rows"]) == len(d["pareto"])
    assert tables["statistics"]["heads"] == ["", "mean", "median", "p90", "p99"]


def test_offline_page_highlights_the_chosen_layout_and_has_no_load_chart(tmp_path):
    path = tmp_path / "offline.html"
    code, out, _ = cli(*SERVE, "--format", "json", "--html", path)
    assert code == 0
    d = json.loads(out)
    page = tables_of(path.read_text(encoding="utf-8"))
    chosen = [i for i, c in enumerate(page.classes["layouts"]) if c == "chosen"]
    assert len(chosen) == 1
    assert page.tables["layouts"]["rows"][chosen[0] - 1][0] == d["best"]["layout"]
    text = path.read_text(encoding="utf-8")
    assert 'id="pareto"' in text and 'id="load"' not in text and 'id="front"' not in text


def test_user_strings_are_escaped(serve_page):
    _, d, _ = serve_page
    evil = "<img src=x onerror=alert(1)>"
    rows = [dict(r, layout=evil + r["layout"]) for r in d["rows"]]
    search = dict(d["search"], model=evil, hardware="H&M <b>")
    text = report.serve_report(rows, rows[0], [], search, {"isl": evil})
    assert evil not in text and "<b>" not in text
    assert "&lt;img src=x onerror=alert(1)&gt;" in text and "H&amp;M &lt;b&gt;" in text


def test_sweep_page_holds_every_row_and_the_inputs(sweep_page):
    path, header, rows = sweep_page
    text = path.read_text(encoding="utf-8")
    assert_self_contained(text)
    page = tables_of(text).tables
    assert page["rows"]["heads"] == header and len(page["rows"]["rows"]) == len(rows) == 38
    assert [r[0] for r in page["rows"]["rows"]] == [r[0] for r in rows]
    inputs = dict(page["inputs"]["rows"])
    assert inputs["description"] == "Llama <serving> & friends"  # escaped in the file:
    assert "Llama &lt;serving&gt; &amp; friends" in text and "<serving>" not in text
    assert inputs["points"] == "38" and inputs["level"] == "pipes"
    assert "phase: prefill, decode" in inputs["grid 1 (model, 36 points)"]
    assert 'id="pareto"' in text and 'id="load"' in text


def test_sweep_of_ops_only_has_no_charts(tmp_path):
    space = tmp_path / "ops.yaml"
    space.write_text(SPACE.split("  - model")[0])
    path = tmp_path / "ops.html"
    assert cli("sweep", space, "--html", path)[0] == 0
    text = path.read_text(encoding="utf-8")
    assert "no charts" in text and "js-plotly-plot" not in text.split("</script></head>")[1]
    assert len(tables_of(text).tables["rows"]["rows"]) == 2


@pytest.mark.parametrize("argv", [SERVE, ["sweep", "SPACE"]], ids=["plan", "sweep"])
def test_bad_paths_exit_2_naming_the_flag_before_any_work(tmp_path, argv):
    space = tmp_path / "space.yaml"
    space.write_text(SPACE)
    argv = [str(space) if a == "SPACE" else a for a in argv]
    for target, why in ((tmp_path, "is a directory"),
                        (tmp_path / "missing" / "r.html", "no such directory")):
        code, out, err = cli(*argv, "--html", target)
        assert code == 2 and out == ""
        assert err.splitlines() == [f"perfmodel: error: --html {target}: {why}"
                                    + (" (expected a file path)" if why == "is a directory"
                                       else f" '{target.parent}'")]


def test_write_failure_exits_2_naming_the_flag(tmp_path, monkeypatch):
    def refuse(*_, **__):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(Path, "write_text", refuse)
    path = tmp_path / "r.html"
    code, _, err = cli(*SERVE, "--tp", "2", "--html", path)
    assert code == 2
    assert err.splitlines()[-1] == f"perfmodel: error: --html {path}: cannot write " \
                                   "(Permission denied)"


def test_missing_plotly_and_too_large_a_sweep_are_one_line_errors(tmp_path, monkeypatch):
    space = tmp_path / "big.yaml"
    space.write_text("grids:\n  - op: gemm\n    hw: h100\n    m: {range: [1, 30000, 1]}\n"
                     "    n: 64\n    k: 64\n    dtype: bf16\n")
    code, out, err = cli("sweep", space, "--html", tmp_path / "big.html")
    assert code == 2 and out == "" and err.startswith("perfmodel: error: --html: a report page "
                                                      "holds at most 20,000 points")
    monkeypatch.setattr(report.importlib.util, "find_spec", lambda name: None)
    code, out, err = cli(*SERVE, "--html", tmp_path / "r.html")
    assert code == 2 and out == "" and "--html: the report page needs plotly" in err


def test_front_keeps_the_points_no_other_beats():
    pts = [(1.0, 10.0, "a"), (2.0, 5.0, "b"), (3.0, 30.0, "c"), (3.0, 20.0, "d"),
           (4.0, 25.0, "e"), (5.0, 40.0, "f")]
    assert [p[2] for p in report.front(pts)] == ["a", "c", "f"]
    assert report.front([]) == []


# ---- in a real browser -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser():
    """One headless Chromium (Debian's, driven by Playwright) for the module."""
    if not CHROMIUM.exists():
        pytest.skip(f"browser test of the HTML report: no Chromium at {CHROMIUM}; .ci/run "
                    "installs it (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="browser test of the HTML "
                                   "report: playwright is not installed (pip install "
                                   "\".[test]\")")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


CHARTS_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].map(gd => ({
    id: gd.id,
    traces: gd.data.map(t => [t.name, t.x.length, t.y.length]),
    drawn: gd.querySelectorAll('.scatterlayer .point').length,
    shapes: (gd.layout.shapes || []).length,
    annotations: (gd.layout.annotations || []).map(a => a.text),
    xtitles: Object.keys(gd._fullLayout).filter(k => /^xaxis\\d*$/.test(k)).sort()
        .map(k => gd._fullLayout[k].title.text)}))"""


def open_page(browser, path: Path, shot: Path):
    """Load the page from disk with no network; its charts as CHARTS_JS reads them, after a
    full-page screenshot. Fails on a page error or any request that is not the file."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors, requests = [], []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("request", lambda r: requests.append(r.url))
    page.goto(path.as_uri())
    page.wait_for_function("() => { const g = [...document.querySelectorAll('.js-plotly-plot')];"
                           " return g.length > 0 && g.every(x => x._fullLayout); }")
    charts = {c["id"]: c for c in page.evaluate(CHARTS_JS)}
    page.screenshot(path=str(shot), full_page=True)
    page.close()
    assert errors == []
    assert [u for u in requests if not u.startswith("file://")] == []
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(shot.read_bytes()[16:20], "big"), \
        int.from_bytes(shot.read_bytes()[20:24], "big")
    assert width == 1400 and height > 900
    return charts


def test_serve_charts_render_every_point(browser, serve_page, tmp_path):
    path, d, _ = serve_page
    shot = tmp_path / "report.png"
    charts = open_page(browser, path, shot)
    assert set(charts) == {"pareto", "load"}
    fits = [r for r in d["rows"] if r["fits"]]
    top = d["best"]
    pareto = charts["pareto"]
    expected = []
    for key in ("tpot_p99_s", "ttft_p99_s"):
        pts = [(r[key] * 1e3, r["output_tokens_per_s_per_gpu"], "") for r in fits if r[key]]
        meets = sum(r["meets_slo"] for r in fits if r[key])
        assert 0 < meets < len(pts)
        expected += [["misses an SLO", len(pts) - meets], ["meets the SLOs", meets],
                     ["Pareto front", len(report.front(pts))],
                     [f"chosen: {top['layout']} x {top['replicas']}, {top['concurrency']} in "
                      "flight", 1]]
    assert [t[:2] for t in pareto["traces"]] == expected
    assert len(fits) == 18  # 3 layouts x (the workload + 5 loads)
    assert pareto["drawn"] == sum(n for _, n in expected)  # every marker in the SVG
    assert pareto["shapes"] == 2 and {"TPOT SLO 20 ms", "TTFT SLO 1000 ms"} <= set(
        pareto["annotations"])
    assert pareto["xtitles"] == ["TPOT p99 ms (log)", "TTFT p99 ms (log)"]
    load = charts["load"]
    layouts = sorted({r["layout"] for r in fits})
    assert sorted(t[0] for t in load["traces"]) == sorted(layouts * 2)
    assert all(t[1] == t[2] == 5 for t in load["traces"])  # c = 1, 4, 16, 64, 256
    assert load["drawn"] == 5 * 2 * len(layouts)


def test_sweep_charts_render_every_model_point(browser, sweep_page, tmp_path):
    path, header, rows = sweep_page
    charts = open_page(browser, path, tmp_path / "sweep.png")
    col = {c: i for i, c in enumerate(header)}
    ok = [r for r in rows if r[col["kind"]] == "model" and r[col["time_s"]]]
    for phase, panel in (("decode", 0), ("prefill", 3)):
        traces = charts["pareto"]["traces"][panel:panel + 3]
        n = sum(r[col["phase"]] == phase for r in ok)
        assert traces[0][:2] == ["every point that fits", n] and n == 12
        assert traces[1][0] == "Pareto front" and 1 <= traces[1][1] <= n
        assert traces[2][:2] == ["best tokens/s/GPU that fits", 1]
    assert charts["pareto"]["drawn"] == sum(t[1] for t in charts["pareto"]["traces"])
    # step time against batch: per phase, one line of 3 batches per GPU and tp
    assert [t[1] for t in charts["load"]["traces"]] == [3] * 8
    assert charts["load"]["drawn"] == 24
