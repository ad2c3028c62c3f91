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
The algorithm-specific rules are written next to each schedule: one module per algorithm family
(`_ring`, `_tree`, `_halving_doubling`, `_alltoall`), each a `Schedule` over the one flow builder
(`_builder.Builder`), which adds the shared rules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# kept for netsim.studies, which imports `quantity` from here (its home is netsim._checks)
from ..._checks import quantity as quantity
from . import _alltoall, _halving_doubling, _ring, _tree
from ._builder import Schedule, build
from ._collective import SLOTS, Collective, Transfer, bus_factor
from ._ring import rail_rings
from ._tree import btree_parents, double_tree_parents, tree_depths

__all__ = [
    "SLOTS",
    "Collective",
    "Transfer",
    "allgather",
    "allreduce",
    "alltoall",
    "broadcast",
    "btree_parents",
    "bus_factor",
    "double_tree_parents",
    "rail_rings",
    "reduce",
    "reducescatter",
    "tree_depths",
]

#: each collective's algorithms by name, in the order `algorithm` errors list them
_SCHEDULES: dict[str, dict[str, Schedule]] = {
    "allreduce": {
        "ring": _ring.allreduce,
        "tree": _tree.double_tree,
        "binary_tree": _tree.binary_tree,
        "halving_doubling": _halving_doubling.allreduce,
    },
    "allgather": {"ring": _ring.allgather},
    "reducescatter": {"ring": _ring.reducescatter},
    "broadcast": {"ring": _ring.broadcast},
    "reduce": {"ring": _ring.reduce},
    "alltoall": {"direct": _alltoall.direct},
}

ALGORITHMS = {kind: tuple(schedules) for kind, schedules in _SCHEDULES.items()}

# Each builder hands its arguments, by name (`locals()`), to the one builder, which checks them.


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
    return build("allreduce", _SCHEDULES["allreduce"], **locals())


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
    return build("reducescatter", _SCHEDULES["reducescatter"], **locals())


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
    return build("allgather", _SCHEDULES["allgather"], **locals())


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
    return build("broadcast", _SCHEDULES["broadcast"], **locals())


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
    return build("reduce", _SCHEDULES["reduce"], **locals())


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
    return build("alltoall", _SCHEDULES["alltoall"], **locals())
