"""netsim's engine against the naive NumPy event loop on the same leaf-spine scenarios, in one run.

    python benchmarks/engine.py                 # F = 64 ... 4096, B = 1, 64, 1024 (a few minutes on 2 cores)
    python benchmarks/engine.py --flows 64 256  # a subset
    python benchmarks/engine.py --full          # F up to 32768 (long)

Prints compile time apart from run time, the NumPy baseline's time where it finishes within --baseline-limit,
the ratio, batched per-scenario time, and max-min allocations per second at 4096 flows x 2048 links.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from leafspine import leaf_spine_scenario
from numpy_baseline import classic_maxmin, numpy_simulate

import netsim
from netsim import cpu_threads_label, set_cpu_threads


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--flows", type=int, nargs="*", default=[64, 256, 1024, 4096])
    parser.add_argument("--full", action="store_true", help="add 16384 and 32768 flows")
    parser.add_argument("--batches", type=int, nargs="*", default=[1, 64, 1024])
    parser.add_argument("--max-batch-items", type=int, default=1 << 17, help="skip B x F above this")
    parser.add_argument("--baseline-limit", type=int, default=1024, help="largest F run in NumPy")
    parser.add_argument(
        "--cpu-threads",
        type=int,
        help="XLA CPU threads, 0 = one per core (default: XLA's, one per core; `netsim run` uses 1)",
    )
    args = parser.parse_args()
    if args.cpu_threads is not None:
        set_cpu_threads(args.cpu_threads)
    flows = args.flows + ([16384, 32768] if args.full else [])
    print(
        f"device: {jax.devices()[0].device_kind} ({jax.default_backend()}), jax {jax.__version__}, XLA CPU "
        f"threads: {cpu_threads_label()}"
    )
    print(
        f"{'flows':>6} {'links':>6} {'events':>7} {'rounds':>7} {'compile s':>10} {'run s':>9} "
        f"{'numpy s':>9} {'speedup':>8}"
    )
    run = jax.jit(netsim.kernels.run, static_argnames=("max_events", "loop"))
    for n in flows:
        c = netsim.compile_scenario(leaf_spine_scenario(n))
        t0 = time.perf_counter()
        state = jax.block_until_ready(run(c.network, c.program, max_events=c.max_events))
        first = time.perf_counter() - t0
        steady = best_of(lambda c=c: run(c.network, c.program, max_events=c.max_events), 2)
        assert int(state.status) == 0
        base, ratio = "-", "-"
        if n <= args.baseline_limit:
            t0 = time.perf_counter()
            ref = numpy_simulate(c)
            b = time.perf_counter() - t0
            np.testing.assert_allclose(np.asarray(state.finish)[:n], ref, rtol=1e-9)  # same answers
            base, ratio = f"{b:.3f}", f"{b / steady:.1f}x"
        print(
            f"{n:>6} {c.n_links:>6} {int(state.events):>7} {int(state.rounds):>7} {first - steady:>10.2f} "
            f"{steady:>9.3f} {base:>9} {ratio:>8}",
            flush=True,
        )

    print("\nbatched: B scenarios with randomly scaled link bandwidths, one netsim.vmap_run")
    print(f"{'flows':>6} {'B':>6} {'compile s':>10} {'run s':>9} {'per scenario ms':>16}")
    for n in [f for f in flows if f <= 1024]:
        c = netsim.compile_scenario(leaf_spine_scenario(n))
        for b in args.batches:
            if b * n > args.max_batch_items:
                continue
            scale = jnp.asarray(np.random.default_rng(b).uniform(0.5, 2.0, (b, c.network.capacity.shape[0])))
            # capacities [B, L] vary per scenario; latencies and the program are shared
            batched = jax.jit(
                lambda s, c=c: (
                    netsim.vmap_run(
                        netsim.kernels.Network(c.network.capacity * s, c.network.latency),
                        c.program,
                        max_events=c.max_events,
                    ).finish
                )
            )
            t0 = time.perf_counter()
            jax.block_until_ready(batched(scale))
            first = time.perf_counter() - t0
            steady = best_of(lambda batched=batched, scale=scale: batched(scale), 1)
            print(
                f"{n:>6} {b:>6} {first - steady:>10.2f} {steady:>9.3f} {steady / b * 1e3:>16.3f}", flush=True
            )

    print("\nmax-min allocations at 4096 flows x 2048 links (all flows active)")
    c = netsim.compile_scenario(leaf_spine_scenario(4096))
    cap, route = jnp.asarray(c.network.capacity), jnp.asarray(c.program.route)
    active = jnp.arange(route.shape[0]) < 4096
    alloc = jax.jit(netsim.kernels.maxmin_rates)
    a = jax.block_until_ready(alloc(cap, route, active))
    t = best_of(lambda: alloc(cap, route, active), 20)
    t0 = time.perf_counter()
    ref = classic_maxmin(np.asarray(cap), np.asarray(route), np.asarray(active))
    b = time.perf_counter() - t0
    np.testing.assert_allclose(np.asarray(a.rate), ref, rtol=1e-9)
    classic_rounds = len(np.unique(ref[np.asarray(active)]))
    print(
        f"netsim {t * 1e3:.2f} ms/allocation = {1 / t:.0f} allocations/s, {int(a.rounds)} rounds; "
        f"numpy classic filling {b * 1e3:.1f} ms ({b / t:.0f}x), >= {classic_rounds} rounds "
        f"({classic_rounds / int(a.rounds):.0f}x more)"
    )


if __name__ == "__main__":
    main()
