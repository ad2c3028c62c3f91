"""`netsim collective OP --topology T -b 8 -e 128M -f 2`: an nccl-tests `*_perf` table, simulated.

The table has nccl-tests' columns and layout (size, count, type, redop, root, then time (us), algbw and
busbw (GB/s) for out-of-place and in-place), so it diffs against a real `all_reduce_perf` run and reads
back with `netsim.traces.read_trace`. Every size is simulated in one batched run
(`netsim.studies.collective_sweep`).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
from typing import Any

from ._common import TOPOLOGY_HELP

#: nccl-tests' names (without "_perf") -> the collective kind of netsim.workloads
OPS = {
    "all_reduce": "allreduce",
    "all_gather": "allgather",
    "reduce_scatter": "reducescatter",
    "alltoall": "alltoall",
    "broadcast": "broadcast",
    "reduce": "reduce",
}
#: nccl-tests' -d data types and their sizes (bytes)
DTYPES = {
    "int8": 1,
    "uint8": 1,
    "half": 2,
    "bfloat16": 2,
    "float": 4,
    "int32": 4,
    "uint32": 4,
    "double": 8,
    "int64": 8,
    "uint64": 8,
}
ALGORITHMS = ("ring", "tree", "binary_tree", "halving_doubling", "direct")
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
_SPELLINGS = {name.replace("_", ""): name for name in OPS} | {"all2all": "alltoall"}


def parse_op(text: str) -> str:
    """An nccl-tests operation name ("all_reduce", "all_reduce_perf", "allreduce", "AllReduce") ->
    nccl-tests' spelling ("all_reduce"); ValueError naming the known ones otherwise."""
    key = text.strip().lower().removesuffix("_perf").replace("_", "").replace("-", "")
    if key not in _SPELLINGS:
        raise ValueError(f"unknown collective {text!r}; known: {', '.join(OPS)} (or allreduce, ...)")
    return _SPELLINGS[key]


def parse_size(text: str, option: str = "size") -> int:
    """A size as nccl-tests' -b/-e/-i take it: a number of bytes with an optional K, M, G or T suffix in
    powers of 1024 ("128M" = 134217728; "1.5K" = 1536; a trailing "B" or "iB" is allowed)."""
    body = str(text).strip().upper()
    for tail in ("IB", "B"):
        if body.endswith(tail) and len(body) > len(tail):
            body = body[: -len(tail)]
            break
    unit = body[-1:] if body[-1:] in ("K", "M", "G", "T") else ""
    try:
        value = float(body[: len(body) - len(unit)]) * _UNITS[unit]
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0 and value == int(value)):
        raise ValueError(
            f"{option}: expected bytes with an optional K/M/G suffix (e.g. 8, 64K, 128M), got {text!r}"
        )
    return int(value)


def scale_links(topo, scales: list[tuple[str, float]]):
    """`topo` with each --scale PATTERN=FACTOR applied in order (`Topology.scaled`); returns (topology,
    one note per pattern naming what it scaled)."""
    from .._scenario import ScenarioError

    notes = []
    for pattern, factor in scales:
        try:
            topo = topo.scaled(pattern, factor)
        except ScenarioError as e:
            raise ScenarioError(f"--scale {e}") from None
        hit, budgets = topo.matching(pattern)
        shown = ", ".join(hit[:4]) + (f", ... ({len(hit)} links)" if len(hit) > 4 else "")
        notes.append(
            f"--scale {pattern}={factor:g}: bandwidth x{factor:g} on {shown or 'no link'}"
            + (
                f"; shared {', '.join(budgets[:4])}" + (", ..." if len(budgets) > 4 else "")
                if budgets
                else ""
            )
        )
    return topo, notes


