"""From trace files to experiments on a topology, and the whole calibration in one call."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from netsim import CostModel, ScenarioError
from netsim.topology import NcclShm, Topology, with_transport
from netsim.traces import NcclTable, P2PMatrix, Trace

from ._fit import FitReport, FitResult, Freeze, fit
from ._identify import Identifiability, identifiability
from ._model import (
    COLLECTIVES,
    Experiment,
    Params,
    Spec,
    collective_experiment,
    initial_values,
    p2p_experiment,
)

__all__ = ["Calibration", "calibrate", "experiments_from_trace", "ranks_of", "refusal"]

#: GPU model names as traces print them ("NVIDIA GeForce RTX 4090", "DGX A100", "A40, NVLink pair")
_MODEL = re.compile(
    r"\b(A100|A800|A40|A30|A10G?|H100|H200|H800|B200|V100|P100|T4|L4|L40S?|TITAN ?RTX|"
    r"RTX ?\d{4}(?: ?Ti)?|MI\d{3}X?)\b",
    re.IGNORECASE,
)


def _models(text: str) -> set[str]:
    return {m.replace(" ", "").upper() for m in _MODEL.findall(text)}


def refusal(table: NcclTable | P2PMatrix, topo: Topology, where: str = "") -> str | None:
    """Why `table` cannot be simulated on `topo`, or None: it was measured on another machine (its
    devices' names, else its section or title, name a GPU model other than `topo.device`), or on more
    GPUs (or other device indices) than the topology has."""
    where = where or f"table at line {table.line}"
    label = getattr(table, "section", "") or table.title
    if isinstance(table, NcclTable) and topo.device:
        names = " ".join(d.name for d in table.devices) or label
        seen = _models(names)
        if seen and _models(topo.device) - seen:
            return (
                f"{where} ({label.strip() or 'no title'}): measured on {', '.join(sorted(seen))}, but topology "
                f"{topo.name!r} has {topo.device} GPUs (another machine: not simulated)"
            )
    n, gpus = (table.n_gpus if isinstance(table, NcclTable) else table.n), topo.gpus()
    if n > len(gpus):
        return f"{where}: {n} GPUs, but topology {topo.name!r} has {len(gpus)}"
    if isinstance(table, NcclTable):
        if not n and table.visible_devices is None:
            return f"{where}: the number of GPUs is not stated"
        index = table.visible_devices or ()
        if index and max(index) >= len(gpus):
            return f"{where}: CUDA_VISIBLE_DEVICES names GPU {max(index)}, but topology {topo.name!r} has {len(gpus)}"
    return None


def ranks_of(table: NcclTable, topo: Topology) -> tuple[str, ...]:
    """The topology's GPUs a nccl-tests table ran on: its CUDA_VISIBLE_DEVICES (the first `n_gpus` of
    them: nccl-tests -g N uses the first N visible devices) if given, else the first `n_gpus` GPUs
    (device i is topo.gpus()[i]).

    Raises:
        ScenarioError: the table's GPUs are not all on the topology (see `refusal`).
    """
    why = refusal(table, topo)
    if why:
        raise ScenarioError(f"nccl-tests {why}")
    index = list(table.visible_devices or range(table.n_gpus))
    if table.n_gpus:
        index = index[: table.n_gpus]
    return tuple(topo.gpus()[i] for i in index)


def experiments_from_trace(
    trace: Trace,
    spec: Spec,
    topo: Topology,
    *,
    staged: Topology | None = None,
    group: str = "out-of-place",
    kinds: Sequence[str] = ("collective", "unidirectional", "bidirectional", "latency"),
    p2p: bool | None = None,
    routes: str = "auto",
    notes: list[str] | None = None,
) -> list[Experiment]:
    """Every table of `trace` that netsim can simulate on `topo`, as experiments.

    Tables measured on another machine, or on GPUs the topology lacks, are refused (see `refusal`);
    only a collective's `usable` cells are taken. Each refusal, each left-out point and each line the
    reader skipped inside a table (`NcclTable.notes`) is said in `notes`, when given.

    Args:
        trace: from `read_trace` or `load_trace`.
        spec: the parameters' structure (`Spec.for_topology(topo, staged=staged)`).
        topo: the machine with P2P on (copies and collectives take direct routes).
        staged: the same machine with P2P off (its transport's routes), for P2P=Disabled matrices, cells
            the connectivity matrix marks 0, and collectives run with P2P off (over NCCL's SHM
            transport: `netsim.topology.NcclShm`); None skips those.
        group: the nccl-tests column group to fit ("out-of-place" or "in-place").
        kinds: which experiment kinds to take.
        p2p: take only P2P=Enabled (True) or P2P=Disabled (False) matrices; None takes both.
        routes: "auto": P2P as the trace says (NCCL_P2P_DISABLE or NCCL_P2P_LEVEL on a table's command
            line, P2P=Disabled matrix titles, the connectivity matrix, "P2P not available" notes; a
            P2P-off collective with NCCL_SHM_DISABLE=1 ran over NCCL's network transport: refused);
            "on" or "off": every table as if P2P were on (direct routes) or off (`staged` routes).
        notes: a list to append what was refused or left out to (one line each).
    """
    if routes not in ("auto", "on", "off"):
        raise ScenarioError(f"routes: expected 'auto', 'on' or 'off', got {routes!r}")
    if staged is not None and [x.id for x in staged.links] != [x.id for x in topo.links]:
        raise ScenarioError(f"staged: {staged.name!r} does not have the links of {topo.name!r}")
    say = notes.append if notes is not None else (lambda line: None)
    out: list[Experiment] = []
    gpus = topo.gpus()
    connect = trace.connectivity()
    for t in trace.tables:
        where = f"{trace.source}:{t.line}"
        if isinstance(t, NcclTable) and "collective" in kinds:
            for note in t.notes:  # lines the reader skipped inside the table ("file:line: why")
                say(note)
            if t.op not in COLLECTIVES:
                say(f"{where}: {t.op or 'an unnamed'} table: no ring model (known: {', '.join(COLLECTIVES)})")
                continue
            why = refusal(t, topo, where)
            if why:
                say(f"refused {why}")
                continue
            ranks = ranks_of(t, topo)
            direct = {"on": True, "off": False}.get(routes, trace.used_p2p(t))
            if not direct and staged is None:
                say(f"{where}: P2P off, but no P2P-off topology was given: not simulated")
                continue
            if not direct and t.shm is False:
                say(
                    f"{where}: P2P off and NCCL_SHM_DISABLE=1: NCCL falls back to its network transport, "
                    "which netsim does not model: not simulated"
                )
                continue
            times = t.column("time", group)
            keep = t.usable[:, t.groups.index(group)] & np.isfinite(times) & (times > 0)
            if not keep.any():
                say(f"{where}: no usable {group} point")
                continue
            if not keep.all():
                why = "; ".join(p.split(": ", 1)[-1] for p in t.problems[:3]) or "time not positive"
                say(f"{where}: left out {int((~keep).sum())} of {keep.size} points ({why})")
            name = f"{where} {t.op} x{len(ranks)}" + ("" if direct else " P2P off")
            # NCCL with P2P off moves data by its SHM transport, not by cudaMemcpy's bounce
            fabric = topo if direct else with_transport(staged, NcclShm())
            out.append(collective_experiment(spec, fabric, t.op, ranks, t.size[keep], times[keep], name=name))
        elif (
            isinstance(t, P2PMatrix) and t.kind in kinds and t.kind != "connectivity" and p2p in (None, t.p2p)
        ):
            if t.kind == "latency" and t.clock != "gpu":
                continue  # the CPU-clock latency includes the host's launch and timer costs
            why = refusal(t, topo, where)
            if why:
                say(f"refused {why}")
                continue
            direct = np.ones((t.n, t.n), bool) if connect is None or connect.shape[0] != t.n else connect
            if routes == "off" or (routes == "auto" and not t.p2p):
                direct = np.zeros_like(direct)
            elif routes == "on":
                direct = np.ones_like(direct)
            cells = direct[~np.eye(t.n, dtype=bool)]
            if staged is None and not cells.all():
                say(f"{where}: {t.title.strip()}: host-staged copies, but no P2P-off topology was given")
                continue
            route = lambda i, j, d=direct: (topo if d[i, j] else staged).route(gpus[i], gpus[j])
            mode = "P2P on" if t.p2p else "P2P off"
            # every copy host-staged: the P2P-off twin's link classes (its socket links carry host traffic)
            laid_on = topo if cells.any() else staged
            out.append(
                p2p_experiment(spec, laid_on, t.kind, t.values, name=f"{where} {t.kind} {mode}", route=route)
            )
    return out


@dataclasses.dataclass(frozen=True)
class Calibration:
    """A fitted parameter set with what it was fitted to.

    Attributes:
        spec, params: the parameters.
        results: the optimizer's record of each stage.
        report: measured vs simulated on the fitted experiments (its `free`: the parameters the data
            cannot pin).
        sources: the trace files fitted.
        identifiability: which fitted parameters the data pins (`identifiability`).
    """

    spec: Spec
    params: Params
    results: tuple[FitResult, ...]
    report: FitReport
    sources: tuple[str, ...]
    identifiability: Identifiability | None = None

    def topology(self, topo: Topology) -> Topology:
        """`topo` (the topology fitted, or its P2P-off twin) with the fitted figures: what
        `netsim.topology.load` gives for the calibration file (its software costs: `params.costs`)."""
        from netsim.topology import from_calibration

        return from_calibration(self.params.to_values(self.spec), base=topo)

    def values(self) -> dict:
        """JSON-able parameter values, citing the traces they came from."""
        return {
            "sources": list(self.sources),
            **self.params.to_values(self.spec),
            "fit": {
                e.name: {"mean_error": e.mean_error, "max_error": e.max_error}
                for e in self.report.experiments
            },
        }


#: the second start's staging efficiency (see `_starts`); m01's copies fit 0.77 from it, 0.91 without
STAGED_START = 0.75


def _starts(spec: Spec, params: Params, experiments: Sequence[Experiment]) -> list[Params]:
    """Where to start a fit: `params`, and, when host-staged and direct copies are both fitted, also
    with the staging efficiency e at STAGED_START and every host budget H ("... staging") raised to keep
    e x H. One-way staged copies fix only the product; e and H come apart through both-ways copies
    (e x H / 2) and the direct copies' path, so the loss is nearly flat along e x H and Adam stops
    wherever it enters that valley (m01, from e = 0.91: copies 3.9 / 8.9 %; from 0.75: 2.8 / 6.2 %)."""
    copies = [e for e in experiments if not e.collective]
    if not any(np.any(e.staged) for e in copies) or all(np.all(e.staged) for e in copies):
        return [params]
    budgets = np.array([s.endswith(" staging") for s in spec.shared])
    if not budgets.any():
        return [params]
    e0 = float(np.exp(-np.exp(params.costs.log_staged_inefficiency)))
    raised = params.log_shared + np.where(budgets, np.log(e0 / STAGED_START), 0.0)
    costs = dataclasses.replace(params.costs, log_staged_inefficiency=np.log(-np.log(STAGED_START)))
    other = dataclasses.replace(params, log_shared=raised, costs=costs)
    return [params, other]


def calibrate(
    traces: Sequence[Trace],
    topo: Topology,
    *,
    staged: Topology | None = None,
    spec: Spec | None = None,
    costs: CostModel | None = None,
    start: Params | None = None,
    freeze: Freeze | None = None,
    **fit_kwargs,
) -> Calibration:
    """Fits a topology's parameters to every simulable table in `traces`.

    With both copies (p2p matrices) and collectives, the fit has two stages: the copies fit the fabric
    (link classes, shared resources, copy overheads), then the collectives fit the software (regimes,
    launch) on that fabric, which stays fixed. A collective's time then cannot be bought with a wrong
    link bandwidth, and the stage that simulates 100-flow rings differentiates along few parameters.

    Args:
        traces: from `read_trace` or `load_trace`.
        topo, staged: the machine with P2P on, and off (see `experiments_from_trace`); e.g.
            `netsim.topology.load(name)` and `load(name, p2p=False)`, which carry the PCIe shared
            resources (socket duplex budgets, staging engines).
        spec: default `Spec.for_topology(topo, staged=staged)`: their link classes and shared
            resources, and the regimes of `costs` (default LL and Simple).
        costs: software costs to start from (e.g. a calibration's, `netsim.topology.load_costs`);
            default NCCL-like values (`netsim.CostModel.defaults`).
        start: default: the values the topology carries (`initial_values`) with `costs`.
        freeze: default: the LL efficiency (a protocol constant, 50 %), and the launch cost unless
            collectives were measured at two or more rank counts (else it cannot be told apart from
            the per-step overhead).
        **fit_kwargs: passed to `fit` (steps, learning_rate, progress, ...).

    Raises:
        ScenarioError: `traces` is not a list of Traces (e.g. file names: read them with `read_trace`), or
            none of their tables can be simulated.
    """
    if isinstance(traces, str | os.PathLike | Trace) or not isinstance(traces, Iterable):
        raise ScenarioError(
            f"calibrate: traces: expected a list of Traces (netsim.traces.read_trace), got {traces!r}"
        )
    traces = list(traces)
    for i, t in enumerate(traces):
        if not isinstance(t, Trace):
            read = (
                " (a file name: read it with netsim.traces.read_trace)"
                if isinstance(t, str | os.PathLike)
                else ""
            )
            raise ScenarioError(
                f"calibrate: traces[{i}]: expected a Trace, got {type(t).__name__} {t!r}{read}"
            )
    spec = spec or Spec.for_topology(topo, staged=staged, regimes=costs.regimes if costs else None)
    notes: list[str] = []
    experiments = [
        e for t in traces for e in experiments_from_trace(t, spec, topo, staged=staged, notes=notes)
    ]
    progress = fit_kwargs.get("progress", print)
    for line in notes if progress else ():
        progress(line)
    if not experiments:
        raise ScenarioError(
            f"calibrate: no table in {[t.source for t in traces]} can be simulated"
            + "".join(f"\n  {line}" for line in notes)
        )
    counts = {e.n_ranks for e in experiments if e.kind == "collective"}
    if freeze is None:
        freeze = {"log_inefficiency": [spec.regimes.index("LL")] if "LL" in spec.regimes else []}
        if len(counts) < 2:
            freeze["log_launch"] = True
    freeze = dict(freeze) if isinstance(freeze, Mapping) else {name: True for name in freeze}
    launch = (costs.launch if costs else 0.0) or 1e-6 if len(counts) > 1 else 0.0
    both = (topo,) if staged is None else (topo, staged)
    params = start or Params.from_values(spec, initial_values(spec, *both, launch=launch))
    if start is None and costs is not None and costs.regimes == spec.regimes:
        # a fit starts below 1: at exactly 1 (costs that never saw staged copies) there is no gradient
        below = np.maximum(costs.log_staged_inefficiency, np.log(-np.log(0.9)))
        costs = dataclasses.replace(costs, log_launch=params.costs.log_launch, log_staged_inefficiency=below)
        params = dataclasses.replace(params, costs=costs)
    copies = [e for e in experiments if e.kind != "collective"]
    colls = [e for e in experiments if e.kind == "collective"]

    def best(stage: str, fitted: list[Experiment], hold: Freeze) -> FitResult:
        """The fit of `fitted` from each start (`_starts`) with the lowest loss."""
        starts = _starts(spec, params, fitted)
        fits = []
        for k, start in enumerate(starts):
            if progress:
                progress(stage + (f", start {k + 1} of {len(starts)}" if len(starts) > 1 else ""))
            fits.append(fit(start, fitted, freeze=hold, **fit_kwargs))
        return min(fits, key=lambda r: r.loss)

    if copies and colls:
        first = best(f"stage 1/2: fabric on copies ({len(copies)} tables)", copies, freeze)
        fabric = {"log_bandwidth": True, "log_latency": True, "log_shared": True}
        if progress:
            progress(f"stage 2/2: software on collectives ({len(colls)} tables)")
        second = fit(first.params, colls, freeze={**freeze, **fabric}, **fit_kwargs)
        results = [first, second]
        # the second stage moves no parameter that a copy depends on: the first stage's times stand
        report = FitReport(first.report(copies).experiments + second.report(colls).experiments)
    else:
        results = [best(f"fit on {len(experiments)} tables", experiments, freeze)]
        report = results[0].report(experiments)
    stages = [copies, colls] if copies and colls else [experiments]
    points = [sum(int(np.sum(e.weight > 0)) for e in stage) for stage in stages]
    ident = identifiability(spec, results, points)
    report = dataclasses.replace(report, free=ident.free)
    return Calibration(
        spec, results[-1].params, tuple(results), report, tuple(t.source for t in traces), ident
    )
