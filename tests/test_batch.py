"""The one batch engine: compile_batch / run_batch against one-by-one simulation, its batching rule,
padding, status and errors."""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

import jax
import numpy as np
import pytest
from scenarios import PAD, random_scenario

import netsim
from netsim import Flow, Link, Scenario, ScenarioError, SimulationError, Status, _cache, _runner

ROOT = Path(__file__).resolve().parents[1]


def test_batch_equals_one_by_one():
    scenarios = [random_scenario(seed) for seed in range(5)]
    batch = netsim.compile_batch(scenarios, shape=PAD)
    assert batch.shape == PAD and len(batch.compiled) == 5
    run = batch.run(keep=("makespan", "finish", "resource_bytes"))
    for i, sc in enumerate(scenarios):
        one = netsim.simulate(netsim.compile_scenario(sc, shape=PAD))
        np.testing.assert_array_equal(run["finish"][i][batch.compiled[i].flow_slice], one.flow_finish)
        np.testing.assert_array_equal(run["resource_bytes"][i][batch.compiled[i].link_slice], one.link_bytes)
        assert run["makespan"][i] == one.makespan and run.events[i] == one.events
    assert np.all(run.ok)


@pytest.mark.skipif(jax.devices()[0].platform != "cpu", reason="chunks are the CPU's batching rule")
def test_batches_of_any_size_share_one_executable_and_count_their_chunks(monkeypatch):
    keys, phases = [], []
    executable, doing = _runner.executable, _runner.doing

    def keyed(fn, args, static, out_tree):
        keys.append(_cache.executable_key(fn, args, static))
        return executable(fn, args, static, out_tree)

    @contextlib.contextmanager
    def recorded(what):
        with doing(what) as phase:
            phases.append(phase)
            yield phase

    monkeypatch.setattr(_runner, "executable", keyed)
    monkeypatch.setattr(_runner, "doing", recorded)
    scenarios = [random_scenario(seed) for seed in range(7)]
    makespans = [netsim.compile_batch(scenarios[:k], shape=PAD).run()["makespan"] for k in (7, 3, 5)]
    assert len(keys) == 3 and len(set(keys)) == 1  # 2, 1 and 2 chunks of 4 points: one executable
    np.testing.assert_array_equal(makespans[1], makespans[0][:3])
    np.testing.assert_array_equal(makespans[2], makespans[0][:5])
    assert [p.what for p in phases] == [f"running {k} points in one batch: {k} done" for k in (7, 3, 5)]
    # 70 points: one call of CHUNKS_PER_CALL chunks (64 points), then two of one chunk: a second executable
    many = netsim.compile_batch(scenarios * 10, shape=PAD).run()["makespan"]
    assert _runner.CHUNKS_PER_CALL * 4 == 64 and len(set(keys)) == 2
    np.testing.assert_array_equal(many, np.tile(makespans[0], 10))
    assert phases[-1].what == "running 70 points in one batch: 70 done"


def test_compile_batch_pads_to_the_largest_without_compiling_twice():
    small = Scenario((Link("l", "a", "b", 1e9),), (Flow("f", "a", "b", 1e6),))
    big = random_scenario(0)
    batch = netsim.compile_batch([small, big])
    assert batch.compiled[0].shape == batch.compiled[1].shape == netsim.compile_scenario(big).shape
    np.testing.assert_allclose(batch.run()["makespan"][0], 1e-3, rtol=1e-12)


def test_shapes_in_powers_of_two():
    assert netsim.Shape(1, 2, 3, 1000).in_powers_of_two() == netsim.Shape(1, 2, 4, 1024)
    assert netsim.Shape(64, 5, 8, 1025).in_powers_of_two() == netsim.Shape(64, 8, 8, 2048)


