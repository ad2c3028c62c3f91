"""Paces of co-located jobs: the one rule that turns simulated iteration ends into a steady pace
(`iteration_paces`, over a batch, in JAX so that the fit of `MODELS` differentiates it), and `Paces`,
the environment's cache of simulated paces per group of jobs that share links.

A job's pace next to others is measured as DeepShare's pairwise table reports it: its iterations that
ended while every job of the simulation still ran, over the time they took.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .. import Shape, compile_batch, compile_scenario
from .._compile import bucket
from ..workloads import Fabric, concat
from ._traffic import PATTERNS, Collectives, Job, job_workload

__all__ = ["Paces", "iteration_paces"]


def iteration_paces(ends, iterations):
    """Mean s per iteration of each job of each simulation, over its iterations that ended while every
    job of its simulation still ran (all of them for a job alone; at least the first). Jobs start at 0.

    Args:
        ends: [..., J, I] s at which each job's iteration i ended (entries i >= its count are ignored).
        iterations: [..., J] iterations of each job (0: no job in that slot).

    Returns:
        [..., J] s per iteration (garbage in empty slots). Differentiable in `ends`.
    """
    ends = jnp.asarray(ends)
    iterations = jnp.asarray(iterations)
    index = jnp.broadcast_to(jnp.arange(ends.shape[-1], dtype=iterations.dtype), ends.shape)
    valid = index < iterations[..., None]  # [..., J, I]
    last = jnp.max(jnp.where(valid, ends, 0.0), axis=-1)  # [..., J]
    until = jnp.min(jnp.where(iterations > 0, last, jnp.inf), axis=-1, keepdims=True)  # [..., 1]
    # a small relative tolerance: jobs in phase end "together" up to rounding
    done = jnp.sum(valid & (ends <= until[..., None] * (1 + 1e-9)), axis=-1)
    done = jnp.maximum(done, 1)
    at = jnp.take_along_axis(ends, (done - 1)[..., None], axis=-1)[..., 0]
    return at / done.astype(at.dtype)


_iteration_paces = jax.jit(iteration_paces)  # op by op, its ~20 operations cost ~17 ms a call

#: a running job as the paces see it: ((pattern, compute, comm_bytes, gpus, server_bytes), its GPUs)
Member = tuple[tuple[str, float, float, int, float], tuple[str, ...]]


def signature(job: Job) -> tuple[str, float, float, int, float]:
    """What of a job sets its traffic, the key of its paces."""
    return (job.pattern, job.compute, job.comm_bytes, job.gpus, job.server_bytes)


def signed_job(sig: tuple[str, float, float, int, float], id: str, iterations: int) -> Job:
    """The job a `signature` stands for, released at 0."""
    pattern, compute, comm, gpus, server_bytes = sig
    return Job(id, 0.0, gpus, iterations, compute, pattern, comm, server_bytes=server_bytes)


class Paces:
    """Iterations/s of running jobs, simulated per group of jobs that share links, and cached by group.

    A group's simulation starts its jobs together and gives each job enough iterations to span about
    `window` iterations of the slowest (at most `max_iterations`, at least 1); a job's pace is its
    iterations that ended while every job of the group still ran, over the time they took (the steady
    co-located pace). A job alone runs `window` iterations. Estimated iteration times that size the
    windows: compute + the busiest link's bytes per iteration over its bandwidth.

    Attributes:
        simulations, batches: scenarios simulated and run_batch calls made so far.
    """

    def __init__(
        self,
        fabric: Fabric,
        *,
        collectives: Collectives | None = None,
        window: int = 2,
        max_iterations: int = 4,
        shape: Shape | None = None,
    ):
        self.fabric = fabric
        self.collectives = collectives
        self.window, self.max_iterations = int(window), int(max_iterations)
        self.capacity = {link.id: link.bandwidth for link in fabric.links}
        self.shared: dict[str, list[str]] = {}  # link id -> shared resources it is part of
        for r in getattr(fabric, "shared", ()):
            for lid in r.links:
                self.shared.setdefault(lid, []).append(r.id)
        self.shape = shape or self._floor(fabric)
        self.cache: dict[tuple[Member, ...], tuple[float, ...]] = {}
        self.simulations = self.batches = 0

    @staticmethod
    def _floor(fabric: Fabric) -> Shape:
        """The batches' least shape: routes as long as the fabric's longest between GPUs, and 16
        predecessors an item (an all-to-all over G GPUs needs 2 G - 2: 14 at 8). Each size of batch then
        compiles once, not again each time a group needs longer routes or more predecessors than any
        before it (a 2-GPU ring first, an 8-GPU all-to-all later)."""
        gpus = fabric.gpus() if hasattr(fabric, "gpus") else ()
        hops = max((len(fabric.route(a, b)) for a in gpus for b in gpus if a != b), default=Shape.hops)
        return dataclasses.replace(Shape(), hops=bucket(hops, 1), after=16)

    @functools.lru_cache(maxsize=4096)  # noqa: B019 (one Paces per environment family; bounded)
    def traffic(self, member: Member) -> Mapping[str, float]:
        """Bytes per iteration that one job puts on each link."""
        sig, gpus = member
        w, _ = job_workload(signed_job(sig, "x", 1), gpus, collectives=self.collectives)
        out: dict[str, float] = {}
        for f in w.flows:
            for lid in f.route or self.fabric.route(f.src, f.dst):
                out[lid] = out.get(lid, 0.0) + f.bytes
        return out

    def resources(self, member: Member) -> frozenset[str]:
        used = self.traffic(member)
        return frozenset(used) | {r for lid in used for r in self.shared.get(lid, ())}

    def estimate(self, member: Member) -> float:
        """A quick estimate of one iteration alone (s): compute + busiest link's bytes / bandwidth."""
        (pattern, compute, *_), _ = member
        busiest = max((b / self.capacity[lid] for lid, b in self.traffic(member).items()), default=0.0)
        share = sum(s for kind, s in PATTERNS[pattern] if kind == "compute")
        return compute * share + busiest

    def groups(self, members: Sequence[Member]) -> list[list[int]]:
        """Indices of `members` grouped by shared resources (connected components), each sorted."""
        parent = list(range(len(members)))

        def find(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        owner: dict[str, int] = {}
        for i, m in enumerate(members):
            for r in self.resources(m):
                if r in owner:
                    parent[find(i)] = find(owner[r])
                else:
                    owner[r] = i
        out: dict[int, list[int]] = {}
        for i in range(len(members)):
            out.setdefault(find(i), []).append(i)
        return list(out.values())

    @staticmethod
    def key(members: Sequence[Member]) -> tuple[Member, ...]:
        return tuple(sorted(members))

    def needed(self, members: Sequence[Member]) -> list[tuple[Member, ...]]:
        """The group keys of a running set that are not cached yet."""
        keys = [self.key([members[i] for i in g]) for g in self.groups(members)]
        return [k for k in keys if k not in self.cache]

    def fill(self, keys) -> None:
        """Simulates the uncached groups among `keys` in one batched run."""
        todo = list(dict.fromkeys(k for k in keys if k not in self.cache))
        if not todo:
            return
        built = [self._build(k) for k in todo]
        compiled = [compile_scenario(b[0]) for b in built]
        # every size rounds up to a power of two, and all but the items only grow: few shapes, few compiles
        common = functools.reduce(Shape.__or__, (c.shape for c in compiled), self.shape).in_powers_of_two()
        self.shape = dataclasses.replace(common, items=self.shape.items)
        batch = compile_batch(compiled, shape=common)
        run = batch.run(keep=("finish",), width=bucket(len(todo), 1))
        self.simulations += len(todo)
        self.batches += 1
        its = [  # per group, per job, the end of each iteration
            [[max(f[index[i]] for i in ids) for ids in e] for e in ends]
            for index, f, (_, ends) in zip(
                map(self._index, batch.compiled), run["finish"], built, strict=True
            )
        ]
        # sizes in powers of two (empty slots count 0 iterations): one compile of the jitted rule per shape
        shape = (len(its), max(map(len, its)), max(len(e) for x in its for e in x))
        table = np.zeros(tuple(bucket(n, 1) for n in shape))
        counts = np.zeros(table.shape[:2], np.int64)
        for b, x in enumerate(its):
            for j, e in enumerate(x):
                table[b, j, : len(e)], counts[b, j] = e, len(e)
        seconds = np.asarray(_iteration_paces(table, counts))  # per iteration
        for b, (k, x) in enumerate(zip(todo, its, strict=True)):
            self.cache[k] = tuple((1.0 / seconds[b, : len(x)]).tolist())

    @staticmethod
    def _index(c) -> dict[str, int]:
        """Item id -> its column in the run's finish times (flows, then tasks)."""
        ids = (*(f.id for f in c.scenario.flows), *(t.id for t in c.scenario.tasks))
        return {i: n for n, i in enumerate(ids)}

    def _build(self, key: tuple[Member, ...]):
        if len(key) == 1:
            iterations = [self.window]
        else:
            est = [self.estimate(m) for m in key]
            span = self.window * max(est)
            iterations = [min(self.max_iterations, max(1, math.ceil(span / max(e, 1e-12)))) for e in est]
        workloads, ends = [], []
        for i, ((sig, gpus), its) in enumerate(zip(key, iterations, strict=True)):
            w, e = job_workload(signed_job(sig, f"m{i}", its), gpus, collectives=self.collectives)
            workloads.append(w)
            ends.append(e)
        return concat(workloads).scenario(self.fabric, name="paces"), ends

    def paces(self, members: Sequence[Member]) -> list[float]:
        """Iterations/s of each member next to the others (their groups must be cached: `fill`)."""
        out = [0.0] * len(members)
        for g in self.groups(members):
            key = self.key([members[i] for i in g])
            by_member = dict(zip(key, self.cache[key], strict=True))  # members of a group are distinct
            for i in g:
                out[i] = by_member[members[i]]
        return out
