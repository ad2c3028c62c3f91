"""From trace files to experiments on a topology, and the whole calibration in one call."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence

import numpy as np

from netsim import ScenarioError
from netsim.topology import Topology

from ._fit import FitReport, FitResult, Freeze, fit
from ._model import (
    COLLECTIVES,
    Experiment,
    Params,
    Spec,
    collective_experiment,
    initial_values,
    p2p_experiment,
    pcie_shared,
)
from ._traces import NcclTable, P2PMatrix, Trace

__all__ = ["Calibration", "calibrate", "experiments_from_trace", "ranks_of"]


def ranks_of(table: NcclTable, topo: Topology) -> tuple[str, ...]:
    """The topology's GPUs a nccl-tests table ran on: CUDA_VISIBLE_DEVICES in its command line if
    given, else the first `n_gpus` GPUs (device i is topo.gpus()[i])."""
    gpus = topo.gpus()
    m = re.search(r"CUDA_VISIBLE_DEVICES=([\d,]+)", table.title)
    index = [int(x) for x in m.group(1).split(",") if x] if m else list(range(table.n_gpus))
    if not table.n_gpus and not m:
        raise ScenarioError(f"nccl-tests table at line {table.line}: the number of GPUs is not stated")
    if m and table.n_gpus and len(index) != table.n_gpus:
        index = index[: table.n_gpus]  # nccl-tests -g N uses the first N visible devices
    if max(index) >= len(gpus):
        raise ScenarioError(f"nccl-tests table at line {table.line}: GPU {max(index)} but topology "
                            f"{topo.name!r} has {len(gpus)} GPUs")
    return tuple(gpus[i] for i in index)


def experiments_from_trace(trace: Trace, spec: Spec, topo: Topology, *, staged: Topology | None = None,
                           group: str = "out-of-place", kinds: Sequence[str] = ("collective", "unidirectional",
                                                                                 "bidirectional", "latency"),
                           p2p: bool | None = None) -> list[Experiment]:
    """Every table of `trace` that netsim can simulate, as experiments.

    Args:
        trace: from `read_trace`.
        spec: the parameters' structure.
        topo: the machine with P2P on (copies take direct routes).
        staged: the same machine with P2P off (host-staged routes), for P2P=Disabled matrices and for
            cells the connectivity matrix marks 0; None skips those.
        group: the nccl-tests column group to fit ("out-of-place" or "in-place").
        kinds: which experiment kinds to take.
        p2p: take only P2P=Enabled (True) or P2P=Disabled (False) matrices; None takes both.
    """
    if staged is not None and [x.id for x in staged.links] != [x.id for x in topo.links]:
        raise ScenarioError(f"staged: {staged.name!r} does not have the links of {topo.name!r}")
    out: list[Experiment] = []
    gpus = topo.gpus()
    try:
        connect = trace.matrix("connectivity").values > 0
    except KeyError:
        connect = None
    for t in trace.tables:
        if isinstance(t, NcclTable) and "collective" in kinds and t.op in COLLECTIVES:
            ranks = ranks_of(t, topo)
            times = t.column("time", group)
            keep = np.isfinite(times) & (times > 0)
            name = f"{trace.source}:{t.line} {t.op} x{len(ranks)}"
            out.append(collective_experiment(spec, topo, t.op, ranks, t.size[keep], times[keep], name=name))
        elif isinstance(t, P2PMatrix) and t.kind in kinds and t.kind != "connectivity" and p2p in (None, t.p2p):
            if t.kind == "latency" and t.clock != "gpu":
                continue  # the CPU-clock latency includes the host's launch and timer costs
            if t.n > len(gpus):
                raise ScenarioError(f"{trace.source}:{t.line}: {t.n} x {t.n} matrix, topology {topo.name!r} "
                                    f"has {len(gpus)} GPUs")
            direct = np.ones((t.n, t.n), bool) if connect is None or connect.shape[0] != t.n else connect
            if not t.p2p:
                direct = np.zeros_like(direct)
            if staged is None and not direct[~np.eye(t.n, dtype=bool)].all():
                continue
            route = lambda i, j, d=direct: (topo if d[i, j] else staged).route(gpus[i], gpus[j])
            mode = "P2P on" if t.p2p else "P2P off"
            out.append(p2p_experiment(spec, topo, t.kind, t.values, name=f"{trace.source}:{t.line} {t.kind} {mode}",
                                      route=route))
    return out


@dataclasses.dataclass(frozen=True)
class Calibration:
    """A fitted parameter set with what it was fitted to.

    Attributes:
        spec, params: the parameters.
        results: the optimizer's record of each stage.
        report: measured vs simulated on the fitted experiments.
        sources: the trace files fitted.
    """

    spec: Spec
    params: Params
    results: tuple[FitResult, ...]
    report: FitReport
    sources: tuple[str, ...]

    def values(self) -> dict:
        """JSON-able parameter values, citing the traces they came from."""
        return {"sources": list(self.sources), **self.params.to_values(self.spec),
                "fit": {e.name: {"mean_error": e.mean_error, "max_error": e.max_error} for e in self.report.experiments}}


def calibrate(traces: Sequence[Trace], topo: Topology, *, staged: Topology | None = None, spec: Spec | None = None,
              start: Params | None = None, freeze: Freeze | None = None, **fit_kwargs) -> Calibration:
    """Fits a topology's parameters to every simulable table in `traces`.

    With both copies (p2p matrices) and collectives, the fit has two stages: the copies fit the fabric
    (link classes, shared resources, copy overheads), then the collectives fit the software (regimes,
    launch) on that fabric, which stays fixed. A collective's time then cannot be bought with a wrong
    link bandwidth, and the stage that simulates 100-flow rings differentiates along few parameters.

    Args:
        traces: from `read_trace` or `load_trace`.
        topo, staged: the machine with P2P on, and off (see `experiments_from_trace`).
        spec: default: the topology's link classes, its socket-duplex and staging resources, and the
            LL and Simple regimes.
        start: default `initial_values` from the topology.
        freeze: default: the LL efficiency (a protocol constant, 50 %), and the launch cost unless
            collectives were measured at two or more rank counts (else it cannot be told apart from
            the per-step overhead).
        **fit_kwargs: passed to `fit` (steps, learning_rate, progress, ...).
    """
    spec = spec or Spec.for_topology(topo, shared=pcie_shared(topo))
    experiments = [e for t in traces for e in experiments_from_trace(t, spec, topo, staged=staged)]
    if not experiments:
        raise ScenarioError(f"calibrate: no table in {[t.source for t in traces]} can be simulated")
    counts = {e.n_ranks for e in experiments if e.kind == "collective"}
    if freeze is None:
        freeze = {"log_inefficiency": [spec.regimes.index("LL")] if "LL" in spec.regimes else []}
        if len(counts) < 2:
            freeze["log_launch"] = True
    freeze = dict(freeze) if isinstance(freeze, Mapping) else {name: True for name in freeze}
    params = start or Params.from_values(spec, initial_values(spec, topo, launch=1e-6 if len(counts) > 1 else 0.0))
    copies = [e for e in experiments if e.kind != "collective"]
    colls = [e for e in experiments if e.kind == "collective"]
    results = []
    if copies and colls:
        first = fit(params, copies, freeze=freeze, **fit_kwargs)
        fabric = {"log_bandwidth": True, "log_latency": True, "log_shared": True}
        second = fit(first.params, colls, freeze={**freeze, **fabric}, **fit_kwargs)
        results = [first, second]
        # the second stage moves no parameter that a copy depends on: the first stage's times stand
        report = FitReport(first.report(copies).experiments + second.report(colls).experiments)
    else:
        results = [fit(params, experiments, freeze=freeze, **fit_kwargs)]
        report = results[0].report(experiments)
    return Calibration(spec, results[-1].params, tuple(results), report, tuple(t.source for t in traces))
