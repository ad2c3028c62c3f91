"""Fitting link parameters to measured traces with Optax."""

from ._store import load_trace as load_trace
from ._store import save_trace as save_trace
from ._traces import CsvTable as CsvTable
from ._traces import NcclTable as NcclTable
from ._traces import P2PMatrix as P2PMatrix
from ._traces import TopoTable as TopoTable
from ._traces import Trace as Trace
from ._traces import TraceError as TraceError
from ._traces import read_trace as read_trace
