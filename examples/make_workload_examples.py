"""Writes examples/pp_*.json (pipeline-parallel training) and examples/jobs_*.json (job traces on a cluster).

    python examples/make_workload_examples.py            # rewrite the files and print what each shows
    python examples/make_workload_examples.py --report   # also compare with the measured traces in netsim/data/traces/

Every file is a plain scenario: `netsim run examples/pp_1f1b.json --trace pp_1f1b.trace.json` simulates it
and writes a Perfetto timeline. The numbers quoted in docs/pipelines.md and docs/jobs.md come from --report.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np

import netsim
from netsim.checks import write_atomic
from netsim.data import trace_path
from netsim.jobs import MODELS, Job, colocation_matrix, run_jobs
from netsim.topology import cluster, leaf_spine, pcie_server
from netsim.workloads import Offload, TransformerStage, pipeline

HERE = Path(__file__).resolve().parent

# A 6.7B-parameter-like model (32 layers, h = 4096) on 4 stages of 8 layers; A100-class sustained FLOP/s.
GPT = TransformerStage(hidden=4096, seq_len=2048, micro_batch=1, layers=8)
A100_FLOPS = 150e12
MICROBATCHES = 8

# SPipe's spipe-v100 rows "10B, seq 1024 (and 2048), micro-batch 2, mini-batch 16, 1 node of 4 GPUs":
# 32 layers of h = 5120 (10.1B parameters), 8 micro-batches, V100-class GPUs, PCIe Gen3 x16, each GPU's
# process bound to its own NUMA node (SPipe's scripts), so each steps its optimizer on its own CPU.
SPIPE_ROW = ("spipe-v100", "10", "1024", "1")
SPIPE_SEQ_LENS = (1024, 2048)
LLAMA10B = TransformerStage(hidden=5120, seq_len=1024, micro_batch=2, layers=8)
PCIE3 = 12e9
# The two fitted numbers, both on the baseline (Megatron's) seq-1024 run alone; SPipe's runs and seq 2048
# are then predictions. Sustained FLOP/s: the baseline's GPU pipeline takes that row's gpu_latency (6.299 s).
V100_FLOPS = 48.4e12
# CPU seconds one NUMA node needs to step one stage's optimizer (2.5B parameters): the baseline's non-GPU
# time is that row's elapsed - gpu_latency (11.540 - 6.299 s).
STEP_TIME = 4.4
# SPipe's Megatron baseline (`-j 1f1b_offload -f 2`): interleaved 1F1B with 2 model chunks per GPU.
MEGATRON_CHUNKS = 2
# SPipe's runs (its scripts/eval_speedup.sh: -f 2 -b 6) split each GPU's layers into 2 forward and 6
# backward chunks; netsim's breadth-first schedule uses one chunking for both passes: the backward's,
# which sets how finely the offload and the CPU steps are cut.
SPIPE_CHUNKS = 6


def save(scenario: netsim.Scenario, name: str, description: str) -> None:
    data = {"name": name, "description": description, **scenario.to_dict()}
    write_atomic(HERE / f"{name}.json", json.dumps(data, indent=1))


def server4(**kw):
    return pcie_server(4, sockets=1, **kw)


def pair_cluster():
    """Two 4-GPU servers, one 100 Gb/s NIC each, on one switch."""
    return cluster(leaf_spine(1, 1, 2, host_bandwidth=12.5e9), server4(nics=1))


def pipelines() -> dict[str, netsim.Scenario]:
    out = {}
    topo = server4()
    gpus = topo.gpus()
    costs = GPT.costs(A100_FLOPS)
    for schedule, chunks in (("gpipe", 1), ("1f1b", 1), ("interleaved", 2), ("zb-h1", 1)):
        name = f"pp_{schedule.replace('-', '_')}"
        pipe = pipeline(
            topo, gpus, schedule=schedule, chunks=chunks, microbatches=MICROBATCHES, costs=costs, name=name
        )
        out[name] = (
            pipe,
            f"{schedule} on one 4-GPU PCIe server: 4 stages of 8 transformer layers (h=4096, "
            f"s=2048), {MICROBATCHES} micro-batches, {A100_FLOPS / 1e12:.0f} TFLOP/s per GPU",
        )
    two = pair_cluster()
    rows = [[g for g in two.gpus() if g.startswith(f"n{s}/")] for s in range(2)]
    pipe = pipeline(two, rows, schedule="1f1b", microbatches=MICROBATCHES, costs=costs, name="pp_dp_1f1b")
    out["pp_dp_1f1b"] = (
        pipe,
        "1f1b pipeline in each of two 4-GPU servers (data-parallel replicas); each "
        "stage's gradients are ring-AllReduced across the servers over 100 Gb/s NICs",
    )
    for how, text in (
        ("serialized", "every stage offloads after the whole pipeline has flushed"),
        ("overlapped", "each stage offloads as soon as its backward ends, in 4 pipelined pieces"),
    ):
        out[f"pp_offload_{how}"] = (
            offload_pipeline(how),
            f"10B model, interleaved 1F1B (2 chunks) on 4 V100-class GPUs (PCIe Gen3), optimizer on "
            f"each GPU's NUMA-node CPU: gradients to host memory, CPU Adam step, parameters back; {text}",
        )
    out["pp_offload_breadth_first"] = (
        offload_pipeline("breadth-first"),
        f"10B model on 4 V100-class GPUs (PCIe Gen3), SPipe-style: parameters in host memory, optimizer "
        f"on each GPU's NUMA-node CPU, "
        f"{SPIPE_CHUNKS} model chunks per GPU run breadth-first, each chunk's parameters prefetched "
        f"before its pass, its gradients offloaded and stepped on the CPU as soon as its backward ends",
    )
    return out


def offload_pipeline(how: str, seq_len: int = 1024):
    """The SPipe rows' 10B model on one 4-GPU V100 node with the optimizer on the CPUs (one NUMA node per
    GPU: its host memory and its CPU), `how` one of: "serialized" (Megatron's interleaved 1F1B + CPU offload:
    every stage after the pipeline has flushed), "overlapped" (the same pipeline, each stage offloading when
    its own backward ends, in 4 pieces) or "breadth-first" (SPipe's schedule and per-chunk offload, each
    chunk in one piece as SPipe moves it).
    """
    v100 = pcie_server(4, sockets=1, numa_per_socket=4, pcie_bandwidth=PCIE3)
    numa = {gpu: gpu.removeprefix("gpu") for gpu in v100.gpus()}
    offload = lambda **kw: Offload(
        memory={g: f"mem{i}" for g, i in numa.items()},
        cpu={g: f"cpu{i}" for g, i in numa.items()},
        step_time=STEP_TIME,
        **kw,
    )
    schedule, chunks, off = {
        "serialized": ("interleaved", MEGATRON_CHUNKS, offload(overlap=False)),
        "overlapped": ("interleaved", MEGATRON_CHUNKS, offload()),
        "breadth-first": ("breadth-first", SPIPE_CHUNKS, offload(pieces=1)),
    }[how]
    return pipeline(
        v100,
        v100.gpus(),
        schedule=schedule,
        chunks=chunks,
        microbatches=MICROBATCHES,
        costs=dataclasses.replace(LLAMA10B, seq_len=seq_len).costs(V100_FLOPS),
        offload=off,
        name=f"pp_offload_{how.replace('-', '_')}",
    )


def job_cluster(leaves: int = 2, oversubscription: float = 2.0):
    """4 servers of 4 GPUs with one 100 Gb/s NIC each, on `leaves` leaves under one spine."""
    fabric = leaf_spine(leaves, 1, 4 // leaves, host_bandwidth=12.5e9, oversubscription=oversubscription)
    return cluster(fabric, server4(nics=1))


# (id, model, arrival s, GPUs, iterations)
TRACE = [
    ("j0", "FSDP", 0.0, 6, 2),
    ("j1", "MobileNetV3", 0.0, 4, 6),
    ("j2", "MoE", 0.1, 4, 6),
    ("j3", "Transformer-XL", 0.2, 8, 2),
    ("j4", "DLRM", 0.3, 2, 12),
    ("j5", "GraphSage", 0.4, 4, 6),
]
# A fragmented cluster: H takes 7 GPUs (servers n0 and n1), K and L 3 each (n2, n3), leaving one GPU on
# each of n1, n2, n3 for J. Packed and topology-aware give J n1 + n2, sharing n1's NIC with H; the
# contention-aware policy gives it n2 + n3, whose NICs carry nothing.
FRAGMENTED = [
    ("H", "Transformer-XL", 0.0, 7, 4),
    ("K", "MobileNetV3", 0.0, 3, 6),
    ("L", "MobileNetV3", 0.0, 3, 6),
    ("J", "MoE", 0.0, 2, 8),
]
# every simulation of the traces and of --report shares one padded shape: one compile
JOB_PAD = netsim.Shape(items=1024, hops=16, after=8, resources=128)


def make_jobs(rows) -> list[Job]:
    return [Job.of(i, model, arrival=t, gpus=g, iterations=n) for i, model, t, g, n in rows]


def jobs() -> dict[str, tuple]:
    out = {}
    topo = job_cluster()
    for policy in ("packed", "spread"):
        sched = run_jobs(topo, make_jobs(TRACE), gpus=topo.gpus(), policy=policy, shape=JOB_PAD)
        out[f"jobs_trace_{policy}"] = (
            sched,
            f"6-job trace (FSDP, MobileNetV3, MoE, Transformer-XL, DLRM, "
            f"GraphSage) on 4 servers x 4 GPUs, 100 Gb/s NICs, 2:1 "
            f"oversubscribed leaf-spine, placed FIFO with the {policy!r} policy",
        )
    star = job_cluster(leaves=1, oversubscription=1.0)
    for policy in ("topology", "contention"):
        sched = run_jobs(star, make_jobs(FRAGMENTED), gpus=star.gpus(), policy=policy, shape=JOB_PAD)
        out[f"jobs_fragmented_{policy}"] = (
            sched,
            f"fragmented cluster (4 servers x 4 GPUs on one switch): a "
            f"2-GPU MoE job placed by the {policy!r} policy next to a "
            f"7-GPU Transformer-XL job",
        )
    return out


def write() -> None:
    for name, (pipe, text) in pipelines().items():
        scenario = pipe.scenario(name=name)
        save(scenario, name, text)
        stats = pipe.stats(netsim.simulate(scenario))
        print(
            f"{name:<24} {len(scenario.flows):>4} flows {len(scenario.tasks):>4} tasks   iteration "
            f"{stats.iteration_time:8.3f} s  compute {stats.compute_time:8.3f} s  bubble {stats.bubble_fraction:6.1%}"
        )
    for name, (sched, text) in jobs().items():
        scenario = sched.result.compiled.scenario
        save(dataclasses.replace(scenario, name=name), name, text)
        print(f"\n{name}: {len(scenario.flows)} flows, {len(scenario.tasks)} tasks\n{sched.table()}")


def report() -> None:
    from netsim.traces import read_trace

    (spipe,) = read_trace(trace_path("train_spipe_expected.csv")).tables
    rows = [dict(zip(spipe.columns, r, strict=True)) for r in spipe.rows]
    for seq in SPIPE_SEQ_LENS:
        row = (*SPIPE_ROW[:2], str(seq), SPIPE_ROW[3])
        measured = {
            r["name"]: r for r in rows if (r["cluster"], r["model_size"], r["seq"], r["nnode"]) == row
        }
        pipes = {how: offload_pipeline(how, seq) for how in ("serialized", "overlapped", "breadth-first")}
        sim = {how: pipe.stats(netsim.simulate(pipe.scenario())) for how, pipe in pipes.items()}
        ser, ovl, bf = sim["serialized"], sim["overlapped"], sim["breadth-first"]
        meg, sp = (float(measured[k]["elapsed_time_ms"]) / 1e3 for k in ("Megatron", "SPipe"))
        gpu = {k: float(measured[k]["gpu_latency"]) / 1e3 for k in ("Megatron", "SPipe")}
        print(
            f"\nSPipe row {row}: measured Megatron {meg:.3f} s (GPU {gpu['Megatron']:.3f} s), SPipe {sp:.3f} s "
            f"(GPU {gpu['SPipe']:.3f} s), ratio {meg / sp:.3f}"
        )
        print(
            f"model: serialized {ser.iteration_time:.3f} s (GPU pipeline {ser.compute_time:.3f} s), overlapped "
            f"{ovl.iteration_time:.3f} s (ratio {ser.iteration_time / ovl.iteration_time:.3f}), breadth-first "
            f"{bf.iteration_time:.3f} s (GPU {bf.compute_time:.3f} s; ratio "
            f"{ser.iteration_time / bf.iteration_time:.3f}, {ser.iteration_time / bf.iteration_time / (meg / sp) - 1:+.1%} "
            f"vs measured)"
        )
    both = {}
    for r in rows:
        if r["elapsed_time_ms"].isdigit():
            both.setdefault((r["cluster"], r["model_size"], r["seq"], r["nnode"]), {})[r["name"]] = float(
                r["elapsed_time_ms"]
            )
    ratios = [v["Megatron"] / v["SPipe"] for v in both.values() if {"Megatron", "SPipe"} <= set(v)]
    print(
        f"measured Megatron / SPipe over {len(ratios)} configurations: min {min(ratios):.3f}, "
        f"median {np.median(ratios):.3f}, max {max(ratios):.3f}"
    )

    (table,) = read_trace(trace_path("sched_deepshare_shared_thp_ratio.csv")).tables
    names = list(MODELS)
    cols = {c: k for k, c in enumerate(table.columns)}
    index = {r[0]: r for r in table.rows}
    meas = np.array([[float(index[f"{a},4,2"][cols[f"{b},4,2"]]) for b in names] for a in names])
    topo = pair_cluster()
    a = ["n0/gpu0", "n0/gpu1", "n1/gpu0", "n1/gpu1"]
    b = ["n0/gpu2", "n0/gpu3", "n1/gpu2", "n1/gpu3"]
    its = {"FSDP": 1, "Transformer-XL": 2, "MoE": 3, "DLRM": 6, "MobileNetV3": 4, "GraphSage": 6}
    zoo = [Job.of(m, m, arrival=0.0, gpus=4, iterations=its[m]) for m in names]
    model = colocation_matrix(topo, zoo, a, b, shape=JOB_PAD)
    np.set_printoptions(precision=3, suppress=True, linewidth=150)
    print(f"\npairwise throughput ratios, 4 GPUs on 2 servers each, rows/cols {names}")
    print("measured (DeepShare):\n", meas, "\nmodel:\n", model)
    rank = lambda x: np.argsort(np.argsort(x))
    rho = np.corrcoef(rank(meas.mean(1)), rank(model.mean(1)))[0, 1]
    print(
        f"row means measured {meas.mean(1)}\nrow means model    {model.mean(1)}\nSpearman of row means {rho:.3f}; "
        f"Pearson over all 36 entries {np.corrcoef(meas.ravel(), model.ravel())[0, 1]:.3f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--report", action="store_true", help="compare with netsim/data/traces and print the numbers"
    )
    args = parser.parse_args()
    write()
    if args.report:
        report()
