"""rocm_bandwidth_test output: read to SI values, or refused naming the format."""

import numpy as np
import pytest
from test_traces_hdf5 import _assert_same
from trace_helpers import write

from netsim.traces import RbtMatrix, TraceError, load_trace, read_trace, save_trace

# `rocm-bandwidth-test` 2.6.0 on an EPYC 7542 with two Radeon RX 7900 XTX, verbatim from
# github.com/ROCm/legacy-rocm-build/issues/2253 ("7900XTX cannot pass rocm-bandwidth-test"): the two
# GPUs cannot reach each other (Inter-Device Access 0), so only host <-> GPU copies are measured.
RBT_7900XTX = """\
................
          RocmBandwidthTest Version: 2.6.0

          Launch Command is: /opt/rocm/bin/rocm-bandwidth-test (rocm_bandwidth -a + rocm_bandwidth -A)


          Device: 0,  AMD EPYC 7542 32-Core Processor
          Device: 1,  Radeon RX 7900 XTX,  GPU-XX,  83:0.0
          Device: 2,  Radeon RX 7900 XTX,  GPU-XX,  03:0.0

          Inter-Device Access

          D/D       0         1         2

          0         1         1         1

          1         1         1         0

          2         1         0         1


          Inter-Device Numa Distance

          D/D       0         1         2

          0         0         20        20

          1         20        0         N/A

          2         20        N/A       0


          Unidirectional copy peak bandwidth GB/s

          D/D       0           1           2

          0         N/A         28.411      28.410

          1         29.013      649.528     N/A

          2         29.016      N/A         636.462


          Bidirectional copy peak bandwidth GB/s

          D/D       0           1           2

          0         N/A         48.226      48.102

          1         48.226      N/A         N/A

          2         48.102      N/A         N/A
"""


def test_rocm_bandwidth_test_tables(tmp_path):
    t = read_trace(write(tmp_path, "rbt.txt", RBT_7900XTX))
    assert [type(x) for x in t.tables] == [RbtMatrix] * 4
    access, numa, uni, bid = t.tables
    assert [x.kind for x in t.tables] == ["access", "numa_distance", "unidirectional", "bidirectional"]
    assert (uni.statistic, access.statistic, uni.line, uni.n) == ("peak", "", 33, 3)
    assert uni.devices == ("AMD EPYC 7542 32-Core Processor", "Radeon RX 7900 XTX", "Radeon RX 7900 XTX")
    assert uni.gpu.tolist() == [False, True, True]
    np.testing.assert_array_equal(access.values, [[1, 1, 1], [1, 1, 0], [1, 0, 1]])
    assert numa.values[0, 1] == 20 and np.isnan(numa.values[1, 2])
    # GB/s as 1e9 bytes/s (rocm_bandwidth_test_trans.cpp divides by 1000^3); N/A: no such copy
    assert (uni.values[1, 0], uni.values[0, 2], uni.values[1, 1]) == (29.013e9, 28.410e9, 649.528e9)
    assert np.isnan(uni.values[0, 0]) and np.isnan(uni.values[1, 2])
    assert bid.values[0, 1] == bid.values[1, 0] == 48.226e9 and bid.cells[2] == ("48.102", "N/A", "N/A")
    assert uni.gpu_values().shape == (2, 2) and np.isnan(uni.gpu_values()[0, 1])
    assert t.rbt("bidirectional") == (bid,)
    save_trace(t, tmp_path / "rbt.h5")
    _assert_same(t, load_trace(tmp_path / "rbt.h5"))


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        # a row cut short
        (
            RBT_7900XTX.replace("1         29.013      649.528     N/A", "1         29.013      649.528"),
            39,
            "row 1 has 2 cells, the header has 3",
        ),
        # the file ends inside a matrix
        (RBT_7900XTX[: RBT_7900XTX.index("          2         48.102")], 51, "expected row 2 of 3"),
        (RBT_7900XTX.replace("29.013", "29,013"), 39, "cannot read '29,013' as a number"),
        # the plugin layout of later versions (its title line as the tool prints it): named, not dropped
        (
            "          Bidirectional copy peak bandwidth GB/s [Local read / Remote write] (GPU-Executor: GFX)\n"
            "            SRC\\\\DST    CPU 00    GPU 00\n",
            1,
            "rocm_bandwidth_test's plugin table layout",
        ),
    ],
)
def test_rocm_bandwidth_test_errors(tmp_path, text, line, message):
    with pytest.raises(TraceError, match=f"^r\\.txt:{line}: .*{message}"):
        read_trace(write(tmp_path, "r.txt", text))
