"""Cluster fabrics: link counts, ECMP splits and hashing, fat-tree hop bounds, oversubscription, failures."""

import itertools

import pytest
from topo_helpers import assert_valid_routes, node_path

from netsim import ScenarioError
from netsim.topology import (
    bisection_bandwidth,
    fat_tree,
    leaf_spine,
    min_cut,
    oversubscription_ratio,
    rail_optimized,
)

BW = 1e9


@pytest.mark.parametrize(("leaves", "spines", "per_leaf"), [(2, 2, 2), (4, 3, 4), (3, 4, 1)])
def test_leaf_spine_counts_and_ecmp_split(leaves, spines, per_leaf):
    topo = leaf_spine(leaves, spines, per_leaf, host_bandwidth=BW)
    hosts = leaves * per_leaf
    assert len(topo.gpus()) == hosts and len(topo.links) == 2 * (hosts + leaves * spines)
    for a, b in itertools.permutations(topo.gpus(), 2):
        paths = topo.paths(a, b)
        same_leaf = int(a[1:]) // per_leaf == int(b[1:]) // per_leaf
        assert len(paths) == (1 if same_leaf else spines)
        assert all(len(p) == (2 if same_leaf else 4) for _, p in paths)
        assert {w for w, _ in paths} == {1.0 / len(paths)}  # exactly equal shares
        assert len({p for _, p in paths}) == len(paths)
    assert_valid_routes(topo)


@pytest.mark.parametrize("ratio", [1.0, 2.0, 3.0])
def test_oversubscription(ratio):
    topo = leaf_spine(3, 2, 6, host_bandwidth=BW, oversubscription=ratio)
    assert topo.link["leaf0->spine1"].bandwidth == pytest.approx(6 * BW / (2 * ratio), rel=1e-15)
    assert oversubscription_ratio(topo, "leaf2") == pytest.approx(ratio, rel=1e-12)
    # the leaf's uplinks bound what its hosts can send off the leaf: min cut = uplink capacity
    off = [f"h{i}" for i in range(6, 18)]
    assert min_cut(topo, [f"h{i}" for i in range(6)], off)[0] == pytest.approx(6 * BW / ratio)
    explicit = leaf_spine(3, 2, 6, host_bandwidth=BW, uplink_bandwidth=BW)
    assert oversubscription_ratio(explicit, "leaf0") == 3.0


@pytest.mark.parametrize("k", [2, 4, 6])
def test_fat_tree_counts_hops_and_path_multiplicity(k):
    topo = fat_tree(k, link_bandwidth=BW)
    h = k // 2
    assert len(topo.gpus()) == k**3 // 4
    assert (
        len(topo.nodes_of("edge")) == len(topo.nodes_of("agg")) == k * h
        and len(topo.nodes_of("core")) == h * h
    )
    assert len(topo.links) == 2 * 3 * k**3 // 4
    pod = lambda host: int(host[1:]) // (h * h)
    edge = lambda host: int(host[1:]) // h
    hops = []
    for a, b in itertools.permutations(topo.gpus()[: 2 * h * h], 2):  # two pods: every kind of pair
        paths = topo.paths(a, b)
        if edge(a) == edge(b):
            expect = (1, 2)
        elif pod(a) == pod(b):
            expect = (h, 4)
        else:
            expect = (h * h, 6)
        assert (len(paths), len(paths[0][1])) == expect
        assert len({w for w, _ in paths}) == 1 and sum(w for w, _ in paths) == pytest.approx(1.0, abs=1e-15)
        hops.append(len(topo.route(a, b)))
    assert max(hops) == 6  # host-edge-agg-core-agg-edge-host


@pytest.mark.parametrize("k", [4, 6])
def test_fat_tree_full_bisection(k):
    assert bisection_bandwidth(fat_tree(k, link_bandwidth=BW)) == pytest.approx(k**3 / 8 * BW, rel=1e-12)


