"""Job traffic models fitted, through the simulator, to DeepShare's measured throughputs.

DeepShare (ICPADS 2023, arXiv 2310.20209) drives its scheduler simulator with two measured tables
(`netsim/data/traces/sched_deepshare_*.csv`): each job configuration's isolated throughput, keyed
"Model,total_gpus,num_nodes_spanned", and the pairwise co-location table, [A, B] = A's throughput next
to B over A's throughput alone. Here each model is a parametric iteration (`netsim.workloads.PATTERNS`:
compute, then its collectives) with three positive parameters fitted in log space: compute s per
iteration, the collective size S (bytes, nccl-tests' sense, as `Job.comm_bytes`), and `sync`, s of
latency per iteration and per server spanned beyond the first (contention-free). Every measured pair is
simulated on a DeepShare-like cluster (`JobFabric`: servers of 8 GPUs, one NIC each to one switch,
PCIe between the GPUs and the NIC), both jobs spread evenly over the first servers, as one padded
batch through `netsim.kernels.run`; the loss compares simulated to measured co-location ratios and
isolated-throughput ratios between configurations of one model (units differ between models).

A job's traffic is laid out per server: in each communication phase, every server the job spans sends
its egress bytes to the next server (ring order). On one non-blocking switch this loads each NIC
exactly as the job's collective does (ring collectives leave each server once; a direct all-to-all
sends k S (1 - 1/n) off each server, k = GPUs per server), with n flows per phase instead of G^2.
Traffic between GPUs of one server is not modelled. See docs/jobs.md ("Fitted traffic").
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
from netsim import ScenarioError, Shape, SimulationError, compile_batch, kernels
from netsim._checks import count, number
from netsim.data import trace_path
from netsim.topology._common import bandwidth
from netsim.workloads import PATTERNS, Model

from ._fit import _OPTIM, descend
from ._traces import read_trace

__all__ = [
    "DEEPSHARE_PATTERNS",
    "DeepShareTable",
    "JobFabric",
    "JobFit",
    "JobParams",
    "JobPrediction",
    "colocation_errors",
    "egress",
    "fit_jobs",
    "isolated_time",
    "parse_key",
    "predict_jobs",
    "spearman",
]

#: communication pattern of each model of DeepShare's traces (netsim.workloads.PATTERNS)
DEEPSHARE_PATTERNS: dict[str, str] = {
    "MobileNetV3": "allreduce",
    "GraphSage": "allreduce",
    "FSDP": "fsdp",
    "Transformer-XL": "allreduce",
    "DLRM": "alltoall",
    "MoE": "alltoall",
}

Config = tuple[str, int, int]  # (model, total GPUs, servers spanned)


def parse_key(key: str, *, where: str = "key", models: Mapping[str, str] = DEEPSHARE_PATTERNS) -> Config:
    """Parses a key: "MoE,8,2" -> ("MoE", 8, 2), checked: a known model, GPUs >= 2 divisible over >= 2 servers.

    Raises:
        ScenarioError: naming `where` and the key.
    """
    parts = key.split(",") if isinstance(key, str) else []
    if len(parts) != 3 or not parts[1].strip().isdigit() or not parts[2].strip().isdigit():
        raise ScenarioError(f"{where}: expected 'Model,total_gpus,num_nodes_spanned', got {key!r}")
    model, gpus, nodes = parts[0].strip(), int(parts[1]), int(parts[2])
    if model not in models:
        raise ScenarioError(f"{where}: unknown model {model!r} in {key!r}; known: {sorted(models)}")
    if nodes < 2 or gpus < nodes or gpus % nodes:
        raise ScenarioError(
            f"{where}: {key!r} needs >= 2 servers and a whole number of GPUs per server "
            f"(total_gpus a multiple of num_nodes_spanned)"
        )
    return model, gpus, nodes


def _number_cell(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ScenarioError(f"{where}: expected a number, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ScenarioError(f"{where}: expected a finite number > 0, got {text!r}")
    return value


@dataclasses.dataclass(frozen=True, eq=False)
class DeepShareTable:
    """DeepShare's two measured tables.

    Attributes:
        configs: the co-location table's keys, in its order.
        isolated: per config, the measured isolated throughput (samples/s; units differ per model).
        ratio: C x C, [a, b] = throughput of configs[a] next to configs[b] over its throughput alone
            (the file clips values at 1.0).
    """

    configs: tuple[Config, ...]
    isolated: Mapping[Config, float]
    ratio: np.ndarray

    @classmethod
    def load(cls, isolated: str | None = None, ratio: str | None = None) -> DeepShareTable:
        """Reads the tables (default: the shipped sched_deepshare_*.csv)."""
        iso_path = isolated or trace_path("sched_deepshare_isolated_thp.csv")
        ratio_path = ratio or trace_path("sched_deepshare_shared_thp_ratio.csv")
        (iso,) = read_trace(iso_path).tables
        (tab,) = read_trace(ratio_path).tables
        thp = {}
        for i, row in enumerate(iso.rows):
            cfg = parse_key(row[0], where=f"isolated row {i + 1}")
            thp[cfg] = _number_cell(row[1], f"isolated row {i + 1} ({row[0]!r})")
        cols = [parse_key(c, where=f"ratio column {j}") for j, c in enumerate(tab.columns[1:], 1)]
        rows = [parse_key(r[0], where=f"ratio row {i + 1}") for i, r in enumerate(tab.rows)]
        if rows != cols:
            raise ScenarioError("ratio: rows and columns must list the same keys in the same order")
        missing = [c for c in rows if c not in thp]
        if missing:
            raise ScenarioError(f"isolated: no throughput for {missing[:3]}")
        values = np.array(
            [
                [_number_cell(x, f"ratio row {i + 1} ({r[0]!r}) column {j + 1}") for j, x in enumerate(r[1:])]
                for i, r in enumerate(tab.rows)
            ]
        )
        return cls(tuple(rows), thp, values)

    def pairs(self) -> tuple[tuple[int, int], ...]:
        """Every unordered pair (a <= b) of configs: one simulation gives [a, b] and [b, a]."""
        n = len(self.configs)
        return tuple((a, b) for a in range(n) for b in range(a, n))

    def split(self, seed: int = 0) -> tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]]:
        """The unordered pairs shuffled (seeded) and cut in two halves: (fit, held out)."""
        pairs = self.pairs()
        order = np.random.default_rng(seed).permutation(len(pairs))
        half = len(pairs) // 2
        return tuple(pairs[i] for i in sorted(order[:half])), tuple(pairs[i] for i in sorted(order[half:]))

    def noise(self) -> dict[str, float]:
        """The table's own scatter, a floor for any model: entries clipped at exactly 1.000; the table
        against its transpose (r[a, b] against r[b, a], a != b: who slows whom is not symmetric, but
        the contention they share is); and the same for jobs of one model at different placements."""
        r = self.ratio
        n = len(self.configs)
        off = [(a, b) for a in range(n) for b in range(a + 1, n)]
        same = [(a, b) for a, b in off if self.configs[a][0] == self.configs[b][0]]
        d = lambda pairs: [abs(r[a, b] - r[b, a]) for a, b in pairs]
        return {
            "entries": float(r.size),
            "clipped_at_1": float(np.sum(r == 1.0)),
            "transpose_mae": float(np.mean(d(off))),
            "transpose_spearman": spearman([r[a, b] for a, b in off], [r[b, a] for a, b in off]),
            "same_model_transpose_mae": float(np.mean(d(same))),
        }


@dataclasses.dataclass(frozen=True)
class JobFabric:
    """A DeepShare-like cluster: `servers` servers of 8 GPUs, each with one NIC to one switch, and a
    PCIe link each way between the server's GPUs and its NIC.

    Attributes:
        servers: at least the most servers a measured job spans (8 for DeepShare's keys).
        nic: bytes/s each way (default 100 Gb/s, InfiniBand HDR100 / ConnectX-6 at 100 Gb/s).
        pcie: bytes/s each way between the GPUs and the NIC (default 13 GB/s, the usual measured rate
            of a PCIe 3.0 x16 slot, 15.75 GB/s raw).
    """

    servers: int = 8
    nic: float = 100e9 / 8
    pcie: float = 13e9

    @classmethod
    def of(cls, servers: int = 8, *, nic="100 Gbps", pcie="13 GB/s") -> JobFabric:
        return cls(count(servers, "servers", minimum=2), bandwidth(nic, "nic"), bandwidth(pcie, "pcie"))

    def links(self) -> tuple[netsim.Link, ...]:
        out = []
        for s in range(self.servers):
            gpus, nic = f"n{s}/gpus", f"n{s}/nic"
            out += [
                netsim.Link(f"{gpus}>nic", gpus, nic, self.pcie),
                netsim.Link(f"{nic}>gpus", nic, gpus, self.pcie),
                netsim.Link(f"{nic}>switch", nic, "switch", self.nic),
                netsim.Link(f"switch>{nic}", "switch", nic, self.nic),
            ]
        return tuple(out)

    def route(self, src: int, dst: int) -> tuple[str, ...]:
        return (f"n{src}/gpus>nic", f"n{src}/nic>switch", f"switch>n{dst}/nic", f"n{dst}/nic>gpus")

    def to_dict(self) -> dict:
        return {"servers": self.servers, "nic_bytes_per_s": self.nic, "pcie_bytes_per_s": self.pcie}


def egress(kind: str, gpus: int, servers: int) -> float:
    """Bytes each server sends off-server in one collective of size S = 1 (ring leaving each server once;
    direct all-to-all)."""
    if kind == "allreduce":
        return 2.0 * (gpus - 1) / gpus
    if kind in ("allgather", "reducescatter"):
        return (gpus - 1) / gpus
    if kind == "alltoall":
        return gpus / servers * (1.0 - 1.0 / servers)
    raise ScenarioError(f"pattern phase: no traffic model for {kind!r}")


class JobParams(eqx.Module):
    """Per model, positive through their logs: compute s per iteration, collective size S (bytes),
    sync s per iteration and per server beyond the first."""

    log_compute: Float[Array, " M"]
    log_bytes: Float[Array, " M"]
    log_sync: Float[Array, " M"]
    models: tuple[str, ...] = eqx.field(static=True)

    @classmethod
    def from_models(cls, models: Mapping[str, Model], names: Sequence[str]) -> JobParams:
        missing = [m for m in names if m not in models]
        if missing:
            raise ScenarioError(f"start: no model for {missing}; have {sorted(models)}")
        log = lambda f: np.log(np.array([max(f(models[m]), 1e-12) for m in names], np.float64))
        return cls(log(lambda m: m.compute), log(lambda m: m.comm_bytes), log(lambda m: m.sync), tuple(names))

    def to_models(self, patterns: Mapping[str, str] = DEEPSHARE_PATTERNS, note: str = "") -> dict[str, Model]:
        c, s, y = (np.exp(np.asarray(x)) for x in (self.log_compute, self.log_bytes, self.log_sync))
        return {
            m: Model(patterns[m], float(c[i]), float(s[i]), note, float(y[i]))
            for i, m in enumerate(self.models)
        }


# --- scenarios ------------------------------------------------------------------------------------


class JobBatch(eqx.Module):
    """Pair and isolated scenarios at one padded shape, with what the parameters set per item.

    Attributes:
        network: the fabric (shared by every scenario).
        program: B stacked programs; sizes and overheads are rewritten from the parameters.
        model: B x 2, the model index of each job slot (slot 1 of an isolated scenario: unused).
        slot: B x N, the job slot of each item.
        task: B x N, True for compute tasks.
        coef: B x N, a task's share of the compute time, a flow's bytes per byte of S.
        sync: B x N, a flow's share of its job's sync latency.
        ends: B x 2 x I x N, the items ending iteration i of each slot.
        iterations: B x 2, iterations of each slot (0: no job).
    """

    network: kernels.Network
    program: kernels.Program
    model: Int[Array, "B 2"]
    slot: Int[Array, "B N"]
    task: Bool[Array, "B N"]
    coef: Float[Array, "B N"]
    sync: Float[Array, "B N"]
    ends: Bool[Array, "B 2 I N"]
    iterations: Int[Array, "B 2"]
    max_events: int = eqx.field(static=True)


def _job_items(tag: str, cfg: Config, iterations: int, fabric: JobFabric, patterns: Mapping[str, str]):
    """(flows, tasks, per item (slot-free) coef / sync / is-task, ids ending each iteration)."""
    model, gpus, servers = cfg
    if servers > fabric.servers:
        raise ScenarioError(
            f"{model},{gpus},{servers}: spans {servers} servers; the fabric has {fabric.servers}"
        )
    if gpus // servers > 4:
        raise ScenarioError(f"{model},{gpus},{servers}: two such jobs need more than 8 GPUs per server")
    phases = PATTERNS[patterns[model]]
    comm = sum(kind != "compute" for kind, _ in phases)
    flows, tasks, meta, ends = [], [], {}, []
    prev: tuple[str, ...] = ()
    for it in range(iterations):
        for k, (kind, share) in enumerate(phases):
            pid = f"{tag}/it{it}/p{k}"
            if kind == "compute":
                tasks.append(netsim.Task(pid, f"{tag}/gpus", 1.0, after=prev))
                meta[pid] = (share, 0.0, True)
                prev = (pid,)
            else:
                ids = []
                for s in range(servers):
                    fid = f"{pid}/n{s}"
                    dst = (s + 1) % servers
                    flows.append(
                        netsim.Flow(
                            fid, f"n{s}/gpus", f"n{dst}/gpus", 1.0, route=fabric.route(s, dst), after=prev
                        )
                    )
                    meta[fid] = (share * egress(kind, gpus, servers), (servers - 1) / comm, False)
                    ids.append(fid)
                prev = tuple(ids)
        ends.append(prev)
    return flows, tasks, meta, ends


def _scenario(jobs: Sequence[tuple[Config, int]], fabric: JobFabric, patterns: Mapping[str, str]):
    flows, tasks, meta, ends = [], [], {}, []
    for slot, (cfg, its) in enumerate(jobs):
        f, t, m, e = _job_items("ab"[slot], cfg, its, fabric, patterns)
        flows += f
        tasks += t
        meta |= {k: (slot, *v) for k, v in m.items()}
        ends.append(e)
    name = " | ".join(f"{c[0]},{c[1]},{c[2]}" for c, _ in jobs)
    return netsim.Scenario(fabric.links(), flows, tasks, name=name), meta, ends


def isolated_time(model: Model, gpus: int, servers: int, fabric: JobFabric) -> float:
    """Closed form of a job's iteration alone on `fabric`: compute + sync (servers - 1) + each
    communication phase's per-server egress at the slower of NIC and PCIe (each link carries one flow)."""
    phases = PATTERNS[model.pattern]
    volume = sum(share * egress(kind, gpus, servers) for kind, share in phases if kind != "compute")
    return (
        model.compute + model.sync * (servers - 1) + volume * model.comm_bytes / min(fabric.nic, fabric.pcie)
    )


def _iterations(
    start: Mapping[str, Model], fabric: JobFabric, a: Config, b: Config, most: int
) -> tuple[int, int]:
    """Iterations of the two jobs of a pair: the slower runs 2, the faster long enough to outlast it
    (3 of the slower's isolated iterations), at most `most`."""
    ta, tb = (isolated_time(start[c[0]], c[1], c[2], fabric) for c in (a, b))
    slow = max(ta, tb)
    n = lambda t: 2 if t >= slow else int(min(most, max(2, math.ceil(3 * slow / t))))
    return n(ta), n(tb)


def lay_out_jobs(
    configs: Sequence[Config],
    pairs: Sequence[tuple[int, int]],
    start: Mapping[str, Model],
    *,
    fabric: JobFabric,
    patterns: Mapping[str, str] = DEEPSHARE_PATTERNS,
    models: Sequence[str],
    max_iterations: int = 6,
) -> tuple[JobBatch, int]:
    """One isolated scenario per config, then one per pair (a, b), as one JobBatch.

    Returns (batch, index of the first pair scenario).
    """
    index = {m: i for i, m in enumerate(models)}
    jobs = [[(c, 1)] for c in configs]
    for a, b in pairs:
        na, nb = _iterations(start, fabric, configs[a], configs[b], max_iterations)
        jobs.append([(configs[a], na), (configs[b], nb)])
    built = [_scenario(j, fabric, patterns) for j in jobs]
    # every pair fits this shape: the slower job 2 iterations, the faster max_iterations, <= 18 items each
    worst = Shape.holding(
        (2 + max_iterations) * (2 + 2 * fabric.servers), 4, fabric.servers, 4 * fabric.servers + 2
    )
    batch = compile_batch([s for s, _, _ in built], shape=worst)
    n_items, n_it = batch.shape.items, max(max_iterations, 2)
    B = len(built)
    model = np.zeros((B, 2), np.int32)
    slot = np.zeros((B, n_items), np.int32)
    task = np.zeros((B, n_items), bool)
    coef = np.zeros((B, n_items))
    sync = np.zeros((B, n_items))
    ends = np.zeros((B, 2, n_it, n_items), bool)
    iters = np.zeros((B, 2), np.int32)
    for k, ((scenario, meta, its_ends), js) in enumerate(zip(built, jobs, strict=True)):
        ids = [f.id for f in scenario.flows] + [t.id for t in scenario.tasks]
        pos = {i: n for n, i in enumerate(ids)}
        for i, (s, c, y, is_task) in ((pos[i], v) for i, v in meta.items()):
            slot[k, i], coef[k, i], sync[k, i], task[k, i] = s, c, y, is_task
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
        JobBatch(net, batch.program, model, slot, task, coef, sync, ends, iters, batch.max_events),
        len(configs),
    )


