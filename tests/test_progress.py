"""Long runs talk: simulate(progress=True) prints events, simulated time and items done on stderr; sweeps
print points done, their rate and an ETA (one reporter, netsim._progress)."""

from __future__ import annotations

import io
import itertools
import re
from pathlib import Path

import numpy as np

import netsim
from netsim import Link, Scenario, Task, _progress, _simulate
from netsim._progress import Progress

ROOT = Path(__file__).resolve().parents[1]


def test_progress_lines(monkeypatch, capsys):
    # a chain of 600 tasks: one event per task; the first slice stops after 512 events and reports
    tasks = [Task(f"t{i}", "gpu", 1e-3, after=(f"t{i - 1}",) if i else ()) for i in range(600)]
    scenario = Scenario((Link("l", "a", "b", 1e9),), tasks=tasks)
    monkeypatch.setattr(_simulate, "PROGRESS_AFTER", 0.0)
    monkeypatch.setattr(_simulate, "PROGRESS_EVERY", 0.0)
    monkeypatch.setattr(_simulate, "FIRST_SLICE", 512)
    result = netsim.simulate(scenario, progress=True)
    err = capsys.readouterr().err
    line = r"netsim: 512 events, [\d,]+\.\d events/s, elapsed 0:00:\d\d, simulated time 512 ms, 512 of 600 items done"
    assert re.search(line, err), err
    assert result.events == 600
    quiet = netsim.simulate(scenario)  # the default prints nothing, and slicing changes no result
    assert capsys.readouterr().err == ""
    assert quiet.makespan == result.makespan and np.array_equal(quiet.task_finish, result.task_finish)


def test_progress_first_slices_are_short(monkeypatch, capsys):
    # slow events must not hide behind a long first slice: the first line comes after FIRST_SLICE events,
    # and slices grow by at most 4x (the same 600-task chain: one compile with the test above)
    tasks = [Task(f"t{i}", "gpu", 1e-3, after=(f"t{i - 1}",) if i else ()) for i in range(600)]
    scenario = Scenario((Link("l", "a", "b", 1e9),), tasks=tasks)
    monkeypatch.setattr(_simulate, "PROGRESS_AFTER", 0.0)
    monkeypatch.setattr(_simulate, "PROGRESS_EVERY", 0.0)
    netsim.simulate(scenario, progress=True)
    events = [int(m) for m in re.findall(r"netsim: ([\d,]+) events", capsys.readouterr().err)]
    assert events[0] == _simulate.FIRST_SLICE == 16, events
    assert all(b <= 5 * a for a, b in itertools.pairwise(events)), events  # each slice <= 4x the last


def test_progress_line_counts_rate_and_eta():
    stream = io.StringIO()
    bar = Progress("sweep", "points", 100, done=20, stream=stream, every=0.0)
    bar.t0 -= 2.0  # 2 s in, 30 new points: 15 points/s, 50 left: ETA ~3 s
    bar.update(30)
    line = stream.getvalue()
    assert line.startswith("sweep: 50/100 points (50.0%), ") and "ETA 0:00:0" in line, line
    rate = float(line.split(" points/s")[0].split()[-1])
    assert 10 < rate < 16


def test_progress_is_quiet_before_after_and_between_lines():
    stream = io.StringIO()
    Progress("netsim", "events", after=60.0, stream=stream, every=0.0).update(10)
    assert stream.getvalue() == ""  # short work stays quiet
    bar = Progress("sweep", "points", 3, stream=stream, every=60.0)
    for _ in range(3):
        bar.update(1)
    lines = stream.getvalue().splitlines()  # the first line, then none for 60 s, except the last one
    assert [x.split(",")[0] for x in lines] == ["sweep: 1/3 points (33.3%)", "sweep: 3/3 points (100.0%)"]


