"""Sweep specs (JSON with units, Python callbacks, clear errors), the `netsim sweep` subcommand, the
progress line, and the plots (drawn from real sweeps, saved as PNGs)."""

import argparse
import json
import sys

import numpy as np
import pytest
from sweep_cases import CHUNK, diamond, grid_sweep

import netsim
from netsim import plots
from netsim.cli import sweep as sweep_cli
from netsim.sweep import SweepError, load_result, sweep_from_dict

CALLBACK = """
import dataclasses
def slower(scenario, factor):
    return dataclasses.replace(scenario, links=tuple(
        dataclasses.replace(x, bandwidth=x.bandwidth / factor) for x in scenario.links))
def picky(scenario, factor):
    if factor > 2:
        raise ValueError(f"factor {factor} is too large")
    return scenario
"""


def _spec(tmp_path, **over):
    (tmp_path / "base.json").write_text(json.dumps(diamond().to_dict()))
    (tmp_path / "cb.py").write_text(CALLBACK)
    spec = {
        "scenario": "base.json",
        "axes": [
            {"name": "a_bw", "kind": "bandwidth", "links": "a*", "value": ["2 GB/s", "8 GB/s"]},
            {"name": "slow", "kind": "python", "function": "cb.py:slower", "values": [1, 4]},
            {"name": "f1", "kind": "bytes", "flows": "f1", "value": ["1 MiB", "4 MiB"]},
        ],
    }
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
    links = [
        x.__class__(x.id, x.src, x.dst, (8e9 if x.id.startswith("a") else x.bandwidth) / 4, x.latency)
        for x in sc.links
    ]
    flows = [f.__class__(**{**f.__dict__, "bytes": 2**20}) if f.id == "f1" else f for f in sc.flows]
    ref = netsim.simulate(netsim.Scenario(links, flows))
    assert result.grid()[1, 1, 0] == pytest.approx(ref.makespan, rel=1e-13)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"axes": [{"kind": "speed"}]}, "axes[0].kind"),
        ({"axes": [{"kind": "bandwidth", "value": ["1 GB/s", "fast"]}]}, "axes[0].value[1]"),
        ({"axes": [{"kind": "bandwidth", "scale": ["2x"]}]}, "axes[0].scale[0]"),
        ({"axes": [{"kind": "latency", "link": "*", "scale": [1]}]}, "unknown field(s) ['link']"),
        ({"axes": [{"kind": "python", "function": "cb.py:nope", "values": [1]}]}, "axes[0].function"),
        ({"axes": []}, "axes: expected a non-empty list"),
        ({"sample": 3}, "unknown field(s) ['sample']"),
        ({"seed": "x"}, "seed: expected an integer >= 0, got 'x'"),
        ({"samples": "4"}, "samples: expected a positive integer"),
        ({"outputs": "flow_finish"}, "outputs: expected a list"),
        (
            {"axes": [{"kind": "bandwidth", "scale_range": [1, 2], "log": "false"}]},
            "axes[0].log: expected true or false",
        ),
    ],
)
def test_spec_errors_name_the_field(tmp_path, change, message):
    from netsim.sweep import load_spec

    with pytest.raises(SweepError) as e:
        load_spec(_spec(tmp_path, **change))
    assert message in str(e.value)


def test_spec_inline_scenario():
    sweep = sweep_from_dict(
        {
            "scenario": diamond().to_dict(),
            "samples": 3,
            "seed": 1,
            "axes": [{"kind": "bandwidth", "scale_range": [1, 2]}],
        }
    )
    assert sweep.n_points == 3 and sweep.axes[0].name == "bandwidth"


def test_cli_runs_resumes_and_plots(tmp_path, capsys):
    spec, out, png = _spec(tmp_path), tmp_path / "r.h5", tmp_path / "m.png"
    parser = argparse.ArgumentParser()
    sweep_cli.register(parser.add_subparsers())
    args = parser.parse_args(["sweep", str(spec), "--out", str(out), "--plot", str(png), "--chunk-size", "3"])
    assert args.handler(args) == 0
    text = capsys.readouterr()
    assert "8 points: 8 finished, 0 failed, 0 not run" in text.out and "8/8 points" in text.err
    # sizes and bandwidths read with units (the best point has the smaller message, the faster links)
    best = next(line for line in text.out.splitlines() if line.startswith("best"))
    assert "f1=1 MiB" in best and "slow=1" in best and " GB/s" in best
    assert png.stat().st_size > 10_000 and load_result(out).complete
    assert args.handler(args) == 0  # all chunks done: resuming runs nothing and reports the same
    assert "8 points: 8 finished" in capsys.readouterr().out
    other = parser.parse_args(["sweep", str(spec), "--out", str(out), "--samples", "4"])
    assert other.handler(other) == 2
    assert "holds a different sweep" in capsys.readouterr().err


