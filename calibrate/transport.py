"""How bytes really move between two GPUs of a PCIe server, per transport, as plain scenario pieces.

Each builder takes a PCIe `Topology` and returns routes, `SharedResource`s or a whole `Scenario`: the
engine and calibration use them unchanged. `p2p_scenario` needs the topology built with p2p=True (so
that `topo.route(a, b)` is the direct path); the host-memory builders route through memory themselves
and take either, best the P2P-off twin (see below). Nothing here fits anything; capacities are arguments.

Transports (see docs/heldout.md for the measurements behind each choice):

- P2P (`p2p_scenario`): the direct path, over an NVLink bridge where there is one.
- Host memory, any transport: everything a GPU writes to or reads from host memory shares one per-GPU
  budget (`netsim.topology.staging_engines`), both directions together. PCIe reads of host memory (non-posted) slow down
  while the same GPU writes to host memory: nvbandwidth's bidirectional host copies report ~11-16 GB/s
  for the host-to-device half on 8 x RTX 4090 and A100 PCIe Gen4 hosts where one direction alone
  reaches ~25 (NVIDIA/nvbandwidth issues 11, 15, 53).
- cudaMemcpy with P2P off (`staged_scenario`): the driver bounces the copy through a pinned buffer in
  the source GPU's NUMA node (D2H, then H2D), chunk by chunk, waiting on each: one flow over the host
  route that moves its bytes at the staging pipeline's efficiency (`staged_efficiency` of `netsim.CostModel`,
  here bytes / efficiency), through both GPUs' host budgets. Measured on m01 (p2pBandwidthLatencyTest,
  P2P=Disabled): one copy 19.5 GB/s (efficiency x the 25.8 GB/s PCIe path), a copy each way at once
  ~10.5 GB/s each (efficiency x half the host budget): efficiency 0.77, budget 27.2 GB/s
  (benchmarks/heldout.py). Two dependent, non-overlapped halves would give at most 25.8 / 2 = 12.9 GB/s
  one way.
- Host traffic between sockets is not held to the socket link's P2P figure: m01's P2P=Disabled copies
  are no slower across sockets than within one. Build on the P2P-off twin
  (`netsim.topology.preset(name, p2p=False)`), whose socket links are class "socket-host" at the socket
  fabric's figure, for staged and SHM scenarios.
- NCCL's SHM transport with P2P off (`shm_scenario`): the sender's kernel stores into a host buffer
  that NCCL allocates on the receiver's side (NCCL_SHM_LOCALITY defaults to the receiver, src/transport/
  shm.cc) and the receiver's kernel loads from it, slot by slot (NCCL_STEPS slots per connection), so
  the two PCIe directions and, across sockets, the socket link pipeline: one flow over the host route
  through the receiver's memory, limited by its bottleneck and both GPUs' host budgets. No copy engine
  and no driver bounce are involved (NCCL_SHM_USE_CUDA_MEMCPY defaults to 0), so the staging
  pipeline's efficiency does not apply, and the kernels' loads and stores keep `SM_HOST_GAIN` x the
  host budget that copy engines get (nvbandwidth's bidirectional host copies, SM against CE); DRAM is
  written and read once per byte (`host_memory`). `netsim.topology.NcclShm` is the same transport as a
  topology's P2P-off route, which calibration and `netsim collective --p2p off` use.
- NVLink-bridged pairs with P2P off (NCCL_P2P_DISABLE=1, or a P2P=Disabled copy) take the host route:
  P2P over the bridge is what P2P off turns off.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from netsim import Flow, Scenario, ScenarioError, SharedResource
from netsim.checks import fraction
from netsim.topology import SM_HOST_GAIN, Topology, staging_engines
from netsim.workloads import Workload

__all__ = [
    "copies",
    "duplex_budgets",
    "hairpin_budgets",
    "home_memory",
    "host_memory",
    "host_route",
    "p2p_scenario",
    "shm_scenario",
    "staged_scenario",
]


def _ends(topo: Topology, link_id: str) -> frozenset[str]:
    link = topo.link[link_id]
    return frozenset((topo.kind[link.src], topo.kind[link.dst]))


def home_memory(topo: Topology, device: str) -> str:
    """The memory node of `device`'s NUMA node: the router's record where it keeps one (PCIe servers),
    else the memory node the fewest links away."""
    home = getattr(topo.router, "home", None)
    if home and device in home:
        return home[device]
    mems = topo.nodes_of("mem")
    if not mems:
        raise ScenarioError(f"topology {topo.name!r}: no host memory node (kind 'mem') to stage through")
    return min(mems, key=lambda m: len(topo.route(device, m)))


def host_route(topo: Topology, src: str, dst: str, memory: str) -> tuple[str, ...]:
    """src -> `memory` -> dst over the PCIe tree (and the socket link where the path needs it).

    Never over NVLink: routes to and from memory pass only through host bridges, switches and NUMA
    nodes, so a bridged pair with P2P off takes the host route like any other.
    """
    if topo.kind.get(memory) != "mem":
        raise ScenarioError(f"host_route: {memory!r} is not a memory node of topology {topo.name!r}")
    return topo.route(src, memory) + topo.route(memory, dst)


def duplex_budgets(topo: Topology, capacity: float) -> tuple[SharedResource, ...]:
    """One budget (bytes/s) per cable between two sockets, joining its two directions.

    Measured on m01 (p2pBandwidthLatencyTest, P2P on): one cross-socket copy runs at 22 GB/s, a copy
    each way at once at 41 GB/s in total, not 44.
    """
    seen: set[frozenset[str]] = set()
    out = []
    for link in topo.links:
        pair = frozenset((link.src, link.dst))
        ends = _ends(topo, link.id)
        if not (ends == {"socket"} or ends == {"cpu"}) or pair in seen:
            continue
        seen.add(pair)
        both = tuple(x.id for x in topo.links if frozenset((x.src, x.dst)) == pair)
        out.append(SharedResource(f"{link.src}<->{link.dst}", float(capacity), both))
    return tuple(out)


def hairpin_budgets(topo: Topology, capacity: float) -> tuple[SharedResource, ...]:
    """One budget (bytes/s) per switch uplink for flows that leave the switch through it and come back
    down it (a host-staged copy between two GPUs of one switch).

    Measured on m09 (TITAN RTX, every copy host-staged): copies between the two GPUs of a switch run at
    9.9 GB/s, one way or both ways in total, where any other pair reaches 11.4. A flow is counted once per
    resource, so the budget applies only to flows crossing both directions (`via` the way back).
    """
    out = []
    for link in topo.links:
        if topo.kind[link.src] != "switch" or topo.kind[link.dst] not in ("rc", "switch"):
            continue
        back = [x.id for x in topo.links if (x.src, x.dst) == (link.dst, link.src)]
        if back and topo.kind[link.dst] == "rc":  # the uplink: towards the host bridge
            out.append(SharedResource(f"{link.src} hairpin", float(capacity), (link.id,), tuple(back)))
    return tuple(out)


def host_memory(topo: Topology, bandwidth: float | None = None) -> tuple[SharedResource, ...]:
    """One DRAM budget per memory node for transfers staged through it.

    A staged byte is written into the buffer and read out again, so a flow through memory node m uses
    its DRAM twice: the resource's capacity is `bandwidth` / 2. bandwidth: DRAM bytes/s per memory node,
    reads and writes together; default the topology's memory link figure (per NUMA node).
    """
    out = []
    for mem in topo.nodes_of("mem"):
        own = tuple(x.id for x in topo.links if mem in (x.src, x.dst))
        bw = max(topo.link[x].bandwidth for x in own) if bandwidth is None else float(bandwidth)
        if not bw > 0:
            raise ScenarioError(f"host_memory: bandwidth must be > 0, got {bandwidth!r}")
        out.append(SharedResource(f"{mem} dram", bw / 2, own))
    return tuple(out)


def copies(pairs: Iterable[tuple[str, str]], nbytes: float, *, overhead: float = 0.0) -> Workload:
    """Concurrent copies of `nbytes` each, one per (src, dst) pair: a p2pBandwidthLatencyTest cell
    (one pair: unidirectional; both directions: bidirectional)."""
    flows = [Flow(f"copy {a}->{b}", a, b, float(nbytes), overhead=float(overhead)) for a, b in pairs]
    if not flows:
        raise ScenarioError("copies: no pairs")
    return Workload(flows, name="copies")


def _rerouted(
    topo: Topology, workload: Workload, route, shared: Iterable[SharedResource], name: str
) -> Scenario:
    flows = [dataclasses.replace(f, route=tuple(route(f))) for f in workload.flows]
    return Scenario(topo.links, flows, workload.tasks, name=name, shared=tuple(shared))


def p2p_scenario(topo: Topology, workload: Workload, *, shared: Iterable[SharedResource] = ()) -> Scenario:
    """Every flow over the direct path (`topo.route`, NVLink where bridged), with `shared` budgets."""
    return _rerouted(topo, workload, lambda f: topo.route(f.src, f.dst), shared, f"{workload.name} p2p")


def staged_scenario(
    topo: Topology,
    workload: Workload,
    *,
    staging: float,
    efficiency: float = 1.0,
    shared: Iterable[SharedResource] = (),
    dram: float | None = None,
) -> Scenario:
    """cudaMemcpy with P2P off: every flow over the host route through the source's memory, carrying
    bytes / `efficiency` (the staging pipeline's, in (0, 1]), each GPU's host-memory traffic sharing
    `staging` bytes/s (`staging_engines`), DRAM as in `host_memory`."""
    efficiency = fraction(efficiency, "staged_scenario: efficiency")
    resources = (*staging_engines(topo, capacity=staging), *host_memory(topo, dram), *shared)
    route = lambda f: host_route(topo, f.src, f.dst, home_memory(topo, f.src))
    scenario = _rerouted(topo, workload, route, resources, f"{workload.name} staged")
    flows = tuple(dataclasses.replace(f, bytes=f.bytes / efficiency) for f in scenario.flows)
    return dataclasses.replace(scenario, flows=flows)


def shm_scenario(
    topo: Topology,
    workload: Workload,
    *,
    host: float | None = None,
    shared: Iterable[SharedResource] = (),
    dram: float | None = None,
) -> Scenario:
    """NCCL's SHM transport: every flow over the host route through the receiver's memory (pipelined:
    one flow, limited by its bottleneck), each GPU's host-memory traffic sharing `host` bytes/s as
    cudaMemcpy's copy engines see it (`staging_engines`) times `SM_HOST_GAIN` (the kernels' loads and
    stores keep more of it; None: no such budget, links only), DRAM as in `host_memory`, plus `shared`."""
    budgets = () if host is None else staging_engines(topo, capacity=host * SM_HOST_GAIN)
    route = lambda f: host_route(topo, f.src, f.dst, home_memory(topo, f.dst))
    resources = (*budgets, *host_memory(topo, dram), *shared)
    return _rerouted(topo, workload, route, resources, f"{workload.name} shm")
