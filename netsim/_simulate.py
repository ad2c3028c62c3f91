"""netsim.simulate: validate on the host, run the jitted engine, raise on faults, return a Result."""

from __future__ import annotations

import time

import equinox as eqx
import jax

from . import kernels
from ._compile import Compiled, compile_scenario
from ._errors import check_status, check_tolerance
from ._result import Result
from ._scenario import Scenario


@eqx.filter_jit
def _run(network: kernels.Network, program: kernels.Program, max_events: int, record: int,
         tolerance: float) -> kernels.SimState:
    # the one jit: max_events, record and tolerance are Python numbers, hence static
    return kernels.run(network, program, max_events=max_events, record=record, tolerance=tolerance)


def simulate(scenario: Scenario | Compiled, *, max_events: int | None = None, record: bool = False,
             throw: bool = True, tolerance: float = 0.0) -> Result:
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

    Raises:
        ScenarioError: bad input, naming the field and value.
        SimulationError: the simulation did not finish (unless throw=False); never a silent partial result.
    """
    compiled = scenario if isinstance(scenario, Compiled) else compile_scenario(scenario)
    tolerance = check_tolerance(tolerance)
    bound = compiled.max_events if max_events is None else int(max_events)
    t0 = time.perf_counter()
    with jax.enable_x64(True):  # simulated time is float64; scoped, so the caller's config is untouched
        state = jax.device_get(_run(compiled.network, compiled.program, bound, bound if record else 0, tolerance))
    wall = time.perf_counter() - t0
    if throw:
        check_status(int(state.status), int(state.events), bound)
    return Result.from_state(compiled, state, wall)
