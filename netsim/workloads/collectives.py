"""Collectives (AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AllToAll) compiled to flows.

Every builder returns a `Collective`: its `Workload` (flows with exact `after` dependencies, and
optional reduction tasks), a `Transfer` record per flow saying which part of which buffer it carries
(so tests can replay the data movement), and nccl-tests' accounting (algbw, busbw) for its size.

Sizes follow nccl-tests (doc/PERFORMANCE.md, the "size" column of `*_perf`): `size` is S, the bytes of
the per-rank buffer for AllReduce, Broadcast and Reduce; of the whole gathered output for AllGather;
of the whole input for ReduceScatter; of one rank's whole send buffer for AllToAll.

Parts of a buffer: the buffer is cut into `Collective.blocks` equal blocks, each block into `channels`
x `chunks` equal parts; a flow carries part (channel, chunk) of one or more blocks.

Dependency rules, shared by every algorithm (they make chunks pipeline):
- data: a send that forwards or reduces received data waits for that receive (or for its reduction
  task when `reduce_bandwidth` is set);
- connection order: on one connection (sender, receiver, channel, step), chunk c waits for chunk
  c - 1, so the chunks of a step leave in order, as through NCCL's FIFO of slots;
- connection slots: a connection (sender, receiver, channel) carries its pieces (chunk c of step s) in
  NCCL's order, step by step and each step's chunks in order, with at most `slots` in flight: piece j
  waits until the receiver is done with piece j - slots (its receive, or the reduction that reads it).
The algorithm-specific rules are written next to each schedule below.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from .._checks import quantity
from .._scenario import Flow, Scenario, ScenarioError, Task
from .._units import format_quantity
from ._base import Fabric, Workload

if TYPE_CHECKING:
    from .._costs import CostModel

__all__ = [
    "SLOTS",
    "Collective",
    "Transfer",
    "allgather",
    "allreduce",
    "alltoall",
    "broadcast",
    "bus_factor",
    "reduce",
    "reducescatter",
]

#: Pieces (one chunk of one step) a connection has in flight by default, as in NCCL: a connection's FIFO
#: has NCCL_STEPS = 8 slots (src/include/device.h; Simple protocol: buffSize / 8 each, 512 KiB of the
#: default 4 MiB) and a ring step's chunk takes ALLREDUCE_CHUNKSTEPS = NCCL_STEPS / 2 of them
#: (src/include/collectives.h; the same for AllGather and ReduceScatter), so two are in flight.
SLOTS = 2

#: nccl-tests' busbw = algbw * factor(n), per collective (doc/PERFORMANCE.md, "Summary")
_BUS_FACTOR = {
    "allreduce": lambda n: 2 * (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "reducescatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "alltoall": lambda n: (n - 1) / n,
}


def bus_factor(kind: str, n: int) -> float:
    """nccl-tests' busbw / algbw ratio for collective `kind` on n ranks."""
    if kind not in _BUS_FACTOR:
        raise ScenarioError(f"collective kind: unknown {kind!r}; known: {sorted(_BUS_FACTOR)}")
    return float(_BUS_FACTOR[kind](n))


@dataclasses.dataclass(frozen=True)
class Transfer:
    """What one flow carries: part (channel, chunk) of `blocks`, from rank `src` to rank `dst`.

    op: "reduce" (the receiver adds it into its copy) or "copy" (the receiver stores it).
    step: the algorithm step (0-based) the flow belongs to.
    """

    flow: str
    src: str
    dst: str
    blocks: tuple[int, ...]
    channel: int
    chunk: int
    step: int
    op: str


