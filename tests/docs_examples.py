"""Running the documentation's Python examples and checking the values they show.

An example is a ```python block of README.md or docs/*.md; the blocks of one page run in order in
one namespace, from the repository root. A statement's shown value is its comment: the trailing
`# ...` of its last line, continued by the comment lines right after it. The comment's longest
leading part that reads as a Python literal is the value (`# 132, 1.83e9, 'wgmma'`, `# (160,
48.8)`; prose after it is left alone, a comment with no literal is prose); `# InputError: ...`
says the statement raises InputError with that message (a trailing "..." for the rest). Numbers are compared to the digits shown: `1.83e9` is any
value that rounds to three significant digits as shown, `0.000244...` any value whose digits
begin so, an integer exactly. Strings, booleans and None exactly.

`PERFMODEL_REGEN_DOCS=1 python -m pytest tests/test_docs_examples.py` rewrites every shown
value from the run, each number to the digits it showed (the comments' prose kept).
"""
from __future__ import annotations

import ast
import io
import math
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
ELLIPSIS = "..."


@dataclass
class Shown:
    """A statement's shown value: the literal's text (a comment continued over lines is joined
    with one space) and the page offset of each of its characters (None for a joining space)."""
    text: str
    at: list
    raises: bool = False


def blocks(page: Path) -> list[tuple[int, str]]:
    """(offset of the code in the page, code) of each python block."""
    text = page.read_text(encoding="utf-8")
    return [(m.start(1), m.group(1)) for m in BLOCK.finditer(text)]


def _literal_prefix(text: str) -> str | None:
    """The longest leading part of `text` that is a Python literal (`...` after digits allowed:
    a truncated number), or None; `text` begins with its first non-blank."""
    text = text.lstrip()
    cut = len(text)
    while cut > 0:
        head = text[:cut].rstrip()
        if head and not head.endswith((",", ":")):
            try:
                ast.literal_eval(head.replace(ELLIPSIS, ""))
                if head.replace(ELLIPSIS, "").strip():
                    return head
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                pass
        # the next shorter candidate ends before the last space, comma-space or paren
        cut = max(head.rfind(" "), head.rfind("("), head.rfind(":"), 0) if head else 0
        if cut and text[cut - 1] in "(,":
            cut -= 1
    return None


def shown_values(code: str, offset: int) -> dict[int, Shown]:
    """The shown value of each top-level statement (by its end line, 1-based in the block)."""
    lines = code.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    out: dict[int, Shown] = {}
    for node in ast.parse(code).body:
        last = node.end_lineno  # 1-based
        line = lines[last - 1]
        comment_at = _comment_start(line)
        pieces: list[tuple[int, str]] = []  # (page offset, text) of each comment line's text
        if comment_at is not None:
            pieces.append((offset + starts[last - 1] + comment_at + 1,
                           line[comment_at + 1:].rstrip("\n")))
        k = last
        while k < len(lines) and lines[k].lstrip().startswith("#"):
            at = lines[k].index("#")
            pieces.append((offset + starts[k] + at + 1, lines[k][at + 1:].rstrip("\n")))
            k += 1
        if not pieces:
            continue
        text, where = "", []
        for i, (at, piece) in enumerate(pieces):
            body = piece.lstrip()
            if not body:
                continue
            if text:
                text, where = text + " ", where + [None]
            skip = len(piece) - len(body)
            text += body
            where += [at + skip + j for j in range(len(body))]
        if text.startswith("InputError"):
            out[last] = Shown(text, where, raises=True)
            continue
        lit = _literal_prefix(text)
        if lit is not None:
            out[last] = Shown(lit, where[:len(lit)])
    return out


def _comment_start(line: str) -> int | None:
    """Index of the `#` that starts the line's trailing comment (outside strings), or None."""
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(line).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    for t in toks:
        if t.type == tokenize.COMMENT:
            return t.start[1]
    return None


# ---- comparing and formatting ------------------------------------------------------------------
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)(?:\.\.\.)?")


def _leaves(value) -> list:
    if isinstance(value, dict):
        out = []
        for k, v in value.items():
            out += _leaves(k) + _leaves(v)
        return out
    if isinstance(value, (list, tuple)):
        out = []
        for v in value:
            out += _leaves(v)
        return out
    return [value]


