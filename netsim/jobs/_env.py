"""A gym-style scheduling environment over the job simulator: `reset()`, `step(action)`, observations of
the cluster and queue, reward = minus the JCT accrued (or a user function), many environments per step.

Time advances as a fluid model between decision points (arrivals and completions): each running job
progresses at a pace (iterations/s) that netsim simulates for the jobs it actually shares links with.
Running jobs fall into groups connected by shared links or shared resources; jobs of different groups
cannot slow each other down, so each group is simulated alone (a short window of its jobs' iterations
started together) and its paces are cached by group. The environments of a `JobEnvs` move from event
to event together: the uncached groups that all of them need at one event go into ONE
`netsim.compile_batch` / `netsim.run_batch` call (a jitted vmap of the engine), and so do all the
candidate placements that the simulation-in-the-loop policy scores at a decision. See docs/jobs.md.

What is vmapped: the simulations of one step (over groups and environments), and whatever a policy does
with the stacked observations (`JobEnvs.step` takes one action per environment; the policy network of
examples/train_policy.py runs under `jax.vmap`). The environment's bookkeeping (queues, clocks,
placements) is host Python: it is a few operations per event, against a simulation per new group.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from .. import NetsimError, ScenarioError
from ..workloads import Fabric
from ._paces import Member, Paces, signature
from ._placement import Cluster, choose
from ._schedule import JobRun
from ._traffic import PATTERNS, Collectives, Job

__all__ = [
    "CANDIDATES",
    "CANDIDATE_FEATURES",
    "JOB_FEATURES",
    "ActionError",
    "JobEnv",
    "JobEnvs",
    "Observation",
]

#: placement generators, one per action: action k places the head job where CANDIDATES[k] would;
#: action len(CANDIDATES) waits (holds the head until the next arrival or completion)
CANDIDATES = ("packed", "spread", "topology", "contention")
WAIT = len(CANDIDATES)
#: per-candidate features (Observation.candidates)
CANDIDATE_FEATURES = ("servers", "peak_load", "mean_load", "hops", "new")
_PATTERNS = tuple(PATTERNS)
JOB_FEATURES = (
    *(f"pattern={p}" for p in _PATTERNS),
    "gpus",
    "compute",
    "comm_gb",
    "log10_iterations",
    "queue",
)


class ActionError(NetsimError, ValueError):
    """An action the environment cannot take: out of range, a wrong shape, busy or unknown GPUs."""


class Observation(NamedTuple):
    """What a policy sees at a decision (NumPy arrays; `JobEnvs` stacks them along a leading axis).

    Attributes:
        free: [S] free GPUs per server, as a fraction of the server's GPUs.
        load: [L] bytes/s that running jobs put on each link, over its bandwidth (fabric link order).
        job: [len(JOB_FEATURES)] the head of the queue: one-hot pattern, GPUs / largest server, compute s
            per iteration, collective GB, log10 iterations; and the queue length / 10.
        candidates: [K, len(CANDIDATE_FEATURES)] per candidate placement: servers spanned / S, peak and mean
            load / bandwidth on the links its traffic would cross, route hops between its ring neighbours
            (all pairs for all-to-all) per pair, and 1 where it is the first candidate with its GPUs (0 for
            a duplicate).
        mask: [K + 1] actions allowed (the last one is "wait").
        time: [] simulated s.
    """

    free: np.ndarray
    load: np.ndarray
    job: np.ndarray
    candidates: np.ndarray
    mask: np.ndarray
    time: np.ndarray


# --- one episode -----------------------------------------------------------------------------------


@dataclasses.dataclass
class _Running:
    gpus: tuple[str, ...]
    start: float
    remaining: float  # iterations


class _Episode:
    """The host state of one environment: clock, queue, running jobs, and what has finished."""

    def __init__(self, jobs: Sequence[Job], cluster: Cluster):
        self.jobs = tuple(sorted(jobs, key=lambda j: j.arrival))
        self.cluster = cluster
        self.t = 0.0
        self.arrived = 0  # jobs[:arrived] have arrived
        self.queue: list[int] = []
        self.running: dict[int, _Running] = {}
        self.done_at: dict[int, tuple[tuple[str, ...], float, float]] = {}  # gpus, start, finish
        self.hold = False  # the head was told to wait until the next event
        self.accrued = 0.0  # job-seconds in the system since the last step (the JCT accrued)
        self.gpu_seconds = 0.0
        self.finished_now: list[int] = []
        self.load: dict[str, float] = {}  # bytes/s per link of the running jobs, at the latest decision
        self._arrive()

    @property
    def done(self) -> bool:
        return len(self.done_at) == len(self.jobs)

    def free(self) -> list[str]:
        busy = {g for r in self.running.values() for g in r.gpus}
        return [g for g in self.cluster.gpus if g not in busy]

    def head(self) -> Job | None:
        return self.jobs[self.queue[0]] if self.queue else None

    def at_decision(self) -> bool:
        head = self.head()
        return head is not None and not self.hold and head.gpus <= len(self.free())

    def can_wait(self) -> bool:
        return bool(self.running) or self.arrived < len(self.jobs)

    def members(self, extra: tuple[Job, tuple[str, ...]] | None = None) -> tuple[list[int], list[Member]]:
        ids = list(self.running)
        members = [(signature(self.jobs[i]), self.running[i].gpus) for i in ids]
        if extra is not None:
            members.append((signature(extra[0]), extra[1]))
        return ids, members

    def _arrive(self) -> None:
        while self.arrived < len(self.jobs) and self.jobs[self.arrived].arrival <= self.t:
            self.queue.append(self.arrived)
            self.arrived += 1

    def fork(self, future: Sequence[Job] = ()) -> _Episode:
        """A copy that knows the jobs arrived so far and, of those to come, only `future` (jobs in arrival
        order, none before the clock): what the lookahead runs forward. Its `accrued` starts at 0."""
        f = copy.copy(self)
        f.jobs = self.jobs[: self.arrived] + tuple(future)
        f.queue = list(self.queue)
        f.running = {i: dataclasses.replace(r) for i, r in self.running.items()}
        f.done_at = dict(self.done_at)
        f.finished_now, f.accrued, f.gpu_seconds, f.hold = [], 0.0, 0.0, False
        return f

    def place(self, gpus: tuple[str, ...]) -> None:
        i = self.queue.pop(0)
        self.running[i] = _Running(gpus, self.t, float(self.jobs[i].iterations))

    def advance(self, paces: Paces) -> None:
        """Moves the clock to the next arrival or completion at the running jobs' paces."""
        ids, members = self.members()
        rate = dict(zip(ids, paces.paces(members), strict=True))
        ends = {i: self.t + self.running[i].remaining / rate[i] for i in ids}
        nxt = min(
            [*ends.values(), *([self.jobs[self.arrived].arrival] if self.arrived < len(self.jobs) else [])]
        )
        dt = nxt - self.t
        self.accrued += dt * (len(self.queue) + len(self.running))
        self.gpu_seconds += dt * sum(self.jobs[i].gpus for i in ids)
        self.t = nxt
        for i in ids:
            if ends[i] <= nxt:
                r = self.running.pop(i)
                self.done_at[i] = (r.gpus, r.start, ends[i])
                self.finished_now.append(i)
            else:
                self.running[i].remaining -= rate[i] * dt
        self.hold = False
        self._arrive()


