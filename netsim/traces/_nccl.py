"""nccl-tests (and rccl-tests) result tables, with the command line, ranks and environment above them.

Rows that read but cannot be trusted (non-positive or non-finite times, `#wrong` > 0, a repeated size)
are kept and marked: `NcclTable.usable` is False there and `NcclTable.problems` says why. A `#` comment
line between rows (a note pasted into the log) is skipped and the table read on; `NcclTable.notes` says
so. The units row is honoured: times in (us), (ms), (ns) or (s), bandwidths in (GB/s), (MB/s), ...; a
unit the reader does not know is refused.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import NamedTuple

import numpy as np

from .._checks import quantity
from ._core import INT, Lines, comment

_NCCL_LOG = re.compile(r"\bNCCL (INFO|WARN|TRACE)\b")  # NCCL_DEBUG lines interleaved with results
_OP = re.compile(r"\b([a-z_]+)_perf\b")
_RANK = re.compile(
    r"Rank\s+(?P<rank>\d+)\s+(?:Group\s+(?P<group>\d+)\s+)?Pid\s+(?P<pid>\d+)\s+on\s+(?P<host>\S+)"
    r"\s+device\s+(?P<device>\d+)\s+\[(?P<bus>[^\]]*)\](?P<name>.*)$"
)
HEADING = re.compile(r"\s*##+\s+(.*)")  # markdown section heading; nccl-tests' own comments use one "#"
_SETTING = r"(?P<name>(?:NCCL|RCCL)_[A-Z0-9_]+|(?:CUDA|HIP|ROCR)_VISIBLE_DEVICES)=(?P<value>\"[^\"]*\"|'[^']*'|[^\s;]*)"
_ENV_ANY = re.compile(r"(?<![\w-])" + _SETTING)  # anywhere on a command line ("-x NAME=v" too)
_ENV_EXPORT = re.compile(r"^(?:export\s+)" + _SETTING + r"\s*;?\s*$")  # a line of its own
_FILE_OPS = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "alltoall": "alltoall",
    "broadcast": "broadcast",
    "sendrecv": "sendrecv",
}
_COLUMNS = {
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
_UNITS_ROW = re.compile(r"(\s*\([^()]*\))+\s*")  # "(B) (elements) (us) (GB/s) ...", nothing else
_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_BANDWIDTH_UNITS = {"GB/s": 1e9, "MB/s": 1e6, "KB/s": 1e3, "kB/s": 1e3, "B/s": 1.0}
_FOOTER = re.compile(r"(out of bounds values|errors with asterisks|avg bus bandwidth)", re.IGNORECASE)
_TRUE = ("1", "true", "yes", "on")


class NcclDevice(NamedTuple):
    """One "#  Rank  0 Group  0 Pid 1234 on host device  0 [0x07] NVIDIA A100-SXM4-40GB" line."""

    rank: int
    group: int
    pid: int
    host: str
    device: int  # the CUDA/HIP device index the rank ran on (after *_VISIBLE_DEVICES renumbering)
    bus_id: str  # as printed inside [...]: "0x07" (nccl-tests) or "0000:05:00" (newer nccl/rccl-tests)
    name: str  # device model, "" when the line stops after the bus id


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
        time: s, shape (rows, groups), in the units row's unit (us when there is no units row).
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
        notes: one "file:line: why" per line the reader skipped inside the table (a "#" comment between
            rows); the rows around it are read.
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
    notes: tuple[str, ...] = ()

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


def check_values(t: NcclTable) -> None:
    """ScenarioError naming the row of a size at or above 1e18 B or a usable time at or above 1e15 s
    (netsim's limits); unusable cells (N/A, wrong) are left to `usable`."""
    what = f"{t.op or 'nccl-tests'} table"
    for r, size in enumerate(t.size):
        quantity(float(size), "bytes", f"{what}, row {r}: size")
    for (r, g), v in np.ndenumerate(np.where(t.usable, t.time, 0.0)):
        quantity(float(v), "time", f"{what}, row {r}, {t.groups[g]} time")


def is_header(body: str | None) -> bool:
    """A comment line's text (`comment`) is an nccl-tests column header ("size count type ... busbw")."""
    tokens = body.split() if body is not None else []
    return bool(tokens) and tokens[0].lower() in ("size", "bytes") and "time" in tokens and "busbw" in tokens


def read_nccl(src: Lines, i: int, since: int) -> tuple[NcclTable, int]:
    """The table whose column header is line i; `since`: the first line after the previous table (the
    context searched for the op, ranks, title and environment)."""
    lines = src.lines
    names = comment(lines[i]).split()
    fixed: list[str] = []
    k = 0
    while k < len(names) and names[k].lower() != "time":
        col = _COLUMNS.get(names[k].lower())
        if col is None or col in fixed:
            src.fail(i, f"unknown nccl-tests column {names[k]!r} in header {names}")
        fixed.append(col)
        k += 1
    per_group: list[list[str]] = []
    counts_wrong = False  # "#wrong" counts bad elements; the old "error" column is a magnitude
    for token in names[k:]:
        col = _GROUP_COLUMNS.get(token.lower())
        if col is None:
            src.fail(i, f"unknown nccl-tests column {token!r} in header {names}")
        if col == "time":
            per_group.append([])
        if col in per_group[-1]:
            src.fail(i, f"column {token!r} repeated within one group in header {names}")
        per_group[-1].append(col)
        counts_wrong |= token.lower() in ("#wrong", "wrong")
    if "size" not in fixed or any(g != per_group[0] for g in per_group) or "time" not in per_group[0]:
        src.fail(i, f"nccl-tests header needs size and equal time/algbw/busbw groups, got {names}")
    groups = _group_labels(src, i, len(per_group))
    width = len(fixed) + sum(len(g) for g in per_group)

    j = i + 1
    scale = {"time": 1e-6, "algbw": 1e9, "busbw": 1e9, "wrong": 1.0}
    while j < len(lines) and (body := comment(lines[j])) is not None and _UNITS_ROW.fullmatch(body):
        scale |= _units(src, j, body)
        j += 1
    rows: list[tuple[int, list[str]]] = []
    notes: list[str] = []
    is_row = lambda k: len(cells := lines[k].split()) == width and bool(INT.match(cells[0]))
    while j < len(lines):
        text = lines[j].strip()
        if _NCCL_LOG.search(text):
            j += 1
            continue
        if not text:  # a blank line ends the table only if no row follows it
            k = src.next_nonblank(j)
            if k < len(lines) and is_row(k):
                j = k
                continue
            break
        if text.startswith("#"):  # a note between rows is skipped (and said); the footer or a header ends it
            k, skipped = j, []
            while k < len(lines):
                body = comment(lines[k])
                if body is None and not _NCCL_LOG.search(lines[k]):
                    break
                if body is not None and (is_header(body) or _FOOTER.match(body)):
                    break
                skipped += [k] if body is not None else []
                k = src.next_nonblank(k + 1)
            if not (k < len(lines) and is_row(k)):
                break
            notes += [
                f"{src.name}:{c + 1}: skipped a comment line between rows: {lines[c].strip()!r}"
                for c in skipped
            ]
            j = k
            continue
        cells = text.split()
        if not INT.match(cells[0]):
            if re.fullmatch(r"[-+]?\d[\d,.]*", cells[0]):
                why = "thousands separators" if "," in cells[0] else "not an integer"
                src.fail(j, f"nccl-tests row starts with size {cells[0]!r} ({why}): {text!r}")
            k = src.next_nonblank(j + 1)
            while k < len(lines) and _NCCL_LOG.search(lines[k]):
                k = src.next_nonblank(k + 1)
            if k < len(lines) and is_row(k):
                src.fail(j, f"stray line inside an nccl-tests table (rows follow on line {k + 1}): {text!r}")
            break
        if len(cells) != width:
            src.fail(j, f"nccl-tests row has {len(cells)} columns, the header {names} has {width}")
        rows.append((j, cells))
        j += 1
    if not rows:
        src.fail(min(j, len(lines) - 1), "nccl-tests header with no data rows after it")

    cols: dict[str, list] = {c: [] for c in fixed}
    grouped: dict[str, list] = {c: [] for c in per_group[0]}
    starred = np.zeros((len(rows), len(groups)), bool)  # rccl-tests marks a #wrong over its threshold "*"
    n = len(per_group[0])
    for r_i, (r, cells) in enumerate(rows):
        for c, cell in zip(fixed, cells, strict=False):
            cols[c].append(src.cell(r, cell, c, int if c in ("size", "count", "root") else str))
        rest = cells[len(fixed) :]
        for c_i, c in enumerate(per_group[0]):
            values = []
            for g in range(len(per_group)):
                cell = rest[g * n + c_i]
                if c == "wrong" and cell.endswith("*"):
                    starred[r_i, g], cell = True, cell[:-1]
                values.append(src.cell(r, cell, f"{c} ({groups[g]})", float, na=True))
            grouped[c].append(values)
    n_rows = len(rows)
    empty = np.full((n_rows, len(groups)), np.nan)
    with np.errstate(over="ignore"):  # a 1e300 GB/s cell becomes inf, which check_values refuses
        arrays = {c: np.asarray(grouped[c], float) * scale[c] if c in grouped else empty for c in scale}
    size = np.asarray(cols["size"], np.int64)
    dtype = tuple(cols.get("dtype", [""] * n_rows))
    redop = tuple(cols.get("redop", [""] * n_rows))
    root = np.asarray(cols.get("root", [-1] * n_rows), np.int64)
    keys = [(int(a), b, c, int(d)) for a, b, c, d in zip(size, dtype, redop, root, strict=True)]
    usable, problems = _screen(src.name, rows, groups, keys, arrays, counts_wrong, starred)
    avg, j = _footer(src, j, scale["busbw"])
    op, n_gpus, title, env, devices = _context(src, since, i)
    table = NcclTable(
        op=op,
        n_gpus=n_gpus,
        size=size,
        count=np.asarray(cols.get("count", [-1] * n_rows), np.int64),
        dtype=dtype,
        redop=redop,
        root=root,
        time=arrays["time"],
        algbw=arrays["algbw"],
        busbw=arrays["busbw"],
        wrong=arrays["wrong"],
        groups=groups,
        avg_busbw=avg,
        title=title,
        line=rows[0][0] + 1,
        usable=usable,
        problems=problems,
        section=_section(src, i),
        env=env,
        devices=devices,
        notes=tuple(notes),
    )
    return table, j


def _units(src: Lines, j: int, body: str) -> dict[str, float]:
    """The scale factors to SI that the units row at line j says ("(B) (elements) (us) (GB/s) ...")."""
    found: dict[str, set[float]] = {"time": set(), "bandwidth": set()}
    for unit in re.findall(r"\(([^()]*)\)", body):
        unit = unit.strip()
        if unit in _TIME_UNITS:
            found["time"].add(_TIME_UNITS[unit])
        elif unit in _BANDWIDTH_UNITS:
            found["bandwidth"].add(_BANDWIDTH_UNITS[unit])
        elif unit not in ("B", "elements", ""):
            src.fail(
                j,
                f"nccl-tests units row: unknown unit ({unit}) (known: (B), (elements), "
                f"{', '.join(f'({u})' for u in (*_TIME_UNITS, *_BANDWIDTH_UNITS))})",
            )
    for kind, factors in found.items():
        if len(factors) > 1:
            src.fail(j, f"nccl-tests units row: {kind} columns in different units: {body!r}")
    time, bandwidth = (next(iter(found[k]), None) for k in ("time", "bandwidth"))
    return ({"time": time} if time else {}) | ({"algbw": bandwidth, "busbw": bandwidth} if bandwidth else {})


def _screen(name, rows, groups, keys, arrays, counts_wrong, starred) -> tuple[np.ndarray, tuple[str, ...]]:
    """The `usable` mask and one "file:line: why" per unusable (row, group); see NcclTable.
    keys[r]: (size, dtype, redop, root) of row r; a repeat of an earlier row's key is unusable."""
    usable = np.ones((len(rows), len(groups)), bool)
    problems: list[str] = []
    first: dict[tuple, int] = {}
    for r_i, (r, _) in enumerate(rows):
        repeat = first.setdefault(keys[r_i], r)
        for g, label in enumerate(groups):
            time, wrong = arrays["time"][r_i, g], arrays["wrong"][r_i, g]
            why = f"size {keys[r_i][0]} repeats line {repeat + 1}" if repeat != r else ""
            if not why and math.isnan(time):
                why = "time is N/A or NaN"
            elif not why and not (math.isfinite(time) and time > 0):
                why = f"time {time * 1e6:g} us is not a positive finite number"
            if not why and (arrays["algbw"][r_i, g] < 0 or arrays["busbw"][r_i, g] < 0):
                why = "negative bandwidth"
            if not why and counts_wrong and wrong > 0:
                why = f"#wrong = {wrong:g}"
            if not why and starred[r_i, g]:
                why = f"error {wrong:g} over rccl-tests' threshold (marked '*')"
            if why:
                usable[r_i, g] = False
                problems.append(f"{name}:{r + 1}: {label}: {why}")
    return usable, tuple(problems)


def _group_labels(src: Lines, i: int, n: int) -> tuple[str, ...]:
    """Labels from the "out-of-place  in-place" line above the header, else the usual ones."""
    above = comment(src.lines[i - 1]) if i > 0 else None
    if above is not None:
        labels = above.split()
        if len(labels) == n and all("place" in x for x in labels):
            return tuple(labels)
    return ("out-of-place", "in-place")[:n] if n <= 2 else tuple(f"group{g}" for g in range(n))


def _footer(src: Lines, j: int, bandwidth_unit: float) -> tuple[float, int]:
    """Reads the "# Out of bounds" / "# Avg bus bandwidth" footer lines; returns (avg busbw, next line)."""
    avg = math.nan
    while j < len(src.lines) and (body := comment(src.lines[j])) is not None:
        m = re.match(r"avg bus bandwidth\s*:\s*(\S+)", body, re.IGNORECASE)
        if m:
            avg = src.cell(j, m.group(1), "Avg bus bandwidth", float) * bandwidth_unit
        elif not re.match(r"(out of bounds values|errors with asterisks|$)", body, re.IGNORECASE):
            break
        j += 1
    return avg, j


def _context(
    src: Lines, since: int, header: int
) -> tuple[str, int, str, dict[str, str], tuple[NcclDevice, ...]]:
    """(op, ranks, title, env, devices) from the lines between the previous table and this header.

    `env`: the settings on the command line (the title, with the lines it continues with a trailing
    backslash), over the `export NAME=value` lines since the start of the section (shell semantics:
    an export lasts; a `NAME=value` prefix or `-x` lasts for one command)."""
    op, title, n_gpus, n_threads, g_flag, command = "", "", 0, 1, 0, -1
    devices: list[NcclDevice] = []
    for k in range(since, header):
        text = src.text(k)
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
            src.fail(k, f"cannot read nccl-tests rank line {text!r}")
        for key in ("nGpus", "nThread"):
            m = re.search(rf"\b{key}\s+(\d+)", text)
            if m and key == "nGpus":
                n_gpus = int(m.group(1))
            elif m:
                n_threads = int(m.group(1))
    if not op:
        flat = src.name.lower().replace("_", "").replace("-", "")
        op = next((v for k, v in _FILE_OPS.items() if k in flat), "")
    env: dict[str, str] = {}
    start = _section_start(src, header)
    for k in range(start, command if command >= 0 else header):
        if comment(src.lines[k]) is None:
            env.update(_env_settings(src, k, _ENV_EXPORT))
    first = command
    while first > start and src.lines[first - 1].rstrip().endswith("\\"):
        first -= 1
    for k in range(first, command + 1 if command >= 0 else first):
        env.update(_env_settings(src, k, _ENV_ANY))
    return op, len(devices) or n_gpus * n_threads or g_flag, title, env, tuple(devices)


def _env_settings(src: Lines, k: int, pattern: re.Pattern) -> dict[str, str]:
    """The NAME=value settings `pattern` finds on line k (names: NCCL_*, RCCL_*, *_VISIBLE_DEVICES)."""
    out = {}
    for m in pattern.finditer(src.text(k)):
        name, value = m.group("name"), m.group("value").strip("'\"")
        if name.endswith("_VISIBLE_DEVICES") and not re.fullmatch(r"\d+(,\d+)*,?", value):
            src.fail(
                k, f"{name}={value!r} is not a list of device indices (netsim maps ranks to devices by index)"
            )
        out[name] = value
    return out


def _section_start(src: Lines, header: int) -> int:
    """The line of the last markdown heading ("## ...") above `header`, else 0."""
    return next((k for k in range(header - 1, -1, -1) if HEADING.match(src.lines[k])), 0)


def _section(src: Lines, header: int) -> str:
    """The text of the last markdown heading ("## ...") above line `header`, "" if none."""
    m = HEADING.match(src.lines[_section_start(src, header)])
    return m.group(1).strip() if m else ""
