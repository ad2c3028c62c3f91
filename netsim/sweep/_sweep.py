"""Sweep: a base scenario crossed with axes, run as padded, vmapped batches sharded over devices.

Host side: every distinct combination of scenario axes (failed links, Python callbacks) is built
and compiled once, all padded to one shape (`Compiled.padded`); array axes (bandwidth, latency, bytes)
are applied to copies of the compiled arrays per point. Device side: `netsim.run_batch` runs a chunk of
points, sharded over the devices, each device looping over its own slice until its points are done.
With `jax.distributed` initialized, the devices of all processes form one mesh; process 0 writes the
results.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import jax
import numpy as np

from .. import kernels
from .._checks import folder_problem, quantity
from .._compile import Compiled, Shape, compile_scenario
from .._progress import Progress
from .._runner import run_batch
from .._scenario import Scenario, ScenarioError
from .._units import format_bytes
from ..kernels import Network, Program, Status
from ._axes import (
    ArrayAxis,
    Axis,
    FailedLinks,
    MessageSize,
    ScenarioAxis,
    SweepError,
    match_ids,
)
from ._result import SweepResult, load_result
from ._store import FORMAT, VERSION, check_out_path, chunk_rows, open_store

OUTPUTS = ("flow_finish", "link_bytes", "link_utilization")
MAX_POINTS_PER_DEVICE = 1024  # beyond this a chunk only delays progress reports and resume points


@dataclasses.dataclass
class Plan:
    """Every point of a sweep, in run order (points sharing a host-built scenario are adjacent)."""

    n_points: int
    index: dict[str, np.ndarray]  # discrete axes: value position per point
    value: dict[str, np.ndarray]  # sampled array axes: drawn values, (P,) or (P, width)
    host_key: np.ndarray  # (P,) position in `hosts`
    hosts: list[Compiled | None]  # one per scenario-axis combination; None if it could not be built
    errors: list[str]
    outputs: tuple[str, ...]
    grid_shape: tuple[int, ...] | None
    cols: dict[tuple[str, int], np.ndarray]  # (array axis, host) -> matched link or flow positions
    # (bandwidth axis, host) -> the shared resources following their links: (column, link positions in cols)
    follow: dict[tuple[str, int], list[tuple[int, np.ndarray]]]
    ids: dict[str, tuple[str, ...]]  # independent axes: the ids their columns draw for
    array_axes: dict[str, ArrayAxis]

    @property
    def template(self) -> Compiled:
        return next(h for h in self.hosts if h is not None)


@dataclasses.dataclass(frozen=True)
class BusBandwidth:
    """What turns a sweep's makespans into nccl-tests' bus bandwidth (the `busbw` metric): the base scenario
    is one `kind` collective of `size` bytes (nccl-tests' S) on `ranks` ranks, and a message-size axis over
    all its flows scales S with them. busbw = S / makespan x the bus factor (2(n-1)/n for allreduce...)."""

    kind: str
    ranks: int
    size: float

    def __post_init__(self):
        from ..workloads.collectives import bus_factor

        try:
            bus_factor(self.kind, 2)
        except ScenarioError as e:
            raise SweepError(f"busbw.kind: {e}") from None
        if isinstance(self.ranks, bool) or not isinstance(self.ranks, int) or self.ranks < 2:
            raise SweepError(f"busbw.ranks: expected an integer >= 2, got {self.ranks!r}")
        try:
            object.__setattr__(self, "size", quantity(self.size, "bytes", "busbw.size", positive=True))
        except ScenarioError as e:
            raise SweepError(str(e)) from None


@dataclasses.dataclass(frozen=True)
class Sweep:
    """A base scenario plus axes: a grid over the axes' values, or `samples` random points.

    Args:
        scenario: the base scenario.
        axes: LinkBandwidth, LinkLatency, MessageSize, FailedLinks, ScenarioAxis (see netsim.sweep).
        samples: None for the full grid; else the number of random points (discrete axes draw a
            value uniformly, ranges draw from their range), reproducible from `seed`.
        outputs: per-point arrays to keep besides status/events/makespan; default: every one of
            flow_finish, link_bytes, link_utilization whose layout all points share.
        busbw: for a collective's sweep, how makespans become busbw (`SweepResult.metric("busbw")`).
    """

    scenario: Scenario
    axes: Sequence[Axis]
    samples: int | None = None
    seed: int = 0
    outputs: Sequence[str] | None = None
    name: str = ""
    busbw: BusBandwidth | None = None

    def __post_init__(self):
        given = self.axes  # as a JSON spec's "axes": a sweep varies something
        axes = tuple(given) if isinstance(given, Iterable) and not isinstance(given, str | Axis) else ()
        if not axes:
            raise SweepError(f"axes: expected a non-empty list of axis objects, got {given!r}")
        object.__setattr__(self, "axes", axes)
        if not isinstance(self.scenario, Scenario):
            raise SweepError(f"scenario: expected a netsim.Scenario, got {type(self.scenario).__name__}")
        names = [a.name for a in self.axes]
        for i, a in enumerate(self.axes):
            if not isinstance(a, Axis):
                raise SweepError(f"axes[{i}]: expected a sweep axis, got {type(a).__name__}")
            if not isinstance(a.name, str) or not a.name or "/" in a.name or a.name in (".", ".."):
                raise SweepError(
                    f"axes[{i}].name: expected a non-empty name without '/', not '.' or '..', got {a.name!r}"
                )
            if names.count(a.name) > 1:
                raise SweepError(f"axes[{i}].name: duplicate axis name {a.name!r}")
        sampled = [a.name for a in self.axes if isinstance(a, ArrayAxis) and a.sampled]
        if self.samples is None and sampled:
            raise SweepError(
                f"axes {sampled}: a range is sampled, so set samples (a grid needs listed values)"
            )
        if self.samples is not None and (
            isinstance(self.samples, bool) or not isinstance(self.samples, int) or self.samples < 1
        ):
            raise SweepError(f"samples: expected a positive integer or None, got {self.samples!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise SweepError(f"seed: expected an integer >= 0, got {self.seed!r}")
        if not isinstance(self.name, str):
            raise SweepError(f"name: expected a string, got {self.name!r}")
        if self.outputs is not None:
            object.__setattr__(self, "outputs", tuple(self.outputs))
            bad = [o for o in self.outputs if o not in OUTPUTS]
            if bad:
                raise SweepError(f"outputs: unknown {bad}; choose from {list(OUTPUTS)}")
        if self.busbw is not None:
            if not isinstance(self.busbw, BusBandwidth):
                raise SweepError(f"busbw: expected a BusBandwidth, got {type(self.busbw).__name__}")
            _busbw_axis(self)  # refuses now what could not be turned into busbw later

    # --- identity ---------------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        out = {
            "scenario": self.scenario.to_dict(),
            "axes": [a.describe() for a in self.axes],
            "samples": self.samples,
            "seed": self.seed,
            "outputs": None if self.outputs is None else list(self.outputs),
            "name": self.name,
        }
        if self.busbw is not None:  # only when set: earlier sweeps keep their fingerprints
            out["busbw"] = dataclasses.asdict(self.busbw)
        return out

    def fingerprint(self) -> str:
        """Hash of everything that decides the points and their results: a resume must match it."""
        text = json.dumps(self.describe(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    @property
    def n_points(self) -> int:
        return self.samples if self.samples is not None else int(np.prod([a.size for a in self.axes]))

    # --- host side --------------------------------------------------------------------------------
    def plan(self) -> Plan:
        """Draws or enumerates the points and builds, checks and pads the scenarios they need."""
        base = self.scenario
        scen_axes = [a for a in self.axes if a.scenario_side]
        ids: dict[str, tuple[str, ...]] = {}
        for a in self.axes:
            if isinstance(a, ArrayAxis):  # a glob matching nothing is a mistake: say so before any work
                hit, _ = a.targets(base, f"axis {a.name!r}.{a.selects}")
                if a.independent:
                    ids[a.name] = tuple(hit)

        n, index, value, grid_shape = self._points(scen_axes, ids)
        combos = list(zip(*(index[a.name] for a in scen_axes), strict=True)) if scen_axes else [()] * n
        distinct = sorted(set(combos))
        key_of = {c: k for k, c in enumerate(distinct)}
        host_key = np.array([key_of[c] for c in combos], np.int32)
        if self.samples is not None:  # run the points of one scenario together
            order = np.argsort(host_key, kind="stable")
            host_key = host_key[order]
            index = {k: v[order] for k, v in index.items()}
            value = {k: v[order] for k, v in value.items()}

        scenarios, errors = [], []
        for combo in distinct:
            try:
                scenarios.append(_build(base, scen_axes, combo))
                errors.append("")
            except ScenarioError as e:
                scenarios.append(None)
                errors.append(str(e))
        hosts = _compile_padded(scenarios, errors)
        if all(h is None for h in hosts):
            raise SweepError(f"no point's scenario could be built; first error: {errors[0]}")
        for e in sorted(set(filter(None, errors))):
            print(f"netsim sweep: some points cannot run ({e})", file=sys.stderr)

        cols, follow = {}, {}
        for a in self.axes:
            if not isinstance(a, ArrayAxis):
                continue
            for k, h in enumerate(hosts):
                if h is None:
                    continue
                hit, followers = a.targets(h.scenario, f"axis {a.name!r}.{a.selects}")
                where = {x: i for i, x in enumerate(a.columns(h.scenario))}
                if a.name in ids:
                    missing = [x for x in ids[a.name] if x not in where]
                    if missing:
                        raise SweepError(
                            f"axis {a.name!r}: independent draws for {missing[:3]} but a scenario "
                            f"axis removed them"
                        )
                    hit = list(ids[a.name])
                cols[a.name, k] = np.array([where[x] for x in hit], np.int64)
                current = getattr(h.program if a.target == "size" else h.network, a.target)
                a.check_limits(current[cols[a.name, k]], hit, f"axis {a.name!r}")
                at = {x: i for i, x in enumerate(hit)}
                follow[a.name, k] = [
                    (where[r], np.array([at[x] for x in links], np.int64))
                    for r, links in followers
                    if all(x in at for x in links)
                ]
        array_axes = {a.name: a for a in self.axes if isinstance(a, ArrayAxis)}
        outputs = self._outputs(hosts)
        return Plan(
            n, index, value, host_key, hosts, errors, outputs, grid_shape, cols, follow, ids, array_axes
        )

    def _points(self, scen_axes: list[Axis], ids: dict[str, tuple[str, ...]]):
        """(n, discrete value positions, sampled values, grid shape or None) of every point.

        A grid runs scenario axes slowest, so that consecutive points share a host-built scenario.
        """
        if self.samples is None:
            order = scen_axes + [a for a in self.axes if not a.scenario_side]
            pos = np.indices([a.size for a in order]).reshape(len(order), -1)
            grid_shape = tuple(a.size for a in self.axes)
            index = {a.name: pos[k].astype(np.int32) for k, a in enumerate(order)}
            return int(np.prod(grid_shape)), index, {}, grid_shape
        rng = np.random.default_rng(self.seed)
        n = self.samples
        index, value = {}, {}
        for a in self.axes:  # in axis order: the draws depend only on the seed and the axes
            if isinstance(a, ArrayAxis) and a.sampled:
                value[a.name] = a.draw(rng, n, len(ids.get(a.name, ())))
            else:
                index[a.name] = rng.integers(0, a.size, n).astype(np.int32)
        return n, index, value, None

    def _outputs(self, hosts: list[Compiled | None]) -> tuple[str, ...]:
        built = [h for h in hosts if h is not None]
        same_flows = len({tuple(f.id for f in h.scenario.flows) for h in built}) == 1 and built[0].n_flows > 0
        same_links = len({tuple(link.id for link in h.scenario.links) for h in built}) == 1
        ok = {"flow_finish": same_flows, "link_bytes": same_links, "link_utilization": same_links}
        if self.outputs is None:
            return tuple(o for o in OUTPUTS if ok[o])
        bad = [o for o in self.outputs if not ok[o]]
        if bad:
            raise SweepError(
                f"outputs {bad}: the scenario axes change the flows or links (or there are no "
                "flows), so per-point arrays have no common layout; keep makespan only"
            )
        return tuple(self.outputs)

    # --- running ----------------------------------------------------------------------------------
    def run(
        self,
        out: str | os.PathLike | None = None,
        *,
        chunk_size: int | None = None,
        progress: bool = True,
        overwrite: bool = False,
        devices: Sequence[jax.Device] | None = None,
        on_chunk: Callable[[int], None] | None = None,
    ) -> SweepResult | None:
        """Runs every point not yet done, writing each finished chunk to `out` (HDF5) at once.

        A results file that exists and holds this same sweep is resumed: chunks marked done whose
        rows match their checksum are kept; the rest (and any holding points not run) are run. Every
        argument is checked before the file is created or opened. Under jax.distributed every process
        calls this with the same arguments; process 0 writes the file and returns the result, the
        others return None.

        Args:
            out: results file (.h5 or .hdf5); None keeps the results in memory.
            chunk_size: points per jitted batch; default sized to the device memory (a resumed
                file keeps its own chunk size).
            progress: draw a progress line on stderr.
            overwrite: replace `out` if it holds a different sweep instead of raising.
            devices: devices to shard each chunk over; default all (of all processes).
            on_chunk: called with each chunk's number once it is stored.

        Raises:
            SweepError: bad arguments, a file holding another sweep or in use by another one.
        """
        if out is not None:
            out = check_out_path(out)
            problem = folder_problem(out)
            if problem:  # found before the sweep runs, and said of this path, not of a temporary beside it
                raise SweepError(f"out: {out!r}: {problem}")
        if chunk_size is not None and (
            isinstance(chunk_size, bool) or not isinstance(chunk_size, int | np.integer) or chunk_size < 1
        ):
            raise SweepError(
                f"chunk_size: expected a positive integer (points per batch), got {chunk_size!r}"
            )
        devices = list(jax.devices() if devices is None else devices)
        if not devices:
            raise SweepError("devices: expected at least one device, got none")
        plan = self.plan()
        lead = jax.process_index() == 0
        multi = jax.process_count() > 1
        runner = _Runner(plan, devices)
        store = None
        size = 0
        failed = None
        # simulated time is float64: x64 for the inputs laid out here, the engine and the int64 broadcasts
        with jax.enable_x64(True):
            if lead:
                try:
                    columns, extra = _layout(self, plan)
                    store = open_store(
                        out,
                        self.fingerprint(),
                        columns=columns,
                        extra=extra,
                        overwrite=overwrite,
                        n_points=plan.n_points,
                        chunk_size=int(chunk_size or runner.auto_chunk_size()),
                        meta=_meta(self, plan),
                    )
                    size = int(store.meta["chunk_size"])
                except Exception as e:  # the other processes wait on the broadcast below: tell them
                    failed, size = e, -1
            if multi:
                from jax.experimental import multihost_utils

                size = int(multihost_utils.broadcast_one_to_all(np.int64(size)))
            if failed is not None:
                raise failed
            if size < 0:
                raise SweepError("sweep: process 0 could not open the results file (its error says why)")
            n_chunks = -(-plan.n_points // size)
            done = store.done if lead else np.zeros(n_chunks, bool)
            if multi:
                done = np.asarray(multihost_utils.broadcast_one_to_all(done.astype(np.int32))).astype(bool)
            chunks = [chunk_rows(int(c), size, plan.n_points) for c in range(n_chunks)]
            bar = Progress(
                "sweep",
                "points",
                plan.n_points,
                sum(r.stop - r.start for r, d in zip(chunks, done, strict=True) if d),
                enabled=progress and lead,
            )
            try:
                for c in np.flatnonzero(~done):
                    rows = chunks[c]
                    values = runner(rows, min(size, plan.n_points))
                    if lead:
                        store.write(int(c), rows, values)
                    bar.update(rows.stop - rows.start)
                    if on_chunk is not None:
                        on_chunk(int(c))
            finally:
                bar.close()
                if store is not None:
                    store.close()
        if not lead:
            return None
        if out is None:
            return SweepResult.from_parts(store.meta, store.columns, _layout(self, plan)[1])
        return load_result(out)


def _build(base: Scenario, scen_axes: list[Axis], combo: tuple[int, ...]) -> Scenario:
    """The scenario of one combination: callbacks first (in axis order), then failed links."""
    sc = base
    pairs = list(zip(scen_axes, combo, strict=True))
    for a, i in pairs:
        if isinstance(a, ScenarioAxis):
            sc = a.apply(sc, int(i))
    for a, i in pairs:
        if isinstance(a, FailedLinks):
            sc = a.build(sc, int(i), compile_scenario(sc).routes)
    return sc


def _compile_padded(scenarios: list[Scenario | None], errors: list[str]) -> list[Compiled | None]:
    """Compiles each scenario, then pads them all to the shape that holds the largest."""
    built: list[Compiled | None] = []
    for k, sc in enumerate(scenarios):
        try:
            built.append(None if sc is None else compile_scenario(sc))
        except ScenarioError as e:
            built.append(None)
            errors[k] = str(e)
    shapes = [c.shape for c in built if c is not None]
    if not shapes:
        return built
    shape = functools.reduce(Shape.__or__, shapes)
    return [None if c is None else c.padded(shape) for c in built]


class _Runner:
    """Lays out a chunk's Network and Program on the host and runs them with `netsim.run_batch`.

    A leaf is batched (one row per point) when some axis or some pair of host-built scenarios makes it
    differ between points, and shared otherwise: one program runs under many bandwidth vectors without
    a copy per point. The choice is made once per sweep, so every chunk shares one compile.
    """

    def __init__(self, plan: Plan, devices: list[jax.Device]):
        self.plan = plan
        self.devices = devices
        t = plan.template
        built = [h for h in plan.hosts if h is not None]
        targets = {a.target for a in plan.array_axes.values()}

        def varies(get) -> bool:
            first = get(built[0])
            return any(not np.array_equal(get(h), first) for h in built[1:])

        self.batched = {
            "capacity": "capacity" in targets or varies(lambda h: h.network.capacity),
            "latency": "latency" in targets or varies(lambda h: h.network.latency),
            "size": "size" in targets or varies(lambda h: h.program.size),
        }
        for f in ("route", "release", "overhead", "after"):
            self.batched[f] = varies(lambda h, f=f: getattr(h.program, f))

        def same_packets(h: Compiled) -> bool:  # None and None, or equal arrays
            mine, theirs = jax.tree.leaves(h.network.packets), jax.tree.leaves(t.network.packets)
            return len(mine) == len(theirs) and all(map(np.array_equal, mine, theirs))

        if not all(same_packets(h) for h in built):
            raise ScenarioError(
                "sweep: points differ in which links are packetized or in their packet parameters"
                " (packet_bytes, header_bytes, buffer_bytes, variability): a sweep shares one set"
            )
        if not any(self.batched.values()):  # every point is the same scenario: still one row per point
            self.batched["capacity"] = True
        self.keep = (
            "makespan",
            *(["finish"] if "flow_finish" in plan.outputs else []),
            *(["resource_bytes"] if any(o.startswith("link") for o in plan.outputs) else []),
        )
        self.max_events = t.max_events  # of the common padded shape: one compile for the whole sweep

    def auto_chunk_size(self) -> int:
        """Points per chunk: what fits in a quarter of one device's free memory, times the devices."""
        t = self.plan.template
        n, h = t.program.route.shape
        p, r = t.program.after.shape[1], t.network.capacity.shape[0]
        # the event loop's state and the max-min temporaries, float64, with copies for the loop carry
        per_point = 8 * (16 * n * h + 4 * n * p + 48 * n + 16 * r)
        if self.batched["route"] and kernels.maxmin.dense_by_default(n, r):
            per_point += 8 * n * r  # each point's own incidence matrix (see kernels.run's `dense`)
        per_device = int(np.clip(_free_memory(self.devices[0]) // (4 * per_point), 1, MAX_POINTS_PER_DEVICE))
        n_dev = len(self.devices)
        return int(min(per_device * n_dev, -(-self.plan.n_points // n_dev) * n_dev))

    def inputs(self, rows: slice) -> tuple[Network, Program, np.ndarray]:
        """The chunk's kernel inputs (batched leaves [B, ...], shared leaves as one scenario's) and, per
        point, whether its scenario was built."""
        plan = self.plan
        keys = plan.host_key[rows]
        built = np.array([plan.hosts[k] is not None for k in keys], bool)
        fallback = next(k for k, h in enumerate(plan.hosts) if h is not None)
        use = np.where(built, keys, fallback)  # unbuilt points run a stand-in and are marked NOT_BUILT
        hosts = [plan.hosts[k] for k in use]
        t = plan.template

        def leaf(name: str, get) -> np.ndarray:
            return np.stack([get(h) for h in hosts]) if self.batched[name] else get(t)

        leaves = {f: leaf(f, lambda h, f=f: getattr(h.network, f)) for f in ("capacity", "latency")}
        leaves |= {
            f: leaf(f, lambda h, f=f: getattr(h.program, f))
            for f in ("route", "size", "release", "overhead", "after")
        }
        for name, a in plan.array_axes.items():
            per_point = plan.value[name][rows] if a.sampled else np.asarray(a.values)[plan.index[name][rows]]
            target = leaves[a.target]  # batched: an axis targets it
            for k in np.unique(use):
                sel = use == k
                sub = target[sel]
                a.apply(sub, plan.cols[name, int(k)], per_point[sel], plan.follow[name, int(k)])
                target[sel] = sub
        network = Network(leaves["capacity"], leaves["latency"], t.network.packets)
        program = Program(*(leaves[f] for f in ("route", "size", "release", "overhead", "after")))
        return network, program, built

    def __call__(self, rows: slice, width: int) -> dict[str, np.ndarray]:
        """The result columns of these points; `width` (the chunk size) pads every chunk to one shape."""
        network, program, built = self.inputs(rows)
        run = run_batch(
            network,
            program,
            max_events=self.max_events,
            keep=self.keep,
            throw=False,
            devices=self.devices,
            width=width,
        )
        t = self.plan.template
        status = np.where(built, run.status, int(Status.NOT_BUILT)).astype(np.int32)
        bad = status != int(Status.OK)
        values = {
            "status": status,
            "events": run.events.astype(np.int64),
            "makespan": np.where(bad, np.nan, run["makespan"]),
        }
        if "flow_finish" in self.plan.outputs:
            values["flow_finish"] = np.where(bad[:, None], np.nan, run["finish"][:, t.flow_slice])
        if "resource_bytes" in self.keep:
            link_bytes = np.where(bad[:, None], np.nan, run["resource_bytes"][:, t.link_slice])
            if "link_bytes" in self.plan.outputs:
                values["link_bytes"] = link_bytes
            if "link_utilization" in self.plan.outputs:
                capacity = np.broadcast_to(network.capacity, (status.size, network.capacity.shape[-1]))
                span = np.where(values["makespan"] > 0, values["makespan"], 1.0)  # as Result.link_utilization
                values["link_utilization"] = link_bytes / (capacity[:, t.link_slice] * span[:, None])
        return values


def _free_memory(device: jax.Device) -> int:
    """Bytes free on an accelerator; on CPU, the host's available memory split over its devices."""
    try:
        stats = device.memory_stats()
    except Exception:  # some backends do not implement memory_stats
        stats = None
    if stats and stats.get("bytes_limit"):
        return int(stats["bytes_limit"] - stats.get("bytes_in_use", 0))
    try:
        avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        avail = 2 << 30
    return int(avail // max(1, jax.local_device_count()))


def _meta(sweep: Sweep, plan: Plan) -> dict[str, Any]:
    axes = []
    for a in sweep.axes:
        d = {"name": a.name, "description": a.describe(), "labels": a.labels() if a.size else []}
        if isinstance(a, ArrayAxis) and not a.sampled:
            d["values"] = list(a.values)
        if isinstance(a, MessageSize) and not a.sampled:
            d["sizes"] = _message_sizes(a, sweep.scenario)
            if d["sizes"] is not None:
                d["labels"] = [format_bytes(b) for b in d["sizes"]]
        axes.append(d)
    busbw = {}
    if sweep.busbw is not None:
        axis, flow_bytes = _busbw_axis(sweep)
        busbw = {
            "busbw": json.dumps({**dataclasses.asdict(sweep.busbw), "axis": axis, "flow_bytes": flow_bytes})
        }
    return {
        **busbw,
        "format": FORMAT,
        "version": VERSION,
        "fingerprint": sweep.fingerprint(),
        "max_events": plan.template.max_events,
        "spec": json.dumps(sweep.describe()),
        "name": sweep.name or sweep.scenario.name,
        "n_points": plan.n_points,
        "axes": json.dumps(axes),
        "grid_shape": json.dumps(plan.grid_shape),
        "outputs": json.dumps(list(plan.outputs)),
    }


def _busbw_axis(sweep: Sweep) -> tuple[str | None, float | None]:
    """The message-size axis that scales the collective's S (None if none) and the bytes its flows share in
    the base scenario; refuses what would make S ambiguous."""
    sizes = [a for a in sweep.axes if isinstance(a, MessageSize)]
    if not sizes:
        return None, None
    if len(sizes) > 1:
        raise SweepError(
            f"busbw: one message-size axis can scale the collective's size, got {[a.name for a in sizes]}"
        )
    (axis,) = sizes
    flows = sweep.scenario.flows
    hit = match_ids([f.id for f in flows], axis.match, f"axis {axis.name!r}.flows")
    where = f"busbw: message-size axis {axis.name!r}"
    if len(hit) != len(flows):
        raise SweepError(
            f"{where} must size every flow of the collective; it matches {len(hit)} of {len(flows)}"
        )
    if axis.independent:
        raise SweepError(f"{where} draws each flow's size apart: the collective has no one size")
    base = {flows[i].bytes for i in hit}
    if not axis.is_scale and len(base) != 1:
        raise SweepError(
            f"{where} sets bytes, but the base flows' sizes differ ({len(base)} sizes): S is not defined"
        )
    return axis.name, float(next(iter(base))) if len(base) == 1 else None


def _message_sizes(axis: MessageSize, base: Scenario) -> list[float] | None:
    """Bytes per matched flow at each of the axis's values: its values, or its scales times the one size
    the matched flows share in the base scenario (None when they differ: the labels stay scales)."""
    if not axis.is_scale:
        return list(axis.values)
    flows = base.flows
    sizes = {
        flows[i].bytes for i in match_ids([f.id for f in flows], axis.match, f"axis {axis.name!r}.flows")
    }
    if len(sizes) != 1:
        return None
    (b,) = sizes
    return [b * s for s in axis.values]


def _layout(sweep: Sweep, plan: Plan) -> tuple[dict[str, Any], dict[str, Any]]:
    """The result columns (name -> (shape, dtype)) and the datasets written once at creation."""
    n, t = plan.n_points, plan.template
    columns: dict[str, Any] = {
        "status": ((n,), np.int32),
        "events": ((n,), np.int64),
        "makespan": ((n,), np.float64),
    }
    if "flow_finish" in plan.outputs:
        columns["flow_finish"] = ((n, t.n_flows), np.float64)
    for name in ("link_bytes", "link_utilization"):
        if name in plan.outputs:
            columns[name] = ((n, t.n_links), np.float64)
    axes: dict[str, dict[str, np.ndarray]] = {}
    for a in sweep.axes:
        d: dict[str, np.ndarray] = {}
        if a.name in plan.index:
            d["index"] = plan.index[a.name]
        if isinstance(a, ArrayAxis):
            d["value"] = plan.value[a.name] if a.sampled else np.asarray(a.values)[plan.index[a.name]]
        if a.name in plan.ids:
            d["ids"] = np.array(plan.ids[a.name], dtype=str)
        axes[a.name] = d
    extra = {
        "axes": axes,
        "host_key": plan.host_key,
        "flow_ids": np.array([f.id for f in t.scenario.flows], dtype=str),
        "link_ids": np.array([link.id for link in t.scenario.links], dtype=str),
        "scenario_errors": np.array(plan.errors, dtype=str),
    }
    return columns, extra
