"""Chrome / Perfetto trace export and the critical path of a simulated scenario."""

from __future__ import annotations

import itertools
import json

import pytest

import netsim
from netsim import Flow, Link, Scenario, ScenarioError, Task
from netsim.timeline import critical_path, save_trace, trace_events

PAD = netsim.Shape(items=64, hops=4, after=2, resources=8)


@pytest.fixture(scope="module")
def result():
    # Two tasks overlap on gpu0 (they share it), a flow waits for one of them, two flows on a -> b overlap,
    # a third flow takes the two-hop route a -> b -> c, and a task on gpu1 waits for it.
    links = [Link("a->b", "a", "b", 1e9, 1e-6), Link("b->c", "b", "c", 2e9, 2e-6)]
    flows = [
        Flow("f1", "a", "b", 1e6, after=("t1",)),
        Flow("f2", "a", "b", 5e5, start=1e-3),
        Flow("f3", "a", "c", 1e6, route=("a->b", "b->c"), start=1.5e-3),
    ]
    tasks = [Task("t1", "gpu0", 1e-3), Task("t2", "gpu0", 2e-3), Task("t3", "gpu1", 2e-3, after=("f3",))]
    return netsim.simulate(netsim.compile_scenario(Scenario(links, flows, tasks, name="small"), shape=PAD))


def slices(trace):
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


def track_names(trace):
    return {
        (e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"
    }


def test_every_item_is_one_complete_event_at_its_simulated_times(result):
    trace = trace_events(result)
    assert set(trace) == {"traceEvents", "displayTimeUnit", "otherData"}
    events = {e["name"]: e for e in slices(trace)}
    assert sorted(events) == ["f1", "f2", "f3", "t1", "t2", "t3"]
    for item_id, e in events.items():
        t = result.timing(item_id)
        assert e["ts"] == pytest.approx(t.start * 1e6, rel=1e-12, abs=1e-9)  # µs
        assert e["dur"] == pytest.approx((t.finish - t.start) * 1e6, rel=1e-12, abs=1e-9)
        assert e["cat"] == ("flow" if item_id.startswith("f") else "task")
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
    assert events["f3"]["args"]["route"] == ["a->b", "b->c"]
    assert events["f3"]["args"]["bytes"] == 1e6
    assert events["f3"]["args"]["bottlenecks_s"] == pytest.approx(result.bottlenecks("f3"))
    assert trace["otherData"]["makespan_s"] == result.makespan
    json.dumps(trace)  # serializable as is


def test_tracks_per_device_and_pair_with_lanes_for_overlaps(result):
    trace = trace_events(result)
    names = track_names(trace)
    where = {e["name"]: names[e["pid"], e["tid"]] for e in slices(trace)}
    # t1 and t2 overlap on gpu0 (processor sharing): two lanes of one device
    assert {where["t1"], where["t2"]} == {"gpu0", "gpu0 #2"}
    assert where["t3"] == "gpu1"
    assert where["f3"] == "a -> c"
    assert {where["f1"], where["f2"]} <= {"a -> b", "a -> b #2"}
    # slices of one track never overlap (trace viewers need nested or disjoint slices)
    by_track: dict = {}
    for e in slices(trace):
        by_track.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_track.values():
        spans.sort()
        assert all(a[1] <= b[0] * (1 + 1e-12) for a, b in itertools.pairwise(spans))


def test_link_tracks_show_a_flow_on_every_link_of_its_route(result):
    trace = trace_events(result, flows="link")
    names = track_names(trace)
    on = {}
    for e in slices(trace):
        if e["cat"] == "flow":
            on.setdefault(e["name"], set()).add(names[e["pid"], e["tid"]].split(" #")[0])
    assert on == {"f1": {"a->b"}, "f2": {"a->b"}, "f3": {"a->b", "b->c"}}
    assert all(e["cat"] == "task" for e in slices(trace_events(result, flows="none")))
    with pytest.raises(ScenarioError, match="flows: unknown track layout 'pairs'"):
        trace_events(result, flows="pairs")


def test_save_trace_writes_the_same_json(result, tmp_path):
    path = tmp_path / "t.json"
    save_trace(result, path)
    assert json.loads(path.read_text()) == json.loads(json.dumps(trace_events(result)))
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]  # no temporary file left behind


def test_critical_path_adds_up_to_the_makespan(result):
    path = critical_path(result)
    # the last item is t3, released by f3, which started on its own start time (1.5 ms)
    assert [s.id for s in path] == ["f3", "t3"]
    assert path[0].start == pytest.approx(1.5e-3)
    assert path[0].start + sum(s.duration for s in path) == pytest.approx(result.makespan, rel=1e-12)
    f3 = path[0]
    assert f3.latency == pytest.approx(3e-6)
    assert f3.duration == pytest.approx(f3.latency + sum(f3.held.values()), rel=1e-9)


