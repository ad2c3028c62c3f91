"""Load-latency curves of mesh/torus shapes or netsim topologies: the host side of kernels.latency.

`Load` is what the kernel needs of a (shape, traffic) pair; `curves` evaluates many (load, packet size,
router) triples at once in one jitted call of `netsim.vmap_latency` (channel counts padded to the largest
with idle channels).
"""

from __future__ import annotations

import dataclasses
import functools

import equinox as eqx
import jax
import numpy as np

from .._errors import ScenarioError
from .._runner import vmap_latency
from ..kernels.latency import Curve, Feeds, Router
from ._shapes import Cube, parse_shape
from ._traffic import traffic_matrix


@dataclasses.dataclass(frozen=True)
class Load:
    """Channel loads of one traffic pattern on one shape, per unit injection rate (packets/node/cycle).

    load[c] for c < channels are router-to-router channels, then one ejection channel per node.
    """

    name: str
    load: np.ndarray  # packets per cycle per unit rate
    contention: np.ndarray  # 1 - sum over input ports of their share squared (see kernels.latency)
    divergence: np.ndarray  # head-of-line exposure at the channel's inputs (see port_mix, kernels.latency)
    exits: np.ndarray  # share of the channel's packets that leave the network at its end
    class_share: np.ndarray  # [classes, channels]: share of each channel's packets in each VC class
    vc_split: np.ndarray  # classes each channel's VCs are divided among (a class uses vcs / vc_split)
    nodes: int
    hops: float  # router-to-router channels per packet, averaged
    channel_names: tuple[str, ...]
    feeds: Feeds  # where each channel's packets go next
    #: cycles per router-to-router channel when the shape fixes it (None: the router's)
    link: float | None = None
    #: time a packet holds each channel, when not its flits (links of unequal speed)
    service: np.ndarray | None = None
    #: [sources, channels]: each source's part of load (rows: the nodes, each injecting the rate); None:
    #: one source (past saturation all traffic is held to the saturation rate)
    sources: np.ndarray | None = None


