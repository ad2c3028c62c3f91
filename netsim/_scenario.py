"""Scenario: links, flows and compute tasks, as Python objects and as JSON.

A scenario is the engine's whole input. Topology builders produce its links, workload compilers its
flows and tasks; users may also write it by hand (see docs/scenario-format.md).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ._checks import (
    MIN_BANDWIDTH,
    identifier,
    identifiers,
    number,
    quantity,
    read_json,
    show,
    text,
    to_json,
    write_atomic,
)
from ._errors import ScenarioError

__all__ = ["Flow", "Link", "Scenario", "ScenarioError", "SharedResource", "Task"]


@dataclasses.dataclass(frozen=True)
class Link:
    """A directed link `src -> dst`: bandwidth in bytes/s, latency in s (numbers or strings with units,
    "25 GB/s", "1 us", converted to SI floats when the link is built).

    packet_bytes: None (the default) for a fluid link; else the link is packetized: it moves packets of at
        most this many payload bytes, each with `header_bytes` of header and framing on the wire, so flows
        share bandwidth x packet / (packet + header), and a flow's first byte waits in the link's queue
        for the M/G/1 time at the link's utilization (docs/queueing.md), at most the drain time of
        `buffer_bytes` (None: unbounded). variability: the squared coefficient of variation of the
        packets' service time (None or 0: all packets alike, M/D/1; 1: exponential, M/M/1).
    """

    id: str
    src: str
    dst: str
    bandwidth: float
    latency: float = 0.0
    packet_bytes: float | None = None
    header_bytes: float | None = None
    buffer_bytes: float | None = None
    variability: float | None = None

    @property
    def packetized(self) -> bool:
        return self.packet_bytes is not None

    def __post_init__(self):
        _check_fields(self)


@dataclasses.dataclass(frozen=True)
class Flow:
    """`bytes` from `src` to `dst` (a number or a string with a unit, "4 MiB").

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

    def __post_init__(self):
        _check_fields(self)


@dataclasses.dataclass(frozen=True)
class Task:
    """A compute task of `duration` s on `device`. Tasks that overlap on one device share it fairly."""

    id: str
    device: str
    duration: float
    start: float = 0.0
    after: tuple[str, ...] = ()

    def __post_init__(self):
        _check_fields(self)


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
        _check_fields(self)

    def applies(self, route: Sequence[str]) -> bool:
        """Whether a flow with this route (link ids) crosses the resource."""
        return not set(self.links).isdisjoint(route) and (not self.via or not set(self.via).isdisjoint(route))


def bandwidth_targets(
    links: Sequence[Link],
    shared: Sequence[SharedResource],
    patterns: Sequence[str],
    classes: Mapping[str, str] | None = None,
) -> tuple[list[str], list[str], list[str]]:
    """What a bandwidth change for `patterns` changes: (matched link ids, ids of the shared resources that
    follow them, ids of the other shared resources it names), each in scenario order.

    A link matches when its id matches a pattern as a glob (fnmatch: *, ?, [..]) or its class
    (`classes[id]`, e.g. `netsim.topology.link_class`) equals one. A shared resource follows when all of
    its links match: a faster cable has a larger two-way budget too, so the budget changes with its links
    (else the untouched budget would cap them). One that does not follow is named when its own id matches.
    The one rule of `Topology.scaled` (`netsim collective --scale`) and of the sweep's bandwidth axis.
    """
    classes = classes or {}
    hit = [
        x.id for x in links if any(fnmatch.fnmatchcase(x.id, p) or classes.get(x.id) == p for p in patterns)
    ]
    matched = set(hit)
    following = [r.id for r in shared if set(r.links) <= matched]
    named = [
        r.id for r in shared if r.id not in following and any(fnmatch.fnmatchcase(r.id, p) for p in patterns)
    ]
    return hit, following, named


