"""Figures people look at: a sweep's metric over its axes, busbw vs message size, per-link utilization
of a topology, pipeline timelines and load-latency curves. Matplotlib (optional dependency: `pip install netsim[plots]`),
drawn on Agg `Figure` objects (no pyplot state): each function returns its Figure and, given `path`,
saves a PNG there.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._checks import atomic_path
from ._scenario import Link, ScenarioError
from ._units import format_bytes

_TIME_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns"))


def _figure(width: float = 7.0, height: float = 4.2):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _save(fig, path: str | os.PathLike | None):
    if path is not None:  # atomically, as every netsim output; in the format the suffix names (PNG if none)
        path = os.fspath(path)
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=130, format=os.path.splitext(path)[1][1:] or "png")
    return fig


def _time_unit(values: np.ndarray) -> tuple[float, str]:
    """A unit (scale, name) in which the largest finite |value| reads between 1 and 1000."""
    finite = np.abs(values[np.isfinite(values)])
    top = float(finite.max()) if finite.size else 1.0
    return next(((s, u) for s, u in _TIME_UNITS if top >= s), _TIME_UNITS[-1])


def _value_unit(axis) -> tuple[float, str]:
    """(scale, unit) for the values of a sweep axis that sets bandwidths (GB/s) or latencies (s to ns)."""
    d = axis.description
    if "value" not in d and "value_range" not in d:
        return 1.0, ""
    if d.get("kind") == "bandwidth":
        return 1e9, "GB/s"
    if d.get("kind") == "latency":
        return _time_unit(np.asarray(d.get("value") or d.get("value_range"), float))
    return 1.0, ""


# --- sweeps --------------------------------------------------------------------------------------
def plot_sweep(
    result,
    path: str | os.PathLike | None = None,
    *,
    metric: str = "makespan",
    x: str | None = None,
    hue: str | None = None,
    reduce: str = "min",
    title: str | None = None,
):
    """A sweep's per-point metric (makespan by default; busbw for a sweep given `busbw=`) over its axes.

    Grid sweeps draw one line per value of `hue` over the values of `x`; the other axes are reduced
    with `reduce` ("min", "median" or "max" over their values: the best, typical or worst case).
    Random-sample sweeps draw a scatter of the metric over `x` (the mean of an independent axis's
    draws), coloured by `hue`.

    Args:
        result: a netsim.sweep.SweepResult.
        x, hue: axis names; default the first numeric axis, then the next axis with several values.
    """
    col = result.metric(metric)
    if col.ndim != 1:
        raise ScenarioError(f"metric: plot_sweep draws per-point scalars; {metric!r} has shape {col.shape}")
    names = [a.name for a in result.axes]
    for what, name in (("x", x), ("hue", hue)):
        if name is not None and name not in names:
            raise ScenarioError(f"{what}: no axis {name!r}; axes are {names}")
    if reduce not in ("min", "median", "max"):
        raise ScenarioError(f"reduce: expected 'min', 'median' or 'max', got {reduce!r}")
    numeric = [a.name for a in result.axes if a.values is not None or a.value is not None]
    x = x or (numeric[0] if numeric else names[0])
    if hue is None:
        hue = next(
            (a.name for a in result.axes if a.name != x and (a.index is None or len(a.labels) > 1)), None
        )
    scale, unit = (
        _time_unit(col) if metric == "makespan" else (1e9, "GB/s") if metric == "busbw" else (1.0, "")
    )
    ylabel = f"{metric} ({unit})" if unit else metric
    fig = _figure()
    ax = fig.add_subplot()
    xa = result.axis(x)
    xscale, xunit = _value_unit(xa)
    if result.grid_shape is not None:
        grid = result.grid(col)
        keep = [names.index(x)] + ([names.index(hue)] if hue else [])
        others = tuple(i for i in range(len(names)) if i not in keep)
        if others:
            red = {"min": np.nanmin, "median": np.nanmedian, "max": np.nanmax}[reduce]
            with warnings.catch_warnings():  # points that never ran or failed are NaN: all-NaN slices
                warnings.simplefilter("ignore", RuntimeWarning)
                grid = red(grid, axis=others)
        if len(keep) == 2 and keep[0] > keep[1]:
            grid = grid.T
        grid = grid.reshape(len(xa.labels), -1)
        sizes = xa.sizes  # message-size axes: bytes per flow, not scales
        xs = np.asarray(
            sizes if sizes is not None else xa.values if xa.values is not None else np.arange(len(xa.labels)),
            float,
        )
        xs = xs / (xscale if sizes is None else 1.0)
        hue_labels = result.axis(hue).labels if hue else [""]
        for j, label in enumerate(hue_labels):
            text = f"{hue}={label}" + ("" if np.isfinite(grid[:, j]).any() else " (no point ran)")
            # styles and shrinking markers keep coinciding lines visible
            ax.plot(
                xs,
                grid[:, j] / scale,
                ls=("-", "--", "-.", ":")[j % 4],
                marker="o",
                ms=max(3.0, 7.0 - 0.8 * j),
                label=text if hue else None,
            )
        if xa.values is None:
            ax.set_xticks(xs, xa.labels, rotation=30 if len(xa.labels) > 4 else 0)
        elif np.all(xs > 0) and xs.max() / xs.min() > 10:
            ax.set_xscale("log", base=2 if sizes is not None else 10)
            finite = grid[np.isfinite(grid) & (grid > 0)]
            if finite.size and finite.max() / finite.min() > 100:  # e.g. makespan over message sizes
                ax.set_yscale("log")
        if sizes is not None:  # label the sizes with units (at most ~8 ticks)
            step = max(1, len(xs) // 8)
            ax.set_xticks(xs[::step], list(xa.labels)[::step], rotation=30 if len(xs[::step]) > 4 else 0)
            ax.minorticks_off()
        if hue:
            ax.legend(fontsize="small", ncols=2 if len(hue_labels) > 6 else 1)
        rest = [names[i] for i in others]
        sub = f" ({reduce} over {', '.join(rest)})" if rest else ""
    else:
        xv = xa.value if xa.value is not None else xa.index.astype(float)
        xv = (xv.mean(axis=1) if xv.ndim == 2 else xv) / (xscale if xa.value is not None else 1.0)
        ha = result.axis(hue) if hue else None
        if ha is not None and ha.index is not None and ha.labels:  # a discrete axis: one colour per value
            for k, label in enumerate(ha.labels):
                sel = ha.index == k
                ax.scatter(xv[sel], col[sel] / scale, s=12, label=f"{hue}={label}")
            ax.legend(fontsize="small")
        else:
            c = None
            if ha is not None:
                c = ha.value if ha.value is not None else ha.index.astype(float)
                c = c.mean(axis=1) if c.ndim == 2 else c
            art = ax.scatter(xv, col / scale, c=c, s=12, cmap="viridis")
            if ha is not None:
                fig.colorbar(art, ax=ax, label=hue)
        sub = f" ({result.n_points} random points)"
    what = "scale" if xa.description.get("scale") or xa.description.get("scale_range") else xunit
    if xa.sizes is not None and result.grid_shape is not None:
        what = "bytes per flow"
    if xa.ids and result.grid_shape is None:
        what = f"mean {what or 'value'} of {len(xa.ids)} independent draws"
    ax.set_xlabel(f"{x} ({what})" if what else x)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.set_title(title or f"{result.name or 'sweep'}: {metric}{sub}", fontsize="medium")
    return _save(fig, path)


# --- collectives -----------------------------------------------------------------------------------
def busbw(message_bytes, seconds, n_ranks: int, collective: str = "allreduce") -> np.ndarray:
    """Bus bandwidth (bytes/s) as nccl-tests reports it: message_bytes / seconds * factor(n_ranks).

    The factor makes busbw comparable with link bandwidth: 2(n-1)/n for allreduce, (n-1)/n for
    allgather, reducescatter and alltoall, 1 for broadcast and reduce.
    """
    from .workloads.collectives import bus_factor

    if not isinstance(n_ranks, int) or n_ranks < 2:
        raise ScenarioError(f"n_ranks: expected an integer >= 2, got {n_ranks!r}")
    return np.asarray(message_bytes, float) / np.asarray(seconds, float) * bus_factor(collective, n_ranks)


def plot_busbw(
    message_bytes: Sequence[float],
    seconds,
    n_ranks: int,
    path: str | os.PathLike | None = None,
    *,
    collective: str = "allreduce",
    labels: Sequence[str] | None = None,
    peak: float | None = None,
    title: str | None = None,
):
    """busbw (GB/s) vs message size, one curve per row of `seconds` ((sizes,) or (curves, sizes)).

    Args:
        message_bytes: the collective's message size per point (bytes).
        seconds: its completion time (s).
        peak: a bandwidth (bytes/s) to draw as a dashed reference line, e.g. the bottleneck link.
    """
    sizes = np.asarray(message_bytes, float)
    t = np.atleast_2d(np.asarray(seconds, float))
    if t.shape[1] != sizes.shape[0]:
        raise ScenarioError(f"seconds: expected {sizes.shape[0]} times per curve, got shape {t.shape}")
    labels = list(labels) if labels is not None else [None] * t.shape[0]
    fig = _figure()
    ax = fig.add_subplot()
    for row, label in zip(t, labels, strict=True):
        ax.plot(sizes, busbw(sizes, row, n_ranks, collective) / 1e9, marker="o", label=label)
    if peak is not None:
        ax.axhline(peak / 1e9, ls="--", c="grey", lw=1, label=f"peak {peak / 1e9:g} GB/s")
    ax.set_xscale("log", base=2)
    ticks = sizes[:: max(1, len(sizes) // 8)]
    ax.set_xticks(ticks, [format_bytes(s) for s in ticks], rotation=30)
    ax.set_xlabel("message size")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    if any(lbl is not None for lbl in labels) or peak is not None:
        ax.legend(fontsize="small")
    ax.set_title(title or f"{collective} busbw, {n_ranks} ranks", fontsize="medium")
    return _save(fig, path)


# --- topology utilization -----------------------------------------------------------------------------
def plot_link_utilization(
    result_or_links: Any, utilization=None, path: str | os.PathLike | None = None, *, title: str | None = None
):
    """Per-link utilization of a topology as a src x dst heatmap (grey: no link between the two).

    Args:
        result_or_links: a netsim.Result (its links and utilization), or a scenario's links.
        utilization: per-link fraction in link order; required with links, e.g. one row of a
            SweepResult's link_utilization.
    """
    from matplotlib import colormaps

    from .topology import natural_key

    if hasattr(result_or_links, "compiled") and isinstance(utilization, str | os.PathLike):
        utilization, path = None, utilization  # plot_link_utilization(result, "u.png"), like plot_timeline
    if hasattr(result_or_links, "compiled"):
        links = result_or_links.compiled.scenario.links
        util = result_or_links.link_utilization if utilization is None else utilization
    else:
        links = tuple(getattr(result_or_links, "links", result_or_links))
        util = utilization
    util = np.asarray(util, float)
    if not links or util is None or util.shape != (len(links),):
        raise ScenarioError(
            f"utilization: expected one value per link ({len(links)}), got "
            f"{None if util is None else util.shape}"
        )
    nodes = sorted({n for link in links for n in (link.src, link.dst)}, key=natural_key)
    at = {n: i for i, n in enumerate(nodes)}
    grid = np.full((len(nodes), len(nodes)), np.nan)
    for link, u in zip(links, util, strict=True):
        link: Link
        grid[at[link.src], at[link.dst]] = np.nanmax([grid[at[link.src], at[link.dst]], u])
    side = min(9.0, 3.0 + 0.18 * len(nodes))
    fig = _figure(side + 1.2, side)
    ax = fig.add_subplot()
    cmap = colormaps["viridis"].with_extremes(bad="#e8e8e8")
    img = ax.imshow(
        grid,
        cmap=cmap,
        vmin=0.0,
        vmax=max(1.0, float(np.nanmax(util)) if util.size else 1.0),
        interpolation="nearest",
    )
    fig.colorbar(img, ax=ax, label="utilization (mean fraction of capacity)", shrink=0.8)
    if len(nodes) <= 48:
        ax.set_xticks(range(len(nodes)), nodes, rotation=90, fontsize="x-small")
        ax.set_yticks(range(len(nodes)), nodes, fontsize="x-small")
    ax.set_xlabel(f"link destination ({len(nodes)} nodes)")
    ax.set_ylabel("link source")
    busiest = links[int(np.nanargmax(util))].id if np.isfinite(util).any() else "-"
    ax.set_title(title or f"link utilization (busiest: {busiest}, {np.nanmax(util):.0%})", fontsize="medium")
    return _save(fig, path)


# --- timelines ----------------------------------------------------------------------------------------
#: bar colour of each item kind in `plot_timeline`: pipeline ops by `netsim.timeline.task_kind`
TIMELINE_COLOURS = {
    "forward": "#4c72b0",  # blue
    "backward": "#55a868",  # green
    "weight gradient": "#8172b3",  # purple
    "task": "#937860",  # brown: any other compute task
    "flow": "#dd8452",  # orange
}


def plot_timeline(
    result,
    path: str | os.PathLike | None = None,
    *,
    flows: str = "pair",
    critical: bool = True,
    max_rows: int = 48,
    title: str | None = None,
):
    """Gantt chart of a simulated scenario: a row per device (tasks) and per src -> dst pair (flows).

    Rows and lanes are netsim.timeline's trace layout (overlapping items get extra lanes); with
    `critical`, the items on the critical path (the chain that sets the makespan) are outlined in red.
    Pipeline forward, backward and weight-gradient tasks (`netsim.timeline.task_kind`) each get their
    colour, other tasks and flows theirs (`TIMELINE_COLOURS`), with a legend of the kinds shown; each
    bar's gid is its item id. Shows the first `max_rows` rows.
    """
    from matplotlib.patches import Patch

    from .timeline import critical_path, task_kind, trace_events

    events = trace_events(result, flows=flows)["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    rows = sorted(names)  # devices (pid 1) first, then flows, in track order
    shown = rows[:max_rows]
    row_of = {key: i for i, key in enumerate(shown)}
    on_path = {s.id for s in critical_path(result)} if critical else set()
    spans = [e for e in events if e["ph"] == "X" and (e["pid"], e["tid"]) in row_of]
    ends = np.array([(e["ts"] + e["dur"]) / 1e6 for e in spans] or [float(result.makespan)])
    scale, unit = _time_unit(np.append(ends, result.makespan))
    fig = _figure(9.0, 1.2 + 0.28 * len(shown))
    ax = fig.add_subplot()
    kinds_shown: dict[str, None] = {}
    for e in spans:
        y = row_of[e["pid"], e["tid"]]
        crit = e["name"] in on_path
        kind = task_kind(e["name"]) if e["cat"] == "task" else "flow"
        kinds_shown[kind] = None
        ax.barh(
            y,
            e["dur"] / 1e6 / scale,
            left=e["ts"] / 1e6 / scale,
            height=0.7,
            color=TIMELINE_COLOURS[kind],
            edgecolor="#c00000" if crit else "white",
            linewidth=1.6 if crit else 0.4,
            gid=e["name"],
        )
    ax.set_yticks(range(len(shown)), [names[k] for k in shown], fontsize="x-small")
    ax.invert_yaxis()
    ax.set_xlabel(f"time ({unit})")
    ax.axvline(result.makespan / scale, c="grey", ls=":", lw=1)
    ax.grid(axis="x", alpha=0.3)
    more = f", first {max_rows} of {len(rows)} rows" if len(rows) > max_rows else ""
    handles = [Patch(color=TIMELINE_COLOURS[k], label=k) for k in TIMELINE_COLOURS if k in kinds_shown]
    if critical:
        handles.append(Patch(facecolor="white", edgecolor="#c00000", label="critical path"))
    if handles:
        ax.legend(handles=handles, loc="lower right", fontsize="x-small", framealpha=0.8)
    ax.set_title(
        title
        or f"{result.compiled.scenario.name or 'timeline'}: makespan {result.makespan / scale:.4g} {unit}{more}",
        fontsize="small",
    )
    return _save(fig, path)


# --- load-latency curves ------------------------------------------------------------------------------
def plot_latency(curve, path: str | os.PathLike | None = None):
    """A `netsim.latency.latency_curve`: packet latency (cycles) over offered rate, saturated points left
    out, with the saturation rate as a dashed line."""
    fig = _figure(5.0, 3.5)
    ax = fig.add_subplot()
    ok = curve.latency < float("inf")
    ax.plot(curve.rates[ok], curve.latency[ok], "o-", label="netsim")
    ax.axvline(curve.saturation, ls="--", c="grey", label=f"saturation {curve.saturation:.3g}")
    ax.set_xlabel("offered rate (packets/node/cycle)")
    ax.set_ylabel("packet latency (cycles)")
    ax.set_title(f"{curve.topology} {curve.traffic}, {curve.packet_size}-flit packets")
    ax.legend()
    return _save(fig, path)
