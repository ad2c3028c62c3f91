"""Readers for measured traces: nccl-tests (and rccl-tests) tables, CUDA p2pBandwidthLatencyTest matrices,
`nvidia-smi topo -m` and `rocm-smi --showtopo/--shownodesbw` matrices and commented CSV files, as they
appear in logs, READMEs and notes.

`read_trace(path)` finds every known table in a file, wherever it sits between prose, command lines
and other tools' output. Values are converted to SI on reading (bytes, s, bytes/s; nccl-tests and
the CUDA samples both mean 1e9 bytes by "GB"). A table that starts but cannot be read to its end
raises `TraceError` naming the file and line: a trace is never read in part. Rows that read but cannot
be trusted (non-positive or non-finite times, `#wrong` > 0, a repeated size) are kept and marked:
`NcclTable.usable` is False there and `NcclTable.problems` says why, one line each.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
import math
import os
import re
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from netsim import NetsimError, ScenarioError, topology

__all__ = [
    "CsvTable",
    "NcclDevice",
    "NcclTable",
    "P2PMatrix",
    "RocmMatrix",
    "RocmNuma",
    "TopoTable",
    "Trace",
    "TraceError",
    "read_trace",
]


class TraceError(NetsimError, ValueError):
    """A trace file that cannot be read; the message starts with "file:line:"."""


# --- tables ---------------------------------------------------------------------------------------


class NcclDevice(NamedTuple):
    """One "#  Rank  0 Group  0 Pid 1234 on host device  0 [0x07] NVIDIA A100-SXM4-40GB" line."""

    rank: int
    group: int
    pid: int
    host: str
    device: int  # the CUDA/HIP device index the rank ran on (after *_VISIBLE_DEVICES renumbering)
    bus_id: str  # as printed inside [...]: "0x07" (nccl-tests) or "0000:05:00" (newer nccl/rccl-tests)
    name: str  # device model, "" when the line stops after the bus id


_TRUE = ("1", "true", "yes", "on")


@dataclasses.dataclass(frozen=True, eq=False)
class NcclTable:
    """One nccl-tests results table (all_reduce_perf, all_gather_perf, ...).

    Columns are in file order, one row per message size. `time`, `algbw`, `busbw` and `wrong` have one
    column per group in `groups` (usually ("out-of-place", "in-place")); "N/A" cells read as NaN.

    Attributes:
        op: collective, nccl-tests' name without "_perf" ("all_reduce"); "" when the file never says.
        n_gpus: ranks taking part (from the "Rank" lines, nGpus x nThread, or "-g N"); 0 when unknown.
        size: bytes per rank buffer, as printed (int64).
        count: elements (int64).
        dtype: element type per row ("float", "half", ...).
        redop: reduction per row ("sum", "none"; "" when the table has no redop column).
        root: root rank per row (-1: none, as printed, or no root column).
        time: s, shape (rows, groups).
        algbw: bytes/s, shape (rows, groups).
        busbw: bytes/s, shape (rows, groups).
        wrong: validation errors (or the old "error" magnitude), shape (rows, groups).
        groups: label of each column group.
        avg_busbw: bytes/s from the "# Avg bus bandwidth" footer; NaN when absent.
        title: the command or heading line that introduced the table ("" if none).
        line: 1-based line number of the first data row.
        usable: False for each (row, group) that must not be fitted: time N/A, non-finite or not positive,
            a bandwidth below 0, `#wrong` > 0 (or an rccl-tests "*" mark), or a size that repeats an
            earlier row of the table. Shape (rows, groups).
        problems: one "file:line: why" per False in `usable`, in row order; never silent.
        section: the last markdown heading ("## ...") above the table, "" if none: the part of a notes
            file (often the machine) the table belongs to.
        env: environment settings on the command line (`NAME=value` before the command, `-x NAME=value`,
            or `export NAME=value` lines since the previous table): NCCL_*, RCCL_*, and
            CUDA/HIP/ROCR_VISIBLE_DEVICES. See `p2p`, `shm` and `visible_devices`.
        devices: the "# Rank ..." lines of nccl-tests' "# Using devices" block, in rank order.
    """

    op: str
    n_gpus: int
    size: np.ndarray
    count: np.ndarray
    dtype: tuple[str, ...]
    redop: tuple[str, ...]
    root: np.ndarray
    time: np.ndarray
    algbw: np.ndarray
    busbw: np.ndarray
    wrong: np.ndarray
    groups: tuple[str, ...]
    avg_busbw: float
    title: str
    line: int
    usable: np.ndarray = None  # type: ignore[assignment]  (all True when not given)
    problems: tuple[str, ...] = ()
    section: str = ""
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    devices: tuple[NcclDevice, ...] = ()

    def __post_init__(self):
        if self.usable is None:
            object.__setattr__(self, "usable", np.ones(self.time.shape, bool))

    @property
    def p2p(self) -> bool | None:
        """False when the command line disabled NCCL's P2P transport (NCCL_P2P_DISABLE=1 or
        NCCL_P2P_LEVEL=LOC), True when it set NCCL_P2P_DISABLE=0, None when it does not say."""
        if self.env.get("NCCL_P2P_LEVEL", "").upper() in ("LOC", "0"):
            return False
        value = self.env.get("NCCL_P2P_DISABLE")
        return None if value is None else value.lower() not in _TRUE

    @property
    def shm(self) -> bool | None:
        """False when NCCL_SHM_DISABLE=1, True when =0, None when the command line does not say."""
        value = self.env.get("NCCL_SHM_DISABLE")
        return None if value is None else value.lower() not in _TRUE

    @property
    def visible_devices(self) -> tuple[int, ...] | None:
        """Device indices from CUDA_VISIBLE_DEVICES (else HIP_, else ROCR_VISIBLE_DEVICES); None if unset.
        Rank r of a single-process run used visible device r (see `devices`)."""
        for key in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
            if key in self.env:
                return tuple(int(x) for x in self.env[key].split(",") if x)
        return None

    def column(self, name: str, group: str = "out-of-place") -> np.ndarray:
        """One group's `time`, `algbw`, `busbw` or `wrong` column."""
        if group not in self.groups:
            raise KeyError(f"group {group!r} not in this table's groups {self.groups}")
        return getattr(self, name)[:, self.groups.index(group)]


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


