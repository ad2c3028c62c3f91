"""Multi-job cluster scheduling: a job trace placed on a shared fabric, every job's traffic contending.

A `Job` is a training job: per iteration, compute on each of its GPUs and the collectives of its
communication pattern (`PATTERNS`: data-parallel AllReduce, FSDP, all-to-all). `run_jobs` places jobs
in arrival order (FIFO, head of the queue first) with a placement policy (`POLICIES`) and simulates
all placed jobs together on one network, so that jobs sharing links slow each other down; it returns
completion times, queueing and GPU utilization. `colocation` measures the throughput a job keeps next to another one, the quantity of
DeepShare's measured pairwise table. See docs/jobs.md.

The outer loop is event-driven: at each arrival or completion it places what fits and re-simulates
every job placed so far (their releases are their placement times), so each simulation is exact
for the jobs it contains; a job placed at time t changes nothing before t.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from .._compile import Shape
from .._scenario import ScenarioError, Task, check_number
from ._base import Fabric, Workload, concat

__all__ = [
    "MODELS",
    "PATTERNS",
    "POLICIES",
    "Job",
    "JobRun",
    "Model",
    "Schedule",
    "colocation",
    "colocation_matrix",
    "job_workload",
    "place",
    "run_jobs",
    "run_placed",
]

#: per-iteration phases of each pattern: ("compute", fraction of Job.compute) or (collective, size)
PATTERNS: dict[str, tuple[tuple[str, float], ...]] = {
    "allreduce": (("compute", 1.0), ("allreduce", 1.0)),  # data parallel: backward, then gradient AllReduce
    "fsdp": (("allgather", 1.0), ("compute", 1.0), ("reducescatter", 1.0)),  # ZeRO-3 / FSDP, one unit
    "alltoall": (("compute", 0.5), ("alltoall", 1.0), ("compute", 0.5), ("alltoall", 1.0)),  # MoE, DLRM
    "none": (("compute", 1.0),),
}
POLICIES = ("packed", "spread", "topology", "contention")


@dataclasses.dataclass(frozen=True)
class Model:
    """A job's per-iteration shape: communication pattern, compute s per GPU, collective size S (bytes)."""

    pattern: str
    compute: float
    comm_bytes: float
    note: str = ""


#: Illustrative models named as in DeepShare's traces. Sizes follow the models' parameter counts; the
#: compute times are NOT measured: they are chosen to give each model a plausible share of communication
#: on 100 Gb/s NICs (light: MobileNetV3, GraphSage; heavy: FSDP, Transformer-XL, MoE; DLRM in between).
MODELS: dict[str, Model] = {
    "MobileNetV3": Model("allreduce", 0.060, 22e6, "5.5M parameters (Large), fp32 gradients"),
    "GraphSage": Model("allreduce", 0.040, 2e6, "~0.5M parameters; sampling-bound compute"),
    "FSDP": Model("fsdp", 0.300, 2.6e9, "1.3B-parameter GPT, fp16 parameters gathered, gradients scattered"),
    "Transformer-XL": Model("allreduce", 0.150, 0.6e9, "151M parameters (base), fp32 gradients"),
    "DLRM": Model("alltoall", 0.030, 64e6, "embedding vectors exchanged all-to-all, twice per iteration"),
    "MoE": Model("alltoall", 0.080, 256e6, "expert dispatch and combine all-to-all"),
}

Collectives = Mapping[str, Callable[..., object]]


