"""SweepResult: a finished (or partly finished) sweep's points and metrics as NumPy arrays."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..kernels import Status
from ._axes import SweepError
from ._store import (
    COLUMNS,
    FILL,
    check_written_once,
    chunk_rows,
    damaged_chunks,
    open_h5,
    read_meta,
    readable,
)


@dataclasses.dataclass(frozen=True)
class AxisData:
    """One axis of a finished sweep.

    index: per point, the position of its value in `labels` (discrete axes), else None.
    value: per point, the number used: a scale, bytes/s, s or bytes; (points, len(ids)) for an
        independent sampled axis; None for scenario axes.
    sizes: for a discrete message-size axis, the bytes of each matched flow at each label (a `value`
        axis, or a `scale` axis whose flows share one size in the base scenario); else None.
    """

    name: str
    kind: str
    labels: tuple[str, ...]
    values: np.ndarray | None  # the discrete numbers (array axes) in label order
    index: np.ndarray | None
    value: np.ndarray | None
    ids: tuple[str, ...]  # the links or flows an independent axis draws for
    description: dict[str, Any]
    sizes: np.ndarray | None = None  # bytes per matched flow, per label (message-size axes)


@dataclasses.dataclass(frozen=True)
class SweepResult:
    """Per point (rows, in run order): status, events, makespan (s) and optional per-flow/per-link data.

    status holds netsim.Status bits: OK (0) when the point finished; MAX_EVENTS, STALLED, NONFINITE
    from the engine; NOT_BUILT when the point's scenario could not be built (e.g. failed links
    disconnect a flow); NOT_RUN when the point was not run yet (interrupted sweep). `reasons(i)`
    explains point i in words. Times of points that did not finish are NaN.
    """

    name: str
    axes: tuple[AxisData, ...]
    status: np.ndarray
    events: np.ndarray
    makespan: np.ndarray  # s
    flow_ids: tuple[str, ...]
    link_ids: tuple[str, ...]
    flow_finish: np.ndarray | None  # (points, flows) s
    link_bytes: np.ndarray | None  # (points, links) bytes
    link_utilization: np.ndarray | None  # (points, links) mean fraction of capacity over the makespan
    grid_shape: tuple[int, ...] | None  # axis sizes in axis order, for grid sweeps
    errors: tuple[str, ...]  # per scenario built on the host: "" or why it could not be built
    host_key: np.ndarray  # per point, its position in `errors`
    meta: dict[str, Any]

    @property
    def n_points(self) -> int:
        return int(self.status.shape[0])

    @property
    def complete(self) -> bool:
        """Every point was run (finished or failed): none is NOT_RUN."""
        return not bool(np.any(self.status & int(Status.NOT_RUN)))

    @property
    def ok(self) -> np.ndarray:
        """Per point, whether it finished (status OK)."""
        return self.status == int(Status.OK)

    def point_status(self, i: int) -> Status:
        """Point i's status as netsim.Status flags."""
        return Status(int(self.status[i]))

    def reasons(self, i: int) -> list[str]:
        """Why point i did not finish, one sentence per Status bit (empty if it finished)."""
        status = self.point_status(i)
        max_events = self.meta.get("max_events")
        out = status.reasons(
            events=int(self.events[i]), max_events=None if max_events is None else int(max_events)
        )
        if status & Status.NOT_BUILT:
            why = self.errors[int(self.host_key[i])] if len(self.errors) else ""
            out = [f"{r}: {why}" if why and "could not be built" in r else r for r in out]
        return out

    def axis(self, name: str) -> AxisData:
        for a in self.axes:
            if a.name == name:
                return a
        raise KeyError(f"no axis {name!r}; axes are {[a.name for a in self.axes]}")

    def metric(self, name: str) -> np.ndarray:
        """A per-point column by name (makespan, status, events, flow_finish, link_bytes, link_utilization), or
        busbw (bytes/s) for a sweep given `busbw=` (a collective's)."""
        if name == "busbw" and "busbw" in self.meta:
            return self._busbw()
        value = getattr(self, name, None) if name in _COLUMNS else None
        if value is None:
            have = [c for c in _COLUMNS if getattr(self, c) is not None] + ["busbw"] * ("busbw" in self.meta)
            raise KeyError(f"no metric {name!r} in this sweep; have {have}")
        return value

    def _busbw(self) -> np.ndarray:
        """nccl-tests' busbw per point: S / makespan x the bus factor, S scaled by the message-size axis."""
        from ..workloads.collectives import bus_factor

        b = _json(self.meta["busbw"])
        size = np.full(self.n_points, float(b["size"]))
        if b["axis"] is not None:
            a = self.axis(b["axis"])
            v = a.values[a.index] if a.index is not None else a.value
            scaled = a.description.get("scale") is not None or a.description.get("scale_range") is not None
            size = size * (v if scaled else v / float(b["flow_bytes"]))
        return size / self.makespan * bus_factor(b["kind"], int(b["ranks"]))

    def grid(self, metric: str | np.ndarray = "makespan") -> np.ndarray:
        """The metric laid out on the grid: shape grid_shape (+ trailing per-flow/link dims); NaN if not run."""
        if self.grid_shape is None:
            raise SweepError(
                "grid(): this sweep sampled random points; use the per-point arrays and axis values"
            )
        col = self.metric(metric) if isinstance(metric, str) else np.asarray(metric)
        out = np.full(self.grid_shape + col.shape[1:], np.nan)
        out[tuple(a.index for a in self.axes)] = col
        return out

    def to_xarray(self):
        """The sweep as an `xarray.Dataset`: one variable per metric (makespan, status, events and any
        per-flow / per-link column, with a "flow" or "link" dimension), `attrs["units"]` on each.

        A grid sweep has one dimension per axis, its coordinate the axis labels (strings: categorical
        axes stay categorical), and for numeric discrete axes a "{axis}_value" coordinate with the
        numbers. A sampled sweep has one "point" dimension; each axis is a coordinate along it (its
        labels for discrete axes, its numbers otherwise; an independent axis gets an "{axis}_id"
        dimension over the links or flows it draws for). Needs xarray: `pip install "netsim[xarray]"`.
        """
        try:
            import xarray as xr
        except ImportError:
            raise ImportError(
                'SweepResult.to_xarray needs xarray, which is not installed: pip install "netsim[xarray]"'
            ) from None
        coords: dict[str, Any] = {}
        if self.flow_ids:
            coords["flow"] = list(self.flow_ids)
        if self.link_ids:
            coords["link"] = list(self.link_ids)
        grid = self.grid_shape is not None
        if grid:
            dims = tuple(a.name for a in self.axes)
            for a in self.axes:
                coords[a.name] = list(a.labels)
                if a.values is not None and np.asarray(a.values).shape == (len(a.labels),):
                    coords[f"{a.name}_value"] = (a.name, np.asarray(a.values))
        else:
            dims = ("point",)
            coords["point"] = np.arange(self.n_points)
            for a in self.axes:
                if a.index is not None:
                    coords[a.name] = ("point", np.asarray(a.labels, dtype=object)[a.index])
                    if a.value is not None and a.value.ndim == 1:
                        coords[f"{a.name}_value"] = ("point", a.value)
                elif a.value is not None and a.value.ndim == 1:
                    coords[a.name] = ("point", a.value)
                elif a.value is not None:
                    coords[f"{a.name}_id"] = list(a.ids)
                    coords[a.name] = (("point", f"{a.name}_id"), a.value)
        data = {}
        for name in _COLUMNS:
            col = getattr(self, name)
            if col is None:
                continue
            if grid:
                fill = FILL.get(name, np.nan)
                out = np.full(self.grid_shape + col.shape[1:], fill, dtype=col.dtype)
                out[tuple(a.index for a in self.axes)] = col
                col = out
            data[name] = (dims + _EXTRA_DIMS.get(name, ()), col, {"units": _UNITS[name]})
        return xr.Dataset(data, coords, attrs={"name": self.name})

    @classmethod
    def from_parts(
        cls, meta: Mapping[str, Any], columns: Mapping[str, np.ndarray], extra: Mapping[str, Any]
    ) -> SweepResult:
        axes = []
        for d in _json(meta["axes"]):
            data = extra["axes"].get(d["name"], {})
            axes.append(
                AxisData(
                    name=d["name"],
                    kind=d["description"]["kind"],
                    labels=tuple(d["labels"]),
                    values=np.asarray(d["values"]) if d.get("values") is not None else None,
                    index=_opt(data.get("index")),
                    value=_opt(data.get("value")),
                    ids=tuple(_strs(data["ids"])) if "ids" in data else (),
                    description=d["description"],
                    sizes=np.asarray(d["sizes"], float) if d.get("sizes") is not None else None,
                )
            )
        grid = _json(meta["grid_shape"])
        return cls(
            name=str(meta.get("name", "")),
            axes=tuple(axes),
            status=np.asarray(columns["status"]),
            events=np.asarray(columns["events"]),
            makespan=np.asarray(columns["makespan"]),
            flow_ids=tuple(_strs(extra["flow_ids"])),
            link_ids=tuple(_strs(extra["link_ids"])),
            flow_finish=_opt(columns.get("flow_finish")),
            link_bytes=_opt(columns.get("link_bytes")),
            link_utilization=_opt(columns.get("link_utilization")),
            grid_shape=tuple(grid) if grid is not None else None,
            errors=tuple(_strs(extra["scenario_errors"])),
            host_key=np.asarray(extra["host_key"]),
            meta=dict(meta),
        )


