"""Composition: chiplet packages in PCIe servers in a cluster; one link table, routes across every level."""

import re

import pytest
from topo_helpers import assert_valid_routes, node_path

import netsim
from netsim import ScenarioError
from netsim.topology import (
    chiplet_mesh,
    cluster,
    leaf_spine,
    load,
    mi300x,
    pcie_server,
    rail_optimized,
    with_packages,
)


@pytest.fixture(scope="module")
def server():
    return with_packages(pcie_server(4, sockets=1, gpus_per_switch=2, nics=2), mi300x())


@pytest.fixture(scope="module")
def big(server):
    return cluster(leaf_spine(2, 2, 4), server)  # 8 fabric endpoints / 2 NICs = 4 servers


def test_package_names_links_and_workers(server):
    assert server.gpus()[:2] == ("gpu0/xcd0", "gpu0/xcd1") and len(server.gpus()) == 32
    assert server.kind["gpu2"] == "gpu" and server.kind["gpu2/iod3"] == "iod"
    plain = pcie_server(4, sockets=1, gpus_per_switch=2, nics=2)
    assert len(server.links) == len(plain.links) + 4 * len(mi300x().links)
    assert "gpu1->gpu1/iod0" in server.link  # the package's host port is the server's GPU node
    with pytest.raises(ScenarioError, match="no 'host' port"):
        with_packages(plain, chiplet_mesh(2, 2))
    with pytest.raises(ScenarioError, match="'gpu9' is not a GPU"):
        with_packages(plain, {"gpu9": mi300x()})
    some = with_packages(plain, {"gpu1": mi300x()})
    assert some.gpus() == ("gpu0", *(f"gpu1/xcd{i}" for i in range(8)), "gpu2", "gpu3")


def test_route_crosses_every_level_in_order(big):
    route = big.route("n0/gpu0/xcd3", "n3/gpu3/xcd7")
    kinds = [big.kind[n] for n in node_path(big, route)]
    squeeze = [k for i, k in enumerate(kinds) if i == 0 or k != kinds[i - 1]]
    assert squeeze == [
        "xcd",
        "iod",
        "gpu",
        "switch",
        "nic",
        "leaf",
        "spine",
        "leaf",
        "nic",
        "switch",
        "gpu",
        "iod",
        "xcd",
    ]
    # the package's port links to every IO die: xcd3 leaves through its own die, iod1, not through iod0
    assert route[:2] == ("n0/gpu0/xcd3->n0/gpu0/iod1", "n0/gpu0/iod1->n0/gpu0")
    # inside one server, traffic stays in the server
    assert all(x.startswith("n1/") for x in big.route("n1/gpu0/xcd0", "n1/gpu3/xcd0"))
    assert_valid_routes(
        big,
        [
            ("n0/gpu0/xcd0", "n3/gpu3/xcd7"),
            ("n2/gpu1/hbm4", "n1/gpu2/xcd1"),
            ("n0/nic1", "n3/gpu0/xcd5"),
            ("n1/cpu0", "n2/mem0"),
        ],
    )


def test_multipath_is_the_product_of_the_levels(big):
    paths = big.paths("n0/gpu0/xcd0", "n3/gpu3/xcd0")
    assert len(paths) == 2 and [w for w, _ in paths] == [0.5, 0.5]  # two spines, single-path elsewhere
    flows = big.flows("f", "n0/gpu0/xcd0", "n3/gpu3/xcd0", 1000.0)
    assert sum(f.bytes for f in flows) == 1000.0 and len(flows) == 2


def test_nearest_nic_and_failover(big):
    # GPU 3 of server 0 sits under sw1 with nic1, so it leaves through nic1
    assert "n0/nic1->leaf0" in big.route("n0/gpu3/xcd0", "n3/gpu0/xcd0")
    cut = big.without_links(["n0/nic1->leaf0"])
    route = cut.route("n0/gpu3/xcd0", "n3/gpu0/xcd0")
    assert "n0/nic0->leaf0" in route and len(cut.links) == len(big.links) - 1
    dead = big.without_links(["n0/nic0->leaf0", "n0/nic1->leaf0"])
    with pytest.raises(ScenarioError, match="'n3/gpu0/xcd0' is unreachable from 'n0/gpu3/xcd0'"):
        dead.route("n0/gpu3/xcd0", "n3/gpu0/xcd0")
    assert dead.route("n0/gpu3/xcd0", "n0/gpu0/xcd0")  # inside the server nothing changed
    inbound = [b for a, b in dead.unreachable_pairs(["n0/gpu0/xcd0", "n1/gpu0/xcd0"]) if a == "n1/gpu0/xcd0"]
    assert inbound == []  # the links into server 0 still work


