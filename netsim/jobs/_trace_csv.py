"""CSV files of jobs: the trace CSV of `netsim jobs` (one job per row, `arrival,model,gpus,nodes,iterations`;
docs/jobs.md), and `read_csv`, which DeepShare's measured tables are read with too."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence

from .. import ScenarioError
from ._traffic import Job

__all__ = ["TRACE_COLUMNS", "format_job_trace", "read_csv", "read_job_trace"]

TRACE_COLUMNS = ("arrival", "model", "gpus", "nodes", "iterations")


def read_csv(path) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of a CSV whose "#" lines are comments; every row as long as the header."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = [r for r in csv.reader(line for line in f if not line.startswith("#")) if r]
    except (OSError, csv.Error) as e:
        raise ScenarioError(f"{path}: cannot read ({e})") from None
    if not rows:
        raise ScenarioError(f"{path}: no header row")
    bad = [i for i, r in enumerate(rows[1:], 1) if len(r) != len(rows[0])]
    if bad:
        raise ScenarioError(f"{path}: row {bad[0]} has {len(rows[bad[0]])} cells, the header {len(rows[0])}")
    return rows[0], rows[1:]


def read_job_trace(path) -> list[Job]:
    """Jobs from a trace CSV: a header with `arrival,model,gpus,nodes,iterations` (any order; an `id`
    column optional, default "j{row}"; `nodes` optional and informational; "#" lines are comments).
    Models are names of MODELS."""
    header, rows = read_csv(path)
    missing = [c for c in TRACE_COLUMNS if c != "nodes" and c not in header]
    if missing:
        raise ScenarioError(f"{path}: missing column(s) {missing}; expected {','.join(TRACE_COLUMNS)}")
    jobs = []
    for row, r in enumerate(dict(zip(header, cells, strict=True)) for cells in rows):
        where = f"{path}: row {row + 1}"
        try:
            arrival, gpus, its = float(r["arrival"]), int(r["gpus"]), int(r["iterations"])
        except (TypeError, ValueError):
            raise ScenarioError(
                f"{where}: arrival, gpus, iterations must be numbers, got "
                f"{r.get('arrival')!r}, {r.get('gpus')!r}, {r.get('iterations')!r}"
            ) from None
        try:
            job = Job.of(r.get("id") or f"j{row}", r["model"], arrival=arrival, gpus=gpus, iterations=its)
        except ScenarioError as e:
            raise ScenarioError(f"{where}: {e}") from None
        jobs.append(job)
    if not jobs:
        raise ScenarioError(f"{path}: no jobs")
    return jobs


def format_job_trace(jobs: Sequence[Job], nodes: Mapping[str, int] | None = None) -> str:
    """The CSV text `read_job_trace` reads (id first); `nodes`: job id -> informational node count."""
    nodes = nodes or {}
    lines = ["id," + ",".join(TRACE_COLUMNS)]
    for j in jobs:
        lines.append(f"{j.id},{j.arrival!r},{j.model},{j.gpus},{nodes.get(j.id, '')},{j.iterations}")
    return "\n".join(lines) + "\n"
