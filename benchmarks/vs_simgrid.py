"""netsim vs SimGrid on the same scenarios: completion times must agree (relative 1e-6); prints speed ratios.

Cases:
- single scenarios: the 8-GPU PCIe ring AllReduce (examples/pcie_ring_allreduce.json) and a 64-host
  leaf-spine permutation;
- batches: each of those as 1024 what-ifs with every link's bandwidth scaled independently (netsim:
  one vmapped sweep; SimGrid: all checked in groups of 16 per run (disjoint zones), timed as the
  better of that and 32 of them run one per process);
- scale series: a k=16 fat-tree (1024 hosts, 6144 directed links) with 1e3, 1e4, 2e4 concurrent flows
  between random host pairs on their ECMP routes.

Times (s, wall): netsim = host preparation (validation, layout) + device run, after a warm-up that
pays the one-time jit compile (reported apart); SimGrid = platform construction + simulation inside
its own process (interpreter start and import excluded). Needs SimGrid's Python bindings
(benchmarks/install_simgrid.sh), in this interpreter or the one given by --simgrid-python (or
$SIMGRID_PYTHON); without them, or with --no-simgrid, only netsim runs.

    python benchmarks/vs_simgrid.py                      # everything (long on 2 cores)
    python benchmarks/vs_simgrid.py --fat-tree 1000      # a shorter scale series
    python benchmarks/vs_simgrid.py --json out.json      # also write the numbers
    python benchmarks/vs_simgrid.py --processes          # whole processes: `netsim run` / `netsim sweep`
                                                         # against SimGrid's own process, per case

--processes times each side as a child process from start to exit (interpreter, imports, scenario
loading, compile or the disk cache, run): `netsim run FILE.json` three times with a fresh cache folder (the
first compiles, the other two load the compiled engine) against benchmarks/simgrid_peer.py on the same
scenario, handed over as plain JSON (the peer's process imports nothing of netsim's; SimGrid's own time
inside it is printed too; --no-simgrid: netsim only); `netsim sweep examples/sweep_pcie_random_bw.json`
against SimGrid once per what-if, one process each (32 of them run and checked, the total their mean
times the point count).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import subprocess
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np

import netsim
from netsim import Flow, Scenario, cpu_threads_label, set_cpu_threads
from netsim.sweep import LinkBandwidth, Sweep
from netsim.topology import fat_tree, leaf_spine

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import simgrid_peer

RTOL = 1e-6
GROUP = 16  # what-ifs per SimGrid process in the batch cases
SINGLES = 32  # what-ifs also run one per SimGrid process, for its per-scenario time
EXAMPLES = os.path.join(os.path.dirname(HERE), "examples")


# --- scenarios ----------------------------------------------------------------------------------------
def routed(scenario: Scenario) -> Scenario:
    """The scenario with every flow's route written out (SimGrid routes per host pair, given)."""
    routes = netsim.compile_scenario(scenario).routes
    return dataclasses.replace(
        scenario,
        flows=tuple(dataclasses.replace(f, route=r) for f, r in zip(scenario.flows, routes, strict=True)),
    )


def pcie_ring() -> Scenario:
    return routed(Scenario.load(os.path.join(EXAMPLES, "pcie_ring_allreduce.json")))


def leaf_spine_permutation(seed: int = 0) -> Scenario:
    """64 hosts on 8 leaves x 4 spines (non-blocking); each host sends 16 MiB to a random other host."""
    topo = leaf_spine(8, 4, 8, host_bandwidth="50 GB/s", host_latency="1 us", uplink_latency="1 us")
    hosts = topo.nodes_of("host")
    rng = np.random.default_rng(seed)
    while True:  # a derangement: nobody sends to itself
        perm = rng.permutation(len(hosts))
        if np.all(perm != np.arange(len(hosts))):
            break
    flows = [
        Flow(f"p{i}", hosts[i], hosts[j], 16 * 2**20, route=topo.route(hosts[i], hosts[j]))
        for i, j in enumerate(perm)
    ]
    return topo.scenario(flows, name="leafspine64_permutation")


