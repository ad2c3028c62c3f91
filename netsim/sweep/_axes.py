"""Sweep axes: what varies from one what-if point to the next.

Two kinds of axis:
- array axes (link bandwidth, link latency, message size) change numbers inside the compiled arrays,
  so every value of them shares one compiled scenario and runs in the same vmapped batch;
- scenario axes (failed links, Python callbacks for ring orders, placements, schedule parameters)
  change routes or flows, so each of their values is a scenario of its own, compiled on the host and
  padded to the sweep's common shape.

An array axis lists discrete values (`scale=` or `value=`), which a grid sweep crosses, or a range
(`scale_range=` or `value_range=`), which random sampling draws from (optionally per link or flow).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from .._checks import quantity, show
from .._errors import NetsimError, ScenarioError
from .._routing import LinkGraph
from .._scenario import Scenario, bandwidth_targets
from .._units import format_bytes, format_quantity


class SweepError(NetsimError, ValueError):
    """Bad sweep input; the message names the offending field and value."""


def _pattern_tuple(patterns: str | Sequence[str], where: str) -> tuple[str, ...]:
    if isinstance(patterns, str):
        patterns = (patterns,)
    patterns = tuple(patterns)
    if not patterns or not all(isinstance(p, str) and p for p in patterns):
        raise SweepError(f"{where}: expected an id, a glob or a list of them, got {patterns!r}")
    return patterns


def match_ids(ids: Sequence[str], patterns: tuple[str, ...], where: str) -> np.ndarray:
    """Positions of the ids matching any glob in `patterns` (fnmatch: *, ?, [..]); a glob matching none
    of them raises, also inside a list (a typo'd id beside good ones)."""
    for p in patterns:
        if not any(fnmatch.fnmatchcase(x, p) for x in ids):
            shown = "" if len(patterns) == 1 else f" (in {show(list(patterns))})"
            raise SweepError(f"{where}: {show(p)}{shown} matches none of the {len(ids)} ids")
    return np.asarray([i for i, x in enumerate(ids) if any(fnmatch.fnmatchcase(x, p) for p in patterns)])


def _within(value: float, unit: str, where: str) -> None:
    """SweepError unless `value` lies within netsim's limits for `unit` ("bandwidth", "time", "bytes")."""
    try:
        quantity(value, unit, where)
    except ScenarioError as e:
        raise SweepError(str(e)) from None


@dataclasses.dataclass(frozen=True)
class Axis:
    """Base of all axes: `name` labels the axis in results and plots."""

    name: str

    scenario_side: ClassVar[bool]  # True: each value is its own scenario (host-built)

    @property
    def size(self) -> int:
        """Number of discrete values (0 for a sampled range)."""
        raise NotImplementedError

    def labels(self) -> list[str]:
        """One short label per discrete value, for results and plot ticks."""
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        """A JSON-able description: part of the sweep's fingerprint (resume refuses a changed sweep)."""
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class ArrayAxis(Axis):
    """An axis that rescales or sets one compiled array at the matching links (or flows).

    Exactly one of `scale`, `value` (discrete) or `scale_range`, `value_range` (sampled) is given.
    With `log`, ranges are sampled log-uniformly; with `independent`, each matched link (or flow)
    draws its own value instead of all sharing one draw.
    """

    match: str | Sequence[str] = "*"
    scale: Sequence[float] | None = None
    value: Sequence[float] | None = None
    scale_range: tuple[float, float] | None = None
    value_range: tuple[float, float] | None = None
    log: bool = False
    independent: bool = False

    scenario_side: ClassVar[bool] = False
    target: ClassVar[str]  # "capacity", "latency" or "size"
    unit: ClassVar[str]  # of `value`
    selects: ClassVar[str]  # "links" or "flows"

    def __post_init__(self):
        where = f"axis {self.name!r}"
        object.__setattr__(self, "match", _pattern_tuple(self.match, f"{where}.{self.selects}"))
        given = [k for k in ("scale", "value", "scale_range", "value_range") if getattr(self, k) is not None]
        if len(given) != 1:
            raise SweepError(
                f"{where}: give exactly one of scale, value, scale_range, value_range; got {given}"
            )
        key = given[0]
        raw = getattr(self, key)
        if key.endswith("_range"):
            if len(raw) != 2:
                raise SweepError(f"{where}.{key}: expected [low, high], got {raw!r}")
            lo, hi = (float(x) for x in raw)
            if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi or lo < 0 or (self.log and lo <= 0):
                raise SweepError(
                    f"{where}.{key}: need finite 0 {'<' if self.log else '<='} low <= high, got {raw!r}"
                )
            object.__setattr__(self, key, (lo, hi))
        else:
            vals = tuple(float(x) for x in raw)
            if not vals or not all(math.isfinite(v) and v >= 0 for v in vals):
                raise SweepError(
                    f"{where}.{key}: expected a non-empty list of finite numbers >= 0, got {raw!r}"
                )
            object.__setattr__(self, key, vals)
        if self.independent and not key.endswith("_range"):
            raise SweepError(f"{where}: independent=True needs scale_range or value_range (sampled draws)")
        if not self.is_scale:  # netsim's limits (a scale's are checked against each scenario: `check_limits`)
            for v in getattr(self, key):
                _within(v, self.unit, f"{where}.{key}")
        if self.target == "capacity" and 0.0 in (self.scale or self.value or ()):
            raise SweepError(
                f"{where}: a bandwidth of 0 is a failed link: use a failed-links axis "
                "(it reroutes the flows on the host)"
            )

    @property
    def is_scale(self) -> bool:
        return self.scale is not None or self.scale_range is not None

    @property
    def sampled(self) -> bool:
        return self.scale_range is not None or self.value_range is not None

    @property
    def values(self) -> tuple[float, ...]:
        return self.scale if self.scale is not None else self.value  # type: ignore[return-value]

    @property
    def size(self) -> int:
        return 0 if self.sampled else len(self.values)

    def labels(self) -> list[str]:
        if self.is_scale:
            return [f"x{v:g}" for v in self.values]
        if self.unit == "bytes":
            return [format_bytes(v) for v in self.values]
        return [format_quantity(v, self.unit) for v in self.values]

    def describe(self) -> dict[str, Any]:
        d = {"name": self.name, "kind": KIND_OF[type(self)], self.selects: list(self.match)}
        for key in ("scale", "value", "scale_range", "value_range"):
            if getattr(self, key) is not None:
                d[key] = list(getattr(self, key))
        if self.sampled:
            d.update(log=self.log, independent=self.independent)
        return d

    def draw(self, rng: np.random.Generator, n: int, width: int) -> np.ndarray:
        """n sampled values, shape (n,) or (n, width) when independent."""
        lo, hi = self.scale_range if self.scale_range is not None else self.value_range  # type: ignore[misc]
        shape = (n, width) if self.independent else (n,)
        if self.log:
            return np.exp(rng.uniform(math.log(lo), math.log(hi), shape))
        return rng.uniform(lo, hi, shape)

    def check_limits(self, current: np.ndarray, ids: Sequence[str], where: str) -> None:
        """SweepError unless the scaled values of the matched columns (`current` [M], their ids) stay within
        netsim's limits at this axis's extreme scales."""
        if not self.is_scale or not len(current):
            return
        scales = self.scale if self.scale is not None else self.scale_range
        for factor in (min(scales), max(scales)):  # type: ignore[type-var]
            for i in (int(np.argmin(current)), int(np.argmax(current))):
                _within(float(current[i] * factor), self.unit, f"{where}: {ids[i]!r} x{factor:g}")

    def columns(self, scenario: Scenario) -> list[str]:
        """Ids of the columns of the array this axis changes: flows, links, and for bandwidth the links then
        the shared resources (the compiled capacity's order)."""
        if self.selects == "flows":
            return [f.id for f in scenario.flows]
        return [x.id for x in scenario.links] + [r.id for r in scenario.shared if self.target == "capacity"]

    def targets(self, scenario: Scenario, where: str) -> tuple[list[str], list[tuple[str, tuple[str, ...]]]]:
        """The ids of `scenario` this axis sets (links or flows; for bandwidth also the shared resources it
        names) and, for bandwidth, the shared resources that follow their links, with their link ids: the
        rule of `Topology.scaled` (`netsim._scenario.bandwidth_targets`). None matching raises."""
        if self.target != "capacity":
            ids = self.columns(scenario)
            return [ids[i] for i in match_ids(ids, self.match, where)], []
        match_ids(self.columns(scenario), self.match, where)  # every glob matches a link or shared resource
        links, following, named = bandwidth_targets(scenario.links, scenario.shared, self.match)
        budget = {r.id: r.links for r in scenario.shared}
        return links + named, [(r, budget[r]) for r in following]

    def apply(
        self,
        arr: np.ndarray,
        cols: np.ndarray,
        v: np.ndarray,
        followers: Sequence[tuple[int, np.ndarray]] = (),
    ) -> None:
        """In place on a (B, width) batch: the matched columns times (or set to) the per-point values v;
        each follower (a shared resource's column, the positions of its links in `cols`) times the largest
        factor its links got, so a cable's two-way budget keeps its ratio to the cable."""
        v = np.broadcast_to(v if v.ndim == 2 else v[:, None], (arr.shape[0], len(cols)))
        before = arr[:, cols] if followers and not self.is_scale else None
        if self.is_scale:
            arr[:, cols] *= v
        else:
            arr[:, cols] = v
        for col, links in followers:
            factor = v[:, links] if before is None else v[:, links] / before[:, links]
            arr[:, col] *= factor.max(axis=1)


@dataclasses.dataclass(frozen=True)
class LinkBandwidth(ArrayAxis):
    """Scales or sets the bandwidth (bytes/s) of the links whose ids match `match`.

    A shared resource (a cable's two-way budget, a staging engine) follows its links when all of them
    match: it is scaled by the largest factor its links get (for `value`, the value over the link's
    bandwidth), as `Topology.scaled` does. One whose own id matches, and whose links do not all match,
    is scaled or set as a link."""

    target: ClassVar[str] = "capacity"
    unit: ClassVar[str] = "bandwidth"
    selects: ClassVar[str] = "links"


@dataclasses.dataclass(frozen=True)
class LinkLatency(ArrayAxis):
    """Scales or sets the latency (s) of the links whose ids match `match`."""

    target: ClassVar[str] = "latency"
    unit: ClassVar[str] = "time"
    selects: ClassVar[str] = "links"


@dataclasses.dataclass(frozen=True)
class MessageSize(ArrayAxis):
    """Scales or sets the bytes of the flows whose ids match `match` (message-size sweeps)."""

    target: ClassVar[str] = "size"
    unit: ClassVar[str] = "bytes"
    selects: ClassVar[str] = "flows"


@dataclasses.dataclass(frozen=True)
class FailedLinks(Axis):
    """Each value is a set of failed links (ids or globs; an empty set is the healthy fabric).

    A failed link carries nothing: flows whose route crossed it take the shortest path (least latency,
    then fewest hops) that avoids every failed link; other flows keep their routes. The link stays in
    the link table (zero bytes), so per-link results keep one layout across the sweep.
    """

    sets: Sequence[Sequence[str]] = ((),)

    scenario_side: ClassVar[bool] = True

    def __post_init__(self):
        where = f"axis {self.name!r}.sets"
        sets = []
        for i, s in enumerate(self.sets):
            if isinstance(s, str) or not all(isinstance(x, str) and x for x in s):
                raise SweepError(f"{where}[{i}]: expected a list of link ids or globs, got {s!r}")
            sets.append(tuple(s))
        if not sets:
            raise SweepError(f"{where}: expected at least one set of links (use [] for none failed)")
        object.__setattr__(self, "sets", tuple(sets))

    @property
    def size(self) -> int:
        return len(self.sets)

    def labels(self) -> list[str]:
        return [",".join(s) if s else "none" for s in self.sets]

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "kind": "failed_links", "sets": [list(s) for s in self.sets]}

    def build(self, scenario: Scenario, index: int, routes: Sequence[tuple[str, ...]]) -> Scenario:
        """`scenario` with set `index` failed; `routes` are its flows' current routes."""
        patterns = self.sets[index]
        if not patterns:
            return scenario
        where = f"axis {self.name!r}.sets[{index}]"
        ids = [link.id for link in scenario.links]
        failed = {ids[i] for i in match_ids(ids, patterns, where)}
        graph = LinkGraph([link for link in scenario.links if link.id not in failed])
        flows = []
        for i, (flow, route) in enumerate(zip(scenario.flows, routes, strict=True)):
            if failed.isdisjoint(route):
                flows.append(dataclasses.replace(flow, route=tuple(route)))
            else:
                new = graph.shortest_path(
                    flow.src,
                    flow.dst,
                    where=f"flows[{i}] (id {flow.id!r}) with {where} {sorted(failed)} failed",
                )
                flows.append(dataclasses.replace(flow, route=new))
        return dataclasses.replace(scenario, flows=tuple(flows))


