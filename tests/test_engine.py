"""The engine against an independent reference, hand-solved cases, and conservation laws."""

from __future__ import annotations

import dataclasses
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import reference_simulate
from scenarios import PAD, random_scenario

import netsim
from netsim import Flow, Link, Scenario, Task, kernels

_run_paths = jax.jit(kernels.run, static_argnames=("max_events", "dense"))


def times(result: netsim.Result) -> dict[str, tuple[float, float, float]]:
    out = {
        f: (result.flow(f).start, result.flow(f).first_byte, result.flow(f).finish) for f in result.flow_ids
    }
    out.update(
        {t: (result.task(t).start, result.task(t).start, result.task(t).finish) for t in result.task_ids}
    )
    return out


@pytest.mark.parametrize("seed", range(12))
def test_matches_reference_simulator(seed):
    scenario = random_scenario(seed)
    got = times(netsim.simulate(netsim.compile_scenario(scenario, shape=PAD)))
    want = reference_simulate(scenario)
    for key, w in want.items():
        np.testing.assert_allclose(got[key], w, rtol=1e-9, atol=1e-15, err_msg=key)


@pytest.mark.parametrize("seed", range(4))
def test_conservation_and_causality(seed):
    scenario = random_scenario(100 + seed)
    result = netsim.simulate(netsim.compile_scenario(scenario, shape=PAD))
    # bytes delivered = bytes asked: each link carried exactly the bytes of the flows routed over it
    want = np.zeros(len(scenario.links))
    index = {link.id: i for i, link in enumerate(scenario.links)}
    for flow, route in zip(scenario.flows, result.compiled.routes, strict=True):
        for lid in route:
            want[index[lid]] += flow.bytes
    np.testing.assert_allclose(result.link_bytes, want, rtol=1e-9)
    # no link carried more than capacity x busy time
    assert np.all(result.link_bytes <= result.link_bandwidth * result.link_busy * (1 + 1e-9))
    # causality: nothing starts before its release or before its predecessors finish
    for item in (*scenario.flows, *scenario.tasks):
        t = result.timing(item.id)
        assert t.start >= item.start
        for dep in item.after:
            assert t.start >= result.timing(dep).finish
        assert t.start <= t.first_byte <= t.finish
    # the time a flow spends transferring is all attributed to some bottleneck link
    for i, fid in enumerate(result.flow_ids):
        t = result.flow(fid)
        np.testing.assert_allclose(
            sum(result.bottlenecks(fid).values()), t.finish - t.first_byte, rtol=1e-9, atol=1e-15
        )
        assert set(result.bottlenecks(fid)) <= set(result.compiled.routes[i])


def test_two_flows_share_and_side_link():
    # link a: x->y 10 B/s; link b: y->z 4 B/s. f1 x->y, f2 x->z (a then b), f3 y->z starts at 0.5 s.
    # [0, 0.5]: b is the bottleneck of f2 alone: f2 = 4, f1 takes the rest of a: 6.
    #   At 0.5: f1 has 10 - 3 = 7 left, f2 has 10 - 2 = 8.
    # [0.5, 1.375]: b shared by f2, f3: 2 each; f1 = 10 - 2 = 8, done after 7 / 8 = 0.875 s.
    #   At 1.375: f2 has 8 - 1.75 = 6.25 left, f3 has 10 - 1.75 = 8.25.
    # [1.375, 4.5]: b still shared, 2 each: f2 done after 6.25 / 2 = 3.125 s. f3 has 2 left.
    # [4.5, 5.0]: f3 alone on b at 4: 0.5 s.
    s = Scenario(
        [Link("a", "x", "y", 10.0), Link("b", "y", "z", 4.0)],
        [Flow("f1", "x", "y", 10.0), Flow("f2", "x", "z", 10.0), Flow("f3", "y", "z", 10.0, start=0.5)],
    )
    r = netsim.simulate(s)
    np.testing.assert_allclose(r.flow_finish, [1.375, 4.5, 5.0], rtol=1e-12)
    assert r.bottlenecks("f1") == {"a": pytest.approx(1.375)}
    assert r.bottlenecks("f2") == {"b": pytest.approx(4.5)}
    assert r.makespan == pytest.approx(5.0)


