"""Small scenarios and sweeps shared by the sweep tests and their subprocesses.

All compile to one padded shape (64 items, 2 hops, 2 predecessors, 8 resources), so the in-process
tests share a compile per kind of sweep (program shared or batched).
"""

from __future__ import annotations

import dataclasses
import sys

import numpy as np

import netsim
from netsim import Flow, Link, Scenario
from netsim.sweep import FailedLinks, LinkBandwidth, LinkLatency, MessageSize, ScenarioAxis, Sweep


def one_link() -> Scenario:
    return Scenario([Link("l", "a", "b", 1e9, 2e-6)], [Flow("f", "a", "b", 1e6)], name="one_link")


def diamond() -> Scenario:
    """a -> b -> d (fast, short) and a -> c -> d (slow, long); flows contend on both branches."""
    links = [
        Link("ab", "a", "b", 4e9, 1e-6),
        Link("bd", "b", "d", 2e9, 1e-6),
        Link("ac", "a", "c", 1e9, 3e-6),
        Link("cd", "c", "d", 3e9, 3e-6),
    ]
    flows = [
        Flow("f1", "a", "d", 4e6),
        Flow("f2", "b", "d", 2e6, start=5e-4),
        Flow("f3", "c", "d", 3e6, after=("f2",)),
    ]
    return Scenario(links, flows, name="diamond")


def move_f3(scenario: Scenario, src: str) -> Scenario:
    """Placement callback: f3 starts at another node (its route is recomputed)."""
    flows = tuple(dataclasses.replace(f, src=src, route=None) if f.id == "f3" else f for f in scenario.flows)
    return dataclasses.replace(scenario, flows=flows)


def modified(
    scenario: Scenario, *, bw: dict | None = None, lat: dict | None = None, size: dict | None = None
) -> Scenario:
    """The scenario with link bandwidths/latencies and flow bytes multiplied per id (the reference)."""
    bw, lat, size = bw or {}, lat or {}, size or {}
    links = [
        dataclasses.replace(
            x, bandwidth=x.bandwidth * bw.get(x.id, 1.0), latency=x.latency * lat.get(x.id, 1.0)
        )
        for x in scenario.links
    ]
    flows = [dataclasses.replace(f, bytes=f.bytes * size.get(f.id, 1.0)) for f in scenario.flows]
    return dataclasses.replace(scenario, links=tuple(links), flows=tuple(flows))


CHUNK = 5


def grid_sweep() -> Sweep:
    """24 points: bandwidth of the a-links x latency of everything x bytes of f1.

    Tests run it in chunks of CHUNK points, so that they share one compile.
    """
    return Sweep(
        diamond(),
        [
            LinkBandwidth("a_bw", match="a*", scale=[0.5, 1.0, 2.0]),
            LinkLatency("lat", scale=[1.0, 10.0]),
            MessageSize("f1_bytes", match="f1", scale=[0.25, 1.0, 2.0, 8.0]),
        ],
    )


def scenario_sweep() -> Sweep:
    """18 points with scenario axes (program batched): placements x failed links x bandwidth."""
    return Sweep(
        diamond(),
        [
            LinkBandwidth("bw", match="*", scale=[1.0, 3.0]),
            ScenarioAxis("f3_src", values=["c", "a", "b"], build=move_f3),
            FailedLinks("failed", sets=[[], ["ab"], ["bd"]]),
        ],
    )


def reference(sweep: Sweep, row: dict) -> netsim.Result:
    """netsim.simulate of one grid point of `grid_sweep`, built by hand from the axis values."""
    sc = modified(
        sweep.scenario,
        bw={k: row["a_bw"] for k in ("ab", "ac")},
        lat={x.id: row["lat"] for x in sweep.scenario.links},
        size={"f1": row["f1_bytes"]},
    )
    return netsim.simulate(sc)


def run_and_maybe_die(path: str, kill_after: int | None) -> None:
    """Subprocess entry: runs grid_sweep to `path` in chunks of 5; SIGKILLs itself after a chunk."""
    import os
    import signal

    def on_chunk(c: int) -> None:
        if kill_after is not None and c == kill_after:
            os.kill(os.getpid(), signal.SIGKILL)  # no cleanup, no flush: a crash

    grid_sweep().run(path, chunk_size=CHUNK, progress=False, on_chunk=on_chunk)


def sharded_run(path: str) -> None:
    """Subprocess entry (with 4 host devices): scenario_sweep sharded over all 4, written to `path`."""
    import jax

    assert jax.device_count() == 4, jax.devices()
    # 10 points per chunk: padded to 12 over 4 devices; the program (routes) is batched too
    scenario_sweep().run(path, progress=False, chunk_size=10)
    print("ran on 4 devices")


def distributed_worker(port: int, process_id: int, path: str) -> None:
    """Subprocess entry: one of 2 jax.distributed processes on localhost running grid_sweep to `path`."""
    import jax

    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=process_id)
    assert jax.device_count() == 2 and jax.local_device_count() == 1
    result = grid_sweep().run(path, chunk_size=7, progress=False)
    assert (result is None) == (process_id != 0)
    print(f"process {process_id} done")


def columns(result) -> dict[str, np.ndarray]:
    return {
        k: getattr(result, k)
        for k in ("status", "events", "makespan", "flow_finish", "link_bytes", "link_utilization")
        if getattr(result, k) is not None
    }


if __name__ == "__main__":
    run_and_maybe_die(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else None)
