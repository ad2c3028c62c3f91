"""netsim.simulate: validate on the host, run the jitted engine, raise on faults, return a Result."""

from __future__ import annotations

import sys
import time

import jax
import numpy as np

from . import kernels
from ._cache import executable
from ._compile import Compiled, compile_scenario
from ._errors import SimulationError, check_status, check_tolerance
from ._result import Result
from ._scenario import Scenario
from ._units import format_quantity
from .kernels import Status
from .kernels.engine import TIE, initial_state

#: relative tolerance of the post-run byte balance (`check_result`)
CONSERVATION_RTOL = 1e-9


def _whole(network: kernels.Network, program: kernels.Program, **options) -> kernels.SimState:
    return kernels.run(network, program, **options)


def _start(
    program: kernels.Program, *, n_resources: int, record: int, packetized: bool = False
) -> kernels.SimState:
    return initial_state(program, n_resources, record, packetized=packetized)


def _next(network, program, state: kernels.SimState, until, **options) -> kernels.SimState:
    return kernels.run(network, program, state=state, until=until, **options)


def _state_tree(network: kernels.Network, program: kernels.Program, record: int):
    """The pytree structure of the engine's state, without tracing the engine."""
    n_resources, packetized = network.capacity.shape[-1], network.packets is not None
    return jax.tree.structure(
        jax.eval_shape(lambda p: initial_state(p, n_resources, record, packetized=packetized), program)
    )


def _run(
    network: kernels.Network, program: kernels.Program, max_events: int, record: int, tolerance: float
) -> kernels.SimState:
    # the one compile per shape and options (max_events, record, tolerance), kept in memory and, when
    # enabled, in the executable cache (netsim._cache)
    options = {"max_events": int(max_events), "record": int(record), "tolerance": float(tolerance)}
    args = (network, program)
    return executable(_whole, args, options, lambda: _state_tree(network, program, record))(*args)


def _initial(network: kernels.Network, program: kernels.Program, record: int) -> kernels.SimState:
    # the engine's start state, from a small executable of its own: the slices then need one large one
    options = {"n_resources": network.capacity.shape[-1], "record": int(record)}
    if network.packets is not None:
        options["packetized"] = True
    return executable(_start, (program,), options, lambda: _state_tree(network, program, record))(program)


def _resume(
    network: kernels.Network,
    program: kernels.Program,
    state: kernels.SimState,
    until: np.ndarray,
    max_events: int,
    record: int,
    tolerance: float,
) -> kernels.SimState:
    # `until` is an argument: every slice of a run (and of any run of this shape) shares one executable
    options = {"max_events": int(max_events), "record": int(record), "tolerance": float(tolerance)}
    args = (network, program, state, until)
    return executable(_next, args, options, lambda: jax.tree.structure(state))(*args)


