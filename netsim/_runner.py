"""The one road into the engine: every vmap and shard_map outside kernels/, and the post-run check.

Traceable (inside jit, jvp and grad, e.g. a calibration loss): `vmap_run` runs the engine on every point
of a batch, `vmap_latency` evaluates the load-latency model (kernels.latency) on every point of one,
`jvp_columns` gives Jacobian columns by vmapped JVPs. Host entries, which take NumPy inputs,
return NumPy results and apply the post-run check (`find_fault`) to every point that finished:
`run_compiled` and `start_state`/`resume` (one scenario: `netsim.simulate`, kept in the executable cache)
and `run_batch` (many: sweeps, studies, `Batch.run`). Which inputs of a batch vary per point is read from
the arrays themselves (`batch_axes`): a leaf with one more dimension than the engine takes is batched, any
other leaf is shared by every point, so one program can run under many networks (a bandwidth sweep) or
one network under many programs.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from . import kernels
from ._cache import executable
from ._checks import choice, count
from ._compile import Compiled, bucket
from ._errors import ScenarioError, SimulationError, check_tolerance
from ._progress import doing, expect_compile
from .kernels import Network, Program, SimState, Status, latency

#: per-point outputs `run_batch` can keep: SimState fields, and "makespan" (the last finish)
OUTPUTS = ("makespan", *(f.name for f in dataclasses.fields(SimState) if f.name not in ("status", "events")))
#: what the post-run check reads of a finished state
CHECKED = ("start", "first_byte", "finish", "resource_bytes", "resource_busy")
#: relative tolerance of the post-run byte balance (`check_finished`)
CONSERVATION_RTOL = 1e-9
#: items per point up to which a batch on CPU runs 4 points per vmap, chunk after chunk (`run_batch`
#: calls executables of CHUNKS_PER_CALL chunks and of one, `map_points` maps the chunks inside a traced
#: function; above it, one point at a time). A vmapped loop runs until its slowest point is done, each
#: event for as many max-min rounds as its hardest point needs, so a wide vmap pays the batch's worst case
#: at every step; a few small points per vmap still share XLA's per-op cost. Second runs of `run_batch`,
#: s (one vmap / 16 points / 4 / 1 per vmap): 256-point examples/sweep_pcie_random_bw.json (112 items) 0.99 / 0.42 / 0.46 /
#: 0.51; 1024 what-ifs of a 64-host leaf-spine permutation 1.21 / 0.34 / 0.29 / 0.29, of the 8-GPU PCIe
#: ring 4.55 / 1.67 / 1.75 / 2.00; k=16 fat-tree random flows, 256 x 128 items - / 2.06 / 1.50 / 1.42,
#: 64 x 256 items - / 1.55 / 1.17 / 0.94, 32 x 1024 items - / 11.5 / 7.3 / 4.9. Other platforms run the
#: whole batch as one vmap (a GPU wants the width; not measured there).
CHUNK_ITEMS = 128
#: chunks per executable call of a large batch on one CPU device: each call costs ~0.4 ms of dispatch,
#: 0.4 s over a 1024-point batch of 4-point calls (a 4096-point PCIe sweep 3-5 % slower than one lax.map)
CHUNKS_PER_CALL = 16


def points_per_vmap(items: int, platform: str) -> int | None:
    """Points per vmap of a batch of `items`-item points on `platform`; None: the whole batch in one vmap
    (see CHUNK_ITEMS)."""
    if platform != "cpu":
        return None
    return 4 if items <= CHUNK_ITEMS else 1


# dimensions of one scenario's leaves, as kernels.run takes them
_NDIM = {"capacity": 1, "latency": 1, "route": 2, "size": 1, "release": 1, "overhead": 1, "after": 2}
# dimensions of one curve's arguments, as kernels.latency.load_latency takes them (the router's: 0)
_LATENCY_NDIM = dict(
    rate=1,
    load=1,
    service=1,
    contention=1,
    divergence=1,
    exits=1,
    class_share=2,
    vc_split=1,
    nodes=0,
    hops=0,
    flits=0,
)


# --- traceable ------------------------------------------------------------------------------------------


def _axis(x, ndim: int, name: str) -> int | None:
    """vmap's in_axis of one leaf that the kernel takes with `ndim` dimensions: 0 batched, None shared."""
    if np.ndim(x) == ndim + 1:
        return 0
    if np.ndim(x) == ndim:
        return None
    raise ScenarioError(
        f"{name}: expected {ndim} dimensions (shared) or {ndim + 1} (batched), got shape {np.shape(x)}"
    )


