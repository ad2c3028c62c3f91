"""Event-driven flow-level simulation to completion, as one loop over events."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jaxtyping import Bool, Float, Int

from ._types import (
    MAX_EVENTS,
    NONFINITE,
    OK,
    STALLED,
    Allocation,
    AnyArray,
    Network,
    Program,
    SimState,
    pytree,
)
from .frontier import buffer_sizes, dependency_graph, frontier_pass
from .maxmin import (
    append_row,
    components,
    dense_by_default,
    empty_allocation,
    gather,
    incidence,
    maxmin_rates,
    over_columns,
    rate_floor,
    to_resources,
    while_loop,
)
from .queueing import queueing_delay

# Items whose projected finish lies within this relative distance of the next event finish with it:
# simultaneous completions then cost one event, not a cascade of residue events (SimGrid's precision/work-amount).
TIE = 1e-12
# A finishing item whose rate x time moved less (or more) than it had left by over this fraction of its size
# hands the difference to its resources (`_advance`): byte counts then stay exact where float64 cannot resolve its time.
RESIDUE = 1e-10
# A resource's load from max-min (capacity - spare) resolves it to a few ulp(capacity): a 1e-3 B/s flow on a
# 1e10 B/s link would lose 5e-4 of its bytes from the link's tally. Where any rate is below this fraction of the
# largest capacity, an event tallies the bytes from the rates themselves (one more scatter, in such runs only).
LOAD_RESOLUTION = 1e-5
# The fast mode's max-min slack per unit of window (`maxmin_rates(slack=SLACK * tolerance)`): near-equal
# fair-share levels freeze together, in fewer rounds.
SLACK = 0.25


def route_latency(network: Network, program: Program) -> Float[AnyArray, " N"]:
    """s from start to first byte: the route's latencies plus the item's fixed overhead."""
    return jnp.sum(gather(network.latency, program.route, 0.0), axis=1) + program.overhead


def payload_capacity(network: Network) -> Float[AnyArray, " R"]:
    """bytes/s the items crossing each resource share: its capacity, less the headers of a packetized one
    (capacity x size / (size + header))."""
    p = network.packets
    if p is None:
        return network.capacity
    packetized = p.size > 0
    size = jnp.where(packetized, p.size, 1.0)  # double where: finite gradients on the fluid lanes
    return jnp.where(packetized, network.capacity * (size / (size + p.header)), network.capacity)


def first_byte_wait(
    network: Network, load: Float[AnyArray, " R"], route: Int[AnyArray, "N H"]
) -> Float[AnyArray, " N"]:
    """s each item's first byte waits in the queues of its route at these resource loads (payload bytes/s):
    the sum over its packetized hops of `queueing.queueing_delay` at utilization load / payload capacity,
    for packets of size + header bytes on the wire, at most the buffer's drain time (buffer / capacity).
    Zero where no resource is packetized; needs `network.packets`."""
    p = network.packets
    wire = network.capacity
    bounded = jnp.isfinite(p.buffer)  # double where: an unbounded buffer's limit has no gradient
    limit = jnp.where(bounded, jnp.where(bounded, p.buffer, 0.0) / wire, jnp.inf)
    wait = queueing_delay(load / payload_capacity(network), (p.size + p.header) / wire, p.variability, limit)
    wait = jnp.where(p.size > 0, wait, 0.0)
    return jnp.sum(gather(wait, route, 0.0), axis=1)


def initial_state(
    program: Program, n_resources: int, record: int = 0, *, packetized: bool = False
) -> SimState:
    n_items, n_hops = program.route.shape
    dt = program.size.dtype
    padding = ~jnp.any(program.route < n_resources, axis=1)
    inf = jnp.full(n_items, jnp.inf, dt)
    zero = jnp.zeros((), jnp.int32)
    return SimState(
        time=jnp.zeros((), dt),
        remaining=jnp.where(padding, 0.0, program.size),
        started=padding,
        done=padding,
        start=jnp.where(padding, 0.0, inf),
        first_byte=jnp.where(padding, 0.0, inf),
        finish=jnp.where(padding, 0.0, inf),
        resource_bytes=jnp.zeros(n_resources, dt),
        resource_busy=jnp.zeros(n_resources, dt),
        held=jnp.zeros((n_items, n_hops), dt),
        allocation=empty_allocation(n_items, n_resources, dt),
        events=zero,
        merged=zero,
        rounds=zero,
        max_rounds=zero,
        status=zero,
        trace_time=jnp.full(record, jnp.inf, dt),
        trace_load=jnp.zeros((record, n_resources), dt),
        queued=padding if packetized else None,
    )


@pytree
class _Items:
    """The per-item part of the state, for every item or for a compact view of some (`_advance`)."""

    remaining: Float[AnyArray, " n"]
    started: Bool[AnyArray, " n"]
    done: Bool[AnyArray, " n"]
    first_byte: Float[AnyArray, " n"]
    finish: Float[AnyArray, " n"]
    held: Float[AnyArray, "n H"]
    queued: Bool[AnyArray, " n"] | None  # None unless the network is packetized


def step(
    network: Network,
    program: Program,
    s: SimState,
    *,
    latency: Float[AnyArray, " N"],
    floor: Float[AnyArray, " N"],
    component: Int[AnyArray, " N"] | None = None,
    dense: Float[AnyArray, "N R"] | None = None,
    loop: str = "lax",
    tolerance: float = 0.0,
) -> SimState:
    """Schedules what became ready at s.time, allocates rates, and advances to the next event.

    latency: `route_latency`; floor: `rate_floor` of every routed item; component: `maxmin.components`
    (None: one threshold for every item, `maxmin.reusable`); dense: None or `incidence` (all fixed for a
    run, so computed once); tolerance: see `run`.
    """

    # 1. Schedule every item whose predecessors are done. Its start is exactly max(release, last
    #    predecessor's finish) and its first byte follows after the route latency: both are known now, so
    #    a release needs no event of its own, and no drift comes from the event clock.
    #    Once every item has started (all released at once, or after the last release) there is nothing
    #    to schedule, and the events skip the items x predecessors gather.
    def schedule():
        done, finish = append_row(s.done, True), append_row(s.finish, 0.0)
        last_pred = lambda carry, c, column: (carry[0] & done[column], jnp.maximum(carry[1], finish[column]))
        init = (jnp.ones(s.done.shape, bool), jnp.zeros_like(s.finish))  # finish times are >= 0
        pred_done, pred_finish = over_columns(program.after, s.done.shape[0], last_pred, init)
        begin = ~s.started & pred_done
        start = jnp.where(begin, jnp.maximum(program.release, pred_finish), s.start)
        return s.started | begin, start, jnp.where(begin, start + latency, s.first_byte)

    started, start, first_byte = jax.lax.cond(
        jnp.all(s.started), lambda: (s.started, s.start, s.first_byte), schedule
    )
    items = _Items(s.remaining, started, s.done, first_byte, s.finish, s.held, s.queued)
    capacity = payload_capacity(network)
    items, alloc, out = _advance(
        capacity,
        network,
        program.route,
        program.size,
        s,
        items,
        s.allocation,
        floor,
        component,
        dense,
        loop,
        tolerance,
    )
    return _commit(s, out, start, items, alloc)


@pytree
class _Event:
    """What `_advance` tells `_commit` besides the items: the event's time and resource totals."""

    time: Float[AnyArray, ""]
    gap: Float[AnyArray, ""]  # s the rates held for
    moved_bytes: Float[AnyArray, " R"]  # load x gap
    handed: Float[AnyArray, " R"]  # what finishing items moved beyond (or short of) that: `RESIDUE`
    merged: Int[AnyArray, ""]
    status: Int[AnyArray, ""]
    finishing: Bool[AnyArray, " n"]
    load: Float[AnyArray, " R"]


