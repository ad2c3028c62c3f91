"""Training jobs compiled to workloads (netsim.jobs.Job, job_workload): validation with clear
errors, and the per-rank phase chaining, read off the compiled workload without simulating it."""

from __future__ import annotations

import pytest

from netsim import ScenarioError, workloads
from netsim.jobs import SERVER_COLLECTIVES, Job, job_workload

GPUS = ["n0/gpu0", "n0/gpu1", "n1/gpu0", "n1/gpu1"]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Job("a", 0.0, 0, 1, 0.1), "job 'a'.gpus: expected an integer >= 1, got 0"),
        (lambda: Job("a", -1.0, 1, 1, 0.1), "job 'a'.arrival: must be >= 0"),
        (lambda: Job("a", 0.0, 1, 1, 0.1, pattern="ring"), "job 'a'.pattern: unknown 'ring'"),
        (lambda: Job("a/b", 0.0, 1, 1, 0.1), "Job.id: must be a non-empty string without '/'"),
        (lambda: Job("a", 0.0, 1, 1, 0.0), "does nothing"),
        (lambda: Job.of("a", "ResNet", arrival=0.0, gpus=1, iterations=1), "unknown 'ResNet'"),
    ],
)
def test_bad_jobs_are_clear_errors(make, message):
    with pytest.raises(ScenarioError, match=message):
        make()


def test_job_workload_needs_distinct_gpus():
    job = Job("a", 0.0, 1, 1, 0.1)
    with pytest.raises(ScenarioError, match="needs 1 distinct GPUs"):
        job_workload(job, ["n0/gpu0", "n0/gpu1"])
    with pytest.raises(ScenarioError, match="needs 2 distinct GPUs"):
        job_workload(Job("b", 0.0, 2, 1, 0.1), ["n0/gpu0", "n0/gpu0"])


def test_job_workload_chains_phases_per_rank():
    # allreduce pattern, 2 iterations: compute tasks, then the ring AllReduce; iteration 2's compute on a
    # rank waits only for that rank's own sends and receives of iteration 1's AllReduce
    job = Job("a", 0.0, 4, 2, compute=0.1, pattern="allreduce", comm_bytes=1e6)
    w, ends = job_workload(job, GPUS, start=0.5)
    assert len(ends) == job.iterations
    assert all(x.start == 0.5 for x in (*w.flows, *w.tasks))
    tasks = {t.id: t for t in w.tasks}
    flows = {f.id: f for f in w.flows}
    assert sorted(tasks) == sorted(f"a/it{i}/p0/{g}" for i in range(2) for g in GPUS)
    for g in GPUS:
        first, second = tasks[f"a/it0/p0/{g}"], tasks[f"a/it1/p0/{g}"]
        assert first.after == () and second.after
        assert all(flows[i].src == g or flows[i].dst == g for i in second.after)
    # every collective root waits on its sending rank's compute of that iteration
    roots = [
        f for f in w.flows if f.id.startswith("a/it0/") and not any(a.startswith("a/it0/p1") for a in f.after)
    ]
    assert roots and all(f"a/it0/p0/{f.src}" in f.after for f in roots)
    assert set(ends[-1]) <= set(flows) | set(tasks)


def test_single_gpu_and_compute_free_jobs():
    # one GPU: no collective; a compute-free job is only its collectives
    solo, _ = job_workload(Job("s", 0.0, 1, 3, compute=0.2, comm_bytes=1e9), ["n0/gpu0"])
    assert not solo.flows and len(solo.tasks) == 3
    comm, _ = job_workload(Job("c", 0.0, 2, 1, compute=0.0, comm_bytes=1e6), GPUS[:2])
    assert comm.flows and not comm.tasks


@pytest.mark.parametrize("kind", ["allreduce", "allgather", "reducescatter", "alltoall"])
def test_server_collectives_load_each_nic_as_the_per_rank_collective(kind):
    # 3 servers of 2 ranks in ring order: the per-rank collective's bytes leaving each server (what its
    # NIC carries) equal the one flow per server of SERVER_COLLECTIVES
    ranks = [f"n{s}/gpu{g}" for s in range(3) for g in range(2)]
    server = lambda gpu: gpu.split("/")[0]

    def egress(workload):
        out = dict.fromkeys(("n0", "n1", "n2"), 0.0)
        for f in workload.flows:
            if server(f.src) != server(f.dst):
                out[server(f.src)] += f.bytes
        return out

    full = egress(getattr(workloads, kind)(ranks, 6e6, name="x").workload)
    coarse = SERVER_COLLECTIVES[kind](ranks, 6e6, name="x").workload
    assert len(coarse.flows) == 3
    assert egress(coarse) == pytest.approx(full, rel=1e-12)
    # within one server there is nothing to move, and a job there keeps its phases chained
    assert not SERVER_COLLECTIVES[kind](ranks[:2], 6e6, name="y").workload.flows
    w, ends = job_workload(
        Job("a", 0.0, 2, 2, 0.1, "allreduce", 1e6), ranks[:2], collectives=SERVER_COLLECTIVES
    )
    assert not w.flows and ends == (
        ("a/it0/p0/n0/gpu0", "a/it0/p0/n0/gpu1"),
        ("a/it1/p0/n0/gpu0", "a/it1/p0/n0/gpu1"),
    )
    assert {t.id: t.after for t in w.tasks}["a/it1/p0/n0/gpu1"] == ("a/it0/p0/n0/gpu1",)


def test_fsdp_sends_three_times_the_parameters_in_two_concurrent_streams():
    # FSDP / ZeRO-3 with S the parameter bytes: per iteration each GPU all-gathers the parameters in
    # forward and again in backward and reduce-scatters the gradients: 3 (G - 1)/G S sent per GPU on
    # a ring, and as much leaving each server. The backward's AllGather and ReduceScatter run on
    # separate streams: both start when the rank's compute ends, neither waits for the other.
    ranks = [f"n{s}/gpu{g}" for s in range(3) for g in range(2)]
    G, S = len(ranks), 6e6
    job = Job("f", 0.0, G, 2, compute=0.1, pattern="fsdp", comm_bytes=S)
    w, ends = job_workload(job, ranks)
    for it in range(2):
        sent = dict.fromkeys(ranks, 0.0)
        for f in w.flows:
            if f.id.startswith(f"f/it{it}/"):
                sent[f.src] += f.bytes
        assert sent == pytest.approx(dict.fromkeys(ranks, 3 * (G - 1) / G * S), rel=1e-12)
    coarse, _ = job_workload(job, ranks, collectives=SERVER_COLLECTIVES)
    egress = dict.fromkeys(("n0", "n1", "n2"), 0.0)
    for f in coarse.flows:
        if f.id.startswith("f/it0/"):
            egress[f.src.split("/")[0]] += f.bytes
    assert egress == pytest.approx(dict.fromkeys(egress, 3 * (G - 1) / G * S), rel=1e-12)
    roots = [
        f for f in w.flows if f.id.startswith("f/it0/") and not any(a.startswith("f/it0/p1") for a in f.after)
    ]
    streams = {f.id.split("/")[3] for f in roots}
    assert streams == {"allgather", "reducescatter"}
    assert all(f.after == (f"f/it0/p0/{f.src}",) for f in roots)
    # the next iteration's compute on a rank waits for that rank's part of both streams
    after = {t.id: t.after for t in w.tasks}["f/it1/p0/n1/gpu0"]
    assert {a.split("/")[3] for a in after} == {"allgather", "reducescatter"}
    assert set(ends[0]) <= {f.id for f in w.flows} | {t.id for t in w.tasks}
