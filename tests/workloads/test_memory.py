"""GPU memory of pipelines: the micro-batches in flight per schedule in closed form, the issue's example
refused with its figures (and run once offloaded), and SPipe's measured runs, which ran or ran out of GPU
memory as netsim's memory model says, with nothing fitted to them."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import pytest

import netsim
from netsim import ScenarioError
from netsim.topology import cluster, leaf_spine, pcie_server
from netsim.workloads import Offload, TransformerStage, in_flight, pipeline, pipeline_memory, pipeline_order

ROOT = Path(__file__).resolve().parents[2]
# the issue's example: 24 layers of h = 12288 per stage, 8 sequences of 2048 tokens per micro-batch
BIG = TransformerStage(hidden=12288, seq_len=2048, micro_batch=8, layers=24)


@pytest.mark.parametrize(
    ("schedule", "p", "m", "v", "vb", "held"),
    [
        ("gpipe", 4, 16, 1, None, 16),  # every forward before the first backward
        ("1f1b", 4, 16, 1, None, 4),  # p warm-up forwards on the first stage
        ("1f1b", 4, 2, 1, None, 2),
        ("zb-h1", 4, 16, 1, None, 4),  # B frees the stash, W runs later
        ("interleaved", 4, 16, 2, None, 4 + 3 / 2),  # Korthikanti et al.: p (1 + (p - 1) / (p v))
        ("interleaved", 4, 16, 4, None, 4 + 3 / 4),
        ("breadth-first", 4, 16, 2, None, 16),
        ("breadth-first", 4, 16, 2, 6, 16),  # SPipe's remapped backward chunks
    ],
)
def test_micro_batches_in_flight_match_the_closed_forms(schedule, p, m, v, vb, held):
    assert in_flight(pipeline_order(schedule, p, m, v, vb), v, vb) == pytest.approx(held)


def test_the_issues_example_is_refused_with_its_figures_and_runs_offloaded():
    costs = BIG.costs(150e12)
    n = 24 * 12 * 12288**2  # parameters per stage
    stash = 24 * 2048 * 8 * 12288 * (34 + 5 * 96 * 2048 / 12288)  # Korthikanti, 96 heads of 128
    total = 16 * n + 64 * stash  # fp16 weights and gradients, Adam's 12 B, 64 micro-batches in flight
    memory = pipeline_memory(costs, stages=4, microbatches=64, schedule="gpipe")
    assert memory.total == pytest.approx(total)
    needs = rf"needs {total / 1e9:.1f} GB per GPU \(weights {2 * n / 1e9:.1f}, gradients {2 * n / 1e9:.1f}, "
    unnamed = pcie_server(4, sockets=1)  # the fabric names no GPU: the largest netsim knows
    with pytest.raises(ScenarioError, match=needs + r".* a GPU holds 80\.0 GB \(the fabric names no GPU"):
        pipeline(unnamed, unnamed.gpus(), schedule="gpipe", microbatches=64, costs=costs)
    server = pcie_server(4, sockets=1, device="RTX 4090")
    with pytest.raises(ScenarioError, match=r"costs: needs .* a GPU holds 24\.0 GB \(RTX 4090 datasheet\)"):
        pipeline(server, server.gpus(), schedule="gpipe", microbatches=64, costs=costs)
    with pytest.raises(ScenarioError, match=r"holds 100\.0 GB \(memory_capacity\)"):
        pipeline(server, server.gpus(), microbatches=64, costs=costs, memory_capacity=100e9)
    built = pipeline(
        server, server.gpus(), schedule="gpipe", microbatches=64, costs=costs, check_memory=False
    )
    assert built.memory == memory

    # offloaded: parameters and optimizer in host memory, one layer per chunk, recomputed activations
    small = dataclasses.replace(BIG, micro_batch=1, recompute=True).costs(150e12)
    offload = Offload(memory="mem0", cpu="cpu0", step_time=1.0, host_parameters=True)
    kw = dict(schedule="breadth-first", chunks=24, microbatches=4, costs=small)
    pipe = pipeline(server, server.gpus(), offload=offload, **kw)
    assert pipe.memory.optimizer == 0
    assert pipe.memory.parameters == pytest.approx(2 * n * 2 / 24)  # the chunk running and the one arriving
    assert pipe.memory.activations == pytest.approx(4 * 24 * 2 * 2048 * 12288)  # layer inputs, 4 in flight
    assert pipe.memory.total < 24e9
    result = netsim.simulate(pipe.scenario())
    stats = pipe.stats(result)
    compute = 4 * (small.forward + small.backward)  # each device's passes, recomputation included
    assert all(busy == pytest.approx(compute) for busy in stats.busy.values())
    assert compute < stats.iteration_time < 2 * compute
    with pytest.raises(ScenarioError, match="costs: needs"):  # without offload every layer stays on the GPU
        pipeline(server, server.gpus(), **kw)
    assert (
        pipeline_memory(small, stages=4, microbatches=4, schedule="breadth-first", chunks=24).parameters
        == 2 * n
    )


def test_spipes_runs_ran_or_ran_out_of_gpu_memory_as_the_model_says():
    # 63 Megatron and SPipe runs on 32 GB V100s and 24 GB RTX 3090s: 57 ran, 6 ran out of GPU memory
    spec = importlib.util.spec_from_file_location("examples", ROOT / "examples" / "make_workload_examples.py")
    examples = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(examples)
    rows = examples.spipe_memory_rows()
    assert len(rows) == 63 and sum(not r[4] for r in rows) == 6
    wrong = [r for r in rows if r[4] != (r[5] <= r[6])]
    assert not wrong


def test_a_cluster_of_one_gpu_model_names_it():
    v100 = pcie_server(4, nics=1, device="V100")
    assert cluster(leaf_spine(1, 1, 2), v100).device == "V100"
    assert cluster(leaf_spine(1, 1, 2), [v100, pcie_server(4, nics=1)]).device == ""


@pytest.mark.parametrize(
    ("capacity", "message"), [(-1, "must be > 0"), (float("nan"), "finite"), ("-3 GB", "> 0")]
)
def test_a_bad_memory_capacity_is_named(capacity, message):
    server = pcie_server(4, sockets=1)
    costs = TransformerStage(hidden=1024, seq_len=128, micro_batch=1, layers=2).costs(1e12)
    with pytest.raises(ScenarioError, match=f"memory_capacity: .*{message}"):
        pipeline(server, server.gpus(), microbatches=4, costs=costs, memory_capacity=capacity)
    assert (
        pipeline(server, server.gpus(), microbatches=4, costs=costs, memory_capacity="24 GB").memory.total > 0
    )
