"""Scenario: links, flows and compute tasks, as Python objects and as JSON.

A scenario is the engine's whole input. Topology builders produce its links, workload compilers its
flows and tasks; users may also write it by hand (see docs/scenario-format.md).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ._errors import ScenarioError
from ._units import parse_quantity

__all__ = ["Flow", "Link", "Scenario", "ScenarioError", "SharedResource", "Task"]


@dataclasses.dataclass(frozen=True)
class Link:
    """A directed link `src -> dst`: bandwidth in bytes/s, latency in s."""

    id: str
    src: str
    dst: str
    bandwidth: float
    latency: float = 0.0


@dataclasses.dataclass(frozen=True)
class Flow:
    """`bytes` from `src` to `dst`.

    route: link ids from src to dst; None takes the shortest path by latency (then by hop count).
    start: release time (s): the flow starts at the latest of `start` and the finish of all `after` ids.
    after: ids of flows or tasks that must finish first.
    overhead: fixed time (s) added to the path latency before the first byte (software cost).
    """

    id: str
    src: str
    dst: str
    bytes: float
    route: tuple[str, ...] | None = None
    start: float = 0.0
    after: tuple[str, ...] = ()
    overhead: float = 0.0


@dataclasses.dataclass(frozen=True)
class Task:
    """A compute task of `duration` s on `device`. Tasks that overlap on one device share it fairly."""

    id: str
    device: str
    duration: float
    start: float = 0.0
    after: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class SharedResource:
    """A capacity (bytes/s) that flows share although no single link has it: a cable's two-way budget,
    a host staging engine, a memory controller.

    A flow crosses it when its route crosses any link in `links` and, if `via` is not empty, also one in
    `via` (e.g. only host-staged copies, which cross a memory link). It adds no latency; in max-min
    sharing it is one more constraint, reported in results beside the links.
    """

    id: str
    capacity: float
    links: tuple[str, ...]
    via: tuple[str, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "links", tuple(self.links))
        object.__setattr__(self, "via", tuple(self.via))

    def applies(self, route: Sequence[str]) -> bool:
        """Whether a flow with this route (link ids) crosses the resource."""
        return not set(self.links).isdisjoint(route) and (not self.via or not set(self.via).isdisjoint(route))


@dataclasses.dataclass(frozen=True)
class Scenario:
    """Links, flows and tasks; `per_hop_latency` (s) is added to every flow for each link it crosses;
    `shared` capacities constrain the flows that cross their links (see SharedResource)."""

    links: tuple[Link, ...]
    flows: tuple[Flow, ...] = ()
    tasks: tuple[Task, ...] = ()
    per_hop_latency: float = 0.0
    name: str = ""
    description: str = ""
    shared: tuple[SharedResource, ...] = ()

    def __post_init__(self):
        # accept lists; store tuples so a scenario is hashable and immutable
        object.__setattr__(self, "links", tuple(self.links))
        object.__setattr__(self, "flows", tuple(self.flows))
        object.__setattr__(self, "tasks", tuple(self.tasks))
        object.__setattr__(self, "shared", tuple(self.shared))

    # --- JSON -----------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Scenario:
        """Reads the JSON structure; numbers may carry units ("25 GB/s", "2 us", "4 MiB")."""
        if not isinstance(data, Mapping):
            raise ScenarioError(f"scenario: expected a JSON object, got {type(data).__name__}")
        unknown = set(data) - {"links", "shared", "flows", "tasks", "per_hop_latency", "name", "description"}
        if unknown:
            raise ScenarioError(f"scenario: unknown top-level field(s) {sorted(unknown)}")
        links = [_read(Link, row, f"links[{i}]") for i, row in enumerate(_rows(data, "links"))]
        shared = [_read(SharedResource, row, f"shared[{i}]") for i, row in enumerate(_rows(data, "shared"))]
        flows = [_read(Flow, row, f"flows[{i}]") for i, row in enumerate(_rows(data, "flows"))]
        tasks = [_read(Task, row, f"tasks[{i}]") for i, row in enumerate(_rows(data, "tasks"))]
        hop = parse_quantity(data.get("per_hop_latency", 0.0), "time", "per_hop_latency")
        return cls(links, flows, tasks, per_hop_latency=hop, name=str(data.get("name", "")),
                   description=str(data.get("description", "")), shared=shared)

    def to_dict(self) -> dict[str, Any]:
        def row(obj):
            d = dataclasses.asdict(obj)
            return {k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items() if v is not None}

        out: dict[str, Any] = {"name": self.name} if self.name else {}
        if self.description:
            out["description"] = self.description
        out["links"] = [row(x) for x in self.links]
        if self.shared:
            out["shared"] = [row(x) for x in self.shared]
        out["flows"] = [row(x) for x in self.flows]
        out["tasks"] = [row(x) for x in self.tasks]
        if self.per_hop_latency:
            out["per_hop_latency"] = self.per_hop_latency
        return out

    @classmethod
    def load(cls, path: str | os.PathLike) -> Scenario:
        try:
            with open(path) as f:
                data = json.load(f)
        except json.JSONDecodeError as e:
            raise ScenarioError(f"{path}: not valid JSON: {e}") from None
        scenario = cls.from_dict(data)
        if not scenario.name:
            scenario = dataclasses.replace(scenario, name=os.path.splitext(os.path.basename(path))[0])
        return scenario

    def save(self, path: str | os.PathLike) -> None:
        write_atomic(path, json.dumps(self.to_dict(), indent=1))

    # --- conveniences ---------------------------------------------------------------------------
    def with_flows(self, flows: Iterable[Flow] = (), tasks: Iterable[Task] = ()) -> Scenario:
        """The same links, with more flows and tasks appended."""
        return dataclasses.replace(self, flows=self.flows + tuple(flows), tasks=self.tasks + tuple(tasks))

    @property
    def nodes(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for link in self.links:
            seen.setdefault(link.src)
            seen.setdefault(link.dst)
        return tuple(seen)


_KIND = {"bandwidth": "bandwidth", "capacity": "bandwidth", "latency": "time", "bytes": "bytes", "start": "time",
         "duration": "time", "overhead": "time"}


def _rows(data: Mapping[str, Any], key: str) -> Sequence[Any]:
    rows = data.get(key, [])
    if not isinstance(rows, list):
        raise ScenarioError(f"{key}: expected a list, got {type(rows).__name__}")
    return rows


def _read(cls, row: Any, where: str):
    if not isinstance(row, Mapping):
        raise ScenarioError(f"{where}: expected an object, got {row!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(row) - set(fields)
    if unknown:
        raise ScenarioError(f"{where}: unknown field(s) {sorted(unknown)}; known: {sorted(fields)}")
    missing = [n for n, f in fields.items()
               if f.default is dataclasses.MISSING and n not in row]
    if missing:
        raise ScenarioError(f"{where}: missing field(s) {missing}")
    kwargs = {}
    for name, value in row.items():
        field = f"{where}.{name}"
        try:
            if name in _KIND:
                value = parse_quantity(value, _KIND[name], field)
            elif name in ("route", "after", "links", "via"):
                if value is not None:
                    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                        raise ScenarioError(f"{field}: expected a list of id strings, got {value!r}")
                    value = tuple(value)
            elif not isinstance(value, str):
                raise ScenarioError(f"{field}: expected a string, got {value!r}")
        except ValueError as e:
            raise ScenarioError(str(e)) from None
        kwargs[name] = value
    return cls(**kwargs)


def write_atomic(path: str | os.PathLike, text: str) -> None:
    """Writes `text` to a temporary file beside `path`, then renames it: readers never see half a file."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=os.path.basename(path))
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a result file should read like any other
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def check_number(value: float, field: str, *, positive: bool = False) -> None:
    """Raises ScenarioError unless value is finite and >= 0 (> 0 with positive=True)."""
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise ScenarioError(f"{field}: must be a finite number, got {value!r}")
    if positive and value <= 0:
        raise ScenarioError(f"{field}: must be > 0, got {value!r}")
    if value < 0:
        raise ScenarioError(f"{field}: must be >= 0, got {value!r}")
