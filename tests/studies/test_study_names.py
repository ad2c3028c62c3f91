"""Workloads only compile, studies simulate: the public names of both, pinned."""

import inspect
import types

import netsim
from netsim import studies, workloads


def public(module) -> set[str]:
    return {n for n in dir(module) if not n.startswith("_") and not isinstance(getattr(module, n), types.ModuleType)}


def test_workload_names():
    assert public(workloads) == {
        "Fabric", "LinkFabric", "Workload", "concat",  # building blocks
        "Collective", "Transfer", "allgather", "allreduce", "alltoall", "broadcast", "reduce", "reducescatter",
        "bus_factor", "btree_parents", "double_tree_parents", "tree_depths",  # collectives
        "SCHEDULES", "Offload", "Op", "Pipeline", "PipelineStats", "Span", "StageCosts", "TransformerStage",
        "pipeline", "pipeline_order",  # pipeline parallelism
        "MODELS", "PATTERNS", "Job", "Model", "job_workload", "POLICIES", "place",  # jobs and their placement
    }
    # the function, not a module of the same name; the collective builders' module is the only public one
    assert inspect.isfunction(workloads.pipeline)
    assert {n for n in dir(workloads) if isinstance(getattr(workloads, n), types.ModuleType)
            and not n.startswith("_")} == {"collectives"}


def test_study_names():
    assert public(studies) == {
        "SweepTable", "collective_sweep",
        "RingPlan", "RingSearch", "crossings", "search_rings",
        "JobRun", "Schedule", "colocation", "colocation_matrix", "run_jobs", "run_placed",
    }
    assert netsim.studies is studies
