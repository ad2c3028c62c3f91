"""The pytrees the kernels take and return. Dimension letters: R resources (links, then devices),
N items (flows, then compute tasks), H hops per item, P predecessors per item.

Padding conventions (fixed shapes, so one compile serves many scenarios):
- `route[n, h] == R` is "no hop": it gathers a neutral value (infinite share, zero latency).
- `after[n, p] == N` is "no predecessor": it reads as done, finished at time 0.
- An item with no real hop at all is padding: done at t = 0 and never reported.
"""

from __future__ import annotations

import dataclasses
import enum

import jax
import numpy as np
from jaxtyping import Array, Bool, Float, Int


class Status(enum.IntFlag):
    """How a run ended: bit flags, OR-ed together (faults inside jit are data; the public entry raises).

    The engine sets MAX_EVENTS, STALLED and NONFINITE; NOT_BUILT and NOT_RUN are set on the host by
    batch runners (a point whose scenario could not be built; a row of a results file not run yet).
    """

    OK = 0
    MAX_EVENTS = 1
    STALLED = 2
    NONFINITE = 4
    NOT_BUILT = 8
    NOT_RUN = 16

    def reasons(self, *, events: int | None = None, max_events: int | None = None) -> list[str]:
        """One sentence per bit set, in bit order."""
        said = {
            Status.MAX_EVENTS: f"hit max_events={max_events} after {events} events (raise max_events)",
            Status.STALLED: "stalled: unfinished items but no future event",
            Status.NONFINITE: "non-finite values appeared",
            Status.NOT_BUILT: "its scenario could not be built",
            Status.NOT_RUN: "not run yet",
        }
        return [text for bit, text in said.items() if self & bit]


# plain ints of the engine's bits, for use inside traced code (JAX takes int, not IntFlag, as a scalar)
OK, MAX_EVENTS, STALLED, NONFINITE = (
    int(s) for s in (Status.OK, Status.MAX_EVENTS, Status.STALLED, Status.NONFINITE)
)


# Inputs are built on the host as NumPy arrays and become jax.Arrays under jit. A leading `...` admits
# a batch axis on any leaf (netsim.run_batch vmaps over the leaves that have one).
AnyArray = Array | np.ndarray


def static(default):
    """A field of a `pytree` class kept in the tree's structure, not among its leaves: a Python value that
    shapes the compiled code (jit compiles once per value; a batch's trees must agree on it)."""
    return dataclasses.field(default=default, metadata={"static": True})


def pytree(cls: type) -> type:
    """`cls` as a frozen dataclass that is a JAX pytree of its fields (`static` ones in its structure):
    what an `eqx.Module` gives these types, without importing equinox on the way to a cached executable
    (0.1 s of every process's start). As equinox does, unflattening skips `__init__`: JAX rebuilds pytrees
    around placeholders (float0 tangents, vmap axes, None) that are not the fields' types."""
    cls = dataclasses.dataclass(frozen=True, eq=False)(cls)
    fields = dataclasses.fields(cls)
    names = tuple(f.name for f in fields if not f.metadata.get("static"))
    statics = tuple(f.name for f in fields if f.metadata.get("static"))
    keys = tuple(jax.tree_util.GetAttrKey(name) for name in names)

    def unflatten(aux, leaves):
        obj = object.__new__(cls)
        for name, value in (*zip(names, leaves, strict=True), *zip(statics, aux, strict=True)):
            object.__setattr__(obj, name, value)
        return obj

    aux = lambda x: tuple(getattr(x, n) for n in statics)
    jax.tree_util.register_pytree_with_keys(
        cls,
        lambda x: (tuple(zip(keys, (getattr(x, n) for n in names), strict=True)), aux(x)),
        unflatten,
        flatten_func=lambda x: (tuple(getattr(x, n) for n in names), aux(x)),
    )
    return cls


@pytree
class Packets:
    """How packetized resources carry their load: payload efficiency and queueing (`kernels.queueing`).

    A resource with size > 0 moves packets of `size` payload bytes plus `header` bytes on the wire, so
    items share `capacity x size / (size + header)` (`payload_capacity`), and an item's first byte waits
    in its queue (`first_byte_wait`). size == 0: not packetized (fluid, no queueing): devices, shared
    resources, padding and plain links.
    """

    size: Float[AnyArray, "... R"]  # payload bytes per packet; 0 = not packetized
    header: Float[AnyArray, "... R"]  # header and framing bytes per packet on the wire
    buffer: Float[AnyArray, "... R"]  # bytes the queue holds (inf: unbounded)
    variability: Float[AnyArray, "... R"]  # squared coefficient of variation of the service time


@pytree
class Network:
    """What a sweep or a calibration varies: per-resource capacity and latency, and packetization."""

    capacity: Float[
        AnyArray, "... R"
    ]  # bytes/s on the wire for links; work-seconds per second (1.0) for devices
    latency: Float[AnyArray, "... R"]  # s, paid once per item crossing the resource, before its first byte
    # None: no resource packetized, and the engine is the same program as without the queueing model
    packets: Packets | None = None


@pytree
class Program:
    """Items (flows and tasks) with their routes, sizes and dependencies."""

    route: Int[AnyArray, "... N H"]  # resource index per hop; R = no hop
    size: Float[AnyArray, "... N"]  # bytes (flows) or seconds of work (tasks)
    release: Float[AnyArray, "... N"]  # s: earliest start
    overhead: Float[AnyArray, "... N"]  # s: fixed delay before the first byte, on top of route latency
    after: Int[AnyArray, "... N P"]  # predecessor item indices; N = none


@pytree
class Allocation:
    """One max-min fair allocation."""

    active: Bool[Array, " N"]  # the items it shares the resources among
    rate: Float[Array, " N"]  # bytes/s; 0 for inactive items
    bottleneck: Int[Array, " N"]  # hop index of the link that froze the item (its bottleneck)
    load: Float[Array, " R"]  # sum of the rates crossing each resource
    rounds: Int[Array, ""]  # freezing rounds used


@pytree
class SimState:
    """The event loop's state; at the end, the simulation's result."""

    time: Float[Array, ""]  # s
    remaining: Float[Array, " N"]  # bytes (or work) still to move
    started: Bool[Array, " N"]
    done: Bool[Array, " N"]
    start: Float[Array, " N"]  # s; inf until started
    first_byte: Float[Array, " N"]  # s: start + route latency + overhead
    finish: Float[Array, " N"]  # s; inf until done
    resource_bytes: Float[Array, " R"]  # bytes carried (work done, for devices)
    resource_busy: Float[Array, " R"]  # s with at least one item moving through
    held: Float[Array, "N H"]  # s each item spent with hop h as its bottleneck
    allocation: Allocation  # the rates of the items moving bytes since the last event
    events: Int[Array, ""]
    merged: Int[Array, ""]  # completions and first bytes folded into an earlier event (run's tolerance > 0)
    rounds: Int[Array, ""]  # max-min rounds over all events
    max_rounds: Int[Array, ""]  # most rounds any one event needed
    status: Int[Array, ""]  # OK or MAX_EVENTS | STALLED | NONFINITE bits
    trace_time: Float[Array, " K"]  # s: start of each event interval (K = 0 unless recording)
    trace_load: Float[Array, "K R"]  # bytes/s through each resource during that interval
    # whether the item's first byte has had its queueing wait added; None unless the network is packetized
    queued: Bool[Array, " N"] | None = None
