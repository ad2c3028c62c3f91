"""vmap over scenarios equals one-by-one runs; gradients match finite differences at tie-free points."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scenarios import PAD, random_scenario

import netsim
from netsim import Flow, Link, Scenario


def test_vmap_equals_one_by_one():
    compiled = [netsim.compile_scenario(random_scenario(seed), shape=PAD) for seed in range(6)]
    bound = max(c.max_events for c in compiled)
    nets = netsim.stack([c.network for c in compiled])
    progs = netsim.stack([c.program for c in compiled])
    batched = jax.jit(jax.vmap(lambda n, p: netsim.kernels.run(n, p, max_events=bound)))(nets, progs)
    assert np.all(np.asarray(batched.status) == 0)
    for b, c in enumerate(compiled):
        one = netsim.simulate(c)
        items = c.n_flows + c.n_tasks
        np.testing.assert_allclose(
            np.asarray(batched.finish[b, :items]),
            np.concatenate([one.flow_finish, one.task_finish]),
            rtol=1e-12,
        )


def _fabric():
    # Tie-free: distinct capacities and sizes, so every event time is a smooth function of the inputs.
    links = [Link("a", "x", "y", 10.0, 0.1), Link("b", "y", "z", 4.3, 0.2), Link("c", "z", "w", 7.1, 0.05)]
    flows = [
        Flow("f1", "x", "y", 10.0),
        Flow("f2", "x", "z", 11.0),
        Flow("f3", "y", "w", 9.0, start=0.5),
        Flow("f4", "z", "w", 5.0, after=("f1",)),
    ]
    return netsim.compile_scenario(Scenario(links, flows))


def _makespan(compiled, loop):
    def f(capacity, latency, size):
        net = netsim.kernels.Network(capacity, latency)
        prog = eqx.tree_at(lambda p: p.size, compiled.program, size)
        s = netsim.kernels.run(net, prog, max_events=compiled.max_events, loop=loop)
        return jnp.max(s.finish)

    return f


@pytest.mark.parametrize("loop", ["lax", "checkpointed"])
def test_gradients_match_finite_differences(loop):
    c = _fabric()
    args = [jnp.asarray(c.network.capacity), jnp.asarray(c.network.latency), jnp.asarray(c.program.size)]
    f = jax.jit(_makespan(c, loop))
    if loop == "lax":  # forward mode through lax.while_loop
        grads = [
            jax.jvp(
                lambda x, i=i: f(*[x if j == i else a for j, a in enumerate(args)]),
                (args[i],),
                (jnp.eye(len(args[i]))[k],),
            )[1]
            for i in range(3)
            for k in range(4)
        ]
        grads = np.array(grads).reshape(3, 4)
    else:  # reverse mode through the checkpointed loop
        grads = [np.asarray(g)[:4] for g in jax.grad(f, argnums=(0, 1, 2))(*args)]
    eps = 1e-6
    for i in range(3):
        for k in range(3 if i < 2 else 4):  # 3 links (the rest is padding), 4 flows
            up = [a.at[k].add(eps) if j == i else a for j, a in enumerate(args)]
            dn = [a.at[k].add(-eps) if j == i else a for j, a in enumerate(args)]
            fd = (f(*up) - f(*dn)) / (2 * eps)
            np.testing.assert_allclose(grads[i][k], fd, rtol=1e-6, atol=1e-9, err_msg=f"arg {i} index {k}")
    assert np.any(np.abs(grads[0][:3]) > 1e-3)  # capacity matters here: the check is not vacuous
