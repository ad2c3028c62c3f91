"""XCD -> HBM read latency on the mi300x preset against background memory load (docs/latency.md).

Every XCD reads 64-byte lines from all 8 HBM stacks evenly (the background); a probe read from xcd0 to its
local stack hbm0 and to the farthest stack hbm7 sees the queues that traffic builds on the package's links.
A read is a request out and a response (one line) back; links carry both. Every figure comes from the
preset's links (netsim.topology.mi300x): one-way latencies XCD-IOD 5 ns, IOD-IOD 30 ns, IOD-HBM 100 ns (the
memory controller and DRAM access included), bandwidths, and their packets (64 B, no header counted on top,
4 KiB buffers: ON_PACKAGE). A request then takes no link time of its own; it pays the latencies. Each link's
queue is the steady-state model's (kernels.latency through netsim.latency.curves) at the link's speed, an
output-queued ideal (no fitted losses) with M/D/1 service.

    python examples/latency_mi300x.py [--plot docs/latency_mi300x.png]
"""

from __future__ import annotations

import argparse
import dataclasses

import jax
import numpy as np

import netsim.latency as nl
from netsim.topology import mi300x

LINE = 64  # bytes a read returns


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plot", help="write the figure (.png)")
    args = ap.parse_args()
    topo = mi300x()
    xcds, hbms = [f"xcd{i}" for i in range(8)], [f"hbm{i}" for i in range(8)]
    links = [topo.link[lid] for lid in topo.link]
    unit = LINE + links[0].header_bytes  # one response packet; the on-package links share one format
    if any(
        lk.packet_bytes != LINE or lk.header_bytes != links[0].header_bytes for lk in links if lk.packet_bytes
    ):
        raise SystemExit("mi300x preset: expected 64 B packets with one header size on every packetized link")
    request = links[0].header_bytes  # a request is a header alone
    # bytes each link carries per read, in response-packet units
    pairs = {(x, h): request / unit / 8 for x in xcds for h in hbms}  # requests, spread over 8 stacks
    pairs.update({(h, x): pairs.get((h, x), 0.0) + 1 / 8 for x in xcds for h in hbms})  # responses
    load = nl.topology_load(topo, pairs, "mi300x reads")
    bandwidth = np.array([topo.link[lid].bandwidth for lid in load.channel_names])
    service_ns = unit / bandwidth * 1e9
    load = dataclasses.replace(load, service=service_ns)
    # time unit ns; the links' own latencies are added per path below, so no pipeline or hop figure here;
    # buffers in packets (the preset's 4 KiB)
    buffer = int(links[0].buffer_bytes // unit)
    router = nl.RouterPreset("ideal-ns", 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 8, buffer, 0).router()
    # rate: reads per ns per XCD; the busiest link fixes the saturation
    busiest = np.max(load.load * service_ns)
    rates = np.concatenate([np.linspace(0.02, 0.9, 12), 1 - np.geomspace(0.08, 0.004, 10)]) / busiest
    with jax.enable_x64(True):
        out = jax.device_get(nl.curves([load], [1.0], [router], rates))
    wait = np.asarray(out.wait[0])  # [rate, link] ns

    def read_ns(x, h):
        ns = 0.0 * rates
        for path, size in ((topo.route(x, h), request), (topo.route(h, x), unit)):
            idx = [load.channel_names.index(lid) for lid in path]
            ns = (
                ns
                + sum(topo.link[lid].latency for lid in path) * 1e9
                + wait[:, idx].sum(axis=1) * size / unit
            )
            ns = ns + size / min(topo.link[lid].bandwidth for lid in path) * 1e9  # serialization
        return ns

    per_xcd = rates * LINE  # bytes per ns = GB/s of background reads per XCD
    local, remote = read_ns("xcd0", "hbm0"), read_ns("xcd0", "hbm7")
    print(
        f"busiest link: {load.channel_names[int(np.argmax(load.load * service_ns))]}; saturation at "
        f"{LINE / busiest:.1f} GB/s of reads per XCD ({8 * LINE / busiest:.0f} GB/s in all)"
    )
    print(f"{'GB/s per XCD':>13} {'xcd0->hbm0 ns':>14} {'xcd0->hbm7 ns':>14}")
    for i in range(0, rates.size, 3):
        print(f"{per_xcd[i]:13.1f} {local[i]:14.1f} {remote[i]:14.1f}")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5.5, 3.6))
        ax.plot(per_xcd * 8, local, label="xcd0 -> hbm0 (local)")
        ax.plot(per_xcd * 8, remote, label="xcd0 -> hbm7 (2 IO-die links each way)")
        ax.set_xlabel("background HBM reads, all 8 XCDs (GB/s)")
        ax.set_ylabel("64 B read (ns)")
        ax.set_title("mi300x preset: read latency under load")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
