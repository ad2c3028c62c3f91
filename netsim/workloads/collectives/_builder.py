"""The one flow builder every collective algorithm goes through, and the checks of the builders' arguments.

An algorithm is a `Schedule`: a function that calls `Builder.send` for every piece it moves and returns
(blocks, steps). The builder names the flows, adds the dependencies every algorithm shares (connection
order and connection slots, see the package docstring), the reduction tasks, and what each flow carries.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Mapping, Sequence

from ..._checks import quantity
from ..._scenario import Flow, ScenarioError, Task
from .._base import Workload
from ._collective import Collective, Transfer

#: an algorithm: adds its sends to the builder, returns (blocks, steps) (see `Collective`)
Schedule = Callable[["Builder"], tuple[int, int]]


@dataclasses.dataclass
class Builder:
    """A checked collective request, and the flows, reduction tasks and transfer records its schedule
    adds. Flow ids are f"{name}/k{channel}/c{chunk}/{tag}"."""

    ranks: tuple[str, ...]
    size: float
    chunks: int
    channels: int
    orders: list[tuple[int, ...]]  # per ring (cycled over the channels): rank indices in ring order
    root: int | None
    name: str
    overhead: float
    reduce_bandwidth: float | None
    routes: dict[tuple[str, str], tuple[str, ...]]
    slots: int | None
    flows: list[Flow] = dataclasses.field(default_factory=list)
    tasks: list[Task] = dataclasses.field(default_factory=list)
    transfers: list[Transfer] = dataclasses.field(default_factory=list)
    # connection (channel, lane, src, dst) -> [((step, chunk), flow index, ready id)]
    connections: dict[tuple, list[tuple[tuple[int, int], int, str]]] = dataclasses.field(
        default_factory=lambda: collections.defaultdict(list)
    )

    @property
    def n(self) -> int:
        return len(self.ranks)

    def order(self, channel: int) -> tuple[int, ...]:
        """The ring order of `channel`: rank indices, position by position."""
        return self.orders[channel % len(self.orders)]

    def send(
        self,
        channel: int,
        chunk: int,
        tag: str,
        src: int,
        dst: int,
        nbytes: float,
        after: Sequence[str | None],
        *,
        blocks: Sequence[int],
        step: int,
        op: str,
        lane: int = 0,
    ) -> tuple[str, str]:
        """Adds one flow from rank index src to dst, after the non-None ids in `after` and after the same
        connection's flow one chunk earlier (connection order: `tag` names the connection's piece).

        `lane` tells apart connections of one channel between the same ranks (the two trees of the
        double tree). Returns (flow id, ready id): the ready id is what a later use of the received
        data waits for: the flow itself, or the reduction task that follows a reducing receive.
        """
        fid = f"{self.name}/k{channel}/c{chunk}/{tag}"
        previous = f"{self.name}/k{channel}/c{chunk - 1}/{tag}" if chunk > 0 else None
        a, b = self.ranks[src], self.ranks[dst]
        deps = tuple(dict.fromkeys(x for x in (*after, previous) if x is not None))
        self.flows.append(
            Flow(fid, a, b, nbytes, route=self.routes.get((a, b)), after=deps, overhead=self.overhead)
        )
        self.transfers.append(Transfer(fid, a, b, tuple(blocks), channel, chunk, step, op))
        ready = fid
        if op == "reduce" and self.reduce_bandwidth is not None:
            ready = f"{fid}/sum"
            self.tasks.append(Task(ready, b, nbytes / self.reduce_bandwidth, after=(fid,)))
        self.connections[(channel, lane, src, dst)].append(((step, chunk), len(self.flows) - 1, ready))
        return fid, ready

    def bound_slots(self) -> None:
        """Connection slots: on each connection, in send order (step, then chunk), piece j waits until
        the receiver is done with piece j - slots (its receive, or the reduction that reads it).

        Within one step the connection order already implies it, so only waits on an earlier step are
        added. Every other dependency points to an earlier step, or to an earlier chunk of the same
        step, so these (to earlier pieces in the same order) keep the graph acyclic.
        """
        if self.slots is None:
            return
        for pieces in self.connections.values():
            pieces = sorted(pieces)
            for j in range(self.slots, len(pieces)):
                (step, _), i, _ = pieces[j]
                (earlier, _), _, wait = pieces[j - self.slots]
                if earlier != step and wait not in self.flows[i].after:
                    self.flows[i] = dataclasses.replace(self.flows[i], after=(*self.flows[i].after, wait))


def build(
    kind: str,
    schedules: Mapping[str, Schedule],
    *,
    ranks: Sequence[str],
    size: float | str,
    algorithm: str,
    chunks: int,
    channels: int,
    step_overhead: float | str | None,
    routes: Mapping[tuple[str, str], Sequence[str]] | None,
    slots: int | None,
    name: str,
    rings: Sequence[Sequence[str]] | None = None,
    reduce_bandwidth: float | str | None = None,
    root: int | None = None,
) -> Collective:
    """Checks the arguments of a public builder (see `allreduce`), runs `schedules[algorithm]` on them."""
    ranks = _check_ranks(ranks)
    n = len(ranks)
    size = quantity(size, "bytes", "size")
    if algorithm not in schedules:
        raise ScenarioError(f"algorithm: {kind} has no algorithm {algorithm!r}; known: {list(schedules)}")
    for field, value in (("chunks", chunks), ("channels", channels)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ScenarioError(f"{field}: must be an integer >= 1, got {value!r}")
    if root is not None and (not isinstance(root, int) or isinstance(root, bool) or not 0 <= root < n):
        raise ScenarioError(f"root: must be a rank index in [0, {n}), got {root!r}")
    orders = _check_rings(rings, ranks)
    if not isinstance(name, str) or not name:
        raise ScenarioError(f"name: must be a non-empty string, got {name!r}")
    if slots is not None and (not isinstance(slots, int) or isinstance(slots, bool) or slots < 1):
        raise ScenarioError(f"slots: must be an integer >= 1 or None (unbounded), got {slots!r}")
    overhead = quantity(0.0 if step_overhead is None else step_overhead, "time", "step_overhead")
    if reduce_bandwidth is not None:
        reduce_bandwidth = quantity(reduce_bandwidth, "bandwidth", "reduce_bandwidth", positive=True)
    b = Builder(
        ranks,
        size,
        chunks,
        channels,
        orders,
        root,
        name,
        overhead,
        reduce_bandwidth,
        _check_routes(routes, ranks),
        slots,
    )
    blocks, steps = schedules[algorithm](b)
    b.bound_slots()
    return Collective(
        kind,
        algorithm,
        ranks,
        size,
        Workload(b.flows, b.tasks, name),
        tuple(b.transfers),
        blocks,
        steps,
        chunks,
        channels,
        root,
        None if step_overhead is None else overhead,
        slots,
    )


def _check_ranks(ranks: Sequence[str]) -> tuple[str, ...]:
    if isinstance(ranks, str) or not isinstance(ranks, Sequence):
        raise ScenarioError(f"ranks: expected a list of node names, got {ranks!r}")
    ranks = tuple(ranks)
    bad = [r for r in ranks if not isinstance(r, str) or not r]
    if bad:
        raise ScenarioError(f"ranks: node names must be non-empty strings, got {bad[0]!r}")
    if len(ranks) < 2:
        raise ScenarioError(f"ranks: a collective needs at least 2 ranks, got {list(ranks)}")
    seen: set[str] = set()
    for r in ranks:
        if r in seen:
            raise ScenarioError(f"ranks: {r!r} appears twice")
        seen.add(r)
    return ranks


def _check_rings(rings, ranks: tuple[str, ...]) -> list[tuple[int, ...]]:
    """Each ring as rank indices; a ring must be a permutation of `ranks`."""
    if rings is None:
        return [tuple(range(len(ranks)))]
    if isinstance(rings, str) or not isinstance(rings, Sequence) or not rings:
        raise ScenarioError(f"rings: expected a non-empty list of rank orders, got {rings!r}")
    index = {r: i for i, r in enumerate(ranks)}
    out = []
    for k, ring in enumerate(rings):
        permutation = (
            isinstance(ring, Sequence)
            and not isinstance(ring, str)
            and collections.Counter(ring) == collections.Counter(ranks)
        )
        if not permutation:
            raise ScenarioError(f"rings[{k}]: must be a permutation of ranks {list(ranks)}, got {ring!r}")
        out.append(tuple(index[r] for r in ring))
    return out


def _check_routes(routes, ranks: tuple[str, ...]) -> dict[tuple[str, str], tuple[str, ...]]:
    out: dict[tuple[str, str], tuple[str, ...]] = {}
    for pair, route in (routes or {}).items():
        if not (isinstance(pair, tuple) and len(pair) == 2 and all(p in ranks for p in pair)):
            raise ScenarioError(f"routes: keys must be (src, dst) pairs of ranks, got {pair!r}")
        if isinstance(route, str) or not route:
            raise ScenarioError(f"routes[{pair!r}]: expected a non-empty list of link ids, got {route!r}")
        out[pair] = tuple(route)
    return out