def _number_tokens(text: str) -> list[tuple[int, int, str]]:
    """(start, end, text) of the numbers of a literal's text, strings skipped."""
    out = []
    for t in tokenize.generate_tokens(io.StringIO(text.replace(ELLIPSIS, "@@@")).readline):
        if t.type == tokenize.NUMBER:
            s, e = t.start[1], t.end[1]
            tail = text[e:e + 3]
            if tail == ELLIPSIS:
                e += 3
            out.append((s, e, text[s:e]))
    return out


def _digits(token: str) -> tuple[int, bool]:
    """(significant digits, truncated) of a shown number."""
    truncated = token.endswith(ELLIPSIS)
    t = token.replace(ELLIPSIS, "").lstrip("+-")
    mant = re.split(r"[eE]", t)[0].replace(".", "").lstrip("0")
    return max(1, len(mant)), truncated


def number_matches(actual: float, token: str) -> bool:
    """Whether `actual` reads as the shown number `token` at its digits."""
    shown = float(token.replace(ELLIPSIS, ""))
    if re.fullmatch(r"[-+]?\d+", token):
        return actual == int(token)
    d, truncated = _digits(token)
    if truncated:
        digits = f"{abs(actual):.{d + 6}e}".replace(".", "")[:d]
        return digits == f"{abs(shown):.{d - 1}e}".replace(".", "")[:d]
    return float(f"{actual:.{d}g}") == float(f"{shown:.{d}g}")


def format_like(actual: float, token: str) -> str:
    """`actual` written as `token` is (its notation, its digits; a short value, such as what
    round() returns, as Python writes it)."""
    if re.fullmatch(r"[-+]?\d+", token):
        return str(int(actual))
    short = repr(float(actual))
    if "e" not in short and "e" not in token.lower() and not token.endswith(ELLIPSIS) \
            and len(short.replace("-", "").replace(".", "").strip("0")) <= 6:
        return short
    d, truncated = _digits(token)
    body = token.replace(ELLIPSIS, "")
    if "e" in body.lower():
        mant_digits = d - 1
        text = f"{actual:.{mant_digits}e}"
        m, e = text.split("e")
        text = f"{m}e{int(e)}"
    else:
        decimals = len(body.split(".")[1]) if "." in body else 0
        text = f"{actual:.{decimals}f}"
    return text + (ELLIPSIS if truncated else "")


def compare(actual, shown_text: str) -> str | None:
    """None if `actual` reads as `shown_text`, else what differs."""
    shown = ast.literal_eval(shown_text.replace(ELLIPSIS, ""))
    a, s = _leaves(actual), _leaves(shown)
    if len(a) != len(s):
        return f"shows {shown_text}, got {actual!r}"
    tokens = iter(_number_tokens(shown_text))
    for x, y in zip(a, s):
        if isinstance(y, bool) or y is None or isinstance(y, str):
            if x != y:
                return f"shows {shown_text}, got {actual!r}"
        elif isinstance(y, (int, float)):
            _, _, tok = next(tokens)
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) \
                    or not number_matches(float(x), tok):
                return f"shows {shown_text}, got {actual!r}"
    return None


def message_matches(message: str, shown: str) -> bool:
    """Whether an InputError's message reads as the shown `InputError: ...` comment: the same
    words, the comment's trailing "..." standing for the rest."""
    words = " ".join(shown.split()).removeprefix("InputError:").strip()
    got = " ".join(message.split())
    if words.endswith(ELLIPSIS):
        return got.startswith(words[:-len(ELLIPSIS)].rstrip())
    return got == words


def rewrite(actual, shown: Shown) -> list[tuple[int, int, str]]:
    """Page edits (start, end, text) writing each shown number as the actual value's, at the
    digits it showed; strings, layout and prose kept (a number split over lines is left)."""
    nums = [x for x in _leaves(actual) if isinstance(x, (int, float)) and not isinstance(x, bool)]
    edits = []
    for (s, e, tok), x in zip(_number_tokens(shown.text), nums):
        new = format_like(float(x), tok)
        first, last = shown.at[s], shown.at[e - 1]
        if new != tok and first is not None and last is not None and last - first == e - s - 1:
            edits.append((first, last + 1, new))
    return edits
