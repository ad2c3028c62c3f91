"""What calibration fits, and how a measurement is simulated under given parameters.

A `Spec` names the parameters (link classes, hidden shared resources, protocol regimes); `Params`
holds their values, each positive through its log. An `Experiment` is one measured table laid out
once as padded kernel arrays (a collective at many sizes, or one p2pBandwidthLatencyTest matrix);
`predict(params, experiment)` simulates all its points in one vmap through `netsim.kernels.run`.

Protocol regimes: NCCL switches protocol with message size (LL for small messages: half of every
8-byte store is a flag, so 50 % payload efficiency, but a short per-step latency; Simple for large
ones: full bandwidth, a longer per-step handshake). Each regime has its own per-step software
overhead and payload efficiency; their logs are blended by a logistic step in log(bytes per step),
at fitted hand-over sizes. Bytes per step is the natural variable: the size where the fastest
protocol changes, (overhead_Simple - overhead_LL) x bandwidth, does not depend on the rank count.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from netsim import ScenarioError, kernels
from netsim._compile import Shape, bucket, compile_scenario
from netsim._scenario import Flow, Scenario
from netsim.topology import Topology
from netsim.workloads.collectives import allgather, allreduce, bus_factor, reducescatter

__all__ = ["Experiment", "Params", "SharedResource", "Spec", "collective_experiment", "default_link_class",
           "initial_values", "merge", "p2p_experiment", "pcie_shared", "predict", "socket_duplex", "staging_engines"]

#: builders of the collectives nccl-tests measures, by nccl-tests' name (without "_perf")
COLLECTIVES = {"all_reduce": allreduce, "all_gather": allgather, "reduce_scatter": reducescatter}
_KIND = {"all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reducescatter"}
#: CUDA p2pBandwidthLatencyTest: 10,000,000 ints per bandwidth copy, one int per latency copy
P2P_COPY_BYTES = 4e7
P2P_LATENCY_BYTES = 4.0


def default_link_class(topo: Topology, link_id: str) -> str:
    """The class of a link from its end nodes' kinds: pcie, numa, socket, memory, nvlink, or "a-b"."""
    link = topo.link[link_id]
    ends = frozenset((topo.kind[link.src], topo.kind[link.dst]))
    if ends == {"socket"} or ends == {"cpu"}:
        return "socket"  # between sockets (a one-NUMA socket's hub is its cpu node)
    if "mem" in ends:
        return "memory"
    if ends == {"cpu", "socket"}:
        return "numa"
    if ends == {"gpu"}:
        return "nvlink"
    if ends & {"rc", "switch"}:
        return "pcie"
    return "-".join(sorted(ends))


@dataclasses.dataclass(frozen=True)
class SharedResource:
    """A capacity that flows share although no single link has it (a root complex, a socket link's
    duplex budget, a host staging engine).

    A flow crosses the resource when its route crosses any link in `links`, and, if `via` is not
    empty, also one in `via` (e.g. only host-staged copies, which cross a memory link).
    """

    name: str
    links: frozenset[str]
    via: frozenset[str] = frozenset()

    def applies(self, route: Sequence[str]) -> bool:
        return bool(self.links.intersection(route)) and (not self.via or bool(self.via.intersection(route)))


@dataclasses.dataclass(frozen=True)
class Spec:
    """The structure of a calibration: which parameters exist and what each means.

    Attributes:
        link_classes: every link of a class shares one bandwidth and one latency.
        shared: hidden shared resources, each with a fitted capacity.
        regimes: protocol regimes, smallest messages first (see the module docstring).
        classify: link id -> class, for the topologies this spec is used with.
    """

    link_classes: tuple[str, ...]
    shared: tuple[SharedResource, ...] = ()
    regimes: tuple[str, ...] = ("LL", "Simple")
    classify: Callable[[Topology, str], str] = default_link_class

    @classmethod
    def for_topology(cls, topo: Topology, *, shared: Sequence[SharedResource] = (),
                     regimes: Sequence[str] = ("LL", "Simple"),
                     classify: Callable[[Topology, str], str] = default_link_class) -> Spec:
        """The link classes found in `topo`, in first-seen order."""
        classes = tuple(dict.fromkeys(classify(topo, link.id) for link in topo.links))
        return cls(classes, tuple(shared), tuple(regimes), classify)


