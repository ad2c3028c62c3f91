"""Policies judged over seeded traces (netsim.jobs.evaluate): the bootstrap intervals against the normal
approximation, the paired change against packed, and `netsim jobs --seeds`."""

from __future__ import annotations

import numpy as np
import pytest

from netsim import ScenarioError, cli
from netsim.jobs import Evaluation, bootstrap_mean


def test_bootstrap_mean_matches_the_normal_interval():
    x = np.random.default_rng(0).normal(10.0, 2.0, 400)
    mean, lo, hi = bootstrap_mean(x)
    half = 1.96 * x.std(ddof=1) / np.sqrt(x.size)  # the interval of the mean for normal data
    assert mean == pytest.approx(x.mean(), rel=1e-12)
    assert lo == pytest.approx(mean - half, rel=5e-3) and hi == pytest.approx(mean + half, rel=5e-3)
    assert bootstrap_mean(x) == (mean, lo, hi)  # seeded
    assert bootstrap_mean([3.0, 3.0, 3.0]) == (3.0, 3.0, 3.0)
    with pytest.raises(ScenarioError, match="at least 2 values"):
        bootstrap_mean([1.0])


@pytest.mark.parametrize(
    "x, kwargs, message",
    [
        ([np.nan, 1.0], {}, r"bootstrap_mean: x\[0\]: must be a finite number, got nan"),
        ([1.0, np.inf, 2.0], {}, r"bootstrap_mean: x\[1\]: must be a finite number, got inf"),
        ([1.0, 2.0], {"level": 2}, r"bootstrap_mean: level: must be in \(0, 1\), got 2"),
        ([1.0, 2.0], {"level": 0.0}, r"bootstrap_mean: level: must be in \(0, 1\), got 0.0"),
        ([1.0, 2.0], {"level": np.nan}, "bootstrap_mean: level: must be a finite number, got nan"),
        ([1.0, 2.0], {"resamples": 0}, "bootstrap_mean: resamples: expected an integer >= 1, got 0"),
        (["a", "b"], {}, "bootstrap_mean: x: expected a list of numbers"),
    ],
)
def test_bootstrap_mean_refuses_bad_input(x, kwargs, message):
    with pytest.raises(ScenarioError, match=message):
        bootstrap_mean(x, **kwargs)


def test_paired_change_removes_the_spread_between_traces():
    # traces of very different JCT, a policy 10% slower on every one: the change is +10% exactly, while
    # the two means' own intervals overlap
    packed = (1.0, 5.0, 20.0, 3.0)
    ev = Evaluation(
        (0, 1, 2, 3),
        {"packed": packed, "slow": tuple(1.1 * x for x in packed)},
        {"packed": packed, "slow": packed},
    )
    assert ev.change("slow") == pytest.approx((0.1, 0.1, 0.1), rel=1e-12)
    assert ev.change("slow", tail=True) == (0.0, 0.0, 0.0)
    _, lo_slow, _ = bootstrap_mean(ev.mean_jct["slow"])
    assert lo_slow < np.mean(packed)
    table = ev.table()
    assert "+10.0% [+10.0%, +10.0%]" in table and "4 traces" in table


def test_cli_jobs_seeds(capsys):
    args = ["jobs", "--seeds", "0:2", "--jobs", "2", "--policy", "packed,random", "--cluster", "2x4"]
    assert cli.main([*args, "--quiet", "--no-compile-cache"]) == 0
    out = capsys.readouterr().out
    assert "packed" in out and "random" in out and "2 traces: seeds 0..1, 2 jobs" in out
    assert cli.main([*args, "--no-compile-cache"]) == 0  # progress: in a log, lines with rate and ETA
    err = capsys.readouterr().err
    assert "netsim jobs: 4/4 runs (100.0%)" in err and "ETA" in err and "\r" not in err
    assert cli.main(["jobs", "--seeds", "3", "--cluster", "2x4"]) == 2
    assert "--seeds: expected A:B" in capsys.readouterr().err