@dataclasses.dataclass(frozen=True, eq=False)
class TopoTable:
    """An `nvidia-smi topo -m` block, verbatim; `matrix` is its parse by `netsim.topology`.

    Attributes:
        text: the block (header, device rows and NIC legend), as `parse_nvidia_smi_topo` takes it and
            `pcie_server_from_topo` builds a server from it.
        line: 1-based line number of the header.
    """

    text: str
    line: int

    @functools.cached_property
    def matrix(self) -> topology.TopoMatrix:
        return topology.parse_nvidia_smi_topo(self.text)

    @property
    def devices(self) -> tuple[str, ...]:
        return self.matrix.devices


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


@dataclasses.dataclass(frozen=True, eq=False)
class CsvTable:
    """A CSV table under '#' comment lines; cells are kept as text (the columns' meaning is the file's).

    Attributes:
        columns: header cells.
        rows: one tuple of cells per row, each as long as `columns`.
        line: 1-based line number of the header.
    """

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    line: int

    def column(self, name: str) -> tuple[str, ...]:
        return tuple(row[self.columns.index(name)] for row in self.rows)


Table = NcclTable | P2PMatrix | TopoTable | RocmMatrix | RocmNuma | CsvTable


@dataclasses.dataclass(frozen=True, eq=False)
class Trace:
    """Every table found in one file, with its provenance.

    Attributes:
        source: the file's name (no folder: traces move between machines).
        header: the file's leading comment lines, verbatim.
        machine: the machine description ("# MACHINE: ..." lines, else the host named by nccl-tests).
        tables: in file order.
    """

    source: str
    header: tuple[str, ...]
    machine: str
    tables: tuple[Table, ...]

    def nccl(self, op: str | None = None) -> tuple[NcclTable, ...]:
        """The nccl-tests tables, optionally only those of collective `op` ("all_reduce")."""
        return tuple(t for t in self.tables if isinstance(t, NcclTable) and op in (None, t.op))

    def matrices(
        self, kind: str | None = None, *, p2p: bool | None = None, clock: str | None = None
    ) -> tuple[P2PMatrix, ...]:
        """The p2pBandwidthLatencyTest matrices matching every filter given."""
        return tuple(
            t
            for t in self.tables
            if isinstance(t, P2PMatrix)
            and kind in (None, t.kind)
            and (p2p is None or t.p2p is p2p)
            and clock in (None, t.clock)
        )

    def matrix(self, kind: str, *, p2p: bool | None = None, clock: str | None = None) -> P2PMatrix:
        """The one matrix matching the filters; KeyError naming the file if none or several match."""
        found = self.matrices(kind, p2p=p2p, clock=clock)
        if len(found) != 1:
            raise KeyError(f"{self.source}: {len(found)} {kind} matrices with p2p={p2p}, clock={clock}")
        return found[0]

    def topo(self) -> tuple[TopoTable, ...]:
        return tuple(t for t in self.tables if isinstance(t, TopoTable))

    def rocm(self, kind: str | None = None) -> tuple[RocmMatrix, ...]:
        """The rocm-smi matrices, optionally only those of `kind` ("weight", "bandwidth", ...)."""
        return tuple(t for t in self.tables if isinstance(t, RocmMatrix) and kind in (None, t.kind))


# --- reading --------------------------------------------------------------------------------------

