"""Long runs talk: simulate(progress=True) prints events, simulated time and items done on stderr."""

from __future__ import annotations

import re

import numpy as np

import netsim
from netsim import Link, Scenario, Task
from netsim._simulate import Progress


def test_progress_lines(monkeypatch, capsys):
    # a chain of 600 tasks: one event per task; the first slice stops after 512 events and reports
    tasks = [Task(f"t{i}", "gpu", 1e-3, after=(f"t{i - 1}",) if i else ()) for i in range(600)]
    scenario = Scenario((Link("l", "a", "b", 1e9),), tasks=tasks)
    monkeypatch.setattr(Progress, "AFTER", 0.0)
    monkeypatch.setattr(Progress, "EVERY", 0.0)
    monkeypatch.setattr(Progress, "FIRST", 512)
    result = netsim.simulate(scenario, progress=True)
    err = capsys.readouterr().err
    assert re.search(r"netsim: 512 events \(\d+/s\), simulated time 512 ms, 512 of 600 items done", err), err
    assert result.events == 600
    quiet = netsim.simulate(scenario)  # the default prints nothing, and slicing changes no result
    assert capsys.readouterr().err == ""
    assert quiet.makespan == result.makespan and np.array_equal(quiet.task_finish, result.task_finish)
