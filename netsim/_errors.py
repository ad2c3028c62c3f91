"""netsim's errors: one base class, one subclass per kind of input, and the reading of a run's Status.

Every error netsim raises for bad input or an unfinished simulation is a `NetsimError`; the command line
catches that one class (exit code 2). Anything else escaping is a bug.
"""

from __future__ import annotations

from .kernels import Status


class NetsimError(Exception):
    """Base of every error netsim raises on purpose; the message names the field and value at fault.

    A message is one line of at most about MAX_MESSAGE characters: a longer one (a 1 MB id, a cycle of
    thousands of tasks) keeps its start, which names the field, and its end, and says what it left out.
    """

    def __str__(self) -> str:
        text = super().__str__()
        if len(text) <= MAX_MESSAGE:
            return text
        head, tail = MAX_MESSAGE * 2 // 3, MAX_MESSAGE // 4
        return f"{text[:head]} ...[{len(text) - head - tail:,} characters left out]... {text[-tail:]}"


#: characters of the longest error message shown whole
MAX_MESSAGE = 2000


class ScenarioError(NetsimError, ValueError):
    """Bad scenario, topology or workload input; the message names the offending field and value."""


class SimulationError(NetsimError, RuntimeError):
    """The engine could not finish the scenario (event bound hit, stall, non-finite values)."""


def check_status(
    status: int, events: int, max_events: int, *, where: str = "simulation", hint: str = ""
) -> None:
    """Raises SimulationError explaining the Status bits of a finished run (and `hint`, a likely cause);
    returns if OK."""
    status = Status(int(status))
    if status == Status.OK:
        return
    reasons = status.reasons(events=int(events), max_events=int(max_events)) + ([hint] if hint else [])
    raise SimulationError(f"{where} did not finish: " + "; ".join(reasons))


def check_tolerance(tolerance: float) -> float:
    """The fast mode's window as a float, or ScenarioError: a number in [0, 0.5]."""
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or not 0.0 <= tolerance <= 0.5:
        raise ScenarioError(f"tolerance: must be a number in [0, 0.5] (0 = exact), got {tolerance!r}")
    return float(tolerance)
