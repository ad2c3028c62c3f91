"""The scheduling environment (netsim.jobs.JobEnv / JobEnvs), its paces, the policies over it
(netsim.jobs.schedule, simulation-in-the-loop), trace files and `netsim jobs`."""

from __future__ import annotations

import dataclasses
import itertools
import json

import numpy as np
import pytest
from test_schedule import NIC, PCIE, servers

import netsim
from netsim import NetsimError, ScenarioError, cli
from netsim.jobs import (
    CANDIDATES,
    MODELS,
    ActionError,
    Job,
    JobEnv,
    JobEnvs,
    Paces,
    deepshare_cluster,
    deepshare_mix,
    deepshare_trace,
    format_job_trace,
    job_workload,
    policy_table,
    read_job_trace,
    schedule,
)

WAIT = len(CANDIDATES)


TOPO = servers(2, 4)
PACES = Paces(TOPO)  # one cache (and few compiles) for the whole file


def small_trace(seed: int) -> list[Job]:
    """Six 2- or 4-GPU allreduce jobs with seeded sizes and arrivals."""
    rng = np.random.default_rng(seed)
    return [
        Job(
            f"j{i}",
            float(rng.uniform(0, 0.3)),
            int(rng.choice([2, 4])),
            int(rng.integers(2, 6)),
            compute=0.01,
            pattern="allreduce",
            comm_bytes=float(rng.choice([2e7, 1e8])),
        )
        for i in range(6)
    ]


def rollout(env_step, obs, rule, limit=100):
    """Steps until done with actions rule(step, mask); returns the rewards and observations."""
    rewards, seen = [], [obs]
    for k in range(limit):
        obs, r, done, _ = env_step(rule(k, obs.mask))
        rewards.append(r)
        seen.append(obs)
        if done:
            return rewards, seen
    raise AssertionError("episode did not end")


def first_allowed(k, mask):
    """A deterministic mix of actions: candidate k % 4 if allowed, else the first allowed one."""
    mask = np.asarray(mask)
    return k % WAIT if mask[k % WAIT] else int(np.flatnonzero(mask)[0]) if mask.any() else 0


# --- paces: closed forms ---------------------------------------------------------------------------


def test_pace_alone_and_side_by_side_closed_forms():
    # Alone across two servers, a ring AllReduce takes c + 2(n - 1) S/n / NIC per iteration (see
    # test_schedule). Two identical jobs on the same two servers stay mirror images and share both
    # uplinks at half rate: iteration c + 2a, a the AllReduce time alone. On other servers: no change.
    c, size = 0.01, 1e8
    a = 2 * 3 * size / 4 / NIC
    sig = ("allreduce", c, size, 4, 0.0)
    job_a = (sig, ("n0/gpu0", "n0/gpu1", "n1/gpu0", "n1/gpu1"))
    job_b = (sig, ("n0/gpu2", "n0/gpu3", "n1/gpu2", "n1/gpu3"))
    inside = (sig, ("n0/gpu2", "n0/gpu3", "n0/gpu0", "n0/gpu1"))
    PACES.fill(PACES.needed([job_a]) + PACES.needed([job_a, job_b]))
    (alone,) = PACES.paces([job_a])
    assert alone == pytest.approx(1 / (c + a), rel=1e-9)
    assert PACES.paces([job_a, job_b]) == pytest.approx([1 / (c + 2 * a)] * 2, rel=1e-9)
    # a job inside server n1 shares no link with one inside n0: two groups, each at its own pace
    other = (sig, ("n1/gpu0", "n1/gpu1", "n1/gpu2", "n1/gpu3"))
    assert len(PACES.groups([inside, other])) == 2


def test_fluid_schedule_of_one_job_is_exact():
    # one job alone: JCT = iterations x (c + 2(n - 1) S/n / PCIE) inside one server (packed)
    job = Job("a", 0.25, 4, 7, compute=0.01, pattern="allreduce", comm_bytes=1e8)
    s = schedule(TOPO, [job], policy="packed", paces=PACES)
    assert s.runs[0].start == 0.25
    assert s.runs[0].jct == pytest.approx(7 * (0.01 + 2 * 3 * 1e8 / 4 / PCIE), rel=1e-9)
    assert s.result is None


