"""Open-loop steady state of a packet network: average packet latency, throughput and per-channel queueing
against offered load (the curve BookSim2 draws), in closed form.

Each node injects `rate` packets per cycle, each `flits` flits long. Channel c carries rate * load[c] packets
per cycle (load: packets per cycle per unit rate, from routes x traffic matrix) and holds each packet for

    holding = service[c] * max(1, round trip / buffer)
              + (overhead + wormhole * max(service[c] - buffer, 0)) * contention[c]

cycles: a credit loop longer than a VC buffer throttles a packet's stream; where packets from different
ports compete, allocation loses `overhead` cycles per packet and a packet longer than a buffer stays strung
over channels while its head waits. Of a channel's cycles a share

    efficiency = 1 / (1 + blocking * divergence[c] * turnaround[c] / vcs)

is usable under load (head-of-line blocking at the router's inputs takes the rest, less with more virtual
channels to pass a blocked packet, more the longer a VC stays allocated to a packet: `turnaround`, from its
allocation to its tail's credit back, longer over a slow link and shorter into a terminal than into the
next router), so its utilization is rho = rate * load * holding / efficiency. A packet's
latency, creation to tail ejection, is

    zero-load: base + hops * (pipeline + link) + (flits - 1)   (head through the routers, tail behind it)
    + source queue: the injection channel, a slotted Geo/D/1 queue (Bernoulli arrivals, one flit per cycle),
      which is M/D/1 with flits - 1 in place of flits
    + network queues: at each channel on its path the M/G/1 wait (kernels.queueing) of the packets that
      entered the router by other ports than its own (`contention`), at most `limit` cycles
    + VC waits: at each channel, for packets that entered by the same port as the one ahead (1 - contention,
      which the M/G/1 term leaves out: the channel before spaced them), the wait for a free VC of the
      packet's class (`vc_wait`): Erlang-C over the class's VCs, each held for the packet's holding time
      plus the VC's turnaround

averaged over packets: sum_c load[c] * wait[c] / nodes. The network saturates when its busiest channel
does: saturation = 1 / max_c(load * holding / efficiency), at the injection channel (1 / flits), or where
a class's VCs are all held (`vc_saturation`), whichever is lowest; accepted throughput is the offered rate
up to it.

Pure and differentiable in every float argument (a class's VC count is whole: `vc_servers` floors it);
callers vmap (netsim.latency).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from .queueing import mg1_wait, queueing_delay

#: most VCs one class may use on a channel (the Erlang-C recursion runs to it: a static loop)
MAX_VCS = 64


class Router(eqx.Module):
    """A router and its channels, in cycles (one flit per cycle per channel); fields are 0-d arrays (NumPy
    on the host, so that a batch of them stacks without JAX ops)."""

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


class Curve(eqx.Module):
    """One load-latency curve: R offered rates, C channels."""

    latency: Float[Array, " R"]  # cycles, creation to tail ejection; inf at and past saturation
    accepted: Float[Array, " R"]  # packets per node per cycle
    utilization: Float[Array, "R C"]  # of each channel's usable cycles
    wait: Float[Array, "R C"]  # cycles a packet queues at each channel
    source_wait: Float[Array, " R"]  # cycles in the source queue
    zero_load: Float[Array, ""]  # cycles
    saturation: Float[Array, ""]  # packets per node per cycle


def zero_load_latency(router: Router, hops: Float[Array, ""], flits: Float[Array, ""]) -> Float[Array, ""]:
    """Head latency through an idle network plus the tail's serialization behind it (cycles)."""
    return router.base + hops * (router.pipeline + router.link) + (flits - 1)


def holding_time(
    router: Router, service: Float[Array, " C"], contention: Float[Array, " C"]
) -> Float[Array, " C"]:
    """Cycles a packet holds a channel: its flits, slowed to buffer / round trip flits per cycle when the
    credit loop (flit over, through the next router, credit back) is longer than a VC's buffer; the
    per-packet allocation overhead and, for a packet longer than the buffer, the time its tail waits behind
    a head stalled further on (wormhole): both only where packets from different ports meet (contention)."""
    # flit over the link, allocated and sent on (the pipeline less its traversal cycle), credit back
    round_trip = 2 * router.link + (router.pipeline - 1) + router.credit
    streamed = service * jnp.maximum(1.0, round_trip / router.buffer)
    strung = jnp.maximum(service - router.buffer, 0.0)
    return streamed + (router.overhead + router.wormhole * strung) * contention


def vc_turnaround(router: Router, exits: Float[Array, " C"]) -> Float[Array, " C"]:
    """Cycles an output VC stays allocated to a packet beyond its flits, as BookSim's wait_for_tail_credit
    frees it: switch allocation and traversal here, the link, the next router's pipeline, then the tail's
    credit back over the link after the credit delay. A channel into a terminal (share `exits` of its
    packets leave the network at its end) has no next router: its 1-cycle channel and credit (BookSim's
    ejection channels) after this router's pipeline."""
    into_router = 2 * router.pipeline + 2 * router.link + router.credit
    into_terminal = router.pipeline + 2.0
    return exits * into_terminal + (1 - exits) * into_router


def channel_efficiency(
    router: Router, divergence: Float[Array, " C"], exits: Float[Array, " C"]
) -> Float[Array, " C"]:
    """Usable share of each channel's cycles under load: what head-of-line blocking leaves. A packet blocked
    at an input holds one of its virtual channels for a turnaround; the others pass it, so the loss grows
    with the turnaround and falls as 1 / vcs."""
    return 1 / (1 + router.blocking * divergence * vc_turnaround(router, exits) / router.vcs)


