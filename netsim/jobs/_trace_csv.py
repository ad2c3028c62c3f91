"""The trace CSV of `netsim jobs`: one job per row, `arrival,model,gpus,nodes,iterations` (docs/jobs.md),
read by `netsim.traces.read_csv` and made into Jobs here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .. import ScenarioError
from ..traces import read_csv
from ._traffic import Job

__all__ = ["TRACE_COLUMNS", "format_job_trace", "read_job_trace"]

TRACE_COLUMNS = ("arrival", "model", "gpus", "nodes", "iterations")


def read_job_trace(path) -> list[Job]:
    """Jobs from a trace CSV: a header with `arrival,model,gpus,nodes,iterations` (any order; an `id`
    column optional, default "j{row}"; `nodes` optional and informational, but if given an integer in
    [1, gpus]; "#" lines are comments). Models are names of MODELS."""
    table = read_csv(path)
    header, rows = table.columns, table.rows
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
        _check_nodes(r.get("nodes"), gpus, where)
        jobs.append(job)
    if not jobs:
        raise ScenarioError(f"{path}: no jobs")
    return jobs


def _check_nodes(cell: str | None, gpus: int, where: str) -> None:
    """A `nodes` cell: empty (unknown), or the servers a job of `gpus` GPUs spans, 1..gpus. Not checked
    against the cluster: it records where DeepShare measured the configuration (up to 8 servers), and the
    placement is the policy's."""
    if cell is None or not cell.strip():
        return
    try:
        nodes = int(cell)
    except ValueError:
        nodes = None
    if nodes is None or not 1 <= nodes <= gpus:
        raise ScenarioError(
            f"{where}: nodes: expected an integer in [1, gpus = {gpus}] (servers the job spans), got {cell!r}"
        )


def format_job_trace(jobs: Sequence[Job], nodes: Mapping[str, int] | None = None) -> str:
    """The CSV text `read_job_trace` reads (id first); `nodes`: job id -> informational node count."""
    nodes = nodes or {}
    lines = ["id," + ",".join(TRACE_COLUMNS)]
    for j in jobs:
        lines.append(f"{j.id},{j.arrival!r},{j.model},{j.gpus},{nodes.get(j.id, '')},{j.iterations}")
    return "\n".join(lines) + "\n"