_COLUMNS = COLUMNS
_UNITS = {
    "status": "netsim.Status bits",
    "events": "events",
    "makespan": "s",
    "flow_finish": "s",
    "link_bytes": "bytes",
    "link_utilization": "fraction of capacity",
}
_EXTRA_DIMS = {"flow_finish": ("flow",), "link_bytes": ("link",), "link_utilization": ("link",)}


def load_result(path: str | os.PathLike) -> SweepResult:
    """Reads a sweep results file (complete or interrupted) written by Sweep.run / `netsim sweep`.

    Rows of a chunk that fails its checksum (a damaged or altered file) read as NOT_RUN, with a note
    on stderr; rerunning the sweep recomputes them. Version 1 files (status -1 for rows not run) are
    read with those rows as NOT_RUN.
    """
    path = os.fspath(path)
    meta = read_meta(path)
    with open_h5(path, "r") as f, readable(path):
        check_written_once(f, path)
        columns = {k: f[k][...] for k in _COLUMNS if k in f}
        extra = {
            "axes": {name: {k: g[k][...] for k in g} for name, g in f["axes"].items()},
            **{k: f[k][...] for k in ("flow_ids", "link_ids", "scenario_errors", "host_key")},
        }
        damaged = damaged_chunks(f, meta)
    if meta.get("version") == 1:
        columns["status"] = np.where(columns["status"] == -1, int(Status.NOT_RUN), columns["status"]).astype(
            np.int32
        )
    for chunk, why in damaged:
        rows = chunk_rows(chunk, int(meta["chunk_size"]), int(meta["n_points"]))
        print(
            f"netsim sweep: {path}: chunk {chunk} (rows {rows.start}-{rows.stop - 1}) {why}: read as not run; "
            "rerun the sweep to recompute it",
            file=sys.stderr,
        )
        for k, col in columns.items():
            col[rows] = int(Status.NOT_RUN) if k == "status" else -1 if k == "events" else np.nan
    with readable(path):  # a damaged attribute (a flipped byte in its name) shows here
        return SweepResult.from_parts(meta, columns, extra)


def _json(v: Any) -> Any:
    return json.loads(v) if isinstance(v, str) else v


def _opt(v: Any) -> np.ndarray | None:
    return None if v is None else np.asarray(v)


def _strs(v: Any) -> list[str]:
    return [x.decode() if isinstance(x, bytes) else str(x) for x in np.asarray(v).tolist()]
