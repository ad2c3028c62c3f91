"""`rocm_bandwidth_test` (ROCm Bandwidth Test, `rocm-bandwidth-test` with no arguments: -a + -A) output.

The classic tool (github.com/ROCm/rocm_bandwidth_test, rocm_bandwidth_test_print.cpp and
rocm_bandwidth_test_report.cpp) lists its agents ("Device: 0,  AMD EPYC 7542 32-Core Processor",
"Device: 1,  Radeon RX 7900 XTX,  GPU-XX,  83:0.0": CPUs and GPUs in one index) and prints agent x agent
matrices under a title line, then a "D/D 0 1 ..." header and one row per agent, blank lines between:

    Inter-Device Access / Link Type / Link Hops / Numa Distance       the link properties
    Unidirectional|Bidirectional copy peak|average bandwidth GB/s     copies, GB = 1e9 bytes
    Data Path Validation                                              PASS / FAIL

A bandwidth cell is the bytes moved over the copy's time (a bidirectional cell counts both directions'
bytes; a device to itself, both the read and the write); "N/A": no such copy. The tool's newer plugin
layout ("SRC\\DST  CPU 00 ... GPU 00" rows with "->", "<-", "<->") is not read: it fails naming itself.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from ._core import Lines

TITLE = re.compile(
    r"^(Inter-Device (Access|Link Type|Link Hops|Numa Distance)\b.*|"
    r"(Unidirectional|Bidirectional) copy (peak|average) bandwidth GB/s|Data Path Validation)$"
)
#: the tool's plugin layout (rocm_bandwidth_test 2.x plugins): matrices of "SRC\DST" rows
PLUGIN = re.compile(r"^(Unidirectional|Bidirectional) copy peak bandwidth GB/s \[|^SRC\\+DST\b")
DEVICE = re.compile(r"^Device:\s*(\d+),\s*(.*?)\s*$")
#: a GPU's listing ends with its PCI bus id ("GPU-9318692173497dfc,  19:0.0"); a CPU's has none
BUS_ID = re.compile(r",\s*[0-9a-fA-F]{1,4}:[0-9a-fA-F]{1,2}\.\d$")
_KINDS = {
    "access": "access",
    "link type": "link_type",
    "link hops": "hops",
    "numa distance": "numa_distance",
    "unidirectional": "unidirectional",
    "bidirectional": "bidirectional",
    "data path": "validation",
}


@dataclasses.dataclass(frozen=True, eq=False)
class RbtMatrix:
    """One agent x agent matrix of `rocm_bandwidth_test`, `values[i, j]` from agent i (row) to agent j.

    Attributes:
        kind: "access", "link_type", "hops", "numa_distance", "unidirectional", "bidirectional" or
            "validation".
        statistic: "peak" or "average" for copy bandwidths, "" for the others.
        devices: per agent index, its name as listed ("AMD EPYC 7542 32-Core Processor", "Radeon RX 7900
            XTX"); "" where the file lists none.
        gpu: shape (n,), True for the agents listed with a PCI bus id (GPUs), False for the others (CPUs).
        cells: the cells as printed.
        values: shape (n, n): bandwidths in bytes/s, access / hops / NUMA distance as numbers; NaN for
            "N/A" and for link types and validation results (read `cells`).
        title: the title line.
        line: 1-based line number of the title.
    """

    kind: str
    statistic: str
    devices: tuple[str, ...]
    gpu: np.ndarray
    cells: tuple[tuple[str, ...], ...]
    values: np.ndarray
    title: str
    line: int

    @property
    def n(self) -> int:
        return len(self.cells)

    def gpu_values(self) -> np.ndarray:
        """`values` between GPUs only (the CPU rows and columns dropped), in agent order."""
        keep = np.flatnonzero(self.gpu)
        return self.values[np.ix_(keep, keep)]


def _devices(src: Lines, i: int) -> dict[int, str]:
    """The "Device: k, name, ..." lines of the last device list above line i."""
    found: dict[int, str] = {}
    for k in range(i - 1, -1, -1):
        text = src.lines[k].strip()
        m = DEVICE.match(text)
        if m:
            found.setdefault(int(m.group(1)), m.group(2))
        elif found and text and not text.startswith("Launch Command"):
            break
    return found


def read_rbt(src: Lines, i: int, title: str) -> tuple[list[RbtMatrix], int]:
    """The rocm_bandwidth_test matrix whose title is at line i, and the line after it."""
    lines = src.lines
    what = f"rocm_bandwidth_test {title!r}"
    kind = next(v for k, v in _KINDS.items() if k in title.lower())
    statistic = next((s for s in ("peak", "average") if f"copy {s} bandwidth" in title), "")
    h = src.next_nonblank(i + 1)
    head = lines[h].split() if h < len(lines) else []
    n = len(head) - 1
    if n < 1 or head[0] != "D/D" or head[1:] != [str(k) for k in range(n)]:
        got = lines[h].strip() if h < len(lines) else "the end of the file"
        src.fail(min(h, len(lines) - 1), f"{what}: expected a header 'D/D 0 1 ...', got {got!r}")
    values = np.full((n, n), np.nan)
    cells: list[tuple[str, ...]] = []
    j = h + 1
    for r in range(n):
        j = src.next_nonblank(j)
        row = lines[j].split() if j < len(lines) else []
        if not row or row[0] != str(r):
            got = lines[j].strip() if j < len(lines) else "the end of the file"
            src.fail(min(j, len(lines) - 1), f"{what}: expected row {r} of {n}, got {got!r}")
        if len(row) != n + 1:
            src.fail(j, f"{what}: row {r} has {len(row) - 1} cells, the header has {n}")
        cells.append(tuple(row[1:]))
        if kind not in ("link_type", "validation"):
            scale = 1e9 if kind in ("unidirectional", "bidirectional") else 1.0  # GB = 1e9 bytes
            values[r] = [
                src.cell(j, x, f"{what} {r} -> {c}", float, na=True) * scale for c, x in enumerate(row[1:])
            ]
        j += 1
    listed = _devices(src, i)
    names = tuple(listed.get(k, "").split(",")[0].strip() for k in range(n))
    gpu = np.array([bool(BUS_ID.search(listed.get(k, ""))) for k in range(n)], bool)
    return [RbtMatrix(kind, statistic, names, gpu, tuple(cells), values, title, i + 1)], j
