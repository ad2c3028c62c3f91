"""Trace readers: every shipped trace parses with the right shapes and values read by eye from the files;
malformed input raises with file and line; variants seen in the wild parse; HDF5 round trip."""

import dataclasses
import os
import re

import numpy as np
import pytest
from netsim.calibrate import CsvTable, NcclTable, P2PMatrix, TraceError, load_trace, read_trace, save_trace

from netsim.data import TRACES as SHIPPED
from netsim.data import trace_path

GB, US = 1e9, 1e-6


def trace(name):
    return read_trace(trace_path(name))


def test_every_shipped_file_parses():
    files = [trace_path(name) for name in SHIPPED]
    assert len(files) >= 12
    for path in files:
        t = read_trace(path)
        assert t.source == path.name and t.tables, path.name
        if path.suffix == ".txt":
            assert t.machine, path.name  # every measured file names its machine


def test_m01_allreduce():
    t = trace("m01_8x4090_2xEPYC7542_allreduce_p2p_on.txt")
    (table,) = t.nccl("all_reduce")
    assert (table.n_gpus, table.groups) == (8, ("out-of-place", "in-place"))
    assert table.size.shape == (25,) and table.time.shape == (25, 2)
    np.testing.assert_array_equal(table.size, 8 * 2 ** np.arange(25))
    assert (
        table.count[0] == 2 and table.dtype[0] == "float" and table.redop[-1] == "sum" and table.root[3] == -1
    )
    row = int(
        np.flatnonzero(table.size == 1048576)[0]
    )  # "1048576 262144 float sum -1 216.1 4.85 8.49 0 217.2 ..."
    np.testing.assert_allclose(table.time[row], [216.1 * US, 217.2 * US])
    np.testing.assert_allclose(table.column("algbw")[row], 4.85 * GB)
    np.testing.assert_allclose(table.column("busbw", "in-place")[row], 8.45 * GB)
    np.testing.assert_allclose(table.time[-1], [11382 * US, 11380 * US])
    np.testing.assert_allclose(table.busbw[-1], [20.64 * GB, 20.64 * GB])
    assert np.all(table.wrong == 0)
    np.testing.assert_allclose(table.avg_busbw, 6.11168 * GB)
    assert table.line == 19
    assert t.header[0].startswith("# SOURCE:") and "tinygrad" in t.machine


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


def test_topo_blocks_parsed_by_netsim_topology():
    (topo,) = trace("m01_8x4090_2xEPYC7542_topo.txt").topo()
    assert topo.devices == (*(f"GPU{i}" for i in range(8)), *(f"NIC{i}" for i in range(4)))
    assert topo.line == 6 and "NIC3: mlx5_3" in topo.text  # the legend travels with the block
    m = topo.matrix
    assert (m.kind("GPU0", "GPU7"), m.kind("GPU6", "NIC0"), m.kind("NIC0", "NIC1")) == ("SYS", "PHB", "PIX")
    assert m.numa_affinity["GPU4"] == 7 and m.nic_names["NIC2"] == "mlx5_2"
    (quoted,) = trace("m05_8xA40_nv4_node_sys_and_dgxA100_allreduce.txt").topo()  # "#"-quoted, "..." elided
    assert quoted.line == 5 and quoted.matrix.gpus == tuple(f"GPU{i}" for i in range(8))
    assert (quoted.matrix.kind("GPU2", "GPU3"), quoted.matrix.kind("GPU1", "GPU2")) == ("NV4", "NODE")
    (tabs,) = trace("m08_4xA100PCIe_nvlinkpairs_p2p.txt").topo()
    assert tabs.matrix.kind("GPU0", "GPU1") == "NV12" and tabs.matrix.cpu_affinity["GPU3"] == "72-95"


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


def test_m05_four_tables_with_their_commands():
    tables = trace("m05_8xA40_nv4_node_sys_and_dgxA100_allreduce.txt").nccl()
    assert [t.n_gpus for t in tables] == [2, 4, 2, 4]
    assert all(t.op == "all_reduce" and t.size.shape == (4,) for t in tables)
    assert "NVLink pair" in tables[0].title and "DGX A100" in tables[3].title
    np.testing.assert_allclose(tables[0].time[0, 0], 22661 * US)
    np.testing.assert_allclose(tables[3].time[2], [27672 * US, 39252 * US])
    np.testing.assert_allclose(
        [t.avg_busbw for t in tables], np.array([47.4509, 1.40216, 3.85845, 222.066]) * GB
    )


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


