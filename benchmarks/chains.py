"""Long dependency chains: the engine's time per event as the padded item count grows but the active set does not.

Cases (each item after the previous one of its chain, so few items are ever active at once):
- tasks: one chain of n tasks of 1 ms on one device;
- flows: one chain of n flows of 1 MB over a two-link path;
- wide: 100 chains of n / 100 tasks of 1-2 ms (seeded), on 8 devices (chain c on device c % 8).

Each case is simulated twice with `netsim.simulate` (exact engine); the second run's time is reported
(`Result.wall_time`, compile excluded), with the events and time per event. One XLA CPU thread unless
--cpu-threads says otherwise.

    python benchmarks/chains.py                                  # tasks, flows, wide at 1e3 and 1e4
    python benchmarks/chains.py --cases tasks --items 1000 10000 30000 100000
"""

from __future__ import annotations

import argparse
import os
import time

from netsim import cpu_threads_label, set_cpu_threads


def chain_scenario(case: str, n: int):
    """The scenario of one case with n items."""
    import numpy as np

    from netsim import Flow, Link, Scenario, Task

    if case == "tasks":
        tasks = [Task(f"t{i}", "gpu", 1e-3, after=(f"t{i - 1}",) if i else ()) for i in range(n)]
        return Scenario([], [], tasks=tasks, name=f"chain-tasks-{n}")
    if case == "flows":
        links = [Link("a-b", "a", "b", 10e9, 1e-6), Link("b-c", "b", "c", 10e9, 1e-6)]
        flows = [Flow(f"f{i}", "a", "c", 1e6, after=(f"f{i - 1}",) if i else ()) for i in range(n)]
        return Scenario(links, flows, name=f"chain-flows-{n}")
    if case == "wide":
        width, rng = 100, np.random.default_rng(0)
        length = max(1, n // width)
        tasks = [
            Task(
                f"c{c}t{i}",
                f"gpu{c % 8}",
                float(rng.uniform(1e-3, 2e-3)),
                after=(f"c{c}t{i - 1}",) if i else (),
            )
            for c in range(width)
            for i in range(length)
        ]
        return Scenario([], [], tasks=tasks, name=f"chain-wide-{n}")
    raise ValueError(f"unknown case {case!r}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--cases", nargs="+", default=["tasks", "flows", "wide"], choices=["tasks", "flows", "wide"]
    )
    ap.add_argument("--items", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument(
        "--cpu-threads", type=int, default=1, help="XLA CPU threads, 0 = one per core (default 1)"
    )
    args = ap.parse_args()
    set_cpu_threads(args.cpu_threads)
    import jax

    import netsim

    print(
        f"device: {jax.devices()[0].device_kind}, jax {jax.__version__}, XLA CPU threads: {cpu_threads_label()}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print(f"{'case':>6} {'items':>7} {'padded':>7} {'events':>7} {'first s':>8} {'run s':>8} {'us/event':>9}")
    for case in args.cases:
        for n in args.items:
            compiled = netsim.compile_scenario(chain_scenario(case, n))
            t0 = time.perf_counter()
            netsim.simulate(compiled)
            first = time.perf_counter() - t0
            result = netsim.simulate(compiled)
            print(
                f"{case:>6} {n:>7} {compiled.shape.items:>7} {result.events:>7} {first:>8.2f} "
                f"{result.wall_time:>8.2f} {1e6 * result.wall_time / result.events:>9.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
