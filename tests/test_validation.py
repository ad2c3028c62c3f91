"""Bad input gets a clear error naming the field and value, before anything is traced."""

from __future__ import annotations

import json
import math

import pytest

import netsim
from netsim import Flow, Link, Scenario, ScenarioError, Task

LINKS = [Link("ab", "a", "b", 1e9), Link("bc", "b", "c", 1e9), Link("ba", "b", "a", 1e9)]


def check(match: str, links=LINKS, flows=(), tasks=(), **kw):
    with pytest.raises(ScenarioError, match=match):
        netsim.compile_scenario(Scenario(links, flows, tasks, **kw))


def test_empty():
    check("empty", flows=())


@pytest.mark.parametrize("bw", [0.0, -1.0, math.nan, math.inf])
def test_bad_bandwidth(bw):
    check(r"links\[1\] \(id 'bc'\)\.bandwidth", links=[LINKS[0], Link("bc", "b", "c", bw)],
          flows=[Flow("f", "a", "b", 1.0)])


def test_bad_numbers():
    check(r"links\[0\] \(id 'ab'\)\.latency: must be >= 0, got -1", links=[Link("ab", "a", "b", 1.0, -1.0)],
          flows=[Flow("f", "a", "b", 1.0)])
    check(r"flows\[0\] \(id 'f'\)\.bytes: must be >= 0", flows=[Flow("f", "a", "b", -5.0)])
    check(r"flows\[0\] \(id 'f'\)\.bytes: must be a finite number, got nan", flows=[Flow("f", "a", "b", math.nan)])
    check(r"tasks\[0\] \(id 't'\)\.duration", tasks=[Task("t", "gpu", -1.0)])
    check("per_hop_latency", flows=[Flow("f", "a", "b", 1.0)], per_hop_latency=-1.0)


def test_unknown_and_duplicate_ids():
    check(r"flows\[0\] \(id 'f'\)\.dst: unknown node 'z'", flows=[Flow("f", "a", "z", 1.0)])
    check(r"flows\[0\] \(id 'f'\)\.route\[1\]: unknown link 'nope'",
          flows=[Flow("f", "a", "c", 1.0, route=("ab", "nope"))])
    check("duplicate link id", links=[*LINKS, Link("ab", "c", "a", 1.0)], flows=[Flow("f", "a", "b", 1.0)])
    check(r"tasks\[0\]\.id: duplicate id 'x'", flows=[Flow("x", "a", "b", 1.0)], tasks=[Task("x", "g", 1.0)])
    check(r"after\[0\]: unknown flow or task id 'ghost'", flows=[Flow("f", "a", "b", 1.0, after=("ghost",))])


def test_routes():
    check("not at dst 'c'", flows=[Flow("f", "a", "c", 1.0, route=("ab",))])
    check("starts at 'a', but the route is at 'b'", flows=[Flow("f", "a", "c", 1.0, route=("ab", "ab"))])
    check("'a' is unreachable from 'c'", flows=[Flow("f", "c", "a", 1.0)])
    check("same node", flows=[Flow("f", "a", "a", 1.0)])


def test_cycle_is_named():
    flows = [Flow("f1", "a", "b", 1.0, after=("t2",)), Flow("f2", "a", "b", 1.0, after=("f1",))]
    tasks = [Task("t1", "g", 1.0), Task("t2", "g", 1.0, after=("f2",))]
    check("cyclic dependencies: 'f1' waits on 't2' waits on 'f2' waits on 'f1'", flows=flows, tasks=tasks)


def test_json_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ScenarioError, match="not valid JSON"):
        Scenario.load(bad)
    with pytest.raises(ScenarioError, match=r"links\[0\].bandwidth: unknown bandwidth unit 'GHz'"):
        Scenario.from_dict({"links": [{"id": "l", "src": "a", "dst": "b", "bandwidth": "5 GHz"}]})
    with pytest.raises(ScenarioError, match=r"flows\[0\]: missing field\(s\) \['bytes'\]"):
        Scenario.from_dict({"links": [], "flows": [{"id": "f", "src": "a", "dst": "b"}]})
    with pytest.raises(ScenarioError, match=r"flows\[0\]: unknown field\(s\) \['size'\]"):
        Scenario.from_dict({"links": [], "flows": [{"id": "f", "src": "a", "dst": "b", "bytes": 1, "size": 2}]})


def test_units_and_round_trip(tmp_path):
    s = Scenario.from_dict({"links": [{"id": "l", "src": "a", "dst": "b", "bandwidth": "100 Gbps",
                                       "latency": "2 us"}],
                            "flows": [{"id": "f", "src": "a", "dst": "b", "bytes": "1 MiB", "start": "1ms"}]})
    assert s.links[0].bandwidth == 12.5e9 and s.links[0].latency == 2e-6
    assert s.flows[0].bytes == 2**20 and s.flows[0].start == 1e-3
    s.save(tmp_path / "s.json")
    assert Scenario.load(tmp_path / "s.json").flows == s.flows
    assert json.loads((tmp_path / "s.json").read_text())["links"][0]["bandwidth"] == 12.5e9


def test_errors_come_before_tracing(monkeypatch):
    # A bad scenario must fail on the host: the jitted engine is never reached.
    import netsim._simulate as sim

    monkeypatch.setattr(sim, "_run", lambda *a: pytest.fail("traced a bad scenario"))
    with pytest.raises(ScenarioError):
        netsim.simulate(Scenario(LINKS, [Flow("f", "a", "q", 1.0)]))
