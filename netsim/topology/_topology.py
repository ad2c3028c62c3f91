"""Topology: a fabric's directed links, the role of each node, and the routing the fabric really uses.

Every builder in netsim.topology returns one. Routing is delegated to a `Router` (dimension-order on
meshes, tree paths on PCIe, ECMP on clusters, a nested router for composed systems); link failures
(`without_links`) keep the router and recompute its routes over the surviving links.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from .._checks import number as check_number
from .._routing import LinkGraph
from .._scenario import Flow, Link, Scenario, ScenarioError, SharedResource, Task, bandwidth_targets

__all__ = [
    "Path",
    "Router",
    "ShortestPath",
    "Topology",
    "link_class",
    "natural_key",
]

Path = tuple[str, ...]  # link ids from src to dst

#: roles of nodes that run work, used when a builder does not name its workers
WORKER_KINDS = frozenset({"gpu", "host", "xcd", "gcd", "chiplet"})


def natural_key(name: str) -> tuple[Any, ...]:
    """Sort key that orders "n2/gpu10" after "n2/gpu9" (digit runs compare as numbers)."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


class Router(Protocol):
    """A fabric's routing rule; `topo` is the topology being routed (after any link failures)."""

    def route(self, topo: Topology, src: str, dst: str) -> Path:
        """The single path the fabric uses; raises ScenarioError when dst is unreachable."""
        ...

    def paths(self, topo: Topology, src: str, dst: str) -> list[tuple[float, Path]]:
        """Weighted paths (weights sum to 1); single-path fabrics return [(1.0, route)]."""
        ...

    def without(self, link_ids: frozenset[str]) -> Router:
        """The router for the same fabric after `link_ids` failed (most routers keep no link state)."""
        ...


class SinglePath:
    """A router's `paths` and `without` for fabrics that use one path per pair and keep no link state."""

    def paths(self, topo: Topology, src: str, dst: str) -> list[tuple[float, Path]]:
        return [(1.0, self.route(topo, src, dst))]

    def without(self, link_ids: frozenset[str]) -> Router:
        return self


@dataclasses.dataclass(frozen=True)
class ShortestPath(SinglePath):
    """Least latency, then fewest hops (netsim's default routing), over the surviving links."""

    def route(self, topo: Topology, src: str, dst: str) -> Path:
        return topo.graph.shortest_path(src, dst, where=f"route {src!r} -> {dst!r}")


