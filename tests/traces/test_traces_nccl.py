"""nccl-tests and rccl-tests tables: values read by eye from the files, variants seen in the wild, rows kept and
marked, comment lines between rows, units rows."""

import re

import numpy as np
import pytest
from trace_helpers import ALLREDUCE, GB, OLD_NCCL_TESTS, ROW, US, trace, write

from netsim.data import trace_path
from netsim.traces import TraceError, read_trace


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


def test_indented_header_is_a_header(tmp_path):
    """A log pasted into markdown with every line indented: the table is read, and the next table keeps
    its own op and rank count (before, the indented one was skipped and its lines fed the next one)."""
    indented = "".join(f"    {line}\n" for line in OLD_NCCL_TESTS.splitlines())
    rest = "./build/all_reduce_perf -b 8 -e 16 -g 4\n" + OLD_NCCL_TESTS.replace("nGpus 2", "nGpus 4")
    path = write(tmp_path, "notes.md", "./build/all_gather_perf -b 8 -e 16 -g 2\n" + indented + rest)
    first, second = read_trace(path).nccl()
    assert (first.op, first.n_gpus, second.op, second.n_gpus) == ("all_gather", 2, "all_reduce", 4)
    np.testing.assert_allclose(first.time[0], [9.33 * US, 9.21 * US])
    assert first.avg_busbw == pytest.approx(0.001 * GB) and first.groups == ("out-of-place", "in-place")


def test_blank_lines_inside_a_table_are_read_through(tmp_path):
    text = trace_path(ALLREDUCE).read_text().replace(ROW + "\n", ROW + "\n\n\n", 1)
    (table,) = read_trace(write(tmp_path, "a.txt", text)).nccl()
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
    path = write(tmp_path, ALLREDUCE, text.replace(ROW, new, 1))
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
    (table,) = read_trace(write(tmp_path, "bad.txt", "\n".join(lines) + "\n")).nccl()
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
    (table,) = read_trace(write(tmp_path, "x.txt", OLD_NCCL_TESTS.replace("0e+00", "4e-07"))).nccl()
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
    (table,) = read_trace(write(tmp_path, "rccl.log", RCCL_TESTS)).tables
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


def test_used_p2p_reads_the_command_line_then_the_header_notes(tmp_path):
    def used(text):
        trace = read_trace(write(tmp_path, "t.txt", text + OLD_NCCL_TESTS))
        return trace.used_p2p(trace.nccl()[0])

    note = "# MACHINE: 2 x TITAN RTX. P2P not supported (CANNOT Access Peer)\n"
    assert used("") is True  # nothing says otherwise
    assert used(note) is False
    assert used("# note: p2p is NOT available here\n") is False
    assert used(note + "NCCL_P2P_DISABLE=0 ./all_reduce_perf -g 2\n") is True  # the command line decides
    assert used("NCCL_P2P_DISABLE=1 ./all_reduce_perf -g 2\n") is False


def test_exports_and_continued_command_lines(tmp_path):
    text = (
        "export NCCL_SHM_DISABLE=1\n"
        "NCCL_P2P_DISABLE=1 echo not this one\n"  # a prefix lasts for its own command only
        "mpirun -np 2 -x NCCL_P2P_DISABLE=0 \\\n"
        "    -x HIP_VISIBLE_DEVICES=2,3 ./build/all_reduce_perf -g 1\n" + OLD_NCCL_TESTS
    )
    (table,) = read_trace(write(tmp_path, "a.txt", text)).nccl()
    assert table.env == {"NCCL_SHM_DISABLE": "1", "NCCL_P2P_DISABLE": "0", "HIP_VISIBLE_DEVICES": "2,3"}
    assert (table.p2p, table.shm, table.visible_devices) == (True, False, (2, 3))
    bad = write(tmp_path, "b.txt", "CUDA_VISIBLE_DEVICES=GPU-5d3e ./all_reduce_perf\n" + OLD_NCCL_TESTS)
    with pytest.raises(
        TraceError, match=r"^b\.txt:1: CUDA_VISIBLE_DEVICES='GPU-5d3e' is not a list of device"
    ):
        read_trace(bad)


