"""Ring search on a server fabric, in the spirit of PCIe-aware collective libraries, scored by the simulator.

A ring is an order of the ranks plus, per hop, a route: direct P2P (`fabric.route(a, b)`) or staged
through a node such as a CPU socket's memory (`fabric.route(a, b, via=mem)`). The search:

1. probes every ordered pair alone, direct and through each staging node (one batched simulation),
   and keeps each pair's fastest route;
2. probes candidate orders as one ring step: all n hops moving S / n bytes at once, which is what
   every step of a pipelined ring does, so links shared between hops (a socket link, a switch
   uplink) show up. Candidates: the default order, every order when there are few, else greedy
   nearest-neighbour rings from each start and seeded random orders;
3. improves the best few by local search (segment reversals and per-hop route changes), a whole
   neighbourhood per batched simulation, until no neighbour is faster;
4. simulates the ring AllReduce of the final candidates and of the default (the ranks in the given
   order, hops direct where a direct route exists) and ranks them by that time; on a tie the default
   stays first.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterable, Sequence

import numpy as np

from .._batch import compile_batch
from .._compile import Shape
from .._costs import CostModel
from .._scenario import Flow, Scenario, ScenarioError
from ..workloads import Collective, Fabric, allreduce, bus_factor
from ..workloads.collectives import SLOTS, quantity

__all__ = ["RingPlan", "RingSearch", "crossings", "search_rings"]

TIE = 1e-9  # relative: candidates this close in time count as equal (the earlier-listed one wins)


@dataclasses.dataclass(frozen=True)
class RingPlan:
    """One ring: hop i goes order[i] -> order[i + 1] (wrapping) along hops[i], staged through vias[i].

    Attributes:
        order: rank names in ring order.
        vias: per hop, None for direct P2P, else the node the hop is staged through.
        hops: per hop, the link ids of its route.
        time: simulated ring AllReduce time (s) at the search's size.
        busbw: nccl-tests' bus bandwidth of that run (bytes/s).
    """

    order: tuple[str, ...]
    vias: tuple[str | None, ...]
    hops: tuple[tuple[str, ...], ...]
    time: float
    busbw: float

    @property
    def routes(self) -> dict[tuple[str, str], tuple[str, ...]]:
        """(src, dst) -> route of each hop, as `allreduce(routes=...)` takes it."""
        n = len(self.order)
        return {(self.order[i], self.order[(i + 1) % n]): self.hops[i] for i in range(n)}

    def allreduce(self, size: float | str, *, ranks: Sequence[str] | None = None, **kwargs) -> Collective:
        """A ring AllReduce on this ring (every channel on it); kwargs go to `allreduce`."""
        return allreduce(
            self.order if ranks is None else ranks, size, rings=[self.order], routes=self.routes, **kwargs
        )


@dataclasses.dataclass(frozen=True)
class RingSearch:
    """Outcome of `search_rings`: distinct rings best first, and the default ring for comparison.

    Attributes:
        best: distinct rings (up to rotation), fastest first.
        default: the ranks in the given order, every hop direct (where a direct route exists).
        size: S (bytes) the rings were scored at.
        evaluated: candidate rings simulated during the search.
    """

    best: tuple[RingPlan, ...]
    default: RingPlan
    size: float
    evaluated: int

    @property
    def gain(self) -> float:
        """busbw of the best ring over the default's."""
        return self.best[0].busbw / self.default.busbw