# --- the environment -------------------------------------------------------------------------------


def test_rewards_sum_to_minus_total_jct_and_observation_shapes():
    env = JobEnv(TOPO, small_trace, paces=PACES)
    obs, _ = env.reset(seed=1)
    assert obs.free.shape == (2,) and obs.load.shape == (len(TOPO.links),)
    assert obs.candidates.shape == (4, 5) and obs.mask.shape == (5,) and obs.mask[:WAIT].all()
    rewards, _ = rollout(env.step, obs, first_allowed)
    runs = env.runs()
    assert len(runs) == 6
    assert sum(rewards) == pytest.approx(-sum(r.jct for r in runs), rel=1e-9)
    # conservation: GPUs are exclusive, so two jobs overlapping in time never share a GPU
    for x in runs:
        for y in runs:
            if x is not y and x.start < y.finish and y.start < x.finish:
                assert not set(x.gpus) & set(y.gpus)


def test_determinism_under_a_seed():
    def episode(seed):
        env = JobEnv(TOPO, small_trace, paces=Paces(TOPO))  # a fresh cache: nothing carried over
        obs, _ = env.reset(seed=seed)
        rewards, seen = rollout(env.step, obs, first_allowed)
        return rewards, [r.finish for r in env.runs()], seen

    r1, f1, o1 = episode(3)
    r2, f2, o2 = episode(3)
    assert r1 == r2 and f1 == f2
    for a, b in zip(o1, o2, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)
    assert episode(4)[1] != f1


def test_batched_envs_equal_one_by_one():
    seeds = [0, 1, 2]
    envs = JobEnvs(TOPO, [small_trace] * 3, paces=PACES)
    obs, _ = envs.reset(seeds)
    batched_rewards, batched_obs, k, done = [], [obs], 0, np.zeros(3, bool)
    while not done.all():
        actions = [first_allowed(k, m) for m in obs.mask]
        obs, r, done, _ = envs.step(np.array(actions))
        batched_rewards.append(r)
        batched_obs.append(obs)
        k += 1
    for b, seed in enumerate(seeds):
        env = JobEnv(TOPO, small_trace, paces=PACES)
        o, _ = env.reset(seed=seed)
        rewards, seen = rollout(env.step, o, first_allowed)
        n = len(rewards)
        np.testing.assert_allclose(rewards, [r[b] for r in batched_rewards[:n]], rtol=1e-12)
        assert all(r[b] == 0.0 for r in batched_rewards[n:])  # done environments stay done
        for one, many in zip(seen, batched_obs, strict=False):
            for x, y in zip(one, many, strict=True):
                np.testing.assert_allclose(x, y[b], rtol=1e-12)
        assert [r.finish for r in env.runs()] == [r.finish for r in envs.runs(b)]


def test_bad_actions_raise_clear_errors():
    jobs = [
        Job("big", 0.0, 4, 50, compute=0.01, pattern="allreduce", comm_bytes=1e7),
        Job("next", 0.0, 4, 2, compute=0.01, pattern="allreduce", comm_bytes=1e7),
    ]
    env = JobEnv(TOPO, jobs, paces=PACES)
    with pytest.raises(ActionError, match="reset"):
        env.step(0)
    obs, _ = env.reset()
    assert not obs.mask[WAIT]  # nothing runs and nothing is to arrive: waiting would never end
    with pytest.raises(ActionError, match="cannot wait"):
        env.step(WAIT)
    for bad, match in [
        (5, r"out of range \[0, 4\]"),
        (-1, "out of range"),
        (np.array([0, 1]), r"shape \(2,\)"),
        (1.0, "integer action"),
        (True, "integer action"),
        ("n0/gpu0", "string"),
        (["n0/gpu0", "n9/gpu0", "n0/gpu1", "n0/gpu2"], r"unknown GPU\(s\) \['n9/gpu0'\]"),
        (["n0/gpu0", "n0/gpu1"], "needs 4 distinct GPUs"),
    ]:
        with pytest.raises(ActionError, match=match):
            env.step(bad)
    env.step(["n0/gpu0", "n0/gpu1", "n0/gpu2", "n0/gpu3"])  # "big" takes all of n0
    with pytest.raises(ActionError, match=r"busy \(job 'big'\)") as e:
        env.step(["n0/gpu0", "n1/gpu1", "n1/gpu2", "n1/gpu3"])  # n0 is full
    assert isinstance(e.value, NetsimError)
    envs = JobEnvs(TOPO, [jobs, jobs], paces=PACES)
    envs.reset()
    with pytest.raises(ActionError, match=r"expected 2 \(one per environment\), got 3"):
        envs.step(np.zeros(3, int))
    with pytest.raises(ActionError, match="one action per environment"):
        envs.step(0)
    with pytest.raises(ScenarioError, match="needs 16 GPUs"):
        JobEnv(TOPO, [Job("huge", 0.0, 16, 1, compute=0.1)]).reset()


