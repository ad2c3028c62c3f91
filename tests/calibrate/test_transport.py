"""Transports as scenario pieces (calibrate/transport.py): routes, budgets and closed-form times.

Tiny server: 2 sockets of one NUMA node each; GPUs 0, 1 on socket 0 and 2, 3 on socket 1, each on its
own host bridge; NVLink bridges 0-1 and 2-3. Figures are chosen so that each case has one bottleneck.
"""

import dataclasses

import numpy as np
import pytest
from netsim.calibrate import transport as T

import netsim
from netsim.topology import SM_HOST_GAIN
from netsim.workloads import allreduce

GB = 1e9
PCIE, SOCKET, MEMORY, NVLINK = 10 * GB, 8 * GB, 100 * GB, 50 * GB
B = 1e8  # bytes per copy
SHAPE = netsim.Shape(items=8, hops=16, after=2, resources=64)  # one compile for every case here


@pytest.fixture(scope="module")
def topo():
    return netsim.topology.pcie_server(
        4,
        sockets=2,
        nvlink_pairs=1,
        pcie_bandwidth=PCIE,
        socket_bandwidth=SOCKET,
        memory_bandwidth=MEMORY,
        nvlink_bandwidth=NVLINK,
    )


def makespans(*scenarios) -> np.ndarray:
    return netsim.compile_batch(scenarios, shape=SHAPE).run(width=4)["makespan"]  # one compile for all


