"""Policies judged over many seeded traces: per policy and trace the mean and p90 JCT, and over the traces
their means with 95% bootstrap intervals and the paired change against packed (`netsim jobs --seeds`).

One trace favours whichever policy happens to suit it; the paired change (policy / packed - 1 on the
same trace, averaged over traces) removes the trace-to-trace spread that both policies share, so its
interval is what says whether a policy beats packed. Seeds given here are the test seeds: a tuned or
trained policy must be tuned on other seeds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from .. import ScenarioError
from .._checks import count, number, samples, show
from ..workloads import Fabric
from ._deepshare import deepshare_trace
from ._paces import Paces
from ._policies import JOB_POLICIES, Policy, schedule

__all__ = ["Evaluation", "bootstrap_mean", "evaluate"]


def bootstrap_mean(
    x: Sequence[float], *, resamples: int = 10000, level: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """(mean, low, high): the mean of x and its percentile-bootstrap interval (seeded, so repeatable).

    x: at least 2 finite numbers; level: the interval's coverage, in (0, 1). ScenarioError otherwise.
    """
    x = samples(x, "bootstrap_mean: x")
    if x.size < 2:
        raise ScenarioError(f"bootstrap_mean: expected at least 2 values, got {x.size}")
    if not 0 < number(level, "bootstrap_mean: level") < 1:
        raise ScenarioError(f"bootstrap_mean: level: must be in (0, 1), got {show(level)}")
    count(resamples, "bootstrap_mean: resamples")
    means = x[np.random.default_rng(seed).integers(0, x.size, (resamples, x.size))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(x.mean()), float(low), float(high)


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """Per policy and seed: mean_jct[p][s] and p90_jct[p][s] (s) of the trace of seeds[s]."""

    seeds: tuple[int, ...]
    mean_jct: Mapping[str, tuple[float, ...]]
    p90_jct: Mapping[str, tuple[float, ...]]
    description: str = ""

    def change(
        self, policy: str, baseline: str = "packed", *, tail: bool = False
    ) -> tuple[float, float, float]:
        """The paired change of `policy` against `baseline` (mean over seeds of policy / baseline - 1,
        of the mean JCT, or of the p90 JCT with tail=True), with its 95% bootstrap interval."""
        table = self.p90_jct if tail else self.mean_jct
        return bootstrap_mean(np.asarray(table[policy]) / np.asarray(table[baseline]) - 1)

    def table(self) -> str:
        base = "packed" if "packed" in self.mean_jct else None
        lines = [
            f"{'policy':<18}{'mean JCT [95% CI]':>24}{'p90 JCT [95% CI]':>26}"
            + (f"{'mean vs packed [95% CI]':>30}{'p90 vs packed [95% CI]':>30}" if base else "")
        ]
        for name in self.mean_jct:
            row = f"{name:<18}"
            for t, width in ((self.mean_jct, 24), (self.p90_jct, 26)):
                m, lo, hi = bootstrap_mean(t[name])
                row += f"{f'{m:.2f} [{lo:.2f}, {hi:.2f}]':>{width}}"
            if base:
                for tail, width in ((False, 30), (True, 30)):
                    m, lo, hi = self.change(name, base, tail=tail)
                    row += f"{f'{m:+.1%} [{lo:+.1%}, {hi:+.1%}]':>{width}}"
            lines.append(row)
        lines.append(
            f"(JCT in s, averaged over {len(self.seeds)} traces{': ' + self.description if self.description else ''};"
        )
        lines.append(
            " vs packed: policy / packed - 1 on the same trace, averaged; intervals: bootstrap over traces)"
        )
        return "\n".join(lines)


def evaluate(
    fabric: Fabric,
    seeds: Sequence[int],
    *,
    policies: Sequence[str] = JOB_POLICIES,
    extra: Mapping[str, Policy] | None = None,
    jobs: int = 12,
    arrival_rate: float = 0.5,
    iterations: tuple[int, int] = (50, 500),
    paces: Paces | None = None,
    progress: Callable[[str, int], None] | None = None,
) -> Evaluation:
    """Schedules `deepshare_trace(jobs, seed=s, arrival_rate=..., iterations=...)` for every seed under
    every policy of `policies` (names of JOB_POLICIES) and `extra` ({name: policy function}, e.g. a
    trained policy); one `Paces` cache is shared by all runs. progress(policy, seed) is called before
    each run."""
    seeds = tuple(int(s) for s in seeds)
    if len(seeds) < 2 or len(set(seeds)) != len(seeds):
        raise ScenarioError(f"seeds: expected at least 2 distinct seeds, got {list(seeds)}")
    unknown = [p for p in policies if p not in JOB_POLICIES]
    if unknown:
        raise ScenarioError(f"policies: unknown {unknown}; expected some of {list(JOB_POLICIES)}")
    runs: dict[str, Policy | str] = {p: p for p in policies} | dict(extra or {})
    paces = paces or Paces(fabric)
    mean, p90 = {name: [] for name in runs}, {name: [] for name in runs}
    for seed in seeds:
        trace = deepshare_trace(jobs, seed=seed, arrival_rate=arrival_rate, iterations=iterations)
        for name, policy in runs.items():
            if progress is not None:
                progress(name, seed)
            s = schedule(fabric, trace, policy=policy, paces=paces, seed=seed)
            mean[name].append(s.mean_jct)
            p90[name].append(s.jct_percentile(90))
    what = f"{jobs} jobs, {arrival_rate:g} arrivals/s, {iterations[0]}-{iterations[1]} iterations"
    return Evaluation(
        seeds,
        {k: tuple(v) for k, v in mean.items()},
        {k: tuple(v) for k, v in p90.items()},
        f"seeds {seeds[0]}..{seeds[-1]}, {what}" if seeds == tuple(range(seeds[0], seeds[-1] + 1)) else what,
    )
