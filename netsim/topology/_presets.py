"""Named presets: chiplet packages and PCIe servers shaped like real machines, with cited figures; and
`load`, which turns a preset name, an `nvidia-smi topo -m` file or a calibration file into a Topology.

`preset(name, **overrides)` builds one; keyword overrides go to the underlying builder. Bandwidths are
per direction. Files cited are in netsim/data/traces/.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._checks import count, quantity, read_text, show
from .._scenario import ScenarioError
from ..data import DATA_DIR
from ._cluster import fat_tree, leaf_spine
from ._compose import cluster
from ._mesh import mi250x, mi250x_node, mi300x
from ._nvsmi import pcie_server_from_topo
from ._nvswitch import DGX_GPUS, dgx_a100, dgx_h100
from ._pcie import PcieRouter, Transport, latency_gains, pcie_server, pcie_shared, shared_gains
from ._topology import Topology, link_class

if TYPE_CHECKING:
    from .._costs import CostModel

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
    return pcie_server_from_topo(
        M01_TOPO, sockets=2, name=kw.pop("name", "rtx4090-8x-epyc7542"), **({"device": "RTX 4090"} | kw)
    )


def _pcie(gpus: int, **defaults) -> Callable[..., Topology]:
    """A `pcie_server(gpus)` preset: `defaults`, under the keywords the caller gives."""
    return lambda **kw: pcie_server(gpus, **(defaults | kw))


# m08_4xA100PCIe_nvlinkpairs_p2p.txt: each GPU on its own NUMA node (2 sockets presumed: not stated);
# NV12 pairs 275.0 GB/s unidirectional (P2P writes, mean of 4) = 12 x 22.9; PCIe paths between pairs
# 21.6 (P2P writes, mean of the 8 SYS cells), used for the PCIe links and the socket link alike.
_a100_pairs = _pcie(
    4,
    sockets=2,
    numa_per_socket=2,
    nvlink_pairs=12,
    pcie_bandwidth=21.6 * GB,
    socket_bandwidth=21.6 * GB,
    nvlink_bandwidth=275.0 / 12 * GB,
    name="a100-pcie-4x-nvlink-pairs",
    device="A100",
)
# m05_8xA40_nv4_node_sys_and_dgxA100_allreduce.txt: NODE within 0-3 and 4-7, SYS across, NV4 pairs;
# 2-GPU all_reduce over the bridge: busbw 47.4 GB/s (= link rate for 2 ranks) -> 11.9 per NVLink.
# No P2P PCIe figure in that file: the PCIe links keep the RTX 4090 Gen4 default (m01).
_a40_nv4 = _pcie(
    8, sockets=2, nvlink_pairs=4, nvlink_bandwidth=47.4 / 4 * GB, name="a40-8x-nv4", device="A40"
)
# m09_8xTITANRTX_lambda_p2p.txt: pairs share a PCIe switch, P2P unsupported (every copy host-staged),
# 2 sockets presumed from the bus numbers; host-staged copies between non-sibling GPUs 11.4 GB/s
# (unidirectional, P2P=Disabled matrix) for the PCIe links. The slower sibling pairs (9.9 GB/s)
# are not reproduced: in a flow model both directions of a switch link are independent.
_titanrtx_8x = _pcie(
    8,
    sockets=2,
    gpus_per_switch=2,
    nics=0,
    p2p=False,
    pcie_bandwidth=11.4 * GB,
    name="titanrtx-8x-lambda",
    device="TITAN RTX",
)

# H100 PCIe, 8 on 2 sockets, each on its own root port, NVLink bridges in pairs (three bridges, 12
# NVLink4 links: NVIDIA's H100 PCIe product brief). No trace of such a box ships; public figures:
# NV12 116 GB/s, the 2-GPU all_reduce busbw over the bridges at 1-4 GiB (NVIDIA/nccl-tests issue 194)
# -> 9.7 per link; PCIe 52.8 GB/s, device -> host copies of every GPU of an H100 server (NVIDIA/nvbandwidth
# issue 24), for the Gen5 x16 links. The socket link keeps the m01 default (not measured for this class).
_h100_pcie = _pcie(
    8,
    sockets=2,
    nvlink_pairs=12,
    pcie_bandwidth=52.8 * GB,
    nvlink_bandwidth=116.0 / 12 * GB,
    name="h100-pcie-8x-nvlink-pairs",
    device="H100 PCIe",
)

_BUILDERS: dict[str, tuple[str, Callable[..., Topology]]] = {
    "mi300x": ("8 XCD + 4 IO dies (2 x 2 mesh) + 8 HBM3 stacks", mi300x),
    "mi250x": ("2 GCDs at 200 GB/s, 4 HBM2e stacks each", mi250x),
    "mi250x-node": ("4 MI250X packages joined at 50-100 GB/s (Frontier-like)", mi250x_node),
    "pcie-4gpu": (
        "1 socket, 4 GPUs on their own root ports, 1 NIC",
        _pcie(4, sockets=1, nics=1, name="pcie-4gpu"),
    ),
    "pcie-4gpu-switch": (
        "1 socket, 4 GPUs and 1 NIC under one PCIe switch",
        _pcie(4, sockets=1, gpus_per_switch=4, nics=1, name="pcie-4gpu-switch"),
    ),
    "pcie-8gpu": (
        "2 sockets, 4 GPUs per socket on their own root ports, 2 NICs",
        _pcie(8, sockets=2, nics=2, name="pcie-8gpu"),
    ),
    "pcie-8gpu-switch": (
        "2 sockets, 4 switches of 2 GPUs + 1 NIC",
        _pcie(8, sockets=2, gpus_per_switch=2, nics=4, name="pcie-8gpu-switch"),
    ),
    "rtx4090-8x-epyc7542": ("m01: 8 x RTX 4090, 2 x EPYC 7542 NPS4, 4 NICs", _rtx4090_8x),
    "a100-pcie-4x-nvlink-pairs": ("m08: 4 x A100 PCIe, NV12 bridges in pairs", _a100_pairs),
    "a40-8x-nv4": ("m05: 8 x A40, NV4 bridges in pairs, 2 sockets", _a40_nv4),
    "titanrtx-8x-lambda": ("m09: 8 x TITAN RTX, switch pairs, P2P off", _titanrtx_8x),
    "h100-pcie-8x-nvlink-pairs": ("8 x H100 PCIe, NV12 bridges in pairs, 2 sockets", _h100_pcie),
    "dgx-a100": ("8 x A100 SXM on NVSwitch (222 GB/s per GPU), 8 HDR NICs", dgx_a100),
    "dgx-h100": ("8 x H100 SXM on NVSwitch (370 GB/s per GPU), 8 NDR NICs", dgx_h100),
}

PRESETS: dict[str, str] = {name: text for name, (text, _) in _BUILDERS.items()}

#: cluster fabrics by shape, for every command that takes --topology: "fat-tree:K", "leaf-spine:L,S,H",
#: "dgx-a100:N", "dgx-h100:N"
CLUSTERS: dict[str, tuple[str, Callable[..., Topology]]] = {
    "fat-tree": ("k-ary fat-tree, k^3/4 hosts h0.. at 50 GB/s: fat-tree:K (K even)", fat_tree),
    "leaf-spine": (
        "two-tier Clos, L leaves x S spines, H hosts per leaf, non-blocking: leaf-spine:L,S,H",
        leaf_spine,
    ),
    "dgx-a100": (
        "N DGX A100 servers (8 GPUs each) on a rail-optimized HDR InfiniBand fabric (',nic=BW' sets the NICs' "
        "bandwidth): dgx-a100:N",
        dgx_a100,
    ),
    "dgx-h100": (
        "N DGX H100 servers (8 GPUs each) on a rail-optimized NDR InfiniBand fabric (',nic=BW' sets the NICs' "
        "bandwidth): dgx-h100:N",
        dgx_h100,
    ),
}
#: GPUs per server of the cluster shapes that a GPU count sizes (`sized_cluster`)
SERVER_GPUS = {"dgx-a100": DGX_GPUS, "dgx-h100": DGX_GPUS}


def sized_cluster(shape: str, gpus: int) -> Topology | None:
    """The cluster of `shape` ("dgx-a100" or "dgx-h100", a SERVER_GPUS key, optionally with ",nic=BW":
    `_cluster_options`) with the fewest servers holding `gpus` GPUs; None when `shape` is no such name."""
    kind, _, options = shape.partition(",")
    if kind not in SERVER_GPUS:
        return None
    kw = _cluster_options(shape, kind, options.split(",") if options else [])
    gpus = count(gpus, "gpus")  # the caller's figure, not the server count derived from it
    return CLUSTERS[kind][1](-(-gpus // SERVER_GPUS[kind]), **kw)


def _cluster_options(name: str, kind: str, parts: list[str]) -> dict[str, float]:
    """The builder keywords of a cluster spec's "key=value" parts: "nic=BW" on a DGX shape, each server
    NIC's bandwidth per direction ("nic=100Gbps" for servers with 800 Gb/s in all)."""
    kw = {}
    for part in parts:
        key, sep, value = (x.strip() for x in part.partition("="))
        if kind not in SERVER_GPUS or key != "nic" or not sep:
            hint = "; dgx-a100 and dgx-h100 take nic=BANDWIDTH" if kind in SERVER_GPUS else ""
            raise ScenarioError(f"topology: {name!r}: unknown option {part.strip()!r}{hint}")
        try:
            kw["nic_bandwidth"] = quantity(value, "bandwidth", "nic")
        except ScenarioError as e:
            raise ScenarioError(f"topology: {name!r}: {e}") from None
    return kw


