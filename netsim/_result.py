"""Result: what a simulation produced, as NumPy arrays with names."""

from __future__ import annotations

import dataclasses
import io
import os
import textwrap
from typing import Any

import numpy as np

from ._checks import to_json, write_atomic
from ._compile import Compiled
from ._units import format_quantity
from .kernels import Status
from .timeline import pipeline_bubbles

HDF5_VERSION = 2  # 2: ids, routes, units on every dataset, devices; 1: times and link totals only


@dataclasses.dataclass(frozen=True)
class Timing:
    """One flow's or task's times (s). For tasks, first_byte == start."""

    id: str
    start: float
    first_byte: float
    finish: float

    @property
    def duration(self) -> float:
        return self.finish - self.start


@dataclasses.dataclass(frozen=True)
class Result:
    """Per-flow, per-task and per-link outcome of one simulated scenario. Times in s, sizes in bytes."""

    compiled: Compiled
    flow_ids: tuple[str, ...]
    flow_start: np.ndarray
    flow_first_byte: np.ndarray
    flow_finish: np.ndarray
    task_ids: tuple[str, ...]
    task_start: np.ndarray
    task_finish: np.ndarray
    link_ids: tuple[str, ...]
    link_bytes: np.ndarray  # bytes carried
    link_busy: np.ndarray  # s with traffic
    shared_ids: tuple[str, ...]  # the scenario's shared resources (SharedResource)
    shared_bytes: np.ndarray  # bytes that crossed each
    shared_busy: np.ndarray  # s with traffic
    device_ids: tuple[str, ...]
    device_busy: np.ndarray  # s with at least one task running
    held: (
        np.ndarray
    )  # [flows, hops] s each flow spent bottlenecked on each hop (Compiled.hops: route, shared)
    makespan: float
    status: Status  # OK, or why the run did not finish (simulate(throw=False))
    events: int
    merged: int  # completions and first bytes folded into earlier events (fast mode, simulate(tolerance=))
    rounds: int  # max-min rounds over all events
    max_rounds: int  # most rounds of one event
    wall_time: float  # s, including compile when it happened
    trace_time: np.ndarray  # s: event times, when recorded (simulate(record=True))
    trace_load: np.ndarray  # [events, links] bytes/s between consecutive event times

    @classmethod
    def from_state(cls, compiled: Compiled, state, wall_time: float) -> Result:
        s = {f.name: np.asarray(getattr(state, f.name)) for f in dataclasses.fields(state)}
        flows, tasks, links = compiled.flow_slice, compiled.task_slice, compiled.link_slice
        finish = s["finish"][: compiled.n_flows + compiled.n_tasks]
        return cls(
            compiled=compiled,
            flow_ids=tuple(f.id for f in compiled.scenario.flows),
            flow_start=s["start"][flows],
            flow_first_byte=s["first_byte"][flows],
            flow_finish=s["finish"][flows],
            task_ids=tuple(t.id for t in compiled.scenario.tasks),
            task_start=s["start"][tasks],
            task_finish=s["finish"][tasks],
            link_ids=tuple(link.id for link in compiled.scenario.links),
            link_bytes=s["resource_bytes"][links],
            link_busy=s["resource_busy"][links],
            shared_ids=tuple(r.id for r in compiled.scenario.shared),
            shared_bytes=s["resource_bytes"][compiled.shared_slice],
            shared_busy=s["resource_busy"][compiled.shared_slice],
            device_ids=compiled.devices,
            device_busy=s["resource_busy"][compiled.device_slice],
            held=s["held"][flows],
            makespan=float(finish.max()) if finish.size else 0.0,
            status=Status(int(s["status"])),
            events=int(s["events"]),
            merged=int(s["merged"]),
            rounds=int(s["rounds"]),
            max_rounds=int(s["max_rounds"]),
            wall_time=wall_time,
            trace_time=s["trace_time"][: int(s["events"])],
            trace_load=s["trace_load"][: int(s["events"]), links],
        )

    # --- lookups --------------------------------------------------------------------------------
    @property
    def link_bandwidth(self) -> np.ndarray:
        return np.array([link.bandwidth for link in self.compiled.scenario.links])

    @property
    def link_utilization(self) -> np.ndarray:
        """Mean fraction of each link's capacity used over the makespan."""
        span = self.makespan if self.makespan > 0 else 1.0
        return self.link_bytes / (self.link_bandwidth * span)

    @property
    def shared_utilization(self) -> np.ndarray:
        """Mean fraction of each shared resource's capacity used over the makespan."""
        span = self.makespan if self.makespan > 0 else 1.0
        return self.shared_bytes / (np.array([r.capacity for r in self.compiled.scenario.shared]) * span)

    def link_timeline(self) -> tuple[np.ndarray, np.ndarray]:
        """(edges [E + 1] s, utilization [E, links]): utilization is constant between consecutive edges.

        Needs simulate(..., record=True).
        """
        if self.trace_time.size == 0:
            raise ValueError("no timeline recorded: run netsim.simulate(scenario, record=True)")
        edges = np.append(self.trace_time, self.makespan)
        # each recorded event's load holds until the next event; the last one until the makespan
        return edges, self.trace_load / self.link_bandwidth

    def flow(self, flow_id: str) -> Timing:
        i = _find(self.flow_ids, flow_id, "flow")
        return Timing(
            flow_id, float(self.flow_start[i]), float(self.flow_first_byte[i]), float(self.flow_finish[i])
        )

    def task(self, task_id: str) -> Timing:
        i = _find(self.task_ids, task_id, "task")
        return Timing(
            task_id, float(self.task_start[i]), float(self.task_start[i]), float(self.task_finish[i])
        )

    def timing(self, item_id: str) -> Timing:
        """A flow's or a task's times."""
        return self.flow(item_id) if item_id in _positions(self.flow_ids) else self.task(item_id)

    def bottlenecks(self, flow_id: str) -> dict[str, float]:
        """Seconds the flow spent held back by each link of its route or shared resource it crosses (those
        that never held it are left out).

        The flow's time is first_byte - start of latency, then the sum of these values of transfer.
        """
        i = _find(self.flow_ids, flow_id, "flow")
        return _held_by(self.compiled.hops[i], self.held[i].tolist())

    # --- output ---------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        # Python floats, read once: NumPy's scalar indexing would cost a microsecond per number
        flows = [
            {"id": fid, "start": a, "first_byte": b, "finish": c, "bottlenecks": _held_by(hops, held)}
            for fid, a, b, c, hops, held in zip(
                self.flow_ids,
                self.flow_start.tolist(),
                self.flow_first_byte.tolist(),
                self.flow_finish.tolist(),
                self.compiled.hops,
                self.held.tolist(),
                strict=True,
            )
        ]
        tasks = [
            {"id": tid, "start": a, "finish": b}
            for tid, a, b in zip(
                self.task_ids, self.task_start.tolist(), self.task_finish.tolist(), strict=True
            )
        ]
        usage = lambda ids, used, busy, utilization: [
            {"id": rid, "bytes": b, "busy": u, "utilization": x}
            for rid, b, u, x in zip(ids, used.tolist(), busy.tolist(), utilization.tolist(), strict=True)
        ]
        links = usage(self.link_ids, self.link_bytes, self.link_busy, self.link_utilization)
        shared = usage(self.shared_ids, self.shared_bytes, self.shared_busy, self.shared_utilization)
        return {
            "scenario": self.compiled.scenario.name,
            "makespan": self.makespan,
            "events": self.events,
            "rounds": self.rounds,
            "max_rounds": self.max_rounds,
            "wall_time": self.wall_time,
            "flows": flows,
            "tasks": tasks,
            "links": links,
            **({"shared": shared} if shared else {}),
        }

    def save(self, path: str | os.PathLike) -> None:
        """Writes JSON, or HDF5 when the name ends in .h5/.hdf5; atomically either way.

        JSON stays standard: a non-finite number (the finish of an item that never ran) is written as null.
        """
        path = os.fspath(path)
        if path.endswith((".h5", ".hdf5")):
            self._save_hdf5(path)
        else:
            write_atomic(path, to_json(self.to_dict(), rows=True))

    def _save_hdf5(self, path: str) -> None:
        import h5py

        # built in memory, then written as bytes: a full disk is one OSError from `write_atomic`, not h5py
        # failing inside its own writes (dozens of tracebacks, then a crash)
        text, image = h5py.string_dtype(), io.BytesIO()
        with h5py.File(image, "w") as f:
            f.attrs.update(
                format="netsim-result",
                version=HDF5_VERSION,
                scenario=self.compiled.scenario.name,
                makespan=self.makespan,
                status=int(self.status),
                events=self.events,
                rounds=self.rounds,
                max_rounds=self.max_rounds,
                wall_time=self.wall_time,
                units=to_json({"makespan": "s", "wall_time": "s"}),
            )
            for group, columns in self.tables().items():
                g = f.create_group(group)
                for name, (values, unit) in columns.items():
                    values = np.asarray(values)
                    dtype = text if values.dtype.kind in "OUS" else values.dtype
                    g.create_dataset(name, data=values, dtype=dtype).attrs["units"] = unit
        write_atomic(path, image.getvalue())

    def tables(self) -> dict[str, dict[str, tuple[np.ndarray, str]]]:
        """The HDF5 layout (docs/scenario-format.md): group -> dataset -> (values, units), in scenario order.

        Ids are strings; `flows/route` [flows, R] holds each route's links as indices into `links/id`,
        `flows/shared` [flows, K] the shared resources crossed as indices into `shared/id` (-1 pads both);
        `flows/held` [flows, R + K] is the time each of those held the flow back (its route's columns, then
        its shared ones).
        """
        sc = self.compiled.scenario
        link_index = _positions(self.link_ids)
        shared_index = _positions(self.shared_ids)
        n = len(self.flow_ids)
        routes = [[h for h in hops if h in link_index] for hops in self.compiled.hops[:n]]
        crossed = [[h for h in hops if h in shared_index] for hops in self.compiled.hops[:n]]
        r = max([len(x) for x in routes] + [0])
        k = max([len(x) for x in crossed] + [0])
        route = np.full((n, r), -1, np.int32)
        shared = np.full((n, k), -1, np.int32)
        held = np.zeros((n, r + k))
        for i, (path, res) in enumerate(zip(routes, crossed, strict=True)):
            route[i, : len(path)] = [link_index[x] for x in path]
            shared[i, : len(res)] = [shared_index[x] for x in res]
            # held follows Compiled.hops: the route's links, then the shared resources
            held[i, : len(path)] = self.held[i, : len(path)]
            held[i, r : r + len(res)] = self.held[i, len(path) : len(path) + len(res)]
        links = {x.id: x for x in sc.links}
        return {
            "flows": {
                "id": (np.array(self.flow_ids, dtype=object), ""),
                "src": (np.array([x.src for x in sc.flows], dtype=object), ""),
                "dst": (np.array([x.dst for x in sc.flows], dtype=object), ""),
                "bytes": (np.array([x.bytes for x in sc.flows], float), "B"),
                "start": (self.flow_start, "s"),
                "first_byte": (self.flow_first_byte, "s"),
                "finish": (self.flow_finish, "s"),
                "route": (route, "index into links/id (-1: none)"),
                "shared": (shared, "index into shared/id (-1: none)"),
                "held": (held, "s"),
            },
            "tasks": {
                "id": (np.array(self.task_ids, dtype=object), ""),
                "device": (np.array([t.device for t in sc.tasks], dtype=object), ""),
                "start": (self.task_start, "s"),
                "finish": (self.task_finish, "s"),
            },
            "links": {
                "id": (np.array(self.link_ids, dtype=object), ""),
                "src": (np.array([links[i].src for i in self.link_ids], dtype=object), ""),
                "dst": (np.array([links[i].dst for i in self.link_ids], dtype=object), ""),
                "bandwidth": (self.link_bandwidth, "B/s"),
                "latency": (np.array([links[i].latency for i in self.link_ids], float), "s"),
                "bytes": (self.link_bytes, "B"),
                "busy": (self.link_busy, "s"),
                "utilization": (self.link_utilization, "1"),
            },
            "shared": {
                "id": (np.array(self.shared_ids, dtype=object), ""),
                "capacity": (np.array([x.capacity for x in sc.shared], float), "B/s"),
                "bytes": (self.shared_bytes, "B"),
                "busy": (self.shared_busy, "s"),
                "utilization": (self.shared_utilization, "1"),
            },
            "devices": {
                "id": (np.array(self.device_ids, dtype=object), ""),
                "busy": (self.device_busy, "s"),
            },
        }

    def to_pandas(self) -> dict[str, Any]:
        """{"flows", "tasks", "links"} -> pandas.DataFrame indexed by id, with the columns of `tables()`
        (a flow's `route` as a tuple of link ids, its `held` left out: see `bottlenecks`). Each frame's
        `attrs["units"]` maps column -> unit. Needs pandas: `pip install "netsim[pandas]"`.
        """
        try:
            import pandas as pd
        except ImportError:
            raise ImportError(
                'Result.to_pandas needs pandas, which is not installed: pip install "netsim[pandas]"'
            ) from None
        tables = self.tables()
        route = tables["flows"].pop("route")[0]
        for column in ("shared", "held"):
            tables["flows"].pop(column)
        out = {}
        for group in ("flows", "tasks", "links"):
            columns = tables[group]
            frame = pd.DataFrame({name: values for name, (values, _) in columns.items()}).set_index("id")
            if group == "flows":
                frame["route"] = [tuple(self.link_ids[j] for j in row if j >= 0) for row in route]
            frame.attrs["units"] = {name: unit for name, (_, unit) in columns.items() if name != "id"} | (
                {"route": "link ids"} if group == "flows" else {}
            )
            out[group] = frame
        return out

    def summary(self, top: int = 5) -> str:
        """A readable table: totals, the slowest flows with their bottleneck, the busiest links."""
        sc = self.compiled.scenario
        lines = [
            f"scenario {sc.name or '(unnamed)'}: {len(sc.links)} links, {len(sc.flows)} flows, "
            f"{len(sc.tasks)} tasks",
            *([textwrap.fill(_abbreviated(sc.description), 100)] if sc.description else []),
            f"makespan {format_quantity(self.makespan, 'time')}   events {self.events}   "
            f"max-min rounds {self.rounds} (max {self.max_rounds} per event)   "
            f"wall {format_quantity(self.wall_time, 'time')}",
        ]
        if self.flow_ids:
            order = np.argsort(-(self.flow_finish - self.flow_start))[:top]
            lines += ["", f"{'longest flows':<28}{'start':>12}{'finish':>12}{'rate':>14}  held back by"]
            for i in order:
                fid = self.flow_ids[i]
                span = self.flow_finish[i] - self.flow_first_byte[i]
                rate = sc.flows[i].bytes / span if span > 0 else float("inf")
                held = self.bottlenecks(fid)
                worst = max(held, key=held.get) if held else "-"
                lines.append(
                    f"{fid[:27]:<28}{format_quantity(self.flow_start[i], 'time'):>12}"
                    f"{format_quantity(self.flow_finish[i], 'time'):>12}"
                    f"{format_quantity(rate, 'bandwidth'):>14}  {worst}"
                )
        if self.link_ids:
            util = self.link_utilization
            order = np.argsort(-util)[:top]
            lines += ["", f"{'busiest links':<28}{'bytes':>12}{'busy':>12}{'util':>8}"]
            for i in order:
                lines.append(
                    f"{self.link_ids[i][:27]:<28}{format_quantity(self.link_bytes[i], 'bytes'):>12}"
                    f"{format_quantity(self.link_busy[i], 'time'):>12}{util[i]:>8.1%}"
                )
        if self.shared_ids:
            util = self.shared_utilization
            lines += ["", f"{'shared resources':<28}{'bytes':>12}{'busy':>12}{'util':>8}"]
            for i in np.argsort(-util)[:top]:
                lines.append(
                    f"{self.shared_ids[i][:27]:<28}{format_quantity(self.shared_bytes[i], 'bytes'):>12}"
                    f"{format_quantity(self.shared_busy[i], 'time'):>12}{util[i]:>8.1%}"
                )
        if self.task_ids:
            lines += [
                "",
                f"{len(self.task_ids)} tasks on {len(self.device_ids)} devices; busiest device "
                f"{self.device_ids[int(np.argmax(self.device_busy))]} "
                f"({format_quantity(float(self.device_busy.max()), 'time')} busy)",
            ]
            bubbles = pipeline_bubbles(self)
            if bubbles:  # a pipeline schedule: per device busy time and idle fraction of the makespan
                lines += ["", f"{'pipeline device':<28}{'busy':>12}{'bubble':>8}"]
                for device, (busy, bubble) in bubbles.items():
                    lines.append(f"{device[:27]:<28}{format_quantity(busy, 'time'):>12}{bubble:>8.1%}")
                mean = sum(b for _, b in bubbles.values()) / len(bubbles)
                lines.append(f"{'mean':<28}{'':>12}{mean:>8.1%}")
        return "\n".join(lines)


