"""Run netsim scenarios in SimGrid, configured as a pure max-min fluid model with plain latency.

SimGrid is the peer that netsim is checked against in benchmarks/vs_simgrid.py. Its CM02 network
model over the `lmm` max-min solver computes the same thing as netsim once its TCP refinements are
switched off:

- `network/TCP-gamma:0` removes the window cap (rate <= gamma / (2 latency));
- `network/crosstraffic:0` stops acknowledgements from loading the reverse links;
- latency and bandwidth factors 1 and `network/weight-S:0` keep the fluid model unscaled;
- `precision/timing` far below the smallest gap between events (the default 1e-9 s is absolute).

CM02 also weights each flow's share by 1 / (its route latency) while any latency is set. So the
SimGrid links here have zero latency, and each transfer is started after its route latency
(links + per-hop latency + overhead): in netsim the first byte arrives after that latency and the
bytes then move at max-min rates, which is what a zero-latency transfer started that late does.

This module imports nothing of netsim's (nor JAX, nor NumPy): a SimGrid process is timed as SimGrid is
used, an interpreter that reads a plain platform and runs it. netsim's side hands each scenario over as
plain JSON (`plain`, which only reads the scenario's attributes):

    {"links": [{"id", "bandwidth" (bytes/s), "latency" (s)}], "per_hop_latency": s,
     "flows": [{"id", "src", "dst", "bytes", "route": [link ids], "start": s, "after": [flow ids],
                "overhead": s}]}

SimGrid's engine is a per-process singleton, so `run` starts a child process (this file as a
script, under `python`: SimGrid may live in another environment than netsim) and reads its answer
back; `run_in_process` is what the child calls. Several scenarios go into one SimGrid run as
disjoint copies in separate zones: max-min sharing on disjoint link sets is independent, so one run
answers a whole batch of what-ifs.

Usage as a script: python benchmarks/simgrid_peer.py SCENARIOS.json OUT.json
(SCENARIOS.json is a list of plain scenarios; OUT.json gets finish times and SimGrid's wall time).
"""

from __future__ import annotations

import heapq
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

TIMING_PRECISION = 1e-13  # s: far below any event gap in the benchmark scenarios (us to s)
PYTHON = os.environ.get("SIMGRID_PYTHON", sys.executable)  # an interpreter that can `import simgrid`


def plain(scenario, where: str = "scenario") -> dict:
    """A netsim Scenario (flows only, routes written out, whole bytes) as the peer's plain JSON."""
    if scenario.tasks or getattr(scenario, "shared", ()):
        raise ValueError(
            f"{where}: the SimGrid peer runs flows on links only (no tasks, no shared resources)"
        )
    for link in scenario.links:
        if link.packet_bytes is not None:
            raise ValueError(f"{where}: link {link.id!r} is packetized; the SimGrid peer is fluid only")
    flows = []
    for flow in scenario.flows:
        if flow.bytes != int(flow.bytes):
            raise ValueError(f"{where}: flow {flow.id!r} has {flow.bytes!r} bytes; SimGrid moves whole bytes")
        if not flow.route:
            raise ValueError(f"{where}: flow {flow.id!r} needs an explicit non-empty route for SimGrid")
        flows.append(
            {
                "id": flow.id,
                "src": flow.src,
                "dst": flow.dst,
                "bytes": int(flow.bytes),
                "route": list(flow.route),
                "start": float(flow.start),
                "after": list(flow.after),
                "overhead": float(flow.overhead),
            }
        )
    links = [
        {"id": x.id, "bandwidth": float(x.bandwidth), "latency": float(x.latency)} for x in scenario.links
    ]
    return {"links": links, "per_hop_latency": float(scenario.per_hop_latency), "flows": flows}


def _release_offset(scenario: dict, flow: dict, latency: dict[str, float]) -> float:
    """Seconds from a flow's start to its first byte: what SimGrid's zero-latency links leave out."""
    route = flow["route"]
    return sum(latency[lid] for lid in route) + scenario["per_hop_latency"] * len(route) + flow["overhead"]