def test_shared_program_under_many_networks():
    """A leaf without a batch axis is shared: one program, a bandwidth vector per point."""
    compiled = netsim.compile_scenario(random_scenario(1), shape=PAD)
    scales = np.array([0.5, 1.0, 2.0, 4.0])
    net = netsim.kernels.Network(
        compiled.network.capacity[None, :] * scales[:, None],
        np.broadcast_to(compiled.network.latency, (4, PAD.resources)),
    )
    axes = netsim.batch_axes(net, compiled.program)
    assert axes[0].capacity == 0 and axes[1].route is None
    run = netsim.run_batch(net, compiled.program, max_events=compiled.max_events, width=8)
    for k, s in enumerate(scales):
        net_k = netsim.kernels.Network(compiled.network.capacity * s, compiled.network.latency)
        one = netsim.simulate(dataclasses.replace(compiled, network=net_k))
        assert run["makespan"][k] == one.makespan


def test_status_without_throw_and_with():
    compiled = netsim.compile_scenario(random_scenario(2), shape=PAD)
    prog = netsim.stack([compiled.program] * 2)
    run = netsim.run_batch(compiled.network, prog, max_events=3, throw=False)
    assert np.all(run.status == Status.MAX_EVENTS)
    with pytest.raises(SimulationError, match=r"2 of 2 points did not finish; point 0: hit max_events=3"):
        run.check()


def test_runs_in_float64_without_the_callers_x64():
    compiled = netsim.compile_scenario(random_scenario(3), shape=PAD)
    want = netsim.simulate(compiled).makespan
    with jax.enable_x64(False):
        got = netsim.run_batch(
            compiled.network, netsim.stack([compiled.program]), max_events=compiled.max_events
        )
    assert got["makespan"][0] == want


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"keep": ("nope",)}, r"keep: unknown output\(s\) \['nope'\]"),
        ({"size_rows": 3}, r"batch: the batched inputs disagree on the batch size \(\[2, 3\]\)"),
        ({"route_rank": 4}, r"program.route: expected 2 dimensions \(shared\) or 3 \(batched\), got shape"),
    ],
)
def test_bad_batches(kwargs, match):
    compiled = netsim.compile_scenario(random_scenario(4), shape=PAD)
    p = compiled.program
    prog = netsim.stack([p, p])
    if "size_rows" in kwargs:
        prog = netsim.kernels.Program(
            prog.route, np.stack([p.size] * kwargs.pop("size_rows")), prog.release, prog.overhead, prog.after
        )
    if "route_rank" in kwargs:
        kwargs.pop("route_rank")
        prog = netsim.kernels.Program(p.route[None, None, None], p.size, p.release, p.overhead, p.after)
    with pytest.raises(ScenarioError, match=match):
        netsim.run_batch(compiled.network, prog, max_events=compiled.max_events, **kwargs)


@pytest.mark.parametrize(
    ("edit", "match"),
    [  # each: a hang (NaN or inf capacity), a quiet wrong answer or a raw error before these checks
        (("network", "capacity", (0, 0), np.nan), r"network.capacity\[0, 0\]: must be finite, > 0, got nan"),
        (("network", "capacity", (1, 2), np.inf), r"network.capacity\[1, 2\]: must be finite, > 0, got inf"),
        (("network", "latency", (0, 1), -1.0), r"network.latency\[0, 1\]: must be finite, >= 0, got -1.0"),
        (("program", "size", (0, 0), -5.0), r"program.size\[0, 0\]: must be finite, >= 0, got -5.0"),
        (("program", "release", (1, 0), np.nan), r"program.release\[1, 0\]: must be finite, >= 0, got nan"),
        (("program", "route", (0, 0, 0), 999), r"program.route\[0, 0, 0\]: must be a resource 0..\d+"),
        (("program", "route", (0, 0, 0), -7), r"program.route\[0, 0, 0\]: must be a resource .* got -7"),
        (("program", "after", (0, 0, 0), 9999), r"program.after\[0, 0, 0\]: must be an item 0..\d+"),
        (
            ("network", "capacity", "one resource", None),
            r"network.latency: shape \(2, \d+\) does not fit the 1",
        ),
        (("program", "size", "one item less", None), r"program.release: shape .* does not fit the \d+ items"),
    ],
)
def test_edited_batch_inputs_are_checked_before_tracing(edit, match):
    import equinox as eqx

    batch = netsim.compile_batch([random_scenario(1), random_scenario(2)], shape=PAD)
    inputs = {"network": batch.network, "program": batch.program}
    part, field, where, value = edit
    x = np.array(getattr(inputs[part], field))
    if where == "one resource":
        x = x[:, :1]
    elif where == "one item less":
        x = x[:, :-1]
    else:
        x[where] = value
    # tree_at, not dataclasses.replace: the tests' type checker would refuse the bad shapes first
    inputs[part] = eqx.tree_at(lambda tree: getattr(tree, field), inputs[part], x)
    with pytest.raises(ScenarioError, match=match):
        netsim.run_batch(**inputs, max_events=batch.shape.max_events, throw=False)


