"""Plain-text tables for the CLI and reports (no dependencies; right-aligns numbers)."""
from __future__ import annotations

from typing import Sequence


def _is_num(s: str) -> bool:
    try:
        float(s.rstrip("%x"))
        return True
    except ValueError:
        return False


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    def line(values):
        return "  ".join(v.rjust(w) if _is_num(v) else v.ljust(w)
                         for v, w in zip(values, widths)).rstrip()
    out = [line(headers), line(["-" * w for w in widths])]
    out += [line(r) for r in cells]
    return "\n".join(out)