def search_rings(
    fabric: Fabric,
    ranks: Sequence[str] | None = None,
    *,
    size: float | str = 2**28,
    vias: Sequence[str] | None = None,
    chunks: int = 1,
    step_overhead: float | str | None = None,
    costs: CostModel | None = None,
    slots: int | None = SLOTS,
    top: int = 3,
    samples: int = 256,
    seed: int = 0,
) -> RingSearch:
    """Searches ring orders and per-hop routes for the fastest ring AllReduce, with the simulator.

    Args:
        fabric: links and routes; staging needs `route(src, dst, via=node)` (netsim.topology.Topology).
        ranks: node names in the default order; default `fabric.gpus()`.
        size: S (bytes, or "256 MiB") of the AllReduce used to score rings.
        vias: nodes a hop may be staged through; default the fabric's nodes of kind "mem" (none
            when the fabric has no `kind`); pass () for direct P2P only.
        chunks: chunks of the scoring AllReduce.
        step_overhead: fixed cost per flow (s, or "2 us") of the scoring AllReduce and of the probes, as
            `allreduce(step_overhead=...)` takes it. None (the default): 0, or with `costs` the
            calibrated model, as `Collective.scenario` applies it (`CostModel.apply`, to the probes
            too). A plan's `time` and `busbw` are those `netsim.simulate` gives `plan.allreduce(size,
            chunks=chunks, step_overhead=step_overhead, slots=slots).scenario(fabric, costs)`.
        costs: the machine's fitted software costs (`netsim.topology.load_costs`), or None.
        slots: pieces in flight per connection of the scoring AllReduce (see `allreduce`).
        top: how many distinct rings to return (and to refine by local search).
        samples: most candidate orders probed in step 2 (all orders are probed when (n-1)! fits).
        seed: for the random orders.

    Raises:
        ScenarioError: bad arguments, or a pair of ranks with no usable route.
    """
    if ranks is None:
        if not hasattr(fabric, "gpus"):
            raise ScenarioError("ranks: required for a fabric without gpus()")
        ranks = fabric.gpus()
    ranks = tuple(ranks)
    if len(ranks) < 2 or len(set(ranks)) != len(ranks):
        raise ScenarioError(f"ranks: need at least 2 distinct node names, got {list(ranks)}")
    if vias is None:
        kind = getattr(fabric, "kind", {})
        vias = tuple(node for node, role in kind.items() if role == "mem")
    vias = tuple(vias)
    nodes = {x.src for x in fabric.links} | {x.dst for x in fabric.links}
    unknown = [v for v in vias if v not in nodes]
    if unknown:
        raise ScenarioError(f"vias: {unknown[:3]} are not nodes of the fabric")
    size = quantity(size, "bytes", "size", positive=True)
    costs = costs if step_overhead is None else None
    overhead = 0.0 if step_overhead is None else quantity(step_overhead, "time", "step_overhead")
    for name, value in (("top", top), ("samples", samples), ("chunks", chunks)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ScenarioError(f"{name}: must be an integer >= 1, got {value!r}")
    if slots is not None and (not isinstance(slots, int) or isinstance(slots, bool) or slots < 1):
        raise ScenarioError(f"slots: must be an integer >= 1 or None (unbounded), got {slots!r}")

    search = _Search(fabric, ranks, (None, *vias), size / len(ranks), overhead, costs)
    n = len(ranks)
    default = (tuple(range(n)), search.direct_options(tuple(range(n))))
    candidates = [default]
    if math.factorial(n - 1) <= samples:
        candidates += [(o, search.best_options(o)) for o in _all_orders(n)]
    else:
        rng = np.random.default_rng(seed)
        orders = [search.greedy(start) for start in range(n)]
        orders += [tuple(int(x) for x in rng.permutation(n)) for _ in range(max(samples - n, 0))]
        candidates += [(o, search.best_options(o)) for o in orders]
    scored = search.rank(candidates)
    seeds = _distinct([c for c, _ in scored])[:top]
    refined = _distinct([search.improve(c) for c in seeds] + seeds)[:top]

    finals = [default] + [c for c in refined if _key(c) != _key(default)]
    rings = [search.plan(c) for c in finals]
    times = _makespans(
        [
            r.allreduce(
                size, chunks=chunks, step_overhead=step_overhead, slots=slots, name="search"
            ).scenario(fabric, costs)
            for r in rings
        ],
        shape=dataclasses.replace(search.shape, items=64),
    )
    scale = size * bus_factor("allreduce", n)  # busbw = scale / time
    plans = [
        dataclasses.replace(r, time=float(t), busbw=float(scale / t))
        for r, t in zip(rings, times, strict=True)
    ]
    order = sorted(range(len(plans)), key=lambda i: (_rounded(times[i], times.min()), i))
    return RingSearch(tuple(plans[i] for i in order[:top]), plans[0], size, search.evaluated)


def _makespans(scenarios: Sequence[Scenario], *, shape: Shape, width: int | None = None) -> np.ndarray:
    """Makespan (s) of each scenario, simulated in vmapped batches of `width` (default: all at once) laid
    out at (at least) `shape`, so that batches of one search share one compile."""
    width = width or len(scenarios)
    return np.concatenate(
        [
            compile_batch(scenarios[lo : lo + width], shape=shape).run(width=width)["makespan"]
            for lo in range(0, len(scenarios), width)
        ]
    )


def _rounded(t: float, best: float) -> int:
    """Times within TIE of each other fall in one bucket, so the sort keeps candidate order among them."""
    return round((t - best) / (TIE * best))


Candidate = tuple[tuple[int, ...], tuple[int, ...]]  # (order as rank indices, route option per hop)


class _Search:
    """Probes on one fabric; every batch uses one padded shape, so probes share one compile."""

    WIDTH = 64  # candidates per vmapped probe batch

    def __init__(
        self,
        fabric: Fabric,
        ranks: tuple[str, ...],
        options: tuple[str | None, ...],
        part: float,
        overhead: float,
        costs: CostModel | None,
    ):
        self.fabric, self.ranks, self.options, self.part = fabric, ranks, options, part
        self.overhead, self.costs = overhead, costs  # costs: a fitted CostModel or None
        self.links = tuple(fabric.links)
        n = len(ranks)
        self.route: dict[tuple[int, int, int], tuple[str, ...]] = {}
        for a in range(n):
            for b in range(n):
                if a == b:
                    continue
                for o, via in enumerate(options):
                    try:
                        r = (
                            fabric.route(ranks[a], ranks[b])
                            if via is None
                            else fabric.route(ranks[a], ranks[b], via=via)
                        )
                    except ScenarioError:
                        continue
                    self.route[(a, b, o)] = tuple(r)
        missing = [
            (ranks[a], ranks[b])
            for a in range(n)
            for b in range(n)
            if a != b and not any((a, b, o) in self.route for o in range(len(options)))
        ]
        if missing:
            raise ScenarioError(f"search_rings: no route for rank pair(s) {missing[:3]}")
        hops = max(len(r) for r in self.route.values())
        # generous minimum pads: searches on different servers then share their compiles
        self.shape = Shape(items=n, hops=max(hops, 16), after=1, resources=max(len(self.links), 64))
        self.evaluated = 0
        # pairwise probe: each (pair, option) alone
        keys = list(self.route)
        alone = self._probe([[(a, b, o)] for a, b, o in keys], count=False)
        self.alone = dict(zip(keys, alone, strict=True))

    def direct_options(self, order: Sequence[int]) -> tuple[int, ...]:
        """Per hop, the direct route (option 0), or the fastest staged one where there is no direct route."""
        n = len(order)
        hops = [(order[i], order[(i + 1) % n]) for i in range(n)]
        return tuple(0 if (a, b, 0) in self.route else self._best_option(a, b) for a, b in hops)

    def best_options(self, order: Sequence[int]) -> tuple[int, ...]:
        """Per hop, the route option that is fastest alone (the direct route on ties)."""
        n = len(order)
        return tuple(self._best_option(order[i], order[(i + 1) % n]) for i in range(n))

    def _best_option(self, a: int, b: int) -> int:
        usable = [o for o in range(len(self.options)) if (a, b, o) in self.route]
        fastest = min(self.alone[(a, b, o)] for o in usable)
        return next(o for o in usable if self.alone[(a, b, o)] <= fastest * (1 + TIE))

    def greedy(self, start: int) -> tuple[int, ...]:
        """Nearest-neighbour ring from `start` by the pairwise probe times."""
        n = len(self.ranks)
        order, left = [start], set(range(n)) - {start}
        while left:
            a = order[-1]
            nxt = min(sorted(left), key=lambda b: self.alone[(a, b, self._best_option(a, b))])
            order.append(nxt)
            left.remove(nxt)
        return _normalize(tuple(order))

    def rank(self, candidates: Sequence[Candidate]) -> list[tuple[Candidate, float]]:
        """Distinct candidates with their ring-step probe time, fastest first (stable on ties)."""
        unique = _distinct(candidates)
        times = self._probe([self._hops(c) for c in unique])
        best = float(np.min(times))
        order = sorted(range(len(unique)), key=lambda i: (_rounded(times[i], best), i))
        return [(unique[i], float(times[i])) for i in order]

    def improve(self, start: Candidate) -> Candidate:
        """Local search: take the fastest neighbour (segment reversal or one hop's route) until none is faster."""
        current = start
        while (
            True
        ):  # terminates: each move is faster by more than TIE / 2 (rank keeps `current` first on ties)
            (best, _), *_ = self.rank([current, *self._neighbours(current)])
            if _key(best) == _key(current):
                return current
            current = best

    def _neighbours(self, c: Candidate) -> list[Candidate]:
        order, opts = c
        n = len(order)
        out = []
        for i in range(1, n - 1):
            for j in range(i + 1, n):
                o = order[:i] + order[i : j + 1][::-1] + order[j + 1 :]
                out.append((o, self.best_options(o)))
        for h in range(n):
            a, b = order[h], order[(h + 1) % n]
            for o in range(len(self.options)):
                if o != opts[h] and (a, b, o) in self.route:
                    out.append((order, (*opts[:h], o, *opts[h + 1 :])))
        return out

    def _hops(self, c: Candidate) -> list[tuple[int, int, int]]:
        order, opts = c
        n = len(order)
        return [(order[i], order[(i + 1) % n], opts[i]) for i in range(n)]

    def _probe(self, batches: Sequence[Sequence[tuple[int, int, int]]], count: bool = True) -> np.ndarray:
        """Makespan of each set of hops moving `part` bytes at once (after the step overhead, or with the
        fitted software costs)."""
        scenarios = [
            Scenario(
                self.links,
                [
                    Flow(
                        f"h{i}",
                        self.ranks[a],
                        self.ranks[b],
                        self.part,
                        overhead=self.overhead,
                        route=self.route[(a, b, o)],
                    )
                    for i, (a, b, o) in enumerate(hops)
                ],
            )
            for hops in batches
        ]
        if self.costs is not None:
            scenarios = self.costs.apply_each(scenarios)
        if count:
            self.evaluated += len(scenarios)
        return _makespans(scenarios, shape=self.shape, width=self.WIDTH)

    def plan(self, c: Candidate) -> RingPlan:
        hops = self._hops(c)
        return RingPlan(
            tuple(self.ranks[i] for i in c[0]),
            tuple(self.options[o] for *_, o in hops),
            tuple(self.route[h] for h in hops),
            math.nan,
            math.nan,
        )


def _all_orders(n: int):
    """Every ring order starting at rank 0 (directions count: links are directed)."""
    for rest in itertools.permutations(range(1, n)):
        yield (0, *rest)


def _normalize(order: tuple[int, ...]) -> tuple[int, ...]:
    i = order.index(0)
    return order[i:] + order[:i]


def _key(c: Candidate) -> Candidate:
    """The candidate rotated to start at rank 0: rotations are the same ring."""
    order, opts = c
    i = order.index(0)
    return order[i:] + order[:i], opts[i:] + opts[:i]


def _distinct(cands: Sequence[Candidate]) -> list[Candidate]:
    seen: set[Candidate] = set()
    out = []
    for c in cands:
        if _key(c) not in seen:
            seen.add(_key(c))
            out.append(c)
    return out


def crossings(plan: RingPlan, links: str | Iterable[str]) -> int:
    """Hops of `plan` whose route uses any of `links` (e.g. the socket links): a ring across two
    groups of ranks crosses at least twice.

    links: one link id or several, matched exactly against whole link ids (no patterns: "cpu*" matches
    only a link whose id is "cpu*", and "cpu0" does not match "cpu0->cpu1").
    """
    wanted = {links} if isinstance(links, str) else set(links)
    bad = [x for x in wanted if not isinstance(x, str)]
    if bad:
        raise ScenarioError(f"links: expected link ids (strings), got {bad[:3]}")
    return sum(1 for hop in plan.hops if wanted.intersection(hop))
