"""Scenario -> padded kernel arrays, after validating everything on the host."""

from __future__ import annotations

import dataclasses

import numpy as np

from ._checks import number as check_number
from ._checks import show
from ._errors import ScenarioError
from ._routing import LinkGraph
from ._scenario import Scenario
from .kernels import Network, Packets, Program


def bucket(n: int, minimum: int, per_octave: int = 1) -> int:
    """The padded size for n, at least `minimum`: the next of `per_octave` evenly spaced sizes per octave.

    per_octave=1 gives powers of two (fewest shapes, fewest compiles, up to 2x padding); 4 gives
    64, 80, 96, 112, 128, 160, ... (at most 25% padding, which every round of the engine pays for).
    """
    n = max(n, minimum)
    step = max(1, (1 << max(n - 1, 0).bit_length()) // (2 * per_octave))
    return -(-n // step) * step


@dataclasses.dataclass(frozen=True)
class Shape:
    """Padded kernel sizes: items (flows + tasks), hops per route, predecessors per item, resources
    (links + devices). Scenarios of one shape share one compile and vmap together.

    The event bound is a function of the shape alone: every event finishes an item or lets one start
    moving bytes, so 2 x items events always suffice (+ slack for the last event's bookkeeping); with
    packetized links an item's first byte may take one more, to wait in their queues (`event_bound`).
    """

    items: int = 64
    hops: int = 2
    after: int = 2
    resources: int = 8

    @classmethod
    def holding(cls, items: int, hops: int, after: int, resources: int) -> Shape:
        """The smallest bucketed shape (four sizes per power of two, see `bucket`) that holds these counts.

        No minimum: `compile_scenario` takes at least `Shape()` unless given a shape, so that one-off
        scenarios share a few shapes while batches of tiny ones (two-flow copies) stay tiny.
        """
        return cls(*(bucket(n, 1, 4) for n in (items, hops, after, resources)))

    def in_powers_of_two(self) -> Shape:
        """Each size rounded up to a power of two: runs whose sizes move a little (a fit's rounds) keep
        one shape, and so one compile."""
        return Shape(*(bucket(n, 1) for n in dataclasses.astuple(self)))

    def __or__(self, other: Shape) -> Shape:
        """The smallest shape holding both (elementwise max)."""
        return Shape(
            *(max(a, b) for a, b in zip(dataclasses.astuple(self), dataclasses.astuple(other), strict=True))
        )

    def holds(self, other: Shape) -> bool:
        return (self | other) == self

    @property
    def max_events(self) -> int:
        return 2 * self.items + 16


def event_bound(shape: Shape, network: Network) -> int:
    """The event bound of scenarios of this shape on this network: `Shape.max_events`, plus one event per
    item when links are packetized (a first byte that waits in a queue is an event of its own)."""
    return shape.max_events + (shape.items if network.packets is not None else 0)


@dataclasses.dataclass(frozen=True)
class Compiled:
    """A validated scenario as kernel arrays, with the id maps to read results back.

    Items are the flows in scenario order, then the tasks; resources are the links, then the shared
    resources, then the devices (`flow_slice`, `task_slice`, `link_slice`, `shared_slice`, `device_slice`
    cut the kernels' arrays). A flow's hops are its route's links, then the shared resources it crosses. The kernel pytrees
    hold NumPy float64/int32 arrays: pass them to `netsim.kernels.run` under jit (with x64 enabled), vmap
    over stacked copies (`netsim.run_batch`), or differentiate through `network`.
    """

    scenario: Scenario
    network: Network
    program: Program
    routes: tuple[tuple[str, ...], ...]  # per flow, the route used (given or computed): link ids
    devices: tuple[str, ...]
    shape: Shape
    hops: tuple[
        tuple[str, ...], ...
    ]  # per flow, the resource id of each hop: its route, then shared resources

    @property
    def max_events(self) -> int:
        return event_bound(self.shape, self.network)

    @property
    def n_flows(self) -> int:
        return len(self.scenario.flows)

    @property
    def n_tasks(self) -> int:
        return len(self.scenario.tasks)

    @property
    def n_links(self) -> int:
        return len(self.scenario.links)

    @property
    def flow_slice(self) -> slice:
        return slice(0, self.n_flows)

    @property
    def task_slice(self) -> slice:
        return slice(self.n_flows, self.n_flows + self.n_tasks)

    @property
    def link_slice(self) -> slice:
        return slice(0, self.n_links)

    @property
    def shared_slice(self) -> slice:
        return slice(self.n_links, self.n_links + len(self.scenario.shared))

    @property
    def device_slice(self) -> slice:
        start = self.shared_slice.stop
        return slice(start, start + len(self.devices))

    def with_packets(self) -> Compiled:
        """The same scenario with packet parameters on every resource (fluid ones where none: size 0), so it
        stacks with packetized scenarios; itself if it has them."""
        if self.network.packets is not None:
            return self
        r = self.shape.resources
        fluid = Packets(np.zeros(r), np.zeros(r), np.full(r, np.inf), np.zeros(r))
        network = Network(self.network.capacity, self.network.latency, fluid)
        return dataclasses.replace(self, network=network)

    def padded(self, shape: Shape) -> Compiled:
        """The same scenario laid out at a larger `shape` (no validation again: only the arrays grow)."""
        if shape == self.shape:
            return self
        if not shape.holds(self.shape):
            raise ScenarioError(
                f"shape: {shape} is smaller than scenario {self.scenario.name!r} needs ({self.shape})"
            )
        old, net, prog = self.shape, self.network, self.program
        route = np.full((shape.items, shape.hops), shape.resources, np.int32)
        route[: old.items, : old.hops] = np.where(prog.route == old.resources, shape.resources, prog.route)
        after = np.full((shape.items, shape.after), shape.items, np.int32)
        after[: old.items, : old.after] = np.where(prog.after == old.items, shape.items, prog.after)
        grow = lambda x, n, fill: np.concatenate([x, np.full(n - x.shape[0], fill, x.dtype)])
        packets = net.packets
        if packets is not None:
            packets = Packets(
                *(
                    grow(x, shape.resources, fill)
                    for x, fill in zip(
                        (packets.size, packets.header, packets.buffer, packets.variability),
                        (0.0, 0.0, np.inf, 0.0),
                        strict=True,
                    )
                )
            )
        network = Network(
            grow(net.capacity, shape.resources, 1.0), grow(net.latency, shape.resources, 0.0), packets
        )
        program = Program(
            route,
            grow(prog.size, shape.items, 0.0),
            grow(prog.release, shape.items, 0.0),
            grow(prog.overhead, shape.items, 0.0),
            after,
        )
        return dataclasses.replace(self, network=network, program=program, shape=shape)


def compile_scenario(scenario: Scenario, *, shape: Shape | None = None) -> Compiled:
    """Validates `scenario` and lays it out as padded arrays for the kernels.

    shape: at least this padded shape (e.g. one shared by a sweep, so scenarios vmap together and share
        one compile); default `Shape()`. The scenario gets the smallest bucketed shape that holds it and
        this one (`Shape.holding`).

    Raises:
        ScenarioError: naming the field and value of the first problem found.
    """
    if not isinstance(scenario, Scenario):
        raise ScenarioError(f"expected a netsim.Scenario, got {type(scenario).__name__}")
    if shape is not None and not isinstance(shape, Shape):
        raise ScenarioError(f"shape: expected a netsim.Shape, got {type(shape).__name__}")
    graph = _check_links(scenario)
    _check_shared(scenario)
    if not scenario.flows and not scenario.tasks:
        raise ScenarioError("scenario: empty (no flows and no tasks to simulate)")
    check_number(scenario.per_hop_latency, "per_hop_latency")
    index = _check_ids(scenario)
    routes = _check_flows(scenario, graph)
    _check_tasks(scenario)
    _check_acyclic(scenario, index)

    resources = [link.id for link in scenario.links] + [r.id for r in scenario.shared]
    resource_index = {rid: i for i, rid in enumerate(resources)}
    devices = tuple(dict.fromkeys(t.device for t in scenario.tasks))
    hops = tuple(path + tuple(r.id for r in scenario.shared if r.applies(path)) for path in routes)
    n_links, n_items = len(scenario.links), len(index)
    n_hops = max([len(h) for h in hops] + [1])
    preds = max([len(x.after) for x in (*scenario.flows, *scenario.tasks)] + [1])
    shape = Shape.holding(n_items, n_hops, preds, len(resources) + len(devices)) | (
        Shape() if shape is None else shape
    )
    N, H, P, R = shape.items, shape.hops, shape.after, shape.resources

    capacity = np.ones(R)  # padding resources: unused, any positive capacity
    latency = np.zeros(R)  # shared resources add no latency
    capacity[: len(resources)] = [link.bandwidth for link in scenario.links] + [
        r.capacity for r in scenario.shared
    ]
    latency[:n_links] = [link.latency for link in scenario.links]
    route = np.full((N, H), R, np.int32)
    size = np.zeros(N)
    release = np.zeros(N)
    overhead = np.zeros(N)
    after = np.full((N, P), N, np.int32)
    for i, (flow, path, crossed) in enumerate(zip(scenario.flows, routes, hops, strict=True)):
        route[i, : len(crossed)] = [resource_index[rid] for rid in crossed]
        size[i], release[i] = flow.bytes, flow.start
        overhead[i] = flow.overhead + scenario.per_hop_latency * len(path)
    device_index = {d: len(resources) + j for j, d in enumerate(devices)}
    for j, task in enumerate(scenario.tasks):
        i = len(scenario.flows) + j
        route[i, 0] = device_index[task.device]
        size[i], release[i] = task.duration, task.start
    for i, item in enumerate((*scenario.flows, *scenario.tasks)):
        after[i, : len(item.after)] = [index[a] for a in item.after]
    return Compiled(
        scenario,
        Network(capacity, latency, _packets(scenario, R)),
        Program(route, size, release, overhead, after),
        routes,
        devices,
        shape,
        hops,
    )


def _packets(scenario: Scenario, n_resources: int) -> Packets | None:
    """The links' packet parameters per resource, or None when no link is packetized (then the engine is
    the very program it was before packets existed)."""
    if not any(link.packetized for link in scenario.links):
        return None
    size, header = np.zeros(n_resources), np.zeros(n_resources)
    buffer, variability = np.full(n_resources, np.inf), np.zeros(n_resources)
    for i, link in enumerate(scenario.links):
        if link.packetized:
            size[i], header[i] = link.packet_bytes, link.header_bytes or 0.0
            buffer[i] = np.inf if link.buffer_bytes is None else link.buffer_bytes
            variability[i] = link.variability or 0.0
    return Packets(size, header, buffer, variability)


def _check_links(scenario: Scenario) -> LinkGraph:
    seen: dict[str, int] = {}
    for i, link in enumerate(scenario.links):
        where = f"links[{i}] (id {show(link.id)})"
        for name in ("id", "src", "dst"):
            if not isinstance(getattr(link, name), str) or not getattr(link, name):
                raise ScenarioError(
                    f"links[{i}].{name}: must be a non-empty string, got {getattr(link, name)!r}"
                )
        if link.id in seen:
            raise ScenarioError(f"{where}: duplicate link id (also links[{seen[link.id]}])")
        seen[link.id] = i
        if link.src == link.dst:
            raise ScenarioError(
                f"{where}.dst: a link must join two different nodes, got {show(link.dst)} twice"
            )
        check_number(link.bandwidth, f"{where}.bandwidth", positive=True)
        check_number(link.latency, f"{where}.latency")
    return LinkGraph(scenario.links)


def _check_shared(scenario: Scenario) -> None:
    links = {link.id for link in scenario.links}
    seen: dict[str, str] = {}
    for i, r in enumerate(scenario.shared):
        where = f"shared[{i}] (id {show(r.id)})"
        if not isinstance(r.id, str) or not r.id:
            raise ScenarioError(f"shared[{i}].id: must be a non-empty string, got {show(r.id)}")
        if r.id in links or r.id in seen:
            raise ScenarioError(
                f"{where}.id: duplicate resource id (link and shared resource ids share one namespace)"
            )
        seen[r.id] = where
        check_number(r.capacity, f"{where}.capacity", positive=True)
        if not r.links:
            raise ScenarioError(f"{where}.links: must name at least one link")
        for name in ("links", "via"):
            for j, lid in enumerate(getattr(r, name)):
                if lid not in links:
                    raise ScenarioError(f"{where}.{name}[{j}]: unknown link id {show(lid)}")


def _check_ids(scenario: Scenario) -> dict[str, int]:
    index: dict[str, int] = {}
    for kind, items in (("flows", scenario.flows), ("tasks", scenario.tasks)):
        for i, item in enumerate(items):
            if not isinstance(item.id, str) or not item.id:
                raise ScenarioError(f"{kind}[{i}].id: must be a non-empty string, got {show(item.id)}")
            if item.id in index:
                raise ScenarioError(
                    f"{kind}[{i}].id: duplicate id {show(item.id)} (flow and task ids share one namespace)"
                )
            index[item.id] = len(index)
    return index


def _check_flows(scenario: Scenario, graph: LinkGraph) -> list[tuple[str, ...]]:
    routes = []
    for i, flow in enumerate(scenario.flows):
        where = f"flows[{i}] (id {show(flow.id)})"
        check_number(flow.bytes, f"{where}.bytes")
        check_number(flow.start, f"{where}.start")
        check_number(flow.overhead, f"{where}.overhead")
        for name in ("src", "dst"):
            node = getattr(flow, name)
            if node not in graph.out:
                raise ScenarioError(f"{where}.{name}: unknown node {show(node)}")
        if flow.route is None:
            routes.append(graph.shortest_path(flow.src, flow.dst, where=f"{where}.route"))
        else:
            graph.check_route(flow.route, flow.src, flow.dst, f"{where}.route")
            routes.append(tuple(flow.route))
    return routes


def _check_tasks(scenario: Scenario) -> None:
    for i, task in enumerate(scenario.tasks):
        where = f"tasks[{i}] (id {show(task.id)})"
        if not isinstance(task.device, str) or not task.device:
            raise ScenarioError(f"{where}.device: must be a non-empty string, got {show(task.device)}")
        check_number(task.duration, f"{where}.duration")
        check_number(task.start, f"{where}.start")


def _check_acyclic(scenario: Scenario, index: dict[str, int]) -> None:
    items = (*scenario.flows, *scenario.tasks)
    kinds = [f"flows[{i}]" for i in range(len(scenario.flows))] + [
        f"tasks[{i}]" for i in range(len(scenario.tasks))
    ]
    for item, where in zip(items, kinds, strict=True):
        for j, dep in enumerate(item.after):
            if dep not in index:
                raise ScenarioError(
                    f"{where} (id {show(item.id)}).after[{j}]: unknown flow or task id {show(dep)}"
                )
            if dep == item.id:
                raise ScenarioError(f"{where} (id {show(item.id)}).after[{j}]: an item cannot wait on itself")
    # Iterative DFS with colours; on a back edge, the grey stack from the target is the cycle.
    colour = [0] * len(items)  # 0 new, 1 on the stack, 2 finished
    for root in range(len(items)):
        if colour[root]:
            continue
        stack = [(root, iter(items[root].after))]
        path = [root]
        colour[root] = 1
        while stack:
            node, deps = stack[-1]
            dep = next(deps, None)
            if dep is None:
                colour[node] = 2
                stack.pop()
                path.pop()
                continue
            k = index[dep]
            if colour[k] == 1:
                cycle = [show(items[n].id) for n in path[path.index(k) :]] + [show(items[k].id)]
                if len(cycle) > 9:  # a long cycle: its start and end say where to look
                    cycle = [*cycle[:5], f"... ({len(cycle) - 8} more)", *cycle[-3:]]
                raise ScenarioError("after: cyclic dependencies: " + " waits on ".join(cycle))
            if colour[k] == 0:
                colour[k] = 1
                path.append(k)
                stack.append((k, iter(items[k].after)))
