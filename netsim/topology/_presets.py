"""Named presets: chiplet packages and PCIe servers shaped like real machines, with cited figures.

`preset(name, **overrides)` builds one; keyword overrides go to the underlying builder. Bandwidths are
per direction. Files cited are in netsim/data/traces/.
"""

from __future__ import annotations

from collections.abc import Callable

from .._scenario import ScenarioError
from ._mesh import mi250x, mi250x_node, mi300x
from ._nvsmi import pcie_server_from_topo
from ._pcie import pcie_server
from ._topology import Topology

GB = 1e9

# m01_8x4090_2xEPYC7542_topo.txt, the matrix rows verbatim: 8 x RTX 4090 on 2 x EPYC 7542 in NPS4 (one GPU
# per NUMA node), 4 NICs in two PIX pairs under GPU6's host bridge.
M01_TOPO = """\
        GPU0    GPU1    GPU2    GPU3    GPU4    GPU5    GPU6    GPU7    NIC0    NIC1    NIC2    NIC3    CPU Affinity    NUMA Affinity   GPU NUMA ID
GPU0     X      SYS     SYS     SYS     SYS     SYS     SYS     SYS     SYS     SYS     SYS     SYS     24-31,88-95     3               N/A
GPU1    SYS      X      SYS     SYS     SYS     SYS     SYS     SYS     SYS     SYS     SYS     SYS     16-23,80-87     2               N/A
GPU2    SYS     SYS      X      SYS     SYS     SYS     SYS     SYS     SYS     SYS     SYS     SYS     8-15,72-79      1               N/A
GPU3    SYS     SYS     SYS      X      SYS     SYS     SYS     SYS     SYS     SYS     SYS     SYS     0-7,64-71       0               N/A
GPU4    SYS     SYS     SYS     SYS      X      SYS     SYS     SYS     SYS     SYS     SYS     SYS     56-63,120-127   7               N/A
GPU5    SYS     SYS     SYS     SYS     SYS      X      SYS     SYS     SYS     SYS     SYS     SYS     48-55,112-119   6               N/A
GPU6    SYS     SYS     SYS     SYS     SYS     SYS      X      SYS     PHB     PHB     PHB     PHB     40-47,104-111   5               N/A
GPU7    SYS     SYS     SYS     SYS     SYS     SYS     SYS      X      SYS     SYS     SYS     SYS     32-39,96-103    4               N/A
NIC0    SYS     SYS     SYS     SYS     SYS     SYS     PHB     SYS      X      PIX     PHB     PHB
NIC1    SYS     SYS     SYS     SYS     SYS     SYS     PHB     SYS     PIX      X      PHB     PHB
NIC2    SYS     SYS     SYS     SYS     SYS     SYS     PHB     SYS     PHB     PHB      X      PIX
NIC3    SYS     SYS     SYS     SYS     SYS     SYS     PHB     SYS     PHB     PHB     PIX      X
"""


def _rtx4090_8x(**kw) -> Topology:
    # bandwidth defaults of build_server are this machine's measurements (m01 p2pBandwidthLatency_p2p_on)
    return pcie_server_from_topo(M01_TOPO, sockets=2, name=kw.pop("name", "rtx4090-8x-epyc7542"), **kw)


def _a100_pairs(**kw) -> Topology:
    # m08_4xA100PCIe_nvlinkpairs_p2p.txt: each GPU on its own NUMA node (2 sockets presumed: not stated);
    # NV12 pairs 275.0 GB/s unidirectional (P2P writes, mean of 4) = 12 x 22.9; PCIe paths between pairs
    # 21.6 (P2P writes, mean of the 8 SYS cells), used for the PCIe links and the socket link alike.
    args = dict(sockets=2, numa_per_socket=2, nvlink_pairs=12, pcie_bandwidth=21.6 * GB,
                socket_bandwidth=21.6 * GB, nvlink_bandwidth=275.0 / 12 * GB, name="a100-pcie-4x-nvlink-pairs")
    return pcie_server(4, **(args | kw))


