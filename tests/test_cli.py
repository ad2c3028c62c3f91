"""The command line, as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def netsim(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The installed console script, run away from the source tree (whose netsim/ lacks kernels/)."""
    script = Path(sys.executable).with_name("netsim")
    return subprocess.run([str(script), *args], capture_output=True, text=True, timeout=300, cwd=cwd)


def test_run_example(tmp_path):
    out = tmp_path / "r.json"
    p = netsim("run", str(EXAMPLES / "pcie_ring_allreduce.json"), "--out", str(out), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "makespan" in p.stdout and "busiest links" in p.stdout
    data = json.loads(out.read_text())
    assert len(data["flows"]) == 112 and data["makespan"] > 0


def test_bad_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"links": [{"id": "l", "src": "a", "dst": "b", "bandwidth": -1}],
                               "flows": [{"id": "f", "src": "a", "dst": "b", "bytes": 1}]}))
    p = netsim("run", str(bad), cwd=tmp_path)
    assert p.returncode == 2
    assert "links[0] (id 'l').bandwidth: must be > 0, got -1" in p.stderr
    assert "Traceback" not in p.stderr


def test_bad_output_paths_fail_before_simulating(tmp_path):
    example = str(EXAMPLES / "pcie_ring_allreduce.json")
    p = netsim("run", example, "--out", str(tmp_path / "r.csv"), cwd=tmp_path)
    assert p.returncode == 2 and "--out: unknown output type '.csv'" in p.stderr
    missing = tmp_path / "nope" / "r.json"
    p = netsim("run", example, "--out", str(missing), cwd=tmp_path)
    assert p.returncode == 2 and f"--out: folder {str(missing.parent)!r} does not exist" in p.stderr
    assert "simulating" not in p.stderr  # refused before any work


def test_version(tmp_path):
    p = netsim("--version", cwd=tmp_path)
    assert p.returncode == 0 and p.stdout.startswith("netsim ")
