"""Composition: GPUs that are chiplet packages, servers that are PCIe fabrics, clusters of servers.

The result is one Topology with one link table. Each part keeps its own routing; a route that leaves a
part goes through a gateway node the part shares with the fabric above it (a server's NIC, a package's
host port), picking the gateway nearest the source (then nearest the destination; ties in natural name
order), and failing over to the next gateway when failed links cut a segment. Names say where a node is:
"n3/gpu5/xcd2" is XCD 2 of GPU 5 of server 3; the package's host port is the server's GPU node "n3/gpu5".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

from .._scenario import Link, ScenarioError, SharedResource
from ._mesh import PORT
from ._topology import Path, Topology, natural_key


@dataclasses.dataclass(frozen=True, eq=False)
class Part:
    """A topology placed in a larger one: its local node and link names mapped to global names."""

    topo: Topology
    node: Mapping[str, str]  # local node -> global node
    link: Mapping[str, str]  # local link id -> global link id
    shared: tuple[SharedResource, ...] = ()  # the part's shared resources, ids and links global

    def __post_init__(self):
        object.__setattr__(self, "_node_back", {g: n for n, g in self.node.items()})
        object.__setattr__(self, "_link_back", {g: x for x, g in self.link.items()})

    @classmethod
    def of(cls, topo: Topology, rename: Callable[[str], str]) -> Part:
        node = {n: rename(n) for n in topo.nodes}
        link = {}
        for x in topo.links:
            plain = x.id == f"{x.src}->{x.dst}"
            link[x.id] = f"{node[x.src]}->{node[x.dst]}" + ("" if plain else f"#{x.id}")
        shared = tuple(
            dataclasses.replace(
                r,
                id=rename(r.id),
                links=tuple(link[x] for x in r.links),
                via=tuple(link[x] for x in r.via),
            )
            for r in topo.shared
        )
        return cls(topo, node, link, shared)

    def has(self, node: str) -> bool:
        return node in self._node_back

    def global_links(self) -> list[Link]:
        return [
            dataclasses.replace(x, id=self.link[x.id], src=self.node[x.src], dst=self.node[x.dst])
            for x in self.topo.links
        ]

    def route(self, a: str, b: str) -> Path:
        return tuple(self.link[x] for x in self.topo.route(self._node_back[a], self._node_back[b]))

    def paths(self, a: str, b: str) -> list[tuple[float, Path]]:
        return [
            (w, tuple(self.link[x] for x in p))
            for w, p in self.topo.paths(self._node_back[a], self._node_back[b])
        ]

    def without(self, link_ids: frozenset[str]) -> Part:
        mine = [self._link_back[g] for g in link_ids if g in self._link_back]
        return self if not mine else Part(self.topo.without_links(mine), self.node, self.link, self.shared)


@dataclasses.dataclass(frozen=True, eq=False)
class Nested:
    """Routing across an upper fabric and the lower parts hanging off it through shared gateway nodes."""

    upper: Part
    lowers: tuple[Part, ...]

    def __post_init__(self):
        owner: dict[str, int] = {}
        gateways: list[list[str]] = []
        for i, part in enumerate(self.lowers):
            mine = []
            for g in part.node.values():
                owner[g] = i
                if self.upper.has(g):
                    mine.append(g)
            if not mine:
                raise ScenarioError(f"part {part.topo.name!r} shares no node with {self.upper.topo.name!r}")
            gateways.append(sorted(mine, key=natural_key))
        object.__setattr__(self, "_owner", owner)
        object.__setattr__(self, "_gateways", gateways)

    def _legs(self, node: str, outbound: bool) -> list[tuple[str, Path]]:
        """(gateway, segment) pairs from `node` up to the upper fabric (or down to it), nearest first."""
        if self.upper.has(node):
            return [(node, ())]
        part = self.lowers[self._owner[node]]
        legs = []
        for g in self._gateways[self._owner[node]]:
            try:
                legs.append((g, part.route(node, g) if outbound else part.route(g, node)))
            except ScenarioError:
                continue  # this gateway is cut off by failed links: fail over to the next
        return sorted(legs, key=lambda leg: len(leg[1]))  # stable: ties keep natural order

    def _plan(self, topo: Topology, src: str, dst: str) -> tuple:
        key = ("nested", src, dst)
        if key not in topo._cache:
            topo._cache[key] = self._choose(topo, src, dst)
        return topo._cache[key]

    def _choose(self, topo: Topology, src: str, dst: str):
        a, b = self._owner.get(src), self._owner.get(dst)
        if a is not None and a == b:
            return ("lower", a)
        if self.upper.has(src) and self.upper.has(dst):
            return ("upper",)
        for ga, _ in self._legs(src, True):
            for gb, _ in self._legs(dst, False):
                if ga == gb:
                    continue
                try:
                    self.upper.route(ga, gb)
                except ScenarioError:
                    continue
                return ("via", ga, gb)
        raise ScenarioError(f"topology {topo.name!r}: {dst!r} is unreachable from {src!r}")

    def _segments(self, topo: Topology, src: str, dst: str) -> list[tuple[Part, str, str]]:
        plan = self._plan(topo, src, dst)
        if plan[0] == "lower":
            return [(self.lowers[plan[1]], src, dst)]
        if plan[0] == "upper":
            return [(self.upper, src, dst)]
        _, ga, gb = plan
        out = [] if ga == src else [(self.lowers[self._owner[src]], src, ga)]
        out.append((self.upper, ga, gb))
        if gb != dst:
            out.append((self.lowers[self._owner[dst]], gb, dst))
        return out

    def route(self, topo: Topology, src: str, dst: str) -> Path:
        return tuple(lid for part, a, b in self._segments(topo, src, dst) for lid in part.route(a, b))

    def paths(self, topo: Topology, src: str, dst: str) -> list[tuple[float, Path]]:
        out: list[tuple[float, Path]] = [(1.0, ())]
        for part, a, b in self._segments(topo, src, dst):
            out = [(w * v, p + q) for w, p in out for v, q in part.paths(a, b)]
        return out

    def without(self, link_ids: frozenset[str]) -> Nested:
        return Nested(self.upper.without(link_ids), tuple(p.without(link_ids) for p in self.lowers))


def _assemble(
    name: str,
    upper: Part,
    lowers: Sequence[Part],
    kind: dict[str, str],
    workers: Sequence[str],
    device: str = "",
) -> Topology:
    links = upper.global_links() + [x for p in lowers for x in p.global_links()]
    # the parts' shared resources (a server's socket budget, its GPUs' staging engines) hold in the whole
    shared = upper.shared + tuple(r for p in lowers for r in p.shared)
    return Topology(name, tuple(links), kind, Nested(upper, tuple(lowers)), tuple(workers), shared, device)


def with_packages(
    server: Topology, package: Topology | Mapping[str, Topology], *, name: str | None = None
) -> Topology:
    """`server` with each GPU replaced by a chiplet package.

    Args:
        server: a fabric whose GPU nodes (kind "gpu") take packages.
        package: one package for every GPU, or GPU node -> package for some of them. A package must have
            the "host" port (build it with host_bandwidth=...; presets have one); the port becomes the
            GPU node, and the package's other nodes become f"{gpu}/{node}".

    Returns:
        A Topology whose gpus() are the packages' compute dies (in GPU order) and the GPUs left as they were.
    """
    gpus = server.nodes_of("gpu")
    chosen = dict.fromkeys(gpus, package) if isinstance(package, Topology) else dict(package)
    if not chosen:
        raise ScenarioError(f"with_packages: no GPU of {server.name!r} gets a package")
    for gpu, pkg in chosen.items():
        if gpu not in gpus:
            raise ScenarioError(
                f"with_packages: {gpu!r} is not a GPU of {server.name!r} (GPUs: {list(gpus)[:8]})"
            )
        if not isinstance(pkg, Topology) or PORT not in pkg.kind:
            raise ScenarioError(
                f"with_packages: the package for {gpu!r} has no {PORT!r} port node "
                "(give the builder host_bandwidth=...)"
            )
    upper = Part.of(server, lambda n: n)
    lowers = [Part.of(pkg, lambda n, g=gpu: g if n == PORT else f"{g}/{n}") for gpu, pkg in chosen.items()]
    kind = {p.node[n]: k for p in lowers for n, k in p.topo.kind.items()} | dict(server.kind)
    workers = [
        w for g in server.gpus() for w in ([f"{g}/{x}" for x in chosen[g].gpus()] if g in chosen else [g])
    ]
    return _assemble(
        name or f"{server.name}+{next(iter(chosen.values())).name}", upper, lowers, kind, workers
    )


def cluster(fabric: Topology, server: Topology | Sequence[Topology], *, name: str | None = None) -> Topology:
    """Servers joined by a cluster fabric: one link table, routes across every level.

    The fabric's endpoints (fabric.gpus(), in order) are the servers' NICs: endpoint k is NIC k % m of
    server k // m, where m is the number of NICs per server (kind "nic", natural order). Server s's nodes
    are renamed f"n{s}/{node}".

    Args:
        fabric: e.g. leaf_spine, fat_tree or rail_optimized.
        server: one server for all (the fabric's endpoint count must be a multiple of its NICs), or one
            per server in order. The cluster's `device` is the servers' where they all name the same.
    """
    ends = fabric.gpus()
    if isinstance(server, Topology):
        nics = len(server.nodes_of("nic"))
        if nics == 0 or len(ends) % nics:
            raise ScenarioError(
                f"cluster: fabric {fabric.name!r} has {len(ends)} endpoints, not a multiple of "
                f"the {nics} NIC(s) of server {server.name!r}"
            )
        servers = [server] * (len(ends) // nics)
    else:
        servers = list(server)
        total = sum(len(s.nodes_of("nic")) for s in servers)
        if total != len(ends):
            raise ScenarioError(
                f"cluster: the servers have {total} NICs but fabric {fabric.name!r} has {len(ends)} endpoints"
            )
    lowers, where = [], {}
    for s, srv in enumerate(servers):
        part = Part.of(srv, lambda n, s=s: f"n{s}/{n}")
        lowers.append(part)
        for nic in srv.nodes_of("nic"):
            where[ends[len(where)]] = part.node[nic]
    clash = {n for n in fabric.nodes if n not in where} & {g for p in lowers for g in p.node.values()}
    if clash:
        raise ScenarioError(f"cluster: fabric node(s) {sorted(clash)[:3]} collide with server node names")
    upper = Part.of(fabric, lambda n: where.get(n, n))
    kind = {upper.node[n]: k for n, k in fabric.kind.items()} | {
        p.node[n]: k for p in lowers for n, k in p.topo.kind.items()
    }
    workers = [p.node[w] for p in lowers for w in p.topo.gpus()]
    devices = {srv.device for srv in servers}  # the GPUs' model, where every server has the same
    device = devices.pop() if len(devices) == 1 else ""
    name = name or f"{fabric.name}/{len(servers)}x{servers[0].name}"
    return _assemble(name, upper, lowers, kind, workers, device)
