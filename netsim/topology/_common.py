"""Argument checks (thin names over `netsim._checks`) and routing helpers shared by the topology builders."""

from __future__ import annotations

from collections.abc import Collection

from .._checks import choice as choice
from .._checks import count as count
from .._checks import quantity
from .._routing import LinkGraph
from ._topology import Path, Topology


def bandwidth(value, field: str) -> float:
    """Bytes/s from a number (B/s) or a string with a unit ("25 GB/s", "400Gbps"): `netsim._checks.quantity`
    (in [1e-6, 1e30] B/s; ScenarioError naming `field` otherwise)."""
    return quantity(value, "bandwidth", field)


def latency(value, field: str) -> float:
    """Seconds from a number (s) or a string with a unit ("2 us"): `netsim._checks.quantity` (>= 0 and
    below 1e15 s; ScenarioError naming `field` otherwise)."""
    return quantity(value, "time", field)


def transit_route(topo: Topology, src: str, dst: str, transit: Collection[str]) -> Path:
    """Least-latency, then fewest-hop path that passes only through nodes whose kind is in `transit`.

    Endpoints (GPUs, NICs, memory, hosts) forward nothing: a path may start at src and end at dst, but
    never cross another endpoint.
    """
    kind = topo.kind
    ok = lambda node, end: node == end or kind[node] in transit
    graph = LinkGraph(x for x in topo.links if ok(x.src, src) and ok(x.dst, dst))
    for node in (src, dst):
        graph.out.setdefault(node, [])
    return graph.shortest_path(src, dst, where=f"topology {topo.name!r}: route {src!r} -> {dst!r}")
