"""Timelines of a simulated scenario: Chrome / Perfetto trace export, and the critical path.

`trace_events(result)` lays the flows and tasks out as Chrome trace "X" (complete) events, ts and dur
in µs: one process "devices" with a track per device (its tasks), and one process for the flows with a
track per src -> dst pair (or per link, or none). Items that overlap on one track go to extra lanes
("gpu0 #2"): trace viewers require the slices of a track to nest, and overlapping items do not.
Open the file written by `save_trace` in https://ui.perfetto.dev or chrome://tracing.

`task_kind(id)` tells a pipeline schedule's forward, backward and weight-gradient tasks apart by their
ids, and `pipeline_bubbles(result)` gives each pipeline device's busy time and bubble fraction.

`critical_path(result)` walks back from the last item through the predecessor that released each
item; the makespan is the first item's start plus the durations along the path, and each flow's
duration splits into its path latency and the seconds each link held it back (`result.bottlenecks`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any, NamedTuple

from ._checks import to_json, write_atomic
from ._errors import ScenarioError

__all__ = [
    "TASK_KINDS",
    "Step",
    "critical_path",
    "pipeline_bubbles",
    "save_trace",
    "task_kind",
    "trace_events",
]

FLOW_TRACKS = ("pair", "link", "none")
_US = 1e6  # trace time unit: µs per s

#: what a pipeline op's task computes, by its op letters: netsim.workloads.pipeline names a task
#: "r{replica}/{op}{micro-batch}.s{stage}" ("r0/F3.s1": forward of micro-batch 3 on virtual stage 1),
#: with op F (forward), BW (whole backward), B (input-gradient backward, ZB-H1) or W (weight gradient)
TASK_KINDS = {"F": "forward", "BW": "backward", "B": "backward", "W": "weight gradient"}
_PIPELINE_OP = re.compile(r"(?:^|/)(BW|F|B|W)\d+\.s\d+$")


def task_kind(task_id: str) -> str:
    """ "forward", "backward" or "weight gradient" for a pipeline op's task id (see `TASK_KINDS`), else
    "task" (an optimizer step, an offload copy, any other compute task)."""
    m = _PIPELINE_OP.search(task_id)
    return TASK_KINDS[m.group(1)] if m else "task"


def pipeline_bubbles(result) -> dict[str, tuple[float, float]]:
    """Device -> (busy s, bubble fraction) for every device that runs pipeline ops (see `task_kind`).

    busy: s with at least one pipeline op running on the device (its other tasks, an optimizer step or
    an offload's stall, are not pipeline work: `PipelineStats.bubble_fraction` counts the same);
    bubble: the idle fraction of the makespan, 1 - busy / makespan. Empty when no task is a pipeline op.
    With uniform stages and free transfers, GPipe and 1F1B leave every device idle (p - 1) / (m + p - 1)
    of the iteration (p stages, m micro-batches).
    """
    spans: dict[str, list[tuple[float, float]]] = {}
    for t, start, finish in zip(
        result.compiled.scenario.tasks, result.task_start, result.task_finish, strict=True
    ):
        if task_kind(t.id) != "task":
            spans.setdefault(t.device, []).append((float(start), float(finish)))
    makespan = float(result.makespan)
    out = {}
    for d in result.device_ids:
        if d in spans:
            busy = _covered(spans[d])
            out[d] = (busy, 1.0 - busy / makespan if makespan > 0 else 0.0)
    return out


def _covered(spans: list[tuple[float, float]]) -> float:
    """Seconds covered by the union of (start, finish) spans."""
    total, end = 0.0, -float("inf")
    for start, finish in sorted(spans):
        if finish > end:
            total += finish - max(start, end)
            end = finish
    return total


def trace_events(result, *, flows: str = "pair") -> dict[str, Any]:
    """The Chrome trace JSON object of a Result.

    Args:
        result: a netsim.Result.
        flows: "pair" (one track per src -> dst), "link" (a flow appears on every link of its route,
            for as long as it is active) or "none".

    Returns:
        {"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}; every item is one
        event with ph "X", ts = start and dur = finish - start in µs, and args with its details.
    """
    if flows not in FLOW_TRACKS:
        raise ScenarioError(f"flows: unknown track layout {flows!r}; expected one of {list(FLOW_TRACKS)}")
    scenario = result.compiled.scenario
    events: list[dict[str, Any]] = []
    tasks = [
        (t.device, t.id, float(s), float(f), {"device": t.device})
        for t, s, f in zip(scenario.tasks, result.task_start, result.task_finish, strict=True)
    ]
    _tracks(events, 1, "devices", tasks, "task")
    if flows != "none":
        items = []
        for i, flow in enumerate(scenario.flows):
            start, first, finish = (
                float(a[i]) for a in (result.flow_start, result.flow_first_byte, result.flow_finish)
            )
            args = {
                "src": flow.src,
                "dst": flow.dst,
                "bytes": flow.bytes,
                "first_byte_us": first * _US,
                "route": list(result.compiled.routes[i]),
                "bottlenecks_s": result.bottlenecks(flow.id),
            }
            keys = [f"{flow.src} -> {flow.dst}"] if flows == "pair" else list(result.compiled.routes[i])
            items += [(key, flow.id, start, finish, args) for key in keys]
        _tracks(events, 2, "flows (src -> dst)" if flows == "pair" else "links", items, "flow")
    other = {"scenario": scenario.name, "makespan_s": float(result.makespan), "time_unit": "us"}
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": other}


def save_trace(result, path: str | os.PathLike, *, flows: str = "pair") -> None:
    """Writes `trace_events(result, flows=flows)` as JSON, atomically (non-finite numbers as null)."""
    write_atomic(path, to_json(trace_events(result, flows=flows)))


def _tracks(
    events: list[dict[str, Any]],
    pid: int,
    process: str,
    items: Iterable[tuple[str, str, float, float, dict[str, Any]]],
    category: str,
) -> None:
    """Appends the metadata and "X" events of one process; `items` are (track, id, start, finish, args)."""
    events.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": process}})
    events.append(
        {"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "args": {"sort_index": pid}}
    )
    by_track: dict[str, list[tuple[str, float, float, dict[str, Any]]]] = {}
    for track, item_id, start, finish, args in items:
        by_track.setdefault(track, []).append((item_id, start, finish, args))
    tid = 0
    for track, rows in by_track.items():
        lanes: list[float] = []  # finish time of each lane's last item
        lane_tid: list[int] = []
        for item_id, start, finish, args in sorted(rows, key=lambda r: (r[1], r[2])):
            lane = next((k for k, end in enumerate(lanes) if end <= start), None)
            if lane is None:
                lane = len(lanes)
                lanes.append(finish)
                tid += 1
                lane_tid.append(tid)
                name = track if lane == 0 else f"{track} #{lane + 1}"
                events.append(
                    {"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}
                )
                events.append(
                    {
                        "name": "thread_sort_index",
                        "ph": "M",
                        "pid": pid,
                        "tid": tid,
                        "args": {"sort_index": tid},
                    }
                )
            lanes[lane] = finish
            events.append(
                {
                    "name": item_id,
                    "cat": category,
                    "ph": "X",
                    "ts": start * _US,
                    "dur": (finish - start) * _US,
                    "pid": pid,
                    "tid": lane_tid[lane],
                    "args": args,
                }
            )


class Step(NamedTuple):
    """One item of the critical path.

    kind: "flow" or "task". start, finish: s. latency: s from start to first byte (0 for tasks).
    held: link id -> s the link held the flow back (empty for tasks).
    """

    id: str
    kind: str
    start: float
    finish: float
    latency: float
    held: dict[str, float]

    @property
    def duration(self) -> float:
        return self.finish - self.start


def critical_path(result) -> tuple[Step, ...]:
    """The chain of items that set the makespan, first to last.

    From the item that finishes last, repeatedly step to the `after` predecessor that finished last,
    as long as it released the item (its finish is the item's start); stop at an item that started
    on its own (no predecessors, or its `start` time came later). Each item starts exactly when its
    predecessor on the path finishes, so the makespan is path[0].start plus the sum of the durations.
    """
    scenario = result.compiled.scenario
    items = {x.id: x for x in (*scenario.flows, *scenario.tasks)}
    if not items:
        return ()
    is_flow = {f.id for f in scenario.flows}
    finish = dict(zip(result.flow_ids, map(float, result.flow_finish), strict=True))
    finish.update(zip(result.task_ids, map(float, result.task_finish), strict=True))
    current = max(finish, key=finish.get)
    path = []
    while True:
        t = result.timing(current)
        if current in is_flow:
            path.append(
                Step(current, "flow", t.start, t.finish, t.first_byte - t.start, result.bottlenecks(current))
            )
        else:
            path.append(Step(current, "task", t.start, t.finish, 0.0, {}))
        after = items[current].after
        if not after:
            break
        binding = max(after, key=finish.get)
        if items[current].start > finish[binding]:
            break  # released by its own start time, not by a predecessor
        current = binding
    return tuple(reversed(path))