def test_parking_lot():
    # Three links in a row, each 1 B/s; a long flow crosses all three, one short flow on each link.
    # Max-min: every link has 2 users, share 1/2 for everyone: all four flows at 0.5 B/s.
    # The short flows (1 B) finish at 2 s; then the long flow (3 B, 2 left... 3 - 1 = 2) runs alone at 1: t = 4 s.
    links = [Link(f"l{i}", f"v{i}", f"v{i + 1}", 1.0) for i in range(3)]
    flows = [Flow("long", "v0", "v3", 3.0)] + [Flow(f"s{i}", f"v{i}", f"v{i + 1}", 1.0) for i in range(3)]
    r = netsim.simulate(Scenario(links, flows))
    np.testing.assert_allclose(r.flow_finish, [4.0, 2.0, 2.0, 2.0], rtol=1e-12)
    assert r.events == 2  # the three short flows finish together: one event


@pytest.mark.parametrize("fast, slow", [(1e10, 1e-3), (1e12, 0.1), (1e20, 1.0), (1e9, 1e-6)])
def test_a_slow_link_behind_a_fast_one_tallies_every_byte(fast, slow):
    # capacity - spare cannot resolve a load 1e-13 to 1e-20 of the capacity: the fast link's tally comes from
    # the rates then (kernels.engine.LOAD_RESOLUTION), and the post-run check passes
    links = [Link("a", "x", "y", fast), Link("b", "y", "z", slow)]
    r = netsim.simulate(Scenario(links, [Flow("f", "x", "z", 1e6)]))
    assert float(r.makespan) == pytest.approx(1e6 / slow, rel=1e-12)
    np.testing.assert_allclose(r.link_bytes, [1e6, 1e6], rtol=1e-12)


def test_latency_and_zero_bytes():
    # route latency 1 + 2 us, per-hop 0.5 us x 2, overhead 3 us: first byte after 7 us; then 1e3 B at 1e9 B/s.
    links = [Link("a", "x", "y", 1e9, 1e-6), Link("b", "y", "z", 2e9, 2e-6)]
    flows = [Flow("f", "x", "z", 1e3, overhead=3e-6), Flow("zero", "x", "z", 0.0, after=("f",))]
    r = netsim.simulate(Scenario(links, flows, per_hop_latency=0.5e-6))
    assert r.flow("f").first_byte == pytest.approx(7e-6, rel=1e-12)
    assert r.flow("f").finish == pytest.approx(8e-6, rel=1e-12)
    # a zero-byte flow still pays its latency: finishes at 8 + 4 us (3 us of route, 1 us per-hop)
    assert r.flow("zero").finish == pytest.approx(12e-6, rel=1e-12)


def test_tasks_share_a_device_and_chain():
    # t1 and t2 overlap on gpu0 and share it (0.5 each): both need 2 s for 1 s of work. t3 waits on both.
    s = Scenario(
        [Link("l", "a", "b", 1.0)],
        [],
        [Task("t1", "gpu0", 1.0), Task("t2", "gpu0", 1.0), Task("t3", "gpu1", 0.5, after=("t1", "t2"))],
    )
    r = netsim.simulate(s)
    np.testing.assert_allclose(r.task_finish, [2.0, 2.0, 2.5], rtol=1e-12)
    np.testing.assert_allclose(r.device_busy, [2.0, 0.5], rtol=1e-12)


def test_release_after_predecessors():
    # g waits on f (done at 1 s) but is released only at 3 s: it starts at 3 s, not at 1 s.
    s = Scenario(
        [Link("l", "a", "b", 1.0)],
        [Flow("f", "a", "b", 1.0), Flow("g", "a", "b", 1.0, start=3.0, after=("f",))],
    )
    r = netsim.simulate(s)
    assert r.flow("g").start == 3.0
    assert r.flow("g").finish == 4.0


