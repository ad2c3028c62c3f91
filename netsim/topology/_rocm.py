"""An AMD GPU server shaped like `rocm-smi --showtopo` (and `--shownodesbw`) output, from the matrices
`netsim.traces` reads."""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from .._errors import ScenarioError
from ..traces import RocmMatrix, RocmNuma, Trace, read_trace
from ._common import bandwidth, latency, transit_route
from ._topology import Path, SinglePath, Topology, cable

#: one Infinity Fabric (XGMI) link per direction: csv row "AMD MI250 (CDNA2),GCD,GCD (one IF link)"
XGMI = "50 GB/s"
#: a GPU's host link per direction: csv row "AMD MI250X (Frontier node),CPU (EPYC),GCD" (36 + 36 GB/s)
HOST = "36 GB/s"
#: between two NUMA nodes' host sides (assumed: one socket link, as netsim's PCIe servers' SOCKET)
SOCKET = "40 GB/s"


@dataclasses.dataclass(frozen=True)
class XgmiRouter(SinglePath):
    """Least latency, then fewest hops; between two GPUs through GPUs (XGMI), root ports and CPUs, for
    anything else through root ports and CPUs only: GPUs forward their peers' traffic over XGMI, never a
    host copy."""

    def route(self, topo: Topology, src: str, dst: str) -> Path:
        peers = topo.kind.get(src) == topo.kind.get(dst) == "gpu"
        return transit_route(topo, src, dst, ("gpu", "rc", "cpu") if peers else ("rc", "cpu"))


def rocm_server(
    source: str | os.PathLike | Trace,
    *,
    xgmi_bandwidth=XGMI,
    host_bandwidth=HOST,
    socket_bandwidth=SOCKET,
    xgmi_latency="100 ns",
    host_latency="500 ns",
    socket_latency="500 ns",
    name: str | None = None,
) -> Topology:
    """A GPU server shaped like `rocm-smi --showtopo` output (a file, or a trace read from one), with the
    XGMI bandwidths of `rocm-smi --shownodesbw` when the trace holds that matrix too.

    GPU i of rocm-smi is node "gpu{i}". Each GPU pair of link type XGMI one hop apart (the Hops matrix;
    without it, every XGMI pair) gets a direct cable: per direction the maximum of `--shownodesbw`'s
    "min-max" cell where given, else `xgmi_bandwidth`. Each GPU has a host link through its own root port
    "rc{i}" to "cpu{k}", its NUMA node from the "Numa Nodes" block (node 0 without one); NUMA nodes are
    joined pairwise by socket links. Routes (`XgmiRouter`) take the least latency, then the fewest hops:
    with XGMI hops cheaper than host hops, GPUs two XGMI hops apart route over XGMI (rocm-smi's Hops say 2
    there), PCIE pairs and host copies through the host. With both a Link Type and a Hops matrix, every
    XGMI pair's route is checked against its hop count.

    Args:
        source: a path, or a `netsim.traces.Trace` from `read_trace`, holding a Link Type matrix (from
            `--showtopo` or `--showtopotype`) or a Bandwidth matrix (`--shownodesbw`), or both.
        xgmi_bandwidth: per XGMI cable per direction when no bandwidth matrix says (default: one
            Infinity Fabric link).
        host_bandwidth, socket_bandwidth: GPU <-> host and NUMA node <-> NUMA node, per direction.
        xgmi_latency, host_latency, socket_latency: per link (s; assumed round figures, XGMI below the
            host path so that routes prefer it, as the Hops matrix does).
        name: default the file's name without extension.

    Raises:
        TraceError: the file's rocm-smi output is malformed ("file:line: why", from `read_trace`).
        ScenarioError: naming the file, line and cells: no Link Type or Bandwidth matrix, matrices of
            different sizes, an asymmetric matrix, a link type other than XGMI or PCIE, an XGMI pair that
            --shownodesbw gives no bandwidth, or a route whose XGMI hops differ from the Hops matrix.
    """
    trace = source if isinstance(source, Trace) else read_trace(source)
    where = trace.source
    xgmi = (bandwidth(xgmi_bandwidth, "xgmi_bandwidth"), latency(xgmi_latency, "xgmi_latency"))
    host = (bandwidth(host_bandwidth, "host_bandwidth"), latency(host_latency, "host_latency"))
    sock = (bandwidth(socket_bandwidth, "socket_bandwidth"), latency(socket_latency, "socket_latency"))
    last = lambda kind: (trace.rocm(kind) or (None,))[-1]  # a log with several runs: the last one counts
    types, hops, bw = last("link_type"), last("hops"), last("bandwidth")
    numa = next((t for t in reversed(trace.tables) if isinstance(t, RocmNuma)), None)
    if types is None and bw is None:
        raise ScenarioError(
            f"{where}: no rocm-smi 'Link Type between two GPUs' (--showtopo) or 'Bandwidth' (--shownodesbw) "
            "matrix to build a server from"
        )
    present = [m for m in (types, hops, bw) if m is not None]
    n = present[0].n
    for m in present:
        if m.n != n:
            raise ScenarioError(
                f"{where}:{m.line}: rocm-smi {m.title!r} has {m.n} GPUs, {present[0].title!r} at line "
                f"{present[0].line} has {n}"
            )
        _check_symmetric(where, m)
    if numa is not None and len(numa.node) > n:
        raise ScenarioError(
            f"{where}:{numa.line}: rocm-smi 'Numa Nodes' names {len(numa.node)} GPUs, the matrices {n}"
        )

    pairs: dict[tuple[int, int], float] = {}
    for i in range(n):
        for j in range(i + 1, n):
            kind = (
                types.cells[i][j].upper()
                if types is not None
                else ("XGMI" if bw.values[i, j] > 0 else "PCIE")
            )
            if kind not in ("XGMI", "PCIE"):
                raise ScenarioError(
                    f"{where}:{types.line + 1 + i}: rocm-smi link type GPU{i} -> GPU{j} is {types.cells[i][j]!r}; "
                    "netsim knows XGMI and PCIE"
                )
            direct = kind == "XGMI" and (hops is None or hops.values[i, j] == 1)
            if not direct:
                continue
            if bw is not None and not bw.values[i, j] > 0:
                raise ScenarioError(
                    f"{where}:{bw.line + 1 + i}: GPU{i} -> GPU{j} is XGMI one hop apart (line "
                    f"{types.line + 1 + i}), but rocm-smi --shownodesbw gives it no bandwidth "
                    f"({bw.cells[i][j]!r})"
                )
            pairs[(i, j)] = float(bw.values[i, j]) if bw is not None else xgmi[0]

    node = [int(numa.node[i]) if numa is not None and i < len(numa.node) else 0 for i in range(n)]
    node = [max(k, 0) for k in node]  # -1: the block has no line for that GPU (or no NUMA): node 0
    cpus = sorted(set(node))
    kind = {f"gpu{i}": "gpu" for i in range(n)} | {f"rc{i}": "rc" for i in range(n)}
    kind |= {f"cpu{k}": "cpu" for k in cpus}
    links = []
    for (i, j), figure in pairs.items():
        links += cable(f"gpu{i}", f"gpu{j}", figure, xgmi[1])
    for i in range(n):
        links += cable(f"gpu{i}", f"rc{i}", *host)
        links += cable(f"rc{i}", f"cpu{node[i]}", *host)
    for a, b in ((a, b) for k, a in enumerate(cpus) for b in cpus[k + 1 :]):
        links += cable(f"cpu{a}", f"cpu{b}", *sock)
    default = os.path.splitext(os.path.basename(where))[0] or "rocm-server"
    topo = Topology(
        name or default,
        tuple(links),
        kind,
        XgmiRouter(),
        tuple(f"gpu{i}" for i in range(n)),
    )
    if hops is not None and types is not None:
        _check_hops(where, topo, types, hops)
    return topo


