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

from netsim import Status
from netsim.sweep import LinkBandwidth, SweepError, load_result
from netsim.sweep._store import COLUMNS, checksum

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
    partial = load_result(path)
    assert not partial.complete
    np.testing.assert_array_equal(partial.status[: 2 * CHUNK], 0)  # chunks 0 and 1 are stored
    np.testing.assert_array_equal(partial.status[2 * CHUNK :], Status.NOT_RUN)  # the rest reads as not run
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
    code = (
        "import jax; jax.config.update('jax_enable_x64', True); import sys, sweep_cases; "
        "sweep_cases.run_and_maybe_die(sys.argv[1], 2)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    partial = load_result(path)  # the killed writer left a readable file
    np.testing.assert_array_equal(partial.status[: 3 * CHUNK], 0)
    np.testing.assert_array_equal(partial.status[3 * CHUNK :], Status.NOT_RUN)
    ran = []
    resumed = grid_sweep().run(path, progress=False, on_chunk=ran.append)
    assert ran == [3, 4]
    _assert_same(resumed, uninterrupted)


def test_a_different_sweep_is_refused(tmp_path, uninterrupted):
    path = tmp_path / "x.h5"
    grid_sweep().run(path, chunk_size=CHUNK, progress=False)
    other = grid_sweep()
    other = type(other)(
        other.scenario, [LinkBandwidth("a_bw", match="a*", scale=[0.5, 1.0, 3.0]), *other.axes[1:]]
    )
    with pytest.raises(SweepError, match="holds a different sweep"):
        other.run(path, progress=False)
    replaced = other.run(path, progress=False, overwrite=True)
    assert replaced.complete and replaced.axis("a_bw").values[2] == 3.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.h5"]  # no temporary file left


def test_file_layout(tmp_path):
    path = tmp_path / "full.h5"
    grid_sweep().run(path, chunk_size=CHUNK, progress=False)
    with h5py.File(path) as f:
        assert f.attrs["format"] == "netsim-sweep"
        assert f["flow_finish"].shape == (24, 3) and f["link_utilization"].shape == (24, 4)
        assert (
            f["flow_finish"].chunks is None
        )  # contiguous and allocated at creation: no metadata writes later
        assert [x.decode() for x in f["link_ids"][...]] == ["ab", "bd", "ac", "cd"]
        assert f["axes/f1_bytes/value"].shape == (24,)


# --- reliability: bad arguments write nothing; damaged or unfinished rows are recomputed --------------
def test_bad_chunk_size_or_suffix_writes_no_file(tmp_path):
    for bad in (-5, 0, 2.5, True):
        with pytest.raises(SweepError, match="chunk_size: expected a positive integer"):
            grid_sweep().run(tmp_path / "r.h5", chunk_size=bad, progress=False)
    with pytest.raises(SweepError, match=r"out: .*x\.json.*HDF5.*\.h5 or \.hdf5"):
        grid_sweep().run(tmp_path / "x.json", chunk_size=CHUNK, progress=False)
    assert list(tmp_path.iterdir()) == []


def test_an_out_in_a_missing_folder_is_refused_before_running(tmp_path, monkeypatch):
    sweep = grid_sweep()
    monkeypatch.setattr(type(sweep), "plan", lambda self: pytest.fail("planned before checking out"))
    missing = tmp_path / "nope" / "x.h5"
    with pytest.raises(
        SweepError, match=f"^out: {str(missing)!r}: folder {str(missing.parent)!r} does not exist$"
    ):
        sweep.run(missing, chunk_size=CHUNK, progress=False)
    (tmp_path / "s.json").write_text("{}")
    under_file = tmp_path / "s.json" / "x.h5"
    with pytest.raises(SweepError, match="is a file, not a folder"):
        sweep.run(under_file, chunk_size=CHUNK, progress=False)
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]


def test_resume_reruns_chunks_with_rows_not_run(tmp_path, uninterrupted):
    # a chunk marked done (with a matching checksum) whose rows still say NOT_RUN is not final
    path = tmp_path / "n.h5"
    grid_sweep().run(path, chunk_size=CHUNK, progress=False)
    with h5py.File(path, "r+") as f:
        f["status"][6] = Status.NOT_RUN
        rows = {k: f[k][CHUNK : 2 * CHUNK] for k in COLUMNS if k in f}
        f["chunk_checksum"][1] = checksum(rows)
    ran = []
    resumed = grid_sweep().run(path, progress=False, on_chunk=ran.append)
    assert ran == [1]
    _assert_same(resumed, uninterrupted)


