"""netsim.simulate: validate on the host, run the jitted engine, raise on faults, return a Result."""

from __future__ import annotations

import sys
import time

import jax
import numpy as np

from . import kernels
from ._compile import Compiled, compile_scenario
from ._errors import check_status, check_tolerance
from ._result import Result
from ._runner import check_result, resume, run_compiled, start_state
from ._scenario import Scenario
from ._units import format_quantity
from .kernels import Status


class Progress:
    """Runs a simulation in slices of about SLICE seconds and prints a line on stderr between them, the first
    after AFTER s: no host callback inside the engine, so JAX's disk cache keeps the compiled slice."""

    AFTER = 5.0  # s: short runs stay quiet
    EVERY = 5.0
    SLICE = 1.0  # s of engine time per slice: a sync costs ~0.1 ms, negligible at this length
    FIRST = 4096  # events in the first slice

    @classmethod
    def run(cls, compiled: Compiled, bound: int, record: int, tolerance: float) -> kernels.SimState:
        started = last = time.perf_counter()
        state, events, size = start_state(compiled, record), 0, cls.FIRST
        while True:
            t0 = time.perf_counter()
            until = np.int32(min(events + size, bound))
            state = resume(compiled, state, until, bound, record, tolerance)
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
            state = jax.device_get(run_compiled(compiled, bound, bound if record else 0, tolerance))
    wall = time.perf_counter() - t0
    if throw:
        check_status(int(state.status), int(state.events), bound)
    if int(state.status) == Status.OK:
        check_result(compiled, state)
    return Result.from_state(compiled, state, wall)
