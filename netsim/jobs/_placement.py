"""GPU placement policies for jobs on a shared cluster: which free GPUs a job gets (no simulation here;
`run_jobs` and the environment call `choose` at each scheduling event with the load of the running jobs)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from .. import ScenarioError
from ..workloads import Fabric
from ._traffic import Job, server_of

__all__ = ["POLICIES", "Cluster", "choose", "place"]

POLICIES = ("packed", "spread", "topology", "contention")


@dataclasses.dataclass
class Cluster:
    """A cluster's GPUs (in cluster order), their servers, and route hop counts (cached)."""

    fabric: Fabric
    gpus: tuple[str, ...]  # cluster order
    server: dict[str, str]
    hops: dict[tuple[str, str], int] = dataclasses.field(default_factory=dict)
    routes: dict[tuple[str, str], tuple[str, ...]] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, fabric: Fabric, gpus: Sequence[str], server: Callable[[str], str] | None = None) -> Cluster:
        """The cluster of `gpus` (distinct nodes of `fabric`); server: GPU -> server name (default
        `server_of`)."""
        gpus = tuple(gpus)
        nodes = {n for link in fabric.links for n in (link.src, link.dst)}
        bad = [g for g in gpus if g not in nodes]
        if bad or not gpus or len(set(gpus)) != len(gpus):
            raise ScenarioError(
                f"gpus: expected distinct nodes of the fabric, got {bad[:3] or list(gpus)[:5]}"
            )
        server = server or server_of
        return cls(fabric, gpus, {g: server(g) for g in gpus})

    def check(self, jobs: Sequence[Job], where: str) -> None:
        """Raises ScenarioError, naming `where`, for an empty trace, items that are not Jobs, duplicate
        ids or a job larger than the cluster."""
        if not jobs:
            raise ScenarioError(f"{where}: empty")
        for j in jobs:
            if not isinstance(j, Job):
                raise ScenarioError(f"{where}: expected netsim.jobs.Job items, got {type(j).__name__}")
            if j.gpus > len(self.gpus):
                raise ScenarioError(f"job {j.id!r}: needs {j.gpus} GPUs, the cluster has {len(self.gpus)}")
        ids = [j.id for j in jobs]
        if len(set(ids)) != len(ids):
            raise ScenarioError(
                f"{where}: duplicate job id(s) {sorted({i for i in ids if ids.count(i) > 1})}"
            )

    def distance(self, a: str, b: str) -> int:
        if a == b:
            return 0
        if (a, b) not in self.hops:
            self.hops[a, b] = len(self.route(a, b))
        return self.hops[a, b]

    def route(self, a: str, b: str) -> tuple[str, ...]:
        """The links from GPU a to GPU b (cached)."""
        if (a, b) not in self.routes:
            self.routes[a, b] = tuple(self.fabric.route(a, b))
        return self.routes[a, b]

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
    """GPUs for `job` among `free` (in cluster order) under `policy` (see `choose`); None if too few are free.

    load: bytes/s that running jobs put on each link (for "contention"); server: GPU -> server name
    (default: the name up to its last "/").
    """
    return choose(policy, Cluster.of(fabric, free, server), free, job, load or {})


def choose(
    policy: str, cluster: Cluster, free: Sequence[str], job: Job, load: Mapping[str, float]
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
    if policy not in ("topology", "contention"):
        raise ScenarioError(f"policy: unknown placement policy {policy!r}; expected one of {list(POLICIES)}")
    hop_cost = lambda c: sum(cluster.distance(a, b) for a, b in cluster.pairs(c, job.pattern))
    # route hops between every two free GPUs, both ways: what adding a GPU to a grown set costs per member
    hops = np.array([[cluster.distance(a, b) for b in free] for a in free])
    hops = hops + hops.T
    if policy == "topology":
        return min(
            (_grow(cluster, free, seed, n, [(hops, np.add)]) for seed in range(len(free))), key=hop_cost
        )
    links = lambda pairs: {lid for a, b in pairs for lid in cluster.route(a, b)}
    worst = lambda ids: max((load.get(lid, 0.0) for lid in ids), default=0.0)
    # the busiest link of a union of routes is the busiest of their busiest: one figure per pair
    busiest = np.array([[worst(cluster.route(a, b)) if a != b else 0.0 for b in free] for a in free])
    steps = [(np.maximum(busiest, busiest.T), np.maximum), (hops, np.add)]
    cands = [
        cluster.ordered(_packed(cluster, free, n)),
        cluster.ordered(_spread(cluster, free, n)),
        *(_grow(cluster, free, seed, n, steps) for seed in range(len(free))),
    ]

    def score(c):
        used = links(cluster.pairs(c, job.pattern))
        return (worst(used), sum(load.get(lid, 0.0) for lid in used), hop_cost(c))

    return min(cands, key=score)


def _by_server(cluster: Cluster, free: Sequence[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for g in free:
        out.setdefault(cluster.server[g], []).append(g)
    return out


def _packed(cluster: Cluster, free: Sequence[str], n: int) -> list[str]:
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


def _spread(cluster: Cluster, free: Sequence[str], n: int) -> list[str]:
    queues = list(_by_server(cluster, free).values())
    out: list[str] = []
    while len(out) < n:
        for q in queues:
            if q and len(out) < n:
                out.append(q.pop(0))
    return out


def _grow(cluster: Cluster, free: Sequence[str], seed: int, n: int, steps) -> tuple[str, ...]:
    """From free[seed], add the free GPU with the smallest cost until there are n, in cluster order.

    steps: (matrix, accumulate) pairs over `free` x `free`, compared in turn (ties: the next pair, then the
    first GPU in cluster order): a GPU's cost is matrix[c, g] accumulated over the chosen c (np.add: a sum,
    np.maximum: the largest)."""
    costs = [matrix[seed].copy() for matrix, _ in steps]
    left = np.ones(len(free), bool)
    left[seed] = False
    chosen = [seed]
    while len(chosen) < n:
        best = left.copy()
        for cost in costs:
            best &= cost == cost[best].min()
        g = int(np.argmax(best))
        chosen.append(g)
        left[g] = False
        for cost, (matrix, accumulate) in zip(costs, steps, strict=True):
            accumulate(cost, matrix[g], out=cost)
    return cluster.ordered(free[i] for i in chosen)
