"""Topology: a fabric's directed links, the role of each node, and the routing the fabric really uses.

Every builder in netsim.topology returns one. Routing is delegated to a `Router` (dimension-order on
meshes, tree paths on PCIe, ECMP on clusters, a nested router for composed systems); link failures
(`without_links`) keep the router and recompute its routes over the surviving links.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from .._checks import fraction
from .._checks import number as check_number
from .._routing import LinkGraph
from .._scenario import Flow, Link, Scenario, ScenarioError, SharedResource, Task, bandwidth_targets

__all__ = [
    "CollectiveCosts",
    "Path",
    "Regime",
    "Router",
    "ShortestPath",
    "Topology",
    "link_class",
    "natural_key",
    "regime_blend",
    "regime_weights",
]

Path = tuple[str, ...]  # link ids from src to dst

#: roles of nodes that run work, used when a builder does not name its workers
WORKER_KINDS = frozenset({"gpu", "host", "xcd", "gcd", "chiplet"})


def natural_key(name: str) -> tuple[Any, ...]:
    """Sort key that orders "n2/gpu10" after "n2/gpu9" (digit runs compare as numbers)."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


class Router(Protocol):
    """A fabric's routing rule; `topo` is the topology being routed (after any link failures)."""

    def route(self, topo: Topology, src: str, dst: str) -> Path:
        """The single path the fabric uses; raises ScenarioError when dst is unreachable."""
        ...

    def paths(self, topo: Topology, src: str, dst: str) -> list[tuple[float, Path]]:
        """Weighted paths (weights sum to 1); single-path fabrics return [(1.0, route)]."""
        ...

    def without(self, link_ids: frozenset[str]) -> Router:
        """The router for the same fabric after `link_ids` failed (most routers keep no link state)."""
        ...


@dataclasses.dataclass(frozen=True)
class ShortestPath:
    """Least latency, then fewest hops (netsim's default routing), over the surviving links."""

    def route(self, topo: Topology, src: str, dst: str) -> Path:
        return topo.graph.shortest_path(src, dst, where=f"route {src!r} -> {dst!r}")

    def paths(self, topo: Topology, src: str, dst: str) -> list[tuple[float, Path]]:
        return [(1.0, self.route(topo, src, dst))]

    def without(self, link_ids: frozenset[str]) -> ShortestPath:
        return self


def regime_weights(step_bytes, log_threshold, log_width, xp=np):
    """Weight of each protocol regime at each bytes-per-step, shape S x P, summing to 1 over P.

    Regime p holds past hand-overs < p and before hand-over p; each hand-over is a logistic step in
    log(bytes per step) at log_threshold[k], of width exp(log_width). Written once for NumPy (`xp=np`)
    and jax.numpy (`xp=jnp`).
    """
    x = xp.log(xp.maximum(xp.asarray(step_bytes, dtype=np.float64), 1.0))[..., None]  # S x 1
    threshold = xp.reshape(log_threshold, (1,) * (x.ndim - 1) + (-1,))  # 1 x (P-1): ranks match, no promotion
    z = (x - threshold) / xp.exp(log_width)
    above = 0.5 * (1.0 + xp.tanh(0.5 * z))  # S x (P-1): the logistic, with finite gradients at any z
    ones = xp.ones_like(x)
    past = xp.concatenate([ones, xp.cumprod(above, axis=-1)], axis=-1)
    return past * xp.concatenate([1.0 - above, ones], axis=-1)


def regime_blend(step_bytes, log_overhead, inefficiency, log_threshold, log_width, xp=np):
    """Per-step software overhead (s) and payload efficiency at each bytes-per-step, blended over regimes.

    NCCL switches protocol with message size (LL for small messages: half of every 8-byte store is a
    flag, 50 % payload efficiency, a short per-step latency; Simple for large ones: full bandwidth, a
    longer handshake). The logs of the regimes' overheads and their inefficiencies (-log efficiency)
    are blended with `regime_weights`. Calibration's loss (`xp=jnp`) and calibrated scenarios
    (`CollectiveCosts.apply`, `xp=np`) share this one formula.

    Args:
        step_bytes: bytes per step, any shape S.
        log_overhead: P, log s per regime, smallest messages first.
        inefficiency: P, -log(efficiency) per regime.
        log_threshold: P - 1, log bytes per step of each hand-over.
        log_width: log of each hand-over's width in log(bytes).

    Returns:
        (overhead, efficiency), each of shape S.
    """
    w = regime_weights(step_bytes, log_threshold, log_width, xp)
    return xp.exp(w @ log_overhead), xp.exp(-(w @ inefficiency))


