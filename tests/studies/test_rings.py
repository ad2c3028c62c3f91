"""Ring search on PCIe servers: fewest socket crossings, host staging where P2P is slow, ties where
every ring is equal, and the exhaustive optimum on a small server, all checked against closed forms
or independent simulations.

With zero latencies a ring AllReduce's busbw is exactly the bandwidth its busiest link gives each
flow crossing it (every step moves S/N on every hop at once): that is the closed form used below.
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest

import netsim
from netsim._routing import LinkGraph
from netsim.studies import crossings, search_rings
from netsim.topology import ServerPlan, Topology, build_server, cable, load, load_costs, preset
from netsim.workloads import allreduce

GB = 1e9
PAD = netsim.Shape(items=512, hops=16, after=4, resources=64)
PCIE, SOCKET = 25.8 * GB, 21.9 * GB
SIZE = 2**26


def alternating_server() -> Topology:
    """2 sockets, 4 PCIe switches of 2 GPUs; the GPUs are numbered alternately across the sockets
    (gpu0, gpu2, gpu4, gpu6 on socket 0), so the default ring 0..7 crosses the socket link 8 times."""
    bridges = {f"rc{s}": s % 2 for s in range(4)}
    parent = {f"sw{s}": f"rc{s}" for s in range(4)}
    for g in range(8):
        parent[f"gpu{g}"] = f"sw{g % 2 + 2 * (g // 4)}"
    plan = ServerPlan(
        sockets=2, numa=2, host_bridges=bridges, parent=parent, devices={f"gpu{g}": "gpu" for g in range(8)}
    )
    return build_server(plan, pcie_bandwidth=PCIE, socket_bandwidth=SOCKET, name="alternating")


def socket_links(topo: Topology) -> list[str]:
    return [x.id for x in topo.links if topo.kind[x.src] == topo.kind[x.dst] == "cpu"]


@pytest.fixture(scope="module")
def alternating():
    """The alternating server and its search at SIZE (shared: a search of 8 ranks takes seconds)."""
    topo = alternating_server()
    return topo, search_rings(topo, size=SIZE)


def test_search_crosses_the_socket_link_twice(alternating):
    topo, found = alternating
    best, default = found.best[0], found.default
    assert default.order == topo.gpus() and crossings(default, socket_links(topo)) == 8
    assert crossings(best, socket_links(topo)) == 2  # the minimum for a ring over both sockets
    # default: 4 hops share each direction of the socket link; best: 1 hop per direction, PCIe is faster
    assert default.busbw == pytest.approx(SOCKET / 4, rel=1e-9)
    assert best.busbw == pytest.approx(SOCKET, rel=1e-9)
    assert found.gain == pytest.approx(4.0, rel=1e-9)
    assert len({tuple(p.order) for p in found.best}) == len(found.best)


@dataclasses.dataclass(frozen=True)
class SlowPeerAcrossSockets:
    """GPU-to-GPU (P2P) traffic crosses sockets through the slow `p2p*` forwarding links; traffic to
    and from memory takes the socket link: so host staging is the fast way across."""

    def route(self, topo, src, dst):
        banned = "sock" if topo.kind[src] == topo.kind[dst] == "gpu" else "p2p"
        return LinkGraph([x for x in topo.links if not x.id.startswith(banned)]).shortest_path(src, dst)

    def paths(self, topo, src, dst):
        return [(1.0, self.route(topo, src, dst))]

    def without(self, link_ids):
        return self


def slow_p2p_server(p2p=6 * GB, socket=20 * GB, pcie=25 * GB, memory=200 * GB) -> Topology:
    kind = {"cpu0": "cpu", "cpu1": "cpu", "mem0": "mem", "mem1": "mem"}
    links = [*cable("cpu0", "mem0", memory), *cable("cpu1", "mem1", memory)]
    for prefix, bw in (("sock", socket), ("p2p", p2p)):
        links += [dataclasses.replace(x, id=prefix + x.id) for x in cable("cpu0", "cpu1", bw)]
    for s in range(4):
        kind[f"sw{s}"] = "switch"
        links += cable(f"sw{s}", f"cpu{s % 2}", pcie)
    for g in range(8):
        kind[f"gpu{g}"] = "gpu"
        links += cable(f"gpu{g}", f"sw{g % 2 + 2 * (g // 4)}", pcie)
    return Topology("slow-p2p", tuple(links), kind, SlowPeerAcrossSockets())


def test_search_stages_slow_peer_hops_through_memory():
    topo = slow_p2p_server()
    staged = search_rings(topo, size=SIZE)
    direct = search_rings(topo, size=SIZE, vias=())
    best = staged.best[0]
    sock = [x.id for x in topo.links if x.id.startswith("sock")]
    # the two socket crossings are staged through a memory node; the other hops stay direct
    assert crossings(best, sock) == 2
    assert all(
        (via is not None) == bool(set(hop) & set(sock)) for via, hop in zip(best.vias, best.hops, strict=True)
    )
    assert {v for v in best.vias if v} <= {"mem0", "mem1"}
    assert best.busbw == pytest.approx(20 * GB, rel=1e-9)  # the socket link, one staged hop per direction
    assert direct.best[0].busbw == pytest.approx(6 * GB, rel=1e-9)  # the P2P links at best


def test_search_ties_the_default_when_all_rings_are_equal():
    # one switch: every ring uses each GPU's up and down link once, so every ring is equal
    topo = preset("pcie-4gpu-switch")
    found = search_rings(topo, size=SIZE)
    assert found.best[0].busbw == pytest.approx(found.default.busbw, rel=1e-9)
    assert found.best[0].order == found.default.order  # a tie keeps the default
    assert found.default.busbw == pytest.approx(topo.link["gpu0->sw0"].bandwidth, rel=1e-9)


def test_small_search_finds_the_exhaustive_optimum():
    # 4 ranks: (n-1)! = 6 orders, all probed; the reference simulates every order's AllReduce itself
    topo = alternating_server()
    ranks = ["gpu0", "gpu1", "gpu2", "gpu3"]
    found = search_rings(topo, ranks, size=SIZE, vias=())
    times = []
    for rest in itertools.permutations(ranks[1:]):
        order = [ranks[0], *rest]
        compiled = netsim.compile_scenario(allreduce(ranks, SIZE, rings=[order]).scenario(topo), shape=PAD)
        times.append(netsim.simulate(compiled, max_events=PAD.max_events).makespan)
    assert found.best[0].time == pytest.approx(min(times), rel=1e-9)
    assert found.default.time == pytest.approx(times[0], rel=1e-9)
    assert min(times) < times[0]  # the default order 0, 1, 2, 3 crosses 4 times: not optimal


def test_step_overhead_scores_rings_as_simulate_does(alternating):
    # The search scores each ring with the AllReduce a user then builds from the plan: with a step
    # overhead, its time and busbw are exactly netsim.simulate's for that collective. The overhead costs
    # at most once per step, 2(n - 1) in all (less where a hop off the bottleneck link has slack).
    topo, plain = alternating
    found = search_rings(topo, size=SIZE, step_overhead="2 us")
    for plan, base in ((found.best[0], plain.best[0]), (found.default, plain.default)):
        c = plan.allreduce(SIZE, step_overhead=2e-6)
        t = netsim.simulate(c.scenario(topo)).makespan
        assert plan.time == pytest.approx(t, rel=1e-12)
        assert plan.busbw == pytest.approx(c.busbw(t), rel=1e-12)
        assert base.time < plan.time <= base.time + 2 * 7 * 2e-6 * (1 + 1e-9)
    assert found.best[0].order == plain.best[0].order


def test_calibrated_topology_scores_rings_with_its_fitted_costs():
    # Given a calibrated machine's fitted software costs, the search applies them as the collective
    # builders do, so a plan's busbw is what simulating its AllReduce on the machine gives.
    topo, costs = load("rtx4090-8x-epyc7542"), load_costs("rtx4090-8x-epyc7542")
    ranks = ["gpu0", "gpu1", "gpu4", "gpu5"]  # two per socket: the ring order decides the crossings
    found = search_rings(topo, ranks, size="16 MiB", costs=costs)
    for plan in (found.best[0], found.default):
        c = plan.allreduce("16 MiB", ranks=ranks)
        t = netsim.simulate(c.scenario(topo, costs)).makespan
        assert plan.time == pytest.approx(t, rel=1e-12)
        assert plan.busbw == pytest.approx(c.busbw(t), rel=1e-12)
    bare = search_rings(topo, ranks, size="16 MiB", costs=costs, step_overhead=0.0)  # link figures only
    assert bare.best[0].time < found.best[0].time


def test_crossings_match_whole_link_ids(alternating):
    topo, found = alternating
    best = found.best[0]
    sockets = socket_links(topo)
    assert sorted(sockets) == ["cpu0->cpu1", "cpu1->cpu0"]
    # one id alone is one id, not its characters; each direction is crossed once
    assert crossings(best, "cpu0->cpu1") == crossings(best, ["cpu0->cpu1"]) == 1
    assert crossings(best, sockets) == 2
    # no patterns, no prefixes: only whole ids match
    assert crossings(best, "cpu*") == crossings(best, ["cpu0"]) == crossings(best, []) == 0
    with pytest.raises(netsim.ScenarioError, match="links"):
        crossings(best, [3])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"ranks": ["gpu0"]}, "ranks"),
        ({"size": 0.0}, "size"),
        ({"top": 0}, "top"),
        ({"vias": ["nowhere"]}, "vias"),
        ({"step_overhead": "-1 us"}, "step_overhead"),
        ({"slots": 0}, "slots"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(netsim.ScenarioError, match=match):
        search_rings(preset("pcie-4gpu-switch"), **kwargs)
