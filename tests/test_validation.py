"""Bad input gets a clear error naming the field and value, before anything is traced."""

from __future__ import annotations

import json
import math

import hypothesis
import numpy as np
import pytest

import netsim
from netsim import Flow, Link, Scenario, ScenarioError, Task

LINKS = [Link("ab", "a", "b", 1e9), Link("bc", "b", "c", 1e9), Link("ba", "b", "a", 1e9)]


def check(match: str, links=LINKS, flows=(), tasks=(), **kw):
    with pytest.raises(ScenarioError, match=match):
        netsim.compile_scenario(Scenario(links, flows, tasks, **kw))


def test_empty():
    check("empty", flows=())


@pytest.mark.parametrize("bw", [0.0, -1.0, math.nan, math.inf, "abc", None, True, 1e300])
def test_bad_bandwidth_is_refused_when_the_link_is_built(bw):
    with pytest.raises(ScenarioError, match=r"Link \(id 'bc'\)\.bandwidth: ") as e:
        Link("bc", "b", "c", bw)
    assert str(bw) in str(e.value)  # the message shows the value
    with pytest.raises(ScenarioError, match=r"links\[1\] \(id 'bc'\)\.bandwidth: "):
        Scenario.from_dict(
            {
                "links": [
                    {"id": "ab", "src": "a", "dst": "b", "bandwidth": 1.0},
                    {"id": "bc", "src": "b", "dst": "c", "bandwidth": bw},
                ]
            }
        )


def test_bad_numbers():
    with pytest.raises(ScenarioError, match=r"Link \(id 'ab'\)\.latency: must be >= 0, got -1"):
        Link("ab", "a", "b", 1.0, -1.0)
    with pytest.raises(ScenarioError, match=r"Flow \(id 'f'\)\.bytes: must be >= 0"):
        Flow("f", "a", "b", -5.0)
    with pytest.raises(ScenarioError, match=r"Flow \(id 'f'\)\.bytes: must be a finite number, got nan"):
        Flow("f", "a", "b", math.nan)
    with pytest.raises(ScenarioError, match=r"Task \(id 't'\)\.duration"):
        Task("t", "gpu", -1.0)
    with pytest.raises(ScenarioError, match="per_hop_latency: must be >= 0"):
        Scenario(LINKS, [Flow("f", "a", "b", 1.0)], per_hop_latency=-1.0)


