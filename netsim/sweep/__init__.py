"""Batched what-if sweeps: a base scenario crossed with axes, run as vmapped, sharded batches.

from netsim.sweep import Sweep, LinkBandwidth, MessageSize
sweep = Sweep(scenario, [LinkBandwidth("bw", match="pcie*", scale=[0.5, 1, 2]),
                         MessageSize("size", scale=[1, 4, 16])])
result = sweep.run("results.h5")  # resumable; result.grid("makespan") has shape (3, 3)
"""

from ._axes import Axis as Axis
from ._axes import FailedLinks as FailedLinks
from ._axes import LinkBandwidth as LinkBandwidth
from ._axes import LinkLatency as LinkLatency
from ._axes import MessageSize as MessageSize
from ._axes import ScenarioAxis as ScenarioAxis
from ._axes import SweepError as SweepError
from ._result import AxisData as AxisData
from ._result import SweepResult as SweepResult
from ._result import load_result as load_result
from ._spec import load_spec as load_spec
from ._spec import sweep_from_dict as sweep_from_dict
from ._store import check_out_path as check_out_path
from ._sweep import BusBandwidth as BusBandwidth
from ._sweep import Sweep as Sweep
