"""`nvidia-smi topo -m` output: the one parser, used by the trace reader and by `netsim.topology`
(`pcie_server_from_topo` builds a PCIe server from the `TopoMatrix` parsed here).

The header is a line whose words are all device names (GPU0, NIC1, mlx5_0, ...) before the optional "CPU
Affinity", "NUMA Affinity" and "GPU NUMA ID" columns. The parser tolerates tabs or spaces, lines quoted
with a leading "#", a trailing "..." where columns were elided, rows without affinity columns (NIC rows),
the old "SOC" spelling of SYS, and the "Legend" and "NIC Legend" blocks after the rows.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Mapping, Sequence

from .._errors import ScenarioError
from ._core import Lines

KINDS = ("X", "PIX", "PXB", "PHB", "NODE", "SYS", "NVB")
_CELL = re.compile(r"^(X|PIX|PXB|PHB|NODE|SYS|SOC|NVB|NV\d+)$")
_DEVICE = re.compile(r"^(GPU\d+|NIC\d+|mlx\d+_\d+|[a-z]+\d*_\d+)$")
_TAILS = (("CPU", "Affinity"), ("NUMA", "Affinity"), ("GPU", "NUMA", "ID"))
_AFFINITY = re.compile(r"^(\d+(-\d+)?)(,\d+(-\d+)?)*$")
_LEGEND = re.compile(r"\s*#?\s*Legend:\s*$")
_LEGEND_ENTRY = re.compile(r"\s*#?(\s+\S+\s*=.*)?\s*$")  # "  X    = Self" (indented), or blank
_NIC_LEGEND = re.compile(r"\s*#?\s*NIC Legend:")
_NIC_ENTRY = re.compile(r"\s*#?\s*(?:(NIC\d+)\s*:\s*(\S+))?\s*$")  # "  NIC0: mlx5_0", or blank


@dataclasses.dataclass(frozen=True)
class TopoMatrix:
    """A parsed `nvidia-smi topo -m` matrix.

    Attributes:
        devices: column names in order ("GPU0", ..., "NIC0", ...).
        matrix: matrix[i][j] is the link kind from devices[i] to devices[j] ("X", "PIX", "PXB", "PHB",
            "NODE", "SYS", "NVB", "NV12", ...), None where the source elided it ("...").
        cpu_affinity: device -> CPU list text ("0-7,64-71"), None when absent or "N/A".
        numa_affinity: device -> NUMA node, None when absent or "N/A".
        gpu_numa_id: device -> the GPU's own NUMA id (coherent-memory GPUs), None when absent or "N/A".
        nic_names: "NIC0" -> "mlx5_0" from the NIC legend.
    """

    devices: tuple[str, ...]
    matrix: tuple[tuple[str | None, ...], ...]
    cpu_affinity: Mapping[str, str | None]
    numa_affinity: Mapping[str, int | None]
    gpu_numa_id: Mapping[str, int | None]
    nic_names: Mapping[str, str]

    def kind(self, a: str, b: str) -> str | None:
        """The link kind between devices a and b (None when elided)."""
        return self.matrix[self.devices.index(a)][self.devices.index(b)]

    @property
    def gpus(self) -> tuple[str, ...]:
        return tuple(d for d in self.devices if d.startswith("GPU"))


class _LineError(ScenarioError):
    """A malformed matrix: `index` is the 0-based line of the text parsed, `reason` the message without it."""

    def __init__(self, index: int, reason: str):
        super().__init__(f"nvidia-smi topo line {index + 1}: {reason}")
        self.index, self.reason = index, reason


def _words(line: str) -> list[str]:
    return line.lstrip().removeprefix("#").split()


def _split_tail(words: list[str]) -> tuple[list[str], list[str]]:
    """Device names and affinity column names of a header line (dropping a trailing "...")."""
    words = [w for w in words if w not in ("...", "…")]
    tails: list[str] = []
    while True:
        for tail in _TAILS:
            if tuple(words[-len(tail) :]) == tail:
                tails.insert(0, " ".join(tail))
                words = words[: -len(tail)]
                break
        else:
            return words, tails


def is_header(line: str) -> bool:
    """Line is the header of a `nvidia-smi topo -m` matrix (quoted with "#" or not)."""
    words = _words(line)
    names = _split_tail(words)[0]
    return len(words) >= 2 and bool(names) and names[0].startswith("GPU") and all(map(_DEVICE.match, names))


def parse_nvidia_smi_topo(text: str) -> TopoMatrix:
    """Parses the matrix printed by `nvidia-smi topo -m` (or `--matrix`), found anywhere in `text`.

    Raises:
        ScenarioError: naming the line (number and text) when the matrix is missing or malformed: an
            unknown cell, a wrong number of cells, a row for an unknown device, a diagonal that is not X,
            or a matrix that is not symmetric.
    """
    if not isinstance(text, str):
        raise ScenarioError(
            f"parse_nvidia_smi_topo: expected the text of the output, got {type(text).__name__}"
        )
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if is_header(line)), None)
    if start is None:
        raise ScenarioError(
            "nvidia-smi topo: no matrix header (a line of device names starting with GPU0) found"
        )
    try:
        return _parse(lines, start)[0]
    except _LineError as e:  # the line's number is in the message; callers see the public type
        raise ScenarioError(str(e)) from None


def _parse(lines: Sequence[str], start: int) -> tuple[TopoMatrix, int]:
    """The matrix whose header is lines[start], and the index of the first line after its legends.

    Raises:
        _LineError: naming the 0-based line.
    """
    header = _words(lines[start])
    devices, tails = _split_tail(header)
    elided = "..." in header or "…" in header
    if len(set(devices)) != len(devices):
        raise _LineError(start, f"repeated device name in {lines[start]!r}")
    n = len(devices)
    rows: dict[str, tuple[str | None, ...]] = {}
    cpu: dict[str, str | None] = {}
    numa: dict[str, int | None] = {}
    gpu_numa: dict[str, int | None] = {}
    row_line: dict[str, int] = {}
    i = start + 1
    while i < len(lines) and (words := _words(lines[i])) and _DEVICE.match(words[0]):
        fail = lambda why, i=i: _LineError(i, f"{why}: {lines[i]!r}")
        label, rest = words[0], [w for w in words[1:] if w not in ("...", "…")]
        i += 1
        if label not in devices:
            if elided:
                continue  # a row for a device whose column the source left out
            raise fail(f"row for {label!r}, which is not a column of the header")
        if label in rows:
            raise fail(f"second row for {label!r}")
        cells = rest[:n]
        own = devices.index(label)
        if own < len(cells) and cells[own] != "X":
            hint = (
                ""
                if _CELL.match(cells[own])
                else ": not `nvidia-smi topo -m` output (rocm-smi matrices are read under their "
                "'=== Weight between two GPUs ===' (Hops, Link Type, Bandwidth) titles)"
            )
            raise _LineError(i - 1, f"{label} to itself is {cells[own]!r}, expected X{hint}")
        bad = [c for c in cells if not _CELL.match(c)]
        if (len(cells) < n and not elided) or bad:
            what = f"unknown link kind {bad[0]!r}" if bad else f"{len(cells)} cells for {n} devices"
            raise fail(f"{what} (known: {', '.join(KINDS)}, NV#)")
        cells = ["SYS" if c == "SOC" else c for c in cells] + [None] * (n - len(cells))
        extra = rest[n:]
        if len(extra) > len(tails):
            raise fail(
                f"{len(extra)} values after the matrix but {len(tails)} affinity columns in the header"
            )
        values = dict(zip(tails, extra, strict=False))
        cpu[label] = _affinity(values.get("CPU Affinity"), fail)
        numa[label] = _number(values.get("NUMA Affinity"), "NUMA Affinity", fail)
        gpu_numa[label] = _number(values.get("GPU NUMA ID"), "GPU NUMA ID", fail)
        rows[label], row_line[label] = tuple(cells), i - 1
    missing = [d for d in devices if d not in rows]
    if missing:
        raise _LineError(start, f"no row for column(s) {missing}")
    matrix = tuple(rows[d] for d in devices)
    for a in range(n):
        for b in range(n):
            x, y = matrix[a][b], matrix[b][a]
            if x is not None and y is not None and x != y:
                raise _LineError(
                    row_line[devices[a]],
                    f"{devices[a]}->{devices[b]} is {x} but {devices[b]}->{devices[a]} is {y} "
                    "(the matrix must be symmetric)",
                )
    legend: dict[str, str] = {}
    for title, entry in ((_LEGEND, _LEGEND_ENTRY), (_NIC_LEGEND, _NIC_ENTRY)):
        k = next((k for k in range(i, len(lines)) if lines[k].strip()), len(lines))
        if k < len(lines) and title.match(lines[k]):
            i = k + 1
            while i < len(lines) and (m := entry.match(lines[i])):
                if entry is _NIC_ENTRY and m.group(1):
                    legend[m.group(1)] = m.group(2)
                i += 1
    return TopoMatrix(tuple(devices), matrix, cpu, numa, gpu_numa, legend), i


def _affinity(value: str | None, fail) -> str | None:
    if value is None or value == "N/A":
        return None
    if not _AFFINITY.match(value):
        raise fail(f"CPU Affinity {value!r} is not a CPU list like '0-7,64-71'")
    return value


def _number(value: str | None, column: str, fail) -> int | None:
    if value is None or value == "N/A":
        return None
    if not value.isdigit():
        raise fail(f"{column} {value!r} is not a number or N/A")
    return int(value)


# --- in a trace -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class TopoTable:
    """An `nvidia-smi topo -m` block of a trace, verbatim; `matrix` is its parse.

    Attributes:
        text: the block (header, device rows, legends), as `parse_nvidia_smi_topo` takes it and
            `netsim.topology.pcie_server_from_topo` builds a server from it.
        line: 1-based line number of the header.
    """

    text: str
    line: int

    @functools.cached_property
    def matrix(self) -> TopoMatrix:
        return parse_nvidia_smi_topo(self.text)

    @property
    def devices(self) -> tuple[str, ...]:
        return self.matrix.devices


def read_topo(src: Lines, i: int) -> tuple[TopoTable, int]:
    """The block whose header is line i, parsed now (a bad block fails at read time, with its line)."""
    try:
        matrix, j = _parse(src.lines, i)
    except _LineError as e:
        src.fail(e.index, e.reason)
    table = TopoTable("\n".join(src.lines[i:j]).rstrip() + "\n", i + 1)
    table.__dict__["matrix"] = matrix  # the cached parse: the text is the block just parsed
    return table, j