def vc_servers(router: Router, vc_split: Float[Array, " C"]) -> Float[Array, " C"]:
    """VCs a packet's class may use on each channel: the router's VCs divided among `vc_split` classes
    (BookSim's dateline classes on a torus take half each), whole, at least 1."""
    return jnp.maximum(jnp.floor(router.vcs / vc_split), 1.0)


def erlang_c(servers: Float[Array, "*s"], offered: Float[Array, "*s"]) -> Float[Array, "*s"]:
    """Chance that an arrival waits in an M/M/c queue: c = `servers` (whole, <= MAX_VCS), offered load
    a = arrival rate x holding time < c. Erlang B by its recursion B_k = a B_(k-1) / (k + a B_(k-1)), then
    C = B / (1 - rho + rho B) with rho = a / c."""
    step = lambda k, b: jnp.where(k <= servers, offered * b / (k + offered * b), b)
    blocked = jax.lax.fori_loop(1, MAX_VCS + 1, step, jnp.ones_like(offered))
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
    occupancy: Float[Array, " C"],
    servers: Float[Array, " C"],
) -> Float[Array, "R K C"]:
    """Cycles a packet of each class waits for a free VC of its class on each channel: the M/D/c wait, taken
    as half the M/M/c (Erlang-C) wait C(c, a) x occupancy / (c - a), as M/D/1 is half M/M/1; a = rate x
    load x class share x occupancy, the class's VCs held on average. inf where a >= c."""
    offered = rate[:, None, None] * (load[None, :] * class_share * occupancy[None, :])[None]
    servers = jnp.broadcast_to(servers, offered.shape)
    occupancy = jnp.broadcast_to(occupancy, offered.shape)
    free = offered < servers
    safe = jnp.where(free, offered, 0.0)
    wait = 0.5 * erlang_c(servers, safe) * occupancy / (servers - safe)
    return jnp.where(free, wait, jnp.inf)


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


def saturation_rate(
    router: Router,
    load: Float[Array, " C"],
    service: Float[Array, " C"],
    contention: Float[Array, " C"],
    divergence: Float[Array, " C"],
    exits: Float[Array, " C"],
    class_share: Float[Array, "K C"],
    vc_split: Float[Array, " C"],
    flits: Float[Array, ""],
) -> Float[Array, ""]:
    """Packets per node per cycle at which the busiest channel, the injection channel or some class's VCs
    are full."""
    holding = holding_time(router, service, contention)
    busiest = jnp.max(load * holding / channel_efficiency(router, divergence, exits))
    pool = vc_saturation(
        load, class_share, vc_occupancy(router, service, contention, exits), vc_servers(router, vc_split)
    )
    return jnp.minimum(jnp.minimum(1 / busiest, 1 / flits), pool)


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
            that leave by another output): those block it at the head of the queue.
        exits: the share of the channel's packets that leave the network at its end (1 on ejection
            channels, 0 between routers).
        class_share: the share of the channel's packets in each of K VC classes (a torus's dateline
            classes; one class with share 1 elsewhere; padding classes 0).
        vc_split: the number of classes the channel's VCs are divided among (a class uses vcs / vc_split).
        nodes: injecting nodes N: sum(load) / N is the mean number of channels a packet queues at.
        hops: router-to-router channels a packet crosses, averaged over packets.
        flits: flits per packet (its serialization behind the head, and its time on the injection channel).
        router: pipeline, channel and fitted queueing coefficients.
    """
    holding = holding_time(router, service, contention)
    efficiency = channel_efficiency(router, divergence, exits)
    rho = rate[:, None] * (load * holding / efficiency)[None, :]
    full = lambda x: jnp.broadcast_to(x, rho.shape)  # the queueing formulas take equal shapes
    wait = queueing_delay(
        rho, full((holding * contention)[None, :]), full(router.variability), full(router.limit)
    )
    # packets behind one from their own port wait for a VC of their class, not for the channel
    occupancy = vc_occupancy(router, service, contention, exits)
    same_port = (class_share * (1 - contention)[None, :])[None]  # keep 0 * inf out where none waits
    by_class = vc_wait(rate, load, class_share, occupancy, vc_servers(router, vc_split))
    wait = wait + jnp.sum(jnp.where(same_port > 0, same_port * by_class, 0.0), axis=1)
    used = (load > 0)[None, :]  # idle channels (padding) may wait inf: keep 0 * inf out of the sum
    network = jnp.sum(load[None, :] * jnp.where(used, wait, 0.0), axis=1)
    # Bernoulli arrivals, fixed packets, one flit per cycle: the slotted Geo/D/1 wait, M/D/1 with S - 1
    source = mg1_wait(rate * flits, jnp.broadcast_to(flits - 1, rate.shape), jnp.zeros_like(rate))
    saturation = saturation_rate(
        router, load, service, contention, divergence, exits, class_share, vc_split, flits
    )
    zero = zero_load_latency(router, hops, flits)
    latency = jnp.where(rate < saturation, zero + source + network / nodes, jnp.inf)
    return Curve(
        latency=latency,
        accepted=jnp.minimum(rate, saturation),
        utilization=rho,
        wait=wait,
        source_wait=source,
        zero_load=zero,
        saturation=saturation,
    )
