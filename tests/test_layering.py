"""kernels/ stays pure: it imports only jax, equinox, jaxtyping and numpy (never netsim's host layer)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import netsim.calibrate

import netsim

ALLOWED = {
    "jax",
    "equinox",
    "jaxtyping",
    "numpy",
    "__future__",
    "functools",
    "typing",
    "dataclasses",
    "math",
    "enum",
    "collections",
}


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


def test_installed_inside_the_netsim_namespace(tmp_path):
    assert netsim.kernels.__name__ == "netsim.kernels"
    assert netsim.calibrate.__name__ == "netsim.calibrate"
    # In a fresh interpreter outside the checkout (-P: no working directory on the path), no top-level
    # package named kernels or calibrate is importable: the install put them inside netsim.
    code = (
        "import importlib.util, netsim.kernels, netsim.calibrate\n"
        "for name in ('kernels', 'calibrate'):\n"
        "    spec = importlib.util.find_spec(name)\n"
        "    assert spec is None or spec.origin is None, spec.origin\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120
    )
    assert p.returncode == 0, p.stderr


def test_import_from_the_repository_root():
    """A notebook or REPL started in the checkout imports the source folder: kernels/ and calibrate/ resolve."""
    root = Path(__file__).resolve().parents[1]
    code = "import netsim, netsim.calibrate; print(netsim.kernels.__name__, netsim.calibrate.__name__)"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["netsim.kernels", "netsim.calibrate"]
