"""The running set of one scheduler lane as int64 columns, for SGLang's admission test (sim.py
`Lane._remaining_sorted`), which reads every running request's tokens left and tokens held at
each step it admits in: a Python pass over thousands of running requests per step was most of a
large offline SGLang simulation.

One slot per admission, in admission order (the order of `Lane.running`, a dict in insertion
order: a preempted request that comes back is inserted, and slotted, last again); a released
request's slot is marked dead, and the dead are compacted away, order kept, when the columns
fill. A request's tokens generated is `base + dec · j` at the lane's decode counter j:
`generated` (dec 0) before it decodes, `g0 − j0` (dec 1) while it does (Lane.start_decode). Its
generated count changes nowhere else while it runs (a prefill's first token is counted just
before it starts decoding or finishes), so the columns follow the running set through `add`,
`decode` and `remove` alone.
"""
from __future__ import annotations

import numpy as np

MIN_SLOTS = 64


class RunningColumns:
    """(output, prompt, base, dec, alive) of each admission of a lane's running set."""

    def __init__(self, running, decode_state) -> None:
        """The columns of `running` (Lane.running), its requests in state `decode_state`
        decoding."""
        size = MIN_SLOTS
        while size < 2 * len(running):
            size *= 2
        self._alloc(size)
        for r in running.values():
            self.add(r)
            if r.state == decode_state:
                self.decode(r)

    def _alloc(self, size: int) -> None:
        self.reqs: list = [None] * size
        self.out = np.zeros(size, dtype=np.int64)
        self.prompt = np.zeros(size, dtype=np.int64)
        self.base = np.zeros(size, dtype=np.int64)
        self.dec = np.zeros(size, dtype=np.int64)
        self.alive = np.zeros(size, dtype=bool)
        self.n = 0       # slots used
        self.count = 0   # slots alive: len(Lane.running) while the columns follow it

    def _room(self) -> None:
        """Make room for one more slot: compact the dead away, or double."""
        size = len(self.reqs)
        if 2 * self.count <= size:
            keep = np.flatnonzero(self.alive[:self.n])
            k = len(keep)
            for col in (self.out, self.prompt, self.base, self.dec, self.alive):
                col[:k] = col[keep]
                col[k:] = 0
            reqs = [self.reqs[i] for i in keep.tolist()]
            for s, r in enumerate(reqs):
                r.slot = s
            self.reqs = reqs + [None] * (size - k)
            self.n = k
            return
        old = (self.out, self.prompt, self.base, self.dec, self.alive)
        reqs, n, count = self.reqs, self.n, self.count
        self._alloc(2 * size)
        for new, col in zip((self.out, self.prompt, self.base, self.dec, self.alive), old):
            new[:n] = col[:n]
        self.reqs[:n] = reqs[:n]
        self.n, self.count = n, count

    def owns(self, r) -> bool:
        s = r.slot
        return 0 <= s < self.n and self.reqs[s] is r

    def add(self, r) -> None:
        """`r` joined the running set (last), not decoding yet."""
        if self.n == len(self.reqs):
            self._room()
        s = self.n
        self.n = s + 1
        self.count += 1
        self.reqs[s] = r
        r.slot = s
        self.out[s] = r.output
        self.prompt[s] = r.prompt
        self.base[s] = r.generated
        self.dec[s] = 0
        self.alive[s] = True

    def decode(self, r) -> None:
        """`r` started decoding at its (j0, g0)."""
        s = r.slot
        self.base[s] = r.g0 - r.j0
        self.dec[s] = 1

    def remove(self, r) -> None:
        s = r.slot
        self.alive[s] = False
        self.reqs[s] = None
        r.slot = -1
        self.count -= 1

    def remaining(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """Lane.remaining_outputs at decode counter `j` as int64 arrays (L, O), in admission
        order, sorted stably by L: the same arrays as sorting that method's lists."""
        n = self.n
        g = self.base[:n] + self.dec[:n] * j
        left = self.out[:n] - g
        keep = self.alive[:n] & (left > 0)
        L = left[keep]
        O = (self.prompt[:n] + g)[keep]
        order = np.argsort(L, kind="stable")
        return L[order], O[order]