def batch_axes(network: Network, program: Program) -> tuple[Network, Program]:
    """vmap's in_axes for (network, program): 0 for a leaf with a leading batch axis, None for a shared one.

    Raises:
        ScenarioError: a leaf with neither the engine's number of dimensions nor one more.
    """

    net = [_axis(getattr(network, f), _NDIM[f], f"network.{f}") for f in ("capacity", "latency")]
    if network.packets is not None:
        net += [
            _axis(getattr(network.packets, f), 1, f"network.packets.{f}")
            for f in ("size", "header", "buffer", "variability")
        ]
    prog = [
        _axis(getattr(program, f), _NDIM[f], f"program.{f}")
        for f in ("route", "size", "release", "overhead", "after")
    ]
    # the containers hold axes, not arrays: rebuild them from their tree structure, not their __init__
    return jax.tree.unflatten(jax.tree.structure(network), net), jax.tree.unflatten(
        jax.tree.structure(program), prog
    )


def check_inputs(network: Network, program: Program) -> None:
    """The kernel inputs of `run_batch`, checked on the host before tracing (arrays a caller edited, as a
    what-if does): inside the engine a NaN capacity never lets an event come, a route index past the last
    resource reads padding, and a negative size or latency runs to a wrong answer.

    Raises:
        ScenarioError: naming the field and its shape, or the first offending index and its value.
    """
    if any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves((network, program))):
        return  # traced inside a caller's function: its own host boundary checked the values
    for where, part, fields in (
        ("network", network, ("capacity", "latency")),
        ("program", program, ("route", "size", "release", "overhead", "after")),
    ):
        for name in fields:
            x = getattr(part, name)
            if not isinstance(x, np.ndarray | jax.Array):
                raise ScenarioError(f"{where}.{name}: expected an array, got {type(x).__name__}")
            if name not in ("route", "after") and x.dtype != np.float64:  # time accumulates in float64
                raise ScenarioError(f"{where}.{name}: expected float64 values, got {x.dtype}")
    counts = {"resources": np.shape(network.capacity), "items": np.shape(program.size)}

    def check(x, name: str, per: str, ok, must: str) -> None:
        x, n = np.asarray(x), counts[per][-1]
        axis = -2 if name in ("program.route", "program.after") else -1
        if x.ndim < -axis or x.shape[axis] != n:
            source = "network.capacity" if per == "resources" else "program.size"
            raise ScenarioError(
                f"{name}: shape {x.shape} does not fit the {n} {per} of {source} (shape {counts[per]})"
            )
        bad = np.argwhere(~ok(x))
        if bad.size:
            where = tuple(int(i) for i in bad[0])
            raise ScenarioError(f"{name}{list(where)}: must be {must}, got {x[where].item()!r}")

    at_least = lambda low: lambda x: np.isfinite(x) & (x >= low)
    check(
        network.capacity, "network.capacity", "resources", lambda x: np.isfinite(x) & (x > 0), "finite, > 0"
    )
    check(network.latency, "network.latency", "resources", at_least(0), "finite, >= 0")
    if network.packets is not None:
        for name in ("size", "header", "variability"):
            check(
                getattr(network.packets, name),
                f"network.packets.{name}",
                "resources",
                at_least(0),
                "finite, >= 0",
            )
        check(
            network.packets.buffer,
            "network.packets.buffer",
            "resources",
            lambda x: x > 0,
            "> 0 (inf: unbounded)",
        )
    for name in ("size", "release", "overhead"):
        check(getattr(program, name), f"program.{name}", "items", at_least(0), "finite, >= 0")
    index = lambda top: lambda x: np.issubdtype(x.dtype, np.integer) & (x >= 0) & (x <= top)
    n_res, n_items = counts["resources"][-1], counts["items"][-1]
    check(program.route, "program.route", "items", index(n_res), f"a resource 0..{n_res} ({n_res}: no hop)")
    check(program.after, "program.after", "items", index(n_items), f"an item 0..{n_items} ({n_items}: none)")


