"""The reader core every trace format shares: the file's lines, failing with "file:line:", and cells."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import NoReturn

from .._errors import NetsimError

NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^[-+]?(inf|nan)$", re.IGNORECASE)
INT = re.compile(r"^[-+]?\d+$")
_MPI_TAG = re.compile(r"^(\[\d+,\d+\]<std(out|err)>:|\s*\d+: )")  # OpenMPI --tag-output, srun --label


class TraceError(NetsimError, ValueError):
    """A trace file that cannot be read, or holds a value outside netsim's limits; the message starts
    with "file:line:"."""


def comment(line: str) -> str | None:
    """The text of a "#" comment line without its marks (indented or not); None for other lines."""
    stripped = line.lstrip()
    return stripped.lstrip("#").strip() if stripped.startswith("#") else None


class Lines:
    """A trace file's lines as the format readers see them: MPI/srun tags and carriage returns removed
    (`raw` keeps them), with the helpers that fail naming the file and line."""

    def __init__(self, name: str, lines: Sequence[str]):
        self.name = name
        self.raw = list(lines)
        self.lines = [_MPI_TAG.sub("", ln).rstrip("\r") for ln in lines]

    def fail(self, i: int, why: str) -> NoReturn:
        raise TraceError(f"{self.name}:{i + 1}: {why}")

    def text(self, k: int) -> str:
        """Line k without its comment marks and surrounding blanks."""
        body = comment(self.lines[k])
        return body if body is not None else self.lines[k].strip()

    def next_nonblank(self, j: int) -> int:
        while j < len(self.lines) and not self.lines[j].strip():
            j += 1
        return j

    def cell(self, i: int, text: str, column: str, kind: type, *, na: bool = False):
        """The cell `text` of line i read as `kind` (int, float or str); "N/A" is NaN with na=True."""
        if kind is str:
            return text
        if na and text.upper() == "N/A":
            return math.nan
        if kind is int and INT.match(text):
            if len(text.lstrip("+-")) > 15:  # beyond any measured count, and beyond float64's exact integers
                self.fail(i, f"{column}: {text[:20]}... ({len(text)} digits) is not a plausible count")
            return int(text)
        if kind is float and NUMBER.match(text):
            return float(text)
        self.fail(i, f"{column}: cannot read {text!r} as {'an integer' if kind is int else 'a number'}")