# --- the environments ------------------------------------------------------------------------------


def check_margin(margin) -> None:
    """A lookahead's `margin`: a fraction in [0, 1] (1: no gain is large enough, always packed)."""
    if isinstance(margin, bool) or not isinstance(margin, int | float) or not 0.0 <= margin <= 1.0:
        raise ScenarioError(f"margin: expected a fraction in [0, 1], got {margin!r}")


Trace = Sequence[Job] | Callable[[int], Sequence[Job]]
Reward = Callable[[Mapping[str, Any]], float]


class JobEnvs:
    """B scheduling environments over one cluster, stepped together (see the module docstring).

    Args:
        fabric: the cluster's topology.
        traces: per environment, a job trace, or a function seed -> trace (called by `reset`).
        gpus: the GPUs jobs may use, in cluster order (default: fabric.gpus()).
        server: GPU -> server name (default: the GPU name up to its last "/").
        reward: info -> reward of a step (default: minus info["jct_accrued"], so that an episode's
            rewards sum to minus the sum of its jobs' completion times).
        paces: a `Paces` to share (and its cache) between environment families on the same fabric.
        collectives, window, max_iterations: for a new `Paces`.
    """

    def __init__(
        self,
        fabric: Fabric,
        traces: Sequence[Trace],
        *,
        gpus: Sequence[str] | None = None,
        server: Callable[[str], str] | None = None,
        reward: Reward | None = None,
        paces: Paces | None = None,
        collectives: Collectives | None = None,
        window: int = 2,
        max_iterations: int = 4,
    ):
        if not traces:
            raise ScenarioError("traces: need at least one environment")
        self.cluster = Cluster.of(fabric, fabric.gpus() if gpus is None else gpus, server)
        gpus = self.cluster.gpus
        self.servers = tuple(dict.fromkeys(self.cluster.server[g] for g in gpus))
        self.server_size = {s: sum(self.cluster.server[g] == s for g in gpus) for s in self.servers}
        self.fabric = fabric
        self.links = tuple(link.id for link in fabric.links)
        self.traces = tuple(traces)
        self.reward_fn = reward or (lambda info: -info["jct_accrued"])
        self.paces = paces or Paces(
            fabric, collectives=collectives, window=window, max_iterations=max_iterations
        )
        self.episodes: list[_Episode] = []
        self._candidates: list[list[tuple[str, ...]]] = []

    @property
    def size(self) -> int:
        return len(self.traces)

    # -- gym interface --

    def reset(self, seeds: Sequence[int] | None = None) -> tuple[Observation, list[dict]]:
        """Starts every environment; a trace given as a function is called with its seed (default 0..B-1).

        Returns (observations stacked along a leading axis of B, one info dict per environment).
        """
        seeds = list(range(self.size)) if seeds is None else [int(s) for s in seeds]
        if len(seeds) != self.size:
            raise ActionError(f"seeds: expected {self.size} (one per environment), got {len(seeds)}")
        self.episodes = []
        for trace, seed in zip(self.traces, seeds, strict=True):
            jobs = list(trace(seed) if callable(trace) else trace)
            self.cluster.check(jobs, "trace")
            self.episodes.append(_Episode(jobs, self.cluster))
        self._settle(self.episodes)
        obs = self._observe()
        return obs, [self._info(e) for e in self.episodes]

    def step(self, actions) -> tuple[Observation, np.ndarray, np.ndarray, list[dict]]:
        """Takes one action per environment, then runs each to its next decision (or the end).

        actions: [B] ints: k < len(CANDIDATES) places the head job on candidate k, len(CANDIDATES) waits;
            or, per environment, a sequence of GPU names to place the head job on. Environments that are
            done ignore their action (any value in range).

        Returns:
            (observations [B, ...], rewards [B], dones [B], infos). An info holds "time", "elapsed" (s
            since the previous decision), "jct_accrued" (job-seconds spent in the system meanwhile),
            "gpu_seconds" (GPU-seconds held meanwhile), "finished" (ids of jobs done meanwhile), and
            "placed" (the GPUs given to the head job, or None when it waited).

        Raises:
            ActionError: a wrong number of actions, an action out of range or masked out, GPUs that are
                unknown, repeated, busy or the wrong number.
        """
        if not self.episodes:
            raise ActionError("step: call reset() first")
        if (isinstance(actions, np.ndarray) and actions.ndim >= 1) or isinstance(actions, list | tuple):
            actions = list(actions)
        else:
            raise ActionError(f"actions: expected one action per environment ({self.size}), got {actions!r}")
        if len(actions) != self.size:
            raise ActionError(f"actions: expected {self.size} (one per environment), got {len(actions)}")
        placed = [self._apply(b, e, a) for b, (e, a) in enumerate(zip(self.episodes, actions, strict=True))]
        before = [(e.t, e.accrued, e.gpu_seconds) for e in self.episodes]
        for e in self.episodes:
            e.accrued = e.gpu_seconds = 0.0
            e.finished_now = []
        self._settle(self.episodes)
        infos = []
        for e, p, (t0, _, _) in zip(self.episodes, placed, before, strict=True):
            info = self._info(e) | {"elapsed": e.t - t0, "placed": p}
            infos.append(info)
        rewards = np.array([float(self.reward_fn(i)) for i in infos])
        dones = np.array([e.done for e in self.episodes])
        return self._observe(), rewards, dones, infos

    # -- candidates, simulation-in-the-loop --

    def candidates(self, b: int = 0) -> list[tuple[str, ...]]:
        """The K candidate placements of environment b's head job (empty when it is not at a decision)."""
        return list(self._candidates[b]) if self._candidates else []

    def simloop_actions(self) -> np.ndarray:
        """Per environment, the candidate whose placement gives the smallest predicted time to finish
        every running job and the new one at the simulated paces (one batched simulation for all
        environments' candidates); 0 where an environment is done."""
        pending = []
        for b, e in enumerate(self.episodes):
            if e.done:
                continue
            head = e.head()
            for k, gpus in enumerate(self._candidates[b]):
                ids, members = e.members((head, gpus))
                pending.append((b, k, ids, members))
        self.paces.fill([key for *_, members in pending for key in self.paces.needed(members)])
        best: dict[int, tuple[float, int]] = {}
        for b, k, ids, members in pending:
            e = self.episodes[b]
            remaining = [e.running[i].remaining for i in ids] + [float(e.head().iterations)]
            score = sum(r / p for r, p in zip(remaining, self.paces.paces(members), strict=True))
            if b not in best or score < best[b][0] * (1 - 1e-12):
                best[b] = (score, k)
        return np.array([best[b][1] if b in best else 0 for b in range(self.size)])

    def lookahead_costs(
        self, *, future: str | Sequence[Sequence[Job]] | None = None
    ) -> list[dict[int, float]]:
        """Per environment, {action index: predicted job-seconds} for each distinct candidate of the
        head job (the first index of a repeated placement) and, where a job runs, for WAIT (the head held
        until the next completion); empty where an environment is done. Each action is run forward in
        the fluid model with the jobs that have arrived (running, the head, the queue placed FIFO by
        packed as GPUs free up) until all of them finish. All forks step together: the groups they need
        at each step are one batched simulation (`Paces.fill`).

        Exact for the jobs it knows (the paces the environment then runs at); blind to later arrivals
        unless told of some. future: None (blind); "trace": every job of each trace still to arrive (no
        policy can know them: what foresight changes for this planner, docs/jobs.md); or per
        environment the jobs to assume will arrive (e.g. sampled from a fitted arrival model), none before
        its clock, with ids of their own.
        """
        forks = self._action_forks(self._future(future))
        live = [f for *_, f in forks]
        while live:
            for f in live:
                while f.at_decision():
                    f.place(tuple(choose("packed", self.cluster, f.free(), f.head(), {})))
            live = [f for f in live if not f.done]
            self.paces.fill([key for f in live for key in self.paces.needed(f.members()[1])])
            for f in live:
                f.advance(self.paces)
        costs: list[dict[int, float]] = [{} for _ in self.episodes]
        for b, k, f in forks:
            costs[b][k] = f.accrued
        return costs

    def lookahead_actions(
        self, *, margin: float = 0.0, future: str | Sequence[Sequence[Job]] | None = None
    ) -> np.ndarray:
        """Per environment, the contention-aware choice: the action (a candidate, or WAIT) with the
        fewest predicted job-seconds (`lookahead_costs`, told of `future` arrivals) if it beats packed's by
        more than `margin` (a fraction), else packed (also where an environment is done)."""
        check_margin(margin)
        return self._cheapest(self.lookahead_costs(future=future), margin)

    def rollout_costs(self) -> list[dict[int, float]]:
        """Per environment, {action index: job-seconds} of the actions `lookahead_costs` scores, each run
        forward with the jobs that have arrived as the contention-aware policy itself would go on
        (`lookahead_actions` at every later decision), not FIFO by packed: a rollout of that policy. Where
        every job has arrived, taking the cheapest action at each decision never does worse than the
        policy (its own action is among them, at exactly the cost of following it; Bertsekas' rollout).
        The forks of all environments are the environments of one inner `JobEnvs`, so their simulations
        batch; each of its steps runs a lookahead, so this costs about a whole schedule per decision."""
        forks = self._action_forks(self._future(None))  # blind to later arrivals, as the policy is
        inner = copy.copy(self)
        inner.traces = tuple(range(len(forks)))
        inner.episodes = [f for *_, f in forks]
        inner._settle(inner.episodes)
        spent = [f.accrued for f in inner.episodes]
        while not all(f.done for f in inner.episodes):
            infos = inner.step(inner.lookahead_actions())[3]
            spent = [s + info["jct_accrued"] for s, info in zip(spent, infos, strict=True)]
        costs: list[dict[int, float]] = [{} for _ in self.episodes]
        for (b, k, _), s in zip(forks, spent, strict=True):
            costs[b][k] = s
        return costs

    def rollout_actions(self, *, margin: float = 0.0) -> np.ndarray:
        """Per environment, the action with the fewest job-seconds by `rollout_costs` if it beats packed's
        by more than `margin` (a fraction), else packed."""
        check_margin(margin)
        return self._cheapest(self.rollout_costs(), margin)

    def heuristic_actions(self, policy: str) -> np.ndarray:
        """Action index of placement policy `policy` (one of CANDIDATES) in every environment."""
        if policy not in CANDIDATES:
            raise ScenarioError(
                f"policy: unknown placement policy {policy!r}; expected one of {list(CANDIDATES)}"
            )
        return np.full(self.size, CANDIDATES.index(policy))

    # -- internals --

    def _action_forks(self, told: Sequence[Sequence[Job]]) -> list[tuple[int, int, _Episode]]:
        """(environment, action, fork with the action taken) for each distinct candidate of every
        environment's head job and, where a job runs, WAIT; the forks know `told[b]` of the jobs to come."""
        forks = []
        for b, e in enumerate(self.episodes):
            if e.done:
                continue
            seen: set[frozenset[str]] = set()
            for k, gpus in enumerate(self._candidates[b]):
                if frozenset(gpus) not in seen:
                    seen.add(frozenset(gpus))
                    f = e.fork(told[b])
                    f.place(gpus)
                    forks.append((b, k, f))
            if e.running:  # a completion ends the wait (an arrival too, if the fork knows of it)
                f = e.fork(told[b])
                f.hold = True
                forks.append((b, WAIT, f))
        return forks

    def _cheapest(self, costs: list[dict[int, float]], margin: float) -> np.ndarray:
        """Per environment, the cheapest action if it beats packed's cost by more than `margin`, else
        packed (also where an environment is done)."""
        packed = CANDIDATES.index("packed")
        actions = np.full(self.size, packed)
        for b, cost in enumerate(costs):
            if cost:
                best = min(cost, key=cost.__getitem__)
                if cost[best] < cost[packed] * (1 - margin) * (1 - 1e-12):
                    actions[b] = best
        return actions

    def _future(self, future) -> list[tuple[Job, ...]]:
        """`lookahead_costs`' future, checked: per environment, the later arrivals its forks know."""
        if future is None:
            return [()] * self.size
        if isinstance(future, str) and future == "trace":
            return [e.jobs[e.arrived :] for e in self.episodes]
        if isinstance(future, str) or not isinstance(future, Sequence) or len(future) != self.size:
            raise ScenarioError(
                f"future: expected None, 'trace' or one list of jobs per environment ({self.size}), got {future!r:.80}"
            )
        out = []
        for b, (e, jobs) in enumerate(zip(self.episodes, future, strict=True)):
            known = {j.id for j in e.jobs[: e.arrived]}
            for j in jobs:
                if not isinstance(j, Job) or j.arrival < e.t or j.id in known:
                    raise ScenarioError(
                        f"future[{b}]: expected netsim.jobs.Job items arriving at or after the clock "
                        f"({e.t:g} s) with new ids, got {j!r:.120}"
                    )
                known.add(j.id)
            out.append(tuple(sorted(jobs, key=lambda j: j.arrival)))
        return out

    def _apply(self, b: int, e: _Episode, action) -> tuple[str, ...] | None:
        if e.done:
            return None
        where = f"actions[{b}]"
        if isinstance(action, str):
            raise ActionError(
                f"{where}: expected an action index or a list of GPU names, got the string {action!r}"
            )
        if isinstance(action, list | tuple) or (isinstance(action, np.ndarray) and action.dtype.kind in "UO"):
            gpus = tuple(action)
            head = e.head()
            free = set(e.free())
            unknown = [g for g in gpus if g not in self.cluster.server]
            if unknown:
                raise ActionError(
                    f"{where}: unknown GPU(s) {unknown}; GPUs look like {self.cluster.gpus[0]!r}"
                )
            if len(gpus) != head.gpus or len(set(gpus)) != len(gpus):
                raise ActionError(
                    f"{where}: job {head.id!r} needs {head.gpus} distinct GPUs, got {list(gpus)}"
                )
            busy = [g for g in gpus if g not in free]
            if busy:
                owner = {g: self.episodes[b].jobs[i].id for i, r in e.running.items() for g in r.gpus}
                raise ActionError(
                    f"{where}: GPU(s) {busy} are busy (job {owner[busy[0]]!r}); free on their servers: "
                    f"{sorted(g for g in free if self.cluster.server[g] in {self.cluster.server[x] for x in busy})}"
                )
            e.place(self.cluster.ordered(gpus))
            return self.cluster.ordered(gpus)
        if np.ndim(action) != 0:
            raise ActionError(
                f"{where}: expected one integer action, got an array of shape {np.shape(action)}"
            )
        if isinstance(action, bool) or not np.issubdtype(np.asarray(action).dtype, np.integer):
            raise ActionError(
                f"{where}: expected an integer action in [0, {WAIT}] or a GPU list, got {action!r}"
            )
        k = int(action)
        if not 0 <= k <= WAIT:
            raise ActionError(f"{where}: action {k} out of range [0, {WAIT}] ({', '.join(CANDIDATES)}, wait)")
        if k == WAIT:
            if not e.can_wait():
                raise ActionError(f"{where}: cannot wait: no job runs and none is still to arrive")
            e.hold = True
            return None
        gpus = self._candidates[b][k]
        e.place(gpus)
        return gpus

    def _settle(self, episodes: Sequence[_Episode]) -> None:
        """Advances every environment to its next decision or its end, batching the simulations."""
        while True:
            pending = [e for e in episodes if not e.done and not e.at_decision()]
            if not pending:
                break
            self.paces.fill([k for e in pending for k in self.paces.needed(e.members()[1])])
            for e in pending:
                e.advance(self.paces)
        # the load the candidates and observations read: jobs placed at this instant form new groups
        self.paces.fill([k for e in episodes if not e.done for k in self.paces.needed(e.members()[1])])
        self._candidates = [self._make_candidates(e) for e in episodes]

    def _link_load(self, e: _Episode) -> dict[str, float]:
        """bytes/s per link of the running jobs at their current paces."""
        ids, members = e.members()
        load: dict[str, float] = {}
        if not ids:
            return load
        need = self.paces.needed(members)
        self.paces.fill(need)
        for m, pace in zip(members, self.paces.paces(members), strict=True):
            for lid, b in self.paces.traffic(m).items():
                load[lid] = load.get(lid, 0.0) + b * pace
        return load

    def _make_candidates(self, e: _Episode) -> list[tuple[str, ...]]:
        if e.done or not e.at_decision():
            return []
        e.load = self._link_load(e)
        free, head = e.free(), e.head()
        return [tuple(choose(p, self.cluster, free, head, e.load)) for p in CANDIDATES]

    def _observe(self) -> Observation:
        obs = [self._observe_one(b, e) for b, e in enumerate(self.episodes)]
        return Observation(*(np.stack(x) for x in zip(*obs, strict=True)))

    def _observe_one(self, b: int, e: _Episode) -> Observation:
        cap = self.paces.capacity
        free = e.free()
        free_frac = np.array(
            [sum(self.cluster.server[g] == s for g in free) / self.server_size[s] for s in self.servers]
        )
        load = e.load if self._candidates[b] else {}
        util = np.array([load.get(lid, 0.0) / cap[lid] for lid in self.links])
        job = np.zeros(len(JOB_FEATURES))
        cands = np.zeros((len(CANDIDATES), len(CANDIDATE_FEATURES)))
        mask = np.zeros(WAIT + 1, bool)
        head = e.head()
        if head is not None and not e.done:
            job[_PATTERNS.index(head.pattern)] = 1.0
            job[len(_PATTERNS) :] = (
                head.gpus / max(self.server_size.values()),
                head.compute,
                head.comm_bytes / 1e9,
                math.log10(head.iterations),
                len(e.queue) / 10,
            )
        seen = set()
        for k, gpus in enumerate(self._candidates[b]):
            used = {
                lid for a, c in self.cluster.pairs(gpus, head.pattern) for lid in self.cluster.route(a, c)
            }
            u = [load.get(lid, 0.0) / cap[lid] for lid in used] or [0.0]
            pairs = self.cluster.pairs(gpus, head.pattern)
            hops = sum(self.cluster.distance(a, c) for a, c in pairs) / max(1, len(pairs))
            cands[k] = (
                len({self.cluster.server[g] for g in gpus}) / len(self.servers),
                max(u),
                float(np.mean(u)),
                hops,
                float(frozenset(gpus) not in seen),
            )
            seen.add(frozenset(gpus))
            mask[k] = True
        if self._candidates[b]:
            mask[WAIT] = e.can_wait()
        return Observation(free_frac, util, job, cands, mask, np.array(e.t))

    def _info(self, e: _Episode) -> dict:
        return {
            "time": e.t,
            "jct_accrued": e.accrued,
            "gpu_seconds": e.gpu_seconds,
            "finished": [e.jobs[i].id for i in e.finished_now],
            "queued": len(e.queue),
            "running": len(e.running),
        }

    def runs(self, b: int = 0):
        """Environment b's finished jobs as JobRun (arrival order); its iteration_finish is empty (the
        fluid model times whole jobs)."""
        e = self.episodes[b]
        return tuple(JobRun(e.jobs[i], *e.done_at[i][:2], e.done_at[i][2], ()) for i in sorted(e.done_at))


class JobEnv:
    """One scheduling environment (gym-style): `reset(seed)`, `step(action)` -> (obs, reward, done, info).

    A thin view of `JobEnvs` with one environment; the arguments are those of `JobEnvs` with one `trace`.
    Observations are `Observation`s without the batch axis.
    """

    def __init__(self, fabric: Fabric, trace: Trace, **kwargs):
        self.envs = JobEnvs(fabric, [trace], **kwargs)

    def reset(self, seed: int | None = None) -> tuple[Observation, dict]:
        obs, infos = self.envs.reset(None if seed is None else [seed])
        return _first(obs), infos[0]

    def step(self, action) -> tuple[Observation, float, bool, dict]:
        obs, rewards, dones, infos = self.envs.step([action])
        return _first(obs), float(rewards[0]), bool(dones[0]), infos[0]

    def candidates(self) -> list[tuple[str, ...]]:
        return self.envs.candidates(0)

    def runs(self):
        return self.envs.runs(0)


def _first(obs: Observation) -> Observation:
    return Observation(*(x[0] for x in obs))
