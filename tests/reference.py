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


def reference_simulate(scenario: netsim.Scenario) -> dict[str, tuple[float, float, float]]:
    """{id: (start, first_byte, finish)} for every flow and task."""
    links = {link.id: i for i, link in enumerate(scenario.links)}
    graph = netsim._routing.LinkGraph(scenario.links)
    devices = sorted({t.device for t in scenario.tasks})
    shared = list(scenario.shared)
    capacity = (
        [link.bandwidth for link in scenario.links] + [r.capacity for r in shared] + [1.0] * len(devices)
    )
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
    t = 0.0
    while not all(done):
        for i in range(n):
            if start[i] == math.inf and all(done[pos[a]] for a in after[i]) and release[i] <= t:
                start[i] = max([release[i]] + [finish[pos[a]] for a in after[i]])
                first[i] = start[i] + lat[i]
        moving = [start[i] < math.inf and not done[i] and first[i] <= t for i in range(n)]
        rate = progressive_filling(np.array(capacity), routes, moving)
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
