"""PCIe server fabrics: CPU sockets, NUMA nodes with their memory, host bridges, PCIe switches, GPUs, NICs.

Node names and kinds:
    socket{s} ("socket")  a socket's data fabric; only when a socket has several NUMA nodes
    cpu{k}    ("cpu")     NUMA node k's slice of the socket (the hub when a socket is one NUMA node)
    mem{k}    ("mem")     NUMA node k's DRAM
    rc{i}     ("rc")      a PCIe host bridge / root complex, under one cpu{k}
    sw{j}     ("switch")  a PCIe switch, under a host bridge or another switch
    gpu{i}    ("gpu"), nic{i} ("nic")  devices, under a switch or directly on a host bridge

Routing follows the PCIe tree (the unique path; NVLink bridges join GPU pairs directly), through host
bridges, switches, NUMA nodes and sockets only: devices and memory forward nothing. The path kinds of
`nvidia-smi topo -m` fall out of the tree: PIX (one switch), PXB (several switches), PHB (a host bridge),
NODE (two host bridges of one NUMA node), SYS (NUMA nodes or sockets), NV# (NVLink). With p2p=False a
copy between two devices, NVLink-bridged or not, takes the route of the server's `transport`; the
default, `HostStaged`, goes to the DRAM of the source's NUMA node and back out, crossing the memory links
(`route(a, b) == route(a, mem) + route(mem, b)`), as cudaMemcpy does between GPUs without P2P.

Shared resources (`build_server(..., shared=True)`, or `pcie_shared(topo)`): one duplex budget per
socket-to-socket cable for P2P copies (none with p2p=False) and one host-memory budget per GPU, measured
on m01 (see `socket_duplex`, `staging_engines`).

Default figures, per direction (B/s), from netsim/data/traces/:
    pcie_bandwidth   25.8 GB/s  m01_8x4090_2xEPYC7542_p2pBandwidthLatency_p2p_on.txt: RTX 4090 P2P writes
                                between GPUs of one socket (PCIe Gen4 x16), mean 25.79 (25.51-26.01)
    socket_bandwidth 21.9 GB/s  same file, GPUs on different sockets, mean 21.95 (20.57-22.53); one
                                inter-socket link, so concurrent cross-socket flows share it
    host_socket_bandwidth 126 GB/s  the same link for host-memory traffic, in P2P-off topologies (class
                                "socket-host"): a 2 x EPYC 7002 server joins its sockets with four x16
                                fabric links, 4 x 31.5 GB/s at the PCIe 4.0 rate; m01's P2P=Disabled copies
                                do not slow down between sockets (docs/heldout.md), so it never binds there
    memory_bandwidth 204.8 GB/s per socket: m01_8x4090_2xEPYC7542_topo.txt lists 8 x DDR4-3200 per socket
                                (8 channels x 25.6 GB/s), split evenly over its NUMA nodes
    numa_bandwidth   204.8 GB/s NUMA node <-> socket fabric (assumed: the DRAM figure; no trace)
    nvlink_bandwidth 22.9 GB/s  per NVLink: m08_4xA100PCIe_nvlinkpairs_p2p.txt, NV12 pair 275.0 / 12
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Protocol

from .._checks import fraction, number, quantity
from .._scenario import Link, ScenarioError, SharedResource
from ._common import bandwidth, count, latency, transit_route
from ._topology import Path, SinglePath, Topology, cable, link_class

GB = 1e9
PCIE = 25.8 * GB
SOCKET = 21.9 * GB
HOST_SOCKET = 4 * 31.5 * GB
MEMORY = 204.8 * GB
NUMA = 204.8 * GB
NVLINK = 275.0 / 12 * GB

TRANSIT = frozenset({"rc", "switch", "cpu", "socket"})
DEVICES = frozenset({"gpu", "nic"})


@dataclasses.dataclass(frozen=True)
class ServerPlan:
    """The shape of a server, before bandwidths: what hangs under what.

    Attributes:
        sockets: CPU sockets; NUMA nodes 0 .. numa-1 are split evenly over them, in order.
        numa: NUMA nodes (a multiple of sockets).
        host_bridges: host bridge name -> its NUMA node.
        parent: switch or device name -> the host bridge or switch above it.
        devices: device name -> kind ("gpu" or "nic"), in order.
        nvlinks: (gpu a, gpu b, number of NVLinks) bridges.
    """

    sockets: int
    numa: int
    host_bridges: Mapping[str, int]
    parent: Mapping[str, str]
    devices: Mapping[str, str]
    nvlinks: tuple[tuple[str, str, int], ...] = ()

    def __post_init__(self):
        if self.numa % self.sockets:
            raise ScenarioError(
                f"sockets: {self.numa} NUMA nodes cannot be split evenly over sockets={self.sockets}"
            )


class Transport(Protocol):
    """How a copy between two devices travels when P2P is off (the route builder of `PcieRouter`).

    `HostStaged` is cudaMemcpy's bounce through host memory, `NcclShm` NCCL's host-memory (SHM)
    transport: `build_server(plan, p2p=False, transport=...)`, `load(name, p2p=False, transport=...)`.

    Attributes:
        host_gain: the share of each GPU's host-memory budget (`staging_engines`, fitted on cudaMemcpy
            copies) that this transport's traffic gets, relative to cudaMemcpy's copy engines.
        dram_latency: the share of the memory links' latency its copies pay (1: the DRAM turnaround
            is on the data path; a transport without the attribute pays it all).
    """

    host_gain: float
    dram_latency: float

    def route(self, topo: Topology, router: PcieRouter, src: str, dst: str) -> Path:
        """Link ids of the copy from device src to device dst (NVLink-bridged or not)."""
        ...


@dataclasses.dataclass(frozen=True)
class HostStaged:
    """The copy lands in the DRAM of the source's NUMA node and is read back out (cudaMemcpy without P2P).

    The driver bounces each chunk through a pinned buffer with the copy engines: a device-to-host copy on
    the source GPU, then a host-to-device copy on the destination (host_gain 1: the host budgets are
    fitted on these copies)."""

    host_gain: float = 1.0
    dram_latency: float = 1.0

    def route(self, topo: Topology, router: PcieRouter, src: str, dst: str) -> Path:
        mem = router.home[src]
        return transit_route(topo, src, mem, TRANSIT) + transit_route(topo, mem, dst, TRANSIT)


#: nvbandwidth's bidirectional host tests run a host-to-device and a device-to-host copy on one GPU at
#: once, with copy engines (two cuMemcpyAsync streams) or with one SM kernel whose alternate warps copy
#: in alternate directions (NVIDIA/nvbandwidth README, "Bidirectional Host <-> Device Bandwidth Tests").
#: A public nvbandwidth v0.9 log of an RTX 5060 Ti at PCIe 5.0 x8 on Linux, four runs: the copy engines
#: keep the device-to-host half (26.7-26.8 GB/s) and starve the host-to-device half (17.9-18.0); the SM
#: kernel splits the two evenly (22.0-22.5 each), the same total. A ring step reads host memory as fast
#: as it writes it, so the read half binds, and SM kernels read 1.22-1.24 x what copy engines do.
#: (A Windows laptop RTX 3050 log shows SM copies slower than copy engines; NCCL does not run there.)
SM_HOST_GAIN = 1.23


@dataclasses.dataclass(frozen=True)
class NcclShm:
    """NCCL's SHM transport (what NCCL uses between GPUs of one machine with P2P off, NCCL_P2P_DISABLE=1).

    NCCL's src/transport/shm.cc: the FIFO of NCCL_STEPS slots lives in pinned host memory on the
    receiver's side (NCCL_SHM_LOCALITY defaults to the receiver), the sender's kernel stores into it
    and the receiver's kernel loads from it (NCCL_SHM_USE_CUDA_MEMCPY defaults to 0: no copy engine, no
    driver bounce), slot by slot, so the two halves pipeline as one flow through the receiver's DRAM.
    SM loads and stores share a GPU's host budget more evenly than copy engines do: `SM_HOST_GAIN`.

    No DRAM turnaround latency (dram_latency 0): the receiver's kernel polls each slot's flag while the
    sender's stores land, so a step costs the latency of the PCIe path between the two GPUs, as a P2P
    step does. NCCL's own tuning model (src/graph/tuning.cc, `hwLat`) charges every intra-node ring
    step off NVLink the one PCI latency, whichever transport carries it.
    """

    host_gain: float = SM_HOST_GAIN
    dram_latency: float = 0.0

    def route(self, topo: Topology, router: PcieRouter, src: str, dst: str) -> Path:
        mem = router.home[dst]
        return transit_route(topo, src, mem, TRANSIT) + transit_route(topo, mem, dst, TRANSIT)


@dataclasses.dataclass(frozen=True, eq=False)
class PcieRouter(SinglePath):
    """Tree routing through host bridges, switches and NUMA nodes; the transport's route when p2p is off.

    Attributes:
        p2p: True when devices may DMA to each other directly (peer-to-peer).
        nvlink: NVLink link id -> number of NVLinks bonded in it (`path_kind`'s NV#). With P2P off an
            NVLink-bridged pair takes the transport's route too: P2P off (NCCL_P2P_DISABLE, a
            P2P=Disabled copy) turns off P2P over NVLink as well as over PCIe.
        home: device -> the memory node of its NUMA node, where host-staged copies land.
        transport: the route of a device-to-device copy when p2p is off (default `HostStaged`).
    """

    p2p: bool
    nvlink: Mapping[str, int]
    home: Mapping[str, str]
    transport: Transport = dataclasses.field(default_factory=HostStaged)

    def route(self, topo: Topology, src: str, dst: str) -> Path:
        direct = transit_route(topo, src, dst, TRANSIT)
        if self.p2p or topo.kind[src] not in DEVICES or topo.kind[dst] not in DEVICES:
            return direct
        return tuple(self.transport.route(topo, self, src, dst))

    def staged(self, topo: Topology, src: str, dst: str) -> bool:
        """True for a copy between two devices that the driver bounces through host memory: P2P off,
        with the `HostStaged` transport (cudaMemcpy's; another transport pays its own costs)."""
        devices = topo.kind.get(src) in DEVICES and topo.kind.get(dst) in DEVICES
        return devices and not self.p2p and isinstance(self.transport, HostStaged)


def build_server(
    plan: ServerPlan,
    *,
    p2p: bool = True,
    pcie_bandwidth=PCIE,
    socket_bandwidth=SOCKET,
    host_socket_bandwidth=HOST_SOCKET,
    memory_bandwidth=MEMORY,
    numa_bandwidth=NUMA,
    nvlink_bandwidth=NVLINK,
    pcie_latency=0.0,
    socket_latency=0.0,
    nvlink_latency=0.0,
    name: str = "server",
    shared: bool = False,
    transport: Transport | None = None,
    device: str = "",
) -> Topology:
    """Links and routing for `plan`.

    Args:
        plan: the server's shape.
        p2p: peer-to-peer DMA allowed; False sends device-to-device copies by `transport`.
        pcie_bandwidth: every PCIe link (device, switch, host bridge) per direction.
        socket_bandwidth: the link between two sockets per direction (sockets are fully connected), as
            P2P copies see it.
        host_socket_bandwidth: the same link with p2p=False, where only host-memory traffic crosses it.
        memory_bandwidth: DRAM per socket per direction, split evenly over its NUMA nodes.
        numa_bandwidth: NUMA node <-> socket fabric, when a socket has several NUMA nodes.
        nvlink_bandwidth: per NVLink per direction (a bridge of n links gets n times this).
        pcie_latency, socket_latency, nvlink_latency: per link (s).
        shared: add the socket duplex budgets and per-GPU staging engines (`pcie_shared`).
        transport: the route of copies when p2p is off (default `HostStaged`).
        device: the GPUs' model, e.g. "RTX 4090" (see `Topology.device`).
    """
    if not isinstance(p2p, bool):
        raise ScenarioError(f"p2p: expected True or False, got {p2p!r}")
    if not isinstance(shared, bool):
        raise ScenarioError(f"shared: expected True or False, got {shared!r}")
    pcie = (bandwidth(pcie_bandwidth, "pcie_bandwidth"), latency(pcie_latency, "pcie_latency"))
    sock = (
        bandwidth(socket_bandwidth, "socket_bandwidth")
        if p2p
        else bandwidth(host_socket_bandwidth, "host_socket_bandwidth"),
        latency(socket_latency, "socket_latency"),
    )
    per_socket = plan.numa // plan.sockets
    mem = bandwidth(memory_bandwidth, "memory_bandwidth") / per_socket
    nvl = (bandwidth(nvlink_bandwidth, "nvlink_bandwidth"), latency(nvlink_latency, "nvlink_latency"))
    kind: dict[str, str] = {}
    links: list[Link] = []
    hub = [f"cpu{s * per_socket}" if per_socket == 1 else f"socket{s}" for s in range(plan.sockets)]
    for k in range(plan.numa):
        kind[f"cpu{k}"], kind[f"mem{k}"] = "cpu", "mem"
        links += cable(f"cpu{k}", f"mem{k}", mem)
        if per_socket > 1:
            kind[hub[k // per_socket]] = "socket"
            links += cable(f"cpu{k}", hub[k // per_socket], bandwidth(numa_bandwidth, "numa_bandwidth"))
    for a in range(plan.sockets):
        for b in range(a + 1, plan.sockets):
            links += cable(hub[a], hub[b], *sock)
    for rc, k in plan.host_bridges.items():
        if not 0 <= k < plan.numa:
            raise ScenarioError(f"host bridge {rc!r}: NUMA node {k} out of range 0..{plan.numa - 1}")
        kind[rc] = "rc"
        links += cable(rc, f"cpu{k}", *pcie)
    for node in plan.parent:
        kind.setdefault(node, plan.devices.get(node, "switch"))
    for node, up in plan.parent.items():
        if up not in kind or kind[up] not in ("rc", "switch"):
            raise ScenarioError(f"{node!r}: parent {up!r} is not a host bridge or switch")
        links += cable(node, up, *pcie)
    nv_ids: dict[str, int] = {}
    for a, b, n in plan.nvlinks:
        if plan.devices.get(a) != "gpu" or plan.devices.get(b) != "gpu":
            raise ScenarioError(f"nvlink {a!r}-{b!r}: both ends must be GPUs")
        pair = cable(a, b, n * nvl[0], nvl[1])
        links += pair
        nv_ids |= {x.id: n for x in pair}
    home = {}
    for dev in plan.devices:
        node = dev
        while node in plan.parent:
            node = plan.parent[node]
        if node not in plan.host_bridges:
            raise ScenarioError(f"device {dev!r} does not hang under a host bridge")
        home[dev] = f"mem{plan.host_bridges[node]}"
    router = PcieRouter(p2p, nv_ids, home, transport or HostStaged())
    topo = Topology(
        name,
        tuple(links),
        kind,
        router,
        tuple(d for d, k in plan.devices.items() if k == "gpu"),
        device=device,
    )
    return dataclasses.replace(topo, shared=pcie_shared(topo)) if shared else topo


#: m01 (p2pBandwidthLatency_p2p_on): a cross-socket copy each way at once totals 41.2 GB/s where one alone
#: runs at 21.96: the two directions of the socket link share 94 % of their sum
DUPLEX_SHARE = 0.94
#: m01: a GPU's traffic to and from host memory, both directions together, fitted on the P2P=Disabled
#: copy matrices (with cudaMemcpy's staging efficiency, 0.77, beside it; benchmarks/heldout.py): 27.2 GB/s,
#: 1.07 x one 25.5 GB/s PCIe direction (reads and writes use opposite directions, yet share far less than
#: both: a copy each way at once runs at ~10.5 GB/s each)
STAGING_SHARE = 1.07


def socket_duplex(topo: Topology, share: float = DUPLEX_SHARE) -> tuple[SharedResource, ...]:
    """One shared resource per socket-to-socket cable, joining its two directions, of `share` times
    their summed bandwidth (ids "socket0<->socket1").

    It is a limit of P2P copies between sockets (class "socket"); a topology with P2P off has none:
    its host-memory traffic does not reach the socket fabric's two-way rate. `share` lies in (0, 1]."""
    share = fraction(share, "share")
    seen, out = set(), []
    for link in topo.links:
        if link_class(topo, link.id) != "socket" or (link.dst, link.src) in seen:
            continue
        seen.add((link.src, link.dst))
        pair = [link, *(x for x in topo.links if (x.src, x.dst) == (link.dst, link.src))]
        out.append(
            SharedResource(
                f"{link.src}<->{link.dst}", share * sum(x.bandwidth for x in pair), tuple(x.id for x in pair)
            )
        )
    return tuple(out)


def staging_engines(
    topo: Topology,
    share: float = STAGING_SHARE,
    *,
    capacity: float | None = None,
) -> tuple[SharedResource, ...]:
    """One shared resource per GPU for its traffic to and from host memory (ids "gpu0 staging").

    Reads and writes of host memory share it, in any transport (cudaMemcpy's staging, NCCL's SHM
    buffers): the resource is crossed by flows through the GPU's PCIe links that also cross a memory
    link. Direct (P2P) copies never cross it. It holds `share` times the GPU's fastest PCIe link, or
    `capacity` bytes/s when given (calibration fits it in absolute terms), as cudaMemcpy's copy engines
    see it, times the P2P-off transport's `host_gain` (`host_gain`: 1 but for `NcclShm`).
    """
    share = number(share, "staging_engines: share", positive=True)
    if capacity is not None:
        capacity = quantity(capacity, "bandwidth", "staging_engines: capacity")
    memory = tuple(x.id for x in topo.links if link_class(topo, x.id) == "memory")
    if not memory:
        raise ScenarioError(f"staging_engines: topology {topo.name!r} has no memory links")
    out = []
    for gpu in topo.gpus():
        own = [x for x in topo.links if gpu in (x.src, x.dst) and link_class(topo, x.id) != "nvlink"]
        if own:
            budget = share * max(x.bandwidth for x in own) if capacity is None else float(capacity)
            budget *= host_gain(topo)
            out.append(SharedResource(f"{gpu} staging", budget, tuple(x.id for x in own), memory))
    return tuple(out)


def host_gain(topo: Topology) -> float:
    """How much of each GPU's host budget (as fitted on cudaMemcpy copies) device-to-device traffic gets
    on `topo`: its P2P-off transport's `host_gain`; 1 with P2P on or off a PCIe server."""
    router = topo.router
    if not isinstance(router, PcieRouter) or router.p2p:
        return 1.0
    return float(getattr(router.transport, "host_gain", 1.0))


def dram_latency(topo: Topology) -> float:
    """The share of the memory links' latency device-to-device traffic pays on `topo`: its P2P-off
    transport's `dram_latency`; 1 with P2P on or off a PCIe server."""
    router = topo.router
    if not isinstance(router, PcieRouter) or router.p2p:
        return 1.0
    return float(getattr(router.transport, "dram_latency", 1.0))


def latency_gains(topo: Topology) -> tuple[float, ...]:
    """Per link of `topo`, the factor between its latency and the figure a calibration fits for its
    class: `dram_latency(topo)` for the memory links, 1 for the others."""
    gain = dram_latency(topo)
    return tuple(gain if link_class(topo, x.id) == "memory" else 1.0 for x in topo.links)


def shared_gains(topo: Topology) -> tuple[float, ...]:
    """Per shared resource of `topo`, the factor between its capacity and the figure a calibration fits
    for it: `host_gain(topo)` for the per-GPU host budgets ("gpu0 staging"), 1 for the others."""
    gain = host_gain(topo)
    return tuple(gain if r.id.endswith(" staging") else 1.0 for r in topo.shared)


def with_transport(topo: Topology, transport: Transport) -> Topology:
    """`topo` (a PCIe server) with P2P-off copies by `transport`: its routes, its host budgets rescaled
    from the old transport's `host_gain` to the new one's, and its memory links' latency from the old
    `dram_latency` to the new one's. A latency the old transport dropped (NcclShm's) cannot come back:
    build the topology with the transport instead (`load(name, p2p=False, transport=...)`)."""
    if not isinstance(topo.router, PcieRouter):
        raise ScenarioError(f"with_transport: {topo.name!r} is not a PCIe server")
    old, old_latency = shared_gains(topo), latency_gains(topo)
    out = dataclasses.replace(topo, router=dataclasses.replace(topo.router, transport=transport))
    links = []
    for link, was, new in zip(topo.links, old_latency, latency_gains(out), strict=True):
        if was == 0 and new > 0:
            raise ScenarioError(
                f"with_transport: {topo.name!r}'s transport drops the latency of link {link.id!r}, so it "
                f"cannot be restored for {type(transport).__name__}; build the topology with that transport"
            )
        links.append(link if was == new else dataclasses.replace(link, latency=link.latency * new / was))
    shared = tuple(
        dataclasses.replace(r, capacity=r.capacity * new / was)
        for r, was, new in zip(topo.shared, old, shared_gains(out), strict=True)
    )
    return dataclasses.replace(out, links=tuple(links), shared=shared)


def pcie_shared(topo: Topology) -> tuple[SharedResource, ...]:
    """The shared resources of a PCIe server: socket-link duplex budgets, then per-GPU staging engines."""
    return socket_duplex(topo) + staging_engines(topo)


def pcie_server(
    gpus: int = 8,
    *,
    sockets: int = 2,
    numa_per_socket: int = 1,
    gpus_per_switch: int = 0,
    nics: int = 0,
    nvlink_pairs: int = 0,
    p2p: bool = True,
    name: str | None = None,
    **bandwidths,
) -> Topology:
    """A regular PCIe server.

    GPU i sits in NUMA node i * numa // gpus. Without switches (gpus_per_switch=0) each GPU has its own
    host bridge (GPUs of one NUMA node are NODE apart); with switches, each NUMA node's GPUs fill switches
    of gpus_per_switch (PIX apart), each switch on its own host bridge. NIC j goes under switch
    j % switches, or on its own host bridge in NUMA node j * numa // nics.

    Args:
        gpus, sockets, numa_per_socket: sizes.
        gpus_per_switch: GPUs per PCIe switch; 0 for none.
        nics: NICs.
        nvlink_pairs: NVLinks bridging GPUs 2i and 2i+1 (0: no bridges; 4 on A40, 12 on A100 PCIe).
        p2p: peer-to-peer allowed (False: host-staged copies).
        **bandwidths: `build_server` keywords (pcie_bandwidth, socket_bandwidth, ...).
    """
    gpus, sockets = count(gpus, "gpus"), count(sockets, "sockets")
    numa = sockets * count(numa_per_socket, "numa_per_socket")
    per_switch = count(gpus_per_switch, "gpus_per_switch", minimum=0)
    nics, bridges = count(nics, "nics", minimum=0), count(nvlink_pairs, "nvlink_pairs", minimum=0)
    if bridges and gpus % 2:
        raise ScenarioError(f"nvlink_pairs: bridges join GPU pairs, so gpus must be even, got gpus={gpus}")
    host_bridges: dict[str, int] = {}
    parent: dict[str, str] = {}
    devices: dict[str, str] = {}

    def new_bridge(k: int) -> str:
        rc = f"rc{len(host_bridges)}"
        host_bridges[rc] = k
        return rc

    switches: list[str] = []
    for k in range(numa):
        mine = [i for i in range(gpus) if i * numa // gpus == k]
        for start in range(0, len(mine), per_switch or 1):
            if per_switch:
                sw = f"sw{len(switches)}"
                switches.append(sw)
                parent[sw] = new_bridge(k)
            for i in mine[start : start + (per_switch or 1)]:
                devices[f"gpu{i}"] = "gpu"
                parent[f"gpu{i}"] = sw if per_switch else new_bridge(k)
    for j in range(nics):
        devices[f"nic{j}"] = "nic"
        parent[f"nic{j}"] = switches[j % len(switches)] if switches else new_bridge(j * numa // nics)
    nvlinks = tuple((f"gpu{2 * i}", f"gpu{2 * i + 1}", bridges) for i in range(gpus // 2)) if bridges else ()
    plan = ServerPlan(sockets, numa, host_bridges, parent, devices, nvlinks)
    shape = f"{gpus}gpu{sockets}s" + (f"-sw{per_switch}" if per_switch else "") + ("" if p2p else "-nop2p")
    return build_server(plan, p2p=p2p, name=name or shape, **bandwidths)


def path_kind(topo: Topology, a: str, b: str) -> str:
    """The `nvidia-smi topo -m` class of the direct (P2P) path between two devices of a PCIe server.

    "NV#" for an NVLink bridge of # links, "SYS" when the path leaves a NUMA node, "NODE" when it crosses
    a NUMA node between host bridges, "PHB" through one host bridge, "PXB" through several switches,
    "PIX" through one switch.
    """
    route = transit_route(topo, a, b, TRANSIT)
    if not isinstance(topo.router, PcieRouter):
        raise ScenarioError(
            f"path_kind: {topo.name!r} is not a PCIe server (router {type(topo.router).__name__})"
        )
    if len(route) == 1 and route[0] in topo.router.nvlink:
        return f"NV{topo.router.nvlink[route[0]]}"
    crossed = [topo.kind[topo.link[lid].dst] for lid in route[:-1]]
    if "socket" in crossed or sum(k == "cpu" for k in crossed) > 1:
        return "SYS"
    if "cpu" in crossed:
        return "NODE"
    if "rc" in crossed:
        return "PHB"
    return "PXB" if crossed.count("switch") > 1 else "PIX"
