"""Every public name users import, listed in this one place: changing them is a decision, not an accident."""

import inspect
import subprocess
import sys
import types

import netsim.calibrate

import netsim
import netsim.data
import netsim.jobs
import netsim.sweep
from netsim import kernels, studies, topology, traces, workloads


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
        "vmap_run",
        "vmap_latency",
        "jvp_columns",  # the runner's traceable entries (calibration losses)
        "enable_compilation_cache",
        "set_cpu_threads",
        "cpu_threads_label",  # process settings: compiled engines on disk, XLA CPU threads
        "Status",
        "NetsimError",
        "ScenarioError",
        "SimulationError",
        "check_status",  # one status, one error base
        "CostModel",  # a calibrated machine's software costs
    }
    assert {"jobs", "kernels", "studies", "topology", "traces", "workloads"} <= set(dir(netsim))


def test_submodules_load_on_first_use():
    # a fresh interpreter: `import netsim` alone, then each submodule as an attribute (no JAX until used)
    code = (
        "import sys, netsim; assert 'jax' not in sys.modules; "
        "print(netsim.timeline.pipeline_bubbles.__name__, netsim.plots.plot_timeline.__name__, "
        "netsim.latency.latency_curve.__name__, netsim.sweep.Sweep.__name__, netsim.checks.MAX_TIME > 0, "
        "netsim.calibrate.__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == [
        "pipeline_bubbles",
        "plot_timeline",
        "latency_curve",
        "Sweep",
        "True",
        "netsim.calibrate",
    ]


def test_check_names():
    import netsim.checks

    assert public(netsim.checks) == {
        "MAX_BANDWIDTH",
        "MAX_BYTES",
        "MAX_TIME",
        "MIN_BANDWIDTH",
        "choice",
        "count",
        "format_bytes",
        "fraction",
        "identifier",
        "identifiers",
        "number",
        "quantity",
        "samples",
        "text",
        "to_json",
        "write_atomic",
    }


def test_kernel_names():
    assert public(kernels) == {
        "run",
        "step",
        "initial_state",
        "TIE",
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
        "rail_rings",
        "tree_depths",  # collectives
        "SCHEDULES",
        "Offload",
        "Op",
        "Pipeline",
        "PipelineStats",
        "Span",
        "StageCosts",
        "TransformerStage",
        "in_flight",
        "pipeline",
        "pipeline_memory",
        "pipeline_order",  # pipeline parallelism
        "ChakraNode",
        "ChakraTrace",
        "ImportedRun",
        "CollectiveCall",
        "SimAILayer",
        "SimAIWorkload",
        "read_chakra",
        "read_simai",
        "simulate_workload",  # workloads imported from SimAI and Chakra files
        "GPUS",
        "ComputeModel",
        "GpuSpec",
        "gpu_memory",
        "LayoutRow",
        "Memory",
        "ParallelLayout",
        "Training",
        "TrainingStats",
        "TransformerModel",
        "IterationTerms",
        "LinkRates",
        "link_rates",
        "placement",
        "program_size",
        "estimate_iteration",
        "estimate_seconds",
        "iteration_terms",
        "layer_ops",
        "memory_per_gpu",
        "op_seconds",
        "optimizer_seconds",
        "read_layout_table",
        "training_workload",
        "DEFAULT_CLUSTER",
        "MAX_SIMULATED",
        "predict_layouts",
        "training_machine",  # 3D-parallel training
    }
    # the function, not a module of the same name; the collective builders' module is the only public one
    assert inspect.isfunction(workloads.pipeline)
    assert submodules(workloads) == {"collectives"}


def test_study_names():
    assert public(studies) == {
        "SweepTable",
        "collective_sweep",
        "nccl_rows",
        "nccl_sizes",  # nccl-tests' size list and (size, count) rows, as `netsim collective` prints them
        "RingPlan",
        "RingSearch",
        "crossings",
        "search_rings",
    }


