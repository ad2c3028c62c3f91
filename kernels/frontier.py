"""The active-set frontier: events that work on the items in flight alone while few are (`run(frontier=)`).

`engine.run` hands it the event step twice, over every item (`engine.step`) and over a compact view of some
(`engine.step_view`), and calls `frontier_pass` until every item is done: full events while the active set
overflows the largest buffer, frontier events while it fits. The results are the full scan's bit for bit."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jaxtyping import Bool, Float, Int

from ._types import OK, AnyArray, SimState, pytree
from .maxmin import compact

# Buffer sizes of the frontier: events work on the active items alone while they fit 128, and on
# 16-item buffers while they fit those (a chain's per-event cost falls ~3x from 128 to 16).
FRONTIER = (128, 16)

#: an event over every item: `engine.step` with the run's fixed arguments
FullStep = Callable[[SimState], SimState]
#: an event over the items `view` (ascending ids, N fills) of a state whose scheduling is done:
#: `engine.step_view`; returns the new state and, per view slot, whether the item is in flight after the
#: event and whether it finished at it
ViewStep = Callable[
    [SimState, Int[AnyArray, " V"]], tuple[SimState, Bool[AnyArray, " V"], Bool[AnyArray, " V"]]
]


def buffer_sizes(
    frontier: int | tuple[int, ...] | None, *, loop: str, dense: bool, n_items: int
) -> tuple[int, ...]:
    """`run`'s frontier argument as buffer sizes, largest first; () for the full scan at every event."""
    if frontier is None:
        frontier = FRONTIER if loop == "lax" and not dense and n_items > 2 * FRONTIER[0] else ()
    sizes = (frontier,) if isinstance(frontier, int) and frontier else frontier or ()
    if (
        not isinstance(sizes, tuple)
        or not all(isinstance(k, int) and k > 0 for k in sizes)
        or list(sizes) != sorted(set(sizes), reverse=True)
    ):
        raise ValueError(
            f"netsim.kernels.run: frontier must be 0, a size > 0 or decreasing sizes > 0, got {frontier!r}"
        )
    if sizes and (loop != "lax" or dense):
        raise ValueError(
            "netsim.kernels.run: a frontier needs loop='lax' and no incidence matrix (dense=False), got"
            f" loop={loop!r}, dense={dense!r}"
        )
    return sizes


@pytree
class _Frontier:
    """The active set, for events that touch only it (`_step`): every item started and not done,
    the items that finished at the last event, and the next event's scheduling, computed from the
    successors of those (the plan). A fixed size `A` (static); valid while `need <= A`, and then the first
    `need` slots hold everything, so it fits any buffer of at least `need` by cutting or padding (`_sized`)."""

    active: Int[AnyArray, " A"]  # items started and not done; ascending, N fills
    flight: Int[AnyArray, " A"]  # the same after the planned scheduling
    recent: Int[AnyArray, " A"]  # items that finished at the last event; ascending, N fills
    begin: Int[AnyArray, " B"]  # items the next event schedules (repeats allowed); N fills
    start: Float[AnyArray, " B"]  # s: their start
    first_byte: Float[AnyArray, " B"]  # s: their first byte
    left: Int[AnyArray, ""]  # items not done
    need: Int[AnyArray, ""]  # the smallest buffer size that holds all of it (the arrays fit when <= A)


@pytree
class Graph:
    """What plans read of a run, fixed for it: each item's predecessors, release and route latency, and its
    successors (CSR: the items waiting on item i are index[ptr[i]:ptr[i + 1]])."""

    after: Int[AnyArray, "N P"]
    release: Float[AnyArray, " N"]
    latency: Float[AnyArray, " N"]  # s from start to first byte (`engine.route_latency`)
    ptr: Int[AnyArray, " M"]  # N + 2 entries
    index: Int[AnyArray, " E"]


