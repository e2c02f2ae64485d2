"""Lazily filled, memoized interpolation tables for the step cost (cost.py).

A simulation prices thousands of steps, so each part of a step is read from nodes evaluated once
with the op models and interpolated between them:
  Axis      every integer up to a base, then geometric nodes, `per_octave` per doubling;
  TileAxis  every integer up to `exact_to`, then both ends of each 64-token interval up to
            `tiled_to` (GEMM M-tiles, and with them wave counts and cuBLAS-style tile choices,
            change only at multiples of the 64-row MMA tile, so time is smooth inside an interval
            and may jump across its ends), geometric multiples of 64 above;
  Table1    a tuple-valued function of one integer: linear between nodes, memoized per point;
  Table2    a pair-valued function of two integers: linear in y; in x linear or log-log (exact
            for power laws: a flat launch floor, linear, or quadratic causal attention work).
`exact=True` evaluates every point itself (memoized): the reference the interpolation error is
measured against.
"""
from __future__ import annotations

import math
from typing import Callable


class Axis:
    """Interpolation nodes of one axis: every integer from `lo` up to `base`, then
    round(base · 2^(k / per_octave)) for k = 1, 2, ...; `bracket(x)` gives (x0, x1, w) with
    x0 ≤ x ≤ x1 and the weight w of x1 (0 where x is a node)."""

    def __init__(self, per_octave: int, lo: int = 1, base: int = 16):
        self.per_octave = per_octave
        self.lo = lo
        self.base = max(base, 2 * per_octave)  # node spacing ≥ ~1.4 past the base
        self._around: dict[tuple[float, int], tuple[int, int]] = {}  # between_nodes' cache

    def node(self, k: int) -> int:
        return round(self.base * 2.0 ** (k / self.per_octave))

    def bracket(self, x: float) -> tuple[int, int, float]:
        if x <= self.lo:
            return self.lo, self.lo, 0.0
        if x <= self.base:
            x0 = int(x)
            return (x0, x0, 0.0) if x0 == x else (x0, x0 + 1, x - x0)
        return self.between_nodes(x, self.base)

    def between_nodes(self, x: float, origin: float) -> tuple[int, int, float]:
        """The two nodes around x above `origin`, where node(k) grows by a factor 2 every
        `per_octave` steps, and x's weight between them.

        The nodes are integers, strictly increasing (spacing > 1), so the pair around x is that
        around floor(x) + 1/2 (largest node ≤ floor(x), smallest above it) unless x is a node:
        it is searched once per floor(x) and cached."""
        f = math.floor(x)
        pair = self._around.get((origin, f))
        if pair is None:
            pair = self._around[(origin, f)] = self._search(f + 0.5, origin)[:2]
        x0, x1 = pair
        if x0 == x:
            return x0, x0, 0.0
        return x0, x1, (x - x0) / (x1 - x0)

    def _search(self, x: float, origin: float) -> tuple[int, int, float]:
        k = int(math.log2(x / origin) * self.per_octave)
        x0, x1 = self.node(k), self.node(k + 1)
        while x0 > x:
            k -= 1
            x0, x1 = self.node(k), x0
        while x1 < x:
            k += 1
            x0, x1 = x1, self.node(k + 1)
        if x0 == x or x1 == x:
            return (x0, x0, 0.0) if x0 == x else (x1, x1, 0.0)
        return x0, x1, (x - x0) / (x1 - x0)


class TileAxis(Axis):
    """Nodes that follow GEMM and attention tiles: every integer up to `exact_to`; then, up to
    `tiled_to`, both ends of each `tile`-token interval (k·tile + 1 and (k + 1)·tile), since
    M-tile counts, and with them waves and the library's tile choice, change only at multiples
    of the 64-row MMA tile; geometric nodes (multiples of `tile`, `per_octave` per doubling)
    above, where many waves make the steps small."""

    def __init__(self, per_octave: int, tile: int = 64, exact_to: int = 64,
                 tiled_to: int = 4096):
        super().__init__(per_octave, lo=1, base=exact_to)
        self.tile, self.tiled_to = tile, tiled_to

    def node(self, k: int) -> int:
        t = self.tile
        return t * round(self.tiled_to * 2.0 ** (k / self.per_octave) / t)

    def bracket(self, x: float) -> tuple[int, int, float]:
        if x <= self.base:
            return super().bracket(x)
        if x <= self.tiled_to:
            t = self.tile
            hi = t * math.ceil(x / t)
            lo = max(hi - t + 1, self.base)
            if x == hi or x == lo:
                return int(x), int(x), 0.0
            return lo, hi, (x - lo) / (hi - lo)
        return self.between_nodes(x, self.tiled_to)


