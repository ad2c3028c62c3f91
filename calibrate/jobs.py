"""Job traffic models fitted, through the simulator, to DeepShare's measured throughputs.

DeepShare (ICPADS 2023, arXiv 2310.20209) drives its scheduler simulator with two measured tables
(`netsim.jobs.DeepShareTable`): each job configuration's isolated throughput, keyed
"Model,total_gpus,num_nodes_spanned", and the pairwise co-location table, [A, B] = A's throughput next to B
over A's throughput alone. Each model is netsim.jobs' one traffic model (`job_workload`: per iteration,
compute and the collectives of its `PATTERNS` entry) with three positive parameters fitted in log space:
compute s per iteration, the collective size S (bytes, nccl-tests' sense, as `Job.comm_bytes`), and
`server_bytes`, bytes each collective sends out of every server per server spanned beyond the first
(`Job.server_bytes`). Every measured pair is simulated on a DeepShare-like cluster (`fit_cluster`), both
jobs spread evenly over the first servers (side by side on each), with `SERVER_COLLECTIVES` (one flow per
server and phase carrying what the collective puts on its NIC: n flows per phase instead of up to G^2), as
one padded batch through `netsim.kernels.run`; a job's pace is `netsim.jobs.iteration_paces`, the rule the
scheduling environment uses. The loss compares simulated to measured co-location ratios and
isolated-throughput ratios between configurations of one model (units differ between models). See
docs/jobs.md ("Fitted traffic").
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Callable, Mapping, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

import netsim
from netsim import ScenarioError, Shape, SimulationError, compile_batch, compile_scenario, kernels
from netsim.checks import count, number
from netsim.jobs import (
    SERVER_COLLECTIVES,
    DeepShareTable,
    Job,
    Model,
    Paces,
    deepshare_cluster,
    iteration_paces,
    job_workload,
    server_of,
    spearman,
)
from netsim.workloads import concat

from ._fit import _OPTIM, descend
from ._model import float64_leaves

__all__ = [
    "JobFit",
    "JobParams",
    "JobPrediction",
    "colocation_errors",
    "fit_cluster",
    "fit_jobs",
    "predict_jobs",
]

Config = tuple[str, int, int]  # (model, total GPUs, servers spanned)


def fit_cluster():
    """The cluster the fit runs on: `deepshare_cluster` with 8 servers (the most a measured key spans)
    of 8 GPUs (two jobs of up to 4 GPUs per server side by side), non-blocking between the leaves."""
    return deepshare_cluster(8, 8, oversubscription=1.0)


class JobParams(eqx.Module):
    """Per model, positive through their logs: compute s per iteration, collective size S (bytes),
    bytes per server beyond the first (`Model.server_bytes`)."""

    log_compute: Float[Array, " M"]
    log_bytes: Float[Array, " M"]
    log_server_bytes: Float[Array, " M"]
    models: tuple[str, ...] = eqx.field(static=True)

    @classmethod
    def from_models(cls, models: Mapping[str, Model], names: Sequence[str]) -> JobParams:
        missing = [m for m in names if m not in models]
        if missing:
            raise ScenarioError(f"start: no model for {missing}; have {sorted(models)}")
        log = lambda f: np.log(np.array([max(f(models[m]), 1e-12) for m in names], np.float64))
        return cls(
            log(lambda m: m.compute), log(lambda m: m.comm_bytes), log(lambda m: m.server_bytes), tuple(names)
        )

    def to_models(self, patterns: Mapping[str, str], note: str = "") -> dict[str, Model]:
        c, s, y = (np.exp(np.asarray(x)) for x in (self.log_compute, self.log_bytes, self.log_server_bytes))
        return {
            m: Model(patterns[m], float(c[i]), float(s[i]), note, float(y[i]))
            for i, m in enumerate(self.models)
        }


# --- scenarios ------------------------------------------------------------------------------------


class JobBatch(eqx.Module):
    """Pair and isolated scenarios at one padded shape, with what the parameters set per item.

    Every item of `job_workload` is linear in its job's parameters: a task's s is a share of compute, a
    flow's bytes a share of S plus a share of the bytes per extra server. The shares are read off two
    builds of each job at different unit parameters.

    Attributes:
        network: the fabric (shared by every scenario).
        program: B stacked programs; sizes and overheads are rewritten from the parameters.
        model: B x 2, the model index of each job slot (slot 1 of an isolated scenario: unused).
        slot: B x N, the job slot of each item.
        per_compute, per_byte: B x N, an item's size per s of compute and per byte of S.
        per_server_byte: B x N, a flow's bytes per byte of its job's server_bytes.
        ends: B x 2 x I x N, the items ending iteration i of each slot.
        iterations: B x 2, iterations of each slot (0: no job).
    """

    network: kernels.Network
    program: kernels.Program
    model: Int[Array, "B 2"]
    slot: Int[Array, "B N"]
    per_compute: Float[Array, "B N"]
    per_byte: Float[Array, "B N"]
    per_server_byte: Float[Array, "B N"]
    ends: Bool[Array, "B 2 I N"]
    iterations: Int[Array, "B 2"]
    max_events: int = eqx.field(static=True)


def _placements(jobs: Sequence[tuple[Config, int]], fabric) -> list[tuple[str, ...]]:
    """Each job spread evenly over the first servers of its key, the jobs side by side on each server."""
    gpus = fabric.gpus()
    server = {g: server_of(g) for g in gpus}
    servers = list(dict.fromkeys(server.values()))
    used = {s: 0 for s in servers}
    out = []
    for (model, g, n), _ in jobs:
        if n > len(servers):
            raise ScenarioError(f"{model},{g},{n}: spans {n} servers; the fabric has {len(servers)}")
        mine = []
        for s in servers[:n]:
            free = [x for x in gpus if server[x] == s][used[s] :]
            if len(free) < g // n:
                raise ScenarioError(
                    f"{model},{g},{n}: no {g // n} free GPUs left on server {s!r} for the pair"
                )
            mine += free[: g // n]
            used[s] += g // n
        out.append(tuple(mine))
    return out


def _scenario(jobs: Sequence[tuple[Config, int]], start: Mapping[str, Model], fabric):
    """The scenario of jobs [(config, iterations)] at unit parameters, each item's (slot, shares), and
    the ids ending each job's iterations."""
    parts, meta, ends = [], {}, []
    for slot, (((model, g, _), its), gpus) in enumerate(zip(jobs, _placements(jobs, fabric), strict=True)):
        pattern = start[model].pattern
        (w1, e), (w2, _) = (
            job_workload(
                Job("ab"[slot], 0.0, g, its, c, pattern, 1.0, server_bytes=y),
                gpus,
                collectives=SERVER_COLLECTIVES,
            )
            for c, y in ((1.0, 0.0), (2.0, 1.0))
        )
        # builds at (compute, server bytes) = (1, 0) and (2, 1), S = 1: a task's share of compute, a
        # flow's of S and of the server bytes
        for x, y in zip(w1.flows, w2.flows, strict=True):
            meta[x.id] = (slot, 0.0, x.bytes, y.bytes - x.bytes)
        for x, y in zip(w1.tasks, w2.tasks, strict=True):
            meta[x.id] = (slot, y.duration - x.duration, 0.0, 0.0)
        parts.append(w1)
        ends.append(e)
    name = " | ".join(f"{c[0]},{c[1]},{c[2]}" for c, _ in jobs)
    return concat(parts).scenario(fabric, name=name), meta, ends


