"""The one progress line of long work on stderr: what is done, at what rate, for how long, and what is
left when the total is known. A dependency-free reporter shared by `simulate(progress=True)` (events)
and sweeps (points)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


def _clock(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class Progress:
    """Counts `unit`s done; redraws one line in a terminal, elsewhere (logs, CI) prints a line at most
    every `every` s. Nothing shows before `after` s, so short work stays quiet.

    total: the count at completion, for the percentage and the ETA; None when unknown.
    done: the count already done when this run starts (a resumed sweep); the rate counts only new ones.
    """

    def __init__(
        self,
        label: str,
        unit: str,
        total: int | None = None,
        done: int = 0,
        *,
        stream: TextIO | None = None,
        enabled: bool = True,
        after: float = 0.0,
        every: float = 10.0,
    ):
        self.label, self.unit, self.total = label, unit, total
        self.done, self.start_done = done, done
        self.stream = sys.stderr if stream is None else stream
        self.enabled = enabled
        self.after, self.every = after, every
        self.t0 = time.perf_counter()
        self.last_print = -float("inf")
        self.tty = enabled and getattr(self.stream, "isatty", lambda: False)()
        self.drawn = False

    def line(self, detail: str = "") -> str:
        """E.g. "sweep: 50/100 points (50.0%), 15.0 points/s, elapsed 0:00:02, ETA 0:00:03"."""
        elapsed = time.perf_counter() - self.t0
        rate = (self.done - self.start_done) / elapsed if elapsed > 0 else 0.0
        if self.total is None:
            parts = [f"{self.label}: {self.done} {self.unit}"]
        else:
            pct = 100.0 * self.done / self.total if self.total else 100.0
            parts = [f"{self.label}: {self.done}/{self.total} {self.unit} ({pct:.1f}%)"]
        parts += [f"{rate:,.1f} {self.unit}/s", f"elapsed {_clock(elapsed)}"]
        if self.total is not None:
            parts.append(f"ETA {_clock((self.total - self.done) / rate) if rate > 0 else '?'}")
        return ", ".join([*parts, detail] if detail else parts)

    def update(self, n: int, detail: str = "") -> None:
        """Counts n more done; `detail` ends the line."""
        self.done += n
        now = time.perf_counter()
        if not self.enabled or now - self.t0 < self.after:
            return
        finished = self.total is not None and self.done >= self.total
        if self.tty:
            self.stream.write("\r" + self.line(detail) + "\033[K")
        elif now - self.last_print >= self.every or finished:
            self.stream.write(self.line(detail) + "\n")
            self.last_print = now
        else:
            return
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        """Ends a redrawn line."""
        if self.tty and self.drawn:
            self.stream.write("\n")
            self.stream.flush()
