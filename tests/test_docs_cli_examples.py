"""The documentation's shell examples that show their output print that output.

In a fenced block of README.md or docs/*.md, a line `$ perfmodel ARGS` followed by lines that do
not start with `$ ` is a command and the output it shows (stdout and stderr as one text; a
`> FILE` redirect keeps stdout out of it; `$ echo $?` checks the exit status just before). The
command runs in-process (perfmodel.cli.main) from the repository root. Each shown line must match
the printed line, in order: the same words with the same spacing collapsed, numbers to the
digits shown (tests/docs_examples.py number_matches); a shown line `...` skips printed lines
until the next shown line matches. A command naming a file the repository does not have is not
run and must be listed in NEEDS_FILES; a file the command writes (-o, --output, --plot) goes to
a temporary folder. `PERFMODEL_REGEN_DOCS=1` rewrites each checked command's
shown output with what it printed (a leading `...` kept)."""
from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
from dataclasses import dataclass

import pytest

from docs_examples import NUMBER, PAGES, ROOT, number_matches
from perfmodel.cli.main import main

REGEN = os.environ.get("PERFMODEL_REGEN_DOCS") == "1"
FENCE = re.compile(r"^```[\w-]*\n(.*?)^```", re.M | re.S)
# commands whose shown output needs a file the examples only describe (not run)
NEEDS_FILES = {"bad.yaml"}


@dataclass
class Example:
    page: str
    line: int          # 1-based line of the command in the page
    argv: list
    redirect: bool     # stdout sent to a file: not shown
    shown: list        # the shown output lines
    start: int         # offset of the first shown line in the page
    end: int           # offset just after the last shown line (with its newline)
    status: int | None = None  # the `$ echo $?` value shown after it, if any


def examples() -> list[Example]:
    out = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            lines = m.group(1).splitlines(keepends=True)
            offsets = [m.start(1)]
            for line in lines:
                offsets.append(offsets[-1] + len(line))
            i = 0
            while i < len(lines):
                line = lines[i].rstrip("\n")
                if not line.startswith("$ perfmodel "):
                    i += 1
                    continue
                j = i + 1
                while j < len(lines) and not lines[j].startswith("$ "):
                    j += 1
                status = None
                if j < len(lines) and lines[j].strip() == "$ echo $?" and j + 1 < len(lines):
                    status = int(lines[j + 1])
                if j > i + 1:
                    words = shlex.split(line[2:], comments=True)
                    redirect = ">" in words
                    argv = words[1:words.index(">")] if redirect else words[1:]
                    out.append(Example(str(page.relative_to(ROOT)),
                                       text.count("\n", 0, offsets[i]) + 1, argv, redirect,
                                       [x.rstrip("\n") for x in lines[i + 1:j]],
                                       offsets[i + 1], offsets[j], status))
                i = j
    return out


EXAMPLES = examples()


def needed_file(ex: Example) -> str | None:
    for a in ex.argv:
        if re.search(r"\.(ya?ml|json|csv)$", a) and not (ROOT / a).exists():
            return a
    return None


def run(argv: list, keep_stdout: bool) -> tuple[int, list]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as e:  # argparse's usage errors
            status = e.code
    text = (out.getvalue() if keep_stdout else "") + err.getvalue()
    return status, text.rstrip("\n").splitlines()


def line_matches(shown: str, printed: str) -> bool:
    """The same words (spacing collapsed), numbers to the digits shown."""
    shown, printed = " ".join(shown.split()), " ".join(printed.split())
    s_nums, p_nums = NUMBER.findall(shown), NUMBER.findall(printed)
    if NUMBER.split(shown) != NUMBER.split(printed) or len(s_nums) != len(p_nums):
        return False
    return all(number_matches(float(p.replace("...", "")), s) for s, p in zip(s_nums, p_nums))


def mismatch(shown: list, printed: list) -> str | None:
    """None if the printed lines read as the shown ones (module docstring), else where not."""
    k = 0
    skipping = False
    for s in shown:
        if s.strip() == "...":
            skipping = True
            continue
        while k < len(printed) and not line_matches(s, printed[k]):
            if not skipping:
                return f"shows {s!r}, printed {printed[k]!r}"
            k += 1
        if k == len(printed):
            return f"shows {s!r}, not printed"
        k += 1
        skipping = False
    if k < len(printed) and not skipping:
        return f"printed more: {printed[k]!r}"
    return None


# options whose value is a file the command writes: sent to the test's temporary folder
WRITES = ("-o", "--output", "--plot")


def into(argv: list, folder) -> list:
    """argv with every written file moved into `folder`."""
    out = list(argv)
    for k, a in enumerate(out[:-1]):
        if a in WRITES:
            out[k + 1] = str(folder / os.path.basename(out[k + 1]))
    return out


@pytest.mark.parametrize("ex", EXAMPLES, ids=lambda e: f"{e.page}:{e.line}")
def test_shown_output_is_printed(ex, monkeypatch, tmp_path):
    missing = needed_file(ex)
    if missing:
        assert missing in NEEDS_FILES, f"{ex.page}:{ex.line} needs {missing}: add it or list it"
        pytest.skip(f"needs {missing}, which the example describes")
    monkeypatch.chdir(ROOT)
    status, printed = run(into(ex.argv, tmp_path), keep_stdout=not ex.redirect)
    if ex.status is not None:
        assert status == ex.status, f"{ex.page}:{ex.line}: exit {status}, shows {ex.status}"
    problem = mismatch(ex.shown, printed)
    if problem and REGEN:
        page = ROOT / ex.page
        # the page may have been rewritten by an earlier example: find this one again
        ex = next(e for e in examples() if e.page == ex.page and e.argv == ex.argv)
        text = page.read_text(encoding="utf-8")
        keep = ["..."] if ex.shown and ex.shown[0].strip() == "..." else []
        tail = text[ex.end:]
        new = "\n".join(keep + printed) + "\n"
        page.write_text(text[:ex.start] + new + tail, encoding="utf-8")
        pytest.skip(f"rewrote the output of {ex.page}:{ex.line}")
    assert problem is None, f"{ex.page}:{ex.line}: {problem}"


def test_the_examples_are_found():
    names = {" ".join(e.argv[:2]) for e in EXAMPLES}
    assert {"hw show", "plan serve"} <= names
