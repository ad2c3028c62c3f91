"""Is the lookahead short of knowing the future? The contention-aware lookahead against the same lookahead told
every later arrival (which no policy can know), paired on the same seeded traces.

The contention-aware policy (`netsim jobs --policy contention`) runs each action forward with the jobs that
have arrived; what it cannot see is the jobs still to come, which is what a trained policy could learn
about. The lookahead told the trace (`JobEnvs.lookahead_actions(future="trace")`) sees them all; a planner
that decides one job at a time can still choose worse for it, so its change is a measure, not a bound
(docs/jobs.md). `--sampled K M` adds a lookahead told sampled arrivals instead: an arrival model (rate,
job mix, jobs per trace) fitted on 20 other traces (seeds 2000..2019), K samples of the next M arrivals
per decision, every action scored on the same samples. examples/train_policy.py trains on seeds 1000..1007
and docs/jobs.md's test seeds are 0..19: neither policy here is tuned on any.

    python benchmarks/jobs_headroom.py --seeds 1000:1010 --jobs 20 --rate 4 --sampled 4 3
    python benchmarks/jobs_headroom.py --seeds 0:20 --jobs 20 --rate 4
    python benchmarks/jobs_headroom.py --seeds 1000:1010 --jobs 10 --rate 0.5
"""

from __future__ import annotations

import argparse
import collections
import itertools
import os
import time

import numpy as np

from netsim.jobs import CANDIDATES, Job, deepshare_cluster, deepshare_trace, evaluate


def clairvoyant(obs, envs):
    """The contention-aware lookahead told every job of the trace in advance."""
    return envs.lookahead_actions(future="trace")


def sampled_lookahead(jobs: int, rate: float, samples: int, ahead: int, train=range(2000, 2020)):
    """A policy: the lookahead told `ahead` later arrivals sampled from a model fitted on the traces of
    `train`, its predicted job-seconds averaged over `samples` draws (common to every action)."""
    traces = [deepshare_trace(jobs, seed=s, arrival_rate=rate) for s in train]
    pool = [(j.model, j.gpus, j.iterations) for t in traces for j in t]
    gap = float(np.mean([b.arrival - a.arrival for t in traces for a, b in itertools.pairwise(t)]))
    per_trace = int(np.median([len(t) for t in traces]))
    packed = CANDIDATES.index("packed")

    def policy(obs, envs):
        e = envs.episodes[0]
        n = min(ahead, per_trace - e.arrived)
        if n <= 0:
            return envs.lookahead_actions()
        rng = np.random.default_rng([e.arrived, len(e.done_at), int(e.t * 1e6) % 2**31])
        total: dict[int, float] = collections.defaultdict(float)
        for k in range(samples):
            at = e.t + np.cumsum(rng.exponential(gap, n))
            picks = rng.integers(0, len(pool), n)
            future = [
                Job.of(f"~{k}.{i}", pool[p][0], arrival=float(a), gpus=pool[p][1], iterations=pool[p][2])
                for i, (p, a) in enumerate(zip(picks, at, strict=True))
            ]
            for action, cost in envs.lookahead_costs(future=[future])[0].items():
                total[action] += cost
        best = min(total, key=total.__getitem__, default=packed)
        return np.array([best if total[best] < total[packed] * (1 - 1e-12) else packed])

    return policy


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="1000:1010", help="A:B, the traces' seeds (default 1000:1010)")
    ap.add_argument("--jobs", type=int, default=20, help="jobs per trace (default 20)")
    ap.add_argument("--rate", type=float, default=4.0, help="arrivals per s (default 4)")
    ap.add_argument(
        "--sampled", nargs=2, type=int, metavar=("K", "M"), help="also the lookahead told sampled arrivals"
    )
    args = ap.parse_args(argv)
    a, b = (int(x) for x in args.seeds.split(":"))
    extra = {"clairvoyant": clairvoyant}
    if args.sampled:
        extra["sampled"] = sampled_lookahead(args.jobs, args.rate, *args.sampled)
    t0 = time.perf_counter()
    ev = evaluate(
        deepshare_cluster(),
        range(a, b),
        policies=("packed", "contention"),
        extra=extra,
        jobs=args.jobs,
        arrival_rate=args.rate,
    )
    print(ev.table())
    for name in extra:
        for tail, what in ((False, "mean"), (True, "p90")):
            mean, low, high = ev.change(name, "contention", tail=tail)
            print(
                f"{name} vs contention, {what} JCT: {100 * mean:+.2f}% [{100 * low:+.2f}%, {100 * high:+.2f}%]"
            )
    print(f"{time.perf_counter() - t0:.0f} s, load {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