def _advance(
    capacity: Float[AnyArray, " R"],
    network: Network,
    route: Int[AnyArray, "n H"],
    size: Float[AnyArray, " n"],
    s: SimState,
    items: _Items,
    prior: Allocation,
    floor: Float[AnyArray, " n"],
    component: Int[AnyArray, " n"] | None,
    dense: Float[AnyArray, "n R"] | None,
    loop: str,
    tolerance: float,
) -> tuple[_Items, Allocation, _Event]:
    """Steps 2-4 of an event on `items` (scheduled already): every item, or a compact view holding every
    item started and not done and every item of `prior.active` (the frontier). Elementwise per item but
    for the max-min allocation and the sums over resources, which add in item order either way, so a view
    gives the very same floating-point results as the whole.

    capacity: `payload_capacity(network)`; network: for the queueing of first bytes when packetized;
    size: the items' bytes (work), for `RESIDUE`."""
    t = s.time
    started, first_byte, queued = items.started, items.first_byte, items.queued
    # the fast mode lets a first byte up to half a window ahead start now, as it lets completions fold in
    horizon = t + 0.5 * tolerance * jnp.abs(t) if tolerance else t
    moving = started & ~items.done & (first_byte <= horizon)
    if queued is not None:  # packetized (static): a first byte reaching its route now queues first
        # its wait is set by the loads of the interval that ends now, the traffic its packets find queued
        # ahead of them; the item moves once it has waited (an event of its own when the wait is > 0)
        arriving = moving & ~queued
        wait = first_byte_wait(network, prior.load, route)
        first_byte = jnp.where(arriving, first_byte + wait, first_byte)
        queued = queued | arriving
        moving = started & ~items.done & (first_byte <= horizon)

    # 2. Max-min fair rates of the items that are moving bytes. Most events change few of them: items
    #    whose last rate is provably still fair keep it, and only the rest are filled again.
    alloc = maxmin_rates(
        capacity,
        route,
        moving,
        prior=prior,
        floor=floor,
        component=component,
        dense=dense,
        loop=loop,
        slack=SLACK * tolerance,
    )
    rate = alloc.rate
    load = jax.lax.cond(
        jnp.any(moving & (rate > 0) & (rate < LOAD_RESOLUTION * jnp.max(capacity))),
        lambda: to_resources(rate, route, capacity.shape[0], dense),
        lambda: alloc.load,
    )

    # 3. Next event: a completion or a first byte (release + latency expiry).
    positive = rate > 0
    t_done = jnp.where(moving & positive, t + items.remaining / jnp.where(positive, rate, 1.0), jnp.inf)
    t_done = jnp.where(moving & (items.remaining <= 0), t, t_done)
    t_first = jnp.where(started & ~items.done & ~moving, first_byte, jnp.inf)
    t_next = jnp.minimum(jnp.min(t_done), jnp.min(t_first))
    stalled = ~jnp.isfinite(t_next)
    t_next = jnp.where(stalled, t, t_next)
    gap = t_next - t

    # 4. Advance: move bytes, finish what completes at t_next (ties within TIE finish together).
    finishing = moving & (t_done <= t_next + TIE * jnp.abs(t_next))
    finish = jnp.where(finishing, t_next, items.finish)
    moved_bytes = load * gap
    held_for = gap
    merged = s.merged
    if (
        tolerance
    ):  # fast mode (static): every completion up to a relative window past t_next joins this event.
        # Items finishing inside the window finish at their own time under the current rates; the others take
        # over their bandwidth from the middle of the window's completions (not its end), so each window moves
        # them by at most half its width, early or late, and successive windows' errors cancel more than add.
        window = t_next + tolerance * jnp.abs(t_next)
        finishing = moving & (t_done <= window)
        last = jnp.max(jnp.where(finishing, t_done, -jnp.inf))
        t_end = jnp.where(stalled, t, jnp.maximum(t_next, 0.5 * (t_next + last)))
        late = t_next + TIE * jnp.abs(t_next)
        starts_early = moving & (first_byte > t)  # first bytes inside the horizon, folded into this event
        merged = merged + jnp.sum(
            (finishing & (t_done > late)) | ((t_first > late) & (t_first <= t_end)) | starts_early
        ).astype(merged.dtype)
        finish = jnp.where(finishing, t_done, items.finish)
        # load x gap counts each finishing item's rate to t_end: too much if it finished before, too little after
        early = jnp.where(finishing, rate * (t_end - t_done), 0.0)
        gap = t_end - t
        moved_bytes = load * gap - to_resources(early, route, capacity.shape[0], dense)
        held_for = jnp.where(finishing, t_done - t, gap)[:, None]
        t_next = t_end
    # A finishing item hands its resources the bytes that rate x its time did not move. Above RESIDUE of its
    # size that is float64's time resolution at work (a transfer far shorter than ulp(t): late
    # starts, ideal links) or the tie rule, and the bytes are counted so that none are lost; below, the
    # counts are left alone (the post-run check allows CONSERVATION_RTOL), and most events skip the scatter.
    counted = rate * (jnp.where(finishing, t_done - t, gap) if tolerance else gap)
    short = jnp.where(finishing, items.remaining - counted, 0.0)
    residue = jnp.abs(short) > RESIDUE * size
    handed = jax.lax.cond(  # added after moved_bytes: their sum's rounding stays as without this
        jnp.any(residue),
        lambda: to_resources(jnp.where(residue, short, 0.0), route, capacity.shape[0], dense),
        lambda: jnp.zeros_like(moved_bytes),
    )
    remaining = jnp.where(moving, jnp.maximum(items.remaining - rate * gap, 0.0), items.remaining)
    remaining = jnp.where(finishing, 0.0, remaining)
    n_hops = route.shape[1]
    on_bottleneck = jnp.arange(n_hops, dtype=alloc.bottleneck.dtype)[None, :] == alloc.bottleneck[:, None]
    held = items.held + jnp.where(moving[:, None] & on_bottleneck, held_for, 0.0)
    bad = ~jnp.all(jnp.isfinite(remaining)) | ~jnp.isfinite(t_next)
    status = s.status | jnp.where(stalled, STALLED, OK) | jnp.where(bad, NONFINITE, OK)
    items = _Items(remaining, started, items.done | finishing, first_byte, finish, held, queued)
    event = _Event(t_next, gap, moved_bytes, handed, merged, status.astype(jnp.int32), finishing, load)
    return items, alloc, event


