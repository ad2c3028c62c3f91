"""`netsim jobs TRACE --policy NAME`: schedule a job trace on a DeepShare-like cluster and compare policies.

TRACE is a CSV of `arrival,model,gpus,nodes,iterations` (docs/jobs.md); `--generate N --seed S` writes a
seeded DeepShare-like one instead. Every policy runs in the fluid environment (`netsim.studies.schedule`);
the table gives mean / p90 / max JCT and GPU utilization per policy, and the change of each policy's
mean JCT against the best and worst heuristic (DeepShare's RL scheduler: -18.2% / -20.7%).
"""

from __future__ import annotations

import argparse
import sys


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
        help="comma-separated policies, or 'all' (packed, spread, topology, contention, simloop; default packed)",
    )
    p.add_argument("--generate", type=int, metavar="N", help="write a seeded DeepShare-like trace of N jobs")
    p.add_argument("--seed", type=int, default=0, help="seed of --generate (default 0)")
    p.add_argument("--rate", type=float, default=0.5, help="--generate: Poisson arrivals per s (default 0.5)")
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
        from ..studies import deepshare_trace, format_job_trace

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
    if not args.trace:
        raise ScenarioError("TRACE: give a trace CSV, or --generate N to make one")
    from ..studies import JOB_POLICIES

    policies = list(JOB_POLICIES) if args.policy == "all" else [p.strip() for p in args.policy.split(",")]
    unknown = [p for p in policies if p not in JOB_POLICIES]
    if unknown or not policies:
        raise ScenarioError(f"--policy: unknown {unknown or policies}; expected some of {list(JOB_POLICIES)}")
    check_outputs(
        {"the trace": args.trace},
        {"--out": (args.out, (".json", ".h5", ".hdf5")), "--plot": (args.plot, (".png", ".pdf", ".svg"))},
    )
    from ..studies import Paces, deepshare_cluster, read_job_trace, schedule

    try:
        servers, per = (int(x) for x in args.cluster.lower().split("x"))
    except ValueError:
        raise ScenarioError(f"--cluster: expected SxG (e.g. 4x8), got {args.cluster!r}") from None
    if servers < 1 or per < 1:
        raise ScenarioError(f"--cluster: expected SxG with S, G >= 1, got {args.cluster!r}")
    jobs = read_job_trace(args.trace)
    topo = deepshare_cluster(servers, per)
    paces = Paces(topo)
    results = {}
    for name in policies:

        def progress(done, total, t, name=name):
            if not args.quiet:
                print(
                    f"\rnetsim: {name}: {done}/{total} jobs done, t = {t:.1f} s, {paces.simulations} "
                    "simulations",
                    end="",
                    file=sys.stderr,
                    flush=True,
                )

        results[name] = schedule(topo, jobs, policy=name, paces=paces, progress=progress)
        if not args.quiet:
            print(file=sys.stderr)
    print(table(results))
    if args.out:
        save(results, args.out, trace=args.trace)
        print(f"wrote {args.out}")
    if args.plot:
        plot_cdf(results, args.plot)
        print(f"wrote {args.plot}")
    return 0


def summary(s) -> dict:
    return {
        "mean_jct": s.mean_jct,
        "p90_jct": s.jct_percentile(90),
        "max_jct": s.jct_percentile(100),
        "makespan": s.makespan,
        "gpu_utilization": s.gpu_utilization,
    }


def table(results: dict) -> str:
    """Mean / p90 / max JCT, GPU utilization per policy, and the mean JCT change against the best and
    worst of the placement heuristics in `results`."""
    from ..studies import CANDIDATES, DEEPSHARE_REFERENCE

    heur = [s.mean_jct for n, s in results.items() if n in CANDIDATES]
    lines = [
        f"{'policy':<14}{'mean JCT':>10}{'p90 JCT':>10}{'max JCT':>10}{'GPU util':>10}{'vs best':>9}{'vs worst':>9}"
    ]
    for name, s in results.items():
        x = summary(s)
        rel = f"{x['mean_jct'] / min(heur) - 1:>+9.1%}{x['mean_jct'] / max(heur) - 1:>+9.1%}" if heur else ""
        lines.append(
            f"{name:<14}{x['mean_jct']:>10.2f}{x['p90_jct']:>10.2f}{x['max_jct']:>10.2f}"
            f"{x['gpu_utilization']:>10.1%}{rel}"
        )
    lines.append("(JCT in s; vs best / worst: mean JCT against the best / worst placement heuristic here;")
    lines.append(
        " DeepShare reports {:+.1%} / {:+.1%} for its RL policies, arXiv 2310.20209)".format(
            *DEEPSHARE_REFERENCE
        )
    )
    return "\n".join(lines)


def save(results: dict, path: str, *, trace: str = "") -> None:
    """Per policy: the summary and every job (id, model, gpus, arrival, start, finish, jct, placement);
    JSON, or HDF5 (one group per policy, a dataset per column, the summary as attributes)."""
    from .._checks import atomic_path, to_json, write_atomic

    data = {
        "trace": trace,
        "policies": {
            name: summary(s)
            | {
                "jobs": [
                    {
                        "id": r.job.id,
                        "model": r.job.model,
                        "gpus": r.job.gpus,
                        "arrival": r.job.arrival,
                        "start": r.start,
                        "finish": r.finish,
                        "jct": r.jct,
                        "placement": list(r.gpus),
                    }
                    for r in s.runs
                ]
            }
            for name, s in results.items()
        },
    }
    if path.endswith(".json"):
        write_atomic(path, to_json(data, indent=1) + "\n")
        return
    import h5py
    import numpy as np

    with atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
        f.attrs["trace"] = trace
        for name, d in data["policies"].items():
            g = f.create_group(name)
            for k, v in d.items():
                if k != "jobs":
                    g.attrs[k] = v
            for col in ("id", "model", "gpus", "arrival", "start", "finish", "jct", "placement"):
                values = [j[col] if col != "placement" else ",".join(j[col]) for j in d["jobs"]]
                g.create_dataset(
                    col, data=np.array(values, dtype=object if isinstance(values[0], str) else None)
                )


def plot_cdf(results: dict, path: str) -> None:
    """The JCT CDF of each policy, written atomically."""
    import numpy as np
    from matplotlib.figure import Figure

    from .._checks import atomic_path

    fig = Figure(figsize=(6.4, 4.0), layout="constrained")
    ax = fig.add_subplot()
    for name, s in results.items():
        jct = np.sort([r.jct for r in s.runs])
        ax.step(
            jct,
            np.arange(1, jct.size + 1) / jct.size,
            where="post",
            label=f"{name} (mean {s.mean_jct:.1f} s)",
        )
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (s)")
    ax.set_ylabel("fraction of jobs")
    ax.grid(alpha=0.3)
    ax.legend()
    suffix = path.rsplit(".", 1)[-1]
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=130, format=suffix)
