"""Chiplet meshes and tori: link counts, XY hop counts, bisection, presets, failures, argument checks."""

import dataclasses
import itertools

import numpy as np
import pytest
from topo_helpers import assert_valid_routes, node_path

import netsim
from netsim import ScenarioError
from netsim.topology import (
    bisection_bandwidth,
    chiplet_mesh,
    chiplet_torus,
    mi250x,
    mi250x_node,
    mi300x,
    min_cut,
    preset,
)

BW = 1e9


def rc(name, cols):
    i = int(name.removeprefix("xcd"))
    return divmod(i, cols)


@pytest.mark.parametrize(("rows", "cols"), [(1, 2), (2, 3), (4, 4), (3, 5)])
def test_mesh_link_count_and_xy_hops_are_manhattan(rows, cols):
    topo = chiplet_mesh(rows, cols, hbm="none")
    assert len(topo.links) == 2 * (rows * (cols - 1) + cols * (rows - 1))  # two directed links per cable
    for a, b in itertools.permutations(topo.gpus(), 2):
        (ra, ca), (rb, cb) = rc(a, cols), rc(b, cols)
        route = topo.route(a, b)
        assert len(route) == abs(ra - rb) + abs(ca - cb)
        coords = [rc(n, cols) for n in node_path(topo, route)]
        # dimension order: the column reaches its target before the row starts to change
        turn = next(i for i, (_, c) in enumerate(coords) if c == cb)
        assert all(r == ra for r, _ in coords[: turn + 1]) and all(c == cb for _, c in coords[turn:])


@pytest.mark.parametrize("k", [3, 4, 5])
def test_torus_link_count_and_hops_take_the_short_way(k):
    topo = chiplet_torus(k, k, hbm="none")
    assert len(topo.links) == 4 * k * k
    ring = lambda d: min(d % k, -d % k)
    for a, b in itertools.permutations(topo.gpus(), 2):
        (ra, ca), (rb, cb) = rc(a, k), rc(b, k)
        assert len(topo.route(a, b)) == ring(ra - rb) + ring(ca - cb)


def test_torus_tie_goes_towards_increasing_index():
    topo = chiplet_torus(4, 4, hbm="none")
    assert topo.route("xcd0", "xcd2") == ("xcd0->xcd1", "xcd1->xcd2")
    assert topo.route("xcd2", "xcd0") == ("xcd2->xcd3", "xcd3->xcd0")


@pytest.mark.parametrize("k", [2, 4, 6])
def test_bisection_closed_forms(k):
    # a k x k mesh cut between its middle rows crosses k links, a torus 2k (the wrap links too)
    assert bisection_bandwidth(chiplet_mesh(k, k, hbm="none", d2d_bandwidth=BW)) == k * BW
    if k >= 4:
        assert bisection_bandwidth(chiplet_torus(k, k, hbm="none", d2d_bandwidth=BW)) == 2 * k * BW
    # HBM stacks are dead ends: they change no cut
    assert bisection_bandwidth(chiplet_mesh(k, k, d2d_bandwidth=BW)) == k * BW


def test_attachments_link_counts_and_routes():
    topo = chiplet_mesh(3, 4, hbm="edges", io_dies=2, host_bandwidth="64 GB/s")
    assert topo.nodes_of("hbm") == tuple(f"hbm{i}" for i in range(6))
    assert len(topo.links) == 2 * (17 + 6 + 2 + 2)  # mesh cables, HBM, IO dies, host port to both IO dies
    assert topo.route("xcd0", "hbm5") == (
        "xcd0->xcd1",
        "xcd1->xcd2",
        "xcd2->xcd3",
        "xcd3->xcd7",
        "xcd7->xcd11",
        "xcd11->hbm5",
    )
    assert topo.kind["host"] == "port" and topo.link["host->iod0"].bandwidth == 64e9
    assert_valid_routes(topo, [("host", "hbm0"), ("hbm3", "host"), ("hbm0", "hbm5"), ("iod1", "xcd8")])


def test_memory_and_die_to_die_traffic_share_links():
    topo = mi300x()
    to_far_hbm, to_far_xcd = set(topo.route("xcd0", "hbm7")), set(topo.route("xcd0", "xcd7"))
    assert {"iod0->iod1", "iod1->iod3"} <= to_far_hbm & to_far_xcd


