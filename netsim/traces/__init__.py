"""Readers for measured traces: nccl-tests (and rccl-tests) tables, CUDA p2pBandwidthLatencyTest matrices,
`nvidia-smi topo -m`, `rocm-smi --showtopo/--shownodesbw` and `rocm_bandwidth_test` output and commented
CSV files, as they appear in logs, READMEs and notes.

    trace = netsim.traces.read_trace("m01_..._allreduce_p2p_on.txt")   # every known table in the file
    (table,) = trace.nccl("all_reduce")

`read_csv(path)` reads one commented CSV table of any file name (job traces, DeepShare's tables).
`read_trace(path)` finds every known table in a file (UTF-8, UTF-16 or UTF-32 text), wherever it sits
between prose, command lines and other tools' output. Values are converted to SI on reading (bytes, s,
bytes/s; nccl-tests and the CUDA samples both mean 1e9 bytes by "GB") and checked against netsim's limits.
A table that starts but cannot be read to its end raises `TraceError` naming the file and line: a trace
is never read in part. Rows that read but cannot be trusted are kept and marked (`NcclTable.usable`,
`NcclTable.problems`); lines skipped inside a table are said in `NcclTable.notes`. See
docs/calibration.md ("Traces").

One module per format (`_nccl`, `_p2p`, `_nvsmi`, `_rocm`, `_rbt`, `_csv`) over one reader core (`_core`);
`_nvsmi` is also the parser `netsim.topology` builds PCIe servers from, and `_rocm` reads the blocks
`netsim.topology.rocm_server` builds AMD servers from.
"""

from ._core import TraceError as TraceError
from ._csv import CsvTable as CsvTable
from ._csv import read_csv as read_csv
from ._hdf5 import load_trace as load_trace
from ._hdf5 import save_trace as save_trace
from ._nccl import NcclDevice as NcclDevice
from ._nccl import NcclTable as NcclTable
from ._nvsmi import TopoMatrix as TopoMatrix
from ._nvsmi import TopoTable as TopoTable
from ._nvsmi import parse_nvidia_smi_topo as parse_nvidia_smi_topo
from ._p2p import P2PMatrix as P2PMatrix
from ._rbt import RbtMatrix as RbtMatrix
from ._rocm import RocmMatrix as RocmMatrix
from ._rocm import RocmNuma as RocmNuma
from ._trace import Trace as Trace
from ._trace import check_trace as check_trace
from ._trace import read_trace as read_trace
