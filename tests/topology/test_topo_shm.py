"""NCCL's SHM transport as a topology's P2P-off route (`NcclShm`): routes through the receiver's DRAM,
host budgets at `SM_HOST_GAIN` x the figure cudaMemcpy's copies fit, no bounce cost; one model for
calibration (P2P-off collectives) and user collectives (`netsim collective --p2p off`)."""

import numpy as np
import pytest

import netsim
from netsim.data import trace_path
from netsim.topology import (
    SM_HOST_GAIN,
    HostStaged,
    NcclShm,
    host_gain,
    link_class,
    load,
    load_costs,
    pcie_server,
    read_calibration,
    with_transport,
)
from netsim.traces import read_trace
from netsim.workloads import allreduce

M01 = "rtx4090-8x-epyc7542"


def budgets(topo):
    return {r.id: r.capacity for r in topo.shared if r.id.endswith(" staging")}


def test_shm_routes_through_the_receivers_memory_and_copies_through_the_senders():
    shm = pcie_server(4, sockets=2, numa_per_socket=2, p2p=False, transport=NcclShm(), shared=True)
    copy = pcie_server(4, sockets=2, numa_per_socket=2, p2p=False, transport=HostStaged(), shared=True)
    home = shm.router.home
    for a, b in [("gpu0", "gpu1"), ("gpu1", "gpu3"), ("gpu3", "gpu0")]:
        assert shm.route(a, b) == shm.route(a, home[b]) + shm.route(home[b], b)
        assert copy.route(a, b) == copy.route(a, home[a]) + copy.route(home[a], b)
        assert shm.route(a, b) != copy.route(a, b)  # each GPU has its own NUMA node here
    assert not shm.staged("gpu0", "gpu1") and copy.staged("gpu0", "gpu1")  # no cudaMemcpy bounce


def test_host_budgets_scale_with_the_transport():
    copy = pcie_server(4, sockets=1, p2p=False, shared=True)
    shm = with_transport(copy, NcclShm())
    assert host_gain(copy) == 1.0 and host_gain(shm) == SM_HOST_GAIN
    assert host_gain(pcie_server(4, sockets=1, transport=NcclShm())) == 1.0  # P2P on: no host route
    for r in copy.shared:
        want = r.capacity * (SM_HOST_GAIN if r.id.endswith(" staging") else 1.0)
        assert dict((x.id, x.capacity) for x in shm.shared)[r.id] == pytest.approx(want, rel=1e-12)
    assert budgets(with_transport(copy, HostStaged())) == pytest.approx(budgets(copy), rel=1e-12)
    # a calibration's fitted budgets are the copy engines' figures
    fitted = read_calibration(M01)["shared"]
    got = budgets(load(M01, p2p=False, transport=NcclShm()))
    assert got == pytest.approx({k: SM_HOST_GAIN * v for k, v in fitted.items() if k in got}, rel=1e-12)


def test_a_shm_ring_runs_at_half_the_scaled_host_budget():
    """A 4-GPU ring all_reduce on one socket without software costs: every GPU sends and receives at
    once through its host budget, so each step runs at gain x budget / 2 (PCIe 25.8 GB/s is wider);
    2 (n - 1) steps of S / n bytes: the closed form."""
    topo = pcie_server(4, sockets=1, p2p=False, transport=NcclShm(), shared=True)
    budget = min(budgets(topo).values())
    assert budget / 2 < topo.link["gpu0->rc0"].bandwidth
    size, n = 256e6, 4
    result = netsim.simulate(allreduce(topo.gpus(), size).scenario(topo))
    assert result.makespan == pytest.approx(2 * (n - 1) / n * size / (budget / 2), rel=1e-6)
    copy = pcie_server(4, sockets=1, p2p=False, transport=HostStaged(), shared=True)
    assert budget == pytest.approx(SM_HOST_GAIN * min(budgets(copy).values()))


def route_latency(topo, a, b):
    return sum(topo.link[x].latency for x in topo.route(a, b))


def test_a_shm_step_costs_the_direct_paths_latency():
    """NCCL's SHM FIFO is polled while the sender's stores land (NCCL's tuning model charges one PCI
    latency per step, whichever transport): on calibrated m01 the host route of a ring hop through the
    receiver's DRAM has the P2P route's latency, plus, between sockets, only the difference of the
    socket link's two fitted figures (socket-host for host traffic); cudaMemcpy's copies keep the DRAM
    turnaround (twice the memory link's latency) on their route."""
    on, copy = load(M01, p2p=True), load(M01, p2p=False)
    shm = load(M01, p2p=False, transport=NcclShm())
    lat = {c: v["latency"] for c, v in read_calibration(M01)["link_classes"].items()}
    assert lat["memory"] > 0
    gpus = on.gpus()
    for a, b in zip(gpus, gpus[1:] + gpus[:1], strict=True):
        cross = any(link_class(on, x) == "socket" for x in on.route(a, b))
        extra = lat["socket-host"] - lat["socket"] if cross else 0.0
        assert route_latency(shm, a, b) == pytest.approx(route_latency(on, a, b) + extra, rel=1e-12)
        assert route_latency(copy, a, b) == pytest.approx(
            route_latency(on, a, b) + extra + 2 * lat["memory"], rel=1e-12
        )
    assert with_transport(copy, NcclShm()).links == shm.links
    with pytest.raises(netsim.NetsimError, match="cannot be restored"):
        with_transport(shm, HostStaged())


@pytest.mark.slow
def test_calibration_and_the_collective_command_predict_a_p2p_off_all_reduce_alike():
    """m01's all_reduce sizes with P2P off, through calibration's experiments (`predict`) and through
    the calibrated topology with the SHM transport and its fitted software costs: the same times."""
    from netsim.calibrate import Params, Spec, experiments_from_trace, predict

    topo, staged = load(M01, p2p=True), load(M01, p2p=False)
    costs = load_costs(M01)
    spec = Spec.for_topology(topo, staged=staged, regimes=costs.regimes)
    params = Params.load(spec, M01, topo, staged)
    trace = read_trace(trace_path("m01_8x4090_2xEPYC7542_allreduce_p2p_on.txt"))
    (off,) = experiments_from_trace(trace, spec, topo, staged=staged, routes="off")
    assert set(off.shared_scale) == {SM_HOST_GAIN}  # every shared resource of a P2P-off twin is a host budget
    pick = [0, 13, 16, 20, 24]  # 8 B, 64 KiB, 512 KiB, 8 MiB, 128 MiB
    times = predict(params, off)["makespan"][pick]
    shm = load(M01, p2p=False, transport=NcclShm())
    for t, k in zip(times, pick, strict=True):
        ring = allreduce(shm.gpus(), off.labels[k]).scenario(shm, costs)
        assert netsim.simulate(ring).makespan == pytest.approx(t, rel=1e-6)
    assert np.all(np.diff(times) > 0)