# --- the command line's pulse: a fake clock and direct ticks (no sleeps, no thread) ------------------------


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def pulse(monkeypatch) -> tuple[FakeClock, io.StringIO, _progress.Pulse]:
    fake = FakeClock()
    monkeypatch.setattr(_progress, "clock", fake)
    monkeypatch.setattr(_progress, "_history", {})  # no compile seen yet, and nothing read from disk
    stream = io.StringIO()
    return fake, stream, _progress.Pulse("netsim run", stream=stream, poll=3600.0)  # the test ticks


def test_pulse_speaks_within_2_s_then_every_10_s_and_never_twice_in_a_silence(monkeypatch):
    fake, stream, p = pulse(monkeypatch)
    with p, _progress.doing("reading s.json"):
        fake.now += 1.4
        p.tick()
        assert stream.getvalue() == ""  # quick commands stay quiet
        fake.now += 0.2
        p.tick()
        assert stream.getvalue() == "netsim run: reading s.json, 0:00:02, elapsed 0:00:02\n"
        fake.now += 9.0
        p.tick()
        assert stream.getvalue().count("\n") == 1
        _progress.say("netsim run: something else said")  # a line of the command's own resets the silence
        fake.now += 9.0
        p.tick()
        assert stream.getvalue().count("\n") == 2
        fake.now += 1.0
        p.tick()
        assert stream.getvalue().splitlines()[-1] == "netsim run: reading s.json, 0:00:21, elapsed 0:00:21"
    _progress.say("after the pulse")  # closed: library use is silent
    assert "after the pulse" not in stream.getvalue()


def test_pulse_shows_the_open_bar_with_its_rate_eta_and_the_phase(monkeypatch):
    fake, stream, p = pulse(monkeypatch)
    with p:
        bar = _progress.Progress("sweep", "points", 100, stream=stream, every=10.0)
        with _progress.doing("compiling the sweep"):
            fake.now += 2.0
            p.tick()
        bar.update(25)  # just shown: the bar's own line waits its 10 s
        fake.now += 5.0
        p.tick()  # 5 s since the last line: quiet
        fake.now += 5.0
        p.tick()
        fake.now += 10.0
        bar.update(25)  # the bar's own line, on time: the pulse stays quiet
        p.tick()
        bar.close()
    first, filled, own = stream.getvalue().splitlines()
    assert (
        first
        == "sweep: 0/100 points (0.0%), 0.0 points/s, elapsed 0:00:02, ETA ?, compiling the sweep for 0:00:02"
    )
    # 25 points in 12 s: ~2.1/s, 75 left: ETA 0:00:36
    assert filled == "sweep: 25/100 points (25.0%), 2.1 points/s, elapsed 0:00:12, ETA 0:00:36", filled
    assert own.startswith("sweep: 50/100 points (50.0%), 2.3 points/s, elapsed 0:00:22, ETA 0:00:22"), own
    assert _progress._state.bars == []


def test_a_long_compile_is_announced_with_its_expected_time_then_its_real_one(monkeypatch):
    fake, stream, p = pulse(monkeypatch)
    compile_event = "/jax/core/compile/backend_compile_duration"
    expected = _progress.FLAT_BASE_S + _progress.FLAT_LOOP_S  # 1024 items: one max-min buffer
    with p:
        for run, source in enumerate(
            (f"~{expected:.0f} s: estimate for 1,024 items", "~12 s: its last compile here")
        ):
            with _progress.expect_compile("the engine", 1024, hops=6):
                _progress._on_start(compile_event, fake.now, fun_name="jit(convert)")  # a helper, 0.1 s
                fake.now += 0.1
                _progress._on_end(compile_event, 0.1, fun_name="jit(convert)")
                _progress._on_start(compile_event, fake.now, fun_name="jit(netsim_engine)")
                fake.now += 0.9
                p.tick()
                assert stream.getvalue().count("\n") == 3 * run  # not yet: it may be a cache hit
                fake.now += 0.2
                p.tick()
                assert stream.getvalue().splitlines()[-1] == (
                    f"netsim run: compiling the engine for 1,024 items (expected {source})"
                )
                fake.now += 10.0
                p.tick()
                assert (
                    stream.getvalue()
                    .splitlines()[-1]
                    .startswith("netsim run: compiling the engine for 1,024 items, 0:00:11 of ~")
                )
                fake.now += 0.8
                _progress._on_end(compile_event, 12.0, fun_name="jit(netsim_engine)")
                assert stream.getvalue().splitlines()[-1] == (
                    f"netsim run: compiled the engine for 1,024 items in 12.0 s (expected {source})"
                )
    assert _progress._history == {"the engine|1024|1|flat": 12.0}


