"""Open-loop steady state of a packet network: average packet latency, throughput and per-channel queueing
against offered load (the curve BookSim2 draws), in closed form.

Each node injects `rate` packets per cycle, each `flits` flits long. Channel c carries rate * load[c] packets
per cycle (load: packets per cycle per unit rate, from routes x traffic matrix) and holds each packet for

    holding = service[c] + (overhead + wormhole * max(service[c] - buffer, 0)) * contention[c]

cycles: where packets from different ports compete, allocation loses `overhead` cycles per packet and a
packet longer than a buffer stays strung over channels while its head waits. Of a channel's cycles a share

    efficiency = 1 / (1 + blocking * divergence[c] * turnaround[c] / vcs)

is usable under load (head-of-line blocking at the router's inputs takes the rest, less with more virtual
channels to pass a blocked packet, more the longer a VC stays allocated to a packet: `turnaround`, from its
allocation to its tail's credit back, longer over a slow link and shorter into a terminal than into the
next router), so its utilization is rho = rate * load * holding / efficiency. A packet's
latency, creation to tail ejection, is

    zero-load: base + hops * (pipeline + link) + (flits - 1)   (head through the routers, tail behind it)
      + the tail's credit stalls where a packet is longer than a VC buffer (`credit_stalls`)
    + source queue: the injection channel, a slotted Geo/D/1 queue (Bernoulli arrivals, one flit per cycle),
      which is M/D/1 with S - 1 in place of S, S = the packet's flits and its credit stalls there
      (`injection_time`: a source sends one packet at a time)
    + network queues: at each channel on its path the M/G/1 wait (kernels.queueing) of the packets that
      entered the router by other ports than its own (`contention`), at most `limit` cycles
    + VC waits: at each channel, for packets that entered by the same port as the one ahead (1 - contention,
      which the M/G/1 term leaves out: the channel before spaced them), the wait for a free VC of the
      packet's class (`vc_wait`): Erlang-C over the class's VCs, each held for the packet's holding time,
      the VC's turnaround and the packet's wait at the channel it takes next (its flits sit in the next
      router's buffer, the VC's, until it moves on): a fixed point between occupancies and waits
      (`coupled_waits`, given where each channel's packets go next: `Feeds`; of a wait behind packets of
      the packet's own port only the part past the VCs' idle occupancy holds the VC before: `own_port_wait`);
      those packets come spaced by the channel before, so their wait is scaled by their arrivals'
      variability (`arrival_variability`)

averaged over packets: sum_c load[c] * wait[c] / nodes. The network saturates when its busiest channel
does: saturation = 1 / max_c(load * holding / efficiency), at the injection channel (1 / S), or where
a class's VCs are all held (`vc_saturation`; with the waits downstream in the occupancy, found by
bisection below the others), whichever is lowest. Accepted throughput is the offered rate up to it; past
it, with each source's part of the load (`sources`), the sources that avoid the full channels keep growing,
each source held to its max-min fair share (`accepted_rates`).

Pure and differentiable in every float argument (a class's VC count is whole: `vc_servers` floors it);
callers vmap (netsim.latency).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float, Int

from ._types import pytree, static
from .queueing import mg1_wait, queueing_delay

#: most VCs one class may use on a channel (the Erlang-C recursion runs at most to it: a static loop)
MAX_VCS = 64
#: rounds of the fixed point between VC occupancy and the waits downstream (on 8 x 8 uniform with 8 VCs and
#: 4 x 4 uniform with 2, near saturation, the waits moved by under 0.01 cycles after 8; each round can only
#: lengthen the occupancy, so stopping early errs low)
COUPLING_ROUNDS = 10
#: halvings of the bracket [0, closed-form saturation] that locate the coupled saturation (to 2^-40 of it)
BISECTIONS = 40
#: cycles a wait is capped at where it feeds an occupancy: past it the pool is full anyway, and a finite
#: value keeps infinities (and 0 x inf in the gradients) out of the fixed point
WAIT_CAP = 1e9


@pytree
class Router:
    """A router and its channels, in cycles (one flit per cycle per channel); fields are 0-d arrays (NumPy
    on the host, so that a batch of them stacks without JAX ops), but `vc_bound`, a Python int in the tree's
    structure (a batch's routers share it)."""

    pipeline: Float[ArrayLike, ""]  # cycles a head flit spends in each router it crosses
    link: Float[ArrayLike, ""]  # cycles on each router-to-router channel
    base: Float[ArrayLike, ""]  # cycles outside the hops: injection, ejection and the first router
    blocking: Float[ArrayLike, ""]  # head-of-line loss per unit divergence and turnaround cycle, times vcs
    vcs: Float[ArrayLike, ""]  # virtual channels per channel (BookSim's num_vcs)
    overhead: Float[ArrayLike, ""]  # cycles a channel loses per packet (allocation), on top of its flits
    buffer: Float[ArrayLike, ""]  # flits one virtual channel's buffer holds
    credit: Float[ArrayLike, ""]  # cycles a credit takes back upstream (BookSim's credit_delay)
    wormhole: Float[ArrayLike, ""]  # cycles a channel is held per flit that did not fit the next buffer
    variability: Float[ArrayLike, ""]  # squared coefficient of variation of a channel's holding time
    limit: Float[
        ArrayLike, ""
    ]  # most cycles a packet waits at one channel (buffer drain time; inf: unbounded)
    #: a whole number >= `vcs` (at most MAX_VCS) that the Erlang-C recursion runs to: static, so that it
    #: is a loop of fixed length, as reverse-mode derivatives need, but no longer than the VCs that are there
    vc_bound: int = static(MAX_VCS)


@pytree
class Feeds:
    """Where each channel's packets go next: entry e carries load[e] packets per cycle per unit rate out of
    channel source[e] into channel target[e] (padding entries: load 0). Host arrays, as Router's."""

    source: Int[ArrayLike, " E"]
    target: Int[ArrayLike, " E"]
    load: Float[ArrayLike, " E"]


@pytree
class Curve:
    """One load-latency curve: R offered rates, C channels."""

    latency: Float[Array, " R"]  # cycles, creation to tail ejection; inf at and past saturation
    accepted: Float[Array, " R"]  # packets per node per cycle
    utilization: Float[Array, "R C"]  # of each channel's usable cycles
    wait: Float[Array, "R C"]  # cycles a packet queues at each channel
    source_wait: Float[Array, " R"]  # cycles in the source queue
    zero_load: Float[Array, ""]  # cycles
    saturation: Float[Array, ""]  # packets per node per cycle


def zero_load_latency(router: Router, hops: Float[Array, ""], flits: Float[Array, ""]) -> Float[Array, ""]:
    """Head latency through an idle network plus the tail's serialization behind it (cycles), and the
    tail's credit stalls where a packet is longer than a VC buffer: the path moves a packet's flits no
    faster than its slowest credit loop, a body flit's between routers (`body_loop`)."""
    loop = body_loop(router)
    stalls = credit_stalls(router, flits, loop, loop)
    return router.base + hops * (router.pipeline + router.link) + (flits - 1) + stalls


def credit_stalls(
    router: Router, flits: Float[Array, ""], first: Float[Array, ""], later: Float[Array, ""]
) -> Float[Array, ""]:
    """Cycles a packet's tail loses to credits when the packet is longer than a VC buffer: past each
    buffer-full of flits the next flit waits for the credit of the flit a buffer ahead, `first` cycles
    after that one was sent for the first refill and `later` for the others."""
    refills = jnp.maximum(jnp.ceil(flits / router.buffer) - 1, 0.0)
    short = lambda loop: jnp.maximum(loop - router.buffer, 0.0)
    return jnp.minimum(refills, 1.0) * short(first) + jnp.maximum(refills - 1, 0.0) * short(later)


def injection_time(router: Router, flits: Float[Array, ""]) -> Float[Array, ""]:
    """Cycles a source's injection channel spends on a packet: its flits and their credit stalls. A source
    sends the packet at the front of its queue only (BookSim's TrafficManager), so the next one waits for
    them. The first refill waits for the injection channel's own credits, which the source takes as they
    arrive, without the routers' credit_delay (a 1-cycle channel each way around the first router's
    pipeline, and the cycle that reads the credit); later ones wait for the flits a buffer ahead to leave
    the first router, on the credits of the next (`body_loop`)."""
    return flits + credit_stalls(router, flits, router.pipeline + 3, body_loop(router))


def body_loop(router: Router) -> Float[Array, ""]:
    """A body flit's credit loop between routers: `credit_loop` less the VC allocation that only a head
    flit goes through (a cycle of the pipeline)."""
    return credit_loop(router) - 1


def credit_loop(router: Router) -> Float[Array, ""]:
    """Cycles from a flit's allocation here until its buffer slot's credit is back, as BookSim2's IQRouter
    counts it (src/routers/iq_router.cpp, AddOutputChannel's min_latency): 1 + crossbar + link + routing
    and allocation (together the pipeline) + the credit's channel back + credit delay; 8 between mesh
    routers, 10 over a torus's 2-cycle channels."""
    return 1 + router.pipeline + 2 * router.link + router.credit


def holding_time(
    router: Router, service: Float[Array, " C"], contention: Float[Array, " C"]
) -> Float[Array, " C"]:
    """Cycles a packet holds a channel: its flits, plus the per-packet allocation overhead and, for a
    packet longer than a VC's buffer, the time its tail waits behind a head stalled further on (wormhole):
    both only where packets from different ports meet (contention)."""
    strung = jnp.maximum(service - router.buffer, 0.0)
    return service + (router.overhead + router.wormhole * strung) * contention


def vc_turnaround(router: Router, exits: Float[Array, " C"]) -> Float[Array, " C"]:
    """Cycles an output VC stays allocated to a packet beyond its flits, as BookSim's wait_for_tail_credit
    frees it: its credit loop (`credit_loop`) from the tail's allocation here to its credit back. A channel
    into a terminal (share `exits` of its packets leave the network at its end) has no next router: its
    1-cycle channel and credit (BookSim's ejection channels) after this router's pipeline."""
    into_router = credit_loop(router)
    into_terminal = router.pipeline + 2.0
    return exits * into_terminal + (1 - exits) * into_router


def channel_efficiency(
    router: Router, divergence: Float[Array, " C"], exits: Float[Array, " C"]
) -> Float[Array, " C"]:
    """Usable share of each channel's cycles under load: what head-of-line blocking leaves. A packet blocked
    at an input holds one of its virtual channels for a turnaround; the others pass it, so the loss grows
    with the turnaround and falls as 1 / vcs."""
    return 1 / (1 + router.blocking * divergence * vc_turnaround(router, exits) / router.vcs)


def channel_time(
    router: Router,
    service: Float[Array, " C"],
    contention: Float[Array, " C"],
    divergence: Float[Array, " C"],
    exits: Float[Array, " C"],
) -> Float[Array, " C"]:
    """Cycles of each channel's capacity a packet uses: its holding time over the usable share of the
    channel's cycles (`channel_efficiency`); a channel is full at one packet per that many cycles."""
    return holding_time(router, service, contention) / channel_efficiency(router, divergence, exits)


def vc_servers(router: Router, vc_split: Float[Array, " C"]) -> Float[Array, " C"]:
    """VCs a packet's class may use on each channel: the router's VCs divided among `vc_split` classes
    (BookSim's dateline classes on a torus take half each), whole, at least 1."""
    return jnp.maximum(jnp.floor(router.vcs / vc_split), 1.0)


def erlang_bound(vcs: int) -> int:
    """`Router.vc_bound` for routers of up to `vcs` VCs: the next power of two (few executables)."""
    return 1 << max(int(vcs) - 1, 0).bit_length()


def erlang_c(
    servers: Float[Array, "*s"], offered: Float[Array, "*s"], bound: int = MAX_VCS
) -> Float[Array, "*s"]:
    """Chance that an arrival waits in an M/M/c queue: c = `servers` (whole, <= `bound`), offered load
    a = arrival rate x holding time < c. Erlang B by its recursion B_k = a B_(k-1) / (k + a B_(k-1)), then
    C = B / (1 - rho + rho B) with rho = a / c."""
    step = lambda k, b: jnp.where(k <= servers, offered * b / (k + offered * b), b)
    blocked = jax.lax.fori_loop(1, bound + 1, step, jnp.ones_like(offered))
    rho = offered / servers
    return blocked / (1 - rho + rho * blocked)


def vc_occupancy(
    router: Router, service: Float[Array, " C"], contention: Float[Array, " C"], exits: Float[Array, " C"]
) -> Float[Array, " C"]:
    """Cycles a packet keeps an output VC: its holding time on the channel, then the VC's turnaround."""
    return holding_time(router, service, contention) + vc_turnaround(router, exits)


def vc_wait(
    rate: Float[Array, " R"],
    load: Float[Array, " C"],
    class_share: Float[Array, "K C"],
    occupancy: Float[Array, "*R C"],
    servers: Float[Array, " C"],
    arrivals: Float[ArrayLike, "*R C"] | float = 1.0,
    bound: int = MAX_VCS,
) -> Float[Array, "R K C"]:
    """Cycles a packet of each class waits for a free VC of its class on each channel: the M/D/c wait, taken
    as half the M/M/c (Erlang-C) wait C(c, a) x occupancy / (c - a), as M/D/1 is half M/M/1, times the
    arrivals' squared coefficient of variation (Allen-Cunneen; 1: random arrivals); a = rate x load x class
    share x occupancy, the class's VCs held on average (occupancy and arrivals per channel, or per rate and
    channel). inf where a >= c. `bound`: at least the most servers (`erlang_c`)."""
    occupancy = jnp.broadcast_to(occupancy, (rate.shape[0], load.shape[0]))[:, None, :]
    offered = rate[:, None, None] * load[None, None, :] * class_share[None] * occupancy
    servers = jnp.broadcast_to(servers, offered.shape)
    occupancy = jnp.broadcast_to(occupancy, offered.shape)
    free = offered < servers
    safe = jnp.where(free, offered, 0.0)
    wait = 0.5 * erlang_c(servers, safe, bound) * occupancy / (servers - safe)
    return jnp.where(
        free, wait * jnp.broadcast_to(arrivals, (rate.shape[0], load.shape[0]))[:, None, :], jnp.inf
    )


def vc_saturation(
    load: Float[Array, " C"],
    class_share: Float[Array, "K C"],
    occupancy: Float[Array, " C"],
    servers: Float[Array, " C"],
) -> Float[Array, ""]:
    """Packets per node per cycle at which some class's VCs on some channel are all held (inf: none used)."""
    held = load[None, :] * class_share * occupancy[None, :]  # VCs held per unit rate
    used = held > 0
    return jnp.min(jnp.where(used, servers[None, :] / jnp.where(used, held, 1.0), jnp.inf))


def _per_load(x: Float[Array, "R C"], load: Float[Array, " C"]) -> Float[Array, "R C"]:
    """x / load on each channel, 0 on idle ones (the double `where` keeps 0 / 0 out of the gradients)."""
    used = (load > 0)[None, :]
    return jnp.where(used, x / jnp.where(used, load[None, :], 1.0), 0.0)


def downstream_wait(wait: Float[Array, "R C"], feeds: Feeds, load: Float[Array, " C"]) -> Float[Array, "R C"]:
    """Cycles a channel's packets wait, on average, at the channel they take next: all that time they keep
    this channel's VC, whose buffer (in the next router) holds their flits. Waits are capped at WAIT_CAP."""
    carried = feeds.load[None, :] * jnp.minimum(wait, WAIT_CAP)[:, feeds.target]
    return _per_load(jnp.zeros_like(wait).at[:, feeds.source].add(carried), load)


def arrival_variability(
    rate: Float[Array, " R"],
    load: Float[Array, " C"],
    service: Float[Array, " C"],
    rho: Float[Array, "R C"],
    feeds: Feeds,
) -> Float[Array, "R C"]:
    """Squared coefficient of variation of the packets arriving at each channel by one port: they left the
    channel before it (or the node's injection channel), a queue with fixed service times fed at random,
    whose departures have 1 - rho^2 (Whitt's linking equation with deterministic service): the busier
    that channel, the more evenly it spaces them. Averaged over where the channel's packets come from;
    the injection channel's utilization taken as rate x the packet's time here."""
    busy = jnp.minimum(rho, 1.0)
    fed = jnp.zeros_like(load).at[feeds.target].add(feeds.load)
    upstream = jnp.zeros_like(rho).at[:, feeds.target].add(feeds.load[None, :] * busy[:, feeds.source])
    injected = jnp.maximum(load - fed, 0.0)[None, :] * jnp.minimum(rate[:, None] * service[None, :], 1.0)
    return 1 - _per_load(upstream + injected, load) ** 2


def coupled_waits(
    rate: Float[Array, " R"],
    load: Float[Array, " C"],
    service: Float[Array, " C"],
    contention: Float[Array, " C"],
    divergence: Float[Array, " C"],
    exits: Float[Array, " C"],
    class_share: Float[Array, "K C"],
    vc_split: Float[Array, " C"],
    router: Router,
    feeds: Feeds | None,
) -> tuple[Float[Array, "R C"], Float[Array, "R C"], Float[Array, "R C"]]:
    """(wait, VC occupancy, utilization) of every channel at each rate. The wait is the M/G/1 one of the
    packets from other ports plus, for those from the same port, the wait for a VC of their class; a VC is
    held for the packet's holding time and turnaround and, with `feeds`, its wait downstream (`own_port_wait`),
    which itself depends on the VCs there: COUPLING_ROUNDS rounds of that fixed point, from the idle occupancy
    up."""
    holding = holding_time(router, service, contention)
    rho = rate[:, None] * (load * channel_time(router, service, contention, divergence, exits))[None, :]
    full = lambda x: jnp.broadcast_to(x, rho.shape)  # the queueing formulas take equal shapes
    contended = queueing_delay(
        rho, full((holding * contention)[None, :]), full(router.variability), full(router.limit)
    )
    # packets behind one from their own port wait for a VC of their class, not for the channel
    same_port = (class_share * (1 - contention)[None, :])[None]  # keep 0 * inf out where none waits
    servers = vc_servers(router, vc_split)
    # packets from one port come spaced by the channel before (random arrivals without feeds to say which)
    spaced = 1.0 if feeds is None else arrival_variability(rate, load, service, rho, feeds)

    idle = full(vc_occupancy(router, service, contention, exits)[None, :])

    def waits(occupancy, upstream=False):
        by_class = vc_wait(rate, load, class_share, occupancy, servers, spaced, router.vc_bound)
        if upstream:  # the part of the VC wait that holds the VC before it: `own_port_wait`
            by_class = own_port_wait(by_class, occupancy - idle, contention)
        return contended + jnp.sum(jnp.where(same_port > 0, same_port * by_class, 0.0), axis=1)

    occupancy = idle
    if feeds is not None:
        step = lambda _, occ: idle + downstream_wait(waits(occ, upstream=True), feeds, load)
        occupancy = jax.lax.fori_loop(0, COUPLING_ROUNDS, step, idle)
    return waits(occupancy), occupancy, rho


def own_port_wait(
    wait: Float[Array, "R K C"], held_longer: Float[Array, "R C"], contention: Float[Array, " C"]
) -> Float[Array, "R K C"]:
    """The VC wait that lengthens the occupancy of the VC a packet came by. Behind a packet from its own port,
    a packet waits for VCs that its port's earlier packets hold for a share 1 - contention of the time; those
    left the VCs of the channel before only as they got these, so that channel's VC pool already spaces them
    by these VCs' idle occupancy, and its packets wait on them no longer than the VCs are held past it (their
    wait downstream, `held_longer`). Counting their whole queue there too would charge the same wait to both
    pools, and on a chain of channels fed one by one (a tornado or neighbor permutation) compound it: with 2
    VCs the 4x4 mesh tornado saturated at 0.083 packets per node per cycle, half BookSim's 0.163, which is its
    VCs' idle limit. The VCs other ports' packets hold are a queue as before. The packet's latency keeps the
    whole wait (it waits once, here or for the VC before). Finite (waits at most WAIT_CAP)."""
    wait = jnp.minimum(wait, WAIT_CAP)
    own = jnp.minimum(wait, held_longer[:, None, :])
    return own + contention[None, None, :] * (wait - own)


def vc_fullness(rate: Float[Array, ""], args: tuple) -> Float[Array, ""]:
    """The fullest VC class's share of its VCs held at one rate, with the waits downstream (`args`: those of
    `coupled_waits` after rate)."""
    load, _, _, _, _, class_share, vc_split, router, _ = args
    occupancy = coupled_waits(rate[None], *args)[1]
    used = (class_share > 0) & (load > 0)[None, :]
    held = rate * load[None, :] * class_share * occupancy
    return jnp.max(jnp.where(used, held / vc_servers(router, vc_split)[None, :], 0.0))


@jax.custom_jvp
def coupled_saturation(bound: Float[Array, ""], args: tuple) -> Float[Array, ""]:
    """The rate in (0, bound] at which some class's VCs are all held (`vc_fullness` reaches 1), by bisection;
    `bound` where none fill below it. Its derivative is the implicit one, -(d fullness / d args) / (d
    fullness / d rate) at the root, traced only when differentiated."""

    def halve(_, bracket):
        low, high = bracket
        mid = 0.5 * (low + high)
        fits = vc_fullness(mid, args) < 1
        return jnp.where(fits, mid, low), jnp.where(fits, high, mid)

    low, high = jax.lax.fori_loop(0, BISECTIONS, halve, (0.0 * bound, bound))
    return jnp.where(high < bound, low, bound)


@coupled_saturation.defjvp
def _coupled_saturation_jvp(primals, tangents):
    bound, args = primals
    bound_dot, args_dot = tangents
    root = coupled_saturation(bound, args)
    binds = root < bound
    fullness_dot = jax.jvp(lambda a: vc_fullness(root, a), (args,), (args_dot,))[1]
    slope = jax.grad(vc_fullness)(root, args)
    slope = jnp.where(binds & (slope > 0), slope, 1.0)
    return root, jnp.where(binds, -fullness_dot / slope, bound_dot)


def saturation_rate(
    router: Router,
    load: Float[Array, " C"],
    service: Float[Array, " C"],
    contention: Float[Array, " C"],
    divergence: Float[Array, " C"],
    exits: Float[Array, " C"],
    class_share: Float[Array, "K C"],
    vc_split: Float[Array, " C"],
    injection: Float[Array, ""],
    feeds: Feeds | None = None,
) -> Float[Array, ""]:
    """Packets per node per cycle at which the busiest channel, the injection channel (`injection` cycles
    a packet: `injection_time`) or some class's VCs are full. With `feeds`, the VCs' occupancy grows with
    the waits downstream, so their pool fills below those closed-form bounds (`coupled_saturation`)."""
    busiest = jnp.max(load * channel_time(router, service, contention, divergence, exits))
    servers = vc_servers(router, vc_split)
    pool = vc_saturation(load, class_share, vc_occupancy(router, service, contention, exits), servers)
    bound = jnp.minimum(jnp.minimum(1 / busiest, 1 / injection), pool)
    if feeds is None:
        return bound
    args = (load, service, contention, divergence, exits, class_share, vc_split, router, feeds)
    return coupled_saturation(bound, args)


def accepted_rates(
    rate: Float[Array, " R"],
    sources: Float[Array, "S C"],
    per_packet: Float[Array, " C"],
    saturation: Float[Array, ""],
    injection: Float[Array, ""],
) -> Float[Array, " R"]:
    """Accepted packets per node per cycle at each offered rate. Below saturation every source gets what it
    offers. Past it only the sources whose packets cross a full channel are held back, each to its max-min
    fair share: a source's packets leave its queue in order, so all of its traffic moves at one rate, and
    sources that avoid the full channels keep growing (on a permutation most do; under uniform traffic
    every source crosses the busiest channels, and the network accepts the saturation rate).

    sources[s, c]: source s's packets per cycle on channel c per unit of its rate (all-zero rows:
    padding); per_packet: a channel's utilization per packet per cycle (holding / efficiency). Channels
    are scaled so that with every source at one rate the first fills at `saturation` (the VC pools and
    head-of-line blocking included), and each source is also held to its injection channel (1 / injection,
    the channel's cycles per packet: `injection_time`).
    Progressive filling: every unfrozen source grows until a channel fills or it reaches its cap, then
    the sources crossing full channels freeze; at most one round per source. Not differentiated (past
    saturation the latency is inf).
    """
    sources, per_packet, saturation, injection = jax.lax.stop_gradient(
        (sources, per_packet, saturation, injection)
    )
    usage = sources * per_packet[None, :]
    real = jnp.sum(sources, axis=1) > 0
    # first channel full at `saturation` with every source at one rate
    usage = usage / jnp.maximum(saturation * jnp.max(jnp.sum(usage, axis=0)), jnp.finfo(usage.dtype).tiny)
    one = lambda mask: mask.astype(usage.dtype)

    # every pass over sources x channels is a matrix-vector product (one BLAS call each, where masked
    # sums and `any`s over the matrix run element by element)
    def fill(offered):
        cap = jnp.where(real, jnp.minimum(offered, 1 / injection), 0.0)

        def more(state):
            _, _, frozen, rounds = state
            return ~jnp.all(frozen) & (rounds <= sources.shape[0])

        def round_(state):
            x, used, frozen, rounds = state
            growing = one(~frozen) @ usage
            room = 1 - used
            step = jnp.min(jnp.where(growing > 0, room / jnp.where(growing > 0, growing, 1.0), jnp.inf))
            step = jnp.maximum(jnp.minimum(step, jnp.min(jnp.where(frozen, jnp.inf, cap - x))), 0.0)
            x = jnp.where(frozen, x, x + step)
            used = x @ usage
            full = (used >= 1 - 1e-12) & (growing > 0)
            # usage >= 0, so a source crosses a full channel where its usage of the full ones sums above 0
            frozen = frozen | (usage @ one(full) > 0) | (x >= cap * (1 - 1e-12))
            return x, used, frozen, rounds + 1

        # below saturation (where the caller keeps the offered rate) no rounds: a batch's loop runs as
        # long as its longest member's
        start = (
            jnp.zeros_like(cap),
            jnp.zeros(usage.shape[1], usage.dtype),
            ~real | (offered < saturation),
            0,
        )
        x = jax.lax.while_loop(more, round_, start)[0]
        return jnp.sum(x) / jnp.maximum(jnp.sum(one(real)), 1.0)

    return jnp.where(rate < saturation, rate, jax.vmap(fill)(rate))


def load_latency(
    rate: Float[Array, " R"],
    load: Float[Array, " C"],
    service: Float[Array, " C"],
    contention: Float[Array, " C"],
    divergence: Float[Array, " C"],
    exits: Float[Array, " C"],
    class_share: Float[Array, "K C"],
    vc_split: Float[Array, " C"],
    nodes: Float[Array, ""],
    hops: Float[Array, ""],
    flits: Float[Array, ""],
    router: Router,
    feeds: Feeds | None = None,
    sources: Float[Array, "S C"] | None = None,
) -> Curve:
    """The steady state at each offered rate.

    Args:
        rate: offered packets per node per cycle.
        load: packets per cycle on each channel per unit rate (ejection channels included).
        service: cycles a packet holds each channel (its flits on a one-flit-per-cycle channel).
        contention: the chance that two packets on the channel entered its router by different ports
            (1 - sum over ports of the port's share squared): packets that arrive one behind the other on
            one port were already spaced by the channel before, and never wait for each other.
        divergence: the chance that a packet on the channel shares its input port with packets bound for other
            outputs (sum over ports of the port's share of the channel times the share of the port's packets
            that leave by another output, netsim.latency weighting each output by how busy it is): those
            block it at the head of the queue.
        exits: the share of the channel's packets that leave the network at its end (1 on ejection
            channels, 0 between routers).
        class_share: the share of the channel's packets in each of K VC classes (a torus's dateline
            classes; one class with share 1 elsewhere; padding classes 0).
        vc_split: the number of classes the channel's VCs are divided among (a class uses vcs / vc_split).
        nodes: injecting nodes N: sum(load) / N is the mean number of channels a packet queues at.
        hops: router-to-router channels a packet crosses, averaged over packets.
        flits: flits per packet (its serialization behind the head, its time on the injection channel and,
            past a VC buffer's length, its credit stalls).
        router: pipeline, channel and fitted queueing coefficients.
        feeds: where each channel's packets go next (a packet keeps its VC while it waits there); None: no
            channel's VC waits on another's.
        sources: [S, C] each source's share of the load (`accepted_rates`): past saturation the sources that
            avoid the full channels keep growing. None: every source held to the saturation rate.
    """
    args = (load, service, contention, divergence, exits, class_share, vc_split)
    wait, _, rho = coupled_waits(rate, *args, router, feeds)
    used = (load > 0)[None, :]  # idle channels (padding) may wait inf: keep 0 * inf out of the sum
    network = jnp.sum(load[None, :] * jnp.where(used, wait, 0.0), axis=1)
    # Bernoulli arrivals, fixed packets, one flit per cycle: the slotted Geo/D/1 wait, M/D/1 with S - 1
    injection = injection_time(router, flits)
    source = mg1_wait(rate * injection, jnp.broadcast_to(injection - 1, rate.shape), jnp.zeros_like(rate))
    saturation = saturation_rate(router, *args, injection, feeds)
    zero = zero_load_latency(router, hops, flits)
    latency = jnp.where(rate < saturation, zero + source + network / nodes, jnp.inf)
    accepted = jnp.minimum(rate, saturation)
    if sources is not None:
        per_packet = channel_time(router, service, contention, divergence, exits)
        accepted = accepted_rates(rate, sources, per_packet, saturation, injection)
    return Curve(
        latency=latency,
        accepted=accepted,
        utilization=rho,
        wait=wait,
        source_wait=source,
        zero_load=zero,
        saturation=saturation,
    )
