"""CUDA's p2pBandwidthLatencyTest matrices: connectivity, uni- and bidirectional bandwidth, latency."""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from .._checks import quantity
from ._core import Lines

TITLE = re.compile(
    r"^(?:(?P<dir>unidirectional|bidirectional)\s+)?P2P\s*=\s*(?P<mode>enabled|disabled)\s+"
    r"(?P<what>bandwidth|latency)\s*(?:\(\s*P2P\s+(?P<method>writes|reads)\s*\)\s*)?matrix\s*"
    r"\((?P<unit>[^)]*)\)",
    re.IGNORECASE,
)
CONNECTIVITY_TITLE = re.compile(r"^P2P\s+Connectivity\s+Matrix\b", re.IGNORECASE)
_UNITS = {"gb/s": 1e9, "mb/s": 1e6, "kb/s": 1e3, "b/s": 1.0, "us": 1e-6, "ms": 1e-3, "ns": 1e-9, "s": 1.0}


@dataclasses.dataclass(frozen=True, eq=False)
class P2PMatrix:
    """One matrix of CUDA's p2pBandwidthLatencyTest, `values[i, j]` from device i (row) to device j.

    Attributes:
        kind: "connectivity" (1 where i can access j), "unidirectional" or "bidirectional" (bandwidth,
            bytes/s) or "latency" (s).
        p2p: True for P2P=Enabled, False for P2P=Disabled, None for the connectivity matrix.
        method: "writes" or "reads" when the title says "(P2P Writes)"/"(P2P Reads)", else "".
        clock: for latency, "gpu" or "cpu" (the sub-table's label); else "".
        values: shape (n, n), SI units.
        title: the title line as printed.
        line: 1-based line number of the matrix's header ("D\\D 0 1 ...").
    """

    kind: str
    p2p: bool | None
    method: str
    clock: str
    values: np.ndarray
    title: str
    line: int

    @property
    def n(self) -> int:
        return self.values.shape[0]


def check_values(m: P2PMatrix) -> None:
    """ScenarioError naming the cell of a bandwidth outside [1e-6, 1e30] B/s or a latency not in
    (0, 1e15) s (netsim's limits: such a value would overflow a fit's loss rather than fit)."""
    if m.kind != "connectivity":
        kind = "time" if m.kind == "latency" else "bandwidth"
        for (i, j), v in np.ndenumerate(m.values):
            quantity(float(v), kind, f"{m.kind} matrix, cell [{i}, {j}]", positive=True)


def read_connectivity(src: Lines, i: int) -> tuple[list[P2PMatrix], int]:
    """The "P2P Connectivity Matrix" titled at line i."""
    values, j = _matrix(src, i + 1, "D\\D", int)
    return [P2PMatrix("connectivity", None, "", "", values, src.lines[i].strip(), i + 2)], j


def read_p2p(src: Lines, i: int, m: re.Match) -> tuple[list[P2PMatrix], int]:
    """The bandwidth or latency matrix (latency: one or two) whose title at line i matched `TITLE`."""
    title = src.lines[i].strip()
    unit = m.group("unit").strip().lower()
    if unit not in _UNITS:
        src.fail(i, f"unknown unit ({m.group('unit')}) in {title!r}")
    what, p2p = m.group("what").lower(), m.group("mode").lower() == "enabled"
    method = (m.group("method") or "").lower()
    if what == "bandwidth":
        if not m.group("dir"):
            src.fail(i, f"bandwidth matrix title names no direction: {title!r}")
        values, j = _matrix(src, i + 1, "D\\D", float, _UNITS[unit])
        return [P2PMatrix(m.group("dir").lower(), p2p, method, "", values, title, i + 2)], j
    # Latency: a "GPU" sub-table, then (newer cuda-samples) a "CPU" one after a blank line.
    head = src.next_nonblank(i + 1)
    label = src.lines[head].split()[0] if head < len(src.lines) else ""
    values, j = _matrix(src, head, label, float, _UNITS[unit])
    clock = "cpu" if label.upper() == "CPU" else "gpu"
    out = [P2PMatrix("latency", p2p, method, clock, values, title, head + 1)]
    nxt = src.next_nonblank(j)
    if clock == "gpu" and nxt < len(src.lines) and src.lines[nxt].split()[:1] == ["CPU"]:
        cpu, j = _matrix(src, nxt, "CPU", float, _UNITS[unit])
        out.append(P2PMatrix("latency", p2p, method, "cpu", cpu, title, nxt + 1))
    return out, j


def _matrix(src: Lines, i: int, label: str, kind: type, unit: float = 1.0) -> tuple[np.ndarray, int]:
    """An n x n block in SI (cells times `unit`): a header `label 0 1 .. n-1`, then rows `r v_0 .. v_n-1`."""
    lines = src.lines
    if i >= len(lines):
        src.fail(len(lines) - 1, f"file ends where a matrix header '{label} 0 1 ...' was expected")
    head = lines[i].split()
    if (
        not head
        or head[0].upper() != label.upper()
        or head[1:] != [str(k) for k in range(len(head) - 1)]
        or len(head) < 2
    ):
        src.fail(i, f"expected a matrix header '{label} 0 1 ...', got {lines[i].strip()!r}")
    n = len(head) - 1
    rows = []
    for r in range(n):
        j = i + 1 + r
        if j >= len(lines) or not lines[j].strip():
            src.fail(min(j, len(lines) - 1), f"matrix ends after {r} of {n} rows")
        cells = lines[j].split()
        if cells[0] != str(r):
            src.fail(j, f"expected matrix row {r}, got {lines[j].strip()!r}")
        if len(cells) != n + 1:
            src.fail(j, f"matrix row {r} has {len(cells) - 1} values, the header has {n} columns")
        rows.append([src.cell(j, c, f"column {k}", kind) for k, c in enumerate(cells[1:])])
    j = i + 1 + n
    if j < len(lines) and lines[j].split()[:1] == [str(n)]:
        src.fail(j, f"matrix has more rows than its {n} header columns")
    with np.errstate(over="ignore"):  # a 1e300 GB/s cell becomes inf, which check_values refuses
        return np.asarray(rows, float) * unit, j
