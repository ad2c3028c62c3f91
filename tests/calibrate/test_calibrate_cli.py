"""`netsim calibrate` and `netsim predict`: argument handling, errors naming the field and value (or file
and line) before any fit or compile, and (slow) a run end to end."""

import argparse
import json

import pytest
from netsim.calibrate import presets

from netsim.cli import main
from netsim.cli.calibrate import register
from netsim.data import trace_path
from netsim.topology._presets import CALIBRATED
from netsim.traces import TraceError, read_trace

A100 = "a100-pcie-4x-nvlink-pairs"
# the m08 trace's first P2P=Enabled bandwidth matrix (4 A100s, NVLink pairs), ending at its line 33
P2P = trace_path("m08_4xA100PCIe_nvlinkpairs_p2p.txt").read_text().splitlines(keepends=True)[:33]


def run(argv):
    """The command through `netsim.cli.main`: exit code 2 and one line on stderr for a NetsimError."""
    return main(["calibrate", *argv, "--no-compile-cache"])


def p2p_trace(tmp_path, name="p2p.txt", cell="275.07"):
    path = tmp_path / name
    path.write_text("".join(P2P).replace("275.07", cell))
    return path


def refused(capsys, rc, *words):
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and "internal error" not in err, err
    assert all(w in err for w in words), err
    return err


def test_register_adds_the_subcommand(capsys):
    parser = argparse.ArgumentParser(prog="netsim")
    register(parser.add_subparsers(dest="command", required=True))
    with pytest.raises(SystemExit):
        parser.parse_args(["calibrate", "--help"])
    out = capsys.readouterr().out
    assert "--topology" in out and "--out" in out and "nvidia-smi topo" in out and "calibration JSON" in out


def test_unknown_topology(tmp_path, capsys):
    rc = run([str(tmp_path / "t.txt"), "--topology", "no-such-box", "--out", str(tmp_path / "p.json")])
    refused(capsys, rc, "--topology 'no-such-box' is neither a topology preset")


def test_a_topology_file_that_is_not_a_calibration_says_what_it_lacks(tmp_path, capsys):
    scenario = tmp_path / "s.json"  # a scenario, not a calibration: no "topology" entry
    scenario.write_text(json.dumps({"name": "s", "links": [], "flows": []}))
    trace = p2p_trace(tmp_path)
    rc = run([str(trace), "--topology", str(scenario), "--out", str(tmp_path / "p.json")])
    err = refused(capsys, rc, f'--topology {str(scenario)!r} is a JSON file without a "topology" entry')
    assert "nor a file" not in err and "nvidia-smi topo -m" in err
    broken = tmp_path / "broken.json"
    broken.write_text('{"topology":')
    rc = run([str(trace), "--topology", str(broken), "--out", str(tmp_path / "p.json")])
    refused(capsys, rc, f"--topology {broken}: not valid JSON")
    assert not (tmp_path / "p.json").exists()


def test_malformed_trace_names_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_text(
        "P2P Connectivity Matrix\n   D\\D     0     1\n     0       1     x\n     1       1     1\n"
    )
    rc = run([str(bad), "--topology", "rtx4090-8x-epyc7542", "--out", str(tmp_path / "p.json")])
    refused(capsys, rc, "bad.txt:3: column 1: cannot read 'x'")
    assert not (tmp_path / "p.json").exists()


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--steps", "-1", "--steps: expected an integer >= 1, got -1"),
        ("--steps", "0", "--steps: expected an integer >= 1, got 0"),
        ("--lr", "nan", "--lr: must be a finite number, got nan"),
        ("--lr", "inf", "--lr: must be a finite number, got inf"),
        ("--lr", "0", "--lr: must be > 0, got 0.0"),
        ("--lr", "-0.5", "--lr: must be > 0, got -0.5"),
    ],
)
def test_bad_optimizer_options_are_refused_before_reading(tmp_path, capsys, option, value, message):
    # the trace does not exist: the option is refused before any file is read
    argv = [str(tmp_path / "absent.txt"), "--topology", A100, "--out", str(tmp_path / "p.json")]
    refused(capsys, run([*argv, option, value]), message)


