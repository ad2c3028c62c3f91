"""Sweep specs (JSON with units, Python callbacks, clear errors), the `netsim sweep` subcommand, the
progress line, and the plots (drawn from real sweeps, saved as PNGs)."""

import argparse
import io
import json

import numpy as np
import pytest
from sweep_cases import CHUNK, diamond, grid_sweep

import netsim
from netsim import _sweep_cli, plots
from netsim.sweep import SweepError, load, sweep_from_dict
from netsim.sweep._progress import Progress

CALLBACK = '''
import dataclasses
def slower(scenario, factor):
    return dataclasses.replace(scenario, links=tuple(
        dataclasses.replace(x, bandwidth=x.bandwidth / factor) for x in scenario.links))
'''


def _spec(tmp_path, **over):
    (tmp_path / "base.json").write_text(json.dumps(diamond().to_dict()))
    (tmp_path / "cb.py").write_text(CALLBACK)
    spec = {"scenario": "base.json", "axes": [
        {"name": "a_bw", "kind": "bandwidth", "links": "a*", "value": ["2 GB/s", "8 GB/s"]},
        {"name": "slow", "kind": "python", "function": "cb.py:slower", "values": [1, 4]},
        {"name": "f1", "kind": "bytes", "flows": "f1", "value": ["1 MiB", "4 MiB"]}]}
    spec.update(over)
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return path


def test_spec_units_and_callback_match_the_python_api(tmp_path):
    from netsim.sweep import load_spec

    sweep = load_spec(_spec(tmp_path))
    assert sweep.axes[0].value == (2e9, 8e9) and sweep.axes[2].value == (2**20, 4 * 2**20)
    result = sweep.run(progress=False, chunk_size=3)  # as the CLI test: one compile
    # point (a_bw=8 GB/s, slow=4, f1=1 MiB), built by hand
    sc = diamond()
    links = [x.__class__(x.id, x.src, x.dst, (8e9 if x.id.startswith("a") else x.bandwidth) / 4, x.latency)
             for x in sc.links]
    flows = [f.__class__(**{**f.__dict__, "bytes": 2**20}) if f.id == "f1" else f for f in sc.flows]
    ref = netsim.simulate(netsim.Scenario(links, flows))
    assert result.grid()[1, 1, 0] == pytest.approx(ref.makespan, rel=1e-13)


@pytest.mark.parametrize(("change", "message"), [
    ({"axes": [{"kind": "speed"}]}, "axes[0].kind"),
    ({"axes": [{"kind": "bandwidth", "value": ["1 GB/s", "fast"]}]}, "axes[0].value[1]"),
    ({"axes": [{"kind": "bandwidth", "scale": ["2x"]}]}, "axes[0].scale[0]"),
    ({"axes": [{"kind": "latency", "link": "*", "scale": [1]}]}, "unknown field(s) ['link']"),
    ({"axes": [{"kind": "python", "function": "cb.py:nope", "values": [1]}]}, "axes[0].function"),
    ({"axes": []}, "axes: expected a non-empty list"),
    ({"sample": 3}, "unknown field(s) ['sample']"),
])
def test_spec_errors_name_the_field(tmp_path, change, message):
    from netsim.sweep import load_spec

    with pytest.raises(SweepError) as e:
        load_spec(_spec(tmp_path, **change))
    assert message in str(e.value)


def test_spec_inline_scenario():
    sweep = sweep_from_dict({"scenario": diamond().to_dict(), "samples": 3, "seed": 1,
                             "axes": [{"kind": "bandwidth", "scale_range": [1, 2]}]})
    assert sweep.n_points == 3 and sweep.axes[0].name == "bandwidth"


def test_cli_runs_resumes_and_plots(tmp_path, capsys):
    spec, out, png = _spec(tmp_path), tmp_path / "r.h5", tmp_path / "m.png"
    parser = argparse.ArgumentParser()
    _sweep_cli.register(parser.add_subparsers())
    args = parser.parse_args(["sweep", str(spec), "--out", str(out), "--plot", str(png), "--chunk-size", "3"])
    assert args.handler(args) == 0
    text = capsys.readouterr()
    assert "8 points: 8 finished, 0 failed, 0 not run" in text.out and "8/8 points" in text.err
    assert png.stat().st_size > 10_000 and load(out).complete
    assert args.handler(args) == 0  # all chunks done: resuming runs nothing and reports the same
    assert "8 points: 8 finished" in capsys.readouterr().out
    other = parser.parse_args(["sweep", str(spec), "--out", str(out), "--samples", "4"])
    assert other.handler(other) == 2
    assert "holds a different sweep" in capsys.readouterr().err


def test_progress_line_counts_rate_and_eta():
    stream = io.StringIO()
    bar = Progress(100, done=20, stream=stream, every=0.0)
    bar.t0 -= 2.0  # 2 s in, 30 new points: 15 points/s, 50 left: ETA ~3 s
    bar.update(30)
    line = stream.getvalue()
    assert "50/100 points ( 50.0%)" in line and "points/s" in line and "ETA 0:00:0" in line
    rate = float(line.split("points/s")[0].split()[-1])
    assert 10 < rate < 16


@pytest.fixture(scope="module")
def grid_result():
    return grid_sweep().run(progress=False, chunk_size=CHUNK)


def test_plots_save_pngs(tmp_path, grid_result):
    fig = plots.plot_sweep(grid_result, tmp_path / "sweep.png", x="f1_bytes", hue="a_bw", reduce="max")
    line = fig.axes[0].get_lines()
    assert len(line) == 3  # one per a_bw value
    # max over the latency axis of the grid, in ms
    expect = np.nanmax(grid_result.grid(), axis=1)[0] / 1e-3
    np.testing.assert_allclose(line[0].get_ydata(), expect)
    sizes = np.array([1, 2, 4]) * 2**20
    plots.plot_busbw(sizes, [[1e-3, 1.5e-3, 2.5e-3]], 8, tmp_path / "busbw.png", peak=4e9)
    result = netsim.simulate(diamond())
    plots.plot_link_utilization(result, path=tmp_path / "util.png")
    plots.plot_link_utilization(diamond().links, grid_result.link_utilization[0], tmp_path / "util_row.png")
    plots.plot_timeline(result, tmp_path / "timeline.png")
    for name in ("sweep", "busbw", "util", "util_row", "timeline"):
        assert (tmp_path / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_busbw_is_nccl_tests_convention():
    # allreduce of S bytes in t s on n ranks: busbw = S / t * 2 (n - 1) / n
    np.testing.assert_allclose(plots.busbw([8e6], [1e-3], 8), [8e9 * 2 * 7 / 8])
    np.testing.assert_allclose(plots.busbw([8e6], [1e-3], 4, "allgather"), [8e9 * 3 / 4])


def test_example_specs_plan():
    # the shipped examples stay in step with the scenarios they sweep (ids, globs, callbacks)
    from pathlib import Path

    from netsim.sweep import load_spec

    examples = sorted((Path(__file__).resolve().parents[2] / "examples").glob("sweep_*.json"))
    specs = [p for p in examples if "axes" in json.loads(p.read_text())]
    assert len(specs) >= 4
    for path in specs:
        plan = load_spec(path).plan()
        assert plan.n_points > 0 and any(h is not None for h in plan.hosts), path.name