# --- policies --------------------------------------------------------------------------------------


def test_simloop_never_worse_than_the_best_heuristic_on_a_hand_case():
    # "a" runs on n0/gpu0,1 + n1/gpu0,1, its ring crossing both uplinks. "b" (same traffic) arrives next.
    # Inside one server (packed) "b" shares no link with "a": both keep their isolated paces. Across the
    # servers (spread) the two share both uplinks and both slow down. Simulation-in-the-loop must find
    # the single-server placement, and so match the best heuristic's mean JCT.
    a = Job("a", 0.0, 4, 20, compute=0.01, pattern="allreduce", comm_bytes=1e8)
    b = Job("b", 0.01, 2, 10, compute=0.01, pattern="allreduce", comm_bytes=1e8)
    spread_a = lambda obs, envs: [CANDIDATES.index("spread")]  # puts "a" across both servers
    results = {}
    for name in ("packed", "spread", "topology", "contention", "simloop"):
        first = {"done": False}

        def policy(obs, envs, name=name, first=first):
            if not first["done"]:
                first["done"] = True
                return spread_a(obs, envs)
            return envs.simloop_actions() if name == "simloop" else envs.heuristic_actions(name)

        results[name] = schedule(TOPO, [a, b], policy=policy, paces=PACES)
    best = min(s.mean_jct for n, s in results.items() if n != "simloop")
    assert results["simloop"].mean_jct <= best * (1 + 1e-12)
    assert results["simloop"].mean_jct < results["spread"].mean_jct * 0.99
    # one batched simulation scores every candidate of a decision
    envs = JobEnvs(TOPO, [[a, b]], paces=Paces(TOPO))
    envs.reset()
    envs.step([CANDIDATES.index("spread")])
    before = envs.paces.batches
    envs.simloop_actions()
    assert envs.paces.batches == before + 1
    placed_b = results["simloop"].runs[1].gpus
    assert len({g.split("/")[0] for g in placed_b}) == 1, placed_b


def test_lookahead_predicts_exactly_what_the_environment_then_runs():
    # every job arrives at 0, so the forks know the whole future: the packed fork's job-seconds are the
    # packed schedule's summed JCT, and the spread fork's those of "spread once, then packed". Then the
    # contention-aware policy can never lose to packed: each choice beats packed's continuation.
    jobs = [dataclasses.replace(j, arrival=0.0) for j in small_trace(3)]
    envs = JobEnvs(TOPO, [jobs], paces=PACES)
    envs.reset()
    costs = envs.lookahead_costs()[0]
    packed, spread = CANDIDATES.index("packed"), CANDIDATES.index("spread")
    assert set(costs) >= {packed, spread}
    total = lambda s: sum(r.jct for r in s.runs)
    assert costs[packed] == pytest.approx(total(schedule(TOPO, jobs, policy="packed", paces=PACES)), rel=1e-9)
    first = {"done": False}

    def spread_once(obs, envs):
        action = envs.heuristic_actions("spread" if not first["done"] else "packed")
        first["done"] = True
        return action

    assert costs[spread] == pytest.approx(
        total(schedule(TOPO, jobs, policy=spread_once, paces=PACES)), rel=1e-9
    )
    contention = schedule(TOPO, jobs, policy="contention", paces=PACES)
    assert contention.mean_jct <= schedule(TOPO, jobs, policy="packed", paces=PACES).mean_jct * (1 + 1e-12)


