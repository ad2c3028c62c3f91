"""Routing rules shared by several fabrics: restricted shortest paths, dimension order, ECMP."""

from __future__ import annotations

import dataclasses
import itertools
import zlib
from collections import deque
from collections.abc import Mapping

from .._scenario import ScenarioError
from ._common import transit_route
from ._topology import Path, SinglePath, Topology


@dataclasses.dataclass(frozen=True)
class Transit(SinglePath):
    """Least latency, then fewest hops, forwarding only through nodes whose kind is in `kinds`."""

    kinds: frozenset[str]

    def route(self, topo: Topology, src: str, dst: str) -> Path:
        return transit_route(topo, src, dst, self.kinds)


@dataclasses.dataclass(frozen=True, eq=False)
class DimensionOrder(SinglePath):
    """XY (dimension-order) routing on a 2-D mesh or torus of router nodes.

    A packet first moves along its row (X) to the destination column, then along that column (Y).
    On a torus each dimension goes the short way round; at an exact tie (half the ring) it goes
    towards increasing index. Nodes outside the grid (HBM stacks, IO dies, host ports) hang off one or
    more `parents`; a route picks the parent pair with the fewest total hops (first listed on ties).
    When failed links break the XY path, the router tries YX, then the least-latency path through
    grid nodes.

    Attributes:
        grid: grid[r][c] is the router node at row r, column c.
        torus: True when rows and columns wrap around (only dimensions of size >= 3 have wrap links).
        parents: attached node -> the nodes it links to (grid nodes or other attached nodes).
    """

    grid: tuple[tuple[str, ...], ...]
    torus: bool
    parents: Mapping[str, tuple[str, ...]]

    def __post_init__(self):
        coord = {node: (r, c) for r, row in enumerate(self.grid) for c, node in enumerate(row)}
        object.__setattr__(self, "_coord", coord)

    def _step(self, a: int, b: int, size: int) -> int:
        """+1 or -1: the direction from a to b along one dimension."""
        if not self.torus or size < 3:
            return 1 if b > a else -1
        return 1 if (b - a) % size <= size / 2 else -1

    def _axis(self, a: int, b: int, size: int) -> list[int]:
        out, step = [a], self._step(a, b, size)
        while out[-1] != b:
            out.append((out[-1] + step) % size)
        return out

    def grid_hops(self, a: str, b: str) -> int:
        (ra, ca), (rb, cb) = self._coord[a], self._coord[b]
        rows, cols = len(self.grid), len(self.grid[0])
        return len(self._axis(ca, cb, cols)) + len(self._axis(ra, rb, rows)) - 2

    def _grid_path(self, a: str, b: str, *, x_first: bool) -> Path:
        (ra, ca), (rb, cb) = self._coord[a], self._coord[b]
        rows, cols = len(self.grid), len(self.grid[0])
        if x_first:
            cells = [(ra, c) for c in self._axis(ca, cb, cols)] + [
                (r, cb) for r in self._axis(ra, rb, rows)[1:]
            ]
        else:
            cells = [(r, ca) for r in self._axis(ra, rb, rows)] + [
                (rb, c) for c in self._axis(ca, cb, cols)[1:]
            ]
        nodes = [self.grid[r][c] for r, c in cells]
        return tuple(f"{u}->{v}" for u, v in itertools.pairwise(nodes))

    def _up(self, node: str) -> list[tuple[str, Path]]:
        """(grid node, links from `node` up to it) for every way out of an attached node."""
        if node in self._coord:
            return [(node, ())]
        return [(anchor, (f"{node}->{p}", *rest)) for p in self.parents[node] for anchor, rest in self._up(p)]

    def route(self, topo: Topology, src: str, dst: str) -> Path:
        ups, downs = self._up(src), self._up(dst)
        best = min(
            (
                (len(pu) + self.grid_hops(a, b) + len(pd), i, j)
                for i, (a, pu) in enumerate(ups)
                for j, (b, pd) in enumerate(downs)
            )
        )
        (a, up), (b, down) = ups[best[1]], downs[best[2]]
        back = tuple(f"{lid.split('->')[1]}->{lid.split('->')[0]}" for lid in reversed(down))
        for x_first in (True, False):
            path = up + self._grid_path(a, b, x_first=x_first) + back
            if all(lid in topo.link for lid in path):
                return path
        relays = {n for row in self.grid for n in row} | {p for ps in self.parents.values() for p in ps}
        return transit_route(topo, src, dst, {topo.kind[n] for n in relays})


