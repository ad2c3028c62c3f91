"""Held-out predictions of the shipped calibration, through the library's own entry points.

    python benchmarks/heldout_shipped.py     # ~2-4 min on 2 busy CPU cores; tables on stdout

The calibrated preset `rtx4090-8x-epyc7542` was fitted on the three shipped m01 traces (netsim/data/
calibrations/README.md). This script predicts, with `netsim.calibrate.predict` (what `netsim predict`
runs), every table of those traces (in-sample) and of every other shipped trace the topology can hold
(held-out: m02, another 4 x RTX 4090 box), beside two baselines: the uncalibrated preset (builder
figures, netsim's default software costs) and, for collectives, an alpha-beta fit t = a + S / b on the
m01 all_reduce (`alpha_beta_fit`). Then m01's all_reduce with P2P off (held out: no fit sees a P2P-off
collective) three ways, the tinybox's tables on `pcie:6`, the P2P-off copy checks of plain and
calibrated presets, and the layout and transport reports on the shipped traces. Errors are relative errors of
busbw (collectives) or bandwidth (copies), mean / max in %.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np
from netsim.calibrate import (
    Params,
    Spec,
    alpha_beta_fit,
    check_layout,
    check_transports,
    collective_experiment,
    compare,
    experiments_from_trace,
    initial_values,
    predict,
)

import netsim
from netsim.data import TRACES, trace_path
from netsim.topology import NcclShm, base_topology, load, load_costs, with_transport
from netsim.traces import read_trace

NAME = "rtx4090-8x-epyc7542"
FITTED = {
    "m01_8x4090_2xEPYC7542_allreduce_p2p_on.txt",
    "m01_8x4090_2xEPYC7542_p2pBandwidthLatency_p2p_on.txt",
    "m01_8x4090_2xEPYC7542_p2pBandwidthLatency_p2p_off.txt",
}


def stats(err) -> str:
    err = np.abs(np.asarray(err)) * 100
    return f"{err.mean():5.1f} / {err.max():5.1f}"


#: m01's all_reduce busbw at 128 MiB with the stock driver (P2P off: NCCL's SHM transport), from the blog
#: summary quoted in the P2P-on trace's header ("14.47GB/s -> 20.64GB/s"); no other P2P-off point is public
STOCK_128M = 14.47e9


def p2p_off_all_reduce(spec, params, plain, ab, topo, staged, on) -> None:
    """m01's all_reduce sizes with P2P off, predicted by the shipped calibration (fitted on copies and the
    P2P-on all_reduce only), three ways: before, each ring step a flow through cudaMemcpy's host budgets
    (`HostStaged`); NCCL's SHM transport with its host budgets only (`NcclShm(dram_latency=1)`); now,
    `NcclShm()` as `experiments_from_trace` builds it for a P2P-off table (no DRAM turnaround latency).
    Beside them the measured P2P-on busbw. Errors against the two P2P-off references there are: 128
    MiB, the stock driver's measured busbw; 16-128 KiB, the P2P-on busbw (P2P-off runs are reported as
    fast there), beside the P2P-on fit's own in-sample error, the P2P-on alpha-beta fit and the plain
    preset over NCCL's SHM transport."""
    sizes = np.asarray(on.labels)
    fabrics = (staged, with_transport(staged, NcclShm(dram_latency=1.0)), with_transport(staged, NcclShm()))
    exps = [collective_experiment(spec, f, "all_reduce", topo.gpus(), sizes, on.measured) for f in fabrics]
    n = len(sizes)
    busbw = lambda t: on.factor * sizes / np.asarray(t)
    run = busbw(predict(params, [on, *exps])["makespan"].reshape(4, n))
    fit, cols = run[0], run[1:]
    base = busbw(predict(plain, exps[2])["makespan"])
    m = busbw(on.measured)
    print("\nm01 all_reduce x8 with P2P off, predicted by the shipped calibration (busbw GB/s)")
    print(
        "| size (B) | before: cudaMemcpy host budgets | NCCL SHM, host budgets | now: NCCL SHM | measured, P2P on |"
    )
    print("|---|---|---|---|---|")
    for k, size in enumerate(sizes):
        print(f"| {int(size)} | " + " | ".join(f"{x[k] / 1e9:.2f}" for x in (*cols, m)) + " |")
    small = (sizes >= 16384) & (sizes <= 131072)
    err = lambda x, ref: stats(x / ref - 1)
    print("\n| prediction | 16-128 KiB against P2P on (mean / max %) | 128 MiB against 14.47 (%) |")
    print("|---|---|---|")
    rows = (
        ("P2P-on fit, in-sample (against its own measurement)", fit, m[-1]),
        ("before: cudaMemcpy host budgets", cols[0], STOCK_128M),
        ("NCCL SHM, host budgets", cols[1], STOCK_128M),
        ("now: NCCL SHM", cols[2], STOCK_128M),
        ("baseline: alpha-beta on the P2P-on all_reduce", busbw(ab(sizes)), STOCK_128M),
        ("baseline: plain preset, NCCL SHM", base, STOCK_128M),
    )
    for label, x, ref in rows:
        print(f"| {label} | {err(x[small], m[small])} | {100 * (x[-1] / ref - 1):+.1f} |")