def _op(text: str) -> str:
    try:
        return parse_op(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _scale(text: str) -> tuple[str, float]:
    pattern, sep, value = text.rpartition("=")
    try:
        factor = float(value)
    except ValueError:
        factor = math.nan
    if not sep or not pattern or not (math.isfinite(factor) and factor > 0):
        raise argparse.ArgumentTypeError(
            f"expected LINKGLOB=FACTOR with a factor > 0 (e.g. socket=0.7), got {text!r}"
        )
    return pattern, factor


def register(subparsers) -> None:
    """Adds the `collective` subcommand to an argparse subparsers object."""
    p = subparsers.add_parser(
        "collective",
        help="simulate a collective over sizes and print nccl-tests' table",
        description="Simulates one collective at every size of an nccl-tests size range on a topology and "
        "prints the table an nccl-tests `OP_perf` run prints (time in us, algbw and busbw in GB/s; "
        "out-of-place and in-place hold the same simulated values; #wrong is N/A). All sizes run as "
        "one batched simulation. See docs/cli.md.",
    )
    p.add_argument("op", type=_op, help=f"{', '.join(OPS)} (nccl-tests' names; allreduce, ... also work)")
    p.add_argument("--topology", "-t", required=True, help=TOPOLOGY_HELP)
    p.add_argument("-b", "--minbytes", type=_size, default=32 * 1024**2, help="smallest size (default 32M)")
    p.add_argument("-e", "--maxbytes", type=_size, default=32 * 1024**2, help="largest size (default 32M)")
    p.add_argument("-f", "--stepfactor", type=int, default=1, help="multiply the size by this (default 1)")
    p.add_argument("-i", "--stepbytes", type=_size, default=1024**2, help="else add this (default 1M)")
    p.add_argument("-g", "--ngpus", type=int, help="ranks: the first N GPUs of the topology (default all)")
    p.add_argument("-d", "--datatype", choices=tuple(DTYPES), default="float", help="element type (float)")
    p.add_argument("-r", "--root", type=int, default=0, help="root rank of broadcast and reduce (default 0)")
    p.add_argument(
        "--p2p",
        choices=("on", "off"),
        help="direct GPU-to-GPU copies (on) or through host memory by NCCL's SHM transport (off); "
        "default: the machine's own",
    )
    p.add_argument(
        "--software",
        default="auto",
        metavar="none|nccl|FILE",
        help="collective software costs: none (links only), nccl (netsim's NCCL-like defaults: per-step "
        "LL 1 us, Simple 5 us, from NCCL's tuning model; docs/collectives.md), or a calibration JSON / "
        "calibrated preset; default auto: the topology's fitted costs if it has them, else none",
    )
    p.add_argument(
        "--algo",
        choices=ALGORITHMS,
        help="algorithm (default ring; direct for alltoall); see docs/collectives.md",
    )
    p.add_argument(
        "--channels",
        type=int,
        help="parallel rings or trees (default 1; a ring all_reduce, all_gather or reduce_scatter over "
        "several servers: one per GPU a server holds)",
    )
    p.add_argument("--chunks", type=int, default=1, help="pipelining chunks per channel (default 1)")
    p.add_argument(
        "--slots",
        type=int,
        help="pieces in flight per connection (default 2, as NCCL's FIFO; 0 = unbounded)",
    )
    p.add_argument(
        "--scale",
        type=_scale,
        action="append",
        default=[],
        metavar="LINKGLOB=FACTOR",
        help="multiply the bandwidth of matching links (id glob or link class, e.g. socket=0.7); repeatable",
    )
    p.add_argument(
        "--search-rings",
        action="store_true",
        help="also search ring orders (netsim.studies.search_rings at the largest size) and print the best",
    )
    p.add_argument("--json", metavar="OUT", help="also write the table (SI units) as JSON")
    p.add_argument(
        "--scenario",
        metavar="OUT",
        help="also write the scenario of the largest size as JSON (links, shared resources, flows with "
        "the machine's software costs), for `netsim run` or a sweep spec",
    )
    p.add_argument("--plot", metavar="PNG", help="also plot busbw over size (needs matplotlib)")
    p.set_defaults(handler=_collective)


def _collective(args: argparse.Namespace) -> int:
    from .._scenario import ScenarioError
    from ._common import check_outputs, topology_input

    check_outputs(
        topology_input(args.topology),
        {
            "--json": (args.json, (".json",)),
            "--scenario": (args.scenario, (".json",)),
            "--plot": (args.plot, (".png", ".pdf", ".svg")),
        },
    )
    from .. import studies, workloads
    from ..topology import NcclShm, load

    sizes = studies.nccl_sizes(args.minbytes, args.maxbytes, args.stepfactor, args.stepbytes)
    costs = software_costs(args.software, args.topology)
    # NCCL with P2P off moves data by its SHM transport (no cudaMemcpy bounce)
    topo = load(args.topology, p2p=None if args.p2p is None else args.p2p == "on", transport=NcclShm())
    topo, notes = scale_links(topo, args.scale)
    gpus = topo.gpus()
    n = len(gpus) if args.ngpus is None else args.ngpus
    if not 2 <= n <= len(gpus):
        raise ScenarioError(f"-g: ranks must be in [2, {len(gpus)}] on {topo.name!r}, got {n}")
    ranks = gpus[:n]
    kind = OPS[args.op]
    rows = studies.nccl_rows(kind, sizes, n, DTYPES[args.datatype])
    if not rows:
        raise ScenarioError(
            f"-b/-e: every size is below one {args.datatype} per rank for {args.op} on {n} ranks"
        )
    algo = args.algo or ("direct" if kind == "alltoall" else "ring")
    build = getattr(workloads, kind)
    extra: dict[str, Any] = {"root": args.root} if kind in ("broadcast", "reduce") else {}
    if args.slots is not None:
        if args.slots < 0:
            raise ScenarioError(f"--slots: must be >= 0 (0 = unbounded), got {args.slots}")
        extra["slots"] = args.slots or None
    if algo == "ring" and kind in ("allreduce", "allgather", "reducescatter"):
        # as NCCL lays rings on a rail-optimized cluster: across servers each channel crosses on rails of
        # its own (on one server every channel runs in rank order)
        extra["rings"] = workloads.rail_rings(ranks, args.channels)
        if extra["rings"][0] != list(ranks):
            notes.append(
                f"rings: {len(extra['rings'])} channel(s) across servers on rails of their own (rail_rings)"
            )
    channels = len(extra["rings"]) if "rings" in extra else 1 if args.channels is None else args.channels
    collective = build(ranks, rows[-1][0], algorithm=algo, channels=channels, chunks=args.chunks, **extra)
    args.channels = channels  # the count simulated, for the table's header and the JSON record
    print(
        f"netsim: simulating {args.op} on {topo.name} ({n} ranks, {len(rows)} sizes, one batched run)",
        file=sys.stderr,
    )
    table = studies.collective_sweep(collective, topo, [s for s, _ in rows], costs)
    print(
        format_table(
            args, topo, ranks, algo, table, [c for _, c in rows], root=extra.get("root", -1), notes=notes
        )
    )
    search = None
    if args.search_rings:
        print(f"netsim: searching ring orders at {rows[-1][0]} B", file=sys.stderr)
        search = studies.search_rings(
            topo,
            ranks,
            size=rows[-1][0],
            chunks=args.chunks,
            costs=costs,
            slots=extra.get("slots", workloads.collectives.SLOTS),
        )
        print(format_rings(search, fitted_costs=costs is not None and args.software != "nccl"))
    if args.json:
        from .._checks import to_json, write_atomic

        write_atomic(args.json, to_json(to_record(args, topo, ranks, algo, table, rows, search), indent=1))
        print(f"# wrote {args.json}")
    if args.scenario:
        scenario = collective.scenario(topo, costs)  # at the largest size, as the table's last row
        scenario = dataclasses.replace(
            scenario,
            name=f"{args.op} {rows[-1][0]} B on {topo.name}",
            description=f"netsim collective {args.op} on {args.topology}, {n} ranks, {algo}; "
            + (", ".join(notes) or "no --scale"),
        )
        scenario.save(args.scenario)
        print(
            f"# wrote {args.scenario} ({args.op} at {rows[-1][0]} B: netsim run or a sweep spec's scenario)"
        )
    if args.plot:
        from ..plots import plot_busbw

        plot_busbw(
            table.size,
            table.time,
            n,
            args.plot,
            collective=kind,
            title=f"{args.op} busbw, {n} ranks on {topo.name} ({algo})",
        )
        print(f"# wrote {args.plot}")
    return 0


def _time_text(us: float) -> str:
    """nccl-tests' time cell: 2 decimals below 100 us, 1 below 10000 us, then none (width 7)."""
    return f"{us:7.0f}" if us >= 10000 else f"{us:7.1f}" if us >= 100 else f"{us:7.2f}"


def format_table(args, topo, ranks, algo, table, counts, *, root: int, notes=()) -> str:
    """The nccl-tests `OP_perf` output for a `SweepTable`, with its header naming what was simulated."""
    redop = "sum" if args.op in ("all_reduce", "reduce_scatter", "reduce") else "none"
    p2p = {None: "P2P as the machine has it", "on": "P2P on", "off": "P2P off"}[args.p2p]
    lines = [
        f"# netsim collective: {args.op}_perf simulated on {topo.name} ({args.topology}), {algo}, "
        f"{args.channels} channel(s), {args.chunks} chunk(s), {p2p}",
        *(f"# {note}" for note in notes),
        f"# nThread 1 nGpus {len(ranks)} minBytes {args.minbytes} maxBytes {args.maxbytes} step: "
        + (f"{args.stepfactor}(factor)" if args.stepfactor > 1 else f"{args.stepbytes}(bytes)")
        + " warmup iters: 0 iters: 1 agg iters: 1 validation: 0 graph: 0",
        "#",
        "# Using devices",
        *(
            f"#  Rank {i:2d} Group  0 Pid      0 on netsim device {i:2d} [{node}] {topo.device or 'GPU'}"
            for i, node in enumerate(ranks)
        ),
        "#",
        f"#{'':<62}out-of-place{'':<23}in-place          ",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
        "busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  "
        "(GB/s)       ",
    ]
    for (size, t, alg, bus), count in zip(table.rows(), counts, strict=True):
        cell = f"  {_time_text(t * 1e6)}  {alg / 1e9:6.2f}  {bus / 1e9:6.2f}  {'N/A':>5}"
        lines.append(f"{size:12.0f}  {count:12d}  {args.datatype:>8}  {redop:>6}  {root:6d}{cell}{cell}")
    avg = float(sum(table.busbw) / len(table.busbw)) / 1e9
    lines += [f"# Avg bus bandwidth    : {avg:g} ", "#"]
    return "\n".join(lines)


def software_costs(choice: str, topology: str):
    """--software: None ("none"), netsim's NCCL-like defaults ("nccl"), a calibration's fitted costs
    (a file or calibrated preset), or "auto": the topology's own fitted costs, else None."""
    from .._costs import CostModel
    from .._errors import ScenarioError
    from ..topology import load_costs

    if choice == "none":
        return None
    if choice == "nccl":
        return CostModel.default()
    looks_like_path = choice.endswith(".json") or "/" in choice or os.sep in choice
    if choice != "auto" and looks_like_path and not os.path.exists(choice):
        raise ScenarioError(f"--software: file {choice!r} does not exist")
    costs = load_costs(topology if choice == "auto" else choice)
    if costs is None and choice != "auto":
        raise ScenarioError(f"--software: {choice!r} is none, nccl, or a calibration with software costs")
    return costs


def format_rings(search, *, fitted_costs: bool = False) -> str:
    """The best ring orders of a `RingSearch` and the default order, with their busbw."""
    note = " with the machine's fitted software costs" if fitted_costs else ""
    lines = [
        "",
        f"# ring search: ring AllReduce of {search.size:.0f} B per order, {search.evaluated} rings simulated "
        f"(netsim.studies.search_rings){note}",
        f"# {'ring':<8} {'busbw (GB/s)':>12} {'time (us)':>11}  order (-> staged hop: via node)",
    ]
    for label, plan in [
        *((f"best {i + 1}", p) for i, p in enumerate(search.best)),
        ("default", search.default),
    ]:
        order = " ".join(
            node + (f" ->[{via}]" if via else "") for node, via in zip(plan.order, plan.vias, strict=True)
        )
        lines.append(f"# {label:<8} {plan.busbw / 1e9:12.2f} {plan.time * 1e6:11.1f}  {order}")
    lines.append(f"# best / default busbw: {search.gain:.3f}")
    return "\n".join(lines)


def to_record(args, topo, ranks, algo, table, rows, search) -> dict[str, Any]:
    """The --json file: what was simulated, and per size time (s), algbw and busbw (bytes/s)."""
    record: dict[str, Any] = {
        "op": args.op,
        "topology": topo.name,
        "source": args.topology,
        "ranks": list(ranks),
        "algorithm": algo,
        "channels": args.channels,
        "chunks": args.chunks,
        "p2p": args.p2p,
        "datatype": args.datatype,
        "scale": {pattern: factor for pattern, factor in args.scale},
        "units": {"size": "B", "time": "s", "algbw": "B/s", "busbw": "B/s"},
        "rows": [
            {"size": s, "count": c, "time": t, "algbw": a, "busbw": b}
            for (s, c), (_, t, a, b) in zip(rows, table.rows(), strict=True)
        ],
    }
    if search is not None:
        record["rings"] = [
            {
                "order": list(p.order),
                "vias": list(p.vias),
                "time": p.time,
                "busbw": p.busbw,
                "default": p is search.default,
            }
            for p in (*search.best, search.default)
        ]
    return record