@dataclasses.dataclass(frozen=True)
class Scenario:
    """Links, flows and tasks; `per_hop_latency` (s) is added to every flow for each link it crosses;
    `shared` capacities constrain the flows that cross their links (see SharedResource).

    Values are checked when the scenario is built (types, ranges, units); ids, routes
    and dependencies when it is compiled (`netsim.compile_scenario`). Both raise `ScenarioError`.
    """

    links: tuple[Link, ...]
    flows: tuple[Flow, ...] = ()
    tasks: tuple[Task, ...] = ()
    per_hop_latency: float = 0.0
    name: str = ""
    description: str = ""
    shared: tuple[SharedResource, ...] = ()

    def __post_init__(self):
        # accept lists; store tuples so a scenario is hashable and immutable
        for key, cls in (("links", Link), ("flows", Flow), ("tasks", Task), ("shared", SharedResource)):
            items = getattr(self, key)
            if isinstance(items, str | bytes | Mapping) or not isinstance(items, Iterable):
                raise ScenarioError(f"{key}: expected a list of netsim.{cls.__name__}, got {show(items)}")
            items = tuple(items)
            for i, item in enumerate(items):
                if not isinstance(item, cls):
                    raise ScenarioError(f"{key}[{i}]: expected a netsim.{cls.__name__}, got {show(item)}")
            object.__setattr__(self, key, items)
        object.__setattr__(self, "per_hop_latency", quantity(self.per_hop_latency, "time", "per_hop_latency"))
        text(self.name, "name")
        text(self.description, "description")

    # --- JSON -----------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Scenario:
        """Reads the JSON structure; numbers may carry units ("25 GB/s", "2 us", "4 MiB").

        Raises:
            ScenarioError: naming the field (`links[3] (id 'l3').bandwidth`) and its value.
        """
        if not isinstance(data, Mapping):
            raise ScenarioError(f"scenario: expected a JSON object, got {type(data).__name__}")
        unknown = set(data) - {"links", "shared", "flows", "tasks", "per_hop_latency", "name", "description"}
        if unknown:
            hint = (
                "; this is a sweep spec: run it with `netsim sweep`"
                if {"scenario", "axes"} <= set(data)
                else ""
            )
            raise ScenarioError(f"scenario: unknown top-level field(s) {sorted(map(str, unknown))}{hint}")
        links = [_read(Link, row, f"links[{i}]") for i, row in enumerate(_rows(data, "links"))]
        shared = [_read(SharedResource, row, f"shared[{i}]") for i, row in enumerate(_rows(data, "shared"))]
        flows = [_read(Flow, row, f"flows[{i}]") for i, row in enumerate(_rows(data, "flows"))]
        tasks = [_read(Task, row, f"tasks[{i}]") for i, row in enumerate(_rows(data, "tasks"))]
        return cls(
            links,
            flows,
            tasks,
            per_hop_latency=data.get("per_hop_latency", 0.0),
            name=data.get("name", ""),
            description=data.get("description", ""),
            shared=shared,
        )

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
        """Reads a scenario JSON file: UTF-8 (UTF-16 and UTF-32 are recognised too).

        Raises:
            ScenarioError: the file is not JSON text, or names a bad field.
            OSError: the file cannot be read.
        """
        scenario = cls.from_dict(read_json(path, "a scenario"))  # UTF-8, -16 or -32, BOM or not
        if not scenario.name:
            scenario = dataclasses.replace(scenario, name=os.path.splitext(os.path.basename(path))[0])
        return scenario

    def save(self, path: str | os.PathLike) -> None:
        """Writes the scenario as JSON, atomically."""
        write_atomic(path, to_json(self.to_dict(), indent=1))

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


#: per class, how each field is checked: an id, ids (a list), a route (ids or None), a plain number >= 0,
#: or a quantity kind ("positive " for > 0)
_FIELDS: dict[type, dict[str, str]] = {
    Link: {
        "id": "id",
        "src": "id",
        "dst": "id",
        "bandwidth": "bandwidth",
        "latency": "time",
        "packet_bytes": "positive bytes",
        "header_bytes": "bytes",
        "buffer_bytes": "positive bytes",
        "variability": "number",
    },
    Flow: {
        "id": "id",
        "src": "id",
        "dst": "id",
        "bytes": "bytes",
        "route": "route",
        "start": "time",
        "after": "ids",
        "overhead": "time",
    },
    Task: {"id": "id", "device": "id", "duration": "time", "start": "time", "after": "ids"},
    SharedResource: {"id": "id", "capacity": "bandwidth", "links": "ids", "via": "ids"},
}


