"""Studies: questions answered by simulating many scenarios built with `netsim.workloads`.

Each study lays out its scenarios with `netsim.compile_batch` (or `netsim.compile_scenario`) and runs
them with `netsim.run_batch` or `netsim.simulate`: collective size sweeps, PCIe-aware ring search, and
job traces scheduled on a shared cluster.
"""

from ._collectives import SweepTable as SweepTable
from ._collectives import collective_sweep as collective_sweep
from ._jobs import JobRun as JobRun
from ._jobs import Schedule as Schedule
from ._jobs import colocation as colocation
from ._jobs import colocation_matrix as colocation_matrix
from ._jobs import run_jobs as run_jobs
from ._jobs import run_placed as run_placed
from ._rings import RingPlan as RingPlan
from ._rings import RingSearch as RingSearch
from ._rings import crossings as crossings
from ._rings import search_rings as search_rings
