"""An independent NumPy/Python reference simulator: a plain event loop with classic progressive filling.

Written from the model's definition, sharing no code with kernels/: one bottleneck link is frozen per
round, events are found by scanning every item, and ties are merged by residue (SimGrid-style), not by
time. It is slow and obviously correct, which is the point.
"""

from __future__ import annotations

import math

import numpy as np

import netsim


def progressive_filling(capacity: np.ndarray, routes: list[list[int]], active: list[bool]) -> np.ndarray:
    """Classic max-min: raise all unfrozen rates together; freeze the flows of the first link to fill."""
    rate = np.zeros(len(routes))
    frozen = [not a for a in active]
    spare = np.array(capacity, dtype=float)
    while not all(frozen):
        best, best_share = None, math.inf
        for link in range(len(capacity)):
            users = [f for f, r in enumerate(routes) if not frozen[f] and link in r]
            if users and spare[link] / len(users) < best_share:
                best, best_share = link, spare[link] / len(users)
        for f, r in enumerate(routes):
            if not frozen[f] and best in r:
                rate[f] = best_share
                frozen[f] = True
                for link in r:
                    spare[link] -= best_share
    return rate


def queue_wait(link: netsim.Link, load: float) -> float:
    """Mean wait (s) of a packet on a packetized link carrying `load` payload bytes/s: Pollaczek-Khinchine
    for packets of packet + header bytes on the wire, capped by the buffer's drain time."""
    wire = link.packet_bytes + (link.header_bytes or 0.0)
    service = wire / link.bandwidth
    rho = load / (link.bandwidth * link.packet_bytes / wire)
    cv2 = link.variability or 0.0
    wait = rho * service * (1 + cv2) / (2 * (1 - rho)) if rho < 1 else math.inf
    cap = math.inf if link.buffer_bytes is None else link.buffer_bytes / link.bandwidth
    return min(wait, cap)


def reference_simulate(scenario: netsim.Scenario) -> dict[str, tuple[float, float, float]]:
    """{id: (start, first_byte, finish)} for every flow and task.

    Packetized links carry packet / (packet + header) of their bandwidth in payload; an item's first byte,
    when it reaches its route (start + latency), waits `queue_wait` on each packetized link of its route at
    the load that link carried in the interval just ended, then moves."""
    links = {link.id: i for i, link in enumerate(scenario.links)}
    graph = netsim._routing.LinkGraph(scenario.links)
    devices = sorted({t.device for t in scenario.tasks})
    shared = list(scenario.shared)
    payload = [
        link.bandwidth * link.packet_bytes / (link.packet_bytes + (link.header_bytes or 0.0))
        if link.packet_bytes is not None
        else link.bandwidth
        for link in scenario.links
    ]
    capacity = payload + [r.capacity for r in shared] + [1.0] * len(devices)
    items, routes, lat, size, release, after = [], [], [], [], [], []
    for f in scenario.flows:
        route = f.route if f.route is not None else graph.shortest_path(f.src, f.dst)
        items.append(f.id)
        # a shared resource constrains a flow whose route meets its links (and its `via` links, if any)
        crossed = [
            len(links) + k
            for k, r in enumerate(shared)
            if set(route) & set(r.links) and (not r.via or set(route) & set(r.via))
        ]
        routes.append([links[x] for x in route] + crossed)
        lat.append(
            sum(scenario.links[links[x]].latency for x in route)
            + f.overhead
            + scenario.per_hop_latency * len(route)
        )
        size.append(f.bytes)
        release.append(f.start)
        after.append(list(f.after))
    for t in scenario.tasks:
        items.append(t.id)
        routes.append([len(scenario.links) + len(shared) + devices.index(t.device)])
        lat.append(0.0)
        size.append(t.duration)
        release.append(t.start)
        after.append(list(t.after))
    pos = {x: i for i, x in enumerate(items)}
    n = len(items)
    start = [math.inf] * n
    first = [math.inf] * n
    finish = [math.inf] * n
    left = list(size)
    done = [False] * n
    queued = [False] * n
    load = np.zeros(len(capacity))  # bytes/s through each resource in the interval that ends at t
    t = 0.0
    while not all(done):
        for i in range(n):
            if start[i] == math.inf and all(done[pos[a]] for a in after[i]) and release[i] <= t:
                start[i] = max([release[i]] + [finish[pos[a]] for a in after[i]])
                first[i] = start[i] + lat[i]
        for i in range(n):
            if start[i] < math.inf and not done[i] and first[i] <= t and not queued[i]:
                queued[i] = True
                hops = [r for r in routes[i] if r < len(scenario.links)]
                first[i] += sum(
                    queue_wait(scenario.links[r], load[r]) for r in hops if scenario.links[r].packet_bytes
                )
        moving = [start[i] < math.inf and not done[i] and first[i] <= t for i in range(n)]
        rate = progressive_filling(np.array(capacity), routes, moving)
        load = np.zeros(len(capacity))
        for i in range(n):
            for r in routes[i]:
                load[r] += rate[i]
        candidates = []
        for i in range(n):
            if moving[i]:
                candidates.append(t + left[i] / rate[i] if left[i] > 0 else t)
            elif start[i] < math.inf and not done[i]:
                candidates.append(first[i])
            elif start[i] == math.inf and all(done[pos[a]] for a in after[i]):
                candidates.append(release[i])
        t_next = min(candidates)
        for i in range(n):
            if moving[i]:
                left[i] -= rate[i] * (t_next - t)
                if left[i] <= 1e-12 * max(size[i], 1e-300):  # residue: done (SimGrid's precision/work-amount)
                    done[i], finish[i], left[i] = True, t_next, 0.0
        t = t_next
    return {x: (start[i], first[i], finish[i]) for i, x in enumerate(items)}
