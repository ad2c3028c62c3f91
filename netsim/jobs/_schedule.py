"""Multi-job cluster scheduling: a job trace placed on a shared fabric, every job's traffic contending.

`run_jobs` places jobs in arrival order (FIFO, head of the queue first) with a placement policy
(`POLICIES`) and simulates all placed jobs together on one network, so that jobs sharing links slow
each other down; it returns completion times, queueing and GPU utilization. `colocation` measures the
throughput a job keeps next to another one, the quantity of DeepShare's measured pairwise table. See
docs/jobs.md.

The outer loop is event-driven: at each arrival or completion it places what fits and re-simulates
every job placed so far (their releases are their placement times), so each simulation is exact
for the jobs it contains; a job placed at time t changes nothing before t. For long traces,
`schedule` (`_policies.py`) runs a trace through the fluid environment instead.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from .. import Result, ScenarioError, Shape, compile_scenario, simulate
from ..workloads import Fabric, concat
from ._paces import iteration_paces
from ._placement import POLICIES, Cluster, choose
from ._traffic import Collectives, Job, job_workload

__all__ = ["JobRun", "Schedule", "colocation", "colocation_matrix", "run_jobs", "run_placed"]


@dataclasses.dataclass(frozen=True)
class JobRun:
    """A job as it ran: where, when, and when each iteration ended (s)."""

    job: Job
    gpus: tuple[str, ...]
    start: float
    finish: float
    iteration_finish: tuple[float, ...]

    @property
    def jct(self) -> float:
        """Job completion time: finish - arrival (queueing included)."""
        return self.finish - self.job.arrival

    @property
    def queued(self) -> float:
        return self.start - self.job.arrival

    @property
    def iteration_time(self) -> float:
        """Mean s per iteration while running."""
        return (self.finish - self.start) / self.job.iterations


def run_placed(
    fabric: Fabric,
    placed: Sequence[tuple[Job, Sequence[str], float]],
    *,
    collectives: Collectives | None = None,
    shape: Shape | None = None,
) -> tuple[dict[str, JobRun], Result]:
    """Simulates jobs with fixed placements and start times together on `fabric`.

    Args:
        placed: (job, its GPUs in ring order, start time in s) per job.
        collectives: collective builders by kind (default: netsim.workloads' collectives).
        shape: at least this padded shape (netsim.Shape): one padded shape for
            many simulations means one JIT compile.

    Returns:
        ({job id: JobRun}, the netsim.Result of the joint simulation).
    """
    workloads, ends = [], []
    for job, gpus, start in placed:
        w, e = job_workload(job, gpus, start=start, collectives=collectives)
        workloads.append(w)
        ends.append(e)
    scenario = concat(workloads).scenario(fabric, name="jobs")
    result = simulate(compile_scenario(scenario, shape=shape))
    finish = dict(zip(result.flow_ids, map(float, result.flow_finish), strict=True))
    finish.update(zip(result.task_ids, map(float, result.task_finish), strict=True))
    runs = {}
    for (job, gpus, start), e in zip(placed, ends, strict=True):
        its = tuple(max(finish[i] for i in ids) for ids in e)
        runs[job.id] = JobRun(job, tuple(gpus), float(start), its[-1], its)
    return runs, result


def colocation(
    fabric: Fabric,
    job: Job,
    partner: Job,
    gpus: Sequence[str],
    partner_gpus: Sequence[str],
    *,
    collectives: Collectives | None = None,
    shape: Shape | None = None,
    alone: JobRun | None = None,
    partner_alone: JobRun | None = None,
) -> float:
    """Throughput `job` keeps next to `partner`, as a fraction of its throughput alone.

    Both start at 0. The partner is given enough iterations to outlast `job` at its isolated pace (x2),
    and `job`'s shared pace is measured over the iterations that ended while the partner still ran:
    the steady co-located throughput that DeepShare's pairwise table reports. `alone` and
    `partner_alone` (isolated runs on the same GPUs) are simulated when not given.
    """
    opts = {"collectives": collectives, "shape": shape}
    if alone is None:
        alone = run_placed(fabric, [(job, gpus, 0.0)], **opts)[0][job.id]
    if partner_alone is None:
        partner_alone = run_placed(fabric, [(partner, partner_gpus, 0.0)], **opts)[0][partner.id]
    need = math.ceil(2 * (alone.finish - alone.start) / partner_alone.iteration_time)
    longer = dataclasses.replace(partner, id=f"{partner.id}~", iterations=max(partner.iterations, need))
    runs, _ = run_placed(fabric, [(job, gpus, 0.0), (longer, partner_gpus, 0.0)], **opts)
    mine, theirs = runs[job.id].iteration_finish, runs[longer.id].iteration_finish
    ends = np.zeros((2, max(len(mine), len(theirs))))
    ends[0, : len(mine)], ends[1, : len(theirs)] = mine, theirs
    shared = float(iteration_paces(ends, np.array([len(mine), len(theirs)]))[0])
    return alone.iteration_time / shared


def colocation_matrix(
    fabric: Fabric,
    jobs: Sequence[Job],
    gpus: Sequence[str],
    partner_gpus: Sequence[str],
    *,
    collectives: Collectives | None = None,
    shape: Shape | None = None,
) -> np.ndarray:
    """[i, j] = colocation(jobs[i] on `gpus` next to jobs[j] on `partner_gpus`): DeepShare's pairwise table."""
    opts = {"collectives": collectives, "shape": shape}
    mine = [run_placed(fabric, [(j, gpus, 0.0)], **opts)[0][j.id] for j in jobs]
    theirs = [run_placed(fabric, [(j, partner_gpus, 0.0)], **opts)[0][j.id] for j in jobs]
    return np.array(
        [
            [
                colocation(fabric, a, b, gpus, partner_gpus, alone=mine[i], partner_alone=theirs[k], **opts)
                for k, b in enumerate(jobs)
            ]
            for i, a in enumerate(jobs)
        ]
    )


# --- the scheduler --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Schedule:
    """The outcome of a job trace under one policy.

    Attributes:
        policy: the placement policy.
        gpus: the cluster's GPUs.
        runs: one JobRun per job, in arrival order.
        result: the netsim.Result of the final joint simulation (every job); None from `schedule`
            (the fluid environment simulates groups of running jobs, not the whole trace at once).
    """

    policy: str
    gpus: tuple[str, ...]
    runs: tuple[JobRun, ...]
    result: Result | None

    @property
    def makespan(self) -> float:
        """s from time 0 to the last job's finish."""
        return max(r.finish for r in self.runs)

    @property
    def mean_jct(self) -> float:
        return float(np.mean([r.jct for r in self.runs]))

    def jct_percentile(self, q: float) -> float:
        """q-th percentile of job completion times (linear interpolation; q = 100 is the worst)."""
        return float(np.percentile([r.jct for r in self.runs], q))

    @property
    def gpu_utilization(self) -> float:
        """Allocated GPU-seconds / (GPUs x makespan): how much of the cluster jobs held."""
        held = sum(r.job.gpus * (r.finish - r.start) for r in self.runs)
        return held / (len(self.gpus) * self.makespan)

    @property
    def compute_utilization(self) -> float:
        """Computing GPU-seconds / (GPUs x makespan): the held share minus the time spent on the network."""
        busy = sum(r.job.gpus * r.job.compute * r.job.iterations for r in self.runs)
        return busy / (len(self.gpus) * self.makespan)

    def table(self) -> str:
        lines = [
            f"{'job':<12}{'model':<16}{'gpus':>5}{'arrival':>10}{'start':>10}{'finish':>10}{'JCT':>10}  placement"
        ]
        for r in self.runs:
            lines.append(
                f"{r.job.id:<12}{r.job.model:<16}{r.job.gpus:>5}{r.job.arrival:>10.3f}{r.start:>10.3f}"
                f"{r.finish:>10.3f}{r.jct:>10.3f}  {','.join(r.gpus)}"
            )
        lines.append(
            f"policy {self.policy}: mean JCT {self.mean_jct:.3f} s, p90 {self.jct_percentile(90):.3f} s, "
            f"max {self.jct_percentile(100):.3f} s, makespan {self.makespan:.3f} s, "
            f"GPU utilization {self.gpu_utilization:.1%} (computing {self.compute_utilization:.1%})"
        )
        return "\n".join(lines)


def run_jobs(
    fabric: Fabric,
    jobs: Sequence[Job],
    *,
    gpus: Sequence[str],
    policy: str = "packed",
    server: Callable[[str], str] | None = None,
    collectives: Collectives | None = None,
    shape: Shape | None = None,
) -> Schedule:
    """Places and simulates a job trace on a shared fabric.

    Args:
        fabric: the cluster's topology.
        jobs: the trace; ids must be unique.
        gpus: the GPUs jobs may use, in cluster order (e.g. topology.gpus()).
        policy: one of POLICIES (see `place` for what each does).
        server: GPU -> its server's name; default: the GPU name up to its last "/" ("n3/gpu1" -> "n3").
        collectives: collective builders by kind (default: netsim.workloads' collectives).
        shape: at least this padded shape for every simulation (see `run_placed`).

    Raises:
        ScenarioError: an empty trace, duplicate job ids, a job larger than the cluster, an unknown policy
            or GPU.
    """
    if policy not in POLICIES:
        raise ScenarioError(f"policy: unknown placement policy {policy!r}; expected one of {list(POLICIES)}")
    cluster = Cluster.of(fabric, gpus, server)
    cluster.check(jobs, "jobs")
    gpus = cluster.gpus

    queue = sorted(jobs, key=lambda j: j.arrival)  # stable: equal arrivals keep trace order
    placed: list[tuple[Job, tuple[str, ...], float]] = []
    runs: dict[str, JobRun] = {}
    result: Result | None = None
    t = 0.0

    def simulate_placed() -> None:
        nonlocal runs, result
        runs, result = run_placed(fabric, placed, collectives=collectives, shape=shape)

    def load() -> dict[str, float]:
        # read at each decision, from the jobs still running at t: a job that has finished since the
        # latest simulation no longer loads its links
        return _link_load(result, runs, t) if policy == "contention" and result is not None else {}

    while queue:
        busy = {g for job, gs, _ in placed if runs[job.id].finish > t for g in gs}
        free = [g for g in gpus if g not in busy]
        changed = False
        while queue and queue[0].arrival <= t:
            chosen = choose(policy, cluster, free, queue[0], load())
            if chosen is None:
                break  # FIFO: the head waits, and so does everyone behind it
            placed.append((queue.pop(0), chosen, t))
            free = [g for g in free if g not in chosen]
            changed = True
            if policy == "contention" and queue and queue[0].arrival <= t:
                simulate_placed()  # the next placement of this batch needs this job's load
                changed = False
        if changed:
            simulate_placed()
        upcoming = [r.finish for r in runs.values() if r.finish > t] + [
            j.arrival for j in queue if j.arrival > t
        ]
        if not upcoming and queue:
            raise ScenarioError(f"job {queue[0].id!r} can never be placed")  # unreachable: sizes checked
        t = min(upcoming) if upcoming else t
    return Schedule(policy, gpus, tuple(runs[j.id] for j in sorted(jobs, key=lambda j: j.arrival)), result)


def _link_load(result: Result, runs: Mapping[str, JobRun], t: float) -> dict[str, float]:
    """bytes/s each link carries for the jobs still running after t, averaged over each job's run."""
    load: dict[str, float] = {}
    scenario = result.compiled.scenario
    for flow, route in zip(scenario.flows, result.compiled.routes, strict=True):
        run = runs[flow.id.split("/", 1)[0]]
        if run.finish > t:
            for lid in route:
                load[lid] = load.get(lid, 0.0) + flow.bytes / (run.finish - run.start)
    return load
