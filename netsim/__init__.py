"""netsim: a JAX-accelerated flow-level network simulator for AI systems.

    scenario = netsim.Scenario.load("examples/pcie_ring_allreduce.json")
    result = netsim.simulate(scenario)
    print(result.summary())
"""

from . import kernels as kernels
from . import topology as topology
from . import workloads as workloads
from ._compile import Compiled as Compiled
from ._compile import compile_scenario as compile_scenario
from ._result import Result as Result
from ._result import Timing as Timing
from ._scenario import Flow as Flow
from ._scenario import Link as Link
from ._scenario import Scenario as Scenario
from ._scenario import ScenarioError as ScenarioError
from ._scenario import Task as Task
from ._simulate import SimulationError as SimulationError
from ._simulate import check_status as check_status
from ._simulate import simulate as simulate
from ._simulate import stack as stack

compile = compile_scenario  # netsim.compile(scenario) -> Compiled kernel arrays

__version__ = "0.1.0"
