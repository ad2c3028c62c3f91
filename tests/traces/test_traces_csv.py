"""Commented CSV files: the shipped tables; a ragged row names its line."""

from trace_helpers import trace

from netsim.traces import CsvTable


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