def socket_duplex(topo: Topology) -> tuple[SharedResource, ...]:
    """One shared resource per socket-to-socket cable, joining its two directions.

    Measured on m01 (p2pBandwidthLatency_p2p_on): one cross-socket copy runs at ~22 GB/s, but a copy
    each way at once totals only ~41 GB/s, not 44: the directions share a budget.
    """
    seen, out = set(), []
    for link in topo.links:
        if default_link_class(topo, link.id) != "socket" or (link.dst, link.src) in seen:
            continue
        seen.add((link.src, link.dst))
        back = [x.id for x in topo.links if (x.src, x.dst) == (link.dst, link.src)]
        out.append(SharedResource(f"{link.src}<->{link.dst}", frozenset([link.id, *back])))
    return tuple(out)


def staging_engines(topo: Topology) -> tuple[SharedResource, ...]:
    """One shared resource per GPU for host-staged copies (P2P off) in and out of it.

    Measured on m01 (p2pBandwidthLatency, P2P=Disabled): one staged copy runs at ~19.5 GB/s, but a
    copy each way at once totals only ~21 GB/s although the two use opposite PCIe directions: the
    staging (the driver's bounce buffers and copy engines) is shared by both directions. The resource
    is crossed by copies through the GPU's links that also cross a memory link.
    """
    memory = frozenset(x.id for x in topo.links if default_link_class(topo, x.id) == "memory")
    out = []
    for gpu in topo.gpus():
        own = frozenset(x.id for x in topo.links if gpu in (x.src, x.dst))
        out.append(SharedResource(f"{gpu} staging", own, memory))
    return tuple(out) if memory else ()


def pcie_shared(topo: Topology) -> tuple[SharedResource, ...]:
    """The hidden shared resources of a PCIe server: socket-link duplex budgets, per-GPU staging."""
    return socket_duplex(topo) + staging_engines(topo)


