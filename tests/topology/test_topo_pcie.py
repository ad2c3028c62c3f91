"""PCIe servers: tree shape, path classes, host-staged copies through memory, presets, argument checks."""

import itertools

import pytest
from topo_helpers import assert_valid_routes, node_path

from netsim import ScenarioError
from netsim.topology import PRESETS, ServerPlan, build_server, path_kind, pcie_server, preset


def bottleneck(topo, route):
    return min(topo.link[x].bandwidth for x in route)


def test_switched_server_counts_and_path_classes():
    topo = pcie_server(8, sockets=2, gpus_per_switch=2, nics=4)
    assert len(topo.nodes) == 2 + 2 + 4 + 4 + 8 + 4  # cpu, mem, host bridges, switches, GPUs, NICs
    assert len(topo.links) == 2 * (2 + 1 + 4 + 4 + 8 + 4)
    assert path_kind(topo, "gpu0", "gpu1") == "PIX" and topo.route("gpu0", "gpu1") == (
        "gpu0->sw0",
        "sw0->gpu1",
    )
    assert path_kind(topo, "gpu0", "nic0") == "PIX"
    assert path_kind(topo, "gpu0", "gpu2") == "NODE"
    assert path_kind(topo, "gpu0", "gpu4") == "SYS" and "cpu0->cpu1" in topo.route("gpu0", "gpu4")
    assert_valid_routes(topo)


def test_root_port_server_and_numa_per_socket():
    topo = pcie_server(8, sockets=2, numa_per_socket=4)
    assert topo.nodes_of("socket") == ("socket0", "socket1") and len(topo.nodes_of("mem")) == 8
    # one GPU per NUMA node: every pair is SYS, as nvidia-smi prints for m01
    assert {path_kind(topo, a, b) for a, b in itertools.combinations(topo.gpus(), 2)} == {"SYS"}
    assert "socket0->socket1" not in topo.route("gpu0", "gpu3")
    assert "socket0->socket1" in topo.route("gpu0", "gpu4")
    assert topo.link["cpu0->mem0"].bandwidth == pytest.approx(204.8e9 / 4)  # the socket's DRAM over 4 nodes


def test_measured_defaults_bound_single_copies():
    topo = pcie_server(8, sockets=2)
    # m01: P2P writes 25.79 GB/s mean within a socket, 21.95 across
    assert bottleneck(topo, topo.route("gpu0", "gpu1")) == 25.8e9
    assert bottleneck(topo, topo.route("gpu0", "gpu5")) == 21.9e9


@pytest.mark.parametrize("gpus_per_switch", [0, 2])
def test_p2p_off_copies_are_staged_through_the_source_numa_memory(gpus_per_switch):
    on = pcie_server(8, sockets=2, gpus_per_switch=gpus_per_switch, nics=2)
    off = pcie_server(8, sockets=2, gpus_per_switch=gpus_per_switch, nics=2, p2p=False)
    for a, b in itertools.permutations(off.nodes_of("gpu") + off.nodes_of("nic"), 2):
        cpu = next(n for n in node_path(on, on.route(a, "mem0")) if on.kind[n] == "cpu")  # a's NUMA node
        home = "mem" + cpu[3:]
        route = off.route(a, b)
        assert route == off.route(a, home) + off.route(home, b)
        assert f"{cpu}->{home}" in route and f"{home}->{cpu}" in route  # written to DRAM, read back
        assert home not in node_path(on, on.route(a, b))  # with P2P the copy never touches memory
    assert off.route("gpu0", "mem1") == on.route("gpu0", "mem1")  # host copies are not staged twice
    assert_valid_routes(off)


def test_nvlink_bridges_carry_p2p_and_p2p_off_stages_every_pair():
    on = pcie_server(4, sockets=1, nvlink_pairs=12)
    off = pcie_server(4, sockets=1, nvlink_pairs=12, p2p=False)
    assert on.route("gpu0", "gpu1") == ("gpu0->gpu1",)
    for topo in (on, off):
        assert path_kind(topo, "gpu0", "gpu1") == "NV12"  # the hardware's kind, whatever the P2P mode
        assert topo.link["gpu0->gpu1"].bandwidth == pytest.approx(275.0e9)  # m08: NV12 P2P writes
    # P2P off turns off P2P over NVLink too (NCCL_P2P_DISABLE, P2P=Disabled copies): host-staged
    for b in ("gpu1", "gpu2"):
        assert "mem0" in node_path(off, off.route("gpu0", b)) and "gpu0->gpu1" not in off.route("gpu0", b)
    assert "gpu1" not in node_path(on, on.route("gpu0", "gpu3"))  # GPUs forward nothing


