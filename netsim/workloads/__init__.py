"""Workload compilers: what users run, as flows, compute tasks and dependencies on any topology."""

from ._base import Fabric as Fabric
from ._base import Workload as Workload
from ._base import concat as concat
from .collectives import BUS_FACTOR as BUS_FACTOR
from .collectives import Collective as Collective
from .collectives import SweepTable as SweepTable
from .collectives import Transfer as Transfer
from .collectives import allgather as allgather
from .collectives import allreduce as allreduce
from .collectives import alltoall as alltoall
from .collectives import broadcast as broadcast
from .collectives import btree_parents as btree_parents
from .collectives import bus_factor as bus_factor
from .collectives import double_tree_parents as double_tree_parents
from .collectives import reduce as reduce
from .collectives import reducescatter as reducescatter
from .collectives import sweep as sweep
from .collectives import tree_depths as tree_depths
from .pathsearch import RingPlan as RingPlan
from .pathsearch import RingSearch as RingSearch
from .pathsearch import crossings as crossings
from .pathsearch import search_rings as search_rings