def test_mi300x_shape_and_cited_figures():
    topo = mi300x()
    assert (
        len(topo.nodes_of("xcd")) == 8 and len(topo.nodes_of("iod")) == 4 and len(topo.nodes_of("hbm")) == 8
    )
    assert topo.gpus() == tuple(f"xcd{i}" for i in range(8))
    assert len(topo.links) == 2 * (4 + 8 + 8 + 4)  # 2x2 IOD mesh, XCDs, HBM stacks, host port to each IOD
    assert topo.route("xcd0", "hbm1") == ("xcd0->iod0", "iod0->hbm1")  # local stack: no IO-die crossing
    assert len(topo.route("xcd0", "hbm7")) == 4  # diagonal IO die: two mesh hops
    assert topo.link["iod0->hbm0"].bandwidth == 662.5e9  # 5.3 TB/s / 8
    assert topo.link["host->iod0"].bandwidth == 64e9
    assert preset("mi300x").links == topo.links


def test_mi250x_package_and_node():
    pkg = mi250x()
    assert pkg.link["gcd0->gcd1"].bandwidth == 200e9 and pkg.gpus() == ("gcd0", "gcd1")
    assert pkg.route("gcd0", "gcd1") == ("gcd0->gcd1",)  # not through the host port
    assert pkg.route("host", "hbm5") == ("host->gcd1", "gcd1->hbm5")  # each GCD has its own host link
    node = mi250x_node()
    assert len(node.gpus()) == 8
    assert node.route("p0/gcd0", "p0/gcd1") == ("p0/gcd0->p0/gcd1",)
    between = {x.bandwidth for x in node.links if x.src.split("/")[0] != x.dst.split("/")[0]}
    assert between == {50e9, 100e9}  # package to package, csv row "GCD (different MI250X)"
    assert_valid_routes(node)


def test_failed_link_falls_back_to_yx_then_any_path():
    topo = chiplet_mesh(2, 2, hbm="none")
    assert topo.route("xcd0", "xcd3") == ("xcd0->xcd1", "xcd1->xcd3")
    cut = topo.without_links(["xcd0->xcd1"])
    assert cut.route("xcd0", "xcd3") == ("xcd0->xcd2", "xcd2->xcd3")  # YX
    assert cut.route("xcd0", "xcd1") == ("xcd0->xcd2", "xcd2->xcd3", "xcd3->xcd1")
    isolated = topo.without_links(["xcd0->xcd1", "xcd0->xcd2"])
    assert isolated.unreachable_pairs() == [("xcd0", f"xcd{i}") for i in (1, 2, 3)]
    with pytest.raises(ScenarioError, match="'xcd3' is unreachable from 'xcd0'"):
        isolated.route("xcd0", "xcd3")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(rows=0, cols=2), "rows: expected an integer >= 1, got 0"),
        (dict(rows=1, cols=1), "at least 2 chiplets"),
        (dict(rows=2.5, cols=2), "rows: expected an integer >= 1, got 2.5"),
        (dict(rows=2, cols=2, hbm="top"), "hbm: unknown value 'top'"),
        (dict(rows=2, cols=2, d2d_bandwidth=-1), "d2d_bandwidth: must be > 0, got -1"),
        (dict(rows=2, cols=2, d2d_bandwidth="fast"), "d2d_bandwidth: cannot read 'fast'"),
        (dict(rows=2, cols=2, hbm_bandwidth="3 us"), "hbm_bandwidth: unknown bandwidth unit"),
        (dict(rows=2, cols=2, d2d_latency=-1e-9), "d2d_latency: must be >= 0, got -1e-09"),
        (dict(rows=2, cols=2, io_dies=3), "io_dies: at most cols=2"),
        (dict(rows=2, cols=2, torus="yes"), "torus: expected True or False"),
    ],
)
def test_mesh_argument_errors(kwargs, message):
    with pytest.raises(ScenarioError, match=message):
        chiplet_mesh(**kwargs)


