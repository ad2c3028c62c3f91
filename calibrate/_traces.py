"""Readers for measured traces: nccl-tests tables, CUDA p2pBandwidthLatencyTest matrices,
`nvidia-smi topo -m` matrices and commented CSV files, as they appear in logs, READMEs and notes.

`read_trace(path)` finds every known table in a file, wherever it sits between prose, command lines
and other tools' output. Values are converted to SI on reading (bytes, s, bytes/s; nccl-tests and
the CUDA samples both mean 1e9 bytes by "GB"). A table that starts but cannot be read to its end
raises `TraceError` naming the file and line: a trace is never read in part.
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

import numpy as np

from netsim import NetsimError, ScenarioError, topology

__all__ = ["CsvTable", "NcclTable", "P2PMatrix", "TopoTable", "Trace", "TraceError", "read_trace"]


class TraceError(NetsimError, ValueError):
    """A trace file that cannot be read; the message starts with "file:line:"."""


# --- tables ---------------------------------------------------------------------------------------


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


Table = NcclTable | P2PMatrix | TopoTable | CsvTable


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

    def matrices(self, kind: str | None = None, *, p2p: bool | None = None,
                 clock: str | None = None) -> tuple[P2PMatrix, ...]:
        """The p2pBandwidthLatencyTest matrices matching every filter given."""
        return tuple(t for t in self.tables if isinstance(t, P2PMatrix) and kind in (None, t.kind)
                     and (p2p is None or t.p2p is p2p) and clock in (None, t.clock))

    def matrix(self, kind: str, *, p2p: bool | None = None, clock: str | None = None) -> P2PMatrix:
        """The one matrix matching the filters; KeyError naming the file if none or several match."""
        found = self.matrices(kind, p2p=p2p, clock=clock)
        if len(found) != 1:
            raise KeyError(f"{self.source}: {len(found)} {kind} matrices with p2p={p2p}, clock={clock}")
        return found[0]

    def topo(self) -> tuple[TopoTable, ...]:
        return tuple(t for t in self.tables if isinstance(t, TopoTable))


# --- reading --------------------------------------------------------------------------------------

_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^[-+]?(inf|nan)$", re.IGNORECASE)
_INT = re.compile(r"^[-+]?\d+$")
_MPI_TAG = re.compile(r"^\[\d+,\d+\]<std(out|err)>:")  # OpenMPI --tag-output prefix
_NCCL_LOG = re.compile(r"\bNCCL (INFO|WARN|TRACE)\b")  # NCCL_DEBUG lines interleaved with results
_OP = re.compile(r"\b([a-z_]+)_perf\b")
_FILE_OPS = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
             "alltoall": "alltoall", "broadcast": "broadcast", "sendrecv": "sendrecv"}
_P2P_TITLE = re.compile(
    r"^(?:(?P<dir>unidirectional|bidirectional)\s+)?P2P\s*=\s*(?P<mode>enabled|disabled)\s+"
    r"(?P<what>bandwidth|latency)\s*(?:\(\s*P2P\s+(?P<method>writes|reads)\s*\)\s*)?matrix\s*"
    r"\((?P<unit>[^)]*)\)", re.IGNORECASE)
_CONNECTIVITY_TITLE = re.compile(r"^P2P\s+Connectivity\s+Matrix\b", re.IGNORECASE)
_UNITS = {"gb/s": 1e9, "mb/s": 1e6, "kb/s": 1e3, "b/s": 1.0, "us": 1e-6, "ms": 1e-3, "ns": 1e-9, "s": 1.0}
_NCCL_COLUMNS = {"size": "size", "bytes": "size", "count": "count", "n": "count", "elements": "count",
                 "type": "dtype", "redop": "redop", "op": "redop", "root": "root"}
_GROUP_COLUMNS = {"time": "time", "algbw": "algbw", "busbw": "busbw", "#wrong": "wrong", "wrong": "wrong",
                  "error": "wrong", "res": "wrong"}


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
            self.fail(max(len(self.lines) - 1, 0), "no known table (nccl-tests, p2pBandwidthLatencyTest, "
                      "nvidia-smi topo -m or CSV) in this file")
        return Trace(self.name, self.header(), self.machine(), tuple(tables))

    def table_at(self, i: int, since: int) -> tuple[list[Table], int] | None:
        """The table(s) starting at line i and the line after them, or None if no table starts there."""
        line = self.lines[i]
        if self.is_topo_header(line):  # also when quoted with "#" (netsim.topology reads it either way)
            table, j = self.topo(i)
            return [table], j
        body = line.lstrip("#").strip() if line.lstrip().startswith("#") else None
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
        return None

    # --- nccl-tests -----------------------------------------------------------------------------
    def nccl(self, i: int, since: int) -> tuple[NcclTable, int]:
        names = self.lines[i].lstrip("#").split()
        fixed: list[str] = []
        k = 0
        while k < len(names) and names[k].lower() != "time":
            col = _NCCL_COLUMNS.get(names[k].lower())
            if col is None or col in fixed:
                self.fail(i, f"unknown nccl-tests column {names[k]!r} in header {names}")
            fixed.append(col)
            k += 1
        per_group: list[list[str]] = []
        for token in names[k:]:
            col = _GROUP_COLUMNS.get(token.lower())
            if col is None:
                self.fail(i, f"unknown nccl-tests column {token!r} in header {names}")
            if col == "time":
                per_group.append([])
            if col in per_group[-1]:
                self.fail(i, f"column {token!r} repeated within one group in header {names}")
            per_group[-1].append(col)
        if "size" not in fixed or any(g != per_group[0] for g in per_group) or "time" not in per_group[0]:
            self.fail(i, f"nccl-tests header needs size and equal time/algbw/busbw groups, got {names}")
        groups = self.group_labels(i, len(per_group))
        width = len(fixed) + sum(len(g) for g in per_group)

        j = i + 1
        while j < len(self.lines) and re.match(r"\s*#\s*\(", self.lines[j]):  # the "(B) (elements)" units line
            j += 1
        rows: list[tuple[int, list[str]]] = []
        while j < len(self.lines):
            text = self.lines[j].strip()
            if _NCCL_LOG.search(text):
                j += 1
                continue
            if not text or text.startswith("#") or not _INT.match(text.split()[0]):
                break
            cells = text.split()
            if len(cells) != width:
                self.fail(j, f"nccl-tests row has {len(cells)} columns, the header {names} has {width}")
            rows.append((j, cells))
            j += 1
        if not rows:
            self.fail(min(j, len(self.lines) - 1), "nccl-tests header with no data rows after it")

        cols: dict[str, list] = {c: [] for c in fixed}
        grouped = {c: [] for c in per_group[0]}
        for r, cells in rows:
            for c, cell in zip(fixed, cells, strict=False):
                cols[c].append(self.cell(r, cell, c, int if c in ("size", "count", "root") else str))
            rest = cells[len(fixed):]
            n = len(per_group[0])
            for c_i, c in enumerate(per_group[0]):
                grouped[c].append([self.cell(r, rest[g * n + c_i], f"{c} ({groups[g]})", float, na=True)
                                   for g in range(len(per_group))])
        n_rows = len(rows)
        empty = np.full((n_rows, len(groups)), np.nan)
        scale = {"time": 1e-6, "algbw": 1e9, "busbw": 1e9, "wrong": 1.0}
        group_arr = {c: np.asarray(grouped[c], float) * scale[c] if c in grouped else empty
                     for c in scale}
        avg, j = self.footer(j)
        op, n_gpus, title = self.nccl_context(since, i)
        table = NcclTable(
            op=op, n_gpus=n_gpus,
            size=np.asarray(cols["size"], np.int64),
            count=np.asarray(cols.get("count", [-1] * n_rows), np.int64),
            dtype=tuple(cols.get("dtype", [""] * n_rows)), redop=tuple(cols.get("redop", [""] * n_rows)),
            root=np.asarray(cols.get("root", [-1] * n_rows), np.int64),
            time=group_arr["time"], algbw=group_arr["algbw"], busbw=group_arr["busbw"],
            wrong=group_arr["wrong"], groups=groups, avg_busbw=avg, title=title, line=rows[0][0] + 1)
        return table, j

    def group_labels(self, i: int, n: int) -> tuple[str, ...]:
        """Labels from the "out-of-place  in-place" line above the header, else the usual ones."""
        if i > 0 and self.lines[i - 1].lstrip().startswith("#"):
            labels = self.lines[i - 1].lstrip("#").split()
            if len(labels) == n and all("place" in x for x in labels):
                return tuple(labels)
        return ("out-of-place", "in-place")[:n] if n <= 2 else tuple(f"group{g}" for g in range(n))

    def footer(self, j: int) -> tuple[float, int]:
        """Reads the "# Out of bounds" / "# Avg bus bandwidth" footer lines; returns (avg busbw, next line)."""
        avg = math.nan
        while j < len(self.lines) and self.lines[j].lstrip().startswith("#"):
            body = self.lines[j].lstrip("#").strip()
            m = re.match(r"avg bus bandwidth\s*:\s*(\S+)", body, re.IGNORECASE)
            if m:
                avg = self.cell(j, m.group(1), "Avg bus bandwidth", float) * 1e9
            elif not re.match(r"(out of bounds values|$)", body, re.IGNORECASE):
                break
            j += 1
        return avg, j

    def nccl_context(self, since: int, header: int) -> tuple[str, int, str]:
        """(op, ranks, title) from the lines between the previous table and this header."""
        op, title, ranks, n_gpus, n_threads, g_flag = "", "", 0, 0, 1, 0
        for line in self.lines[since:header]:
            body = line.lstrip("#").strip()
            m = _OP.search(body)
            if m:
                op, title = m.group(1), body
                g = re.search(r"(?:^|\s)-g\s*(\d+)", body)
                g_flag = int(g.group(1)) if g else g_flag
            if re.match(r"Rank\s+\d+\s+Group\s+\d+", body):
                ranks += 1
            for key in ("nGpus", "nThread"):
                m = re.search(rf"\b{key}\s+(\d+)", body)
                if m and key == "nGpus":
                    n_gpus = int(m.group(1))
                elif m:
                    n_threads = int(m.group(1))
        if not op:
            flat = self.name.lower().replace("_", "").replace("-", "")
            op = next((v for k, v in _FILE_OPS.items() if k in flat), "")
        return op, ranks or n_gpus * n_threads or g_flag, title

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
            return [P2PMatrix(m.group("dir").lower(), p2p, method, "", values * _UNITS[unit], title, i + 2)], j
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
        if not head or head[0].upper() != label.upper() or head[1:] != [str(k) for k in range(len(head) - 1)] \
                or len(head) < 2:
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

    # --- nvidia-smi topo -m ---------------------------------------------------------------------
    @staticmethod
    def is_topo_header(line: str) -> bool:
        words = line.lstrip().removeprefix("#").split()
        return len(words) >= 2 and words[0] == "GPU0" and bool(re.fullmatch(r"GPU1|NIC0|mlx\d+_\d+|CPU|\.\.\.", words[1]))

    def topo(self, i: int) -> tuple[TopoTable, int]:
        """The block from header line i: device rows, then an optional NIC legend; parsed by netsim.topology."""
        row = lambda ln: re.fullmatch(r"(GPU|NIC)\d+|mlx\d+_\d+", (ln.lstrip().removeprefix("#").split() or [""])[0])
        j = i + 1
        while j < len(self.lines) and row(self.lines[j]):
            j += 1
        k = self.next_nonblank(j)
        if k < len(self.lines) and re.match(r"\s*#?\s*NIC Legend:", self.lines[k]):
            j = k + 1
            while j < len(self.lines) and re.match(r"\s*#?\s*(NIC\d+\s*:\s*\S+)?\s*$", self.lines[j]):
                j += 1
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
            return int(text)
        if kind is float and _NUMBER.match(text):
            return float(text)
        self.fail(i, f"{column}: cannot read {text!r} as {'an integer' if kind is int else 'a number'}")
