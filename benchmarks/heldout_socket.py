"""Does host-memory traffic across sockets obey the P2P socket-link figure? A variant of m01's held-out
study (benchmarks/heldout.py) that answers it with m01's own copies, and what it does to the P2P-off
all_reduce prediction.

    python benchmarks/heldout_socket.py     # ~2 min on 2 CPU cores; progress on stderr, table on stdout

The shipped model routes a host-staged copy between sockets over the socket link at the figure fitted
on P2P copies (21.9 GB/s). m01's P2P=Disabled copies do not slow down across sockets (row 4 is faster
to GPUs 0-3 than to its own socket), and the socket fabric of a 2 x EPYC 7002 server has four x16
links, far above 22 GB/s. The variant gives host-memory traffic on the socket link that fabric's
figure (FABRIC, 4 x16 at PCIe 4.0 rate) with its duplex budget held at heldout.py's 40 GB/s (it does
not bind), refits the per-GPU host budget H and the staging efficiency e on the same P2P-off copies,
and predicts NCCL's SHM all_reduce from them.
"""

from __future__ import annotations

import dataclasses

import heldout as H
import numpy as np

import netsim

GB = H.GB
FABRIC = 4 * 31.5 * GB  # four x16 socket links per EPYC 7002 socket pair, PCIe 4.0 rate per direction
SOFT = ("overhead LL", "overhead Simple", "inefficiency LL", "inefficiency Simple", "hand-over")


def fabric(topo):
    """`topo` with the socket links at the fabric's figure, for host-memory traffic."""
    sockets = ({"socket"}, {"cpu"})
    links = tuple(
        dataclasses.replace(x, bandwidth=FABRIC) if {topo.kind[x.src], topo.kind[x.dst]} in sockets else x
        for x in topo.links
    )
    return dataclasses.replace(topo, links=links)


def host_classify(topo, rid):
    """`heldout.classify`, with the socket link and its duplex budget held at the topology's figures."""
    name = H.classify(topo, rid)
    return None if name in ("socket", "socket duplex") else name


def with_host(theta, host, efficiency):
    out = theta.copy()
    out[H.NAMES.index("staging")] = np.log(host * GB)
    out[H.NAMES.index("staged inflation")] = np.log(1 / efficiency - 1)
    return out


def main():
    topo = netsim.topology.preset("rtx4090-8x-epyc7542")
    on = H.trace("m01_8x4090_2xEPYC7542_p2pBandwidthLatency_p2p_on.txt")
    off = H.trace("m01_8x4090_2xEPYC7542_p2pBandwidthLatency_p2p_off.txt")
    kinds = ("unidirectional", "bidirectional")
    H.log("m01: links on the P2P-on matrices, software on the P2P-on all_reduce")
    copies_on = [H.matrix_data(f"on {k}", topo, on.matrix(k, p2p=True).values, k, "p2p") for k in kinds]
    theta = H.fit(H.initial(), ("pcie", "socket", "socket duplex"), copies_on)
    sizes, times = H.table(H.trace("m01_8x4090_2xEPYC7542_allreduce_p2p_on.txt").nccl("all_reduce")[0])
    coll = H.allreduce_data("on", topo, topo.gpus(), sizes, times, "p2p")
    theta = H.fit(theta, SOFT, [coll], steps=200)
    big = sizes[sizes >= 2**20]

    rows = []
    for label, t, cls in (
        ("socket link at the P2P figure (shipped)", topo, H.classify),
        ("socket link at the fabric figure", fabric(topo), host_classify),
    ):
        matrices = lambda trace, name, t=t, cls=cls: [
            H.matrix_data(f"{name} {k}", t, trace.matrix(k, p2p=False).values, k, "staged", classify=cls)
            for k in kinds
        ]
        fit_on, again = matrices(off, "off"), matrices(on, "again")
        errors = lambda th, data: np.r_[H.errors(th, data[0]), H.errors(th, data[1])]
        H.log(f"{label}: fit H and e on the P2P-off copies (Adam, two starts)")
        free = ("staging", "staged inflation")
        fits = [H.fit(start, free, fit_on, steps=300) for start in (theta, with_host(theta, 28.0, 0.75))]
        value = lambda th: (
            float(np.exp(th[H.NAMES.index("staging")])),
            1 / (1 + float(np.exp(th[H.NAMES.index("staged inflation")]))),
        )
        for th in fits:
            H.log(
                f"  start gave H {value(th)[0] / GB:.1f} GB/s, e {value(th)[1]:.3f}: {H.stats(errors(th, fit_on))}"
            )
        best = min(fits, key=lambda th: float(np.mean(np.abs(errors(th, fit_on)))))
        host, eff = value(best)
        shm = H.allreduce_data("shm", t, t.gpus(), big, np.ones_like(big), "shm", host=host, classify=cls)
        predicted = shm.bandwidth(H.predict(best, shm)) / GB
        rows.append(
            (
                label,
                f"{host / GB:.1f} GB/s / {eff:.3f}",
                H.stats(errors(best, fit_on)),
                H.stats(errors(best, again)),
                f"{predicted[big == 2**20][0]:.2f} / {predicted[big == 2**23][0]:.2f} / {predicted[-1]:.2f}",
            )
        )
    print(
        "\nm01 P2P-off copies and the SHM all_reduce prediction, by the socket link's figure for host traffic\n"
    )
    print(
        "| host traffic across sockets | H / e | in-sample copies | held-out copies (2nd run) | SHM busbw 1M / 8M / 128M (GB/s) |"
    )
    print("|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    H.log("done")


if __name__ == "__main__":
    main()