def test_event_bound_is_an_error():
    s = Scenario([Link("l", "a", "b", 1.0)], [Flow(f"f{i}", "a", "b", float(i + 1)) for i in range(4)])
    with pytest.raises(netsim.SimulationError, match="max_events=2"):
        netsim.simulate(s, max_events=2)


def test_summary_and_outputs(tmp_path):
    r = netsim.simulate(random_scenario(3))
    text = r.summary()
    assert "makespan" in text and "busiest links" in text
    r.save(tmp_path / "out.json")
    r.save(tmp_path / "out.h5")
    import json

    import h5py

    data = json.loads((tmp_path / "out.json").read_text())
    assert data["makespan"] == pytest.approx(r.makespan)
    with h5py.File(tmp_path / "out.h5") as f:
        np.testing.assert_allclose(f["flows/finish"][()], r.flow_finish)
        assert f.attrs["events"] == r.events


@settings(max_examples=15, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 2**31 - 1),
    n_nodes=st.integers(3, 12),
    n_flows=st.integers(1, 40),
    n_tasks=st.integers(0, 16),
)
def test_property_random_fabrics_and_workloads(seed, n_nodes, n_flows, n_tasks):
    # One padded shape for every draw: one compile, however many examples hypothesis tries.
    scenario = random_scenario(seed, n_nodes=n_nodes, n_flows=n_flows, n_tasks=n_tasks)
    result = netsim.simulate(netsim.compile_scenario(scenario, shape=PAD))
    got = times(result)
    for key, want in reference_simulate(scenario).items():
        np.testing.assert_allclose(got[key], want, rtol=1e-9, atol=1e-15, err_msg=key)
    assert result.makespan == pytest.approx(max(w[2] for w in reference_simulate(scenario).values()))


def test_utilization_over_time():
    # f1 and f2 share a (10 B/s): 5 each until f1 (5 B) ends at 1 s; f2 then runs alone at 10 for 0.5 s.
    s = Scenario([Link("a", "x", "y", 10.0)], [Flow("f1", "x", "y", 5.0), Flow("f2", "x", "y", 10.0)])
    r = netsim.simulate(s, record=True)
    edges, util = r.link_timeline()
    np.testing.assert_allclose(edges, [0.0, 1.0, 1.5])
    np.testing.assert_allclose(util[:, 0], [1.0, 1.0])
    # the timeline integrates to the bytes carried
    np.testing.assert_allclose(
        np.sum(np.diff(edges)[:, None] * util * r.link_bandwidth, axis=0), r.link_bytes
    )
    with pytest.raises(ValueError, match="record=True"):
        netsim.simulate(s).link_timeline()


@pytest.mark.parametrize("seed", range(3))
def test_scatter_and_matrix_paths_agree(seed):
    # Small scenarios sum over resources with an incidence matrix, large ones with scatters: both
    # must give the reference's times (and each other's, to rounding).
    compiled = netsim.compile_scenario(random_scenario(200 + seed), shape=PAD)
    want = reference_simulate(compiled.scenario)
    finish = {}
    for dense in (False, True):
        with jax.enable_x64(True):
            state = _run_paths(
                compiled.network, compiled.program, max_events=compiled.max_events, dense=dense
            )
        assert int(state.status) == kernels.OK
        finish[dense] = np.asarray(state.finish)
        for i, item in enumerate((*compiled.scenario.flows, *compiled.scenario.tasks)):
            np.testing.assert_allclose(
                finish[dense][i], want[item.id][2], rtol=1e-9, atol=1e-15, err_msg=item.id
            )
    np.testing.assert_allclose(finish[False], finish[True], rtol=1e-12, atol=1e-15)


