"""Plain-text tables for the CLI and reports (no dependencies; right-aligns numbers)."""
from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

GIB = 2.0 ** 30


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


# Dotted name parts that are only a layer index: "12", "l12", "layer12", "block_3".
INDEX_PART = re.compile(r"^(?:l|layer|layers|block|blocks|blk)?_?\d+$", re.IGNORECASE)
_TRAILING_INDEX = re.compile(r"[_\-]\d+$")  # "attn_3" -> "attn"; "fc1" stays (fc1 != fc2)


def role_of(name: str, fallback: str = "") -> str:
    """An op's name without its layer index (`l12.qkv.dgrad` → `qkv.dgrad`), so every layer's
    copy of an op falls in one group; a bare index falls back to `fallback` (the op type)."""
    parts = [p for p in re.split(r"[./]", name) if not INDEX_PART.match(p)]
    if parts:
        parts[-1] = _TRAILING_INDEX.sub("", parts[-1]) or parts[-1]
    return ".".join(parts) or fallback or name


def prediction_table(pred, all_ops: bool = False, max_rows: int = 60) -> str:
    """Per-op table (grouped across layers when long), then totals by op type and by bound."""
    total = pred.total_time_s or 1.0
    lines = [f"{pred.graph} on {pred.hardware.name} ({pred.level}): total {total * 1e3:.4g} ms "
             f"(makespan), {len(pred.ops)} ops"]
    group = all_ops or len(pred.ops) <= max_rows
    rows: dict[str, list] = {}
    for o in pred.ops:
        key = o.name if group else role_of(o.name, o.op.name)
        r = rows.setdefault(key, [key, o.op.name, 0, 0.0, o.estimate.bound, 0.0, 0.0])
        r[2] += 1
        r[3] += o.time_s
        r[5] += o.estimate.roofline_time_s
        r[6] += o.estimate.time_s
    body = sorted(rows.values(), key=lambda r: -r[3]) if not group else list(rows.values())
    headers = ["op" if group else "op (all layers)", "type", "count", "time_us", "share",
               "bound", "% of roofline"]
    table = [[r[0], r[1], r[2], f"{r[3] * 1e6:.4g}", f"{r[3] / total:.1%}", r[4],
              f"{r[5] / r[6]:.0%}" if r[6] else "-"] for r in body]
    if group:
        headers.pop(2)
        table = [r[:2] + r[3:] for r in table]
    lines.append(format_table(headers, table))
    if not group:
        lines.append(f"({len(pred.ops)} ops grouped by role across layers; --all lists each)")
    for key, title in (("op", "by op type"), ("bound", "by bound")):
        t = pred.totals_by(key)
        lines.append(f"\ntotals {title} (sum of op times; overlap makes it exceed the makespan)")
        lines.append(format_table([key, "time_us", "share"],
                                  [[k, f"{v * 1e6:.4g}", f"{v / total:.1%}"] for k, v in t.items()]))
    if pred.pipeline_bubble_s:
        lines.append(f"\npipeline: {pred.pipeline.microbatches} microbatches x "
                     f"{pred.microbatch_time_s * 1e3:.4g} ms, bubble "
                     f"{pred.pipeline_bubble_s * 1e3:.4g} ms")
    return "\n".join(lines)


# ---- `plan serve`'s tables (the CLI's text and the HTML report print the same cells) ---------
def number(value: Any, scale: float = 1.0, digits: int = 0) -> str:
    """A number as the serving tables print it (`-` where there is none)."""
    if value is None:
        return "-"
    return f"{value * scale:.{digits}f}"


# head, row key, scale, digits (None: the value as it is)
SERVE_COLUMNS: tuple[tuple[str, str, float, int | None], ...] = (
    ("layout", "layout", 1, None), ("replicas", "replicas", 1, None),
    ("weights GiB", "weights_bytes", 1 / GIB, 1), ("KV GiB", "kv_cache_bytes", 1 / GIB, 1),
    ("act GiB", "activation_bytes", 1 / GIB, 1), ("tok/s", "output_tokens_per_s", 1, 0),
    ("tok/s/GPU", "output_tokens_per_s_per_gpu", 1, 0),
    ("tok/s/user", "output_tokens_per_s_per_user", 1, 1),
    ("TTFT p50 ms", "ttft_p50_s", 1e3, 0), ("TTFT p99 ms", "ttft_p99_s", 1e3, 0),
    ("TPOT p50 ms", "tpot_p50_s", 1e3, 1), ("TPOT p99 ms", "tpot_p99_s", 1e3, 1),
    ("E2E p50 s", "e2e_p50_s", 1, 1), ("E2E p99 s", "e2e_p99_s", 1, 1),
    ("preempt", "preemptions", 1, None), ("requests", "requests", 1, None))
FRONT_COLUMNS: tuple[tuple[str, str, float, int | None], ...] = (
    ("layout", "layout", 1, None), ("replicas", "replicas", 1, None),
    ("in flight", "concurrency", 1, None), ("tok/s/GPU", "output_tokens_per_s_per_gpu", 1, 0),
    ("tok/s/user", "output_tokens_per_s_per_user", 1, 1), ("TTFT p99 ms", "ttft_p99_s", 1e3, 0),
    ("TPOT p99 ms", "tpot_p99_s", 1e3, 1))
# the benchmark clients' latency statistics of one row: metric, label, scale, digits
LATENCY_ROWS = (("ttft", "TTFT ms", 1e3, 1), ("tpot", "TPOT ms", 1e3, 2),
                ("itl", "ITL ms", 1e3, 2), ("e2e", "E2E s", 1, 2))
LATENCY_HEADS = ["", "mean", "median", "p90", "p99"]


def column_heads(columns, slo: bool) -> list[str]:
    return [c[0] for c in columns] + (["SLO"] if slo else [])


def row_cells(row: Mapping[str, Any], columns, slo: bool) -> list[str]:
    """One row's cells under `columns` (SERVE_COLUMNS, FRONT_COLUMNS), and whether it meets the
    SLOs when there are SLOs."""
    cells = []
    for _, key, scale, digits in columns:
        v = row.get(key)
        if key == "concurrency":
            cells.append(str(v or "offline"))
        elif digits is None:
            cells.append("-" if v is None else str(v))
        else:
            cells.append(number(v, scale, digits))
    return cells + (["yes" if row.get("meets_slo") else "no"] if slo else [])


def latency_cells(row: Mapping[str, Any]) -> list[list[str]]:
    """Mean, median, p90 and p99 of one row's TTFT, TPOT, ITL and E2E (LATENCY_ROWS)."""
    return [[label] + [number(row.get(f"{metric}_{k}_s"), scale, digits)
                       for k in ("mean", "p50", "p90", "p99")]
            for metric, label, scale, digits in LATENCY_ROWS]
