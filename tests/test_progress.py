"""Long runs talk: simulate(progress=True) prints events, simulated time and items done on stderr."""

from __future__ import annotations

import re

import netsim
from netsim import Link, Scenario, Task
from netsim._simulate import _Progress


def test_progress_lines(monkeypatch, capsys):
    # a chain of 600 tasks: one event per task, so the engine reports after its 512th event
    tasks = [Task(f"t{i}", "gpu", 1e-3, after=(f"t{i - 1}",) if i else ()) for i in range(600)]
    scenario = Scenario((Link("l", "a", "b", 1e9),), tasks=tasks)
    monkeypatch.setattr(_Progress, "AFTER", 0.0)
    monkeypatch.setattr(_Progress, "EVERY", 0.0)
    result = netsim.simulate(scenario, progress=True)
    err = capsys.readouterr().err
    assert re.search(r"netsim: 512 events \(\d+/s\), simulated time 512 ms, 512 of 600 items done", err), err
    assert result.events == 600
    quiet = netsim.simulate(scenario)  # the default prints nothing
    assert capsys.readouterr().err == "" and quiet.makespan == result.makespan
