"""Compile and run time of the engine per shape, with the loops and branches it compiles.

For each flow count (k=16 fat-tree, random host pairs: benchmarks/vs_simgrid.py's scale series), the
engine `netsim.simulate` runs (`kernels.run` on the compiled scenario, the same options) is lowered, its
StableHLO `while` loops and `case` branches counted, compiled (timed: wall and this process's CPU time,
which moves less with the machine's load) and run twice (timed, the faster kept). The counts
show what grows with the problem size: XLA compiles each loop body of its own.

    python benchmarks/compile_shapes.py                       # 1e3, 1e4 exact; 1e5 at tolerance 1e-2
    python benchmarks/compile_shapes.py --flows 100000 --tolerance 0
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vs_simgrid import fat_tree_random

import netsim
from netsim import kernels


def measure(n_flows: int, tolerance: float, calls: int = 2) -> dict:
    t0 = time.perf_counter()
    compiled = netsim.compile_scenario(fat_tree_random(n_flows))
    built = time.perf_counter() - t0
    network, program = compiled.network, compiled.program
    options = dict(max_events=compiled.max_events, record=0, tolerance=tolerance)
    fn = jax.jit(lambda n, p: kernels.run(n, p, **options))
    t0 = time.perf_counter()
    lowered = fn.lower(network, program)
    lower_s = time.perf_counter() - t0
    text = lowered.as_text()
    t0, c0 = time.perf_counter(), time.process_time()
    exe = lowered.compile()
    compile_s, compile_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    runs, state = [], None
    for _ in range(calls):
        t0 = time.perf_counter()
        state = jax.block_until_ready(exe(network, program))
        runs.append(time.perf_counter() - t0)
    return {
        "flows": n_flows,
        "items": program.route.shape[0],
        "tolerance": tolerance,
        "while": text.count("stablehlo.while"),
        "case": text.count("stablehlo.case"),
        "build_s": built,
        "lower_s": lower_s,
        "compile_s": compile_s,
        "compile_cpu_s": compile_cpu_s,
        "run_s": min(runs, default=float("nan")),
        "events": -1 if state is None else int(state.events),
        "rounds": -1 if state is None else int(state.rounds),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flows", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument(
        "--tolerance", type=float, nargs="+", default=None, help="default: 0 up to 1e4 flows, 1e-2 above"
    )
    ap.add_argument("--calls", type=int, default=2, help="runs of the compiled engine (0: compile only)")
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()}", flush=True)
    print(
        "flows  items  tolerance  while  case  lower s  compile s  (CPU s)  run s  events  rounds", flush=True
    )
    for n in args.flows:
        for tol in args.tolerance if args.tolerance is not None else ([0.0] if n <= 10000 else [1e-2]):
            r = measure(n, tol, args.calls)
            print(
                f"{r['flows']:>6} {r['items']:>6} {r['tolerance']:>9g} {r['while']:>6} {r['case']:>5}"
                f" {r['lower_s']:>8.1f} {r['compile_s']:>10.1f} {r['compile_cpu_s']:>8.1f} {r['run_s']:>6.2f}"
                f" {r['events']:>7}"
                f" {r['rounds']:>7}",
                flush=True,
            )
    print(f"load average at end: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
