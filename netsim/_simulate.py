"""netsim.simulate: validate on the host, run the jitted engine, raise on faults, return a Result."""

from __future__ import annotations

import sys
import time

import equinox as eqx
import jax

from . import kernels
from ._compile import Compiled, compile_scenario
from ._errors import check_status, check_tolerance
from ._result import Result
from ._scenario import Scenario
from ._units import format_quantity


@eqx.filter_jit
def _run(
    network: kernels.Network,
    program: kernels.Program,
    max_events: int,
    record: int,
    tolerance: float,
    progress: bool,
) -> kernels.SimState:
    # the one jit: max_events, record, tolerance and progress are Python values, hence static
    return kernels.run(
        network,
        program,
        max_events=max_events,
        record=record,
        tolerance=tolerance,
        progress=_Progress.report if progress else None,
    )


class _Progress:
    """Progress lines on stderr for long runs: the first after PROGRESS_AFTER s, then every few seconds."""

    AFTER = 5.0  # s: short runs stay quiet
    EVERY = 5.0
    started = 0.0
    last = 0.0
    items = 0

    @classmethod
    def begin(cls, items: int) -> None:
        cls.started = cls.last = time.perf_counter()
        cls.items = items

    @classmethod
    def report(cls, events, sim_time, done) -> None:
        now = time.perf_counter()
        if now - cls.started < cls.AFTER or now - cls.last < cls.EVERY:
            return
        cls.last = now
        wall = now - cls.started
        print(
            f"netsim: {int(events)} events ({int(events) / wall:.0f}/s), simulated time "
            f"{format_quantity(float(sim_time), 'time')}, {int(done)} of {cls.items} items done, "
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
            takes longer than 5 s (`netsim run` does).

    Raises:
        ScenarioError: bad input, naming the field and value.
        SimulationError: the simulation did not finish (unless throw=False); never a silent partial result.
    """
    compiled = scenario if isinstance(scenario, Compiled) else compile_scenario(scenario)
    tolerance = check_tolerance(tolerance)
    bound = compiled.max_events if max_events is None else int(max_events)
    t0 = time.perf_counter()
    _Progress.begin(compiled.n_flows + compiled.n_tasks)
    with jax.enable_x64(True):  # simulated time is float64; scoped, so the caller's config is untouched
        state = jax.device_get(
            _run(compiled.network, compiled.program, bound, bound if record else 0, tolerance, progress)
        )
    wall = time.perf_counter() - t0
    if throw:
        check_status(int(state.status), int(state.events), bound)
    return Result.from_state(compiled, state, wall)
