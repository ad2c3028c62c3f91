"""Batches: many scenarios laid out at one padded shape, their kernel inputs stacked.

Sweeps, collective size sweeps, ring search, calibration and the job simulator lay out their scenarios
with `compile_batch` (or `Compiled.padded`) and run them with `netsim.run_batch` (netsim._runner).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import jax
import numpy as np

from ._compile import Compiled, Shape, compile_scenario, event_bound
from ._errors import ScenarioError
from ._runner import BatchRun, run_batch
from ._scenario import Scenario
from .kernels import Network, Program


@dataclasses.dataclass(frozen=True)
class Batch:
    """Scenarios compiled to one shape, with their kernel inputs stacked along a leading batch axis."""

    compiled: tuple[Compiled, ...]
    network: Network  # leaves [B, R]
    program: Program  # leaves [B, N, ...]

    @property
    def shape(self) -> Shape:
        return self.compiled[0].shape

    @property
    def max_events(self) -> int:
        return event_bound(self.shape, self.network)

    def run(self, **kwargs) -> BatchRun:
        """`run_batch` on this batch (keywords as there)."""
        return run_batch(self.network, self.program, max_events=self.max_events, **kwargs)


def compile_batch(scenarios: Sequence[Scenario | Compiled], *, shape: Shape | None = None) -> Batch:
    """Validates every scenario and lays them out at one shape: the smallest that holds them all, at least
    `shape` (pass the same shape to later batches to reuse one compile).

    Raises:
        ScenarioError: naming the scenario (by position) and the field at fault.
    """
    if isinstance(scenarios, Scenario | Compiled) or not isinstance(scenarios, Sequence):
        raise ScenarioError(f"scenarios: expected a list of scenarios, got {type(scenarios).__name__}")
    if not scenarios:
        raise ScenarioError("scenarios: an empty batch")
    if shape is not None and not isinstance(shape, Shape):
        raise ScenarioError(f"shape: expected a netsim.Shape, got {type(shape).__name__}")
    compiled = []
    for i, s in enumerate(scenarios):
        try:
            compiled.append(s if isinstance(s, Compiled) else compile_scenario(s))
        except ScenarioError as e:
            raise ScenarioError(f"scenarios[{i}]: {e}") from None
    common = functools.reduce(Shape.__or__, (c.shape for c in compiled), shape or Shape())
    compiled = [c.padded(common) for c in compiled]
    if any(c.network.packets is not None for c in compiled):  # one tree structure: fluid Packets for the rest
        compiled = [c.with_packets() for c in compiled]
    return Batch(tuple(compiled), stack([c.network for c in compiled]), stack([c.program for c in compiled]))


def stack(trees: Sequence) -> object:
    """Stacks equal-shaped pytrees (e.g. Network or Program of several scenarios) along a new batch axis.

    Raises:
        ScenarioError: no trees, or trees of different structures or shapes (compile_batch pads scenarios
            to one shape first).
    """
    if not isinstance(trees, Sequence) or not trees:
        raise ScenarioError(f"stack: expected a non-empty list of pytrees, got {trees!r:.80}")
    try:
        return jax.tree.map(lambda *xs: np.stack(xs), *trees)
    except ValueError as e:  # numpy's "all input arrays must have the same shape", or another structure
        raise ScenarioError(
            f"stack: the trees differ in structure or shape ({e}); compile_batch pads to one shape"
        ) from None
