"""netsim: a JAX-accelerated flow-level network simulator for AI systems.

scenario = netsim.Scenario.load("examples/pcie_ring_allreduce.json")
result = netsim.simulate(scenario)
print(result.summary())
"""

import importlib as _importlib
import os as _os

# In a source checkout, kernels/ and calibrate/ sit beside this folder (they install inside it, see
# pyproject's package-dir): look for them there too, so `import netsim` works from the repository root.
if not _os.path.isdir(_os.path.join(__path__[0], "kernels")):
    __path__.append(_os.path.dirname(_os.path.abspath(__path__[0])))

__version__ = "0.1.0"

# Public names, loaded on first use (PEP 562): `import netsim` and `netsim --help` do not import JAX.
_NAMES = {
    "._batch": ("Batch", "BatchRun", "batch_axes", "compile_batch", "run_batch", "stack"),
    "._cache": ("enable_compilation_cache",),
    "._compile": ("Compiled", "Shape", "compile_scenario"),
    "._costs": ("CostModel",),
    "._errors": ("NetsimError", "ScenarioError", "SimulationError", "check_status"),
    "._result": ("Result", "Timing"),
    "._scenario": ("Flow", "Link", "Scenario", "SharedResource", "Task"),
    "._simulate": ("simulate",),
    ".kernels": ("Status",),
}
_MODULES = ("kernels", "studies", "topology", "workloads")
_WHERE = {name: module for module, names in _NAMES.items() for name in names}


def __getattr__(name: str):
    if name in _MODULES:
        value = _importlib.import_module(f".{name}", __name__)
    elif name in _WHERE:
        value = getattr(_importlib.import_module(_WHERE[name], __name__), name)
    else:
        raise AttributeError(f"module 'netsim' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE, *_MODULES})


__all__ = [*_MODULES, *sorted(_WHERE)]  # `from netsim import *` gets the public names too
