"""What a compiled collective is: the `Collective`, the `Transfer` record of each flow, nccl-tests' bus factors."""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

from ..._checks import show
from ..._scenario import Scenario, ScenarioError
from ..._units import format_quantity
from .._base import Fabric, Workload

if TYPE_CHECKING:
    from ..._costs import CostModel

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


def _run_time(time, where: str) -> float:
    """`time` (s; a number or a 0-d array such as a result's makespan) as a float, if finite and > 0."""
    try:
        t = None if isinstance(time, bool | str | bytes) else float(time)
    except (TypeError, ValueError, OverflowError):
        t = None
    if t is None or not math.isfinite(t) or t <= 0:
        raise ScenarioError(f"{where}: time: must be a finite number of seconds > 0, got {show(time)}")
    return t


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
        size: S in bytes, in nccl-tests' sense (see the `netsim.workloads.collectives` docstring).
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
        """nccl-tests' algorithm bandwidth S / t (bytes/s) for a run that took `time` s (a finite number
        > 0, else ScenarioError)."""
        return self.size / _run_time(time, "algbw")

    def busbw(self, time: float) -> float:
        """nccl-tests' bus bandwidth algbw * factor (bytes/s), comparable to a link's bandwidth."""
        return self.size / _run_time(time, "busbw") * self.bus_factor

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