def _cluster(name: str) -> Topology | None:
    """The fabric of a "fat-tree:K" / "leaf-spine:L,S,H" / "dgx-a100:N[,nic=BW]" / "dgx-h100:N[,nic=BW]" spec; None
    when `name` is no such spec."""
    kind, sep, args = name.partition(":")
    if not sep or kind not in CLUSTERS:
        return None
    parts = args.split(",")
    options = [x for x in parts if "=" in x]
    try:
        sizes = [int(x) for x in parts if "=" not in x]
    except ValueError:
        sizes = []
    want = 3 if kind == "leaf-spine" else 1
    if len(sizes) != want or min(sizes) < 1:
        raise ScenarioError(
            f"topology: {name!r}: expected {CLUSTERS[kind][0].split(': ')[-1]} with whole numbers >= 1"
        )
    kw = _cluster_options(name, kind, options)
    try:
        return CLUSTERS[kind][1](*sizes, **kw)
    except ScenarioError as e:
        raise ScenarioError(f"topology: {name!r}: {e}") from None


def _servers_under_fabric(name: str, **server) -> Topology | None:
    """The cluster of a "FABRIC/SERVER" spec: a "fat-tree:K" or "leaf-spine:L,S,H" fabric whose endpoints
    are the NICs of copies of SERVER (anything `load` reads: "pcie:8,nics=2", a preset), so
    "leaf-spine:4,2,4/pcie:8,nics=2" is 8 servers of 8 GPUs. None when `name` has no such fabric."""
    fabric_name, sep, server_name = name.partition("/")
    kind = fabric_name.partition(":")[0]
    if not sep or kind not in CLUSTERS or "=" in fabric_name:  # "nic=12.5GB/s": a unit's slash
        return None
    if kind not in ("fat-tree", "leaf-spine"):
        raise ScenarioError(
            f"topology: {name!r}: servers go under a fat-tree:K or leaf-spine:L,S,H fabric, not {kind!r}"
        )
    fabric = _cluster(fabric_name)
    try:
        return cluster(fabric, load(server_name, **server), name=name)
    except ScenarioError as e:
        raise ScenarioError(f"topology: {name!r}: {str(e).removeprefix('topology: ')}") from None


