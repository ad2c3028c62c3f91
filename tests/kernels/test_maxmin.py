"""Max-min allocation: NumPy oracle, max-min certificate, round counts, hand cases."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from netsim.kernels import maxmin_rates
from netsim.kernels.maxmin import components, incidence, rate_floor, reusable
from reference import progressive_filling

_rates = jax.jit(maxmin_rates, static_argnames=("slack",))


def rates(cap, route, active, *, dense: bool, **prior):
    """The allocation by scatters (dense=False) or by incidence-matrix products (dense=True)."""
    return _rates(cap, route, active, dense=incidence(route, len(cap)) if dense else None, **prior)


def random_system(seed: int, n_flows: int = 40, n_links: int = 16, hops: int = 4):
    rng = np.random.default_rng(seed)
    cap = rng.choice([1.0, 2.0, 3.5, 10.0], n_links) * rng.uniform(0.5, 2.0, n_links) ** (seed % 2)
    route = np.full((n_flows, hops), n_links, np.int32)
    for f in range(n_flows):
        k = rng.integers(1, hops + 1)
        route[f, :k] = rng.choice(n_links, k, replace=False)
    active = rng.random(n_flows) < 0.8
    return cap, route, active


def certificate(cap, route, active, rate, slack=0.0):
    """Feasible, and every active flow has a saturated link where its rate is the largest (with slack s: a
    link loaded to capacity / (1 + s) where no rate exceeds the flow's by more than a factor 1 + s)."""
    n_links = len(cap)
    load = np.zeros(n_links)
    for f in np.flatnonzero(active):
        for link in route[f][route[f] < n_links]:
            load[link] += rate[f]
    assert np.all(load <= cap * (1 + 1e-12))
    for f in np.flatnonzero(active):
        links = route[f][route[f] < n_links]
        ok = False
        for link in links:
            users = [g for g in np.flatnonzero(active) if link in route[g]]
            full = load[link] >= cap[link] / (1 + slack) * (1 - 1e-12)
            if full and rate[f] * (1 + slack) >= max(rate[users]) * (1 - 1e-12):
                ok = True
        assert ok, f"flow {f} has no bottleneck link"


@pytest.mark.parametrize("dense", [False, True])
@pytest.mark.parametrize("seed", range(10))
def test_oracle_and_certificate(seed, dense):
    cap, route, active = random_system(seed)
    alloc = rates(jnp.asarray(cap), jnp.asarray(route), jnp.asarray(active), dense=dense)
    rate = np.asarray(alloc.rate)
    routes = [list(r[r < len(cap)]) for r in route]
    np.testing.assert_allclose(rate, progressive_filling(cap, routes, list(active)), rtol=1e-12)
    certificate(cap, route, active, rate)
    assert np.all(rate[~active] == 0)
    # the reported bottleneck hop holds the flow at its rate
    bott = np.asarray(alloc.bottleneck)
    for f in np.flatnonzero(active):
        assert route[f, bott[f]] < len(cap)
    # parallel freezing: never more rounds than distinct rate levels (classic filling needs one per link)
    assert int(alloc.rounds) <= len(np.unique(rate[active]))


def test_hand_case_three_levels():
    # l0 cap 1 shared by f0, f1 -> 0.5 each. l1 cap 3 shared by f1, f2: f2 gets 3 - 0.5 = 2.5.
    # l2 cap 10 used by f2 and f3: f3 gets 10 - 2.5 = 7.5.
    cap = jnp.array([1.0, 3.0, 10.0])
    route = jnp.array([[0, 3], [0, 1], [2, 1], [2, 3]], jnp.int32)  # f2 meets l1 on its 2nd hop
    alloc = _rates(cap, route, jnp.ones(4, bool))
    np.testing.assert_allclose(alloc.rate, [0.5, 0.5, 2.5, 7.5], rtol=1e-15)
    np.testing.assert_array_equal(alloc.bottleneck, [0, 0, 1, 0])  # hop index on each route
    np.testing.assert_allclose(alloc.load, [1.0, 3.0, 10.0])


def test_fewer_rounds_than_links_at_scale():
    # 2048 links, 4096 flows of 4 random hops: classic filling needs one round per bottleneck link.
    rng = np.random.default_rng(0)
    n_links, n_flows = 2048, 4096
    cap = rng.uniform(1, 100, n_links)
    route = np.stack([rng.choice(n_links, 4, replace=False) for _ in range(n_flows)]).astype(np.int32)
    alloc = _rates(jnp.asarray(cap), jnp.asarray(route), jnp.ones(n_flows, bool))
    levels = len(np.unique(np.asarray(alloc.rate)))
    assert int(alloc.rounds) * 10 < levels  # measured: see benchmarks/RESULTS.md


@pytest.mark.parametrize("dense", [False, True])
@pytest.mark.parametrize("seed", range(8))
def test_update_from_prior_equals_fresh_filling(seed, dense):
    # An event changes the active set: some items leave, some join. Filling from the prior allocation
    # (kept rates + refill of the rest) must give exactly the fresh allocation of the new set.
    cap, route, before = random_system(seed, n_flows=64)
    rng = np.random.default_rng(seed + 100)
    after = before ^ (rng.random(len(before)) < [0.05, 0.2, 0.5, 1.0][seed % 4])
    cap, route = jnp.asarray(cap), jnp.asarray(route)
    prior = _rates(cap, route, jnp.asarray(before))
    floor = rate_floor(cap, route, jnp.ones(len(route), bool))
    update = rates(cap, route, jnp.asarray(after), dense=dense, prior=prior, floor=floor)
    fresh = _rates(cap, route, jnp.asarray(after))
    np.testing.assert_allclose(update.rate, fresh.rate, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(update.load, fresh.load, rtol=1e-12, atol=1e-12)
    certificate(np.asarray(cap), np.asarray(route), after, np.asarray(update.rate))


def disjoint_systems(seed: int, copies: int = 3):
    """`copies` random systems side by side on disjoint links: one component (at least) each."""
    parts = [random_system(seed + k, n_flows=24, n_links=8) for k in range(copies)]
    n_links = sum(len(cap) for cap, _, _ in parts)
    routes, offset = [], 0
    for cap, route, _ in parts:
        routes.append(np.where(route < len(cap), route + offset, n_links))
        offset += len(cap)
    cap = np.concatenate([cap for cap, _, _ in parts])
    return cap, np.concatenate(routes), np.concatenate([active for _, _, active in parts])


def union_find(route: np.ndarray, n_res: int) -> np.ndarray:
    """Each item's component by union-find (the root item it joins), for `components`."""
    parent = list(range(len(route)))

    def root(i):
        while parent[i] != i:
            i = parent[i]
        return i

    owner = {}
    for i, hops in enumerate(route):
        for r in hops[hops < n_res]:
            if r in owner:
                parent[root(i)] = root(owner[r])
            else:
                owner[r] = i
    return np.array([root(i) for i in range(len(route))])


_components = jax.jit(components, static_argnums=1)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31 - 1), links=st.integers(1, 40), used=st.floats(0.0, 1.0))
def test_components_are_the_connected_components(seed, links, used):
    # 64 items x 4 hops over 40 resources (one compile), a random share of the hops and resources used:
    # anything from every item on its own to one component; numbered 0, 1, ... by first item.
    rng = np.random.default_rng(seed)
    route = np.where(rng.random((64, 4)) < used, rng.integers(0, links, (64, 4)), 40).astype(np.int32)
    got = np.asarray(_components(jnp.asarray(route), 40))
    want = union_find(route, 40)
    assert np.array_equal(got[:, None] == got[None, :], want[:, None] == want[None, :])
    firsts = np.unique(want, return_index=True)[1]
    assert np.array_equal(got[np.sort(firsts)], np.arange(len(firsts)))


