"""Exact max-min fair rates by parallel progressive filling."""

from __future__ import annotations

import equinox.internal as eqxi
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from ._types import Allocation

# Live items are packed into buffers this many times smaller as rounds freeze them: later rounds then
# touch only the items still unfrozen (their number falls by ~20% a round on a loaded fabric).
SHRINK = 4
SMALLEST = 64


def scatter_add(values: Float[Array, "N H"], route: Int[Array, "N H"], size: int) -> Float[Array, " R"]:
    """Sums values into their hop's resource; the padding index `size` is dropped."""
    out = jnp.zeros(size + 1, values.dtype).at[route.ravel()].add(values.ravel(), mode="promise_in_bounds")
    return out[:size]


def gather(values: Array, route: Int[Array, "N H"], pad) -> Array:
    """values[route] per hop, with `pad` where the hop is padding."""
    ext = jnp.concatenate([values, jnp.full((1,), pad, values.dtype)])
    return ext.at[route].get(mode="promise_in_bounds")


def buffer_sizes(n_items: int) -> list[int]:
    """Static buffer sizes, largest first: n, n / SHRINK, ... down to SMALLEST."""
    sizes = [n_items]
    while sizes[-1] // SHRINK >= SMALLEST:
        sizes.append(sizes[-1] // SHRINK)
    return sizes


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
    n_res = capacity.shape[0]
    n_items, n_hops = route.shape
    dt = capacity.dtype
    live = active & jnp.any(route < n_res, axis=1)  # a routeless item is padding: nothing to share
    users = scatter_add(jnp.broadcast_to(live[:, None], route.shape).astype(dt), route, n_res)
    spare = capacity
    rate = jnp.zeros(n_items, dt)
    bottleneck = jnp.zeros(n_items, jnp.int32)
    rounds = jnp.zeros((), jnp.int32)
    # Level k works on a buffer of sizes[k] slots holding the live items (slot -> item index `index`),
    # and runs rounds until the live items fit the next, smaller buffer.
    sizes = buffer_sizes(n_items)
    index = jnp.arange(n_items)
    sub_route, sub_live = route, live
    for k, size in enumerate(sizes):
        if k > 0:  # pack the live items of the previous buffer into this one
            slots = jnp.nonzero(sub_live, size=size, fill_value=sub_live.shape[0])[0]
            index = jnp.concatenate([index, jnp.array([n_items])])[slots]
            sub_route = jnp.concatenate([sub_route, jnp.full((1, n_hops), n_res, route.dtype)])[slots]
            sub_live = index < n_items
        fits_next = sizes[k + 1] if k + 1 < len(sizes) else 0
        sub_rate, sub_bottleneck, sub_live, spare, users, rounds = _rounds(
            sub_route, sub_live, spare, users, rounds, fits_next, loop)
        rate = rate.at[index].set(sub_rate, mode="drop")  # still-live items are written again later
        bottleneck = bottleneck.at[index].set(sub_bottleneck, mode="drop")
    return Allocation(rate=rate, bottleneck=bottleneck, load=capacity - spare, rounds=rounds)


def _rounds(route, live, spare, users, rounds, fits_next: int, loop: str):
    """Freezing rounds on one buffer, until at most `fits_next` of its items are live."""
    n_res = spare.shape[0]
    n_hops = route.shape[1]
    real = route < n_res
    dt = spare.dtype

    def keep_going(carry):
        return jnp.sum(carry[2]) > fits_next

    def one_round(carry):
        rate, bottleneck, live, spare, users, rounds = carry
        has = users > 0
        share = jnp.where(has, spare / jnp.where(has, users, 1), jnp.inf)
        hop_share = gather(share, route, jnp.inf)
        item_share = jnp.min(hop_share, axis=1)  # the item's tightest share
        live_share = jnp.where(live, item_share, jnp.inf)
        neighbour = jnp.full(n_res + 1, jnp.inf, dt).at[route.ravel()].min(
            jnp.repeat(live_share, n_hops), mode="promise_in_bounds")[:n_res]
        local_min = has & (share <= neighbour)
        hit = gather(local_min, route, False)
        newly = live & jnp.any(hit, axis=1)
        rate = jnp.where(newly, item_share, rate)
        bottleneck = jnp.where(newly, jnp.argmax(hit, axis=1).astype(bottleneck.dtype), bottleneck)
        # One scatter carries both updates: freed bandwidth (real part) and departed users (imaginary).
        freed = jnp.where(newly[:, None] & real, item_share[:, None] + 1j, 0.0)
        update = scatter_add(freed, route, n_res)
        spare = jnp.maximum(spare - update.real, 0.0)  # rounding never goes negative
        users = users - update.imag
        return rate, bottleneck, live & ~newly, spare, users, rounds + 1

    n = route.shape[0]
    init = (jnp.zeros(n, dt), jnp.zeros(n, jnp.int32), live, spare, users, rounds)
    max_steps = None if loop == "lax" else n_res + 1  # each round freezes at least one resource
    return eqxi.while_loop(keep_going, one_round, init, max_steps=max_steps, kind=loop)
