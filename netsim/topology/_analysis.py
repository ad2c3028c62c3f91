"""Capacity analysis: max-flow / min-cut between node sets, and bisection bandwidth."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Collection, Sequence

from .._scenario import ScenarioError
from ._topology import Topology

_SOURCE, _SINK = "\0source", "\0sink"


#: bisection_bandwidth searches every balanced split exactly up to this many splits: 14 workers (seconds at
#: most); beyond, candidate splits only (a k=4 fat tree's 16 hosts would take ~40 s exactly)
EXACT_SPLITS = 3500


class _Flows:
    """The residual-free capacity graph of a fabric, built once, for many max-flow queries."""

    def __init__(self, topo: Topology, through: Collection[str] | None, keep: Collection[str]):
        keep = set(keep)
        self.ok = lambda n: n in keep or through is None or topo.kind[n] in through
        cap: dict[tuple[str, str], float] = {}
        for x in topo.links:
            if self.ok(x.src) and self.ok(x.dst):
                cap[x.src, x.dst] = cap.get((x.src, x.dst), 0.0) + x.bandwidth
        self.cap = cap
        adj: dict[str, set[str]] = {}
        for u, v in cap:
            adj.setdefault(u, set()).add(v)
            adj.setdefault(v, set()).add(u)
        self.adj = {u: sorted(vs) for u, vs in adj.items()}  # sorted: a deterministic cut among minimal ones
        self.symmetric = all(cap.get((v, u)) == c for (u, v), c in cap.items())

    def max_flow(self, src: set[str], dst: set[str]) -> tuple[float, set[str]]:
        """Edmonds-Karp from `src` to `dst`: (value, the nodes the source side still reaches)."""
        inf = float("inf")
        cap = dict(self.cap)
        adj = {u: list(vs) for u, vs in self.adj.items()}
        adj[_SOURCE], adj[_SINK] = sorted(src), sorted(dst)
        for n in src:
            cap[_SOURCE, n] = inf
            adj.setdefault(n, []).append(_SOURCE)
        for n in dst:
            cap[n, _SINK] = inf
            adj.setdefault(n, []).append(_SINK)
        total = 0.0
        while True:
            back = {_SOURCE: _SOURCE}
            todo = deque([_SOURCE])
            while todo and _SINK not in back:
                u = todo.popleft()
                for v in adj[u]:
                    if v not in back and cap.get((u, v), 0.0) > 0:
                        back[v] = u
                        todo.append(v)
            if _SINK not in back:
                return total, set(back)
            path, v = [], _SINK
            while v != _SOURCE:
                path.append((back[v], v))
                v = back[v]
            push = min(cap[e] for e in path)
            if push == inf:
                raise ScenarioError("min_cut: sources and sinks are directly linked with infinite capacity")
            for u, v in path:
                cap[u, v] -= push
                cap[v, u] = cap.get((v, u), 0.0) + push
            total += push


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
    flows = _Flows(topo, through, src | dst)
    total, reach = flows.max_flow(src, dst)
    ok = flows.ok
    cut = tuple(x.id for x in topo.links if x.src in reach and x.dst not in reach and ok(x.src) and ok(x.dst))
    return total, cut


def bisection_bandwidth(
    topo: Topology, half: Sequence[str] | None = None, *, through: Collection[str] | None = None
) -> float:
    """The least max-flow (B/s) between two balanced halves of the workers (topo.gpus()), either way.

    Over every split of the n workers into n // 2 and the rest, the smaller of the max-flows from one half
    to the other and back; the minimum over splits is the fabric's bisection bandwidth (a 2 x 8 mesh: its
    middle column's 2 links, not its 8 row links).

    Exact (branch and bound over every split, pruned by the max-flow between the workers placed so far,
    which only grows as more are placed) while there are at most EXACT_SPLITS splits (C(n, n // 2), halved
    when every link's reverse has its bandwidth and n is even): up to 14 workers. Above that, an upper bound: the least cut among candidate splits, the
    first half of topo.gpus() (rows of a mesh) and the halves grown breadth-first from each worker; it is
    exact on meshes, tori, rings and fat trees, whose minimum bisections are of these shapes.

    Args:
        half: one side: the max-flow of that split alone, from `half` to the other workers.
        through: as in `min_cut`.
    """
    workers = list(topo.gpus())
    if half is not None:
        side = list(half)
        return min_cut(topo, side, [w for w in workers if w not in set(side)], through=through)[0]
    if len(workers) < 2:
        raise ScenarioError(f"bisection_bandwidth: needs at least 2 workers, got {len(workers)}")
    flows = _Flows(topo, through, workers)

    def flow(a: set[str], b: set[str]) -> float:
        there = flows.max_flow(a, b)[0]
        return there if flows.symmetric else min(there, flows.max_flow(b, a)[0])

    k = len(workers) // 2
    order = _breadth_first(flows, workers, workers[0])
    best = min(flow(set(c), set(workers) - set(c)) for c in _candidates(flows, workers, k))
    # halves of equal size on a symmetric fabric: a split and its mirror cut alike, so workers[0] stays in a
    mirrored = flows.symmetric and 2 * k == len(workers)
    if math.comb(len(workers), k) // (2 if mirrored else 1) > EXACT_SPLITS:
        return best

    def place(i: int, a: set[str], b: set[str]) -> None:
        nonlocal best
        if a and b and flow(a, b) >= best:
            return  # the cut only grows as workers are added to either side
        if i == len(order):
            best = flow(a, b)
            return
        w = order[i]
        if len(a) < k:
            place(i + 1, a | {w}, b)
        if len(b) < len(workers) - k and (i > 0 or not mirrored):
            place(i + 1, a, b | {w})

    place(0, set(), set())
    return best


def _breadth_first(flows: _Flows, workers: Sequence[str], start: str) -> list[str]:
    """The workers in breadth-first order from `start` over the fabric (any node forwards)."""
    wanted, seen, out, todo = set(workers), {start}, [], deque([start])
    while todo:
        u = todo.popleft()
        if u in wanted:
            out.append(u)
        for v in flows.adj.get(u, ()):
            if v not in seen:
                seen.add(v)
                todo.append(v)
    return out + [w for w in workers if w not in set(out)]


def _candidates(flows: _Flows, workers: Sequence[str], k: int) -> list[tuple[str, ...]]:
    """Balanced halves likely to hold a minimum cut: the first k workers in topology order, and the k
    nearest (breadth-first) to each worker."""
    out = {tuple(sorted(workers[:k]))}
    for w in workers:
        out.add(tuple(sorted(_breadth_first(flows, workers, w)[:k])))
    return sorted(out)