def test_via_goes_through_a_chosen_memory_node():
    topo = pcie_server(8, sockets=2)
    route = topo.route("gpu0", "gpu1", via="mem1")
    assert {"cpu1->mem1", "mem1->cpu1", "cpu0->cpu1", "cpu1->cpu0"} <= set(route)


def test_explicit_plan_with_nested_switches_gives_pxb_and_phb():
    plan = ServerPlan(
        sockets=1,
        numa=1,
        host_bridges={"rc0": 0, "rc1": 0},
        parent={
            "sw0": "rc0",
            "sw1": "sw0",
            "sw2": "sw0",
            "gpu0": "sw1",
            "gpu1": "sw2",
            "gpu2": "rc1",
            "nic0": "rc1",
        },
        devices={"gpu0": "gpu", "gpu1": "gpu", "gpu2": "gpu", "nic0": "nic"},
    )
    topo = build_server(plan)
    assert path_kind(topo, "gpu0", "gpu1") == "PXB"
    assert path_kind(topo, "gpu2", "nic0") == "PHB"
    assert path_kind(topo, "gpu0", "gpu2") == "NODE"


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_builds_with_valid_routes(name):
    topo = preset(name)
    assert topo.gpus()
    assert_valid_routes(topo)


def test_preset_figures_and_overrides():
    a100 = preset("a100-pcie-4x-nvlink-pairs")
    assert path_kind(a100, "gpu0", "gpu1") == "NV12" and path_kind(a100, "gpu0", "gpu2") == "SYS"
    assert bottleneck(a100, a100.route("gpu0", "gpu2")) == 21.6e9  # m08 P2P writes across pairs
    h100 = preset("h100-pcie-8x-nvlink-pairs")  # public figures: nccl-tests#194, nvbandwidth#24
    assert path_kind(h100, "gpu0", "gpu1") == "NV12" and path_kind(h100, "gpu0", "gpu4") == "SYS"
    assert bottleneck(h100, h100.route("gpu0", "gpu1")) == pytest.approx(116e9)  # 12 bridged links
    assert bottleneck(h100, h100.route("gpu0", "gpu2")) == 52.8e9  # Gen5 x16 within a socket
    assert h100.device == "H100 PCIe"
    titan = preset("titanrtx-8x-lambda")
    assert "mem0" in node_path(titan, titan.route("gpu0", "gpu1"))  # m09: P2P unsupported
    assert preset("pcie-8gpu", p2p=False).router.p2p is False
    with pytest.raises(ScenarioError, match="unknown preset 'dgx'; known: mi300x"):
        preset("dgx")


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: pcie_server(0), "gpus: expected an integer >= 1, got 0"),
        (lambda: pcie_server(4, sockets=0), "sockets: expected an integer >= 1, got 0"),
        (lambda: pcie_server(3, nvlink_pairs=4), "gpus must be even, got gpus=3"),
        (lambda: pcie_server(4, p2p="no"), "p2p: expected True or False"),
        (lambda: pcie_server(4, gpus_per_switch=-1), "gpus_per_switch: expected an integer >= 0, got -1"),
        (lambda: pcie_server(4, pcie_bandwidth=0), "pcie_bandwidth: must be > 0, got 0"),
        (lambda: pcie_server(4, socket_latency="1 GB"), "socket_latency: unknown time unit"),
        (lambda: pcie_server(4, bogus=1), "bogus"),
        (lambda: ServerPlan(2, 3, {}, {}, {}), "3 NUMA nodes cannot be split evenly over sockets=2"),
        (
            lambda: build_server(ServerPlan(1, 1, {"rc0": 0}, {"gpu0": "gpu9"}, {"gpu0": "gpu"})),
            "parent 'gpu9' is not a host bridge or switch",
        ),
    ],
)
def test_pcie_argument_errors(build, message):
    with pytest.raises((ScenarioError, TypeError), match=message):
        build()
