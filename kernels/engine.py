"""Event-driven flow-level simulation to completion, as one loop over events."""

from __future__ import annotations

import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
from jaxtyping import Bool, Float, Int

from ._types import MAX_EVENTS, NONFINITE, OK, STALLED, AnyArray, Network, Program, SimState
from .maxmin import (
    append_row,
    dense_by_default,
    empty_allocation,
    gather,
    incidence,
    maxmin_rates,
    rate_floor,
    to_resources,
)

# Items whose projected finish lies within this relative distance of the next event finish with it:
# simultaneous completions then cost one event, not a cascade of residue events (SimGrid's precision/work-amount).
TIE = 1e-12


def route_latency(network: Network, program: Program) -> Float[AnyArray, " N"]:
    """s from start to first byte: the route's latencies plus the item's fixed overhead."""
    return jnp.sum(gather(network.latency, program.route, 0.0), axis=1) + program.overhead


def initial_state(program: Program, n_resources: int, record: int = 0) -> SimState:
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
    )


def step(
    network: Network,
    program: Program,
    s: SimState,
    *,
    latency: Float[AnyArray, " N"],
    floor: Float[AnyArray, " N"],
    dense: Float[AnyArray, "N R"] | None = None,
    loop: str = "lax",
    tolerance: float = 0.0,
) -> SimState:
    """Schedules what became ready at s.time, allocates rates, and advances to the next event.

    latency: `route_latency`; floor: `rate_floor` of every routed item; dense: None or `incidence` (all
    fixed for a run, so computed once); tolerance: see `run`.
    """
    t = s.time
    # 1. Schedule every item whose predecessors are done. Its start is exactly max(release, last
    #    predecessor's finish) and its first byte follows after the route latency: both are known now, so
    #    a release needs no event of its own, and no drift comes from the event clock.
    pred_done = jnp.all(append_row(s.done, True)[program.after], axis=1)
    pred_finish = jnp.max(append_row(s.finish, 0.0)[program.after], axis=1)
    begin = ~s.started & pred_done
    start = jnp.where(begin, jnp.maximum(program.release, pred_finish), s.start)
    first_byte = jnp.where(begin, start + latency, s.first_byte)
    started = s.started | begin
    # the fast mode lets a first byte up to half a window ahead start now, as it lets completions fold in
    horizon = t + 0.5 * tolerance * jnp.abs(t) if tolerance else t
    moving = started & ~s.done & (first_byte <= horizon)

    # 2. Max-min fair rates of the items that are moving bytes. Most events change few of them: items
    #    whose last rate is provably still fair keep it, and only the rest are filled again.
    alloc = maxmin_rates(
        network.capacity, program.route, moving, prior=s.allocation, floor=floor, dense=dense, loop=loop
    )
    rate = alloc.rate

    # 3. Next event: a completion or a first byte (release + latency expiry).
    positive = rate > 0
    t_done = jnp.where(moving & positive, t + s.remaining / jnp.where(positive, rate, 1.0), jnp.inf)
    t_done = jnp.where(moving & (s.remaining <= 0), t, t_done)
    t_first = jnp.where(started & ~s.done & ~moving, first_byte, jnp.inf)
    t_next = jnp.minimum(jnp.min(t_done), jnp.min(t_first))
    stalled = ~jnp.isfinite(t_next)
    t_next = jnp.where(stalled, t, t_next)
    gap = t_next - t

    # 4. Advance: move bytes, finish what completes at t_next (ties within TIE finish together).
    finishing = moving & (t_done <= t_next + TIE * jnp.abs(t_next))
    finish = jnp.where(finishing, t_next, s.finish)
    moved_bytes = alloc.load * gap
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
        finish = jnp.where(finishing, t_done, s.finish)
        # load x gap counts each finishing item's rate to t_end: too much if it finished before, too little after
        early = jnp.where(finishing, rate * (t_end - t_done), 0.0)
        gap = t_end - t
        moved_bytes = alloc.load * gap - to_resources(early, program.route, network.capacity.shape[0], dense)
        held_for = jnp.where(finishing, t_done - t, gap)[:, None]
        t_next = t_end
    remaining = jnp.where(moving, jnp.maximum(s.remaining - rate * gap, 0.0), s.remaining)
    remaining = jnp.where(finishing, 0.0, remaining)
    n_hops = program.route.shape[1]
    on_bottleneck = jnp.arange(n_hops, dtype=alloc.bottleneck.dtype)[None, :] == alloc.bottleneck[:, None]
    held = s.held + jnp.where(moving[:, None] & on_bottleneck, held_for, 0.0)
    bad = ~jnp.all(jnp.isfinite(remaining)) | ~jnp.isfinite(t_next)
    status = s.status | jnp.where(stalled, STALLED, OK) | jnp.where(bad, NONFINITE, OK)
    trace_time, trace_load = s.trace_time, s.trace_load
    if trace_time.shape[0]:  # recording (static): keep this interval's start and loads
        trace_time = trace_time.at[s.events].set(t, mode="drop")
        trace_load = trace_load.at[s.events].set(alloc.load, mode="drop")
    return SimState(
        time=t_next,
        remaining=remaining,
        started=started,
        done=s.done | finishing,
        start=start,
        first_byte=first_byte,
        finish=finish,
        resource_bytes=s.resource_bytes + moved_bytes,
        resource_busy=s.resource_busy + jnp.where(alloc.load > 0, gap, 0.0),
        held=held,
        allocation=alloc,
        events=s.events + 1,
        merged=merged,
        rounds=s.rounds + alloc.rounds,
        max_rounds=jnp.maximum(s.max_rounds, alloc.rounds),
        status=status.astype(jnp.int32),
        trace_time=trace_time,
        trace_load=trace_load,
    )


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
) -> SimState:
    """Simulates `program` on `network` until every item is done or `max_events` events have passed.

    One event handles every completion and first byte that falls on the same instant.
    Differentiable in capacity, latency, size, release and overhead: forward mode with loop="lax",
    reverse mode with loop="checkpointed" (equinox's checkpointed while loop). At ties between event
    times the result is piecewise smooth: derivatives there are one-sided.

    record: keep the time and per-resource load of the first `record` events (utilization over time).
    dense: sum over resources with an items x resources incidence matrix instead of scatters; default
        when that matrix is small (`maxmin.dense_by_default`). Same answers to rounding either way.
    tolerance: 0 (exact, the default) or the fast mode's relative window w: an event at time t also takes
        every completion up to t (1 + w); items finishing inside the window finish at their own time under
        the current rates, and the others take over their bandwidth from the middle of the window's
        completions; a first byte up to w / 2 x t ahead starts now. Each window thus moves a finish by at
        most half its width, early or late, and a run needs a number of events that grows with
        log(makespan / first event) / w instead of with the item count. Bytes are conserved exactly.
        `merged` counts the completions and first bytes folded in. Static (a Python float).
    state, until: resume from `state` (default `initial_state`) and pause, status OK but items not all done,
        once `until` events have passed (a traced count: one compile serves every slice). netsim.simulate
        runs long simulations in slices this way to report progress between them.

    Returns the final SimState; status has MAX_EVENTS set if the bound was hit before the end.
    """
    if not isinstance(tolerance, int | float) or not 0.0 <= tolerance < 1.0:
        raise ValueError(f"netsim.kernels.run: tolerance must be a number in [0, 1), got {tolerance!r}")
    if program.size.dtype != jnp.float64 or network.capacity.dtype != jnp.float64:
        raise ValueError(
            "netsim.kernels.run needs float64 sizes and capacities (simulated time accumulates in float64);"
            f" got {program.size.dtype} and {network.capacity.dtype}: enable x64 with"
            " jax.config.update('jax_enable_x64', True) or run inside `with jax.enable_x64(True):`"
        )
    n_resources = network.capacity.shape[0]
    latency = route_latency(network, program)
    everyone = jnp.ones(program.route.shape[0], bool)  # padding items cross nothing: they add no users
    floor = jax.lax.stop_gradient(rate_floor(network.capacity, program.route, everyone))  # only compared
    if dense is None:
        dense = dense_by_default(program.route.shape[0], n_resources)
    matrix = incidence(program.route, n_resources, network.capacity.dtype) if dense else None

    stop = max_events if until is None else jnp.minimum(until, max_events)

    def unfinished(s: SimState) -> Bool[AnyArray, ""]:
        return ~jnp.all(s.done) & (s.events < stop) & (s.status == OK)

    def body(s: SimState) -> SimState:
        return step(
            network, program, s, latency=latency, floor=floor, dense=matrix, loop=loop, tolerance=tolerance
        )

    s = eqxi.while_loop(
        unfinished,
        body,
        initial_state(program, n_resources, record) if state is None else state,
        max_steps=None if loop == "lax" else max_events,
        kind=loop,
    )
    paused = (s.events < max_events) & (s.status == OK) if until is not None else False
    late = jnp.where(jnp.all(s.done) | paused, OK, MAX_EVENTS)
    return eqx.tree_at(lambda x: x.status, s, (s.status | late).astype(jnp.int32))
