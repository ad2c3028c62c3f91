"""`netsim train`: one transformer training iteration under a TP x PP x DP layout, or a table of them.

    netsim train --hidden 2048 --heads 16 --layers 24 --seq-len 1024 --tp 2 --pp 2 --dp 2 \\
        --micro-batch 4 --global-batch 64
    netsim train --table layouts.csv --topology dgx-a100 --json out.json   # vTrain's columns, batched runs
"""

from __future__ import annotations

import argparse
import sys

from ._common import TOPOLOGY_HELP

#: options that set a table's every layout, as they set the one layout (`ParallelLayout` keywords)
LAYOUT_OPTIONS = ("schedule", "chunks", "recompute", "sequence_parallel", "zero", "offload", "overlap_dp")


def register(subparsers) -> None:
    """Adds the `train` subcommand to an argparse subparsers object."""
    p = subparsers.add_parser(
        "train",
        help="simulate transformer training iterations (TP x PP x DP) with the fitted compute model",
        description="Compiles a GPT-style model and a 3D-parallel layout to compute tasks and flows "
        "(netsim.workloads.training_workload), refuses a layout that does not fit in GPU memory, "
        "simulates one iteration and prints where its time went. With --table, every row of a CSV in "
        "vTrain's columns, in batched runs (rows over a size limit in closed form), with the error against "
        "a measured 'iteration time (ms)' column. See docs/training.md.",
    )
    p.add_argument("--table", metavar="CSV", help="layouts in vTrain's columns (one iteration per row)")
    p.add_argument("--json", metavar="OUT", help="write the results as JSON")
    p.add_argument(
        "--topology",
        "-t",
        help=TOPOLOGY_HELP + "; a cluster shape without a count (dgx-a100) has as many servers as each "
        "layout (or table row's '# GPUs') needs; default: dgx-a100",
    )
    p.add_argument("--gpu", help="GPU model for peak FLOP/s, bandwidth and memory (default: the topology's)")
    for name in ("hidden", "heads", "layers", "seq-len"):
        p.add_argument(f"--{name}", type=int, help="model size (one configuration)")
    p.add_argument("--vocab", type=int, default=51200, help="vocabulary (default 51200)")
    for name in ("tp", "pp", "dp"):
        p.add_argument(f"--{name}", type=int, default=1, help=f"{name.upper()} size (default 1)")
    p.add_argument("--micro-batch", type=int, default=1, help="sequences per micro-batch (default 1)")
    p.add_argument("--global-batch", type=int, help="sequences per iteration (default micro-batch x dp)")
    p.add_argument(
        "--schedule", default="1f1b", help="gpipe, 1f1b, interleaved, zb-h1 or breadth-first (default 1f1b)"
    )
    p.add_argument("--chunks", type=int, default=1, help="model chunks per GPU (interleaved, breadth-first)")
    p.add_argument("--recompute", default="none", help="none, selective or full (default none)")
    p.add_argument("--sequence-parallel", action="store_true", help="Megatron's sequence parallelism")
    p.add_argument("--zero", type=int, default=0, help="ZeRO stage 0-3 (default 0)")
    p.add_argument("--offload", action="store_true", help="optimizer state in host memory")
    p.add_argument(
        "--overlap-dp",
        action="store_true",
        help="DP all-reduce in buckets overlapped with the last backward (Megatron's --overlap-grad-reduce); "
        "default: one all-reduce after the pipeline drains",
    )
    p.add_argument(
        "--memory",
        type=float,
        metavar="GB",
        help="GPU memory capacity (default: the topology's GPU's, else the largest GPU netsim knows)",
    )
    p.add_argument("--compute", metavar="JSON", help="a fitted compute model (default: the shipped A100 fit)")
    p.add_argument(
        "--simulate-all",
        action="store_true",
        help="--table: simulate every row (default: rows over netsim.workloads.MAX_SIMULATED flows and tasks "
        "in closed form)",
    )
    p.set_defaults(handler=_train)


def _train(args: argparse.Namespace) -> int:
    from ._common import check_outputs, topology_input

    inputs = ({"--table": args.table} if args.table else {}) | topology_input(args.topology)
    check_outputs(inputs, {"--json": (args.json, (".json",))})

    from .._errors import ScenarioError
    from ..workloads import ComputeModel, LayoutRow, ParallelLayout, TransformerModel, read_layout_table

    compute = ComputeModel.load(args.compute)
    options = {k: getattr(args, k) for k in LAYOUT_OPTIONS}
    if args.table:
        rows = read_layout_table(args.table, **options)
        return _table(args, rows, compute)
    missing = [f"--{n}" for n in ("hidden", "heads", "layers", "seq_len") if getattr(args, n) is None]
    if missing:
        raise ScenarioError(f"train: give {', '.join(missing)} (or --table CSV)")
    model = TransformerModel(args.hidden, args.heads, args.layers, args.seq_len, vocab=args.vocab)
    sizes = {k: getattr(args, k) for k in ("tp", "pp", "dp", "micro_batch", "global_batch")}
    layout = ParallelLayout(**sizes, **options)
    return _one(args, LayoutRow(model, layout, None, 0), compute)


