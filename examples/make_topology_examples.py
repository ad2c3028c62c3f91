"""Writes examples/topo_*.json: one small scenario per fabric family of netsim.topology.

    python examples/make_topology_examples.py        # rewrite the files beside this script

Each scenario is small (at most 64 flows and tasks) so that it simulates in well under a second.
"""

from __future__ import annotations

import json
from pathlib import Path

from netsim import Flow, Scenario, Task
from netsim.checks import write_atomic
from netsim.topology import (
    chiplet_mesh,
    cluster,
    fat_tree,
    leaf_spine,
    mi250x,
    mi300x,
    pcie_server,
    preset,
    rail_optimized,
    with_packages,
)

MiB = 2**20
#: a ring of copies on 8 GPUs: gpu{i} sends 256 MiB to gpu{i + 1} (mod 8)
GPU_RING = tuple(
    Flow(f"gpu{i}>gpu{(i + 1) % 8}", f"gpu{i}", f"gpu{(i + 1) % 8}", 256 * MiB) for i in range(8)
)


def mesh_transpose() -> tuple[Scenario, str]:
    topo = chiplet_mesh(4, 4, d2d_bandwidth="50 GB/s", hbm="per_chiplet", hbm_bandwidth="400 GB/s")
    flows = [
        Flow(f"xcd{4 * r + c}>xcd{4 * c + r}", f"xcd{4 * r + c}", f"xcd{4 * c + r}", 32 * MiB)
        for r in range(4)
        for c in range(4)
        if r != c
    ]
    flows += [
        Flow(f"hbm{4 * c + r}>xcd{4 * r + c}", f"hbm{4 * c + r}", f"xcd{4 * r + c}", 64 * MiB)
        for r in range(4)
        for c in range(4)
        if r != c
    ]
    text = (
        "4 x 4 chiplet mesh, XY routing: a matrix transpose (chiplet (r,c) sends to (c,r)) while each "
        "chiplet reads the HBM stack of its mirror chiplet; memory and die-to-die traffic share links."
    )
    return topo.scenario(flows, name="topo_mesh_transpose"), text


def mi300x_memory() -> tuple[Scenario, str]:
    topo = mi300x()
    flows = [Flow(f"hbm{h}>xcd{x}", f"hbm{h}", f"xcd{x}", 256 * MiB) for x in range(8) for h in range(8)]
    text = (
        "MI300X-like package: every XCD reads 256 MiB from every HBM stack (interleaved memory); remote "
        "stacks are reached across the 2 x 2 IO-die mesh."
    )
    return topo.scenario(flows, name="topo_mi300x_memory"), text


def pcie_staged() -> tuple[Scenario, str]:
    topo = preset("pcie-8gpu", p2p=False)
    text = (
        "8-GPU dual-socket PCIe server with P2P off: a ring of copies, each staged through the DRAM of "
        "the source GPU's NUMA node (GPU -> host memory -> GPU)."
    )
    return topo.scenario(list(GPU_RING), name="topo_pcie_staged"), text


def pcie_m01_ring() -> tuple[Scenario, str]:
    topo = preset("rtx4090-8x-epyc7542")
    flows = [*GPU_RING, Flow("gpu6>nic0", "gpu6", "nic0", 256 * MiB)]
    text = (
        "The m01 box (8 x RTX 4090 on 2 x EPYC 7542, built from its nvidia-smi topo -m) with P2P on: a "
        "ring of copies, two of which cross the socket link, plus GPU6 sending to a NIC on its host bridge."
    )
    return topo.scenario(flows, name="topo_pcie_m01_ring"), text


def leafspine_ecmp() -> tuple[Scenario, str]:
    topo = leaf_spine(4, 2, 4, host_bandwidth="50 GB/s", oversubscription=2.0)
    flows = [
        f
        for i in range(16)
        for f in topo.flows(f"h{i}>h{(i + 4) % 16}", f"h{i}", f"h{(i + 4) % 16}", 64 * MiB)
    ]
    text = (
        "Leaf-spine, 4 leaves x 4 hosts, 2 spines, 2:1 oversubscribed: every host sends to the same slot on "
        "the next leaf, each transfer split equally over the two spines (ECMP)."
    )
    return topo.scenario(flows, name="topo_leafspine_ecmp"), text


def fattree_failure() -> tuple[Scenario, str]:
    topo = fat_tree(4, link_bandwidth="50 GB/s").without_links(["pod0/agg0->core0", "core0->pod0/agg0"])
    flows = [Flow(f"h{i}>h{15 - i}", f"h{i}", f"h{15 - i}", 64 * MiB) for i in range(16)]
    text = (
        "4-ary fat-tree with one aggregation-core cable failed: a reversal permutation on hashed "
        "single-path ECMP routes, recomputed around the failure."
    )
    return topo.scenario(flows, name="topo_fattree_failure"), text


def cluster_composed() -> tuple[Scenario, str]:
    box = with_packages(pcie_server(2, sockets=1, gpus_per_switch=1, nics=2), mi250x())
    topo = cluster(rail_optimized(2, 2, nic_bandwidth="25 GB/s"), box)
    tasks = [Task(f"compute/{g}", g, 2e-3) for g in topo.gpus()]
    flows = [
        Flow(f"{a}>{b}", a, b, 64 * MiB, after=(f"compute/{a}",))
        for a, b in zip(topo.gpus(), topo.gpus()[4:] + topo.gpus()[:4], strict=True)
    ]
    text = (
        "Two PCIe servers on a rail-optimized fabric, each GPU an MI250X-like package: every GCD computes "
        "for 2 ms, then sends to the matching GCD of the other server (GCD -> host link -> PCIe switch -> "
        "NIC -> rail leaf -> ...)."
    )
    return topo.scenario(flows, tasks, name="topo_cluster_composed"), text


EXAMPLES = (
    mesh_transpose,
    mi300x_memory,
    pcie_staged,
    pcie_m01_ring,
    leafspine_ecmp,
    fattree_failure,
    cluster_composed,
)


def documents() -> dict[str, dict]:
    """File name -> the JSON document of each example."""
    out = {}
    for build in EXAMPLES:
        scenario, text = build()
        out[f"{scenario.name}.json"] = {"description": text, **scenario.to_dict()}
    return out


def main() -> None:
    here = Path(__file__).resolve().parent
    for file, doc in documents().items():
        write_atomic(here / file, json.dumps(doc, indent=1) + "\n")
        print(
            f"wrote {file}: {len(doc['links'])} links, {len(doc['flows'])} flows, {len(doc['tasks'])} tasks"
        )


if __name__ == "__main__":
    main()