def run_in_process(scenarios: Sequence[dict]) -> tuple[list[dict[str, float]], float]:
    """Simulates the plain `scenarios` side by side in this process's (single) SimGrid engine.

    Returns:
        Per scenario, {flow id: finish time (s)}; and SimGrid's wall time (s) from platform
        construction to the end of the run.
    """
    import simgrid  # optional dependency: benchmarks/install_simgrid.sh

    engine = simgrid.Engine(["netsim-peer", "--log=root.thres:critical"])
    for cfg in (
        "network/model:CM02",
        "network/TCP-gamma:0",
        "network/crosstraffic:0",
        "network/latency-factor:1",
        "network/bandwidth-factor:1",
        "network/weight-S:0",
        f"precision/timing:{TIMING_PRECISION}",
    ):
        simgrid.Engine.set_config(cfg)

    t0 = time.perf_counter()
    root = engine.netzone_root
    # per flow: (scenario index, flow, src host, dst host, first-byte offset)
    plan: list[tuple[int, dict, object, object, float]] = []
    for si, sc in enumerate(scenarios):
        zone = root.add_netzone_full(f"s{si}")
        latency = {link["id"]: link["latency"] for link in sc["links"]}
        links = {x["id"]: zone.add_link(f"s{si}/{x['id']}", x["bandwidth"]).seal() for x in sc["links"]}
        hosts: dict[str, object] = {}
        routed: dict[tuple[str, str], list[str]] = {}
        for flow in sc["flows"]:
            src, dst, route = flow["src"], flow["dst"], flow["route"]
            if src == dst or routed.get((src, dst), route) != route:
                # SimGrid routes per host pair: another route for the pair gets hosts of its own
                src, dst = f"{src}#{flow['id']}>", f"{dst}#{flow['id']}<"
            for name in (src, dst):
                if name not in hosts:
                    hosts[name] = zone.add_host(f"s{si}/{name}", 1.0)
            if (src, dst) not in routed:
                routed[src, dst] = route
                zone.add_route(
                    hosts[src], hosts[dst], [simgrid.LinkInRoute(links[lid]) for lid in route], False
                )
            plan.append((si, flow, hosts[src], hosts[dst], _release_offset(sc, flow, latency)))
        zone.seal()
    root.seal()

    finish: list[dict[str, float]] = [{} for _ in scenarios]
    by_key = {(si, f["id"]): k for k, (si, f, *_rest) in enumerate(plan)}
    waiting = [len(f["after"]) for _, f, *_rest in plan]
    dependents: list[list[int]] = [[] for _ in plan]
    for k, (si, f, *_rest) in enumerate(plan):
        for dep in f["after"]:
            if (si, dep) not in by_key:
                raise ValueError(f"scenarios[{si}]: flow {f['id']!r} waits on unknown flow {dep!r}")
            dependents[by_key[si, dep]].append(k)
    ready_at = [f["start"] for _, f, *_rest in plan]

    def controller(keys: range):
        # One controller per scenario (its flows are plan[keys]). Flows that others wait on are watched
        # with wait_any (their finish releases dependents); the rest are only collected at the end from
        # their finish_time, so the driver costs O(flows) on independent flows.
        pending = [(ready_at[k] + plan[k][4], k) for k in keys if waiting[k] == 0]
        heapq.heapify(pending)
        watched, unwatched = simgrid.ActivitySet(), simgrid.ActivitySet()
        comms: dict[int, object] = {}
        watched_flow = {}
        while pending or not watched.empty():
            now = simgrid.Engine.clock
            while pending and pending[0][0] <= now + TIMING_PRECISION:  # a timeout may land an ulp early
                _, k = heapq.heappop(pending)
                _, f, h_src, h_dst, _ = plan[k]
                comm = simgrid.Comm.sendto_async(h_src, h_dst, f["bytes"])
                comms[k] = comm
                if dependents[k]:
                    watched_flow[comm] = k
                    watched.push(comm)
                else:
                    unwatched.push(comm)
            if watched.empty():
                if pending:
                    simgrid.this_actor.sleep_until(pending[0][0])
                continue
            try:
                done = watched.wait_any_for(pending[0][0] - now) if pending else watched.wait_any()
            except simgrid.TimeoutException:
                continue
            k = watched_flow.pop(done)
            t = simgrid.Engine.clock
            for d in dependents[k]:
                ready_at[d] = max(ready_at[d], t)
                waiting[d] -= 1
                if waiting[d] == 0:
                    heapq.heappush(pending, (ready_at[d] + plan[d][4], d))
        unwatched.wait_all()
        for k, comm in comms.items():
            si, f, *_rest = plan[k]
            finish[si][f["id"]] = comm.finish_time

    start = 0
    for si, sc in enumerate(scenarios):
        keys = range(start, start + len(sc["flows"]))
        start = keys.stop
        if len(keys):
            plan[keys.start][2].add_actor(f"controller{si}", controller, keys)
    engine.run()
    wall = time.perf_counter() - t0
    missing = sum(len(sc["flows"]) - len(fin) for sc, fin in zip(scenarios, finish, strict=True))
    if missing:
        raise RuntimeError(f"SimGrid left {missing} flow(s) unfinished (a cycle in `after`?)")
    return finish, wall


def write_input(scenarios: Sequence, path: str) -> None:
    """Writes netsim scenarios as the peer's input file (a list of plain scenarios)."""
    with open(path, "w") as f:
        json.dump([plain(sc, f"scenarios[{i}]") for i, sc in enumerate(scenarios)], f)


def run(scenarios: Sequence, *, timeout: float | None = None) -> tuple[list[dict[str, float]], float]:
    """Like `run_in_process` on netsim scenarios, in a child process under `PYTHON` (SimGrid's engine
    cannot be created twice in one process)."""
    with tempfile.TemporaryDirectory() as tmp:
        src, out = os.path.join(tmp, "in.json"), os.path.join(tmp, "out.json")
        write_input(scenarios, src)
        subprocess.run([PYTHON, os.path.abspath(__file__), src, out], check=True, timeout=timeout)
        with open(out) as f:
            answer = json.load(f)
    return answer["finish"], answer["wall_s"]


def available() -> bool:
    """Whether `PYTHON` can import SimGrid's bindings."""
    return subprocess.run([PYTHON, "-c", "import simgrid"], capture_output=True).returncode == 0


def main(argv: Sequence[str]) -> None:
    if len(argv) != 2:
        sys.exit("usage: python benchmarks/simgrid_peer.py SCENARIOS.json OUT.json")
    with open(argv[0]) as f:
        scenarios = json.load(f)
    finish, wall = run_in_process(scenarios)
    with open(argv[1], "w") as f:
        json.dump({"finish": finish, "wall_s": wall}, f)


if __name__ == "__main__":
    main(sys.argv[1:])