def fat_tree_random(n_flows: int, seed: int = 0) -> Scenario:
    """n_flows between random host pairs of a k=16 fat-tree, 1 to 64 MiB each, all starting at 0."""
    topo = fat_tree(16, link_bandwidth="50 GB/s", link_latency="500 ns")
    hosts = topo.nodes_of("host")
    rng = np.random.default_rng(seed)
    pairs = [rng.choice(len(hosts), 2, replace=False) for _ in range(n_flows)]
    sizes = np.round(rng.uniform(1, 64, n_flows) * 2**20)  # whole bytes (SimGrid's unit)
    flows = [
        Flow(f"f{i}", hosts[a], hosts[b], float(s), route=topo.route(hosts[a], hosts[b]))
        for i, ((a, b), s) in enumerate(zip(pairs, sizes, strict=True))
    ]
    return topo.scenario(flows, name=f"fattree16_{n_flows}flows")


# --- measurements -----------------------------------------------------------------------------------
@dataclasses.dataclass
class Row:
    case: str
    flows: int
    links: int
    batch: int
    netsim_s: float  # per scenario
    netsim_compile_s: float
    simgrid_s: float | None  # per scenario
    max_rel_err: float | None
    events: int

    @property
    def ratio(self) -> float | None:
        return None if self.simgrid_s is None else self.simgrid_s / self.netsim_s


def max_rel_err(ids, ours: np.ndarray, theirs: dict[str, float]) -> float:
    ref = np.array([theirs[i] for i in ids])
    return float(np.max(np.abs(ours - ref) / np.maximum(np.abs(ref), 1e-300))) if len(ids) else 0.0


def run_netsim(scenario: Scenario) -> tuple[netsim.Result, float, float]:
    """(result, steady seconds, one-time jit compile seconds) of one scenario."""
    t0 = time.perf_counter()
    compiled = netsim.compile_scenario(scenario)
    prep = time.perf_counter() - t0
    fn = jax.jit(functools.partial(netsim.kernels.run, max_events=compiled.max_events))
    with jax.enable_x64(True):
        t0 = time.perf_counter()
        exe = fn.lower(compiled.network, compiled.program).compile()
        jit_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        state = jax.device_get(exe(compiled.network, compiled.program))
        run = time.perf_counter() - t0
    netsim.check_status(int(state.status), int(state.events), compiled.max_events)
    return netsim.Result.from_state(compiled, state, prep + run), prep + run, jit_s


def single(case: str, scenario: Scenario, use_simgrid: bool) -> Row:
    result, seconds, jit_s = run_netsim(scenario)
    sg_s = err = None
    if use_simgrid:
        finish, sg_s = simgrid_peer.run([scenario])
        err = max_rel_err(result.flow_ids, result.flow_finish, finish[0])
    return Row(case, len(scenario.flows), len(scenario.links), 1, seconds, jit_s, sg_s, err, result.events)


