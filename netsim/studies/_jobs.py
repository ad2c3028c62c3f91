"""Multi-job cluster scheduling: a job trace placed on a shared fabric, every job's traffic contending.

`run_jobs` places jobs in arrival order (FIFO, head of the queue first) with a placement policy
(`netsim.workloads.POLICIES`) and simulates all placed jobs together on one network, so that jobs
sharing links slow each other down; it returns completion times, queueing and GPU utilization.
`colocation` measures the throughput a job keeps next to another one, the quantity of DeepShare's
measured pairwise table. See docs/jobs.md.

The outer loop is event-driven: at each arrival or completion it places what fits and re-simulates
every job placed so far (their releases are their placement times), so each simulation is exact
for the jobs it contains; a job placed at time t changes nothing before t.

For long traces, `schedule` runs a trace through the fluid environment of `_env.py` instead (simulated
paces per group of co-located jobs) under a heuristic, simulation-in-the-loop or a policy function;
`deepshare_cluster` and `deepshare_trace` give a seeded DeepShare-like setup, and `read_job_trace` /
`format_job_trace` the trace CSV of `netsim jobs`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from .._compile import Shape, compile_scenario
from .._result import Result
from .._scenario import ScenarioError
from .._simulate import simulate
from ..workloads import Fabric, Job, concat, job_workload
from ..workloads._jobs import Collectives
from ..workloads._placement import POLICIES, Cluster, choose, server_of
from ._env import CANDIDATES, JobEnvs

__all__ = [
    "DEEPSHARE_REFERENCE",
    "JOB_POLICIES",
    "JobRun",
    "Schedule",
    "colocation",
    "colocation_matrix",
    "deepshare_cluster",
    "deepshare_mix",
    "deepshare_trace",
    "format_job_trace",
    "read_job_trace",
    "run_jobs",
    "run_placed",
    "schedule",
]


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

    def iteration_time_until(self, t: float) -> float:
        """Mean s per iteration over the iterations that ended by time t (at least the first)."""
        done = max(1, sum(x <= t * (1 + 1e-12) for x in self.iteration_finish))
        return (self.iteration_finish[done - 1] - self.start) / done


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
        collectives: collective builders by kind (default: netsim.workloads.collectives).
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
    return alone.iteration_time / runs[job.id].iteration_time_until(runs[longer.id].finish)


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
        policy: one of POLICIES (see `netsim.workloads.place` for what each does).
        server: GPU -> its server's name; default: the GPU name up to its last "/" ("n3/gpu1" -> "n3").
        collectives: collective builders by kind (default: netsim.workloads.collectives).
        shape: at least this padded shape for every simulation (see `run_placed`).

    Raises:
        ScenarioError: duplicate job ids, a job larger than the cluster, an unknown policy or GPU.
    """
    if policy not in POLICIES:
        raise ScenarioError(f"policy: unknown placement policy {policy!r}; expected one of {list(POLICIES)}")
    gpus = tuple(gpus)
    nodes = {n for link in fabric.links for n in (link.src, link.dst)}
    bad = [g for g in gpus if g not in nodes]
    if bad or not gpus or len(set(gpus)) != len(gpus):
        raise ScenarioError(f"gpus: expected distinct nodes of the fabric, got {bad[:3] or list(gpus)[:5]}")
    ids = [j.id for j in jobs]
    if len(set(ids)) != len(ids):
        raise ScenarioError(f"jobs: duplicate job id(s) {sorted({i for i in ids if ids.count(i) > 1})}")
    for j in jobs:
        if j.gpus > len(gpus):
            raise ScenarioError(f"job {j.id!r}: needs {j.gpus} GPUs, the cluster has {len(gpus)}")
    server = server or server_of
    cluster = Cluster(fabric, gpus, {g: server(g) for g in gpus})

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
    if result is None:
        raise ScenarioError("jobs: the trace is empty")
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


# --- traces, and policies over the fluid environment ----------------------------------------------

