"""Shared by the trace tests: shipped file names, a row of the m01 all_reduce table, and file writers."""

from netsim.data import trace_path
from netsim.traces import read_trace

GB, US = 1e9, 1e-6
ALLREDUCE = "m01_8x4090_2xEPYC7542_allreduce_p2p_on.txt"
P2P_ON = "m01_8x4090_2xEPYC7542_p2pBandwidthLatency_p2p_on.txt"
ROW = "     1048576        262144     float     sum      -1    216.1    4.85    8.49      0    217.2    4.83    8.45      0"

# nccl-tests 2.0 layout: no root column, the "error" magnitude column, an NCCL_DEBUG line between rows, N/A
OLD_NCCL_TESTS = """\
# nThread 1 nGpus 2 minBytes 8 maxBytes 64 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#
#                                                     out-of-place                       in-place
#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
\t   8             2   float     sum    9.33    0.00    0.00  0e+00    9.21    0.00    0.00  0e+00
host:123:456 [0] NCCL INFO Launch mode Parallel
          16             4   float     sum    9.40    0.00    0.00  0e+00    N/A     N/A     N/A    N/A
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.001
"""


def trace(name):
    return read_trace(trace_path(name))


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def edit(tmp_path, name, old, new, count=1):
    """A copy of shipped trace `name` with `old` replaced; returns (path, 1-based line of `old`)."""
    text = trace_path(name).read_text()
    assert old in text
    lineno = text[: text.index(old)].count("\n") + 1
    return write(tmp_path, name, text.replace(old, new, count)), lineno
