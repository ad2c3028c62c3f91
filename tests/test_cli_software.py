"""`netsim collective --software none|nccl|FILE`: the software costs a collective pays, visible and
overridable (an uncalibrated fabric gets its links' busbw with none, less with NCCL-like costs)."""

import pytest

from netsim import cli


def busbw(capsys, *args):
    rc = cli.main(["collective", "all_reduce", "-t", "pcie-4gpu", "-b", "1M", "-e", "1M", *args])
    out = capsys.readouterr().out
    assert rc == 0, out
    row = next(line for line in out.splitlines() if line.strip().startswith("1048576"))
    return float(row.split()[7])


def test_software_choices(capsys):
    none, nccl = busbw(capsys), busbw(capsys, "--software", "nccl")
    assert none == busbw(capsys, "--software", "none")  # auto on an uncalibrated preset: no costs
    assert none == pytest.approx(25.8, rel=1e-3)  # the PCIe link: the ring's busbw bound
    assert nccl < 0.9 * none  # per-step overheads at 1 MiB over 4 ranks
    fitted = busbw(capsys, "--software", "rtx4090-8x-epyc7542")
    assert fitted != nccl and fitted < none


def test_a_software_source_without_costs_is_refused(capsys):
    rc = cli.main(["collective", "all_reduce", "-t", "pcie-4gpu", "--software", "pcie-8gpu"])
    assert rc == 2 and "--software" in capsys.readouterr().err


@pytest.mark.parametrize("path", ["/nonexist.json", "no/such/costs", "absent.json"])
def test_a_software_file_that_does_not_exist_is_named(capsys, tmp_path, monkeypatch, path):
    monkeypatch.chdir(tmp_path)
    rc = cli.main(["collective", "all_reduce", "-t", "pcie-4gpu", "--software", path])
    err = capsys.readouterr().err
    assert rc == 2 and f"netsim: error: --software: file {path!r} does not exist" in err, err
