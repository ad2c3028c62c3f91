"""Measured traces shipped with netsim, so that tests, presets and docs work from any clone or install.

    from netsim.data import TRACES, trace_path
    read_trace(trace_path("m01_8x4090_2xEPYC7542_allreduce_p2p_on.txt"))

Every file in `traces/` starts with the lines saying where it came from (SOURCE, MACHINE); see
traces/README.md.
"""

from __future__ import annotations

import pathlib

from .._errors import ScenarioError

__all__ = ["DATA_DIR", "TRACES", "TRACES_DIR", "trace_path"]

# A plain folder beside this file: package-data installs it with the package (pyproject), and a
# folder path (not an importlib.resources handle) is what read_trace and open() take.
DATA_DIR = pathlib.Path(__file__).resolve().parent
TRACES_DIR = DATA_DIR / "traces"
TRACES: tuple[str, ...] = tuple(
    sorted(p.name for p in TRACES_DIR.iterdir() if p.is_file() and p.name != "README.md")
)


def trace_path(name: str) -> pathlib.Path:
    """The path of the shipped trace file `name` (a file name from `TRACES`, no folder).

    Raises:
        ScenarioError: naming `name` and listing the known files when it is not one of them.
    """
    if name not in TRACES:
        raise ScenarioError(f"no shipped trace named {name!r}; known: {', '.join(TRACES)}")
    return TRACES_DIR / name