def test_units_are_converted_when_objects_are_built():
    assert Link("l", "a", "b", bandwidth="25 GB/s", latency="1 us") == Link("l", "a", "b", 25e9, 1e-6)
    assert Flow("f", "a", "b", bytes="4 MiB", start="2 us") == Flow("f", "a", "b", 4 * 2**20, start=2e-6)
    assert Task("t", "gpu", duration="1 ms").duration == 1e-3
    assert Scenario(LINKS, per_hop_latency="0.5 us").per_hop_latency == 0.5e-6
    from netsim.workloads import Offload, StageCosts

    costs = StageCosts(forward="1 ms", backward_input="2 ms", activation_bytes="1 MiB", gradient_bytes="1 GB")
    assert (costs.forward, costs.backward_input, costs.activation_bytes, costs.gradient_bytes) == (
        1e-3,
        2e-3,
        2**20,
        1e9,
    )
    assert Offload(memory="m", cpu="c", step_time="5 ms").step_time == 5e-3
    flow = Flow("f", "a", "b", 1, route=["ab"], after=["t"])  # lists are stored as tuples
    assert flow.route == ("ab",) and flow.after == ("t",) and isinstance(flow.bytes, float)
    with pytest.raises(ScenarioError, match=r"Flow \(id 'f'\)\.start: unknown time unit 'GB'"):
        Flow("f", "a", "b", 1.0, start="2 GB")
    with pytest.raises(ScenarioError, match=r"StageCosts\.forward: cannot read 'fast'"):
        StageCosts(forward="fast", backward_input=1.0, activation_bytes=1.0)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Flow("f", "a", "b", 1e300), r"bytes: must be < 1e\+18 B"),
        (lambda: Flow("f", "a", "b", 1.7e308), r"bytes: must be < 1e\+18 B"),
        (lambda: Flow("f", "a", "b", 10**400), "beyond float64's range"),
        (lambda: Flow("f", "a", "b", 1.0, start=1e300), r"start: must be < 1e\+15 s"),
        (lambda: Link("l", "a", "b", 1e9, latency=1e300), r"latency: must be < 1e\+15 s"),
        (lambda: Link("l", "a", "b", 10**400), "beyond float64's range"),
        (lambda: Link("l", "a", "b", 1e300), r"bandwidth: must lie in \[1e-06, 1e\+30\] B/s, got 1e\+300"),
        (lambda: Link("l", "a", "b", 1e-9), r"bandwidth: must lie in \[1e-06, 1e\+30\] B/s, got 1e-09"),
        (lambda: Link("l", "a", "b", "1e999 GB/s"), "bandwidth: must be a finite number, got '1e999 GB/s'"),
    ],
)
def test_documented_limits(make, message):
    with pytest.raises(ScenarioError, match=message):
        make()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Link("a\x00b", "a", "b", 1.0), r"Link\.id: must be printable .*'a\\x00b'"),
        (lambda: Link("l", "a\nb", "b", 1.0), r"Link \(id 'l'\)\.src: must be printable"),
        (lambda: Link("l", "", "b", 1.0), r"src: must be a non-empty string, got ''"),
        (
            lambda: Flow("f", "a", "b", 1.0, after=None),
            r"Flow \(id 'f'\)\.after: expected a list of id strings, got None",
        ),
        (lambda: Flow("f", "a", "b", 1.0, after="t"), r"after: expected a list of id strings, got 't'"),
        (lambda: Flow("f", "a", "b", 1.0, route=[1]), r"route\[0\]: must be a non-empty string, got 1"),
        (lambda: Task(7, "gpu", 1.0), r"Task\.id: must be a non-empty string, got 7"),
        (
            lambda: Flow("f", "a", "a", 1.0, route=("ab", "ba")),
            r"Flow \(id 'f'\)\.dst: same node as src \('a'\)",
        ),
        (lambda: Scenario(LINKS, name=3), "name: expected a string, got 3"),
        (lambda: Scenario(LINKS, description=["x"]), r"description: expected a string, got \['x'\]"),
        (lambda: Scenario(LINKS, name="\ud800"), "name: not valid Unicode text"),
        (lambda: Scenario([{"id": "l"}]), r"links\[0\]: expected a netsim.Link, got \{'id': 'l'\}"),
        (lambda: Scenario(LINKS, per_hop_latency=None), "per_hop_latency: expected a number or a string"),
    ],
)
def test_bad_objects_are_refused_when_built(make, message):
    with pytest.raises(ScenarioError, match=message):
        make()


def test_unknown_and_duplicate_ids():
    check(r"flows\[0\] \(id 'f'\)\.dst: unknown node 'z'", flows=[Flow("f", "a", "z", 1.0)])
    check(
        r"flows\[0\] \(id 'f'\)\.route\[1\]: unknown link 'nope'",
        flows=[Flow("f", "a", "c", 1.0, route=("ab", "nope"))],
    )
    check("duplicate link id", links=[*LINKS, Link("ab", "c", "a", 1.0)], flows=[Flow("f", "a", "b", 1.0)])
    check(r"tasks\[0\]\.id: duplicate id 'x'", flows=[Flow("x", "a", "b", 1.0)], tasks=[Task("x", "g", 1.0)])
    check(r"after\[0\]: unknown flow or task id 'ghost'", flows=[Flow("f", "a", "b", 1.0, after=("ghost",))])