def batch(case: str, scenario: Scenario, n: int, use_simgrid: bool, seed: int = 0) -> Row:
    """n what-ifs: every link's bandwidth times an independent draw from [0.5, 2] (log-uniform)."""
    sweep = Sweep(
        scenario,
        [LinkBandwidth("bw", scale_range=(0.5, 2.0), log=True, independent=True)],
        samples=n,
        seed=seed,
        outputs=["flow_finish"],
    )
    t0 = time.perf_counter()
    sweep.run(progress=False)  # pays the jit compile
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    result = sweep.run(progress=False)
    seconds = time.perf_counter() - t0
    assert result.complete and np.all(result.status == 0), "netsim sweep left points unfinished"
    sg_s = err = None
    if use_simgrid:
        bw = result.axis("bw")
        scenarios = []
        for p in range(n):
            scale = dict(zip(bw.ids, bw.value[p], strict=True))
            links = tuple(dataclasses.replace(x, bandwidth=x.bandwidth * scale[x.id]) for x in scenario.links)
            scenarios.append(dataclasses.replace(scenario, links=links))
        # every what-if is checked, in groups of GROUP per SimGrid process (disjoint zones); SimGrid's
        # time per scenario is the better of that and SINGLES scenarios run one per process (its
        # engine slows down with many zones, so grouping does not help it)
        finish, grouped = [], 0.0
        for g in range(0, n, GROUP):
            part, wall = simgrid_peer.run(scenarios[g : g + GROUP])
            finish += part
            grouped += wall
        singles = [simgrid_peer.run([scenarios[p]])[1] for p in range(min(SINGLES, n))]
        sg_s = min(grouped / n, float(np.mean(singles)))
        print(
            f"  SimGrid s/scenario: {grouped / n:.4g} in groups of {GROUP}, {np.mean(singles):.4g} alone "
            f"(mean of {len(singles)})",
            flush=True,
        )
        err = max(max_rel_err(result.flow_ids, result.flow_finish[p], finish[p]) for p in range(n))
    return Row(
        case,
        len(scenario.flows),
        len(scenario.links),
        n,
        seconds / n,
        first - seconds,
        sg_s,
        err,
        int(result.events.sum()),
    )


