"""Studies: questions answered by simulating many scenarios built with `netsim.workloads`.

Each study lays out its scenarios with `netsim.compile_batch` (or `netsim.compile_scenario`) and runs
them with `netsim.run_batch` or `netsim.simulate`: collective size sweeps, PCIe-aware ring search, and
job traces scheduled on a shared cluster,
and a gym-style environment (`JobEnv`, `JobEnvs`) for scheduling policies.
"""

from ._collectives import SweepTable as SweepTable
from ._collectives import collective_sweep as collective_sweep
from ._env import CANDIDATES as CANDIDATES
from ._env import ActionError as ActionError
from ._env import JobEnv as JobEnv
from ._env import JobEnvs as JobEnvs
from ._env import Observation as Observation
from ._env import Paces as Paces
from ._jobs import DEEPSHARE_REFERENCE as DEEPSHARE_REFERENCE
from ._jobs import JOB_POLICIES as JOB_POLICIES
from ._jobs import JobRun as JobRun
from ._jobs import Schedule as Schedule
from ._jobs import colocation as colocation
from ._jobs import colocation_matrix as colocation_matrix
from ._jobs import deepshare_cluster as deepshare_cluster
from ._jobs import deepshare_mix as deepshare_mix
from ._jobs import deepshare_trace as deepshare_trace
from ._jobs import format_job_trace as format_job_trace
from ._jobs import read_job_trace as read_job_trace
from ._jobs import run_jobs as run_jobs
from ._jobs import run_placed as run_placed
from ._jobs import schedule as schedule
from ._rings import RingPlan as RingPlan
from ._rings import RingSearch as RingSearch
from ._rings import crossings as crossings
from ._rings import search_rings as search_rings
