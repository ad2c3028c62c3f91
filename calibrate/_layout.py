"""Layout evidence: does a topology match what a trace says of the machine it was measured on?

A trace carries more than its timings: the number of GPUs a table ran on, an `nvidia-smi topo -m` block
(path kinds between GPUs, each GPU's NUMA node) and, in a p2pBandwidthLatencyTest matrix, its own groups
of fast and slow cells. `check_layout` compares each with the topology and says where they disagree,
naming the cells, the likely cause and the layout the matrix implies. Nothing here simulates: the
expected figure of a cell is the bottleneck of the topology's direct route (P2P copies).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from netsim.topology import PcieRouter, Topology, link_class, path_kind
from netsim.traces import NcclTable, P2PMatrix, Trace

__all__ = ["LayoutFinding", "check_layout", "implied_groups"]

#: a group of cells whose measured median is this far (relative) from what the topology's figures
#: predict for it, scaled by the best-matched group, is flagged; m01's groups agree within 2 %
TOLERANCE = 0.08
#: two measured clusters are told apart only when their medians differ by more than this ratio
SPLIT = 1.10


@dataclasses.dataclass(frozen=True)
class LayoutFinding:
    """One disagreement between a trace and a topology.

    Attributes:
        message: what disagrees, the cells, and the likely cause.
        cells: (i, j) device indices of the trace concerned (empty for whole-table findings).
        implied: the layout the trace implies, in words ("one socket of 6 GPUs: pcie_server(6,
            sockets=1)"), or "".
    """

    message: str
    cells: tuple[tuple[int, int], ...] = ()
    implied: str = ""

    def __str__(self) -> str:
        return self.message + (f"; the trace implies {self.implied}" if self.implied else "")


def _label(topo: Topology, route: Sequence[str]) -> str:
    classes = {link_class(topo, x) for x in route}
    if "nvlink" in classes:
        return "over NVLink"
    if classes & {"socket", "socket-host"}:
        return "over the socket link"
    return "within a socket"


def _cells(n: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(n) for j in range(n) if i != j]


def _show(cells: Sequence[tuple[int, int]], limit: int = 8) -> str:
    text = ", ".join(f"{i}->{j}" for i, j in cells[:limit])
    return text + (f" and {len(cells) - limit} more" if len(cells) > limit else "")


def implied_groups(values: np.ndarray, fast: float) -> list[list[int]]:
    """Groups of devices joined by fast cells (both directions at least `fast` bytes/s): the sockets
    (or switches) a matrix implies, as connected components, each sorted."""
    n = values.shape[0]
    parent = list(range(n))

    def root(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for i, j in _cells(n):
        if values[i, j] >= fast and values[j, i] >= fast:
            parent[root(i)] = root(j)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(root(i), []).append(i)
    return sorted(groups.values())


def _describe(groups: list[list[int]]) -> str:
    sizes = [len(g) for g in groups]
    show = " | ".join(
        f"GPUs {g[0]}-{g[-1]}" if g == list(range(g[0], g[-1] + 1)) else f"GPUs {g}" for g in groups
    )
    if len(groups) == 1:
        return f"one socket of {sizes[0]} GPUs ({show}): pcie_server({sizes[0]}, sockets=1), --topology pcie:{sizes[0]}"
    if len(set(sizes)) == 1:
        return (
            f"{len(groups)} groups of {sizes[0]} GPUs joined by slower paths ({show}): "
            f"pcie_server({sum(sizes)}, sockets={len(groups)}), --topology pcie:{sum(sizes)},sockets={len(groups)}"
        )
    return f"groups {show} joined by slower paths"


def _two_clusters(x: np.ndarray) -> tuple[np.ndarray, float, float] | None:
    """The split of log values into a slow and a fast cluster (best 1-D threshold), when their medians
    differ by more than SPLIT; else None. Returns (fast mask, slow median, fast median)."""
    order = np.sort(np.log(x))
    if len(order) < 2:
        return None
    best, cut = np.inf, None
    for k in range(1, len(order)):
        lo, hi = order[:k], order[k:]
        cost = np.sum((lo - lo.mean()) ** 2) + np.sum((hi - hi.mean()) ** 2)
        if cost < best:
            best, cut = cost, 0.5 * (order[k - 1] + order[k])
    fast = np.log(x) > cut
    if fast.all() or not fast.any():  # every value alike
        return None
    slow_m, fast_m = float(np.median(x[~fast])), float(np.median(x[fast]))
    return (fast, slow_m, fast_m) if fast_m > SPLIT * slow_m else None


def _matrix_findings(m: P2PMatrix, topo: Topology, gpus: Sequence[str], where: str) -> list[LayoutFinding]:
    n = m.n
    cells = _cells(n)
    measured = np.array([m.values[i, j] for i, j in cells])
    routes = [topo.route(gpus[i], gpus[j]) for i, j in cells]
    expected = np.array([min(topo.link[x].bandwidth for x in r) for r in routes])
    labels = [_label(topo, r) for r in routes]
    out: list[LayoutFinding] = []
    names = sorted(set(labels), key=labels.index)
    groups = {g: np.array([lab == g for lab in labels]) for g in names}
    med = {g: float(np.median(measured[k])) for g, k in groups.items()}
    exp = {g: float(np.median(expected[k])) for g, k in groups.items()}
    # pairs within a socket set the scale (the machine's own PCIe rate), else the largest group
    ref = "within a socket" if "within a socket" in names else max(names, key=lambda g: groups[g].sum())
    scale = med[ref] / exp[ref]
    for g in names:
        if g == ref:
            continue
        want = scale * exp[g]
        if abs(med[g] / want - 1) <= TOLERANCE:
            continue
        alike = min(names, key=lambda h: abs(np.log(med[g] / (scale * exp[h]))))
        hit = [c for c, k in zip(cells, groups[g], strict=True) if k]
        like = (
            f"measured like pairs {alike} ({med[g] / 1e9:.1f} GB/s)"
            if alike != g
            else f"measured at {med[g] / 1e9:.1f} GB/s"
        )
        why = (
            "the machine likely has no socket link between these GPUs (fewer sockets, or GPUs numbered "
            "differently), or the topology is another machine's"
            if g == "over the socket link" and med[g] > want
            else "the topology's figure for this path does not fit this machine"
        )
        out.append(
            LayoutFinding(
                f"{where}: cells {_show(hit)} {like}, but the topology routes them {g} "
                f"(expected ~{want / 1e9:.1f} GB/s): {why}",
                tuple(hit),
            )
        )
    # the matrix's own fast and slow cells, within a group the topology treats alike
    for g in names:
        split = _two_clusters(measured[groups[g]])
        if split is None:
            continue
        fast, slow_m, fast_m = split
        mine = [c for c, k in zip(cells, groups[g], strict=True) if k]
        hit = [c for c, f in zip(mine, fast, strict=True) if not f]
        out.append(
            LayoutFinding(
                f"{where}: cells {_show(hit)} measured slower ({slow_m / 1e9:.1f} GB/s) than the other cells "
                f"{g} ({fast_m / 1e9:.1f} GB/s), which the topology treats alike: a link it lacks (a socket "
                "link, a switch uplink) or a degraded path",
                tuple(hit),
            )
        )
    if out:
        fast = (
            np.sqrt(np.min(measured) * np.max(measured))
            if np.max(measured) > SPLIT * np.min(measured)
            else 0.0
        )
        implied = _describe(implied_groups(m.values, fast))
        out = [dataclasses.replace(f, implied=implied) for f in out]
    return out


def check_layout(trace: Trace, topo: Topology) -> list[LayoutFinding]:
    """Where `trace` and `topo` disagree on the machine's layout (empty when they agree).

    Checked: each nccl-tests table's GPU count against the topology's; an `nvidia-smi topo -m` block's
    GPU count, path kinds (PCIe servers: `path_kind`) and NUMA nodes; the P2P=Enabled bandwidth matrices'
    cells, grouped as the topology routes them (within a socket, over the socket link, over NVLink),
    against the topology's figures, and each group's own fast and slow cells. Matrices with P2P off (or
    titled P2P=Enabled where the connectivity matrix denies P2P) are not checked.
    """
    gpus = topo.gpus()
    out: list[LayoutFinding] = []
    connect = trace.connectivity()
    for t in trace.tables:
        where = f"{trace.source}:{getattr(t, 'line', '?')}"
        if isinstance(t, NcclTable) and t.n_gpus and t.n_gpus < len(gpus) and not t.visible_devices:
            out.append(
                LayoutFinding(
                    f"{where}: {t.op} ran on {t.n_gpus} GPUs, taken as {gpus[0]}..{gpus[t.n_gpus - 1]} of "
                    f"the {len(gpus)}-GPU topology {topo.name!r}: check that they sit as on the measured machine "
                    f"(a smaller box may be pcie_server({t.n_gpus}, sockets=1))"
                )
            )
        elif isinstance(t, P2PMatrix) and t.p2p and t.kind == "unidirectional" and t.n <= len(gpus):
            if connect is not None and connect.shape == t.values.shape and not connect.all():
                continue  # "P2P=Enabled" without P2P access (a stock driver): host-staged copies
            out += _matrix_findings(t, topo, gpus, where)
    for table in trace.topo():
        out += _topo_findings(table.matrix, topo, f"{trace.source}:{table.line}")
    return out


def _topo_findings(smi, topo: Topology, where: str) -> list[LayoutFinding]:
    gpus, theirs = topo.gpus(), smi.gpus
    if len(theirs) != len(gpus):
        return [
            LayoutFinding(
                f"{where}: nvidia-smi topo lists {len(theirs)} GPUs, the topology {topo.name!r} {len(gpus)}",
                implied="the trace's own layout: netsim.topology.load(<this nvidia-smi topo file>)",
            )
        ]
    out = []
    if isinstance(topo.router, PcieRouter):
        diff = []
        for i, j in _cells(len(gpus)):
            kind, ours = smi.kind(theirs[i], theirs[j]), path_kind(topo, gpus[i], gpus[j])
            if kind and kind != ours and not (kind.startswith("NV") and ours.startswith("NV")):
                diff.append(((i, j), kind, ours))
        if diff:
            cells = tuple(c for c, _, _ in diff)
            sample = "; ".join(f"{i}->{j} {k} vs {o}" for (i, j), k, o in diff[:4])
            out.append(
                LayoutFinding(
                    f"{where}: path kinds differ from the topology's on {len(diff)} cells ({sample})",
                    cells,
                    "the trace's own layout: netsim.topology.load(<this nvidia-smi topo file>)",
                )
            )
        home = topo.router.home
        numa = [smi.numa_affinity.get(g) for g in theirs]
        if all(x is not None for x in numa):
            same_t = {(i, j) for i, j in _cells(len(gpus)) if numa[i] == numa[j]}
            same_o = {(i, j) for i, j in _cells(len(gpus)) if home[gpus[i]] == home[gpus[j]]}
            if same_t != same_o:
                cells = tuple(sorted(same_t ^ same_o))
                out.append(
                    LayoutFinding(
                        f"{where}: NUMA affinity groups the GPUs otherwise than the topology "
                        f"(pairs {_show(list(cells))})",
                        cells,
                    )
                )
    return out