def test_routes():
    check("not at dst 'c'", flows=[Flow("f", "a", "c", 1.0, route=("ab",))])
    check("starts at 'a', but the route is at 'b'", flows=[Flow("f", "a", "c", 1.0, route=("ab", "ab"))])
    check("'a' is unreachable from 'c'", flows=[Flow("f", "c", "a", 1.0)])
    # loops: a link crossed twice, a return to the src, dst reached early (each adds latency and load)
    links = [*LINKS, Link("cb", "c", "b", 1e9), Link("cd", "c", "d", 1e9)]
    check(
        r"flows\[0\] \(id 'f'\)\.route\[3\]: link 'bc' is crossed twice \(also at \[1\]\)",
        links=links,
        flows=[Flow("f", "a", "d", 1.0, route=("ab", "bc", "cb", "bc", "cd"))],
    )
    check(
        r"route\[1\]: link 'ba' returns to the src 'a'",
        flows=[Flow("f", "a", "c", 1.0, route=("ab", "ba", "ab", "bc"))],
    )
    check(
        r"route\[0\]: the route reaches dst 'b' before its end",
        links=links,
        flows=[Flow("f", "a", "b", 1.0, route=("ab", "bc", "cb"))],
    )
    # other nodes may repeat: staging through host memory goes cpu -> mem -> cpu
    staged = [
        Link("gc", "gpu0", "cpu", 1e9),
        Link("cm", "cpu", "mem", 1e9),
        Link("mc", "mem", "cpu", 1e9),
        Link("cg", "cpu", "gpu1", 1e9),
    ]
    netsim.compile_scenario(
        Scenario(staged, [Flow("f", "gpu0", "gpu1", 1.0, route=("gc", "cm", "mc", "cg"))])
    )


def test_cycle_is_named():
    flows = [Flow("f1", "a", "b", 1.0, after=("t2",)), Flow("f2", "a", "b", 1.0, after=("f1",))]
    tasks = [Task("t1", "g", 1.0), Task("t2", "g", 1.0, after=("f2",))]
    check("cyclic dependencies: 'f1' waits on 't2' waits on 'f2' waits on 'f1'", flows=flows, tasks=tasks)


def test_json_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ScenarioError, match="not valid JSON"):
        Scenario.load(bad)
    with pytest.raises(
        ScenarioError, match=r"links\[0\] \(id 'l'\)\.bandwidth: unknown bandwidth unit 'GHz'"
    ):
        Scenario.from_dict({"links": [{"id": "l", "src": "a", "dst": "b", "bandwidth": "5 GHz"}]})
    with pytest.raises(ScenarioError, match=r"flows\[0\]: missing field\(s\) \['bytes'\]"):
        Scenario.from_dict({"links": [], "flows": [{"id": "f", "src": "a", "dst": "b"}]})
    with pytest.raises(ScenarioError, match=r"flows\[0\]: unknown field\(s\) \['size'\]"):
        Scenario.from_dict(
            {"links": [], "flows": [{"id": "f", "src": "a", "dst": "b", "bytes": 1, "size": 2}]}
        )


def test_units_and_round_trip(tmp_path):
    s = Scenario.from_dict(
        {
            "links": [{"id": "l", "src": "a", "dst": "b", "bandwidth": "100 Gbps", "latency": "2 us"}],
            "flows": [{"id": "f", "src": "a", "dst": "b", "bytes": "1 MiB", "start": "1ms"}],
        }
    )
    assert s.links[0].bandwidth == 12.5e9 and s.links[0].latency == 2e-6
    assert s.flows[0].bytes == 2**20 and s.flows[0].start == 1e-3
    s.save(tmp_path / "s.json")
    assert Scenario.load(tmp_path / "s.json").flows == s.flows
    assert json.loads((tmp_path / "s.json").read_text())["links"][0]["bandwidth"] == 12.5e9


@pytest.mark.parametrize(
    "n, text",
    [
        (0, "0 B"),
        (8, "8 B"),
        (4096, "4 KiB"),
        (3 * 2**20, "3 MiB"),
        (2**31, "2 GiB"),
        (1e6, "1 MB"),
        (1.5 * 2**20, "1.573 MB"),
    ],
)
def test_format_bytes_reads_back(n, text):
    from netsim._units import format_bytes, parse_quantity

    assert format_bytes(n) == text  # binary only when whole, so the text reads back as the size
    assert parse_quantity(text, "bytes", "size") == pytest.approx(n, rel=5e-4)