class Params(eqx.Module):
    """Fitted values; every one positive through its log (SI units).

    Attributes:
        log_bandwidth: per link class, bytes/s.
        log_latency: per link class, s per link crossed.
        log_shared: per shared resource, bytes/s.
        log_overhead: per regime, s of software cost per collective step (per flow).
        log_inefficiency: per regime; payload efficiency = exp(-exp(log_inefficiency)) in (0, 1).
        log_threshold: P - 1 hand-over sizes, bytes per step (their logs need no sign: plain floats).
        log_width: width of each hand-over, in log(bytes).
        log_launch: s, once per collective (kernel launch and setup).
        log_copy_overhead: s, once per p2pBandwidthLatencyTest copy (direct, P2P).
        log_staged_overhead: s, once per host-staged copy (P2P off: the driver's bounce through host
            memory costs ~10 us, an order more than a direct copy).
    """

    log_bandwidth: Float[Array, " C"]
    log_latency: Float[Array, " C"]
    log_shared: Float[Array, " K"]
    log_overhead: Float[Array, " P"]
    log_inefficiency: Float[Array, " P"]
    log_threshold: Float[Array, " Pm1"]
    log_width: Float[Array, ""]
    log_launch: Float[Array, ""]
    log_copy_overhead: Float[Array, ""]
    log_staged_overhead: Float[Array, ""]

    @classmethod
    def from_values(cls, spec: Spec, values: dict) -> Params:
        """From SI values, as `to_values` writes them (missing top-level entries take `initial_values`).

        The fields are float64 NumPy arrays (no x64 flag needed here); `fit` and `report` move them.
        """
        v = initial_values(spec) | dict(values)
        classes = v["link_classes"]
        shared = v["shared"]
        regimes = v["regimes"]
        missing = [c for c in spec.link_classes if c not in classes] + [s.name for s in spec.shared if s.name not in shared]
        missing += [r for r in spec.regimes if r not in regimes]
        if missing:
            raise ScenarioError(f"parameters: no value for {missing}")
        r = [regimes[name] for name in spec.regimes]
        for name, regime in zip(spec.regimes, r, strict=True):
            if not 0 < regime["efficiency"] < 1:
                raise ScenarioError(f"regimes.{name}.efficiency: must be in (0, 1), got {regime['efficiency']!r}")
        log = lambda xs: np.log(np.asarray(xs, dtype=np.float64))
        return cls(
            log_bandwidth=log([classes[c]["bandwidth"] for c in spec.link_classes]),
            log_latency=log([max(classes[c]["latency"], 1e-15) for c in spec.link_classes]),
            log_shared=log([shared[s.name] for s in spec.shared]).reshape(len(spec.shared)),
            log_overhead=log([x["overhead"] for x in r]),
            log_inefficiency=np.log(-log([x["efficiency"] for x in r])),
            log_threshold=log([x["up_to"] for x in r[:-1]]).reshape(len(r) - 1),
            log_width=log(v["width"]),
            log_launch=log(max(v["launch"], 1e-15)),
            log_copy_overhead=log(max(v["copy_overhead"], 1e-15)),
            log_staged_overhead=log(max(v["staged_overhead"], 1e-15)))

    def to_values(self, spec: Spec) -> dict:
        """SI values, JSON-able: link classes, shared resources, regimes, launch, copy overhead."""
        f = lambda x: [float(v) for v in np.exp(np.asarray(x)).ravel()]
        bw, lat, shared = f(self.log_bandwidth), f(self.log_latency), f(self.log_shared)
        over, eff = f(self.log_overhead), [float(np.exp(-v)) for v in f(self.log_inefficiency)]
        thr = [*f(self.log_threshold), None]
        return {
            "link_classes": {c: {"bandwidth": bw[i], "latency": lat[i]} for i, c in enumerate(spec.link_classes)},
            "shared": {s.name: shared[i] for i, s in enumerate(spec.shared)},
            "regimes": {r: {"overhead": over[i], "efficiency": eff[i], "up_to": thr[i]}
                        for i, r in enumerate(spec.regimes)},
            "width": float(np.exp(self.log_width)),
            "launch": float(np.exp(self.log_launch)),
            "copy_overhead": float(np.exp(self.log_copy_overhead)),
            "staged_overhead": float(np.exp(self.log_staged_overhead)),
        }


def initial_values(spec: Spec, topo: Topology | None = None, *, launch: float = 0.0) -> dict:
    """Starting values: link figures from `topo` (mean per class), LL/Simple regimes as in NCCL.

    LL: 50 % payload efficiency (a 4-byte flag in every 8-byte store), ~1 us per step; Simple:
    ~98 % efficiency, ~5 us per step, handing over at 16 KiB per step. Shared resources start at 80 %
    of their slowest link. `launch` (s per collective) is 0 by default: a fit that holds it folds
    the launch cost into the per-step overheads.
    """
    per_class: dict[str, list] = {c: [] for c in spec.link_classes}
    if topo is not None:
        for link in topo.links:
            c = spec.classify(topo, link.id)
            if c in per_class:
                per_class[c].append((link.bandwidth, link.latency))
    # Latencies start at 100 ns where the topology has none: in log space a zero start has no gradient.
    classes = {c: {"bandwidth": float(np.mean([b for b, _ in v])) if v else 25e9,
                   "latency": float(np.mean([x for _, x in v])) if v and np.mean([x for _, x in v]) > 0 else 1e-7}
               for c, v in per_class.items()}
    link = {} if topo is None else topo.link
    # A max-min constraint that does not bind has zero gradient: start each shared resource binding
    # (below its slowest link), so that the data can push it up to where it stops mattering.
    shared = {s.name: 0.8 * min([link[x].bandwidth for x in s.links if x in link] or [25e9]) for s in spec.shared}
    defaults = {"LL": (1e-6, 0.5), "Simple": (5e-6, 0.98)}
    regimes = {}
    for i, r in enumerate(spec.regimes):
        over, eff = defaults.get(r, (2e-6 * (i + 1), 0.9))
        regimes[r] = {"overhead": over, "efficiency": eff, "up_to": 16384.0 * 4**i if i < len(spec.regimes) - 1 else None}
    return {"link_classes": classes, "shared": shared, "regimes": regimes, "width": 0.5, "launch": launch,
            "copy_overhead": 1e-6, "staged_overhead": 10e-6}


