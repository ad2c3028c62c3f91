"""Studies: questions answered by simulating many scenarios built with `netsim.workloads`.

Each study lays out its scenarios with `netsim.compile_batch` (or `netsim.compile_scenario`) and runs
them with `netsim.run_batch` or `netsim.simulate`: collective size sweeps and PCIe-aware ring search.
Jobs on a shared cluster (scheduling, co-location, the scheduling environment) are `netsim.jobs`.
"""

from ._collectives import SweepTable as SweepTable
from ._collectives import collective_sweep as collective_sweep
from ._collectives import nccl_rows as nccl_rows
from ._collectives import nccl_sizes as nccl_sizes
from ._rings import RingPlan as RingPlan
from ._rings import RingSearch as RingSearch
from ._rings import crossings as crossings
from ._rings import search_rings as search_rings