def test_cli_refuses_bad_arguments_before_writing(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    sweep_cli.register(parser.add_subparsers())
    spec = _spec(tmp_path)
    for argv, message in (
        (["--out", "r.h5", "--chunk-size", "-5"], "--chunk-size: expected a positive number"),
        (["--out", "r.json"], "HDF5; give a name ending in .h5 or .hdf5"),
        (["--out", "r.h5", "--samples", "0"], "samples: expected a positive integer"),
    ):
        argv[1] = str(tmp_path / argv[1])
        args = parser.parse_args(["sweep", str(spec), *argv])
        assert args.handler(args) == 2
        assert message in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base.json", "cb.py", "spec.json"]
    bad_seed = _spec(tmp_path, seed="x")
    args = parser.parse_args(["sweep", str(bad_seed), "--out", str(tmp_path / "r.h5")])
    assert args.handler(args) == 2 and "seed: expected an integer" in capsys.readouterr().err
    assert not (tmp_path / "r.h5").exists()


def test_a_failing_callback_names_its_axis(tmp_path):
    from netsim.sweep import load_spec

    spec = _spec(
        tmp_path, axes=[{"name": "slow", "kind": "python", "function": "cb.py:picky", "values": [1, 4]}]
    )
    with pytest.raises(
        SweepError, match=r"axis 'slow': build\(scenario, 4\) raised ValueError: factor 4 is too large"
    ):
        load_spec(spec).plan()


@pytest.fixture(scope="module")
def grid_result():
    return grid_sweep().run(progress=False, chunk_size=CHUNK)


def test_plots_save_pngs(tmp_path, grid_result):
    fig = plots.plot_sweep(grid_result, tmp_path / "sweep.png", x="f1_bytes", hue="a_bw", reduce="max")
    line = fig.axes[0].get_lines()
    assert len(line) == 3  # one per a_bw value
    np.testing.assert_allclose(line[0].get_xdata(), [1e6, 4e6, 8e6, 32e6])  # f1's bytes, not its scales
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["1 MB", "4 MB", "8 MB", "32 MB"]
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


def sampled_sweep():
    """8 random points: a continuous bandwidth axis and a two-valued message size."""
    from netsim.sweep import LinkBandwidth, MessageSize, Sweep

    return Sweep(
        diamond(),
        [
            LinkBandwidth("bw", scale_range=(0.5, 2.0), independent=True),
            MessageSize("f1_bytes", match="f1", value=[1e6, 8e6]),
        ],
        samples=8,
        seed=1,
    ).run(progress=False, chunk_size=CHUNK)


def test_random_sweep_plot_draws_a_discrete_axis_as_categories():
    result = sampled_sweep()
    fig = plots.plot_sweep(result, x="bw", hue="f1_bytes")
    assert len(fig.axes) == 1  # a legend, no colour bar
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["f1_bytes=1 MB", "f1_bytes=8 MB"]
    drawn = sum(len(c.get_offsets()) for c in fig.axes[0].collections)
    assert drawn == 8


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
    # message sizes are reported as bytes with units: given as values, or as scales of one flow size
    from netsim.sweep._sweep import _meta

    busbw = load_spec(examples[0].parent / "sweep_pcie_busbw.json")
    size = json.loads(_meta(busbw, busbw.plan())["axes"])[0]
    assert size["labels"][0] == "8 KiB" and size["labels"][-1] == "32 MiB" and size["sizes"][0] == 8192
    scaled = json.loads(_meta(grid_sweep(), grid_sweep().plan())["axes"])[2]  # f1 (4e6 B) x [0.25, 1, 2, 8]
    assert scaled["labels"] == ["1 MB", "4 MB", "8 MB", "32 MB"] and scaled["sizes"] == [1e6, 4e6, 8e6, 32e6]


def test_to_xarray_or_the_extra_it_needs(grid_result, monkeypatch):
    try:
        import xarray  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match=r'pip install "netsim\[xarray\]"'):
            grid_result.to_xarray()
    else:  # the optional extra is installed: labels are the coordinates, values line up with grid()
        ds = grid_result.to_xarray()
        assert ds["makespan"].dims == ("a_bw", "lat", "f1_bytes")
        assert list(ds["f1_bytes"].values) == list(grid_result.axis("f1_bytes").labels)  # categorical labels
        np.testing.assert_array_equal(ds["makespan"].values, grid_result.grid())
        np.testing.assert_array_equal(ds["status"].values, grid_result.grid("status"))
        assert ds["status"].dtype == grid_result.status.dtype and ds["makespan"].attrs["units"] == "s"
        point = dict(zip(("a_bw", "lat", "f1_bytes"), (1, 0, 3), strict=True))
        i = next(
            k
            for k in range(grid_result.n_points)
            if all(grid_result.axis(n).index[k] == j for n, j in point.items())
        )
        sel = {n: grid_result.axis(n).labels[j] for n, j in point.items()}
        assert float(ds["makespan"].sel(sel)) == grid_result.makespan[i]
    monkeypatch.setitem(sys.modules, "xarray", None)  # as if not installed
    with pytest.raises(ImportError, match=r"SweepResult.to_xarray needs xarray, which is not installed"):
        grid_result.to_xarray()


