"""`netsim presets`: the topology presets and calibrated presets that `--topology NAME` accepts."""

from __future__ import annotations

import argparse


def register(subparsers) -> None:
    """Adds the `presets` subcommand to an argparse subparsers object."""
    p = subparsers.add_parser(
        "presets",
        help="list topology presets and calibrated presets",
        description="Lists the names `--topology` (netsim collective, calibrate, predict) and "
        "netsim.topology.load accept: topology presets with builder figures (netsim.topology.PRESETS) "
        "and calibrated presets with fitted figures (netsim.topology.CALIBRATED), with the measured "
        "traces each was fitted on (netsim/data/traces/). A name in both loads the calibrated one.",
    )
    p.set_defaults(handler=_presets)


def listing() -> str:
    """The two tables `netsim presets` prints."""
    from ..topology import CALIBRATED, CLUSTERS, PRESETS

    width = max(map(len, [*PRESETS, *CALIBRATED])) + 2
    lines = ["topology presets (builder figures; netsim.topology.preset(name)):"]
    lines += [f"  {name:<{width}}{text}" for name, text in PRESETS.items()]
    lines += ["", "cluster shapes (netsim.topology.load(spec)):"]
    lines += [f"  {name + ':...':<{width}}{text}" for name, (text, _) in CLUSTERS.items()]
    lines.append(
        f"  {'pcie:...':<{width}}PCIe server: pcie:N[,sockets=S][,numa=K][,switches=G][,nics=M][,nvlink=L]"
    )
    lines += ["", "calibrated presets (fitted figures; loaded first by netsim.topology.load(name)):"]
    for name, values in CALIBRATED.items():
        fit = values.get("fit", {})
        # the collectives' fit first (what most users come for), then the first P2P tables
        shown = sorted(fit.items(), key=lambda kv: "busbw" not in kv[0])[:3]
        errors = ", ".join(f"{k}: mean {v['mean_error']:.1%}" for k, v in shown)
        lines.append(f"  {name:<{width}}on topology {values['topology']}; fitted on:")
        lines += [f"  {'':<{width}}  {source}" for source in values.get("sources", [])]
        if errors:
            lines.append(f"  {'':<{width}}  errors after the fit: {errors}")
    return "\n".join(lines)


def _presets(args: argparse.Namespace) -> int:
    print(listing())
    return 0
