"""The Topology object: validation, flows and scenarios, failures, and the max-flow helper."""

import itertools

import numpy as np
import pytest
from topo_helpers import assert_valid_routes

import netsim
from netsim import Flow, Link, ScenarioError
from netsim.topology import Topology, cable, chiplet_mesh, leaf_spine, min_cut, natural_key


def line():
    # a - s - b, plus c hanging off s: three hosts around one switch
    links = cable("a", "s", 10.0) + cable("s", "b", 10.0) + cable("c", "s", 5.0)
    return Topology("line", links, {"a": "host", "b": "host", "c": "host", "s": "switch"})


def test_nodes_kinds_and_natural_order():
    kind = {f"h{i}": "host" for i in (10, 2, 1)} | {"s": "switch"}
    topo = Topology("t", [x for i in (10, 2, 1) for x in cable(f"h{i}", "s", 1.0)], kind)
    assert topo.gpus() == ("h1", "h2", "h10")  # digit runs compare as numbers
    assert sorted(["n10/gpu2", "n2/gpu10", "n2/gpu9"], key=natural_key) == ["n2/gpu9", "n2/gpu10", "n10/gpu2"]
    assert set(topo.nodes) == set(kind)
    assert topo.nodes_of("switch") == ("s",)


def test_validation_names_the_problem():
    with pytest.raises(ScenarioError, match="duplicate link id 'a->s'"):
        Topology("t", cable("a", "s", 1.0) * 2, {"a": "host", "s": "switch"})
    with pytest.raises(ScenarioError, match="node 's' has no kind"):
        Topology("t", cable("a", "s", 1.0), {"a": "host"})
    with pytest.raises(ScenarioError, match=r"not a netsim\.Link"):
        Topology("t", [("a", "s")], {"a": "host", "s": "switch"})
    with pytest.raises(ScenarioError, match="unknown src node 'zz'"):
        line().route("zz", "a")
    with pytest.raises(ScenarioError, match="same node 'a'"):
        line().route("a", "a")


def test_route_via_is_the_two_legs():
    topo = line()
    assert topo.route("a", "b", via="c") == topo.route("a", "c") + topo.route("c", "b")
    assert topo.route("a", "b", via="c") == ("a->s", "s->c", "c->s", "s->b")


def test_flows_split_bytes_exactly_by_weight():
    topo = leaf_spine(2, 3, 1)  # 3 spines: 3 equal paths between the two hosts
    flows = topo.flows("x", "h0", "h1", 1e9 + 1, start=2.0, after=("t",))
    assert [f.id for f in flows] == ["x#0", "x#1", "x#2"]
    assert sum(f.bytes for f in flows) == 1e9 + 1  # exactly conserved, despite the 1/3 weights
    assert {f.route for f in flows} == {p for _, p in topo.paths("h0", "h1")}
    assert all(f.start == 2.0 and f.after == ("t",) for f in flows)
    single = line().flows("y", "a", "b", 7.0)
    assert single == [Flow("y", "a", "b", 7.0, route=("a->s", "s->b"))]


def test_scenario_routes_unrouted_flows_only():
    topo = line()
    given = ("a->s", "s->c", "c->s", "s->b")
    sc = topo.scenario(
        [Flow("f", "a", "b", 1.0), Flow("g", "a", "b", 1.0, route=given)], [netsim.Task("t", "a", 1.0)]
    )
    assert sc.flows[0].route == ("a->s", "s->b") and sc.flows[1].route == given
    assert sc.links == topo.links and sc.name == "line" and len(sc.tasks) == 1
    assert topo.scenario(name="other").name == "other"


def test_without_links_recomputes_and_names_unreachable_pairs():
    topo = line()
    cut = topo.without_links(["s->b"])
    assert len(cut.links) == len(topo.links) - 1 and len(topo.links) == 6  # the original is untouched
    assert cut.route("b", "a") == ("b->s", "s->a")
    with pytest.raises(ScenarioError, match="'b' is unreachable from 'a'"):
        cut.route("a", "b")
    assert cut.unreachable_pairs() == [("a", "b"), ("c", "b")]
    assert topo.unreachable_pairs() == []
    with pytest.raises(ScenarioError, match=r"unknown link id\(s\) \['nope'\]"):
        topo.without_links(["nope"])
    assert topo.without_links("s->b").unreachable_pairs() == cut.unreachable_pairs()  # one id as a string