#: keys of a "pcie:N,key=value,..." server spec -> pcie_server's keyword
PCIE_KEYS = {
    "sockets": "sockets",
    "numa": "numa_per_socket",
    "switches": "gpus_per_switch",
    "nics": "nics",
    "nvlink": "nvlink_pairs",
}


def pcie_spec(name: str, **pcie) -> Topology | None:
    """The PCIe server of a "pcie:N[,sockets=S][,numa=K][,switches=G][,nics=M][,nvlink=L]" spec (N GPUs;
    `pcie_server`'s shape: S sockets (default 1), K NUMA nodes per socket, G GPUs per PCIe switch, M NICs,
    L NVLinks bridging GPU pairs), with its shared resources and builder figures; `pcie` goes to the
    builder (p2p, transport). None when `name` is no such spec."""
    kind, sep, args = name.partition(":")
    if kind != "pcie" or not sep:
        return None
    parts = [x.strip() for x in args.split(",") if x.strip()]
    usage = "pcie:N[,sockets=S][,numa=K][,switches=G][,nics=M][,nvlink=L] with whole numbers"
    try:
        gpus = int(parts[0])
        keys = dict(x.split("=", 1) for x in parts[1:])
        kw = {PCIE_KEYS[k.strip()]: int(v) for k, v in keys.items()}
    except (IndexError, ValueError, KeyError):
        raise ScenarioError(f"topology: {name!r}: expected {usage}") from None
    kw = {"sockets": 1} | kw
    try:
        topo = pcie_server(gpus, name=name, **kw, **pcie)
    except ScenarioError as e:
        raise ScenarioError(f"topology: {name!r}: {e}") from None
    return dataclasses.replace(topo, shared=pcie_shared(topo))


