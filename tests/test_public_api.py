"""The public names users import, listed in one place: changing them is a decision, not an accident."""

import types

import netsim


def public(module) -> set[str]:
    """Public names, less submodules that other tests may have imported (netsim.calibrate, netsim.sweep...)."""
    return {n for n in dir(module) if not n.startswith("_") and not isinstance(getattr(module, n), types.ModuleType)}


def test_top_level_names():
    assert public(netsim) == {
        "Scenario", "Link", "Flow", "Task", "SharedResource", "simulate", "Result", "Timing",  # one scenario
        "Shape", "Compiled", "compile_scenario", "Batch", "BatchRun", "compile_batch", "run_batch", "batch_axes",
        "stack",  # batches
        "enable_compilation_cache",
        "Status", "NetsimError", "ScenarioError", "SimulationError", "check_status",  # one status, one error base
    }
    assert {"kernels", "topology", "workloads"} <= set(dir(netsim))


def test_kernel_names():
    assert public(netsim.kernels) == {
        "run", "step", "maxmin_rates", "route_latency", "Network", "Program", "SimState", "Allocation", "Status",
        "OK", "MAX_EVENTS", "STALLED", "NONFINITE",
    }