def test_csv_files():
    (links,) = trace("chiplet_and_scaleup_links.csv").tables
    assert isinstance(links, CsvTable) and links.columns[3] == "value_GBps" and len(links.rows) == 24
    assert links.column("value_GBps")[0] == "200"
    (thp,) = trace("sched_deepshare_isolated_thp.csv").tables
    assert thp.rows[0] == ("MobileNetV3,2,2", "677.6") and len(thp.rows) == 36
    (ratio,) = trace("sched_deepshare_shared_thp_ratio.csv").tables
    assert len(ratio.columns) == 37 and len(ratio.rows) == 36
    (spipe,) = trace("train_spipe_expected.csv").tables
    assert spipe.columns[-2] == "elapsed_time_ms" and spipe.rows[8][-2] == "CPU OOM"


# --- variants seen in the wild --------------------------------------------------------------------

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


def test_old_nccl_tests_layout_logs_and_na(tmp_path):
    """nccl-tests 2.0 headers (no root, "error" column), NCCL_DEBUG lines between rows, N/A cells, tabs."""
    path = tmp_path / "old_all_gather_perf.log"
    path.write_text(OLD_NCCL_TESTS)
    (table,) = read_trace(path).tables
    assert (table.op, table.n_gpus) == ("all_gather", 2)  # op from the file name; nGpus x nThread
    np.testing.assert_array_equal(table.size, [8, 16])
    np.testing.assert_array_equal(table.root, [-1, -1])
    np.testing.assert_allclose(table.time[0], [9.33 * US, 9.21 * US])
    assert np.isnan(table.time[1, 1]) and table.wrong[0, 0] == 0


def test_mpi_tagged_lines_and_crlf(tmp_path):
    text = "".join(f"[1,0]<stdout>:{line}\r\n" for line in OLD_NCCL_TESTS.splitlines())
    path = tmp_path / "x.txt"
    path.write_bytes(text.encode())
    (table,) = read_trace(path).tables
    np.testing.assert_array_equal(table.size, [8, 16])


# --- malformed input ------------------------------------------------------------------------------


def _edit(tmp_path, name, old, new, count=1):
    text = trace_path(name).read_text()
    assert old in text
    lineno = text[: text.index(old)].count("\n") + 1
    path = tmp_path / name
    path.write_text(text.replace(old, new, count))
    return path, lineno


ALLREDUCE = "m01_8x4090_2xEPYC7542_allreduce_p2p_on.txt"
P2P_ON = "m01_8x4090_2xEPYC7542_p2pBandwidthLatency_p2p_on.txt"
ROW = "     1048576        262144     float     sum      -1    216.1    4.85    8.49      0    217.2    4.83    8.45      0"


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
    path, lineno = _edit(tmp_path, name, old, new)
    with pytest.raises(TraceError, match=f"^{re.escape(name)}:{lineno}: .*{message}"):
        read_trace(path)


def test_file_cut_inside_a_matrix(tmp_path):
    lines = trace_path(P2P_ON).read_text().splitlines()
    path = tmp_path / "cut.txt"
    path.write_text("\n".join(lines[:30]))  # ends after row 3 of the P2P=Enabled unidirectional matrix
    with pytest.raises(TraceError, match=r"^cut\.txt:30: matrix ends after 4 of 8 rows"):
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


# --- HDF5 -----------------------------------------------------------------------------------------


def _assert_same(a, b):
    assert (a.source, a.header, a.machine) == (b.source, b.header, b.machine)
    assert len(a.tables) == len(b.tables)
    for x, y in zip(a.tables, b.tables, strict=True):
        assert type(x) is type(y)
        for field in dataclasses.fields(x):
            u, v = getattr(x, field.name), getattr(y, field.name)
            if isinstance(u, np.ndarray):
                assert u.dtype == v.dtype and np.array_equal(u, v, equal_nan=True), field.name
            else:
                assert type(u) is type(v) and (u == v or (u != u and v != v)), (field.name, u, v)


def test_hdf5_round_trip_every_file(tmp_path):
    for path in map(trace_path, SHIPPED):
        original = read_trace(path)
        save_trace(original, tmp_path / "t.h5")
        _assert_same(original, load_trace(tmp_path / "t.h5"))
    assert os.listdir(tmp_path) == ["t.h5"]  # no temporary files left behind


def test_hdf5_write_is_atomic(tmp_path):
    good = read_trace(trace_path(ALLREDUCE))
    save_trace(good, tmp_path / "t.h5")
    broken = dataclasses.replace(
        good, tables=(*good.tables, dataclasses.replace(good.tables[0], title=object()))
    )
    with pytest.raises(TypeError):
        save_trace(broken, tmp_path / "t.h5")
    _assert_same(good, load_trace(tmp_path / "t.h5"))  # the old file survives a failed write
    assert os.listdir(tmp_path) == ["t.h5"]