def test_shm_ring_step_routes(topo):
    """A ring step through NCCL's SHM buffer: sender PCIe up, the receiver's memory (written, then
    read), receiver PCIe down; the socket link only across sockets; never NVLink."""
    work = allreduce(["gpu0", "gpu1", "gpu2", "gpu3"], 4 * B).workload
    scenario = T.shm_scenario(topo, work)
    compiled = netsim.compile_scenario(scenario)
    for flow, hops in zip(scenario.flows, compiled.hops, strict=True):
        mem = T.home_memory(topo, flow.dst)
        assert flow.route[0].startswith(f"{flow.src}->rc")  # leaves the sender over PCIe
        assert flow.route[-1].endswith(f"->{flow.dst}")
        assert f"cpu{mem[3:]}->{mem}" in flow.route and f"{mem}->cpu{mem[3:]}" in flow.route
        crosses_socket = {"cpu0->cpu1", "cpu1->cpu0"} & set(flow.route)
        assert bool(crosses_socket) == (topo.gpus().index(flow.src) // 2 != topo.gpus().index(flow.dst) // 2)
        assert not any(
            topo.kind[topo.link[x].src] == "gpu" == topo.kind[topo.link[x].dst] for x in flow.route
        )
        assert f"{mem} dram" in hops and not any(h.endswith("staging") for h in hops)
    assert T.home_memory(topo, "gpu2") == "mem1" and T.home_memory(topo, "gpu0") == "mem0"


def test_shm_transfer_is_pipelined(topo):
    """One SHM transfer runs at its bottleneck for the whole transfer: bytes / min(capacities).

    gpu0 -> gpu2: PCIe 10, socket 8, DRAM of mem1 written and read (12 / 2 = 6): 6 GB/s binds.
    gpu0 -> gpu1 with plenty of DRAM: PCIe 10 binds (NUMA node 0 has both GPUs).
    """
    one = lambda a, b: T.copies([(a, b)], B)
    got = makespans(
        T.shm_scenario(topo, one("gpu0", "gpu2"), dram=12 * GB),
        T.shm_scenario(topo, one("gpu0", "gpu2")),
        T.shm_scenario(topo, one("gpu0", "gpu1")),
    )
    np.testing.assert_allclose(got, [B / (6 * GB), B / SOCKET, B / PCIE], rtol=1e-9)


def test_staged_copy_shares_one_budget_per_gpu(topo):
    """cudaMemcpy with P2P off: one copy runs at min(staging, links) = 7; a copy each way at once
    shares both GPUs' staging budgets, 7 in total (m01: 19.5 one way, 21 both ways): 2B / 7."""
    staging = 7 * GB
    one = T.staged_scenario(topo, T.copies([("gpu0", "gpu1")], B), staging=staging)
    both = T.staged_scenario(topo, T.copies([("gpu0", "gpu1"), ("gpu1", "gpu0")], B), staging=staging)
    np.testing.assert_allclose(makespans(one, both), [B / staging, 2 * B / staging], rtol=1e-9)
    # staged through the source's memory, and a budget per GPU that the copy crosses
    assert one.flows[0].route == topo.route("gpu0", "mem0") + topo.route("mem0", "gpu1")
    hops = netsim.compile_scenario(one).hops[0]
    assert {"gpu0 staging", "gpu1 staging"} <= set(hops) and "gpu2 staging" not in hops


def test_host_budget_transfers_from_staged_copies_to_shm(topo):
    """The staging pipeline's efficiency e slows cudaMemcpy copies only; the per-GPU host budget H
    binds every transport, NCCL's SHM kernels at SM_HOST_GAIN x the copy engines' H. One staged copy:
    e x PCIe (H > PCIe does not bind); a staged copy each way: e x H / 2 each; the same pair exchanging
    through NCCL's SHM buffers: gain x H / 2 each, no e; one SHM transfer alone: PCIe. m01's one-way
    19.5 and both-ways 10.5 GB/s fix e and H; SHM then follows."""
    e, host = 0.75, 12 * GB  # H > PCIe (10): one direction alone is never limited by it
    pair, back = [("gpu0", "gpu1")], [("gpu0", "gpu1"), ("gpu1", "gpu0")]
    staged = lambda p: T.staged_scenario(topo, T.copies(p, B), staging=host, efficiency=e)
    shm = lambda p: T.shm_scenario(topo, T.copies(p, B), host=host)
    got = makespans(staged(pair), staged(back), shm(back), shm(pair))
    want = [B / (e * PCIE), B / (e * host / 2), B / (SM_HOST_GAIN * host / 2), B / PCIE]
    np.testing.assert_allclose(got, want, rtol=1e-9)
    assert staged(pair).flows[0].bytes == pytest.approx(B / e)
    hops = netsim.compile_scenario(shm(pair)).hops[0]
    assert {"gpu0 staging", "gpu1 staging"} <= set(hops)
    with pytest.raises(netsim.ScenarioError, match="efficiency"):
        T.staged_scenario(topo, T.copies(pair, B), staging=host, efficiency=1.5)


def test_nvlink_pairs_with_p2p_off_take_the_host_route(topo):
    nvlink = {x.id for x in topo.links if topo.kind[x.src] == "gpu" == topo.kind[x.dst]}
    assert nvlink == {"gpu0->gpu1", "gpu1->gpu0", "gpu2->gpu3", "gpu3->gpu2"}
    work = T.copies([("gpu0", "gpu1"), ("gpu3", "gpu2")], B)
    assert all(f.route[0] in nvlink for f in T.p2p_scenario(topo, work).flows)
    for scenario in (T.staged_scenario(topo, work, staging=GB), T.shm_scenario(topo, work)):
        assert all(nvlink.isdisjoint(f.route) for f in scenario.flows)
    # P2P over the bridge: 50 GB/s; with P2P off the host route's PCIe (10) binds
    got = makespans(
        T.p2p_scenario(topo, T.copies([("gpu0", "gpu1")], B)),
        T.shm_scenario(topo, T.copies([("gpu0", "gpu1")], B)),
    )
    np.testing.assert_allclose(got, [B / NVLINK, B / PCIE], rtol=1e-9)


def test_socket_duplex_budget(topo):
    """Two cross-socket copies in opposite directions share one 12 GB/s budget: 6 each (links: 8)."""
    work = T.copies([("gpu0", "gpu2"), ("gpu2", "gpu0")], B)
    budgets = T.duplex_budgets(topo, 12 * GB)
    assert [(r.id, set(r.links)) for r in budgets] == [("cpu0<->cpu1", {"cpu0->cpu1", "cpu1->cpu0"})]
    got = makespans(T.p2p_scenario(topo, work, shared=budgets), T.p2p_scenario(topo, work))
    np.testing.assert_allclose(got, [B / (6 * GB), B / SOCKET], rtol=1e-9)


def test_hairpin_budget_only_for_copies_between_switch_siblings():
    """m09's switch pairs: a staged copy between two GPUs of one switch goes up its uplink and back
    down it; only such copies cross the hairpin budget (5 here; PCIe 10)."""
    topo = netsim.topology.pcie_server(4, sockets=1, gpus_per_switch=2, pcie_bandwidth=PCIE)
    budgets = T.hairpin_budgets(topo, 5 * GB)
    assert len(budgets) == 2
    sib = T.staged_scenario(topo, T.copies([("gpu0", "gpu1")], B), staging=100 * GB, shared=budgets)
    far = T.staged_scenario(topo, T.copies([("gpu0", "gpu2")], B), staging=100 * GB, shared=budgets)
    np.testing.assert_allclose(makespans(sib, far), [B / (5 * GB), B / PCIE], rtol=1e-9)


def test_host_memory_halves_dram_for_write_then_read(topo):
    (m0, m1) = T.host_memory(topo)
    assert (m0.id, m0.capacity) == ("mem0 dram", MEMORY / 2)  # one NUMA node per socket: its DRAM, / 2
    assert set(m1.links) == {"cpu1->mem1", "mem1->cpu1"}


def test_errors_name_the_value(topo):
    with pytest.raises(netsim.ScenarioError, match="'gpu1' is not a memory node"):
        T.host_route(topo, "gpu0", "gpu2", "gpu1")
    with pytest.raises(netsim.ScenarioError, match="no pairs"):
        T.copies([], B)
    bare = dataclasses.replace(
        topo,
        links=tuple(x for x in topo.links if "mem" not in x.id),
        kind={k: v for k, v in topo.kind.items() if v != "mem"},
    )
    with pytest.raises(netsim.ScenarioError, match="no memory links"):
        netsim.topology.staging_engines(bare, capacity=GB)
    with pytest.raises(netsim.ScenarioError, match="bandwidth must be > 0"):
        T.host_memory(topo, 0.0)