#: scheduling policies of `schedule` / `netsim jobs`: the placement heuristics of the environment's
#: candidates (FIFO, the head job placed as soon as it fits), and "simloop", which simulates every
#: candidate next to the running jobs in one batch and keeps the one that finishes them soonest
JOB_POLICIES = (*CANDIDATES, "simloop")
#: the reductions DeepShare reports for its RL-trained policies against state-of-the-art schedulers
#: (arXiv 2310.20209; its repository: training latency "improved by up to 20.7%"): the reference that
#: `netsim jobs` prints next to each policy's mean JCT against the best and the worst heuristic
DEEPSHARE_REFERENCE = (-0.182, -0.207)
TRACE_COLUMNS = ("arrival", "model", "gpus", "nodes", "iterations")


def deepshare_cluster(
    servers: int = 4, gpus: int = 8, *, nic_bandwidth="100 Gbps", oversubscription: float = 2.0
):
    """A DeepShare-like cluster: 4 PCIe servers of 8 GPUs (two sockets, one NIC each) on a two-leaf,
    one-spine leaf-spine (2:1 oversubscribed by default; one leaf for fewer than 4 servers). GPUs are
    "n{s}/gpu{g}"."""
    from ..topology import cluster, leaf_spine, pcie_server

    leaves = 2 if servers >= 4 and servers % 2 == 0 else 1
    fabric = leaf_spine(
        leaves, 1, servers // leaves, host_bandwidth=nic_bandwidth, oversubscription=oversubscription
    )
    server = pcie_server(gpus, sockets=2 if gpus % 2 == 0 else 1, nics=1)
    return cluster(fabric, server, name=f"deepshare{servers}x{gpus}")


def deepshare_mix() -> tuple[tuple[str, int, int], ...]:
    """The (model, GPUs, nodes) configurations DeepShare measured, read from the shipped
    sched_deepshare_isolated_thp.csv: its job mix."""
    import csv

    from ..data import trace_path

    with open(trace_path("sched_deepshare_isolated_thp.csv"), newline="") as f:
        rows = [r for r in csv.reader(line for line in f if not line.startswith("#")) if r and r[0]]
    out = []
    for key, _ in rows:
        model, gpus, nodes = key.split(",")
        out.append((model, int(gpus), int(nodes)))
    return tuple(out)


def deepshare_trace(
    n: int,
    *,
    seed: int = 0,
    arrival_rate: float = 0.5,
    iterations: tuple[int, int] = (50, 500),
    prefix: str = "j",
) -> list[Job]:
    """A seeded DeepShare-like trace of n jobs.

    Each job is one of `deepshare_mix()`'s configurations drawn uniformly (its model from
    netsim.workloads.MODELS, its GPU count; the measured node count is kept in the trace file only),
    arrivals are Poisson (exponential gaps of mean 1 / arrival_rate s, the first at 0), iterations
    log-uniform in [iterations[0], iterations[1]].
    """
    from ..workloads import MODELS

    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ScenarioError(f"n: expected a number of jobs >= 1, got {n!r}")
    if not (isinstance(arrival_rate, int | float) and arrival_rate > 0 and math.isfinite(arrival_rate)):
        raise ScenarioError(f"arrival_rate: expected jobs/s > 0, got {arrival_rate!r}")
    lo, hi = iterations
    if not 1 <= lo <= hi:
        raise ScenarioError(f"iterations: expected 1 <= low <= high, got {iterations!r}")
    mix = [m for m in deepshare_mix() if m[0] in MODELS]
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(mix), n)
    gaps = rng.exponential(1 / arrival_rate, n)
    gaps[0] = 0.0
    its = np.exp(rng.uniform(math.log(lo), math.log(hi), n)).round().astype(int)
    arrivals = np.cumsum(gaps)
    jobs = []
    for i in range(n):
        model, gpus, _ = mix[picks[i]]
        jobs.append(
            Job.of(f"{prefix}{i}", model, arrival=float(arrivals[i]), gpus=gpus, iterations=int(its[i]))
        )
    return jobs


