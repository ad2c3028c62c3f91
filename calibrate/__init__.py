"""Calibration: fitting a topology's parameters to measured traces by gradient descent through the simulator.

    trace = netsim.traces.read_trace("m01_..._allreduce_p2p_on.txt")  # every known table in the file
    topo = netsim.topology.load("rtx4090-8x-epyc7542")      # with its shared resources
    cal = calibrate([trace, p2p_trace], topo, staged=netsim.topology.load("rtx4090-8x-epyc7542", p2p=False))
    print(cal.report.summary())
    topo, costs = cal.topology(topo), cal.params.costs       # the calibrated twin: simulate what-ifs on it

See docs/calibration.md.
"""

from . import jobs as jobs
from . import presets as presets
from . import transport as transport
from ._calibrate import Calibration as Calibration
from ._calibrate import calibrate as calibrate
from ._calibrate import experiments_from_trace as experiments_from_trace
from ._calibrate import ranks_of as ranks_of
from ._calibrate import refusal as refusal
from ._degraded import CROSS_SOCKET_HOP as CROSS_SOCKET_HOP
from ._degraded import SOCKET_BANDWIDTH as SOCKET_BANDWIDTH
from ._degraded import TRANSPORTS as TRANSPORTS
from ._degraded import TransportReport as TransportReport
from ._degraded import check_transports as check_transports
from ._degraded import copy_report as copy_report
from ._degraded import predict_socket as predict_socket
from ._degraded import socket_hops as socket_hops
from ._degraded import socket_params as socket_params
from ._degraded import transport_ceilings as transport_ceilings
from ._fit import ExperimentReport as ExperimentReport
from ._fit import FitReport as FitReport
from ._fit import FitResult as FitResult
from ._fit import alpha_beta_fit as alpha_beta_fit
from ._fit import compare as compare
from ._fit import evaluate as evaluate
from ._fit import fit as fit
from ._fit import free_indices as free_indices
from ._fit import plot_fit as plot_fit
from ._fit import report as report
from ._identify import Identifiability as Identifiability
from ._identify import identifiability as identifiability
from ._identify import parameter_names as parameter_names
from ._layout import LayoutFinding as LayoutFinding
from ._layout import check_layout as check_layout
from ._layout import implied_groups as implied_groups
from ._model import Experiment as Experiment
from ._model import ExperimentBatch as ExperimentBatch
from ._model import Params as Params
from ._model import Spec as Spec
from ._model import collective_experiment as collective_experiment
from ._model import experiment_batches as experiment_batches
from ._model import initial_values as initial_values
from ._model import lay_out as lay_out
from ._model import p2p_experiment as p2p_experiment
from ._model import predict as predict
from ._model import simulate_experiments as simulate_experiments
from .jobs import fit_jobs as fit_jobs