# --- pipeline ops: their kinds, bubbles and colours ----------------------------------------------

PIPE_PAD = netsim.Shape(items=256, hops=16, after=8, resources=64)  # tests/workloads/test_pipeline.py's


def pipeline_result(schedule: str, p: int = 4, m: int = 8, tw: float = 0.0):
    """A p-stage pipeline on a chain of ideal cables (transfers take no time), stage costs F 1, B 2, W tw."""
    from netsim.topology import Topology, cable
    from netsim.workloads import StageCosts, pipeline

    links = [x for i in range(p - 1) for x in cable(f"g{i}", f"g{i + 1}", 1e30, 0.0)]
    topo = Topology("chain", links, {f"g{i}": "gpu" for i in range(p)})
    costs = StageCosts(forward=1.0, backward_input=2.0, backward_weight=tw, activation_bytes=1e6)
    pipe = pipeline(topo, [f"g{i}" for i in range(p)], schedule=schedule, microbatches=m, costs=costs)
    return netsim.simulate(netsim.compile_scenario(pipe.scenario(), shape=PIPE_PAD))


def test_task_kinds_follow_the_pipeline_op_ids():
    from netsim.timeline import task_kind

    assert [task_kind(i) for i in ("r0/F3.s1", "F0.s0", "r1/BW12.s3", "r0/B2.s0", "r0/W7.s2")] == [
        "forward",
        "forward",
        "backward",
        "backward",
        "weight gradient",
    ]
    for other in ("r0/optimizer.d0", "t1", "r0/F3", "xF3.s1", "r0/F3.s1/sum", "gpu0/BWx.s1"):
        assert task_kind(other) == "task", other


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_pipeline_bubbles_match_the_closed_form(schedule):
    # uniform stages, free transfers: every device computes m (T_F + T_B) of (m + p - 1)(T_F + T_B)
    from netsim.timeline import pipeline_bubbles

    p, m = 4, 8
    result = pipeline_result(schedule, p, m)
    bubbles = pipeline_bubbles(result)
    assert sorted(bubbles) == [f"g{i}" for i in range(p)]
    for busy, bubble in bubbles.values():
        assert busy == pytest.approx(m * 3.0, rel=1e-12)
        assert bubble == pytest.approx((p - 1) / (m + p - 1), rel=1e-9)
    text = result.summary()  # what `netsim run` prints
    assert "pipeline device" in text and f"{(p - 1) / (m + p - 1):.1%}" in text
    assert (
        pipeline_bubbles(netsim.simulate(netsim.compile_scenario(Scenario([], [], [Task("t", "d", 1.0)]))))
        == {}
    )


def test_pipeline_bubbles_count_pipeline_ops_only():
    # a device's other tasks (a step's stall, an optimizer step) are not pipeline work: by hand, F 1 s,
    # then a 2 s stall alone, then BW 1 s beside a 1 s step (sharing the device: 2 s for both), makespan 5 s
    from netsim.timeline import pipeline_bubbles

    tasks = [
        Task("r0/F0.s0", "g0", 1.0),
        Task("stall.g0", "g0", 2.0, after=("r0/F0.s0",)),
        Task("r0/BW0.s0", "g0", 1.0, after=("stall.g0",)),
        Task("step.g0", "g0", 1.0, after=("stall.g0",)),
    ]
    result = netsim.simulate(netsim.compile_scenario(Scenario([], [], tasks)))
    assert float(result.makespan) == pytest.approx(5.0)
    assert pipeline_bubbles(result) == {"g0": (pytest.approx(3.0), pytest.approx(0.4))}


def test_plot_timeline_colours_each_op_kind_with_a_legend():
    pytest.importorskip("matplotlib")
    from matplotlib.colors import to_rgba

    from netsim.plots import TIMELINE_COLOURS, plot_timeline
    from netsim.timeline import task_kind

    result = pipeline_result("zb-h1", tw=1.0)
    ax = plot_timeline(result).axes[0]
    flows = set(result.flow_ids)
    bars = [b for b in ax.patches if b.get_gid()]
    assert {b.get_gid() for b in bars} == set(result.task_ids) | flows
    for b in bars:
        kind = "flow" if b.get_gid() in flows else task_kind(b.get_gid())
        assert b.get_facecolor() == to_rgba(TIMELINE_COLOURS[kind]), b.get_gid()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["forward", "backward", "weight gradient", "flow", "critical path"]
    assert len({TIMELINE_COLOURS[k] for k in labels[:4]}) == 4  # distinct