def dependency_graph(
    after: Int[AnyArray, "N P"], release: Float[AnyArray, " N"], latency: Float[AnyArray, " N"]
) -> Graph:
    """The run's `Graph`, built once per run (the successor lists: a sort of the N x P predecessor entries)."""
    n, p = after.shape
    pred = jnp.asarray(after).ravel()
    order = jnp.argsort(pred, stable=True)
    index = (order // p).astype(jnp.int32)
    ptr = jnp.searchsorted(pred[order], jnp.arange(n + 2, dtype=pred.dtype), side="left").astype(jnp.int32)
    return Graph(jnp.asarray(after), jnp.asarray(release), latency, ptr, index)


def _ascending(
    ids: Int[AnyArray, " m"], size: int, n: int
) -> tuple[Int[AnyArray, " size"], Int[AnyArray, ""]]:
    """The distinct ids below n, ascending, in `size` slots (n fills), and how many there are."""
    ids = jnp.sort(ids)
    ids = jnp.sort(jnp.where(jnp.concatenate([jnp.zeros(1, bool), ids[1:] == ids[:-1]]), n, ids))
    count = jnp.sum(ids < n, dtype=jnp.int32)
    return _fit(ids, size, n), count


def _plan(
    g: Graph,
    s: SimState,
    active: Int[AnyArray, " A"],
    recent: Int[AnyArray, " A"],
    left: Int[AnyArray, ""],
    need: Int[AnyArray, ""],
) -> _Frontier:
    """The frontier after an event: the next event's scheduling from the successors of `recent` alone.

    An item becomes ready only when its last predecessor finishes, so the items the next event schedules
    are among the successors of the items that finished at this one: the same begin, start and first byte
    as the full scan over every item in `step`, which the next event needs only when a buffer overflows."""
    n = g.after.shape[0]
    size = active.shape[0]
    real = recent < n
    lo = g.ptr.at[recent].get(mode="fill", fill_value=0)
    deg = jnp.where(real, g.ptr.at[recent + 1].get(mode="fill", fill_value=0) - lo, 0)
    ends = jnp.cumsum(deg, dtype=jnp.int32)
    slot = jnp.arange(size, dtype=jnp.int32)  # the plan takes up to `size` successor entries
    which = jnp.minimum(jnp.searchsorted(ends, slot, side="right"), size - 1).astype(jnp.int32)
    entry = lo[which] + slot - (ends[which] - deg[which])
    cand = jnp.where(slot < ends[-1], g.index.at[entry].get(mode="fill", fill_value=n), n)
    preds = g.after.at[cand].get(mode="fill", fill_value=n)
    pred_done = jnp.all(s.done.at[preds].get(mode="fill", fill_value=True), axis=1)
    pred_finish = jnp.max(s.finish.at[preds].get(mode="fill", fill_value=0.0), axis=1)
    ready = (cand < n) & ~s.started.at[cand].get(mode="fill", fill_value=True) & pred_done
    start = jnp.maximum(g.release.at[cand].get(mode="fill", fill_value=0.0), pred_finish)
    first_byte = start + g.latency.at[cand].get(mode="fill", fill_value=0.0)
    begin = jnp.where(ready, cand, n)
    union, count = _ascending(jnp.concatenate([active, begin]), size, n)
    need = jnp.maximum(jnp.maximum(need.astype(jnp.int32), ends[-1]), count)
    return _Frontier(active, union, recent, begin, start, first_byte, left.astype(jnp.int32), need)


def _full_step(full: FullStep, g: Graph, s: SimState, size: int) -> tuple[SimState, _Frontier]:
    """An event over every item, then the frontier rebuilt from scratch (O(items), as the event), unless the
    active set or the last completions alone overflow it: then a frontier of fills that only says so."""
    new = full(s)
    in_flight, finished = new.started & ~new.done, new.done & ~s.done
    need = jnp.maximum(jnp.sum(in_flight, dtype=jnp.int32), jnp.sum(finished, dtype=jnp.int32))
    left = jnp.sum(~new.done, dtype=jnp.int32)

    def plan() -> _Frontier:
        active, recent = compact(in_flight, size), compact(finished, size)
        return _plan(g, new, active, recent, left, need)

    overflow = lambda: _overflowing(g.after.shape[0], size, new.time.dtype, left, need)
    return new, jax.lax.cond(need > size, overflow, plan)


def _overflowing(n: int, size: int, dtype, left: Int[AnyArray, ""], need: Int[AnyArray, ""]) -> _Frontier:
    """A frontier of fills that only says that the active set needs `need` > `size` slots."""
    ids = jnp.full(size, n, jnp.int32)
    times = jnp.zeros(size, dtype)
    return _Frontier(ids, ids, ids, ids, times, times, left, need)


def _step(view_step: ViewStep, g: Graph, s: SimState, f: _Frontier) -> tuple[SimState, _Frontier]:
    """An event on the frontier alone (when `f.need` <= its size): the plan's scheduling, then `view_step` on
    the items in flight and those that just left the allocation, whose work grows with the active set, not
    the item count."""
    n = g.after.shape[0]
    size = f.flight.shape[0]
    s = dataclasses.replace(
        s,
        started=s.started.at[f.begin].set(True, mode="drop"),
        start=s.start.at[f.begin].set(f.start, mode="drop"),
        first_byte=s.first_byte.at[f.begin].set(f.first_byte, mode="drop"),
    )
    view = jnp.sort(jnp.concatenate([f.flight, f.recent]))  # disjoint sets, in item order
    new, in_flight, finishing = view_step(s, view)
    active, n_active = _ascending(jnp.where(in_flight, view, n), size, n)
    recent, n_recent = _ascending(jnp.where(finishing, view, n), size, n)
    left = f.left - jnp.sum(finishing).astype(f.left.dtype)
    return new, _plan(g, new, active, recent, left, jnp.maximum(n_active, n_recent))


def _sized(f: _Frontier, size: int, n: int) -> _Frontier:
    """`f` in buffers of `size` slots (exact when f.need <= size: the rest are fill)."""
    ids = [_fit(x, size, n) for x in (f.active, f.flight, f.recent, f.begin)]
    return _Frontier(*ids, _fit(f.start, size, 0.0), _fit(f.first_byte, size, 0.0), f.left, f.need)


def _fit(x: AnyArray, size: int, fill) -> AnyArray:
    """`x` cut to `size` slots, or padded with `fill` to them."""
    if x.shape[0] >= size:
        return x[:size]
    return jnp.concatenate([x, jnp.full(size - x.shape[0], fill, x.dtype)])


def _ladder(
    view_step: ViewStep,
    g: Graph,
    c: tuple[SimState, _Frontier],
    *,
    sizes: tuple[int, ...],
    stop: int | Int[AnyArray, ""],
) -> tuple[SimState, _Frontier]:
    """Frontier steps while the active set fits sizes[0], each on the smallest buffer that holds it.

    One loop per size, each run while its size is the smallest that fits, in turn; a loop is entered only
    at a change of size (entering a loop copies the state, so an idle loop per event would cost O(items)).
    A plan that outgrows a small buffer is made again at sizes[0] from that buffer's active and recent
    items, which it holds."""
    n = g.after.shape[0]

    def level(i: int, c: tuple[SimState, _Frontier]) -> tuple[SimState, _Frontier]:
        def cond(c):
            s, f = c
            smallest = f.need <= sizes[i]
            if i + 1 < len(sizes):
                smallest = smallest & (f.need > sizes[i + 1])
            return smallest & _going(s, f, stop)

        return jax.lax.while_loop(cond, lambda c: _step(view_step, g, *c), c)

    def body(c: tuple[SimState, _Frontier]) -> tuple[SimState, _Frontier]:
        s, top = level(0, c)
        for i, size in enumerate(sizes[1:], 1):
            s2, f = level(i, (s, _sized(top, size, n)))
            big = _sized(f, sizes[0], n)  # its active and recent items fit: plan again at sizes[0]
            need = jnp.maximum(jnp.sum(f.active < n, dtype=jnp.int32), jnp.sum(f.recent < n, dtype=jnp.int32))
            again = _plan(g, s2, big.active, big.recent, f.left, need)
            ran = s2.events > s.events
            top = jax.tree.map(lambda a, b, ran=ran: jnp.where(ran, a, b), again, top)
            s = s2
        return s, top

    return jax.lax.while_loop(lambda c: (c[1].need <= sizes[0]) & _going(*c, stop), body, c)


def frontier_pass(
    s: SimState,
    *,
    full: FullStep,
    view_step: ViewStep,
    graph: Graph,
    sizes: tuple[int, ...],
    stop: int | Int[AnyArray, ""],
) -> SimState:
    """One pass of `engine.run`'s loop: full events while the active set overflows sizes[0], then frontier
    events (`_ladder`) until it overflows again or the run ends (every item done, `stop` events, a bad status).

    full, view_step: the event step over every item and over a view (`engine.step`, `engine.step_view`);
    graph: `dependency_graph` of the run; sizes: `buffer_sizes`."""
    # the first full step runs as the loop's first pass (from a frontier that overflows), not before
    # it: the full step, the largest part of the engine, is then compiled once, not twice
    one, beyond = jnp.int32(1), jnp.int32(sizes[0] + 1)
    start = _overflowing(graph.after.shape[0], sizes[0], s.time.dtype, one, beyond)
    c = jax.lax.while_loop(
        lambda c: (c[1].need > sizes[0]) & _going(*c, stop),
        lambda c: _full_step(full, graph, c[0], sizes[0]),
        (s, start),
    )
    return _ladder(view_step, graph, c, sizes=sizes, stop=stop)[0]


def _going(s: SimState, f: _Frontier, stop: int | Int[AnyArray, ""]) -> Bool[AnyArray, ""]:
    """Whether the run goes on: items left, fewer than `stop` events, status OK."""
    return (f.left > 0) & (s.events < stop) & (s.status == OK)
