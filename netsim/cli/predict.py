"""`netsim predict TRACE... --params P.json`: a calibration's measured-vs-simulated report on any traces."""

from __future__ import annotations

import argparse
import sys


def register(subparsers) -> None:
    """Adds the `predict` subcommand to an argparse subparsers object."""
    p = subparsers.add_parser(
        "predict",
        help="simulate measured tables with fitted parameters and compare",
        description="Simulates every table of the traces that netsim can simulate (nccl-tests collectives, "
        "p2pBandwidthLatencyTest matrices) on the calibrated topology and prints measured vs "
        "simulated per point, with the mean and max relative error per table (busbw for "
        "collectives, bandwidth or latency for copies). Tables from another machine are refused "
        "(see docs/calibration.md).",
    )
    p.add_argument("traces", nargs="+", help="trace files (.txt logs or .h5)")
    p.add_argument(
        "--params",
        required=True,
        help="calibration JSON written by `netsim calibrate --out`, or a calibrated preset name",
    )
    p.add_argument(
        "--p2p",
        choices=("on", "off", "auto"),
        default="auto",
        help="P2P on (direct routes) or off (host-staged), or as each table says (default auto: "
        "NCCL_P2P_DISABLE on its command line, P2P=Disabled matrices, 'P2P not available' notes)",
    )
    p.add_argument(
        "--transport",
        choices=("auto", "p2p", "shm", "socket"),
        default="auto",
        help="simulate every collective over one named transport (docs/calibration.md, 'Degraded "
        "transports'): p2p (= --p2p on), shm (= --p2p off), socket (NCCL's network transport over "
        "loopback: host routes, host budgets at 2 x --socket-bandwidth / hops, a hop between NUMA nodes "
        "counting 1.375); default auto: --p2p",
    )
    p.add_argument(
        "--socket-bandwidth",
        type=float,
        default=None,
        metavar="GBPS",
        help="the socket transport's loopback throughput, all hops together, GB/s (default 8)",
    )
    p.add_argument("--json", metavar="OUT", help="write the points as JSON (written atomically)")
    p.set_defaults(handler=_predict)


def _predict(args: argparse.Namespace) -> int:
    import numpy as np

    from netsim.calibrate import (
        SOCKET_BANDWIDTH,
        Params,
        Spec,
        check_layout,
        check_transports,
        compare,
        experiments_from_trace,
        predict,
        predict_socket,
    )
    from netsim.topology import load, load_costs
    from netsim.traces import read_trace

    from .._checks import to_json, write_atomic
    from .._errors import ScenarioError
    from ._common import check_outputs

    check_outputs(
        {f"trace {t}": t for t in args.traces} | {"--params": args.params},
        {"--json": (args.json, (".json",))},
    )
    topo, staged = load(args.params, p2p=True), load(args.params, p2p=False)
    costs = load_costs(args.params)
    if costs is None:
        print(
            f"netsim: warning: {args.params} carries no fitted software costs: collectives cost only their "
            "bytes and latencies",
            file=sys.stderr,
        )
    socket = SOCKET_BANDWIDTH if args.socket_bandwidth is None else args.socket_bandwidth * 1e9
    if not socket > 0:
        raise ScenarioError(
            f"--socket-bandwidth: expected a bandwidth > 0 GB/s, got {args.socket_bandwidth!r}"
        )
    routes = {"p2p": "on", "shm": "off", "socket": "off"}.get(args.transport, args.p2p)
    traces = [read_trace(t) for t in args.traces]
    spec = Spec.for_topology(topo, staged=staged, regimes=costs.regimes if costs else None)
    params = Params.load(spec, args.params, topo, staged)
    experiments, notes = [], []
    for trace in traces:
        experiments += experiments_from_trace(trace, spec, topo, staged=staged, routes=routes, notes=notes)
    for line in notes:
        print(line)
    for trace in traces:  # where the trace and the topology disagree on the machine's layout
        for finding in check_layout(trace, topo):
            print(f"warning: layout: {finding}")
        for rep in check_transports(trace, topo, staged, socket_bandwidth=socket):
            if rep.degraded:
                print(f"warning: transport: {rep}")
    if not experiments:
        raise ScenarioError(f"no table in {', '.join(args.traces)} can be simulated on {topo.name!r}")
    print(
        f"simulating {len(experiments)} tables ({sum(e.n_points for e in experiments)} points) on {topo.name}; "
        "compiling first (~20 s)",
        file=sys.stderr,
    )
    if args.transport == "socket":  # the host budgets depend on each table's rank count
        run = predict_socket(spec, params, experiments, staged, socket, throw=False)
    else:
        run = predict(params, experiments, throw=False)
    tables, start = [], 0
    for e in experiments:
        part = slice(start, start + e.n_points)
        start += e.n_points
        t, status = run["makespan"][part], run.status[part]
        (rep,) = compare([e], [t]).experiments
        kind = e.op if e.collective else e.kind
        print(f"\n== {e.name}  ({kind}, {e.n_gpus} GPUs)")
        print("\n".join("   " + line for line in rep.table()))
        bad = int(np.sum(status != 0))
        print(
            f"   {rep.quantity}: mean |error| {rep.mean_error:.2%}, max {rep.max_error:.2%} over {e.n_points} points"
            + (f"; {bad} points did not finish (their status is in --json)" if bad else "")
        )
        points = []
        for b, m, s, label, st in zip(e.moved, e.measured, t, e.labels, status, strict=True):
            point = {"bytes": float(b), "measured_s": float(m), "simulated_s": float(s)}
            point |= {} if e.collective else {"cell": label}
            points.append(point | ({"status": int(st)} if st else {}))
        tables.append({"name": e.name, "kind": kind, "n_gpus": e.n_gpus, "points": points})
    if args.json:
        record = {"params": args.params, "topology": topo.name, "tables": tables}
        write_atomic(args.json, to_json(record, indent=1))
        print(f"\nwrote {args.json}")
    return 0