# --- packetized links: load-dependent latency (docs/queueing.md) --------------------------------------
C = 100e9  # B/s on the wire
WIRE = dict(packet_bytes=64.0, header_bytes=16.0)  # payload C x 64 / 80 = 80 GB/s; a packet takes 0.8 ns


def _probe_beside(background: float, *, buffer=None, variability=None, probe_start=1e-5):
    """A 1 kB probe crossing packetized link b beside a 1 MB background flow held to `background` B/s by
    link a (fluid) before b."""
    links = [
        Link("a", "x", "y", background, 1e-6),
        Link("b", "y", "z", C, 2e-6, **WIRE, buffer_bytes=buffer, variability=variability),
    ]
    flows = [Flow("bg", "x", "z", 1e6, route=("a", "b")), Flow("probe", "y", "z", 1e3, start=probe_start)]
    return netsim.simulate(Scenario(links, flows))


@pytest.mark.parametrize("variability", [None, 1.0])
def test_probe_waits_the_mg1_time_at_the_background_utilization(variability):
    r = _probe_beside(30e9, variability=variability)
    rho, service = 30e9 / 80e9, 80 / C  # utilization of the payload capacity; s per packet on the wire
    wait = rho * service / (2 * (1 - rho)) * (1 + (variability or 0.0))  # M/D/1 (M/M/1: twice)
    assert wait == pytest.approx(2.4e-10 * (1 + (variability or 0.0)), rel=1e-12)
    probe = r.flow("probe")
    np.testing.assert_allclose(probe.first_byte, 1e-5 + 2e-6 + wait, rtol=1e-15)
    np.testing.assert_allclose(probe.finish, probe.first_byte + 1e3 / 50e9, rtol=1e-14)  # 80 - 30 GB/s left
    # the background flow reached an idle b: no wait, and link a holds it to 30 GB/s throughout
    np.testing.assert_allclose(r.flow("bg").first_byte, 3e-6, rtol=1e-15)
    np.testing.assert_allclose(r.flow("bg").finish, 3e-6 + 1e6 / 30e9, rtol=1e-14)


def test_idle_packetized_link_has_the_zero_load_latency():
    s = Scenario([Link("b", "y", "z", C, 2e-6, **WIRE, buffer_bytes=4096.0)], [Flow("p", "y", "z", 1e3)])
    p = netsim.simulate(s).flow("p")
    assert p.first_byte == 2e-6  # nothing queued ahead of it
    np.testing.assert_allclose(p.finish, 2e-6 + 1e3 / 80e9, rtol=1e-15)  # the payload share of 100 GB/s


def test_saturated_link_waits_its_buffer_drain_time():
    links = [Link("b", "y", "z", C, 2e-6, **WIRE, buffer_bytes=4096.0)]
    flows = [Flow("bg", "y", "z", 1e6), Flow("probe", "y", "z", 1e3, start=1e-6)]
    r = netsim.simulate(Scenario(links, flows))
    np.testing.assert_allclose(r.flow("probe").first_byte, 1e-6 + 2e-6 + 4096 / C, rtol=1e-15)
    # an unbounded queue at utilization 1 never drains: refused with the cause, not a silent infinity
    links = [Link("b", "y", "z", C, 2e-6, **WIRE)]
    with pytest.raises(netsim.SimulationError, match=r"'probe' waits forever.*buffer_bytes"):
        netsim.simulate(Scenario(links, flows))


