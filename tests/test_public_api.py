"""Every public name users import, listed in this one place: changing them is a decision, not an accident."""

import inspect
import types

import netsim.calibrate

import netsim
import netsim.data
import netsim.sweep
from netsim import kernels, studies, topology, workloads


def public(module) -> set[str]:
    """Public names (`__all__` where the module has one), less submodules imported on the way."""
    names = getattr(module, "__all__", None) or dir(module)
    return {
        n for n in names if not n.startswith("_") and not isinstance(getattr(module, n), types.ModuleType)
    }


def submodules(module) -> set[str]:
    return {
        n for n in dir(module) if not n.startswith("_") and isinstance(getattr(module, n), types.ModuleType)
    }


def test_top_level_names():
    assert public(netsim) == {
        "Scenario",
        "Link",
        "Flow",
        "Task",
        "SharedResource",
        "simulate",
        "Result",
        "Timing",  # one scenario
        "Shape",
        "Compiled",
        "compile_scenario",
        "Batch",
        "BatchRun",
        "compile_batch",
        "run_batch",
        "batch_axes",
        "stack",  # batches
        "enable_compilation_cache",
        "Status",
        "NetsimError",
        "ScenarioError",
        "SimulationError",
        "check_status",  # one status, one error base
    }
    assert {"kernels", "studies", "topology", "workloads"} <= set(dir(netsim))


def test_kernel_names():
    assert public(kernels) == {
        "run",
        "step",
        "maxmin_rates",
        "route_latency",
        "payload_capacity",  # packetized resources (docs/queueing.md)
        "first_byte_wait",
        "Network",
        "Packets",
        "Program",
        "SimState",
        "Allocation",
        "Status",
        "OK",
        "MAX_EVENTS",
        "STALLED",
        "NONFINITE",
    }


def test_workload_names():
    assert public(workloads) == {
        "Fabric",
        "LinkFabric",
        "Workload",
        "concat",  # building blocks
        "Collective",
        "Transfer",
        "allgather",
        "allreduce",
        "alltoall",
        "broadcast",
        "reduce",
        "reducescatter",
        "bus_factor",
        "btree_parents",
        "double_tree_parents",
        "tree_depths",  # collectives
        "SCHEDULES",
        "Offload",
        "Op",
        "Pipeline",
        "PipelineStats",
        "Span",
        "StageCosts",
        "TransformerStage",
        "pipeline",
        "pipeline_order",  # pipeline parallelism
        "MODELS",
        "PATTERNS",
        "Job",
        "Model",
        "job_workload",
        "POLICIES",
        "place",  # jobs and their placement
        "ChakraNode",
        "ChakraTrace",
        "ImportedRun",
        "SimAILayer",
        "SimAIWorkload",
        "read_chakra",
        "read_simai",
        "simulate_workload",  # workloads imported from SimAI and Chakra files
        "MODELS_PATH",
        "load_models",  # the fitted job models (netsim/data/job_models.json)
    }
    # the function, not a module of the same name; the collective builders' module is the only public one
    assert inspect.isfunction(workloads.pipeline)
    assert submodules(workloads) == {"collectives"}


def test_study_names():
    assert public(studies) == {
        "SweepTable",
        "collective_sweep",
        "RingPlan",
        "RingSearch",
        "crossings",
        "search_rings",
        "JobRun",
        "Schedule",
        "colocation",
        "colocation_matrix",
        "run_jobs",
        "run_placed",
        "CANDIDATES",
        "ActionError",
        "JobEnv",
        "JobEnvs",
        "Observation",
        "Paces",
        "DEEPSHARE_REFERENCE",
        "JOB_POLICIES",
        "deepshare_cluster",
        "deepshare_mix",
        "deepshare_trace",
        "format_job_trace",
        "read_job_trace",
        "schedule",
    }


def test_topology_names():
    assert public(topology) == {
        "Topology",
        "Router",
        "ShortestPath",
        "DimensionOrder",
        "Ecmp",
        "Transit",
        "cable",
        "natural_key",
        "chiplet_mesh",
        "chiplet_torus",
        "mi250x",
        "mi250x_node",
        "mi300x",  # chiplet packages
        "ServerPlan",
        "build_server",
        "pcie_server",
        "pcie_server_from_topo",
        "parse_nvidia_smi_topo",
        "server_plan",
        "TopoMatrix",
        "path_kind",
        "PcieRouter",
        "Transport",
        "HostStaged",  # PCIe servers
        "fat_tree",
        "leaf_spine",
        "rail_optimized",
        "oversubscription_ratio",
        "cluster",
        "with_packages",
        "bisection_bandwidth",
        "min_cut",
        "PRESETS",
        "CLUSTERS",
        "preset",
        "CALIBRATED",
        "load",
        "base_topology",
        "from_calibration",  # presets, calibrated files
        "CollectiveCosts",
        "Regime",
        "regime_blend",
        "regime_weights",
        "link_class",  # the fitted software model
        "pcie_shared",
        "socket_duplex",
        "staging_engines",  # shared resources of PCIe servers
    }


def test_calibrate_names():
    assert public(netsim.calibrate) == {
        "read_trace",
        "load_trace",
        "save_trace",
        "Trace",
        "TraceError",
        "NcclTable",
        "NcclDevice",
        "P2PMatrix",
        "RocmMatrix",
        "RocmNuma",
        "TopoTable",
        "CsvTable",  # traces
        "Spec",
        "Params",
        "initial_values",
        "Experiment",
        "collective_experiment",
        "p2p_experiment",
        "experiments_from_trace",
        "ranks_of",
        "ExperimentBatch",
        "experiment_batches",
        "lay_out",
        "simulate_experiments",
        "predict",
        "software",
        "refusal",  # the model
        "fit",
        "free_indices",
        "evaluate",
        "FitResult",
        "FitReport",
        "ExperimentReport",
        "report",
        "compare",
        "alpha_beta_fit",
        "plot_fit",
        "format_bytes",
        "calibrate",
        "Calibration",  # fitting
        "fit_jobs",  # job traffic models (netsim.calibrate.jobs)
    }
    assert submodules(netsim.calibrate) >= {"presets", "transport", "jobs"}


def test_sweep_and_data_names():
    assert public(netsim.sweep) == {
        "Sweep",
        "Axis",
        "AxisData",
        "FailedLinks",
        "LinkBandwidth",
        "LinkLatency",
        "MessageSize",
        "ScenarioAxis",
        "SweepError",
        "SweepResult",
        "load",
        "load_spec",
        "sweep_from_dict",
    }
    assert public(netsim.data) == {"TRACES", "TRACES_DIR", "trace_path"}