# --- whole processes --------------------------------------------------------------------------------
def timed(cmd: list[str], cache: str | None = None) -> float:
    """Wall seconds of `cmd` as a child process (interpreter start, imports, building, compile, run), with
    netsim's compiled-engine cache in `cache` (a fresh folder per case, so that "first" compiles). Python
    keeps its bytecode caches, as in any installed environment: with PYTHONDONTWRITEBYTECODE set, every
    process compiles each module it imports again (0.1-0.5 s of a netsim process, measured)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env |= {"PJRT_NPROC": "1"} | ({"NETSIM_CACHE_DIR": cache} if cache else {})
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t0


def simgrid_process(scenarios: list[Scenario], tmp: str) -> tuple[list[dict[str, float]], float, float]:
    """(finish times, process wall seconds, SimGrid's own seconds inside it) of benchmarks/simgrid_peer.py
    run on `scenarios` as its own process."""
    src, out = os.path.join(tmp, "sg_in.json"), os.path.join(tmp, "sg_out.json")
    simgrid_peer.write_input(scenarios, src)  # plain JSON: the peer's process imports nothing of netsim's
    wall = timed([simgrid_peer.PYTHON, os.path.join(HERE, "simgrid_peer.py"), src, out])
    with open(out) as f:
        answer = json.load(f)
    return answer["finish"], wall, answer["wall_s"]


def process_run(case: str, scenario: Scenario, tmp: str, use_simgrid: bool = True) -> dict:
    """`netsim run FILE.json` three times with a fresh cache (the first compiles, the next two load the
    compiled engine: "warm" is their mean) against SimGrid on the same scenario in its own process; finish
    times checked against each other."""
    path, out = os.path.join(tmp, "scenario.json"), os.path.join(tmp, "netsim_out.json")
    scenario.save(path)
    cmd = [sys.executable, "-m", "netsim.cli", "run", path, "--out", out]
    cache = os.path.join(tmp, f"cache-{len(os.listdir(tmp))}")
    first, *warms = (timed(cmd, cache) for _ in range(3))
    warm = float(np.mean(warms))
    row = {"case": case, "flows": len(scenario.flows), "netsim_first_s": first, "netsim_warm_s": warms}
    line = f"{case:<34} netsim run {first:7.2f} s first, {warms[0]:.2f} and {warms[1]:.2f} s warm"
    if use_simgrid:
        with open(out) as f:
            ours = {x["id"]: x["finish"] for x in json.load(f)["flows"]}
        theirs, sg, inner = simgrid_process([scenario], tmp)
        err = max(abs(ours[k] - v) / abs(v) for k, v in theirs[0].items())
        row |= {"simgrid_s": sg, "simgrid_inside_s": inner, "ratio_warm": sg / warm, "max_rel_err": err}
        line += (
            f" | SimGrid process {sg:8.2f} s ({inner:.3f} s inside) | {sg / warm:6.1f}x warm, "
            f"{sg / first:.1f}x first | max rel err {err:.1e}"
        )
    print(f"{line} | load {os.getloadavg()[0]:.1f}", flush=True)
    return row


def process_sweep(spec_path: str, tmp: str, singles: int) -> dict:
    """`netsim sweep SPEC` twice (the second warm) against SimGrid run once per what-if, each its own
    process: `singles` of them are run and checked, and the total is their mean times the point count."""
    from netsim.sweep import load_spec

    out = os.path.join(tmp, "sweep.h5")
    cmd = [
        sys.executable,
        "-m",
        "netsim.cli",
        "sweep",
        spec_path,
        "--out",
        out,
        "--overwrite",
        "--no-progress",
    ]
    cache = os.path.join(tmp, "cache-sweep")
    first = timed(cmd, cache)
    os.remove(out)
    warm = timed(cmd, cache)
    from netsim.sweep._sweep import _Runner  # the sweep's own kernel inputs, per point

    sweep = load_spec(spec_path)
    n = sweep.n_points
    plan = sweep.plan()
    network, program, _ = _Runner(plan, jax.devices()[:1]).inputs(slice(0, n))
    t = plan.template
    run = netsim.run_batch(network, program, max_events=t.max_events, keep=("finish",))
    base = routed(sweep.scenario)
    walls, inners, err = [], [], 0.0
    for p in range(min(singles, n)):
        cap, lat = np.asarray(network.capacity[p]), np.asarray(network.latency[p])
        links = tuple(
            dataclasses.replace(x, bandwidth=float(cap[i]), latency=float(lat[i]))
            for i, x in enumerate(base.links)
        )
        finish, wall, inner = simgrid_process([dataclasses.replace(base, links=links)], tmp)
        walls.append(wall)
        inners.append(inner)
        ours = np.asarray(run["finish"][p])[t.flow_slice]
        err = max(err, max_rel_err([f.id for f in base.flows], ours, finish[0]))
    total = float(np.mean(walls)) * n
    row = {"case": f"netsim sweep {os.path.basename(spec_path)}", "points": n, "netsim_first_s": first}
    row |= {"netsim_warm_s": warm, "simgrid_total_s": total, "simgrid_processes_run": len(walls)}
    row |= {"simgrid_inside_s": float(np.mean(inners)) * n, "ratio_warm": total / warm, "max_rel_err": err}
    print(
        f"{row['case']:<34} {n} points: netsim {first:.2f} s first, {warm:.2f} s warm | SimGrid "
        f"{np.mean(walls):.3f} s per process ({np.mean(inners):.3f} s inside) x {n} = {total:.1f} s ({len(walls)} "
        f"run) | {total / warm:.1f}x warm, {row['simgrid_inside_s'] / warm:.1f}x against SimGrid's inside time | "
        f"max rel err {err:.1e} | load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    return row


def processes(args) -> int:
    """--processes: every case as whole processes, netsim's CLI against SimGrid's own process."""
    import tempfile

    rows = []
    print(f"whole processes; load {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_small:
            rows.append(process_run("pcie8 ring allreduce", pcie_ring(), tmp, not args.no_simgrid))
            if not args.no_simgrid:
                rows.append(process_sweep(os.path.join(EXAMPLES, "sweep_pcie_random_bw.json"), tmp, SINGLES))
        for n in [int(x) for x in args.fat_tree.split(",") if x.strip()]:
            scenario = fat_tree_random(n)
            rows.append(process_run(f"fattree k=16, {n} random flows", scenario, tmp, not args.no_simgrid))
    print(f"load at end {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(r.get("max_rel_err", 0.0) <= RTOL for r in rows) else 1


def table(rows: list[Row]) -> str:
    head = (
        f"{'case':<34}{'flows':>7}{'links':>7}{'batch':>6}{'netsim s/scen':>15}{'jit s':>8}"
        f"{'SimGrid s/scen':>16}{'speedup':>9}{'max rel err':>13}  agree"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        sg = f"{r.simgrid_s:>16.4g}" if r.simgrid_s is not None else f"{'-':>16}"
        ratio = f"{r.ratio:>8.3g}x" if r.ratio is not None else f"{'-':>9}"
        err = f"{r.max_rel_err:>13.2e}" if r.max_rel_err is not None else f"{'-':>13}"
        ok = "-" if r.max_rel_err is None else ("yes" if r.max_rel_err <= RTOL else "NO")
        lines.append(
            f"{r.case:<34}{r.flows:>7}{r.links:>7}{r.batch:>6}{r.netsim_s:>15.4g}{r.netsim_compile_s:>8.3g}"
            f"{sg}{ratio}{err}  {ok}"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=1024, help="what-ifs per batch case (default 1024)")
    ap.add_argument(
        "--fat-tree", default="1000,10000,20000", help="flow counts of the scale series ('' skips)"
    )
    ap.add_argument("--no-simgrid", action="store_true", help="netsim only")
    ap.add_argument("--skip-small", action="store_true", help="only the fat-tree scale series")
    ap.add_argument("--json", help="write the rows as JSON here")
    ap.add_argument(
        "--cpu-threads",
        type=int,
        help="XLA CPU threads, 0 = one per core (default: XLA's, one per "
        "core; `netsim run` uses 1, `netsim sweep` one per core)",
    )
    ap.add_argument(
        "--processes",
        action="store_true",
        help="whole processes: `netsim run` / `netsim sweep` against SimGrid's own process per case",
    )
    ap.add_argument(
        "--simgrid-python",
        default=simgrid_peer.PYTHON,
        help="the interpreter that runs the SimGrid peer (one that can `import simgrid`; default: "
        "$SIMGRID_PYTHON, else this one)",
    )
    args = ap.parse_args(argv)
    simgrid_peer.PYTHON = args.simgrid_python
    if not args.no_simgrid and not simgrid_peer.available():
        print(
            f"SimGrid is not importable by {args.simgrid_python} (benchmarks/install_simgrid.sh): netsim only",
            file=sys.stderr,
        )
        args.no_simgrid = True
    if args.processes:
        return processes(args)
    if args.cpu_threads is not None:
        set_cpu_threads(args.cpu_threads)
    use_simgrid = not args.no_simgrid
    print(
        f"device: {jax.devices()[0].device_kind} ({jax.default_backend()}), {os.cpu_count()} CPUs, XLA CPU "
        f"threads: {cpu_threads_label()}",
        flush=True,
    )
    rows: list[Row] = []

    def emit(row: Row) -> None:
        rows.append(row)
        print(table([row]).splitlines()[-1], flush=True)

    print(table([]), flush=True)
    if not args.skip_small:
        ring, perm = pcie_ring(), leaf_spine_permutation()
        emit(single("pcie8 ring allreduce", ring, use_simgrid))
        emit(single("leafspine64 permutation", perm, use_simgrid))
        if args.batch:
            emit(batch("pcie8 ring allreduce, bw what-ifs", ring, args.batch, use_simgrid))
            emit(batch("leafspine64 perm, bw what-ifs", perm, args.batch, use_simgrid))
    for n in [int(x) for x in args.fat_tree.split(",") if x.strip()]:
        emit(single(f"fattree k=16, {n} random flows", fat_tree_random(n), use_simgrid))
    print()
    print(table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "device": jax.devices()[0].device_kind,
                    "rows": [{**dataclasses.asdict(r), "ratio": r.ratio} for r in rows],
                },
                f,
                indent=1,
            )
    bad = [r.case for r in rows if r.max_rel_err is not None and r.max_rel_err > RTOL]
    if bad:
        print(f"DISAGREE beyond {RTOL}: {bad}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
