"""A PCIe server shaped like `nvidia-smi topo -m` output, from the matrix `netsim.traces` parses."""

from __future__ import annotations

import re

from .._errors import ScenarioError
from ..traces import TopoMatrix, parse_nvidia_smi_topo
from ._pcie import ServerPlan, build_server
from ._topology import Topology


class _Groups:
    """Union-find over device names."""

    def __init__(self, items):
        self.up = {x: x for x in items}

    def find(self, x):
        while self.up[x] != x:
            self.up[x] = self.up[self.up[x]]
            x = self.up[x]
        return x

    def join(self, a, b):
        self.up[self.find(a)] = self.find(b)

    def groups(self, items) -> list[list[str]]:
        out: dict[str, list[str]] = {}
        for x in items:
            out.setdefault(self.find(x), []).append(x)
        return list(out.values())


def node_name(device: str, index_among_nics: int) -> str:
    """netsim's name for a matrix device: GPU3 -> gpu3, NIC1 -> nic1, mlx5_2 -> nic{its index}."""
    if re.fullmatch(r"GPU\d+", device):
        return "gpu" + device[3:]
    if re.fullmatch(r"NIC\d+", device):
        return "nic" + device[3:]
    return f"nic{index_among_nics}"


def server_plan(matrix: TopoMatrix, *, sockets: int | None = None) -> ServerPlan:
    """The tree shape implied by a matrix.

    NUMA nodes come from the NUMA Affinity column; devices without one join the NUMA node of a device they
    are not SYS to (or, when no device has an affinity, NUMA nodes are the groups of devices that are not
    SYS apart). Within a NUMA node, devices joined by PIX/PXB/PHB share a host bridge (NODE: different
    bridges); devices joined by PIX/PXB share a switch tree; each PIX group is one switch, and a tree of
    several PIX groups gets a root switch above them (PXB). A device with no PIX/PXB partner sits on its
    host bridge. NV# cells become NVLink bridges of # links.

    Args:
        sockets: CPU sockets; NUMA nodes (in numeric order) are split evenly over them. Default: 1 when
            there is one NUMA node, else 2 (dual-socket is the usual shape of 4- to 8-GPU servers;
            `nvidia-smi topo -m` does not print sockets).
    """
    devs = matrix.devices
    kind = lambda a, b: matrix.kind(a, b) or "SYS"  # an elided cell tells nothing: assume the farthest
    near = lambda a, b, classes: a != b and kind(a, b) in classes
    numa: dict[str, int | None] = {d: matrix.numa_affinity.get(d) for d in devs}
    if all(v is None for v in numa.values()):
        g = _Groups(devs)
        for a in devs:
            for b in devs:
                if near(a, b, ("PIX", "PXB", "PHB", "NODE")):
                    g.join(a, b)
        for k, group in enumerate(g.groups(devs)):
            numa.update({d: k for d in group})
    for _ in devs:  # propagate to devices without an affinity (NIC rows), one hop per pass
        for a in devs:
            if numa[a] is None:
                numa[a] = next(
                    (
                        numa[b]
                        for b in devs
                        if numa[b] is not None and near(a, b, ("PIX", "PXB", "PHB", "NODE"))
                    ),
                    None,
                )
    unplaced = [d for d in devs if numa[d] is None]
    if unplaced:
        raise ScenarioError(
            f"nvidia-smi topo: cannot place {unplaced} on a NUMA node (no NUMA Affinity and "
            "SYS to every placed device)"
        )
    ids = sorted(set(numa.values()))
    index = {v: i for i, v in enumerate(ids)}
    if sockets is None:
        sockets = 1 if len(ids) == 1 else 2 if len(ids) % 2 == 0 else len(ids)
    bridges = _Groups(devs)
    trees = _Groups(devs)
    pix = _Groups(devs)
    for a in devs:
        for b in devs:
            if numa[a] == numa[b]:
                if near(a, b, ("PIX", "PXB", "PHB")):
                    bridges.join(a, b)
                if near(a, b, ("PIX", "PXB")):
                    trees.join(a, b)
                if near(a, b, ("PIX",)):
                    pix.join(a, b)
    nic_index = {d: i for i, d in enumerate(x for x in devs if not x.startswith("GPU"))}
    name = {d: node_name(d, nic_index.get(d, 0)) for d in devs}
    host_bridges: dict[str, int] = {}
    parent: dict[str, str] = {}
    switches = 0
    for group in bridges.groups(devs):
        rc = f"rc{len(host_bridges)}"
        host_bridges[rc] = index[numa[group[0]]]
        for tree in trees.groups(group):
            if len(tree) == 1:
                parent[name[tree[0]]] = rc
                continue
            leaves = pix.groups(tree)
            root = rc
            if len(leaves) > 1:
                root = f"sw{switches}"
                switches += 1
                parent[root] = rc
            for leaf in leaves:
                up = root
                if len(leaf) > 1 or root == rc:
                    up = f"sw{switches}"
                    switches += 1
                    parent[up] = root
                for d in leaf:
                    parent[name[d]] = up
    devices = {name[d]: ("gpu" if d.startswith("GPU") else "nic") for d in devs}
    nvlinks = []
    for i, a in enumerate(devs):
        for b in devs[i + 1 :]:
            m = re.fullmatch(r"NV(\d+)", kind(a, b))
            if m:
                nvlinks.append((name[a], name[b], int(m.group(1))))
    return ServerPlan(sockets, len(ids), host_bridges, parent, devices, tuple(nvlinks))


def pcie_server_from_topo(
    topo: str | TopoMatrix,
    *,
    sockets: int | None = None,
    p2p: bool = True,
    name: str = "server",
    **bandwidths,
) -> Topology:
    """A PCIe server shaped like the `nvidia-smi topo -m` output `topo` (text or parsed matrix).

    Devices are renamed gpu#, nic# (see `node_name`); see `server_plan` for how the tree is inferred and
    `build_server` for `p2p` and the bandwidth keywords.
    """
    matrix = topo if isinstance(topo, TopoMatrix) else parse_nvidia_smi_topo(topo)
    return build_server(server_plan(matrix, sockets=sockets), p2p=p2p, name=name, **bandwidths)