def test_lookahead_told_the_trace_knows_later_arrivals():
    # staggered arrivals: at the first decision the myopic forks know one job; told the trace, they know
    # the whole of it, so the packed fork's job-seconds are the packed schedule's summed JCT (what
    # benchmarks/jobs_headroom.py compares the blind lookahead with)
    jobs = small_trace(3)
    envs = JobEnvs(TOPO, [jobs], paces=PACES)
    envs.reset()
    packed = CANDIDATES.index("packed")
    seen, told = envs.lookahead_costs()[0], envs.lookahead_costs(future="trace")[0]
    total = sum(r.jct for r in schedule(TOPO, jobs, policy="packed", paces=PACES).runs)
    assert told[packed] == pytest.approx(total, rel=1e-9)
    assert seen[packed] < 0.5 * told[packed]
    later = sorted(jobs, key=lambda j: j.arrival)[envs.episodes[0].arrived :]
    assert later and envs.lookahead_costs(future=[later])[0] == told  # the same jobs, given as a list
    assert envs.episodes[0].t > 0
    early = dataclasses.replace(later[0], id="early", arrival=0.0)  # before the clock
    with pytest.raises(ScenarioError, match=r"future\[0\]: .* arriving at or after the clock"):
        envs.lookahead_costs(future=[[early]])
    for bad in ("all", [[], []], 3):
        with pytest.raises(ScenarioError, match="one list of jobs per environment"):
            envs.lookahead_costs(future=bad)
    with pytest.raises(ScenarioError, match=r"future\[0\]: expected netsim.jobs.Job items"):
        envs.lookahead_costs(future=[["j9"]])


def test_lookahead_predicts_waiting_exactly_and_the_policy_takes_the_cheapest_action():
    # every job arrives at 0; at the second decision a job runs, so the head may wait for its end. The
    # wait fork's job-seconds beyond packed's equal those of the schedule "packed, wait once, then
    # packed" beyond the packed schedule's, and the contention-aware choice is the cheapest action.
    jobs = [dataclasses.replace(j, arrival=0.0) for j in small_trace(3)]
    envs = JobEnvs(TOPO, [jobs], paces=PACES)
    envs.reset()
    packed = CANDIDATES.index("packed")
    assert WAIT not in envs.lookahead_costs()[0]  # nothing runs: no completion to wait for
    envs.step([packed])
    costs = envs.lookahead_costs()[0]
    assert WAIT in costs and packed in costs
    decisions = {"n": 0}

    def wait_second(obs, envs):
        decisions["n"] += 1
        return [WAIT] if decisions["n"] == 2 else envs.heuristic_actions("packed")

    total = lambda s: sum(r.jct for r in s.runs)
    plain = total(schedule(TOPO, jobs, policy="packed", paces=PACES))
    waited = total(schedule(TOPO, jobs, policy=wait_second, paces=PACES))
    assert waited != pytest.approx(plain, rel=1e-6)  # the wait changes the schedule
    assert costs[WAIT] - costs[packed] == pytest.approx(waited - plain, rel=1e-9, abs=1e-9)
    chosen = int(envs.lookahead_actions()[0])
    assert costs[chosen] == min(costs.values())


