"""netsim: a JAX-accelerated flow-level network simulator for AI systems.

    scenario = netsim.Scenario.load("examples/pcie_ring_allreduce.json")
    result = netsim.simulate(scenario)
    print(result.summary())
"""

import os as _os

# In a source checkout, kernels/ and calibrate/ sit beside this folder (they install inside it, see
# pyproject's package-dir): look for them there too, so `import netsim` works from the repository root.
if not _os.path.isdir(_os.path.join(__path__[0], "kernels")):
    __path__.append(_os.path.dirname(_os.path.abspath(__path__[0])))

from . import kernels as kernels
from . import studies as studies
from . import topology as topology
from . import workloads as workloads
from ._batch import Batch as Batch
from ._batch import BatchRun as BatchRun
from ._batch import batch_axes as batch_axes
from ._batch import compile_batch as compile_batch
from ._batch import run_batch as run_batch
from ._batch import stack as stack
from ._cache import enable_compilation_cache as enable_compilation_cache
from ._compile import Compiled as Compiled
from ._compile import Shape as Shape
from ._compile import compile_scenario as compile_scenario
from ._errors import NetsimError as NetsimError
from ._errors import ScenarioError as ScenarioError
from ._errors import SimulationError as SimulationError
from ._errors import check_status as check_status
from ._result import Result as Result
from ._result import Timing as Timing
from ._scenario import Flow as Flow
from ._scenario import Link as Link
from ._scenario import Scenario as Scenario
from ._scenario import SharedResource as SharedResource
from ._scenario import Task as Task
from ._simulate import simulate as simulate
from .kernels import Status as Status

__version__ = "0.1.0"
