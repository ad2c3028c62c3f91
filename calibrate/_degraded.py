"""Degraded transports: a collective table measured far below what its topology carries, and the named
transports that could explain it.

NCCL picks a transport per ring hop: P2P (direct copies over PCIe or NVLink), SHM (through a host buffer,
when P2P is off or unavailable), or its network transport (over sockets: inside a container without
P2P and without a shared /dev/shm, or with NCCL_SHM_DISABLE=1, GPUs of one box talk over loopback TCP).
Each has a busbw ceiling on a topology, the per-hop rate of a ring (all_reduce's busbw is the rate of its
slowest hop), written here in closed form from the topology's links and shared resources:

- "p2p": the slowest hop's direct route (its narrowest link).
- "shm": the slowest hop's host route through the receiver's memory (`transport.host_route`), and each
  GPU's host budget H (`gpuN staging`, as cudaMemcpy's copy engines see it), which carries its outgoing
  and its incoming hop: rate <= gain x H / 2, NCCL's kernels keeping `SM_HOST_GAIN` x what copy engines do.
- "staged": cudaMemcpy through a pinned buffer (copy engines, NCCL_SHM_USE_CUDA_MEMCPY=1, or a stock
  driver's "P2P" that the hardware bounces through the host): the host route and H / 2, times the
  staging efficiency (`CostModel`'s `staged_efficiency`, 0.77 on m01).
- "socket": NCCL's network transport over loopback sockets: proxy threads copy each chunk to host
  memory and send it over TCP through the host's loopback path, which all of the ring's hops share:
  the SHM ceiling, and at most `socket_bandwidth` / hops per hop (SOCKET_BANDWIDTH, see there), a hop
  between NUMA nodes counting CROSS_SOCKET_HOP hops (`socket_hops`).

A table whose plateau (the median busbw of its three largest sizes) is below DEGRADED x the ceiling of
the transport it says it used (P2P unless NCCL_P2P_DISABLE or the trace says P2P is unavailable) is
flagged, with every candidate's ceiling and how far it is from the plateau.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from netsim.topology import SM_HOST_GAIN, Topology, host_gain

from ._calibrate import ranks_of, refusal
from ._model import predict
from .transport import home_memory, host_route

__all__ = [
    "CROSS_SOCKET_HOP",
    "DEGRADED",
    "SOCKET_BANDWIDTH",
    "TRANSPORTS",
    "TransportReport",
    "check_transports",
    "copy_report",
    "socket_hops",
    "socket_params",
    "transport_ceilings",
]

#: a plateau below this fraction of its transport's ceiling is flagged as degraded
DEGRADED = 0.5
#: NCCL's socket transport over loopback, all hops together (bytes/s): an anchor, not a held-out figure.
#: m05's 2-GPU NCCL_P2P_DISABLE=1 container run (3.88 GB/s busbw, two hops within one NUMA node) gives ~8;
#: its 4-GPU run is then predicted at 1.68 against 1.40 measured (2.0 with cross-socket hops counted as
#: local ones). Override with socket_bandwidth (`netsim predict --socket-bandwidth`)
SOCKET_BANDWIDTH = 8e9
#: Loopback TCP copies each byte twice on the CPU (send() into a socket buffer on the sender's node,
#: recv() out of it), one thread a copy, at a rate bound by memory latency (a core's outstanding misses).
#: A hop between NUMA nodes makes recv() read remote memory, at ~1.75x the latency (80 against 140 ns on
#: two-socket servers; remote accesses take 1.5-2x as long), so it takes (1 + 1.75) / 2 of a local hop's
#: CPU time. A physical figure, not fitted: m05's 4-GPU run (two of its four hops between sockets) is a
#: prediction from the 2-GPU run's SOCKET_BANDWIDTH.
CROSS_SOCKET_HOP = (1 + 1.75) / 2
TRANSPORTS = {
    "p2p": "direct P2P copies over PCIe/NVLink",
    "shm": "NCCL SHM through a host buffer (P2P off or unavailable)",
    "staged": "cudaMemcpy staging through a pinned host buffer (copy engines; a stock driver's bounced 'P2P')",
    "socket": "NCCL network transport over loopback TCP sockets (no P2P, no shared memory: containers)",
}


def _budget(staged: Topology, gpu: str) -> float:
    for r in staged.shared:
        if r.id == f"{gpu} staging":
            return r.capacity
    return np.inf


def socket_hops(staged: Topology, ranks: Sequence[str]) -> float:
    """Hops of a ring over `ranks` (two for two ranks), one between GPUs of different home memories (NUMA
    nodes of `staged`, the P2P-off twin) counting CROSS_SOCKET_HOP: the CPU copy work of the socket
    transport's loopback, in local hops."""
    hops = zip(ranks, [*ranks[1:], ranks[0]], strict=True)
    return sum(CROSS_SOCKET_HOP if home_memory(staged, a) != home_memory(staged, b) else 1.0 for a, b in hops)