def read_job_trace(path) -> list[Job]:
    """Jobs from a trace CSV: a header with `arrival,model,gpus,nodes,iterations` (any order; an `id`
    column optional, default "j{row}"; `nodes` optional and informational; "#" lines are comments).
    Models are names of netsim.workloads.MODELS."""
    import csv

    with open(path, newline="") as f:
        lines = [line for line in f if line.strip() and not line.startswith("#")]
    reader = csv.DictReader(lines)
    missing = [c for c in TRACE_COLUMNS if c != "nodes" and c not in (reader.fieldnames or ())]
    if missing:
        raise ScenarioError(f"{path}: missing column(s) {missing}; expected {','.join(TRACE_COLUMNS)}")
    jobs = []
    for row, r in enumerate(reader):
        where = f"{path}: row {row + 1}"
        try:
            arrival, gpus, its = float(r["arrival"]), int(r["gpus"]), int(r["iterations"])
        except (TypeError, ValueError):
            raise ScenarioError(
                f"{where}: arrival, gpus, iterations must be numbers, got "
                f"{r.get('arrival')!r}, {r.get('gpus')!r}, {r.get('iterations')!r}"
            ) from None
        try:
            job = Job.of(r.get("id") or f"j{row}", r["model"], arrival=arrival, gpus=gpus, iterations=its)
        except ScenarioError as e:
            raise ScenarioError(f"{where}: {e}") from None
        jobs.append(job)
    if not jobs:
        raise ScenarioError(f"{path}: no jobs")
    return jobs


def format_job_trace(jobs: Sequence[Job], nodes: Mapping[str, int] | None = None) -> str:
    """The CSV text `read_job_trace` reads (id first); `nodes`: job id -> informational node count."""
    nodes = nodes or {}
    lines = ["id," + ",".join(TRACE_COLUMNS)]
    for j in jobs:
        lines.append(f"{j.id},{j.arrival!r},{j.model},{j.gpus},{nodes.get(j.id, '')},{j.iterations}")
    return "\n".join(lines) + "\n"


Policy = Callable[..., object]  # (Observation [B, ...], JobEnvs) -> actions [B]


def schedule(
    fabric: Fabric,
    jobs: Sequence[Job],
    *,
    policy: str | Policy = "packed",
    gpus: Sequence[str] | None = None,
    server: Callable[[str], str] | None = None,
    paces=None,
    progress: Callable[[int, int, float], None] | None = None,
) -> Schedule:
    """Schedules a trace in the fluid environment (`netsim.studies.JobEnv`) under one policy.

    Args:
        policy: a name of JOB_POLICIES, or a function (observations, envs) -> actions as
            `JobEnvs.step` takes them (e.g. a trained policy; see examples/train_policy.py).
        paces: a `netsim.studies.Paces` to share simulated paces between calls on one fabric.
        progress: called after each decision with (jobs finished, jobs, simulated time).

    Returns:
        a Schedule whose runs have no iteration_finish and whose result is None (no joint simulation).
    """
    if isinstance(policy, str) and policy not in JOB_POLICIES:
        raise ScenarioError(f"policy: unknown {policy!r}; expected one of {list(JOB_POLICIES)} or a function")
    envs = JobEnvs(fabric, [list(jobs)], gpus=gpus, server=server, paces=paces)
    obs, _ = envs.reset([0])
    done = envs.episodes[0].done
    while not done:
        if policy == "simloop":
            actions = envs.simloop_actions()
        elif isinstance(policy, str):
            actions = envs.heuristic_actions(policy)
        else:
            actions = policy(obs, envs)
        obs, _, dones, _ = envs.step(actions)
        done = bool(dones[0])
        if progress is not None:
            progress(len(envs.episodes[0].done_at), len(jobs), envs.episodes[0].t)
    name = policy if isinstance(policy, str) else getattr(policy, "__name__", "custom")
    return Schedule(name, envs.cluster.gpus, envs.runs(0), None)
