"""kernels/ stays pure: it imports only jax, equinox, jaxtyping and numpy (never netsim's host layer)."""

from __future__ import annotations

import ast
from pathlib import Path

import netsim.calibrate

import netsim

ALLOWED = {"jax", "equinox", "jaxtyping", "numpy", "__future__", "functools", "typing", "dataclasses", "math"}


def test_kernels_import_only_numerics():
    root = Path(netsim.kernels.__file__).parent
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] in ALLOWED, f"{path.name} imports {name}"


def test_installed_inside_the_netsim_namespace():
    import importlib.util

    assert netsim.kernels.__name__ == "netsim.kernels"
    assert netsim.calibrate.__name__ == "netsim.calibrate"
    # no regular top-level package named kernels or calibrate is importable (tests/kernels, a folder
    # of test files without __init__.py, shows up as a namespace package with no origin)
    for name in ("kernels", "calibrate"):
        spec = importlib.util.find_spec(name)
        assert spec is None or spec.origin is None, f"a top-level {name!r} package is installed: {spec.origin}"