def _iterations(ta: float, tb: float, most: int) -> tuple[int, int]:
    """Iterations of the two jobs of a pair from their iterations alone: the slower runs 2, the faster
    long enough to outlast it (3 of the slower's iterations), at most `most`."""
    slow = max(ta, tb)
    n = lambda t: 2 if t >= slow else int(min(most, max(2, math.ceil(3 * slow / t))))
    return n(ta), n(tb)


def lay_out_jobs(
    configs: Sequence[Config],
    pairs: Sequence[tuple[int, int]],
    start: Mapping[str, Model],
    *,
    fabric,
    models: Sequence[str],
    max_iterations: int = 6,
) -> tuple[JobBatch, int]:
    """One isolated scenario per config, then one per pair (a, b), as one JobBatch.

    Returns (batch, index of the first pair scenario).
    """
    index = {m: i for i, m in enumerate(models)}
    estimate = Paces(fabric, collectives=SERVER_COLLECTIVES).estimate
    alone = {  # s per iteration alone: the environment's estimate
        c: estimate(
            ((m.pattern, m.compute, m.comm_bytes, c[1], m.server_bytes), _placements([(c, 1)], fabric)[0])
        )
        for c, m in ((c, start[c[0]]) for c in dict.fromkeys(configs))
    }
    jobs = [[(c, 1)] for c in configs]
    for a, b in pairs:
        na, nb = _iterations(alone[configs[a]], alone[configs[b]], max_iterations)
        jobs.append([(configs[a], na), (configs[b], nb)])
    built = [_scenario(j, start, fabric) for j in jobs]
    compiled = [compile_scenario(s) for s, _, _ in built]
    # the rounds of a fit, whose iteration counts move, share a shape
    shape = functools.reduce(Shape.__or__, (c.shape for c in compiled))
    batch = compile_batch(compiled, shape=shape.in_powers_of_two())
    n_items, n_it = batch.shape.items, max(max_iterations, 2)
    B = len(built)
    model = np.zeros((B, 2), np.int32)
    slot = np.zeros((B, n_items), np.int32)
    per_compute, per_byte, per_server_byte = (np.zeros((B, n_items)) for _ in range(3))
    ends = np.zeros((B, 2, n_it, n_items), bool)
    iters = np.zeros((B, 2), np.int32)
    for k, ((scenario, meta, its_ends), js) in enumerate(zip(built, jobs, strict=True)):
        ids = [f.id for f in scenario.flows] + [t.id for t in scenario.tasks]
        pos = {i: n for n, i in enumerate(ids)}
        for i, (s, c, b, y) in ((pos[i], v) for i, v in meta.items()):
            slot[k, i], per_compute[k, i], per_byte[k, i], per_server_byte[k, i] = s, c, b, y
        for s, ((cfg, n), e) in enumerate(zip(js, its_ends, strict=True)):
            model[k, s] = index[cfg[0]]
            iters[k, s] = n
            for it, last in enumerate(e):
                ends[k, s, it, [pos[i] for i in last]] = True
    net = kernels.Network(
        *jax.tree.map(
            lambda x: np.asarray(x[0]), (batch.network.capacity, batch.network.latency, batch.network.packets)
        )
    )
    return (
        JobBatch(
            net,
            batch.program,
            model,
            slot,
            per_compute,
            per_byte,
            per_server_byte,
            ends,
            iters,
            batch.max_events,
        ),
        len(configs),
    )