@dataclasses.dataclass(frozen=True)
class Collective:
    """A collective compiled to a workload, with what each flow carries and nccl-tests' accounting.

    Attributes:
        kind: "allreduce", "allgather", "reducescatter", "broadcast", "reduce" or "alltoall".
        algorithm: "ring", "tree" (double binary tree), "binary_tree", "halving_doubling" or "direct".
        ranks: node names; rank i is ranks[i] (block ownership follows this numbering).
        size: S in bytes, in nccl-tests' sense (see the module docstring).
        workload: the flows and reduction tasks.
        transfers: one per flow, in flow order.
        blocks: the number of data blocks (see `Transfer.blocks`): the buffer cut into equal blocks, or
            for AllToAll the n * n blocks rank i sends to rank j, n of them per rank.
        steps: dependent communication steps a chunk goes through (the latency term's multiplier).
        chunks, channels: the pipelining and the parallel rings (or trees) the bytes are split over.
        root: index of the root rank (Broadcast, Reduce), else None.
        step_overhead: the explicit per-flow software cost (s); None when not given, so that
            `scenario` applies fitted software costs (a `netsim.CostModel`) when it is given them.
        slots: pieces one connection has in flight at most (None: unbounded).
    """

    kind: str
    algorithm: str
    ranks: tuple[str, ...]
    size: float
    workload: Workload
    transfers: tuple[Transfer, ...]
    blocks: int
    steps: int
    chunks: int
    channels: int
    root: int | None = None
    step_overhead: float | None = None
    slots: int | None = SLOTS

    @property
    def n(self) -> int:
        return len(self.ranks)

    @property
    def block_bytes(self) -> float:
        """Bytes of one block: S / blocks, or S / n for AllToAll."""
        return self.size / (self.n if self.kind == "alltoall" else self.blocks)

    @property
    def bus_factor(self) -> float:
        return bus_factor(self.kind, self.n)

    def algbw(self, time: float) -> float:
        """nccl-tests' algorithm bandwidth S / t (bytes/s) for a run that took `time` s."""
        return self.size / time

    def busbw(self, time: float) -> float:
        """nccl-tests' bus bandwidth algbw * factor (bytes/s), comparable to a link's bandwidth."""
        return self.algbw(time) * self.bus_factor

    def scenario(
        self, fabric: Fabric, costs: CostModel | None = None, *, name: str | None = None
    ) -> Scenario:
        """The collective on `fabric`; flows without an explicit route take `fabric.route(src, dst)`.

        With a calibrated machine's software costs (`costs`, e.g. `netsim.topology.load_costs(name)`) and
        no explicit `step_overhead`, every flow pays the calibrated per-step overhead and payload
        efficiency at its bytes, and the collective its launch cost (`CostModel.apply`).
        """
        scenario = self.workload.scenario(fabric, name=name)
        return costs.apply(scenario) if costs is not None and self.step_overhead is None else scenario

    def __repr__(self) -> str:
        return (
            f"Collective({self.kind}/{self.algorithm}, n={self.n}, size={format_quantity(self.size, 'bytes')}, "
            f"{len(self.workload.flows)} flows, {len(self.workload.tasks)} tasks, steps={self.steps})"
        )


# --- public builders ------------------------------------------------------------------------------


def allreduce(
    ranks: Sequence[str],
    size: float | str,
    *,
    algorithm: str = "ring",
    chunks: int = 1,
    channels: int = 1,
    rings: Sequence[Sequence[str]] | None = None,
    step_overhead: float | str | None = None,
    routes: Mapping[tuple[str, str], Sequence[str]] | None = None,
    reduce_bandwidth: float | str | None = None,
    slots: int | None = SLOTS,
    name: str = "allreduce",
) -> Collective:
    """AllReduce of an S-byte buffer on every rank.

    Args:
        ranks: node names on the fabric, at least 2, distinct.
        size: S in bytes (or with a unit: "64 MiB"): each rank's buffer.
        algorithm: "ring" (ReduceScatter then AllGather), "tree" (NCCL's double binary tree, half the
            bytes on each tree), "binary_tree" (one tree: reduce up, then broadcast down), or
            "halving_doubling" (Rabenseifner: recursive-halving ReduceScatter, recursive-doubling
            AllGather; a non-power-of-two n folds its extra ranks in first and out last).
        chunks: parts each channel's data is pipelined in (C).
        channels: parallel rings/trees, splitting the bytes evenly (K).
        rings: one rank order per channel (cycled); default: `ranks` for every channel. Trees and
            halving-doubling number the ranks by this order.
        step_overhead: fixed software cost (s, or "2 us") of every flow, before its first byte. None:
            0, or the calibrated model where `Collective.scenario` is given fitted costs.
        routes: explicit routes (link ids) per (src, dst) pair; other pairs take the fabric's route.
        reduce_bandwidth: if set (bytes/s), every reducing receive is followed by a reduction task
            on the receiving node taking bytes / reduce_bandwidth s, which later sends wait for.
        slots: pieces (one chunk of one step) a connection (sender, receiver, channel) has in flight
            at most; its pieces leave step by step, each step's chunks in order. Default `SLOTS` = 2, as
            NCCL (8 FIFO slots per connection, 4 per ring step's chunk); None: unbounded (every step
            whose data is ready sends at once). See docs/collectives.md.
        name: prefix of every flow and task id.
    """
    return _build(
        "allreduce",
        ranks,
        size,
        algorithm,
        chunks,
        channels,
        rings,
        step_overhead,
        routes,
        reduce_bandwidth,
        name,
        None,
        slots,
    )


