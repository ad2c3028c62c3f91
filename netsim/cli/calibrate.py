"""`netsim calibrate TRACE... --topology T --out params.json`: fit a machine's parameters to its traces."""

from __future__ import annotations

import argparse
import os
import sys

from ._common import TOPOLOGY_HELP


def register(subparsers) -> None:
    """Adds the `calibrate` subcommand to an argparse subparsers object."""
    p = subparsers.add_parser(
        "calibrate",
        help="fit link, protocol and shared-resource parameters to measured traces",
        description="Reads nccl-tests tables and p2pBandwidthLatencyTest matrices (text, or HDF5 written by "
        "netsim.traces.save_trace), fits the topology's parameters by gradient descent through "
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


def _calibrate(args: argparse.Namespace) -> int:
    from netsim.calibrate import calibrate, check_layout, check_transports, plot_fit
    from netsim.calibrate.presets import save
    from netsim.topology import PRESETS, load, load_costs, read_calibration, topology_entry
    from netsim.traces import read_trace

    from .._checks import count, number
    from .._errors import ScenarioError, SimulationError
    from ._common import check_outputs, topology_input

    # every argument is checked before the topology is built, the traces are read or the fit compiles
    steps, lr = count(args.steps, "--steps"), number(args.lr, "--lr", positive=True)
    inputs = {f"trace {t}": t for t in args.traces} | topology_input(args.topology)
    check_outputs(inputs, {"--out": (args.out, (".json",)), "--plot": (args.plot, (".png",))})
    entry = topology_entry(args.topology)
    if entry is None and os.path.isfile(args.topology):  # a JSON file: a scenario, sweep spec, ...
        try:
            read_calibration(args.topology)  # says so when it is not valid JSON
        except ScenarioError as e:
            raise ScenarioError(f"--topology {e}") from None
        raise ScenarioError(
            f'--topology {args.topology!r} is a JSON file without a "topology" entry, so not a calibration '
            'file: a calibration JSON (`netsim calibrate --out`) names its machine under "topology" (a preset '
            'name or {"nvidia_smi_topo": text}); a topology file is an `nvidia-smi topo -m` text file'
        )
    if entry is None:
        raise ScenarioError(
            f"--topology {args.topology!r} is neither a topology preset ({', '.join(PRESETS)}) nor a file"
        )
    topo, staged = load(args.topology, p2p=True), load(args.topology, p2p=False)
    traces = [read_trace(t) for t in args.traces]
    # --quiet drops the optimizer's progress, not what calibrate says about the data: tables refused and
    # points left out (lines starting "refused " or with a trace's name)
    about_data = ("refused ", *(f"{t.source}:" for t in traces))
    said: set[str] = set()  # the fit's stages read the same tables: each refusal or note is said once
    say = lambda line: line in said or said.add(line) or print(line, file=sys.stderr)
    progress = (lambda line: line.startswith(about_data) and say(line)) if args.quiet else say
    for trace in traces:  # a fit on the wrong layout fits links the machine does not have
        for finding in check_layout(trace, topo):
            say(f"warning: layout: {finding}")
        for rep in check_transports(trace, topo, staged):  # a fit follows a degraded run: say so
            if rep.degraded:
                say(f"warning: transport: {rep}")
    try:
        cal = calibrate(
            traces,
            topo,
            staged=staged,
            costs=load_costs(args.topology),
            steps=steps,
            learning_rate=lr,
            progress=progress,
        )
    except FloatingPointError as e:  # the loss overflowed: the step was too large for these tables
        raise SimulationError(f"{e} (--lr {lr:g})") from None
    print(cal.report.summary(points=args.points))
    if cal.identifiability is not None:
        print(cal.identifiability.summary())
    save(args.out, {"topology": entry, **({"device": topo.device} if topo.device else {}), **cal.values()})
    print(f"\nwrote {args.out}")
    if args.plot:
        plot_fit(cal.report, args.plot, title=f"netsim calibrate on {topo.name}")
        print(f"wrote {args.plot}")
    return 0
