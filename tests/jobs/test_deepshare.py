"""DeepShare's measured tables (netsim.jobs.DeepShareTable, the one reader of both CSVs), its job mix,
and clear errors for malformed keys and cells."""

import numpy as np
import pytest

from netsim import ScenarioError
from netsim.jobs import MODELS, DeepShareTable, deepshare_mix, parse_key, spearman
from netsim.traces import TraceError


def test_shipped_tables_and_their_scatter():
    table = DeepShareTable.load()
    assert len(table.configs) == 36 and table.ratio.shape == (36, 36)
    assert {m for m, _, _ in table.configs} == set(MODELS)
    assert set(table.isolated) == set(table.configs) and deepshare_mix() == tuple(table.isolated)
    assert len(table.pairs()) == 36 * 37 // 2
    fit, held = table.split(0)
    assert len(fit) == len(held) == 333 and not set(fit) & set(held)
    # docs/jobs.md, "Fitted traffic": 206 clipped entries; the transpose scatter 0.142 (630 pairs),
    # 0.121 between placements of one model (90 pairs)
    noise = table.noise()
    assert noise["clipped_at_1"] == 206
    assert noise["transpose_mae"] == pytest.approx(0.142, abs=5e-4)
    assert noise["same_model_transpose_mae"] == pytest.approx(0.121, abs=5e-4)
    assert np.all((table.ratio > 0) & (table.ratio <= 1))


def test_bad_tables_are_clear_errors(tmp_path):
    with pytest.raises(ScenarioError, match="unknown model 'ResNet'"):
        parse_key("ResNet,2,2")
    with pytest.raises(ScenarioError, match="expected 'Model,total_gpus,num_nodes_spanned', got 'MoE,8'"):
        parse_key("MoE,8")
    with pytest.raises(ScenarioError, match="whole number of GPUs per server"):
        parse_key("MoE,6,4")
    iso = tmp_path / "iso.csv"
    iso.write_text(',isol_thp\n"MoE,2,2",1.0\n"MoE,two,2",2.0\n')
    with pytest.raises(ScenarioError, match=r"isolated row 2: expected .* got 'MoE,two,2'"):
        DeepShareTable.load(str(iso))
    iso.write_text(',isol_thp\n"MoE,2,2",fast\n')
    with pytest.raises(ScenarioError, match="isolated row 1 \\('MoE,2,2'\\): expected a number, got 'fast'"):
        DeepShareTable.load(str(iso))
    iso.write_text(',isol_thp\n"MoE,2,2",1.0,3\n')
    with pytest.raises(TraceError, match=r"iso\.csv:2: CSV row has 3 cells, the header has 2"):
        DeepShareTable.load(str(iso))


def test_spearman_ranks_and_refuses_bad_input():
    assert spearman([1, 2, 3], [10, 30, 20]) == pytest.approx(0.5)
    assert spearman([1, 2, 2], [3, 2, 1]) == pytest.approx(-np.sqrt(3) / 2)  # ties share their mean rank
    assert np.isnan(spearman([1, 1], [1, 2]))  # a constant side: no correlation defined
    with pytest.raises(ScenarioError, match="spearman: x has 3 values but y has 2; expected as many"):
        spearman([1, 2, 3], [1, 2])
    for n in (0, 1):
        with pytest.raises(ScenarioError, match=f"spearman: expected at least 2 points, got {n}"):
            spearman([1.0] * n, [2.0] * n)
    with pytest.raises(ScenarioError, match=r"spearman: y\[1\]: must be a finite number, got nan"):
        spearman([1, 2], [1, np.nan])