def test_load_rejects_other_hdf5(tmp_path):
    import h5py

    with h5py.File(tmp_path / "other.h5", "w") as f:
        f["x"] = 1
    with pytest.raises(TraceError, match=r"other\.h5: not a netsim trace file"):
        load_trace(tmp_path / "other.h5")
    with pytest.raises(TraceError, match="cannot read as HDF5"):
        load_trace(tmp_path / "missing.h5")


# --- readers that never misread -------------------------------------------------------------------


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_indented_header_is_a_header(tmp_path):
    """A log pasted into markdown with every line indented: the table is read, and the next table keeps
    its own op and rank count (before, the indented one was skipped and its lines fed the next one)."""
    indented = "".join(f"    {line}\n" for line in OLD_NCCL_TESTS.splitlines())
    rest = "./build/all_reduce_perf -b 8 -e 16 -g 4\n" + OLD_NCCL_TESTS.replace("nGpus 2", "nGpus 4")
    path = _write(tmp_path, "notes.md", "./build/all_gather_perf -b 8 -e 16 -g 2\n" + indented + rest)
    first, second = read_trace(path).nccl()
    assert (first.op, first.n_gpus, second.op, second.n_gpus) == ("all_gather", 2, "all_reduce", 4)
    np.testing.assert_allclose(first.time[0], [9.33 * US, 9.21 * US])
    assert first.avg_busbw == pytest.approx(0.001 * GB) and first.groups == ("out-of-place", "in-place")


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
    path = _write(tmp_path, P2P_ON, text.replace(old, new, 1))
    with pytest.raises(TraceError, match=f"^{re.escape(P2P_ON)}:{lineno}: .*{message}"):
        read_trace(path)


def test_blank_lines_inside_a_table_are_read_through(tmp_path):
    text = trace_path(ALLREDUCE).read_text().replace(ROW + "\n", ROW + "\n\n\n", 1)
    (table,) = read_trace(_write(tmp_path, "a.txt", text)).nccl()
    assert table.size.shape == (25,) and table.size[-1] == 134217728 and not table.problems


@pytest.mark.parametrize(
    ("new", "message"),
    [
        (
            ROW + "\nWARNING: GPU 3 throttled",
            "stray line inside an nccl-tests table \\(rows follow on line \\d+\\): "
            "'WARNING: GPU 3 throttled'",
        ),
        (ROW.replace("     1048576", "   1,048,576"), "size '1,048,576' \\(thousands separators\\)"),
        (ROW.replace("     1048576", "   1048576.0"), "size '1048576.0' \\(not an integer\\)"),
    ],
)
def test_garbage_rows_raise(tmp_path, new, message):
    text = trace_path(ALLREDUCE).read_text()
    lineno = text[: text.index(ROW)].count("\n") + 1 + (1 if new.startswith(ROW + "\n") else 0)
    path = _write(tmp_path, ALLREDUCE, text.replace(ROW, new, 1))
    with pytest.raises(TraceError, match=f"^{re.escape(ALLREDUCE)}:{lineno}: .*{message}"):
        read_trace(path)


def test_bad_values_are_kept_marked_and_counted(tmp_path):
    """Policy: rows that read but cannot be trusted stay in the table with usable False and one problem
    line each (file:line, group, why); nothing is dropped silently."""
    text = trace_path(ALLREDUCE).read_text()
    lines = text.splitlines()
    first = lines.index(
        next(x for x in lines if x.strip().startswith("8 "))
    )  # 0-based index of the size-8 row
    edits = {
        0: ("38.82", "-1.00"),  # negative time (out-of-place)
        1: ("38.12", "0.00"),  # zero time (in-place)
        2: ("0.00      0", "0.00      3"),
    }  # #wrong = 3 (out-of-place)
    for k, (old, new) in edits.items():
        lines[first + k] = lines[first + k].replace(old, new, 1)
    lines[first + 3] = re.sub(
        r"(\s)(\S+)(\s+\S+\s+\S+\s+\S+\s*)$", r"\1inf\3", lines[first + 3]
    )  # in-place time
    lines.insert(first + 5, lines[first + 4])  # size 128 printed twice
    (table,) = read_trace(_write(tmp_path, "bad.txt", "\n".join(lines) + "\n")).nccl()
    assert table.size.shape == (26,)
    assert table.usable.shape == (26, 2) and (~table.usable).sum() == len(table.problems) == 6
    row = lambda k: f"bad.txt:{first + k + 1}: "
    assert table.problems == (
        row(0) + "out-of-place: time -1 us is not a positive finite number",
        row(1) + "in-place: time 0 us is not a positive finite number",
        row(2) + "out-of-place: #wrong = 3",
        row(3) + "in-place: time inf us is not a positive finite number",
        row(5) + f"out-of-place: size 128 repeats line {first + 5}",
        row(5) + f"in-place: size 128 repeats line {first + 5}",
    )
    assert table.usable[4].all() and not table.usable[5].any()
    assert np.isinf(table.time[3, 1]) and table.time[0, 0] == -1e-6  # values are kept as printed