def test_queueing_derivatives_match_finite_differences():
    # d(probe first byte, probe finish) / d(every parameter of b and a) in forward mode, the default loop
    compiled = netsim.compile_scenario(_probe_beside(30e9, buffer=4096.0, variability=0.5).compiled.scenario)
    net, prog = compiled.network, compiled.program
    probe = 1

    def f(x):
        p = net.packets
        network = kernels.Network(
            jnp.asarray(net.capacity).at[:2].set(x[0:2]),
            jnp.asarray(net.latency).at[1].set(x[2]),
            kernels.Packets(
                jnp.asarray(p.size).at[1].set(x[3]),
                jnp.asarray(p.header).at[1].set(x[4]),
                jnp.asarray(p.buffer),
                jnp.asarray(p.variability).at[1].set(x[5]),
            ),
        )
        s = kernels.run(network, prog, max_events=compiled.max_events)
        return jnp.stack([s.first_byte[probe], s.finish[probe]])

    x0 = np.array([30e9, C, 2e-6, 64.0, 16.0, 0.5])
    with jax.enable_x64(True):
        jac = np.asarray(jax.jit(jax.jacfwd(f))(x0))
        f = jax.jit(f)  # one compile for the 12 evaluations
        fd = np.zeros_like(jac)
        for k in range(x0.size):
            h = 1e-6 * x0[k]
            up, dn = x0.copy(), x0.copy()
            up[k] += h
            dn[k] -= h
            fd[:, k] = (np.asarray(f(up)) - np.asarray(f(dn))) / (2 * h)
    np.testing.assert_allclose(jac, fd, rtol=1e-5, atol=1e-25)
    # the wait depends on every queueing parameter: the check is not vacuous
    assert np.all(jac[0] != 0)


@pytest.mark.parametrize("name", ["pp_1f1b.json", "topo_mesh_transpose.json"])
def test_no_packetized_link_is_the_plain_engine_bit_for_bit(name):
    # compiled without packets (a static None: the engine of old) and with an all-fluid Packets (the
    # queueing program, every wait 0): the same bits
    compiled = netsim.compile_scenario(Scenario.load(f"examples/{name}"))
    assert compiled.network.packets is None
    r = compiled.shape.resources
    fluid = kernels.Packets(np.zeros(r), np.zeros(r), np.full(r, np.inf), np.zeros(r))
    with jax.enable_x64(True):
        plain = kernels.run(compiled.network, compiled.program, max_events=compiled.max_events)
        network = kernels.Network(compiled.network.capacity, compiled.network.latency, fluid)
        queued = kernels.run(network, compiled.program, max_events=compiled.max_events)
    for field in ("start", "first_byte", "finish", "resource_bytes", "resource_busy", "held", "time"):
        assert np.array_equal(getattr(plain, field), getattr(queued, field)), field


@settings(max_examples=12, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31 - 1), n_nodes=st.integers(3, 10), n_flows=st.integers(1, 32))
def test_property_packetized_fabrics_match_reference(seed, n_nodes, n_flows):
    scenario = random_scenario(seed, n_nodes=n_nodes, n_flows=n_flows, n_tasks=4, packets=True)
    result = netsim.simulate(netsim.compile_scenario(scenario, shape=PAD))
    got = times(result)
    for key, want in reference_simulate(scenario).items():
        np.testing.assert_allclose(got[key], want, rtol=1e-9, atol=1e-15, err_msg=key)


def test_packetized_and_fluid_scenarios_batch_together():
    packetized = _probe_beside(30e9).compiled.scenario
    fluid = dataclasses.replace(packetized.links[1], packet_bytes=None, header_bytes=None)
    plain = dataclasses.replace(packetized, links=(packetized.links[0], fluid))
    run = netsim.compile_batch([packetized, plain]).run(keep=("finish",))
    assert run.outputs["finish"][0, 1] != run.outputs["finish"][1, 1]  # the probe waited in one only
    for i, scenario in enumerate((packetized, plain)):
        np.testing.assert_array_equal(run.outputs["finish"][i, :2], netsim.simulate(scenario).flow_finish)


