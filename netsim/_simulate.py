"""netsim.simulate: validate on the host, run the jitted engine, raise on faults, return a Result."""

from __future__ import annotations

import time

import jax
import numpy as np

from . import kernels
from ._checks import count
from ._compile import Compiled, compile_scenario
from ._errors import check_status, check_tolerance
from ._progress import Progress, _clock
from ._result import Result
from ._runner import check_result, resume, run_compiled, start_state
from ._scenario import Scenario
from ._units import format_quantity
from .kernels import Status

#: progress runs (`simulate(progress=True)`): slices of about SLICE_SECONDS of engine time, the first of
#: FIRST_SLICE events, each next one at most 4x longer (a run whose events take 0.1 s, 1e5 flows exact,
#: reports its rate within seconds, not after its first 4096 events); a line on stderr every PROGRESS_EVERY s
#: from PROGRESS_AFTER s on (short runs stay quiet)
FIRST_SLICE = 16
SLICE_SECONDS = 1.0  # a sync costs ~0.1 ms, negligible at this length
PROGRESS_AFTER = 5.0
PROGRESS_EVERY = 5.0


def _run_reporting(compiled: Compiled, bound: int, record: int, tolerance: float) -> kernels.SimState:
    """Runs a simulation in slices and reports progress between them: no host callback inside the
    engine, so JAX's disk cache keeps the compiled slice."""
    items = compiled.n_flows + compiled.n_tasks
    bar = Progress("netsim", "events", after=PROGRESS_AFTER, every=PROGRESS_EVERY)
    state, size = start_state(compiled, record), FIRST_SLICE
    began = None  # when the first slice ended (the compile is behind): the ETA's clock
    try:
        while True:
            t0 = time.perf_counter()
            until = np.int32(min(bar.done + size, bound))
            state = resume(compiled, state, until, bound, record, tolerance)
            events, done = int(state.events), jax.device_get(state.done)
            if bool(np.all(done)) or events >= bound or int(state.status) != Status.OK:
                return state
            took = time.perf_counter() - t0
            size = max(1, int(size * min(4.0, SLICE_SECONDS / max(took, 1e-3))))
            simulated = format_quantity(float(state.time), "time")
            finished = int(np.sum(done[:items]))
            detail = f"simulated time {simulated}, {finished} of {items} items done"
            if began is None:
                began, first_done = time.perf_counter(), finished
            elif finished > first_done:  # items finish at a roughly steady pace in most runs: a rough ETA
                pace = (time.perf_counter() - began) / (finished - first_done)
                detail += f", ETA ~{_clock(pace * (items - finished))} by items"
            bar.update(events - bar.done, detail)
    finally:
        bar.close()


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
            takes longer than 5 s (`netsim run` does): the run goes in slices of about a second.

    Raises:
        ScenarioError: bad input, naming the field and value.
        SimulationError: the simulation did not finish (unless throw=False); never a silent partial result.
            Also when a finished run fails the post-run check (`check_result`: finite values, bytes
            conserved on every resource), which means a bug or a precision limit, never bad input.
    """
    compiled = scenario if isinstance(scenario, Compiled) else compile_scenario(scenario)
    tolerance = check_tolerance(tolerance)
    bound = compiled.max_events if max_events is None else count(max_events, "max_events")
    t0 = time.perf_counter()
    with jax.enable_x64(True):  # simulated time is float64; scoped, so the caller's config is untouched
        if progress:
            state = jax.device_get(_run_reporting(compiled, bound, bound if record else 0, tolerance))
        else:
            state = jax.device_get(run_compiled(compiled, bound, bound if record else 0, tolerance))
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
