"""The command line, as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def netsim(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "netsim.cli", *args], capture_output=True, text=True, timeout=300)


def test_run_example(tmp_path):
    out = tmp_path / "r.json"
    p = netsim("run", str(EXAMPLES / "pcie_ring_allreduce.json"), "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert "makespan" in p.stdout and "busiest links" in p.stdout
    data = json.loads(out.read_text())
    assert len(data["flows"]) == 112 and data["makespan"] > 0


def test_bad_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"links": [{"id": "l", "src": "a", "dst": "b", "bandwidth": -1}],
                               "flows": [{"id": "f", "src": "a", "dst": "b", "bytes": 1}]}))
    p = netsim("run", str(bad))
    assert p.returncode == 2
    assert "links[0] (id 'l').bandwidth: must be > 0, got -1" in p.stderr
    assert "Traceback" not in p.stderr
