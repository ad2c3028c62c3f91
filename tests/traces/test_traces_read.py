"""read_trace over every format: every shipped trace parses; malformed input of any format names the file and line;
encodings; values outside netsim's limits are refused by the reader."""

import re

import numpy as np
import pytest
from trace_helpers import ALLREDUCE, GB, OLD_NCCL_TESTS, P2P_ON, ROW, US, edit, trace

from netsim.data import TRACES as SHIPPED
from netsim.data import trace_path
from netsim.traces import NcclTable, P2PMatrix, TraceError, read_trace


def test_every_shipped_file_parses():
    files = [trace_path(name) for name in SHIPPED]
    assert len(files) >= 12
    for path in files:
        t = read_trace(path)
        assert t.source == path.name and t.tables, path.name
        if path.suffix == ".txt":
            assert t.machine, path.name  # every measured file names its machine


def test_m02_matrix_then_allreduce():
    t = trace("m02_4x4090_pptest_p2p_allreduce.txt")
    assert [type(x) for x in t.tables] == [P2PMatrix, NcclTable]
    np.testing.assert_allclose(t.matrix("bidirectional", p2p=True).values[0, 1], 49.78 * GB)
    (table,) = t.nccl()
    assert (table.op, table.n_gpus, table.size.shape) == ("all_reduce", 4, (21,))
    assert table.size[0] == 1024 and table.size[-1] == 2**30
    np.testing.assert_allclose(table.time[-1], [63624 * US, 63640 * US])
    np.testing.assert_allclose(table.busbw[-1, 0], 25.31 * GB)
    assert "all_reduce_perf -b 1024" in table.title


@pytest.mark.parametrize(
    ("name", "old", "new", "message"),
    [
        (ALLREDUCE, ROW, ROW[:60], "row has 6 columns"),  # cut inside a number: "216."
        (ALLREDUCE, ROW, ROW.replace("216.1", "21x.1"), "time \\(out-of-place\\): cannot read '21x.1'"),
        (ALLREDUCE, ROW, ROW + "   7", "row has 14 columns"),
        (ALLREDUCE, ROW, ROW.replace("262144", "262144.5"), "count: cannot read"),
        (
            P2P_ON,
            "     3  25.60  25.93  25.53 938.42  22.14  22.30  21.70  22.45 \n",
            "",
            "expected matrix row 3",
        ),
        (
            P2P_ON,
            "     3  25.60  25.93  25.53 938.42  22.14  22.30  21.70  22.45 ",
            "     3  25.60  25.93  25.53 938.42  22.14  22.30  21.70",
            "row 3 has 7 values",
        ),
        (
            P2P_ON,
            "   4   1.69   1.69   1.69   1.64",
            "   4   1.69   1.69   -   1.64",
            "column 2: cannot read '-'",
        ),
        (
            "m01_8x4090_2xEPYC7542_topo.txt",
            "GPU5    SYS     SYS     SYS     SYS     SYS      X      SYS     SYS",
            "GPU5    SYS     SYS     SYS     SYS     SYS      X      FOO     SYS",
            "unknown link kind 'FOO'",
        ),
        (
            P2P_ON,
            "   D\\D     0      1      2      3      4      5      6      7 \n     0 912.13",
            "   D\\D     0      1      2      3      4      5      7 \n     0 912.13",
            "expected a matrix header",
        ),
    ],
)
def test_malformed_raises_with_file_and_line(tmp_path, name, old, new, message):
    path, lineno = edit(tmp_path, name, old, new)
    with pytest.raises(TraceError, match=f"^{re.escape(name)}:{lineno}: .*{message}"):
        read_trace(path)


def test_header_without_rows_and_file_without_tables(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("\n".join(OLD_NCCL_TESTS.splitlines()[:5]) + "\n# Avg bus bandwidth : 1\n")
    with pytest.raises(TraceError, match=r"^a\.txt:6: nccl-tests header with no data rows"):
        read_trace(path)
    path.write_text("just prose\n")
    with pytest.raises(TraceError, match=r"^a\.txt:1: no known table"):
        read_trace(path)
    bad = tmp_path / "b.csv"
    bad.write_text("# comment\na,b\n1,2\n3\n")
    with pytest.raises(TraceError, match=r"^b\.csv:4: CSV row has 1 cells, the header has 2"):
        read_trace(bad)


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32"])
def test_utf16_utf32_and_bom_traces_read_like_utf8(tmp_path, encoding):
    """Issue: a UTF-16 trace was "no known table". Every text reader decodes as Scenario.load does."""
    text = trace_path(ALLREDUCE).read_text()
    path = tmp_path / ALLREDUCE
    path.write_bytes(text.encode(encoding))
    got, want = read_trace(path), trace(ALLREDUCE)
    assert got.header == want.header and got.machine == want.machine  # a BOM does not hide the first line
    np.testing.assert_array_equal(got.nccl()[0].time, want.nccl()[0].time)


def test_undecodable_text_is_said_not_misread(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes("Ж prose\n".encode("utf-16-le"))  # no BOM, and a first character json cannot place
    with pytest.raises(TraceError, match=r"^t\.txt:\d+: no known table .* NUL characters"):
        read_trace(path)