# --- experiments ----------------------------------------------------------------------------------


class Experiment(eqx.Module):
    """One measured table, laid out as kernel arrays with one batch row per point.

    Attributes:
        program: B stacked programs (flows in bytes at their measured size; padding as in netsim.compile).
        resource_class: per resource, its link class index; -1 for shared and padding resources.
        resource_shared: per resource, its shared-resource index; -1 otherwise.
        step_bytes: B, bytes per collective step (0 for p2p copies: no protocol regimes).
        measured: B, measured time (s).
        weight: B, loss weight per point (1, or 0 for points left out).
        collective: B, 1.0 for a collective (regimes, launch), 0.0 for a p2p copy (copy overhead).
        staged: B, 1.0 where the copy is host-staged (crosses a memory link), else 0.0.
        name, kind: labels; kind is "collective", "unidirectional", "bidirectional" or "latency".
        labels: per point, its size (collectives) or "i->j" cell.
        moved: B, bytes moved per point (size for collectives, all copies' bytes for p2p).
        factor: bus factor (busbw = factor x size / time) for collectives, 1 for copies.
        max_events: the engine's event bound for this shape.
        n_ranks: ranks of a collective; 0 for copies.
    """

    program: kernels.Program
    resource_class: Int[Array, " R"]
    resource_shared: Int[Array, " R"]
    step_bytes: Float[Array, " B"]
    measured: Float[Array, " B"]
    weight: Float[Array, " B"]
    collective: Float[Array, " B"]
    staged: Float[Array, " B"]
    name: str = eqx.field(static=True)
    kind: str = eqx.field(static=True)
    labels: tuple = eqx.field(static=True)
    moved: tuple = eqx.field(static=True)
    factor: float = eqx.field(static=True)
    max_events: int = eqx.field(static=True)
    n_ranks: int = eqx.field(static=True, default=0)

    @property
    def n_points(self) -> int:
        return int(self.measured.shape[0])

    def layout(self) -> tuple:
        """Experiments with equal layouts (resources and their meaning) can share one batch."""
        return (tuple(np.asarray(self.resource_class)), tuple(np.asarray(self.resource_shared)))

    @property
    def shape(self) -> tuple[int, int, int]:
        """Padded (items, hops, predecessors) of the programs."""
        return (*np.shape(self.program.route)[1:], np.shape(self.program.after)[2])

    def padded(self, items: int, hops: int, after: int) -> Experiment:
        """The same experiment with programs padded to a larger shape (padding as in netsim.compile)."""
        n, h, p = self.shape
        if (items, hops, after) == (n, h, p):
            return self
        if items < n or hops < h or after < p:
            raise ValueError(f"cannot pad shape {(n, h, p)} down to {(items, hops, after)}")
        prog = jax.tree.map(np.asarray, self.program)
        b, r = prog.route.shape[0], self.resource_class.shape[0]
        route = np.full((b, items, hops), r, np.int32)
        route[:, :n, :h] = prog.route
        pre = np.full((b, items, after), items, np.int32)
        pre[:, :n, :p] = np.where(prog.after == n, items, prog.after)  # "no predecessor" is the item count
        grow = lambda x: np.concatenate([x, np.zeros((b, items - n))], axis=1)
        program = kernels.Program(route, grow(prog.size), grow(prog.release), grow(prog.overhead), pre)
        return dataclasses.replace(self, program=program, max_events=Shape(items=items).max_events)


    def relevant(self, params: Params) -> np.ndarray:
        """Mask over the flattened `params` (ravel_pytree order): the entries that can change this
        experiment's times (the link classes and shared resources its routes cross, the regimes for
        collectives, the copy overheads for copies). The fit differentiates only along these."""
        route = np.asarray(self.program.route)
        used = np.unique(route[route < self.resource_class.shape[0]])
        cls, shr = np.asarray(self.resource_class)[used], np.asarray(self.resource_shared)[used]
        coll = bool(np.any(np.asarray(self.collective) > 0))
        copies = bool(np.any(np.asarray(self.collective) == 0))
        staged = np.asarray(self.staged) > 0
        rules = {"log_bandwidth": np.isin(np.arange(params.log_bandwidth.shape[0]), cls),
                 "log_latency": np.isin(np.arange(params.log_latency.shape[0]), cls),
                 "log_shared": np.isin(np.arange(params.log_shared.shape[0]), shr),
                 "log_copy_overhead": np.array(copies and not staged[np.asarray(self.collective) == 0].all()),
                 "log_staged_overhead": np.array(bool(staged.any()))}
        mask = []
        for field in dataclasses.fields(params):
            size = int(np.size(getattr(params, field.name)))
            mask.append(np.broadcast_to(rules.get(field.name, np.array(coll)), (size,)))
        return np.concatenate(mask)


