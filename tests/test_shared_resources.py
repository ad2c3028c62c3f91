"""Shared resources (capacities no single link has): hand-solved cases, the NumPy reference, conservation,
JSON round trips and validation."""

from __future__ import annotations

import json

import numpy as np
import pytest
from reference import reference_simulate
from scenarios import PAD, random_scenario

import netsim
from netsim import Flow, Link, Scenario, ScenarioError, SharedResource

GB = 1e9
LINKS = (Link("a->b", "a", "b", 10 * GB), Link("b->a", "b", "a", 10 * GB), Link("b->c", "b", "c", 10 * GB))
DUPLEX = SharedResource("a<->b", 15 * GB, ("a->b", "b->a"))


def test_duplex_budget_hand_solved():
    # Alone, each direction runs at its link's 10 GB/s; together the cable's 15 GB/s budget binds and
    # max-min splits it evenly: 7.5 GB/s each, so 15 GB takes 2 s (1.5 s without the budget).
    flows = (Flow("ab", "a", "b", 15 * GB), Flow("ba", "b", "a", 15 * GB))
    result = netsim.simulate(Scenario(LINKS, flows, shared=(DUPLEX,)))
    np.testing.assert_allclose(result.flow_finish, [2.0, 2.0], rtol=1e-12)
    np.testing.assert_allclose(result.shared_bytes, [30 * GB], rtol=1e-12)
    np.testing.assert_allclose(result.shared_utilization, [1.0], rtol=1e-12)
    assert set(result.bottlenecks("ab")) == {"a<->b"}  # the budget, not the link, held it back
    np.testing.assert_allclose(sum(result.bottlenecks("ab").values()), 2.0, rtol=1e-12)
    alone = netsim.simulate(Scenario(LINKS, flows[:1], shared=(DUPLEX,)))
    np.testing.assert_allclose(alone.flow_finish, [1.5], rtol=1e-12)  # 10 GB/s: the link binds first


def test_via_restricts_who_crosses():
    # Only flows crossing a->b AND b->c meet the 4 GB/s engine: the a->c flow runs at 4 GB/s and the a->b
    # flow takes the rest of a->b (6 GB/s): 12 GB finish at 3 s and 2 s.
    engine = SharedResource("engine", 4 * GB, ("a->b",), via=("b->c",))
    flows = (Flow("ac", "a", "c", 12 * GB, route=("a->b", "b->c")), Flow("ab", "a", "b", 12 * GB))
    result = netsim.simulate(Scenario(LINKS, flows, shared=(engine,)))
    np.testing.assert_allclose(result.flow_finish, [3.0, 2.0], rtol=1e-12)
    assert result.compiled.hops == (("a->b", "b->c", "engine"), ("a->b",))


@pytest.mark.parametrize("seed", [300, 303, 308])  # seeds where the shared resources do bind
def test_matches_reference_with_shared_resources(seed):
    scenario = random_scenario(seed, shared=True)
    result = netsim.simulate(netsim.compile_scenario(scenario, shape=PAD))
    assert sum(result.bottlenecks(f).get(r.id, 0.0) for f in result.flow_ids for r in scenario.shared) > 0
    want = reference_simulate(scenario)
    for i, fid in enumerate(result.flow_ids):
        np.testing.assert_allclose(result.flow_finish[i], want[fid][2], rtol=1e-9, atol=1e-15, err_msg=fid)
    # conservation: each shared resource carried exactly the bytes of the flows that cross it
    for k, r in enumerate(scenario.shared):
        crossing = sum(
            f.bytes
            for f, route in zip(scenario.flows, result.compiled.routes, strict=True)
            if r.applies(route)
        )
        np.testing.assert_allclose(result.shared_bytes[k], crossing, rtol=1e-9, atol=1e-3)
        assert result.shared_utilization[k] <= 1 + 1e-9


def test_json_round_trip(tmp_path):
    scenario = Scenario(LINKS, (Flow("ab", "a", "b", 1e6),), shared=(DUPLEX,), name="dup")
    path = tmp_path / "s.json"
    scenario.save(path)
    data = json.loads(path.read_text())
    assert data["shared"] == [{"id": "a<->b", "capacity": 15 * GB, "links": ["a->b", "b->a"], "via": []}]
    assert Scenario.load(path) == scenario
    data["shared"][0]["capacity"] = "15 GB/s"  # units, as for links
    assert Scenario.from_dict(data).shared[0].capacity == 15 * GB


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("a<->b", 0.0, ("a->b",)), r"SharedResource \(id 'a<->b'\)\.capacity: must be > 0, got 0.0"),
        (("a<->b", float("nan"), ("a->b",)), r"capacity: must be a finite number"),
        (("a<->b", "fast", ("a->b",)), r"capacity"),
    ],
)
def test_bad_shared_resource_values_fail_at_construction(args, match):
    with pytest.raises(ScenarioError, match=match):
        SharedResource(*args)


@pytest.mark.parametrize(
    ("shared", "match"),
    [
        (SharedResource("x", 1.0, ("a->z",)), r"shared\[0\] \(id 'x'\)\.links\[0\]: unknown link id 'a->z'"),
        (SharedResource("x", 1.0, ("a->b",), via=("q",)), r"\.via\[0\]: unknown link id 'q'"),
        (SharedResource("x", 1.0, ()), r"\.links: must name at least one link"),
        (SharedResource("b->c", 1.0, ("a->b",)), r"duplicate resource id"),
    ],
)
def test_bad_shared_resources(shared, match):
    with pytest.raises(ScenarioError, match=match):
        netsim.compile_scenario(Scenario(LINKS, (Flow("ab", "a", "b", 1.0),), shared=(shared,)))