#: 6 x RTX 4090 on one EPYC socket with the P2P driver (tiny corp's tinybox), verbatim from the README of
#: github.com/tinygrad/open-gpu-kernel-modules (commit 1f40371, sections "Fast" and "And NCCL (aka torch)
#: compatible!"): another machine than m01, with one socket where m01 has two
TINYBOX = """\
Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)
   D\\D     0      1      2      3      4      5
     0 919.39  50.11  50.15  51.22  50.59  51.22
     1  50.19 921.29  50.31  51.21  50.62  51.22
     2  50.23  50.55 921.83  51.22  50.39  51.22
     3  50.33  50.65  51.20 920.20  50.43  51.22
     4  50.18  50.68  50.26  51.22 922.30  51.23
     5  50.12  50.09  50.44  51.22  51.21 921.29

tiny@tiny14:~/build/nccl-tests/build$ ./all_reduce_perf -g 6
# nThread 1 nGpus 6 minBytes 33554432 maxBytes 33554432 step: 1048576(bytes) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  26230 on     tiny14 device  0 [0x01] NVIDIA GeForce RTX 4090
#  Rank  1 Group  0 Pid  26230 on     tiny14 device  1 [0x42] NVIDIA GeForce RTX 4090
#  Rank  2 Group  0 Pid  26230 on     tiny14 device  2 [0x81] NVIDIA GeForce RTX 4090
#  Rank  3 Group  0 Pid  26230 on     tiny14 device  3 [0x82] NVIDIA GeForce RTX 4090
#  Rank  4 Group  0 Pid  26230 on     tiny14 device  4 [0xc1] NVIDIA GeForce RTX 4090
#  Rank  5 Group  0 Pid  26230 on     tiny14 device  5 [0xc2] NVIDIA GeForce RTX 4090
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
    33554432       8388608     float     sum      -1   2275.1   14.75   24.58      0   2282.5   14.70   24.50      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 24.5413
#
"""