def test_components_on_a_long_chain():
    # items i and i + 1 share resource i, in shuffled order: one component however long the chain
    n = 2000
    route = np.full((n, 2), n, np.int32)
    for k, item in enumerate(np.random.default_rng(0).permutation(n)):
        route[item] = [k, k + 1] if k + 1 < n else [k, n]
    assert np.all(np.asarray(components(jnp.asarray(route), n)) == 0)


@pytest.mark.parametrize("seed", range(4))
def test_prior_kept_in_components_the_event_leaves_alone(seed):
    # Items leave and join in the first of three disjoint systems only: the others keep every rate bit for
    # bit, fewer rounds refill, and the allocation is still the fresh one.
    cap, route, before = disjoint_systems(seed)
    after = before.copy()
    first = np.arange(len(route)) < len(route) // 3
    after[first] ^= np.random.default_rng(seed).random(first.sum()) < 0.3
    cap, route = jnp.asarray(cap), jnp.asarray(route)
    prior = _rates(cap, route, jnp.asarray(before))
    floor = rate_floor(cap, route, jnp.ones(len(route), bool))
    group = _components(route, len(cap))
    assert len(np.unique(group)) >= 3
    update = _rates(cap, route, jnp.asarray(after), prior=prior, floor=floor, component=group)
    whole = _rates(cap, route, jnp.asarray(after), prior=prior, floor=floor)
    fresh = _rates(cap, route, jnp.asarray(after))
    np.testing.assert_allclose(update.rate, fresh.rate, rtol=1e-12, atol=1e-15)
    certificate(np.asarray(cap), np.asarray(route), after, np.asarray(update.rate))
    assert np.array_equal(np.asarray(update.rate)[~first], np.asarray(prior.rate)[~first])
    assert int(update.rounds) <= int(whole.rounds)
    # what the components change: one threshold for all refills some items of the other systems too
    stay = ~first & before & after
    assert np.all(np.asarray(reusable(prior, jnp.asarray(after), floor, group))[stay])
    assert not np.all(np.asarray(reusable(prior, jnp.asarray(after), floor))[stay])