def _a40_nv4(**kw) -> Topology:
    # m05_8xA40_nv4_node_sys_and_dgxA100_allreduce.txt: NODE within 0-3 and 4-7, SYS across, NV4 pairs;
    # 2-GPU all_reduce over the bridge: busbw 47.4 GB/s (= link rate for 2 ranks) -> 11.9 per NVLink.
    # No P2P PCIe figure in that file: the PCIe links keep the RTX 4090 Gen4 default (m01).
    args = dict(sockets=2, nvlink_pairs=4, nvlink_bandwidth=47.4 / 4 * GB, name="a40-8x-nv4")
    return pcie_server(8, **(args | kw))


def _titanrtx_8x(**kw) -> Topology:
    # m09_8xTITANRTX_lambda_p2p.txt: pairs share a PCIe switch, P2P unsupported (every copy host-staged),
    # 2 sockets presumed from the bus numbers; host-staged copies between non-sibling GPUs 11.4 GB/s
    # (unidirectional, P2P=Disabled matrix) for the PCIe Gen3 links. The slower sibling pairs (9.9 GB/s)
    # are not reproduced: in a flow model both directions of a switch link are independent.
    args = dict(sockets=2, gpus_per_switch=2, nics=0, p2p=False, pcie_bandwidth=11.4 * GB,
                name="titanrtx-8x-lambda")
    return pcie_server(8, **(args | kw))


_BUILDERS: dict[str, tuple[str, Callable[..., Topology]]] = {
    "mi300x": ("8 XCD + 4 IO dies (2 x 2 mesh) + 8 HBM3 stacks", mi300x),
    "mi250x": ("2 GCDs at 200 GB/s, 4 HBM2e stacks each", mi250x),
    "mi250x-node": ("4 MI250X packages joined at 50-100 GB/s (Frontier-like)", mi250x_node),
    "pcie-4gpu": ("1 socket, 4 GPUs on their own root ports, 1 NIC",
                  lambda **kw: pcie_server(4, **(dict(sockets=1, nics=1, name="pcie-4gpu") | kw))),
    "pcie-4gpu-switch": ("1 socket, 4 GPUs and 1 NIC under one PCIe switch",
                         lambda **kw: pcie_server(4, **(dict(sockets=1, gpus_per_switch=4, nics=1,
                                                              name="pcie-4gpu-switch") | kw))),
    "pcie-8gpu": ("2 sockets, 4 GPUs per socket on their own root ports, 2 NICs",
                  lambda **kw: pcie_server(8, **(dict(sockets=2, nics=2, name="pcie-8gpu") | kw))),
    "pcie-8gpu-switch": ("2 sockets, 4 switches of 2 GPUs + 1 NIC",
                         lambda **kw: pcie_server(8, **(dict(sockets=2, gpus_per_switch=2, nics=4,
                                                              name="pcie-8gpu-switch") | kw))),
    "rtx4090-8x-epyc7542": ("m01: 8 x RTX 4090, 2 x EPYC 7542 NPS4, 4 NICs", _rtx4090_8x),
    "a100-pcie-4x-nvlink-pairs": ("m08: 4 x A100 PCIe, NV12 bridges in pairs", _a100_pairs),
    "a40-8x-nv4": ("m05: 8 x A40, NV4 bridges in pairs, 2 sockets", _a40_nv4),
    "titanrtx-8x-lambda": ("m09: 8 x TITAN RTX, switch pairs, P2P off", _titanrtx_8x),
}

PRESETS: dict[str, str] = {name: text for name, (text, _) in _BUILDERS.items()}


def preset(name: str, **overrides) -> Topology:
    """The named preset (see PRESETS); `overrides` go to its builder (bandwidths, p2p, name, ...)."""
    if name not in _BUILDERS:
        raise ScenarioError(f"preset: unknown preset {name!r}; known: {', '.join(_BUILDERS)}")
    return _BUILDERS[name][1](**overrides)
