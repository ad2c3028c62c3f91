"""Exact max-min fair rates by parallel progressive filling."""

from __future__ import annotations

import equinox.internal as eqxi
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from ._types import Allocation


def scatter_add(values: Float[Array, "N H"], route: Int[Array, "N H"], size: int) -> Float[Array, " R"]:
    """Sums values into their hop's resource; the padding index `size` is dropped."""
    out = jnp.zeros(size + 1, values.dtype).at[route.ravel()].add(values.ravel(), mode="promise_in_bounds")
    return out[:size]


def gather(values: Array, route: Int[Array, "N H"], pad) -> Array:
    """values[route] per hop, with `pad` where the hop is padding."""
    ext = jnp.concatenate([values, jnp.full((1,), pad, values.dtype)])
    return ext.at[route].get(mode="promise_in_bounds")


def maxmin_rates(
    capacity: Float[Array, " R"],
    route: Int[Array, "N H"],
    active: Bool[Array, " N"],
    *,
    loop: str = "lax",
) -> Allocation:
    """Max-min fair rates of the active items.

    Each round freezes, at once, every resource whose fair share (spare capacity / unfrozen users) is no
    larger than the share of any resource it shares an unfrozen item with. Such a resource is saturated
    at its current share in classic progressive filling too: every item on it crosses only resources
    whose share is at least as large, and shares only grow as lower levels freeze. So the result equals
    one-bottleneck-at-a-time progressive filling, in far fewer sequential rounds.

    Args:
        capacity: bytes/s per resource, all > 0.
        route: resource index per hop; `R` (= len(capacity)) marks padding.
        active: which items want bandwidth now.
        loop: equinox.internal.while_loop kind: "lax" (forward-mode AD) or "checkpointed" (reverse mode).
    """
    size = capacity.shape[0]
    n_items, n_hops = route.shape
    dt = capacity.dtype
    real = route < size
    frozen0 = ~active | ~jnp.any(real, axis=1)  # a routeless item has nothing to share: never frozen by a link
    users0 = scatter_add(jnp.broadcast_to(~frozen0[:, None], route.shape).astype(dt), route, size)

    def unfinished(carry):
        return jnp.any(~carry[1])

    def one_round(carry):
        rate, frozen, spare, users, bottleneck, rounds = carry
        has = users > 0
        share = jnp.where(has, spare / jnp.where(has, users, 1), jnp.inf)
        hop_share = gather(share, route, jnp.inf)
        item_share = jnp.min(hop_share, axis=1)  # the item's tightest share
        live_share = jnp.where(frozen, jnp.inf, item_share)
        neighbour = jnp.full(size + 1, jnp.inf, dt).at[route.ravel()].min(
            jnp.repeat(live_share, n_hops), mode="promise_in_bounds")[:size]
        local_min = has & (share <= neighbour)
        hit = gather(local_min, route, False)
        newly = ~frozen & jnp.any(hit, axis=1)
        rate = jnp.where(newly, item_share, rate)
        bottleneck = jnp.where(newly, jnp.argmax(hit, axis=1).astype(bottleneck.dtype), bottleneck)
        take = jnp.where(newly[:, None] & real, item_share[:, None], 0.0)
        spare = jnp.maximum(spare - scatter_add(take, route, size), 0.0)  # rounding never goes negative
        users = users - scatter_add(jnp.broadcast_to(newly[:, None], route.shape).astype(dt), route, size)
        return rate, frozen | newly, spare, users, bottleneck, rounds + 1

    init = (jnp.zeros(n_items, dt), frozen0, capacity, users0,
            jnp.zeros(n_items, jnp.int32), jnp.zeros((), jnp.int32))
    max_steps = None if loop == "lax" else size + 1  # each round freezes at least one resource
    rate, _, spare, _, bottleneck, rounds = eqxi.while_loop(
        unfinished, one_round, init, max_steps=max_steps, kind=loop)
    return Allocation(rate=rate, bottleneck=bottleneck, load=capacity - spare, rounds=rounds)
