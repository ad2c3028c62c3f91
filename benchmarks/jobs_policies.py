"""The policy comparison of docs/jobs.md: mean / p90 / max JCT and GPU utilization of the placement
heuristics, simulation-in-the-loop and a REINFORCE-trained policy (examples/train_policy.py) on a seeded
DeepShare-like trace, on the 4 x 8-GPU DeepShare-like cluster.

    python benchmarks/jobs_policies.py                      # the table in docs/jobs.md
    python benchmarks/jobs_policies.py --updates 0          # without the trained policy
    python benchmarks/jobs_policies.py --out jobs.json --plot jobs_cdf.png
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
from train_policy import train, trained_policy

from netsim import enable_compilation_cache
from netsim.jobs import (
    JOB_POLICIES,
    deepshare_cluster,
    deepshare_trace,
    plot_jct_cdf,
    policy_table,
    save_schedules,
    schedule,
)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--updates", type=int, default=16, help="REINFORCE updates (0: no trained policy)")
    parser.add_argument("--out", help="results .json or .h5")
    parser.add_argument("--plot", help="JCT CDF .png")
    args = parser.parse_args(argv)
    enable_compilation_cache()
    topo = deepshare_cluster()
    trace = deepshare_trace(args.jobs, seed=args.seed)
    print(
        f"# {args.jobs} jobs (seed {args.seed}, Poisson 0.5/s) on {topo.name}; {jax.devices()[0].device_kind}",
        flush=True,
    )
    paces = None
    policies: dict = {name: name for name in JOB_POLICIES}
    if args.updates:
        t0 = time.perf_counter()
        with jax.numpy_dtype_promotion("standard"):
            policy, paces = train(updates=args.updates, verbose=False)
        policies["trained"] = trained_policy(policy)
        print(
            f"# trained {args.updates} updates of 8 episodes in {time.perf_counter() - t0:.0f} s", flush=True
        )
    results = {}
    for name, policy in policies.items():
        t0 = time.perf_counter()
        with jax.numpy_dtype_promotion("standard"):
            s = schedule(topo, trace, policy=policy, paces=paces)
        results[name] = s if name != "trained" else s.__class__("trained", s.gpus, s.runs, s.result)
        print(f"# {name}: {time.perf_counter() - t0:.1f} s", flush=True)
    print(policy_table(results))
    if args.out:
        save_schedules(results, args.out, trace=f"deepshare_trace({args.jobs}, seed={args.seed})")
    if args.plot:
        plot_jct_cdf(results, args.plot)


if __name__ == "__main__":
    main()
