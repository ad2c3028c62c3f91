"""Cluster fabrics: leaf-spine with oversubscription, k-ary fat-tree, rail-optimized multi-NIC clusters.

All route with ECMP (see `Ecmp`): `paths()` is the per-hop equal split, `route()` the hashed single path.
Endpoints are "h{i}" (kind "host"), or "n{s}/nic{r}" (kind "nic") for the rail-optimized fabric; switches
are "leaf{j}", "spine{k}" (leaf-spine), "pod{p}/edge{e}", "pod{p}/agg{a}", "core{c}" (fat-tree), "rail{r}" or
"rail{r}/leaf{j}" (rail-optimized). `cluster()` maps the endpoints onto server NICs.
"""

from __future__ import annotations

from .._scenario import Link, ScenarioError
from ._common import bandwidth, count, latency
from ._routers import Ecmp
from ._topology import Topology, cable

_SWITCHES = frozenset({"leaf", "spine", "edge", "agg", "core"})


def _uplink(host_bw: float, hosts: int, uplinks: int, oversubscription, uplink_bandwidth) -> float:
    """Per-uplink bandwidth: given, or chosen so that (hosts * host_bw) / (uplinks * uplink) = oversubscription."""
    if uplink_bandwidth is not None:
        if oversubscription is not None:
            raise ScenarioError(
                "give oversubscription or uplink_bandwidth, not both "
                f"(got {oversubscription!r} and {uplink_bandwidth!r})"
            )
        return bandwidth(uplink_bandwidth, "uplink_bandwidth")
    ratio = 1.0 if oversubscription is None else oversubscription
    if (
        isinstance(ratio, bool)
        or not isinstance(ratio, int | float)
        or not ratio > 0
        or ratio == float("inf")
    ):
        raise ScenarioError(f"oversubscription: must be a finite number > 0, got {oversubscription!r}")
    return hosts * host_bw / (uplinks * ratio)


def leaf_spine(
    leaves: int,
    spines: int,
    hosts_per_leaf: int,
    *,
    host_bandwidth="50 GB/s",
    oversubscription: float | None = None,
    uplink_bandwidth=None,
    host_latency=0.0,
    uplink_latency=0.0,
    name: str | None = None,
) -> Topology:
    """Two-tier Clos: every leaf links to every spine; hosts "h{i}" sit on leaf i // hosts_per_leaf.

    Args:
        leaves, spines, hosts_per_leaf: sizes (>= 1; leaves >= 2 unless there is one leaf).
        host_bandwidth: host <-> leaf per direction (B/s or "400 Gbps").
        oversubscription: leaf downlink capacity / uplink capacity (default 1.0, non-blocking); sets the
            per-uplink bandwidth to hosts_per_leaf * host_bandwidth / (spines * oversubscription).
        uplink_bandwidth: leaf <-> spine per direction, instead of oversubscription.
    """
    leaves, spines = count(leaves, "leaves"), count(spines, "spines")
    per_leaf = count(hosts_per_leaf, "hosts_per_leaf")
    if leaves * per_leaf < 2:
        raise ScenarioError(
            f"leaf_spine: needs at least 2 hosts, got leaves={leaves}, hosts_per_leaf={per_leaf}"
        )
    host = (bandwidth(host_bandwidth, "host_bandwidth"), latency(host_latency, "host_latency"))
    up = (
        _uplink(host[0], per_leaf, spines, oversubscription, uplink_bandwidth),
        latency(uplink_latency, "uplink_latency"),
    )
    kind = {f"h{i}": "host" for i in range(leaves * per_leaf)}
    kind |= {f"leaf{j}": "leaf" for j in range(leaves)} | {f"spine{k}": "spine" for k in range(spines)}
    links: list[Link] = []
    for i in range(leaves * per_leaf):
        links += cable(f"h{i}", f"leaf{i // per_leaf}", *host)
    for j in range(leaves):
        for k in range(spines):
            links += cable(f"leaf{j}", f"spine{k}", *up)
    name = name or f"leafspine{leaves}x{spines}"
    return Topology(name, tuple(links), kind, Ecmp(_SWITCHES))


