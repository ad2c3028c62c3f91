"""Reading `nvidia-smi topo -m` output, and building a PCIe server from it.

The parser finds the matrix anywhere in a larger text (a log, a README, a comment block): the header is
the first line whose words are all device names (GPU0, NIC1, mlx5_0, ...) before the optional "CPU
Affinity", "NUMA Affinity" and "GPU NUMA ID" columns. It tolerates tabs or spaces, lines quoted with a
leading "#", a trailing "..." where columns were elided, rows without affinity columns (NIC rows), the
old "SOC" spelling of SYS, and the "NIC Legend" block.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

from .._scenario import ScenarioError
from ._pcie import ServerPlan, build_server
from ._topology import Topology

KINDS = ("X", "PIX", "PXB", "PHB", "NODE", "SYS", "NVB")
_CELL = re.compile(r"^(X|PIX|PXB|PHB|NODE|SYS|SOC|NVB|NV\d+)$")
_DEVICE = re.compile(r"^(GPU\d+|NIC\d+|mlx\d+_\d+|[a-z]+\d*_\d+)$")
_TAILS = (("CPU", "Affinity"), ("NUMA", "Affinity"), ("GPU", "NUMA", "ID"))
_AFFINITY = re.compile(r"^(\d+(-\d+)?)(,\d+(-\d+)?)*$")


@dataclasses.dataclass(frozen=True)
class TopoMatrix:
    """A parsed `nvidia-smi topo -m` matrix.

    Attributes:
        devices: column names in order ("GPU0", ..., "NIC0", ...).
        matrix: matrix[i][j] is the link kind from devices[i] to devices[j] ("X", "PIX", "PXB", "PHB",
            "NODE", "SYS", "NVB", "NV12", ...), None where the source elided it ("...").
        cpu_affinity: device -> CPU list text ("0-7,64-71"), None when absent or "N/A".
        numa_affinity: device -> NUMA node, None when absent or "N/A".
        gpu_numa_id: device -> the GPU's own NUMA id (coherent-memory GPUs), None when absent or "N/A".
        nic_names: "NIC0" -> "mlx5_0" from the NIC legend.
    """

    devices: tuple[str, ...]
    matrix: tuple[tuple[str | None, ...], ...]
    cpu_affinity: Mapping[str, str | None]
    numa_affinity: Mapping[str, int | None]
    gpu_numa_id: Mapping[str, int | None]
    nic_names: Mapping[str, str]

    def kind(self, a: str, b: str) -> str | None:
        """The link kind between devices a and b (None when elided)."""
        return self.matrix[self.devices.index(a)][self.devices.index(b)]

    @property
    def gpus(self) -> tuple[str, ...]:
        return tuple(d for d in self.devices if d.startswith("GPU"))


def _words(line: str) -> list[str]:
    return line.lstrip().removeprefix("#").split()


def _is_header(words: list[str]) -> bool:
    names = _split_tail(words)[0]
    return len(names) >= 1 and names[0].startswith("GPU") and all(_DEVICE.match(w) for w in names)


def _split_tail(words: list[str]) -> tuple[list[str], list[str]]:
    """Device names and affinity column names of a header line (dropping a trailing "...")."""
    words = [w for w in words if w not in ("...", "…")]
    tails: list[str] = []
    while True:
        for tail in _TAILS:
            if tuple(words[-len(tail) :]) == tail:
                tails.insert(0, " ".join(tail))
                words = words[: -len(tail)]
                break
        else:
            return words, tails


def parse_nvidia_smi_topo(text: str) -> TopoMatrix:
    """Parses the matrix printed by `nvidia-smi topo -m` (or `--matrix`), found anywhere in `text`.

    Raises:
        ScenarioError: naming the line (number and text) when the matrix is missing or malformed: an
            unknown cell, a wrong number of cells, a row for an unknown device, a diagonal that is not X,
            or a matrix that is not symmetric.
    """
    if not isinstance(text, str):
        raise ScenarioError(
            f"parse_nvidia_smi_topo: expected the text of the output, got {type(text).__name__}"
        )
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if _is_header(_words(line))), None)
    if start is None:
        raise ScenarioError(
            "nvidia-smi topo: no matrix header (a line of device names starting with GPU0) found"
        )
    header = _words(lines[start])
    devices, tails = _split_tail(header)
    elided = "..." in header or "…" in header
    if len(set(devices)) != len(devices):
        raise ScenarioError(f"nvidia-smi topo line {start + 1}: repeated device name in {lines[start]!r}")
    n = len(devices)
    rows: dict[str, tuple[str | None, ...]] = {}
    cpu: dict[str, str | None] = {}
    numa: dict[str, int | None] = {}
    gpu_numa: dict[str, int | None] = {}
    row_line: dict[str, int] = {}
    for i in range(start + 1, len(lines)):
        words = _words(lines[i])
        if not words or not _DEVICE.match(words[0]):
            break  # the matrix ends at the first line that is not a device row (blank, legend, prose)
        where = f"nvidia-smi topo line {i + 1}"
        label, rest = words[0], [w for w in words[1:] if w not in ("...", "…")]
        if label not in devices:
            if elided:
                continue  # a row for a device whose column the source left out
            raise ScenarioError(
                f"{where}: row for {label!r}, which is not a column of the header: {lines[i]!r}"
            )
        if label in rows:
            raise ScenarioError(f"{where}: second row for {label!r}: {lines[i]!r}")
        cells = rest[:n]
        bad = [c for c in cells if not _CELL.match(c)]
        if (len(cells) < n and not elided) or bad:
            what = f"unknown link kind {bad[0]!r}" if bad else f"{len(cells)} cells for {n} devices"
            raise ScenarioError(f"{where}: {what} (known: {', '.join(KINDS)}, NV#): {lines[i]!r}")
        cells = ["SYS" if c == "SOC" else c for c in cells] + [None] * (n - len(cells))
        if cells[devices.index(label)] not in ("X", None):
            raise ScenarioError(f"{where}: {label} to itself is {cells[devices.index(label)]!r}, expected X")
        extra = rest[n:]
        if len(extra) > len(tails):
            raise ScenarioError(
                f"{where}: {len(extra)} values after the matrix but {len(tails)} affinity "
                f"columns in the header: {lines[i]!r}"
            )
        values = dict(zip(tails, extra, strict=False))
        cpu[label] = _affinity(values.get("CPU Affinity"), where, lines[i])
        numa[label] = _number(values.get("NUMA Affinity"), "NUMA Affinity", where, lines[i])
        gpu_numa[label] = _number(values.get("GPU NUMA ID"), "GPU NUMA ID", where, lines[i])
        rows[label], row_line[label] = tuple(cells), i + 1
    missing = [d for d in devices if d not in rows]
    if missing:
        raise ScenarioError(f"nvidia-smi topo line {start + 1}: no row for column(s) {missing}")
    matrix = tuple(rows[d] for d in devices)
    for a in range(n):
        for b in range(n):
            x, y = matrix[a][b], matrix[b][a]
            if x is not None and y is not None and x != y:
                line = row_line[devices[a]]
                raise ScenarioError(
                    f"nvidia-smi topo line {line}: {devices[a]}->{devices[b]} is {x} but "
                    f"{devices[b]}->{devices[a]} is {y} (the matrix must be symmetric)"
                )
    legend = {}
    for line in lines[start:]:
        m = re.match(r"^\s*#?\s*(NIC\d+)\s*:\s*(\S+)\s*$", line)
        if m:
            legend[m.group(1)] = m.group(2)
    return TopoMatrix(tuple(devices), matrix, cpu, numa, gpu_numa, legend)


def _affinity(value: str | None, where: str, line: str) -> str | None:
    if value is None or value == "N/A":
        return None
    if not _AFFINITY.match(value):
        raise ScenarioError(f"{where}: CPU Affinity {value!r} is not a CPU list like '0-7,64-71': {line!r}")
    return value


def _number(value: str | None, column: str, where: str, line: str) -> int | None:
    if value is None or value == "N/A":
        return None
    if not value.isdigit():
        raise ScenarioError(f"{where}: {column} {value!r} is not a number or N/A: {line!r}")
    return int(value)


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