def test_old_error_column_is_a_magnitude_not_a_count(tmp_path):
    (table,) = read_trace(_write(tmp_path, "x.txt", OLD_NCCL_TESTS.replace("0e+00", "4e-07"))).nccl()
    assert table.problems == ("x.txt:8: in-place: time is N/A or NaN",)  # the N/A in-place row only


# rccl-tests: the lines above the table as in ROCm/container-toolkit#77 (a "rccl-tests: Version" line
# between the "#" lines, AMD devices with PCI domain bus ids); rows and footer of broadcast_perf as in
# ROCm/rccl#2075 (root 0, the "Errors with asterisks" footer line), one "#wrong" cell starred.
RCCL_TESTS = """\
# Collective test starting: broadcast_perf
# nThread 1 nGpus 2 minBytes 262144 maxBytes 1048576 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
rccl-tests: Version develop:5272cd1
# Using devices
#  Rank  0 Group  0 Pid 2517106 on    gpuf2b8 device  0 [0000:05:00] AMD Instinct MI300X
#  Rank  1 Group  0 Pid 2517106 on    gpuf2b8 device  1 [0000:29:00] AMD Instinct MI300X
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
      262144         65536     float    none       0    43.00    6.10    6.10      0    42.86    6.12    6.12      0
      524288        131072     float    none       0    84.62    6.20    6.20      0    93.74    5.59    5.59     1*
     1048576        262144     float    none       0    151.9    6.90    6.90      0    149.8    7.00    7.00      0
# Errors with asterisks indicate errors that have exceeded the maximum threshold.
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 3.41227
#
# Collective test concluded: broadcast_perf
"""


def test_rccl_tests_table(tmp_path):
    (table,) = read_trace(_write(tmp_path, "rccl.log", RCCL_TESTS)).tables
    assert (table.op, table.n_gpus, table.root.tolist()) == ("broadcast", 2, [0, 0, 0])
    assert table.devices[1] == (1, 0, 2517106, "gpuf2b8", 1, "0000:29:00", "AMD Instinct MI300X")
    assert table.avg_busbw == pytest.approx(3.41227 * GB)  # read past the "Errors with asterisks" line
    assert table.problems == ("rccl.log:13: in-place: #wrong = 1",)
    np.testing.assert_allclose(table.time[2], [151.9 * US, 149.8 * US])


def test_command_line_environment_and_sections():
    tables = trace("m05_8xA40_nv4_node_sys_and_dgxA100_allreduce.txt").nccl()
    assert [t.p2p for t in tables] == [None, False, False, None]
    assert [t.visible_devices for t in tables] == [(0, 1), (0, 1, 6, 7), (1, 2), None]
    assert tables[1].env == {"CUDA_VISIBLE_DEVICES": "0,1,6,7", "NCCL_P2P_DISABLE": "1"}
    assert [t.section.split(",")[0] for t in tables] == ["A40", "A40", "A40", "DGX A100"]
    assert all(t.shm is None and t.devices == () for t in tables)
    (m01,) = trace(ALLREDUCE).nccl()
    assert len(m01.devices) == 8 and m01.devices[7].bus_id == "0xe1" and m01.devices[7].device == 7
    assert m01.devices[0].name == "NVIDIA GeForce RTX 4090" and m01.section == ""


def test_exports_and_continued_command_lines(tmp_path):
    text = (
        "export NCCL_SHM_DISABLE=1\n"
        "NCCL_P2P_DISABLE=1 echo not this one\n"  # a prefix lasts for its own command only
        "mpirun -np 2 -x NCCL_P2P_DISABLE=0 \\\n"
        "    -x HIP_VISIBLE_DEVICES=2,3 ./build/all_reduce_perf -g 1\n" + OLD_NCCL_TESTS
    )
    (table,) = read_trace(_write(tmp_path, "a.txt", text)).nccl()
    assert table.env == {"NCCL_SHM_DISABLE": "1", "NCCL_P2P_DISABLE": "0", "HIP_VISIBLE_DEVICES": "2,3"}
    assert (table.p2p, table.shm, table.visible_devices) == (True, False, (2, 3))
    bad = _write(tmp_path, "b.txt", "CUDA_VISIBLE_DEVICES=GPU-5d3e ./all_reduce_perf\n" + OLD_NCCL_TESTS)
    with pytest.raises(
        TraceError, match=r"^b\.txt:1: CUDA_VISIBLE_DEVICES='GPU-5d3e' is not a list of device"
    ):
        read_trace(bad)


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

