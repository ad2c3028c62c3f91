"""Shared checks for the topology tests."""

from __future__ import annotations

import itertools

from netsim._routing import LinkGraph
from netsim.topology import Topology


def assert_valid_routes(topo: Topology, pairs=None) -> None:
    """Every route is a connected walk of the topology's links from src to dst, and paths() sum to 1."""
    graph = LinkGraph(topo.links)
    nodes = topo.gpus()
    for a, b in pairs or itertools.permutations(nodes, 2):
        graph.check_route(topo.route(a, b), a, b, f"route {a}->{b}")
        paths = topo.paths(a, b)
        assert abs(sum(w for w, _ in paths) - 1.0) < 1e-12
        for _, p in paths:
            graph.check_route(p, a, b, f"paths {a}->{b}")
        assert topo.route(a, b) in [p for _, p in paths]


def node_path(topo: Topology, route) -> list[str]:
    """The nodes a route visits, source first."""
    return [topo.link[route[0]].src] + [topo.link[x].dst for x in route]