def test_damaged_chunk_is_recomputed_not_trusted(tmp_path, uninterrupted, capsys):
    path = tmp_path / "d.h5"
    grid_sweep().run(path, chunk_size=CHUNK, progress=False)
    with h5py.File(path) as f:  # where chunk 2's rows of each column lie in the file
        spans = [
            (f[k].id.get_offset() + 2 * CHUNK * f[k][0].nbytes, CHUNK * f[k][0].nbytes)
            for k in COLUMNS
            if k in f
        ]
    rng = np.random.default_rng(0)
    with open(path, "r+b") as raw:  # overwrite them with garbage, behind HDF5's back
        for offset, n in spans:
            raw.seek(offset)
            raw.write(rng.bytes(n))
    capsys.readouterr()
    damaged = load_result(path)  # read: the chunk's rows are shown as not run, not as garbage
    assert "chunk 2 (rows 10-14) does not match its checksum" in capsys.readouterr().err
    np.testing.assert_array_equal(damaged.status[10:15], Status.NOT_RUN)
    assert np.all(np.isnan(damaged.makespan[10:15])) and not damaged.complete
    ran = []
    resumed = grid_sweep().run(path, progress=False, on_chunk=ran.append)
    err = capsys.readouterr().err
    assert ran == [2] and "chunk 2 (rows 10-14) does not match its checksum" in err and "recomputing" in err
    _assert_same(resumed, uninterrupted)


def test_a_flipped_axis_value_is_detected(tmp_path, uninterrupted):
    # the axis values and ids are written once, at creation: their own checksum, not the chunks', covers them
    path = tmp_path / "a.h5"
    grid_sweep().run(path, chunk_size=CHUNK, progress=False)
    with h5py.File(path) as f:
        axis = next(iter(f["axes"]))
        offset = f["axes"][axis]["value"].id.get_offset()
    with open(path, "r+b") as raw:
        raw.seek(offset + 6)
        byte = raw.read(1)
        raw.seek(offset + 6)
        raw.write(bytes([byte[0] ^ 0x10]))
    for read in (lambda: load_result(path), lambda: grid_sweep().run(path, progress=False)):
        with pytest.raises(SweepError, match="axis or id datasets do not match their checksum"):
            read()


def test_flipped_header_bytes_end_in_one_sweep_error(tmp_path, capsys):
    # a bit flipped anywhere in the file's first 4 kB (superblock, object headers, B-trees, attributes):
    # a result, or a SweepError naming the file, never what h5py raises (KeyError, RuntimeError, OSError)
    path = tmp_path / "h.h5"
    grid_sweep().run(path, chunk_size=CHUNK, progress=False)
    good = path.read_bytes()
    bad = tmp_path / "bad.h5"
    refused = 0
    for offset in range(0, 4096, 5):
        flipped = bytearray(good)
        flipped[offset] ^= 0x10
        bad.write_bytes(bytes(flipped))
        try:
            load_result(bad)
        except SweepError as e:
            assert str(bad) in str(e)
            refused += 1
    assert refused > 50  # the flips did reach HDF5's structures


def test_a_sweep_in_use_is_reported(tmp_path):
    path = tmp_path / "busy.h5"
    grid_sweep().run(path, chunk_size=CHUNK, progress=False)
    hold = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import h5py, sys, time; f = h5py.File(sys.argv[1], 'r+'); "
            "print('open', flush=True); time.sleep(60)",
            str(path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert hold.stdout.readline().strip() == "open"
        with pytest.raises(SweepError, match="in use by another sweep"):
            grid_sweep().run(path, progress=False)
        with pytest.raises(SweepError, match="in use by another sweep"):
            load_result(path)
    finally:
        hold.kill()
        hold.wait()
        hold.stdout.close()


def test_stale_temporary_files_are_removed(tmp_path, capsys):
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale, live = tmp_path / f".t.h5.tmp-{dead.pid}", tmp_path / f".t.h5.tmp-{os.getppid()}"
    stale.write_bytes(b"half-written by a killed run")
    live.write_bytes(b"being written by a running one")
    grid_sweep().run(tmp_path / "t.h5", chunk_size=CHUNK, progress=False)
    assert not stale.exists() and live.exists()
    assert f"removed {stale}" in capsys.readouterr().err


def test_version_1_files_are_read_but_not_resumed(tmp_path):
    path = tmp_path / "v1.h5"
    grid_sweep().run(path, chunk_size=CHUNK, progress=False)
    with h5py.File(path, "r+") as f:  # as version 1 wrote an interrupted sweep: -1 for rows not run
        f.attrs["version"] = 1
        f["status"][20:] = -1
        del f["chunk_checksum"]
    old = load_result(path)
    np.testing.assert_array_equal(old.status[20:], Status.NOT_RUN)
    assert old.reasons(20) == ["not run yet"] and old.reasons(0) == []
    with pytest.raises(SweepError, match=r"sweep file version 1.*--overwrite"):
        grid_sweep().run(path, progress=False)