def _checked(cls: type, values: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The fields of `values` (a row or an object's fields) checked and converted, named from `where`."""
    out = {"id": identifier(values["id"], f"{where}.id")}
    where = f"{where} (id {out['id']!r})"
    for name, kind in _FIELDS[cls].items():
        if name == "id" or name not in values:
            continue
        value, field = values[name], f"{where}.{name}"
        if kind == "id":
            out[name] = identifier(value, field)
        elif kind == "ids" or (kind == "route" and value is not None):
            out[name] = identifiers(value, field)
        elif kind == "route" or (value is None and name in _PACKETS):
            out[name] = None
        elif kind == "number":
            out[name] = number(value, field)
        else:
            positive = kind.startswith("positive ")
            kind = kind.removeprefix("positive ")
            out[name] = quantity(value, kind, field, positive=positive or kind == "bandwidth")
    if cls is Link and out.get("packet_bytes") is None:
        extra = [name for name in _PACKETS[1:] if out.get(name) is not None]
        if extra:
            raise ScenarioError(
                f"{where}.{extra[0]}: set only on a packetized link: give packet_bytes too"
                f" (got {extra[0]}={show(values[extra[0]])} without it)"
            )
    elif cls is Link and out.get("bandwidth") is not None:  # what flows share must be a bandwidth too
        packet, header = out["packet_bytes"], out.get("header_bytes") or 0.0
        payload = out["bandwidth"] * packet / (packet + header)
        if not payload >= MIN_BANDWIDTH:
            raise ScenarioError(
                f"{where}.header_bytes: leaves a payload bandwidth of {payload:.3g} B/s (bandwidth x"
                f" packet_bytes / (packet_bytes + header_bytes)), below netsim's {MIN_BANDWIDTH:g} B/s"
            )
    if cls is Flow and out["src"] == out["dst"]:
        raise ScenarioError(
            f"{where}.dst: same node as src ({out['dst']!r}); a flow crosses at least one link"
        )
    return out


#: a link's packet fields, all optional (None: not set); packet_bytes first: the others need it
_PACKETS = ("packet_bytes", "header_bytes", "buffer_bytes", "variability")


def _check_fields(obj: Link | Flow | Task | SharedResource) -> None:
    """__post_init__ of Link, Flow, Task and SharedResource: checks every field, stores SI floats and tuples."""
    obj.__dict__.update(_checked(type(obj), obj.__dict__, type(obj).__name__))  # frozen: no setattr


def _rows(data: Mapping[str, Any], key: str) -> Sequence[Any]:
    rows = data.get(key, [])
    if not isinstance(rows, list):
        raise ScenarioError(f"{key}: expected a list, got {show(rows)}")
    return rows


#: per class, its fields' defaults (MISSING where required)
_DEFAULTS: dict[type, dict[str, Any]] = {
    cls: {f.name: f.default for f in dataclasses.fields(cls)} for cls in _FIELDS
}


def _read(cls, row: Any, where: str):
    if not isinstance(row, Mapping):
        raise ScenarioError(f"{where}: expected an object, got {show(row)}")
    defaults = _DEFAULTS[cls]
    if not defaults.keys() >= row.keys():
        unknown = set(row) - set(defaults)
        raise ScenarioError(
            f"{where}: unknown field(s) {sorted(map(str, unknown))}; known: {sorted(defaults)}"
        )
    missing = [n for n, d in defaults.items() if d is dataclasses.MISSING and n not in row]
    if missing:
        raise ScenarioError(f"{where}: missing field(s) {missing}")
    # checked once, here with the row's position in the file; the class's own check (`_check_fields`, the
    # same checks) is skipped: reading 1e4 flows was half re-checking them
    obj = object.__new__(cls)
    obj.__dict__.update(defaults)
    obj.__dict__.update(_checked(cls, row, where))
    return obj