def vmap_run(network: Network, program: Program, **options) -> SimState:
    """`kernels.run(network, program, **options)` on every point of a batch (batched leaves as
    `batch_axes` reads them); traceable: for use inside a jitted or differentiated function. The caller
    checks the returned `status` (and `find_fault` on the host, where it can)."""
    run = functools.partial(kernels.run, **options)
    chunk = points_per_vmap(np.shape(program.size)[-1], jax.default_backend())
    return map_points(run, batch_axes(network, program), (network, program), chunk)


def map_points(fn: Callable, axes, args: tuple, chunk: int | None):
    """`jax.vmap(fn, in_axes=axes)(*args)`, or with `chunk`, the same in chunks of that many points run one
    after another (`lax.map` over vmaps, the last part vmapped alone; with chunk 1, `lax.map` over fn itself,
    unbatched). XLA may round the last bits of a point differently in a vmap than alone. See CHUNK_ITEMS."""
    treedef = jax.tree.structure(args)
    leaves, leaf_axes = treedef.flatten_up_to(args), treedef.flatten_up_to(axes)
    batched = [x for x, ax in zip(leaves, leaf_axes, strict=True) if ax == 0]
    n = batched[0].shape[0] if batched else 0

    def rebuild(xs):  # the arguments with these batched leaves
        it = iter(xs)
        return treedef.unflatten(
            [next(it) if ax == 0 else x for x, ax in zip(leaves, leaf_axes, strict=True)]
        )

    if chunk == 1 and n:
        # one point at a time, unbatched: a vmap of one point batches every predicate of the engine, and each
        # cond (the frontier's, the max-min ladder's) becomes a select that runs both branches
        return jax.lax.map(lambda xs: fn(*rebuild(xs)), batched)
    if chunk is None or n <= chunk:
        return jax.vmap(fn, in_axes=axes)(*args)
    points = lambda xs: jax.vmap(fn, in_axes=axes)(*rebuild(xs))
    # explicit shapes, not lax.map(batch_size=): its reshape fails on a zero-size leaf
    whole = n // chunk * chunk
    split = [x[:whole].reshape(n // chunk, chunk, *x.shape[1:]) for x in batched]
    out = jax.tree.map(lambda y: y.reshape(whole, *y.shape[2:]), jax.lax.map(points, split))
    if whole == n:
        return out
    rest = points([x[whole:] for x in batched])
    return jax.tree.map(lambda a, b: jnp.concatenate([a, b]), out, rest)


def vmap_latency(
    rate,
    load,
    service,
    contention,
    divergence,
    exits,
    class_share,
    vc_split,
    nodes,
    hops,
    flits,
    router: latency.Router,
    feeds: latency.Feeds | None = None,
    sources=None,
) -> latency.Curve:
    """`kernels.latency.load_latency` on every point of a batch; traceable. An argument (or a field of
    `router` or `feeds`) with one more dimension than the kernel takes varies per point, any other is
    shared by every point (as `batch_axes` reads the engine's inputs): rate, the channel arrays and the
    feeds' fields take 1, class_share and sources 2 (classes or sources x channels), nodes, hops, flits and
    the router's fields 0. The Curve's fields gain a leading batch axis."""
    args = (rate, load, service, contention, divergence, exits, class_share, vc_split, nodes, hops, flits)
    axes = [_axis(x, ndim, name) for x, (name, ndim) in zip(args, _LATENCY_NDIM.items(), strict=True)]
    leaf_axes = lambda tree, ndim, name: jax.tree_util.tree_map_with_path(
        lambda path, x: _axis(x, ndim, name + jax.tree_util.keystr(path)), tree
    )
    in_axes = (
        *axes,
        leaf_axes(router, 0, "router"),
        leaf_axes(feeds, 1, "feeds"),
        leaf_axes(sources, 2, "sources"),
    )
    return jax.vmap(latency.load_latency, in_axes=in_axes)(*args, router, feeds, sources)


def jvp_columns(fn: Callable, x: jax.Array, tangents: jax.Array):
    """(fn(x), J @ tangents[k] for every k, aux) for `fn(x) -> (y, aux)`: forward-mode Jacobian columns,
    one JVP per tangent, vmapped; traceable. With tangents the unit vectors of the free parameters, the
    columns are the Jacobian's (cheaper than reverse mode through the engine for tens of parameters)."""
    jvp = lambda v: jax.jvp(fn, (x,), (v,), has_aux=True)
    return jax.vmap(jvp, out_axes=(None, 0, None))(tangents)


# --- the post-run check ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Fault:
    """The first thing `find_fault` found wrong in a finished run."""

    point: int  # batch index
    kind: str  # "item" (a time) or "resource" (a tally)
    index: int  # the item or resource
    message: str  # what is wrong, without naming the item or resource


def find_fault(
    network: Network, program: Program, state: dict[str, np.ndarray], ok: np.ndarray
) -> Fault | None:
    """The post-run check over a batch (host NumPy, O(points x items x hops)): in every point where `ok`,
    every time, byte count and busy time is finite, and every resource carried exactly the bytes of the
    items crossing it (a device: its tasks' work in s).

    network, program: the inputs as run (leaves batched or shared, as `batch_axes` reads them); state:
    the `CHECKED` fields of the final states, by name, with a leading batch axis; ok: [B] bool, the
    points to check (the finished ones).
    Padding needs no special case: padded items move nothing and finish at 0, padded resources carry
    nothing, and padded hops point past the last resource.

    The balance holds to CONSERVATION_RTOL relative, at any makespan: an item finishing at an event hands
    its resources whatever its rate x time left unmoved beyond `kernels.engine.RESIDUE` of its bytes
    (float64's time resolution at large times, ideal links, the tie rule).
    """
    ok = np.asarray(ok, bool)
    if not ok.any():
        return None
    pick = lambda x: np.asarray(x)[ok]
    points = np.flatnonzero(ok)
    for name in ("start", "first_byte", "finish"):
        bad = np.argwhere(~np.isfinite(pick(state[name])))
        if bad.size:
            b, i = bad[0]
            value = float(pick(state[name])[b, i])
            return Fault(int(points[b]), "item", int(i), f"has {name} = {value} in a finished run")
    carried, busy = pick(state["resource_bytes"]), pick(state["resource_busy"])
    for name, values in (("bytes carried", carried), ("busy time", busy)):
        bad = np.argwhere(~np.isfinite(values))
        if bad.size:
            b, j = bad[0]
            return Fault(
                int(points[b]), "resource", int(j), f"has {name} = {float(values[b, j])} in a finished run"
            )
    R = carried.shape[1]
    batched = lambda x, ndim: pick(x) if np.ndim(x) == ndim + 1 else np.asarray(x)[None]
    route, size = batched(program.route, 2), batched(program.size, 1)  # [B or 1, ...]: shared stays one
    n = max(route.shape[0], size.shape[0])
    route = np.broadcast_to(route, (n, *route.shape[1:]))
    real = route < R  # padded hops point past the last resource
    flat = (np.arange(n)[:, None, None] * R + route)[real]  # one bincount over every point
    weights = np.broadcast_to(size[:, :, None], route.shape)[real]
    expected = np.bincount(flat, weights=weights, minlength=n * R).reshape(n, R)
    expected = np.broadcast_to(expected, carried.shape)
    excess = np.abs(carried - expected) - CONSERVATION_RTOL * expected
    if not (excess > 0).any():
        return None
    b, j = np.unravel_index(int(np.argmax(np.where(excess > 0, excess, -np.inf))), excess.shape)
    error = abs(carried[b, j] - expected[b, j]) / max(expected[b, j], 1e-300)
    return Fault(
        int(points[b]),
        "resource",
        int(j),
        f"carried {float(carried[b, j])!r} {{unit}}, but the items crossing it total {float(expected[b, j])!r} "
        f"(relative error {error:.3g}); a bug in netsim or a scenario past float64's precision: please report it",
    )


def check_result(compiled: Compiled, state: SimState) -> None:
    """The post-run check of one finished run of `compiled` (`find_fault`), naming the item or resource.

    Raises:
        SimulationError: naming the first item or resource at fault; it means a bug in netsim or a
            scenario past float64's precision (e.g. nanosecond flows after 1e6 s), never bad input.
    """
    one = {k: np.asarray(getattr(state, k))[None] for k in CHECKED}
    fault = find_fault(compiled.network, compiled.program, one, np.ones(1, bool))
    if fault is None:
        return
    if fault.kind == "item":
        ids = [x.id for x in (*compiled.scenario.flows, *compiled.scenario.tasks)]
        kind = "flow" if fault.index < compiled.n_flows else "task"
        raise SimulationError(f"post-run check: {kind} {ids[fault.index]!r} {fault.message}")
    resources = (
        [x.id for x in compiled.scenario.links]
        + [r.id for r in compiled.scenario.shared]
        + list(compiled.devices)
    )
    unit = "s of work" if fault.index >= compiled.device_slice.start else "bytes"
    raise SimulationError(
        f"post-run check: resource {resources[fault.index]!r} {fault.message.format(unit=unit)}"
    )


# --- host entries: one scenario ------------------------------------------------------------------------


def _whole(network: Network, program: Program, **options) -> SimState:
    return kernels.run(network, program, **options)


def _start(program: Program, *, n_resources: int, record: int, packetized: bool = False) -> SimState:
    return kernels.initial_state(program, n_resources, record, packetized=packetized)


def _next(network, program, state: SimState, until, **options) -> SimState:
    return kernels.run(network, program, state=state, until=until, **options)


def _state_tree(network: Network, program: Program, record: int):
    """The pytree structure of the engine's state, without tracing the engine."""
    n_resources, packetized = network.capacity.shape[-1], network.packets is not None
    return jax.tree.structure(
        jax.eval_shape(
            lambda p: kernels.initial_state(p, n_resources, record, packetized=packetized), program
        )
    )


#: largest item count at which a flat program (`engine_options`) runs without the frontier
FLAT_ITEMS = 1 << 14


def engine_options(compiled: Compiled, max_events: int, record: int, tolerance: float) -> dict:
    """kernels.run's static options for one scenario. A flat program (no item waits on another, all released
    at one instant) starts with every item active and only loses them: the frontier (kernels/frontier.py)
    then serves only the last FRONTIER[0] events, and its code (two thirds of the executable at 1e3 items)
    costs more to compile and load than those events save up to FLAT_ITEMS items, and at any size in the
    fast mode, whose windows fold the tail's completions into a few events."""
    options = {"max_events": int(max_events), "record": int(record), "tolerance": float(tolerance)}
    real = slice(0, compiled.n_flows + compiled.n_tasks)  # padding items follow
    return options | frontier_option(compiled.program, real, tolerance)


def frontier_option(program: Program, real, tolerance: float) -> dict:
    """{"frontier": 0} where the frontier does not pay (a flat program, `engine_options`), else {}.
    real: the items that are not padding (an index or a mask); a batched program is flat if every point is."""
    n_items = np.shape(program.size)[-1]
    release = np.atleast_2d(np.asarray(program.release))[:, real]  # [points, real items]
    flat = np.all(np.asarray(program.after) == n_items) and np.all(release == release[:, :1])
    return {"frontier": 0} if flat and (n_items <= FLAT_ITEMS or tolerance > 0) else {}


def compiled_code(network: Network, program: Program, options: dict) -> dict:
    """`expect_compile`'s frontier, hops and predecessors for the engine under `options`: whether it compiles
    the frontier's code (by kernels.run's own defaults), an item's route hops and its predecessors."""
    n_items, hops = np.shape(program.route)[-2:]
    dense = kernels.maxmin.dense_by_default(n_items, np.shape(network.capacity)[-1])
    loop = options.get("loop", "lax")
    sizes = kernels.frontier.buffer_sizes(options.get("frontier"), loop=loop, dense=dense, n_items=n_items)
    return {"frontier": bool(sizes), "hops": int(hops), "predecessors": int(np.shape(program.after)[-1])}


def run_compiled(compiled: Compiled, max_events: int, record: int, tolerance: float) -> SimState:
    """The engine's final state for one compiled scenario, on the device (`check_result` checks it)."""
    # the one compile per shape and options (engine_options), kept in memory and, when enabled, in the
    # executable cache (netsim._cache)
    network, program = compiled.network, compiled.program
    options = engine_options(compiled, max_events, record, tolerance)
    args = (network, program)
    with expect_compile("the engine", compiled.shape.items, **compiled_code(network, program, options)):
        return executable(_whole, args, options, lambda: _state_tree(network, program, record))(*args)


def start_state(compiled: Compiled, record: int) -> SimState:
    """The engine's start state, from a small executable of its own: the slices then need one large one."""
    network, program = compiled.network, compiled.program
    options = {"n_resources": network.capacity.shape[-1], "record": int(record)}
    if network.packets is not None:
        options["packetized"] = True
    return executable(_start, (program,), options, lambda: _state_tree(network, program, record))(program)


def resume(
    compiled: Compiled, state: SimState, until: np.ndarray, max_events: int, record: int, tolerance: float
) -> SimState:
    """`state` run on until `until` events (a slice of a run, e.g. `netsim.simulate(progress=True)`)."""
    # `until` is an argument: every slice of a run (and of any run of this shape) shares one executable
    options = engine_options(compiled, max_events, record, tolerance)
    args = (compiled.network, compiled.program, state, until)
    code = compiled_code(compiled.network, compiled.program, options)
    with expect_compile("the engine", compiled.shape.items, **code):
        return executable(_next, args, options, lambda: jax.tree.structure(state))(*args)


# --- host entries: a batch ------------------------------------------------------------------------------


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
    """Runs the engine on every point of a batch in one jitted vmap, sharded over `devices`, and applies
    the post-run check to every point that finished.

    Args:
        network, program: kernel inputs; leaves with a leading batch axis vary per point, the others are
            shared (see `batch_axes`). Every batched leaf must have the same batch size B.
        max_events: the engine's event bound (`Shape.max_events` of the batch's shape).
        keep: per-point outputs besides status and events (see OUTPUTS).
        throw: raise SimulationError if any point did not finish; else read `BatchRun.status`.
        devices: default all devices (of every process under jax.distributed).
        width: where the batch runs as one vmap (not on one CPU device, which runs it in chunks through
            at most two executables, whatever B), pad it to this many points (repeating the last) so that
            batches of different sizes share one compile; default B rounded up to a bucket, and up to a
            multiple of the devices.
        loop: the engine's loop kind ("lax"; "checkpointed" for reverse-mode derivatives).
        tolerance: 0 (exact) or the fast mode's relative window (see `netsim.simulate`).

    Raises:
        SimulationError: a point did not finish (unless throw=False), or a finished point failed the
            post-run check (`find_fault`; always: it means a bug, never bad input).
    """
    keep = tuple(keep)
    max_events = count(max_events, "max_events")
    tolerance = check_tolerance(tolerance)
    loop = choice(loop, "loop", ("lax", "checkpointed"))
    if devices is not None and not len(devices):
        raise ScenarioError("devices: an empty list; default (None): every device")
    unknown = [k for k in keep if k not in OUTPUTS]
    if unknown:
        raise ScenarioError(f"keep: unknown output(s) {unknown}; known: {list(OUTPUTS)}")
    check_inputs(network, program)
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
    items = int(np.shape(program.size)[-1])
    chunk = points_per_vmap(items, devices[0].platform)
    # one process, one device: the executable cache (which compiles for the default device) skips tracing
    # too; with chunks, executables of a fixed number of points serve a batch of any size
    one_device = devices == (jax.devices()[0],) and jax.process_count() == 1
    if one_device and chunk is not None:
        width = -(-n // chunk) * chunk
    else:
        width = max(n, width or bucket(n, 1, per_octave=2))
        width = -(-width // n_dev) * n_dev

    def pad(x, ax):
        x = np.asarray(x)
        if ax is None or width == n:
            return x
        return np.concatenate([x, np.repeat(x[-1:], width - n, axis=0)])

    net, prog = treedef.unflatten([pad(x, ax) for x, ax in zip(leaves, leaf_axes, strict=True)])
    options = {
        "max_events": int(max_events),
        "keep": keep,
        "loop": loop,
        "tolerance": tolerance,
        "chunk": chunk,
        # padding items have no bytes in any point
        **frontier_option(program, np.any(np.atleast_2d(np.asarray(program.size)) > 0, axis=0), tolerance),
    }
    outputs = lambda: jax.tree.structure(dict.fromkeys((*_point_outputs(keep), "status", "events"), 0))
    # simulated time is float64 (inputs too); scoped: the caller's config stays
    with (
        jax.enable_x64(True),
        doing(f"running {n:,} points in one batch") as phase,
        expect_compile(
            "the batched engine",
            items,
            width if chunk is None else chunk,
            **compiled_code(net, prog, options),
        ),
    ):
        if one_device and chunk is not None:
            padded = treedef.flatten_up_to((net, prog))
            piece = lambda i, size: treedef.unflatten(
                [x[i : i + size] if ax == 0 else x for x, ax in zip(padded, leaf_axes, strict=True)]
            )
            # calls of CHUNKS_PER_CALL chunks (a lax.map over them) while the batch has that many, then
            # one chunk per call: at most two executables per shape, whatever the batch size
            group = chunk * CHUNKS_PER_CALL
            calls = [(i, group) for i in range(0, width - width % group, group)]
            calls += [(i, chunk) for i in range(width - width % group, width, chunk)]
            runs = {
                size: executable(_batched, piece(0, size), {**options, "axes": axes}, outputs)
                for size in dict.fromkeys(size for _, size in calls)
            }
            pending = [(size, runs[size](*piece(i, size))) for i, size in calls]  # dispatched at once
            parts, done = [], 0
            for size, part in pending:  # read in order
                parts.append(jax.device_get(part))
                done = min(done + size, n)
                phase.what = f"running {n:,} points in one batch: {done:,} done"
            out = {k: np.concatenate([part[k] for part in parts]) for k in parts[0]}
        elif one_device:
            out = executable(_batched, (net, prog), {**options, "axes": axes}, outputs)(net, prog)
        else:
            fn, shardings = _batch_function(**options, axes=axes, devices=devices, treedef=treedef)
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
    status = out.pop("status").astype(np.int32)
    checked = {k: out[k] if k in keep else out.pop(f"checked:{k}") for k in CHECKED}
    fault = find_fault(network, program, checked, status == Status.OK)
    if fault is not None:
        what = f"item {fault.index}" if fault.kind == "item" else f"resource {fault.index}"
        unit = "bytes (s of work on a device)"
        raise SimulationError(
            f"post-run check: point {fault.point}: {what} {fault.message.format(unit=unit)}"
        )
    run = BatchRun(status, out.pop("events"), int(max_events), out)
    return run.check() if throw else run


def _point_outputs(keep: tuple[str, ...]) -> tuple[str, ...]:
    """What one point of a batch returns besides status and events: the kept outputs, then what the post-run
    check reads unless kept anyway (as "checked:NAME")."""
    return (*keep, *(f"checked:{k}" for k in CHECKED if k not in keep))


def _one_point(
    network: Network, program: Program, *, keep: tuple[str, ...], **options
) -> dict[str, jax.Array]:
    s = kernels.run(network, program, **options)  # max_events, loop, tolerance[, frontier]
    out = {"status": s.status, "events": s.events}
    for k in _point_outputs(keep):
        name = k.removeprefix("checked:")
        out[k] = jnp.max(s.finish) if name == "makespan" else getattr(s, name)
    return out


def _batched(
    network: Network, program: Program, *, axes: tuple[Network, Program], chunk: int | None, **options
):
    """Every point of a batch on one device (`run_batch`; what `executable` compiles and caches)."""
    return map_points(functools.partial(_one_point, **options), axes, (network, program), chunk)


@functools.lru_cache(maxsize=32)
def _batch_function(
    max_events: int,
    keep: tuple[str, ...],
    loop: str,
    tolerance: float,
    chunk: int | None,
    axes: tuple[Network, Program],
    devices: tuple[jax.Device, ...],
    treedef,
    **frontier,
):
    """The jitted, sharded batch function and its input shardings (cached: batches of one shape, kept
    outputs and batching pattern share one compile)."""
    one = functools.partial(
        _one_point, max_events=max_events, keep=keep, loop=loop, tolerance=tolerance, **frontier
    )
    mesh = Mesh(np.array(devices), ("batch",))
    specs = treedef.unflatten([P("batch") if ax == 0 else P() for ax in treedef.flatten_up_to(axes)])
    # check_vma=False: the engine's loops start from replicated constants and communicate nothing,
    # which the varying-axes check would reject
    mapped = jax.shard_map(
        lambda *args: map_points(one, axes, args, chunk),
        mesh=mesh,
        in_specs=specs,
        out_specs=P("batch"),
        check_vma=False,
    )
    shardings = jax.tree.map(
        lambda spec: NamedSharding(mesh, spec), specs, is_leaf=lambda x: isinstance(x, P)
    )
    return jax.jit(mapped), shardings