def test_errors_come_before_tracing(monkeypatch):
    # A bad scenario must fail on the host: the jitted engine is never reached.
    import netsim._simulate as sim

    monkeypatch.setattr(sim, "run_compiled", lambda *a: pytest.fail("traced a bad scenario"))
    with pytest.raises(ScenarioError):
        netsim.simulate(Scenario(LINKS, [Flow("f", "a", "q", 1.0)]))


GOOD = {
    "links": [{"id": "l", "src": "a", "dst": "b", "bandwidth": "1 GB/s"}],
    "flows": [{"id": "f", "src": "a", "dst": "b", "bytes": "1 MiB"}],
}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"name": "caf\xe9", "links": []}', r"not UTF-8 text \(byte 13: invalid continuation byte\)"),
        (b"[" * 100_000 + b"]" * 100_000, "JSON nested too deeply"),
        (
            b'{"links": [], "flows": [{"id": "f", "src": "a", "dst": "b", "bytes": ' + b"1" * 5000 + b"}]}",
            "not valid JSON: Exceeds the limit",
        ),
        (
            json.dumps({**GOOD, "flows": [{**GOOD["flows"][0], "bytes": int("9" * 400)}]}).encode(),
            r"flows\[0\] \(id 'f'\)\.bytes: 9999.*9999 is beyond float64's range",
        ),
        (
            json.dumps({**GOOD, "links": [{**GOOD["links"][0], "bandwidth": int("9" * 400)}]}).encode(),
            "bandwidth: .* is beyond float64's range",
        ),
        (
            json.dumps({**GOOD, "flows": [{**GOOD["flows"][0], "after": None}]}).encode(),
            r"flows\[0\] \(id 'f'\)\.after: expected a list of id strings, got None",
        ),
        (json.dumps({**GOOD, "per_hop_latency": "abc"}).encode(), "per_hop_latency: cannot read 'abc'"),
        (
            json.dumps({**GOOD, "per_hop_latency": [1]}).encode(),
            r"per_hop_latency: expected a number .*got \[1\]",
        ),
        (
            json.dumps({**GOOD, "per_hop_latency": None}).encode(),
            "per_hop_latency: expected a number .*got None",
        ),
        (json.dumps({**GOOD, "name": 5}).encode(), "name: expected a string, got 5"),
        (
            json.dumps({**GOOD, "description": {"a": 1}}).encode(),
            r"description: expected a string, got \{'a': 1\}",
        ),
        (
            json.dumps({**GOOD, "links": [{**GOOD["links"][0], "id": "l\x00"}]}).encode(),
            r"links\[0\]\.id: must be printable",
        ),
        (
            json.dumps({**GOOD, "flows": [{**GOOD["flows"][0], "dst": "a", "route": ["l"]}]}).encode(),
            r"flows\[0\] \(id 'f'\)\.dst: same node as src \('a'\)",
        ),
        (
            json.dumps({**GOOD, "flows": [{**GOOD["flows"][0], "start": 1e300}]}).encode(),
            r"start: must be < 1e\+15 s",
        ),
        (
            json.dumps(
                {**GOOD, "links": [*GOOD["links"], {"id": "m", "src": "b", "dst": "a", "bandwidth": 1e300}]}
            ).encode(),
            r"links\[1\] \(id 'm'\)\.bandwidth: must lie in",
        ),
        (
            json.dumps({**GOOD, "flows": [{**GOOD["flows"][0], "bytes": 1.7e308}]}).encode(),
            "bytes: must be < 1e",
        ),
    ],
)
def test_bad_files_are_scenario_errors(tmp_path, raw, message):
    path = tmp_path / "s.json"
    path.write_bytes(raw)
    with pytest.raises(ScenarioError, match=message):
        Scenario.load(path)


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16", "utf-32"])
def test_utf16_and_bom_files_read_like_utf8(tmp_path, encoding):
    path = tmp_path / "s.json"
    path.write_bytes(json.dumps({**GOOD, "name": "µ-bench"}, ensure_ascii=False).encode(encoding))
    assert Scenario.load(path) == Scenario.from_dict({**GOOD, "name": "µ-bench"})