# --- simulation -----------------------------------------------------------------------------------


def _local(params: JobParams, b: JobBatch) -> Float[Array, "B 2 3"]:
    """Each scenario's own parameters: per job slot, (log compute, log bytes, log sync)."""
    stack = jnp.stack([params.log_compute, params.log_bytes, params.log_sync], axis=1)  # M x 3
    return stack[b.model]


def paces(local: Float[Array, "B 2 3"], b: JobBatch) -> tuple[Float[Array, "B 2"], Int[Array, " B"]]:
    """Per scenario and job slot, the mean s per iteration over the iterations that ended while the
    other job still ran (all of them when alone), and the engine's status per scenario."""
    x = jnp.exp(local)
    pick = lambda j: jnp.take_along_axis(x[:, :, j], b.slot, axis=1)  # B x N
    size = b.coef * jnp.where(b.task, pick(0), pick(1))
    overhead = b.sync * pick(2)
    p = b.program
    prog = kernels.Program(p.route, size, p.release, overhead, p.after)
    run = functools.partial(kernels.run, max_events=b.max_events)
    state = jax.vmap(run, in_axes=netsim.batch_axes(b.network, prog))(b.network, prog)
    ends = jnp.max(jnp.where(b.ends, state.finish[:, None, None, :], 0.0), axis=-1)  # B x 2 x I
    valid = jnp.arange(ends.shape[-1], dtype=b.iterations.dtype)[None, None, :] < b.iterations[:, :, None]
    last = jnp.max(jnp.where(valid, ends, 0.0), axis=-1)  # B x 2
    other = jnp.where(b.iterations[:, ::-1] > 0, last[:, ::-1], jnp.inf)
    m = jnp.sum(valid & (ends <= other[:, :, None] * (1 + 1e-9)), axis=-1)
    m = jnp.maximum(m, 1).astype(b.iterations.dtype)
    at = jnp.take_along_axis(ends, (m - 1)[:, :, None], axis=-1)[:, :, 0]
    return at / m.astype(at.dtype), state.status


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
    jvp = lambda v: jax.jvp(lambda x: paces(x, b), (local,), (v,), has_aux=True)
    (pace, jac, status) = jax.vmap(jvp, out_axes=(None, 0, None))(tangents)
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