def test_hashed_route_is_deterministic_one_of_the_paths_and_spreads():
    topo, again = leaf_spine(2, 4, 8), leaf_spine(2, 4, 8)
    used = set()
    for a in range(8):
        for b in range(8, 16):
            route = topo.route(f"h{a}", f"h{b}")
            assert route == again.route(f"h{a}", f"h{b}")
            assert route in [p for _, p in topo.paths(f"h{a}", f"h{b}")]
            used.add(route[1])
    assert used == {f"leaf0->spine{k}" for k in range(4)}  # 64 pairs hash onto every spine


def test_failures_resplit_and_report_unreachable_pairs():
    topo = leaf_spine(2, 2, 2)
    cut = topo.without_links(["leaf0->spine0"])
    assert cut.paths("h0", "h2") == [(1.0, ("h0->leaf0", "leaf0->spine1", "spine1->leaf1", "leaf1->h2"))]
    assert cut.paths("h2", "h0")[0][0] == 0.5  # the other direction still has both spines
    alone = topo.without_links(["h3->leaf1", "leaf1->h3"])
    assert alone.unreachable_pairs() == [(a, "h3") for a in ("h0", "h1", "h2")] + [
        ("h3", b) for b in ("h0", "h1", "h2")
    ]
    with pytest.raises(ScenarioError, match="'h3' is unreachable from 'h0'"):
        alone.route("h0", "h3")
    with pytest.raises(ScenarioError, match="unreachable"):
        alone.paths("h3", "h0")
    tree = fat_tree(4).without_links(["pod0/agg0->core0", "pod0/agg0->core1"])
    assert all("pod0/agg0" not in node_path(tree, p) for _, p in tree.paths("h0", "h15"))


def test_rail_optimized_same_rail_stays_on_its_leaf():
    topo = rail_optimized(4, 4, spines=2, nic_bandwidth=BW)
    assert len(topo.gpus()) == 16 and topo.gpus()[:2] == ("n0/nic0", "n0/nic1")
    assert len(topo.links) == 2 * (16 + 4 * 2)
    assert topo.route("n0/nic2", "n3/nic2") == ("n0/nic2->rail2", "rail2->n3/nic2")
    cross = topo.paths("n0/nic0", "n1/nic3")
    assert len(cross) == 2 and all(len(p) == 4 for _, p in cross)
    split = rail_optimized(4, 2, spines=1, servers_per_leaf=2)
    assert split.nodes_of("leaf") == ("rail0/leaf0", "rail0/leaf1", "rail1/leaf0", "rail1/leaf1")
    assert len(split.route("n0/nic0", "n3/nic0")) == 4  # same rail, other leaf: through the spine
    assert_valid_routes(split)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: fat_tree(3), "k: a k-ary fat-tree needs an even k, got 3"),
        (lambda: fat_tree(0), "k: expected an integer >= 2, got 0"),
        (lambda: leaf_spine(2, 2, 2, oversubscription=2, uplink_bandwidth=1e9), "not both"),
        (
            lambda: leaf_spine(2, 2, 2, oversubscription=0),
            "oversubscription: must be a finite number > 0, got 0",
        ),
        (lambda: leaf_spine(1, 1, 1), "at least 2 hosts"),
        (lambda: leaf_spine(2, 0, 2), "spines: expected an integer >= 1, got 0"),
        (lambda: leaf_spine(2, 2, 2, host_bandwidth="1 TB"), "host_bandwidth: unknown bandwidth unit"),
        (lambda: rail_optimized(1, 1), "at least 2 NICs"),
        (lambda: oversubscription_ratio(fat_tree(2), "core0"), "no upstream links"),
        (lambda: oversubscription_ratio(fat_tree(2), "h0"), "'h0' is not a switch"),
    ],
)
def test_cluster_argument_errors(build, message):
    with pytest.raises(ScenarioError, match=message):
        build()