@pytest.mark.parametrize("seed", [0, 8])
def test_rollout_costs_continue_the_contention_policy_exactly_and_never_lose_to_it(seed):
    # every job arrives at 0: the rollout's job-seconds for the action the contention-aware policy takes
    # are that policy's summed JCT (its own continuation), so taking the cheapest action at each decision
    # never does worse than it; batched environments score as one by one
    jobs = [dataclasses.replace(j, arrival=0.0) for j in small_trace(seed)]
    total = lambda s: sum(r.jct for r in s.runs)
    contention = total(schedule(TOPO, jobs, policy="contention", paces=PACES))
    envs = JobEnvs(TOPO, [jobs, small_trace(seed + 1)], paces=PACES)
    envs.reset()
    costs = envs.rollout_costs()
    assert costs[0][int(envs.lookahead_actions()[0])] == pytest.approx(contention, rel=1e-9)
    assert costs[0] != envs.lookahead_costs()[0]  # not the FIFO continuation
    alone = JobEnvs(TOPO, [small_trace(seed + 1)], paces=PACES)
    alone.reset()
    assert alone.rollout_costs()[0] == pytest.approx(costs[1], rel=1e-12)
    chosen = envs.rollout_actions()
    assert [c[int(a)] for c, a in zip(costs, chosen, strict=True)] == [min(c.values()) for c in costs]
    assert total(schedule(TOPO, jobs, policy="rollout", paces=PACES)) <= contention * (1 + 1e-12)


def test_rollout_can_beat_the_contention_policy_and_without_the_whole_trace_lose_to_it():
    # eight jobs of 2, 4 or 6 GPUs: all at 0, the rollout's summed JCT is 1.09 % below the contention-aware
    # policy's (as the guarantee allows); with arrivals it cannot see, one trace has it 16.5 % above
    def trace(seed, staggered):
        rng = np.random.default_rng(seed)
        return [
            Job(
                f"j{i}",
                float(rng.uniform(0, 0.3)) if staggered else 0.0,
                int(rng.choice([2, 4, 6])),
                int(rng.integers(2, 8)),
                compute=0.01,
                pattern="allreduce",
                comm_bytes=float(rng.choice([2e7, 1e8, 3e8])),
            )
            for i in range(8)
        ]

    total = lambda jobs, policy: sum(r.jct for r in schedule(TOPO, jobs, policy=policy, paces=PACES).runs)
    better, worse = trace(27, staggered=False), trace(34, staggered=True)
    assert total(better, "rollout") / total(better, "contention") - 1 == pytest.approx(-0.0109, abs=5e-4)
    assert total(worse, "rollout") / total(worse, "contention") - 1 == pytest.approx(0.165, abs=5e-3)


def test_contention_avoids_the_links_a_running_job_loads():
    # "a" spans both servers (spread): its ring loads both uplinks. "b" fits in one server: the lookahead
    # keeps it off the uplinks, and with margin 1 (no gain can be large enough) it falls back to packed.
    a = Job("a", 0.0, 4, 20, compute=0.01, pattern="allreduce", comm_bytes=1e8)
    b = Job("b", 0.01, 2, 10, compute=0.01, pattern="allreduce", comm_bytes=1e8)
    envs = JobEnvs(TOPO, [[a, b]], paces=PACES)
    envs.reset()
    envs.step([CANDIDATES.index("spread")])
    costs = envs.lookahead_costs()[0]
    chosen = int(envs.lookahead_actions()[0])
    assert costs[chosen] == min(costs.values())
    assert len({g.split("/")[0] for g in envs.candidates()[chosen]}) == 1
    assert int(envs.lookahead_actions(margin=1.0)[0]) == CANDIDATES.index("packed")
    for bad in (-0.1, 1.5, float("nan"), "0.1", None):
        with pytest.raises(ScenarioError, match=r"margin: expected a fraction in \[0, 1\], got"):
            envs.lookahead_actions(margin=bad)
    with pytest.raises(ScenarioError, match="margin: expected a fraction"):
        schedule(TOPO, [a, b], policy="rollout", paces=PACES, margin=2.0)


def test_random_policy_is_seeded_and_places_on_free_gpus():
    jobs = small_trace(4)
    a, b = (schedule(TOPO, jobs, policy="random", paces=PACES, seed=s) for s in (1, 1))
    assert [r.gpus for r in a.runs] == [r.gpus for r in b.runs]
    for r in a.runs:
        assert len(set(r.gpus)) == r.job.gpus and all(isinstance(g, str) for g in r.gpus)
    for x, y in itertools.combinations(a.runs, 2):  # jobs that overlap in time share no GPU
        if x.start < y.finish and y.start < x.finish:
            assert not set(x.gpus) & set(y.gpus)


