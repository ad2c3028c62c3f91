"""Multi-job scheduling on a shared fabric (netsim.jobs.run_jobs): per-job closed forms, FIFO
semantics, the placement policies (netsim.jobs.place) with the load the scheduler gives them,
contention between co-located jobs (against DeepShare's measured pairwise table, qualitatively),
validation, and every examples/jobs_*.json."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import netsim
from netsim import ScenarioError
from netsim.data import trace_path
from netsim.jobs import (
    Job,
    colocation,
    colocation_matrix,
    deepshare_cluster,
    job_workload,
    place,
    run_jobs,
    run_placed,
)
from netsim.jobs._placement import Cluster, choose
from netsim.topology import Topology, cable

ROOT = Path(__file__).resolve().parents[2]
PCIE, NIC = 25e9, 12.5e9
# one padded shape for every simulation here (the examples included): one compile
PAD = netsim.Shape(items=1024, hops=16, after=8, resources=128)


def servers(n: int, per: int) -> Topology:
    """n servers of `per` GPUs: GPU - server switch at PCIE, server switch - one top switch at NIC."""
    links, kind = [], {"top": "switch"}
    for s in range(n):
        kind[f"n{s}/sw"] = "switch"
        links += cable(f"n{s}/sw", "top", NIC)
        for g in range(per):
            links += cable(f"n{s}/gpu{g}", f"n{s}/sw", PCIE)
            kind[f"n{s}/gpu{g}"] = "gpu"
    return Topology(f"{n}x{per}", links, kind)


def ring_time(n: int, size: float, bw: float) -> float:
    """Ring AllReduce on an ideal ring of bottleneck bw: 2(n - 1) steps of size/n bytes."""
    return 2 * (n - 1) * size / n / bw


# --- one job alone --------------------------------------------------------------------------------


def test_isolated_allreduce_job_closed_form():
    # One server: every ring hop is a PCIe hop, each of the 2(n - 1) steps moves S/n: 2(n - 1) S/n / PCIE.
    # Two servers (ranks n0/gpu0, n0/gpu1, n1/gpu0, n1/gpu1): each uplink carries one S/n piece per step,
    # and a rank forwards as soon as it has received (its next send may overlap its previous one), so the
    # uplink never idles: 2(n - 1) S/n / NIC, the bottleneck link's bound.
    topo, size, compute = servers(2, 4), 1e8, 0.01
    job = Job("a", 0.0, 4, 3, compute=compute, pattern="allreduce", comm_bytes=size)
    for gpus, bw in (
        (["n0/gpu0", "n0/gpu1", "n0/gpu2", "n0/gpu3"], PCIE),
        (["n0/gpu0", "n0/gpu1", "n1/gpu0", "n1/gpu1"], NIC),
    ):
        per_iteration = compute + ring_time(4, size, bw)
        run = run_placed(topo, [(job, gpus, 0.5)], shape=PAD)[0]["a"]
        assert run.start == 0.5
        assert run.iteration_finish == pytest.approx([0.5 + k * per_iteration for k in (1, 2, 3)], rel=1e-12)
        assert run.iteration_time == pytest.approx(per_iteration, rel=1e-12)


def test_alltoall_and_fsdp_phases_chain_per_rank():
    # alltoall: compute/2, all-to-all, compute/2, all-to-all. Within one server each rank sends S/n to
    # each of n - 1 peers over its own PCIe link: (n - 1)/n S / PCIE per all-to-all.
    topo = servers(1, 4)
    gpus = [f"n0/gpu{g}" for g in range(4)]
    a2a = Job("m", 0.0, 4, 2, compute=0.02, pattern="alltoall", comm_bytes=4e8)
    fsdp = Job("f", 0.0, 4, 2, compute=0.02, pattern="fsdp", comm_bytes=4e8)
    # fsdp: AllGather and ReduceScatter of 1.5 S at once, two rings sharing each link: 3 (n - 1)/n S / bw
    expect = {"m": 0.02 + 2 * 0.75 * 4e8 / PCIE, "f": 0.02 + 3 * 0.75 * 4e8 / PCIE}
    for job in (a2a, fsdp):
        run = run_placed(topo, [(job, gpus, 0.0)], shape=PAD)[0][job.id]
        assert run.iteration_time == pytest.approx(expect[job.id], rel=1e-12), job.pattern
    w, ends = job_workload(a2a, gpus)
    assert len(ends) == 2 and all(x.start == 0.0 for x in w.flows)


# --- FIFO scheduling ------------------------------------------------------------------------------


def test_fifo_head_of_line_blocking_and_utilization():
    # 4 GPUs. a (2 GPUs) runs; b needs 4 and waits for a; c (1 GPU) arrives later and may not overtake b.
    topo = servers(1, 4)
    jobs = [
        Job("a", 0.0, 2, 2, compute=0.1, pattern="none"),
        Job("b", 0.05, 4, 1, compute=0.2, pattern="none"),
        Job("c", 0.06, 1, 1, compute=0.05, pattern="none"),
    ]
    sched = run_jobs(topo, jobs, gpus=[f"n0/gpu{g}" for g in range(4)], shape=PAD)
    a, b, c = sched.runs
    assert (a.start, a.finish) == pytest.approx((0.0, 0.2))
    assert (b.start, b.finish) == pytest.approx((0.2, 0.4))
    assert (c.start, c.finish) == pytest.approx((0.4, 0.45))  # waited although a GPU was free at 0.06
    assert sched.mean_jct == pytest.approx((0.2 + 0.35 + 0.39) / 3)
    assert sched.jct_percentile(100) == pytest.approx(0.39)
    # allocated GPU-seconds 2 x 0.2 + 4 x 0.2 + 1 x 0.05 over 4 GPUs x 0.45 s; all of it computing
    assert sched.gpu_utilization == pytest.approx(1.25 / 1.8)
    assert sched.compute_utilization == pytest.approx(sched.gpu_utilization)


# --- placement policies ---------------------------------------------------------------------------


def test_packed_spread_and_topology_placements():
    topo = servers(3, 2)
    free = [f"n{s}/gpu{g}" for s in range(3) for g in range(2)]
    job = Job("x", 0.0, 2, 1, compute=0.1, pattern="allreduce", comm_bytes=1e6)
    assert place("packed", topo, free, job) == ("n0/gpu0", "n0/gpu1")
    assert place("spread", topo, free, job) == ("n0/gpu0", "n1/gpu0")
    assert place("topology", topo, free, job) == ("n0/gpu0", "n0/gpu1")
    # best fit: a server with exactly 2 free GPUs beats one with more
    assert place("packed", topo, ["n0/gpu0", "n1/gpu0", "n1/gpu1"], job) == ("n1/gpu0", "n1/gpu1")
    assert place("packed", topo, ["n0/gpu0"], job) is None


def test_contention_policy_avoids_the_busiest_link():
    # One free GPU per server; all pairs are equally close. Load on n0's uplink makes the
    # contention-aware policy pick n1 + n2, while the topology-aware one takes the first pair.
    topo = servers(3, 2)
    free = ["n0/gpu1", "n1/gpu1", "n2/gpu1"]
    job = Job("x", 0.0, 2, 1, compute=0.1, pattern="allreduce", comm_bytes=1e6)
    load = {"n0/sw->top": 5e9, "top->n0/sw": 5e9}
    assert place("topology", topo, free, job, load=load) == ("n0/gpu1", "n1/gpu1")
    assert place("contention", topo, free, job, load=load) == ("n1/gpu1", "n2/gpu1")
    assert place("contention", topo, free, job) == ("n0/gpu1", "n1/gpu1")  # no load: the closest


def _grown(cluster, free, seed, n, key):
    """The greedy growth as first written: add the free GPU with the smallest key(chosen, gpu), the first in
    cluster order on ties (an independent reference for `choose`'s vectorized one)."""
    chosen, rest = [seed], [g for g in free if g != seed]
    while len(chosen) < n:
        best = min(rest, key=lambda g: key(chosen, g))
        chosen.append(best)
        rest.remove(best)
    return cluster.ordered(chosen)


def _choose_reference(policy, cluster, free, job, load):
    hops = lambda chosen, g: sum(cluster.distance(c, g) + cluster.distance(g, c) for c in chosen)
    hop_cost = lambda c: sum(cluster.distance(a, b) for a, b in cluster.pairs(c, job.pattern))
    if policy == "topology":
        return min((_grown(cluster, free, seed, job.gpus, hops) for seed in free), key=hop_cost)
    worst = lambda ids: max((load.get(i, 0.0) for i in ids), default=0.0)
    links = lambda pairs: {i for a, b in pairs for i in cluster.route(a, b)}
    step = lambda chosen, g: (
        max(max(worst(cluster.route(c, g)), worst(cluster.route(g, c))) for c in chosen),
        hops(chosen, g),
    )
    cands = [
        place("packed", cluster.fabric, free, job),
        place("spread", cluster.fabric, free, job),
        *(_grown(cluster, free, seed, job.gpus, step) for seed in free),
    ]
    used = lambda c: links(cluster.pairs(c, job.pattern))
    return min(cands, key=lambda c: (worst(used(c)), sum(load.get(i, 0.0) for i in used(c)), hop_cost(c)))


@pytest.mark.parametrize("seed", range(12))
def test_topology_and_contention_placements_match_the_greedy_reference(seed):
    # random free sets, jobs and link loads drawn from a few values (ties are where orders could differ)
    topo = deepshare_cluster()
    rng = np.random.default_rng(seed)
    gpus = topo.gpus()
    free = [g for g in gpus if rng.random() < 0.6]
    links = [link.id for link in topo.links]
    load = {links[i]: float(rng.choice([1e9, 2e9, 5e9])) for i in rng.choice(len(links), 40, replace=False)}
    cluster = Cluster.of(topo, gpus)
    for n, pattern in [(2, "allreduce"), (4, "alltoall"), (min(8, len(free)), "allreduce")]:
        job = Job("x", 0.0, n, 1, compute=0.1, pattern=pattern, comm_bytes=1e6)
        for policy in ("topology", "contention"):
            want = _choose_reference(policy, cluster, free, job, load)
            assert choose(policy, cluster, free, job, load) == want, (policy, n, pattern)


def test_contention_policy_shortens_jobs_on_a_fragmented_cluster():
    # h takes 7 GPUs (n0 + 3 of n1), k and l 3 each on n2, n3 (intra-server), leaving one GPU on n1, n2,
    # n3. j must span two servers: the topology-aware policy gives it n1 + n2 (sharing n1's uplink with
    # h), the contention-aware policy n2 + n3, so both h and j finish sooner.
    topo = servers(4, 4)
    gpus = [f"n{s}/gpu{g}" for s in range(4) for g in range(4)]
    jobs = [
        Job("h", 0.0, 7, 3, compute=0.02, pattern="allreduce", comm_bytes=2e8),
        Job("k", 0.0, 3, 3, compute=0.05, pattern="allreduce", comm_bytes=1e6),
        Job("l", 0.0, 3, 3, compute=0.05, pattern="allreduce", comm_bytes=1e6),
        Job("j", 0.0, 2, 6, compute=0.02, pattern="allreduce", comm_bytes=2e8),
    ]
    got = {p: run_jobs(topo, jobs, gpus=gpus, policy=p, shape=PAD) for p in ("topology", "contention")}
    j = {p: s.runs[3] for p, s in got.items()}
    assert j["topology"].gpus == ("n1/gpu3", "n2/gpu3")
    assert j["contention"].gpus == ("n2/gpu3", "n3/gpu3")
    assert got["contention"].runs[0].finish < got["topology"].runs[0].finish
    assert j["contention"].finish < j["topology"].finish
    assert got["contention"].mean_jct < got["topology"].mean_jct


def test_contention_policy_ignores_jobs_that_have_finished():
    # 3 servers of 3 GPUs. At t = 0, a (3 GPUs, heavy AllReduce, short) fills n0; d1 and d2 (2 GPUs each,
    # compute only, long) take n1 and n2, leaving n1/gpu2 and n2/gpu2. c (2 GPUs) arrives after a has
    # finished: n0 is a free server whose links carry nothing now. Load read from the simulation made at
    # t = 0 would still count a's ring on every n0 link and send c across the NICs to n1/gpu2 + n2/gpu2;
    # the load of the jobs still running (d1, d2: no traffic) leaves c on n0, as packed does.
    topo = servers(3, 3)
    gpus = [f"n{s}/gpu{g}" for s in range(3) for g in range(3)]
    jobs = [
        Job("a", 0.0, 3, 1, compute=0.01, pattern="allreduce", comm_bytes=1e9),
        Job("d1", 0.0, 2, 1, compute=2.0, pattern="none"),
        Job("d2", 0.0, 2, 1, compute=2.0, pattern="none"),
        Job("c", 0.5, 2, 2, compute=0.01, pattern="allreduce", comm_bytes=1e9),
    ]
    got = {p: run_jobs(topo, jobs, gpus=gpus, policy=p, shape=PAD) for p in ("packed", "contention")}
    a, d1, d2, c = got["contention"].runs
    assert a.gpus == ("n0/gpu0", "n0/gpu1", "n0/gpu2") and a.finish < c.job.arrival < d1.finish
    assert (d1.gpus, d2.gpus) == (("n1/gpu0", "n1/gpu1"), ("n2/gpu0", "n2/gpu1"))
    assert c.gpus == ("n0/gpu0", "n0/gpu1") == got["packed"].runs[3].gpus
    # inside one server the ring runs at PCIe speed: compute + 2 (n - 1) S/n / PCIE per iteration
    assert c.iteration_time == pytest.approx(0.01 + ring_time(2, 1e9, PCIE), rel=1e-12)
    assert got["contention"].mean_jct == pytest.approx(got["packed"].mean_jct, rel=1e-12)


# --- contention between jobs ----------------------------------------------------------------------


def test_colocated_identical_jobs_halve_their_network_share():
    # Two identical jobs, 2 GPUs on n0 + 2 on n1 each, start together and stay mirror images: each uplink
    # now carries both jobs' pieces, so the AllReduce takes 2a instead of a (a = its time alone, see the
    # isolated test) and the throughput ratio is (c + a)/(c + 2a).
    topo, size, c = servers(2, 4), 1e8, 0.01
    job = Job("a", 0.0, 4, 3, compute=c, pattern="allreduce", comm_bytes=size)
    a = ring_time(4, size, NIC)
    ratio = colocation(
        topo,
        job,
        job,
        ["n0/gpu0", "n0/gpu1", "n1/gpu0", "n1/gpu1"],
        ["n0/gpu2", "n0/gpu3", "n1/gpu2", "n1/gpu3"],
        shape=PAD,
    )
    assert ratio == pytest.approx((c + a) / (c + 2 * a), rel=1e-9)
    # on disjoint servers they share nothing
    far = servers(4, 2)
    alone = colocation(
        far,
        job,
        job,
        ["n0/gpu0", "n0/gpu1", "n1/gpu0", "n1/gpu1"],
        ["n2/gpu0", "n2/gpu1", "n3/gpu0", "n3/gpu1"],
        shape=PAD,
    )
    assert alone == pytest.approx(1.0, rel=1e-12)


def deepshare_table():
    from netsim.traces import read_trace

    (table,) = read_trace(trace_path("sched_deepshare_shared_thp_ratio.csv")).tables
    index = {row[0]: row for row in table.rows}
    cols = {c: k for k, c in enumerate(table.columns)}
    return lambda a, b: float(index[a][cols[b]])


def test_communication_heavy_pairs_slow_down_most_as_in_deepshare():
    # Measured (4 GPUs on 2 nodes each): pairs of communication-heavy jobs lose the most throughput,
    # pairs of light ones almost none. The model, with MODELS' illustrative jobs on two 4-GPU servers,
    # must order the same pairs the same way; we compare the ordering, not the values.
    measured = deepshare_table()
    key = lambda m: f"{m},4,2"
    heavy, light = ("FSDP", "MoE"), ("GraphSage", "MobileNetV3")
    meas = {(a, b): measured(key(a), key(b)) for a in heavy + light for b in heavy + light}
    mean = lambda table, rows, cols: np.mean([table[a, b] for a in rows for b in cols])
    assert mean(meas, heavy, heavy) < mean(meas, heavy, light) < 1.0
    assert mean(meas, heavy, heavy) < mean(meas, light, light)

    topo = servers(2, 4)
    its = {"FSDP": 1, "MoE": 2, "GraphSage": 4, "MobileNetV3": 3}
    zoo = [Job.of(m, m, arrival=0.0, gpus=4, iterations=its[m]) for m in heavy + light]
    model = colocation_matrix(
        topo,
        zoo,
        ["n0/gpu0", "n0/gpu1", "n1/gpu0", "n1/gpu1"],
        ["n0/gpu2", "n0/gpu3", "n1/gpu2", "n1/gpu3"],
        shape=PAD,
    )
    sim = {(a.model, b.model): model[i, k] for i, a in enumerate(zoo) for k, b in enumerate(zoo)}
    assert np.all(model <= 1.0 + 1e-9) and np.all(model > 0.3)
    assert mean(sim, heavy, heavy) < mean(sim, heavy, light)
    assert mean(sim, heavy, heavy) < mean(sim, light, light)
    assert min(sim, key=sim.get)[0] in heavy and min(meas, key=meas.get)[0] in heavy


# --- validation -----------------------------------------------------------------------------------


def test_bad_traces_are_clear_errors():
    topo = servers(1, 2)
    gpus = ["n0/gpu0", "n0/gpu1"]
    job = Job("a", 0.0, 1, 1, 0.1)
    with pytest.raises(ScenarioError, match="duplicate job id"):
        run_jobs(topo, [job, job], gpus=gpus)
    with pytest.raises(ScenarioError, match="needs 3 GPUs, the cluster has 2"):
        run_jobs(topo, [Job("b", 0.0, 3, 1, 0.1)], gpus=gpus)
    with pytest.raises(ScenarioError, match="unknown placement policy 'random'"):
        run_jobs(topo, [job], gpus=gpus, policy="random")
    with pytest.raises(ScenarioError, match="gpus: expected distinct nodes of the fabric"):
        run_jobs(topo, [job], gpus=["n0/gpu0", "n9/gpu0"])


# --- examples -------------------------------------------------------------------------------------

JOB_EXAMPLES = sorted((ROOT / "examples").glob("jobs_*.json"))


def test_there_are_job_examples():
    assert len(JOB_EXAMPLES) >= 4


@pytest.mark.parametrize("path", JOB_EXAMPLES, ids=lambda p: p.name)
def test_example_simulates(path):
    scenario = netsim.Scenario.load(path)
    result = netsim.simulate(netsim.compile_scenario(scenario, shape=PAD))
    assert result.makespan > 0
    jobs = {t.id.split("/")[0] for t in scenario.tasks}
    assert len(jobs) >= 4  # several jobs share the fabric