#: a batch costs about points x items x event bound; below this, padding into one batch is cheaper than
#: compiling another copy of the engine (10-20 s on a laptop CPU)
CHEAP_BATCH = 2_000_000


def merge(experiments: Sequence[Experiment]) -> tuple[tuple[Experiment, ...], tuple[tuple[int, int, int], ...]]:
    """Batches experiments of one layout together, padding programs to a common shape where the padded
    batch stays cheap (see CHEAP_BATCH) or costs at most twice the separate ones. Weights are
    normalised so that every input experiment weighs 1 / len(experiments) in total.

    Returns (batches, where): where[i] = (batch index, first point, end) of experiments[i].
    """
    cost = lambda idx: sum(experiments[i].n_points for i in idx) * max(experiments[i].shape[0] for i in idx) \
        * max(experiments[i].max_events for i in idx)
    groups: list[list[int]] = []
    for i in sorted(range(len(experiments)), key=lambda i: experiments[i].shape):
        for g in groups:
            if experiments[g[0]].layout() == experiments[i].layout():
                merged = cost([*g, i])
                if merged <= CHEAP_BATCH or merged <= 2 * (cost(g) + cost([i])):
                    g.append(i)
                    break
        else:
            groups.append([i])
    batches, where = [], [None] * len(experiments)
    for members in groups:
        shape = tuple(max(experiments[i].shape[d] for i in members) for d in range(3))
        parts = [experiments[i].padded(*shape) for i in members]
        start = 0
        for i in members:
            where[i] = (len(batches), start, start + experiments[i].n_points)
            start += experiments[i].n_points
        cat = lambda *xs: np.concatenate([np.asarray(x) for x in xs])
        first = parts[0]
        batches.append(Experiment(
            jax.tree.map(lambda *xs: np.concatenate(xs), *[e.program for e in parts]),
            first.resource_class, first.resource_shared, cat(*[e.step_bytes for e in parts]),
            cat(*[e.measured for e in parts]),
            cat(*[np.asarray(e.weight) / np.sum(e.weight) / len(experiments) for e in parts]),
            cat(*[e.collective for e in parts]), cat(*[e.staged for e in parts]), " + ".join(e.name for e in parts),
            first.kind if len(parts) == 1 else "batch", sum((e.labels for e in parts), ()),
            sum((e.moved for e in parts), ()), first.factor, first.max_events))
    return tuple(batches), tuple(where)