_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^[-+]?(inf|nan)$", re.IGNORECASE)
_INT = re.compile(r"^[-+]?\d+$")
_MPI_TAG = re.compile(
    r"^(\[\d+,\d+\]<std(out|err)>:|\s*\d+: )"
)  # OpenMPI --tag-output, srun --label prefixes
_NCCL_LOG = re.compile(r"\bNCCL (INFO|WARN|TRACE)\b")  # NCCL_DEBUG lines interleaved with results
_OP = re.compile(r"\b([a-z_]+)_perf\b")
_RANK = re.compile(
    r"Rank\s+(?P<rank>\d+)\s+(?:Group\s+(?P<group>\d+)\s+)?Pid\s+(?P<pid>\d+)\s+on\s+(?P<host>\S+)"
    r"\s+device\s+(?P<device>\d+)\s+\[(?P<bus>[^\]]*)\](?P<name>.*)$"
)
_HEADING = re.compile(r"\s*##+\s+(.*)")  # markdown section heading; nccl-tests' own comments use one "#"
_SETTING = r"(?P<name>(?:NCCL|RCCL)_[A-Z0-9_]+|(?:CUDA|HIP|ROCR)_VISIBLE_DEVICES)=(?P<value>\"[^\"]*\"|'[^']*'|[^\s;]*)"
_ENV_ANY = re.compile(r"(?<![\w-])" + _SETTING)  # anywhere on a command line ("-x NAME=v" too)
_ENV_EXPORT = re.compile(r"^(?:export\s+)" + _SETTING + r"\s*;?\s*$")  # a line of its own
_ROCM_TITLE = re.compile(
    r"^\s*=+\s*(Weight between two GPUs|Hops between two GPUs|Link Type between two GPUs|"
    r"Link accessibility between two GPUs|Bandwidth|Numa Nodes)\s*=+\s*$",
    re.IGNORECASE,
)
_ROCM_KINDS = {
    "weight": "weight",
    "hops": "hops",
    "link type": "link_type",
    "link accessibility": "access",
    "bandwidth": "bandwidth",
}
_FILE_OPS = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "alltoall": "alltoall",
    "broadcast": "broadcast",
    "sendrecv": "sendrecv",
}
_P2P_TITLE = re.compile(
    r"^(?:(?P<dir>unidirectional|bidirectional)\s+)?P2P\s*=\s*(?P<mode>enabled|disabled)\s+"
    r"(?P<what>bandwidth|latency)\s*(?:\(\s*P2P\s+(?P<method>writes|reads)\s*\)\s*)?matrix\s*"
    r"\((?P<unit>[^)]*)\)",
    re.IGNORECASE,
)
_CONNECTIVITY_TITLE = re.compile(r"^P2P\s+Connectivity\s+Matrix\b", re.IGNORECASE)
_UNITS = {"gb/s": 1e9, "mb/s": 1e6, "kb/s": 1e3, "b/s": 1.0, "us": 1e-6, "ms": 1e-3, "ns": 1e-9, "s": 1.0}
_NCCL_COLUMNS = {
    "size": "size",
    "bytes": "size",
    "count": "count",
    "n": "count",
    "elements": "count",
    "type": "dtype",
    "redop": "redop",
    "op": "redop",
    "root": "root",
}
_GROUP_COLUMNS = {
    "time": "time",
    "algbw": "algbw",
    "busbw": "busbw",
    "#wrong": "wrong",
    "wrong": "wrong",
    "error": "wrong",
    "res": "wrong",
}


def _comment(line: str) -> str | None:
    """The text of a "#" comment line without its marks (indented or not); None for other lines."""
    stripped = line.lstrip()
    return stripped.lstrip("#").strip() if stripped.startswith("#") else None


def read_trace(path: str | os.PathLike) -> Trace:
    """Reads every known table in the file at `path`.

    Raises:
        TraceError: "file:line: why" for a table that is malformed (truncated row, non-numeric cell,
            wrong column count, missing rows) or for a file with no known table at all.
    """
    name = os.path.basename(os.fspath(path))
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    return _Reader(name, text.splitlines()).read()


