"""Identifiability from the fit's Gauss-Newton curvature: a fit the data cannot pin says which parameters
are free and marks its error figures; a determined fit says nothing is free."""

import dataclasses

import numpy as np
from jax.flatten_util import ravel_pytree
from netsim.calibrate import (
    Params,
    Spec,
    collective_experiment,
    fit,
    identifiability,
    initial_values,
    p2p_experiment,
    parameter_names,
)

from netsim.topology import pcie_server

TOPO = pcie_server(4, sockets=2, shared=True)
SPEC = Spec.for_topology(TOPO)
START = Params.from_values(SPEC, initial_values(SPEC, TOPO))
FABRIC = {"log_latency": True, "log_shared": True}
SOFTWARE = {"log_inefficiency": [0], "log_launch": True}


def test_names_cover_every_flat_parameter():
    names = parameter_names(SPEC, START)
    assert len(names) == ravel_pytree(START)[0].shape[0] == len(set(names))
    assert "bandwidth[pcie]" in names and "threshold[LL->Simple]" in names and "shared[gpu0 staging]" in names


def test_one_collective_point_is_under_determined_and_says_so():
    """One size cannot pin five software parameters: four directions are free, and the report marks
    every error figure instead of printing a bare one."""
    one = collective_experiment(SPEC, TOPO, "all_reduce", TOPO.gpus(), [1 << 20], [1.2e-4])
    freeze = {**SOFTWARE, **FABRIC, "log_bandwidth": True}
    res = fit(START, [one], steps=3, freeze=freeze, progress=None)
    ident = identifiability(SPEC, [res], [1])
    assert ident.under_determined and ident.parameters == (5,)
    assert {"overhead[LL]", "threshold[LL->Simple]"} <= set(ident.free)
    assert "overhead[Simple]" in ident.fitted
    assert ident.summary().startswith("under-determined: free parameters")
    text = dataclasses.replace(res.report([one]), free=ident.free).summary()
    rows = text.splitlines()[1:-1]
    assert rows and all(row.count("%*") == 2 for row in rows)
    assert "under-determined: free parameters" in text.splitlines()[-1]


def test_copies_across_and_within_sockets_pin_both_link_figures():
    """Copies within a socket are held by PCIe, copies across by the socket link: both bandwidths are
    pinned (the fit moves only them)."""
    v = np.full((4, 4), 25e9)
    v[:2, 2:] = v[2:, :2] = 20e9
    np.fill_diagonal(v, 900e9)
    copies = p2p_experiment(SPEC, TOPO, "unidirectional", v)
    freeze = {**FABRIC, "log_copy_overhead": True}
    res = fit(START, [copies], steps=3, freeze=freeze, progress=None)
    ident = identifiability(SPEC, [res], [copies.n_points])
    assert set(ident.fitted) == {"bandwidth[pcie]", "bandwidth[socket]"}
    assert not ident.under_determined and ident.summary().startswith("identifiable")