def _lay_out(spec: Spec, topo: Topology, scenarios: Sequence[Scenario]) -> tuple[kernels.Program, np.ndarray,
                                                                                  np.ndarray, int]:
    """Compiles same-topology scenarios to one padded shape and adds the shared resources' hops."""
    n_links = len(topo.links)
    extra = len(spec.shared)
    hops = max(len(f.route) for s in scenarios for f in s.flows) + extra
    items = max(len(s.flows) for s in scenarios)
    after = max([1] + [len(f.after) for s in scenarios for f in s.flows])
    shape = Shape(items=bucket(items, 2), hops=bucket(hops, 4), after=bucket(after, 1),
                  resources=bucket(n_links + extra, 8))
    programs = []
    for s in scenarios:
        c = compile_scenario(s, shape=shape)
        route = np.array(c.program.route)
        for i, path in enumerate(c.routes):
            slot = len(path)
            for k, res in enumerate(spec.shared):
                if res.applies(path):
                    route[i, slot] = n_links + k
                    slot += 1
        p = c.program
        programs.append(kernels.Program(route, p.size, p.release, p.overhead, p.after))
    shape = c.shape
    resources = shape.resources
    cls = np.full(resources, -1, np.int32)
    index = {c: i for i, c in enumerate(spec.link_classes)}
    for j, link in enumerate(topo.links):
        name = spec.classify(topo, link.id)
        if name not in index:
            raise ScenarioError(f"link {link.id!r}: class {name!r} is not in the spec's link classes "
                                f"{list(spec.link_classes)}")
        cls[j] = index[name]
    shr = np.full(resources, -1, np.int32)
    shr[n_links:n_links + extra] = np.arange(extra)
    program = jax.tree.map(lambda *xs: np.stack(xs), *programs)
    return program, cls, shr, shape.max_events