def cross_machine(costs, ab) -> None:
    """The tinybox's tables on `pcie:6` (one socket, six GPUs on their own host bridges) with m01's fitted
    figures and software costs (`Params.load` of the shipped calibration: the classes and budgets the
    smaller box has), against the same shape with builder figures and netsim's default software costs,
    and the alpha-beta fit on m01's all_reduce."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tinybox_6x4090.txt")
        with open(path, "w") as f:
            f.write(TINYBOX)
        trace = read_trace(path)
    topo, staged = load("pcie:6", p2p=True), load("pcie:6", p2p=False)
    spec = Spec.for_topology(topo, staged=staged, regimes=costs.regimes)
    m01 = Params.load(spec, NAME, topo, staged)
    plain = Params.from_values(spec, initial_values(spec, topo, staged))
    exps = experiments_from_trace(trace, spec, topo, staged=staged)
    print("\n6 x RTX 4090, one socket (tinybox README), predicted on pcie:6")
    print("| table | netsim (m01's calibration) | plain pcie:6 | alpha-beta on m01 all_reduce |")
    print("|---|---|---|---|")
    for e in exps:
        (cal,) = compare([e], [predict(m01, e)["makespan"]]).experiments
        (pl,) = compare([e], [predict(plain, e)["makespan"]]).experiments
        abr = ""
        if e.collective:
            (x,) = compare([e], [ab(np.asarray(e.labels))]).experiments
            abr = stats(x.relative_error)
        print(f"| {e.name} | {stats(cal.relative_error)} | {stats(pl.relative_error)} | {abr} |")


def main() -> None:
    topo, staged = load(NAME, p2p=True), load(NAME, p2p=False)
    costs = load_costs(NAME)
    spec = Spec.for_topology(topo, staged=staged, regimes=costs.regimes)
    fitted = Params.load(spec, NAME, topo, staged)
    plain_on, plain_off = base_topology(NAME, p2p=True), base_topology(NAME, p2p=False)
    plain = Params.from_values(spec, initial_values(spec, plain_on, plain_off))
    names = sorted(n for n in TRACES if n.endswith(".txt") and n.split("_")[0] in ("m01", "m02"))
    traces = [read_trace(trace_path(n)) for n in names]
    exps = []
    for t in traces:
        exps += [(t.source, e) for e in experiments_from_trace(t, spec, topo, staged=staged)]
    only = [e for _, e in exps if e.kind != "latency"]  # latency matrices: see docs/calibration.md
    sims = {}
    for label, params in (("calibrated", fitted), ("plain", plain)):
        run = predict(params, only)
        sims[label], start = [], 0
        for e in only:
            sims[label].append(run["makespan"][start : start + e.n_points])
            start += e.n_points
    ref = next(e for e in only if e.collective and "m01" in e.name)
    a, b, _ = alpha_beta_fit(np.asarray(ref.labels), ref.measured)
    print("| table | split | netsim (calibrated) | plain preset | alpha-beta on m01 all_reduce |")
    print("|---|---|---|---|---|")
    for i, e in enumerate(only):
        source = e.name.split(":")[0]
        split = "in-sample" if source in FITTED else "held-out"
        (cal,) = compare([e], [sims["calibrated"][i]]).experiments
        (pl,) = compare([e], [sims["plain"][i]]).experiments
        ab = ""
        if e.collective:
            (abr,) = compare([e], [a + np.asarray(e.labels) / b]).experiments
            ab = stats(abr.relative_error)
        print(f"| {e.name} | {split} | {stats(cal.relative_error)} | {stats(pl.relative_error)} | {ab} |")
        if e.collective and split == "held-out":
            big = np.asarray(e.labels) > 1 << 20
            print(
                f"| {e.name}, > 1 MiB | {split} | {stats(cal.relative_error[big])} | "
                f"{stats(pl.relative_error[big])} | {stats(abr.relative_error[big])} |"
            )
    p2p_off_all_reduce(spec, fitted, plain, lambda size: a + size / b, topo, staged, ref)
    cross_machine(costs, lambda size: a + size / b)
    # P2P-off physics: a 1 GiB copy gpu0 -> gpu1, plain and calibrated
    for label, t in (("plain", plain_off), ("calibrated", staged)):
        r = netsim.simulate(t.scenario([netsim.Flow("f", "gpu0", "gpu1", 2**30)]))
        print(f"\n1 GiB gpu0 -> gpu1 with P2P off, {label}: {2**30 / r.makespan / 1e9:.2f} GB/s")
    for t in traces:
        for finding in check_layout(t, topo):
            print(f"layout: {finding}")
        for rep in check_transports(t, topo, staged):
            print(f"transport: {rep}")


if __name__ == "__main__":
    main()
