"""Training jobs on a shared cluster: their traffic, placement, scheduling and a scheduling environment.

- `Job`, `Model`, `MODELS`, `PATTERNS`, `job_workload`: the one traffic model of a job (per iteration,
  compute and the collectives of its pattern), with the models of DeepShare's traces fitted by
  `netsim.calibrate.jobs` (netsim/data/job_models.json).
- `place`, `POLICIES`: GPU placement policies.
- `run_jobs`, `run_placed`, `colocation`, `colocation_matrix`: exact joint simulations of jobs.
- `iteration_paces`, `Paces`: the one rule for a co-located job's pace, and the environment's cache.
- `JobEnv`, `JobEnvs`: a gym-style scheduling environment; `schedule`, `JOB_POLICIES`: policies over it;
  `evaluate`, `Evaluation`: policies judged over many seeded traces, with intervals.
- `deepshare_cluster`, `DeepShareTable`, `deepshare_trace`: DeepShare's cluster, measured tables and traces.

See docs/jobs.md.
"""

from ._deepshare import DEEPSHARE_REFERENCE as DEEPSHARE_REFERENCE
from ._deepshare import DeepShareTable as DeepShareTable
from ._deepshare import deepshare_cluster as deepshare_cluster
from ._deepshare import deepshare_mix as deepshare_mix
from ._deepshare import deepshare_trace as deepshare_trace
from ._deepshare import parse_key as parse_key
from ._deepshare import spearman as spearman
from ._env import CANDIDATE_FEATURES as CANDIDATE_FEATURES
from ._env import CANDIDATES as CANDIDATES
from ._env import JOB_FEATURES as JOB_FEATURES
from ._env import ActionError as ActionError
from ._env import JobEnv as JobEnv
from ._env import JobEnvs as JobEnvs
from ._env import Observation as Observation
from ._evaluate import Evaluation as Evaluation
from ._evaluate import bootstrap_mean as bootstrap_mean
from ._evaluate import evaluate as evaluate
from ._paces import Paces as Paces
from ._paces import iteration_paces as iteration_paces
from ._placement import POLICIES as POLICIES
from ._placement import place as place
from ._policies import JOB_POLICIES as JOB_POLICIES
from ._policies import plot_jct_cdf as plot_jct_cdf
from ._policies import policy_summary as policy_summary
from ._policies import policy_table as policy_table
from ._policies import save_schedules as save_schedules
from ._policies import schedule as schedule
from ._schedule import JobRun as JobRun
from ._schedule import Schedule as Schedule
from ._schedule import colocation as colocation
from ._schedule import colocation_matrix as colocation_matrix
from ._schedule import run_jobs as run_jobs
from ._schedule import run_placed as run_placed
from ._trace_csv import format_job_trace as format_job_trace
from ._trace_csv import read_job_trace as read_job_trace
from ._traffic import MODELS as MODELS
from ._traffic import MODELS_PATH as MODELS_PATH
from ._traffic import PATTERNS as PATTERNS
from ._traffic import SERVER_COLLECTIVES as SERVER_COLLECTIVES
from ._traffic import Job as Job
from ._traffic import Model as Model
from ._traffic import job_workload as job_workload
from ._traffic import load_models as load_models
from ._traffic import server_of as server_of
