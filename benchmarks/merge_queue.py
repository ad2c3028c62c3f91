"""One merge of a mesh permutation, packet by packet, against the latency model's cross-port wait.

A channel of S-cycle packets (first in, first out) takes the packets of `--flows` - 1 sources that crossed a
channel before it (one Bernoulli stream at their summed rate, served first in, first out there) and those of
one local source, each source at the same rate. This is the last merge of the 8x8 mesh transpose's busiest
row (7 flows, 6 from the west port). The model (netsim.kernels.latency) charges the channel's packets the
M/G/1 wait of the cross-port share only, `contention` = 1 - sum of the ports' shares squared, taking the
packets from one port as spaced by the channel before; the simulation shows what near saturation that
spacing leaves (docs/latency.md, "Streams that keep their sources' variability").

    python benchmarks/merge_queue.py
"""

from __future__ import annotations

import argparse

import numpy as np

import netsim.latency as nl


def fifo(arrivals: np.ndarray, service: float) -> tuple[np.ndarray, np.ndarray]:
    """(start of service, wait) of each arrival (sorted) at a first-in, first-out server."""
    start, wait, free = np.empty_like(arrivals), np.empty_like(arrivals), -np.inf
    for i, t in enumerate(arrivals):
        start[i] = max(t, free)
        wait[i] = start[i] - t
        free = start[i] + service
    return start, wait


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flows", type=int, default=7, help="flows on the merged channel (default 7)")
    ap.add_argument("--packet", type=float, default=8.0, help="cycles a packet holds a channel (default 8)")
    ap.add_argument("--cycles", type=int, default=2_000_000, help="cycles simulated per load (default 2e6)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    s, n = args.packet, args.flows
    bernoulli = lambda rate: np.flatnonzero(rng.random(args.cycles) < rate).astype(float)
    west = (n - 1) / n
    contention = 1 - west**2 - (1 / n) ** 2
    variability = nl.booksim().variability
    print(f"{n} flows, {n - 1} from the channel before; {s:g}-cycle packets; contention {contention:.3f}")
    print("utilization   simulated wait   model (cross-port M/G/1)   M/D/1 (Poisson)   wait before")
    for rho in (0.55, 0.78, 0.86, 0.94):
        rate = rho / (n * s)  # packets per cycle per source
        start, before = fifo(bernoulli((n - 1) * rate), s)  # heads leave the channel before as served
        _, wait = fifo(np.sort(np.concatenate([start, bernoulli(rate)])), s)
        model = rho * s * contention * (1 + variability) / (2 * (1 - rho))
        md1 = rho * s / (2 * (1 - rho))
        print(f"{rho:11.2f}   {wait.mean():14.1f}   {model:24.1f}   {md1:15.1f}   {before.mean():11.1f}")


if __name__ == "__main__":
    main()
