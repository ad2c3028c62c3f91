"""What calibration fits, and how a measurement is simulated under given parameters.

A `Spec` names the parameters (link classes, the topology's shared resources, protocol regimes); `Params`
holds their values, each positive through its log: the fabric's (link classes, shared resources) and the
machine's software costs, a `netsim.CostModel`, whose one formula the fit traces and calibrated
collectives pay. A calibration file is `Params.to_values` written as JSON; `Params.load` reads it back. An
`Experiment` is one measured table as scenarios on the topology (a collective at many sizes, or one
p2pBandwidthLatencyTest matrix), compiled by netsim; experiments of one topology are laid out together
with `netsim.compile_batch` and simulated in one `netsim.vmap_run`, under a network whose
capacities come from the parameters by resource class (links by link class, shared resources by id).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

import netsim
from netsim import (
    BatchRun,
    Compiled,
    CostModel,
    ScenarioError,
    Shape,
    compile_batch,
    compile_scenario,
    kernels,
)
from netsim.checks import quantity
from netsim.topology import Topology, latency_gains, link_class, read_calibration, shared_gains
from netsim.workloads import allgather, allreduce, bus_factor, reducescatter

__all__ = [
    "Experiment",
    "ExperimentBatch",
    "Params",
    "Spec",
    "collective_experiment",
    "experiment_batches",
    "initial_values",
    "lay_out",
    "p2p_experiment",
    "predict",
    "simulate_experiments",
]

#: builders of the collectives nccl-tests measures, by nccl-tests' name (without "_perf")
COLLECTIVES = {"all_reduce": allreduce, "all_gather": allgather, "reduce_scatter": reducescatter}
_KIND = {"all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reducescatter"}
#: CUDA p2pBandwidthLatencyTest: 10,000,000 ints per bandwidth copy, one int per latency copy
P2P_COPY_BYTES = 4e7
P2P_LATENCY_BYTES = 4.0


@dataclasses.dataclass(frozen=True)
class Spec:
    """The structure of a calibration: which parameters exist and what each means.

    Attributes:
        link_classes: every link of a class shares one bandwidth and one latency.
        shared: ids of the topology's shared resources (`Topology.shared`), each with a fitted capacity.
        regimes: protocol regimes, smallest messages first (see `netsim.CostModel`).
        classify: link id -> class, for the topologies this spec is used with.
    """

    link_classes: tuple[str, ...]
    shared: tuple[str, ...] = ()
    regimes: tuple[str, ...] = ("LL", "Simple")
    classify: Callable[[Topology, str], str] = link_class

    @classmethod
    def for_topology(
        cls,
        topo: Topology,
        *,
        staged: Topology | None = None,
        regimes: Sequence[str] | None = None,
        classify: Callable[[Topology, str], str] = link_class,
    ) -> Spec:
        """The link classes found in `topo` and then `staged` (its P2P-off twin, whose socket links are
        class "socket-host"), in first-seen order, their shared resources, and `regimes` (default LL and
        Simple; a calibration's own: `netsim.topology.load_costs(source).regimes`)."""
        topos = (topo,) if staged is None else (topo, staged)
        classes = tuple(dict.fromkeys(classify(t, link.id) for t in topos for link in t.links))
        shared = tuple(dict.fromkeys(r.id for t in topos for r in t.shared))
        return cls(classes, shared, tuple(regimes or ("LL", "Simple")), classify)


class Params(eqx.Module):
    """Fitted values; every one positive through its log (SI units).

    Attributes:
        log_bandwidth: per link class, bytes/s.
        log_latency: per link class, s per link crossed.
        log_shared: per shared resource, bytes/s.
        costs: the software costs (per-step overhead and efficiency per regime, launch, copy overheads,
            the staging pipeline's efficiency): see `netsim.CostModel`.
    """

    log_bandwidth: Float[Array, " C"]
    log_latency: Float[Array, " C"]
    log_shared: Float[Array, " K"]
    costs: CostModel

    @classmethod
    def from_values(cls, spec: Spec, values: dict) -> Params:
        """From SI values, as `to_values` writes them (missing top-level entries take `initial_values`).

        The fields are float64 NumPy arrays (no x64 flag needed here); `fit` and `predict` move them.
        """
        v = initial_values(spec) | dict(values)
        classes = v["link_classes"]
        shared = v["shared"]
        missing = [c for c in spec.link_classes if c not in classes] + [
            s for s in spec.shared if s not in shared
        ]
        missing += [r for r in spec.regimes if r not in v["regimes"]]
        if missing:
            raise ScenarioError(f"parameters: no value for {missing}")
        log = lambda xs: np.log(np.asarray(xs, dtype=np.float64))
        # a NaN or non-positive figure would never let a simulated event come: refused here, by name
        bandwidth = [
            quantity(classes[c]["bandwidth"], "bandwidth", f"parameters: link_classes.{c}.bandwidth")
            for c in spec.link_classes
        ]
        latency = [
            quantity(classes[c]["latency"], "time", f"parameters: link_classes.{c}.latency")
            for c in spec.link_classes
        ]
        capacity = [quantity(shared[s], "bandwidth", f"parameters: shared.{s}") for s in spec.shared]
        return cls(
            log_bandwidth=log(bandwidth),
            log_latency=log([max(x, 1e-15) for x in latency]),
            log_shared=log(capacity).reshape(len(spec.shared)),
            costs=CostModel.from_values(v, spec.regimes, where="parameters"),
        )

    @classmethod
    def load(cls, spec: Spec, source: str | os.PathLike, *topos: Topology) -> Params:
        """The parameters of a calibrated preset or calibration file (`netsim.topology.read_calibration`);
        what it lacks (a link class it predates, software costs) takes `initial_values(spec, *topos)`."""
        values = read_calibration(source) or {}
        start = initial_values(spec, *topos)
        for key in ("link_classes", "shared"):
            values[key] = start[key] | values.get(key, {})
        return cls.from_values(spec, values if "regimes" in values else start | values)

    def to_values(self, spec: Spec) -> dict:
        """SI values, JSON-able: link classes, shared resources, then the costs' (`CostModel.to_values`)."""
        f = lambda x: [float(v) for v in np.exp(np.asarray(x)).ravel()]
        bw, lat, shared = f(self.log_bandwidth), f(self.log_latency), f(self.log_shared)
        return {
            "link_classes": {
                c: {"bandwidth": bw[i], "latency": lat[i]} for i, c in enumerate(spec.link_classes)
            },
            "shared": {s: shared[i] for i, s in enumerate(spec.shared)},
            **self.costs.to_values(),
        }

    def fields(self) -> list[tuple[str, Array]]:
        """(name, value) of every fitted array, in the flat order of `ravel_pytree` (the costs' last):
        the names `freeze` takes."""
        own = [(f.name, getattr(self, f.name)) for f in dataclasses.fields(self) if f.name != "costs"]
        costs = [(f.name, getattr(self.costs, f.name)) for f in dataclasses.fields(self.costs)]
        return own + [(name, value) for name, value in costs if name != "regimes"]


def initial_values(spec: Spec, *topos: Topology, launch: float | None = None) -> dict:
    """Starting values: what `topos` carry (link figures as the mean per class, shared capacities), and
    NCCL-like software costs (`CostModel.defaults`).

    `launch` (s per collective) is 0 by default: a fit that holds it folds the launch cost into the
    per-step overheads.
    """
    per_class: dict[str, list] = {c: [] for c in spec.link_classes}
    for topo in topos:
        for link in topo.links:
            c = spec.classify(topo, link.id)
            if c in per_class:
                per_class[c].append((link.bandwidth, link.latency))
    # Latencies start at 100 ns where the topology has none: in log space a zero start has no gradient.
    classes = {
        c: {
            "bandwidth": float(np.mean([b for b, _ in v])) if v else 25e9,
            "latency": float(np.mean([x for _, x in v])) if v and np.mean([x for _, x in v]) > 0 else 1e-7,
        }
        for c, v in per_class.items()
    }
    have = {r.id: r.capacity for topo in reversed(topos) for r in topo.shared}
    shared = {s: float(have.get(s, 25e9)) for s in spec.shared}
    values = CostModel.defaults(spec.regimes)
    if launch is not None:
        values["launch"] = launch
    return {"link_classes": classes, "shared": shared, **values}


# --- experiments ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class Experiment:
    """One measured table as compiled scenarios on a topology, one per point.

    Attributes:
        name, kind: labels; kind is "collective", "unidirectional", "bidirectional" or "latency".
        compiled: per point, the scenario (flows at their measured bytes, the topology's shared resources).
        measured: per point, the measured time (s).
        labels: per point, its size (collectives) or "i->j" cell.
        moved: per point, bytes moved (size for collectives, all copies' bytes for p2p).
        factor: bus factor (busbw = factor x size / time) for collectives, 1 for copies.
        link_class: per link of the topology, its index in `Spec.link_classes`.
        shared_index: per shared resource of the topology, its index in `Spec.shared` (-1: not fitted).
        staged: per point, True where the copy is host-staged (crosses a memory link).
        n_ranks: ranks of a collective; 0 for copies.
        weight: per point loss weight (1, or 0 for points left out).
        op: nccl-tests' collective name ("all_reduce"); "" for copies.
        shared_scale: per shared resource of the topology, its capacity over the fitted figure
            (`netsim.topology.shared_gains`: NCCL's SHM transport gets more of a GPU's host budget than
            the cudaMemcpy copies it is fitted on); None: 1 for every one.
        latency_scale: per link of the topology, its latency over its class's fitted figure
            (`netsim.topology.latency_gains`: NCCL's SHM steps pay no DRAM turnaround); None: 1 each.
        ranks: a collective's ranks in ring order; () for copies.
    """

    name: str
    kind: str
    compiled: tuple[Compiled, ...]
    measured: np.ndarray
    labels: tuple
    moved: tuple
    factor: float
    link_class: np.ndarray
    shared_index: np.ndarray
    staged: np.ndarray
    n_ranks: int = 0
    weight: np.ndarray | None = None
    op: str = ""
    shared_scale: np.ndarray | None = None
    latency_scale: np.ndarray | None = None
    ranks: tuple[str, ...] = ()

    def __post_init__(self):
        if self.weight is None:
            object.__setattr__(self, "weight", np.ones(len(self.compiled)))
        if self.shared_scale is None:
            object.__setattr__(self, "shared_scale", np.ones(len(self.shared_index)))
        if self.latency_scale is None:
            object.__setattr__(self, "latency_scale", np.ones(len(self.link_class)))

    @property
    def n_points(self) -> int:
        return len(self.compiled)

    @property
    def collective(self) -> bool:
        return self.kind == "collective"

    @property
    def n_gpus(self) -> int:
        """Ranks of a collective; the matrix size n of copies (n x (n - 1) cells)."""
        return self.n_ranks or (1 + math.isqrt(1 + 4 * self.n_points)) // 2

    def layout(self) -> tuple:
        """Experiments with equal layouts (resources and their meaning) can share one batch."""
        return (
            tuple(self.link_class),
            tuple(self.shared_index),
            tuple(self.shared_scale),
            tuple(self.latency_scale),
        )

    def relevant(self, params: Params) -> np.ndarray:
        """Mask over the flattened `params` (ravel_pytree order): the entries that can change this
        experiment's times (the link classes and shared resources its routes cross, the regimes for
        collectives, the copy overheads for copies). The fit differentiates only along these."""
        c = self.compiled[0]
        links, shared = c.link_slice, c.shared_slice
        used = np.unique(np.concatenate([np.asarray(x.program.route).ravel() for x in self.compiled]))
        cls = self.link_class[used[(used >= links.start) & (used < links.stop)] - links.start]
        shr = self.shared_index[used[(used >= shared.start) & (used < shared.stop)] - shared.start]
        staged = np.asarray(self.staged, bool)
        rules = {
            "log_bandwidth": np.isin(np.arange(params.log_bandwidth.shape[0]), cls),
            "log_latency": np.isin(np.arange(params.log_latency.shape[0]), cls),
            "log_shared": np.isin(np.arange(params.log_shared.shape[0]), shr),
            "log_copy_overhead": np.array(not self.collective and not staged.all()),
            "log_staged_overhead": np.array(not self.collective and bool(staged.any())),
            "log_staged_inefficiency": np.array(not self.collective and bool(staged.any())),
        }
        mask = []
        for name, value in params.fields():
            mask.append(np.broadcast_to(rules.get(name, np.array(self.collective)), (int(np.size(value)),)))
        return np.concatenate(mask)


def _layout(spec: Spec, topo: Topology) -> tuple[np.ndarray, np.ndarray]:
    index = {c: i for i, c in enumerate(spec.link_classes)}
    classes = []
    for link in topo.links:
        name = spec.classify(topo, link.id)
        if name not in index:
            raise ScenarioError(
                f"link {link.id!r}: class {name!r} is not in the spec's link classes "
                f"{list(spec.link_classes)} (a P2P-off twin's classes: Spec.for_topology(topo, staged=...))"
            )
        classes.append(index[name])
    shared = [spec.shared.index(r.id) if r.id in spec.shared else -1 for r in topo.shared]
    return np.asarray(classes, np.int32), np.asarray(shared, np.int32)


def collective_experiment(
    spec: Spec, topo: Topology, op: str, ranks: Sequence[str], sizes, times, *, name: str = "", weight=None
) -> Experiment:
    """A collective measured at several sizes (nccl-tests' S, bytes) with times (s), ring algorithm.

    Args:
        spec: the parameters' structure.
        topo: the fabric; `ranks` are its node names in ring order (the parameters' software costs are
            applied when simulated).
        op: nccl-tests' collective name ("all_reduce", "all_gather", "reduce_scatter").
        sizes, times: one per point.
        name: label for reports.
        weight: per point loss weight (default 1).
    """
    if op not in COLLECTIVES:
        raise ScenarioError(f"op: no ring model for {op!r}; known: {sorted(COLLECTIVES)}")
    sizes, times = np.asarray(sizes, float), np.asarray(times, float)
    if sizes.shape != times.shape or sizes.ndim != 1 or not np.all(sizes > 0) or not np.all(times > 0):
        raise ScenarioError(f"{name or op}: sizes and times must be equal-length positive lists")
    compiled = tuple(
        compile_scenario(COLLECTIVES[op](list(ranks), float(s)).workload.scenario(topo)) for s in sizes
    )
    cls, shr = _layout(spec, topo)
    return Experiment(
        name or f"{op} x{len(ranks)}",
        "collective",
        compiled,
        times,
        tuple(float(s) for s in sizes),
        tuple(float(s) for s in sizes),
        bus_factor(_KIND[op], len(ranks)),
        cls,
        shr,
        np.zeros(len(sizes), bool),
        len(ranks),
        None if weight is None else np.asarray(weight, float),
        op,
        np.asarray(shared_gains(topo), float),
        np.asarray(latency_gains(topo), float),
        tuple(ranks),
    )


def p2p_experiment(
    spec: Spec,
    topo: Topology,
    kind: str,
    values: np.ndarray,
    *,
    name: str = "",
    gpus: Sequence[str] | None = None,
    route: Callable[[int, int], Sequence[str]] | None = None,
) -> Experiment:
    """One p2pBandwidthLatencyTest matrix (SI values), its off-diagonal cells.

    Args:
        spec, topo: as for `collective_experiment`.
        kind: "unidirectional", "bidirectional" (a copy each way at once; the value is their total) or
            "latency" (one 4-byte copy).
        values: n x n, bytes/s or s.
        gpus: device i is gpus[i] (default: topo.gpus()).
        route: (i, j) -> link ids of the copy from device i to j (default: topo.route); e.g. a
            host-staged route for P2P=Disabled matrices.
    """
    if kind not in ("unidirectional", "bidirectional", "latency"):
        raise ScenarioError(f"kind: expected unidirectional, bidirectional or latency, got {kind!r}")
    gpus = tuple(topo.gpus() if gpus is None else gpus)
    route = route or (lambda i, j: topo.route(gpus[i], gpus[j]))
    values = np.asarray(values, float)
    n = values.shape[0]
    if values.shape != (n, n) or n > len(gpus):
        raise ScenarioError(f"{name or kind}: a {values.shape} matrix for {len(gpus)} GPUs")
    if not np.all(values[~np.eye(n, dtype=bool)] > 0):
        raise ScenarioError(f"{name or kind}: off-diagonal values must be > 0")
    size = P2P_LATENCY_BYTES if kind == "latency" else P2P_COPY_BYTES
    memory = {x.id for x in topo.links if spec.classify(topo, x.id) == "memory"}
    compiled, measured, labels, moved, staged = [], [], [], [], []
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            pairs = [(i, j), (j, i)] if kind == "bidirectional" else [(i, j)]
            flows = [
                netsim.Flow(f"copy{a}to{b}", gpus[a], gpus[b], size, route=tuple(route(a, b)))
                for a, b in pairs
            ]
            # not topo.scenario: the fit's own copy costs (`simulate_experiments`) stand for the topology's
            scenario = netsim.Scenario(topo.links, flows, name=f"{kind} {i}->{j}", shared=topo.shared)
            compiled.append(compile_scenario(scenario))
            total = size * len(pairs)
            measured.append(values[i, j] if kind == "latency" else total / values[i, j])
            labels.append(f"{i}->{j}")
            moved.append(total)
            staged.append(any(memory.intersection(f.route) for f in flows))
    cls, shr = _layout(spec, topo)
    return Experiment(
        name or kind,
        kind,
        tuple(compiled),
        np.asarray(measured),
        tuple(labels),
        tuple(moved),
        1.0,
        cls,
        shr,
        np.asarray(staged),
        shared_scale=np.asarray(shared_gains(topo), float),
        latency_scale=np.asarray(latency_gains(topo), float),
    )


# --- simulation -----------------------------------------------------------------------------------


class ExperimentBatch(eqx.Module):
    """Experiments of one layout at one padded shape: the engine's inputs, less what the parameters set.

    Attributes:
        program: B stacked programs (flows at their measured bytes).
        base: the compiled network (capacity and latency of resources no parameter sets: devices, padding).
        resource_class: R, the link class of each resource, -1 for the others.
        resource_shared: R, the shared-resource index of each resource, -1 for the others.
        resource_scale: R, a shared resource's capacity over its fitted figure (1 for the others).
        latency_scale: R, a link's latency over its class's fitted figure (1 for the others).
        flow: B x N, True for the items that are flows.
        collective, staged: B, 1.0 for collective points / host-staged copies.
        measured, weight: B, measured time (s) and loss weight.
    """

    program: kernels.Program
    base: kernels.Network
    resource_class: Int[Array, " R"]
    resource_shared: Int[Array, " R"]
    resource_scale: Float[Array, " R"]
    latency_scale: Float[Array, " R"]
    flow: Bool[Array, "B N"]
    collective: Float[Array, " B"]
    staged: Float[Array, " B"]
    measured: Float[Array, " B"]
    weight: Float[Array, " B"]
    max_events: int = eqx.field(static=True)

    @property
    def n_points(self) -> int:
        return int(self.measured.shape[0])


def lay_out(
    experiments: Sequence[Experiment], *, shape: Shape | None = None, weights: Sequence[float] | None = None
) -> ExperimentBatch:
    """Experiments of one layout as one ExperimentBatch, through `netsim.compile_batch` (at least `shape`).

    weights: total loss weight per experiment (default: each experiment's own point weights).
    """
    if len({e.layout() for e in experiments}) != 1:
        raise ScenarioError(f"lay_out: {[e.name for e in experiments]} are not on one topology")
    batch = compile_batch([c for e in experiments for c in e.compiled], shape=shape)
    first = batch.compiled[0]
    r = batch.shape.resources
    cls, shr = np.full(r, -1, np.int32), np.full(r, -1, np.int32)
    cls[first.link_slice] = experiments[0].link_class
    shr[first.shared_slice] = experiments[0].shared_index
    scale = np.ones(r)
    scale[first.shared_slice] = experiments[0].shared_scale
    lat = np.ones(r)
    lat[first.link_slice] = experiments[0].latency_scale
    flow = np.zeros((len(batch.compiled), batch.shape.items), bool)
    for k, c in enumerate(batch.compiled):
        flow[k, c.flow_slice] = True
    per = lambda f: np.concatenate(
        [np.broadcast_to(np.asarray(f(e), float), (e.n_points,)) for e in experiments]
    )
    if weights is None:
        weight = per(lambda e: e.weight)
    else:
        weight = np.concatenate(
            [
                np.asarray(e.weight, float) / np.sum(e.weight) * w
                for e, w in zip(experiments, weights, strict=True)
            ]
        )
    first = lambda x: x[0]  # the batch's points share one fabric
    base = kernels.Network(
        *jax.tree.map(first, (batch.network.capacity, batch.network.latency, batch.network.packets))
    )
    return ExperimentBatch(
        batch.program,
        base,
        cls,
        shr,
        scale,
        lat,
        flow,
        per(lambda e: float(e.collective)),
        per(lambda e: e.staged),
        per(lambda e: e.measured),
        weight,
        batch.max_events,
    )


#: a batch costs about points x items x event bound; below this, padding into one batch is cheaper than
#: compiling another copy of the engine (10-20 s on a laptop CPU)
CHEAP_BATCH = 2_000_000


def experiment_batches(
    experiments: Sequence[Experiment],
) -> tuple[tuple[ExperimentBatch, ...], tuple[tuple[int, int, int], ...]]:
    """Lays experiments out in as few batches as pay: experiments of one layout share a batch (padded to a
    common shape by `netsim.compile_batch`) where the padded batch stays cheap (see CHEAP_BATCH) or costs
    at most twice the separate ones. Every experiment weighs 1 / len(experiments) in total.

    Returns (batches, where): where[i] = (batch index, first point, end) of experiments[i].
    """
    shape = [e.compiled[0].shape for e in experiments]
    for i, e in enumerate(experiments):
        for c in e.compiled[1:]:
            shape[i] = shape[i] | c.shape
    cost = lambda idx: (
        sum(experiments[i].n_points for i in idx)
        * max(shape[i].items for i in idx)
        * max(shape[i].max_events for i in idx)
    )
    groups: list[list[int]] = []
    for i in sorted(range(len(experiments)), key=lambda i: dataclasses.astuple(shape[i])):
        for g in groups:
            if experiments[g[0]].layout() == experiments[i].layout():
                merged = cost([*g, i])
                if merged <= CHEAP_BATCH or merged <= 2 * (cost(g) + cost([i])):
                    g.append(i)
                    break
        else:
            groups.append([i])
    out, where = [], [None] * len(experiments)
    for members in groups:
        start = 0
        for i in members:
            where[i] = (len(out), start, start + experiments[i].n_points)
            start += experiments[i].n_points
        out.append(lay_out([experiments[i] for i in members], weights=[1 / len(experiments)] * len(members)))
    return tuple(out), tuple(where)


def network(params: Params, b: ExperimentBatch) -> kernels.Network:
    """Per-resource capacity and latency under `params` (other resources keep the compiled figures)."""
    cls, shr = b.resource_class, b.resource_shared
    bw = jnp.exp(params.log_bandwidth)[jnp.maximum(cls, 0)]
    shared = (
        jnp.exp(params.log_shared)[jnp.maximum(shr, 0)] * b.resource_scale
        if params.log_shared.shape[0]
        else b.base.capacity
    )
    capacity = jnp.where(cls >= 0, bw, jnp.where(shr >= 0, shared, b.base.capacity))
    latency = jnp.where(
        cls >= 0, jnp.exp(params.log_latency)[jnp.maximum(cls, 0)] * b.latency_scale, b.base.latency
    )
    return kernels.Network(capacity, latency, b.base.packets)


def simulate_experiments(params: Params, b: ExperimentBatch, *, loop: str = "lax") -> kernels.SimState:
    """The engine's final state for every point of `b` under `params` (traceable: the fit's loss).

    Every flow pays the software costs of `CostModel.flow_costs`: a collective's flows the blended
    per-step overhead at their bytes and bytes / efficiency, copies the copy overhead (staged or direct)
    and, host-staged, bytes / staged efficiency. The launch cost is not in the state: see `times`.
    """
    net = network(params, b)
    staged = (b.staged > 0)[:, None]
    extra, inflate = params.costs.flow_costs(b.program.size, b.collective[:, None], staged)  # B x N
    p = b.program
    prog = kernels.Program(
        p.route,
        p.size * jnp.where(b.flow, inflate, 1.0),
        p.release,
        p.overhead + jnp.where(b.flow, extra, 0.0),
        p.after,
    )
    return netsim.vmap_run(net, prog, max_events=b.max_events, loop=loop)


def times(params: Params, b: ExperimentBatch, state: kernels.SimState) -> Float[Array, " B"]:
    """Simulated time (s) per point: the makespan, plus the launch cost for collectives."""
    return jnp.max(state.finish, axis=1) + b.collective * jnp.exp(params.costs.log_launch)


def float64_leaves(tree):
    """The tree's leaves as JAX arrays, its floats in float64: parameters a caller made in float32 (or as
    NumPy float64 outside x64, which JAX would cut to float32) compute as their float64 values. Call under
    x64."""
    real = lambda x: jnp.isdtype(jnp.result_type(x), "real floating")
    return jax.tree.map(lambda x: jnp.asarray(x, jnp.float64 if real(x) else None), tree)


@eqx.filter_jit
def _predict(params: Params, b: ExperimentBatch, loop: str):
    state = simulate_experiments(params, b, loop=loop)
    return times(params, b, state), state.status, state.events


def predict(
    params: Params, exp: Experiment | Sequence[Experiment], *, throw: bool = True, loop: str = "lax"
) -> BatchRun:
    """Simulates every point of `exp` (one experiment, or several) under `params`, in as few compiled
    batches as pay (see `experiment_batches`). Needs no jit around it.

    Returns a `netsim.BatchRun` over the points of all experiments in order: ["makespan"] is the
    simulated time (s) per point (launch included), `status` the engine's Status per point.

    Args:
        throw: raise SimulationError naming the points that did not finish; else read `status`.
        loop: the engine's loop kind ("lax"; "checkpointed" for reverse-mode derivatives).
    """
    exps = [exp] if isinstance(exp, Experiment) else list(exp)
    laid, where = experiment_batches(exps)
    with jax.enable_x64(True):
        params = float64_leaves(params)
        out = [jax.device_get(_predict(params, b, loop)) for b in laid]
    pick = lambda k: np.concatenate([np.asarray(out[b][k])[lo:hi] for b, lo, hi in where])
    run = BatchRun(pick(1).astype(np.int32), pick(2), max(b.max_events for b in laid), {"makespan": pick(0)})
    return run.check(" + ".join(e.name for e in exps)) if throw else run