def test_bad_batch_arguments_are_scenario_errors():
    # each was a raw ValueError, IndexError or TypeError from numpy, JAX or equinox
    import equinox as eqx

    scenario = random_scenario(1)
    batch = netsim.compile_batch([scenario, scenario])
    net, prog, bound = batch.network, batch.program, batch.shape.max_events
    run = lambda **kw: netsim.run_batch(**({"network": net, "program": prog, "max_events": bound} | kw))
    cases = [
        (
            lambda: run(network=eqx.tree_at(lambda n: n.capacity, net, np.asarray(net.capacity).tolist())),
            r"network.capacity: expected an array, got list",
        ),
        (
            lambda: run(
                network=eqx.tree_at(lambda n: n.capacity, net, np.asarray(net.capacity).astype(np.int64))
            ),
            r"network.capacity: expected float64 values, got int64",
        ),
        (lambda: run(max_events="x"), r"max_events: expected an integer >= 1, got 'x'"),
        (lambda: run(devices=[]), r"devices: an empty list"),
        (lambda: run(loop="bogus"), r"loop: unknown value 'bogus'"),
        (lambda: netsim.stack([]), r"stack: expected a non-empty list"),
        (
            lambda: netsim.stack([prog, netsim.compile_scenario(random_scenario(5)).program]),
            r"stack: the trees differ in structure or shape",
        ),
        (lambda: netsim.compile_batch(scenario), r"scenarios: expected a list of scenarios, got Scenario"),
        (lambda: netsim.compile_batch([scenario], shape="x"), r"shape: expected a netsim.Shape, got str"),
    ]
    for call, match in cases:
        with pytest.raises(ScenarioError, match=match):
            call()


def test_empty_and_bad_scenarios():
    with pytest.raises(ScenarioError, match="scenarios: an empty batch"):
        netsim.compile_batch([])
    bad = Scenario((Link("l", "a", "b", 1e9),), (Flow("f", "a", "zz", 1e6),))
    with pytest.raises(ScenarioError, match=r"scenarios\[1\]: flows\[0\] \(id 'f'\)\.dst: unknown node 'zz'"):
        netsim.compile_batch([random_scenario(0), bad])


def test_post_run_check_over_a_batch_names_the_point_and_resource():
    # the check `simulate` applies, over every finished point: a real batch passes; one tally moved by
    # 1e-6 relative (1000x the tolerance) in one point is found there, and an unfinished point is skipped
    from netsim._runner import CHECKED, find_fault

    batch = netsim.compile_batch([random_scenario(seed) for seed in range(4)], shape=PAD)
    run = batch.run(keep=CHECKED)
    fields = {k: run[k].copy() for k in CHECKED}
    assert find_fault(batch.network, batch.program, fields, run.ok) is None
    j = int(np.argmax(fields["resource_bytes"][2]))
    fields["resource_bytes"][2, j] *= 1 + 1e-6
    fault = find_fault(batch.network, batch.program, fields, run.ok)
    assert (fault.point, fault.kind, fault.index) == (2, "resource", j)
    assert find_fault(batch.network, batch.program, fields, np.array([True, True, False, True])) is None
    fields["finish"][1, 0] = np.nan
    fault = find_fault(batch.network, batch.program, fields, run.ok)
    assert (fault.point, fault.kind, fault.index, fault.message) == (
        1,
        "item",
        0,
        "has finish = nan in a finished run",
    )