class _Reader:
    def __init__(self, name: str, lines: Sequence[str]):
        self.name = name
        self.raw = list(lines)
        self.lines = [_MPI_TAG.sub("", ln).rstrip("\r") for ln in lines]

    def fail(self, i: int, why: str):
        raise TraceError(f"{self.name}:{i + 1}: {why}")

    def read(self) -> Trace:
        if self.name.lower().endswith(".csv"):
            tables: list[Table] = [self.csv()]
        else:
            tables = []
            i, since = 0, 0  # `since`: first line after the previous table (context for op, ranks, title)
            while i < len(self.lines):
                found = self.table_at(i, since)
                if found is None:
                    i += 1
                    continue
                found_tables, i = found
                tables.extend(found_tables)
                since = i
        if not tables:
            self.fail(
                max(len(self.lines) - 1, 0),
                "no known table (nccl-tests, p2pBandwidthLatencyTest, "
                "nvidia-smi topo -m, rocm-smi or CSV) in this file",
            )
        return Trace(self.name, self.header(), self.machine(), tuple(tables))

    def table_at(self, i: int, since: int) -> tuple[list[Table], int] | None:
        """The table(s) starting at line i and the line after them, or None if no table starts there."""
        line = self.lines[i]
        m = _ROCM_TITLE.match(line)
        if m:
            return self.rocm(i, m.group(1).strip())
        if self.is_topo_header(line):  # also when quoted with "#" (netsim.topology reads it either way)
            table, j = self.topo(i)
            return [table], j
        body = _comment(line)
        if body is not None:
            tokens = body.split()
            if tokens and tokens[0].lower() in ("size", "bytes") and "time" in tokens and "busbw" in tokens:
                table, j = self.nccl(i, since)
                return [table], j
            return None
        text = line.strip()
        if _CONNECTIVITY_TITLE.match(text):
            values, j = self.matrix(i + 1, "D\\D", int)
            return [P2PMatrix("connectivity", None, "", "", values, text, i + 2)], j
        m = _P2P_TITLE.match(text)
        if m:
            return self.p2p(i, m)
        if text.split()[:1] == ["D\\D"]:  # a matrix whose title was not one of the above: never skip it
            above = self.lines[i - 1].strip() if i else ""
            self.fail(
                i, f"p2pBandwidthLatencyTest matrix header with no known title above it (got {above!r})"
            )
        return None

    # --- nccl-tests -----------------------------------------------------------------------------
    def nccl(self, i: int, since: int) -> tuple[NcclTable, int]:
        names = _comment(self.lines[i]).split()
        fixed: list[str] = []
        k = 0
        while k < len(names) and names[k].lower() != "time":
            col = _NCCL_COLUMNS.get(names[k].lower())
            if col is None or col in fixed:
                self.fail(i, f"unknown nccl-tests column {names[k]!r} in header {names}")
            fixed.append(col)
            k += 1
        per_group: list[list[str]] = []
        counts_wrong = False  # "#wrong" counts bad elements; the old "error" column is a magnitude
        for token in names[k:]:
            col = _GROUP_COLUMNS.get(token.lower())
            if col is None:
                self.fail(i, f"unknown nccl-tests column {token!r} in header {names}")
            if col == "time":
                per_group.append([])
            if col in per_group[-1]:
                self.fail(i, f"column {token!r} repeated within one group in header {names}")
            per_group[-1].append(col)
            counts_wrong |= token.lower() in ("#wrong", "wrong")
        if "size" not in fixed or any(g != per_group[0] for g in per_group) or "time" not in per_group[0]:
            self.fail(i, f"nccl-tests header needs size and equal time/algbw/busbw groups, got {names}")
        groups = self.group_labels(i, len(per_group))
        width = len(fixed) + sum(len(g) for g in per_group)

        j = i + 1
        while j < len(self.lines) and re.match(
            r"\s*#\s*\(", self.lines[j]
        ):  # the "(B) (elements)" units line
            j += 1
        rows: list[tuple[int, list[str]]] = []
        while j < len(self.lines):
            text = self.lines[j].strip()
            if _NCCL_LOG.search(text):
                j += 1
                continue
            if not text:  # a blank line ends the table only if no row follows it
                k = self.next_nonblank(j)
                if k < len(self.lines) and self.is_row(k, width):
                    j = k
                    continue
                break
            if text.startswith("#"):
                break
            cells = text.split()
            if not _INT.match(cells[0]):
                if re.fullmatch(r"[-+]?\d[\d,.]*", cells[0]):
                    why = "thousands separators" if "," in cells[0] else "not an integer"
                    self.fail(j, f"nccl-tests row starts with size {cells[0]!r} ({why}): {text!r}")
                k = self.next_nonblank(j + 1)
                while k < len(self.lines) and _NCCL_LOG.search(self.lines[k]):
                    k = self.next_nonblank(k + 1)
                if k < len(self.lines) and self.is_row(k, width):
                    self.fail(
                        j, f"stray line inside an nccl-tests table (rows follow on line {k + 1}): {text!r}"
                    )
                break
            if len(cells) != width:
                self.fail(j, f"nccl-tests row has {len(cells)} columns, the header {names} has {width}")
            rows.append((j, cells))
            j += 1
        if not rows:
            self.fail(min(j, len(self.lines) - 1), "nccl-tests header with no data rows after it")

        cols: dict[str, list] = {c: [] for c in fixed}
        grouped = {c: [] for c in per_group[0]}
        starred = np.zeros((len(rows), len(groups)), bool)  # rccl-tests marks a #wrong over its threshold "*"
        for r_i, (r, cells) in enumerate(rows):
            for c, cell in zip(fixed, cells, strict=False):
                cols[c].append(self.cell(r, cell, c, int if c in ("size", "count", "root") else str))
            rest = cells[len(fixed) :]
            n = len(per_group[0])
            for c_i, c in enumerate(per_group[0]):
                values = []
                for g in range(len(per_group)):
                    cell = rest[g * n + c_i]
                    if c == "wrong" and cell.endswith("*"):
                        starred[r_i, g], cell = True, cell[:-1]
                    values.append(self.cell(r, cell, f"{c} ({groups[g]})", float, na=True))
                grouped[c].append(values)
        n_rows = len(rows)
        empty = np.full((n_rows, len(groups)), np.nan)
        scale = {"time": 1e-6, "algbw": 1e9, "busbw": 1e9, "wrong": 1.0}
        group_arr = {c: np.asarray(grouped[c], float) * scale[c] if c in grouped else empty for c in scale}
        size = np.asarray(cols["size"], np.int64)
        dtype = tuple(cols.get("dtype", [""] * n_rows))
        redop = tuple(cols.get("redop", [""] * n_rows))
        root = np.asarray(cols.get("root", [-1] * n_rows), np.int64)
        keys = [(int(a), b, c, int(d)) for a, b, c, d in zip(size, dtype, redop, root, strict=True)]
        usable, problems = self.screen(rows, groups, keys, group_arr, counts_wrong, starred)
        avg, j = self.footer(j)
        op, n_gpus, title, env, devices = self.nccl_context(since, i)
        table = NcclTable(
            op=op,
            n_gpus=n_gpus,
            size=size,
            count=np.asarray(cols.get("count", [-1] * n_rows), np.int64),
            dtype=dtype,
            redop=redop,
            root=root,
            time=group_arr["time"],
            algbw=group_arr["algbw"],
            busbw=group_arr["busbw"],
            wrong=group_arr["wrong"],
            groups=groups,
            avg_busbw=avg,
            title=title,
            line=rows[0][0] + 1,
            usable=usable,
            problems=problems,
            section=self.section(i),
            env=env,
            devices=devices,
        )
        return table, j

    def is_row(self, k: int, width: int) -> bool:
        """Line k reads as an nccl-tests data row of `width` cells (integer size first)."""
        cells = self.lines[k].split()
        return len(cells) == width and bool(_INT.match(cells[0]))

    def screen(self, rows, groups, keys, arr, counts_wrong, starred) -> tuple[np.ndarray, tuple[str, ...]]:
        """The `usable` mask and one "file:line: why" per unusable (row, group); see NcclTable.
        keys[r]: (size, dtype, redop, root) of row r; a repeat of an earlier row's key is unusable."""
        usable = np.ones((len(rows), len(groups)), bool)
        problems: list[str] = []
        first: dict[tuple, int] = {}
        for r_i, (r, _) in enumerate(rows):
            repeat = first.setdefault(keys[r_i], r)
            for g, label in enumerate(groups):
                time, wrong = arr["time"][r_i, g], arr["wrong"][r_i, g]
                why = f"size {keys[r_i][0]} repeats line {repeat + 1}" if repeat != r else ""
                if not why and math.isnan(time):
                    why = "time is N/A or NaN"
                elif not why and not (math.isfinite(time) and time > 0):
                    why = f"time {time * 1e6:g} us is not a positive finite number"
                if not why and (arr["algbw"][r_i, g] < 0 or arr["busbw"][r_i, g] < 0):
                    why = "negative bandwidth"
                if not why and counts_wrong and wrong > 0:
                    why = f"#wrong = {wrong:g}"
                if not why and starred[r_i, g]:
                    why = f"error {wrong:g} over rccl-tests' threshold (marked '*')"
                if why:
                    usable[r_i, g] = False
                    problems.append(f"{self.name}:{r + 1}: {label}: {why}")
        return usable, tuple(problems)

    def group_labels(self, i: int, n: int) -> tuple[str, ...]:
        """Labels from the "out-of-place  in-place" line above the header, else the usual ones."""
        above = _comment(self.lines[i - 1]) if i > 0 else None
        if above is not None:
            labels = above.split()
            if len(labels) == n and all("place" in x for x in labels):
                return tuple(labels)
        return ("out-of-place", "in-place")[:n] if n <= 2 else tuple(f"group{g}" for g in range(n))

    def footer(self, j: int) -> tuple[float, int]:
        """Reads the "# Out of bounds" / "# Avg bus bandwidth" footer lines; returns (avg busbw, next line)."""
        avg = math.nan
        while j < len(self.lines) and (body := _comment(self.lines[j])) is not None:
            m = re.match(r"avg bus bandwidth\s*:\s*(\S+)", body, re.IGNORECASE)
            if m:
                avg = self.cell(j, m.group(1), "Avg bus bandwidth", float) * 1e9
            elif not re.match(r"(out of bounds values|errors with asterisks|$)", body, re.IGNORECASE):
                break
            j += 1
        return avg, j

    def nccl_context(
        self, since: int, header: int
    ) -> tuple[str, int, str, dict[str, str], tuple[NcclDevice, ...]]:
        """(op, ranks, title, env, devices) from the lines between the previous table and this header.

        `env`: the settings on the command line (the title, with the lines it continues with a trailing
        backslash), over the `export NAME=value` lines since the start of the section (shell semantics:
        an export lasts; a `NAME=value` prefix or `-x` lasts for one command)."""
        op, title, n_gpus, n_threads, g_flag, command = "", "", 0, 1, 0, -1
        devices: list[NcclDevice] = []
        for k in range(since, header):
            text = self.text(k)
            m = _OP.search(text)
            if m:
                op, title, command = m.group(1), text, k
                g = re.search(r"(?:^|\s)-g\s*(\d+)", text)
                g_flag = int(g.group(1)) if g else g_flag
            m = _RANK.match(text)
            if m:
                devices.append(
                    NcclDevice(
                        int(m["rank"]),
                        int(m["group"] or 0),
                        int(m["pid"]),
                        m["host"],
                        int(m["device"]),
                        m["bus"],
                        m["name"].strip(),
                    )
                )
            elif re.match(r"Rank\s+\d+\s+(Group|Pid)\b", text):
                self.fail(k, f"cannot read nccl-tests rank line {text!r}")
            for key in ("nGpus", "nThread"):
                m = re.search(rf"\b{key}\s+(\d+)", text)
                if m and key == "nGpus":
                    n_gpus = int(m.group(1))
                elif m:
                    n_threads = int(m.group(1))
        if not op:
            flat = self.name.lower().replace("_", "").replace("-", "")
            op = next((v for k, v in _FILE_OPS.items() if k in flat), "")
        env: dict[str, str] = {}
        start = self.section_start(header)
        for k in range(start, command if command >= 0 else header):
            if _comment(self.lines[k]) is None:
                env.update(self.env_settings(k, _ENV_EXPORT))
        first = command
        while first > start and self.lines[first - 1].rstrip().endswith("\\"):
            first -= 1
        for k in range(first, command + 1 if command >= 0 else first):
            env.update(self.env_settings(k, _ENV_ANY))
        return op, len(devices) or n_gpus * n_threads or g_flag, title, env, tuple(devices)

    def text(self, k: int) -> str:
        """Line k without its comment marks and surrounding blanks."""
        body = _comment(self.lines[k])
        return body if body is not None else self.lines[k].strip()

    def env_settings(self, k: int, pattern: re.Pattern) -> dict[str, str]:
        """The NAME=value settings `pattern` finds on line k (names: NCCL_*, RCCL_*, *_VISIBLE_DEVICES)."""
        out = {}
        for m in pattern.finditer(self.text(k)):
            name, value = m.group("name"), m.group("value").strip("'\"")
            if name.endswith("_VISIBLE_DEVICES") and not re.fullmatch(r"\d+(,\d+)*,?", value):
                self.fail(
                    k,
                    f"{name}={value!r} is not a list of device indices (netsim maps ranks to "
                    "devices by index)",
                )
            out[name] = value
        return out

    def section_start(self, header: int) -> int:
        """The line of the last markdown heading ("## ...") above `header`, else 0."""
        return next((k for k in range(header - 1, -1, -1) if _HEADING.match(self.lines[k])), 0)

    def section(self, header: int) -> str:
        """The text of the last markdown heading ("## ...") above line `header`, "" if none."""
        m = _HEADING.match(self.lines[self.section_start(header)])
        return m.group(1).strip() if m else ""

    # --- p2pBandwidthLatencyTest ----------------------------------------------------------------
    def p2p(self, i: int, m: re.Match) -> tuple[list[P2PMatrix], int]:
        title = self.lines[i].strip()
        unit = m.group("unit").strip().lower()
        if unit not in _UNITS:
            self.fail(i, f"unknown unit ({m.group('unit')}) in {title!r}")
        what, p2p = m.group("what").lower(), m.group("mode").lower() == "enabled"
        method = (m.group("method") or "").lower()
        if what == "bandwidth":
            if not m.group("dir"):
                self.fail(i, f"bandwidth matrix title names no direction: {title!r}")
            values, j = self.matrix(i + 1, "D\\D", float)
            return [
                P2PMatrix(m.group("dir").lower(), p2p, method, "", values * _UNITS[unit], title, i + 2)
            ], j
        # Latency: a "GPU" sub-table, then (newer cuda-samples) a "CPU" one after a blank line.
        head = self.next_nonblank(i + 1)
        label = self.lines[head].split()[0] if head < len(self.lines) else ""
        values, j = self.matrix(head, label, float)
        clock = "cpu" if label.upper() == "CPU" else "gpu"
        out = [P2PMatrix("latency", p2p, method, clock, values * _UNITS[unit], title, head + 1)]
        nxt = self.next_nonblank(j)
        if clock == "gpu" and nxt < len(self.lines) and self.lines[nxt].split()[:1] == ["CPU"]:
            cpu, j = self.matrix(nxt, "CPU", float)
            out.append(P2PMatrix("latency", p2p, method, "cpu", cpu * _UNITS[unit], title, nxt + 1))
        return out, j

    def next_nonblank(self, j: int) -> int:
        while j < len(self.lines) and not self.lines[j].strip():
            j += 1
        return j

    def matrix(self, i: int, label: str, kind: type) -> tuple[np.ndarray, int]:
        """An n x n block: a header `label 0 1 .. n-1`, then rows `r v_0 .. v_n-1` for r = 0 .. n-1."""
        if i >= len(self.lines):
            self.fail(len(self.lines) - 1, f"file ends where a matrix header '{label} 0 1 ...' was expected")
        head = self.lines[i].split()
        if (
            not head
            or head[0].upper() != label.upper()
            or head[1:] != [str(k) for k in range(len(head) - 1)]
            or len(head) < 2
        ):
            self.fail(i, f"expected a matrix header '{label} 0 1 ...', got {self.lines[i].strip()!r}")
        n = len(head) - 1
        rows = []
        for r in range(n):
            j = i + 1 + r
            if j >= len(self.lines) or not self.lines[j].strip():
                self.fail(min(j, len(self.lines) - 1), f"matrix ends after {r} of {n} rows")
            cells = self.lines[j].split()
            if cells[0] != str(r):
                self.fail(j, f"expected matrix row {r}, got {self.lines[j].strip()!r}")
            if len(cells) != n + 1:
                self.fail(j, f"matrix row {r} has {len(cells) - 1} values, the header has {n} columns")
            rows.append([self.cell(j, c, f"column {k}", kind) for k, c in enumerate(cells[1:])])
        j = i + 1 + n
        if j < len(self.lines) and self.lines[j].split()[:1] == [str(n)]:
            self.fail(j, f"matrix has more rows than its {n} header columns")
        return np.asarray(rows, float), j

    # --- rocm-smi -------------------------------------------------------------------------------
    def rocm(self, i: int, title: str) -> tuple[list[Table], int]:
        """A rocm-smi section from its "=== title ===" banner: a GPU x GPU matrix or the NUMA lines."""
        if title.lower() == "numa nodes":
            return self.rocm_numa(i, title)
        kind = next(v for k, v in _ROCM_KINDS.items() if title.lower().startswith(k))
        h = self.next_nonblank(i + 1)
        head = self.lines[h].split() if h < len(self.lines) else []
        if len(head) < 1 or head != [f"GPU{k}" for k in range(len(head))]:
            got = self.lines[h].strip() if h < len(self.lines) else "the end of the file"
            self.fail(
                min(h, len(self.lines) - 1),
                f"rocm-smi {title!r}: expected a header 'GPU0 GPU1 ...', got {got!r}",
            )
        n = len(head)
        cells: list[tuple[str, ...]] = []
        for r in range(n):
            j = h + 1 + r
            row = self.lines[j].split() if j < len(self.lines) else []
            if not row or not re.fullmatch(r"GPU\d+", row[0]):
                self.fail(
                    min(j, len(self.lines) - 1), f"rocm-smi {title!r} matrix ends after {r} of {n} rows"
                )
            if row[0] != f"GPU{r}":
                self.fail(j, f"rocm-smi {title!r}: expected row GPU{r}, got {self.lines[j].strip()!r}")
            if len(row) != n + 1:
                self.fail(j, f"rocm-smi {title!r}: row GPU{r} has {len(row) - 1} cells, the header has {n}")
            cells.append(tuple(row[1:]))
        j = h + 1 + n
        if j < len(self.lines) and self.lines[j].split()[:1] == [f"GPU{n}"]:
            self.fail(j, f"rocm-smi {title!r} matrix has more rows than its {n} header columns")
        values, minimum = np.full((n, n), np.nan), np.full((n, n), np.nan)
        for r, row in enumerate(cells):
            for c, cell in enumerate(row):
                if cell.upper() == "N/A" or kind in ("link_type", "access"):
                    continue
                if kind == "bandwidth":  # "min-max" in MB/s (KFD io_link min/max_bandwidth); "0-0": no link
                    m = re.fullmatch(r"(\d+)-(\d+)", cell)
                    if not m:
                        self.fail(
                            h + 1 + r,
                            f"rocm-smi bandwidth: cannot read {cell!r} (GPU{r} -> GPU{c}) as 'min-max'",
                        )
                    minimum[r, c], values[r, c] = float(m.group(1)) * 1e6, float(m.group(2)) * 1e6
                else:
                    values[r, c] = self.cell(h + 1 + r, cell, f"{kind} GPU{r} -> GPU{c}", int)
        k = self.next_nonblank(j)
        m = re.match(r"\s*Format:.*Units:\s*(\S+)", self.lines[k]) if k < len(self.lines) else None
        if m and m.group(1).lower() != "mps":
            self.fail(k, f"rocm-smi bandwidth in unknown units {m.group(1)!r} (expected 'mps', MB/s)")
        return [RocmMatrix(kind, tuple(head), tuple(cells), values, minimum, title, h + 1)], j

    def rocm_numa(self, i: int, title: str) -> tuple[list[Table], int]:
        """`GPU[k] : (Topology) Numa Node: v` / `Numa Affinity: v` lines after the banner at line i."""
        found: dict[str, dict[int, int]] = {"node": {}, "affinity": {}}
        j, first = i + 1, -1
        while j < len(self.lines) and (
            not self.lines[j].strip() or self.lines[j].lstrip().startswith("GPU[")
        ):
            text = self.lines[j].strip()
            if text:
                m = re.fullmatch(
                    r"GPU\[(\d+)\]\s*:\s*\(Topology\)\s*Numa (Node|Affinity)\s*:\s*(-?\d+)", text
                )
                if not m:
                    self.fail(j, f"rocm-smi {title!r}: cannot read {text!r}")
                found[m.group(2).lower()][int(m.group(1))] = int(m.group(3))
                first = j if first < 0 else first
            j += 1
        if first < 0:
            self.fail(min(j, len(self.lines) - 1), f"rocm-smi {title!r} banner with no GPU lines after it")
        n = max(max(d, default=-1) for d in found.values()) + 1
        arrays = {key: np.array([d.get(g, -1) for g in range(n)], np.int64) for key, d in found.items()}
        return [RocmNuma(arrays["node"], arrays["affinity"], first + 1)], j

    # --- nvidia-smi topo -m ---------------------------------------------------------------------
    @staticmethod
    def is_topo_header(line: str) -> bool:
        words = line.lstrip().removeprefix("#").split()
        return (
            len(words) >= 2
            and words[0] == "GPU0"
            and bool(re.fullmatch(r"GPU1|NIC0|mlx\d+_\d+|CPU|\.\.\.", words[1]))
        )

    def topo(self, i: int) -> tuple[TopoTable, int]:
        """The block from header line i: device rows, then an optional NIC legend; parsed by netsim.topology."""
        row = lambda ln: re.fullmatch(
            r"(GPU|NIC)\d+|mlx\d+_\d+", (ln.lstrip().removeprefix("#").split() or [""])[0]
        )
        j = i + 1
        while j < len(self.lines) and row(self.lines[j]):
            j += 1
        k = self.next_nonblank(j)
        if k < len(self.lines) and re.match(r"\s*#?\s*NIC Legend:", self.lines[k]):
            j = k + 1
            while j < len(self.lines) and re.match(r"\s*#?\s*(NIC\d+\s*:\s*\S+)?\s*$", self.lines[j]):
                j += 1
        gpu0 = next(
            (k for k in range(i + 1, j) if self.lines[k].lstrip().removeprefix("#").split()[:1] == ["GPU0"]),
            -1,
        )
        diagonal = self.lines[gpu0].lstrip().removeprefix("#").split()[1:2] if gpu0 >= 0 else []
        if diagonal != ["X"]:  # nvidia-smi marks the diagonal "X"; rocm-smi prints 0, N/A or True there
            self.fail(
                i,
                f"a 'GPU0 GPU1 ...' matrix that is not `nvidia-smi topo -m` (GPU0 -> GPU0 is "
                f"{(diagonal or ['missing'])[0]!r}, not 'X'); rocm-smi matrices are read under their "
                "'=== Weight between two GPUs ===' (Hops, Link Type, Bandwidth) titles",
            )
        table = TopoTable("\n".join(self.lines[i:j]).rstrip() + "\n", i + 1)
        try:
            table.matrix  # noqa: B018  (parse now: a bad block fails at read time, with its line)
        except ScenarioError as e:
            m = re.match(r"nvidia-smi topo line (\d+): (.*)", str(e), re.DOTALL)
            self.fail(i + int(m.group(1)) - 1 if m else i, m.group(2) if m else str(e))
        return table, j

    # --- CSV ------------------------------------------------------------------------------------
    def csv(self) -> CsvTable:
        start = next((k for k, ln in enumerate(self.lines) if ln.strip() and not ln.startswith("#")), None)
        if start is None:
            self.fail(max(len(self.lines) - 1, 0), "CSV file has no header row")
        body = "\n".join(self.lines[start:])
        reader = csv.reader(io.StringIO(body))
        try:
            parsed = list(reader)
        except csv.Error as e:
            self.fail(start + reader.line_num - 1, f"CSV: {e}")
        columns = tuple(parsed[0])
        rows = []
        for k, row in enumerate(parsed[1:], start=start + 1):
            if not row:
                continue
            if len(row) != len(columns):
                self.fail(k, f"CSV row has {len(row)} cells, the header has {len(columns)}")
            rows.append(tuple(row))
        return CsvTable(columns, tuple(rows), start + 1)

    # --- provenance -----------------------------------------------------------------------------
    def header(self) -> tuple[str, ...]:
        out = []
        for line in self.raw:
            if not line.lstrip().startswith("#"):
                break
            out.append(line.rstrip("\r"))
        return tuple(out)

    def machine(self) -> str:
        """The "# MACHINE: ..." comment with its indented continuation lines; else nccl-tests' host."""
        parts: list[str] = []
        inside = False
        for line in self.lines:
            if not line.lstrip().startswith("#"):
                inside = False
                continue
            body = line.lstrip()[1:]
            m = re.match(r"\s*MACHINE[^:]*:\s*(.*)", body)
            if m:
                parts.append(m.group(1).strip())
                inside = True
            elif inside and re.match(r"\s{2,}\S", body) and not re.match(r"\s*[A-Z]+[A-Z ]*:", body):
                parts[-1] += " " + body.strip()
            else:
                inside = False
        if parts:
            return "\n".join(parts)
        hosts = re.findall(r"Rank\s+\d+\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)", "\n".join(self.lines))
        return hosts[0] if hosts else ""

    def cell(self, i: int, text: str, column: str, kind: type, *, na: bool = False):
        if kind is str:
            return text
        if na and text.upper() == "N/A":
            return math.nan
        if kind is int and _INT.match(text):
            if len(text.lstrip("+-")) > 15:  # beyond any measured count, and beyond float64's exact integers
                self.fail(i, f"{column}: {text[:20]}... ({len(text)} digits) is not a plausible count")
            return int(text)
        if kind is float and _NUMBER.match(text):
            return float(text)
        self.fail(i, f"{column}: cannot read {text!r} as {'an integer' if kind is int else 'a number'}")