def test_outputs_are_checked_before_the_fit(tmp_path, capsys):
    trace, out = p2p_trace(tmp_path), tmp_path / "p.json"
    base = [str(trace), "--topology", A100]
    refused(capsys, run([*base, "--out", str(tmp_path / "no" / "p.json")]), "--out: folder", "does not exist")
    refused(capsys, run([*base, "--out", str(tmp_path / "p.txt")]), "--out: unknown output type '.txt'")
    refused(capsys, run([*base, "--out", str(out), "--plot", str(out)]), "--plot: unknown output type")
    out.write_text('{"topology": "a100-pcie-4x-nvlink-pairs"}')
    before = out.read_text()
    refused(capsys, run([str(trace), "--topology", str(out), "--out", str(out)]), "is also --topology")
    assert out.read_text() == before  # nothing overwritten


@pytest.mark.parametrize("cell", ["1e25", "1e-20"])  # GB/s: 1e34 and 1e-11 B/s, outside [1e-6, 1e30] B/s
def test_out_of_range_cell_names_file_line_and_cell(tmp_path, capsys, cell):
    trace = p2p_trace(tmp_path, cell=cell)
    err = refused(
        capsys,
        run([str(trace), "--topology", A100, "--out", str(tmp_path / "p.json")]),
        "p2p.txt:29: unidirectional matrix, cell [0, 1]: must lie in [1e-06, 1e+30] B/s",
    )
    assert f"got {float(cell) * 1e9!r}" in err  # in B/s, as the field's unit says
    assert not (tmp_path / "p.json").exists()


def test_a_1e300_cell_is_refused_not_fitted(tmp_path):
    # before: the fit's loss overflowed and FloatingPointError escaped (a traceback); now the reader refuses it
    with pytest.raises(
        TraceError, match=r"p2p.txt:29: unidirectional matrix, cell \[0, 1\]: must be a finite"
    ):
        read_trace(p2p_trace(tmp_path, cell="1e300"))


def test_empty_trace_and_a_trace_without_tables(tmp_path, capsys):
    empty, prose = tmp_path / "empty.txt", tmp_path / "prose.txt"
    empty.write_text("")
    prose.write_text("hello\nno tables here\n")
    for path in (empty, prose):
        err = refused(capsys, run([str(path), "--topology", A100, "--out", str(tmp_path / "p.json")]))
        assert f"{path.name}:" in err and "no known table" in err


def test_trace_with_no_simulable_table_lists_why(tmp_path, capsys):
    # the m01 trace's matrices were measured on 8 RTX 4090s: none fits the 4-GPU A100 topology
    trace = trace_path("m01_8x4090_2xEPYC7542_p2pBandwidthLatency_p2p_on.txt")
    err = refused(
        capsys,
        run([str(trace), "--topology", A100, "--out", str(tmp_path / "p.json"), "--quiet"]),
        "can be simulated",
        "8 GPUs, but topology",
    )
    assert "refused" in err  # each refusal is said, even with --quiet
    assert not (tmp_path / "p.json").exists()


def test_points_per_table_are_printed_even_when_quiet(tmp_path, capsys):
    trace = p2p_trace(tmp_path)
    out = tmp_path / "p.json"
    assert run([str(trace), "--topology", A100, "--out", str(out), "--steps", "2", "--quiet"]) == 0
    text = capsys.readouterr().out
    # 12 off-diagonal cells of each 4x4 matrix (the P2P=Disabled and the P2P=Enabled one)
    rows = {line.split("  ")[0]: line.split() for line in text.splitlines() if line.startswith("p2p.txt:")}
    assert rows.keys() == {"p2p.txt:23 unidirectional P2P off", "p2p.txt:29 unidirectional P2P on"}
    assert all(row[4:6] == ["bandwidth", "12"] for row in rows.values())
    assert json.loads(out.read_text())["topology"] == A100


def predict(argv):
    return main(["predict", *argv, "--no-compile-cache"])


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ("not json", "neither a calibration JSON"),  # not "{...": read as an nvidia-smi file, said so
        ('{"topology": "a100-pcie-4x-nvlink-pairs", "link_classes": {', "not valid JSON"),
        ('{"topology": "a100-pcie-4x-nvlink-pairs"}', "link_classes: no entry for class"),
        ("[1, 2]", "neither a calibration JSON"),
    ],
)
def test_predict_refuses_bad_params_files(tmp_path, capsys, params, message):
    path = tmp_path / "params.json"
    path.write_text(params)
    refused(capsys, predict([str(p2p_trace(tmp_path)), "--params", str(path)]), str(path), message)