class Progress:
    """Runs a simulation in slices of about SLICE seconds and prints a line on stderr between them, the first
    after AFTER s: no host callback inside the engine, so JAX's disk cache keeps the compiled slice."""

    AFTER = 5.0  # s: short runs stay quiet
    EVERY = 5.0
    SLICE = 1.0  # s of engine time per slice: a sync costs ~0.1 ms, negligible at this length
    FIRST = 4096  # events in the first slice

    @classmethod
    def run(cls, compiled: Compiled, bound: int, record: int, tolerance: float) -> kernels.SimState:
        network, program = compiled.network, compiled.program
        started = last = time.perf_counter()
        state, events, size = _initial(network, program, record), 0, cls.FIRST
        while True:
            t0 = time.perf_counter()
            until = np.int32(min(events + size, bound))
            state = _resume(network, program, state, until, bound, record, tolerance)
            events, done = int(state.events), bool(np.all(jax.device_get(state.done)))
            if done or events >= bound or int(state.status) != Status.OK:
                return state
            took = time.perf_counter() - t0
            size = max(64, int(size * min(4.0, cls.SLICE / max(took, 1e-3))))
            now = time.perf_counter()
            if now - started >= cls.AFTER and now - last >= cls.EVERY:
                last, wall = now, now - started
                items = compiled.n_flows + compiled.n_tasks
                finished = int(np.sum(jax.device_get(state.done)[:items]))
                print(
                    f"netsim: {events} events ({events / wall:.0f}/s), simulated time "
                    f"{format_quantity(float(state.time), 'time')}, {finished} of {items} items done, "
                    f"{wall:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )


def simulate(
    scenario: Scenario | Compiled,
    *,
    max_events: int | None = None,
    record: bool = False,
    throw: bool = True,
    tolerance: float = 0.0,
    progress: bool = False,
) -> Result:
    """Simulates a scenario to completion with exact max-min fair sharing.

    Args:
        scenario: a Scenario (validated here, before anything is traced) or the output of
            netsim.compile_scenario.
        max_events: bound on the event loop; default the shape's (`Shape.max_events`), which no valid
            scenario exceeds.
        record: keep every event's per-link load, for utilization over time (`Result.link_timeline`);
            memory grows as events x links.
        throw: raise SimulationError if the run did not finish; with False, return the partial Result
            (unfinished items have infinite finish times; `Result.status` says why).
        tolerance: 0 for the exact engine (the default); a relative time window, e.g. 1e-2, for the fast
            mode that merges the events inside each window (see `netsim.kernels.run`; errors measured in
            benchmarks/RESULTS.md). `Result.merged` counts the events it folded.
        progress: print progress lines (events, simulated time, items done) on stderr when the run
            takes longer than 5 s (`netsim run` does): the run goes in slices of about a second (`Progress`).

    Raises:
        ScenarioError: bad input, naming the field and value.
        SimulationError: the simulation did not finish (unless throw=False); never a silent partial result.
            Also when a finished run fails the post-run check (`check_result`: finite values, bytes
            conserved on every resource), which means a bug or a precision limit, never bad input.
    """
    compiled = scenario if isinstance(scenario, Compiled) else compile_scenario(scenario)
    tolerance = check_tolerance(tolerance)
    bound = compiled.max_events if max_events is None else int(max_events)
    t0 = time.perf_counter()
    with jax.enable_x64(True):  # simulated time is float64; scoped, so the caller's config is untouched
        if progress:
            state = jax.device_get(Progress.run(compiled, bound, bound if record else 0, tolerance))
        else:
            state = jax.device_get(
                _run(compiled.network, compiled.program, bound, bound if record else 0, tolerance)
            )
    wall = time.perf_counter() - t0
    if throw:
        check_status(int(state.status), int(state.events), bound, hint=_unbounded_queue(compiled, state))
    if int(state.status) == Status.OK:
        check_result(compiled, state)
    return Result.from_state(compiled, state, wall)


def _unbounded_queue(compiled: Compiled, state: kernels.SimState) -> str:
    """Why a run with packetized links may have stalled: a first byte that waits forever, in the queue of
    a saturated link whose buffer is unbounded (M/G/1 at utilization 1); '' otherwise."""
    waiting = (
        np.isinf(np.asarray(state.first_byte)[compiled.flow_slice])
        & np.asarray(state.started)[compiled.flow_slice]
    )
    if not waiting.any():
        return ""
    unbounded = [x.id for x in compiled.scenario.links if x.packetized and x.buffer_bytes is None]
    if not unbounded:
        return ""
    flow = compiled.scenario.flows[int(np.argmax(waiting))].id
    return (
        f"flow {flow!r} waits forever for its first byte: a packetized link on its route is saturated"
        f" and has an unbounded queue (no buffer_bytes: {', '.join(map(repr, unbounded[:4]))}); give"
        " those links buffer_bytes, the queue depth that bounds the wait"
    )


def check_result(compiled: Compiled, state: kernels.SimState) -> None:
    """The post-run check of a finished run (host NumPy, O(items x hops)): every time, byte count and busy
    time is finite, and every resource carried exactly the bytes of the items crossing it: a link or
    shared resource the sizes of the flows routed through it, a device its tasks' durations.

    The balance holds to CONSERVATION_RTOL relative, plus what the engine's tie rule may leave unmoved:
    items finishing within TIE x t of an event finish with it, each short of at most capacity x TIE x
    makespan on a resource.

    Raises:
        SimulationError: naming the first item or resource at fault; it means a bug in netsim or a
            scenario past float64's precision (e.g. nanosecond flows after 1e6 s), never bad input.
    """
    n_items = compiled.n_flows + compiled.n_tasks
    ids = [x.id for x in (*compiled.scenario.flows, *compiled.scenario.tasks)]
    for name in ("start", "first_byte", "finish"):
        values = np.asarray(getattr(state, name))[:n_items]
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            kind = "flow" if bad[0] < compiled.n_flows else "task"
            raise SimulationError(
                f"post-run check: {kind} {ids[bad[0]]!r} has {name} = {float(values[bad[0]])} in a finished run"
            )
    resources = (
        [x.id for x in compiled.scenario.links]
        + [r.id for r in compiled.scenario.shared]
        + list(compiled.devices)
    )
    n_res = len(resources)
    carried = np.asarray(state.resource_bytes)[:n_res]
    busy = np.asarray(state.resource_busy)[:n_res]
    for name, values in (("bytes carried", carried), ("busy time", busy)):
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            raise SimulationError(
                f"post-run check: resource {resources[bad[0]]!r} has {name} = {float(values[bad[0]])} in a finished run"
            )
    route = np.asarray(compiled.program.route)[:n_items]  # padded hops point past the real resources
    size = np.asarray(compiled.program.size)[:n_items]
    real = route < n_res
    expected = np.bincount(
        route[real], weights=np.broadcast_to(size[:, None], route.shape)[real], minlength=n_res
    )
    crossing = np.bincount(route[real], minlength=n_res)
    makespan = float(np.max(np.asarray(state.finish)[:n_items]))
    capacity = np.asarray(compiled.network.capacity)[:n_res]
    slack = CONSERVATION_RTOL * expected + crossing * capacity * TIE * makespan
    off = np.abs(carried - expected) > slack
    if off.any():
        j = int(np.argmax(np.where(off, np.abs(carried - expected) - slack, -np.inf)))
        unit = "s of work" if j >= n_res - len(compiled.devices) else "bytes"
        error = abs(carried[j] - expected[j]) / max(expected[j], 1e-300)
        raise SimulationError(
            f"post-run check: resource {resources[j]!r} carried {float(carried[j])!r} {unit}, but the items "
            f"crossing it total {float(expected[j])!r} (relative error {error:.3g}); a bug in netsim or a "
            "scenario past float64's precision: please report it"
        )