def reducescatter(
    ranks: Sequence[str],
    size: float | str,
    *,
    algorithm: str = "ring",
    chunks: int = 1,
    channels: int = 1,
    rings: Sequence[Sequence[str]] | None = None,
    step_overhead: float | str | None = None,
    routes: Mapping[tuple[str, str], Sequence[str]] | None = None,
    reduce_bandwidth: float | str | None = None,
    slots: int | None = SLOTS,
    name: str = "reducescatter",
) -> Collective:
    """ReduceScatter of an S-byte input per rank; rank i ends with reduced block i (S / n bytes).

    Arguments as for `allreduce`; the only algorithm is "ring".
    """
    return _build(
        "reducescatter",
        ranks,
        size,
        algorithm,
        chunks,
        channels,
        rings,
        step_overhead,
        routes,
        reduce_bandwidth,
        name,
        None,
        slots,
    )


def allgather(
    ranks: Sequence[str],
    size: float | str,
    *,
    algorithm: str = "ring",
    chunks: int = 1,
    channels: int = 1,
    rings: Sequence[Sequence[str]] | None = None,
    step_overhead: float | str | None = None,
    routes: Mapping[tuple[str, str], Sequence[str]] | None = None,
    slots: int | None = SLOTS,
    name: str = "allgather",
) -> Collective:
    """AllGather: rank i contributes block i (S / n bytes); every rank ends with all S bytes.

    Arguments as for `allreduce`; the only algorithm is "ring".
    """
    return _build(
        "allgather",
        ranks,
        size,
        algorithm,
        chunks,
        channels,
        rings,
        step_overhead,
        routes,
        None,
        name,
        None,
        slots,
    )


def broadcast(
    ranks: Sequence[str],
    size: float | str,
    *,
    root: int = 0,
    algorithm: str = "ring",
    chunks: int = 1,
    channels: int = 1,
    rings: Sequence[Sequence[str]] | None = None,
    step_overhead: float | str | None = None,
    routes: Mapping[tuple[str, str], Sequence[str]] | None = None,
    slots: int | None = SLOTS,
    name: str = "broadcast",
) -> Collective:
    """Broadcast of S bytes from ranks[root], pipelined in chunks along each channel's ring from the root.

    Arguments as for `allreduce`; root is an index into `ranks`.
    """
    return _build(
        "broadcast",
        ranks,
        size,
        algorithm,
        chunks,
        channels,
        rings,
        step_overhead,
        routes,
        None,
        name,
        root,
        slots,
    )


def reduce(
    ranks: Sequence[str],
    size: float | str,
    *,
    root: int = 0,
    algorithm: str = "ring",
    chunks: int = 1,
    channels: int = 1,
    rings: Sequence[Sequence[str]] | None = None,
    step_overhead: float | str | None = None,
    routes: Mapping[tuple[str, str], Sequence[str]] | None = None,
    reduce_bandwidth: float | str | None = None,
    slots: int | None = SLOTS,
    name: str = "reduce",
) -> Collective:
    """Reduce of S bytes per rank into ranks[root], pipelined along each channel's ring, ending at the root.

    Arguments as for `allreduce`; root is an index into `ranks`.
    """
    return _build(
        "reduce",
        ranks,
        size,
        algorithm,
        chunks,
        channels,
        rings,
        step_overhead,
        routes,
        reduce_bandwidth,
        name,
        root,
        slots,
    )