# --- simulation -----------------------------------------------------------------------------------


def _local(params: JobParams, b: JobBatch) -> Float[Array, "B 2 3"]:
    """Each scenario's own parameters: per job slot, (log compute, log bytes, log server bytes)."""
    stack = jnp.stack([params.log_compute, params.log_bytes, params.log_server_bytes], axis=1)  # M x 3
    return stack[b.model]


def paces(local: Float[Array, "B 2 3"], b: JobBatch) -> tuple[Float[Array, "B 2"], Int[Array, " B"]]:
    """Per scenario and job slot, the mean s per iteration over the iterations that ended while the
    other job still ran (all of them when alone: `iteration_paces`), and the engine's status per scenario."""
    x = jnp.exp(local)
    pick = lambda j: jnp.take_along_axis(x[:, :, j], b.slot, axis=1)  # B x N
    size = b.per_compute * pick(0) + b.per_byte * pick(1) + b.per_server_byte * pick(2)
    p = b.program
    prog = kernels.Program(p.route, size, p.release, p.overhead, p.after)
    state = netsim.vmap_run(b.network, prog, max_events=b.max_events)
    ends = jnp.max(jnp.where(b.ends, state.finish[:, None, None, :], 0.0), axis=-1)  # B x 2 x I
    return iteration_paces(ends, b.iterations), state.status


class _Targets(eqx.Module):
    """What the loss compares, as index arrays into the paces of one JobBatch."""

    iso: np.ndarray  # C: scenario of each config alone
    pair_b: np.ndarray  # E: scenario of each measured co-location entry
    pair_s: np.ndarray  # E: its job slot
    pair_cfg: np.ndarray  # E: the config whose ratio it is
    pair_other: np.ndarray  # E: the config next to it
    pair_measured: np.ndarray  # E
    rel_cfg: np.ndarray  # R: config compared to its model's reference config
    rel_ref: np.ndarray  # R
    rel_measured: np.ndarray  # R: log(thp cfg / thp ref) measured
    rel_gpus: np.ndarray  # R: log(gpus cfg / gpus ref)