def transport_ceilings(
    topo: Topology,
    staged: Topology,
    ranks: Sequence[str],
    *,
    efficiency: float = 0.77,
    socket_bandwidth: float = SOCKET_BANDWIDTH,
) -> dict[str, float]:
    """Busbw ceiling (bytes/s) of a ring over `ranks` per transport (see the module docstring); `topo`
    with P2P on, `staged` its P2P-off twin (host routes, host budgets); only "p2p" where `staged` has no
    host memory."""
    hops = list(zip(ranks, [*ranks[1:], ranks[0]], strict=True))
    narrow = lambda t, route: min(t.link[x].bandwidth for x in route)
    p2p = min(narrow(topo, topo.route(a, b)) for a, b in hops)
    if not staged.nodes_of("mem"):  # no host memory (an NVSwitch board on its own): P2P is the only way
        return {"p2p": p2p}
    links = min(narrow(staged, host_route(staged, a, b, home_memory(staged, b))) for a, b in hops)
    host = min(_budget(staged, g) for g in ranks) / host_gain(staged) / 2  # copy engines' share each way
    shm = min(links, SM_HOST_GAIN * host)
    return {
        "p2p": p2p,
        "shm": shm,
        "staged": efficiency * min(links, host),
        "socket": min(shm, float(socket_bandwidth) / socket_hops(staged, ranks)),
    }


@dataclasses.dataclass(frozen=True)
class TransportReport:
    """A collective table against the transports' ceilings.

    Attributes:
        table: the table's label (file:line op xN).
        plateau: measured busbw at the largest sizes (bytes/s).
        declared: the transport the table says it used ("p2p" or "shm").
        ceilings: transport -> busbw ceiling (bytes/s).
        degraded: plateau < DEGRADED x the declared transport's ceiling.
        quantity: "busbw" (collectives) or "bandwidth" (copies: the median cell).
    """

    table: str
    plateau: float
    declared: str
    ceilings: dict[str, float]
    degraded: bool
    quantity: str = "busbw"

    def error(self, transport: str) -> float:
        """(ceiling - plateau) / plateau: how far `transport` is from explaining the table."""
        return self.ceilings[transport] / self.plateau - 1.0

    def ranked(self) -> list[str]:
        """Transports, the closest to the plateau first."""
        return sorted(self.ceilings, key=lambda t: abs(np.log(self.ceilings[t] / self.plateau)))

    def __str__(self) -> str:
        head = (
            f"{self.table}: {self.quantity} plateau {self.plateau / 1e9:.2f} GB/s is "
            f"{self.plateau / self.ceilings[self.declared]:.0%} of what {self.declared} carries on this topology "
            f"({self.ceilings[self.declared] / 1e9:.1f} GB/s)"
        )
        if not self.degraded:
            return head
        cands = ", ".join(
            f"{t} {self.ceilings[t] / 1e9:.2f} GB/s ({self.error(t):+.0%})" for t in self.ranked()
        )
        best = min(abs(self.error(t)) for t in self.ceilings)
        tail = (
            "none of them within 25 %: a transport netsim does not model"
            if best > 0.25
            else ("choose one with --transport" if self.quantity == "busbw" else "")
        )
        return f"{head}: likely a degraded transport. Candidates, closest first: {cands}" + (
            f" ({tail})" if tail else ""
        )