def _commit(
    s: SimState, event: _Event, start: Float[AnyArray, " N"], items: _Items, alloc: Allocation
) -> SimState:
    """The state after an event, from every item's new values."""
    trace_time, trace_load = s.trace_time, s.trace_load
    if trace_time.shape[0]:  # recording (static): keep this interval's start and loads
        trace_time = trace_time.at[s.events].set(s.time, mode="drop")
        trace_load = trace_load.at[s.events].set(event.load, mode="drop")
    return SimState(
        time=event.time,
        remaining=items.remaining,
        started=items.started,
        done=items.done,
        start=start,
        first_byte=items.first_byte,
        finish=items.finish,
        resource_bytes=s.resource_bytes + event.moved_bytes + event.handed,
        resource_busy=s.resource_busy + jnp.where(event.load > 0, event.gap, 0.0),
        held=items.held,
        allocation=alloc,
        events=s.events + 1,
        merged=event.merged,
        rounds=s.rounds + alloc.rounds,
        max_rounds=jnp.maximum(s.max_rounds, alloc.rounds),
        status=event.status,
        trace_time=trace_time,
        trace_load=trace_load,
        queued=items.queued,
    )


def step_view(
    network: Network,
    program: Program,
    s: SimState,
    view: Int[AnyArray, " V"],
    *,
    floor: Float[AnyArray, " N"],
    component: Int[AnyArray, " N"] | None,
    loop: str,
    tolerance: float,
) -> tuple[SimState, Bool[AnyArray, " V"], Bool[AnyArray, " V"]]:
    """`step` on the items `view` alone (ascending ids, N fills) of a state whose scheduling is done: gathers
    them, advances them with `_advance` and scatters them back. The same results as `step` when the view
    holds every item started and not done and every item of `s.allocation.active` (the frontier's view).

    Returns the new state and, per view slot, whether the item is in flight after the event and whether
    it finished at it."""
    get = lambda x, fill: x.at[view].get(mode="fill", fill_value=fill)
    put = lambda x, v: x.at[view].set(v, mode="drop")
    items = _Items(
        get(s.remaining, 0.0),
        get(s.started, True),
        get(s.done, True),
        get(s.first_byte, 0.0),
        get(s.finish, 0.0),
        get(s.held, 0.0),
        None if s.queued is None else get(s.queued, True),
    )
    a = s.allocation
    prior = Allocation(get(a.active, False), get(a.rate, 0.0), get(a.bottleneck, 0), a.load, a.rounds)
    route = get(jnp.asarray(program.route), network.capacity.shape[0])
    capacity = payload_capacity(network)
    items, alloc, event = _advance(
        capacity,
        network,
        route,
        get(program.size, 0.0),
        s,
        items,
        prior,
        get(floor, jnp.inf),
        None if component is None else get(component, 0),
        None,
        loop,
        tolerance,
    )
    full = _Items(
        put(s.remaining, items.remaining),
        put(s.started, items.started),
        put(s.done, items.done),
        put(s.first_byte, items.first_byte),
        put(s.finish, items.finish),
        put(s.held, items.held),
        None if s.queued is None else put(s.queued, items.queued),
    )
    whole = Allocation(
        put(a.active, alloc.active),
        put(a.rate, alloc.rate),
        put(a.bottleneck, alloc.bottleneck),
        alloc.load,
        alloc.rounds,
    )
    new = _commit(s, event, s.start, full, whole)
    return new, items.started & ~items.done, event.finishing


