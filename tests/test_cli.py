"""The command line, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from netsim.cli import cpu_threads

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
    assert "on cpu, XLA threads: 1" in p.stderr  # one simulation: one thread unless told
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


def test_cpu_threads_option_then_environment_then_command_default(monkeypatch):
    monkeypatch.delenv("PJRT_NPROC", raising=False)
    assert cpu_threads(None, "run") == 1 and cpu_threads(None, "sweep") == 0 and cpu_threads(3, "run") == 3
    monkeypatch.setenv("PJRT_NPROC", "2")
    assert cpu_threads(None, "run") == 2 and cpu_threads(0, "run") == 0


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads by name under /proc")
@pytest.mark.parametrize("n", [1, 0])
def test_set_cpu_threads_sizes_xla_pool(n, tmp_path):
    """The knob is jaxlib's (PJRT_NPROC): this fails if a jaxlib stops reading it."""
    code = (f"from netsim.cli import set_cpu_threads; set_cpu_threads({n}); import jax.numpy as jnp, os; "
            "jnp.ones(3).sum().block_until_ready(); "
            "print(sum(open(f'/proc/self/task/{t}/comm').read().startswith('tf_XLAEigen') "
            "for t in os.listdir('/proc/self/task')))")
    env = {k: v for k, v in os.environ.items() if k not in ("PJRT_NPROC", "NPROC")}
    p = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=120, env=env,
                       cwd=tmp_path)  # the installed package, not the source folder
    assert p.returncode == 0, p.stderr
    assert int(p.stdout) == (n or len(os.sched_getaffinity(0)))


def test_bad_cpu_threads_is_a_clear_error(tmp_path):
    p = netsim("run", str(EXAMPLES / "pcie_ring_allreduce.json"), "--cpu-threads", "-1", cwd=tmp_path)
    assert p.returncode == 2
    assert "--cpu-threads: must be a whole number >= 0 (0 = one per core), got '-1'" in p.stderr
