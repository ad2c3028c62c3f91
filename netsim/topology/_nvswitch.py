"""NVSwitch servers (every GPU one port on a non-blocking switch, one NIC of its own) and DGX A100 and
DGX H100 clusters: such servers under a rail-optimized InfiniBand fabric.

Nodes of a server: "gpu{i}" (kind "gpu"), "nvswitch" (kind "switch"), "nic{i}" (kind "nic", cabled to
GPU i: GPUDirect RDMA). `dgx_a100(n)` and `dgx_h100(n)` compose n of them with `cluster`, so server s's
nodes are "n{s}/gpu{i}", and a flow between servers leaves by the sending GPU's own NIC.
"""

from __future__ import annotations

import dataclasses

from ._cluster import rail_optimized
from ._common import bandwidth, count
from ._compose import cluster
from ._topology import Topology, cable

GB = 1e9

#: a DGX A100 GPU's NVSwitch port, per direction: nccl-tests all_reduce bus bandwidth on one DGX A100,
#: 222 GB/s (netsim/data/traces/m05_8xA40_nv4_node_sys_and_dgxA100_allreduce.txt); the datasheet's
#: 600 GB/s NVLink per GPU is both directions of 12 links
A100_NVSWITCH_PORT = 222 * GB
#: a DGX A100 compute NIC (datasheet: 8 x single-port ConnectX-6, 200 Gb/s HDR InfiniBand), per direction
HDR_NIC = 25 * GB
#: PCIe Gen4 x16 between a GPU and its NIC, per direction (line rate)
PCIE_GEN4_X16 = 31.5 * GB
#: GPUs of a DGX A100 or a DGX H100
DGX_GPUS = 8
#: a DGX H100 GPU's NVSwitch port, per direction: the NVLink bandwidth NCCL reaches on H100 SXM (ring
#: all_reduce and the other collectives' busbw, ~370 GB/s: NVLink 4's 450 GB/s line rate per direction less
#: ~20 % protocol overhead, as NCCL's maintainers put it in NVIDIA/nccl-tests issue 212). NVLink SHARP
#: all_reduce (switch-side reduction, ~480 GB/s busbw there) is not modelled.
H100_NVSWITCH_PORT = 370 * GB
#: a DGX H100 compute NIC (datasheet: 8 x ConnectX-7, 400 Gb/s NDR InfiniBand), per direction
NDR_NIC = 50 * GB
#: PCIe Gen5 x16 between a GPU and its NIC, per direction (line rate)
PCIE_GEN5_X16 = 63 * GB


def nvswitch_server(
    gpus: int = 8,
    *,
    gpu_bandwidth=A100_NVSWITCH_PORT,
    nic_bandwidth=PCIE_GEN4_X16,
    device: str = "",
    name: str | None = None,
) -> Topology:
    """`gpus` GPUs on one non-blocking NVSwitch, GPU i with NIC i.

    Args:
        gpu_bandwidth: GPU <-> NVSwitch per direction (B/s or "222 GB/s").
        nic_bandwidth: GPU <-> its NIC per direction (the PCIe link; the fabric's NIC link is the
            cluster's, see `dgx_a100`).
        device: the GPU model ("A100").
    """
    gpus = count(gpus, "gpus", minimum=2)
    port = bandwidth(gpu_bandwidth, "gpu_bandwidth")
    pcie = bandwidth(nic_bandwidth, "nic_bandwidth")
    kind = {"nvswitch": "switch"} | {f"gpu{i}": "gpu" for i in range(gpus)}
    kind |= {f"nic{i}": "nic" for i in range(gpus)}
    links = []
    for i in range(gpus):
        links += cable(f"gpu{i}", "nvswitch", port)
        links += cable(f"gpu{i}", f"nic{i}", pcie)
    return Topology(name or f"nvswitch-{gpus}", tuple(links), kind, device=device)


def dgx_a100(nodes: int = 1, *, nic_bandwidth=HDR_NIC, name: str | None = None) -> Topology:
    """`nodes` DGX A100 servers (8 x A100 SXM on NVSwitch, 222 GB/s per GPU port) joined by a non-blocking
    rail-optimized InfiniBand fabric (NIC r of every server on rail r; `rail_optimized`) at
    `nic_bandwidth` per NIC (HDR, 25 GB/s); one node is the server alone."""
    server = nvswitch_server(DGX_GPUS, nic_bandwidth=PCIE_GEN4_X16, device="A100", name="dgx-a100")
    return _dgx_cluster(server, nodes, nic_bandwidth, name)


def dgx_h100(nodes: int = 1, *, nic_bandwidth=NDR_NIC, name: str | None = None) -> Topology:
    """`nodes` DGX H100 servers (8 x H100 SXM on NVSwitch, 370 GB/s per GPU port: `H100_NVSWITCH_PORT`;
    PCIe Gen5 to each GPU's NIC) joined by a non-blocking rail-optimized InfiniBand fabric at
    `nic_bandwidth` per NIC (NDR, 50 GB/s); one node is the server alone. Built from public figures, not
    fitted to a trace of this repository."""
    server = nvswitch_server(
        DGX_GPUS,
        gpu_bandwidth=H100_NVSWITCH_PORT,
        nic_bandwidth=PCIE_GEN5_X16,
        device="H100",
        name="dgx-h100",
    )
    return _dgx_cluster(server, nodes, nic_bandwidth, name)


def _dgx_cluster(server: Topology, nodes: int, nic_bandwidth, name: str | None) -> Topology:
    """`nodes` copies of `server` on a rail-optimized fabric, named "{server}:{nodes}"; the server alone for
    one node."""
    nodes = count(nodes, "nodes")
    nic = bandwidth(nic_bandwidth, "nic_bandwidth")  # checked for one node too, where no fabric uses it
    if nodes == 1:
        return dataclasses.replace(server, name=name) if name else server
    gpus = len(server.gpus())
    fabric = rail_optimized(nodes, gpus, nic_bandwidth=nic)
    return cluster(fabric, server, name=name or f"{server.name}:{nodes}")