# `rocm-smi --shownodesbw`: the sample output of the ROCm release notes (rocm_smi_lib, "--shownodesbw":
# maximum theoretical XGMI bandwidth, "min-max" in MB/s; "0-0": not directly connected).
ROCM_NODESBW = """\
======================= ROCm System Management Interface =======================
================================== Bandwidth ===================================
GPU0 GPU1 GPU2 GPU3 GPU4 GPU5 GPU6 GPU7
GPU0 N/A 50000-200000 50000-50000 0-0 0-0 0-0 50000-100000 0-0
GPU1 50000-200000 N/A 0-0 50000-50000 0-0 50000-50000 0-0 0-0
GPU2 50000-50000 0-0 N/A 50000-200000 50000-100000 0-0 0-0 0-0
GPU3 0-0 50000-50000 50000-200000 N/A 0-0 0-0 0-0 50000-50000
GPU4 0-0 0-0 50000-100000 0-0 N/A 50000-200000 50000-50000 0-0
GPU5 0-0 50000-50000 0-0 0-0 50000-200000 N/A 0-0 50000-50000
GPU6 50000-100000 0-0 0-0 0-0 50000-50000 0-0 N/A 50000-200000
GPU7 0-0 0-0 0-0 50000-50000 0-0 50000-50000 50000-200000 N/A
Format: min-max; Units: mps
============================= End of ROCm SMI Log ==============================
"""


def test_rocm_smi_showtopo(tmp_path):
    from netsim.calibrate import RocmMatrix, RocmNuma

    t = read_trace(_write(tmp_path, "topo.txt", ROCM_SHOWTOPO))
    weight, hops, link, numa = t.tables
    assert [type(x) for x in t.tables] == [RocmMatrix, RocmMatrix, RocmMatrix, RocmNuma]
    assert (weight.kind, hops.kind, link.kind) == ("weight", "hops", "link_type") and weight.line == 3
    np.testing.assert_array_equal(weight.values, 52 * (1 - np.eye(4)))
    np.testing.assert_array_equal(hops.values, 3 * (1 - np.eye(4)))
    assert link.cells[0] == ("0", "PCIE", "PCIE", "PCIE") and link.devices == ("GPU0", "GPU1", "GPU2", "GPU3")
    assert numa.node.tolist() == [0, 0, 1, 1] and numa.affinity.tolist() == [0, 0, 1, 1] and numa.line == 24
    assert t.rocm("hops") == (hops,)


def test_rocm_smi_shownodesbw(tmp_path):
    (bw,) = read_trace(_write(tmp_path, "bw.txt", ROCM_NODESBW)).rocm()
    assert bw.kind == "bandwidth" and bw.n == 8
    assert (bw.minimum[0, 1], bw.values[0, 1], bw.values[0, 6]) == (50e9, 200e9, 100e9)
    assert bw.values[0, 3] == 0 and np.isnan(bw.values[0, 0])
    path = _write(tmp_path, "bw2.txt", ROCM_NODESBW.replace("GPU1 50000-200000", "GPU1 50000~200000"))
    with pytest.raises(TraceError, match=r"^bw2\.txt:5: rocm-smi bandwidth: cannot read '50000~200000'"):
        read_trace(path)


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        # without its banner, a rocm-smi matrix is named for what it is, not misread as nvidia-smi topo -m
        (
            "\n".join(ROCM_SHOWTOPO.splitlines()[2:7]),
            1,
            "'GPU0 GPU1 ...' matrix that is not `nvidia-smi topo -m` \\(GPU0 -> GPU0 is '0', not 'X'\\)",
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
        read_trace(_write(tmp_path, "r.txt", text + "\n"))


def test_hdf5_round_trip_new_tables(tmp_path):
    for name, text in [("rccl.log", RCCL_TESTS), ("topo.txt", ROCM_SHOWTOPO), ("bw.txt", ROCM_NODESBW)]:
        original = read_trace(_write(tmp_path, name, text))
        save_trace(original, tmp_path / "t.h5")
        _assert_same(original, load_trace(tmp_path / "t.h5"))
