"""The command line, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from netsim import cli
from netsim.cli import cpu_threads

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def netsim(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The installed console script, run away from the source tree, with its compilation cache in `cwd`."""
    script = Path(sys.executable).with_name("netsim")
    env = {**os.environ, "NETSIM_CACHE_DIR": str(cwd / "jax-cache"), **(env or {})}
    return subprocess.run([str(script), *args], capture_output=True, text=True, timeout=300, cwd=cwd, env=env)


def test_compilation_cache_and_fast_mode(tmp_path):
    example = str(EXAMPLES / "pcie_ring_allreduce.json")
    cache = tmp_path / "cache"
    p = netsim("run", example, "--tolerance", "0.01", cwd=tmp_path, env={"NETSIM_CACHE_DIR": str(cache)})
    assert p.returncode == 0, p.stderr
    assert any(cache.iterdir())  # the compiled engine is kept for the next process
    off = tmp_path / "off"
    p = netsim("run", example, "--no-compile-cache", cwd=tmp_path, env={"NETSIM_CACHE_DIR": str(off)})
    assert p.returncode == 0 and not off.exists()
    p = netsim("run", example, "--tolerance", "2", cwd=tmp_path)
    assert p.returncode == 2 and "--tolerance: must be a number in [0, 0.5] (0 = exact), got '2'" in p.stderr


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
    bad.write_text(
        json.dumps(
            {
                "links": [{"id": "l", "src": "a", "dst": "b", "bandwidth": -1}],
                "flows": [{"id": "f", "src": "a", "dst": "b", "bytes": 1}],
            }
        )
    )
    p = netsim("run", str(bad), cwd=tmp_path)
    assert p.returncode == 2
    assert "links[0] (id 'l').bandwidth: must be > 0, got -1" in p.stderr
    assert "Traceback" not in p.stderr


def test_outputs_never_replace_the_input_or_each_other(tmp_path):
    scenario = tmp_path / "s.json"
    scenario.write_text((EXAMPLES / "pcie_ring_allreduce.json").read_text())
    before = scenario.read_text()
    for args, message in [
        (["--out", str(scenario)], "--out: {s!r} is also the scenario; refusing to overwrite it"),
        (
            ["--trace", str(tmp_path / "." / "s.json")],
            "--trace: {t!r} is also the scenario; refusing to overwrite it",
        ),
        (
            ["--out", str(tmp_path / "r.json"), "--trace", str(tmp_path / "r.json")],
            "--trace: {r!r} is also --out; refusing to overwrite it",
        ),
    ]:
        with pytest.raises(OSError) as e:
            cli.check_outputs(
                {"the scenario": str(scenario)},
                {
                    "--out": (_opt(args, "--out"), (".json", ".h5")),
                    "--trace": (_opt(args, "--trace"), (".json",)),
                },
            )
        assert str(e.value) == message.format(
            s=str(scenario), t=str(tmp_path / "." / "s.json"), r=str(tmp_path / "r.json")
        )
    link = tmp_path / "hard.json"
    os.link(scenario, link)  # another name for the same file
    with pytest.raises(OSError, match="is also the scenario"):
        cli.check_outputs({"the scenario": str(scenario)}, {"--out": (str(link), (".json",))})
    p = netsim("run", str(scenario), "--out", str(scenario), cwd=tmp_path)
    assert p.returncode == 2 and "refusing to overwrite it" in p.stderr and "simulating" not in p.stderr
    assert scenario.read_text() == before


def _opt(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


@pytest.mark.skipif(not os.path.isdir("/sys/kernel"), reason="needs a read-only folder even for root: sysfs")
def test_unwritable_output_folder_is_found_before_simulating(tmp_path):
    with pytest.raises(OSError, match="--out: cannot write in folder '/sys'"):
        cli.check_outputs({}, {"--out": ("/sys/r.json", (".json",))})
    if os.geteuid() != 0:  # root writes to read-only folders
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o555)
        with pytest.raises(OSError, match=r"--trace: cannot write in folder .*locked.*Permission denied"):
            cli.check_outputs({}, {"--trace": (str(locked / "t.json"), (".json",))})