def test_comment_line_between_rows_is_skipped_and_said(tmp_path):
    """Issue: a "# note" line inside a table ended it silently (6 of 25 rows fitted). Policy: a comment
    line with rows after it is skipped, the table is read to its end, and `notes` names the line."""
    text = trace_path(ALLREDUCE).read_text()
    lineno = text[: text.index(ROW)].count("\n") + 2  # the note goes right after ROW
    path = write(tmp_path, "a.txt", text.replace(ROW + "\n", ROW + "\n# note: fan noise from here on\n", 1))
    (table,) = read_trace(path).nccl()
    (before,) = trace(ALLREDUCE).nccl()
    np.testing.assert_array_equal(table.size, before.size)  # all 25 rows
    np.testing.assert_array_equal(table.time, before.time)
    assert table.notes == (
        f"a.txt:{lineno}: skipped a comment line between rows: '# note: fan noise from here on'",
    )
    assert table.avg_busbw == before.avg_busbw and not before.notes  # the footer still ends the table


def test_comment_lines_after_the_last_row_end_the_table(tmp_path):
    # two tables back to back: the comment lines between them (command, ranks, header) are not notes
    (first, second) = read_trace(
        write(tmp_path, "x.txt", OLD_NCCL_TESTS + "# rerun\n" + OLD_NCCL_TESTS)
    ).nccl()
    assert first.notes == second.notes == () and first.size.tolist() == second.size.tolist() == [8, 16]


@pytest.mark.parametrize(
    ("time_unit", "bw_unit", "time", "bw"),
    [
        ("us", "GB/s", 9.33e-6, 1e9),
        ("ms", "GB/s", 9.33e-3, 1e9),
        ("ns", "MB/s", 9.33e-9, 1e6),
        ("s", "GB/s", 9.33, 1e9),
    ],
)
def test_units_row_is_honoured(tmp_path, time_unit, bw_unit, time, bw):
    """Issue: a units row saying (ms) was read as us (a 1000x error). The row's units scale the columns."""
    text = OLD_NCCL_TESTS.replace("(us)", f"({time_unit})").replace("(GB/s)", f"({bw_unit})")
    text = text.replace("0.00    0.00  0e+00    9.21", "2.50    1.25  0e+00    9.21")
    (table,) = read_trace(write(tmp_path, "u.txt", text)).nccl()
    assert table.time[0, 0] == pytest.approx(time) and table.time[0, 1] == pytest.approx(time / 9.33 * 9.21)
    assert (table.algbw[0, 0], table.busbw[0, 0]) == (pytest.approx(2.5 * bw), pytest.approx(1.25 * bw))
    assert table.avg_busbw == pytest.approx(0.001 * bw)  # the footer is in the table's bandwidth unit


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("(us)", "(min)", "units row: unknown unit \\(min\\)"),
        ("(B)", "(KB)", "units row: unknown unit \\(KB\\)"),
        (
            "(us)  (GB/s)  (GB/s)            (us)",
            "(us)  (GB/s)  (GB/s)            (ms)",
            "units row: time columns in different units",
        ),
    ],
)
def test_units_the_reader_does_not_honour_are_refused(tmp_path, old, new, message):
    path = write(tmp_path, "u.txt", OLD_NCCL_TESTS.replace(old, new, 1))
    with pytest.raises(TraceError, match=f"^u\\.txt:5: nccl-tests {message}"):
        read_trace(path)


def test_time_beyond_netsims_limit_is_refused_by_the_reader(tmp_path):
    path = write(tmp_path, "big.txt", OLD_NCCL_TESTS.replace("9.33", "2e21"))  # us: 2e15 s
    with pytest.raises(
        TraceError, match=r"^big\.txt:6: nccl-tests table, row 0, out-of-place time: must be < 1e\+15 s"
    ):
        read_trace(path)