def test_schedule_policies_and_validation():
    jobs = small_trace(5)
    for name in ("packed", "simloop"):
        s = schedule(TOPO, jobs, policy=name, paces=PACES)
        assert len(s.runs) == 6 and all(r.finish > r.start >= r.job.arrival for r in s.runs)
        assert 0 < s.gpu_utilization <= 1
    with pytest.raises(ScenarioError, match="unknown 'fastest'"):
        schedule(TOPO, jobs, policy="fastest")


# --- traces and the command line -------------------------------------------------------------------


def test_deepshare_trace_is_seeded_from_the_shared_mix(tmp_path):
    mix = deepshare_mix()
    assert len(mix) == 36 and {m for m, _, _ in mix} == set(MODELS)
    assert {g for _, g, _ in mix} == {2, 4, 8}
    a, b = deepshare_trace(20, seed=7), deepshare_trace(20, seed=7)
    assert a == b and a != deepshare_trace(20, seed=8)
    assert a[0].arrival == 0.0 and all(x.arrival <= y.arrival for x, y in itertools.pairwise(a))
    path = tmp_path / "t.csv"
    path.write_text(format_job_trace(a))
    assert read_job_trace(path) == a
    path.write_text("arrival,model,gpus,iterations\n0,MoE,2,x\n")
    with pytest.raises(ScenarioError, match="row 1: arrival, gpus, iterations must be numbers"):
        read_job_trace(path)
    path.write_text("arrival,model,gpus,iterations\n0,ResNet,2,3\n")
    with pytest.raises(ScenarioError, match=r"row 1: .*unknown 'ResNet'"):
        read_job_trace(path)
    path.write_text("arrival,model\n0,MoE\n")
    with pytest.raises(ScenarioError, match=r"missing column\(s\) \['gpus', 'iterations'\]"):
        read_job_trace(path)


def test_cli_jobs_smoke(tmp_path, capsys):
    trace = tmp_path / "trace.csv"
    assert cli.main(["jobs", "--generate", "3", "--seed", "1", "-o", str(trace)]) == 0
    jobs = read_job_trace(trace)
    small = [Job.of(j.id, j.model, arrival=j.arrival, gpus=2, iterations=2) for j in jobs]
    trace.write_text(format_job_trace(small))
    out = tmp_path / "r.json"
    code = cli.main(
        [
            "jobs",
            str(trace),
            "--policy",
            "packed,simloop",
            "--cluster",
            "2x4",
            "--out",
            str(out),
            "--no-compile-cache",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "packed" in captured.out and "simloop" in captured.out and "-18.2%" in captured.out
    assert "3/3 jobs (100.0%)" in captured.err and "\r" not in captured.err  # lines, not redraws, in a log
    data = json.loads(out.read_text())
    assert set(data["policies"]) == {"packed", "simloop"}
    assert len(data["policies"]["packed"]["jobs"]) == 3
    assert cli.main(["jobs", str(trace), "--policy", "nope", "--cluster", "2x4"]) == 2
    assert "unknown ['nope']" in capsys.readouterr().err


def test_trace_nodes_column_is_checked(tmp_path):
    path = tmp_path / "t.csv"
    head = "arrival,model,gpus,nodes,iterations\n"
    for nodes in ("0", "-1", "3", "x", "1.5"):
        path.write_text(head + f"0,MoE,2,1,3\n0,MoE,2,{nodes},3\n")
        with pytest.raises(
            ScenarioError,
            match=rf"t\.csv: row 2: nodes: expected an integer in \[1, gpus = 2\].*got '{nodes}'",
        ):
            read_job_trace(path)
    # empty (unknown), and more servers than a cluster has (DeepShare measured on 8): read
    path.write_text(head + "0,MoE,2,,3\n0,MoE,8,8,3\n")
    assert [j.gpus for j in read_job_trace(path)] == [2, 8]


def test_cli_jobs_cluster_error_names_the_option_once(tmp_path, capsys):
    trace = tmp_path / "t.csv"
    trace.write_text(format_job_trace([Job.of("a", "MoE", arrival=0.0, gpus=2, iterations=2)]))
    assert cli.main(["jobs", str(trace), "--cluster", "0x0", "--no-compile-cache"]) == 2
    assert capsys.readouterr().err == "netsim: error: --cluster: expected SxG with S, G >= 1, got '0x0'\n"


def test_policy_table_keeps_huge_jcts_apart():
    class Fake:  # what policy_table reads of a Schedule
        def __init__(self, jct):
            self.mean_jct, self.makespan, self.gpu_utilization = jct, 2 * jct, 0.5

        def jct_percentile(self, q):
            return self.mean_jct * (1 + q / 100)

    table = policy_table({"packed": Fake(1.7607232785633e10), "greedy-contention": Fake(12.5)})
    lines = table.splitlines()
    # every cell its own word, however long the name or large the number
    assert lines[1].split() == [
        "packed",
        "1.761e+10",
        "3.345e+10",
        "3.521e+10",
        "50.0%",
        "+140857862185.1%",
        "+0.0%",
    ]
    assert lines[2].split() == ["greedy-contention", "12.50", "23.75", "25.00", "50.0%", "+0.0%", "-100.0%"]
    assert lines[1].index("50.0%") == lines[0].index("GPU util") + 3  # the JCT columns keep their width


@pytest.fixture
def train_policy(monkeypatch):
    """examples/train_policy.py as a module, dropped from sys.modules afterwards whatever the test did."""
    import sys
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "examples"))
    import train_policy

    yield train_policy
    sys.modules.pop("train_policy", None)