def fat_tree(k: int, *, link_bandwidth="50 GB/s", link_latency=0.0, name: str | None = None) -> Topology:
    """The k-ary fat-tree (Al-Fares et al.): k pods of k/2 edge and k/2 aggregation switches, (k/2)^2 cores.

    Host h{i} sits on edge switch i // (k/2) (pod i // (k^2/4)); edge e of a pod links to every
    aggregation switch of the pod; aggregation a links to cores a*k/2 ... a*k/2 + k/2 - 1. All links
    have the same bandwidth, so the fabric has full bisection bandwidth (k^3/8 host links).
    """
    k = count(k, "k", minimum=2)
    if k % 2:
        raise ScenarioError(f"k: a k-ary fat-tree needs an even k, got {k}")
    h = k // 2
    lb = (bandwidth(link_bandwidth, "link_bandwidth"), latency(link_latency, "link_latency"))
    kind: dict[str, str] = {f"h{i}": "host" for i in range(k**3 // 4)}
    links: list[Link] = []
    for p in range(k):
        for e in range(h):
            edge = f"pod{p}/edge{e}"
            kind[edge] = "edge"
            for j in range(h):
                links += cable(f"h{(p * h + e) * h + j}", edge, *lb)
        for a in range(h):
            agg = f"pod{p}/agg{a}"
            kind[agg] = "agg"
            for e in range(h):
                links += cable(f"pod{p}/edge{e}", agg, *lb)
            for c in range(h):
                kind[f"core{a * h + c}"] = "core"
                links += cable(agg, f"core{a * h + c}", *lb)
    return Topology(name or f"fattree{k}", tuple(links), kind, Ecmp(_SWITCHES))


def rail_optimized(
    servers: int,
    rails: int,
    *,
    spines: int = 1,
    servers_per_leaf: int | None = None,
    nic_bandwidth="50 GB/s",
    oversubscription: float | None = None,
    uplink_bandwidth=None,
    nic_latency=0.0,
    uplink_latency=0.0,
    name: str | None = None,
) -> Topology:
    """Rail-optimized fabric: NIC r of every server ("n{s}/nic{r}") plugs into rail r's leaf.

    Same-rail traffic crosses one leaf; cross-rail traffic goes leaf -> spine -> leaf. With
    servers_per_leaf < servers a rail has several leaves "rail{r}/leaf{j}" (server s on leaf
    s // servers_per_leaf); else one leaf "rail{r}". Every leaf links to every spine.

    Args:
        servers, rails: sizes (rails = NICs per server).
        spines: spine switches (>= 1); none are built when the whole fabric is a single leaf.
        nic_bandwidth: NIC <-> leaf per direction.
        oversubscription, uplink_bandwidth: as in `leaf_spine`.
    """
    servers, rails, spines = count(servers, "servers"), count(rails, "rails"), count(spines, "spines")
    per_leaf = servers if servers_per_leaf is None else count(servers_per_leaf, "servers_per_leaf")
    if servers * rails < 2:
        raise ScenarioError(f"rail_optimized: needs at least 2 NICs, got servers={servers}, rails={rails}")
    nic = (bandwidth(nic_bandwidth, "nic_bandwidth"), latency(nic_latency, "nic_latency"))
    per_leaf = min(per_leaf, servers)
    up = (
        _uplink(nic[0], per_leaf, spines, oversubscription, uplink_bandwidth),
        latency(uplink_latency, "uplink_latency"),
    )
    groups = -(-servers // per_leaf)
    leaf = (lambda r, j: f"rail{r}") if groups == 1 else (lambda r, j: f"rail{r}/leaf{j}")
    kind: dict[str, str] = {}
    links: list[Link] = []
    for s in range(servers):
        for r in range(rails):
            kind[f"n{s}/nic{r}"] = "nic"
            kind[leaf(r, s // per_leaf)] = "leaf"
            links += cable(f"n{s}/nic{r}", leaf(r, s // per_leaf), *nic)
    if rails * groups > 1:
        for k in range(spines):
            kind[f"spine{k}"] = "spine"
            for r in range(rails):
                for j in range(groups):
                    links += cable(leaf(r, j), f"spine{k}", *up)
    endpoints = tuple(f"n{s}/nic{r}" for s in range(servers) for r in range(rails))
    return Topology(name or f"rail{servers}x{rails}", tuple(links), kind, Ecmp(_SWITCHES), endpoints)


def oversubscription_ratio(topo: Topology, switch: str) -> float:
    """Capacity from the switch's downstream side over its upstream side.

    Downstream links go to endpoints (hosts, NICs) or, for aggregation switches, to edge switches;
    upstream links to spines or cores. Raises ScenarioError when the switch has no upstream link.
    """
    tier = {"host": 0, "nic": 0, "edge": 1, "leaf": 1, "agg": 2, "spine": 3, "core": 3}
    if topo.kind.get(switch) not in _SWITCHES:
        raise ScenarioError(f"oversubscription_ratio: {switch!r} is not a switch of {topo.name!r}")
    level = tier[topo.kind[switch]]
    down = sum(x.bandwidth for x in topo.links if x.dst == switch and tier.get(topo.kind[x.src], 9) < level)
    up = sum(x.bandwidth for x in topo.links if x.src == switch and tier.get(topo.kind[x.dst], -1) > level)
    if up == 0:
        raise ScenarioError(f"oversubscription_ratio: switch {switch!r} has no upstream links")
    return down / up
