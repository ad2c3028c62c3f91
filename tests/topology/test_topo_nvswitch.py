"""NVSwitch servers and DGX A100 clusters: the "dgx-a100[:N]" shapes every --topology takes, routes that
leave a server by the sending GPU's own NIC, and clusters sized from a GPU count."""

from __future__ import annotations

import pytest
from topo_helpers import assert_valid_routes, node_path

from netsim import ScenarioError
from netsim.topology import dgx_a100, load, nvswitch_server, sized_cluster
from netsim.topology._nvswitch import A100_NVSWITCH_PORT, HDR_NIC


def bottleneck(topo, route):
    return min(topo.link[x].bandwidth for x in route)


def test_one_server_is_a_star_of_gpu_ports_with_a_nic_each():
    topo = load("dgx-a100")
    assert topo.device == "A100" and topo.workers == tuple(f"gpu{i}" for i in range(8))
    assert node_path(topo, topo.route("gpu2", "gpu7")) == ["gpu2", "nvswitch", "gpu7"]
    assert bottleneck(topo, topo.route("gpu2", "gpu7")) == A100_NVSWITCH_PORT
    assert len(topo.links) == 2 * (8 + 8)
    assert_valid_routes(topo)
    assert nvswitch_server(4).gpus() == ("gpu0", "gpu1", "gpu2", "gpu3")


def test_cluster_shape_leaves_by_the_senders_own_nic():
    topo = load("dgx-a100:4")
    assert topo.name == "dgx-a100:4" and topo.device == "A100" and len(topo.workers) == 32
    assert topo.workers[8] == "n1/gpu0"
    route = topo.route("n0/gpu3", "n2/gpu5")
    assert node_path(topo, route)[:2] == ["n0/gpu3", "n0/nic3"]
    assert node_path(topo, route)[-2:] == ["n2/nic5", "n2/gpu5"]
    assert bottleneck(topo, route) == HDR_NIC
    assert "nvswitch" not in "".join(node_path(topo, route))  # no detour through the server's switch
    assert bottleneck(topo, topo.route("n3/gpu0", "n3/gpu1")) == A100_NVSWITCH_PORT
    assert_valid_routes(topo, [("n0/gpu0", "n3/gpu7"), ("n1/gpu4", "n1/gpu5"), ("n2/gpu6", "n0/gpu6")])


def test_sized_by_gpu_count_and_bad_shapes_are_clear_errors():
    assert sized_cluster("dgx-a100", 8).name == "dgx-a100"
    assert sized_cluster("dgx-a100", 9).name == "dgx-a100:2"
    assert len(sized_cluster("dgx-a100", 512).workers) == 512
    assert sized_cluster("leaf-spine", 8) is None
    assert dgx_a100(2).links == load("dgx-a100:2").links
    for bad in ("dgx-a100:0", "dgx-a100:x", "dgx-a100:2,3"):
        with pytest.raises(ScenarioError, match="expected dgx-a100:N with whole numbers >= 1"):
            load(bad)
