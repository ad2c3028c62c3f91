"""`netsim calibrate TRACE... --topology T --out params.json`: fit a machine's parameters to its traces."""

from __future__ import annotations

import argparse
import json
import os
import sys

TOPOLOGY_HELP = (
    "a netsim.topology preset name (e.g. rtx4090-8x-epyc7542; a calibrated preset gives its fitted "
    "figures), an `nvidia-smi topo -m` file, or a calibration JSON written by `netsim calibrate`"
)


def register(subparsers) -> None:
    """Adds the `calibrate` subcommand to an argparse subparsers object."""
    p = subparsers.add_parser(
        "calibrate",
        help="fit link, protocol and shared-resource parameters to measured traces",
        description="Reads nccl-tests tables and p2pBandwidthLatencyTest matrices (text, or HDF5 written by "
        "netsim.calibrate.save_trace), fits the topology's parameters by gradient descent through "
        "the simulator, and writes them as a calibration JSON that `netsim.topology.load` and "
        "`netsim predict --params` read (see docs/calibration.md).",
    )
    p.add_argument("traces", nargs="+", help="trace files (.txt logs or .h5)")
    p.add_argument("--topology", required=True, help=TOPOLOGY_HELP)
    p.add_argument("--out", required=True, help="calibration JSON to write")
    p.add_argument("--steps", type=int, default=400, help="most optimizer steps per stage (default 400)")
    p.add_argument("--lr", type=float, default=0.02, help="peak Adam learning rate, log units (default 0.02)")
    p.add_argument("--plot", help="PNG of measured vs simulated busbw per size (collectives)")
    p.add_argument("--points", action="store_true", help="print every point of the fit report")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(handler=_calibrate)


def topology_entry(value: str) -> str | dict | None:
    """The calibration file's "topology" entry for a --topology value (None: neither a preset nor a file)."""
    from netsim.topology import PRESETS

    if value in PRESETS:
        return value
    if not os.path.isfile(value):
        return None
    with open(value) as f:
        text = f.read()
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text).get("topology")
        except (json.JSONDecodeError, AttributeError):
            return None
    return {"nvidia_smi_topo": text, "name": os.path.splitext(os.path.basename(value))[0]}


def read_traces(paths):
    """Traces from text logs or HDF5 files (TraceError naming the file and line)."""
    from netsim.calibrate import load_trace, read_trace

    return [load_trace(t) if t.endswith((".h5", ".hdf5")) else read_trace(t) for t in paths]


def _calibrate(args: argparse.Namespace) -> int:
    from netsim.calibrate import TraceError, calibrate, plot_fit
    from netsim.calibrate.presets import save
    from netsim.topology import PRESETS, load

    entry = topology_entry(args.topology)
    if entry is None:
        print(
            f"netsim: error: --topology {args.topology!r} is neither a topology preset ({', '.join(PRESETS)}) "
            "nor a file",
            file=sys.stderr,
        )
        return 2
    topo, staged = load(args.topology, p2p=True), load(args.topology, p2p=False)
    try:
        traces = read_traces(args.traces)
    except TraceError as e:
        print(f"netsim: error: {e}", file=sys.stderr)
        return 2
    progress = None if args.quiet else (lambda line: print(line, file=sys.stderr))
    cal = calibrate(traces, topo, staged=staged, steps=args.steps, learning_rate=args.lr, progress=progress)
    print(cal.report.summary(points=args.points))
    save(args.out, {"topology": entry, **({"device": topo.device} if topo.device else {}), **cal.values()})
    print(f"\nwrote {args.out}")
    if args.plot:
        plot_fit(cal.report, args.plot, title=f"netsim calibrate on {topo.name}")
        print(f"wrote {args.plot}")
    return 0
