"""The training compiler against closed forms: compute-only pipelines (the bubble formula), Megatron's TP
all-reduce count and ring time, the DP ring all-reduce, the Korthikanti activation formula, ZeRO splits,
memory refusal, and the closed-form estimate against the simulation, on one switch and across DGX A100
servers."""

from __future__ import annotations

import dataclasses

import pytest

import netsim
from netsim import ScenarioError
from netsim.topology import dgx_a100, leaf_spine
from netsim.topology._nvswitch import A100_NVSWITCH_PORT, HDR_NIC
from netsim.workloads import (
    ComputeModel,
    ParallelLayout,
    TransformerModel,
    estimate_iteration,
    link_rates,
    memory_per_gpu,
    optimizer_seconds,
    predict_layouts,
    program_size,
    rail_rings,
    read_layout_table,
    training_workload,
)

BW = 200e9  # B/s per GPU port
ALPHA = 3e-6  # s per ring step
COMPUTE = ComputeModel(peak_flops=100e12, memory_bandwidth=1e12, collective_latency=ALPHA)
MODEL = TransformerModel(hidden=256, heads=8, layers=4, seq_len=128, vocab=0)
PAD = netsim.Shape(items=512, hops=4, after=8, resources=32)


def star(n: int, bandwidth: float = BW):
    """n GPUs on one switch, a port each: NVSwitch-like."""
    return dataclasses.replace(leaf_spine(1, 1, n, host_bandwidth=bandwidth), device="A100")


def run(job):
    return netsim.simulate(netsim.compile_scenario(job.scenario(), shape=PAD))


def optimizer(job, d=0):
    params = job.model.layers // job.layout.pp * job.model.layer_parameters / job.layout.tp
    if job.layout.zero:
        params /= job.layout.dp
    return optimizer_seconds(COMPUTE.vector(), COMPUTE.memory_bandwidth, params)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_compute_only_pipeline_is_the_bubble_formula(schedule):
    p, m = 4, 6
    layout = ParallelLayout(pp=p, micro_batch=2, global_batch=2 * m, schedule=schedule)
    job = training_workload(star(p, 1e20), star(p).workers, MODEL, layout, compute=COMPUTE)
    stage = job.op_time["F", 0] + job.op_time["BW", 0]
    result = run(job)
    # m x T + (p - 1) x T: the bubble ((p - 1) / m) x m T on top of the work
    assert float(result.makespan) == pytest.approx((m + p - 1) * stage + optimizer(job), rel=1e-9)
    stats = job.stats(result)
    assert stats.bubble == pytest.approx((p - 1) * stage, rel=1e-6)
    assert stats.tp_exposed == stats.dp_exposed == 0.0


@pytest.mark.parametrize("schedule, chunks", [("interleaved", 2), ("zb-h1", 1), ("breadth-first", 2)])
def test_other_schedules_lie_between_the_work_and_gpipe(schedule, chunks):
    p, m = 2, 4
    layout = ParallelLayout(pp=p, global_batch=m, schedule=schedule, chunks=chunks)
    job = training_workload(star(p, 1e20), star(p).workers, MODEL, layout, compute=COMPUTE)
    stage = (job.op_time["F", 0] + job.op_time["BW", 0]) * chunks  # op_time is per model chunk
    result = float(run(job).makespan)
    assert m * stage + optimizer(job) < result < (m + p - 1) * stage + optimizer(job)
    ops = [t for t in job.workload.tasks if t.device == job.grid[0][0][0] and "optimizer" not in t.id]
    assert sum(t.duration for t in ops) == pytest.approx(m * stage)


@pytest.mark.parametrize("per_layer", [False, True])
def test_tp_bytes_are_megatrons_count_and_time_is_the_ring(per_layer):
    t, m, b = 4, 2, 2
    layout = ParallelLayout(tp=t, micro_batch=b, global_batch=b * m)
    job = training_workload(star(t), star(t).workers, MODEL, layout, compute=COMPUTE, per_layer=per_layer)
    size = b * MODEL.seq_len * MODEL.hidden * 2  # one all-reduce: b s h fp16 values
    # 2 forward + 2 backward all-reduces per layer and micro-batch; a ring sends 2(t - 1) S in all
    assert job.tp_bytes == pytest.approx(m * MODEL.layers * 4 * 2 * (t - 1) * size)
    ring = 2 * (t - 1) / t * size / BW + 2 * (t - 1) * ALPHA  # one all-reduce on the ring
    work = m * (job.op_time["F", 0] + job.op_time["BW", 0])
    result = run(job)
    expected = work + m * MODEL.layers * 4 * ring + optimizer(job)
    assert float(result.makespan) == pytest.approx(expected, rel=1e-9)
    assert job.stats(result).tp_exposed == pytest.approx(m * MODEL.layers * 4 * ring, rel=1e-9)