@dataclasses.dataclass(frozen=True)
class Ecmp:
    """Equal-cost multipath over fewest-hop paths through switch nodes (kinds in `transit`).

    `paths` splits traffic equally over the next hops at every switch (per-hop ECMP, as hardware
    does), so a path's weight is the product of 1/(choices) along it. `route` is the hashed single
    path: at each switch the next hop is choices[crc32(f"{src}|{dst}|{switch}") % len(choices)], a
    deterministic stand-in for a 5-tuple hash. Failed links are simply absent: distances are
    recomputed over the surviving links, as a converged routing protocol would.
    """

    transit: frozenset[str]

    def _distance(self, topo: Topology, dst: str) -> dict[str, int]:
        """Fewest hops from each node to dst, forwarding only through transit nodes (cached per topology)."""
        key = ("ecmp", dst)
        if key not in topo._cache:
            if ("ecmp-into",) not in topo._cache:  # each node's upstream neighbours, once per topology
                into: dict[str, list[str]] = {}
                for link in topo.links:
                    into.setdefault(link.dst, []).append(link.src)
                topo._cache[("ecmp-into",)] = into
            into = topo._cache[("ecmp-into",)]
            dist, todo = {dst: 0}, deque([dst])
            while todo:
                node = todo.popleft()
                if node != dst and topo.kind[node] not in self.transit:
                    continue  # reached an endpoint: it may start a path but forwards nothing
                for prev in into.get(node, ()):
                    if prev not in dist:
                        dist[prev] = dist[node] + 1
                        todo.append(prev)
            topo._cache[key] = dist
        return topo._cache[key]

    def _out_links(self, topo: Topology) -> dict[str, list[tuple[str, str, bool]]]:
        """Per node: (link id, far end, whether the far end forwards), by id (once per topology)."""
        key = ("ecmp-out", self.transit)
        if key not in topo._cache:
            topo._cache[key] = {
                n: sorted((x.id, x.dst, topo.kind[x.dst] in self.transit) for x in links)
                for n, links in topo.graph.out.items()
            }
        return topo._cache[key]

    @staticmethod
    def _choices(out_links, node: str, dst: str, dist: dict[str, int]) -> list[tuple[str, str]]:
        """(link id, far end) of the out-links of `node` one hop closer to dst, by id."""
        closer = dist[node] - 1
        return [
            (lid, far)
            for lid, far, forwards in out_links[node]
            if dist.get(far) == closer and (far == dst or forwards)
        ]

    def _check(self, topo: Topology, src: str, dst: str) -> dict[str, int]:
        dist = self._distance(topo, dst)
        if src not in dist:
            raise ScenarioError(f"topology {topo.name!r}: {dst!r} is unreachable from {src!r}")
        return dist

    def route(self, topo: Topology, src: str, dst: str) -> Path:
        dist, out_links = self._check(topo, src, dst), self._out_links(topo)
        path, node = [], src
        while node != dst:
            options = self._choices(out_links, node, dst, dist)
            pick = zlib.crc32(f"{src}|{dst}|{node}".encode()) % len(options) if len(options) > 1 else 0
            lid, node = options[pick]  # hashed only where there is a choice
            path.append(lid)
        return tuple(path)

    def paths(self, topo: Topology, src: str, dst: str) -> list[tuple[float, Path]]:
        dist, out_links = self._check(topo, src, dst), self._out_links(topo)
        out: list[tuple[float, Path]] = []

        def walk(node: str, weight: float, path: tuple[str, ...]) -> None:
            if node == dst:
                out.append((weight, path))
                return
            options = self._choices(out_links, node, dst, dist)
            for lid, far in options:
                walk(far, weight / len(options), (*path, lid))

        walk(src, 1.0, ())
        return out

    def without(self, link_ids: frozenset[str]) -> Ecmp:
        return self
