"""`netsim latency`: average packet latency against offered load on a mesh or torus (BookSim2-style)."""

from __future__ import annotations

import argparse
import json
import sys


def _rates(text: str) -> list[float]:
    items = text.split(",")
    if any(not x.strip() for x in items):
        raise argparse.ArgumentTypeError(
            f"empty item in {text!r}: give comma-separated numbers, e.g. 0.01,0.02"
        )
    try:
        rates = [float(x) for x in items]
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated numbers, got {text!r}") from None
    if not rates or any(not r > 0 or r == float("inf") for r in rates):
        raise argparse.ArgumentTypeError(
            f"rates must be finite numbers > 0 (packets per node per cycle), got {text!r}"
        )
    return rates


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return int(text)


def _ghz(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a clock in GHz > 0, got {text!r}")
    return value * 1e9


def register(subparsers) -> None:
    """Adds the `latency` subcommand to an argparse subparsers object."""
    p = subparsers.add_parser(
        "latency",
        help="load-latency curve of a mesh or torus under synthetic traffic (BookSim2-style)",
        description="Average packet latency (creation to tail ejection, source queueing included) and "
        "accepted throughput at each offered rate, and the saturation rate, from netsim's steady-state "
        "model (docs/latency.md). Rates in packets per node per cycle, latency in cycles (and ns with "
        "--clock).",
    )
    p.add_argument(
        "--topology",
        default="mesh:8x8",
        help="mesh:KxK or torus:KxK, any number of sides (torus:16 is a ring; default mesh:8x8)",
    )
    p.add_argument(
        "--traffic",
        default="uniform",
        help="uniform, transpose, bitcomp, bitrev, shuffle, tornado, neighbor, randperm or hotspot, "
        "as BookSim2 writes them, parameters included: 'hotspot({{0,5},{3,1}})' (hot nodes, weights; "
        "default node 0), 'randperm(SEED)' (default uniform)",
    )
    p.add_argument("--packet-size", type=_positive, default=1, help="flits per packet (default 1)")
    p.add_argument("--rates", type=_rates, required=True, help="offered rates, e.g. 0.01,0.02,0.05")
    p.add_argument("--router", default="booksim", help="router preset (default booksim)")
    p.add_argument(
        "--vcs", type=_positive, help="virtual channels per port (BookSim's num_vcs; preset's by default)"
    )
    p.add_argument("--buffer", type=_positive, help="flits per VC buffer (BookSim's vc_buf_size)")
    p.add_argument(
        "--clock",
        type=_ghz,
        help="the router's clock in GHz: latencies in ns as well (BookSim2 counts cycles only)",
    )
    p.add_argument("--json", help="write {points: [{rate, latency, accepted}], saturation} to this .json")
    p.add_argument("--plot", help="draw the curve to this .png / .pdf / .svg (needs matplotlib)")
    p.set_defaults(handler=_latency)


def table(curve) -> str:
    """The curve as BookSim prints its averages, one line per rate."""
    lines = [
        f"{curve.topology}, {curve.traffic} traffic, {curve.packet_size}-flit packets, router {curve.router.name} "
        f"({curve.router.num_vcs} VCs x {curve.router.vc_buf_size} flits)",
        f"zero-load latency {curve.zero_load:.2f} cycles; saturation {curve.saturation:.5g} packets/node/cycle",
        "",
        f"{'rate':>10}  {'packet latency':>15}  {'accepted':>10}"
        + (f"  {'latency (ns)':>12}" if curve.router.clock_hz else ""),
    ]
    for r, lat, acc in zip(curve.rates, curve.latency, curve.accepted, strict=True):
        shown = f"{lat:15.2f}" if lat != float("inf") else f"{'saturated':>15}"
        line = f"{r:10.5g}  {shown}  {acc:10.5g}"
        if curve.router.clock_hz and lat != float("inf"):
            line += f"  {float(curve.seconds(lat)) * 1e9:12.2f}"
        lines.append(line)
    return "\n".join(lines)


def _latency(args: argparse.Namespace) -> int:
    from ._common import check_outputs

    check_outputs({}, {"--json": (args.json, (".json",)), "--plot": (args.plot, (".png", ".pdf", ".svg"))})
    from .._checks import write_atomic
    from ..latency import latency_curve

    curve = latency_curve(
        args.topology,
        args.traffic,
        packet_size=args.packet_size,
        rates=args.rates,
        router=args.router,
        vcs=args.vcs,
        buffer=args.buffer,
        clock_hz=args.clock,
    )
    print(table(curve))
    if args.json:
        write_atomic(args.json, json.dumps(curve.to_dict(), indent=1) + "\n")
        print(f"\nwrote {args.json}")
    if args.plot:
        from ..plots import plot_latency

        plot_latency(curve, args.plot)
        print(f"wrote {args.plot}", file=sys.stdout)
    return 0
