"""Workload: the flows and compute tasks a compiler emits, before they meet a topology's links."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Protocol

from .._routing import LinkGraph
from .._scenario import Flow, Link, Scenario, ScenarioError, Task


class Fabric(Protocol):
    """What compilers need of a topology: its links, and the route it really uses from src to dst."""

    @property
    def links(self) -> tuple[Link, ...]: ...

    def route(self, src: str, dst: str) -> tuple[str, ...]: ...


class LinkFabric:
    """The plainest Fabric: a list of links, routed by least latency, then fewest hops.

    For hand-built fabrics in tests and examples; topology builders give fabric-specific routing.
    """

    def __init__(self, links: Iterable[Link]):
        self.links = tuple(links)
        self._graph = LinkGraph(self.links)

    def route(self, src: str, dst: str) -> tuple[str, ...]:
        return self._graph.shortest_path(src, dst)


@dataclasses.dataclass(frozen=True)
class Workload:
    """Flows and tasks with their dependencies; ids are unique across both."""

    flows: tuple[Flow, ...] = ()
    tasks: tuple[Task, ...] = ()
    name: str = ""

    def __post_init__(self):
        object.__setattr__(self, "flows", tuple(self.flows))
        object.__setattr__(self, "tasks", tuple(self.tasks))

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(x.id for x in self.flows) + tuple(x.id for x in self.tasks)

    def __add__(self, other: Workload) -> Workload:
        """Both workloads side by side (they run concurrently unless `after` links them)."""
        clash = set(self.ids) & set(other.ids)
        if clash:
            raise ScenarioError(f"workloads share id(s) {sorted(clash)[:5]}; use .prefixed() on one of them")
        name = " + ".join(n for n in (self.name, other.name) if n)
        return Workload(self.flows + other.flows, self.tasks + other.tasks, name)

    def prefixed(self, prefix: str) -> Workload:
        """Every id (and every `after` reference to it) renamed to f"{prefix}/{id}"."""
        own = set(self.ids)
        rename = lambda i: f"{prefix}/{i}" if i in own else i
        flows = [
            dataclasses.replace(f, id=rename(f.id), after=tuple(map(rename, f.after))) for f in self.flows
        ]
        tasks = [
            dataclasses.replace(t, id=rename(t.id), after=tuple(map(rename, t.after))) for t in self.tasks
        ]
        return Workload(flows, tasks, self.name)

    def roots(self) -> tuple[str, ...]:
        """Ids of items that wait on nothing inside this workload."""
        own = set(self.ids)
        items = self.flows + self.tasks
        return tuple(x.id for x in items if not own.intersection(x.after))

    def sinks(self) -> tuple[str, ...]:
        """Ids of items nothing inside this workload waits on."""
        waited = {a for x in self.flows + self.tasks for a in x.after}
        return tuple(i for i in self.ids if i not in waited)

    def scenario(self, fabric: Fabric, *, name: str | None = None) -> Scenario:
        """A scenario on `fabric`'s links and shared resources (a Topology's `shared`, if any); flows
        without a route take `fabric.route(src, dst)`."""
        flows = [
            f if f.route is not None else dataclasses.replace(f, route=tuple(fabric.route(f.src, f.dst)))
            for f in self.flows
        ]
        return Scenario(
            tuple(fabric.links),
            flows,
            self.tasks,
            name=self.name if name is None else name,
            shared=tuple(getattr(fabric, "shared", ())),
        )


def concat(workloads: Iterable[Workload]) -> Workload:
    """All workloads side by side."""
    out = Workload()
    for w in workloads:
        out = out + w
    return out
