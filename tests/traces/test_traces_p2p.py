"""p2pBandwidthLatencyTest matrices: values read by eye from the files; cut or untitled matrices raise."""

import re

import numpy as np
import pytest
from trace_helpers import ALLREDUCE, GB, P2P_ON, US, trace, write

from netsim.data import trace_path
from netsim.traces import TraceError, read_trace


def test_m01_p2p_matrices():
    on = trace("m01_8x4090_2xEPYC7542_p2pBandwidthLatency_p2p_on.txt")
    assert len(on.matrices()) == 9 and all(m.values.shape == (8, 8) for m in on.matrices())
    np.testing.assert_array_equal(on.matrix("connectivity").values, np.ones((8, 8)))
    uni = on.matrix("unidirectional", p2p=True)
    assert uni.method == "writes"
    np.testing.assert_allclose(uni.values[0, 1], 25.60 * GB)
    np.testing.assert_allclose(uni.values[4, 0], 22.41 * GB)
    np.testing.assert_allclose(on.matrix("bidirectional", p2p=True).values[4, 0], 41.60 * GB)
    np.testing.assert_allclose(on.matrix("bidirectional", p2p=False).values[7, 7], 923.41 * GB)
    np.testing.assert_allclose(on.matrix("latency", p2p=True, clock="gpu").values[0, 1], 1.24 * US)
    np.testing.assert_allclose(on.matrix("latency", p2p=True, clock="cpu").values[7, 7], 3.58 * US)
    np.testing.assert_allclose(on.matrix("latency", p2p=False, clock="gpu").values[2, 0], 11.33 * US)

    off = trace("m01_8x4090_2xEPYC7542_p2pBandwidthLatency_p2p_off.txt")
    np.testing.assert_array_equal(off.matrix("connectivity").values, np.eye(8))
    np.testing.assert_allclose(off.matrix("unidirectional", p2p=False).values[0, 1], 18.77 * GB)
    np.testing.assert_allclose(off.matrix("latency", p2p=False, clock="gpu").values[0, 1], 20.26 * US)
    np.testing.assert_allclose(off.matrix("latency", p2p=True, clock="cpu").values[6, 0], 20.68 * US)


def test_m08_tabs_topo_and_matrices():
    t = trace("m08_4xA100PCIe_nvlinkpairs_p2p.txt")
    assert [type(x).__name__ for x in t.tables[:2]] == ["TopoTable", "P2PMatrix"]
    np.testing.assert_array_equal(
        t.matrix("connectivity").values, [[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 1, 1]]
    )
    uni = t.matrix("unidirectional", p2p=True).values
    np.testing.assert_allclose([uni[0, 0], uni[0, 1], uni[3, 2]], np.array([1502.40, 275.07, 274.11]) * GB)
    np.testing.assert_allclose(t.matrix("bidirectional", p2p=True).values[2, 3], 517.45 * GB)
    np.testing.assert_allclose(t.matrix("latency", p2p=True, clock="cpu").values[2, 3], 1.63 * US)


def test_connectivity_is_the_one_connectivity_matrix_as_booleans():
    pairs = [[True, True, False, False], [True, True, False, False], [False, False, True, True]]
    assert trace("m08_4xA100PCIe_nvlinkpairs_p2p.txt").connectivity().tolist() == [*pairs, pairs[2]]
    assert trace(P2P_ON).connectivity().dtype == bool
    assert trace(ALLREDUCE).connectivity() is None  # an nccl-tests file has none


def test_m09_partial_test_output():
    t = trace("m09_8xTITANRTX_lambda_p2p.txt")
    kinds = [(m.kind, m.p2p, m.clock) for m in t.matrices()]
    assert kinds == [
        ("connectivity", None, ""),
        ("unidirectional", False, ""),
        ("unidirectional", True, ""),
        ("bidirectional", False, ""),
        ("latency", False, "gpu"),
    ]
    np.testing.assert_allclose(t.matrix("unidirectional", p2p=False).values[0, 1], 9.93 * GB)
    np.testing.assert_allclose(t.matrix("latency").values[0, 1], 25.52 * US)


def test_file_cut_inside_a_matrix(tmp_path):
    lines = trace_path(P2P_ON).read_text().splitlines()
    path = tmp_path / "cut.txt"
    path.write_text("\n".join(lines[:30]))  # ends after row 3 of the P2P=Enabled unidirectional matrix
    with pytest.raises(TraceError, match=r"^cut\.txt:30: matrix ends after 4 of 8 rows"):
        read_trace(path)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        # a matrix under a title the reader does not know was skipped whole
        (
            "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)",
            "Unidirectional P2P Bandwith Matrix",
            "matrix header with no known title above it \\(got 'Unidirectional P2P Bandwith Matrix'\\)",
        ),
        # fewer rows than columns, then a blank line and the next matrix
        (
            "     7  20.53  20.14  20.12  20.51  18.17  19.11  18.74 923.46 \n",
            "\n",
            "matrix ends after 7 of 8 rows",
        ),
    ],
)
def test_truncated_or_untitled_p2p_matrix(tmp_path, old, new, message):
    text = trace_path(P2P_ON).read_text()
    assert old in text
    lineno = text[: text.index(old)].count("\n") + 1 + (old[0] != " ")  # a title: the error is on the header
    path = write(tmp_path, P2P_ON, text.replace(old, new, 1))
    with pytest.raises(TraceError, match=f"^{re.escape(P2P_ON)}:{lineno}: .*{message}"):
        read_trace(path)


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        ("1e310", r"must be a finite number"),  # beyond float64: inf, refused rather than fitted
        ("1e25", r"must be < 1e\+15 s \(netsim's limit\), got 1e\+19"),  # us
        ("0.00", r"must be > 0"),
    ],
)
def test_values_outside_netsims_limits_are_refused_by_the_reader(tmp_path, cell, message):
    """The Python API gets the checks the CLI made (they lived only in `netsim calibrate`)."""
    old = "   4   1.69   1.69   1.69   1.64"  # row 4 of the P2P=Enabled latency (GPU) matrix
    text = trace_path(P2P_ON).read_text()
    header = text[: text.index(old)].count("\n")  # 1-based line of the matrix's "GPU 0 1 ..." header
    path = write(tmp_path, P2P_ON, text.replace(old, old.replace("1.69", cell, 1), 1))
    pattern = f"^{re.escape(P2P_ON)}:{header - 4}: latency matrix, cell \\[4, 0\\]: {message}"
    with pytest.raises(TraceError, match=pattern):
        read_trace(path)
