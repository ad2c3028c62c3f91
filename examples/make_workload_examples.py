"""Writes examples/pp_*.json (pipeline-parallel training) and examples/jobs_*.json (job traces on a cluster).

    python examples/make_workload_examples.py            # rewrite the files and print what each shows
    python examples/make_workload_examples.py --report   # also compare with the measured traces in netsim/data/traces/
    python examples/make_workload_examples.py --report --plot docs/spipe_rows.png   # and draw the SPipe rows

Every file is a plain scenario: `netsim run examples/pp_1f1b.json --trace pp_1f1b.trace.json` simulates it
and writes a Perfetto timeline. The numbers quoted in docs/pipelines.md and docs/jobs.md come from --report.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import NamedTuple

import numpy as np

import netsim
from netsim.checks import write_atomic
from netsim.data import trace_path
from netsim.jobs import MODELS, Job, colocation_matrix, run_jobs
from netsim.topology import cluster, leaf_spine, pcie_server
from netsim.workloads import GPUS, Memory, Offload, TransformerStage, pipeline, pipeline_memory

HERE = Path(__file__).resolve().parent

# A 6.7B-parameter-like model (32 layers, h = 4096) on 4 stages of 8 layers; A100-class sustained FLOP/s.
GPT = TransformerStage(hidden=4096, seq_len=2048, micro_batch=1, layers=8)
A100_FLOPS = 150e12
MICROBATCHES = 8

# SPipe's rows (netsim/data/traces/train_spipe_expected.csv: 10B to 110B, seq 1024 or 2048, micro-batch 2,
# mini-batch 16 per node, 1 to 8 nodes of 4 GPUs, one pipeline over all GPUs) as its scripts run them
# (examples/models/llama2.sh, examples/run.sh, scripts/eval_speedup.sh): Llama-2-style models with a SwiGLU
# MLP, full activation recomputation in both runs, each GPU's process bound to a NUMA node.
#: model size -> (layers, hidden, MLP width, nodes)
SPIPE_MODELS = {
    "10": (48, 4096, 11008, 1),
    "19": (48, 5632, 13312, 1),
    "30": (96, 5120, 12800, 2),
    "40": (96, 5888, 15360, 2),
    "52": (96, 6656, 17920, 4),
    "69": (96, 7680, 20480, 4),
    "88": (192, 6144, 16384, 8),
    "110": (192, 6912, 18432, 8),
}
SPIPE_SEQ_LENS = (1024, 2048)
#: GPUs per node of both SPipe clusters (its examples/run.sh: GPUS_PER_NODE=4), one pipeline stage each
SPIPE_NODE_GPUS = 4


class SPipeMachine(NamedTuple):
    """One of SPipe's clusters, with three fitted numbers, all on that machine's 10B seq-1024 rows: `flops`
    (sustained FLOP/s) and `step_time` (CPU s to step one GPU's share of the 10B model; other models scale it
    by their parameters per GPU) on the Megatron row alone (the model's GPU pipeline takes its gpu_latency
    and its non-GPU time its elapsed - gpu_latency), then `step_stall` (`Offload.step_stall`: the GPU time
    a step costs the GPUs driven from its NUMA node, found by bisection) on the SPipe row's gpu_latency.
    Every other row of the machine is a prediction."""

    server: dict  # pcie_server keywords; GPU i sits in NUMA node i x nodes // 4, as the scripts bind it
    flops: float
    step_time: float
    step_stall: float


SPIPE_MACHINES = {
    # V100s on PCIe Gen3 x16, process i bound to its own NUMA node (`numactl --cpunodebind 3-i`)
    "spipe-v100": SPipeMachine(
        dict(sockets=1, numa_per_socket=4, pcie_bandwidth=12e9, device="V100"), 64.9e12, 5.04, 0.0404
    ),
    # RTX 3090s (PCIe Gen4 x16; the host's generation is not stated), two processes per NUMA node
    # (`numactl --cpunodebind i/2`), so two GPUs' steps share each node's CPU and stall both GPUs
    "spipe-3090": SPipeMachine(
        dict(sockets=2, pcie_bandwidth=24e9, device="RTX 3090"), 55.7e12, 2.36, 0.1212
    ),
}
# Both runs use SPipe's runtime: parameters in host memory, fetched per model chunk, each chunk's gradients
# offloaded as its backward ends. The baseline (`-j 1f1b_offload -f 2`) is interleaved 1F1B with 2 chunks per
# GPU and one CPU step per GPU after the whole backward (its fp16 optimizer's overflow check spans the
# pipeline); SPipe (`-f 2 -b 6`, remapped) runs 2 forward chunks and 6 backward chunks per GPU breadth-first
# and steps each backward chunk as soon as its gradients are in.
MEGATRON_CHUNKS = 2
SPIPE_FORWARD_CHUNKS, SPIPE_BACKWARD_CHUNKS = 2, 6
#: offload_pipeline's `how` -> (schedule, chunks, backward_chunks, Offload keywords)
SPIPE_RUNS = {
    "serialized": ("interleaved", MEGATRON_CHUNKS, None, dict(overlap=False, host_parameters=True)),
    "overlapped": ("interleaved", MEGATRON_CHUNKS, None, {}),
    "breadth-first": (
        "breadth-first",
        SPIPE_FORWARD_CHUNKS,
        SPIPE_BACKWARD_CHUNKS,
        dict(pieces=1, host_parameters=True),
    ),
}


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
        # GPipe holds all 8 micro-batches' activations, 87 GB per GPU in netsim's memory model, more than
        # an 80 GB GPU holds: pipeline() refuses it unless told otherwise; kept, as the schedules' baseline
        pipe = pipeline(
            topo,
            gpus,
            schedule=schedule,
            chunks=chunks,
            microbatches=MICROBATCHES,
            costs=costs,
            check_memory=schedule != "gpipe",
            name=name,
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
        (
            "serialized",
            "as the measured baseline: parameters in host memory, each chunk fetched before it "
            "runs and its gradients offloaded when its backward ends, each GPU's step after the whole "
            "pipeline's backward",
        ),
        (
            "overlapped",
            "a what-if: parameters on the GPUs, each GPU offloading its gradients, stepping and "
            "reloading its parameters as soon as its own backward ends, in 4 pipelined pieces",
        ),
    ):
        out[f"pp_offload_{how}"] = (
            offload_pipeline(how),
            f"10B model, interleaved 1F1B (2 chunks) on 4 V100-class GPUs (PCIe Gen3), a CPU Adam step on "
            f"each GPU's NUMA node; {text}",
        )
    out["pp_offload_breadth_first"] = (
        offload_pipeline("breadth-first"),
        f"10B model on 4 V100-class GPUs (PCIe Gen3), SPipe-style: parameters in host memory, optimizer "
        f"on each GPU's NUMA-node CPU, {SPIPE_FORWARD_CHUNKS} forward and {SPIPE_BACKWARD_CHUNKS} backward "
        f"chunks per GPU run breadth-first, each chunk's parameters prefetched before its pass, each "
        f"backward chunk's gradients offloaded and stepped on the CPU as soon as it ends",
    )
    return out


def spipe_stage(size: str) -> TransformerStage:
    """One GPU's share of an SPipe model (`size` in SPIPE_MODELS), at seq 1024."""
    layers, hidden, mlp, nodes = SPIPE_MODELS[size]
    return TransformerStage(
        hidden=hidden,
        seq_len=1024,
        micro_batch=2,
        layers=layers // (SPIPE_NODE_GPUS * nodes),
        ffn_multiplier=3 * mlp / (2 * hidden),
        recompute=True,
    )