@dataclasses.dataclass(frozen=True)
class Regime:
    """One protocol regime: `overhead` s per collective step (per flow), `efficiency` payload bytes per
    wire byte in (0, 1], in use up to `up_to` bytes per step (None for the last regime)."""

    name: str
    overhead: float
    efficiency: float
    up_to: float | None = None


@dataclasses.dataclass(frozen=True)
class CollectiveCosts:
    """A machine's collective software model (fitted by `netsim calibrate`), carried by its Topology.

    A collective built by netsim.workloads without an explicit `step_overhead` and turned into a scenario
    on a topology with costs gets, per flow, the regime-blended per-step overhead at its bytes and its
    bytes inflated by 1 / efficiency (see `regime_blend`), and the launch cost once (every flow starts
    `launch` s later). Copies (p2pBandwidthLatencyTest) pay `copy_overhead` once, host-staged ones
    `staged_overhead`, and host-staged copies move their bytes at `staged_efficiency` of the rate their
    path allows: cudaMemcpy without P2P bounces each chunk through a pinned buffer and waits for it, which
    NCCL's SHM transport (pipelined by the GPU kernels themselves) does not.

    Attributes:
        regimes: smallest messages first; every one but the last has `up_to`.
        width: width of each hand-over in log(bytes).
        launch: s once per collective.
        copy_overhead, staged_overhead: s once per direct / host-staged copy.
        staged_efficiency: in (0, 1]; a host-staged copy carries bytes / staged_efficiency.
    """

    regimes: tuple[Regime, ...]
    width: float = 0.5
    launch: float = 0.0
    copy_overhead: float = 0.0
    staged_overhead: float = 0.0
    staged_efficiency: float = 1.0

    def __post_init__(self):
        regimes = tuple(self.regimes)
        object.__setattr__(self, "regimes", regimes)
        if not regimes:
            raise ScenarioError("software.regimes: at least one regime")
        for i, r in enumerate(regimes):
            where = f"software.regimes[{i}] ({r.name!r})"
            check_number(r.overhead, f"{where}.overhead", positive=True)
            fraction(r.efficiency, f"{where}.efficiency")
            last = i == len(regimes) - 1
            if not last:
                check_number(r.up_to, f"{where}.up_to", positive=True)
            elif r.up_to is not None:
                raise ScenarioError(f"{where}.up_to: the last regime has no upper size, got {r.up_to!r}")
        check_number(self.width, "software.width", positive=True)
        for name in ("launch", "copy_overhead", "staged_overhead"):
            check_number(getattr(self, name), f"software.{name}")
        fraction(self.staged_efficiency, "software.staged_efficiency")

    def blend(self, step_bytes) -> tuple[np.ndarray, np.ndarray]:
        """(overhead s, efficiency) at each bytes-per-step (NumPy; see `regime_blend`)."""
        r = self.regimes
        return regime_blend(
            step_bytes,
            np.log([x.overhead for x in r]),
            -np.log([x.efficiency for x in r]),
            np.log([x.up_to for x in r[:-1]]).reshape(len(r) - 1),
            math.log(self.width),
        )

    def apply(self, scenario: Scenario) -> Scenario:
        """The scenario of one collective with these costs: every flow's overhead plus the blended
        per-step overhead at its bytes, its bytes / efficiency, its start + launch."""
        over, eff = self.blend([f.bytes for f in scenario.flows])
        flows = [
            dataclasses.replace(
                f, bytes=f.bytes / float(e), overhead=f.overhead + float(o), start=f.start + self.launch
            )
            for f, o, e in zip(scenario.flows, over, eff, strict=True)
        ]
        return dataclasses.replace(scenario, flows=tuple(flows))

    def to_dict(self) -> dict:
        """JSON-able, as in a calibration file ("regimes", "width", "launch", ...)."""
        return {
            "regimes": {
                r.name: {"overhead": r.overhead, "efficiency": r.efficiency, "up_to": r.up_to}
                for r in self.regimes
            },
            "width": self.width,
            "launch": self.launch,
            "copy_overhead": self.copy_overhead,
            "staged_overhead": self.staged_overhead,
            "staged_efficiency": self.staged_efficiency,
        }

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], where: str = "software") -> CollectiveCosts:
        """Reads `to_dict`'s structure (extra keys, such as a calibration file's link classes, are ignored)."""
        regimes = values.get("regimes")
        if not isinstance(regimes, Mapping) or not regimes:
            raise ScenarioError(f"{where}.regimes: expected an object of regimes, got {regimes!r}")
        try:
            rs = tuple(
                Regime(
                    name,
                    float(r["overhead"]),
                    float(r["efficiency"]),
                    None if r.get("up_to") is None else float(r["up_to"]),
                )
                for name, r in regimes.items()
            )
            return cls(
                rs,
                float(values.get("width", 0.5)),
                float(values.get("launch", 0.0)),
                float(values.get("copy_overhead", 0.0)),
                float(values.get("staged_overhead", 0.0)),
                float(values.get("staged_efficiency", 1.0)),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ScenarioError(f"{where}: {e}") from None


@dataclasses.dataclass(frozen=True, eq=False)
class Topology:
    """Directed links, node roles and a routing rule; immutable.

    Attributes:
        name: label, copied into scenarios.
        links: directed links; a bidirectional cable is two links with ids "a->b" and "b->a".
        kind: node -> role ("gpu", "cpu", "mem", "switch", "nic", "leaf", "spine", "xcd", "iod", "hbm", ...).
        router: the fabric's routing rule (see `Router`).
        workers: the nodes that run work, in order; None takes the nodes whose role is in WORKER_KINDS,
            in natural order.
        shared: capacities no single link has (a cable's two-way budget, a host staging engine), put
            into every scenario built on this topology (see netsim.SharedResource).
        software: the collective software model (None: collectives cost only their bytes and latencies).
        device: the workers' model ("RTX 4090", "A40"), "" if unknown; traces of another model are refused.
    """

    name: str
    links: tuple[Link, ...]
    kind: dict[str, str]
    router: Router = dataclasses.field(default_factory=ShortestPath)
    workers: tuple[str, ...] | None = None
    shared: tuple[SharedResource, ...] = ()
    software: CollectiveCosts | None = None
    device: str = ""

    def __post_init__(self):
        links = tuple(self.links)
        kind = dict(self.kind)
        ids: set[str] = set()
        for i, link in enumerate(links):
            if not isinstance(link, Link):
                raise ScenarioError(f"topology {self.name!r}: links[{i}] is {link!r}, not a netsim.Link")
            if link.id in ids:
                raise ScenarioError(f"topology {self.name!r}: duplicate link id {link.id!r}")
            ids.add(link.id)
            for end in (link.src, link.dst):
                if end not in kind:
                    raise ScenarioError(f"topology {self.name!r}: link {link.id!r} node {end!r} has no kind")
        if self.workers is None:
            workers = tuple(sorted((n for n, k in kind.items() if k in WORKER_KINDS), key=natural_key))
        else:
            workers = tuple(self.workers)
            unknown = [w for w in workers if w not in kind]
            if unknown:
                raise ScenarioError(f"topology {self.name!r}: workers {unknown[:3]} are not nodes")
        shared = tuple(self.shared)
        names: set[str] = set()
        for i, r in enumerate(shared):
            where = f"topology {self.name!r}: shared[{i}]"
            if not isinstance(r, SharedResource):
                raise ScenarioError(f"{where} is {r!r}, not a netsim.SharedResource")
            if r.id in ids or r.id in names:
                raise ScenarioError(f"{where}.id: duplicate resource id {r.id!r}")
            names.add(r.id)
            check_number(r.capacity, f"{where}.capacity", positive=True)
            unknown = [x for x in (*r.links, *r.via) if x not in ids]
            if not r.links or unknown:
                raise ScenarioError(
                    f"{where} ({r.id!r}): unknown link id(s) {unknown[:3]}"
                    if unknown
                    else f"{where} ({r.id!r}).links: must name at least one link"
                )
        if self.software is not None and not isinstance(self.software, CollectiveCosts):
            raise ScenarioError(
                f"topology {self.name!r}: software is {self.software!r}, not a CollectiveCosts"
            )
        object.__setattr__(self, "links", links)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "workers", workers)
        object.__setattr__(self, "shared", shared)

    # --- structure ------------------------------------------------------------------------------
    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(self.kind)

    @functools.cached_property
    def graph(self) -> LinkGraph:
        """Adjacency over the links, including nodes left without links."""
        graph = LinkGraph(self.links)
        for node in self.kind:
            graph.out.setdefault(node, [])
        return graph

    @functools.cached_property
    def _cache(self) -> dict[tuple[str, str, str], Any]:
        return {}

    @functools.cached_property
    def link(self) -> Mapping[str, Link]:
        """Link id -> Link."""
        return {x.id: x for x in self.links}

    def gpus(self) -> tuple[str, ...]:
        """Endpoint nodes that run work (GPUs, hosts, compute chiplets), in a stable natural order."""
        assert self.workers is not None  # set in __post_init__
        return self.workers

    def nodes_of(self, kind: str) -> tuple[str, ...]:
        """Nodes with role `kind`, in natural order."""
        return tuple(sorted((n for n, k in self.kind.items() if k == kind), key=natural_key))

    # --- routing --------------------------------------------------------------------------------
    def _check_pair(self, src: str, dst: str) -> None:
        for name, node in (("src", src), ("dst", dst)):
            if node not in self.kind:
                raise ScenarioError(f"topology {self.name!r}: unknown {name} node {node!r}")
        if src == dst:
            raise ScenarioError(f"topology {self.name!r}: src and dst are the same node {src!r}")

    def route(self, src: str, dst: str, via: str | None = None) -> Path:
        """Link ids of the path the fabric uses from src to dst (through `via` when given).

        Raises:
            ScenarioError: naming the pair when a node is unknown or dst is unreachable.
        """
        if via is not None:
            return self.route(src, via) + self.route(via, dst)
        key = ("route", src, dst)
        if key not in self._cache:  # the topology is immutable, so its routes are too
            self._check_pair(src, dst)
            self._cache[key] = tuple(self.router.route(self, src, dst))
        return self._cache[key]

    def paths(self, src: str, dst: str) -> list[tuple[float, Path]]:
        """Weighted multipath (the ECMP split); weights sum to 1."""
        key = ("paths", src, dst)
        if key not in self._cache:
            self._check_pair(src, dst)
            self._cache[key] = tuple((float(w), tuple(p)) for w, p in self.router.paths(self, src, dst))
        return list(self._cache[key])

    def flows(self, id: str, src: str, dst: str, bytes: float, **flow_kwargs) -> list[Flow]:
        """One Flow per path of `paths(src, dst)`, with `bytes` split by weight (exactly conserved).

        Ids are `id` for a single path, else f"{id}#k". `flow_kwargs` go to every Flow (start, after, ...).
        """
        paths = self.paths(src, dst)
        if len(paths) == 1:
            return [Flow(id, src, dst, bytes, route=paths[0][1], **flow_kwargs)]
        parts = [bytes * w for w, _ in paths[:-1]]
        parts.append(bytes - sum(parts))  # the last share takes the rounding, so the parts sum to bytes
        return [
            Flow(f"{id}#{k}", src, dst, b, route=p, **flow_kwargs)
            for k, (b, (_, p)) in enumerate(zip(parts, paths, strict=True))
        ]

    def scenario(
        self, flows: Iterable[Flow] = (), tasks: Iterable[Task] = (), name: str | None = None
    ) -> Scenario:
        """A scenario on these links and shared resources; flows without a route take `self.route(src, dst)`."""
        routed = [
            f if f.route is not None else dataclasses.replace(f, route=self.route(f.src, f.dst))
            for f in flows
        ]
        return Scenario(
            self.links, routed, tuple(tasks), name=self.name if name is None else name, shared=self.shared
        )

    # --- failures -------------------------------------------------------------------------------
    def without_links(self, link_ids: Iterable[str]) -> Topology:
        """The same fabric with `link_ids` failed; routes are recomputed over the surviving links.

        A shared resource keeps its surviving links; one left with no link (or, having a `via`, no via
        link) is dropped.
        """
        failed = frozenset([link_ids] if isinstance(link_ids, str) else link_ids)
        unknown = sorted(failed - set(self.link))
        if unknown:
            raise ScenarioError(f"topology {self.name!r}: without_links: unknown link id(s) {unknown[:5]}")
        shared = []
        for r in self.shared:
            links = tuple(x for x in r.links if x not in failed)
            via = tuple(x for x in r.via if x not in failed)
            if links and (via or not r.via):
                shared.append(dataclasses.replace(r, links=links, via=via))
        return dataclasses.replace(
            self,
            links=tuple(x for x in self.links if x.id not in failed),
            router=self.router.without(failed),
            shared=tuple(shared),
        )

    # --- what-ifs -------------------------------------------------------------------------------
    def matching(self, pattern: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(link ids, shared resource ids) that `scaled(pattern, ...)` changes; both empty if none."""
        classes = {x.id: link_class(self, x.id) for x in self.links}
        links, following, named = bandwidth_targets(self.links, self.shared, (pattern,), classes)
        budgets = set(following) | set(named)
        return tuple(links), tuple(r.id for r in self.shared if r.id in budgets)

    def scaled(self, pattern: str, factor: float) -> Topology:
        """The same fabric with the bandwidth of the links matching `pattern` times `factor`.

        A link matches when its id matches `pattern` as a glob ("socket0->socket1", "gpu*->rc*") or its
        class (`link_class`: pcie, socket, numa, memory, nvlink, ...) equals it. A shared resource (a
        cable's two-way budget, a staging engine) is scaled with its links when all of them match, or when
        its own id matches (the rule of the sweep's bandwidth axis too: `netsim.sweep.LinkBandwidth`).

        Raises:
            ScenarioError: when `pattern` matches nothing (naming the link classes), or `factor` is not > 0.
        """
        check_number(factor, f"{pattern}: factor", positive=True)
        links, budgets = self.matching(pattern)
        if not links and not budgets:
            classes = sorted({link_class(self, x.id) for x in self.links})
            raise ScenarioError(
                f"{pattern}={factor:g}: matches no link id, link class or shared resource of {self.name!r} "
                f"(classes: {', '.join(classes)}; ids such as {', '.join(x.id for x in self.links[:3])})"
            )
        hit, scaled = set(links), set(budgets)
        return dataclasses.replace(
            self,
            links=tuple(
                dataclasses.replace(x, bandwidth=x.bandwidth * factor) if x.id in hit else x
                for x in self.links
            ),
            shared=tuple(
                dataclasses.replace(r, capacity=r.capacity * factor) if r.id in scaled else r
                for r in self.shared
            ),
        )

    def unreachable_pairs(self, among: Sequence[str] | None = None) -> list[tuple[str, str]]:
        """Ordered pairs of `among` (default: gpus()) that have no route."""
        nodes = self.gpus() if among is None else tuple(among)
        out = []
        for a in nodes:
            for b in nodes:
                if a != b:
                    try:
                        self.route(a, b)
                    except ScenarioError:
                        out.append((a, b))
        return out

    def __repr__(self) -> str:
        return (
            f"Topology({self.name!r}: {len(self.kind)} nodes, {len(self.links)} links, "
            f"{len(self.gpus())} workers, router={type(self.router).__name__})"
        )


def link_class(topo: Topology, link_id: str) -> str:
    """The class of a link from its end nodes' kinds: pcie, numa, socket, socket-host, memory, nvlink,
    or "a-b".

    Calibration fits one bandwidth and latency per class; a calibration file sets every link of a class.
    A link between sockets is "socket" where devices copy peer to peer, and "socket-host" in a topology
    with P2P off (`PcieRouter.p2p` False): there only host-memory traffic crosses it, and that runs at
    the socket fabric's rate, not at the rate of P2P copies between sockets (m01: docs/heldout.md).
    """
    link = topo.link[link_id]
    ends = frozenset((topo.kind[link.src], topo.kind[link.dst]))
    if ends == {"socket"} or ends == {"cpu"}:  # between sockets (a one-NUMA socket's hub is its cpu node)
        return "socket" if getattr(topo.router, "p2p", True) else "socket-host"
    if "mem" in ends:
        return "memory"
    if ends == {"cpu", "socket"}:
        return "numa"
    if ends == {"gpu"}:
        return "nvlink"
    if ends & {"rc", "switch"}:
        return "pcie"
    return "-".join(sorted(ends))


def cable(a: str, b: str, bandwidth: float, latency: float = 0.0) -> tuple[Link, Link]:
    """The two directed links "a->b" and "b->a" of one bidirectional cable (bandwidth per direction)."""
    return Link(f"{a}->{b}", a, b, bandwidth, latency), Link(f"{b}->{a}", b, a, bandwidth, latency)