def test_unit_strings_are_accepted():
    topo = chiplet_mesh(1, 2, hbm="none", d2d_bandwidth="400 Gbps", d2d_latency="20 ns")
    assert topo.link["xcd0->xcd1"].bandwidth == 50e9 and topo.link["xcd0->xcd1"].latency == 20e-9


def test_bisection_is_the_least_balanced_cut():
    # a 2 x 8 mesh: cutting its middle column crosses 2 links, its rows 8 (the first-half split's answer)
    mesh = chiplet_mesh(2, 8, d2d_bandwidth=BW)
    assert bisection_bandwidth(mesh) == 2 * BW
    assert bisection_bandwidth(mesh, half=mesh.gpus()[:8]) == 8 * BW
    # a ring of 8 (a 1 x 8 torus): any balanced split cuts it twice
    assert bisection_bandwidth(chiplet_torus(1, 8, hbm="none", d2d_bandwidth=BW)) == 2 * BW
    # a 3 x 3 mesh, 4 against 5 workers: no balanced split crosses fewer than 4 links
    assert bisection_bandwidth(chiplet_mesh(3, 3, hbm="none", d2d_bandwidth=BW)) == 4 * BW


def _reweighted(topo, seed: int, symmetric: bool):
    rng = np.random.default_rng(seed)
    bws = {}
    links = []
    for x in topo.links:
        key = tuple(sorted((x.src, x.dst))) if symmetric else (x.src, x.dst)
        bws.setdefault(key, float(rng.choice([1.0, 2.0, 3.0, 5.0])) * BW)
        links.append(dataclasses.replace(x, bandwidth=bws[key]))
    return dataclasses.replace(topo, links=tuple(links))


@pytest.mark.parametrize("seed", range(4))
def test_bisection_matches_brute_force_on_small_fabrics(seed):
    # branch and bound against every balanced split's max-flow, both ways (min_cut: an independent count)
    for base in (
        chiplet_mesh(2, 4, hbm="none"),
        chiplet_mesh(3, 3, hbm="edges"),
        chiplet_torus(1, 7, hbm="none"),
    ):
        for symmetric in (True, False):
            topo = _reweighted(base, seed, symmetric)
            workers = topo.gpus()
            brute = min(
                min(min_cut(topo, a, b)[0], min_cut(topo, b, a)[0])
                for a in itertools.combinations(workers, len(workers) // 2)
                for b in [[w for w in workers if w not in a]]
            )
            assert bisection_bandwidth(topo) == pytest.approx(brute, rel=1e-12)


def test_mi300x_small_read_queues_behind_background_load():
    # a 64 B read from hbm1 by xcd0 (the data's way): HBM link 100 ns + XCD link 5 ns when idle;
    # behind a bulk read of the same stack by xcd1 (which saturates hbm1 -> iod0) it also waits that
    # link's 4 KiB buffer drain time, 4096 / 662.5 GB/s
    topo = mi300x()
    probe = netsim.Flow("probe", "hbm1", "xcd0", 64.0, start=1e-6)
    bulk = netsim.Flow("bulk", "hbm1", "xcd1", 64e6)
    idle = netsim.simulate(topo.scenario([probe])).flow("probe")
    loaded = netsim.simulate(topo.scenario([bulk, probe])).flow("probe")
    assert idle.first_byte == pytest.approx(1e-6 + 105e-9, rel=1e-12)
    assert loaded.first_byte - idle.first_byte == pytest.approx(4096 / 662.5e9, rel=1e-9)
    # the host port enters at the destination's own IO die
    assert topo.route("host", "xcd5") == ("host->iod2", "iod2->xcd5")
    # the package before latencies and packets
    plain = mi300x(latency_d2d=0.0, packets=False)
    assert all(x.latency == 0.0 and x.packet_bytes is None for x in plain.links)


def test_chiplet_mesh_packets_on_request():
    assert all(x.packet_bytes is None for x in chiplet_mesh(2, 2).links)
    topo = chiplet_mesh(2, 2, io_dies=1, host_bandwidth="64 GB/s", packets=True)
    assert {x.packet_bytes for x in topo.links if "host" not in x.id} == {64.0}
    assert {x.packet_bytes for x in topo.links if "host" in x.id} == {None}
