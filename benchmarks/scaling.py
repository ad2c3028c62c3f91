"""Scaling table: exact engine and fast mode (tolerance) from 1e3 to 1e5 concurrent flows, as whole processes.

Each case runs in its own process (`python benchmarks/scaling.py --one TOPOLOGY FLOWS TOLERANCE`), so the
wall time includes interpreter start, imports, scenario building, compile and run, and the peak memory is
that process's. Cases: a k=16 fat-tree (1024 hosts, 6144 links; random host pairs on their ECMP routes,
1-64 MiB, all released at 0: benchmarks/vs_simgrid.py's scale series) and a 32 x 16 leaf-spine (512 hosts,
2048 links; benchmarks/leafspine.py, 1-16 MB released over 1 ms). Fast-mode errors are against the exact
run of the same scenario where that finished within the limit. Growth exponent: slope of log(wall) over
log(flows) between the sizes that finished. Each case compiles its engine unless --compile-cache keeps
compiled engines in netsim's disk cache as `netsim run` does (run twice: the second finds them).

    python benchmarks/scaling.py                              # the whole table (long)
    python benchmarks/scaling.py --flows 1000 10000 --limit 300
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = (1000, 10000, 20000, 50000, 100000)


def one(topology: str, n_flows: int, tolerance: float, out: str) -> None:
    """Runs one case in this process; writes its figures (JSON) and finish times (.npy) beside `out`."""
    t0 = time.perf_counter()
    import jax

    jax.config.update("jax_enable_x64", True)
    import numpy as np

    import netsim

    if os.environ.get("NETSIM_BENCH_CACHE") == "1":  # --compile-cache: as `netsim run` does
        netsim.enable_compilation_cache()
    sys.path.insert(0, HERE)
    if topology == "fattree":
        from vs_simgrid import fat_tree_random

        scenario = fat_tree_random(n_flows)
    else:
        from leafspine import leaf_spine_scenario

        scenario = leaf_spine_scenario(n_flows)
    t_built = time.perf_counter()
    result = netsim.simulate(scenario, tolerance=tolerance, progress=True)  # life on long cases (stderr)
    wall = time.perf_counter() - t0
    np.save(out + ".npy", result.flow_finish)
    figures = {
        "wall_s": wall,
        "build_s": t_built - t0,
        "simulate_s": result.wall_time,
        "events": result.events,
        "merged": result.merged,
        "rounds": result.rounds,
        "makespan": result.makespan,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "device": jax.devices()[0].device_kind,
    }
    with open(out + ".json", "w") as f:
        json.dump(figures, f)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--one", nargs=3, metavar=("TOPOLOGY", "FLOWS", "TOLERANCE"), help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--flows", type=int, nargs="+", default=list(SIZES))
    ap.add_argument(
        "--topologies", nargs="+", default=["fattree", "leafspine"], choices=["fattree", "leafspine"]
    )
    ap.add_argument("--tolerance", type=float, default=1e-2, help="fast mode window (default 1e-2)")
    ap.add_argument("--limit", type=float, default=900, help="seconds before a case is stopped (default 900)")
    ap.add_argument(
        "--exact-max", type=int, default=None, help="largest flow count run exactly (default: all)"
    )
    ap.add_argument("--json", help="write the table as JSON")
    ap.add_argument(
        "--compile-cache",
        action="store_true",
        help="keep compiled engines in netsim's disk cache, as `netsim run` does (default: compile in each case)",
    )
    args = ap.parse_args()
    if args.one:
        one(args.one[0], int(args.one[1]), float(args.one[2]), args.out)
        return

    import numpy as np

    rows = []
    print(f"load average at start: {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for topo in args.topologies:
            for n in args.flows:
                exact = None
                for tol in (0.0, args.tolerance):
                    if tol == 0.0 and args.exact_max is not None and n > args.exact_max:
                        rows.append(
                            {
                                "topology": topo,
                                "flows": n,
                                "tolerance": tol,
                                "wall_s": None,
                                "note": "not run (--exact-max)",
                            }
                        )
                        continue
                    out = os.path.join(tmp, f"{topo}-{n}-{tol}")
                    cmd = [sys.executable, __file__, "--one", topo, str(n), str(tol), "--out", out]
                    t0 = time.perf_counter()
                    try:
                        subprocess.run(
                            cmd,
                            check=True,
                            timeout=args.limit,
                            env={
                                **os.environ,
                                "PJRT_NPROC": "1",
                                "NETSIM_BENCH_CACHE": str(int(args.compile_cache)),
                            },
                        )
                    except subprocess.TimeoutExpired:
                        rows.append(
                            {
                                "topology": topo,
                                "flows": n,
                                "tolerance": tol,
                                "wall_s": None,
                                "note": f"> {args.limit:.0f} s",
                            }
                        )
                        print(f"{topo:10} {n:>7} tol={tol:<6g} stopped after {args.limit:.0f} s", flush=True)
                        continue
                    with open(out + ".json") as f:
                        row = {"topology": topo, "flows": n, "tolerance": tol, **json.load(f)}
                    row["process_s"] = time.perf_counter() - t0
                    finish = np.load(out + ".npy")
                    if tol == 0.0:
                        exact = finish
                    elif exact is not None:
                        err = np.abs(finish - exact) / exact
                        row.update(
                            mean_err=float(err.mean()),
                            max_err=float(err.max()),
                            makespan_err=float(abs(finish.max() - exact.max()) / exact.max()),
                        )
                    rows.append(row)
                    extra = (
                        (
                            f"  err mean {row['mean_err']:.2%} max {row['max_err']:.2%} makespan "
                            f"{row['makespan_err']:.3%}"
                        )
                        if "mean_err" in row
                        else ""
                    )
                    print(
                        f"{topo:10} {n:>7} tol={tol:<6g} process {row['process_s']:8.1f} s  simulate "
                        f"{row['simulate_s']:8.1f} s  events {row['events']:>7}  rounds {row['rounds']:>8}  "
                        f"peak {row['peak_rss_mib']:7.0f} MiB{extra}",
                        flush=True,
                    )
    print("\ngrowth exponents (slope of log process time over log flows):")
    for topo in args.topologies:
        for tol in (0.0, args.tolerance):
            pts = [
                (r["flows"], r["process_s"])
                for r in rows
                if r["topology"] == topo and r["tolerance"] == tol and r.get("wall_s")
            ]
            if len(pts) >= 2:
                x, y = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
                print(f"  {topo:10} tol={tol:<6g} {np.polyfit(x, y, 1)[0]:.2f}  ({len(pts)} sizes)")
    print(f"load average at end: {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
