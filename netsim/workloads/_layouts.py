"""Many training layouts predicted at once: each row of a layout table (`read_layout_table`) compiled on its
machine and simulated in batches, one compile per power of two of items, or estimated in closed form above
MAX_SIMULATED flows and tasks. `netsim train --table` prints and writes what `predict_layouts` returns.

    rows = read_layout_table("vtrain_ground_truth_single.csv")
    records = predict_layouts(rows, "dgx-a100")   # [{"predicted_s", "method", "fits", ...}, ...] in row order
"""

from __future__ import annotations

import collections
import dataclasses
import sys
from collections.abc import Callable, Sequence

from .._scenario import ScenarioError
from ..topology import Topology, load, sized_cluster
from ._memory import gpu_memory
from ._training import (
    ComputeModel,
    LayoutRow,
    estimate_iteration,
    link_rates,
    memory_per_gpu,
    program_size,
    training_workload,
)

__all__ = ["DEFAULT_CLUSTER", "MAX_SIMULATED", "predict_layouts", "training_machine"]

#: the default machine: DGX A100 servers, as many as a layout's GPUs need (netsim.topology.dgx_a100)
DEFAULT_CLUSTER = "dgx-a100"
#: above this many flows and tasks (`program_size`) a row is estimated in closed form (`estimate_iteration`,
#: which the simulation matches on an idle fabric) unless simulate_all
MAX_SIMULATED = 8192


def training_machine(
    topology: str | Topology = DEFAULT_CLUSTER, gpus: int = 1, *, device: str | None = None
) -> Topology:
    """The machine a layout on `gpus` GPUs runs on: a Topology as given; a cluster shape without a count
    ("dgx-a100", "dgx-h100") with the fewest servers that hold `gpus`; else any name `netsim.topology.load`
    reads. Its `device` is `device`, else its own, else "A100" (the compute model's peak figures)."""
    topo = topology if isinstance(topology, Topology) else sized_cluster(topology, gpus) or load(topology)
    return dataclasses.replace(topo, device=device or topo.device or "A100")


def predict_layouts(
    rows: Sequence[LayoutRow],
    topology: str | Topology = DEFAULT_CLUSTER,
    *,
    device: str | None = None,
    compute: ComputeModel | None = None,
    memory_capacity: float | str | None = None,
    simulate_all: bool = False,
    log: Callable[[str], None] | None = None,
) -> list[dict]:
    """A record per row, in row order: "predicted_s" (None, with a "reason", where the row cannot be built),
    "method" ("simulated" or "closed form"), "memory_bytes", "fits" (against `memory_capacity`, else the
    machine's GPU, else the largest netsim knows), "topology", the layout's sizes, and "measured_s" with
    "error" (predicted / measured - 1) where the row has a measured time. A row that does not fit is
    predicted all the same (a measured run did fit).

    Args:
        rows: layout rows (`read_layout_table`).
        topology, device: the machine of each row (`training_machine`, sized per row's GPU count).
        compute: the ComputeModel (default: the shipped fit).
        simulate_all: simulate rows above MAX_SIMULATED flows and tasks too.
        log: where progress lines go (default: standard error).
    """
    from .._batch import compile_batch  # JAX: imported when a table is predicted
    from .._compile import Shape, bucket, compile_scenario

    log = log or (lambda line: print(f"netsim: {line}", file=sys.stderr))
    compute = ComputeModel.load() if compute is None else compute
    machines: dict[int, tuple[Topology, float]] = {}  # GPUs -> (machine, bytes per GPU)
    records: list[dict] = [{} for _ in rows]
    compiled = {}
    for i, row in enumerate(rows):
        if row.gpus not in machines:
            machine = training_machine(topology, row.gpus, device=device)
            machines[row.gpus] = machine, gpu_memory(machine.device, memory_capacity)[0]
        topo, capacity = machines[row.gpus]
        workers = topo.workers
        try:
            if len(workers) < row.gpus:
                raise ScenarioError(
                    f"topology: {topo.name} has {len(workers)} GPUs, the layout needs {row.gpus}"
                )
            if program_size(topo, workers, row.model, row.layout) > MAX_SIMULATED and not simulate_all:
                rates = link_rates(topo, workers, row.layout)
                predicted = estimate_iteration(row.model, row.layout, compute.on(topo.device), rates)
                memory = memory_per_gpu(row.model, row.layout).total
                records[i] = {"predicted_s": predicted, "method": "closed form", "memory_bytes": memory}
            else:
                job = training_workload(
                    topo, workers, row.model, row.layout, compute=compute, check_memory=False
                )
                compiled[i] = compile_scenario(job.scenario())
                records[i] = {"method": "simulated", "memory_bytes": job.memory.total}
        except ScenarioError as e:
            records[i] = {"predicted_s": None, "reason": str(e)}
            continue
        records[i]["topology"] = topo.name
        records[i]["fits"] = records[i]["memory_bytes"] <= capacity
    # one batch (one compile) per power of two of items: fewer compiles for up to 2x padding
    groups = collections.defaultdict(list)
    for i, c in compiled.items():
        groups[bucket(c.shape.items, 1)].append(i)
    log(f"{len(compiled)} rows in {len(groups)} batches")
    for items, idx in sorted(groups.items()):
        out = compile_batch([compiled[i] for i in idx], shape=Shape(items=items)).run()
        for i, t in zip(idx, out["makespan"], strict=True):
            records[i]["predicted_s"] = float(t)
        log(f"batch of {len(idx)} rows at {items} items done")
    for row, rec in zip(rows, records, strict=True):
        m, lay = row.model, row.layout
        rec.update(
            line=row.line,
            gpus=lay.gpus,
            hidden=m.hidden,
            layers=m.layers,
            tp=lay.tp,
            pp=lay.pp,
            dp=lay.dp,
            micro_batch=lay.micro_batch,
            global_batch=lay.global_batch,
        )
        if row.measured is not None:
            rec["measured_s"] = row.measured
            if rec.get("predicted_s") is not None:
                rec["error"] = rec["predicted_s"] / row.measured - 1
    return records
