"""Named, fitted parameter sets, each citing the traces it came from (files in netsim/data/traces/).

The calibrated presets are calibration files shipped as data (netsim/data/calibrations/NAME.json,
`netsim.topology.CALIBRATED`), so that `netsim.topology.load(name)` gives the calibrated machine and
`netsim.topology.load_costs(name)` its software costs; a calibration file written by `netsim calibrate
--out` loads the same way. `load(name)` here returns the topology with the spec and `Params` of the
calibration, ready for `predict`, `report` or a further fit; `save` writes a calibration file.
"""

from __future__ import annotations

import os

from netsim.checks import to_json, write_atomic
from netsim.topology import Topology, load_costs
from netsim.topology import load as load_topology

from ._model import Params, Spec

__all__ = ["load", "save"]


def load(name: str | os.PathLike, *, p2p: bool | None = None) -> tuple[Topology, Spec, Params]:
    """(topology, spec, params) of a calibrated preset or a calibration file (see `netsim.topology.load`).

    p2p: build the topology with P2P on (direct copies) or off (host-staged copies).
    """
    topo = load_topology(name, p2p=p2p)
    costs = load_costs(name)
    spec = Spec.for_topology(topo, regimes=costs.regimes if costs else None)
    return topo, spec, Params.load(spec, name, topo)


def save(path: str | os.PathLike, values: dict) -> None:
    """Writes a calibration file (Calibration.values() plus a 'topology' entry), or any JSON-able dict,
    atomically (readers never see half a file); non-finite numbers become null."""
    write_atomic(path, to_json(values, indent=1))
