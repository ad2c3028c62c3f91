"""Batched simulation of many same-shaped scenarios in one jitted vmap (size sweeps, ring searches).

Shapes are padded to power-of-two buckets (items, hops, predecessors, resources, batch) and the event
bound is a function of the padded shape only, so repeated sweeps and searches reuse one compile.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import equinox as eqx
import jax
import numpy as np

from .. import kernels
from .._compile import bucket, compile_scenario
from .._scenario import Scenario, ScenarioError
from .._simulate import check_status


@eqx.filter_jit
def _run_batch(network: kernels.Network, program: kernels.Program, max_events: int):
    # the one jit: a batch of (network, program) pairs, the event bound static
    state = jax.vmap(lambda net, prog: kernels.run(net, prog, max_events=max_events))(network, program)
    return state.finish, state.status, state.events


@eqx.filter_jit
def _run_scaled(network: kernels.Network, program: kernels.Program, scales, max_events: int):
    # one program, its sizes (bytes and task work) scaled by each factor: a size sweep
    def one(scale):
        scaled = eqx.tree_at(lambda p: p.size, program, program.size * scale)
        return kernels.run(network, scaled, max_events=max_events)

    state = jax.vmap(one)(scales)
    return state.finish, state.status, state.events


@dataclasses.dataclass(frozen=True)
class Shape:
    """Padded sizes: items (flows + tasks), hops per route, predecessors per item, resources."""

    items: int = 64
    hops: int = 4
    after: int = 2
    resources: int = 8

    def fit(self, scenarios: Sequence[Scenario]) -> Shape:
        """The smallest bucketed shape, at least this one, that holds every scenario."""
        items, hops, after, resources = self.items, self.hops, self.after, self.resources
        for s in scenarios:
            items = max(items, len(s.flows) + len(s.tasks))
            after = max([after] + [len(x.after) for x in (*s.flows, *s.tasks)])
            resources = max(resources, len(s.links) + len({t.device for t in s.tasks}))
            for f in s.flows:
                if f.route is None:
                    raise ScenarioError(f"flow {f.id!r}: batched runs need explicit routes (use Workload.scenario)")
                hops = max(hops, len(f.route))
        return Shape(bucket(items, 64), bucket(hops, 4), bucket(after, 2), bucket(resources, 8))

    @property
    def max_events(self) -> int:
        return 3 * self.items + 16  # the engine's bound for this many items: a function of the shape only


def _compile(scenarios: Sequence[Scenario], shape: Shape):
    return [compile_scenario(s, pad_items=shape.items, pad_hops=shape.hops, pad_after=shape.after,
                             pad_resources=shape.resources) for s in scenarios]


def _stack(trees: list):
    return jax.tree.map(lambda *xs: np.stack(xs), *trees)


def makespans(scenarios: Sequence[Scenario], *, shape: Shape | None = None, width: int | None = None) -> np.ndarray:
    """Makespan (s) of each scenario, simulated in vmapped batches (flows need explicit routes).

    Args:
        scenarios: any number; they are padded to one shape.
        shape: a lower bound on the padded shape (pass the same one to share a compile across calls).
        width: batch size of one vmap; default the number of scenarios rounded up to a power of two.
            The last batch is padded by repeating a scenario, so every batch has this width.
    """
    shape = (shape or Shape()).fit(scenarios)
    width = width or bucket(len(scenarios), 1)
    out = []
    for lo in range(0, len(scenarios), width):
        compiled = _compile(scenarios[lo:lo + width], shape)
        padded = compiled + [compiled[-1]] * (width - len(compiled))
        network = _stack([c.network for c in padded])
        program = _stack([c.program for c in padded])
        with jax.enable_x64(True):
            finish, status, events = jax.device_get(_run_batch(network, program, shape.max_events))
        for st, ev in zip(status[: len(compiled)], events[: len(compiled)], strict=True):
            check_status(int(st), int(ev), shape.max_events)
        out.append(np.asarray(finish[: len(compiled)]).max(axis=1))
    return np.concatenate(out)


def scaled_makespans(scenario: Scenario, scales: np.ndarray) -> np.ndarray:
    """Makespan (s) of `scenario` with every flow's bytes and task's duration times each scale factor."""
    shape = Shape().fit([scenario])
    (compiled,) = _compile([scenario], shape)
    scales = np.asarray(scales, dtype=np.float64)
    width = bucket(len(scales), 16)  # nccl-tests sweeps have a few dozen sizes: one batch shape for most
    padded = np.concatenate([scales, np.full(width - len(scales), scales[-1])])
    with jax.enable_x64(True):
        finish, status, events = jax.device_get(
            _run_scaled(compiled.network, compiled.program, padded, shape.max_events))
    for st, ev in zip(status[: len(scales)], events[: len(scales)], strict=True):
        check_status(int(st), int(ev), shape.max_events)
    return np.asarray(finish[: len(scales)]).max(axis=1)