def _targets(table: DeepShareTable, pairs: Sequence[tuple[int, int]], first_pair: int) -> _Targets:
    configs = table.configs
    pb, ps, pc, po, pm = [], [], [], [], []
    for k, (a, b) in enumerate(pairs):
        for s, (me, other) in enumerate(((a, b), (b, a))):
            if s == 1 and a == b:
                continue  # a job next to its own copy: one entry, measured once
            pb.append(first_pair + k)
            ps.append(s)
            pc.append(me)
            po.append(other)
            pm.append(table.ratio[me, other])
    ref = {}
    for i, (m, g, n) in enumerate(configs):
        if m not in ref or (g, n) < configs[ref[m]][1:]:
            ref[m] = i
    rc = [i for i, c in enumerate(configs) if ref[c[0]] != i]
    rr = [ref[configs[i][0]] for i in rc]
    thp = lambda i: table.isolated[configs[i]]
    return _Targets(
        np.arange(len(configs)),
        np.asarray(pb, np.int32),
        np.asarray(ps, np.int32),
        np.asarray(pc, np.int32),
        np.asarray(po, np.int32),
        np.asarray(pm),
        np.asarray(rc, np.int32),
        np.asarray(rr, np.int32),
        np.log([thp(i) / thp(j) for i, j in zip(rc, rr, strict=True)]),
        np.log([configs[i][1] / configs[j][1] for i, j in zip(rc, rr, strict=True)]),
    )


def _predictions(pace, t: _Targets):
    """(co-location ratio per entry, log isolated-throughput ratio per compared config)."""
    alone = pace[t.iso, 0]  # s per iteration of each config alone
    ratio = alone[t.pair_cfg] / pace[t.pair_b, t.pair_s]
    rel = t.rel_gpus + jnp.log(alone[t.rel_ref]) - jnp.log(alone[t.rel_cfg])
    return ratio, rel


def _loss(pace, t: _Targets, iso_weight):
    ratio, rel = _predictions(pace, t)
    coloc = jnp.mean((ratio - t.pair_measured) ** 2) if t.pair_b.size else 0.0
    iso = jnp.mean((rel - t.rel_measured) ** 2) if t.rel_cfg.size else 0.0
    return coloc + iso_weight * iso


def _value_and_grad(params: JobParams, b: JobBatch, t: _Targets, iso_weight):
    """(loss, its gradient as JobParams, (paces, status)). Forward mode, as calibrate.fit: a scenario
    depends on its two jobs' 3 parameters each, so 6 JVPs (vmapped) give every scenario's Jacobian;
    the loss, a cheap function of the paces, is differentiated in reverse, the two are chained, then
    summed per model."""
    local = _local(params, b)
    dirs = jnp.eye(6, dtype=local.dtype).reshape(6, 1, 2, 3)
    tangents = jnp.broadcast_to(dirs, (6, *local.shape))
    pace, jac, status = netsim.jvp_columns(lambda x: paces(x, b), local, tangents)
    value, g_pace = jax.value_and_grad(_loss)(pace, t, iso_weight)
    g_local = jnp.einsum("bs,kbs->bk", g_pace, jac).reshape(local.shape)  # B x 2 x 3
    n = params.log_compute.shape[0]
    g = jnp.zeros((n, 3), local.dtype).at[b.model].add(g_local)
    return value, JobParams(g[:, 0], g[:, 1], g[:, 2], params.models), (pace, status)


@eqx.filter_jit
def _step(params: JobParams, opt_state, b: JobBatch, t: _Targets, iso_weight):
    value, grads, aux = _value_and_grad(params, b, t, iso_weight)
    updates, opt_state = _OPTIM.update(grads, opt_state, params)
    return eqx.apply_updates(params, updates), opt_state, value, aux


@eqx.filter_jit
def _evaluate(params: JobParams, b: JobBatch):
    return paces(_local(params, b), b)


def _check(status, where: str) -> None:
    """Raises SimulationError naming the first scenario that did not finish (status read on the host)."""
    status = np.asarray(status)
    bad = np.flatnonzero(status)
    if bad.size:
        flags = kernels.Status(int(status[bad[0]]))
        raise SimulationError(
            f"{where}: {bad.size} scenario(s) did not finish; scenario {int(bad[0])}: {flags!r}"
        )