def test_full_recompute_reruns_the_forward_all_reduces():
    layout = ParallelLayout(tp=2, recompute="full")
    job = training_workload(star(2), star(2).workers, MODEL, layout, compute=COMPUTE)
    size = MODEL.seq_len * MODEL.hidden * 2
    assert job.tp_bytes == pytest.approx(MODEL.layers * 6 * 2 * size)
    plain = training_workload(star(2), star(2).workers, MODEL, ParallelLayout(tp=2), compute=COMPUTE)
    assert job.op_time["BW", 0] == pytest.approx(plain.op_time["BW", 0] + plain.op_time["F", 0])


def test_dp_all_reduce_is_the_ring_closed_form():
    n = 4
    layout = ParallelLayout(dp=n, overlap_dp=False, dp_bucket_bytes=1e12)
    job = training_workload(star(n), star(n).workers, MODEL, layout, compute=COMPUTE)
    grads = MODEL.layers * MODEL.layer_parameters * 2.0
    ring = 2 * (n - 1) * (grads / n / BW + ALPHA)
    result = run(job)
    work = job.op_time["F", 0] + job.op_time["BW", 0]
    assert float(result.makespan) == pytest.approx(work + ring + optimizer(job), rel=1e-9)
    assert job.stats(result).dp_exposed == pytest.approx(ring, rel=1e-9)


def test_dp_buckets_overlap_the_last_backward():
    n = 2
    grads = MODEL.layers * MODEL.layer_parameters * 2.0
    times = []
    for overlap in (False, True):
        layout = ParallelLayout(dp=n, overlap_dp=overlap, dp_bucket_bytes=grads / 4)
        times.append(
            float(
                run(training_workload(star(n, 5e9), star(n).workers, MODEL, layout, compute=COMPUTE)).makespan
            )
        )
    assert times[1] < times[0]


@pytest.mark.parametrize(
    "layout",
    [
        ParallelLayout(tp=2, pp=2, micro_batch=2, global_batch=8),
        ParallelLayout(tp=2, dp=2, micro_batch=1, global_batch=4),
        ParallelLayout(pp=2, dp=2, micro_batch=1, global_batch=8, recompute="full"),
    ],
)
def test_closed_form_estimate_matches_the_simulation(layout):
    model = dataclasses.replace(MODEL, vocab=1000)
    job = training_workload(star(layout.gpus), star(8).workers, model, layout, compute=COMPUTE)
    simulated = float(run(job).makespan)
    estimate = estimate_iteration(model, layout, COMPUTE, BW)
    assert estimate == pytest.approx(simulated, rel=0.02)


def test_dp_rings_leave_each_server_by_other_gpus():
    # a DP group's all-reduce (rail_rings): one channel per rank a server holds, each crossing on its own rail
    ranks = ["n0/gpu0", "n0/gpu4", "n1/gpu0", "n1/gpu4"]
    channels = rail_rings(ranks)
    assert channels == [
        ["n0/gpu4", "n0/gpu0", "n1/gpu0", "n1/gpu4"],
        ["n0/gpu0", "n0/gpu4", "n1/gpu4", "n1/gpu0"],
    ]
    exits = {ring[(ring.index(g) + 1) % 4][:2] != g[:2] and g for ring in channels for g in ring}
    assert exits - {False} == {"n0/gpu4", "n1/gpu4", "n0/gpu0", "n1/gpu0"}  # 4 crossings, 4 NICs
    assert rail_rings(["gpu0", "gpu1", "gpu2"]) == [["gpu0", "gpu1", "gpu2"]]
    # servers of unequal sizes share no rails: each channel leaves every server by other ranks
    assert rail_rings(["a/0", "a/1", "b/0", "b/1", "b/2"]) == [
        ["a/0", "a/1", "b/0", "b/1", "b/2"],
        ["a/1", "a/0", "b/1", "b/2", "b/0"],
    ]


DGX2 = dgx_a100(2)
PAD_DGX = netsim.Shape(items=640, hops=6, after=32, resources=128)  # one compile for the three below


