"""rocm-smi --showtopo and --shownodesbw output."""

import numpy as np
import pytest
from rocm_sample import ROCM_NODESBW
from trace_helpers import write

from netsim.traces import RocmMatrix, RocmNuma, TraceError, read_trace

# `rocm-smi --showtopo`: the weight, hops and link type matrices of ROCm/rocm_smi_lib#108 (4 GPUs behind
# PCIe, 3 hops apart; trailing blanks trimmed) with NUMA lines in the tab-separated form of
# ROCm/legacy-rocm-build#4740.
ROCM_SHOWTOPO = """\
======================= ROCm System Management Interface =======================
=========================== Weight between two GPUs ============================
       GPU0         GPU1         GPU2         GPU3
GPU0   0            52           52           52
GPU1   52           0            52           52
GPU2   52           52           0            52
GPU3   52           52           52           0

============================ Hops between two GPUs =============================
       GPU0         GPU1         GPU2         GPU3
GPU0   0            3            3            3
GPU1   3            0            3            3
GPU2   3            3            0            3
GPU3   3            3            3            0

========================== Link Type between two GPUs ==========================
       GPU0         GPU1         GPU2         GPU3
GPU0   0            PCIE         PCIE         PCIE
GPU1   PCIE         0            PCIE         PCIE
GPU2   PCIE         PCIE         0            PCIE
GPU3   PCIE         PCIE         PCIE         0

================================== Numa Nodes ==================================
GPU[0]\t\t: (Topology) Numa Node: 0
GPU[0]\t\t: (Topology) Numa Affinity: 0
GPU[1]\t\t: (Topology) Numa Node: 0
GPU[1]\t\t: (Topology) Numa Affinity: 0
GPU[2]\t\t: (Topology) Numa Node: 1
GPU[2]\t\t: (Topology) Numa Affinity: 1
GPU[3]\t\t: (Topology) Numa Node: 1
GPU[3]\t\t: (Topology) Numa Affinity: 1
============================= End of ROCm SMI Log ==============================
"""


def test_rocm_smi_showtopo(tmp_path):
    t = read_trace(write(tmp_path, "topo.txt", ROCM_SHOWTOPO))
    weight, hops, link, numa = t.tables
    assert [type(x) for x in t.tables] == [RocmMatrix, RocmMatrix, RocmMatrix, RocmNuma]
    assert (weight.kind, hops.kind, link.kind) == ("weight", "hops", "link_type") and weight.line == 3
    np.testing.assert_array_equal(weight.values, 52 * (1 - np.eye(4)))
    np.testing.assert_array_equal(hops.values, 3 * (1 - np.eye(4)))
    assert link.cells[0] == ("0", "PCIE", "PCIE", "PCIE") and link.devices == ("GPU0", "GPU1", "GPU2", "GPU3")
    assert numa.node.tolist() == [0, 0, 1, 1] and numa.affinity.tolist() == [0, 0, 1, 1] and numa.line == 24
    assert t.rocm("hops") == (hops,)


def test_rocm_smi_shownodesbw(tmp_path):
    (bw,) = read_trace(write(tmp_path, "bw.txt", ROCM_NODESBW)).rocm()
    assert bw.kind == "bandwidth" and bw.n == 8
    assert (bw.minimum[0, 1], bw.values[0, 1], bw.values[0, 6]) == (50e9, 200e9, 100e9)
    assert bw.values[0, 3] == 0 and np.isnan(bw.values[0, 0])
    path = write(tmp_path, "bw2.txt", ROCM_NODESBW.replace("GPU1 50000-200000", "GPU1 50000~200000"))
    with pytest.raises(TraceError, match=r"^bw2\.txt:5: rocm-smi bandwidth: cannot read '50000~200000'"):
        read_trace(path)


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        # without its banner, a rocm-smi matrix is named for what it is, not misread as nvidia-smi topo -m
        (
            "\n".join(ROCM_SHOWTOPO.splitlines()[2:7]),
            2,
            "GPU0 to itself is '0', expected X: not `nvidia-smi topo -m` output \\(rocm-smi matrices are read "
            "under their '=== Weight between two GPUs ===' \\(Hops, Link Type, Bandwidth\\) titles\\)",
        ),
        (
            "\n".join(ROCM_SHOWTOPO.splitlines()[:5]),
            5,
            "rocm-smi 'Weight between two GPUs' matrix ends after 2 of 4",
        ),
        (
            ROCM_SHOWTOPO.replace(
                "GPU2   3            3            0            3", "GPU2   3            3            0"
            ),
            13,
            "row GPU2 has 3 cells, the header has 4",
        ),
        (
            ROCM_SHOWTOPO.replace(
                "GPU[3]\t\t: (Topology) Numa Node: 1", "GPU[3]\t\t: (Topology) Numa Node: ?"
            ),
            30,
            "cannot read 'GPU\\[3\\]",
        ),
    ],
)
def test_rocm_smi_errors(tmp_path, text, line, message):
    with pytest.raises(TraceError, match=f"^r\\.txt:{line}: .*{message}"):
        read_trace(write(tmp_path, "r.txt", text + "\n"))
