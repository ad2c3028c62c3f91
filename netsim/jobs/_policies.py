"""Scheduling policies over the fluid environment: `schedule` runs a trace under a heuristic, the
simulation-in-the-loop policy or a policy function, and the tables that compare policies (`netsim jobs`,
benchmarks/jobs_policies.py): summary, text table, JSON / HDF5 results and the JCT CDF plot.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .. import ScenarioError
from .._checks import atomic_path, to_json, write_atomic
from ..workloads import Fabric
from ._deepshare import DEEPSHARE_REFERENCE
from ._env import JobEnvs, check_margin
from ._paces import Paces
from ._schedule import Schedule
from ._traffic import Job

__all__ = [
    "JOB_POLICIES",
    "plot_jct_cdf",
    "policy_summary",
    "policy_table",
    "save_schedules",
    "schedule",
]

#: scheduling policies of `schedule` / `netsim jobs` (FIFO, the head job placed as soon as it fits):
#: packed, spread and topology, the environment's candidate generators; "random", uniformly random free
#: GPUs; "contention", every candidate, and holding the head until the next completion, run forward in
#: the fluid model over the known jobs' lifetimes, packed unless another predicts fewer job-seconds
#: (`JobEnvs.lookahead_actions`); "rollout", the same actions each run forward as "contention" itself would
#: go on (`JobEnvs.rollout_actions`: a lookahead at every later decision of every fork); both may hold a
#: job that fits; "greedy-contention", the candidate with the least-loaded busiest link at the decision (a
#: snapshot of link load); and "simloop", the candidate whose simulated paces at the decision finish the
#: running jobs soonest
JOB_POLICIES = (
    "packed",
    "spread",
    "random",
    "topology",
    "contention",
    "rollout",
    "greedy-contention",
    "simloop",
)
#: the policies that place without simulating: the baselines of `policy_table`'s "vs best / worst"
HEURISTICS = ("packed", "spread", "random", "topology", "greedy-contention")


Policy = Callable[..., object]  # (Observation [B, ...], JobEnvs) -> actions [B]


def schedule(
    fabric: Fabric,
    jobs: Sequence[Job],
    *,
    policy: str | Policy = "packed",
    gpus: Sequence[str] | None = None,
    server: Callable[[str], str] | None = None,
    paces: Paces | None = None,
    progress: Callable[[int, int, float], None] | None = None,
    seed: int = 0,
    margin: float = 0.0,
) -> Schedule:
    """Schedules a trace in the fluid environment (`JobEnv`) under one policy.

    Args:
        policy: a name of JOB_POLICIES, or a function (observations, envs) -> actions as
            `JobEnvs.step` takes them (e.g. a trained policy; see examples/train_policy.py).
        paces: a `Paces` to share simulated paces between calls on one fabric.
        progress: called after each decision with (jobs finished, jobs, simulated time).
        seed: of the "random" policy.
        margin: of the "contention" and "rollout" policies: the fraction of predicted job-seconds by which
            an action must beat packed to be chosen.

    Returns:
        a Schedule whose runs have no iteration_finish and whose result is None (no joint simulation).
    """
    if isinstance(policy, str) and policy not in JOB_POLICIES:
        raise ScenarioError(f"policy: unknown {policy!r}; expected one of {list(JOB_POLICIES)} or a function")
    check_margin(margin)
    envs = JobEnvs(fabric, [list(jobs)], gpus=gpus, server=server, paces=paces)
    obs, _ = envs.reset([0])
    done = envs.episodes[0].done
    rng = np.random.default_rng(seed)
    while not done:
        if policy == "simloop":
            actions = envs.simloop_actions()
        elif policy == "contention":
            actions = envs.lookahead_actions(margin=margin)
        elif policy == "rollout":
            actions = envs.rollout_actions(margin=margin)
        elif policy == "greedy-contention":
            actions = envs.heuristic_actions("contention")
        elif policy == "random":
            e = envs.episodes[0]
            actions = [[str(g) for g in rng.choice(e.free(), e.head().gpus, replace=False)]]
        elif isinstance(policy, str):
            actions = envs.heuristic_actions(policy)
        else:
            actions = policy(obs, envs)
        obs, _, dones, _ = envs.step(actions)
        done = bool(dones[0])
        if progress is not None:
            progress(len(envs.episodes[0].done_at), len(jobs), envs.episodes[0].t)
    name = policy if isinstance(policy, str) else getattr(policy, "__name__", "custom")
    return Schedule(name, envs.cluster.gpus, envs.runs(0), None)


def policy_summary(s: Schedule) -> dict:
    """Mean / p90 / max JCT, makespan and GPU utilization of one schedule."""
    return {
        "mean_jct": s.mean_jct,
        "p90_jct": s.jct_percentile(90),
        "max_jct": s.jct_percentile(100),
        "makespan": s.makespan,
        "gpu_utilization": s.gpu_utilization,
    }


def _seconds(t: float) -> str:
    """A JCT for the table: 2 decimals, or 4 digits and an exponent from 1e6 s on (9 characters at most)."""
    return f"{t:.2f}" if abs(t) < 1e6 else f"{t:.3e}"


def policy_table(results: dict[str, Schedule]) -> str:
    """Mean / p90 / max JCT, GPU utilization per policy, and the mean JCT change against the best and
    worst of the placement heuristics in `results`."""
    heur = [s.mean_jct for n, s in results.items() if n in HEURISTICS]
    lines = [
        f"{'policy':<14}{'mean JCT':>10}{'p90 JCT':>10}{'max JCT':>10}{'GPU util':>10}{'vs best':>9}{'vs worst':>9}"
    ]
    for name, s in results.items():
        x = policy_summary(s)
        rel = (
            f" {x['mean_jct'] / min(heur) - 1:>+8.1%} {x['mean_jct'] / max(heur) - 1:>+8.1%}" if heur else ""
        )
        jct = "".join(f" {_seconds(x[k]):>9}" for k in ("mean_jct", "p90_jct", "max_jct"))
        lines.append(f"{name:<14}{jct}{x['gpu_utilization']:>10.1%}{rel}")
    lines.append("(JCT in s; vs best / worst: mean JCT against the best / worst placement heuristic here;")
    lines.append(
        " DeepShare reports {:+.1%} / {:+.1%} for its RL policies, arXiv 2310.20209)".format(
            *DEEPSHARE_REFERENCE
        )
    )
    return "\n".join(lines)


def save_schedules(results: dict[str, Schedule], path: str, *, trace: str = "") -> None:
    """Per policy: the summary and every job (id, model, gpus, arrival, start, finish, jct, placement);
    JSON, or HDF5 (one group per policy, a dataset per column, the summary as attributes)."""
    data = {
        "trace": trace,
        "policies": {
            name: policy_summary(s)
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


def plot_jct_cdf(results: dict[str, Schedule], path: str) -> None:
    """The JCT CDF of each policy, written atomically."""
    from matplotlib.figure import Figure

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
