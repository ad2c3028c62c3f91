"""Queueing delay of packetized traffic at a resource: the load-dependent part of latency.

A resource (a link, or a router output port with its link) serves packets of `service` seconds each
(bytes on the wire / capacity). Packets that arrive while it is busy wait. With Poisson arrivals the mean
wait is Pollaczek-Khinchine's M/G/1 formula,

    W = rho * service * (1 + variability) / (2 * (1 - rho)),

where rho is the utilization and `variability` the squared coefficient of variation of the service time
(0: every packet the same length, M/D/1; 1: exponential lengths, M/M/1). A finite buffer bounds the wait:
a packet never waits longer than `limit` (buffer bytes / capacity; inf for an unbounded queue), which also
keeps a saturated resource (rho = 1, as max-min sharing leaves its bottlenecks) finite.

Everything is elementwise and differentiable in every argument (the double `where` keeps the gradient of
masked lanes finite). Used by the event engine (first bytes under load) and by the open-loop latency model.
"""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float


def mg1_wait(
    utilization: Float[ArrayLike, "*s"], service: Float[ArrayLike, "*s"], variability: Float[ArrayLike, "*s"]
) -> Float[Array, "*s"]:
    """Mean wait in queue (s) of an M/G/1 server; inf at and above utilization 1."""
    rho = jnp.asarray(utilization)
    stable = rho < 1
    safe = jnp.where(stable, rho, 0.0)
    wait = safe * service * (1 + variability) / (2 * (1 - safe))
    return jnp.where(stable, wait, jnp.inf)


def queueing_delay(
    utilization: Float[ArrayLike, "*s"],
    service: Float[ArrayLike, "*s"],
    variability: Float[ArrayLike, "*s"],
    limit: Float[ArrayLike, "*s"],
) -> Float[Array, "*s"]:
    """Mean wait (s) of a packet at a resource: M/G/1, at most `limit` (a finite buffer's drain time)."""
    return jnp.minimum(mg1_wait(utilization, service, variability), limit)
