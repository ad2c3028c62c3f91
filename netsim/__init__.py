"""netsim: a JAX-accelerated flow-level network simulator for AI systems.

scenario = netsim.Scenario.load("examples/pcie_ring_allreduce.json")
result = netsim.simulate(scenario)
print(result.summary())
"""

import importlib as _importlib
import importlib.util as _importlib_util
import os as _os
import sys as _sys


class _SourceCheckout:
    """Finds netsim.kernels and netsim.calibrate in a source checkout, where kernels/ and calibrate/ sit
    beside this folder (installs put them inside it, see pyproject's package-dir), so that `import netsim`
    works from the repository root. Exactly these two: nothing else of the root (tests/, benchmarks/)
    becomes part of netsim."""

    def __init__(self, root: str):
        self.folders = {f"{__name__}.{name}": _os.path.join(root, name) for name in ("kernels", "calibrate")}

    def find_spec(self, name, path=None, target=None):
        folder = self.folders.get(name)
        if folder is None:
            return None
        init = _os.path.join(folder, "__init__.py")
        return _importlib_util.spec_from_file_location(name, init, submodule_search_locations=[folder])


_root = _os.path.dirname(_os.path.abspath(__path__[0]))
_finder = _SourceCheckout(_root)
# a checkout (an install has kernels/ inside netsim/); once, even when netsim is reloaded
if (
    not _os.path.isdir(_os.path.join(__path__[0], "kernels"))
    and _os.path.isfile(_os.path.join(_root, "kernels", "__init__.py"))
    and not any(getattr(f, "folders", None) == _finder.folders for f in _sys.meta_path)
):
    _sys.meta_path.append(_finder)

__version__ = "0.1.0"

# Public names, loaded on first use (PEP 562): `import netsim` and `netsim --help` do not import JAX.
_NAMES = {
    "._batch": ("Batch", "compile_batch", "stack"),
    "._runner": ("BatchRun", "batch_axes", "jvp_columns", "run_batch", "vmap_latency", "vmap_run"),
    "._cache": ("enable_compilation_cache",),
    "._compile": ("Compiled", "Shape", "compile_scenario"),
    "._costs": ("CostModel",),
    "._errors": ("NetsimError", "ScenarioError", "SimulationError", "check_status"),
    "._result": ("Result", "Timing"),
    "._scenario": ("Flow", "Link", "Scenario", "SharedResource", "Task"),
    "._simulate": ("simulate",),
    "._threads": ("cpu_threads_label", "set_cpu_threads"),
    ".kernels": ("Status",),
}
#: submodules, imported on first use too: `netsim.timeline.pipeline_bubbles(r)` after a plain `import netsim`
_MODULES = (
    "calibrate",
    "checks",
    "jobs",
    "kernels",
    "latency",
    "plots",
    "studies",
    "sweep",
    "timeline",
    "topology",
    "traces",
    "workloads",
)
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
