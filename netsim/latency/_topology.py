"""Channel loads of traffic on any netsim Topology (its links, routed by the topology's router)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .._errors import ScenarioError
from ..topology import Topology
from ._model import Load, channel_feeds, port_mix


def topology_load(topo: Topology, traffic: Mapping[tuple[str, str], float], name: str = "") -> Load:
    """Loads on `topo`'s links when each (src, dst) pair sends `traffic[src, dst]` packets per unit rate.

    Routes come from the topology's router; a link's input port is the link the packet arrived on (or its
    source's injection, whose packets arrive at random: a node here answers many requesters, with no
    source queue of its own in the model). nodes counts the distinct sources, hops the links a packet crosses on average.
    """
    links = [link.id for link in topo.links]
    index = {lid: i for i, lid in enumerate(links)}
    ports = {
        lid: i for i, lid in enumerate(links)
    }  # input port = the link it arrived on; len(links): injected
    inputs = np.zeros((len(links), len(links) + 1))
    ending = np.zeros(len(links))  # packets whose path ends with the link
    total = hops = 0.0
    sources = set()
    for (src, dst), weight in traffic.items():
        if weight < 0 or not np.isfinite(weight):
            raise ScenarioError(f"traffic[{src!r}, {dst!r}]: must be a finite weight >= 0, got {weight!r}")
        path = topo.route(src, dst)
        prev = len(links)
        for lid in path:
            inputs[index[lid], prev] += weight
            prev = ports[lid]
        if path:
            ending[index[path[-1]]] += weight
        total += weight
        hops += weight * len(path)
        sources.add(src)
    if total <= 0:
        raise ScenarioError("traffic: no pair sends anything")
    load = inputs.sum(axis=1)
    node_of = {n: i for i, n in enumerate(topo.nodes)}
    router = np.array([node_of[topo.link[lid].src] for lid in links])
    contend, diverge = port_mix(load, inputs, router, random_port=len(links))
    exits = np.where(load > 0, ending / np.where(load > 0, load, 1.0), 0.0)
    # no VC classes, so no wait for a VC (kernels.latency.vc_wait): its turnaround is BookSim's router's,
    # in its cycles, which a netsim link (its own units, no router pipeline) does not have
    return Load(
        name or topo.name,
        load,
        contend,
        diverge,
        exits,
        np.zeros((1, load.size)),
        np.ones(load.size),
        len(sources),
        hops / total,
        tuple(links),
        # port p < len(links) is the end of link p; the last port is injection
        channel_feeds(inputs, np.broadcast_to(np.r_[np.arange(len(links)), -1], inputs.shape)),
    )
