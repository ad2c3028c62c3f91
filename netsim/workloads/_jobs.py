"""Training jobs compiled to workloads: per iteration, compute on each GPU and the collectives of a
communication pattern (`PATTERNS`: data-parallel AllReduce, FSDP, all-to-all).

`job_workload` compiles one job on given GPUs; placing and simulating a trace of them on a shared
fabric is `netsim.studies.run_jobs`. See docs/jobs.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

from .._checks import number as check_number
from .._scenario import ScenarioError, Task
from ._base import Workload, concat
from .collectives import allgather, allreduce, alltoall, reducescatter

__all__ = ["MODELS", "PATTERNS", "Job", "Model", "job_workload"]

#: per-iteration phases of each pattern: ("compute", fraction of Job.compute) or (collective, size)
PATTERNS: dict[str, tuple[tuple[str, float], ...]] = {
    "allreduce": (("compute", 1.0), ("allreduce", 1.0)),  # data parallel: backward, then gradient AllReduce
    "fsdp": (("allgather", 1.0), ("compute", 1.0), ("reducescatter", 1.0)),  # ZeRO-3 / FSDP, one unit
    "alltoall": (("compute", 0.5), ("alltoall", 1.0), ("compute", 0.5), ("alltoall", 1.0)),  # MoE, DLRM
    "none": (("compute", 1.0),),
}


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


#: the default collective builders, by pattern phase
DEFAULT_COLLECTIVES: Collectives = {
    "allreduce": allreduce,
    "allgather": allgather,
    "reducescatter": reducescatter,
    "alltoall": alltoall,
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
    coll = DEFAULT_COLLECTIVES if collectives is None else collectives
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