def test_write_atomic_names_and_cleans_its_temporary_file(tmp_path, monkeypatch):
    from netsim import _checks

    target = tmp_path / "out.json"
    dead = tmp_path / ".out.json.tmp-999999999"  # left by a killed run (no such process)
    dead.write_text("half")
    other = tmp_path / ".other.json.tmp-999999999"  # another target's: left alone
    other.write_text("x")
    _checks.write_atomic(target, "hello")
    assert target.read_text() == "hello" and not dead.exists() and other.exists()
    assert oct(target.stat().st_mode & 0o777) == oct(0o666 & ~_umask())  # not mkstemp's 0600

    def fail(*a):
        raise OSError("disk full")

    monkeypatch.setattr(_checks.os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        _checks.write_atomic(target, b"new")
    assert target.read_text() == "hello"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.json.tmp-999999999", "out.json"]


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_json_output_is_standard():
    from netsim._checks import to_json

    text = to_json({"a": math.inf, "b": [1.0, -math.inf, math.nan], "c": {"d": 2}})
    assert json.loads(text) == {"a": None, "b": [1.0, None, None], "c": {"d": 2}}
    assert "Infinity" not in text and "NaN" not in text
    data = {"n": 2, "flows": [{"id": "f0", "finish": 1.5}, {"id": "f1", "finish": math.inf}], "tasks": []}
    rows = to_json(data, rows=True)
    assert json.loads(rows) == {**data, "flows": [data["flows"][0], {"id": "f1", "finish": None}]}
    assert rows.splitlines()[3:6] == [
        '  {"id": "f0", "finish": 1.5},',
        '  {"id": "f1", "finish": null}',
        " ],",
    ]


def test_checks():
    from netsim._checks import choice, count, identifier, number, quantity

    assert count(3, "n") == 3 and count(0, "n", minimum=0) == 0
    for bad in (True, 2.0, "2", None, 0):
        with pytest.raises(ScenarioError, match=r"n: expected an integer >= 1, got"):
            count(bad, "n")
    assert choice("ring", "algorithm", {"ring", "tree"}) == "ring"
    with pytest.raises(
        ScenarioError, match=r"algorithm: unknown value 'x'; expected one of \['ring', 'tree'\]"
    ):
        choice("x", "algorithm", {"ring", "tree"})
    assert number(2, "x") == 2.0 and isinstance(number(2, "x"), float)
    with pytest.raises(
        ScenarioError, match="x: must be a finite number, got <an integer of about 400 digits>"
    ):
        number(10**400, "x", positive=True)
    assert quantity("100 Gbps", "bandwidth", "bw") == 12.5e9
    with pytest.raises(ScenarioError, match="size: must be > 0, got 0"):
        quantity(0, "bytes", "size", positive=True)
    assert identifier("gpu 0/µ", "id") == "gpu 0/µ"  # spaces and non-ASCII letters are printable


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(
    text=hypothesis.strategies.text(max_size=80),
    x=hypothesis.strategies.floats(allow_nan=True, allow_infinity=True),
    positive=hypothesis.strategies.booleans(),
)
def test_the_checks_common_cases_answer_as_their_general_paths(text, x, positive):
    # show() and number() take a shortcut for short strings and plain floats (1e5-flow scenarios check
    # ~3e5 of each): the same text as reprlib's, the same value or error as the general checks
    from netsim import _checks

    assert _checks.show(text) == _checks._SHORT.repr(text)
    try:
        got = _checks.number(x, "x", positive=positive)
    except ScenarioError as e:
        got = str(e)
    try:
        want = _checks.number(np.float64(x), "x", positive=positive)  # not a float: the general path
    except ScenarioError as e:
        want = str(e).replace(repr(np.float64(x)), repr(x))
    assert got == want and type(got) is type(want)


def test_a_sweep_spec_given_to_run_says_to_use_netsim_sweep():
    with pytest.raises(ScenarioError, match=r"this is a sweep spec: run it with `netsim sweep`"):
        Scenario.from_dict({"scenario": "base.json", "axes": []})


# --- the post-run check (netsim._runner.check_result) ----------------------------------------------

SHARED_CASE = Scenario(
    LINKS,
    [
        Flow("f1", "a", "c", 3e6),  # a -> b -> c: links ab and bc
        Flow("f2", "b", "c", 1e6, start=1e-4),  # bc
        Flow("f3", "b", "a", 2e6, after=("t1",)),  # ba
    ],
    [Task("t1", "gpu0", 2e-3), Task("t2", "gpu0", 1e-3, after=("f2",))],
    shared=[netsim.SharedResource("duplex", 1.5e9, ("ab", "ba"))],
)


def _state(compiled):
    import jax

    from netsim._runner import run_compiled

    with jax.enable_x64(True):
        return jax.device_get(run_compiled(compiled, compiled.max_events, 0, 0.0))


def test_bytes_are_conserved_per_resource():
    # an independent tally: each link carries its flows' bytes, the shared budget those of ab and ba,
    # the device its tasks' durations (work in s)
    r = netsim.simulate(SHARED_CASE)
    assert dict(zip(r.link_ids, r.link_bytes, strict=True)) == pytest.approx(
        {"ab": 3e6, "bc": 4e6, "ba": 2e6}, rel=1e-12
    )
    assert r.shared_bytes == pytest.approx([5e6], rel=1e-12)
    assert np.isfinite(r.link_utilization).all() and np.isfinite(r.flow_finish).all()


@pytest.mark.parametrize(
    ("field", "index", "value", "message"),
    [
        (
            "resource_bytes",
            1,
            4.1e6,
            r"resource 'bc' carried 4100000\.0 bytes, but the items crossing it total 4000000\.0",
        ),
        ("resource_bytes", 3, 4e6, r"resource 'duplex' carried 4000000\.0 bytes, .* total 5000000\.0"),
        ("resource_bytes", 4, 2e-3, r"resource 'gpu0' carried 0\.002 s of work, .* total 0\.003"),
        ("resource_bytes", 0, math.nan, r"resource 'ab' has bytes carried = nan"),
        ("resource_busy", 2, math.inf, r"resource 'ba' has busy time = inf"),
        ("finish", 2, math.inf, r"flow 'f3' has finish = inf"),
        ("start", 4, math.nan, r"task 't2' has start = nan"),
        ("first_byte", 0, -math.inf, r"flow 'f1' has first_byte = -inf"),
    ],
)
def test_post_run_check_names_the_item_or_resource(field, index, value, message):
    import equinox as eqx

    from netsim._runner import check_result

    compiled = netsim.compile_scenario(SHARED_CASE)
    state = _state(compiled)
    check_result(compiled, state)  # the real run passes
    bad = np.array(getattr(state, field))
    bad[index] = value
    with pytest.raises(netsim.SimulationError, match=f"post-run check: {message}"):
        check_result(compiled, eqx.tree_at(lambda s: getattr(s, field), state, bad))


def test_post_run_check_allows_the_tie_rule_and_skips_unfinished_runs():
    # "long" finishes at 1000 s; "short" (5.1 B at 1 GB/s, released 5 ns before) would finish 0.1 ns
    # later, within TIE x t = 1 ns: it finishes with "long" having moved 5 B at its rate, and hands bc the
    # 0.1 B its rate did not move: the link counts all 5.1 B, and the 1e-9 relative check holds.
    late = Scenario(LINKS, [Flow("long", "a", "b", 1e12), Flow("short", "b", "c", 5.1, start=1000.0 - 5e-9)])
    r = netsim.simulate(late)
    assert r.flow_finish == pytest.approx([1000.0, 1000.0], rel=1e-15)
    assert r.link_bytes[1] == pytest.approx(5.1, rel=1e-12)
    # an unfinished run keeps its infinite finish times: no post-run check, the status says why
    r = netsim.simulate(SHARED_CASE, max_events=2, throw=False)
    assert r.status & netsim.Status.MAX_EVENTS and not np.isfinite(r.flow_finish).all()


def test_sweep_outputs_are_checked_before_the_plan(tmp_path, capsys):
    from netsim.cli import main

    spec = tmp_path / "spec.h5"  # a spec file named like an output: --out must not replace it
    spec.write_text(json.dumps({"base": "absent.json", "axes": []}))
    out = tmp_path / "r.h5"
    for argv, message in (
        (["--out", str(tmp_path / "no" / "r.h5")], "--out: folder"),
        (["--out", str(spec)], "is also the spec; refusing to overwrite it"),
        (["--out", str(out), "--plot", str(tmp_path / "m.h5")], "--plot: unknown output type '.h5'"),
        (["--out", str(out), "--plot", str(tmp_path / "no" / "m.png")], "--plot: folder"),
    ):
        assert main(["sweep", str(spec), *argv, "--no-compile-cache"]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err
    assert spec.read_text().startswith("{") and sorted(p.name for p in tmp_path.iterdir()) == ["spec.h5"]


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"packet_bytes": 0.0}, r"\.packet_bytes: must be > 0, got 0\.0"),
        ({"packet_bytes": -64.0}, r"\.packet_bytes: must be >= 0|\.packet_bytes: must be > 0"),
        ({"packet_bytes": math.nan}, r"\.packet_bytes: must be a finite number"),
        ({"packet_bytes": math.inf}, r"\.packet_bytes: must be a finite number"),
        ({"packet_bytes": "abc"}, r"\.packet_bytes"),
        ({"packet_bytes": 64.0, "header_bytes": -1.0}, r"\.header_bytes: must be >= 0"),
        ({"packet_bytes": 64.0, "buffer_bytes": 0.0}, r"\.buffer_bytes: must be > 0"),
        ({"packet_bytes": 64.0, "buffer_bytes": math.nan}, r"\.buffer_bytes: must be a finite number"),
        ({"packet_bytes": 64.0, "variability": -0.5}, r"\.variability: must be >= 0"),
        ({"packet_bytes": 64.0, "variability": math.nan}, r"\.variability: must be a finite number"),
        ({"packet_bytes": 64.0, "variability": "1"}, r"\.variability: must be a finite number"),
        ({"header_bytes": 16.0}, r"\.header_bytes: set only on a packetized link: give packet_bytes"),
        ({"buffer_bytes": 4096.0}, r"\.buffer_bytes: set only on a packetized link"),
    ],
)
def test_bad_packet_fields_are_refused_naming_the_field(fields, message):
    with pytest.raises(ScenarioError, match=message):
        Link("l", "a", "b", 1e9, **fields)
    row = {"id": "l", "src": "a", "dst": "b", "bandwidth": 1e9, **fields}  # the JSON path names the row
    with pytest.raises(ScenarioError, match=r"links\[0\] \(id 'l'\)" + message):
        Scenario.from_dict({"links": [row], "flows": []})


def test_packet_fields_take_units_and_round_trip(tmp_path):
    row = {"id": "l", "src": "a", "dst": "b", "bandwidth": "100 GB/s", "packet_bytes": "64 B"}
    row |= {"header_bytes": 16, "buffer_bytes": "4 KiB", "variability": 0.5}
    s = Scenario.from_dict({"links": [row], "flows": [{"id": "f", "src": "a", "dst": "b", "bytes": 1}]})
    link = s.links[0]
    assert (link.packet_bytes, link.header_bytes, link.buffer_bytes, link.variability) == (64, 16, 4096, 0.5)
    s.save(tmp_path / "s.json")
    assert Scenario.load(tmp_path / "s.json").links == s.links
    # a fluid link writes none of them: files of scenarios without packets are unchanged
    assert set(Scenario([Link("l", "a", "b", 1e9)]).to_dict()["links"][0]) == {
        "id",
        "src",
        "dst",
        "bandwidth",
        "latency",
    }
