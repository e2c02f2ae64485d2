"""A one-line progress bar on stderr for long sweeps."""
from __future__ import annotations


class Progress:
    """A one-line progress bar on stderr for long sweeps (silent when not a terminal)."""

    def __init__(self, total: int, label: str = "", stream=None, force: bool = False):
        import sys
        self.total, self.label, self.n = max(total, 1), label, 0
        self.stream = stream or sys.stderr
        self.enabled = force or self.stream.isatty()

    def update(self, n: int = 1):
        self.n += n
        if self.enabled and (self.n == self.total or self.n % max(1, self.total // 100) == 0):
            width = 30
            done = int(width * self.n / self.total)
            self.stream.write(f"\r{self.label} [{'#' * done}{'.' * (width - done)}] "
                              f"{self.n}/{self.total}")
            if self.n >= self.total:
                self.stream.write("\n")
            self.stream.flush()