def test_the_buffer_ladder_changes_no_bit(monkeypatch):
    """Rounds on packed buffers (the ladder above ONE_BUFFER items) add in item order as the whole buffer
    does: the same allocation bit for bit, from scratch and from a prior."""
    from netsim.kernels import maxmin

    cap, route, before = random_system(0, n_flows=200, n_links=48)
    after = before ^ (np.random.default_rng(0).random(len(before)) < 0.1)
    cap, route = jnp.asarray(cap), jnp.asarray(route)
    floor = rate_floor(cap, route, jnp.ones(len(route), bool))
    got = []
    for one_buffer, smallest in [(10**9, maxmin.SMALLEST), (0, 16)]:
        monkeypatch.setattr(maxmin, "ONE_BUFFER", one_buffer)
        monkeypatch.setattr(maxmin, "SMALLEST", smallest)
        fill = jax.jit(
            lambda a, prior=None: maxmin_rates(cap, route, a, prior=prior, floor=floor)
        )  # traced anew
        prior = fill(jnp.asarray(before))
        got.append((prior, fill(jnp.asarray(after), prior)))
    assert maxmin.buffer_sizes(len(route)) == [200, 100, 50, 25]
    for one, ladder in zip(*got, strict=True):
        for field in ("rate", "bottleneck", "load", "rounds"):
            assert np.array_equal(getattr(one, field), getattr(ladder, field)), field


def test_the_fast_modes_finer_ladder_changes_no_bit(monkeypatch):
    """With slack the first buffers step by 3/4 (`maxmin.FINE_TOP`): the same relaxed allocation bit for bit
    as with halves alone, from scratch and from a prior."""
    from netsim.kernels import maxmin

    cap, route, before = random_system(1, n_flows=200, n_links=48)
    after = before ^ (np.random.default_rng(1).random(len(before)) < 0.5)
    cap, route = jnp.asarray(cap), jnp.asarray(route)
    floor = rate_floor(cap, route, jnp.ones(len(route), bool))
    monkeypatch.setattr(maxmin, "ONE_BUFFER", 0)
    monkeypatch.setattr(maxmin, "SMALLEST", 16)
    got = []
    for fine in (0, 2):
        monkeypatch.setattr(maxmin, "FINE_TOP", fine)
        fill = jax.jit(
            lambda a, prior=None: maxmin_rates(cap, route, a, prior=prior, floor=floor, slack=0.05)
        )
        prior = fill(jnp.asarray(before))
        got.append((prior, fill(jnp.asarray(after), prior)))
    assert maxmin.buffer_sizes(len(route), full_refills=True) == [200, 150, 100, 75, 50, 25]
    for halves, fine in zip(*got, strict=True):
        for field in ("rate", "bottleneck", "load", "rounds"):
            assert np.array_equal(getattr(halves, field), getattr(fine, field)), field