@dataclasses.dataclass(frozen=True)
class Job:
    """One training job of a trace.

    Attributes:
        id: unique name; prefixes the ids of its flows and tasks.
        arrival: s at which it is submitted.
        gpus: GPUs it needs (all at once, for its whole run).
        iterations: training iterations it runs.
        compute: s of compute per iteration on each GPU.
        pattern: communication pattern, a key of PATTERNS.
        comm_bytes: S of each collective of the pattern, in nccl-tests' sense (per-rank buffer for
            AllReduce, whole gathered buffer for AllGather / ReduceScatter, one rank's send buffer for
            AllToAll).
        model: a label ("MoE", "ResNet-50", ...).
    """

    id: str
    arrival: float
    gpus: int
    iterations: int
    compute: float
    pattern: str = "allreduce"
    comm_bytes: float = 0.0
    model: str = ""

    @classmethod
    def of(cls, id: str, model: str, *, arrival: float, gpus: int, iterations: int) -> Job:
        """A job of one of MODELS."""
        if model not in MODELS:
            raise ScenarioError(f"job {id!r}.model: unknown {model!r}; known: {sorted(MODELS)}")
        m = MODELS[model]
        return cls(id, arrival, gpus, iterations, m.compute, m.pattern, m.comm_bytes, model)

    def __post_init__(self):
        if not isinstance(self.id, str) or not self.id or "/" in self.id:
            raise ScenarioError(f"Job.id: must be a non-empty string without '/', got {self.id!r}")
        where = f"job {self.id!r}"
        check_number(self.arrival, f"{where}.arrival")
        check_number(self.compute, f"{where}.compute")
        check_number(self.comm_bytes, f"{where}.comm_bytes")
        for name in ("gpus", "iterations"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ScenarioError(f"{where}.{name}: expected an integer >= 1, got {value!r}")
        if self.pattern not in PATTERNS:
            raise ScenarioError(
                f"{where}.pattern: unknown {self.pattern!r}; expected one of {sorted(PATTERNS)}"
            )
        if self.compute == 0 and (self.comm_bytes == 0 or self.gpus == 1 or self.pattern == "none"):
            raise ScenarioError(f"{where}: does nothing (compute and communication are both zero)")


def _default_collectives() -> Collectives:
    from . import collectives

    return {
        "allreduce": collectives.allreduce,
        "allgather": collectives.allgather,
        "reducescatter": collectives.reducescatter,
        "alltoall": collectives.alltoall,
    }


def job_workload(
    job: Job, gpus: Sequence[str], *, start: float = 0.0, collectives: Collectives | None = None
) -> tuple[Workload, tuple[tuple[str, ...], ...]]:
    """The flows and tasks of `job` on `gpus` (ring order), released at `start`.

    Phases chain per rank: a rank's collective sends wait for that rank's previous phase, and a rank's
    next phase waits for the collective's last sends and receives of that rank (as a rank's NCCL call
    returns when its own part is done). Single-GPU jobs skip their collectives.

    Returns:
        (workload, ids of each iteration's last items), the latter to time the iterations.
    """
    gpus = tuple(gpus)
    if len(gpus) != job.gpus or len(set(gpus)) != len(gpus):
        raise ScenarioError(f"job {job.id!r}: needs {job.gpus} distinct GPUs, got {list(gpus)}")
    coll = _default_collectives() if collectives is None else collectives
    parts: list[Workload] = []
    ends: list[tuple[str, ...]] = []
    ready: dict[str, tuple[str, ...]] = {g: () for g in gpus}  # rank -> ids its next phase waits on
    for it in range(job.iterations):
        for k, (kind, share) in enumerate(PATTERNS[job.pattern]):
            tag = f"{job.id}/it{it}/p{k}"
            if kind == "compute":
                if job.compute == 0:
                    continue
                tasks = [
                    Task(f"{tag}/{g}", g, job.compute * share, start=start, after=ready[g]) for g in gpus
                ]
                parts.append(Workload(tasks=tasks))
                ready = {t.device: (t.id,) for t in tasks}
            elif len(gpus) > 1 and job.comm_bytes > 0:
                w = coll[kind](list(gpus), job.comm_bytes * share, name=tag).workload
                parts.append(_rank_chained(w, ready, start))
                ready = _rank_done(w, gpus)
        ends.append(tuple(dict.fromkeys(i for ids in ready.values() for i in ids)))
    return dataclasses.replace(concat(parts), name=job.id), tuple(ends)


def _rank_chained(w: Workload, ready: Mapping[str, tuple[str, ...]], start: float) -> Workload:
    """`w` released at `start`, each root also waiting on what its sending rank was doing."""
    roots = set(w.roots())
    fix = lambda x, rank: dataclasses.replace(
        x, start=start, after=tuple(x.after) + (ready.get(rank, ()) if x.id in roots else ())
    )
    return Workload([fix(f, f.src) for f in w.flows], [fix(t, t.device) for t in w.tasks], w.name)


def _rank_done(w: Workload, gpus: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Per rank, the collective's sinks it takes part in (sends, receives, reduces); all sinks if none."""
    sinks = set(w.sinks())
    mine: dict[str, list[str]] = {g: [] for g in gpus}
    for f in w.flows:
        if f.id in sinks:
            for end in {f.src, f.dst} & mine.keys():
                mine[end].append(f.id)
    for t in w.tasks:
        if t.id in sinks and t.device in mine:
            mine[t.device].append(t.id)
    every = tuple(sorted(sinks))
    return {g: tuple(ids) or every for g, ids in mine.items()}


# --- simulation of placed jobs --------------------------------------------------------------------


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
) -> tuple[dict[str, JobRun], object]:
    """Simulates jobs with fixed placements and start times together on `fabric`.

    Args:
        placed: (job, its GPUs in ring order, start time in s) per job.
        collectives: collective builders by kind (default: netsim.workloads.collectives).
        shape: at least this padded shape (netsim.Shape): one padded shape for
            many simulations means one JIT compile.

    Returns:
        ({job id: JobRun}, the netsim.Result of the joint simulation).
    """
    from .. import compile_scenario, simulate

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


# --- placement ------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Cluster:
    fabric: Fabric
    gpus: tuple[str, ...]  # cluster order
    server: dict[str, str]
    hops: dict[tuple[str, str], int] = dataclasses.field(default_factory=dict)

    def distance(self, a: str, b: str) -> int:
        if a == b:
            return 0
        if (a, b) not in self.hops:
            self.hops[a, b] = len(self.fabric.route(a, b))
        return self.hops[a, b]

    def ordered(self, chosen) -> tuple[str, ...]:
        rank = {g: i for i, g in enumerate(self.gpus)}
        return tuple(sorted(chosen, key=rank.__getitem__))  # server-grouped ring: one crossing per server

    def pairs(self, gpus: Sequence[str], pattern: str) -> list[tuple[str, str]]:
        if len(gpus) < 2 or pattern == "none":
            return []
        if pattern == "alltoall":
            return [(a, b) for a in gpus for b in gpus if a != b]
        return [(gpus[i], gpus[(i + 1) % len(gpus)]) for i in range(len(gpus))]


def place(
    policy: str,
    fabric: Fabric,
    free: Sequence[str],
    job: Job,
    *,
    load: Mapping[str, float] | None = None,
    server: Callable[[str], str] | None = None,
) -> tuple[str, ...] | None:
    """GPUs for `job` among `free` (in cluster order) under `policy` (see `_place`); None if too few are free.

    load: bytes/s that running jobs put on each link (for "contention"); server: GPU -> server name
    (default: the name up to its last "/").
    """
    server = server or _server_of
    return _place(policy, _Cluster(fabric, tuple(free), {g: server(g) for g in free}), free, job, load or {})


def _server_of(gpu: str) -> str:
    return gpu.rsplit("/", 1)[0]


def _place(
    policy: str, cluster: _Cluster, free: Sequence[str], job: Job, load: Mapping[str, float]
) -> tuple[str, ...] | None:
    """GPUs for `job` among `free` (cluster order) under `policy`, or None when too few are free.

    packed: fewest servers (best-fit server, else the servers with most free GPUs first).
    spread: one GPU per server in turn, across as many servers as possible.
    topology: the set with the least summed route hops between ring neighbours (all pairs for
        all-to-all), grown greedily from every free GPU (the GPU nearest to those chosen first).
    contention: sets grown the same way but adding, at each step, the GPU whose routes to those chosen
        cross the least-loaded busiest link (load: bytes/s running jobs put on each link); of these and the
        packed and spread sets, the one whose traffic crosses the least-loaded busiest link, then the least
        total load, then the fewest hops.
    """
    n = job.gpus
    if len(free) < n:
        return None
    if policy == "packed":
        return cluster.ordered(_packed(cluster, free, n))
    if policy == "spread":
        return cluster.ordered(_spread(cluster, free, n))
    hops = lambda chosen, g: sum(cluster.distance(c, g) + cluster.distance(g, c) for c in chosen)
    hop_cost = lambda c: sum(cluster.distance(a, b) for a, b in cluster.pairs(c, job.pattern))
    if policy == "topology":
        return min((_grow(cluster, free, seed, n, hops) for seed in free), key=hop_cost)
    if policy == "contention":
        links = lambda pairs: {lid for a, b in pairs for lid in cluster.fabric.route(a, b)}
        worst = lambda ids: max((load.get(lid, 0.0) for lid in ids), default=0.0)
        step = lambda chosen, g: (
            worst(links([(c, g) for c in chosen] + [(g, c) for c in chosen])),
            hops(chosen, g),
        )
        cands = [
            cluster.ordered(_packed(cluster, free, n)),
            cluster.ordered(_spread(cluster, free, n)),
            *(_grow(cluster, free, seed, n, step) for seed in free),
        ]

        def score(c):
            used = links(cluster.pairs(c, job.pattern))
            return (worst(used), sum(load.get(lid, 0.0) for lid in used), hop_cost(c))

        return min(cands, key=score)
    raise ScenarioError(f"policy: unknown placement policy {policy!r}; expected one of {list(POLICIES)}")


def _by_server(cluster: _Cluster, free: Sequence[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for g in free:
        out.setdefault(cluster.server[g], []).append(g)
    return out


def _packed(cluster: _Cluster, free: Sequence[str], n: int) -> list[str]:
    servers = _by_server(cluster, free)
    fits = [s for s, gs in servers.items() if len(gs) >= n]
    if fits:
        best = min(fits, key=lambda s: len(servers[s]))  # best fit keeps large holes for large jobs
        return servers[best][:n]
    out: list[str] = []
    for s in sorted(servers, key=lambda s: -len(servers[s])):  # stable: ties keep cluster order
        out += servers[s][: n - len(out)]
        if len(out) == n:
            break
    return out


def _spread(cluster: _Cluster, free: Sequence[str], n: int) -> list[str]:
    queues = list(_by_server(cluster, free).values())
    out: list[str] = []
    while len(out) < n:
        for q in queues:
            if q and len(out) < n:
                out.append(q.pop(0))
    return out


def _grow(cluster: _Cluster, free: Sequence[str], seed: str, n: int, key) -> tuple[str, ...]:
    """From `seed`, add the free GPU with the smallest key(chosen, gpu) until there are n."""
    chosen = [seed]
    rest = [g for g in free if g != seed]
    while len(chosen) < n:
        best = min(rest, key=lambda g: key(chosen, g))
        chosen.append(best)
        rest.remove(best)
    return cluster.ordered(chosen)


# --- the scheduler --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Schedule:
    """The outcome of a job trace under one policy.

    Attributes:
        policy: the placement policy.
        gpus: the cluster's GPUs.
        runs: one JobRun per job, in arrival order.
        result: the netsim.Result of the final joint simulation (every job).
    """

    policy: str
    gpus: tuple[str, ...]
    runs: tuple[JobRun, ...]
    result: object

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
        policy: one of POLICIES (see `_place` for what each does).
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
    server = server or _server_of
    cluster = _Cluster(fabric, gpus, {g: server(g) for g in gpus})

    queue = sorted(jobs, key=lambda j: j.arrival)  # stable: equal arrivals keep trace order
    placed: list[tuple[Job, tuple[str, ...], float]] = []
    runs: dict[str, JobRun] = {}
    result = None
    load: dict[str, float] = {}
    t = 0.0

    def simulate_placed() -> None:
        nonlocal runs, result, load
        runs, result = run_placed(fabric, placed, collectives=collectives, shape=shape)
        load = _link_load(result, runs, t)

    while queue:
        busy = {g for job, gs, _ in placed if runs[job.id].finish > t for g in gs}
        free = [g for g in gpus if g not in busy]
        changed = False
        while queue and queue[0].arrival <= t:
            chosen = _place(policy, cluster, free, queue[0], load)
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


def _link_load(result, runs: Mapping[str, JobRun], t: float) -> dict[str, float]:
    """bytes/s each link carries for the jobs still running after t, averaged over each job's run."""
    load: dict[str, float] = {}
    scenario = result.compiled.scenario
    for flow, route in zip(scenario.flows, result.compiled.routes, strict=True):
        run = runs[flow.id.split("/", 1)[0]]
        if run.finish > t:
            for lid in route:
                load[lid] = load.get(lid, 0.0) + flow.bytes / (run.finish - run.start)
    return load