# --- public entry points --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class JobPrediction:
    """Simulated against measured, for the entries of the given pairs.

    Attributes:
        entries: per co-location entry, (config a, config b): a next to b.
        simulated, measured: per entry, the throughput ratio.
        iso_configs: configs compared with their model's reference (fewest GPUs, then servers).
        iso_simulated, iso_measured: their throughput over the reference's.
        alone: per config (table order), simulated s per iteration alone.
    """

    entries: tuple[tuple[Config, Config], ...]
    simulated: np.ndarray
    measured: np.ndarray
    iso_configs: tuple[Config, ...]
    iso_simulated: np.ndarray
    iso_measured: np.ndarray
    alone: np.ndarray

    def errors(self) -> dict[str, float]:
        out = colocation_errors(self.simulated, self.measured)
        iso = np.abs(self.iso_simulated / self.iso_measured - 1)
        return out | {"isolated_mean_rel_err": float(iso.mean()), "isolated_max_rel_err": float(iso.max())}


def colocation_errors(simulated, measured) -> dict[str, float]:
    """Mean and max |simulated - measured| of the ratio, and their Spearman rank correlation."""
    d = np.abs(np.asarray(simulated, float) - np.asarray(measured, float))
    return {
        "entries": float(d.size),
        "mae": float(d.mean()),
        "max_abs_err": float(d.max()),
        "spearman": spearman(simulated, measured),
    }


def _setup(table, pairs, models_for_layout, fabric, patterns, max_iterations):
    names = tuple(dict.fromkeys(c[0] for c in table.configs))
    for m in names:
        if m not in patterns:
            raise ScenarioError(f"model {m!r}: no communication pattern; known: {sorted(patterns)}")
    pairs = table.pairs() if pairs is None else tuple((int(a), int(b)) for a, b in pairs)
    n = len(table.configs)
    bad = [p for p in pairs if not (0 <= p[0] <= p[1] < n)]
    if bad:
        raise ScenarioError(f"pairs: expected (a, b) with 0 <= a <= b < {n}, got {bad[:3]}")
    batch, first = lay_out_jobs(
        table.configs,
        pairs,
        models_for_layout,
        fabric=fabric,
        models=names,
        max_iterations=max_iterations,
    )
    return names, pairs, batch, _targets(table, pairs, first)


def predict_jobs(
    models: Mapping[str, Model],
    table: DeepShareTable | None = None,
    *,
    pairs: Sequence[tuple[int, int]] | None = None,
    fabric: netsim.topology.Topology | None = None,
    max_iterations: int = 6,
) -> JobPrediction:
    """Simulates the isolated configs and the co-location `pairs` (default all) under `models`."""
    table = table or DeepShareTable.load()
    fabric = fabric or fit_cluster()
    patterns = {m: models[m].pattern for m in models}
    names, pairs, batch, t = _setup(table, pairs, models, fabric, patterns, max_iterations)
    params = JobParams.from_models(models, names)
    with jax.enable_x64(True):
        pace, status = jax.device_get(_evaluate(float64_leaves(params), batch))
    _check(status, "predict_jobs")
    return _prediction(table, pace, t)


def _prediction(table: DeepShareTable, pace, t: _Targets) -> JobPrediction:
    with jax.enable_x64(True):
        ratio, rel = (np.asarray(x) for x in _predictions(jnp.asarray(pace), t))
    cfg = table.configs
    return JobPrediction(
        tuple((cfg[c], cfg[o]) for c, o in zip(t.pair_cfg, t.pair_other, strict=True)),
        ratio,
        t.pair_measured,
        tuple(cfg[i] for i in t.rel_cfg),
        np.exp(rel),
        np.exp(t.rel_measured),
        np.asarray(pace)[t.iso, 0],
    )