def collective_experiment(spec: Spec, topo: Topology, op: str, ranks: Sequence[str], sizes, times, *,
                          name: str = "", weight=None) -> Experiment:
    """A collective measured at several sizes (nccl-tests' S, bytes) with times (s), ring algorithm.

    Args:
        spec: the parameters' structure.
        topo: the fabric; `ranks` are its node names in ring order.
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
    scenarios = [COLLECTIVES[op](list(ranks), float(s)).scenario(topo) for s in sizes]
    program, cls, shr, max_events = _lay_out(spec, topo, scenarios)
    step = np.array([max(f.bytes for f in s.flows) for s in scenarios])
    return Experiment(program, np.asarray(cls), np.asarray(shr), np.asarray(step), np.asarray(times),
                      np.asarray(np.ones_like(times) if weight is None else weight, float), np.ones(len(times)),
                      np.zeros(len(times)), name or f"{op} x{len(ranks)}", "collective", tuple(float(s) for s in sizes),
                      tuple(float(s) for s in sizes), bus_factor(_KIND[op], len(ranks)), max_events, len(ranks))


def p2p_experiment(spec: Spec, topo: Topology, kind: str, values: np.ndarray, *, name: str = "",
                   gpus: Sequence[str] | None = None,
                   route: Callable[[int, int], Sequence[str]] | None = None) -> Experiment:
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
    scenarios, measured, labels, moved = [], [], [], []
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            pairs = [(i, j), (j, i)] if kind == "bidirectional" else [(i, j)]
            flows = [Flow(f"copy{a}to{b}", gpus[a], gpus[b], size, route=tuple(route(a, b))) for a, b in pairs]
            scenarios.append(Scenario(topo.links, flows, name=f"{kind} {i}->{j}"))
            total = size * len(pairs)
            measured.append(values[i, j] if kind == "latency" else total / values[i, j])
            labels.append(f"{i}->{j}")
            moved.append(total)
    program, cls, shr, max_events = _lay_out(spec, topo, scenarios)
    memory = {x.id for x in topo.links if spec.classify(topo, x.id) == "memory"}
    staged = [float(any(memory.intersection(f.route) for f in s.flows)) for s in scenarios]
    measured = np.asarray(measured)
    return Experiment(program, np.asarray(cls), np.asarray(shr), np.zeros(len(measured)), np.asarray(measured),
                      np.ones(len(measured)), np.zeros(len(measured)), np.asarray(staged), name or kind, kind,
                      tuple(labels), tuple(moved), 1.0, max_events)


# --- simulation -----------------------------------------------------------------------------------


def network(params: Params, exp: Experiment) -> kernels.Network:
    """Per-resource capacity and latency under `params` (padding resources: capacity 1, latency 0)."""
    cls, shr = exp.resource_class, exp.resource_shared
    bw = jnp.exp(params.log_bandwidth)[jnp.maximum(cls, 0)]
    shared = jnp.exp(params.log_shared)[jnp.maximum(shr, 0)] if params.log_shared.shape[0] else jnp.ones_like(bw)
    capacity = jnp.where(cls >= 0, bw, jnp.where(shr >= 0, shared, 1.0))
    latency = jnp.where(cls >= 0, jnp.exp(params.log_latency)[jnp.maximum(cls, 0)], 0.0)
    return kernels.Network(capacity, latency)


def regime_weights(params: Params, step_bytes: Float[Array, " B"]) -> Float[Array, "P B"]:
    """Weight of each regime at each bytes-per-step: logistic hand-overs in log(bytes), summing to 1."""
    x = jnp.log(jnp.maximum(step_bytes, 1.0))
    width = jnp.exp(params.log_width)
    above = jax.nn.sigmoid((x[None, :] - params.log_threshold[:, None]) / width)  # P-1 x B: past hand-over k
    ones = jnp.ones_like(x)[None, :]
    # regime p holds for being past hand-overs < p and not past hand-over p
    past = jnp.concatenate([ones, jnp.cumprod(above, axis=0)], axis=0)
    return past * jnp.concatenate([1.0 - above, ones], axis=0)


def predict(params: Params, exp: Experiment, *, loop: str = "lax") -> Float[Array, " B"]:
    """Simulated time (s) of every point of `exp` under `params`.

    loop: the engine's loop kind: "lax" (forward-mode derivatives) or "checkpointed" (reverse mode).
    """
    net = network(params, exp)
    n_res = exp.resource_class.shape[0]
    w = regime_weights(params, exp.step_bytes)
    overhead = jnp.exp(w.T @ params.log_overhead)  # B: log-blended per-step overhead
    efficiency = jnp.exp(-(w.T @ jnp.exp(params.log_inefficiency)))  # log-blended efficiency
    is_coll = exp.collective
    copy = jnp.where(exp.staged > 0, jnp.exp(params.log_staged_overhead), jnp.exp(params.log_copy_overhead))
    per_item = is_coll * overhead + (1 - is_coll) * copy
    payload = is_coll / efficiency + (1 - is_coll)  # wire bytes per payload byte

    def one(program: kernels.Program, over, inflate):
        real = jnp.any(program.route < n_res, axis=1)
        prog = kernels.Program(program.route, program.size * inflate, program.release,
                               jnp.where(real, over, 0.0), program.after)
        state = kernels.run(net, prog, max_events=exp.max_events, loop=loop)
        return jnp.max(jnp.where(real, state.finish, 0.0)), state.status

    times, status = jax.vmap(one)(exp.program, per_item, payload)
    times = eqx.error_if(times, jnp.any(status != kernels.OK), "calibrate: a simulation did not finish")
    return times + is_coll * jnp.exp(params.log_launch)
