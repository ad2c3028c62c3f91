"""`netsim run SCENARIO`: simulate a scenario JSON file and print a summary."""

from __future__ import annotations

import argparse
import sys

from .._progress import doing
from .._threads import cpu_threads_label
from ._common import check_outputs, started, whole


def register(subparsers) -> None:
    """Adds the `run` subcommand to an argparse subparsers object."""
    run = subparsers.add_parser("run", help="simulate a scenario JSON file and print a summary")
    run.add_argument("scenario", help="scenario JSON file (see docs/scenario-format.md)")
    run.add_argument("--out", help="write results: .json, or .h5 for HDF5")
    run.add_argument("--trace", help="write a Chrome/Perfetto trace JSON of flows and tasks")
    run.add_argument(
        "--max-events", type=whole(1), default=None, help="event-loop bound (default: 2 x padded items + 16)"
    )
    run.add_argument("--top", type=whole(1), default=5, help="rows in the summary tables")
    run.add_argument(
        "--tolerance",
        type=_tolerance,
        default=0.0,
        metavar="W",
        help="fast mode: merge events within a relative time window W, e.g. 0.01 (default 0: "
        "exact; errors in docs/performance.md)",
    )
    run.set_defaults(handler=_run)


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 0.5:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 0.5] (0 = exact), got {text!r}")
    return value


def _run(args: argparse.Namespace) -> int:
    check_outputs(
        {"the scenario": args.scenario},
        {"--out": (args.out, (".json", ".h5", ".hdf5")), "--trace": (args.trace, (".json",))},
    )
    import jax

    import netsim

    with doing(f"reading {args.scenario}"):
        scenario = netsim.compile_scenario(netsim.Scenario.load(args.scenario))
    started()
    links, flows, tasks = scenario.scenario.links, scenario.scenario.flows, scenario.scenario.tasks
    backend = jax.default_backend()
    if backend == "cpu":
        backend += f", XLA threads: {cpu_threads_label()}"
    print(
        f"netsim: simulating {args.scenario} ({len(links)} links, {len(flows)} flows, {len(tasks)} tasks) "
        f"on {backend}",
        file=sys.stderr,
    )
    result = netsim.simulate(scenario, max_events=args.max_events, tolerance=args.tolerance, progress=True)
    print(result.summary(top=args.top))
    if args.out:
        with doing(f"writing {args.out}"):
            result.save(args.out)
        print(f"\nwrote {args.out}")
    if args.trace:
        from netsim.timeline import save_trace

        save_trace(result, args.trace)
        print(f"wrote {args.trace} (open in https://ui.perfetto.dev or chrome://tracing)")
    return 0
