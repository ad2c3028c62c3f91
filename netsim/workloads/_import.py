"""Imported workloads (SimAI text files, Chakra execution traces): per-rank programs built into one Workload,
simulated on a topology, and reported as other simulators report them (iteration time, exposed communication,
critical path).

`RankProgram` is the builder both readers use: every rank runs compute tasks on its own GPU and joins
collectives or point-to-point transfers; each operation waits on what the rank did before it (its `after`
ids). A collective's root flows wait on the issuing ranks of both their ends (a rendezvous, as NCCL's
kernels only move data once both ends have launched); rank r's part of a collective is done when every
flow it sends or receives is done.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from .._scenario import Flow, Scenario, ScenarioError, Task
from .._units import format_bytes, format_quantity
from . import collectives
from ._base import Fabric, Workload

if TYPE_CHECKING:
    from .._costs import CostModel

__all__ = ["CollectiveCall", "ImportedRun", "RankProgram", "simulate_workload"]

#: collective kinds an imported workload may use (the builders of netsim.workloads.collectives)
KINDS = ("allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce")


@dataclasses.dataclass(frozen=True)
class CollectiveCall:
    """One collective of an imported workload: `size` bytes (nccl-tests' S) over `n_ranks` ranks, moved by
    the flows `flow_ids`; once simulated, `start` (its first flow's start) and `finish` (its last flow's), s."""

    name: str
    kind: str
    n_ranks: int
    size: float
    flow_ids: tuple[str, ...]
    start: float = float("nan")
    finish: float = float("nan")

    @property
    def time(self) -> float:
        return self.finish - self.start

    @property
    def busbw(self) -> float:
        """nccl-tests' bus bandwidth (bytes/s): S / time x the collective's bus factor."""
        return self.size / self.time * collectives.bus_factor(self.kind, self.n_ranks)


class RankProgram:
    """Accumulates the flows and tasks of an SPMD program over `ranks` (node names; rank i is ranks[i]).

    Ids are the caller's; every method returns, per rank, the ids the rank's next operation must wait on.
    `costs`: a calibrated machine's software costs, which collectives pay as `Collective.scenario` does
    (the launch cost goes into the first flows' overhead).
    """

    def __init__(self, ranks: Sequence[str], costs: CostModel | None = None):
        self.ranks = tuple(ranks)
        self.flows: list[Flow] = []
        self.tasks: list[Task] = []
        self.costs = costs
        self.collectives: list[CollectiveCall] = []

    def compute(self, rank: int, id: str, duration: float, after: Iterable[str]) -> tuple[str, ...]:
        """A task of `duration` s on rank's GPU; returns its id (or `after` unchanged for duration 0)."""
        after = tuple(dict.fromkeys(after))
        if duration <= 0:
            return after
        self.tasks.append(Task(id, self.ranks[rank], duration, after=after))
        return (id,)

    def delay(self, rank: int, id: str, duration: float, after: Iterable[str]) -> tuple[str, ...]:
        """A wait of `duration` s that is not compute (a task on the rank's "NODE comm" device, so it
        neither shares the GPU nor counts as its busy time)."""
        after = tuple(dict.fromkeys(after))
        if duration <= 0:
            return after
        self.tasks.append(Task(id, f"{self.ranks[rank]} comm", duration, after=after))
        return (id,)

    def collective(
        self, kind: str, group: Sequence[int], size: float, name: str, after: Mapping[int, Iterable[str]]
    ) -> dict[int, tuple[str, ...]]:
        """Collective `kind` of `size` bytes (nccl-tests' S) over ranks `group` (indices), ring algorithm
        (direct for alltoall); `after[r]`: what rank r must finish first. Returns, per rank of the group,
        the ids that finish its part. A group of one rank or a size of 0 moves nothing."""
        if kind not in KINDS:
            raise ScenarioError(f"collective kind: unknown {kind!r}; known: {list(KINDS)}")
        issued = {r: tuple(dict.fromkeys(after.get(r, ()))) for r in group}
        if len(group) < 2 or size <= 0:
            return issued
        algorithm = "direct" if kind == "alltoall" else "ring"
        built = getattr(collectives, kind)(
            [self.ranks[r] for r in group], size, algorithm=algorithm, name=name
        )
        flows = list(built.workload.flows)
        if self.costs is not None:
            launch = self.costs.launch
            flows = [
                dataclasses.replace(f, start=0.0, overhead=f.overhead + (0.0 if f.after else launch))
                for f in self.costs.apply(Scenario((), flows)).flows
            ]
        node_rank = {self.ranks[r]: r for r in group}
        flows = [
            f
            if f.after
            else dataclasses.replace(f, after=issued[node_rank[f.src]] + issued[node_rank[f.dst]])
            for f in flows
        ]
        self.flows += flows
        self.tasks += built.workload.tasks
        self.collectives.append(
            CollectiveCall(name, kind, len(group), float(size), tuple(f.id for f in flows))
        )
        return self._done(flows, group)

    def transfer(
        self, id: str, src: int, dst: int, size: float, after_src: Iterable[str], after_dst: Iterable[str]
    ) -> tuple[str, ...]:
        """A point-to-point flow (send/recv pair) once both ends are ready; returns its id (or both ends'
        ids when size is 0 or src == dst)."""
        after = tuple(dict.fromkeys((*after_src, *after_dst)))
        if size <= 0 or src == dst:
            return after
        self.flows.append(Flow(id, self.ranks[src], self.ranks[dst], size, after=after))
        return (id,)

    def workload(self, name: str = "") -> Workload:
        return Workload(self.flows, self.tasks, name)

    def _done(self, flows: Sequence[Flow], group: Sequence[int]) -> dict[int, tuple[str, ...]]:
        """Per rank, the flows it sends or receives that no other such flow waits on: when they are done,
        all of the rank's flows are (a successor starts after its predecessor finishes)."""
        touching: dict[str, set[str]] = {}
        for f in flows:
            for node in (f.src, f.dst):
                touching.setdefault(node, set()).add(f.id)
        waited: dict[str, set[str]] = {node: set() for node in touching}
        for f in flows:
            for a in f.after:
                for node in (f.src, f.dst):
                    if a in touching[node]:
                        waited[node].add(a)
        out = {}
        for r in group:
            node = self.ranks[r]
            out[r] = tuple(f.id for f in flows if f.id in touching.get(node, ()) and f.id not in waited[node])
        return out


@dataclasses.dataclass(frozen=True)
class ImportedRun:
    """An imported workload simulated on a topology.

    Attributes:
        name: the workload's name (its file).
        ranks: the GPU (node) of each rank.
        result: the netsim.Result of the simulation (flows, tasks, links).
        iteration_time: s from the first operation to the last (the makespan).
        compute: per rank, s its GPU ran at least one compute task.
        exposed: per rank, s of the iteration its GPU did not compute: waiting on communication that
            no compute hid (iteration_time - compute; includes the wait for the last collectives).
        critical_path: the chain of flows and tasks that set the iteration time (`netsim.timeline.Step`).
        collectives: each collective with its simulated start and finish (`CollectiveCall`), in issue order.
    """

    name: str
    ranks: tuple[str, ...]
    result: object
    iteration_time: float
    compute: np.ndarray
    exposed: np.ndarray
    critical_path: tuple
    collectives: tuple[CollectiveCall, ...] = ()

    @property
    def exposed_max(self) -> float:
        """The largest exposed communication time of any rank (s)."""
        return float(self.exposed.max()) if self.exposed.size else 0.0

    def save_trace(self, path: str | os.PathLike) -> None:
        """Writes the Chrome / Perfetto trace JSON of the run (netsim.timeline.save_trace)."""
        from ..timeline import save_trace

        save_trace(self.result, path)

    def summary(self, top: int = 10) -> str:
        """Iteration time, exposed communication per rank (the largest first) and the critical path."""
        t = lambda s: format_quantity(s, "time")
        n_flows, n_tasks = len(self.result.flow_ids), len(self.result.task_ids)
        lines = [
            f"workload {self.name}: {len(self.ranks)} ranks, {n_flows} flows, {n_tasks} tasks",
            f"iteration time     {t(self.iteration_time)}",
            f"exposed comm (max) {t(self.exposed_max)}  "
            f"({self.exposed_max / self.iteration_time:.1%} of the iteration)"
            if self.iteration_time > 0
            else "exposed comm (max) 0 s",
            "",
            f"{'rank':>5}  {'gpu':<12} {'compute':>12} {'exposed comm':>13}",
        ]
        # ranks that read the same (SPMD programs usually do) share a row
        rows: dict[tuple[str, str], list[int]] = {}
        for r in np.argsort(-self.exposed, kind="stable"):
            rows.setdefault((t(float(self.compute[r])), t(float(self.exposed[r]))), []).append(int(r))
        for (compute, exposed), ranks in list(rows.items())[:top]:
            rank, gpu = str(ranks[0]), self.ranks[ranks[0]]
            if len(ranks) > 1:
                rank, gpu = _span(ranks), f"{len(ranks)} GPUs"
            lines.append(f"{rank:>5}  {gpu:<12} {compute:>12} {exposed:>13}")
        if len(rows) > top:
            lines.append(f"       ... {sum(map(len, list(rows.values())[top:]))} more ranks")
        if self.collectives:
            slow = sorted(self.collectives, key=lambda c: -c.time)[:top]
            lines += [
                "",
                f"collectives ({len(self.collectives)}, the longest first; time from first flow to last):",
                f"  {'collective':<40} {'ranks':>5} {'size':>10} {'time':>10} {'busbw':>11}",
            ]
            for c in slow:
                lines.append(
                    f"  {c.name:<40} {c.n_ranks:>5} {format_bytes(c.size):>10} {t(c.time):>10} "
                    f"{c.busbw / 1e9:>6.2f} GB/s"
                )
            if len(self.collectives) > top:
                lines.append(f"  ... {len(self.collectives) - top} more")
        lines += ["", f"critical path ({len(self.critical_path)} items):"]
        shown = self.critical_path if len(self.critical_path) <= 2 * top else self.critical_path[-2 * top :]
        if len(shown) < len(self.critical_path):
            lines.append(f"  ... {len(self.critical_path) - len(shown)} earlier items")
        for step in shown:
            lines.append(f"  {step.kind:<4} {step.id:<48} {t(step.start):>12} +{t(step.duration)}")
        return "\n".join(lines)


def simulate_workload(
    source,
    fabric: Fabric,
    *,
    costs: CostModel | None = None,
    ranks: Sequence[str] | None = None,
    tolerance: float = 0.0,
    max_events: int | None = None,
    progress: bool = False,
) -> ImportedRun:
    """Simulates an imported workload on a topology and reports it.

    Args:
        source: a `SimAIWorkload` (`read_simai`), a `ChakraTrace` (`read_chakra`), or a path: a SimAI
            text file, a Chakra .et file, a list of .et files (rank i is the i-th), or an ASTRA-sim
            prefix whose files are PREFIX.0.et, PREFIX.1.et, ...
        fabric: a netsim.topology.Topology (or any Fabric).
        costs: the machine's fitted software costs (`netsim.topology.load_costs`), paid by collectives.
        ranks: the node of each rank; default the first N GPUs of the topology (`Topology.gpus()`).
        tolerance, max_events, progress: as for netsim.simulate.

    Raises:
        ScenarioError: the file is malformed (naming file:line or the node), uses what is not supported,
            or the topology has fewer GPUs than the workload has ranks.
    """
    from .._simulate import simulate
    from ..timeline import critical_path
    from ._import_chakra import ChakraTrace, read_chakra
    from ._import_simai import SimAIWorkload, read_simai

    if isinstance(source, str | os.PathLike) and _is_simai(source):
        source = read_simai(source)
    elif not isinstance(source, SimAIWorkload | ChakraTrace):
        source = read_chakra(source)
    n = source.n_ranks
    if ranks is None:
        if not hasattr(fabric, "gpus"):
            raise ScenarioError("ranks: this fabric has no GPU list (Topology.gpus); pass ranks=[...]")
        gpus = tuple(fabric.gpus())
        if len(gpus) < n:
            raise ScenarioError(
                f"topology: {source.name} has {n} ranks but {getattr(fabric, 'name', 'the topology')!r} has "
                f"only {len(gpus)} GPUs"
            )
        ranks = gpus[:n]
    ranks = tuple(ranks)
    if len(ranks) != n or len(set(ranks)) != n:
        raise ScenarioError(f"ranks: need {n} distinct nodes, one per rank, got {list(ranks)}")
    program = source.program(ranks, costs)
    workload = program.workload(source.name)
    if not workload.flows and not workload.tasks:
        raise ScenarioError(f"{source.name}: nothing to simulate (no compute time and no bytes moved)")
    scenario = workload.scenario(fabric, name=source.name)
    result = simulate(scenario, tolerance=tolerance, max_events=max_events, progress=progress)
    busy = dict(zip(result.device_ids, map(float, result.device_busy), strict=True))
    compute = np.array([busy.get(node, 0.0) for node in ranks])
    exposed = np.maximum(result.makespan - compute, 0.0)
    flow = {f: i for i, f in enumerate(result.flow_ids)}
    called = []
    for c in program.collectives:
        at = [flow[f] for f in c.flow_ids]
        start, finish = float(result.flow_start[at].min()), float(result.flow_finish[at].max())
        called.append(dataclasses.replace(c, start=start, finish=finish))
    return ImportedRun(
        source.name,
        ranks,
        result,
        float(result.makespan),
        compute,
        exposed,
        critical_path(result),
        tuple(called),
    )


def _span(ranks: Sequence[int]) -> str:
    """Rank numbers as ranges: [0, 1, 2, 5] -> "0-2,5"."""
    parts, ranks = [], sorted(ranks)
    first = prev = ranks[0]
    for r in [*ranks[1:], None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        parts.append(str(first) if first == prev else f"{first}-{prev}")
        first = prev = r
    return ",".join(parts)


def _is_simai(path: str | os.PathLike) -> bool:
    """A SimAI text workload: a readable file whose first bytes are printable text or a byte-order mark (a
    Chakra trace starts with a varint length and a protobuf tag)."""
    path = os.fspath(path)
    if not os.path.isfile(path) or path.endswith((".et", ".et.gz")):
        return False
    with open(path, "rb") as f:
        head = f.read(64)
    if head.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")):  # a byte-order mark: text
        return True
    return bool(head) and all(32 <= b < 127 or b in (9, 10, 13) for b in head)