def test_predict_refuses_negative_capacities(tmp_path, capsys):
    values = json.loads(json.dumps(CALIBRATED["rtx4090-8x-epyc7542"]))  # a copy of the shipped calibration
    values["link_classes"]["pcie"]["bandwidth"] = -5.0
    path = tmp_path / "params.json"
    path.write_text(json.dumps(values))
    rc = predict([str(p2p_trace(tmp_path)), "--params", str(path)])
    refused(capsys, rc, "params.json: link_classes.pcie", "bandwidth: must be > 0, got -5.0")


def test_predict_checks_json_output_before_simulating(tmp_path, capsys):
    trace = p2p_trace(tmp_path)
    rc = predict([str(trace), "--params", A100, "--json", str(tmp_path / "no" / "out.json")])
    refused(capsys, rc, "--json: folder", "does not exist")


@pytest.mark.slow
def test_end_to_end_with_a_topo_file(tmp_path, capsys):
    out, png = tmp_path / "params.json", tmp_path / "fit.png"
    rc = run(
        [
            str(trace_path("m02_4x4090_pptest_p2p_allreduce.txt")),
            "--topology",
            str(trace_path("m01_8x4090_2xEPYC7542_topo.txt")),
            "--out",
            str(out),
            "--plot",
            str(png),
            "--steps",
            "5",
            "--quiet",
        ]
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert "all_reduce x4" in text and "bidirectional P2P on" in text
    lines = text.splitlines()
    assert len({line.index("busbw") for line in lines if "busbw" in line}) == 1  # aligned report
    values = json.loads(out.read_text())
    assert (
        values["sources"] == ["m02_4x4090_pptest_p2p_allreduce.txt"]
        and "GPU0" in values["topology"]["nvidia_smi_topo"]
    )
    topo, spec, params = presets.load(str(out))  # the written file is a preset
    assert topo.gpus()[:4] == ("gpu0", "gpu1", "gpu2", "gpu3") and params.log_bandwidth.shape == (
        len(spec.link_classes),
    )
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_predict_refuses_a_shared_capacity_that_is_not_a_number(tmp_path):
    from netsim import ScenarioError
    from netsim.topology import load

    values = json.loads(json.dumps(CALIBRATED["rtx4090-8x-epyc7542"]))
    values["shared"][next(iter(values["shared"]))] = "abc"
    path = tmp_path / "params.json"
    path.write_text(json.dumps(values))
    with pytest.raises(ScenarioError, match=r"shared\.socket0<->socket1: .*'abc'"):
        load(str(path))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"steps": -1}, r"fit: steps: expected an integer >= 1, got -1"),
        ({"learning_rate": float("nan")}, r"fit: learning_rate: must be a finite number, got nan"),
        ({"learning_rate": -0.1}, r"fit: learning_rate: must be >= 0"),
    ],
)
def test_library_fit_options_are_checked_before_fitting(kwargs, match):
    from netsim.calibrate import calibrate

    from netsim import ScenarioError
    from netsim.data import trace_path
    from netsim.topology import preset
    from netsim.traces import read_trace

    trace = read_trace(trace_path("m01_8x4090_2xEPYC7542_allreduce_p2p_on.txt"))
    with pytest.raises(ScenarioError, match=match):
        calibrate([trace], preset("rtx4090-8x-epyc7542"), progress=None, **kwargs)


@pytest.mark.parametrize(
    ("traces", "match"),
    [
        (
            ["some/path.txt"],
            r"calibrate: traces\[0\]: expected a Trace, got str 'some/path.txt' \(a file name: "
            r"read it with netsim\.traces\.read_trace\)",
        ),
        ("some/path.txt", r"calibrate: traces: expected a list of Traces .*, got 'some/path.txt'"),
        ([None], r"calibrate: traces\[0\]: expected a Trace, got NoneType None"),
    ],
)
def test_library_calibrate_refuses_what_is_not_a_trace(traces, match):
    from netsim.calibrate import calibrate

    from netsim import ScenarioError
    from netsim.topology import preset

    with pytest.raises(ScenarioError, match=match):
        calibrate(traces, preset("rtx4090-8x-epyc7542"), progress=None)
