"""Training jobs compiled to workloads: per iteration, compute on each GPU and the collectives of a
communication pattern (`PATTERNS`: data-parallel AllReduce, FSDP, all-to-all).

`job_workload` is the one traffic model of a job: the scheduler, the environment's paces and the fit of
`MODELS` (`netsim.calibrate.jobs`) all simulate what it builds. See docs/jobs.md.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from .. import Flow, ScenarioError, Task
from .._checks import number as check_number
from .._checks import quantity
from ..data import DATA_DIR
from ..workloads import Workload, allgather, allreduce, alltoall, bus_factor, concat, reducescatter

__all__ = [
    "MODELS",
    "MODELS_PATH",
    "PATTERNS",
    "SERVER_COLLECTIVES",
    "Collectives",
    "Job",
    "Model",
    "job_workload",
    "load_models",
]

#: per-iteration phases of each pattern: ("compute", fraction of Job.compute) or (collective, size in
#: units of Job.comm_bytes), the collective a name or a tuple of names that run at once (each its own
#: flows, all released together; the next phase waits for all of them)
PATTERNS: dict[str, tuple[tuple[str | tuple[str, ...], float], ...]] = {
    "allreduce": (("compute", 1.0), ("allreduce", 1.0)),  # data parallel: backward, then gradient AllReduce
    # FSDP / ZeRO-3, S the parameter bytes: 3 (G - 1)/G S sent per GPU per iteration (AllGather in
    # forward, again in backward, ReduceScatter of the gradients) as two concurrent streams: the
    # backward's AllGather and ReduceScatter run on separate streams, so FSDP holds two flows on a
    # shared link (a partner gets 1/3 of it, not 1/2); the forward's AllGather is folded into them
    "fsdp": (("compute", 1.0), (("allgather", "reducescatter"), 1.5)),
    "alltoall": (("compute", 0.5), ("alltoall", 1.0), ("compute", 0.5), ("alltoall", 1.0)),  # MoE, DLRM
    "none": (("compute", 1.0),),
}


@dataclasses.dataclass(frozen=True)
class Model:
    """A job's per-iteration shape: communication pattern, compute s per GPU, collective size S (bytes),
    and server_bytes: bytes each of its collectives sends from every server it spans, per server beyond
    the first, on top of S (`Job.server_bytes`)."""

    pattern: str
    compute: float
    comm_bytes: float
    note: str = ""
    server_bytes: float = 0.0


#: where MODELS come from: fitted by netsim.calibrate.jobs.fit_jobs (benchmarks/jobs_fit.py writes it)
MODELS_PATH = DATA_DIR / "job_models.json"


def load_models(path: str | pathlib.Path = MODELS_PATH) -> dict[str, Model]:
    """Job models from a JSON file as `netsim.calibrate.jobs.JobFit.to_json` writes it."""
    try:
        data = json.loads(pathlib.Path(path).read_text())
        rows = data["models"]
        models = {
            name: Model(
                str(m["pattern"]),
                float(m["compute"]),
                float(m["comm_bytes"]),
                f"fitted to DeepShare's measurements ({pathlib.Path(path).name})",
                float(m.get("server_bytes", 0.0)),
            )
            for name, m in rows.items()
        }
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ScenarioError(f"job models {str(path)!r}: cannot read ({e})") from None
    for name, m in rows.items():
        if "sync" in m:  # a file fitted before server_bytes: its growth over servers would silently vanish
            raise ScenarioError(
                f"job models {str(path)!r}: {name}.sync = {m['sync']!r}: the latency per extra server is no"
                " longer a model parameter (server_bytes is); refit with benchmarks/jobs_fit.py --write"
            )
    for name, m in models.items():
        if m.pattern not in PATTERNS:
            raise ScenarioError(f"job models: {name}.pattern: unknown {m.pattern!r}")
    return models


#: The models of DeepShare's traces (MobileNetV3, GraphSage, FSDP, Transformer-XL, DLRM, MoE), their
#: compute, collective size and bytes per extra server fitted through the simulator to DeepShare's measured
#: isolated throughputs and co-location table (docs/jobs.md, "Fitted traffic").
MODELS: dict[str, Model] = load_models()

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
        server_bytes: bytes each collective sends out of every server the job spans, for each server
            beyond the first (servers are the GPU names up to their last "/"), on top of comm_bytes and
            split evenly over the communication phases: the traffic that grows with a job's span rather
            than with S (per-peer messages and chunks). It rides on each phase's first flows out of
            each server, so a co-located job slows it as it slows the collective (docs/jobs.md,
            "Fitted traffic": fitted as a contention-free latency instead, the co-location errors
            were up to 1.6x the measurements' own scatter).
    """

    id: str
    arrival: float
    gpus: int
    iterations: int
    compute: float
    pattern: str = "allreduce"
    comm_bytes: float = 0.0
    model: str = ""
    server_bytes: float = 0.0

    @classmethod
    def of(cls, id: str, model: str, *, arrival: float, gpus: int, iterations: int) -> Job:
        """A job of one of MODELS."""
        if model not in MODELS:
            raise ScenarioError(f"job {id!r}.model: unknown {model!r}; known: {sorted(MODELS)}")
        m = MODELS[model]
        return cls(id, arrival, gpus, iterations, m.compute, m.pattern, m.comm_bytes, model, m.server_bytes)

    def __post_init__(self):
        if not isinstance(self.id, str) or not self.id or "/" in self.id:
            raise ScenarioError(f"Job.id: must be a non-empty string without '/', got {self.id!r}")
        where = f"job {self.id!r}"
        for name, kind in (
            ("arrival", "time"),
            ("compute", "time"),
            ("comm_bytes", "bytes"),
            ("server_bytes", "bytes"),
        ):
            check_number(getattr(self, name), f"{where}.{name}")  # a plain number: no unit strings here
            quantity(float(getattr(self, name)), kind, f"{where}.{name}")  # within netsim's limits
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