def check_transports(
    trace,
    topo: Topology,
    staged: Topology,
    *,
    group: str = "out-of-place",
    socket_bandwidth: float = SOCKET_BANDWIDTH,
) -> list[TransportReport]:
    """A `TransportReport` per collective table of `trace` that `topo` can hold (see `refusal`), and per
    unidirectional P2P=Enabled copy matrix (`copy_report`)."""
    from netsim.traces import NcclTable, P2PMatrix

    connect = trace.connectivity()
    out = []
    for t in trace.tables:
        if isinstance(t, P2PMatrix) and t.kind == "unidirectional" and t.p2p and refusal(t, topo) is None:
            allowed = connect is None or connect.shape != t.values.shape or bool(connect.all())
            out.append(
                copy_report(f"{trace.source}:{t.line} unidirectional", t.values, topo, staged, allowed)
            )
            continue
        if not isinstance(t, NcclTable) or refusal(t, topo) is not None or t.n_gpus < 2:
            continue
        busbw = t.column("busbw", group)
        keep = t.usable[:, t.groups.index(group)] & np.isfinite(busbw) & (busbw > 0)
        if keep.sum() < 1:
            continue
        order = np.argsort(t.size[keep])[::-1][:3]
        plateau = float(np.median(busbw[keep][order]))
        ranks = ranks_of(t, topo)
        direct = trace.used_p2p(t)
        ceilings = transport_ceilings(topo, staged, ranks, socket_bandwidth=socket_bandwidth)
        declared = "p2p" if direct else "shm"
        if declared not in ceilings:
            continue
        degraded = plateau < DEGRADED * ceilings[declared]
        name = f"{trace.source}:{t.line} {t.op} x{len(ranks)}"
        out.append(TransportReport(name, plateau, declared, ceilings, degraded))
    return out


def socket_params(spec, params, hops: float, socket_bandwidth: float = SOCKET_BANDWIDTH):
    """`params` with every GPU's host budget (`gpuN staging`) at 2 x socket_bandwidth / hops (`socket_hops`):
    a ring over the P2P-off twin then runs at the socket transport's ceiling (each GPU carries its
    outgoing and incoming hop through host memory). The parameter is the copy engines' figure and a
    P2P-off collective runs on the SHM twin (`SM_HOST_GAIN` x it), hence the division."""
    budget = np.log(2.0 * float(socket_bandwidth) / hops / SM_HOST_GAIN)
    mask = np.array([s.endswith(" staging") for s in spec.shared], bool)
    log_shared = np.where(mask, budget, np.asarray(params.log_shared))
    return dataclasses.replace(params, log_shared=log_shared)


def predict_socket(
    spec,
    params,
    experiments: Sequence,
    staged: Topology,
    socket_bandwidth: float = SOCKET_BANDWIDTH,
    *,
    throw: bool = True,
):
    """`predict` with every collective over NCCL's socket transport: each experiment under `socket_params`
    at its own ring's hops on `staged`, the P2P-off twin (a copy: two). One `netsim.BatchRun` over the
    points of all experiments in order, as `predict` gives."""
    hops = lambda e: socket_hops(staged, e.ranks) if e.ranks else 2.0
    runs = [
        predict(socket_params(spec, params, hops(e), socket_bandwidth), [e], throw=False) for e in experiments
    ]
    run = dataclasses.replace(
        runs[0],
        status=np.concatenate([r.status for r in runs]),
        events=np.concatenate([r.events for r in runs]),
        outputs={"makespan": np.concatenate([r["makespan"] for r in runs])},
    )
    return run.check(" + ".join(e.name for e in experiments)) if throw else run


def copy_report(
    name: str, values, topo: Topology, staged: Topology, p2p: bool = True, *, efficiency: float = 0.77
) -> TransportReport:
    """A unidirectional copy matrix (bytes/s, device i to j) against the copy transports: "p2p" (the
    direct route's narrowest link) and "staged" (cudaMemcpy's bounce: the staging efficiency x the host
    route through the source's memory and the GPU's host budget), medians over the cells; `p2p`: whether
    the table's copies were P2P (a P2P=Enabled title where the connectivity matrix allows it)."""
    gpus = topo.gpus()
    n = values.shape[0]
    cells = [(i, j) for i in range(n) for j in range(n) if i != j]
    narrow = lambda t, route: min(t.link[x].bandwidth for x in route)
    direct = [narrow(topo, topo.route(gpus[i], gpus[j])) for i, j in cells]
    bounce = [
        efficiency
        * min(
            narrow(staged, host_route(staged, gpus[i], gpus[j], home_memory(staged, gpus[i]))),
            _budget(staged, gpus[i]) / host_gain(staged),
            _budget(staged, gpus[j]) / host_gain(staged),
        )
        for i, j in cells
    ]
    plateau = float(np.median([values[i, j] for i, j in cells]))
    ceilings = {"p2p": float(np.median(direct)), "staged": float(np.median(bounce))}
    declared = "p2p" if p2p else "staged"
    degraded = plateau < DEGRADED * ceilings[declared]
    return TransportReport(name, plateau, declared, ceilings, degraded, "bandwidth")
