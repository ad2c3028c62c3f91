"""netsim's executable cache (netsim._cache): later processes load the compiled engine instead of tracing,
lowering and compiling it, and get the same bits; a damaged cache file costs a compile, never a result."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np

import netsim
from netsim._cache import executable_key
from netsim._runner import _whole

EXAMPLE = str(Path(__file__).resolve().parents[1] / "examples" / "pcie_ring_allreduce.json")


def run(tmp: Path, cache: Path, *options: str) -> tuple[dict, str]:
    out = tmp / "out.json"
    env = {**os.environ, "NETSIM_CACHE_DIR": str(cache)}
    p = subprocess.run(
        [sys.executable, "-m", "netsim.cli", "run", EXAMPLE, "--out", str(out), *options],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert p.returncode == 0, p.stderr
    data = json.loads(out.read_text())
    data.pop("wall_time")
    return data, p.stderr


def test_cached_engine_gives_the_same_bits_and_survives_damage(tmp_path):
    cache = tmp_path / "cache"
    first, err = run(tmp_path, cache)  # compiles and stores the engine
    files = sorted((cache / "executables").glob("*.bin"))  # compile_times.json lies beside them
    assert len(files) == 2, files  # the engine's start state and its slices (netsim._simulate._run_reporting)
    stored = {f: (f.read_bytes(), f.stat().st_mtime_ns) for f in files}
    again, err = run(tmp_path, cache)  # loads them: not compiled, so not written again
    assert {f: f.stat().st_mtime_ns for f in files} == {f: t for f, (_, t) in stored.items()}
    assert "could not be loaded" not in err and "not cached" not in err, err
    assert again == first  # every finish time, byte count and statistic, bit for bit (JSON floats round-trip)
    plain, _ = run(tmp_path, tmp_path / "off", "--no-compile-cache")  # compiled in the process, no cache
    assert plain == first and not (tmp_path / "off").exists()

    for f, (data, _) in stored.items():  # truncated files: compiled again, same result
        f.write_bytes(data[: len(data) // 2])
    damaged, err = run(tmp_path, cache)
    assert err.count("could not be loaded") == 2 and "compiling it again" in err, err
    assert damaged == first
    files[0].write_bytes(b"not a pickle")
    damaged, err = run(tmp_path, cache)  # files[1] was replaced by a good one
    assert err.count("could not be loaded") == 1 and damaged == first


def test_key_names_what_determines_the_executable():
    compiled = netsim.compile_scenario(netsim.Scenario.load(EXAMPLE))
    args = (compiled.network, compiled.program)
    options = {"max_events": compiled.max_events, "record": 0, "tolerance": 0.0}
    with jax.enable_x64(True):
        key = executable_key(_whole, args, options)
        assert executable_key(_whole, args, dict(options)) == key  # deterministic
        assert executable_key(_whole, args, {**options, "tolerance": 0.01}) != key
        assert executable_key(_whole, args, {**options, "max_events": 1 + compiled.max_events}) != key
        bigger = compiled.padded(dataclasses.replace(compiled.shape, items=2 * compiled.shape.items))
        assert executable_key(_whole, (bigger.network, bigger.program), options) != key
        f32 = dataclasses.replace(compiled.program, size=np.asarray(compiled.program.size, np.float32))
        assert executable_key(_whole, (compiled.network, f32), options) != key
    with jax.enable_x64(False):
        assert executable_key(_whole, args, options) != key


def test_a_sweep_loads_its_batched_engine_in_a_later_process(tmp_path):
    # run_batch on one device goes through the executable cache too: the second process loads the batched
    # engine (no file written again) and gets every output bit for bit
    import h5py

    spec = Path(EXAMPLE).with_name("sweep_pcie_random_bw.json")
    env = {**os.environ, "NETSIM_CACHE_DIR": str(tmp_path / "cache"), "JAX_PLATFORMS": "cpu"}

    def sweep(out: Path) -> dict:
        cmd = [sys.executable, "-m", "netsim.cli", "sweep", str(spec), "--out", str(out)]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
        assert p.returncode == 0, p.stderr
        with h5py.File(out) as f:
            data = {}
            f.visititems(lambda name, x: data.update({name: x[()]}) if isinstance(x, h5py.Dataset) else None)
        return data

    first = sweep(tmp_path / "a.h5")
    files = {f: f.stat().st_mtime_ns for f in (tmp_path / "cache" / "executables").glob("*.bin")}
    assert files
    again = sweep(tmp_path / "b.h5")
    assert {f: f.stat().st_mtime_ns for f in files} == files
    assert sorted(again) == sorted(first)
    for name, value in first.items():
        assert np.array_equal(again[name], value), name