class Table1:
    """Lazily filled, memoized nodes of a tuple-valued function of one integer, interpolated
    linearly between nodes (or evaluated exactly at every point)."""

    def __init__(self, fn: Callable[[int], tuple[float, ...]], axis: Axis, exact: bool = False):
        self.fn, self.axis, self.exact = fn, axis, exact
        self.nodes: dict[int, tuple[float, ...]] = {}
        self.memo: dict[float, tuple[float, ...]] = {}

    def at_node(self, x: int) -> tuple[float, ...]:
        v = self.nodes.get(x)
        if v is None:
            v = self.nodes[x] = self.fn(x)
        return v

    def __call__(self, x: float) -> tuple[float, ...]:
        v = self.memo.get(x)
        if v is None:
            if self.exact:
                v = self.at_node(max(self.axis.lo, round(x)))
            else:
                x0, x1, w = self.axis.bracket(x)
                a = self.at_node(x0)
                if w:
                    b = self.at_node(x1)
                    v = tuple(p + w * (q - p) for p, q in zip(a, b))
                else:
                    v = a
            self.memo[x] = v
        return v


class Table2:
    """Lazily filled nodes of a pair-valued function of two integers. Along x: linear, or
    log-log (`log_x`: exact for power laws); along y: linear."""

    def __init__(self, fn: Callable[[int, int], tuple[float, float]], ax: Axis, ay: Axis,
                 exact: bool = False, log_x: bool = False):
        self.fn, self.ax, self.ay, self.exact, self.log_x = fn, ax, ay, exact, log_x
        self.nodes: dict[tuple[int, int], tuple[float, float]] = {}

    def at_node(self, x: int, y: int) -> tuple[float, float]:
        v = self.nodes.get((x, y))
        if v is None:
            v = self.nodes[(x, y)] = self.fn(x, y)
        return v

    def __call__(self, x: float, y: float) -> tuple[float, float]:
        if self.exact:
            return self.at_node(max(self.ax.lo, round(x)), max(self.ay.lo, round(y)))
        x0, x1, wx = self.ax.bracket(x)
        y0, y1, wy = self.ay.bracket(y)
        nodes = self.nodes  # the lookups inlined (a hot path): node dict reads, then fill
        a = nodes.get((x0, y0))
        if a is None:
            a = self.at_node(x0, y0)
        if wy:
            b = nodes.get((x0, y1))
            if b is None:
                b = self.at_node(x0, y1)
            a = a[0] + wy * (b[0] - a[0]), a[1] + wy * (b[1] - a[1])
        if not wx:
            return a
        b = nodes.get((x1, y0))
        if b is None:
            b = self.at_node(x1, y0)
        if wy:
            c = nodes.get((x1, y1))
            if c is None:
                c = self.at_node(x1, y1)
            b = b[0] + wy * (c[0] - b[0]), b[1] + wy * (c[1] - b[1])
        if self.log_x and a[0] > 0 and b[0] > 0:
            f = math.log(x / x0) / math.log(x1 / x0)
            return a[0] * (b[0] / a[0]) ** f, a[1] + wx * (b[1] - a[1])
        return a[0] + wx * (b[0] - a[0]), a[1] + wx * (b[1] - a[1])


def nodes_up_to(axis: Axis, hi: int) -> list[int]:
    out, x = [], axis.lo
    while True:
        x0, x1, _ = axis.bracket(x + 0.5)  # the nodes around the next half step
        if not out:
            out.append(axis.lo)
        out.append(x1)
        if x1 >= hi:
            return out
        x = x1