def cube_load(cube: Cube, pattern: str, **pattern_args) -> Load:
    """The loads of a BookSim pattern on a k-ary n-cube with dimension-order routing."""
    traffic = traffic_matrix(pattern, cube.k, cube.n, **pattern_args)
    load, inputs, wrapping, sources = cube.channel_load(traffic, by_source=True)
    feeds = channel_feeds(inputs.sum(axis=2), cube.upstream())
    names = tuple(cube.channel_name(c) for c in range(cube.channels)) + tuple(
        f"eject{i}" for i in range(cube.nodes)
    )
    router = np.concatenate([np.arange(cube.channels) // (2 * cube.n), np.arange(cube.nodes)])
    # a packet waits at a router's input in a VC of the class it had on the channel it came by: from the
    # injection port any VC, on a torus one dateline class, half of them
    contend, diverge = port_mix(load, inputs, router, crowding=[1, cube.vc_classes, cube.vc_classes])
    wrapped = np.where(load > 0, wrapping / np.where(load > 0, load, 1.0), 0.0)[: cube.channels]
    exits = np.concatenate([np.zeros(cube.channels), np.ones(cube.nodes)])
    # the same split for the wait for a free VC (kernels.latency.vc_wait): on a torus the wrapping packets
    # are one class, the rest the other, each on half the VCs; ejection channels and meshes: one class
    split = np.ones(load.size)
    split[: cube.channels] = cube.vc_classes
    share = np.zeros((cube.vc_classes, load.size))
    share[-1] = load > 0  # one class: all of a mesh, a torus's ejection channels
    if cube.torus:
        share[0, : cube.channels], share[1, : cube.channels] = wrapped, 1 - wrapped
    share[:, load == 0] = 0.0
    return Load(
        f"{cube.name} {pattern}",
        load,
        contend,
        diverge,
        exits,
        share,
        split,
        cube.nodes,
        cube.mean_hops(traffic),
        names,
        feeds,
        cube.link_cycles,
        sources=sources,
    )


def channel_feeds(inputs: np.ndarray, upstream: np.ndarray) -> Feeds:
    """Feeds from inputs[c, p] (the load entering channel c's router by port p) and upstream[c, p] (the
    channel that port p of c's router is the end of; -1: none, as a node's own injection)."""
    target, port = np.nonzero((inputs > 0) & (upstream >= 0))
    return Feeds(upstream[target, port], target, inputs[target, port])


def stack_feeds(loads: list[Load]) -> Feeds:
    """The loads' feeds stacked for one batched call, padded to the most entries (at least 1) with entries
    that carry nothing."""
    entries = max(1, max(x.feeds.load.size for x in loads))
    pad = lambda *a: np.stack([np.pad(x, (0, entries - x.size)) for x in a])
    return jax.tree.map(pad, *(x.feeds for x in loads))


def stack_sources(loads: list[Load], width: int) -> np.ndarray:
    """The loads' sources ([B, S, width]: each source's part of every channel's load) for one batched call,
    padded with sources that send nothing; a load without them is one source, all of its load."""
    own = [x.load[None, :] if x.sources is None else x.sources for x in loads]
    out = np.zeros((len(loads), max(o.shape[0] for o in own), width))
    for i, o in enumerate(own):
        out[i, : o.shape[0], : o.shape[1]] = o
    return out


def port_mix(
    load: np.ndarray,
    inputs: np.ndarray,
    router: np.ndarray,
    random_port: int | None = None,
    crowding: list[float] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(contention, divergence) of each channel from inputs[c, p, a], the load entering channel c's router
    (router[c]) by port p in input VC class a (2-D inputs: one class): contention 1 - sum_p share_p**2;
    divergence sum_p,a share_pa * crowding[a] * (the part of port p's packets at that router that are in
    class a and leave by another output o, each weighted by how busy o is at saturation, load[o] /
    max(load)). A packet bound for a lightly used output rarely waits at the head of the queue, so it
    rarely blocks the packets behind it, and it blocks only those that share its VCs: the packets of its
    class, on 1 / crowding[a] of the input's VCs (1: all). Idle channels get 0. random_port: a port whose
    packets arrive at random (a node serving many requesters, not smoothed by a channel before): its
    packets contend with each other too, so its share leaves the sum of squares."""
    inputs = inputs if inputs.ndim == 3 else inputs[..., None]
    crowding = np.ones(inputs.shape[2]) if crowding is None else np.asarray(crowding, dtype=float)
    used = load > 0
    share = np.where(used[:, None, None], inputs / np.where(used, load, 1.0)[:, None, None], 0.0)
    busy = load / max(load.max(), np.finfo(float).tiny)  # no traffic at all: every channel idle
    port_total = np.zeros((router.max() + 1, inputs.shape[1]))
    np.add.at(port_total, router, inputs.sum(axis=2))
    # per router, port and class: each output's part weighted by that output's busyness
    busy_total = np.zeros((router.max() + 1, *inputs.shape[1:]))
    np.add.at(busy_total, router, inputs * busy[:, None, None])
    through = port_total[router][..., None]
    elsewhere = (busy_total[router] - inputs * busy[:, None, None]) / np.where(through > 0, through, 1.0)
    port_share = share.sum(axis=2)
    smooth = port_share if random_port is None else np.delete(port_share, random_port, axis=1)
    return np.where(used, 1 - (smooth**2).sum(axis=1), 0.0), np.where(
        used, (share * elsewhere * crowding).sum(axis=(1, 2)), 0.0
    )


def shape_load(topology: str, pattern: str, **pattern_args) -> Load:
    """`mesh:KxK` / `torus:KxK` and a pattern name."""
    return cube_load(parse_shape(topology), pattern, **pattern_args)


def check_rates(rates, *, where: str = "rates", table: bool = False) -> np.ndarray:
    """Offered rates as a float array: R rates, or with `table` also B x R (a row per curve); all finite
    and > 0."""
    try:
        r = np.asarray(rates, dtype=float)
    except (TypeError, ValueError):  # ragged, or not numbers
        r = None
    if (
        r is None
        or isinstance(rates, str | bytes)  # "0.1" reads as a number
        or np.asarray(rates).dtype.kind in "USb"
        or r.ndim not in ((1, 2) if table else (1,))
    ):
        shape = "a 1-D list of numbers" + (" (or 2-D, a row per curve)" if table else "")
        raise ScenarioError(f"{where}: must be {shape}, got {rates!r}")
    if r.size == 0 or not np.all(np.isfinite(r)) or np.any(r <= 0):
        raise ScenarioError(
            f"{where}: must be finite numbers > 0 (packets per node per cycle), got {np.asarray(rates).tolist()}"
        )
    return r


@functools.cache
def _batched():
    return jax.jit(vmap_latency)


def curves(loads: list[Load], flits: list[float], routers: list[Router], rates: np.ndarray) -> Curve:
    """B curves in one call: loads[b] with packets of flits[b] flits through routers[b], at `rates`: R rates
    shared by every curve, or B x R, a row per curve.

    Returns a Curve whose fields carry a leading batch axis B (channel axis padded to the largest load).
    """
    if not (len(loads) == len(flits) == len(routers)) or not loads:
        raise ScenarioError(
            f"curves: need as many loads, packet sizes and routers, got {len(loads)}, {len(flits)}, {len(routers)}"
        )
    if any(f < 1 for f in flits):
        raise ScenarioError(f"packet size: must be >= 1 flit, got {min(flits)}")
    rates = check_rates(rates, table=True)
    if rates.ndim == 2 and rates.shape[0] != len(loads):
        raise ScenarioError(f"rates: one row per curve, got {rates.shape[0]} rows for {len(loads)} curves")
    width = max(x.load.size for x in loads)
    load, contend, diverge, exits = (np.zeros((len(loads), width)) for _ in range(4))
    share = np.zeros((len(loads), max(x.class_share.shape[0] for x in loads), width))  # padding: no class
    split = np.ones((len(loads), width))
    flits = np.asarray(flits, dtype=float)
    service = np.repeat(flits[:, None], width, axis=1)  # a packet holds a channel for its flits
    for i, x in enumerate(loads):
        load[i, : x.load.size] = x.load
        if x.service is not None:
            service[i, : x.load.size] = x.service
        contend[i, : x.load.size] = x.contention
        diverge[i, : x.load.size] = x.divergence
        exits[i, : x.load.size] = x.exits
        share[i, : x.class_share.shape[0], : x.load.size] = x.class_share
        split[i, : x.load.size] = x.vc_split
    # the shape's cycles per router-to-router channel where it fixes them, else the router's; one VC bound
    # (a static loop length) for the batch: its largest
    bound = max(r.vc_bound for r in routers)
    routers = [
        dataclasses.replace(
            r if x.link is None else eqx.tree_at(lambda t: t.link, r, np.float64(x.link)), vc_bound=bound
        )
        for r, x in zip(routers, loads, strict=True)
    ]
    # stacked on the host: one transfer into the one compiled call, no eager JAX ops to compile
    stacked = jax.tree.map(lambda *a: np.stack([np.asarray(x, dtype=np.float64) for x in a]), *routers)
    return _batched()(
        rates,  # shared by every curve (R), or a row per curve (B x R)
        load,
        service,
        contend,
        diverge,
        exits,
        share,
        split,
        np.array([float(x.nodes) for x in loads]),
        np.array([x.hops for x in loads]),
        flits,
        stacked,
        stack_feeds(loads),
        stack_sources(loads, width),
    )