def preset(name: str, **overrides) -> Topology:
    """The named preset (see PRESETS); `overrides` go to its builder (bandwidths, p2p, name, ...)."""
    if name not in _BUILDERS:
        raise ScenarioError(f"preset: unknown preset {name!r}; known: {', '.join(_BUILDERS)}")
    return _BUILDERS[name][1](**overrides)


# --- calibrated presets and calibration files ---------------------------------------------------------

#: calibration files shipped with netsim (netsim/data/calibrations/NAME.json, written by `netsim calibrate
#: --out`; their README says how each was fitted), by name: `load(name)` gives the calibrated topology and
#: `load_costs(name)` its fitted software costs
CALIBRATIONS_DIR = DATA_DIR / "calibrations"
CALIBRATED: dict[str, dict[str, Any]] = {
    p.stem: json.loads(p.read_text()) for p in sorted(CALIBRATIONS_DIR.glob("*.json"))
}


def read_calibration(source: str | os.PathLike) -> dict[str, Any] | None:
    """The values of a calibrated preset (a name in CALIBRATED) or a calibration JSON file: netsim's one
    reader of them. None for any other source (a preset, a cluster shape, an `nvidia-smi topo -m` file).

    Raises:
        ScenarioError: naming the file when it starts like JSON but does not parse.
    """
    name = os.fspath(source)
    if not os.path.exists(name):
        return copy.deepcopy(CALIBRATED[name]) if name in CALIBRATED else None
    if not os.path.isfile(name):
        return None
    text = read_text(name)
    if not text.lstrip().startswith("{"):
        return None
    try:
        values = json.loads(text)
    except json.JSONDecodeError as e:
        raise ScenarioError(f"{name}: not valid JSON: {e}") from None
    if not isinstance(values, Mapping):
        raise ScenarioError(f"{name}: expected a JSON object of calibration values")
    return values


def load_costs(source: str | os.PathLike, regimes: Sequence[str] | None = None) -> CostModel | None:
    """The fitted software costs (`netsim.CostModel`) of a calibrated preset or calibration file; None
    for a source without them (a plain preset, an `nvidia-smi topo -m` file, a file with no "regimes").

    Pass them to what builds collectives on the calibrated topology (`Collective.scenario(topo, costs)`,
    `collective_sweep`, `search_rings`) to pay the machine's per-step overheads and launch cost.
    regimes: which regimes, in order (default: the file's).
    """
    from .._costs import CostModel  # jax: only once costs are asked for

    values = read_calibration(source)
    if values is None or "regimes" not in values:
        return None
    return CostModel.from_values(values, regimes, where=os.fspath(source))


