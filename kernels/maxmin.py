"""Max-min fair rates by parallel progressive filling, from scratch or from the last allocation: exact,
or within a relative slack (the fast mode)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Bool, Complex, Float, Int

from ._types import Allocation, AnyArray

# Live items are packed into smaller buffers as rounds freeze them: later rounds then touch only the items
# still unfrozen. Every buffer size is a loop compiled of its own, so their number is bounded whatever the
# item count: the whole buffer, then halves down to SMALLEST, at most MAX_BUFFERS sizes (past 2^20 items
# the smallest grows instead). A buffer runs rounds until its items fit the next one, so a step of 4 left
# refills (most events) working on up to 4x the items they hold: halves cost more packings and loops but
# less work per round. On a k=16 fat-tree with 1e4 random flows (exact, no frontier) halves ran the engine
# in 8.2 s against 9.4 s for quarters, bit for bit the same, compiling in 4.2 s against 2.6 s. Halves of
# the item count rather than fixed powers of two: with 1e5 flows (114688 items) the classes went from
# 57344 to 16384, and the fast mode, whose rounds are mostly on the first buffers, ran 41-43 s against
# 44-50 s with 28672 between them (the same loop count, bit for bit the same). The fast mode (slack > 0)
# refills nearly every item at each event (its windows take hundreds of completions), so its live count
# decays geometrically from the item count, about as many rounds in each octave, and the top octaves cost
# most: buffers of 3/4 of the first two (FINE_TOP) ran 1e5 flows in 34.8 s against 43.7 s, compiling 0.9 s
# longer; the exact engine's refills are mostly small, and the extra packings slowed 1e4 flows by 6-10 %.
# Small buffers save little: a round's cost there is the resource-sized vectors, and each buffer adds a
# loop to compile. On the fat-tree, buffers down to 256 items ran 1e3-1e4 flows as fast as down to 64 (4e3
# flows: 1.19 s either way), compiling 1.5 s less; up to ONE_BUFFER items one buffer runs as fast as the
# ladder (1e3 flows: 0.087 s), compiling 6.1 -> 4.4 s (3.5 -> 2.6 s at XLA's -O0, as the tests run; most
# of their engines have 64-1024 items); at 2e3 flows the ladder runs 1.6x faster, so it stays above.
SHRINK = 2
SMALLEST = 256
MAX_BUFFERS = 13
FINE_TOP = 2
ONE_BUFFER = 1024
# Component groups `reusable` keeps a threshold for (`components`): a fixed count, so that an event over a
# compact view of the items (kernels/frontier.py) and one over all of them keep the same rates.
COMPONENT_GROUPS = 256
# Pointer jumps per sweep of `components`: each halves the chains of labels left (a sweep costs the same
# whatever the graph; a few jumps make the sweeps few on long chains of items, as a pipeline's).
JUMPS = 4
# Relative margin below the reuse threshold: rates equal in exact arithmetic may differ by rounding.
MARGIN = 1e-9
# Block of the prefix count: a matrix product per block beats XLA's CPU cumsum several times over.
BLOCK = 64
# Largest items x resources for which `run` sums over an item-resource incidence matrix instead of
# scattering: a batched scatter (vmap with one shared route) costs XLA's CPU ~4 ns per lane, a matrix
# product ~0.01 ns per multiply-add, so the dense sum wins while items x resources stays small.
DENSE_MAX = 1 << 15
# Columns `over_columns` writes one after another in its code (a route's hops, an item's predecessors); wider
# tables loop over equal blocks of at most this many: each column's scatter or gather is code XLA compiles,
# and the engine sums over routes at every max-min round of every buffer, so unrolled columns made its compile
# grow with the hops (the frontier engine at 2048 items: 8.4 s at 4 hops, 27.1 s at 64), where a loop of
# blocks keeps it about flat (12.7 s at 64) at the per-column scatter's speed (one scatter of items x hops,
# copying the values per hop, compiled in 7.5 s at 64 hops but ran 1.5-1.9x as long). Equal blocks rather
# than full ones padded: on a line of links with 3072 flows on 12-hop routes (flat engine) blocks of 8
# padded to 16 ran in 2.74 s, two of 6 in 1.84 s (all 12 unrolled: 1.62-1.76 s, compiling 0.7 s longer;
# blocks of 16 at 20 hops compiled in 14.1 s against 11.3 s); examples/jobs_trace_packed.json (10 hops)
# 36-44 ms a run against 54-57 ms before the folds (sums in padded blocks), alternating processes.
HOP_BLOCK = 8


def dense_by_default(n_items: int, n_res: int) -> bool:
    """Whether `run` sums over the incidence matrix when not told (see DENSE_MAX)."""
    return n_items * n_res <= DENSE_MAX


def incidence(route: Int[AnyArray, "N H"], n_res: int, dtype=jnp.float64) -> Float[AnyArray, "N R"]:
    """How many hops of each item cross each resource, as a matrix for `to_resources`."""
    rows = jnp.arange(route.shape[0])[:, None]
    return jnp.zeros((route.shape[0], n_res + 1), dtype).at[rows, route].add(1)[:, :n_res]


def over_columns(table: Int[AnyArray, "N C"], pad: int, body, init):
    """`body(carry, c, column)` folded over the columns of an index table in order (a route's hop columns,
    padding = the resource count; an item's predecessors, padding = the item count). Column by column
    rather than on an N x C gather: XLA's CPU takes about twice as long to reduce a gathered N x C array
    over its short axis as to combine the columns elementwise, and a scatter of the flattened table costs
    more than one per column. Tables wider than HOP_BLOCK loop over equal blocks of columns (the last padded
    with `pad`) instead of writing each column into the code."""
    width = table.shape[1]
    block = -(-width // -(-width // HOP_BLOCK)) if width else 0  # the fewest blocks, as equal as can be
    if width > block:
        table = jnp.pad(table, ((0, 0), (0, -width % block)), constant_values=pad)

    def fold_block(b, carry):
        columns = jax.lax.dynamic_slice_in_dim(table, b * block, block, axis=1)
        for j in range(block):
            carry = body(carry, b * block + j, columns[:, j])
        return carry

    if width == block:
        return fold_block(0, init)
    return jax.lax.fori_loop(0, table.shape[1] // block, fold_block, init)


def to_resources(
    values: AnyArray, route: Int[AnyArray, "N H"], n_res: int, dense: Float[AnyArray, "N R"] | None = None
) -> AnyArray:
    """Per-item values summed over the resources each item crosses (once per hop; padding hops drop
    out): scatters, or a matrix product with `dense` (`incidence(route)`)."""
    if dense is None:  # one scatter per hop column: no broadcast N x H copy of the values
        add = lambda out, h, column: out.at[column].add(values, mode="promise_in_bounds")
        return over_columns(route, n_res, add, jnp.zeros(n_res + 1, values.dtype))[:n_res]
    if jnp.iscomplexobj(values):
        parts = jnp.stack([values.real, values.imag]) @ dense
        return jax.lax.complex(parts[0], parts[1])
    return values @ dense


def hop_min(values: Float[AnyArray, " R"], route: Int[AnyArray, "N H"]) -> Float[AnyArray, " N"]:
    """min over each item's hops of values[route] (inf for an item with no hops)."""
    padded = append_row(values, jnp.inf)
    least = lambda out, h, column: jnp.minimum(out, padded.at[column].get(mode="promise_in_bounds"))
    return over_columns(route, values.shape[0], least, jnp.full(route.shape[0], jnp.inf, values.dtype))


def gather(values: AnyArray, route: Int[AnyArray, "N H"], pad) -> AnyArray:
    """values[route] per hop, with `pad` where the hop is padding."""
    return append_row(values, pad).at[route].get(mode="promise_in_bounds")


def compact(mask: Bool[AnyArray, " N"], size: int) -> Int[AnyArray, " size"]:
    """Indices of the first `size` True entries of mask, in order; len(mask) fills the rest."""
    n = mask.shape[0]
    blocks = jnp.pad(mask, (0, -n % BLOCK)).astype(jnp.float32).reshape(-1, BLOCK)
    within = jnp.matmul(
        blocks, jnp.triu(jnp.ones((BLOCK, BLOCK), jnp.float32)), precision=jax.lax.Precision.HIGHEST
    )  # exact: counts <= BLOCK
    before = jnp.cumsum(within[:, -1].astype(jnp.int32)) - within[:, -1].astype(jnp.int32)
    count = (within.astype(jnp.int32) + before[:, None]).ravel()[:n]  # inclusive prefix count
    slot = jnp.where(mask, count - 1, size)
    return jnp.full(size, n, jnp.int32).at[slot].set(jnp.arange(n, dtype=jnp.int32), mode="drop")


def buffer_sizes(n_items: int, full_refills: bool = False) -> list[int]:
    """Static buffer sizes, largest first: n alone up to ONE_BUFFER items, else n halved while the half
    holds at least SMALLEST items, at most MAX_BUFFERS sizes (see SHRINK); full_refills (the fast mode):
    also 3/4 of each of the first FINE_TOP sizes."""
    sizes = [n_items]
    while n_items > ONE_BUFFER and sizes[-1] // SHRINK >= SMALLEST and len(sizes) < MAX_BUFFERS:
        sizes.append(sizes[-1] // SHRINK)
    if not full_refills:
        return sizes
    top = [x for size in sizes[:FINE_TOP] for x in (size, 3 * size // 4)]
    return top[: 2 * len(sizes) - 1] + sizes[FINE_TOP:]


def rate_floor(
    capacity: Float[AnyArray, " R"], route: Int[AnyArray, "N H"], active: Bool[AnyArray, " N"]
) -> Float[AnyArray, " N"]:
    """A lower bound on each item's max-min rate among `active`: min over its resources of capacity /
    (active items crossing there). An item is the largest user of its bottleneck, which is full."""
    users = to_resources(active.astype(capacity.dtype), route, capacity.shape[0])
    return hop_min(capacity / jnp.maximum(users, 1.0), route)


def components(route: Int[AnyArray, "N H"], n_res: int) -> Int[AnyArray, " N"]:
    """Each item's connected component of the item-resource graph (items joined by a shared resource), as
    a group `reusable` reasons about on its own: components numbered 0, 1, ... in the order of their first
    item, modulo COMPONENT_GROUPS (components sharing a group are reasoned about together, which is safe).
    Min-label propagation with pointer jumping: a few sweeps over the routes, once per run."""
    n = route.shape[0]
    items = jnp.arange(n, dtype=jnp.int32)

    def sweep(carry):
        label, _ = carry
        at_resource = (
            jnp.full(n_res + 1, n, jnp.int32)
            .at[route]
            .min(jnp.broadcast_to(label[:, None], route.shape), mode="promise_in_bounds")
        )
        joined = jnp.minimum(label, jnp.min(at_resource.at[n_res].set(n)[route], axis=1))
        for _ in range(JUMPS):  # label[j] <= j throughout: following labels shortens every chain
            joined = joined[joined]
        return joined, jnp.any(joined != label)

    label = jax.lax.while_loop(lambda c: c[1], sweep, (items, jnp.array(True)))[0]
    first = label == items
    number = jnp.cumsum(first.astype(jnp.int32)) - 1  # a component's number: how many start before it
    return number[label] % COMPONENT_GROUPS


def reusable(
    prior: Allocation,
    active: Bool[AnyArray, " N"],
    floor: Float[AnyArray, " N"],
    component: Int[AnyArray, " N"] | None = None,
) -> Bool[AnyArray, " N"]:
    """Items whose rate in `prior` is still their max-min fair rate among `active`.

    Let theta be the smallest rate among the items that left and the smallest `floor` among those that
    joined. In progressive filling no resource an item crosses saturates below that item's final rate;
    so below theta no resource crossed by a leaving or joining item saturates in either filling, every
    other resource carries the same load in both, and both fillings freeze the same items at the same
    levels. Items below theta keep their rates (and any subset of them may be kept: the others fill
    what is left of the capacity exactly as before). Components (`components`) share no resource, so each
    fills on its own: theta is taken per component group, and a group no item left or joined keeps every
    rate (a compute task finishing then leaves the flows' rates alone). component None: one group.
    """
    was = prior.active
    left, joined = was & ~active, active & ~was
    bound = jnp.minimum(jnp.where(left, prior.rate, jnp.inf), jnp.where(joined, floor, jnp.inf))
    if component is None:
        theta = jnp.min(bound)
    else:
        theta = jnp.full(COMPONENT_GROUPS, jnp.inf, bound.dtype).at[component].min(bound)[component]
    return was & active & (prior.rate < theta * (1 - MARGIN))


def empty_allocation(n_items: int, n_resources: int, dtype) -> Allocation:
    """The allocation of no items: a `prior` that makes `maxmin_rates` fill from scratch."""
    return Allocation(
        active=jnp.zeros(n_items, bool),
        rate=jnp.zeros(n_items, dtype),
        bottleneck=jnp.zeros(n_items, jnp.int32),
        load=jnp.zeros(n_resources, dtype),
        rounds=jnp.zeros((), jnp.int32),
    )


def maxmin_rates(
    capacity: Float[AnyArray, " R"],
    route: Int[AnyArray, "N H"],
    active: Bool[AnyArray, " N"],
    *,
    prior: Allocation | None = None,
    floor: Float[AnyArray, " N"] | None = None,
    component: Int[AnyArray, " N"] | None = None,
    dense: Float[AnyArray, "N R"] | None = None,
    loop: str = "lax",
    slack: float = 0.0,
) -> Allocation:
    """Max-min fair rates of the active items (exact with slack=0).

    Each round freezes, at once, every resource whose fair share (spare capacity / unfrozen users) is no
    larger than the share of any resource it shares an unfrozen item with. Such a resource is saturated
    at its current share in classic progressive filling too: every item on it crosses only resources
    whose share is at least as large, and shares only grow as lower levels freeze. So the result equals
    one-bottleneck-at-a-time progressive filling, in far fewer sequential rounds.

    Args:
        capacity: bytes/s per resource, all > 0.
        route: resource index per hop; `R` (= len(capacity)) marks padding.
        active: which items want bandwidth now.
        prior: the allocation of the previous set of active items, with `floor`: `rate_floor` of every
            routed item, a bound for any active set. Items whose rate is provably unchanged (`reusable`)
            keep it; only the others are filled, in the capacity the kept ones leave. Events in a
            simulation change few items, so this touches a small buffer instead of every item.
        component: with `prior`, `components(route, R)`: rates are kept per component (see `reusable`).
        dense: `incidence(route, R)`: sum over resources with matrix products instead of scatters
            (faster for small items x resources, above all under vmap; see DENSE_MAX).
        loop: equinox.internal.while_loop kind: "lax" (forward-mode AD) or "checkpointed" (reverse mode).
        slack: s >= 0 (static): 0 for the exact allocation; s > 0 also freezes, each round, every resource whose
            share is within a factor 1 + s of its neighbours' (the items on it take their tightest share, as
            always). Near-equal levels then freeze in one round instead of one after another: from scratch on
            a k=16 fat-tree with 1e5 random flows, 141 rounds exact, 94 at s = 0.0025, 48 at s = 0.01.

    What the slack keeps (s > 0), each by the argument for the exact rounds: the rates are feasible (a
    newly frozen item takes at most the share of each resource it crosses, so no resource goes over its
    capacity and the shares of the others never fall); and every refilled item has an s-bottleneck, a
    resource loaded to at least capacity / (1 + s) on which no rate exceeds the item's by more than a
    factor 1 + s (the items frozen there take at least share / (1 + s), and every earlier rate there was at
    most the share). That is the usual definition of an s-approximately max-min fair allocation; it does not
    bound each rate against the exact max-min rate. Capacity an item leaves unused on a resource where it
    froze below the share goes, in the exact filling, to the others there: n items tight elsewhere at share
    / (1 + s) on a resource with one more item can leave that item short by a factor ~1 + n s
    (`tests/kernels/test_maxmin.py` builds one). Measured against the exact rates on the fat-tree above, the
    largest deviations are -0.24 % / +0.31 % at s = 0.0025 (mean 0.002 %). With `prior`, the kept rates
    are the earlier relaxed filling's: feasible, as any kept rate, but `reusable` reasons about exact
    fillings, so they are only as fair as that filling was.
    """
    if not isinstance(slack, int | float) or not 0.0 <= slack < 1.0:
        raise ValueError(f"maxmin_rates: slack must be a number in [0, 1), got {slack!r}")
    n_res = capacity.shape[0]
    n_items, _ = route.shape
    dt = capacity.dtype
    routed = over_columns(
        route, n_res, lambda out, h, column: out | (column < n_res), jnp.zeros(n_items, bool)
    )
    live = active & routed  # a routeless item is padding: nothing to share
    if prior is None:
        prior = empty_allocation(n_items, n_res, dt)
        keep = jnp.zeros_like(live)
    elif floor is None:
        raise ValueError(
            "maxmin_rates: `prior` needs `floor` (from rate_floor) to tell which rates still hold"
        )
    else:
        if dense is None:  # large fabric: at events where items join, bound them by their links' current
            # users (one more scatter, but it keeps far more rates; under vmap both branches run)
            floor = jax.lax.cond(
                jnp.any(live & ~prior.active),
                lambda: jnp.maximum(floor, rate_floor(capacity, route, live)),
                lambda: floor,
            )
        keep = reusable(prior, live, floor, component)
    live = live & ~keep
    # Updates to spare capacity (real part, subtracted) and users (imaginary part, subtracted) wait in
    # `pending` until the next round's scatter applies them: the rates the prior gave items now refilled
    # or gone come back, and every item to fill counts as a user.
    give_back = prior.active & ~keep
    pending = jax.lax.complex(jnp.where(give_back, -prior.rate, 0.0), -live.astype(dt))
    spare = capacity - prior.load
    users = jnp.zeros(n_res, dt)
    rate = jnp.where(keep, prior.rate, 0.0)
    bottleneck = jnp.where(keep, prior.bottleneck, 0).astype(jnp.int32)
    rounds = jnp.zeros((), jnp.int32)
    # Level k works on a buffer of sizes[k] slots holding the items still live or pending (slot -> item
    # `index`), and runs rounds until they fit the next, smaller buffer.
    sizes = buffer_sizes(n_items, full_refills=slack > 0)
    index = jnp.arange(n_items)
    sub_route, sub_live, sub_pending = route, live, pending
    for k, size in enumerate(sizes):
        if k > 0:  # pack what the previous buffer still holds into this one
            slots = compact(sub_live | (sub_pending != 0), size)
            index, sub_route = append_row(index, n_items)[slots], append_row(sub_route, n_res)[slots]
            sub_live, sub_pending = append_row(sub_live, False)[slots], append_row(sub_pending, 0)[slots]
        fits_next = sizes[k + 1] if k + 1 < len(sizes) else 0
        entered = sub_live  # the items this buffer fills; those still live are written again later
        sub_rate, sub_bottleneck, sub_live, sub_pending, spare, users, rounds = _rounds(
            sub_route,
            sub_live,
            sub_pending,
            spare,
            users,
            rounds,
            fits_next,
            loop,
            dense if k == 0 else None,
            slack,
        )
        if k == 0:  # slots are items
            rate, bottleneck = (
                jnp.where(entered, sub_rate, rate),
                jnp.where(entered, sub_bottleneck, bottleneck),
            )
        else:
            filled = jnp.where(entered, index, n_items)
            rate = rate.at[filled].set(sub_rate, mode="drop")
            bottleneck = bottleneck.at[filled].set(sub_bottleneck, mode="drop")
    last_dense = dense if len(sizes) == 1 else None
    spare = jnp.maximum(spare - to_resources(sub_pending.real, sub_route, n_res, last_dense), 0.0)
    return Allocation(active=active, rate=rate, bottleneck=bottleneck, load=capacity - spare, rounds=rounds)


def _rounds(
    route,
    live,
    pending: Complex[AnyArray, " n"],
    spare,
    users,
    rounds,
    fits_next: int,
    loop: str,
    dense: Float[AnyArray, "n R"] | None,
    slack: float,
):
    """Freezing rounds on one buffer, until at most `fits_next` of its items are live or pending."""
    n_res = spare.shape[0]
    n_hops = route.shape[1]
    dt = spare.dtype

    def keep_going(carry):
        live, pending = carry[2], carry[3]
        held = jnp.sum(live | (pending != 0))
        return (held > fits_next) if fits_next else jnp.any(live)

    def one_round(carry):
        rate, bottleneck, live, pending, spare, users, rounds = carry
        update = to_resources(pending, route, n_res, dense)
        spare = jnp.maximum(spare - update.real, 0.0)  # rounding never goes negative
        users = users - update.imag
        has = users > 0.5
        share = jnp.where(has, spare / jnp.where(has, users, 1), jnp.inf)
        item_share = hop_min(share, route)  # the item's tightest share
        # a local minimum: no live item on the resource has a smaller share elsewhere (within 1 + slack)
        if dense is None or slack:
            live_share = jnp.where(live, item_share, jnp.inf)
            if dense is None:
                least = lambda out, h, column: out.at[column].min(live_share, mode="promise_in_bounds")
                neighbour = over_columns(route, n_res, least, jnp.full(n_res + 1, jnp.inf, dt))[:n_res]
            else:  # small: a masked min over the incidence matrix
                neighbour = jnp.min(jnp.where(dense > 0, live_share[:, None], jnp.inf), axis=0)
            local_min = has & (share <= (neighbour * (1 + slack) if slack else neighbour))
        else:  # the same test as a sum: live items on r have item_share <= share[r], so r is a local
            # minimum iff their shortfall sum(share[r] - item_share) is 0, up to the sum's rounding
            # (at most users^2 eps relative; a near-tie taken for a tie moves rates by no more)
            level = jnp.where(has, share, 0.0)
            shortfall = level * users - jnp.where(live, item_share, 0.0) @ dense
            local_min = has & (shortfall <= 4 * jnp.finfo(dt).eps * users * users * level)
        # the first hop of each item at a local minimum, n_hops where none is
        padded = append_row(local_min, False)
        first = lambda out, h, column: jnp.where(
            (out == n_hops) & padded.at[column].get(mode="promise_in_bounds"), h, out
        )
        first_hit = over_columns(route, n_res, first, jnp.full(route.shape[0], n_hops, jnp.int32))
        newly = live & (first_hit < n_hops)
        rate = jnp.where(newly, item_share, rate)
        bottleneck = jnp.where(newly, first_hit.astype(bottleneck.dtype), bottleneck)
        pending = jax.lax.complex(jnp.where(newly, item_share, 0.0), newly.astype(dt))  # applied next round
        return (
            rate,
            bottleneck,
            live & ~newly,
            pending,
            spare,
            users,
            rounds + jnp.any(live).astype(rounds.dtype),
        )

    n = route.shape[0]
    init = (jnp.zeros(n, dt), jnp.zeros(n, jnp.int32), live, pending, spare, users, rounds)
    max_steps = None if loop == "lax" else n_res + 2  # each round freezes at least one resource
    return while_loop(keep_going, one_round, init, max_steps=max_steps, kind=loop)


def while_loop(cond, body, init, *, max_steps: int | None, kind: str):
    """`equinox.internal.while_loop`, imported when traced: a process that runs a cached executable never
    imports equinox (0.1 s of its start)."""
    import equinox.internal as eqxi

    return eqxi.while_loop(cond, body, init, max_steps=max_steps, kind=kind)


def append_row(x: AnyArray, value) -> AnyArray:
    """x with one more row, filled with `value`: what padding indices (== len(x)) read."""
    return jnp.concatenate([x, jnp.full((1, *x.shape[1:]), value, x.dtype)])
