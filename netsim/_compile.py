"""Scenario -> padded kernel arrays, after validating everything on the host."""

from __future__ import annotations

import dataclasses

import numpy as np

from ._routing import LinkGraph
from ._scenario import Scenario, ScenarioError, check_number
from .kernels import Network, Program


def bucket(n: int, minimum: int, per_octave: int = 1) -> int:
    """The padded size for n, at least `minimum`: the next of `per_octave` evenly spaced sizes per octave.

    per_octave=1 gives powers of two (fewest shapes, fewest compiles, up to 2x padding); 4 gives
    64, 80, 96, 112, 128, 160, ... (at most 25% padding, which every round of the engine pays for).
    """
    n = max(n, minimum)
    step = max(1, (1 << max(n - 1, 0).bit_length()) // (2 * per_octave))
    return -(-n // step) * step


@dataclasses.dataclass(frozen=True)
class Compiled:
    """A validated scenario as kernel arrays, with the id maps to read results back.

    Items are the flows in scenario order, then the tasks; resources are the links, then the devices.
    The kernel pytrees hold NumPy float64/int32 arrays: pass them to `netsim.kernels.run` under jit
    (with x64 enabled), vmap over stacked copies, or differentiate through `network`.
    """

    scenario: Scenario
    network: Network
    program: Program
    routes: tuple[tuple[str, ...], ...]  # per flow, the route used (given or computed)
    devices: tuple[str, ...]
    max_events: int

    @property
    def n_flows(self) -> int:
        return len(self.scenario.flows)

    @property
    def n_tasks(self) -> int:
        return len(self.scenario.tasks)

    @property
    def n_links(self) -> int:
        return len(self.scenario.links)


def compile_scenario(scenario: Scenario, *, pad_items: int | None = None, pad_hops: int | None = None,
                     pad_after: int | None = None, pad_resources: int | None = None,
                     max_events: int | None = None) -> Compiled:
    """Validates `scenario` and lays it out as padded arrays for the kernels.

    Padding sizes default to buckets of four sizes per power of two (`bucket`); pass them (e.g. the
    largest of a sweep) to give several scenarios one shape so that they vmap together and share one
    compile.

    Raises:
        ScenarioError: naming the field and value of the first problem found.
    """
    if not isinstance(scenario, Scenario):
        raise ScenarioError(f"expected a netsim.Scenario, got {type(scenario).__name__}")
    graph = _check_links(scenario)
    if not scenario.flows and not scenario.tasks:
        raise ScenarioError("scenario: empty (no flows and no tasks to simulate)")
    check_number(scenario.per_hop_latency, "per_hop_latency")
    index = _check_ids(scenario)
    routes = _check_flows(scenario, graph)
    _check_tasks(scenario)
    _check_acyclic(scenario, index)

    link_index = {link.id: i for i, link in enumerate(scenario.links)}
    devices = tuple(dict.fromkeys(t.device for t in scenario.tasks))
    n_links, n_items = len(scenario.links), len(index)
    n_res = n_links + len(devices)
    hops = max([len(r) for r in routes] + [1])
    preds = max([len(x.after) for x in (*scenario.flows, *scenario.tasks)] + [1])
    R = _padded(pad_resources, n_res, 8, "pad_resources")
    N = _padded(pad_items, n_items, 64, "pad_items")
    H = _padded(pad_hops, hops, 2, "pad_hops")
    P = _padded(pad_after, preds, 2, "pad_after")

    capacity = np.ones(R)  # padding resources: unused, any positive capacity
    latency = np.zeros(R)
    capacity[:n_links] = [link.bandwidth for link in scenario.links]
    latency[:n_links] = [link.latency for link in scenario.links]
    route = np.full((N, H), R, np.int32)
    size = np.zeros(N)
    release = np.zeros(N)
    overhead = np.zeros(N)
    after = np.full((N, P), N, np.int32)
    for i, (flow, path) in enumerate(zip(scenario.flows, routes, strict=True)):
        route[i, : len(path)] = [link_index[lid] for lid in path]
        size[i], release[i] = flow.bytes, flow.start
        overhead[i] = flow.overhead + scenario.per_hop_latency * len(path)
    device_index = {d: n_links + j for j, d in enumerate(devices)}
    for j, task in enumerate(scenario.tasks):
        i = len(scenario.flows) + j
        route[i, 0] = device_index[task.device]
        size[i], release[i] = task.duration, task.start
    for i, item in enumerate((*scenario.flows, *scenario.tasks)):
        after[i, : len(item.after)] = [index[a] for a in item.after]
    if max_events is None:
        max_events = 2 * N + 16  # each item: a first byte and a finish at most; padded N: one bound per shape
    return Compiled(scenario, Network(capacity, latency), Program(route, size, release, overhead, after),
                    routes, devices, int(max_events))


def _padded(given: int | None, need: int, minimum: int, name: str) -> int:
    if given is None:
        return bucket(need, minimum, per_octave=4)
    if given < need:
        raise ScenarioError(f"{name}={given} is smaller than the scenario needs ({need})")
    return int(given)


def _check_links(scenario: Scenario) -> LinkGraph:
    seen: dict[str, int] = {}
    for i, link in enumerate(scenario.links):
        where = f"links[{i}] (id {link.id!r})"
        for name in ("id", "src", "dst"):
            if not isinstance(getattr(link, name), str) or not getattr(link, name):
                raise ScenarioError(f"links[{i}].{name}: must be a non-empty string, got {getattr(link, name)!r}")
        if link.id in seen:
            raise ScenarioError(f"{where}: duplicate link id (also links[{seen[link.id]}])")
        seen[link.id] = i
        if link.src == link.dst:
            raise ScenarioError(f"{where}.dst: a link must join two different nodes, got {link.dst!r} twice")
        check_number(link.bandwidth, f"{where}.bandwidth", positive=True)
        check_number(link.latency, f"{where}.latency")
    return LinkGraph(scenario.links)


def _check_ids(scenario: Scenario) -> dict[str, int]:
    index: dict[str, int] = {}
    for kind, items in (("flows", scenario.flows), ("tasks", scenario.tasks)):
        for i, item in enumerate(items):
            if not isinstance(item.id, str) or not item.id:
                raise ScenarioError(f"{kind}[{i}].id: must be a non-empty string, got {item.id!r}")
            if item.id in index:
                raise ScenarioError(f"{kind}[{i}].id: duplicate id {item.id!r} (flow and task ids share one namespace)")
            index[item.id] = len(index)
    return index


def _check_flows(scenario: Scenario, graph: LinkGraph) -> list[tuple[str, ...]]:
    routes = []
    for i, flow in enumerate(scenario.flows):
        where = f"flows[{i}] (id {flow.id!r})"
        check_number(flow.bytes, f"{where}.bytes")
        check_number(flow.start, f"{where}.start")
        check_number(flow.overhead, f"{where}.overhead")
        for name in ("src", "dst"):
            node = getattr(flow, name)
            if node not in graph.out:
                raise ScenarioError(f"{where}.{name}: unknown node {node!r}")
        if flow.route is None:
            routes.append(graph.shortest_path(flow.src, flow.dst, where=f"{where}.route"))
        else:
            graph.check_route(flow.route, flow.src, flow.dst, f"{where}.route")
            routes.append(tuple(flow.route))
    return routes


def _check_tasks(scenario: Scenario) -> None:
    for i, task in enumerate(scenario.tasks):
        where = f"tasks[{i}] (id {task.id!r})"
        if not isinstance(task.device, str) or not task.device:
            raise ScenarioError(f"{where}.device: must be a non-empty string, got {task.device!r}")
        check_number(task.duration, f"{where}.duration")
        check_number(task.start, f"{where}.start")


def _check_acyclic(scenario: Scenario, index: dict[str, int]) -> None:
    items = (*scenario.flows, *scenario.tasks)
    kinds = [f"flows[{i}]" for i in range(len(scenario.flows))] + [f"tasks[{i}]" for i in range(len(scenario.tasks))]
    for item, where in zip(items, kinds, strict=True):
        for j, dep in enumerate(item.after):
            if dep not in index:
                raise ScenarioError(f"{where} (id {item.id!r}).after[{j}]: unknown flow or task id {dep!r}")
            if dep == item.id:
                raise ScenarioError(f"{where} (id {item.id!r}).after[{j}]: an item cannot wait on itself")
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
                cycle = [items[n].id for n in path[path.index(k):]] + [items[k].id]
                raise ScenarioError("after: cyclic dependencies: " + " waits on ".join(repr(c) for c in cycle))
            if colour[k] == 0:
                colour[k] = 1
                path.append(k)
                stack.append((k, iter(items[k].after)))