_POSITIONS: dict[int, tuple[tuple[str, ...], dict[str, int]]] = {}  # id(ids) -> (ids, positions), 64 at most


def _positions(ids: tuple[str, ...]) -> dict[str, int]:
    # keyed by identity (the entry holds `ids`, so the id stays its own): hashing a tuple of 1e4 ids on every
    # lookup made each per-flow query O(flows), and writing a result O(flows^2)
    hit = _POSITIONS.get(id(ids))
    if hit is None or hit[0] is not ids:
        if len(_POSITIONS) >= 64:
            del _POSITIONS[next(iter(_POSITIONS))]
        hit = _POSITIONS[id(ids)] = (ids, {k: i for i, k in enumerate(ids)})
    return hit[1]


def _held_by(hops: tuple[str, ...], held: list[float]) -> dict[str, float]:
    """A flow's seconds held back per resource id, from its hops' ids and its row of `held` (the resources
    that never held it left out; a resource it crosses twice summed)."""
    out: dict[str, float] = {}
    for rid, seconds in zip(hops, held, strict=False):  # held: padded to the most hops
        if seconds > 0:
            out[rid] = out.get(rid, 0.0) + seconds
    return out


def _find(ids: tuple[str, ...], key: str, kind: str) -> int:
    try:
        return _positions(ids)[key]
    except KeyError:
        raise KeyError(f"no {kind} with id {key!r}") from None


#: characters of a scenario's description a summary shows (wrapping a 50 MB one took minutes)
DESCRIPTION_SHOWN = 1000


def _abbreviated(description: str) -> str:
    if len(description) <= DESCRIPTION_SHOWN:
        return description
    return f"{description[:DESCRIPTION_SHOWN]} ... ({len(description) - DESCRIPTION_SHOWN:,} more characters)"
