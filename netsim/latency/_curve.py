"""The friendly entry: one curve, or many in one batched call, as plain NumPy results."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax
import numpy as np

from .._compile import bucket
from .._errors import ScenarioError
from ._model import check_rates, curves, shape_load
from ._presets import RouterPreset, router_preset


@dataclasses.dataclass(frozen=True)
class LatencyCurve:
    """Average packet latency against offered load on one shape and pattern.

    Rates and accepted throughput in packets per node per cycle; latencies in cycles (inf at and past
    saturation); `seconds` converts with the router's clock when it has one. Past saturation `accepted` is
    what the sources get at their max-min fair rates (those off the full channels keep growing; on a mesh
    or torus shape, each node a source; on a netsim topology, all traffic as one).
    """

    topology: str
    traffic: str
    packet_size: int
    router: RouterPreset
    rates: np.ndarray
    latency: np.ndarray
    accepted: np.ndarray
    saturation: float
    zero_load: float
    utilization: np.ndarray  # [rate, channel], of each channel's usable cycles
    wait: np.ndarray  # [rate, channel] cycles a packet queues there
    channel_names: tuple[str, ...]

    def seconds(self, cycles):
        if self.router.clock_hz is None:
            raise ScenarioError(f"router {self.router.name!r} has no clock: latencies are in cycles only")
        return np.asarray(cycles) / self.router.clock_hz

    def to_dict(self) -> dict:
        """{"points": [{"rate", "latency", "accepted"}, ...], "saturation"}; latency null where saturated;
        with a clock also "clock_hz" and each point's "latency_s" (seconds)."""
        doc = {
            "topology": self.topology,
            "traffic": self.traffic,
            "packet_size": self.packet_size,
            "router": self.router.name,
            "zero_load": self.zero_load,
            "points": [
                {"rate": float(r), "latency": float(lat) if np.isfinite(lat) else None, "accepted": float(a)}
                for r, lat, a in zip(self.rates, self.latency, self.accepted, strict=True)
            ],
            "saturation": self.saturation,
        }
        if self.router.clock_hz is not None:
            doc["clock_hz"] = self.router.clock_hz
            for point in doc["points"]:
                cycles = point["latency"]
                point["latency_s"] = None if cycles is None else float(self.seconds(cycles))
        return doc


#: what a spec of latency_curves may hold
SPEC_FIELDS = ("topology", "traffic", "packet_size", "router", "vcs", "buffer", "clock_hz", "rates")


def latency_curves(specs: Sequence[dict], rates=None) -> list[LatencyCurve]:
    """Many curves, in one vmapped call per size class (channels rounded up to a power of two). Each spec:
    topology, traffic, packet_size, and optionally router (preset name, default "booksim"), vcs, buffer,
    clock_hz and rates: its own offered rates, in place of `rates`, which the others share. Curves with rates
    of their own are padded to the longest of their class with their last rate, so that one compiled call
    serves the class."""
    for i, spec in enumerate(specs):
        unknown = sorted(set(spec) - set(SPEC_FIELDS))
        if unknown:
            raise ScenarioError(f"specs[{i}]: unknown field(s) {unknown}; known: {list(SPEC_FIELDS)}")
        if "topology" not in spec:
            raise ScenarioError(f"specs[{i}]: no 'topology' (mesh:KxK or torus:KxK)")
    own = [
        check_rates(spec["rates"], where=f"specs[{i}].rates") if spec.get("rates") is not None else None
        for i, spec in enumerate(specs)
    ]
    if rates is None and any(r is None for r in own):
        missing = next(i for i, r in enumerate(own) if r is None)
        raise ScenarioError(f"specs[{missing}]: no rates (pass rates= for all, or the spec's own 'rates')")
    shared = None if rates is None else check_rates(rates)
    per_curve = [shared if r is None else r for r in own]
    if any(r is not None for r in own):  # a row per curve
        width = max(r.size for r in per_curve)
        table = np.stack([np.pad(r, (0, width - r.size), mode="edge") for r in per_curve])
    else:
        table = shared
    loads, flits, presets = [], [], []
    for spec in specs:
        size = spec.get("packet_size", 1)
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ScenarioError(f"packet_size: must be a whole number of flits >= 1, got {size!r}")
        loads.append(shape_load(spec["topology"], spec.get("traffic", "uniform")))
        flits.append(float(size))
        presets.append(
            router_preset(
                spec.get("router", "booksim"), spec.get("vcs"), spec.get("buffer"), spec.get("clock_hz")
            )
        )
    # one call per size class (channels rounded up to a power of two): a call pads every curve to its
    # largest, so a 4x4 mesh's 80 channels beside a 16x16's 1280 would cost 16 times its work
    classes: dict[int, list[int]] = {}
    for i, x in enumerate(loads):
        classes.setdefault(bucket(x.load.size, 1), []).append(i)
    got: dict[int, LatencyCurve] = {}
    for members in classes.values():
        rows = table if table.ndim == 1 else table[members, : max(per_curve[i].size for i in members)]
        with jax.enable_x64(True):  # cycles in float64; scoped, so the caller's config stays
            out = jax.device_get(
                curves(
                    [loads[i] for i in members],
                    [flits[i] for i in members],
                    [presets[i].router() for i in members],
                    rows,
                )
            )
        for row, i in enumerate(members):
            points, channels = per_curve[i].size, loads[i].load.size  # padding dropped
            got[i] = LatencyCurve(
                topology=specs[i]["topology"],
                traffic=specs[i].get("traffic", "uniform"),
                packet_size=int(flits[i]),
                router=presets[i],
                rates=per_curve[i],
                latency=np.asarray(out.latency[row, :points]),
                accepted=np.asarray(out.accepted[row, :points]),
                saturation=float(out.saturation[row]),
                zero_load=float(out.zero_load[row]),
                utilization=np.asarray(out.utilization[row, :points, :channels]),
                wait=np.asarray(out.wait[row, :points, :channels]),
                channel_names=loads[i].channel_names,
            )
    return [got[i] for i in range(len(specs))]


def latency_curve(
    topology: str,
    traffic: str = "uniform",
    *,
    packet_size: int = 1,
    rates,
    router: str = "booksim",
    vcs: int | None = None,
    buffer: int | None = None,
    clock_hz: float | None = None,
) -> LatencyCurve:
    """One load-latency curve (see LatencyCurve); `clock_hz`: the router's clock, for latencies in seconds."""
    spec = dict(
        topology=topology,
        traffic=traffic,
        packet_size=packet_size,
        router=router,
        vcs=vcs,
        buffer=buffer,
        clock_hz=clock_hz,
    )
    return latency_curves([spec], rates)[0]