@pytest.mark.parametrize(
    ("layout", "rates"),
    [
        # stage 1 on the other server; DP inside a server
        (ParallelLayout(tp=4, pp=2, dp=2, global_batch=4), (A100_NVSWITCH_PORT, HDR_NIC, A100_NVSWITCH_PORT)),
        # DP over 2 servers, 2 ranks on each: 2 channels by 2 NICs
        (ParallelLayout(tp=4, dp=4), (A100_NVSWITCH_PORT, float("inf"), 2 * HDR_NIC)),
        # TP over 2 servers: 8 channels by 8 NICs, under the GPU port
        (ParallelLayout(tp=16, global_batch=2), (8 * HDR_NIC, float("inf"), float("inf"))),
    ],
)
def test_closed_form_matches_the_simulation_across_servers(layout, rates):
    assert tuple(link_rates(DGX2, DGX2.workers, layout)) == pytest.approx(rates, rel=1e-12)
    model = TransformerModel(hidden=256, heads=16, layers=4, seq_len=128, vocab=1000)
    job = training_workload(DGX2, DGX2.workers, model, layout, compute=COMPUTE)
    simulated = float(netsim.simulate(netsim.compile_scenario(job.scenario(), shape=PAD_DGX)).makespan)
    estimate = estimate_iteration(model, layout, COMPUTE, link_rates(DGX2, DGX2.workers, layout))
    assert estimate == pytest.approx(simulated, rel=0.01)


@pytest.mark.parametrize("per_layer", [False, True])
@pytest.mark.parametrize(
    "layout",
    [
        ParallelLayout(tp=16, global_batch=2),  # TP over both servers: 8 ring channels
        ParallelLayout(tp=2, pp=2, dp=4, global_batch=8, overlap_dp=True, dp_bucket_bytes=1e5),
        ParallelLayout(pp=4, dp=4, global_batch=32, schedule="interleaved", chunks=2, recompute="full"),
        ParallelLayout(tp=4, pp=2, dp=2, global_batch=8, schedule="zb-h1"),
    ],
)
def test_program_size_counts_what_is_compiled(layout, per_layer):
    model = TransformerModel(hidden=256, heads=16, layers=8, seq_len=128, vocab=1000)
    job = training_workload(DGX2, DGX2.workers, model, layout, compute=COMPUTE, per_layer=per_layer)
    size = program_size(DGX2, DGX2.workers, model, layout, per_layer=per_layer)
    assert size == len(job.workload.flows) + len(job.workload.tasks)


def test_korthikanti_activation_formula_and_zero_splits():
    model = TransformerModel(hidden=1024, heads=16, layers=8, seq_len=512, vocab=0)
    s, b, h, a = 512, 2, 1024, 16
    mem = memory_per_gpu(model, ParallelLayout(micro_batch=b))
    assert mem.activations == pytest.approx(8 * s * b * h * (34 + 5 * a * s / h))
    tp = memory_per_gpu(model, ParallelLayout(tp=4, micro_batch=b, sequence_parallel=True))
    assert tp.activations == pytest.approx(mem.activations / 4)
    full = memory_per_gpu(model, ParallelLayout(micro_batch=b, recompute="full"))
    assert full.activations == pytest.approx(8 * 2 * s * b * h)
    n = model.layers * model.layer_parameters
    assert mem.parameters + mem.gradients + mem.optimizer == pytest.approx(16 * n)
    z1 = memory_per_gpu(model, ParallelLayout(dp=4, zero=1))
    z3 = memory_per_gpu(model, ParallelLayout(dp=4, zero=3))
    assert z1.parameters + z1.gradients + z1.optimizer == pytest.approx((4 + 12 / 4) * n)
    assert z3.parameters + z3.gradients + z3.optimizer == pytest.approx(16 / 4 * n)
    # 1F1B's first stage holds p micro-batches; GPipe all m
    one = memory_per_gpu(model, ParallelLayout(pp=4, global_batch=16))
    gpipe = memory_per_gpu(model, ParallelLayout(pp=4, global_batch=16, schedule="gpipe"))
    assert gpipe.activations == pytest.approx(one.activations * 16 / 4)
    # breadth-first runs every forward before the first backward, as GPipe does
    wide = ParallelLayout(pp=4, global_batch=16, schedule="breadth-first", chunks=2)
    assert memory_per_gpu(model, wide).activations == pytest.approx(gpipe.activations)


def test_a_layout_that_does_not_fit_is_refused_with_the_figures():
    # the example: 96 layers of h = 12288 over 4 stages on 24 GB GPUs
    model = TransformerModel(hidden=12288, heads=96, layers=96, seq_len=2048)
    layout = ParallelLayout(pp=4, micro_batch=8, global_batch=512, schedule="gpipe")
    with pytest.raises(ScenarioError, match=r"needs \d+\.\d GB per GPU .* a GPU holds 24\.0 GB"):
        training_workload(star(4), star(4).workers, model, layout, memory_capacity=24e9)
    small = TransformerModel(hidden=1024, heads=16, layers=8, seq_len=1024)
    tight = ParallelLayout(pp=2, micro_batch=1, global_batch=4, recompute="full")
    need = memory_per_gpu(small, tight).total
    with pytest.raises(ScenarioError, match="optimizer"):
        training_workload(star(2), star(2).workers, small, tight, memory_capacity=need * 0.8)
    offloaded = dataclasses.replace(tight, offload=True)
    job = training_workload(
        star(2), star(2).workers, small, offloaded, memory_capacity=need * 0.8, compute=COMPUTE
    )
    assert float(run(job).makespan) > 0


