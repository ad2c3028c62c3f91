"""netsim.latency refuses bad input at the Python boundary, naming the field and the value: no silent NaN,
no ignored key, no raw NumPy, ZeroDivision or Memory error."""

import numpy as np
import pytest

import netsim.latency as nl
from netsim import NetsimError, cli

NAN, INF = float("nan"), float("inf")


def test_unknown_spec_field_is_refused():
    with pytest.raises(
        NetsimError, match=r"specs\[0\]: unknown field\(s\) \['packet_sise'\]; known: \[.*'packet_size'"
    ):
        nl.latency_curves([{"topology": "mesh:4x4", "packet_sise": 8}], rates=[0.1])
    with pytest.raises(NetsimError, match=r"specs\[1\]: no 'topology'"):
        nl.latency_curves([{"topology": "mesh:4x4"}, {"traffic": "uniform"}], rates=[0.1])


@pytest.mark.parametrize("weights", [(NAN, 1), (INF, 1), (-1, 1), (0, 0), (1,)])
def test_bad_hotspot_weights_are_refused(weights):
    with pytest.raises(NetsimError, match=r"hotspot weights must be 2 finite numbers > 0 .*weights=\("):
        nl.traffic_matrix("hotspot", 4, 2, hotspots=(0, 1), weights=weights)
    with pytest.raises(NetsimError, match="weights="):
        nl.shape_load("mesh:4x4", "hotspot", hotspots=(0, 1), weights=weights)


def test_duplicate_or_foreign_hot_node_is_refused():
    with pytest.raises(NetsimError, match=r"hotspot node 0 is named twice in \(0, 0\)"):
        nl.traffic_matrix("hotspot({{0,0}})", 4, 2)
    with pytest.raises(NetsimError, match=r"hotspot node 5 is named twice"):
        nl.traffic_matrix("hotspot", 4, 2, hotspots=(5, 1, 5))
    with pytest.raises(NetsimError, match=r"hotspot node 16 is not a node of 0..15"):
        nl.traffic_matrix("hotspot", 4, 2, hotspots=(16,))
    np.testing.assert_allclose(nl.traffic_matrix("hotspot", 4, 2, hotspots=(1, 0))[:, [0, 1]], 0.5)


@pytest.mark.parametrize("k, n, name", [(0, 2, "k=0"), (-3, 2, "k=-3"), (4, 0, "n=0"), (2.5, 2, "k=2.5")])
def test_traffic_matrix_refuses_a_shape_of_no_nodes(k, n, name):
    with pytest.raises(NetsimError, match=f"traffic: {name[0]} must be a whole number >= 1, got {name}"):
        nl.traffic_matrix("uniform", k, n)


def test_negative_randperm_seed_is_refused():
    with pytest.raises(NetsimError, match=r"randperm's seed must be a whole number >= 0, got seed=-1"):
        nl.latency_curve("mesh:4x4", "randperm(-1)", rates=[0.1])
    with pytest.raises(NetsimError, match="seed=-2"):
        nl.traffic_matrix("randperm", 4, 2, seed=-2)


def test_node_limit(capsys):
    assert nl.parse_shape("mesh:64x64").nodes == nl.MAX_NODES == nl.parse_shape("torus:16x16x16").nodes
    for text, nodes in (
        ("mesh:1000x1000", 1000000),
        ("torus:65x65", 4225),
        ("mesh:2x2x2x2x2x2x2x2x2x2x2x2x2", 8192),
    ):
        with pytest.raises(NetsimError, match=f"topology: '{text}' has {nodes} nodes, more than the 4096"):
            nl.parse_shape(text)
    with pytest.raises(NetsimError, match="k=1000, n=2 is 1000000 nodes, more than the 4096"):
        nl.traffic_matrix("uniform", 1000)
    assert cli.main(["latency", "--topology", "mesh:1000x1000", "--rates", "0.1"]) == 2
    err = capsys.readouterr().err
    assert "has 1000000 nodes, more than the 4096" in err and "internal error" not in err


@pytest.mark.parametrize("text", ["0.1,,0.2", "0.1,", ",0.1", "0.1, ,0.2"])
def test_cli_refuses_an_empty_rate(text, capsys):
    with pytest.raises(SystemExit):  # argparse refuses it
        cli.main(["latency", "--rates", text])
    assert f"argument --rates: empty item in {text!r}" in capsys.readouterr().err


@pytest.mark.parametrize("rates", [[[0.1, 0.2]], "0.1", "0.1,0.2", ["0.1"], 0.1, [[0.1], [0.2, 0.3]], [True]])
def test_rates_must_be_a_list_of_numbers(rates):
    with pytest.raises(NetsimError, match=r"^rates: must be a 1-D list of numbers, got "):
        nl.latency_curve("mesh:4x4", rates=rates)
    with pytest.raises(NetsimError, match=r"specs\[0\].rates: must be a 1-D list of numbers"):
        nl.latency_curves([{"topology": "mesh:4x4", "rates": rates}])
