"""Workload compilers: what users run, as flows, compute tasks and dependencies on any topology.

Everything here builds a `Workload` (or a scenario) without simulating it, except `simulate_workload`,
which runs a workload imported from SimAI or Chakra files and reports it as those simulators do;
questions answered by simulating many of them (size sweeps, ring search) live in `netsim.studies`,
and training jobs on a shared cluster in `netsim.jobs`.
"""

from ._base import Fabric as Fabric
from ._base import LinkFabric as LinkFabric
from ._base import Workload as Workload
from ._base import concat as concat
from ._import import CollectiveCall as CollectiveCall
from ._import import ImportedRun as ImportedRun
from ._import import simulate_workload as simulate_workload
from ._import_chakra import ChakraNode as ChakraNode
from ._import_chakra import ChakraTrace as ChakraTrace
from ._import_chakra import read_chakra as read_chakra
from ._import_simai import SimAILayer as SimAILayer
from ._import_simai import SimAIWorkload as SimAIWorkload
from ._import_simai import read_simai as read_simai
from ._layouts import DEFAULT_CLUSTER as DEFAULT_CLUSTER
from ._layouts import MAX_SIMULATED as MAX_SIMULATED
from ._layouts import predict_layouts as predict_layouts
from ._layouts import training_machine as training_machine
from ._memory import GPUS as GPUS
from ._memory import GpuSpec as GpuSpec
from ._memory import Memory as Memory
from ._memory import gpu_memory as gpu_memory
from ._pipeline import SCHEDULES as SCHEDULES
from ._pipeline import Offload as Offload
from ._pipeline import Op as Op
from ._pipeline import Pipeline as Pipeline
from ._pipeline import PipelineStats as PipelineStats
from ._pipeline import Span as Span
from ._pipeline import StageCosts as StageCosts
from ._pipeline import TransformerStage as TransformerStage
from ._pipeline import in_flight as in_flight
from ._pipeline import pipeline as pipeline
from ._pipeline import pipeline_memory as pipeline_memory
from ._pipeline import pipeline_order as pipeline_order
from ._training import ComputeModel as ComputeModel
from ._training import IterationTerms as IterationTerms
from ._training import LayoutRow as LayoutRow
from ._training import LinkRates as LinkRates
from ._training import ParallelLayout as ParallelLayout
from ._training import Training as Training
from ._training import TrainingStats as TrainingStats
from ._training import TransformerModel as TransformerModel
from ._training import estimate_iteration as estimate_iteration
from ._training import estimate_seconds as estimate_seconds
from ._training import iteration_terms as iteration_terms
from ._training import layer_ops as layer_ops
from ._training import link_rates as link_rates
from ._training import memory_per_gpu as memory_per_gpu
from ._training import op_seconds as op_seconds
from ._training import optimizer_seconds as optimizer_seconds
from ._training import placement as placement
from ._training import program_size as program_size
from ._training import read_layout_table as read_layout_table
from ._training import training_workload as training_workload
from .collectives import Collective as Collective
from .collectives import Transfer as Transfer
from .collectives import allgather as allgather
from .collectives import allreduce as allreduce
from .collectives import alltoall as alltoall
from .collectives import broadcast as broadcast
from .collectives import btree_parents as btree_parents
from .collectives import bus_factor as bus_factor
from .collectives import double_tree_parents as double_tree_parents
from .collectives import rail_rings as rail_rings
from .collectives import reduce as reduce
from .collectives import reducescatter as reducescatter
from .collectives import tree_depths as tree_depths
