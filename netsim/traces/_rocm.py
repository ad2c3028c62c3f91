"""`rocm-smi --showtopo` (weight, hops, link type, accessibility, NUMA) and `--shownodesbw` output."""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from ._core import Lines

TITLE = re.compile(
    r"^\s*=+\s*(Weight between two GPUs|Hops between two GPUs|Link Type between two GPUs|"
    r"Link accessibility between two GPUs|Bandwidth|Numa Nodes)\s*=+\s*$",
    re.IGNORECASE,
)
_KINDS = {
    "weight": "weight",
    "hops": "hops",
    "link type": "link_type",
    "link accessibility": "access",
    "bandwidth": "bandwidth",
}


@dataclasses.dataclass(frozen=True, eq=False)
class RocmMatrix:
    """One GPU x GPU matrix of `rocm-smi --showtopo` (or --showtopoweight/-hops/-type/-access) or of
    `rocm-smi --shownodesbw`, `cells[i][j]` from GPU i (row) to GPU j.

    Attributes:
        kind: "weight", "hops", "link_type" ("XGMI", "PCIE"), "access" ("True"/"False") or "bandwidth".
        devices: the header's names ("GPU0", ...).
        cells: the cells as printed.
        values: shape (n, n): weight and hops as numbers; for "bandwidth" the maximum in bytes/s
            (rocm-smi prints "min-max" in MB/s; "0-0": no direct link); NaN where not a number
            (link types, "N/A" on the diagonal).
        minimum: for "bandwidth", the minimum in bytes/s; else NaN.
        title: the "=== ... ===" banner text.
        line: 1-based line number of the header.
    """

    kind: str
    devices: tuple[str, ...]
    cells: tuple[tuple[str, ...], ...]
    values: np.ndarray
    minimum: np.ndarray
    title: str
    line: int

    @property
    def n(self) -> int:
        return len(self.devices)


@dataclasses.dataclass(frozen=True, eq=False)
class RocmNuma:
    """The "Numa Nodes" block of `rocm-smi --showtopo`/--showtoponuma: per GPU index, its NUMA node and
    NUMA affinity (-1 where the block has no line for that GPU).

    Attributes:
        node: shape (n,), int64.
        affinity: shape (n,), int64.
        line: 1-based line number of the first GPU line.
    """

    node: np.ndarray
    affinity: np.ndarray
    line: int


def read_rocm(src: Lines, i: int, title: str) -> tuple[list[RocmMatrix | RocmNuma], int]:
    """A rocm-smi section from its "=== title ===" banner at line i: a GPU x GPU matrix or the NUMA lines."""
    if title.lower() == "numa nodes":
        return _numa(src, i, title)
    lines = src.lines
    kind = next(v for k, v in _KINDS.items() if title.lower().startswith(k))
    h = src.next_nonblank(i + 1)
    head = lines[h].split() if h < len(lines) else []
    if len(head) < 1 or head != [f"GPU{k}" for k in range(len(head))]:
        got = lines[h].strip() if h < len(lines) else "the end of the file"
        src.fail(
            min(h, len(lines) - 1), f"rocm-smi {title!r}: expected a header 'GPU0 GPU1 ...', got {got!r}"
        )
    n = len(head)
    cells: list[tuple[str, ...]] = []
    for r in range(n):
        j = h + 1 + r
        row = lines[j].split() if j < len(lines) else []
        if not row or not re.fullmatch(r"GPU\d+", row[0]):
            src.fail(min(j, len(lines) - 1), f"rocm-smi {title!r} matrix ends after {r} of {n} rows")
        if row[0] != f"GPU{r}":
            src.fail(j, f"rocm-smi {title!r}: expected row GPU{r}, got {lines[j].strip()!r}")
        if len(row) != n + 1:
            src.fail(j, f"rocm-smi {title!r}: row GPU{r} has {len(row) - 1} cells, the header has {n}")
        cells.append(tuple(row[1:]))
    j = h + 1 + n
    if j < len(lines) and lines[j].split()[:1] == [f"GPU{n}"]:
        src.fail(j, f"rocm-smi {title!r} matrix has more rows than its {n} header columns")
    values, minimum = np.full((n, n), np.nan), np.full((n, n), np.nan)
    for r, row in enumerate(cells):
        for c, cell in enumerate(row):
            if cell.upper() == "N/A" or kind in ("link_type", "access"):
                continue
            if kind == "bandwidth":  # "min-max" in MB/s (KFD io_link min/max_bandwidth); "0-0": no link
                m = re.fullmatch(r"(\d+)-(\d+)", cell)
                if not m:
                    src.fail(
                        h + 1 + r, f"rocm-smi bandwidth: cannot read {cell!r} (GPU{r} -> GPU{c}) as 'min-max'"
                    )
                minimum[r, c], values[r, c] = float(m.group(1)) * 1e6, float(m.group(2)) * 1e6
            else:
                values[r, c] = src.cell(h + 1 + r, cell, f"{kind} GPU{r} -> GPU{c}", int)
    k = src.next_nonblank(j)
    m = re.match(r"\s*Format:.*Units:\s*(\S+)", lines[k]) if k < len(lines) else None
    if m and m.group(1).lower() != "mps":
        src.fail(k, f"rocm-smi bandwidth in unknown units {m.group(1)!r} (expected 'mps', MB/s)")
    return [RocmMatrix(kind, tuple(head), tuple(cells), values, minimum, title, h + 1)], j


def _numa(src: Lines, i: int, title: str) -> tuple[list[RocmMatrix | RocmNuma], int]:
    """`GPU[k] : (Topology) Numa Node: v` / `Numa Affinity: v` lines after the banner at line i."""
    lines = src.lines
    found: dict[str, dict[int, int]] = {"node": {}, "affinity": {}}
    j, first = i + 1, -1
    while j < len(lines) and (not lines[j].strip() or lines[j].lstrip().startswith("GPU[")):
        text = lines[j].strip()
        if text:
            m = re.fullmatch(r"GPU\[(\d+)\]\s*:\s*\(Topology\)\s*Numa (Node|Affinity)\s*:\s*(-?\d+)", text)
            if not m:
                src.fail(j, f"rocm-smi {title!r}: cannot read {text!r}")
            found[m.group(2).lower()][int(m.group(1))] = int(m.group(3))
            first = j if first < 0 else first
        j += 1
    if first < 0:
        src.fail(min(j, len(lines) - 1), f"rocm-smi {title!r} banner with no GPU lines after it")
    n = max(max(d, default=-1) for d in found.values()) + 1
    arrays = {key: np.array([d.get(g, -1) for g in range(n)], np.int64) for key, d in found.items()}
    return [RocmNuma(arrays["node"], arrays["affinity"], first + 1)], j
