"""Makespans of many collective scenarios (ring search) or one at many sizes (size sweeps), batched."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .._batch import compile_batch, run_batch
from .._compile import Shape, compile_scenario
from .._scenario import Scenario
from ..kernels import Program


def makespans(scenarios: Sequence[Scenario], *, shape: Shape | None = None, width: int | None = None) -> np.ndarray:
    """Makespan (s) of each scenario, simulated in vmapped batches of `width` (default: all at once).

    shape: at least this padded shape (pass the same one to share a compile across calls).
    """
    width = width or len(scenarios)
    out = []
    for lo in range(0, len(scenarios), width):
        batch = compile_batch(scenarios[lo:lo + width], shape=shape)
        out.append(batch.run(width=width)["makespan"])
    return np.concatenate(out)


def scaled_makespans(scenario: Scenario, scales: np.ndarray) -> np.ndarray:
    """Makespan (s) of `scenario` with every flow's bytes and task's duration times each scale factor."""
    compiled = compile_scenario(scenario)
    p = compiled.program
    scales = np.asarray(scales, dtype=np.float64)
    # only the sizes vary: one shared network, routes and dependencies for every point
    program = Program(p.route, scales[:, None] * p.size[None, :], p.release, p.overhead, p.after)
    return run_batch(compiled.network, program, max_events=compiled.max_events, width=16)["makespan"]
