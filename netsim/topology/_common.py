"""Argument checks and routing helpers shared by the topology builders."""

from __future__ import annotations

import math
from collections.abc import Collection

from .._routing import LinkGraph
from .._scenario import ScenarioError
from .._units import parse_quantity
from ._topology import Path, Topology


def count(value, field: str, *, minimum: int = 1) -> int:
    """`value` as an int >= minimum; raises ScenarioError naming `field`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScenarioError(f"{field}: expected an integer, got {value!r}")
    if value < minimum:
        raise ScenarioError(f"{field}: must be >= {minimum}, got {value}")
    return value


def bandwidth(value, field: str) -> float:
    """Bytes/s from a number (B/s) or a string with a unit ("25 GB/s", "400Gbps"); must be > 0."""
    try:
        out = parse_quantity(value, "bandwidth", field)
    except ValueError as e:
        raise ScenarioError(str(e)) from None
    if not math.isfinite(out) or out <= 0:
        raise ScenarioError(f"{field}: must be a finite bandwidth > 0, got {value!r}")
    return out


def latency(value, field: str) -> float:
    """Seconds from a number (s) or a string with a unit ("2 us"); must be >= 0."""
    try:
        out = parse_quantity(value, "time", field)
    except ValueError as e:
        raise ScenarioError(str(e)) from None
    if not math.isfinite(out) or out < 0:
        raise ScenarioError(f"{field}: must be a finite time >= 0, got {value!r}")
    return out


def choice(value, field: str, options: Collection[str]) -> str:
    if value not in options:
        raise ScenarioError(f"{field}: unknown value {value!r}; expected one of {sorted(options)}")
    return value


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
