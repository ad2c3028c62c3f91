"""`netsim train`: one configuration's breakdown against the library, a vTrain-format table in row order
with errors against its measured column, and a layout that does not fit refused with the figures."""

from __future__ import annotations

import dataclasses
import json

import pytest

import netsim
from netsim import cli
from netsim.cli.train import NVSWITCH_PORT
from netsim.topology import leaf_spine
from netsim.workloads import ComputeModel, ParallelLayout, TransformerModel, training_workload

SMALL = ["--hidden", "256", "--heads", "8", "--layers", "4", "--seq-len", "128", "--vocab", "1000"]


def run_cli(capsys, monkeypatch, *args: str) -> tuple[int, str, str]:
    monkeypatch.delenv("PJRT_NPROC", raising=False)
    code = cli.main([*args, "--no-compile-cache"])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_one_configuration_is_the_library_breakdown(capsys, monkeypatch, tmp_path):
    out_json = tmp_path / "one.json"
    args = [*SMALL, "--tp", "2", "--pp", "2", "--micro-batch", "2", "--global-batch", "8"]
    code, out, _ = run_cli(capsys, monkeypatch, "train", *args, "--json", str(out_json))
    assert code == 0 and "exposed TP" in out and "memory per GPU" in out
    topo = dataclasses.replace(leaf_spine(1, 1, 4, host_bandwidth=NVSWITCH_PORT), device="A100")
    model = TransformerModel(256, 8, 4, 128, vocab=1000)
    job = training_workload(
        topo,
        topo.workers,
        model,
        ParallelLayout(tp=2, pp=2, micro_batch=2, global_batch=8),
        compute=ComputeModel.load(),
    )
    expected = float(netsim.simulate(job.scenario()).makespan)
    record = json.loads(out_json.read_text())
    assert record["predicted_s"] == pytest.approx(expected, rel=1e-12)
    parts = ("compute_s", "tp_exposed_s", "pp_exposed_s", "dp_exposed_s", "bubble_s")
    assert sum(record[k] for k in parts) == pytest.approx(record["predicted_s"], rel=1e-9)


def test_table_rows_in_order_with_errors(capsys, monkeypatch, tmp_path):
    table = tmp_path / "t.csv"
    table.write_text(
        "# GPUs,global batch,micro batch,hidden size,attention heads,# layers,sequence length,"
        "tensor parallelism,data parallelism,pipeline parallelism,iteration time (ms)\n"
        "2,4,1,256,8,4,128,2,1,1,10.0\n"
        "4,8,2,256,8,4,128,1,2,2,20.0\n"
        "2,2,1,256,8,4,128,1,2,1,\n"
    )
    out_json = tmp_path / "t.json"
    code, out, _ = run_cli(capsys, monkeypatch, "train", "--table", str(table), "--json", str(out_json))
    assert code == 0 and "3 of 3 rows simulated" in out and "MAPE" in out
    rows = json.loads(out_json.read_text())["rows"]
    assert [(r["tp"], r["pp"], r["dp"]) for r in rows] == [(2, 1, 1), (1, 2, 2), (1, 1, 2)]
    assert rows[0]["error"] == pytest.approx(rows[0]["predicted_s"] / 0.010 - 1)
    assert "error" not in rows[2] and rows[2]["predicted_s"] > 0


def test_a_layout_that_does_not_fit_is_refused(capsys, monkeypatch):
    args = ["--hidden", "12288", "--heads", "96", "--layers", "96", "--seq-len", "2048", "--pp", "4"]
    code, _, err = run_cli(capsys, monkeypatch, "train", *args, "--micro-batch", "8", "--memory", "24")
    assert code == 2 and "GB per GPU" in err and "holds 24.0 GB" in err
