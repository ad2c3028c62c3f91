"""Batches: many scenarios at one padded shape, run as one jitted vmap of the engine, sharded over devices.

The one place where netsim batches simulations: sweeps, collective size sweeps, ring search, calibration
and the job simulator all lay out their scenarios with `compile_batch` (or `Compiled.padded`) and run
them with `run_batch`. Which inputs vary per point is read from the arrays themselves (`batch_axes`): a
leaf with one more dimension than the engine takes is batched, any other leaf is shared by every point,
so one program can run under many networks (a bandwidth sweep) or one network under many programs.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from . import kernels
from ._compile import Compiled, Shape, bucket, compile_scenario, event_bound
from ._errors import ScenarioError, SimulationError, check_tolerance
from ._scenario import Scenario
from .kernels import Network, Program, SimState, Status

#: per-point outputs `run_batch` can keep: SimState fields, and "makespan" (the last finish)
OUTPUTS = ("makespan", *(f.name for f in dataclasses.fields(SimState) if f.name not in ("status", "events")))
# dimensions of one scenario's leaves, as kernels.run takes them
_NDIM = {"capacity": 1, "latency": 1, "route": 2, "size": 1, "release": 1, "overhead": 1, "after": 2}


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
    if not scenarios:
        raise ScenarioError("scenarios: an empty batch")
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
    """Stacks equal-shaped pytrees (e.g. Network or Program of several scenarios) along a new batch axis."""
    return jax.tree.map(lambda *xs: np.stack(xs), *trees)


def batch_axes(network: Network, program: Program) -> tuple[Network, Program]:
    """vmap's in_axes for (network, program): 0 for a leaf with a leading batch axis, None for a shared one.

    For use under `jax.vmap(kernels.run, in_axes=batch_axes(...))` in traced code (calibration losses);
    `run_batch` applies the same rule.
    """

    def axis(x, ndim: int, name: str):
        if np.ndim(x) == ndim + 1:
            return 0
        if np.ndim(x) == ndim:
            return None
        raise ScenarioError(
            f"{name}: expected {ndim} dimensions (shared) or {ndim + 1} (batched), got shape {np.shape(x)}"
        )

    net = [axis(getattr(network, f), _NDIM[f], f"network.{f}") for f in ("capacity", "latency")]
    if network.packets is not None:
        net += [
            axis(getattr(network.packets, f), 1, f"network.packets.{f}")
            for f in ("size", "header", "buffer", "variability")
        ]
    prog = [
        axis(getattr(program, f), _NDIM[f], f"program.{f}")
        for f in ("route", "size", "release", "overhead", "after")
    ]
    # the containers hold axes, not arrays: rebuild them from their tree structure, not their __init__
    return jax.tree.unflatten(jax.tree.structure(network), net), jax.tree.unflatten(
        jax.tree.structure(program), prog
    )


@dataclasses.dataclass(frozen=True)
class BatchRun:
    """Per-point results of `run_batch`, as NumPy arrays with the batch axis first."""

    status: np.ndarray  # [B] int32 Status bits
    events: np.ndarray  # [B]
    max_events: int
    outputs: dict[str, np.ndarray]  # the kept outputs, by name

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self.outputs:
            raise KeyError(f"{name!r} was not kept; kept: {sorted(self.outputs)} (run_batch's keep=)")
        return self.outputs[name]

    @property
    def ok(self) -> np.ndarray:
        return self.status == Status.OK

    def check(self, where: str = "batch") -> BatchRun:
        """Raises SimulationError naming the points that did not finish, with the reasons; returns self."""
        bad = np.flatnonzero(~self.ok)
        if bad.size:
            i = int(bad[0])
            reasons = Status(int(self.status[i])).reasons(
                events=int(self.events[i]), max_events=self.max_events
            )
            raise SimulationError(
                f"{where}: {bad.size} of {self.status.size} points did not finish; point {i}: "
                + "; ".join(reasons)
            )
        return self


def run_batch(
    network: Network,
    program: Program,
    *,
    max_events: int,
    keep: Sequence[str] = ("makespan",),
    throw: bool = True,
    devices: Sequence[jax.Device] | None = None,
    width: int | None = None,
    loop: str = "lax",
    tolerance: float = 0.0,
) -> BatchRun:
    """Runs the engine on every point of a batch in one jitted vmap, sharded over `devices`.

    Args:
        network, program: kernel inputs; leaves with a leading batch axis vary per point, the others are
            shared (see `batch_axes`). Every batched leaf must have the same batch size B.
        max_events: the engine's event bound (`Shape.max_events` of the batch's shape).
        keep: per-point outputs besides status and events (see OUTPUTS).
        throw: raise SimulationError if any point did not finish; else read `BatchRun.status`.
        devices: default all devices (of every process under jax.distributed).
        width: pad the batch to this many points (repeating the last) so that batches of different sizes
            share one compile; default B rounded up to a bucket. Rounded up to a multiple of the devices.
        loop: the engine's loop kind ("lax"; "checkpointed" for reverse-mode derivatives).
        tolerance: 0 (exact) or the fast mode's relative window (see `netsim.simulate`).
    """
    keep = tuple(keep)
    tolerance = check_tolerance(tolerance)
    unknown = [k for k in keep if k not in OUTPUTS]
    if unknown:
        raise ScenarioError(f"keep: unknown output(s) {unknown}; known: {list(OUTPUTS)}")
    axes = batch_axes(network, program)
    # the inputs' structure reads the axes (None: a shared leaf, or no packets at all)
    treedef = jax.tree.structure((network, program))
    leaves, leaf_axes = treedef.flatten_up_to((network, program)), treedef.flatten_up_to(axes)
    sizes = {np.shape(x)[0] for x, ax in zip(leaves, leaf_axes, strict=True) if ax == 0}
    if len(sizes) != 1:
        raise ScenarioError(
            f"batch: the batched inputs disagree on the batch size ({sorted(sizes)})"
            if sizes
            else "batch: no input has a batch axis"
        )
    (n,) = sizes
    devices = tuple(jax.devices() if devices is None else devices)
    n_dev = len(devices)
    width = max(n, width or bucket(n, 1, per_octave=2))
    width = -(-width // n_dev) * n_dev

    def pad(x, ax):
        x = np.asarray(x)
        if ax is None or width == n:
            return x
        return np.concatenate([x, np.repeat(x[-1:], width - n, axis=0)])

    net, prog = treedef.unflatten([pad(x, ax) for x, ax in zip(leaves, leaf_axes, strict=True)])
    fn, shardings = _runner(max_events, keep, loop, tolerance, axes, devices, treedef)
    with jax.enable_x64(True):  # simulated time is float64 (inputs too); scoped: the caller's config stays
        args = jax.tree.map(
            lambda x, s: jax.make_array_from_callback(x.shape, s, lambda idx, x=x: x[idx]),
            (net, prog),
            shardings,
        )
        out = fn(*args)
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        out = multihost_utils.process_allgather(out, tiled=True)
    out = {k: np.asarray(v)[:n] for k, v in jax.device_get(out).items()}
    run = BatchRun(out.pop("status").astype(np.int32), out.pop("events"), int(max_events), out)
    return run.check() if throw else run


@functools.lru_cache(maxsize=32)
def _runner(
    max_events: int,
    keep: tuple[str, ...],
    loop: str,
    tolerance: float,
    axes: tuple[Network, Program],
    devices: tuple[jax.Device, ...],
    treedef,
):
    """The jitted, sharded batch function and its input shardings (cached: batches of one shape, kept
    outputs and batching pattern share one compile)."""

    def one(network: Network, program: Program) -> dict[str, jax.Array]:
        s = kernels.run(network, program, max_events=max_events, loop=loop, tolerance=tolerance)
        out = {"status": s.status, "events": s.events}
        for k in keep:
            out[k] = jnp.max(s.finish) if k == "makespan" else getattr(s, k)
        return out

    mesh = Mesh(np.array(devices), ("batch",))
    specs = treedef.unflatten([P("batch") if ax == 0 else P() for ax in treedef.flatten_up_to(axes)])
    # check_vma=False: the engine's loops start from replicated constants and communicate nothing,
    # which the varying-axes check would reject
    mapped = jax.shard_map(
        jax.vmap(one, in_axes=axes), mesh=mesh, in_specs=specs, out_specs=P("batch"), check_vma=False
    )
    shardings = jax.tree.map(
        lambda spec: NamedSharding(mesh, spec), specs, is_leaf=lambda x: isinstance(x, P)
    )
    return jax.jit(mapped), shardings
