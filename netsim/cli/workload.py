"""`netsim workload FILE --topology T`: a SimAI text workload or Chakra execution traces, simulated on a
topology: iteration time, exposed communication per rank, the critical path, and a Perfetto trace."""

from __future__ import annotations

import argparse
import os
import sys

from ._common import TOPOLOGY_HELP, whole


def register(subparsers) -> None:
    """Adds the `workload` subcommand to an argparse subparsers object."""
    p = subparsers.add_parser(
        "workload",
        help="simulate a SimAI workload file or Chakra traces on a topology",
        description="Reads a SimAI / ASTRA-sim 1.0 text workload (e.g. SimAI's example/microAllReduce.txt) or "
        "Chakra execution traces (one .et file per rank, or an ASTRA-sim prefix PREFIX for PREFIX.0.et, "
        "PREFIX.1.et, ...), places rank i on the topology's i-th GPU, simulates one iteration and prints "
        "the iteration time, the exposed communication per rank and the critical path. See docs/workloads.md.",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="a SimAI .txt file, or .et files / an ET prefix")
    p.add_argument("--topology", "-t", required=True, help=TOPOLOGY_HELP)
    p.add_argument("--trace", metavar="JSON", help="write a Chrome/Perfetto trace of every task and flow")
    p.add_argument("--json", metavar="OUT", help="write the report (SI units) as JSON")
    p.add_argument(
        "--top", type=whole(1), default=10, help="rows of ranks and critical-path items (default 10)"
    )
    p.add_argument(
        "--tolerance", type=float, default=0.0, metavar="W", help="fast mode window, as for `netsim run`"
    )
    p.set_defaults(handler=_workload)


def _workload(args: argparse.Namespace) -> int:
    from ._common import check_outputs, topology_input

    inputs = {f"FILE {k + 1}": f for k, f in enumerate(args.files) if os.path.isfile(f)}
    inputs |= topology_input(args.topology)
    check_outputs(inputs, {"--trace": (args.trace, (".json",)), "--json": (args.json, (".json",))})

    from .._errors import check_tolerance
    from ..topology import load, load_costs
    from ..workloads import simulate_workload

    tolerance = check_tolerance(args.tolerance)
    topo = load(args.topology)
    source = args.files[0] if len(args.files) == 1 else args.files
    print(f"netsim: simulating {' '.join(args.files)} on {topo.name}", file=sys.stderr)
    run = simulate_workload(source, topo, costs=load_costs(args.topology), tolerance=tolerance, progress=True)
    print(run.summary(top=args.top))
    if args.json:
        from .._checks import to_json, write_atomic

        write_atomic(args.json, to_json(to_record(run, args.topology), indent=1))
        print(f"\nwrote {args.json}")
    if args.trace:
        run.save_trace(args.trace)
        print(f"wrote {args.trace} (open in https://ui.perfetto.dev or chrome://tracing)")
    return 0


def to_record(run, topology: str) -> dict:
    """The --json report: per rank compute and exposed communication (s), each collective's span and busbw,
    the critical path."""
    return {
        "workload": run.name,
        "topology": topology,
        "units": {"time": "s", "size": "B", "busbw": "B/s"},
        "iteration_time": run.iteration_time,
        "exposed_max": run.exposed_max,
        "ranks": [
            {"rank": r, "node": node, "compute": float(c), "exposed": float(e)}
            for r, (node, c, e) in enumerate(zip(run.ranks, run.compute, run.exposed, strict=True))
        ],
        "collectives": [
            {
                "name": c.name,
                "kind": c.kind,
                "ranks": c.n_ranks,
                "size": c.size,
                "start": c.start,
                "time": c.time,
                "busbw": c.busbw,
            }
            for c in run.collectives
        ],
        "critical_path": [
            {"id": s.id, "kind": s.kind, "start": s.start, "duration": s.duration} for s in run.critical_path
        ],
    }
