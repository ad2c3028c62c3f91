"""`netsim jobs TRACE --policy NAME`: schedule a job trace on a DeepShare-like cluster and compare policies.

TRACE is a CSV of `arrival,model,gpus,nodes,iterations` (docs/jobs.md); `--generate N --seed S` writes a
seeded DeepShare-like one instead; `--seeds A:B` (no TRACE) judges the policies over the seeded traces
A..B-1 of `--jobs` jobs each: mean and p90 JCT with 95% bootstrap intervals and the paired change
against packed (`netsim.jobs.evaluate`). Every policy runs in the fluid environment (`netsim.jobs.schedule`);
the table gives mean / p90 / max JCT and GPU utilization per policy, and the change of each policy's
mean JCT against the best and worst heuristic (DeepShare's RL scheduler: -18.2% / -20.7%).
"""

from __future__ import annotations

import argparse
import sys

from .._progress import Progress  # loaded already by netsim.cli: no JAX


def register(subparsers) -> None:
    """Adds the `jobs` subcommand to an argparse subparsers object."""
    p = subparsers.add_parser(
        "jobs",
        help="schedule a job trace under placement policies (JCT table, JSON/HDF5, JCT CDF plot)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("trace", nargs="?", help="trace CSV (arrival,model,gpus,nodes,iterations)")
    p.add_argument(
        "--policy",
        default="packed",
        help="comma-separated policies, or 'all' (packed, spread, random, topology, contention, rollout, "
        "greedy-contention, simloop; default packed)",
    )
    p.add_argument("--generate", type=int, metavar="N", help="write a seeded DeepShare-like trace of N jobs")
    p.add_argument("--seed", type=int, default=0, help="seed of --generate (default 0)")
    p.add_argument(
        "--seeds", metavar="A:B", help="judge the policies over the seeded traces A..B-1 (no TRACE)"
    )
    p.add_argument("--jobs", type=int, default=12, help="--seeds: jobs per trace (default 12)")
    p.add_argument(
        "--rate", type=float, default=0.5, help="--generate, --seeds: Poisson arrivals per s (default 0.5)"
    )
    p.add_argument(
        "-o", "--output", metavar="CSV", help="--generate: the trace file to write (default stdout)"
    )
    p.add_argument("--out", metavar="FILE", help="write results: .json, or .h5 for HDF5")
    p.add_argument("--plot", metavar="PNG", help="plot the JCT CDF of each policy (needs matplotlib)")
    p.add_argument(
        "--cluster",
        default="4x8",
        metavar="SxG",
        help="S PCIe servers of G GPUs on a 100 Gbps leaf-spine (default 4x8, DeepShare's cluster)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(handler=_jobs)


def _jobs(args: argparse.Namespace) -> int:
    from .._checks import write_atomic
    from .._errors import ScenarioError
    from ._common import check_outputs

    if args.generate is not None:
        from ..jobs import deepshare_trace, format_job_trace

        if args.trace:
            raise ScenarioError("give a TRACE to schedule or --generate N, not both")
        if args.output:
            check_outputs({}, {"--output": (args.output, (".csv",))})
        jobs = deepshare_trace(args.generate, seed=args.seed, arrival_rate=args.rate)
        text = format_job_trace(jobs)
        if args.output:
            write_atomic(args.output, text)
            print(f"wrote {args.output} ({len(jobs)} jobs, seed {args.seed})", file=sys.stderr)
        else:
            sys.stdout.write(text)
        return 0
    from ..jobs import JOB_POLICIES

    policies = list(JOB_POLICIES) if args.policy == "all" else [p.strip() for p in args.policy.split(",")]
    unknown = [p for p in policies if p not in JOB_POLICIES]
    if unknown or not policies:
        raise ScenarioError(f"--policy: unknown {unknown or policies}; expected some of {list(JOB_POLICIES)}")
    if args.seeds is not None:
        if args.trace:
            raise ScenarioError(
                "give a TRACE to schedule or --seeds A:B to judge policies over seeds, not both"
            )
        return _evaluate(args, policies)
    if not args.trace:
        raise ScenarioError("TRACE: give a trace CSV, --generate N to make one, or --seeds A:B")
    check_outputs(
        {"the trace": args.trace},
        {"--out": (args.out, (".json", ".h5", ".hdf5")), "--plot": (args.plot, (".png", ".pdf", ".svg"))},
    )
    from ..jobs import (
        Paces,
        deepshare_cluster,
        plot_jct_cdf,
        policy_table,
        read_job_trace,
        save_schedules,
        schedule,
    )

    jobs = read_job_trace(args.trace)
    servers, per = _cluster(args.cluster)  # its own message names --cluster
    try:
        topo = deepshare_cluster(servers, per)
    except ScenarioError as e:  # a cluster the builders refuse: say which option made it
        raise ScenarioError(f"--cluster {args.cluster}: {e}") from None
    paces = Paces(topo)
    results = {}
    for name in policies:
        # redrawn in a terminal, a line every 10 s in a log (no carriage returns in files)
        bar = Progress(f"netsim: {name}", "jobs", len(jobs), enabled=not args.quiet)

        def progress(done, total, t, bar=bar):
            bar.total = total
            bar.update(done - bar.done, f"t = {t:.1f} s, {paces.simulations} simulations")

        results[name] = schedule(topo, jobs, policy=name, paces=paces, progress=progress)
        bar.close()
    print(policy_table(results))
    if args.out:
        save_schedules(results, args.out, trace=args.trace)
        print(f"wrote {args.out}")
    if args.plot:
        plot_jct_cdf(results, args.plot)
        print(f"wrote {args.plot}")
    return 0


def _cluster(text: str) -> tuple[int, int]:
    from .._errors import ScenarioError

    try:
        servers, per = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise ScenarioError(f"--cluster: expected SxG (e.g. 4x8), got {text!r}") from None
    if servers < 1 or per < 1:
        raise ScenarioError(f"--cluster: expected SxG with S, G >= 1, got {text!r}")
    return servers, per


def _evaluate(args: argparse.Namespace, policies: list[str]) -> int:
    from .._errors import ScenarioError
    from ..jobs import deepshare_cluster, evaluate

    try:
        first, stop = (int(x) for x in args.seeds.split(":"))
    except ValueError:
        raise ScenarioError(f"--seeds: expected A:B (seeds A..B-1), got {args.seeds!r}") from None
    if stop - first < 2:
        raise ScenarioError(f"--seeds: expected at least 2 seeds, got {args.seeds!r}")
    if args.jobs < 1:
        raise ScenarioError(f"--jobs: expected >= 1, got {args.jobs}")

    # runs = seeds x policies; redrawn in a terminal, a line every 10 s with rate and ETA in a log
    bar = Progress("netsim jobs", "runs", (stop - first) * len(policies), enabled=not args.quiet)
    started = False

    def progress(name, seed):  # called as each run starts: the run before it, if any, is done
        nonlocal started
        bar.update(int(started), f"now seed {seed} of {first}..{stop - 1}: {name}")
        started = True

    ev = evaluate(
        deepshare_cluster(*_cluster(args.cluster)),
        range(first, stop),
        policies=policies,
        jobs=args.jobs,
        arrival_rate=args.rate,
        progress=progress,
    )
    bar.update(1)
    bar.close()
    print(ev.table())
    return 0
