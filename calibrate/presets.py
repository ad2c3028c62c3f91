"""Named, fitted parameter sets, each citing the traces it came from (files in shared/traces/).

A preset is JSON-able: the topology preset it applies to (`netsim.topology.preset`), the fitted
values (`Params.to_values`), the sources, the command that produced it and the fit's errors.
`load(name)` returns the topology, spec and `Params` ready for `predict`, `report` or a further fit.
"""

from __future__ import annotations

import copy
import json
import os

from netsim import ScenarioError
from netsim._checks import to_json, write_atomic
from netsim.topology import Topology, pcie_server_from_topo
from netsim.topology import preset as topology_preset

from ._model import Params, Spec, pcie_shared

__all__ = ["PRESETS", "build_topology", "load", "save"]

#: fitted by `netsim calibrate m01_8x4090_2xEPYC7542_allreduce_p2p_on.txt
#: m01_8x4090_2xEPYC7542_p2pBandwidthLatency_p2p_on.txt --topology rtx4090-8x-epyc7542` (400 steps, lr 0.02):
#: copies first (all p2p matrices of the P2P-driver run, both modes), then the all_reduce on that fabric.
RTX4090_8X = {
    "topology": "rtx4090-8x-epyc7542",
    "sources": ["m01_8x4090_2xEPYC7542_p2pBandwidthLatency_p2p_on.txt", "m01_8x4090_2xEPYC7542_allreduce_p2p_on.txt"],
    "link_classes": {
        "memory": {"bandwidth": 51.2e9, "latency": 1.277e-07},  # not observed by these traces: builder value
        "numa": {"bandwidth": 204.8e9, "latency": 8.504e-08},  # not a bottleneck here: builder value
        "socket": {"bandwidth": 21.963e9, "latency": 1.447e-07},
        "pcie": {"bandwidth": 25.477e9, "latency": 8.504e-08},
    },
    "shared": {
        "socket0<->socket1": 41.197e9,
        "gpu0 staging": 21.025e9, "gpu1 staging": 20.626e9, "gpu2 staging": 20.892e9, "gpu3 staging": 23.267e9,
        "gpu4 staging": 19.752e9, "gpu5 staging": 20.704e9, "gpu6 staging": 20.155e9, "gpu7 staging": 20.352e9,
    },
    "regimes": {
        "LL": {"overhead": 2.3157e-06, "efficiency": 0.5, "up_to": 24944.9},
        "Simple": {"overhead": 9.8670e-06, "efficiency": 0.98239, "up_to": None},
    },
    "width": 0.35986,
    "launch": 0.0,  # held: one rank count only, so the launch cost sits in the per-step overheads
    "copy_overhead": 8.2928e-07,
    "staged_overhead": 1.27719e-05,
    "fit": {"all_reduce x8 busbw": {"mean_error": 0.0345, "max_error": 0.0775},
            "unidirectional P2P on": {"mean_error": 0.0178, "max_error": 0.0669},
            "bidirectional P2P on": {"mean_error": 0.0153, "max_error": 0.0574},
            "unidirectional P2P off": {"mean_error": 0.0394, "max_error": 0.0867},
            "bidirectional P2P off": {"mean_error": 0.0300, "max_error": 0.0595},
            "latency P2P on": {"mean_error": 0.0926, "max_error": 0.1781},
            "latency P2P off": {"mean_error": 0.1620, "max_error": 0.3339}},
}

PRESETS: dict[str, dict] = {"rtx4090-8x-epyc7542": RTX4090_8X}


def load(name: str, *, p2p: bool = True) -> tuple[Topology, Spec, Params]:
    """(topology, spec, params) of a preset: a name in PRESETS or a JSON file written by `save`.

    p2p: build the topology with P2P on (direct copies) or off (host-staged copies).
    """
    if name in PRESETS:
        values = copy.deepcopy(PRESETS[name])
    elif os.path.isfile(name):
        with open(name) as f:
            try:
                values = json.load(f)
            except json.JSONDecodeError as e:
                raise ScenarioError(f"{name}: not valid JSON: {e}") from None
    else:
        raise ScenarioError(f"calibration preset: unknown {name!r}; known: {', '.join(PRESETS)} (or a JSON file)")
    if "topology" not in values:
        raise ScenarioError(f"{name}: no 'topology' entry (a netsim.topology preset name)")
    topo = build_topology(values["topology"], p2p=p2p)
    spec = Spec.for_topology(topo, shared=pcie_shared(topo), regimes=tuple(values["regimes"]))
    return topo, spec, Params.from_values(spec, values)


def build_topology(entry: str | dict, *, p2p: bool = True) -> Topology:
    """A preset's topology: a `netsim.topology.preset` name, or {"nvidia_smi_topo": text} (a server
    built by `pcie_server_from_topo`)."""
    if isinstance(entry, str):
        return topology_preset(entry, p2p=p2p)
    if isinstance(entry, dict) and isinstance(entry.get("nvidia_smi_topo"), str):
        return pcie_server_from_topo(entry["nvidia_smi_topo"], p2p=p2p, name=entry.get("name", "server"))
    raise ScenarioError(f"topology: expected a preset name or {{'nvidia_smi_topo': text}}, got {entry!r}")


def save(path: str | os.PathLike, values: dict) -> None:
    """Writes a preset (Calibration.values() plus a 'topology' entry) as JSON, atomically (non-finite
    values as null)."""
    write_atomic(path, to_json(values, indent=1))
