"""Which rates an event recomputes: a threshold per component of the flow-link graph against one for all.

After an event the engine keeps every rate it can prove unchanged (`kernels.maxmin.reusable`) and refills
the rest. The threshold is taken per connected component (`kernels.maxmin.components`); with
`COMPONENT_GROUPS = 1` every component shares one, as before components existed (the same code, so the
same results bit for bit there). This script runs each scenario's engine (`jax.jit(kernels.run)` with
the options `netsim run` picks, one XLA CPU thread) both ways in one process and prints rounds, run time (the
second call of each) and the largest finish-time difference:

    python benchmarks/components.py

Scenarios: rack-local traffic (1e4 flows between hosts of one leaf, 32 leaves: 32 components), one
training iteration on 16 DGX-A100 servers (TP 8 x PP 4 x DP 4: compute tasks on 128 GPUs beside the
flows), and the k=16 fat-tree with 1e4 random flows (one component: nothing to gain, nothing to lose).
"""

from __future__ import annotations

import os
import sys
import time

import jax
import numpy as np
from netsim.kernels import maxmin

import netsim
from netsim import kernels

jax.config.update("jax_enable_x64", True)
netsim.set_cpu_threads(1)  # as single simulations run; before JAX's first computation
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def rack_local(n_flows: int = 10000, leaves: int = 32, hosts: int = 32, seed: int = 0) -> netsim.Scenario:
    """n_flows of 1-64 MiB, each between two hosts of one leaf of a leaf-spine (no flow leaves its rack)."""
    from netsim.topology import leaf_spine

    topo = leaf_spine(leaves, 4, hosts)
    rng = np.random.default_rng(seed)
    flows = []
    for i in range(n_flows):
        leaf, (a, b) = rng.integers(leaves), rng.choice(hosts, 2, replace=False)
        src, dst = f"h{leaf * hosts + a}", f"h{leaf * hosts + b}"
        size = float(np.round(rng.uniform(1, 64) * 2**20))
        flows.append(netsim.Flow(f"f{i}", src, dst, size, route=topo.route(src, dst)))
    return topo.scenario(flows, name=f"rack_local_{n_flows}")


def training(servers: int = 16) -> netsim.Scenario:
    """One iteration of a 7B-like transformer, TP 8 x PP 4 x DP (servers / 4), on DGX-A100s."""
    from netsim.topology import cluster, dgx_a100, leaf_spine
    from netsim.workloads import ParallelLayout, TransformerModel, training_workload

    server = dgx_a100()
    topo = cluster(leaf_spine(4, 4, servers * len(server.nodes_of("nic")) // 4), server)
    dp = servers // 4
    layout = ParallelLayout(tp=8, pp=4, dp=dp, micro_batch=1, global_batch=16 * dp)
    model = TransformerModel(hidden=4096, heads=32, layers=32, seq_len=2048)
    return training_workload(topo, topo.workers[: 32 * dp], model, layout).scenario()


def run_both(name: str, scenario: netsim.Scenario, **options) -> None:
    compiled = netsim.compile_scenario(scenario)
    options["max_events"] = compiled.max_events
    args = (compiled.network, compiled.program)
    route = np.asarray(compiled.program.route)
    routed = np.any(route < args[0].capacity.shape[0], axis=1)  # padding items: components of their own
    groups = np.unique(np.asarray(maxmin.components(route, args[0].capacity.shape[0]))[routed]).size
    row, default = {}, maxmin.COMPONENT_GROUPS
    for label, count in (("one", 1), ("per component", default)):
        maxmin.COMPONENT_GROUPS = count  # read when traced: a fresh jit below
        run = jax.jit(lambda net, prog: kernels.run(net, prog, **options))
        jax.block_until_ready(run(*args))
        t0 = time.perf_counter()
        state = jax.block_until_ready(run(*args))
        row[label] = (
            time.perf_counter() - t0,
            int(state.rounds),
            int(state.events),
            np.asarray(state.finish),
        )
    maxmin.COMPONENT_GROUPS = default
    (t1, r1, events, f1), (t2, r2, _, f2) = row["one"], row["per component"]
    real = np.isfinite(f1) & (f1 > 0)
    diff = np.max(np.abs(f2[real] - f1[real]) / f1[real]) if real.any() else 0.0
    print(
        f"{name:28s} {compiled.program.route.shape[0]:7d} {groups:6d} {events:7d}"
        f" {r1:9d} {r2:9d} {t1:8.2f} {t2:8.2f} {t1 / t2:6.2f}x {diff:9.1e}",
        flush=True,
    )


def main() -> None:
    print(
        f"load average {os.getloadavg()[0]:.2f}; {jax.devices()[0].device_kind}, {netsim.cpu_threads_label()} XLA thread"
    )
    print(
        f"{'scenario':28s} {'items':>7s} {'groups':>6s} {'events':>7s} {'rounds 1':>9s} {'rounds C':>9s}"
        f" {'run 1 s':>8s} {'run C s':>8s} {'ratio':>7s} {'max diff':>9s}"
    )
    from vs_simgrid import fat_tree_random

    # flat programs without the frontier, as `netsim run` runs them up to 16384 items
    run_both("rack-local, 1e4 flows", rack_local(), frontier=0)
    run_both("training, 16 x DGX-A100", training())
    run_both("fat-tree k=16, 1e4 flows", fat_tree_random(10000), frontier=0)
    print("(1: one threshold for all items; C: one per component group; run: the second call, compiled)")


if __name__ == "__main__":
    main()