def _machine(args) -> dict:
    """--topology, --gpu and --memory (GB) as `predict_layouts`' keywords."""
    from ..workloads import DEFAULT_CLUSTER

    capacity = None if args.memory is None else args.memory * 1e9
    return {"topology": args.topology or DEFAULT_CLUSTER, "device": args.gpu, "memory_capacity": capacity}


def _compile(args, row, compute):
    from ..workloads import training_machine, training_workload

    machine = _machine(args)
    topo = training_machine(machine["topology"], row.layout.gpus, device=machine["device"])
    return training_workload(
        topo, topo.workers, row.model, row.layout, compute=compute, memory_capacity=machine["memory_capacity"]
    )


def _one(args, row, compute) -> int:
    import netsim

    job = _compile(args, row, compute)
    print(
        f"netsim: simulating {len(job.workload.flows)} flows, {len(job.workload.tasks)} tasks",
        file=sys.stderr,
    )
    stats = job.stats(netsim.simulate(job.scenario()))
    m, lay = row.model, row.layout
    mem = stats.memory
    print(
        f"model: hidden {m.hidden}, heads {m.heads}, layers {m.layers}, seq {m.seq_len} "
        f"({m.parameters / 1e9:.2f} B parameters)\n"
        f"layout: tp {lay.tp} x pp {lay.pp} x dp {lay.dp}, micro-batch {lay.micro_batch}, "
        f"global batch {lay.global_batch} ({lay.microbatches} micro-batches), {lay.schedule}\n"
        f"on: {job.fabric.name} ({job.fabric.device})\n"
        f"iteration time   {stats.iteration_time * 1e3:10.2f} ms\n"
        f"  compute        {stats.compute * 1e3:10.2f} ms\n"
        f"  exposed TP     {stats.tp_exposed * 1e3:10.2f} ms\n"
        f"  exposed PP     {stats.pp_exposed * 1e3:10.2f} ms\n"
        f"  exposed DP     {stats.dp_exposed * 1e3:10.2f} ms\n"
        f"  bubble         {stats.bubble * 1e3:10.2f} ms\n"
        f"memory per GPU   {mem.total / 1e9:10.2f} GB (weights {mem.parameters / 1e9:.2f}, gradients "
        f"{mem.gradients / 1e9:.2f}, optimizer {mem.optimizer / 1e9:.2f}, activations {mem.activations / 1e9:.2f})"
    )
    if args.json:
        from .._checks import to_json, write_atomic

        record = {"units": {"time": "s", "memory": "bytes"}, **_stats_record(stats)}
        write_atomic(args.json, to_json(record, indent=1))
        print(f"wrote {args.json}")
    return 0


def _stats_record(stats) -> dict:
    return {
        "predicted_s": stats.iteration_time,
        "compute_s": stats.compute,
        "tp_exposed_s": stats.tp_exposed,
        "pp_exposed_s": stats.pp_exposed,
        "dp_exposed_s": stats.dp_exposed,
        "bubble_s": stats.bubble,
        "memory_bytes": stats.memory.total,
    }


def _table(args, rows, compute) -> int:
    """`netsim.workloads.predict_layouts` on every row; its summary printed, its records written."""
    import numpy as np

    from ..workloads import predict_layouts

    records = predict_layouts(rows, **_machine(args), compute=compute, simulate_all=args.simulate_all)
    rel = [abs(r["error"]) for r in records if "error" in r]
    done = sum(r.get("predicted_s") is not None for r in records)
    estimated = sum(r.get("method") == "closed form" for r in records)
    unfit = sum(r.get("fits") is False for r in records)
    print(f"{done} of {len(rows)} rows predicted ({estimated} in closed form, {unfit} over GPU memory)")
    summary = {}
    if rel:
        summary = {"mape_percent": 100 * float(np.mean(rel)), "max_percent": 100 * float(np.max(rel))}
        print(
            f"against the measured column: MAPE {summary['mape_percent']:.2f} %, max {summary['max_percent']:.2f} %"
        )
    if args.json:
        from .._checks import to_json, write_atomic

        write_atomic(
            args.json, to_json({"units": {"time": "s"}, "summary": summary, "rows": records}, indent=1)
        )
        print(f"wrote {args.json}")
    return 0
