"""`read_trace`: every known table of a file, found wherever it sits between prose and other output."""

from __future__ import annotations

import dataclasses
import os
import re

import numpy as np

from .._checks import read_text
from .._errors import ScenarioError
from . import _nccl, _nvsmi, _p2p, _rbt, _rocm
from ._core import Lines, TraceError, comment
from ._csv import CsvTable, parse_csv
from ._nccl import NcclTable
from ._nvsmi import TopoTable
from ._p2p import P2PMatrix
from ._rbt import RbtMatrix
from ._rocm import RocmMatrix, RocmNuma

Table = NcclTable | P2PMatrix | TopoTable | RocmMatrix | RocmNuma | RbtMatrix | CsvTable
#: header notes saying P2P did not work on the machine
_NO_P2P = re.compile(r"P2P (?:is )?not (?:available|supported)|P2P unsupported", re.IGNORECASE)


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

    def rbt(self, kind: str | None = None) -> tuple[RbtMatrix, ...]:
        """The rocm_bandwidth_test matrices, optionally only those of `kind` ("unidirectional", ...)."""
        return tuple(t for t in self.tables if isinstance(t, RbtMatrix) and kind in (None, t.kind))

    def connectivity(self) -> np.ndarray | None:
        """[i, j] True where device i can access device j by P2P, from the file's one connectivity matrix
        (p2pBandwidthLatencyTest's "P2P Connectivity Matrix"); None where there is not exactly one."""
        found = self.matrices("connectivity")
        return found[0].values > 0 if len(found) == 1 else None

    def used_p2p(self, table: NcclTable) -> bool:
        """Whether a collective table's transfers went by P2P: what its command line says (`NcclTable.p2p`),
        else yes, unless the file's header notes say P2P did not work on the machine ("P2P not
        supported", "P2P is not available", "P2P unsupported")."""
        if table.p2p is not None:
            return table.p2p
        return not any(_NO_P2P.search(line) for line in self.header)


def read_trace(path: str | os.PathLike) -> Trace:
    """Reads every known table in the file at `path` (UTF-8, UTF-16 or UTF-32 text; a .h5 or .hdf5 file
    written by `save_trace` is read by `load_trace`) and checks its measured values against netsim's
    limits (`check_trace`).

    Raises:
        TraceError: "file:line: why" for a table that is malformed (truncated row, non-numeric cell,
            wrong column count, missing rows, a unit it does not know), for a value outside netsim's
            limits, or for a file with no known table at all.
    """
    if os.fspath(path).lower().endswith((".h5", ".hdf5")):
        from ._hdf5 import load_trace  # which imports this module

        return load_trace(path)
    name = os.path.basename(os.fspath(path))
    text = read_text(path, errors="replace")  # logs carry other tools' bytes: never fail on those
    src = Lines(name, text.splitlines())
    if name.lower().endswith(".csv"):
        tables: list[Table] = [parse_csv(src)]
    else:
        tables = []
        i, since = 0, 0  # `since`: first line after the previous table (context for op, ranks, title)
        while i < len(src.lines):
            found = _table_at(src, i, since)
            if found is None:
                i += 1
                continue
            found_tables, i = found
            tables.extend(found_tables)
            since = i
    if not tables:
        nul = (
            " (it holds NUL characters: text in another encoding than UTF-8, -16 or -32?)"
            if "\0" in text
            else ""
        )
        src.fail(
            max(len(src.lines) - 1, 0),
            "no known table (nccl-tests, p2pBandwidthLatencyTest, nvidia-smi topo -m, rocm-smi, "
            "rocm_bandwidth_test or CSV) "
            f"in this file{nul}",
        )
    trace = Trace(name, _header(src), _machine(src), tuple(tables))
    check_trace(trace)
    return trace


_CHECKS = {NcclTable: _nccl.check_values, P2PMatrix: _p2p.check_values}


def check_trace(trace: Trace) -> None:
    """Raises TraceError naming the file, line and cell of a measured value outside netsim's limits (see
    `netsim._checks`): a copy bandwidth outside [1e-6, 1e30] B/s or a latency not in (0, 1e15) s; a
    collective's usable time at or above 1e15 s or a size at or above 1e18 B. Such a value would overflow
    a fit's loss (a 1e300 GB/s cell) rather than fit; unusable cells (N/A, wrong) are left to `usable`.
    `read_trace` and `load_trace` call it on every trace they return."""
    for t in trace.tables:
        try:
            _CHECKS.get(type(t), lambda t: None)(t)
        except ScenarioError as e:
            raise TraceError(f"{trace.source}:{t.line}: {e}") from None


def _table_at(src: Lines, i: int, since: int) -> tuple[list[Table], int] | None:
    """The table(s) starting at line i and the line after them, or None if no table starts there."""
    line = src.lines[i]
    m = _rocm.TITLE.match(line)
    if m:
        return _rocm.read_rocm(src, i, m.group(1).strip())
    if _nvsmi.is_header(line):  # also when quoted with "#"
        table, j = _nvsmi.read_topo(src, i)
        return [table], j
    body = comment(line)
    if body is not None:
        if _nccl.is_header(body):
            table, j = _nccl.read_nccl(src, i, since)
            return [table], j
        return None
    text = line.strip()
    m = _rbt.TITLE.match(text)
    if m:
        return _rbt.read_rbt(src, i, text)
    if _rbt.PLUGIN.match(text):
        src.fail(
            i,
            f"rocm_bandwidth_test's plugin table layout ({text[:60]!r}: 'SRC\\DST' rows with ->, <-, <->) "
            "is not read by netsim; the classic output (rocm-bandwidth-test with no arguments: "
            "'Unidirectional copy peak bandwidth GB/s' over a 'D/D 0 1 ...' matrix) is",
        )
    if _p2p.CONNECTIVITY_TITLE.match(text):
        return _p2p.read_connectivity(src, i)
    m = _p2p.TITLE.match(text)
    if m:
        return _p2p.read_p2p(src, i, m)
    if text.split()[:1] == ["D\\D"]:  # a matrix whose title was not one of the above: never skip it
        above = src.lines[i - 1].strip() if i else ""
        src.fail(i, f"p2pBandwidthLatencyTest matrix header with no known title above it (got {above!r})")
    return None


def _header(src: Lines) -> tuple[str, ...]:
    """The file's leading comment lines, verbatim."""
    out = []
    for line in src.raw:
        if not line.lstrip().startswith("#"):
            break
        out.append(line.rstrip("\r"))
    return tuple(out)


def _machine(src: Lines) -> str:
    """The "# MACHINE: ..." comment with its indented continuation lines; else nccl-tests' host."""
    parts: list[str] = []
    inside = False
    for line in src.lines:
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
    hosts = re.findall(r"Rank\s+\d+\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)", "\n".join(src.lines))
    return hosts[0] if hosts else ""