def test_run_batch_applies_the_post_run_check(monkeypatch):
    import netsim._runner as runner

    batch = netsim.compile_batch([random_scenario(seed) for seed in range(2)], shape=PAD)
    seen = []

    def fault(network, program, state, ok):  # what run_batch hands the check, and a fault to report
        seen.append((sorted(state), ok.tolist()))
        return runner.Fault(1, "resource", 3, "carried 2.0 {unit}, but the items crossing it total 1.0")

    monkeypatch.setattr(runner, "find_fault", fault)
    with pytest.raises(SimulationError, match=r"post-run check: point 1: resource 3 carried 2\.0 bytes"):
        batch.run()
    assert seen == [(sorted(runner.CHECKED), [True, True])]


def test_post_run_check_with_a_shared_program():
    # one program under 4 networks: the expected tallies are computed once, the fault still found per point
    from netsim._runner import CHECKED, find_fault

    compiled = netsim.compile_scenario(random_scenario(1), shape=PAD)
    capacity = compiled.network.capacity[None, :] * np.array([1.0, 0.5, 2.0, 3.0])[:, None]
    network = netsim.kernels.Network(capacity, compiled.network.latency)
    run = netsim.run_batch(network, compiled.program, max_events=compiled.max_events, keep=CHECKED)
    fields = {k: run[k].copy() for k in CHECKED}
    assert find_fault(network, compiled.program, fields, run.ok) is None
    j = int(np.argmax(fields["resource_bytes"][3]))
    fields["resource_bytes"][3, j] *= 1 - 1e-6
    fault = find_fault(network, compiled.program, fields, run.ok)
    assert (fault.point, fault.kind, fault.index) == (3, "resource", j)


@pytest.mark.skipif(jax.devices()[0].platform != "cpu", reason="chunks are the CPU's batching rule")
def test_points_above_a_chunk_run_unbatched_bit_for_bit_with_the_frontier():
    """Past CHUNK_ITEMS a point runs alone (`lax.map` over the unbatched engine): the frontier's and the
    ladder's conds stay conds, where a vmap of one point would run both branches of each; and the results
    equal `simulate`'s bit for bit. A flat batch runs without the frontier, as `simulate` would."""
    sc = Scenario.load(ROOT / "examples" / "pp_1f1b.json")  # items wait on items: the frontier's case
    compiled = netsim.compile_scenario(sc, shape=netsim.Shape(items=512))
    assert compiled.program.size.shape[-1] > 2 * netsim.kernels.frontier.FRONTIER[0]
    scales = np.array([1.0, 0.7])
    net = dataclasses.replace(compiled.network, capacity=compiled.network.capacity[None, :] * scales[:, None])
    run = netsim.run_batch(net, compiled.program, max_events=compiled.max_events, keep=("finish",))
    for k in range(len(scales)):
        one = netsim.simulate(
            dataclasses.replace(
                compiled, network=dataclasses.replace(compiled.network, capacity=net.capacity[k])
            )
        )
        np.testing.assert_array_equal(run["finish"][k][compiled.flow_slice], one.flow_finish)
        assert run.events[k] == one.events
    options = dict(max_events=compiled.max_events, keep=("finish",), loop="lax", tolerance=0.0)
    axes = netsim.batch_axes(net, compiled.program)
    jaxpr = str(
        jax.make_jaxpr(lambda n, p: _runner._batched(n, p, axes=axes, chunk=1, **options))(
            net, compiled.program
        )
    )
    assert " cond[" in jaxpr
    real = compiled.program.size > 0
    assert _runner.frontier_option(compiled.program, real, 0.0) == {}
    two = Scenario((Link("l", "a", "b", 1e9),), (Flow("f", "a", "b", 1e6), Flow("g", "a", "b", 2e6)))
    flat = netsim.compile_scenario(two).program
    assert _runner.frontier_option(netsim.stack([flat, flat]), flat.size > 0, 0.0) == {"frontier": 0}
