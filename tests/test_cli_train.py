"""`netsim train`: one configuration's breakdown against the library, a vTrain-format table in row order
with errors against its measured column (on DGX A100 clusters sized per row, large rows in closed form),
and a layout that does not fit refused with the figures."""

from __future__ import annotations

import json
import re

import pytest

import netsim
from netsim import cli
from netsim.topology import dgx_a100
from netsim.workloads import (
    ComputeModel,
    ParallelLayout,
    TransformerModel,
    _layouts,
    estimate_iteration,
    link_rates,
    program_size,
    training_workload,
)

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
    topo = dgx_a100(1)  # the default: as many DGX A100 servers as the layout needs
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
    assert code == 0 and "3 of 3 rows predicted (0 in closed form" in out and "MAPE" in out
    rows = json.loads(out_json.read_text())["rows"]
    assert [(r["tp"], r["pp"], r["dp"]) for r in rows] == [(2, 1, 1), (1, 2, 2), (1, 1, 2)]
    assert rows[0]["error"] == pytest.approx(rows[0]["predicted_s"] / 0.010 - 1)
    assert "error" not in rows[2] and rows[2]["predicted_s"] > 0


def test_table_on_dgx_clusters_sized_per_row(capsys, monkeypatch, tmp_path):
    table = tmp_path / "t.csv"
    table.write_text(
        "# GPUs,global batch,micro batch,hidden size,attention heads,# layers,sequence length,"
        "tensor parallelism,data parallelism,pipeline parallelism\n"
        "16,4,1,256,16,4,128,4,2,2\n"  # 2 servers, simulated
        "16,8,1,256,16,4,128,8,1,2\n"  # 2 servers, over the (lowered) size limit: closed form
        "24,8,1,256,16,4,128,8,1,2\n"  # the same layout sized from # GPUs: 3 servers
        "8,8,8,12288,96,16,2048,8,1,1\n"  # does not fit in 80 GB: predicted all the same, marked
        "8,8,1,256,16,4,128,3,1,1\n"  # TP 3 cannot split 16 heads: no prediction, the reason
    )
    monkeypatch.setattr(_layouts, "MAX_SIMULATED", 300)
    out_json = tmp_path / "t.json"
    args = ["train", "--table", str(table), "--topology", "dgx-a100", "--json", str(out_json)]
    code, out, _ = run_cli(capsys, monkeypatch, *args)
    assert code == 0 and "4 of 5 rows predicted (2 in closed form, 1 over GPU memory)" in out
    rows = json.loads(out_json.read_text())["rows"]
    assert rows.pop()["reason"] == "ParallelLayout.tp: must divide heads=16, got tp=3"
    assert [r["method"] for r in rows] == ["simulated", "closed form", "closed form", "simulated"]
    assert [r["topology"] for r in rows] == ["dgx-a100:2", "dgx-a100:2", "dgx-a100:3", "dgx-a100"]
    assert [r["fits"] for r in rows] == [True, True, True, False]
    model = TransformerModel(256, 16, 4, 128)
    compute = ComputeModel.load().on("A100")
    topo = dgx_a100(2)
    layouts = [ParallelLayout(tp=4, dp=2, pp=2, global_batch=4), ParallelLayout(tp=8, pp=2, global_batch=8)]
    assert (
        program_size(topo, topo.workers, model, layouts[0])
        <= 300
        < program_size(topo, topo.workers, model, layouts[1])
    )
    for rec, layout in zip(rows[:2], layouts, strict=True):
        estimate = estimate_iteration(model, layout, compute, link_rates(topo, topo.workers, layout))
        assert rec["predicted_s"] == pytest.approx(estimate, rel=1e-12 if rec is rows[1] else 0.01)
    assert rows[2]["predicted_s"] == rows[1]["predicted_s"]  # the third server idles
    code, _, err = run_cli(capsys, monkeypatch, "train", "--table", str(table), "--topology", "dgx-b300")
    assert code == 2 and "dgx-b300" in err  # a topology that cannot be read stops the run


def test_a_layout_that_does_not_fit_is_refused(capsys, monkeypatch):
    args = ["--hidden", "12288", "--heads", "96", "--layers", "96", "--seq-len", "2048", "--pp", "4"]
    code, _, err = run_cli(capsys, monkeypatch, "train", *args, "--micro-batch", "8", "--memory", "24")
    assert code == 2 and "GB per GPU" in err and "holds 24.0 GB" in err


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"source": "x"}', "no 'compute' entry"),
        ("[1, 2]", "no 'compute' entry"),
        ('{"compute": 5}', "compute: expected an object of fields, got 5"),
        (
            '{"compute": {"gemm_efficency": 0.7}}',
            r"compute: unknown field\(s\) \['gemm_efficency'\]; known: \['peak_flops', .*'gemm_efficiency'",
        ),
        ('{"compute": {"gemm_eff', "not valid JSON: "),
        ('{"compute": {"gemm_efficiency": 3}}', r"ComputeModel.gemm_efficiency: must be in \(0, 1\], got 3"),
        ('{"compute": {"kernel_overhead": -1e-6}}', "ComputeModel.kernel_overhead: must be > 0, got -1e-06"),
        (
            '{"compute": {"step_overhead": NaN}}',
            "ComputeModel.step_overhead: must be a finite number, got nan",
        ),
    ],
)
def test_a_bad_compute_file_is_a_clear_error_naming_it(capsys, monkeypatch, tmp_path, text, message):
    path = tmp_path / "fit.json"
    path.write_text(text)
    with pytest.raises(netsim.ScenarioError, match=f"^{re.escape(str(path))}: {message}"):
        ComputeModel.load(path)
    code, _, err = run_cli(capsys, monkeypatch, "train", *SMALL, "--compute", str(path))
    assert code == 2 and err.startswith(f"netsim: error: {path}: ") and "internal error" not in err
