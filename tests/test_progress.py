"""Long runs talk: simulate(progress=True) prints events, simulated time and items done on stderr; sweeps
print points done, their rate and an ETA (one reporter, netsim._progress)."""

from __future__ import annotations

import io
import re

import numpy as np

import netsim
from netsim import Link, Scenario, Task, _simulate
from netsim._progress import Progress


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
