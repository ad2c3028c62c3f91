"""The public names users import: changing them is a decision, not an accident."""

import netsim


def test_top_level_names():
    public = {n for n in dir(netsim) if not n.startswith("_")}
    assert {"Scenario", "Link", "Flow", "Task", "ScenarioError", "SimulationError", "simulate", "compile",
            "Compiled", "Result", "Timing", "stack", "check_status", "kernels", "topology",
            "workloads"} <= public


def test_kernel_names():
    assert {"run", "step", "maxmin_rates", "route_latency", "Network", "Program", "SimState", "Allocation",
            "OK", "MAX_EVENTS", "STALLED", "NONFINITE"} <= set(dir(netsim.kernels))
