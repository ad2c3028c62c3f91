"""The steady-state latency kernel against closed forms, and its derivatives against finite differences."""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from netsim.kernels.latency import MAX_VCS, Router, accepted_rates, erlang_c, load_latency, vc_wait

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
        one[None, :],  # one VC class, all the VCs
        one,
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


@pytest.mark.parametrize(
    ("flits", "buffer", "tail_stall", "injection"),
    [
        (4.0, 8.0, 0.0, 4.0),  # fits a buffer
        (4.0, 2.0, 5.0, 8.0),  # one refill: a body flit's loop 7 - 2; at the source 6 - 2
        (8.0, 2.0, 15.0, 22.0),  # three: 3 x (7 - 2); (6 - 2) + 2 x (7 - 2)
        (4.0, 1.0, 18.0, 21.0),  # three: 3 x (7 - 1); (6 - 1) + 2 x (7 - 1)
        (20.0, 8.0, 0.0, 20.0),  # two, but every loop is shorter than a buffer
    ],
)
def test_credit_stalls_by_hand(flits, buffer, tail_stall, injection):
    # BookSim's router (pipeline 3, 1-cycle links, credit delay 2): credit loop 8, a body flit's 7 (no VC
    # allocation), the source's 6 (no credit delay); the injection channel then takes `injection` cycles a
    # packet, which bounds the rate below the ejection channel's 1 / flits
    out = _one_queue(np.array([0.1 / injection]), flits, _router(buffer=buffer))
    assert float(out.zero_load) == pytest.approx(6.0 + (flits - 1) + tail_stall, rel=1e-12)
    assert float(out.saturation) == pytest.approx(1 / injection, rel=1e-12)
    source = 0.1 * (injection - 1) / (2 * (1 - 0.1))  # Geo/D/1 with `injection` slots
    assert float(out.source_wait[0]) == pytest.approx(source, rel=1e-12)


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
        jnp.zeros((1, 1)),  # no VC classes: the M/G/1 part alone
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
    # a VC stays allocated to a packet for BookSim's credit loop into the next router: 1 + pipeline +
    # link + credit's link back + credit delay = 1 + 3 + 2*link + 2 cycles; into a terminal this router's
    # pipeline + 1-cycle channel and credit
    r = _router(blocking=0.05, vcs=4.0, link=link)
    turnaround = exits * (3 + 2) + (1 - exits) * (1 + 3 + 2 * link + 2)
    efficiency = 1 / (1 + 0.05 * 0.4 * turnaround / 4)
    out = _latency(
        jnp.asarray([0.01]),
        jnp.asarray([2.0]),
        jnp.asarray([4.0]),
        jnp.asarray([0.5]),
        jnp.asarray([0.4]),
        jnp.asarray([exits]),
        jnp.ones((1, 1)),  # the VC pool (4 VCs, held ~10-14 cycles a packet) fills well above saturation
        jnp.ones(1),
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
    classes = jnp.asarray([[0.3, 0.5, 0.0, 0.0], [0.7, 0.5, 1.0, 1.0]])

    def mean_latency(p):
        r = _router(
            base=p[0], blocking=p[1], overhead=p[2], wormhole=p[3], variability=p[4], buffer=2.0, vcs=4.0
        )
        out = _latency(
            jnp.asarray([0.005, 0.012]),
            load * p[5],
            4 * jnp.ones(4),
            share,
            diverge,
            exits,
            classes,
            jnp.asarray([2.0, 2.0, 2.0, 1.0]),  # two classes on half the VCs each between routers
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


def _erlang_c_by_its_sum(c, a):
    # textbook form: (a^c / c!) (c / (c - a)) over sum_{k<c} a^k / k! + the same term
    top = a**c / math.factorial(c) * c / (c - a)
    return top / (sum(a**k / math.factorial(k) for k in range(c)) + top)


@pytest.mark.parametrize("c", [1, 2, 3, 4, 8])
def test_erlang_c_against_its_sum(c):
    a = np.array([0.05, 0.4, 0.8, 0.97]) * c
    got = jax.jit(erlang_c)(jnp.full(a.shape, float(c)), jnp.asarray(a))
    np.testing.assert_allclose(got, [_erlang_c_by_its_sum(c, x) for x in a], rtol=1e-12)


_erlang_c = jax.jit(erlang_c, static_argnums=2)


@pytest.mark.parametrize("c", [1, 3, 8])
def test_erlang_c_runs_its_recursion_to_the_bound(c):
    # the recursion's length is static (Router.vc_bound): any bound from the servers up gives the same bits
    # as MAX_VCS, and one below them cuts it short
    servers, a = jnp.full(4, float(c)), jnp.asarray(np.array([0.05, 0.4, 0.8, 0.97]) * c)
    full = _erlang_c(servers, a, MAX_VCS)
    for bound in (c, c + 1, 16):
        np.testing.assert_array_equal(_erlang_c(servers, a, bound), full)
    assert np.all(_erlang_c(servers, a, c - 1) > full)  # stopped at c - 1 servers: more arrivals wait


def test_vc_bound_is_structure_not_a_leaf():
    # a static field: not among the leaves that vmap and grad see, kept through flatten and unflatten
    router = _router()
    leaves, tree = jax.tree.flatten(dataclasses.replace(router, vc_bound=8))
    assert len(leaves) == 11 and jax.tree.unflatten(tree, leaves).vc_bound == 8 and router.vc_bound == MAX_VCS


def test_vc_wait_by_hand():
    occupancy, rate, load = jnp.asarray([10.0]), jnp.asarray([0.01, 0.05]), jnp.asarray([1.0])
    share = jnp.ones((1, 1))
    # one VC: half the M/M/1 wait, which is the M/D/1 wait a * occupancy / (2 (1 - a)), a = rate x occupancy
    a = np.asarray(rate) * 10.0
    one = vc_wait(rate, load, share, occupancy, jnp.asarray([1.0]))
    np.testing.assert_allclose(one[:, 0, 0], a * 10.0 / (2 * (1 - a)), rtol=1e-12)
    # two VCs at a = 1.2 (rate 0.12): C = a^2 / (a^2 + (2 - a)(1 + a)) = 1.44 / 3.2 = 0.45,
    # wait = 0.5 x 0.45 x 10 / (2 - 1.2) = 2.8125 cycles
    two = vc_wait(jnp.asarray([0.12]), load, share, occupancy, jnp.asarray([2.0]))
    np.testing.assert_allclose(two[0, 0, 0], 2.8125, rtol=1e-12)
    assert np.isinf(vc_wait(jnp.asarray([0.2]), load, share, occupancy, jnp.asarray([2.0]))[0, 0, 0])


@pytest.mark.parametrize("vcs, split, servers", [(1.0, 1.0, 1), (8.0, 2.0, 4), (3.0, 2.0, 1)])
def test_same_port_packets_wait_for_a_vc_of_their_class(vcs, split, servers):
    # one channel fed by one port (contention 0: no M/G/1 wait): the wait is the Erlang-C one over
    # floor(vcs / split) VCs, each held for the packet's 4 flits plus the turnaround into a terminal
    # (pipeline 3 + channel and credit 2); the pool fills at rate servers / 9
    r = _router(vcs=vcs)
    one = jnp.ones(1)
    out = _latency(
        jnp.asarray([0.02, 0.05]),
        one,
        4 * one,
        0 * one,
        0 * one,
        one,
        one[None, :],
        split * one,
        jnp.asarray(1.0),
        jnp.asarray(0.0),
        jnp.asarray(4.0),
        r,
    )
    a = np.array([0.02, 0.05]) * 9.0
    want = [0.5 * _erlang_c_by_its_sum(servers, x) * 9.0 / (servers - x) for x in a]
    np.testing.assert_allclose(out.wait[:, 0], want, rtol=1e-12)
    np.testing.assert_allclose(out.saturation, min(servers / 9.0, 1 / 4.0), rtol=1e-12)


def test_vc_wait_derivatives_match_finite_differences():
    share = jnp.asarray([[0.25, 0.0], [0.75, 1.0]])
    servers = jnp.asarray([4.0, 2.0])

    def total(p):
        w = vc_wait(jnp.asarray([p[0], 0.5 * p[0]]), jnp.asarray([1.0, 2.0]) * p[1], share, p[2:4], servers)
        return jnp.sum(jnp.where(share[None] > 0, w, 0.0))

    p = jnp.asarray([0.03, 1.2, 10.0, 14.0])
    grad = jax.grad(total)(p)
    for i in range(p.size):
        h = 1e-6 * max(1.0, float(p[i]))
        fd = (total(p.at[i].add(h)) - total(p.at[i].add(-h))) / (2 * h)
        np.testing.assert_allclose(grad[i], fd, rtol=1e-6)
    assert np.all(np.asarray(grad) > 0)  # more traffic or longer holding: longer waits


def _tandem(rate, router, feeds):
    # channel 0 (one port, no M/G/1 wait, a VC pool) feeds channel 1 (an ejection channel with no VC
    # class: a plain queue) with all its packets; channel 1 takes as many again from another port
    # (contention 0.5), so packets wait there while they keep a VC of channel 0
    return _latency(
        jnp.asarray(rate),
        jnp.asarray([1.0, 2.0]),
        jnp.asarray([4.0, 4.0]),
        jnp.asarray([0.0, 0.5]),
        jnp.zeros(2),
        jnp.asarray([0.0, 1.0]),
        jnp.asarray([[1.0, 0.0]]),
        jnp.ones(2),
        jnp.asarray(2.0),
        jnp.asarray(1.0),
        jnp.asarray(4.0),
        router,
        feeds,
    )


def test_a_vc_is_held_while_its_packet_waits_downstream():
    from netsim.kernels.latency import Feeds

    feeds = Feeds(jnp.asarray([0]), jnp.asarray([1]), jnp.asarray([1.0]))
    r = _router(vcs=2.0)
    rates = np.array([0.02, 0.05, 0.08])
    alone, coupled = _tandem(rates, r, None), _tandem(rates, r, feeds)
    # channel 1 is an M/D/1 queue for the half of its packets from the other port: its wait does not
    # depend on the coupling; channel 0's VCs (2, fed by one port) are held 4 flits + 10 turnaround cycles
    # idle, plus channel 1's wait with the coupling; channel 0's packets come from the node's injection
    # channel (busy 4 x rate), spaced by it: the M/D/c wait x their arrivals' variability 1 - (4 rate)^2
    np.testing.assert_allclose(coupled.wait[:, 1], alone.wait[:, 1], rtol=1e-12)
    rho1 = rates * 2.0 * 4.0
    wait1 = 0.5 * rho1 * 4.0 / (2 * (1 - rho1))
    np.testing.assert_allclose(alone.wait[:, 1], wait1, rtol=1e-12)
    occupancy = 4.0 + (1 + 3 + 2 * 1 + 2) + wait1
    servers, a = 2, rates * occupancy
    want = [
        0.5 * _erlang_c_by_its_sum(servers, x) * o / (servers - x) * (1 - (4 * r) ** 2)
        for x, o, r in zip(a, occupancy, rates, strict=True)
    ]
    np.testing.assert_allclose(coupled.wait[:, 0], want, rtol=1e-9)
    # the pool of channel 0 fills where rate x (12 + wait1(rate)) = 2, below the closed-form bounds (its
    # pool 2 / 12 without the coupling, channel 1 at 1 / 8)
    s = float(coupled.saturation)
    rho = s * 8.0
    assert s * (12.0 + 0.5 * rho * 4.0 / (2 * (1 - rho))) == pytest.approx(2.0, rel=1e-9)
    assert s < float(alone.saturation) == pytest.approx(1 / 8, rel=1e-12)
    assert np.isinf(_tandem(np.array([s * 1.001]), r, feeds).latency[0])


def test_own_port_wait_by_hand():
    from netsim.kernels.latency import WAIT_CAP, own_port_wait

    wait = jnp.asarray([[[3.0, 3.0, 3.0, jnp.inf]]])
    held_longer = jnp.asarray([[1.0, 1.0, 5.0, 2.0]])
    contention = jnp.asarray([0.0, 0.5, 0.5, 1.0])
    got = np.asarray(own_port_wait(wait, held_longer, contention))[0, 0]
    # fed by its own port only: at most the VCs' time held past idle; other ports' share: the whole queue;
    # a full pool's infinite wait stays finite where it lengthens an occupancy
    np.testing.assert_allclose(got, [1.0, 1.0 + 0.5 * 2.0, 3.0, WAIT_CAP], rtol=1e-12)


def test_a_chain_fed_one_by_one_saturates_where_its_last_pool_does():
    # channels 0 -> 1 -> 2, each fed only by the one before (no contention on 0 and 1, VC pools of 2); 2 is
    # the ejection channel of the tandem above (an M/D/1 queue for the half of its packets from another
    # port). Channel 1's VCs are held 12 cycles idle plus the wait at 2; channel 0's VCs the same at most:
    # its packets wait on channel 1's VCs no longer than those are held past idle, so 0's pool fills no
    # sooner than 1's, and the chain saturates where rate x (12 + wait at 2) = 2, as the tandem does (with
    # the whole Erlang-C wait in 0's occupancy it saturated at 0.90 of that)
    from netsim.kernels.latency import Feeds

    feeds = Feeds(jnp.asarray([0, 1]), jnp.asarray([1, 2]), jnp.asarray([1.0, 1.0]))
    r = _router(vcs=2.0)
    chain = _latency(
        jnp.asarray([0.02, 0.05]),
        jnp.asarray([1.0, 1.0, 2.0]),
        jnp.asarray([4.0, 4.0, 4.0]),
        jnp.asarray([0.0, 0.0, 0.5]),
        jnp.zeros(3),
        jnp.asarray([0.0, 0.0, 1.0]),
        jnp.asarray([[1.0, 1.0, 0.0]]),
        jnp.ones(3),
        jnp.asarray(2.0),
        jnp.asarray(2.0),
        jnp.asarray(4.0),
        r,
        feeds,
    )
    s = float(chain.saturation)
    rho = s * 8.0
    assert s * (12.0 + 0.5 * rho * 4.0 / (2 * (1 - rho))) == pytest.approx(2.0, rel=1e-9)
    pair = Feeds(jnp.asarray([0]), jnp.asarray([1]), jnp.asarray([1.0]))
    assert s == pytest.approx(float(_tandem(np.array([0.02]), r, pair).saturation), rel=1e-9)


def test_arrivals_from_a_busy_channel_are_spaced():
    # channel 1 takes 1/4 of its packets from channel 0 (busy rho0), the rest from its node's injection
    # channel (busy rate x 4 flits): their mean busyness b gives the arrivals' variability 1 - b^2 (Whitt:
    # departures of a queue with fixed service times fed at random)
    from netsim.kernels.latency import Feeds, arrival_variability

    rate = jnp.asarray([0.01, 0.1])
    load, service = jnp.asarray([1.0, 4.0]), jnp.asarray([4.0, 4.0])
    rho = jnp.asarray([[0.3, 0.5], [0.9, 1.7]])  # the second row past saturation: busy at most 1
    feeds = Feeds(jnp.asarray([0]), jnp.asarray([1]), jnp.asarray([1.0]))
    got = np.asarray(arrival_variability(rate, load, service, rho, feeds))
    injected = np.minimum(np.asarray(rate) * 4.0, 1.0)
    np.testing.assert_allclose(got[:, 0], 1 - injected**2, rtol=1e-12)  # channel 0: injected only
    busy = (1.0 * np.array([0.3, 0.9]) + 3.0 * injected) / 4.0
    np.testing.assert_allclose(got[:, 1], 1 - busy**2, rtol=1e-12)


def test_coupled_saturation_derivatives_match_finite_differences():
    from netsim.kernels.latency import Feeds

    feeds = Feeds(jnp.asarray([0]), jnp.asarray([1]), jnp.asarray([1.0]))

    def saturation(p):
        r = _router(vcs=2.0, variability=p[0], pipeline=p[1])
        return _tandem(jnp.asarray([0.01]), r, feeds).saturation

    p = jnp.asarray([0.3, 3.0])
    grad = jax.grad(saturation)(p)
    for i in range(p.size):
        h = 1e-6
        fd = (saturation(p.at[i].add(h)) - saturation(p.at[i].add(-h))) / (2 * h)
        np.testing.assert_allclose(grad[i], fd, rtol=1e-5)
    assert np.all(np.asarray(grad) < 0)  # more variable or longer holding: the pool fills sooner


_accepted = jax.jit(accepted_rates)


def test_accepted_past_saturation_by_hand():
    # sources 0 and 1 share channel A (one packet per unit rate each); source 2 alone crosses B. A fills at
    # 0.5: past it 0 and 1 are held there while 2 grows with what it offers, up to B (full at 1)
    sources = jnp.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    rate = jnp.array([0.3, 0.8, 1.5])
    got = _accepted(rate, sources, jnp.ones(2), jnp.asarray(0.5), jnp.asarray(1.0))
    np.testing.assert_allclose(got, [0.3, (0.5 + 0.5 + 0.8) / 3, (0.5 + 0.5 + 1.0) / 3], rtol=1e-12)
    # a saturation below A's own limit (a VC pool filling first) scales every channel: A holds 0 and 1 at
    # 0.4, B then fills at 1 / 1.25 = 0.8; 4-flit packets cap every source at 1/4 on its injection channel
    got = _accepted(rate, sources, jnp.ones(2), jnp.asarray(0.4), jnp.asarray(1.0))
    np.testing.assert_allclose(got, [0.3, (0.4 + 0.4 + 0.8) / 3, (0.4 + 0.4 + 0.8) / 3], rtol=1e-12)
    got = _accepted(rate, sources, jnp.ones(2), jnp.asarray(0.2), jnp.asarray(4.0))
    np.testing.assert_allclose(got, [0.2 + 0.05 / 3] * 3, rtol=1e-12)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_accepted_rates_are_max_min_fair(seed):
    # random sources over random channels (one padded shape: one compile): every channel within its
    # capacity, and every source either at what it offers or held by a full channel on which no other
    # source gets more (max-min fairness's bottleneck condition)
    rng = np.random.default_rng(seed)
    sources = rng.random((6, 5)) * (rng.random((6, 5)) < 0.5)
    sources[5] = 0.0  # padding
    sources[0, rng.integers(5)] += 0.1  # at least one real source
    per_packet = 0.5 + rng.random(5)
    usage = sources * per_packet
    limit = 1 / usage.sum(axis=0).max()
    saturation = limit * rng.uniform(0.5, 1.0)
    offered = saturation * rng.uniform(1.0, 4.0)
    injection = rng.choice([1.0, 4.0])  # cycles a packet on a source's injection channel
    got = float(_accepted(jnp.array([offered]), sources, per_packet, saturation, injection)[0])
    # the same progressive filling in NumPy; then the conditions any max-min fair allocation meets
    scaled = usage / (saturation * usage.sum(axis=0).max())
    real = sources.sum(axis=1) > 0
    cap = np.where(real, min(offered, 1 / injection), 0.0)
    x, frozen = np.zeros(6), ~real
    while not frozen.all():
        grow = scaled[~frozen].sum(axis=0)
        room = 1 - x @ scaled
        step = min(np.min(room[grow > 0] / grow[grow > 0], initial=np.inf), np.min((cap - x)[~frozen]))
        x[~frozen] += step
        full = (x @ scaled >= 1 - 1e-12) & (grow > 0)
        frozen |= ((scaled > 0) & full).any(axis=1) | (x >= cap * (1 - 1e-12))
    assert got == pytest.approx(x[real].mean(), rel=1e-9)
    assert np.all(x @ scaled <= 1 + 1e-9)
    full = x @ scaled >= 1 - 1e-9
    for s in np.flatnonzero(real):
        held = [
            c for c in np.flatnonzero(full & (scaled[s] > 0)) if x[s] >= x[scaled[:, c] > 0].max() - 1e-12
        ]
        assert x[s] >= cap[s] * (1 - 1e-9) or held, (s, x, cap)
