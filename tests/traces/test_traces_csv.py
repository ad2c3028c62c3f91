"""Commented CSV files: the shipped tables; a ragged row names its line."""

import pytest
from trace_helpers import trace

from netsim.traces import CsvTable, TraceError, read_csv


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


def test_read_csv_skips_comments_anywhere_and_names_the_line(tmp_path):
    """netsim.traces.read_csv, the one CSV reader (job traces and DeepShare's tables too): a file of any
    name, "#" lines and blank lines skipped before and between rows, errors at the file's own line."""
    path = tmp_path / "jobs.txt"
    path.write_text('# a job trace\n\nid,arrival\n# first job\nj0,0.5\n\n"j,1",2\n')
    table = read_csv(path)
    assert table.columns == ("id", "arrival") and table.rows == (("j0", "0.5"), ("j,1", "2"))
    assert table.line == 3
    path.write_text("id,arrival\n# note\nj0,1\nj1\n")
    with pytest.raises(TraceError, match=r"jobs\.txt:4: CSV row has 1 cells, the header has 2"):
        read_csv(path)
    path.write_text("# only comments\n\n")
    with pytest.raises(TraceError, match=r"jobs\.txt:2: CSV file has no header row"):
        read_csv(path)