def test_saturated_wait_derivatives_are_the_drain_times():
    # first byte = start + latency + buffer / C: d/d buffer = 1 / C, d/d C = -buffer / C^2 (closed forms)
    links = [Link("b", "y", "z", C, 2e-6, **WIRE, buffer_bytes=4096.0)]
    flows = [Flow("bg", "y", "z", 1e6), Flow("probe", "y", "z", 1e3, start=1e-6)]
    compiled = netsim.compile_scenario(Scenario(links, flows))
    net, prog = compiled.network, compiled.program

    def first_byte(x):
        p = net.packets
        packets = kernels.Packets(p.size, p.header, jnp.asarray(p.buffer).at[0].set(x[1]), p.variability)
        network = kernels.Network(jnp.asarray(net.capacity).at[0].set(x[0]), net.latency, packets)
        return kernels.run(network, prog, max_events=compiled.max_events).first_byte[1]

    with jax.enable_x64(True):
        d_capacity, d_buffer = np.asarray(jax.jit(jax.jacfwd(first_byte))(jnp.array([C, 4096.0])))
    np.testing.assert_allclose(d_buffer, 1 / C, rtol=1e-12)
    np.testing.assert_allclose(d_capacity, -4096 / C**2, rtol=1e-12)


def test_flat_programs_skip_the_frontier():
    # netsim._runner.engine_options: the frontier only for programs whose active set can be small before
    # the last events (a dependency, staggered releases) or whose tail is long (over FLAT_ITEMS items);
    # tests/kernels/test_frontier.py shows the two engines agree bit for bit
    from netsim._compile import Shape, compile_scenario
    from netsim._runner import FLAT_ITEMS, engine_options

    links = [Link("a", "x", "y", 10.0), Link("b", "y", "z", 4.0)]

    def frontier(flows, items=512, tolerance=0.0):
        compiled = compile_scenario(Scenario(links, flows), shape=Shape(items=items))
        return engine_options(compiled, 100, 0, tolerance).get("frontier")

    flat = [Flow("f1", "x", "y", 10.0, start=0.5), Flow("f2", "x", "z", 10.0, start=0.5)]
    assert frontier(flat) == 0
    assert frontier(flat, items=2 * FLAT_ITEMS) is None  # the kernel's default
    assert frontier(flat, items=2 * FLAT_ITEMS, tolerance=1e-2) == 0  # the fast mode's tail is short
    assert frontier([*flat, Flow("f3", "y", "z", 10.0, after=("f1",), start=0.5)]) is None
    assert frontier([*flat, Flow("f3", "y", "z", 10.0, start=0.25)]) is None


def test_routes_and_predecessors_longer_than_a_block_match_the_reference():
    # a 20-node line, flows crossing up to 19 links, and one flow across it after all 24 others: the engine's
    # folds over route hops (dense=False) and over predecessors loop over blocks of at most
    # kernels.maxmin.HOP_BLOCK columns; capacities and sizes distinct (no ties)
    from netsim.kernels.maxmin import HOP_BLOCK

    rng = np.random.default_rng(7)
    nodes = [f"n{i}" for i in range(20)]
    links = [
        Link(f"{a}>{b}", a, b, float(rng.uniform(5, 20)), 0.0)
        for u, v in itertools.pairwise(nodes)
        for a, b in ((u, v), (v, u))
    ]
    flows = []
    for i in range(24):
        a, b = sorted(rng.choice(20, 2, replace=False))
        if i % 2:
            a, b = b, a
        flows.append(
            Flow(f"f{i}", nodes[a], nodes[b], float(rng.uniform(1, 50)), start=float(rng.uniform(0, 2)))
        )
    flows.append(Flow("last", "n0", "n19", 5.0, after=tuple(f.id for f in flows)))
    scenario = netsim.Scenario(links, flows)
    compiled = netsim.compile_scenario(scenario)
    assert min(compiled.program.route.shape[1], compiled.program.after.shape[1]) > HOP_BLOCK
    state = jax.jit(
        lambda n, p: netsim.kernels.run(n, p, max_events=compiled.max_events, dense=False, frontier=0)
    )(compiled.network, compiled.program)
    want = reference_simulate(scenario)
    for i, f in enumerate(flows):
        np.testing.assert_allclose(float(state.finish[i]), want[f.id][2], rtol=1e-9, err_msg=f.id)
