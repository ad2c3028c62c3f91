"""AllToAll as grouped sends: every ordered pair at once."""

from __future__ import annotations

from ._builder import Builder


def direct(b: Builder) -> tuple[int, int]:
    """Every ordered pair at once; chunk c of a pair waits for chunk c - 1 of the same pair (FIFO)."""
    n = b.n
    part = b.size / (n * b.channels * b.chunks)
    for k in range(b.channels):
        for i in range(n):
            for j in range(n):
                if i == j:
                    continue
                for c in range(b.chunks):
                    b.send(k, c, f"{i}-{j}", i, j, part, (), blocks=(i * n + j,), step=0, op="copy")
    return n * n, 1