def test_rail_cluster_keeps_rails_and_staging():
    box = pcie_server(4, sockets=1, gpus_per_switch=1, nics=4)  # GPU i and NIC i share switch i
    rails = cluster(rail_optimized(2, 4, spines=1), box)
    assert rails.route("n0/gpu2", "n1/gpu2") == (
        "n0/gpu2->n0/sw2",
        "n0/sw2->n0/nic2",
        "n0/nic2->rail2",
        "rail2->n1/nic2",
        "n1/nic2->n1/sw2",
        "n1/sw2->n1/gpu2",
    )
    staged = cluster(rail_optimized(2, 4), pcie_server(4, sockets=1, gpus_per_switch=1, nics=4, p2p=False))
    route = staged.route("n0/gpu2", "n1/gpu2")
    assert {"n0/cpu0->n0/mem0", "n1/mem0->n1/cpu0"} <= set(route)  # no GPUDirect: both ends bounce in DRAM
    assert_valid_routes(staged, [("n0/gpu0", "n1/gpu3"), ("n1/gpu1", "n0/gpu1")])


def test_cluster_argument_errors():
    box = pcie_server(4, sockets=1, nics=3)
    with pytest.raises(ScenarioError, match="8 endpoints, not a multiple of the 3 NIC"):
        cluster(leaf_spine(2, 1, 4), box)
    with pytest.raises(ScenarioError, match="the servers have 6 NICs but fabric"):
        cluster(leaf_spine(2, 1, 4), [box, box])
    assert len(cluster(leaf_spine(2, 1, 3), [box, box]).gpus()) == 8


def _finish(topo, pairs):
    flows = [f for i, (a, b) in enumerate(pairs) for f in topo.flows(f"f{i}", a, b, 2**28)]
    return netsim.simulate(topo.scenario(flows)).makespan


def test_servers_keep_their_shared_resources_in_a_cluster():
    server = pcie_server(8, sockets=2, nics=2, shared=True)
    topo = cluster(leaf_spine(2, 2, 4), server)  # 8 endpoints / 2 NICs = 4 servers
    assert len(topo.shared) == 4 * len(server.shared)
    assert {r.id for r in topo.shared} >= {"n3/gpu7 staging", f"n2/{server.shared[0].id}"}
    assert all(x in topo.link for r in topo.shared for x in (*r.links, *r.via))
    # copies both ways across the socket cable share its two-way budget, in the cluster as in the server
    alone = _finish(server, [("gpu0", "gpu4"), ("gpu4", "gpu0")])
    within = _finish(topo, [("n1/gpu0", "n1/gpu4"), ("n1/gpu4", "n1/gpu0")])
    assert within == pytest.approx(alone, rel=1e-12)
    assert alone > _finish(pcie_server(8, sockets=2, nics=2), [("gpu0", "gpu4"), ("gpu4", "gpu0")])


def test_fabric_slash_server_spec_puts_servers_under_a_fabric():
    topo = load("leaf-spine:4,2,4/pcie:8,nics=2")  # 16 endpoints / 2 NICs = 8 servers of 8 GPUs
    assert topo.name == "leaf-spine:4,2,4/pcie:8,nics=2" and len(topo.gpus()) == 64
    assert topo.links == cluster(leaf_spine(4, 2, 4), load("pcie:8,nics=2")).links
    assert len(topo.shared) == 8 * len(load("pcie:8,nics=2").shared)
    assert node_path(topo, topo.route("n0/gpu0", "n7/gpu5"))[-2:] == ["n7/rc5", "n7/gpu5"]
    for bad, message in [
        ("dgx-a100:2/pcie:8", "servers go under a fat-tree:K or leaf-spine:L,S,H fabric, not 'dgx-a100'"),
        ("fat-tree:4/nope", "'fat-tree:4/nope': 'nope' is neither a preset"),
        ("leaf-spine:1,1,3/pcie:8,nics=2", "3 endpoints, not a multiple of the 2 NIC"),
        ("leaf-spine:0,1,3/pcie:8", "expected leaf-spine:L,S,H with whole numbers >= 1"),
    ]:
        with pytest.raises(ScenarioError, match=re.escape(message)):
            load(bad)