@dataclasses.dataclass(frozen=True)
class ScenarioAxis(Axis):
    """Each value is passed to `build(scenario, value) -> Scenario`: ring orders, placements, schedules.

    `build` must be deterministic (resumed and multi-host sweeps rebuild the same scenarios). Values
    should be JSON-able (they are recorded in the results and in the sweep's fingerprint).
    """

    values: Sequence[Any] = ()
    build: Callable[[Scenario, Any], Scenario] | None = None
    function: str = ""  # "module:attr" or "file.py:attr" when read from a spec; recorded for resume

    scenario_side: ClassVar[bool] = True

    def __post_init__(self):
        if not callable(self.build):
            raise SweepError(
                f"axis {self.name!r}.build: expected a callable (scenario, value) -> Scenario, "
                f"got {self.build!r}"
            )
        if not self.values:
            raise SweepError(f"axis {self.name!r}.values: expected a non-empty list")
        object.__setattr__(self, "values", tuple(self.values))

    @property
    def size(self) -> int:
        return len(self.values)

    def labels(self) -> list[str]:
        return [str(v) for v in self.values]

    def describe(self) -> dict[str, Any]:
        fn = (
            self.function
            or f"{getattr(self.build, '__module__', '?')}:{getattr(self.build, '__qualname__', '?')}"
        )
        return {
            "name": self.name,
            "kind": "python",
            "function": fn,
            "values": [_jsonable(v) for v in self.values],
        }

    def apply(self, scenario: Scenario, index: int) -> Scenario:
        """build(scenario, values[index]); a ScenarioError marks the point unbuildable, any other
        exception is a fault of the callback or of the value and stops the sweep (a SweepError)."""
        value = self.values[index]
        try:
            out = self.build(scenario, value)  # type: ignore[misc]
        except ScenarioError:
            raise
        except Exception as e:
            raise SweepError(
                f"axis {self.name!r}: build(scenario, {value!r}) raised {type(e).__name__}: {e}"
            ) from e
        if not isinstance(out, Scenario):
            raise ScenarioError(
                f"axis {self.name!r}: build({self.values[index]!r}) returned "
                f"{type(out).__name__}, not a netsim.Scenario"
            )
        return out


def _jsonable(v: Any) -> Any:
    if isinstance(v, tuple | list):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, str | int | float | bool) or v is None:
        return v
    return repr(v)


KIND_OF: dict[type, str] = {LinkBandwidth: "bandwidth", LinkLatency: "latency", MessageSize: "bytes"}
