"""Ring algorithms: ReduceScatter, AllGather and AllReduce around each channel's ring, and Broadcast and
Reduce along it as a chain."""

from __future__ import annotations

from collections.abc import Sequence

from ..._scenario import ScenarioError
from ._builder import Builder, Schedule


def rail_rings(ranks: Sequence[str], channels: int | None = None) -> list[list[str]]:
    """One ring order per channel, each crossing between servers on rails of its own, as NCCL lays its
    rings on a rail-optimized fabric (GPU i's NIC on rail i): pass as `rings=` with `channels=`.

    Servers are the ranks that share the part of their name before "/" (as `cluster` names them,
    "n0/gpu3"), in the order given; `channels` defaults to the fewest ranks a server holds (one channel
    in `ranks`' order when they share one server). With g ranks on every server, ring c runs through the
    servers in order, each entered and left by its ranks of local index c and c + 1 (mod g), ascending on
    one server and descending on the next, so every hop between servers joins ranks of one local index:
    one rail. With channels = g and two servers (or any even number) every rail carries one ring each way;
    with an odd number the hop that closes each ring changes rails. Servers of unequal sizes: ring c
    enters and leaves each server by other ranks (its ranks rotated by c), rails crossed between them.

    Raises:
        ScenarioError: a rank with no server part among several servers, channels < 1.
    """
    servers: dict[str, list[str]] = {}
    for rank in ranks:
        server, named, _ = str(rank).partition("/")
        servers.setdefault(server if named else "", []).append(rank)
    groups = list(servers.values())
    if channels is None:
        channels = min(map(len, groups)) if len(groups) > 1 else 1
    if isinstance(channels, bool) or not isinstance(channels, int) or channels < 1:
        raise ScenarioError(f"channels: must be an integer >= 1, got {channels!r}")
    if len(groups) == 1:
        return [list(ranks) for _ in range(channels)]
    if "" in servers:
        raise ScenarioError(
            f"ranks: {servers[''][0]!r} names no server (expected SERVER/GPU, as cluster names them)"
        )
    sizes = {len(members) for members in groups}
    rings = []
    for c in range(channels):
        ring = []
        for s, members in enumerate(groups):
            g = len(members)
            if len(sizes) > 1:  # no common rails: leave each server by other ranks per channel
                order = range(c, c + g)
            else:
                order = (c + 1 + i if s % 2 == 0 else c - i for i in range(g))  # ends on c / on c + 1
            ring += [members[k % g] for k in order]
        rings.append(ring)
    return rings


def _ring(phases: str) -> Schedule:
    """Ring ReduceScatter ("r"), AllGather ("g") or AllReduce ("rg") on every channel's ring order.

    Ring position i sends to i + 1 at every step. At reduce step s, position i sends (its partial sum of)
    the block owned by position i - s - 1, so after n - 1 steps position i holds its own block fully
    reduced; at gather step s it sends the complete block owned by position i - s. Dependency rule:
    send(step s, chunk c, position i) waits for the step s - 1 receive of chunk c at position i (the
    flow sent by position i - 1 at step s - 1, or its reduction task), and for send(s, c - 1, i).
    The receive at step s - 1 carries exactly the block sent at step s, so this is the data dependency.
    """

    def schedule(b: Builder) -> tuple[int, int]:
        n = b.n
        steps = [("reduce", s + 1) for s in range(n - 1) if "r" in phases]
        steps += [("copy", s) for s in range(n - 1) if "g" in phases]
        part = b.size / (n * b.channels * b.chunks)
        for k in range(b.channels):
            ring = b.order(k)
            for c in range(b.chunks):
                ready: list[str | None] = [None] * n  # position -> ready id of its last receive of chunk c
                for s, (op, offset) in enumerate(steps):
                    received: list[str | None] = [None] * n
                    for i in range(n):
                        _, received[(i + 1) % n] = b.send(
                            k,
                            c,
                            f"s{s}/p{i}",
                            ring[i],
                            ring[(i + 1) % n],
                            part,
                            (ready[i],),
                            blocks=(ring[(i - offset) % n],),
                            step=s,
                            op=op,
                        )
                    ready = received
        return n, len(steps)

    return schedule


def _chain(kind: str) -> Schedule:
    """Broadcast or Reduce along each channel's ring, as a chain of n - 1 hops.

    Broadcast: the chain starts at the root (the ring rotated to put the root first); Reduce: it ends
    at the root (the root last). Dependency rule: hop h's send of chunk c waits for hop h - 1's receive
    of chunk c at the same node (or its reduction task), and for hop h's send of chunk c - 1: the
    chunks pipeline, n - 2 + C steps of one chunk each on an ideal chain.
    """
    op = "copy" if kind == "broadcast" else "reduce"

    def schedule(b: Builder) -> tuple[int, int]:
        part = b.size / (b.channels * b.chunks)
        for k in range(b.channels):
            ring = b.order(k)
            at = ring.index(b.root)
            shift = at if kind == "broadcast" else at + 1
            chain = ring[shift:] + ring[:shift]
            for c in range(b.chunks):
                ready = None
                for h in range(b.n - 1):
                    _, ready = b.send(
                        k, c, f"h{h}", chain[h], chain[h + 1], part, (ready,), blocks=(0,), step=h, op=op
                    )
        return 1, b.n - 1

    return schedule


allreduce = _ring("rg")
reducescatter = _ring("r")
allgather = _ring("g")
broadcast = _chain("broadcast")
reduce = _chain("reduce")
