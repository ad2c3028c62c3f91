"""Where the test suite's time goes: JAX's compiles, added up by executable and by test file (a pytest plugin).

Most of the default suite's CPU time is compiling (benchmarks/RESULTS.md, Rounds 21-22). This plugin listens
to JAX's own compile events (`jax.monitoring`: XLA's backend compile, with the jitted function's name, and
the tracing and lowering before it), adds them up per test file and per executable in each test process,
and prints the totals after the run (with pytest-xdist, the workers' tallies merged). Run it cold, with
JAX's persistent cache off, so that every process compiles what it runs:

    JAX_COMPILATION_CACHE_DIR= PYTHONPATH=benchmarks pytest -q -n 2 -p suite_compiles
    SUITE_COMPILES_JSON=census.json ...    # also writes the merged tally

The tests' subprocesses compile too and are not counted.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import tempfile

import jax.monitoring

COMPILE = "/jax/core/compile/backend_compile_duration"
BEFORE = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration")
TOP = 12  # rows of each table

_test_file = ["(outside tests)"]
_by_function: dict[str, list] = collections.defaultdict(lambda: [0, 0.0, set()])  # compiles, s, files
_by_file: dict[str, list] = collections.defaultdict(lambda: [0, 0.0, 0.0])  # compiles, XLA s, trace + lower s


def _listen(event: str, duration: float, **labels) -> None:
    if event == COMPILE:
        tally = _by_function[str(labels.get("fun_name", "?"))]
        tally[0] += 1
        tally[1] += duration
        tally[2].add(_test_file[0])
        _by_file[_test_file[0]][0] += 1
        _by_file[_test_file[0]][1] += duration
    elif event in BEFORE:
        _by_file[_test_file[0]][2] += duration


jax.monitoring.register_event_duration_secs_listener(_listen)


def pytest_configure(config) -> None:
    if "PYTEST_XDIST_WORKER" not in os.environ:  # the controller (or the one process): workers inherit it
        os.environ["SUITE_COMPILES_DIR"] = tempfile.mkdtemp(prefix="suite-compiles-")


def pytest_runtest_logstart(nodeid: str, location) -> None:
    _test_file[0] = nodeid.split("::")[0]


def _write_json(path: str, data: dict) -> None:
    """Whole or not at all (a stopped run leaves no half file). netsim is imported here, after the run: a
    plugin that imported it on loading would come before jaxtyping's import hook, which then refuses."""
    from netsim.checks import write_atomic

    write_atomic(path, json.dumps(data, indent=1))


def pytest_sessionfinish(session) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    functions = {k: [v[0], v[1], sorted(v[2])] for k, v in _by_function.items()}
    path = os.path.join(os.environ["SUITE_COMPILES_DIR"], f"{worker}.json")
    _write_json(path, {"functions": functions, "files": dict(_by_file)})


def merged(folder: str) -> dict:
    """The tallies of every process that ran tests, added up."""
    functions = collections.defaultdict(lambda: [0, 0.0, set()])
    files = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for name in sorted(n for n in os.listdir(folder) if n.endswith(".json")):
        with open(os.path.join(folder, name)) as f:
            part = json.load(f)
        for k, (n, s, where) in part["functions"].items():
            functions[k][0] += n
            functions[k][1] += s
            functions[k][2].update(where)
        for k, row in part["files"].items():
            files[k] = [a + b for a, b in zip(files[k], row, strict=True)]
    return {"functions": {k: [n, s, sorted(w)] for k, (n, s, w) in functions.items()}, "files": dict(files)}


def pytest_terminal_summary(terminalreporter) -> None:
    if "PYTEST_XDIST_WORKER" in os.environ:
        return
    folder = os.environ["SUITE_COMPILES_DIR"]
    census = merged(folder)
    shutil.rmtree(folder, ignore_errors=True)
    functions, files = census["functions"], census["files"]
    write = terminalreporter.write_line
    total = sum(v[1] for v in functions.values())
    write(
        f"suite_compiles: {sum(v[0] for v in functions.values())} XLA compiles, {total:.1f} s; tracing and "
        f"lowering {sum(v[2] for v in files.values()):.1f} s (this process and its workers)"
    )
    write(f"{'executable':40s} {'compiles':>8s} {'XLA s':>8s} {'files':>5s}")
    for name, (n, s, where) in sorted(functions.items(), key=lambda kv: -kv[1][1])[:TOP]:
        write(f"{name[:40]:40s} {n:8d} {s:8.1f} {len(where):5d}")
    write(f"{'test file':56s} {'compiles':>8s} {'XLA s':>8s} {'trace+lower s':>13s}")
    for name, (n, s, before) in sorted(files.items(), key=lambda kv: -(kv[1][1] + kv[1][2]))[:TOP]:
        write(f"{name[:56]:56s} {n:8d} {s:8.1f} {before:13.1f}")
    if os.environ.get("SUITE_COMPILES_JSON"):
        _write_json(os.environ["SUITE_COMPILES_JSON"], census)