def test_jax_compile_events_reach_the_pulse(monkeypatch):
    # JAX's event names are not API: this fails if a JAX upgrade renames or drops them
    import jax

    monkeypatch.setattr(_progress, "ANNOUNCE_AFTER", 0.0)
    monkeypatch.setattr(_progress, "_history", {})
    stream = io.StringIO()
    with _progress.Pulse("netsim test", stream=stream, poll=3600.0) as p:
        _progress._listen()
        with _progress.expect_compile("a doubling", 8):
            jax.jit(lambda x: 2 * x + p.first)(np.arange(8.0)).block_until_ready()
    assert re.search(
        rf"compiled a doubling for 8 items in \d+\.\d s \(expected ~{_progress.FLAT_BASE_S + _progress.FLAT_LOOP_S:.0f} s: "
        r"estimate for 8 items\)",
        stream.getvalue(),
    ), stream.getvalue()


def test_engine_without_the_frontier_expects_a_short_compile():
    # a flat program's engine (netsim._runner.engine_options) compiles in a few seconds at any size; its
    # estimate and its history entry are its own, not those of the engine with the frontier, whose compile
    # grows with its items' predecessors
    from netsim._progress import FLAT_BASE_S, FLAT_LOOP_S, expected_compile

    key, seconds, _ = expected_compile("the engine", 10240, frontier=False, hops=6)
    # 10240 items: buffers of 10240, 5120, 2560, 1280, 640 and 320 items, a loop each
    assert seconds == FLAT_BASE_S + 6 * FLAT_LOOP_S and key == "the engine|10240|1|flat"
    assert expected_compile("the engine", 1024, hops=6)[1] == FLAT_BASE_S + FLAT_LOOP_S < seconds
    key, narrow, _ = expected_compile("the engine", 10240, frontier=True, hops=4, predecessors=2)
    _, many_before, _ = expected_compile("the engine", 10240, frontier=True, hops=4, predecessors=1024)
    assert seconds < narrow < many_before and key == "the engine|10240|1|h4p2"
    # a route's hops do not count (kernels.maxmin.to_resources scatters them in blocks): the frontier engine
    # at 2048 items compiled in 7.6-10.1 s at 4 hops and 12.7 s at 64
    assert expected_compile("the engine", 10240, frontier=True, hops=64, predecessors=2)[1] == narrow


def test_the_compile_message_knows_when_the_frontier_is_compiled():
    # by kernels.run's own defaults: not at 256 items, nor with the incidence matrix, nor told frontier=0
    from netsim import _runner

    sc = netsim.Scenario.load(ROOT / "examples" / "pp_1f1b.json")
    for items, resources, options, frontier in [
        (256, 512, {}, False),
        (512, 64, {}, False),  # 512 x 64 items x resources: the incidence matrix
        (512, 512, {}, True),
        (512, 512, {"frontier": 0}, False),
        (512, 512, {"loop": "checkpointed"}, False),
    ]:
        c = netsim.compile_scenario(sc, shape=netsim.Shape(items=items, hops=8, after=4, resources=resources))
        assert _runner.compiled_code(c.network, c.program, options) == {
            "frontier": frontier,
            "hops": 8,
            "predecessors": 4,
        }