def test_sampled_sweep_to_xarray_has_a_point_dimension():
    xr = pytest.importorskip("xarray")  # only where the optional extra is installed
    result = sampled_sweep()
    ds = result.to_xarray()
    assert isinstance(ds, xr.Dataset) and ds["makespan"].dims == ("point",)
    np.testing.assert_array_equal(ds["makespan"].values, result.makespan)
    axis = result.axis("f1_bytes")
    assert list(ds["f1_bytes"].values) == [axis.labels[j] for j in axis.index]  # strings, not numbers
    bw = result.axis("bw")
    assert ds["bw"].dims == ("point", "bw_id") and list(ds["bw_id"].values) == list(bw.ids)
    np.testing.assert_array_equal(ds["bw"].values, bw.value)


def test_busbw_metric_of_a_collective_sweep(tmp_path):
    """The example scenario is one 64 MiB ring AllReduce on 8 ranks (8 MiB per flow; its description gives
    busbw 21.86 GB/s at makespan 5.3726 ms). Sized by bytes per flow or by scale, busbw is S / t x 2(n-1)/n
    with S scaled by the size axis."""
    from pathlib import Path

    from netsim.sweep import BusBandwidth, MessageSize, Sweep

    base = netsim.Scenario.load(Path(__file__).resolve().parents[2] / "examples" / "pcie_ring_allreduce.json")
    ring = BusBandwidth("allreduce", 8, "64 MiB")
    by_value = Sweep(base, [MessageSize("size", value=[8 * 2**20, 2**20])], busbw=ring).run()
    by_scale = Sweep(base, [MessageSize("size", scale=[1.0, 0.125])], busbw=ring).run()
    t = by_value.makespan
    assert t[0] == pytest.approx(0.005372580456621004, rel=1e-12)
    expected = np.array([64, 8]) * 2**20 / t * 2 * 7 / 8
    np.testing.assert_allclose(by_value.metric("busbw"), expected, rtol=1e-12)
    np.testing.assert_allclose(by_scale.metric("busbw"), expected, rtol=1e-12)
    assert by_value.metric("busbw")[0] == pytest.approx(21.86e9, rel=1e-3)
    assert f"max {expected.max() / 1e9:.2f} GB/s" in sweep_cli.summary(by_value)
    fig = plots.plot_sweep(by_value, metric="busbw")
    assert fig.axes[0].get_ylabel() == "busbw (GB/s)"
    assert fig.axes[0].get_lines()[0].get_ydata()[0] == pytest.approx(expected[0] / 1e9)
    with pytest.raises(KeyError, match="no metric 'busbw'"):
        Sweep(base, [MessageSize("size", scale=[1.0])]).run().metric("busbw")
    # what would leave S undefined is refused when the sweep is made
    with pytest.raises(SweepError, match="must size every flow of the collective; it matches 1 of 112"):
        Sweep(base, [MessageSize("size", match=base.flows[0].id, scale=[1.0])], busbw=ring)
    for bad, message in (
        (("allreduse", 8, "64 MiB"), "busbw.kind"),
        (("allreduce", 1, "64 MiB"), "busbw.ranks"),
        (("allreduce", 8, "-1 MiB"), "busbw.size"),
    ):
        with pytest.raises(SweepError, match=message):
            BusBandwidth(*bad)


def test_sweep_cli_busbw_options_are_checked_before_any_work(tmp_path, capsys):
    from netsim.cli import main

    spec = tmp_path / "s.json"
    spec.write_text(
        json.dumps({"scenario": diamond().to_dict(), "axes": [{"kind": "bytes", "flows": "*", "scale": [1]}]})
    )
    out = str(tmp_path / "o.h5")
    assert main(["sweep", str(spec), "--out", out, "--metric", "busbw"]) == 2
    assert "--metric: chooses what --plot draws; give --plot too" in capsys.readouterr().err
    plot = str(tmp_path / "p.png")
    assert main(["sweep", str(spec), "--out", out, "--plot", plot, "--metric", "busbw"]) == 2
    assert "does not say which collective it sweeps" in capsys.readouterr().err
    spec.write_text(json.dumps({**json.loads(spec.read_text()), "busbw": {"kind": "allreduce", "ranks": 8}}))
    assert main(["sweep", str(spec), "--out", out]) == 2
    assert "busbw: expected" in capsys.readouterr().err
