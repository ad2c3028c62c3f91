"""HDF5 results: written chunk by chunk; an interrupted sweep (exception or SIGKILL) resumes where it
stopped and ends identical to an uninterrupted run; a file of another sweep is refused."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from sweep_cases import CHUNK, columns, grid_sweep

from netsim.sweep import LinkBandwidth, SweepError, load

HERE = Path(__file__).resolve().parent


class Stop(Exception):
    pass


def _assert_same(a, b):
    ca, cb = columns(a), columns(b)
    assert ca.keys() == cb.keys()
    for k in ca:
        np.testing.assert_array_equal(ca[k], cb[k], err_msg=k)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    path = tmp_path_factory.mktemp("full") / "full.h5"
    return grid_sweep().run(path, chunk_size=CHUNK, progress=False)


def test_resume_after_exception(tmp_path, uninterrupted):
    path = tmp_path / "r.h5"

    def stop_after_two(c):
        if c == 1:
            raise Stop

    with pytest.raises(Stop):
        grid_sweep().run(path, chunk_size=CHUNK, progress=False, on_chunk=stop_after_two)
    partial = load(path)
    assert not partial.complete
    np.testing.assert_array_equal(partial.status[: 2 * CHUNK], 0)  # chunks 0 and 1 are stored
    np.testing.assert_array_equal(partial.status[2 * CHUNK :], -1)  # the rest reads as not run
    assert np.all(np.isnan(partial.makespan[2 * CHUNK :]))
    with h5py.File(path) as f:
        np.testing.assert_array_equal(f["chunk_done"][...], [1, 1, 0, 0, 0])
    ran = []
    resumed = grid_sweep().run(path, progress=False, on_chunk=ran.append)  # chunk size comes from the file
    assert ran == [2, 3, 4]
    _assert_same(resumed, uninterrupted)


def test_resume_after_sigkill(tmp_path, uninterrupted):
    path = tmp_path / "k.h5"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    code = "import jax; jax.config.update('jax_enable_x64', True); import sys, sweep_cases; " \
           "sweep_cases.run_and_maybe_die(sys.argv[1], 2)"
    proc = subprocess.run([sys.executable, "-c", code, str(path)], env=env, capture_output=True, text=True,
                          timeout=300, cwd=HERE)  # not the repo root, whose netsim/ shadows the install
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    partial = load(path)  # the killed writer left a readable file
    np.testing.assert_array_equal(partial.status[: 3 * CHUNK], 0)
    np.testing.assert_array_equal(partial.status[3 * CHUNK :], -1)
    ran = []
    resumed = grid_sweep().run(path, progress=False, on_chunk=ran.append)
    assert ran == [3, 4]
    _assert_same(resumed, uninterrupted)


def test_a_different_sweep_is_refused(tmp_path, uninterrupted):
    path = tmp_path / "x.h5"
    grid_sweep().run(path, chunk_size=CHUNK, progress=False)
    other = grid_sweep()
    other = type(other)(other.scenario, [LinkBandwidth("a_bw", match="a*", scale=[0.5, 1.0, 3.0]), *other.axes[1:]])
    with pytest.raises(SweepError, match="holds a different sweep"):
        other.run(path, progress=False)
    replaced = other.run(path, progress=False, overwrite=True)
    assert replaced.complete and replaced.axis("a_bw").values[2] == 3.0
    assert not Path(tmp_path, ".tmp-x.h5").exists()


def test_file_layout(tmp_path):
    path = tmp_path / "full.h5"
    grid_sweep().run(path, chunk_size=CHUNK, progress=False)
    with h5py.File(path) as f:
        assert f.attrs["format"] == "netsim-sweep"
        assert f["flow_finish"].shape == (24, 3) and f["link_utilization"].shape == (24, 4)
        assert f["flow_finish"].chunks is None  # contiguous and allocated at creation: no metadata writes later
        assert [x.decode() for x in f["link_ids"][...]] == ["ab", "bd", "ac", "cd"]
        assert f["axes/f1_bytes/value"].shape == (24,)
