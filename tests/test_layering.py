"""kernels/ stays pure: it imports only jax, equinox, jaxtyping and numpy (never netsim's host layer)."""

from __future__ import annotations

import ast
from pathlib import Path

import netsim
import netsim.calibrate

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
    import importlib.metadata

    assert netsim.kernels.__name__ == "netsim.kernels"
    assert netsim.calibrate.__name__ == "netsim.calibrate"
    # nothing with a generic name is installed at the top level of site-packages
    files = importlib.metadata.files("netsim") or []
    tops = {f.parts[0] for f in files if f.suffix == ".py" or f.name.endswith(".pth")}
    assert not tops & {"kernels", "calibrate"}, tops
