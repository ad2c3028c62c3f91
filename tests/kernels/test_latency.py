"""The steady-state latency kernel against closed forms, and its derivatives against finite differences."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from netsim.kernels.latency import Router, load_latency

_latency = jax.jit(load_latency)  # one compile per shape, not eager op by op


def _router(**kw):
    values = dict(
        pipeline=3.0,
        link=1.0,
        base=6.0,
        blocking=0.0,
        vcs=8.0,
        overhead=0.0,
        buffer=8.0,
        credit=2.0,
        wormhole=0.0,
        variability=0.0,
        limit=np.inf,
    )
    values.update(kw)
    return Router(**{k: jnp.asarray(v, dtype=jnp.float64) for k, v in values.items()})


def _one_queue(rate, flits, router):
    # one node sending to itself through one channel (its ejection channel): hops 0, load 1, every pair of
    # packets from different ports (contention 1) -> a plain M/G/1 queue behind the Geo/D/1 source queue
    one = jnp.ones(1)
    return _latency(
        jnp.asarray(rate),
        one,
        flits * one,
        one,
        0.0 * one,
        one,  # an ejection channel: all its packets leave the network at its end
        jnp.asarray(1.0),
        jnp.asarray(0.0),
        jnp.asarray(flits),
        router,
    )


@pytest.mark.parametrize("flits", [1.0, 4.0, 20.0])
@pytest.mark.parametrize("variability", [0.0, 1.0])
def test_single_queue_against_its_formula(flits, variability):
    r = _router(variability=variability, overhead=0.5)
    rates = np.array([0.01, 0.05, 0.1, 0.2]) / flits
    out = _one_queue(rates, flits, r)
    hold = flits + 0.5
    rho = rates * hold
    channel = rho * hold * (1 + variability) / (2 * (1 - rho))  # Pollaczek-Khinchine
    source = rates * flits * (flits - 1) / (2 * (1 - rates * flits))  # Geo/D/1: Bernoulli arrivals, S slots
    np.testing.assert_allclose(out.latency, 6.0 + (flits - 1) + source + channel, rtol=1e-12)
    np.testing.assert_allclose(out.saturation, 1 / hold, rtol=1e-12)
    assert np.isinf(_one_queue(np.array([1.0 / hold]), flits, r).latency[0])


def test_wait_is_bounded_by_the_buffer_and_cross_port_share():
    r = _router(limit=5.0)
    out = _one_queue(np.array([0.99 / 4]), 4.0, r)
    assert out.wait[0, 0] == 5.0
    half = _latency(
        jnp.asarray([0.1]),
        jnp.ones(1),
        4 * jnp.ones(1),
        0.5 * jnp.ones(1),
        jnp.zeros(1),
        jnp.ones(1),
        jnp.asarray(1.0),
        jnp.asarray(0.0),
        jnp.asarray(4.0),
        _router(),
    )
    full = _one_queue(np.array([0.1]), 4.0, _router())
    np.testing.assert_allclose(half.wait, full.wait / 2, rtol=1e-12)  # half the pairs never meet


@pytest.mark.parametrize("exits, link", [(0.0, 1.0), (0.0, 2.0), (1.0, 2.0), (0.25, 1.0)])
def test_head_of_line_loss_by_hand(exits, link):
    # a VC stays allocated to a packet: into the next router 2 pipelines + link and credit back + credit
    # delay = 2*3 + 2*link + 2 cycles; into a terminal this router's pipeline + 1-cycle channel and credit
    r = _router(blocking=0.05, vcs=4.0, link=link)
    turnaround = exits * (3 + 2) + (1 - exits) * (2 * 3 + 2 * link + 2)
    efficiency = 1 / (1 + 0.05 * 0.4 * turnaround / 4)
    out = _latency(
        jnp.asarray([0.01]),
        jnp.asarray([2.0]),
        jnp.asarray([4.0]),
        jnp.asarray([0.5]),
        jnp.asarray([0.4]),
        jnp.asarray([exits]),
        jnp.asarray(4.0),
        jnp.asarray(1.0),
        jnp.asarray(4.0),
        r,
    )
    np.testing.assert_allclose(out.saturation, efficiency / (2.0 * 4.0), rtol=1e-12)
    np.testing.assert_allclose(out.utilization[0, 0], 0.01 * 2.0 * 4.0 / efficiency, rtol=1e-12)


def test_derivatives_match_finite_differences():
    load = jnp.asarray([0.5, 2.0, 1.0, 1.5])
    share = jnp.asarray([0.2, 0.5, 0.6, 0.4])
    diverge = jnp.asarray([0.1, 0.3, 0.2, 0.0])
    exits = jnp.asarray([0.0, 0.0, 0.5, 1.0])

    def mean_latency(p):
        r = _router(base=p[0], blocking=p[1], overhead=p[2], wormhole=p[3], variability=p[4], buffer=2.0)
        out = _latency(
            jnp.asarray([0.005, 0.012]),
            load * p[5],
            4 * jnp.ones(4),
            share,
            diverge,
            exits,
            jnp.asarray(4.0),
            jnp.asarray(2.0),
            jnp.asarray(4.0),
            r,
        )
        return jnp.sum(out.latency) + 100 * out.saturation

    p = jnp.asarray([6.0, 2.0, 0.2, 0.3, 0.4, 1.0])
    grad = jax.grad(mean_latency)(p)
    for i in range(p.size):
        h = 1e-6
        fd = (mean_latency(p.at[i].add(h)) - mean_latency(p.at[i].add(-h))) / (2 * h)
        np.testing.assert_allclose(grad[i], fd, rtol=1e-5, atol=1e-8)
    assert np.all(np.asarray(grad) != 0)  # every parameter moves the answer