def test_untrained_residual_policy_is_the_contention_policy(train_policy):
    # examples/train_policy.py's policy adds a residual, zero before training, to the lookahead's
    # predictions: untrained, its greedy choices are the contention-aware policy's, waits included
    import jax

    from netsim.jobs import CANDIDATE_FEATURES, JOB_FEATURES

    policy = train_policy.Policy(len(JOB_FEATURES), len(CANDIDATE_FEATURES), jax.random.PRNGKey(0))
    jobs = small_trace(4)
    with jax.numpy_dtype_promotion("standard"):
        trained = schedule(TOPO, jobs, policy=train_policy.trained_policy(policy), paces=PACES)
    contention = schedule(TOPO, jobs, policy="contention", paces=PACES)
    assert contention.mean_jct < schedule(TOPO, jobs, policy="packed", paces=PACES).mean_jct  # not packed's
    assert [(r.gpus, r.start, r.finish) for r in trained.runs] == [
        (r.gpus, r.start, r.finish) for r in contention.runs
    ]


@pytest.mark.slow
def test_train_policy_example_runs(train_policy):
    # examples/train_policy.py: one REINFORCE update on tiny traces, then its policy drives a schedule
    import jax

    with jax.numpy_dtype_promotion("standard"):
        policy, paces = train_policy.train(updates=1, envs=2, jobs=3, pool=1, verbose=False)
        s = schedule(
            paces.fabric, deepshare_trace(3, seed=5), policy=train_policy.trained_policy(policy), paces=paces
        )
    assert len(s.runs) == 3 and all(r.finish > r.start for r in s.runs)


def test_paces_start_at_a_shape_that_holds_the_fabrics_routes_and_an_all_to_all():
    # each batch size compiles once: the first groups (a 2-GPU ring, say) do not set a shape that a later
    # 8-GPU all-to-all over the fabric's longest routes would outgrow, recompiling every size again
    topo = deepshare_cluster()
    floor = Paces(topo).shape
    two_per_server = topo.gpus()[::4]  # 4 servers of 8 GPUs
    w, _ = job_workload(Job.of("a", "MoE", arrival=0.0, gpus=8, iterations=1), two_per_server)
    need = netsim.compile_scenario(w.scenario(topo, name="moe")).shape
    assert (need.hops, need.after) == (14, 14) and floor.holds(
        dataclasses.replace(need, items=1, resources=1)
    )
