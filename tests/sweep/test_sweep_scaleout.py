"""Scale-out: a sweep sharded over 4 local devices, and over 2 jax.distributed processes on
localhost, gives exactly the single-device answers. Each runs in subprocesses (device count and the
distributed runtime are fixed per process)."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
from sweep_cases import CHUNK, columns, grid_sweep, scenario_sweep

from netsim.sweep import load_result

HERE = Path(__file__).resolve().parent
PRELUDE = "import jax; jax.config.update('jax_enable_x64', True); import sys, sweep_cases; "


def _env(**extra):
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        "JAX_PLATFORMS": "cpu",
        **extra,
    }


def test_four_local_devices_match_one(tmp_path):
    path = tmp_path / "four.h5"
    # the tests' own XLA flags kept (tests/conftest.py): the single-device answers below are computed under them
    env = _env(XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=4")
    proc = subprocess.run(
        [sys.executable, "-c", PRELUDE + "sweep_cases.sharded_run(sys.argv[1])", str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ran on 4 devices" in proc.stdout
    _assert_same(load_result(path), scenario_sweep().run(progress=False))


def test_two_processes_match_one(tmp_path):
    path = tmp_path / "dist.h5"
    for i, (p, out, err) in enumerate(_two_processes(path)):
        assert p.returncode == 0, f"process {i}: {err[-3000:]}"
        assert f"process {i} done" in out
    _assert_same(load_result(path), grid_sweep().run(progress=False, chunk_size=CHUNK))


def test_two_processes_stop_when_process_0_cannot_open_the_file(tmp_path):
    # process 0 opens the results file; when that fails the other process must fail too, not wait
    path = tmp_path / "dist.h5"
    path.write_text("not HDF5")
    (p0, _, err0), (p1, _, err1) = _two_processes(path, timeout=120)
    assert p0.returncode != 0 and "not a readable HDF5 file" in err0, err0[-3000:]
    assert p1.returncode != 0 and "process 0 could not open the results file" in err1, err1[-3000:]
    assert path.read_text() == "not HDF5"  # untouched


def _two_processes(path: Path, timeout: int = 300):
    """(process, stdout, stderr) of the 2 jax.distributed workers running grid_sweep to `path`."""
    with socket.socket() as s:  # a free port on the loopback interface only
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = PRELUDE + "sweep_cases.distributed_worker(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(port), str(i), str(path)],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    try:
        outs = [p.communicate(timeout=timeout) for p in procs]
    finally:
        for p in procs:
            p.kill()
    return [(p, out, err) for p, (out, err) in zip(procs, outs, strict=True)]


def _assert_same(got, single):
    assert got.complete
    for k, v in columns(single).items():
        np.testing.assert_array_equal(columns(got)[k], v, err_msg=k)
