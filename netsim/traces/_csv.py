"""CSV tables under "#" comment lines (the shipped chiplet-link, DeepShare and SPipe tables)."""

from __future__ import annotations

import csv
import dataclasses
import io

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


def read_csv(src: Lines) -> CsvTable:
    """The file's one table: the first line that is neither blank nor a comment is the header."""
    start = next((k for k, ln in enumerate(src.lines) if ln.strip() and not ln.startswith("#")), None)
    if start is None:
        src.fail(max(len(src.lines) - 1, 0), "CSV file has no header row")
    reader = csv.reader(io.StringIO("\n".join(src.lines[start:])))
    try:
        parsed = list(reader)
    except csv.Error as e:
        src.fail(start + reader.line_num - 1, f"CSV: {e}")
    columns = tuple(parsed[0])
    rows = []
    for k, row in enumerate(parsed[1:], start=start + 1):
        if not row:
            continue
        if len(row) != len(columns):
            src.fail(k, f"CSV row has {len(row)} cells, the header has {len(columns)}")
        rows.append(tuple(row))
    return CsvTable(columns, tuple(rows), start + 1)