def test_job_names():
    assert public(netsim.jobs) == {
        "Job",
        "Model",
        "MODELS",
        "MODELS_PATH",
        "PATTERNS",
        "SERVER_COLLECTIVES",
        "job_workload",
        "load_models",  # the one traffic model and the fitted models (netsim/data/job_models.json)
        "POLICIES",
        "place",
        "server_of",  # placement, and the one rule for a GPU's server
        "JobRun",
        "Schedule",
        "colocation",
        "colocation_matrix",
        "run_jobs",
        "run_placed",  # exact joint simulations
        "Paces",
        "iteration_paces",  # the one pace rule
        "CANDIDATES",
        "CANDIDATE_FEATURES",
        "JOB_FEATURES",
        "ActionError",
        "JobEnv",
        "JobEnvs",
        "Observation",  # the environment
        "JOB_POLICIES",
        "schedule",
        "policy_summary",
        "policy_table",
        "save_schedules",
        "plot_jct_cdf",  # policies over it and their tables
        "evaluate",
        "Evaluation",
        "bootstrap_mean",  # policies judged over many seeded traces
        "DEEPSHARE_REFERENCE",
        "DeepShareTable",
        "deepshare_cluster",
        "deepshare_mix",
        "deepshare_trace",
        "parse_key",
        "spearman",  # DeepShare's cluster, tables and traces
        "format_job_trace",
        "read_job_trace",  # the trace CSV of `netsim jobs`
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
        "server_plan",
        "path_kind",
        "PcieRouter",
        "Transport",
        "HostStaged",
        "NcclShm",
        "SM_HOST_GAIN",
        "host_gain",
        "shared_gains",
        "dram_latency",
        "latency_gains",
        "with_transport",  # PCIe servers and their P2P-off transports
        "rocm_server",  # AMD servers from rocm-smi --showtopo / --shownodesbw
        "nvswitch_server",
        "dgx_a100",
        "dgx_h100",  # NVSwitch servers, DGX A100 and H100 clusters
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
        "topology_entry",
        "CALIBRATED",
        "load",
        "base_topology",
        "from_calibration",
        "read_calibration",
        "load_costs",  # presets, calibrated files
        "pcie_spec",  # "pcie:N,..." servers from the command line
        "sized_cluster",  # "dgx-a100" sized by a GPU count
        "link_class",  # the link classes a calibration fits
        "pcie_shared",
        "socket_duplex",
        "staging_engines",  # shared resources of PCIe servers
    }


def test_calibrate_names():
    assert public(netsim.calibrate) == {
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
        "predict_socket",
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
        "calibrate",
        "Calibration",  # fitting
        "fit_jobs",  # job traffic models (netsim.calibrate.jobs)
        "check_layout",
        "LayoutFinding",
        "implied_groups",  # layout evidence
        "identifiability",
        "Identifiability",
        "parameter_names",  # what the data pins
        "check_transports",
        "copy_report",
        "transport_ceilings",
        "TransportReport",
        "TRANSPORTS",
        "CROSS_SOCKET_HOP",
        "SOCKET_BANDWIDTH",
        "socket_hops",
        "socket_params",  # degraded transports
    }
    assert submodules(netsim.calibrate) >= {"presets", "transport", "jobs"}


def test_trace_names():
    assert public(traces) == {
        "read_trace",
        "check_trace",
        "load_trace",
        "save_trace",
        "Trace",
        "TraceError",  # files
        "NcclTable",
        "NcclDevice",
        "P2PMatrix",
        "RocmMatrix",
        "RocmNuma",
        "RbtMatrix",
        "TopoTable",
        "CsvTable",  # tables
        "read_csv",  # one commented CSV table of any file name (job traces, DeepShare's tables)
        "parse_nvidia_smi_topo",
        "TopoMatrix",  # the nvidia-smi parser netsim.topology builds PCIe servers from
    }


def test_sweep_and_data_names():
    assert public(netsim.sweep) == {
        "Sweep",
        "BusBandwidth",
        "Axis",
        "AxisData",
        "FailedLinks",
        "LinkBandwidth",
        "LinkLatency",
        "MessageSize",
        "ScenarioAxis",
        "SweepError",
        "SweepResult",
        "load_result",
        "check_out_path",
        "load_spec",
        "sweep_from_dict",
    }
    assert public(netsim.data) == {"DATA_DIR", "TRACES", "TRACES_DIR", "trace_path"}