def load(
    source: str | os.PathLike, *, p2p: bool | None = None, transport: Transport | None = None
) -> Topology:
    """A topology from a calibrated preset, a preset, an `nvidia-smi topo -m` file or a calibration file.

    Args:
        source: a name in CALIBRATED (fitted figures), a name in PRESETS (builder figures), a cluster
            shape of CLUSTERS ("fat-tree:4", "leaf-spine:4,2,8"), such a fabric with servers at its
            endpoints, one per NIC group ("leaf-spine:4,2,4/pcie:8,nics=2": `cluster`), a PCIe server spec ("pcie:6",
            "pcie:8,sockets=2,switches=2": `pcie_spec`), else a file: a calibration JSON (written by `netsim calibrate --out`, see docs/calibration.md) or
            a text file holding an `nvidia-smi topo -m` matrix.
        p2p: False for the P2P-off variant (device-to-device copies by `transport`), True for P2P on;
            None keeps the machine's own (on, except on presets without P2P such as titanrtx-8x-lambda).
        transport: the P2P-off route builder of PCIe servers (default: host-staged, `HostStaged`).

    PCIe servers come with their shared resources (`pcie_shared`); a calibration sets every link of a
    class to the class's fitted bandwidth and latency and every shared resource to its fitted capacity
    (its software costs: `load_costs`).

    Raises:
        ScenarioError: naming the source when it is none of these, or a calibration file is malformed.
    """
    name = os.fspath(source)
    if not os.path.exists(name):
        servers = _servers_under_fabric(name, p2p=p2p, transport=transport)
        fabric = _cluster(name) if servers is None else servers
        if fabric is not None:
            return fabric
    if not os.path.exists(name) and name.startswith("pcie:"):
        return base_topology(name, p2p=p2p, transport=transport)
    values = read_calibration(name)
    if values is not None:
        topo = from_calibration(values, p2p=p2p, transport=transport, where=name)
        if os.path.isfile(name):  # a calibration file: outputs are labelled with its name, not its base's
            topo = dataclasses.replace(topo, name=os.path.splitext(os.path.basename(name))[0])
        return topo
    if name in _BUILDERS:
        return base_topology(name, p2p=p2p, transport=transport)
    if not os.path.isfile(name):
        raise ScenarioError(f"topology: {name!r} is neither a preset ({', '.join(_BUILDERS)}) nor a file")
    text = read_text(name)
    entry = {"nvidia_smi_topo": text, "name": os.path.splitext(os.path.basename(name))[0]}
    try:
        return base_topology(entry, p2p=p2p, transport=transport)
    except ScenarioError as e:
        raise ScenarioError(
            f"{name}: neither a calibration JSON nor an `nvidia-smi topo -m` file ({e})"
        ) from None


def topology_entry(source: str | os.PathLike) -> str | dict | None:
    """What a calibration file records as its "topology" for a `load` source (`base_topology` builds it
    back): a preset name as is, a calibration file's own entry, or an `nvidia-smi topo -m` file's text
    and name. None when `source` is neither a preset nor a file (or a calibration file without one)."""
    name = os.fspath(source)
    if name in PRESETS or (name.startswith("pcie:") and not os.path.exists(name)):
        return name
    if not os.path.isfile(name):
        return None
    text = read_text(name)
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text).get("topology")
        except (json.JSONDecodeError, AttributeError):
            return None
    return {"nvidia_smi_topo": text, "name": os.path.splitext(os.path.basename(name))[0]}


def base_topology(
    entry: str | Mapping[str, Any],
    *,
    p2p: bool | None = None,
    transport: Transport | None = None,
    where: str = "topology",
) -> Topology:
    """A calibration file's "topology" entry, built with builder figures: a preset name, or
    {"nvidia_smi_topo": text, "name": ..., "device": ...}. PCIe servers get their shared resources.
    Errors name `where` (the file and key)."""
    pcie = ({"p2p": p2p} if p2p is not None else {}) | (
        {"transport": transport} if transport is not None else {}
    )
    if isinstance(entry, str) and entry.startswith("pcie:"):
        topo = pcie_spec(entry, **pcie)
        assert topo is not None  # "pcie:..." is always a spec (or an error)
        return topo
    if isinstance(entry, str):
        if entry not in _BUILDERS:
            raise ScenarioError(f"{where}: unknown preset {entry!r}; known: {', '.join(_BUILDERS)}")
        topo = preset(entry)
        if pcie and isinstance(topo.router, PcieRouter):
            topo = preset(entry, **pcie)
    elif isinstance(entry, Mapping) and isinstance(entry.get("nvidia_smi_topo"), str):
        try:
            topo = pcie_server_from_topo(
                entry["nvidia_smi_topo"],
                name=str(entry.get("name", "server")),
                device=str(entry.get("device", "")),
                **pcie,
            )
        except ScenarioError as e:
            raise ScenarioError(f"{where}.nvidia_smi_topo: {e}") from None
    else:
        raise ScenarioError(
            f"{where}: expected a preset name or {{'nvidia_smi_topo': text}}, got {show(entry)}"
        )
    return (
        dataclasses.replace(topo, shared=pcie_shared(topo)) if isinstance(topo.router, PcieRouter) else topo
    )