@dataclasses.dataclass(frozen=True)
class JobFit:
    """Fitted job models and how the fit went.

    Attributes:
        models: per model, the fitted netsim.jobs.Model.
        params: the fitted JobParams.
        loss, history, steps: as calibrate.FitResult (loss: mean squared ratio error + iso_weight x
            mean squared log isolated-throughput-ratio error).
        prediction: the fitted pairs and configs at the fitted models.
        fabric: the cluster fitted on.
    """

    models: dict[str, Model]
    params: JobParams
    loss: float
    history: tuple[float, ...]
    prediction: JobPrediction
    fabric: netsim.topology.Topology

    def to_json(self, command: str = "") -> str:
        """The fitted models as netsim/data/job_models.json holds them."""
        data = {
            "source": "netsim.calibrate.jobs.fit_jobs on DeepShare's measured tables "
            "(netsim/data/traces/sched_deepshare_*.csv)",
            "command": command,
            "fabric": {"name": self.fabric.name, "links": len(self.fabric.links)},
            "fit": self.prediction.errors() | {"loss": self.loss, "steps": len(self.history)},
            "models": {
                m: {
                    "pattern": x.pattern,
                    "compute": x.compute,
                    "comm_bytes": x.comm_bytes,
                    "server_bytes": x.server_bytes,
                }
                for m, x in self.models.items()
            },
        }
        return json.dumps(data, indent=1) + "\n"


def fit_jobs(
    table: DeepShareTable | None = None,
    *,
    start: Mapping[str, Model] | None = None,
    pairs: Sequence[tuple[int, int]] | None = None,
    fabric: netsim.topology.Topology | None = None,
    steps: int = 150,
    rounds: int = 2,
    learning_rate: float = 0.1,
    iso_weight: float = 1.0,
    max_iterations: int = 6,
    patience: int = 40,
    progress: Callable[[str], None] | None = print,
    log_every: int = 10,
) -> JobFit:
    """Fits every model's compute, collective size and bytes per extra server to DeepShare's tables.

    Args:
        table: the measurements (default: the shipped DeepShareTable).
        start: starting models by name (default: netsim.jobs.MODELS).
        pairs: unordered config pairs (a <= b) whose co-location entries are fitted (default all);
            the isolated-throughput ratios are always fitted.
        fabric: the cluster (default `fit_cluster()`: 8 PCIe servers of 8 GPUs, 100 Gb/s NICs); held fixed.
        steps: most Adam steps per round; rounds: the pairs' iteration counts are laid out again from
            the current models at each round (same padded shape: no new compile).
        learning_rate: peak Adam rate, in log units.
        iso_weight: weight of the isolated-throughput term.
        max_iterations: most iterations of the faster job of a pair.
        patience: a round stops early after this many steps without progress.
        progress: called with progress lines; None for silence.

    Raises:
        ScenarioError: bad pairs, a model without a pattern, a config the fabric cannot hold.
        SimulationError: a scenario that did not finish.
    """
    from netsim.jobs import MODELS

    table = table or DeepShareTable.load()
    fabric = fabric or fit_cluster()
    models = dict(start or MODELS)
    steps, rounds = count(steps, "fit_jobs: steps"), count(rounds, "fit_jobs: rounds")
    learning_rate = number(learning_rate, "fit_jobs: learning_rate", positive=True)
    iso_weight = number(iso_weight, "fit_jobs: iso_weight")
    patterns = {m: models[m].pattern for m in models}
    names = tuple(dict.fromkeys(c[0] for c in table.configs))
    params = JobParams.from_models(models, names)
    history: list[float] = []
    loss = math.inf
    with jax.enable_x64(True), jax.numpy_dtype_promotion("standard"):
        params = float64_leaves(params)
        w = jnp.asarray(iso_weight)
        for r in range(rounds):
            current = params.to_models(patterns)
            _, fitted_pairs, batch, t = _setup(table, pairs, current, fabric, patterns, max_iterations)
            if progress:
                progress(
                    f"round {r + 1}/{rounds}: {batch.model.shape[0]} scenarios "
                    f"({len(t.pair_b)} co-location entries) at {batch.program.size.shape[1]} items"
                )
            step = lambda p, state, b=batch, t=t: _step(p, state, b, t, w)
            params, loss, _, hist, _ = descend(
                step,
                params,
                steps=steps,
                learning_rate=learning_rate,
                patience=patience,
                tol=1e-4,
                target=0.0,
                progress=progress,
                log_every=log_every,
                check=lambda aux: _check(aux[1], "fit_jobs"),
                describe=lambda v: f"rms error {math.sqrt(v):.3f}",
            )
            history += hist
        params = jax.device_get(params)
    fitted = params.to_models(patterns)
    prediction = predict_jobs(fitted, table, pairs=fitted_pairs, fabric=fabric, max_iterations=max_iterations)
    return JobFit(fitted, params, float(loss), tuple(history), prediction, fabric)
