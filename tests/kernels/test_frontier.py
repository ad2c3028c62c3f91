"""The engine's frontier (events that touch only the active items) against the full scan over every item:
the same state bit for bit, through overflows back to the scan, in the fast mode, under vmap and jvp."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from netsim.kernels import frontier
from scenarios import PAD, random_scenario

import netsim
from netsim import Flow, Link, Scenario, Task, kernels

_run = jax.jit(kernels.run, static_argnames=("max_events", "dense", "frontier", "tolerance"))


def _state(compiled, sizes, tolerance=0.0, network=None):
    with jax.enable_x64(True):
        return jax.device_get(
            _run(
                compiled.network if network is None else network,
                compiled.program,
                max_events=compiled.max_events,
                dense=False,
                frontier=sizes,
                tolerance=tolerance,
            )
        )


def _assert_same(a, b):
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(a)[0]]
    for path, x, y in zip(paths, jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        assert np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True), path


def chains(width: int = 3, length: int = 40) -> Scenario:
    """`width` chains alternating a flow and a task, on two links and two devices: a few items active."""
    rng = np.random.default_rng(width)
    links = [Link("a-b", "a", "b", 10e9, 1e-6), Link("b-c", "b", "c", 4e9, 2e-6)]
    flows, tasks = [], []
    for c in range(width):
        for i in range(length):
            prev = (f"c{c}t{i - 1}",) if i else ()
            flows.append(Flow(f"c{c}f{i}", "a", "c", float(rng.uniform(1e5, 1e6)), after=prev))
            tasks.append(
                Task(f"c{c}t{i}", f"gpu{c % 2}", float(rng.uniform(1e-5, 1e-4)), after=(f"c{c}f{i}",))
            )
    return Scenario(links, flows, tasks=tasks, name="chains")


@pytest.mark.parametrize("tolerance", [0.0, 1e-2])
def test_random_scenarios_bit_for_bit(tolerance):
    # A buffer of 8 of 64 items: events go back and forth between the scan (many flows released at once,
    # or many finishing together) and the frontier, through every fallback.
    for seed in range(4):
        compiled = netsim.compile_scenario(random_scenario(seed), shape=PAD)
        want = _state(compiled, 0, tolerance)
        assert int(want.status) == kernels.OK
        _assert_same(_state(compiled, (8, 2), tolerance), want)


def test_chains_run_on_the_frontier(monkeypatch):
    compiled = netsim.compile_scenario(chains())
    calls = []
    frontier_step = frontier._step

    def counted(*args, **kwargs):
        out = frontier_step(*args, **kwargs)
        jax.debug.callback(lambda: calls.append(1))
        return out

    monkeypatch.setattr(frontier, "_step", counted)
    run = jax.jit(kernels.run, static_argnames=("max_events", "dense", "frontier"))
    with jax.enable_x64(True):
        got = jax.device_get(
            run(
                compiled.network,
                compiled.program,
                max_events=compiled.max_events,
                dense=False,
                frontier=(16, 4),
            )
        )
    _assert_same(got, _state(compiled, 0))
    assert int(got.status) == kernels.OK
    assert len(calls) >= int(got.events) - 3, (len(calls), int(got.events))  # all but the first few events
    # and the result is the reference simulator's
    want = netsim.simulate(compiled)
    np.testing.assert_allclose(np.asarray(got.finish)[: want.flow_finish.size], want.flow_finish, rtol=1e-12)


def test_vmap_and_forward_derivatives():
    compiled = netsim.compile_scenario(chains(2, 20))
    scales = jnp.asarray([0.5, 1.0, 3.0])

    def makespan(scale, sizes):
        net = kernels.Network(
            jnp.asarray(compiled.network.capacity) * scale, jnp.asarray(compiled.network.latency)
        )
        s = kernels.run(net, compiled.program, max_events=compiled.max_events, dense=False, frontier=sizes)
        return jnp.max(s.finish)

    h = 1e-6
    points = jnp.concatenate([scales, jnp.asarray([1 + h, 1 - h])])
    with jax.enable_x64(True):
        scan, got = (np.asarray(jax.jit(jax.vmap(lambda x, k=k: makespan(x, k)))(points)) for k in (0, 8))
        _, slope = jax.jit(lambda x: jax.jvp(lambda y: makespan(y, 8), (x,), (jnp.ones_like(x),)))(
            jnp.float64(1.0)
        )
    np.testing.assert_array_equal(got, scan)
    np.testing.assert_allclose(float(slope), (got[-2] - got[-1]) / (2 * h), rtol=1e-5)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"frontier": -1}, "frontier must be 0, a size > 0 or decreasing sizes"),
        ({"frontier": (4, 8)}, "frontier must be 0, a size > 0 or decreasing sizes"),
        ({"frontier": 8, "loop": "checkpointed"}, "needs loop='lax'"),
        ({"frontier": 8, "dense": True}, "needs loop='lax'"),
    ],
)
def test_bad_frontier(kwargs, match):
    compiled = netsim.compile_scenario(chains(1, 4))
    with jax.enable_x64(True), pytest.raises(ValueError, match=match):
        kernels.run(compiled.network, compiled.program, max_events=compiled.max_events, **kwargs)


def test_successor_lists():
    after = jnp.asarray([[3, 3], [0, 3], [0, 1]], jnp.int32)  # 3 items; index 3 means "none"
    succ = frontier.dependency_graph(after, jnp.zeros(3), jnp.zeros(3))
    ptr, index = np.asarray(succ.ptr), np.asarray(succ.index)
    assert [sorted(index[ptr[i] : ptr[i + 1]].tolist()) for i in range(3)] == [[1, 2], [2], []]