def test_vtrain_table_reads():
    from netsim.data import trace_path

    rows = read_layout_table(trace_path("vtrain_ground_truth_single.csv"))
    assert len(rows) == 1440
    first = rows[0]
    assert (first.layout.pp, first.layout.micro_batch, first.layout.global_batch) == (2, 8, 16)
    assert first.model.hidden == 1024 and first.measured == pytest.approx(0.372160408)
    assert all(r.layout.gpus in (2, 4, 8) for r in rows)
    assert all(r.gpus == r.layout.gpus for r in rows) and rows[1].gpus == 8  # the "# GPUs" column


def test_layout_table_errors_name_the_line(tmp_path):
    header = (
        "# GPUs,global batch,micro batch,hidden size,attention heads,# layers,sequence length,"
        "tensor parallelism,data parallelism,pipeline parallelism\n"
    )
    table = tmp_path / "t.csv"
    table.write_text(header + "8,8,1,256,8,4,128,2,2,2\n4,8,1,256,8,4,128,2,2,2\n")
    with pytest.raises(
        ScenarioError, match=r"line 3: # GPUs = 4 is fewer than the layout's tp x pp x dp = 8"
    ):
        read_layout_table(table)
    table.write_text(header + "8,8,1,256,8,4,x,2,2,2\n")
    with pytest.raises(ScenarioError, match="line 2: expected whole numbers"):
        read_layout_table(table)
    table.write_text(header.replace("hidden size,", "") + "8,8,1,8,4,128,2,2,2\n")
    with pytest.raises(ScenarioError, match="no header line"):
        read_layout_table(table)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(tp=3), "tp: must divide heads"),
        (dict(pp=3), "layers=4 must split evenly"),
        (dict(dp=2, global_batch=3), "multiple of micro_batch x dp"),
        (dict(recompute="some"), "recompute"),
        (dict(zero=4), "ZeRO stage"),
    ],
)
def test_bad_layouts_are_clear_errors(kwargs, message):
    with pytest.raises(ScenarioError, match=message):
        training_workload(star(8), star(8).workers, MODEL, ParallelLayout(**kwargs), compute=COMPUTE)


def test_predict_layouts_from_python_batches_rows_as_one_simulation_each(tmp_path):
    """The table API `netsim train --table` prints: on a Topology object, rows in order, a simulated row's
    batched time equal to its own simulation, a row that cannot be built given its reason, progress to `log`."""
    table = tmp_path / "t.csv"
    table.write_text(
        "global batch,micro batch,hidden size,attention heads,# layers,sequence length,"
        "tensor parallelism,data parallelism,pipeline parallelism,iteration time (ms)\n"
        "4,1,256,8,4,128,2,2,1,10\n"
        "8,2,256,8,4,128,1,2,2,\n"
        "4,1,256,8,4,128,3,1,1,\n"  # TP 3 does not divide 8 heads
    )
    rows = read_layout_table(table)
    topo, lines = star(4), []
    records = predict_layouts(rows, topo, compute=COMPUTE, log=lines.append)
    assert [r["method"] for r in records[:2]] == ["simulated", "simulated"] and "reason" in records[2]
    for rec, row in zip(records[:2], rows, strict=False):
        job = training_workload(topo, topo.workers, row.model, row.layout, compute=COMPUTE)
        assert rec["predicted_s"] == pytest.approx(float(netsim.simulate(job.scenario()).makespan), rel=1e-12)
    assert records[0]["error"] == pytest.approx(records[0]["predicted_s"] / 0.010 - 1)
    assert records[0]["topology"] == topo.name and records[0]["fits"] is True
    assert lines[0] == "2 rows in 1 batches" and lines[-1].startswith("batch of 2 rows")


def test_compute_model_efficiencies_are_fractions():
    for name in ("gemm_efficiency", "memory_efficiency"):
        with pytest.raises(ScenarioError, match=rf"ComputeModel.{name}: must be in \(0, 1\], got 1.5"):
            ComputeModel(**{name: 1.5})
    assert ComputeModel(gemm_efficiency=1.0, memory_efficiency=1.0).gemm_efficiency == 1.0
