"""netsim command line: simulate scenarios, sweep what-ifs, calibrate against measured traces."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

import jax


def check_output_path(path: str | None, option: str, suffixes: tuple[str, ...]) -> None:
    """Refuses, before any work, an output whose type is unknown or whose folder does not exist."""
    if path is None:
        return
    if not path.endswith(suffixes):
        kind = os.path.splitext(path)[1] or "(none)"
        raise OSError(f"{option}: unknown output type {kind!r} in {path!r}; use one of {', '.join(suffixes)}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise OSError(f"{option}: folder {folder!r} does not exist")


def _run(args: argparse.Namespace) -> int:
    import netsim

    check_output_path(args.out, "--out", (".json", ".h5", ".hdf5"))
    check_output_path(args.trace, "--trace", (".json",))
    scenario = netsim.Scenario.load(args.scenario)
    print(f"netsim: simulating {args.scenario} ({len(scenario.links)} links, {len(scenario.flows)} flows, "
          f"{len(scenario.tasks)} tasks) on {jax.default_backend()}", file=sys.stderr)
    result = netsim.simulate(scenario, max_events=args.max_events)
    print(result.summary(top=args.top))
    if args.out:
        result.save(args.out)
        print(f"\nwrote {args.out}")
    if args.trace:
        from netsim.timeline import save_trace

        save_trace(result, args.trace)
        print(f"wrote {args.trace} (open in https://ui.perfetto.dev or chrome://tracing)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from netsim import __version__

    parser = argparse.ArgumentParser(prog="netsim", description=__doc__)
    parser.add_argument("--version", action="version", version=f"netsim {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="simulate a scenario JSON file and print a summary")
    run.add_argument("scenario", help="scenario JSON file (see docs/scenario-format.md)")
    run.add_argument("--out", help="write results: .json, or .h5 for HDF5")
    run.add_argument("--trace", help="write a Chrome/Perfetto trace JSON of flows and tasks")
    run.add_argument("--max-events", type=int, default=None, help="event-loop bound (default: 2 x padded items + 16)")
    run.add_argument("--top", type=int, default=5, help="rows in the summary tables")
    run.set_defaults(handler=_run)
    for module in ("netsim._sweep_cli", "netsim._calibrate_cli"):
        try:
            importlib.import_module(module).register(sub)
        except ModuleNotFoundError as e:
            if e.name != module:
                raise
    return parser


def main(argv: list[str] | None = None) -> int:
    import netsim

    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except (netsim.ScenarioError, netsim.SimulationError, OSError) as e:
        print(f"netsim: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
