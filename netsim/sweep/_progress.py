"""A dependency-free progress line on stderr: points done, rate, ETA."""

from __future__ import annotations

import sys
import time
from typing import TextIO


def _clock(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class Progress:
    """Redraws one line in a terminal; elsewhere (logs, CI) prints a line at most every `every` s."""

    def __init__(
        self,
        total: int,
        done: int = 0,
        *,
        stream: TextIO | None = None,
        enabled: bool = True,
        every: float = 10.0,
        label: str = "sweep",
    ):
        self.total, self.done, self.start_done = total, done, done
        self.stream = sys.stderr if stream is None else stream
        self.enabled = enabled
        self.every = every
        self.label = label
        self.t0 = time.perf_counter()
        self.last_print = -float("inf")
        self.tty = enabled and getattr(self.stream, "isatty", lambda: False)()

    def line(self) -> str:
        elapsed = time.perf_counter() - self.t0
        new = self.done - self.start_done
        rate = new / elapsed if elapsed > 0 else 0.0
        eta = _clock((self.total - self.done) / rate) if rate > 0 else "?"
        pct = 100.0 * self.done / self.total if self.total else 100.0
        return (
            f"{self.label} {self.done}/{self.total} points ({pct:5.1f}%)  {rate:,.1f} points/s  "
            f"elapsed {_clock(elapsed)}  ETA {eta}"
        )

    def update(self, n: int) -> None:
        self.done += n
        if not self.enabled:
            return
        now = time.perf_counter()
        if self.tty:
            self.stream.write("\r" + self.line() + "\033[K")
            self.stream.flush()
        elif now - self.last_print >= self.every or self.done >= self.total:
            self.stream.write(self.line() + "\n")
            self.stream.flush()
            self.last_print = now

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
