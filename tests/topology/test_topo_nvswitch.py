"""NVSwitch servers and DGX A100 / H100 clusters: the "dgx-a100[:N]" and "dgx-h100[:N]" shapes every
--topology takes, routes that leave a server by the sending GPU's own NIC, and clusters sized from a GPU
count."""

from __future__ import annotations

import pytest
from topo_helpers import assert_valid_routes, node_path

from netsim import ScenarioError, simulate
from netsim.topology import dgx_a100, dgx_h100, load, nvswitch_server, sized_cluster
from netsim.topology._nvswitch import A100_NVSWITCH_PORT, H100_NVSWITCH_PORT, HDR_NIC, NDR_NIC
from netsim.workloads import allreduce


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


def test_the_nics_bandwidth_is_an_option_of_the_shape():
    # ",nic=BW" on a counted or a GPU-sized shape: a cluster whose servers have 800 Gb/s in all, as vTrain's
    # measured one (its configs' inter_node_bandwidth), is "dgx-a100,nic=100Gbps"
    topo = load("dgx-a100:2,nic=12.5GB/s")  # a unit's slash is no FABRIC/SERVER spec
    route = topo.route("n0/gpu3", "n1/gpu3")
    assert bottleneck(topo, route) == HDR_NIC / 2 and topo.links == dgx_a100(2, nic_bandwidth=12.5e9).links
    assert bottleneck(topo, topo.route("n0/gpu0", "n0/gpu1")) == A100_NVSWITCH_PORT
    sized = sized_cluster("dgx-h100,nic=100Gbps", 17)
    assert sized.name == "dgx-h100:3" and sized.links == dgx_h100(3, nic_bandwidth=12.5e9).links
    for bad, message in [
        ("dgx-a100:2,nic=0", "'dgx-a100:2,nic=0': nic: must be > 0"),
        ("dgx-a100:2,speed=1GB/s", "unknown option 'speed=1GB/s'; dgx-a100 and dgx-h100 take nic=BANDWIDTH"),
        ("fat-tree:4,nic=100Gbps", "'fat-tree:4,nic=100Gbps': unknown option 'nic=100Gbps'"),
    ]:
        with pytest.raises(ScenarioError, match=message):
            load(bad)
    with pytest.raises(ScenarioError, match="'dgx-a100,nic=fast': nic: cannot read 'fast'"):
        sized_cluster("dgx-a100,nic=fast", 16)


def test_dgx_h100_is_the_same_shape_at_h100_figures():
    topo = load("dgx-h100")
    assert topo.device == "H100" and topo.name == "dgx-h100"
    assert bottleneck(topo, topo.route("gpu0", "gpu5")) == H100_NVSWITCH_PORT
    assert [x.id for x in topo.links] == [x.id for x in dgx_a100().links]
    big = load("dgx-h100:3")
    assert big.name == "dgx-h100:3" and big.device == "H100" and len(big.workers) == 24
    assert bottleneck(big, big.route("n0/gpu1", "n2/gpu1")) == NDR_NIC
    assert dgx_h100(3).links == big.links
    assert sized_cluster("dgx-h100", 17).name == "dgx-h100:3"
    with pytest.raises(ScenarioError, match="expected dgx-h100:N with whole numbers >= 1"):
        load("dgx-h100:0")


def test_dgx_h100_ring_allreduce_reaches_the_port_as_busbw():
    # a ring over 8 GPUs on one switch: each GPU sends 2 (n - 1) / n x S through its own port, so with no
    # software cost the busbw, 2 (n - 1) / n x S / time, is the port's bandwidth (NCCL's ~370 GB/s)
    n, size = 8, 2.0**30
    topo = load("dgx-h100")
    result = simulate(allreduce(topo.workers, size).scenario(topo))
    assert 2 * (n - 1) / n * size / result.makespan == pytest.approx(H100_NVSWITCH_PORT, rel=1e-9)