def test_exit_codes_input_io_and_bugs(tmp_path, monkeypatch, capsys):
    def handler(error):
        def run(args):
            raise error

        return run

    example = str(EXAMPLES / "pcie_ring_allreduce.json")
    for error, code, message in [
        (
            netsim_module().ScenarioError("flows[0].bytes: must be >= 0, got -1"),
            2,
            "netsim: error: flows[0].bytes: must be >= 0, got -1\n",
        ),
        (
            FileNotFoundError(2, "No such file or directory", "x.json"),
            2,
            "netsim: error: [Errno 2] No such file or directory: 'x.json'\n",
        ),
    ]:
        monkeypatch.setattr(cli.run, "_run", handler(error))
        assert cli.main(["run", example]) == code
        assert capsys.readouterr().err == message
    monkeypatch.setattr(cli.run, "_run", handler(KeyError("oops")))
    assert cli.main(["run", example]) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        "netsim: internal error (please report): KeyError: 'oops'\nTraceback (most recent call"
    )


def netsim_module():
    import netsim

    return netsim


def test_help_version_and_argument_errors_do_not_import_jax():
    code = (
        "import sys\nfrom netsim.cli import main\n"
        "for argv in (['--version'], ['--help'], ['run', '--help'], ['run'], ['bogus'], ['run', 'x', '--top']):\n"
        "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
        "print(sorted(m for m in sys.modules if m == 'jax' or m.startswith(('jax.', 'jaxlib'))))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1] == "[]"
    assert "usage: netsim" in p.stdout and "invalid choice: 'bogus'" in p.stderr


def test_bad_output_paths_fail_before_simulating(tmp_path):
    example = str(EXAMPLES / "pcie_ring_allreduce.json")
    p = netsim("run", example, "--out", str(tmp_path / "r.csv"), cwd=tmp_path)
    assert p.returncode == 2 and "--out: unknown output type '.csv'" in p.stderr
    missing = tmp_path / "nope" / "r.json"
    p = netsim("run", example, "--out", str(missing), cwd=tmp_path)
    assert p.returncode == 2 and f"--out: folder {str(missing.parent)!r} does not exist" in p.stderr
    assert "simulating" not in p.stderr  # refused before any work


def test_an_output_under_a_file_says_the_file_is_not_a_folder(tmp_path, capsys):
    scenario = tmp_path / "s.json"
    scenario.write_text((EXAMPLES / "pcie_ring_allreduce.json").read_text())
    for out in ("s.json/x.json", "s.json/a/x.json"):
        rc = cli.main(["run", str(scenario), "--out", str(tmp_path / out), "--no-compile-cache"])
        err = capsys.readouterr().err
        assert rc == 2 and f"--out: folder {str(scenario)!r} is a file, not a folder" in err, err
        assert "does not exist" not in err and "simulating" not in err


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
def test_set_cpu_threads_sizes_xla_pool(n):
    """The knob is jaxlib's (PJRT_NPROC): this fails if a jaxlib stops reading it."""
    code = (
        f"from netsim import set_cpu_threads; set_cpu_threads({n}); import jax.numpy as jnp, os; "
        "jnp.ones(3).sum().block_until_ready(); "
        "print(sum(open(f'/proc/self/task/{t}/comm').read().startswith('tf_XLAEigen') "
        "for t in os.listdir('/proc/self/task')))"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PJRT_NPROC", "NPROC")}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    assert int(p.stdout) == (n or len(os.sched_getaffinity(0)))


def test_bad_cpu_threads_is_a_clear_error(tmp_path):
    p = netsim("run", str(EXAMPLES / "pcie_ring_allreduce.json"), "--cpu-threads", "-1", cwd=tmp_path)
    assert p.returncode == 2
    assert "--cpu-threads: must be a whole number in [0, " in p.stderr and "got '-1'" in p.stderr