def from_calibration(
    values: Mapping[str, Any],
    *,
    p2p: bool | None = None,
    transport: Transport | None = None,
    where: str = "calibration",
    base: Topology | None = None,
) -> Topology:
    """The topology of calibration values (see `load`): `base`, else the one their "topology" entry names,
    with the fitted figures (links by `link_class`, shared resources by id) and software costs
    (`Topology.costs`: what its host-staged copies pay)."""
    if not isinstance(values, Mapping) or (base is None and "topology" not in values):
        raise ScenarioError(f"{where}: no 'topology' entry (a preset name or {{'nvidia_smi_topo': text}})")
    topo = (
        base
        if base is not None
        else base_topology(values["topology"], p2p=p2p, transport=transport, where=f"{where}: topology")
    )
    classes = values.get("link_classes", {})
    used = {link_class(topo, link.id) for link in topo.links}
    if used & {"socket", "socket-host"}:  # the P2P-on and P2P-off twins share one file
        used |= {"socket", "socket-host"}
    unknown = sorted(set(classes) - used) if isinstance(classes, Mapping) else []
    if unknown:
        raise ScenarioError(
            f"{where}: link_classes: unknown class {show(unknown[0])}; this topology's: {sorted(used)}"
        )
    links = []
    # fitted latencies are the copies' (cudaMemcpy's DRAM turnaround); NCCL's SHM steps skip the memory
    # links' share (`latency_gains`)
    for link, gain in zip(topo.links, latency_gains(topo), strict=True):
        c = link_class(topo, link.id)
        if c == "socket-host" and c not in classes:
            links.append(link)  # a file from before the class existed: the builder's figure
            continue
        if c not in classes:
            raise ScenarioError(f"{where}: link_classes: no entry for class {c!r} (link {link.id!r})")
        entry = classes[c]
        if not isinstance(entry, Mapping) or not {"bandwidth", "latency"} <= set(entry):
            raise ScenarioError(f"{where}: link_classes.{c}: expected bandwidth and latency, got {entry!r}")
        field = f"{where}: link_classes.{c}"
        links.append(
            dataclasses.replace(
                link,
                bandwidth=quantity(entry["bandwidth"], "bandwidth", f"{field}.bandwidth", positive=True),
                latency=gain * quantity(entry["latency"], "time", f"{field}.latency"),
            )
        )
    capacity = values.get("shared", {})
    unknown = sorted(set(capacity) - {r.id for r in topo.shared}) if isinstance(capacity, Mapping) else []
    if unknown and base is None and isinstance(topo.router, PcieRouter):  # the twin's, from one file too
        twin = base_topology(values["topology"], p2p=not topo.router.p2p, transport=transport, where=where)
        unknown = sorted(set(unknown) - {r.id for r in twin.shared})
    if unknown:
        raise ScenarioError(
            f"{where}: shared: unknown shared resource {show(unknown[0])}; this topology's: "
            f"{show([r.id for r in topo.shared])}"
        )
    missing = [r.id for r in topo.shared if r.id not in capacity]
    if missing:
        raise ScenarioError(f"{where}: shared: no capacity for {missing[:3]}")
    # fitted figures are as cudaMemcpy's copy engines see the host budgets; another transport's traffic
    # gets its own share of them (`shared_gains`)
    shared = tuple(
        dataclasses.replace(
            r,
            capacity=gain * quantity(capacity[r.id], "bandwidth", f"{where}: shared.{r.id}", positive=True),
        )
        for r, gain in zip(topo.shared, shared_gains(topo), strict=True)
    )
    costs = None
    if "regimes" in values:  # the fitted software costs: staged copies on this topology pay them
        from .._costs import CostModel

        costs = CostModel.from_values(values, where=where)
    return dataclasses.replace(
        topo,
        links=tuple(links),
        shared=shared,
        device=str(values.get("device") or topo.device),
        costs=costs or topo.costs,
    )