def test_scaled_changes_matching_links_and_the_budgets_that_follow_them():
    budget = netsim.SharedResource("a<->s", 12.0, ("a->s", "s->a"))
    topo = Topology("t", line().links, line().kind, shared=(budget,))
    bw = lambda t: {x.id: x.bandwidth for x in t.links}
    cap = lambda t: {r.id: r.capacity for r in t.shared}
    both = topo.scaled("a->s", 2.0).scaled("s->a", 2.0)  # one pattern per direction: the budget stays
    assert bw(both)["a->s"] == bw(both)["s->a"] == 20.0 and cap(both)["a<->s"] == 12.0
    cable_ = topo.scaled("[as]->[as]", 0.5)  # the whole cable: its two-way budget follows
    assert topo.matching("[as]->[as]") == (("a->s", "s->a"), ("a<->s",))
    assert bw(cable_) == bw(topo) | {"a->s": 5.0, "s->a": 5.0} and cap(cable_)["a<->s"] == 6.0
    assert cap(topo)["a<->s"] == 12.0 and bw(topo)["a->s"] == 10.0  # the original is untouched
    named = topo.scaled("a<->s", 3.0)  # a budget by its own id: the links stay
    assert bw(named) == bw(topo) and cap(named)["a<->s"] == 36.0
    by_class = topo.scaled("pcie", 2.0)  # link_class of every link here (a switch)
    assert bw(by_class) == {k: 2 * v for k, v in bw(topo).items()} and cap(by_class)["a<->s"] == 24.0
    with pytest.raises(
        ScenarioError,
        match=r"nvlink=0\.7: matches no link id, link class or shared resource of 't' \(classes: pcie; ids such as a->s",
    ):
        topo.scaled("nvlink", 0.7)
    with pytest.raises(ScenarioError, match="must be > 0"):
        topo.scaled("a->s", 0.0)


def test_routes_are_valid_walks_on_a_mesh_with_memory():
    assert_valid_routes(chiplet_mesh(3, 3, hbm="edges", io_dies=2, host_bandwidth=1e9))


def brute_force_cut(links, sources, sinks, nodes):
    """Minimum over every node set S (sources in, sinks out) of the capacity leaving S."""
    free = [n for n in nodes if n not in sources and n not in sinks]
    best = float("inf")
    for r in range(len(free) + 1):
        for extra in itertools.combinations(free, r):
            side = set(sources) | set(extra)
            best = min(best, sum(x.bandwidth for x in links if x.src in side and x.dst not in side))
    return best


@pytest.mark.parametrize("seed", range(6))
def test_min_cut_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    nodes = [f"v{i}" for i in range(7)]
    links = [
        Link(f"v{i}->v{j}", f"v{i}", f"v{j}", float(rng.integers(1, 9)))
        for i in range(7)
        for j in range(7)
        if i != j and rng.random() < 0.4
    ]
    topo = Topology("r", links, dict.fromkeys(nodes, "switch"))
    value, cut = min_cut(topo, ["v0", "v1"], ["v6"])
    assert value == brute_force_cut(links, ["v0", "v1"], ["v6"], nodes)
    assert sum(topo.link[x].bandwidth for x in cut) == value  # the returned cut is a certificate


def test_min_cut_checks_its_arguments():
    topo = line()
    with pytest.raises(ScenarioError, match="sources is empty"):
        min_cut(topo, [], ["a"])
    with pytest.raises(ScenarioError, match="share"):
        min_cut(topo, ["a"], ["a"])
    with pytest.raises(ScenarioError, match="unknown node"):
        min_cut(topo, ["q"], ["a"])
    # c forwards nothing when only switches may forward: a -> b is limited by a's 10 B/s cable
    assert min_cut(topo, ["a", "c"], ["b"], through={"switch"})[0] == 10.0
