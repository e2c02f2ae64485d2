"""The documentation lives in the repository and what cites it resolves.

(a) every mention of a Markdown file in a tracked text file names a file of the repository
    (relative to the root, to docs/, or to the mentioning file's folder);
(b) no file points outside the repository (the parent folder the project was developed beside);
(c) every `docs/<page>.md "Section"` or `docs/<page>.md §N` citation, and the same forms after a
    Markdown link to a page, names a heading that exists in that page.

Files are those git tracks plus untracked ones it does not ignore (read-only git commands); without
git, a walk of the tree that skips build and cache folders.
"""
from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
MENTION_SUFFIXES = {".py", ".yaml", ".yml", ".toml", ".ipynb", ".md", ".sh", ".cu", ".h"}
SKIP_DIRS = {".git", "build", "dist", "__pycache__", ".hypothesis", ".pytest_cache", ".venv",
             ".ipynb_checkpoints"}

# a path-like token ending in .md; the character before must not continue a path or a URL
MD_MENTION = re.compile(r"(?<![\w./:@-])((?:\.\.?/)*[\w-][\w./-]*\.md)(?![\w-])")
# `owner/repo:path.md`, `owner/repo@sha:path.md` and URLs name files of other repositories
EXTERNAL_PREFIX = re.compile(r"(?:://|[\w.-]+/[\w.-]+(?:@[\w.…-]+)?:)[^\s\"'`)\]]*$")
OUTSIDE = re.compile(r"\.\./" + "shared" + r"\b|(?<![\w.-])" + "shared" + r"/(?=[\w.-])")
DOC_CITE = re.compile(r"(?:(?<![\w./-])docs/([\w-]+\.md)|\]\(((?:\.\.?/)*[\w./-]*[\w-]\.md)\))")
QUOTED = re.compile(r'[ \t]*\\?"([^"\\\n]+)\\?"')
SECTIONS = re.compile(r"[ \t]*((?:§[ \t]?\d+(?:\.\d+)*(?:[ \t]?\([a-z]\))?"
                      r"(?:[ \t]?[–-][ \t]?(?:\d+(?:\.\d+)*|\([a-z]\)))?"
                      r"(?:[ \t]*(?:,|;|\+|and)[ \t]*(?=§))?)+)")
SECTION_NUMBER = re.compile(r"(?:§[ \t]?|[–-][ \t]?)(\d+(?:\.\d+)*)")


@functools.lru_cache(maxsize=1)
def repo_files() -> tuple[Path, ...]:
    try:
        out = []
        for extra in ((), ("--others", "--exclude-standard")):
            res = subprocess.run(["git", "ls-files", "-z", *extra], cwd=ROOT, capture_output=True,
                                 check=True, timeout=30)
            out += [p for p in res.stdout.decode().split("\0") if p]
        files = {ROOT / p for p in out}
    except (OSError, subprocess.SubprocessError):
        files = {p for p in ROOT.rglob("*")
                 if not any(part in SKIP_DIRS or part.endswith(".egg-info")
                            for part in p.relative_to(ROOT).parts)}
    return tuple(sorted(p for p in files if p.is_file()))  # tracked but deleted: not there


@functools.lru_cache(maxsize=None)
def text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def resolve_md(name: str, mentioned_in: Path) -> Path | None:
    for base in (ROOT, DOCS, mentioned_in.parent):
        p = (base / name).resolve()
        if p.is_file() and ROOT in p.parents:
            return p
    return None


@functools.lru_cache(maxsize=None)
def headings(page: Path) -> tuple[frozenset[str], frozenset[str]]:
    """(normalized heading titles, section numbers) of a Markdown page, code blocks skipped."""
    titles, numbers, fenced = set(), set(), False
    for line in (text(page) or "").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        m = None if fenced else re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        title = normalize(m.group(1))
        titles.add(title)
        num = re.match(r"(\d+(?:\.\d+)*)\.?\s+(.*)", title)
        if num:
            numbers.add(num.group(1))
            titles.add(num.group(2))
    return frozenset(titles), frozenset(numbers)


def normalize(title: str) -> str:
    return re.sub(r"\s+", " ", title.replace("`", "").replace("*", "")).strip().rstrip(":").lower()


def mention_files() -> list[Path]:
    return [p for p in repo_files() if p.suffix in MENTION_SUFFIXES and text(p) is not None]


def test_docs_exist():
    for page in ("README.md", "cli.md", "graph-format.md", "model-format.md", "hwspec-format.md",
                 "json-output.md", "api.md", "design.md", "hardware-notes.md", "studies.md"):
        assert (DOCS / page).is_file(), f"docs/{page} is missing"


def test_markdown_mentions_resolve():
    missing = []
    for path in mention_files():
        for lineno, line in enumerate(text(path).splitlines(), 1):
            for m in MD_MENTION.finditer(line):
                if EXTERNAL_PREFIX.search(line[:m.start()]):
                    continue  # part of a URL or of another repository's path
                if resolve_md(m.group(1), path) is None:
                    missing.append(f"{rel(path)}:{lineno}: {m.group(1)}")
    assert not missing, "Markdown files mentioned but not in the repository:\n" + "\n".join(missing)


def test_nothing_points_outside_the_repository():
    found = []
    for path in repo_files():
        body = text(path)
        if body is None or path == Path(__file__).resolve():
            continue
        for lineno, line in enumerate(body.splitlines(), 1):
            if OUTSIDE.search(line):
                found.append(f"{rel(path)}:{lineno}: {line.strip()[:120]}")
    assert not found, "references outside the repository:\n" + "\n".join(found)


def test_doc_citations_name_existing_headings():
    bad = []
    for path in mention_files():
        for lineno, line in enumerate(text(path).splitlines(), 1):
            for m in DOC_CITE.finditer(line):
                page = DOCS / m.group(1) if m.group(1) else resolve_md(m.group(2), path)
                where = f"{rel(path)}:{lineno}"
                if page is None or not page.is_file():
                    bad.append(f"{where}: no page {m.group(1) or m.group(2)}")
                    continue
                titles, numbers = headings(page)
                rest = line[m.end():]
                quoted, sections = QUOTED.match(rest), SECTIONS.match(rest)
                if quoted and normalize(quoted.group(1)) not in titles:
                    bad.append(f"{where}: {rel(page)} has no heading \"{quoted.group(1)}\"")
                elif sections:
                    for n in SECTION_NUMBER.findall(sections.group(1)):
                        if n not in numbers:
                            bad.append(f"{where}: {rel(page)} has no section §{n}")
    assert not bad, "citations of missing sections:\n" + "\n".join(bad)


@pytest.mark.parametrize("line, expected", [
    ('see docs/cli.md "Exit codes"', [("cli.md", "Exit codes", ())]),
    ("docs/hardware-notes.md §4.1, §8.7; settle with §9(a)", [("hardware-notes.md", None,
                                                                 ("4.1", "8.7"))]),
    ("(docs/studies.md §2.2–2.3)", [("studies.md", None, ("2.2", "2.3"))]),
    ("the [notes](hardware-notes.md) §6.1", [("hardware-notes.md", None, ("6.1",))]),
])
def test_citation_parser(line, expected):
    got = []
    for m in DOC_CITE.finditer(line):
        rest = line[m.end():]
        q, s = QUOTED.match(rest), SECTIONS.match(rest)
        got.append((m.group(1) or m.group(2), q.group(1) if q else None,
                    tuple(SECTION_NUMBER.findall(s.group(1))) if s and not q else ()))
    assert got == expected
