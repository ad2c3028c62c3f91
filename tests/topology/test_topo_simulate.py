"""Topologies under the engine: all-to-all on a mesh meets the bisection bound, staged copies share host
memory, and every examples/topo_*.json simulates. All runs share one padded shape: JAX compiles once."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

import netsim
from netsim import Flow
from netsim.topology import bisection_bandwidth, chiplet_mesh, chiplet_torus, pcie_server

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PAD = netsim.Shape(items=256, hops=16, after=2, resources=256)
BW, B = 1e9, 1e6


def run(scenario):
    return netsim.simulate(netsim.compile_scenario(scenario, shape=PAD))


def link_load(scenario):
    """Bytes each link must carry: the sum over flows of their bytes on every link of their route."""
    load = dict.fromkeys((x.id for x in scenario.links), 0.0)
    for f in scenario.flows:
        for lid in f.route:
            load[lid] += f.bytes
    return load


def all_to_all(topo):
    return topo.scenario([Flow(f"{a}>{b}", a, b, B) for a in topo.gpus() for b in topo.gpus() if a != b])


def test_mesh_all_to_all_meets_the_bisection_bound():
    topo = chiplet_mesh(4, 4, hbm="none", d2d_bandwidth=BW)
    scenario = all_to_all(topo)
    result = run(scenario)
    n = len(topo.gpus())
    bound = (n / 2) * (n / 2) * B / bisection_bandwidth(topo)  # bytes that must cross the cut / its capacity
    assert bound == pytest.approx(16 * B / BW)  # k^3 B / (4 k BW) for k = 4, by hand
    assert result.makespan == pytest.approx(bound, rel=1e-9)
    load = link_load(scenario)
    np.testing.assert_allclose(
        result.link_bytes, [load[x] for x in result.link_ids], rtol=1e-9
    )  # conservation


def test_torus_all_to_all_is_held_back_by_xy_ties():
    # 4-ring: distance-2 traffic always goes the + way, so a + link carries the distance-1 flows of one source
    # and the distance-2 flows of two: 3 column pairs x 4 destination rows x B = 12 B, against a
    # bisection bound of 8 B (2k links for N^2 B / 4)
    topo = chiplet_torus(4, 4, hbm="none", d2d_bandwidth=BW)
    scenario = all_to_all(topo)
    result = run(scenario)
    assert max(link_load(scenario).values()) == 12 * B
    assert result.makespan == pytest.approx(12 * B / BW, rel=1e-9)
    assert (len(topo.gpus()) / 2) ** 2 * B / bisection_bandwidth(topo) == pytest.approx(8 * B / BW)


def test_staged_copies_share_host_memory():
    # P2P off: gpu0->gpu1 and gpu2->gpu3 both bounce through mem0; its 10 GB/s write side is shared, so
    # each copy runs at 5 GB/s (PCIe links are 25.8 GB/s), carrying bytes / the staging efficiency
    # after the staged overhead (netsim's default copy costs: cudaMemcpy's bounce)
    costs = netsim.CostModel.default().to_values()
    topo = pcie_server(4, sockets=1, p2p=False, memory_bandwidth=10e9)
    result = run(topo.scenario([Flow("a", "gpu0", "gpu1", 1e8), Flow("b", "gpu2", "gpu3", 1e8)]))
    want = costs["staged_overhead"] + 1e8 / costs["staged_efficiency"] / 5e9
    assert result.makespan == pytest.approx(want, rel=1e-9)
    p2p = run(pcie_server(4, sockets=1, memory_bandwidth=10e9).scenario([Flow("a", "gpu0", "gpu1", 1e8)]))
    assert p2p.makespan == pytest.approx(1e8 / 25.8e9, rel=1e-9)


def test_examples_are_current():
    spec = importlib.util.spec_from_file_location(
        "make_topology_examples", EXAMPLES / "make_topology_examples.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    docs = module.documents()
    assert docs and {p.name for p in EXAMPLES.glob("topo_*.json")} == set(docs)
    for file, doc in docs.items():
        assert json.loads((EXAMPLES / file).read_text()) == json.loads(json.dumps(doc)), (
            f"{file} is stale: run python examples/make_topology_examples.py"
        )


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("topo_*.json")), ids=lambda p: p.name)
def test_example_simulates(path):
    scenario = netsim.Scenario.load(path)
    result = run(scenario)
    assert np.all(np.isfinite(result.flow_finish)) and np.all(result.flow_finish > result.flow_start)
    assert 0 < result.makespan < 1.0
    load = link_load(scenario)
    np.testing.assert_allclose(result.link_bytes, [load[x] for x in result.link_ids], rtol=1e-9)