def alltoall(
    ranks: Sequence[str],
    size: float | str,
    *,
    algorithm: str = "direct",
    chunks: int = 1,
    channels: int = 1,
    step_overhead: float | str | None = None,
    routes: Mapping[tuple[str, str], Sequence[str]] | None = None,
    slots: int | None = SLOTS,
    name: str = "alltoall",
) -> Collective:
    """AllToAll: every rank sends S / n bytes to every other rank, all pairs at once (grouped send/recv).

    Block i * n + j is the part rank i sends to rank j. Arguments as for `allreduce`.
    """
    return _build(
        "alltoall",
        ranks,
        size,
        algorithm,
        chunks,
        channels,
        None,
        step_overhead,
        routes,
        None,
        name,
        None,
        slots,
    )


# --- validation and the flow builder ----------------------------------------------------------------


def _build(
    kind,
    ranks,
    size,
    algorithm,
    chunks,
    channels,
    rings,
    step_overhead,
    routes,
    reduce_bandwidth,
    name,
    root,
    slots,
) -> Collective:
    ranks = _check_ranks(ranks)
    n = len(ranks)
    size = quantity(size, "bytes", "size")
    if algorithm not in ALGORITHMS[kind]:
        raise ScenarioError(
            f"algorithm: {kind} has no algorithm {algorithm!r}; known: {list(ALGORITHMS[kind])}"
        )
    for field, value in (("chunks", chunks), ("channels", channels)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ScenarioError(f"{field}: must be an integer >= 1, got {value!r}")
    if root is not None and (not isinstance(root, int) or isinstance(root, bool) or not 0 <= root < n):
        raise ScenarioError(f"root: must be a rank index in [0, {n}), got {root!r}")
    orders = _check_rings(rings, ranks)
    b = _Builder(
        name, ranks, 0.0 if step_overhead is None else step_overhead, routes, reduce_bandwidth, slots
    )
    schedule = _SCHEDULES[(kind, algorithm)]
    blocks, steps = schedule(b, size, chunks, channels, orders, root)
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
        None if step_overhead is None else b.overhead,
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


class _Builder:
    """Accumulates flows, reduction tasks and transfer records; ids are f"{name}/{tag}"."""

    def __init__(self, name, ranks, step_overhead, routes, reduce_bandwidth, slots):
        if not isinstance(name, str) or not name:
            raise ScenarioError(f"name: must be a non-empty string, got {name!r}")
        if slots is not None and (not isinstance(slots, int) or isinstance(slots, bool) or slots < 1):
            raise ScenarioError(f"slots: must be an integer >= 1 or None (unbounded), got {slots!r}")
        self.name, self.ranks, self.slots = name, ranks, slots
        self.overhead = quantity(step_overhead, "time", "step_overhead")
        self.reduce_bandwidth = None
        if reduce_bandwidth is not None:
            self.reduce_bandwidth = quantity(reduce_bandwidth, "bandwidth", "reduce_bandwidth", positive=True)
        self.routes: dict[tuple[str, str], tuple[str, ...]] = {}
        for pair, route in (routes or {}).items():
            if not (isinstance(pair, tuple) and len(pair) == 2 and all(p in ranks for p in pair)):
                raise ScenarioError(f"routes: keys must be (src, dst) pairs of ranks, got {pair!r}")
            if isinstance(route, str) or not route:
                raise ScenarioError(f"routes[{pair!r}]: expected a non-empty list of link ids, got {route!r}")
            self.routes[pair] = tuple(route)
        self.flows: list[Flow] = []
        self.tasks: list[Task] = []
        self.transfers: list[Transfer] = []
        # connection (channel, lane, src, dst) -> [((step, chunk), flow index, ready id)]
        self.connections: dict[tuple, list[tuple[tuple[int, int], int, str]]] = collections.defaultdict(list)

    def previous(self, channel: int, chunk: int, rest: str) -> str | None:
        """Id of the same connection's flow one chunk earlier (tags are f"k{channel}/c{chunk}/{rest}")."""
        return f"{self.name}/k{channel}/c{chunk - 1}/{rest}" if chunk > 0 else None

    def send(
        self,
        tag: str,
        src: int,
        dst: int,
        nbytes: float,
        after: Sequence[str | None],
        *,
        blocks: Sequence[int],
        channel: int,
        chunk: int,
        step: int,
        op: str,
        lane: int = 0,
    ) -> tuple[str, str]:
        """Adds one flow from rank index src to dst, after the non-None ids in `after`.

        `lane` tells apart connections of one channel between the same ranks (the two trees of the
        double tree). Returns (flow id, ready id): the ready id is what a later use of the received
        data waits for: the flow itself, or the reduction task that follows a reducing receive.
        """
        fid = f"{self.name}/{tag}"
        a, b = self.ranks[src], self.ranks[dst]
        deps = tuple(dict.fromkeys(x for x in after if x is not None))
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

        Within one step the chunk order (`previous`) already implies it, so only waits on an earlier
        step are added. Every other dependency points to an earlier step, or to an earlier chunk of
        the same step, so these (to earlier pieces in the same order) keep the graph acyclic.
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


# --- schedules: each returns (blocks, steps) ---------------------------------------------------------


def _ring_schedule(phases: str):
    """Ring ReduceScatter ("r"), AllGather ("g") or AllReduce ("rg") on every channel's ring order.

    Ring position i sends to i + 1 at every step. At reduce step s, position i sends (its partial sum of)
    the block owned by position i - s - 1, so after n - 1 steps position i holds its own block fully
    reduced; at gather step s it sends the complete block owned by position i - s. Dependency rule:
    send(step s, chunk c, position i) waits for the step s - 1 receive of chunk c at position i (the
    flow sent by position i - 1 at step s - 1, or its reduction task), and for send(s, c - 1, i).
    The receive at step s - 1 carries exactly the block sent at step s, so this is the data dependency.
    """

    def schedule(b: _Builder, size, chunks, channels, orders, root):
        n = len(b.ranks)
        steps = [("reduce", s + 1) for s in range(n - 1) if "r" in phases]
        steps += [("copy", s) for s in range(n - 1) if "g" in phases]
        part = size / (n * channels * chunks)
        for k in range(channels):
            ring = orders[k % len(orders)]
            for c in range(chunks):
                ready: list[str | None] = [None] * n  # position -> ready id of its last receive of chunk c
                for s, (op, offset) in enumerate(steps):
                    received = [None] * n
                    for i in range(n):
                        _, received[(i + 1) % n] = b.send(
                            f"k{k}/c{c}/s{s}/p{i}",
                            ring[i],
                            ring[(i + 1) % n],
                            part,
                            (ready[i], b.previous(k, c, f"s{s}/p{i}")),
                            blocks=(ring[(i - offset) % n],),
                            channel=k,
                            chunk=c,
                            step=s,
                            op=op,
                        )
                    ready = received
        return n, len(steps)

    return schedule


def _chain_schedule(kind: str):
    """Broadcast or Reduce along each channel's ring, as a chain of n - 1 hops.

    Broadcast: the chain starts at the root (the ring rotated to put the root first); Reduce: it ends
    at the root (the root last). Dependency rule: hop h's send of chunk c waits for hop h - 1's receive
    of chunk c at the same node (or its reduction task), and for hop h's send of chunk c - 1: the
    chunks pipeline, n - 2 + C steps of one chunk each on an ideal chain.
    """
    op = "copy" if kind == "broadcast" else "reduce"

    def schedule(b: _Builder, size, chunks, channels, orders, root):
        n = len(b.ranks)
        part = size / (channels * chunks)
        for k in range(channels):
            ring = orders[k % len(orders)]
            at = ring.index(root)
            shift = at if kind == "broadcast" else at + 1
            chain = ring[shift:] + ring[:shift]
            for c in range(chunks):
                ready = None
                for h in range(n - 1):
                    _, ready = b.send(
                        f"k{k}/c{c}/h{h}",
                        chain[h],
                        chain[h + 1],
                        part,
                        (ready, b.previous(k, c, f"h{h}")),
                        blocks=(0,),
                        channel=k,
                        chunk=c,
                        step=h,
                        op=op,
                    )
        return 1, n - 1

    return schedule


def btree_parents(n: int) -> list[int]:
    """Parent of each position in NCCL's binary tree over positions 0..n-1 (root 0: parent -1).

    In-order layout: position p with lowest set bit `bit` hangs under (p ^ bit) | (bit << 1), or under
    p ^ bit when that is out of range; odd positions are leaves, so a mirrored or shifted copy makes
    them interior (the double binary tree). Depth: ceil(log2 n).
    """
    parents = [-1] * n
    for p in range(1, n):
        bit = p & -p
        up = (p ^ bit) | (bit << 1)
        parents[p] = up if up < n else p ^ bit
    return parents


def double_tree_parents(n: int) -> list[list[int]]:
    """The two trees of NCCL's double binary tree: the binary tree, and its mirror (n even) or its
    shift by one position (n odd). For even n no position is interior in both (each rank forwards
    for one tree only); for odd n position 0 is interior in both."""
    first = btree_parents(n)
    if n % 2 == 0:
        second = [-1 if first[n - 1 - p] < 0 else n - 1 - first[n - 1 - p] for p in range(n)]
    else:
        second = [-1 if first[(p - 1) % n] < 0 else (first[(p - 1) % n] + 1) % n for p in range(n)]
    return [first, second]


def tree_depths(parents: Sequence[int]) -> list[int]:
    """Edges from each position up to the root."""
    out = []
    for p in range(len(parents)):
        d = 0
        while parents[p] >= 0:
            p, d = parents[p], d + 1
        out.append(d)
    return out


def _tree_schedule(double: bool):
    """Tree AllReduce: reduce up each tree, then broadcast down, pipelined per chunk.

    Tree t carries block t (half the bytes each in the double tree). Dependency rules, per tree and
    channel: up-send(v, c) to the parent waits for the up-receives of chunk c from all of v's children
    (or their reduction tasks) and for up-send(v, c - 1); down-send(v -> w, c) waits, at the root, for
    the root's up-receives of chunk c, elsewhere for v's down-receive of chunk c, and for
    down-send(v -> w, c - 1). Reduce and broadcast of different chunks overlap.
    """

    def schedule(b: _Builder, size, chunks, channels, orders, root):
        n = len(b.ranks)
        trees = double_tree_parents(n) if double else [btree_parents(n)]
        part = size / (len(trees) * channels * chunks)
        for k in range(channels):
            pos = orders[k % len(orders)]
            for t, parents in enumerate(trees):
                children = [[q for q in range(n) if parents[q] == p] for p in range(n)]
                top = parents.index(-1)
                for c in range(chunks):
                    up: dict[int, str] = {}  # position -> ready id of its up-send's receive at the parent
                    for v in _bottom_up(parents):
                        if v == top:
                            continue
                        _, up[v] = b.send(
                            f"k{k}/c{c}/t{t}/up{v}",
                            pos[v],
                            pos[parents[v]],
                            part,
                            [up[w] for w in children[v]] + [b.previous(k, c, f"t{t}/up{v}")],
                            blocks=(t,),
                            channel=k,
                            chunk=c,
                            step=0,
                            op="reduce",
                            lane=t,
                        )
                    down: dict[int, str] = {}
                    for w in reversed(_bottom_up(parents)):
                        if w == top:
                            continue
                        v = parents[w]
                        data = [up[u] for u in children[top]] if v == top else [down[v]]
                        down[w], _ = b.send(
                            f"k{k}/c{c}/t{t}/down{w}",
                            pos[v],
                            pos[w],
                            part,
                            [*data, b.previous(k, c, f"t{t}/down{w}")],
                            blocks=(t,),
                            channel=k,
                            chunk=c,
                            step=1,
                            op="copy",
                            lane=t,
                        )
        return len(trees), 2 * max(max(tree_depths(p)) for p in trees)

    return schedule


def _bottom_up(parents: Sequence[int]) -> list[int]:
    """Positions ordered deepest first (children before parents)."""
    depths = tree_depths(parents)
    return sorted(range(len(parents)), key=lambda p: (-depths[p], p))


def _halving_doubling(b: _Builder, size, chunks, channels, orders, root):
    """Rabenseifner's AllReduce: recursive-halving ReduceScatter, then recursive-doubling AllGather.

    With p = 2^floor(log2 n) and r = n - p, positions 2i < 2r first send their whole buffer to 2i + 1
    (fold, reduce), the p survivors run the exchange, and 2i + 1 finally sends the result back (unfold,
    copy). The buffer has p blocks. Halving step k (partner at distance p / 2^(k+1)) sends the half of
    the current block range the partner keeps; doubling step k (distance 2^k) sends the whole range.
    Dependency rule: a survivor's send at step k of chunk c waits for its step k - 1 receive of chunk c
    (or its reduction task), for its own step k - 1 send of chunk c (so all its earlier receives
    precede: its program order), and for its step k send of chunk c - 1.
    """
    n = len(b.ranks)
    m = n.bit_length() - 1
    p = 1 << m
    r = n - p
    part = size / (p * channels * chunks)
    everything = tuple(range(p))
    for k in range(channels):
        pos = orders[k % len(orders)]
        survivors = [2 * i + 1 for i in range(r)] + list(range(2 * r, n))
        for c in range(chunks):
            ready: list[str | None] = [None] * p  # survivor -> ready id of its last receive of chunk c
            sent: list[str | None] = [None] * p  # survivor -> its last send of chunk c
            for i in range(r):
                _, ready[i] = b.send(
                    f"k{k}/c{c}/fold{i}",
                    pos[2 * i],
                    pos[2 * i + 1],
                    part * p,
                    (b.previous(k, c, f"fold{i}"),),
                    blocks=everything,
                    channel=k,
                    chunk=c,
                    step=0,
                    op="reduce",
                )
            lo, hi = [0] * p, [p] * p  # block range each survivor holds
            exchanges = [(p >> (s + 1), "reduce") for s in range(m)] + [(1 << s, "copy") for s in range(m)]
            for s, (d, op) in enumerate(exchanges):
                step = s + (1 if r else 0)
                received: list[str | None] = [None] * p
                new_lo, new_hi = lo[:], hi[:]
                for j in range(p):
                    q = j ^ d
                    if op == "reduce":  # keep the half on our side of bit d, send the other half
                        mid = (lo[j] + hi[j]) // 2
                        keep, give = (
                            ((lo[j], mid), (mid, hi[j])) if j & d == 0 else ((mid, hi[j]), (lo[j], mid))
                        )
                        new_lo[j], new_hi[j] = keep
                    else:  # send what we hold; we then hold ours and the partner's range
                        give = (lo[j], hi[j])
                        new_lo[j], new_hi[j] = min(lo[j], lo[q]), max(hi[j], hi[q])
                    tag = f"x{s}/{j}"
                    sent[j], received[q] = b.send(
                        f"k{k}/c{c}/{tag}",
                        pos[survivors[j]],
                        pos[survivors[q]],
                        part * (give[1] - give[0]),
                        (ready[j], sent[j], b.previous(k, c, tag)),
                        blocks=tuple(range(*give)),
                        channel=k,
                        chunk=c,
                        step=step,
                        op=op,
                    )
                ready, lo, hi = received, new_lo, new_hi
            for i in range(r):
                b.send(
                    f"k{k}/c{c}/unfold{i}",
                    pos[2 * i + 1],
                    pos[2 * i],
                    part * p,
                    (ready[i], sent[i], b.previous(k, c, f"unfold{i}")),
                    blocks=everything,
                    channel=k,
                    chunk=c,
                    step=2 * m + 1,
                    op="copy",
                )
    return p, 2 * m + (2 if r else 0)


def _alltoall(b: _Builder, size, chunks, channels, orders, root):
    """Every ordered pair at once; chunk c of a pair waits for chunk c - 1 of the same pair (FIFO)."""
    n = len(b.ranks)
    part = size / (n * channels * chunks)
    for k in range(channels):
        for i in range(n):
            for j in range(n):
                if i == j:
                    continue
                for c in range(chunks):
                    b.send(
                        f"k{k}/c{c}/{i}-{j}",
                        i,
                        j,
                        part,
                        (b.previous(k, c, f"{i}-{j}"),),
                        blocks=(i * n + j,),
                        channel=k,
                        chunk=c,
                        step=0,
                        op="copy",
                    )
    return n * n, 1


_SCHEDULES = {
    ("allreduce", "ring"): _ring_schedule("rg"),
    ("reducescatter", "ring"): _ring_schedule("r"),
    ("allgather", "ring"): _ring_schedule("g"),
    ("allreduce", "tree"): _tree_schedule(double=True),
    ("allreduce", "binary_tree"): _tree_schedule(double=False),
    ("allreduce", "halving_doubling"): _halving_doubling,
    ("broadcast", "ring"): _chain_schedule("broadcast"),
    ("reduce", "ring"): _chain_schedule("reduce"),
    ("alltoall", "direct"): _alltoall,
}

ALGORITHMS = {kind: tuple(a for k, a in _SCHEDULES if k == kind) for kind in _BUS_FACTOR}
