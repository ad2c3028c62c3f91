"""CSV tables under "#" comment lines (the shipped chiplet-link, DeepShare and SPipe tables, job traces)."""

from __future__ import annotations

import csv
import dataclasses
import os

from .._checks import read_text
from ._core import Lines


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


def read_csv(path: str | os.PathLike) -> CsvTable:
    """The table of a commented CSV file of any name (UTF-8, UTF-16 or UTF-32): "#" lines are comments
    wherever they stand, blank lines are skipped, the first other line is the header.

    Raises:
        TraceError: "file:line: why" for a file with no header row, a row of another length than the
            header, or a line the csv module cannot read.
    """
    return parse_csv(Lines(os.fspath(path), read_text(path).splitlines()))


def parse_csv(src: Lines) -> CsvTable:
    """The table of a file's lines (see `read_csv`)."""
    kept = [k for k, ln in enumerate(src.lines) if ln.strip() and not ln.startswith("#")]
    if not kept:
        src.fail(max(len(src.lines) - 1, 0), "CSV file has no header row")
    reader = csv.reader(src.lines[k] for k in kept)
    parsed = []  # (line index, cells)
    try:
        for row in reader:
            parsed.append((kept[reader.line_num - 1], tuple(row)))
    except csv.Error as e:
        src.fail(kept[reader.line_num - 1], f"CSV: {e}")
    (start, columns), body = parsed[0], parsed[1:]
    for k, row in body:
        if len(row) != len(columns):
            src.fail(k, f"CSV row has {len(row)} cells, the header has {len(columns)}")
    return CsvTable(columns, tuple(row for _, row in body), start + 1)