@dataclasses.dataclass(frozen=True, eq=False)
class Topology:
    """Directed links, node roles and a routing rule; immutable.

    Attributes:
        name: label, copied into scenarios.
        links: directed links; a bidirectional cable is two links with ids "a->b" and "b->a".
        kind: node -> role ("gpu", "cpu", "mem", "switch", "nic", "leaf", "spine", "xcd", "iod", "hbm", ...).
        router: the fabric's routing rule (see `Router`).
        workers: the nodes that run work, in order; None takes the nodes whose role is in WORKER_KINDS,
            in natural order.
        shared: capacities no single link has (a cable's two-way budget, a host staging engine), put
            into every scenario built on this topology (see netsim.SharedResource).
        device: the workers' model ("RTX 4090", "A40"), "" if unknown; traces of another model are refused.
        costs: the machine's software costs (a `netsim.CostModel`; a calibration's, see
            `netsim.topology.load`), None for netsim's defaults (`CostModel.default()`). Flows that
            `scenario` routes as host-staged copies pay its staging cost.
    """

    name: str
    links: tuple[Link, ...]
    kind: dict[str, str]
    router: Router = dataclasses.field(default_factory=ShortestPath)
    workers: tuple[str, ...] | None = None
    shared: tuple[SharedResource, ...] = ()
    device: str = ""
    costs: Any = None

    def __post_init__(self):
        links = tuple(self.links)
        kind = dict(self.kind)
        ids: set[str] = set()
        for i, link in enumerate(links):
            if not isinstance(link, Link):
                raise ScenarioError(f"topology {self.name!r}: links[{i}] is {link!r}, not a netsim.Link")
            if link.id in ids:
                raise ScenarioError(f"topology {self.name!r}: duplicate link id {link.id!r}")
            ids.add(link.id)
            for end in (link.src, link.dst):
                if end not in kind:
                    raise ScenarioError(f"topology {self.name!r}: link {link.id!r} node {end!r} has no kind")
        if self.workers is None:
            workers = tuple(sorted((n for n, k in kind.items() if k in WORKER_KINDS), key=natural_key))
        else:
            workers = tuple(self.workers)
            unknown = [w for w in workers if w not in kind]
            if unknown:
                raise ScenarioError(f"topology {self.name!r}: workers {unknown[:3]} are not nodes")
        shared = tuple(self.shared)
        names: set[str] = set()
        for i, r in enumerate(shared):
            where = f"topology {self.name!r}: shared[{i}]"
            if not isinstance(r, SharedResource):
                raise ScenarioError(f"{where} is {r!r}, not a netsim.SharedResource")
            if r.id in ids or r.id in names:
                raise ScenarioError(f"{where}.id: duplicate resource id {r.id!r}")
            names.add(r.id)
            check_number(r.capacity, f"{where}.capacity", positive=True)
            unknown = [x for x in (*r.links, *r.via) if x not in ids]
            if not r.links or unknown:
                raise ScenarioError(
                    f"{where} ({r.id!r}): unknown link id(s) {unknown[:3]}"
                    if unknown
                    else f"{where} ({r.id!r}).links: must name at least one link"
                )
        object.__setattr__(self, "links", links)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "workers", workers)
        object.__setattr__(self, "shared", shared)

    # --- structure ------------------------------------------------------------------------------
    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(self.kind)

    @functools.cached_property
    def graph(self) -> LinkGraph:
        """Adjacency over the links, including nodes left without links."""
        graph = LinkGraph(self.links)
        for node in self.kind:
            graph.out.setdefault(node, [])
        return graph

    @functools.cached_property
    def _cache(self) -> dict[tuple, Any]:
        return {}

    @functools.cached_property
    def link(self) -> Mapping[str, Link]:
        """Link id -> Link."""
        return {x.id: x for x in self.links}

    def gpus(self) -> tuple[str, ...]:
        """Endpoint nodes that run work (GPUs, hosts, compute chiplets), in a stable natural order."""
        assert self.workers is not None  # set in __post_init__
        return self.workers

    def nodes_of(self, kind: str) -> tuple[str, ...]:
        """Nodes with role `kind`, in natural order."""
        return tuple(sorted((n for n, k in self.kind.items() if k == kind), key=natural_key))

    # --- routing --------------------------------------------------------------------------------
    def _check_pair(self, src: str, dst: str) -> None:
        for name, node in (("src", src), ("dst", dst)):
            if node not in self.kind:
                raise ScenarioError(f"topology {self.name!r}: unknown {name} node {node!r}")
        if src == dst:
            raise ScenarioError(f"topology {self.name!r}: src and dst are the same node {src!r}")

    def route(self, src: str, dst: str, via: str | None = None) -> Path:
        """Link ids of the path the fabric uses from src to dst (through `via` when given).

        Raises:
            ScenarioError: naming the pair when a node is unknown or dst is unreachable.
        """
        if via is not None:
            return self.route(src, via) + self.route(via, dst)
        key = ("route", src, dst)
        if key not in self._cache:  # the topology is immutable, so its routes are too
            self._check_pair(src, dst)
            self._cache[key] = tuple(self.router.route(self, src, dst))
        return self._cache[key]

    def paths(self, src: str, dst: str) -> list[tuple[float, Path]]:
        """Weighted multipath (the ECMP split); weights sum to 1."""
        key = ("paths", src, dst)
        if key not in self._cache:
            self._check_pair(src, dst)
            self._cache[key] = tuple((float(w), tuple(p)) for w, p in self.router.paths(self, src, dst))
        return list(self._cache[key])

    def flows(self, id: str, src: str, dst: str, bytes: float, **flow_kwargs) -> list[Flow]:
        """One Flow per path of `paths(src, dst)`, with `bytes` split by weight (exactly conserved).

        Ids are `id` for a single path, else f"{id}#k". `flow_kwargs` go to every Flow (start, after, ...).
        """
        paths = self.paths(src, dst)
        if len(paths) == 1:
            return [Flow(id, src, dst, bytes, route=paths[0][1], **flow_kwargs)]
        parts = [bytes * w for w, _ in paths[:-1]]
        parts.append(bytes - sum(parts))  # the last share takes the rounding, so the parts sum to bytes
        return [
            Flow(f"{id}#{k}", src, dst, b, route=p, **flow_kwargs)
            for k, (b, (_, p)) in enumerate(zip(parts, paths, strict=True))
        ]

    def staged(self, src: str, dst: str) -> bool:
        """True when a copy from src to dst is bounced through host memory by the driver (cudaMemcpy
        between devices with P2P off: the router's `staged`), so it pays the staging cost."""
        staged = getattr(self.router, "staged", None)
        return bool(staged(self, src, dst)) if staged is not None else False

    def scenario(
        self, flows: Iterable[Flow] = (), tasks: Iterable[Task] = (), name: str | None = None
    ) -> Scenario:
        """A scenario on these links and shared resources; flows without a route take `self.route(src, dst)`.

        A flow on the topology's own route that the topology stages through host memory (`staged`: a
        device-to-device copy with P2P off) pays the copy costs of `costs` (`CostModel.stage_copies`:
        the staged overhead, bytes / the staging pipeline's efficiency), as calibration fits them on
        P2P=Disabled copy matrices. Collectives (NCCL's own transports) are built by their workloads
        and do not pass here.
        """
        routed = [
            f if f.route is not None else dataclasses.replace(f, route=self.route(f.src, f.dst))
            for f in flows
        ]
        staged = [self.staged(f.src, f.dst) and f.route == self.route(f.src, f.dst) for f in routed]
        if any(staged):
            from .._costs import CostModel  # jax: only for topologies that stage copies

            costs = self.costs if self.costs is not None else CostModel.default()
            routed = costs.stage_copies(routed, staged)
        return Scenario(
            self.links, routed, tuple(tasks), name=self.name if name is None else name, shared=self.shared
        )

    # --- failures -------------------------------------------------------------------------------
    def without_links(self, link_ids: Iterable[str]) -> Topology:
        """The same fabric with `link_ids` failed; routes are recomputed over the surviving links.

        A shared resource keeps its surviving links; one left with no link (or, having a `via`, no via
        link) is dropped.
        """
        failed = frozenset([link_ids] if isinstance(link_ids, str) else link_ids)
        unknown = sorted(failed - set(self.link))
        if unknown:
            raise ScenarioError(f"topology {self.name!r}: without_links: unknown link id(s) {unknown[:5]}")
        shared = []
        for r in self.shared:
            links = tuple(x for x in r.links if x not in failed)
            via = tuple(x for x in r.via if x not in failed)
            if links and (via or not r.via):
                shared.append(dataclasses.replace(r, links=links, via=via))
        return dataclasses.replace(
            self,
            links=tuple(x for x in self.links if x.id not in failed),
            router=self.router.without(failed),
            shared=tuple(shared),
        )

    # --- what-ifs -------------------------------------------------------------------------------
    def matching(self, pattern: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(link ids, shared resource ids) that `scaled(pattern, ...)` changes; both empty if none."""
        classes = {x.id: link_class(self, x.id) for x in self.links}
        links, following, named = bandwidth_targets(self.links, self.shared, (pattern,), classes)
        budgets = set(following) | set(named)
        return tuple(links), tuple(r.id for r in self.shared if r.id in budgets)

    def scaled(self, pattern: str, factor: float) -> Topology:
        """The same fabric with the bandwidth of the links matching `pattern` times `factor`.

        A link matches when its id matches `pattern` as a glob ("socket0->socket1", "gpu*->rc*") or its
        class (`link_class`: pcie, socket, numa, memory, nvlink, ...) equals it. A shared resource (a
        cable's two-way budget, a staging engine) is scaled with its links when all of them match, or when
        its own id matches (the rule of the sweep's bandwidth axis too: `netsim.sweep.LinkBandwidth`).

        Raises:
            ScenarioError: when `pattern` matches nothing (naming the link classes), or `factor` is not > 0.
        """
        check_number(factor, f"{pattern}: factor", positive=True)
        links, budgets = self.matching(pattern)
        if not links and not budgets:
            classes = sorted({link_class(self, x.id) for x in self.links})
            raise ScenarioError(
                f"{pattern}={factor:g}: matches no link id, link class or shared resource of {self.name!r} "
                f"(classes: {', '.join(classes)}; ids such as {', '.join(x.id for x in self.links[:3])})"
            )
        hit, scaled = set(links), set(budgets)
        return dataclasses.replace(
            self,
            links=tuple(
                dataclasses.replace(x, bandwidth=x.bandwidth * factor) if x.id in hit else x
                for x in self.links
            ),
            shared=tuple(
                dataclasses.replace(r, capacity=r.capacity * factor) if r.id in scaled else r
                for r in self.shared
            ),
        )

    def unreachable_pairs(self, among: Sequence[str] | None = None) -> list[tuple[str, str]]:
        """Ordered pairs of `among` (default: gpus()) that have no route."""
        nodes = self.gpus() if among is None else tuple(among)
        out = []
        for a in nodes:
            for b in nodes:
                if a != b:
                    try:
                        self.route(a, b)
                    except ScenarioError:
                        out.append((a, b))
        return out

    def __repr__(self) -> str:
        return (
            f"Topology({self.name!r}: {len(self.kind)} nodes, {len(self.links)} links, "
            f"{len(self.gpus())} workers, router={type(self.router).__name__})"
        )


def link_class(topo: Topology, link_id: str) -> str:
    """The class of a link from its end nodes' kinds: pcie, numa, socket, socket-host, memory, nvlink,
    or "a-b".

    Calibration fits one bandwidth and latency per class; a calibration file sets every link of a class.
    A link between sockets is "socket" where devices copy peer to peer, and "socket-host" in a topology
    with P2P off (`PcieRouter.p2p` False): there only host-memory traffic crosses it, and that runs at
    the socket fabric's rate, not at the rate of P2P copies between sockets (m01: docs/heldout.md).
    """
    link = topo.link[link_id]
    ends = frozenset((topo.kind[link.src], topo.kind[link.dst]))
    if ends == {"socket"} or ends == {"cpu"}:  # between sockets (a one-NUMA socket's hub is its cpu node)
        return "socket" if getattr(topo.router, "p2p", True) else "socket-host"
    if "mem" in ends:
        return "memory"
    if ends == {"cpu", "socket"}:
        return "numa"
    if ends == {"gpu"}:
        return "nvlink"
    if ends & {"rc", "switch"}:
        return "pcie"
    return "-".join(sorted(ends))


def cable(a: str, b: str, bandwidth: float, latency: float = 0.0) -> tuple[Link, Link]:
    """The two directed links "a->b" and "b->a" of one bidirectional cable (bandwidth per direction)."""
    return Link(f"{a}->{b}", a, b, bandwidth, latency), Link(f"{b}->{a}", b, a, bandwidth, latency)
