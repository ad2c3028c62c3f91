"""Writes examples/coll_*.json: collectives compiled to flows, on small fabrics.

    python examples/make_collective_examples.py        # rewrite the files beside this script
    netsim run examples/coll_ring_allreduce_8gpu.json  # simulate one

Each description states the makespan netsim should report ("makespan <seconds> s"): a closed form on the
ideal fabrics, the searched ring's simulated time on the PCIe server. tests/workloads/test_collectives.py
simulates every file and checks it.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import jax

import netsim
from netsim import Link, Scenario
from netsim.checks import write_atomic
from netsim.studies import crossings, search_rings
from netsim.topology import ServerPlan, build_server, preset
from netsim.workloads import LinkFabric, allreduce, alltoall

MiB = 2**20
B, ALPHA = 25e9, 1e-6  # per link: bytes/s, s


def gpus(n):
    return [f"gpu{i}" for i in range(n)]


def link(a, b):
    return Link(f"{a}->{b}", a, b, B, ALPHA)


def ring_allreduce() -> tuple[Scenario, str]:
    n, size, chunks = 8, 64 * MiB, 2
    ring = gpus(n)
    fabric = LinkFabric(
        [link(ring[i], ring[(i + 1) % n]) for i in range(n)]
        + [link(ring[(i + 1) % n], ring[i]) for i in range(n)]
    )
    c = allreduce(ring, size, chunks=chunks, channels=2, rings=[ring, ring[::-1]])
    t = (2 * (n - 1) + chunks - 1) * ALPHA + 2 * (n - 1) * (size / 2) / (n * B)
    text = (
        f"Ring AllReduce of 64 MiB on 8 GPUs joined in a bidirectional ring (25 GB/s, 1 us per link), "
        f"2 chunks, 2 channels running the ring in opposite directions. Closed form "
        f"(2(N-1)+C-1) alpha + 2(N-1) (S/2)/(N B): makespan {t!r} s, busbw {c.busbw(t) / 1e9:.2f} GB/s."
    )
    return c.scenario(fabric, name="coll_ring_allreduce_8gpu"), text


def tree_allreduce() -> tuple[Scenario, str]:
    n, size, chunks = 8, 16 * MiB, 2
    fabric = LinkFabric([link(a, b) for a in gpus(n) for b in gpus(n) if a != b])
    c = allreduce(gpus(n), size, algorithm="tree", chunks=chunks)
    depth = math.ceil(math.log2(n))
    t = (2 * depth + chunks - 1) * (ALPHA + size / (2 * chunks * B))
    text = (
        f"Double-binary-tree AllReduce of 16 MiB on 8 fully connected GPUs (25 GB/s, 1 us per link), "
        f"2 chunks; each tree carries half. Closed form (2D+C-1)(alpha + S/(2 C B)), D = 3: makespan {t!r} s."
    )
    return c.scenario(fabric, name="coll_tree_allreduce_8gpu"), text


def alltoall_switch() -> tuple[Scenario, str]:
    n, size = 4, 64 * MiB
    fabric = LinkFabric([x for g in gpus(n) for x in (link(g, "sw"), link("sw", g))])
    c = alltoall(gpus(n), size)
    t = 2 * ALPHA + (n - 1) * size / (n * B)
    text = (
        f"AllToAll of 64 MiB per rank on 4 GPUs under one switch (25 GB/s, 1 us per link): each uplink "
        f"carries (N-1) S/N. Closed form 2 alpha + (N-1) S/(N B): makespan {t!r} s, "
        f"busbw {c.busbw(t) / 1e9:.2f} GB/s."
    )
    return c.scenario(fabric, name="coll_alltoall_4gpu_switch"), text


def pcie_searched_ring() -> tuple[Scenario, str]:
    # GPUs numbered alternately across the sockets: the default ring 0..7 crosses the socket link 8 times
    parent = {f"sw{s}": f"rc{s}" for s in range(4)} | {
        f"gpu{g}": f"sw{g % 2 + 2 * (g // 4)}" for g in range(8)
    }
    plan = ServerPlan(
        sockets=2,
        numa=2,
        host_bridges={f"rc{s}": s % 2 for s in range(4)},
        parent=parent,
        devices={g: "gpu" for g in gpus(8)},
    )
    topo = build_server(plan, name="dual-socket-alternating")
    size = 64 * MiB
    found = search_rings(topo, size=size)
    best, default = found.best[0], found.default
    sockets = [x.id for x in topo.links if topo.kind[x.src] == topo.kind[x.dst] == "cpu"]
    text = (
        f"Ring AllReduce of 64 MiB on a dual-socket PCIe server whose GPUs are numbered alternately across "
        f"the sockets, on the ring netsim's ring search chose: {' > '.join(best.order)} "
        f"({crossings(best, sockets)} socket crossings; the default order crosses "
        f"{crossings(default, sockets)} times). busbw {best.busbw / 1e9:.2f} GB/s against "
        f"{default.busbw / 1e9:.2f} for the default; makespan {best.time!r} s."
    )
    return best.allreduce(size, name="ring").scenario(topo, name="coll_pcie_searched_ring"), text


def pcie_ring_allreduce() -> tuple[Scenario, str]:
    # The README's example: the m01 box (8x RTX 4090, 2x EPYC 7542, one GPU per NUMA node) from its preset
    topo = preset("rtx4090-8x-epyc7542")
    size = 64 * MiB
    c = allreduce(list(topo.gpus()), size, step_overhead="2 us")
    t = netsim.simulate(c.scenario(topo)).makespan
    text = (
        f"Ring AllReduce of 64 MiB over the 8 GPUs of a dual-socket PCIe server (preset "
        f"rtx4090-8x-epyc7542: 8x RTX 4090 on 2x EPYC 7542, one GPU per NUMA node, measured link figures "
        f"from netsim/data/traces/m01_*), ring order gpu0..gpu7, 2 us software overhead per step. The ring "
        f"crosses the socket link twice; busbw {c.busbw(t) / 1e9:.2f} GB/s, makespan {t!r} s."
    )
    return c.scenario(topo, name="pcie_ring_allreduce"), text


def main() -> None:
    jax.config.update("jax_enable_x64", True)
    here = Path(__file__).resolve().parent
    for build in (ring_allreduce, tree_allreduce, alltoall_switch, pcie_searched_ring, pcie_ring_allreduce):
        scenario, text = build()
        path = here / f"{scenario.name}.json"
        scenario = dataclasses.replace(scenario, description=text)
        write_atomic(path, json.dumps(scenario.to_dict(), indent=1))
        print(f"{path.name}: {len(scenario.flows)} flows, {len(scenario.links)} links")


if __name__ == "__main__":
    main()
