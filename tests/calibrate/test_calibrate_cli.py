"""`netsim calibrate`: argument handling, errors naming file and line, and (slow) a run end to end."""

import argparse
import json

import pytest
from netsim.calibrate import presets

from netsim._calibrate_cli import register
from netsim.data import trace_path


def run(argv):
    parser = argparse.ArgumentParser(prog="netsim")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["calibrate", *argv])
    return args.handler(args)


def test_register_adds_the_subcommand(capsys):
    with pytest.raises(SystemExit):
        run(["--help"])
    out = capsys.readouterr().out
    assert "--topology" in out and "--out" in out and "nvidia-smi topo" in out and "calibration JSON" in out


def test_unknown_topology(tmp_path, capsys):
    assert run([str(tmp_path / "t.txt"), "--topology", "no-such-box", "--out", str(tmp_path / "p.json")]) == 2
    assert "neither a topology preset" in capsys.readouterr().err


def test_malformed_trace_names_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_text(
        "P2P Connectivity Matrix\n   D\\D     0     1\n     0       1     x\n     1       1     1\n"
    )
    assert run([str(bad), "--topology", "rtx4090-8x-epyc7542", "--out", str(tmp_path / "p.json")]) == 2
    assert "bad.txt:3: column 1: cannot read 'x'" in capsys.readouterr().err
    assert not (tmp_path / "p.json").exists()


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
