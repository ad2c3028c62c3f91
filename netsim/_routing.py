"""Shortest paths and route checks over a list of directed links (host side, pure Python)."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence

from ._checks import show
from ._errors import ScenarioError
from ._scenario import Link


class LinkGraph:
    """Adjacency over directed links, for routing and route validation."""

    def __init__(self, links: Iterable[Link]):
        self.links: dict[str, Link] = {}
        self.out: dict[str, list[Link]] = {}
        for link in links:
            self.links[link.id] = link
            self.out.setdefault(link.src, []).append(link)
            self.out.setdefault(link.dst, [])

    @property
    def nodes(self) -> list[str]:
        return list(self.out)

    def shortest_path(self, src: str, dst: str, where: str = "route") -> tuple[str, ...]:
        """Link ids of the path with least total latency, then fewest hops, then first-listed links.

        Raises ScenarioError naming `where` when a node is unknown or dst cannot be reached.
        """
        for name, node in (("src", src), ("dst", dst)):
            if node not in self.out:
                raise ScenarioError(f"{where}: unknown {name} node {show(node)}")
        if src == dst:
            raise ScenarioError(f"{where}: src and dst are the same node {show(src)}")
        best = {src: (0.0, 0)}
        back: dict[str, Link] = {}
        heap = [(0.0, 0, 0, src)]
        order = 0
        while heap:
            lat, hops, _, node = heapq.heappop(heap)
            if (lat, hops) > best[node]:
                continue
            if node == dst:
                break
            for link in self.out[node]:
                cost = (lat + link.latency, hops + 1)
                if link.dst not in best or cost < best[link.dst]:
                    best[link.dst] = cost
                    back[link.dst] = link
                    order += 1
                    heapq.heappush(heap, (*cost, order, link.dst))
        if dst not in back:
            raise ScenarioError(f"{where}: node {show(dst)} is unreachable from {show(src)}")
        path = []
        node = dst
        while node != src:
            path.append(back[node].id)
            node = back[node].src
        return tuple(reversed(path))

    def check_route(self, route: Sequence[str], src: str, dst: str, where: str) -> None:
        """Raises ScenarioError unless `route` is a connected walk of known links from src to dst that crosses
        no link twice and touches src and dst only at its ends. Other nodes may repeat: a host-staged copy
        goes cpu -> memory -> cpu."""
        if not route:
            raise ScenarioError(f"{where}: empty route from {show(src)} to {show(dst)}")
        at = src
        used: dict[str, int] = {}
        for i, lid in enumerate(route):
            link = self.links.get(lid)
            if link is None:
                raise ScenarioError(f"{where}[{i}]: unknown link {show(lid)}")
            if link.src != at:
                raise ScenarioError(
                    f"{where}[{i}]: link {show(lid)} starts at {show(link.src)}, but the route is at {show(at)}"
                    " (a route must be a connected path from src to dst)"
                )
            if lid in used:
                raise ScenarioError(
                    f"{where}[{i}]: link {show(lid)} is crossed twice (also at [{used[lid]}]); "
                    "a route has no loops"
                )
            used[lid] = i
            at = link.dst
            if at == src:
                raise ScenarioError(
                    f"{where}[{i}]: link {show(lid)} returns to the src {show(src)}; a route has no loops"
                )
            if at == dst and i < len(route) - 1:
                raise ScenarioError(
                    f"{where}[{i}]: the route reaches dst {show(dst)} before its end; a route has no loops"
                )
        if at != dst:
            raise ScenarioError(f"{where}: route ends at {show(at)}, not at dst {show(dst)}")
