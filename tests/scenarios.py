"""Seeded random scenarios for property tests: random fabrics, flows with ties, zero bytes, latencies,
releases, dependency DAGs and compute tasks. All share one padded shape, so they share one compile."""

from __future__ import annotations

import dataclasses

import numpy as np

import netsim

PAD = netsim.Shape(items=64, hops=8, after=4, resources=64)


def random_fabric(rng: np.random.Generator, n_nodes: int) -> list[netsim.Link]:
    """A bidirectional ring plus random chords: always strongly connected."""
    pairs = {(i, (i + 1) % n_nodes) for i in range(n_nodes)}
    for _ in range(n_nodes // 2):
        a, b = rng.choice(n_nodes, 2, replace=False)
        pairs.add((int(a), int(b)))
    links = []
    bandwidths = [1e9, 2e9, 5e9]  # few distinct values: equal shares (ties) happen often
    for a, b in sorted(pairs):
        for s, d in ((a, b), (b, a)):
            if not any(x.src == f"n{s}" and x.dst == f"n{d}" for x in links):
                lat = float(rng.choice([0.0, 1e-6, 2.5e-6]))
                links.append(netsim.Link(f"n{s}->n{d}", f"n{s}", f"n{d}", float(rng.choice(bandwidths)), lat))
    return links


def random_shared(rng: np.random.Generator, links: list[netsim.Link]) -> list[netsim.SharedResource]:
    """Two-way budgets on a few cables, and one resource that only flows crossing two given links meet."""
    out = []
    for k, i in enumerate(rng.choice(len(links), 3, replace=False)):
        link = links[int(i)]
        back = [x.id for x in links if (x.src, x.dst) == (link.dst, link.src)]
        out.append(netsim.SharedResource(f"duplex{k}", float(rng.choice([1.5e9, 3e9])), (link.id, *back)))
    a, b = rng.choice(len(links), 2, replace=False)
    out.append(netsim.SharedResource("staging", 1e9, (links[int(a)].id,), via=(links[int(b)].id,)))
    return out


def packetize(rng: np.random.Generator, links: list[netsim.Link]) -> list[netsim.Link]:
    """About half the links packetized: packet and header sizes, finite buffers (a saturated link waits
    their drain time) and service-time variabilities drawn from a few values."""
    out = []
    for link in links:
        if rng.random() < 0.5:
            link = dataclasses.replace(
                link,
                packet_bytes=float(rng.choice([64.0, 256.0, 4096.0])),
                header_bytes=float(rng.choice([0.0, 16.0, 26.0])),
                buffer_bytes=float(rng.choice([2e3, 64e3])),
                variability=float(rng.choice([0.0, 0.0, 1.0])),
            )
        out.append(link)
    return out


def random_scenario(
    seed: int,
    n_nodes: int = 8,
    n_flows: int = 24,
    n_tasks: int = 8,
    shared: bool = False,
    packets: bool = False,
) -> netsim.Scenario:
    rng = np.random.default_rng(seed)
    links = random_fabric(rng, n_nodes)
    if packets:
        links = packetize(np.random.default_rng(seed + 1), links)
    ids = []
    flows, tasks = [], []
    sizes = [0.0, 1e5, 1e6, 1e6, 4e6]  # repeated sizes + zero-byte flows: simultaneous completions
    for i in range(n_flows):
        a, b = rng.choice(n_nodes, 2, replace=False)
        after = (
            tuple(rng.choice(ids, size=min(len(ids), int(rng.integers(0, 3))), replace=False)) if ids else ()
        )
        start = float(rng.choice([0.0, 0.0, 1e-4, 5e-4]))
        overhead = float(rng.choice([0.0, 0.0, 3e-6]))
        flows.append(
            netsim.Flow(
                f"f{i}",
                f"n{a}",
                f"n{b}",
                float(rng.choice(sizes)),
                start=start,
                after=tuple(str(x) for x in after),
                overhead=overhead,
            )
        )
        ids.append(f"f{i}")
    for j in range(n_tasks):
        after = tuple(rng.choice(ids, size=min(len(ids), int(rng.integers(0, 3))), replace=False))
        tasks.append(
            netsim.Task(
                f"t{j}",
                f"gpu{int(rng.integers(0, 3))}",
                float(rng.choice([0.0, 1e-4, 3e-4])),
                after=tuple(str(x) for x in after),
            )
        )
        ids.append(f"t{j}")
    hop = float(rng.choice([0.0, 5e-7]))
    return netsim.Scenario(
        links,
        flows,
        tasks,
        per_hop_latency=hop,
        name=f"random{seed}",
        shared=random_shared(rng, links) if shared else (),
    )
