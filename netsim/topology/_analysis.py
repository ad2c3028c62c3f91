"""Capacity analysis: max-flow / min-cut between node sets, and bisection bandwidth."""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Sequence

from .._scenario import ScenarioError
from ._topology import Topology

_SOURCE, _SINK = "\0source", "\0sink"


def min_cut(
    topo: Topology,
    sources: Collection[str],
    sinks: Collection[str],
    *,
    through: Collection[str] | None = None,
) -> tuple[float, tuple[str, ...]]:
    """Maximum rate (B/s) from `sources` to `sinks` over the link capacities, and a minimum cut.

    Routing-agnostic (Edmonds-Karp on the directed links): the answer bounds what any routing can carry.

    Args:
        topo: the fabric.
        sources, sinks: disjoint, non-empty node sets.
        through: kinds of node that may forward flow (besides sources and sinks); None: every node.

    Returns:
        (max-flow value, ids of the links of a minimum cut, in link order).
    """
    src, dst = set(sources), set(sinks)
    for name, group in (("sources", src), ("sinks", dst)):
        if not group:
            raise ScenarioError(f"min_cut: {name} is empty")
        unknown = sorted(group - set(topo.kind))
        if unknown:
            raise ScenarioError(f"min_cut: {name} has unknown node(s) {unknown[:3]}")
    if src & dst:
        raise ScenarioError(f"min_cut: sources and sinks share {sorted(src & dst)[:3]}")
    ok = lambda n: n in src or n in dst or through is None or topo.kind[n] in through
    cap: dict[tuple[str, str], float] = {}
    for x in topo.links:
        if ok(x.src) and ok(x.dst):
            cap[x.src, x.dst] = cap.get((x.src, x.dst), 0.0) + x.bandwidth
    inf = float("inf")
    cap |= {(_SOURCE, n): inf for n in src} | {(n, _SINK): inf for n in dst}
    adj: dict[str, set[str]] = {}
    for u, v in list(cap):
        adj.setdefault(u, set()).add(v)
        adj.setdefault(v, set()).add(u)
        cap.setdefault((v, u), 0.0)
    total = 0.0
    while True:
        back = {_SOURCE: _SOURCE}
        todo = deque([_SOURCE])
        while todo and _SINK not in back:
            u = todo.popleft()
            for v in sorted(adj[u]):  # sorted: a deterministic cut when several are minimal
                if v not in back and cap[u, v] > 0:
                    back[v] = u
                    todo.append(v)
        if _SINK not in back:
            break
        path, v = [], _SINK
        while v != _SOURCE:
            path.append((back[v], v))
            v = back[v]
        push = min(cap[e] for e in path)
        if push == inf:
            raise ScenarioError("min_cut: sources and sinks are directly linked with infinite capacity")
        for u, v in path:
            cap[u, v] -= push
            cap[v, u] += push
        total += push
    reach = set(back)
    cut = tuple(x.id for x in topo.links if x.src in reach and x.dst not in reach and ok(x.src) and ok(x.dst))
    return total, cut


def bisection_bandwidth(
    topo: Topology, half: Sequence[str] | None = None, *, through: Collection[str] | None = None
) -> float:
    """Max-flow (B/s) from `half` of the workers to the other half.

    Args:
        half: one side; default the first half of topo.gpus() (on a row-major mesh: the top rows).
        through: as in `min_cut`.
    """
    workers = topo.gpus()
    side = list(workers[: len(workers) // 2]) if half is None else list(half)
    other = [w for w in workers if w not in set(side)]
    return min_cut(topo, side, other, through=through)[0]