#: the default collective builders, by pattern phase
DEFAULT_COLLECTIVES: Collectives = {
    "allreduce": allreduce,
    "allgather": allgather,
    "reducescatter": reducescatter,
    "alltoall": alltoall,
}


def server_of(gpu: str) -> str:
    """The server a GPU sits in: its name up to the last "/"."""
    return gpu.rsplit("/", 1)[0]


def job_workload(
    job: Job, gpus: Sequence[str], *, start: float = 0.0, collectives: Collectives | None = None
) -> tuple[Workload, tuple[tuple[str, ...], ...]]:
    """The flows and tasks of `job` on `gpus` (ring order), released at `start`.

    Phases chain per rank: a rank's collective sends wait for that rank's previous phase, and a rank's
    next phase waits for the collective's last sends and receives of that rank (as a rank's NCCL call
    returns when its own part is done); collectives of one phase (a tuple) start together and the
    next phase waits for each of them. Single-GPU jobs skip their collectives.

    Returns:
        (workload, ids of each iteration's last items), the latter to time the iterations.
    """
    gpus = tuple(gpus)
    if len(gpus) != job.gpus or len(set(gpus)) != len(gpus):
        raise ScenarioError(f"job {job.id!r}: needs {job.gpus} distinct GPUs, got {list(gpus)}")
    coll = DEFAULT_COLLECTIVES if collectives is None else collectives
    parts: list[Workload] = []
    ends: list[tuple[str, ...]] = []
    ready: dict[str, tuple[str, ...]] = {g: () for g in gpus}  # rank -> ids its next phase waits on
    comm = sum(kind != "compute" for kind, _ in PATTERNS[job.pattern])
    servers = len({server_of(g) for g in gpus})
    extra = job.server_bytes * (servers - 1) / comm if comm else 0.0
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
                named = {kind: tag} if isinstance(kind, str) else {x: f"{tag}/{x}" for x in kind}
                ws = [coll[x](list(gpus), job.comm_bytes * share, name=n).workload for x, n in named.items()]
                ws = [w for w in ws if w.flows or w.tasks]  # SERVER_COLLECTIVES: none within one server
                if ws:
                    parts += [_rank_chained(w, ready, start, extra) for w in ws]
                    done = [_rank_done(w, gpus) for w in ws]
                    ready = {g: tuple(i for d in done for i in d[g]) for g in gpus}
        ends.append(tuple(dict.fromkeys(i for ids in ready.values() for i in ids)))
    return dataclasses.replace(concat(parts), name=job.id), tuple(ends)


def _rank_chained(
    w: Workload, ready: Mapping[str, tuple[str, ...]], start: float, extra: float = 0.0
) -> Workload:
    """`w` released at `start`, each root also waiting on what its sending rank was doing; `extra` bytes
    more out of each server, split evenly over the root flows that leave it for another server."""
    roots = set(w.roots())
    leaving = Counter(
        server_of(f.src) for f in w.flows if f.id in roots and server_of(f.src) != server_of(f.dst)
    )
    fix = lambda x, rank: dataclasses.replace(
        x, start=start, after=tuple(x.after) + (ready.get(rank, ()) if x.id in roots else ())
    )
    flows = [
        dataclasses.replace(fix(f, f.src), bytes=f.bytes + extra / leaving[server_of(f.src)])
        if extra and f.id in roots and server_of(f.src) != server_of(f.dst)
        else fix(f, f.src)
        for f in w.flows
    ]
    return Workload(flows, [fix(t, t.device) for t in w.tasks], w.name)


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


class _ServerLevel(NamedTuple):
    workload: Workload


def _server_level(kind: str) -> Callable[..., _ServerLevel]:
    def build(ranks: Sequence[str], size: float, *, name: str) -> _ServerLevel:
        """Per server the ranks span (in ring order), one flow of its egress bytes to the next server's
        first rank."""
        by_server: dict[str, str] = {}
        for r in ranks:
            by_server.setdefault(server_of(r), r)
        first = list(by_server.values())
        n = len(first)
        egress = len(ranks) / n * (1 - 1 / n) if kind == "alltoall" else bus_factor(kind, len(ranks))
        flows = (
            []
            if n < 2
            else [Flow(f"{name}/n{s}", first[s], first[(s + 1) % n], egress * size) for s in range(n)]
        )
        return _ServerLevel(Workload(flows, name=name))

    return build


#: collective builders that model only the traffic between servers, for fast simulations of many jobs
#: (the fit of MODELS): per phase, each server the ranks span (ranks grouped by server, the text of a
#: GPU name up to its last "/") sends its egress bytes to the next server in one flow, from its first
#: rank. A ring collective leaves each server once carrying the busbw bytes (`bus_factor` x S), a
#: direct all-to-all sends k S (1 - 1/n) off each server (k ranks per server, n servers): so each NIC
#: carries what the per-rank collective puts on it, with n flows per phase instead of up to G^2.
#: Traffic inside a server is not modelled.
SERVER_COLLECTIVES: Collectives = {kind: _server_level(kind) for kind in DEFAULT_COLLECTIVES}