def run(
    network: Network,
    program: Program,
    *,
    max_events: int,
    loop: str = "lax",
    record: int = 0,
    dense: bool | None = None,
    tolerance: float = 0.0,
    state: SimState | None = None,
    until: Int[AnyArray, ""] | None = None,
    frontier: int | tuple[int, ...] | None = None,
) -> SimState:
    """Simulates `program` on `network` until every item is done or `max_events` events have passed.

    One event handles every completion and first byte that falls on the same instant.

    Packetized resources (`network.packets`, static: None compiles the engine without them): items share
    their payload capacity (`payload_capacity`), and an item's first byte, on reaching its route at
    start + route latency, waits `first_byte_wait` at the loads of the allocation in force until then; it
    moves once it has waited (one more event per item that waits: allow items more events).
    Differentiable in capacity, latency, size, release and overhead: forward mode with loop="lax",
    reverse mode with loop="checkpointed" (equinox's checkpointed while loop). At ties between event
    times the result is piecewise smooth: derivatives there are one-sided.

    record: keep the time and per-resource load of the first `record` events (utilization over time).
    dense: sum over resources with an items x resources incidence matrix instead of scatters; default
        when that matrix is small (`maxmin.dense_by_default`). Same answers to rounding either way. Without
        it an event keeps rates per component of the flow-link graph (`maxmin.components`, `reusable`).
    tolerance: 0 (exact, the default) or the fast mode's relative window w: an event at time t also takes
        every completion up to t (1 + w); items finishing inside the window finish at their own time under
        the current rates, and the others take over their bandwidth from the middle of the window's
        completions; a first byte up to w / 2 x t ahead starts now. Each window thus moves a finish by at
        most half its width, early or late, and a run needs a number of events that grows with
        log(makespan / first event) / w instead of with the item count. Bytes are conserved exactly.
        The rates are s-approximately max-min fair with s = SLACK x w (`maxmin.maxmin_rates(slack=)`):
        feasible, and near-equal fair-share levels freeze together, in fewer max-min rounds.
        `merged` counts the completions and first bytes folded in. Static (a Python float).
    state, until: resume from `state` (default `initial_state`) and pause, status OK but items not all done,
        once `until` events have passed (a traced count: one compile serves every slice). netsim.simulate
        runs long simulations in slices this way to report progress between them.

    frontier: buffer sizes A (static: one int, or decreasing ints), or 0 to scan every item at every event.
        While at most A items are started and not done (and at most A finished at the last event and at most
        A wait on those), an event works on those alone: scheduling follows the successors of the items
        that just finished, and rates, times and bytes are computed on a compact view of the active items,
        scattered back into the state. Same results bit for bit; the work per event grows with the smallest
        size that holds the active set, not with the item count (kernels/frontier.py). Default
        `frontier.FRONTIER` for loop="lax" above 2 x FRONTIER[0] items without the incidence matrix, else 0.

    Returns the final SimState; status has MAX_EVENTS set if the bound was hit before the end.
    """
    if not isinstance(tolerance, int | float) or not 0.0 <= tolerance < 1.0:
        raise ValueError(f"netsim.kernels.run: tolerance must be a number in [0, 1), got {tolerance!r}")
    network, program = jax.tree.map(jnp.asarray, (network, program))  # NumPy leaves have no `.at`
    if program.size.dtype != jnp.float64 or network.capacity.dtype != jnp.float64:
        raise ValueError(
            "netsim.kernels.run needs float64 sizes and capacities (simulated time accumulates in float64);"
            f" got {program.size.dtype} and {network.capacity.dtype}: enable x64 with"
            " jax.config.update('jax_enable_x64', True) or run inside `with jax.enable_x64(True):`"
        )
    n_resources = network.capacity.shape[0]
    n_items = program.route.shape[0]
    latency = route_latency(network, program)
    everyone = jnp.ones(program.route.shape[0], bool)  # padding items cross nothing: they add no users
    floor = jax.lax.stop_gradient(rate_floor(payload_capacity(network), program.route, everyone))  # compared
    if dense is None:
        dense = dense_by_default(program.route.shape[0], n_resources)
    # small (dense) programs keep one reuse threshold: their rounds cost little, and the components' loop
    # would add a third to their compile (0.56 -> 0.73 s for pp_1f1b at XLA's -O0, as the tests compile)
    component = None if dense else components(program.route, n_resources)
    matrix = incidence(program.route, n_resources, network.capacity.dtype) if dense else None

    stop = max_events if until is None else jnp.minimum(until, max_events)

    def unfinished(s: SimState) -> Bool[AnyArray, ""]:
        return ~jnp.all(s.done) & (s.events < stop) & (s.status == OK)

    def body(s: SimState) -> SimState:
        return step(
            network,
            program,
            s,
            latency=latency,
            floor=floor,
            component=component,
            dense=matrix,
            loop=loop,
            tolerance=tolerance,
        )

    packetized = network.packets is not None
    s0 = initial_state(program, n_resources, record, packetized=packetized) if state is None else state
    sizes = buffer_sizes(frontier, loop=loop, dense=dense, n_items=n_items)
    if not sizes:
        s = while_loop(unfinished, body, s0, max_steps=None if loop == "lax" else max_events, kind=loop)
    else:  # full events while the active set overflows the frontier, frontier events while it fits, and again
        view_step = functools.partial(
            step_view, network, program, floor=floor, component=component, loop=loop, tolerance=tolerance
        )
        graph = dependency_graph(program.after, program.release, latency)  # once, outside the loop
        kw = dict(full=body, view_step=view_step, graph=graph, sizes=sizes, stop=stop)
        s = jax.lax.while_loop(unfinished, lambda s: frontier_pass(s, **kw), s0)
    paused = (s.events < max_events) & (s.status == OK) if until is not None else False
    late = jnp.where(jnp.all(s.done) | paused, OK, MAX_EVENTS)
    return dataclasses.replace(s, status=(s.status | late).astype(jnp.int32))
