"""The documentation's Python examples run, and the values they show are what they return
(tests/docs_examples.py says how a shown value is read and compared). After a change to the
model, `PERFMODEL_REGEN_DOCS=1 python -m pytest tests/test_docs_examples.py` rewrites the shown
values from the run."""
from __future__ import annotations

import ast
import os

import pytest

import perfmodel as pm
from docs_examples import PAGES, ROOT, blocks, compare, message_matches, rewrite, shown_values

REGEN = os.environ.get("PERFMODEL_REGEN_DOCS") == "1"
EXAMPLE_PAGES = [p for p in PAGES if blocks(p)]


def run_page(page):
    """Run the page's blocks in one namespace; (problems, rewrites as (start, end, text))."""
    text = page.read_text(encoding="utf-8")
    ns: dict = {}
    problems, rewrites = [], []
    for offset, code in blocks(page):
        shown = shown_values(code, offset)
        first_line = text.count("\n", 0, offset) + 1
        for node in ast.parse(code).body:
            where = f"{page.relative_to(ROOT)}:{first_line + node.lineno - 1}"
            s = shown.get(node.end_lineno)
            try:
                if isinstance(node, ast.Expr):
                    value = eval(compile(ast.Expression(node.value), where, "eval"), ns)
                else:
                    exec(compile(ast.Module([node], []), where, "exec"), ns)
                    value = None
            except pm.InputError as e:
                if s is None or not s.raises:
                    problems.append(f"{where}: raised InputError, shown as not raising")
                elif not message_matches(str(e), s.text):
                    problems.append(f"{where}: shows {s.text!r}, raised 'InputError: {e}'")
                continue
            if s is None:
                continue
            if s.raises:
                problems.append(f"{where}: shown to raise InputError, it returned")
                continue
            diff = compare(value, s.text)
            if diff is not None:
                problems.append(f"{where}: {diff}")
                rewrites += rewrite(value, s)
    return problems, rewrites


@pytest.mark.parametrize("page", EXAMPLE_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_examples_show_what_they_return(page, monkeypatch):
    monkeypatch.chdir(ROOT)  # the examples name files from the repository root
    problems, rewrites = run_page(page)
    if REGEN and rewrites:
        text = page.read_text(encoding="utf-8")
        for start, end, new in sorted(rewrites, reverse=True):
            text = text[:start] + new + text[end:]
        page.write_text(text, encoding="utf-8")
        pytest.skip(f"rewrote {len(rewrites)} shown values of {page.name}")
    assert not problems, "\n".join(problems)


def test_the_reader_takes_literals_and_leaves_prose():
    from docs_examples import _literal_prefix, number_matches
    assert _literal_prefix(" 132, 1.83e9, 'wgmma'") == "132, 1.83e9, 'wgmma'"
    assert _literal_prefix(" 248: GPUs for 100k output tokens/s") == "248"
    assert _literal_prefix(" 1.98e9, 1.5555e9 (clock domains)") == "1.98e9, 1.5555e9"
    assert _literal_prefix(" what `perfmodel hw show` prints") is None
    assert number_matches(1.8301e9, "1.83e9") and not number_matches(1.84e9, "1.83e9")
    assert number_matches(0.00024417, "0.000244...") and not number_matches(0.000245, "0.000244...")
    assert number_matches(48.84, "48.8") and not number_matches(48.86, "48.8")
    assert number_matches(160, "160") and not number_matches(160.4, "160")