def spearman(x, y) -> float:
    """Spearman rank correlation (ties share their mean rank)."""

    def rank(v):
        v = np.asarray(v, float)
        order = np.argsort(v, kind="stable")
        r = np.empty(len(v))
        r[order] = np.arange(len(v), dtype=float)
        for value in np.unique(v):
            tie = v == value
            r[tie] = r[tie].mean()
        return r

    rx, ry = rank(x), rank(y)
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


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
        patterns=patterns,
        models=names,
        max_iterations=max_iterations,
    )
    return names, pairs, batch, _targets(table, pairs, first)


def predict_jobs(
    models: Mapping[str, Model],
    table: DeepShareTable | None = None,
    *,
    pairs: Sequence[tuple[int, int]] | None = None,
    fabric: JobFabric | None = None,
    max_iterations: int = 6,
) -> JobPrediction:
    """Simulates the isolated configs and the co-location `pairs` (default all) under `models`."""
    table = table or DeepShareTable.load()
    fabric = fabric or JobFabric()
    patterns = {m: models[m].pattern for m in models}
    names, pairs, batch, t = _setup(table, pairs, models, fabric, patterns, max_iterations)
    params = JobParams.from_models(models, names)
    with jax.enable_x64(True):
        pace, status = jax.device_get(_evaluate(jax.tree.map(jnp.asarray, params), batch))
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
        models: per model, the fitted netsim.workloads.Model.
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
    fabric: JobFabric

    def to_json(self, command: str = "") -> str:
        """The fitted models as netsim/data/job_models.json holds them."""
        data = {
            "source": "netsim.calibrate.jobs.fit_jobs on DeepShare's measured tables "
            "(netsim/data/traces/sched_deepshare_*.csv)",
            "command": command,
            "fabric": self.fabric.to_dict(),
            "fit": self.prediction.errors() | {"loss": self.loss, "steps": len(self.history)},
            "models": {
                m: {"pattern": x.pattern, "compute": x.compute, "comm_bytes": x.comm_bytes, "sync": x.sync}
                for m, x in self.models.items()
            },
        }
        return json.dumps(data, indent=1) + "\n"


def fit_jobs(
    table: DeepShareTable | None = None,
    *,
    start: Mapping[str, Model] | None = None,
    pairs: Sequence[tuple[int, int]] | None = None,
    fabric: JobFabric | None = None,
    steps: int = 150,
    rounds: int = 2,
    learning_rate: float = 0.1,
    iso_weight: float = 1.0,
    max_iterations: int = 6,
    patience: int = 40,
    progress: Callable[[str], None] | None = print,
    log_every: int = 10,
) -> JobFit:
    """Fits every model's compute, collective size and sync latency to DeepShare's tables.

    Args:
        table: the measurements (default: the shipped DeepShareTable).
        start: starting models by name (default: netsim.workloads.MODELS).
        pairs: unordered config pairs (a <= b) whose co-location entries are fitted (default all);
            the isolated-throughput ratios are always fitted.
        fabric: the cluster (default JobFabric(): 8 servers, 100 Gb/s NICs, 13 GB/s PCIe); held fixed.
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
    from netsim.workloads import MODELS

    table = table or DeepShareTable.load()
    fabric = fabric or JobFabric()
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
        params = jax.tree.map(jnp.asarray, params)
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