def _check_symmetric(where: str, m: RocmMatrix) -> None:
    cells = np.asarray(m.cells, dtype=object)
    for i, j in zip(*np.nonzero(cells != cells.T), strict=True):
        if i < j:
            raise ScenarioError(
                f"{where}:{m.line + 1 + i}: rocm-smi {m.title!r} is not symmetric: GPU{i} -> GPU{j} is "
                f"{m.cells[i][j]!r}, GPU{j} -> GPU{i} (line {m.line + 1 + j}) is {m.cells[j][i]!r}"
            )


def _check_hops(where: str, topo: Topology, types: RocmMatrix, hops: RocmMatrix) -> None:
    """Every XGMI pair's route crosses as many GPU <-> GPU links as rocm-smi's Hops matrix says."""
    for i in range(hops.n):
        for j in range(hops.n):
            if i == j or types.cells[i][j].upper() != "XGMI":
                continue
            route = topo.route(f"gpu{i}", f"gpu{j}")
            xgmi = sum(topo.kind[topo.link[x].src] == topo.kind[topo.link[x].dst] == "gpu" for x in route)
            if xgmi != len(route) or xgmi != hops.values[i, j]:
                raise ScenarioError(
                    f"{where}:{hops.line + 1 + i}: rocm-smi says GPU{i} -> GPU{j} is XGMI, "
                    f"{int(hops.values[i, j])} hop(s), but the XGMI links of the one-hop pairs reach it by "
                    f"{' '.join(route)} (a partial or inconsistent --showtopo)"
                )