def spipe_schedule(how: str, size: str) -> dict:
    """`pipeline`'s schedule keywords of an SPipe row's run (`how` as in offload_pipeline): one stage per
    GPU of its nodes."""
    schedule, chunks, backward_chunks, _ = SPIPE_RUNS[how]
    nodes = SPIPE_MODELS[size][3]
    return dict(
        schedule=schedule, chunks=chunks, backward_chunks=backward_chunks, microbatches=MICROBATCHES * nodes
    )


def offload_pipeline(how: str, seq_len: int = 1024, *, machine: str = "spipe-v100", size: str = "10"):
    """An SPipe row's model (`size` in SPIPE_MODELS) on its nodes of `machine` (SPIPE_MACHINES; several
    nodes on one 100 Gb/s switch), one pipeline stage per GPU, the optimizer on the CPU of each GPU's NUMA
    node, `how` one of: "serialized" (the measured Megatron baseline: interleaved 1F1B, parameters in host
    memory, each GPU's step after the whole pipeline's backward), "overlapped" (a what-if: the same
    pipeline with the parameters kept on the GPUs, each GPU offloading, stepping and reloading as soon as
    its own backward ends, in 4 pipelined pieces) or "breadth-first" (SPipe's schedule, stepping each
    backward chunk as soon as its gradients are in, in one piece as SPipe moves it).
    """
    spec, stage, nodes = SPIPE_MACHINES[machine], spipe_stage(size), SPIPE_MODELS[size][3]
    server = pcie_server(SPIPE_NODE_GPUS, **spec.server, nics=int(nodes > 1))
    fabric = server if nodes == 1 else cluster(leaf_spine(1, 1, nodes, host_bandwidth=12.5e9), server)
    numa = len(server.nodes_of("cpu"))
    host = {  # GPU -> its NUMA node's name prefix and index
        gpu: (gpu.removesuffix(f"gpu{i % 4}"), (i % 4) * numa // 4) for i, gpu in enumerate(fabric.gpus())
    }
    offload = lambda **kw: Offload(
        memory={g: f"{pre}mem{n}" for g, (pre, n) in host.items()},
        cpu={g: f"{pre}cpu{n}" for g, (pre, n) in host.items()},
        step_time=spec.step_time * stage.parameters / spipe_stage("10").parameters,
        step_stall=spec.step_stall,
        **kw,
    )
    return pipeline(
        fabric,
        fabric.gpus(),
        **spipe_schedule(how, size),
        costs=dataclasses.replace(stage, seq_len=seq_len).costs(spec.flops),
        offload=offload(**SPIPE_RUNS[how][3]),
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


def spipe_memory(how: str, seq_len: int, size: str) -> Memory:
    """GPU memory of an SPipe row's run (`how` as in offload_pipeline), from netsim's memory model alone."""
    return pipeline_memory(
        dataclasses.replace(spipe_stage(size), seq_len=seq_len).costs(1.0),
        stages=SPIPE_NODE_GPUS * SPIPE_MODELS[size][3],
        **spipe_schedule(how, size),
        offload=True,
    )


def spipe_memory_rows() -> list[tuple[str, str, str, int, bool, float, float]]:
    """(machine, run, size, seq, ran, model GB, GPU GB) of every Megatron and SPipe row of SPipe's table that
    ran or ran out of GPU memory ("CUDA OOM"; "CPU OOM" is host memory, which netsim does not model)."""
    from netsim.traces import read_trace

    (table,) = read_trace(trace_path("train_spipe_expected.csv")).tables
    out = []
    for row in table.rows:
        r = dict(zip(table.columns, row, strict=True))
        if r["name"] in ("Megatron", "SPipe") and r["elapsed_time_ms"] != "CPU OOM":
            how = "serialized" if r["name"] == "Megatron" else "breadth-first"
            used = spipe_memory(how, int(r["seq"]), r["model_size"]).total
            capacity = GPUS[SPIPE_MACHINES[r["cluster"]].server["device"]].memory
            ran = r["elapsed_time_ms"].isdigit()
            out.append(
                (r["cluster"], r["name"], r["model_size"], int(r["seq"]), ran, used / 1e9, capacity / 1e9)
            )
    return out


def spipe_measured() -> dict[tuple[str, str, int], dict[str, tuple[float, float]]]:
    """(machine, model size, seq) -> {"Megatron" | "SPipe": (elapsed s, gpu_latency s)} of the rows both
    ran."""
    from netsim.traces import read_trace

    (table,) = read_trace(trace_path("train_spipe_expected.csv")).tables
    out: dict = {}
    for row in table.rows:
        r = dict(zip(table.columns, row, strict=True))
        if r["name"] in ("Megatron", "SPipe") and r["gpu_latency"]:
            key = (r["cluster"], r["model_size"], int(r["seq"]))
            out.setdefault(key, {})[r["name"]] = (
                float(r["elapsed_time_ms"]) / 1e3,
                float(r["gpu_latency"]) / 1e3,
            )
    return {k: v for k, v in out.items() if len(v) == 2}


def spipe_predicted(
    machine: str, size: str, seq: int, *, shape: netsim.Shape | None = None
) -> dict[str, tuple[float, float]]:
    """{"Megatron" | "SPipe": (iteration s, GPU pipeline s)} of the model on one SPipe row (compiled to
    `shape` when given, so that several rows share one compile)."""
    out = {}
    for name, how in (("Megatron", "serialized"), ("SPipe", "breadth-first")):
        pipe = offload_pipeline(how, seq, machine=machine, size=size)
        scenario = pipe.scenario()
        stats = pipe.stats(
            netsim.simulate(netsim.compile_scenario(scenario, shape=shape) if shape else scenario)
        )
        out[name] = (stats.iteration_time, stats.compute_time)
    return out


def plot_spipe(points: dict[str, list[tuple[float, float, float]]], out: str) -> None:
    """Measured against predicted Megatron / SPipe speedups, one marker per machine: docs/spipe_rows.png."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 5))
    for k, (machine, rows) in enumerate(points.items()):
        measured, model, bound = np.array(rows).T
        ax.plot(measured, model, "o", color=f"C{k}", ms=5, label=f"{machine}: netsim")
        ax.plot(
            measured, bound, "x", color=f"C{k}", ms=5, alpha=0.6, label=f"{machine}: SPipe hides all CPU work"
        )
    lo, hi = 1.0, 2.0
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    for f in (0.9, 1.1):
        ax.plot([lo, hi], [lo * f, hi * f], "k:", lw=0.6)
    ax.set_xlim(lo, 1.6)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured Megatron / SPipe iteration time")
    ax.set_ylabel("predicted")
    ax.set_title("SPipe's 27 rows, three numbers fitted per machine (dotted: ±10 %)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def report(plot: str | None = None) -> None:
    from netsim.traces import read_trace

    (spipe,) = read_trace(trace_path("train_spipe_expected.csv")).tables
    rows = [dict(zip(spipe.columns, r, strict=True)) for r in spipe.rows]
    print(
        "\nSPipe's rows, measured -> model (s; GPU = gpu_latency / the model's GPU pipeline), each machine fitted "
        "on its 10B seq-1024 rows (Megatron: FLOP/s, step time; SPipe's GPU time: the step stall);\nbound: the ratio if SPipe hid all CPU work (the model's "
        "Megatron elapsed / its GPU pipeline)"
    )
    print(
        f"{'machine':11s} {'size':>4s} {'seq':>5s} {'nodes':>5s}  {'Megatron (GPU)':>28s}  {'SPipe (GPU)':>28s}"
        f"  {'ratio':>14s}  error   bound"
    )
    errors: dict[str, list[tuple[float, float]]] = {}
    points: dict[str, list[tuple[float, float, float]]] = {}  # machine -> (measured, model, bound) ratios
    for (machine, size, seq), meas in spipe_measured().items():
        model = spipe_predicted(machine, size, seq)
        cell = lambda k, meas=meas, model=model: (
            f"{meas[k][0]:6.2f} ({meas[k][1]:6.2f}) -> {model[k][0]:6.2f} ({model[k][1]:6.2f})"
        )
        ratio = (meas["Megatron"][0] / meas["SPipe"][0], model["Megatron"][0] / model["SPipe"][0])
        bound = model["Megatron"][0] / model["Megatron"][1]
        errors.setdefault(machine, []).append((ratio[1] / ratio[0] - 1, bound / ratio[0] - 1))
        points.setdefault(machine, []).append((*ratio, bound))
        print(
            f"{machine:11s} {size:>4s} {seq:5d} {SPIPE_MODELS[size][3]:5d}  {cell('Megatron')}  {cell('SPipe')}  "
            f"{ratio[0]:.3f} -> {ratio[1]:.3f} {errors[machine][-1][0]:+6.1%} {errors[machine][-1][1]:+6.1%}",
            flush=True,
        )
    for machine, errs in errors.items():
        e = np.abs(np.array(errs))
        print(
            f"{machine}: {len(e)} rows, |ratio error| mean {e[:, 0].mean():.1%}, max {e[:, 0].max():.1%}, "
            f"within 10 % {int((e[:, 0] <= 0.10).sum())}; bound mean {e[:, 1].mean():.1%}, max {e[:, 1].max():.1%}"
        )
    if plot:
        plot_spipe(points, plot)
    ser, ovl = (
        pipe.stats(netsim.simulate(pipe.scenario()))
        for pipe in map(offload_pipeline, ("serialized", "overlapped"))
    )
    print(
        f"what-if on spipe-v100 10B seq 1024: parameters on the GPUs and each GPU's offload, step and reload as "
        f"soon as its backward ends: {ovl.iteration_time:.3f} s against the baseline's {ser.iteration_time:.3f} s"
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
    memory = spipe_memory_rows()
    print("\nGPU memory of SPipe's runs (netsim's memory model, nothing fitted) against what they did:")
    for machine, run, size, seq, ran, used, capacity in memory:
        if not ran or used > 0.9 * capacity:
            verdict = "fits" if used <= capacity else "refused"
            print(
                f"{machine:11s} {run:8s} {size:>4s} {seq:5d}  {'ran' if ran else 'CUDA OOM':8s}  "
                f"model {used:5.1f} GB of {capacity:.0f}: {verdict}"
            )
    agree = sum(ran == (used <= capacity) for _, _, _, _, ran, used, capacity in memory)
    print(f"{agree} of {len(memory)} rows agree (every other row ran at <= 90 % of its GPU in the model)")

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
    parser.add_argument("--plot", metavar="PNG", help="with --report: draw the SPipe rows there")
    args = parser.parse_args()
    write()
    if args.report:
        report(args.plot)