@pytest.mark.parametrize("seed", range(6))
def test_rate_floor_bounds_every_rate(seed):
    # The floor a joining item gets (capacity / active users, at its tightest link) never exceeds its
    # max-min rate: otherwise events would keep rates that the joiner changes.
    cap, route, active = random_system(seed, n_flows=64)
    rate = np.asarray(_rates(jnp.asarray(cap), jnp.asarray(route), jnp.asarray(active)).rate)
    floor = np.asarray(rate_floor(jnp.asarray(cap), jnp.asarray(route), jnp.asarray(active)))
    assert np.all(rate[active] >= floor[active] * (1 - 1e-12))
    assert np.any(np.isclose(rate[active], floor[active], rtol=1e-12))  # and it is reached somewhere


@pytest.mark.parametrize("slack", [0.01, 0.1])
@pytest.mark.parametrize("dense", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_slack_feasible_and_approximately_fair(seed, dense, slack):
    # The fast mode's relaxed rounds: no link over capacity, every flow with an s-bottleneck, from scratch
    # and from a prior allocation; fewer rounds over the seeds; slack 0 is the exact allocation, bit for bit.
    cap, route, active = random_system(seed, n_flows=64)
    cap, route = jnp.asarray(cap), jnp.asarray(route)
    exact = rates(cap, route, jnp.asarray(active), dense=dense)
    alloc = rates(cap, route, jnp.asarray(active), dense=dense, slack=slack)
    certificate(np.asarray(cap), np.asarray(route), active, np.asarray(alloc.rate), slack)
    assert int(alloc.rounds) <= int(exact.rounds)
    zero = rates(cap, route, jnp.asarray(active), dense=dense, slack=0.0)
    np.testing.assert_array_equal(zero.rate, exact.rate)
    after = active ^ (np.random.default_rng(seed).random(len(active)) < 0.2)
    floor = rate_floor(cap, route, jnp.ones(len(route), bool))
    update = rates(cap, route, jnp.asarray(after), dense=dense, prior=alloc, floor=floor, slack=slack)
    load = np.zeros(len(cap) + 1)
    np.add.at(load, np.asarray(route)[after], np.asarray(update.rate)[after, None])
    assert np.all(load[:-1] <= np.asarray(cap) * (1 + 1e-12))
    np.testing.assert_allclose(update.load, load[:-1], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dense", [False, True])
def test_slack_does_not_bound_each_rate(dense):
    # The documented limit of the slack: n flows alone on their own links at share / (1 + s') (s' < s)
    # also cross a link shared with one more flow. Exact: the n freeze on their links and the last takes
    # what they leave, C - n sigma; relaxed: the shared link is within 1 + s of its neighbours and freezes
    # at once, the last flow at C / (n + 1): short by a factor 1 + n s' / (1 + s').
    n, s_, c = 10, 0.009, 11.0
    sigma = c / (n + 1) / (1 + s_)
    cap = jnp.asarray([c] + [sigma] * n)
    route = jnp.asarray([[0, 1 + i] for i in range(n)] + [[0, n + 1]], jnp.int32)
    exact = rates(cap, route, jnp.ones(n + 1, bool), dense=dense)
    relaxed = rates(cap, route, jnp.ones(n + 1, bool), dense=dense, slack=0.01)
    np.testing.assert_allclose(exact.rate, [sigma] * n + [c - n * sigma], rtol=1e-14)
    np.testing.assert_allclose(relaxed.rate, [sigma] * n + [c / (n + 1)], rtol=1e-14)
    np.testing.assert_allclose(exact.rate[-1] / relaxed.rate[-1], 1 + n * s_ / (1 + s_), rtol=1e-14)
    assert int(relaxed.rounds) == 1 and int(exact.rounds) == 2


def test_bad_slack():
    with pytest.raises(ValueError, match=r"slack must be a number in \[0, 1\)"):
        maxmin_rates(jnp.ones(2), jnp.zeros((1, 1), jnp.int32), jnp.ones(1, bool), slack=-0.1)


@pytest.mark.parametrize("hops", [3, 8, 13, 32])
def test_sums_over_long_routes_in_blocks_match_one_scatter_per_hop(hops, monkeypatch):
    # routes longer than HOP_BLOCK are summed by a loop over blocks of hop columns: the same additions in
    # the same order as one scatter per column (bit for bit), and the NumPy sum
    from netsim.kernels import maxmin

    rng = np.random.default_rng(hops)
    n_res = 50
    route = rng.integers(0, n_res + 1, (300, hops)).astype(np.int32)  # n_res: padding hops
    values = jax.lax.complex(rng.uniform(-1, 1, 300), rng.uniform(0, 5, 300))
    total = lambda: jax.jit(lambda v, r: maxmin.to_resources(v, r, n_res))(values, route)  # traced afresh
    blocked = total()
    monkeypatch.setattr(maxmin, "HOP_BLOCK", hops)  # every column in the code, as for short routes
    per_column = total()
    assert np.array_equal(np.asarray(blocked), np.asarray(per_column))
    expect = np.zeros(n_res + 1, complex)
    np.add.at(expect, route.ravel(), np.repeat(np.asarray(values), hops))
    np.testing.assert_allclose(np.asarray(blocked), expect[:n_res], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("hops", [0, 3, 8, 13, 32])
def test_minima_over_routes_column_by_column_match_numpy(hops):
    # the rounds' tightest share and rate_floor fold over hop columns (blocks past HOP_BLOCK) instead of
    # reducing an items x hops gather: the same minima, inf for an item with no hops
    from netsim.kernels import maxmin

    rng = np.random.default_rng(hops)
    n_res = 50
    route = rng.integers(0, n_res + 1, (300, hops)).astype(np.int32)  # n_res: padding hops
    route[:3] = n_res  # items with no hops at all
    values = rng.uniform(0, 5, n_res)
    got = jax.jit(maxmin.hop_min)(values, route)
    expect = np.append(values, np.inf)[route].min(axis=1, initial=np.inf)
    assert np.array_equal(np.asarray(got), expect) and np.all(np.isinf(expect[:3]))


def test_the_code_for_a_route_sum_does_not_grow_with_the_hops():
    # each hop column scattered in the code is one more op XLA compiles, at every max-min round of every
    # buffer: long routes (a 16 x 16 mesh's 30 hops) loop over blocks of HOP_BLOCK columns instead
    from netsim.kernels import maxmin

    def scatters(hops: int) -> int:
        route = jnp.zeros((64, hops), jnp.int32)
        text = jax.jit(lambda v, r: maxmin.to_resources(v, r, 10)).lower(jnp.ones(64), route).as_text()
        return text.count("scatter")

    assert scatters(maxmin.HOP_BLOCK) == scatters(4 * maxmin.HOP_BLOCK) == scatters(61) > scatters(2)

    # the same for a whole max-min filling, whose rounds also gather over routes column by column
    def filling(hops: int) -> tuple[int, int]:
        route = jnp.zeros((64, hops), jnp.int32)
        fill = jax.jit(lambda c, r, a: maxmin.maxmin_rates(c, r, a))
        text = fill.lower(jnp.ones(10), route, jnp.ones(64, bool)).as_text()
        return text.count("scatter"), text.count("gather")

    assert filling(maxmin.HOP_BLOCK) == filling(4 * maxmin.HOP_BLOCK) == filling(61)
