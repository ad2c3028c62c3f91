"""XCD -> HBM read latency on the mi300x preset against background memory load (docs/latency.md).

Every XCD reads 64-byte lines from all 8 HBM stacks evenly (the background); a probe read from xcd0 to its
local stack hbm0 and to the farthest stack hbm7 sees the queues that traffic builds on the package's links.
A read is a request (header only) out and a response (line + header) back; links carry both. Each link's
queue is the steady-state model's (kernels.latency through netsim.latency.curves) at the link's speed; the
on-package figures come from the `infinity-fabric-d2d` link preset (per-hop latency, header bytes) and a
2 ns router pipeline per IO die (assumed). The HBM access itself (tens of ns) is not part of the network.

    python examples/latency_mi300x.py [--plot docs/latency_mi300x.png]
"""

from __future__ import annotations

import argparse

import jax
import numpy as np

import netsim.latency as nl
from netsim.topology import mi300x

LINE, HOP_NS, PIPE_NS = 64, nl.link_preset("infinity-fabric-d2d")["latency"] * 1e9, 2.0
HEADER = nl.link_preset("infinity-fabric-d2d")["header_bytes"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plot", help="write the figure (.png)")
    args = ap.parse_args()
    topo = mi300x()
    xcds, hbms = [f"xcd{i}" for i in range(8)], [f"hbm{i}" for i in range(8)]
    # bytes each link carries per read, in response-packet units (LINE + HEADER bytes)
    unit = LINE + HEADER
    pairs = {(x, h): HEADER / unit / 8 for x in xcds for h in hbms}  # requests, spread over 8 stacks
    pairs.update({(h, x): pairs.get((h, x), 0.0) + 1 / 8 for x in xcds for h in hbms})  # responses
    load = nl.topology_load(topo, pairs, "mi300x reads")
    bandwidth = np.array([topo.link[lid].bandwidth for lid in load.channel_names])
    service_ns = unit / bandwidth * 1e9
    load = dataclasses_replace(load, service=service_ns)
    # time unit ns; no fitted losses (an output-queued ideal); buffers in packets, from the link preset
    buffer = nl.link_preset("infinity-fabric-d2d")["buffer_bytes"] // unit
    router = nl.RouterPreset("ideal-ns", PIPE_NS, HOP_NS, 0.0, 0.0, 0.0, 0.0, 0.0, 8, buffer, 0).router()
    # rate: reads per ns per XCD; the busiest link fixes the saturation
    busiest = np.max(load.load * service_ns)
    rates = np.concatenate([np.linspace(0.02, 0.9, 12), 1 - np.geomspace(0.08, 0.004, 10)]) / busiest
    with jax.enable_x64(True):
        out = jax.device_get(nl.curves([load], [1.0], [router], rates))
    wait = np.asarray(out.wait[0])  # [rate, link] ns

    def read_ns(x, h):
        there, back = topo.route(x, h), topo.route(h, x)
        ns = 0.0 * rates
        for path, size in ((there, HEADER), (back, unit)):
            idx = [load.channel_names.index(lid) for lid in path]
            ns = ns + len(path) * (HOP_NS + PIPE_NS) + wait[:, idx].sum(axis=1) * size / unit
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
        ax.plot(per_xcd * 8, remote, label="xcd0 -> hbm7 (3 IO-die hops)")
        ax.set_xlabel("background HBM reads, all 8 XCDs (GB/s)")
        ax.set_ylabel("64 B read, network part (ns)")
        ax.set_title("mi300x preset: read latency under load")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"wrote {args.plot}")


def dataclasses_replace(obj, **kw):
    import dataclasses

    return dataclasses.replace(obj, **kw)


if __name__ == "__main__":
    main()
