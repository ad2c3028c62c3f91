"""The layers and their one-way imports, read from the source: who may import whom, no private name
across packages, and no vmap or shard_map outside kernels/ and the runner. Also how the two folders
kernels/ and calibrate/ join the netsim namespace.

The layer matrix (a module of the left-hand layer imports netsim code of the listed layers only; third-party
and standard-library imports are free, except in the kernels):

    kernels    -> (nothing of netsim: jax, equinox, jaxtyping, numpy and a few stdlib modules)
    core       -> core, kernels                  (netsim's own modules: scenario, compile, runner, ...)
    data       -> core
    traces     -> core, data, traces             (measured files: nccl-tests, p2p matrices, nvidia-smi, ...)
    topology   -> core, kernels, data, traces, topology
    workloads  -> core, kernels, data, traces, topology, workloads
    jobs       -> core, kernels, data, traces, topology, workloads, jobs
    latency    -> core, kernels, data, traces, topology, workloads, latency
    studies    -> core, kernels, data, traces, topology, workloads, jobs, studies
    sweep      -> core, kernels, data, traces, topology, workloads, sweep
    plots      -> core, kernels, data, traces, topology, workloads, jobs, studies, sweep, plots
    calibrate  -> core, ..., jobs, latency, studies, sweep, calibrate (netsim's public names)
    cli        -> every layer                    (netsim/cli/: the top)

No layer imports tests/, benchmarks/ or examples/ (they are not packages of netsim: see
test_the_checkout_maps_exactly_kernels_and_calibrate). A new subpackage must be added here.

Private imports: a module may import a private module (`_x`) or a private name (`_y`) of its own package or
of a package that contains it inside netsim (netsim.sweep may import netsim._compile), never of another
package (netsim.studies may not import netsim.workloads._jobs, netsim.calibrate not netsim._checks).

The checks run on the repository and on a small tree of the same shape (CLEAN_TREE) with one bad import
added at a time (BREAKS): a check that stops catching its case fails there.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import netsim.calibrate
import pytest

import netsim

ROOT = Path(__file__).resolve().parents[1]
# the folders of the library and the package each installs as (pyproject's package-dir)
FOLDERS = {"netsim": "netsim", "kernels": "netsim.kernels", "calibrate": "netsim.calibrate"}

NUMERICS = {
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

_BASE = {"core", "kernels", "data", "traces", "topology", "workloads"}
LAYERS = {
    "kernels": set(),
    "core": {"core", "kernels"},
    "data": {"core"},
    "traces": {"core", "data", "traces"},
    "topology": {"core", "kernels", "data", "traces", "topology"},
    "workloads": _BASE,
    "jobs": _BASE | {"jobs"},
    "latency": _BASE | {"latency"},
    "studies": _BASE | {"jobs", "studies"},
    "sweep": _BASE | {"sweep"},
    "plots": _BASE | {"jobs", "studies", "sweep", "plots"},
    "calibrate": _BASE | {"jobs", "latency", "studies", "sweep", "calibrate"},
    "cli": _BASE | {"jobs", "latency", "studies", "sweep", "plots", "calibrate", "cli"},
}

# Cross-package private imports in files being rewritten elsewhere (issue 25's jobs, traces and CLI moves):
# each entry is (file, imported module or module.name). Empty this list as those files land.
ALLOWED_PRIVATE: set[tuple[str, str]] = set()


def modules(root: Path = ROOT):
    """(path relative to the repository root, module name, package name) of every library module."""
    for folder, package in FOLDERS.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            name = ".".join([package, *parts])
            yield path.relative_to(root).as_posix(), name, name if is_package else name.rpartition(".")[0]


def imports(path: str, package: str, root: Path = ROOT):
    """(imported module, [names]) for every import in a file, relative imports resolved."""
    for node in ast.walk(ast.parse((root / path).read_text())):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            yield module, [a.name for a in node.names]


def layer(module: str, root: Path = ROOT) -> str | None:
    """The layer of a netsim module (None outside netsim)."""
    parts = module.split(".")
    if parts[0] != "netsim":
        return None
    if len(parts) == 1:
        return "core"
    top = parts[1]
    if top in ("kernels", "calibrate", "plots") or (root / "netsim" / top).is_dir():
        return top  # a subpackage (netsim/cli/ included) or one of the top modules with a row of its own
    return "core"


def layer_violations(root: Path = ROOT) -> list[str]:
    """One line per import that breaks the layer matrix (or a module outside it) in the tree at `root`."""
    wrong = []
    for path, name, package in modules(root):
        mine = layer(name, root)
        if mine not in LAYERS:
            wrong.append(f"{path}: layer {mine!r} is not in the layer matrix (tests/test_layering.py)")
            continue
        for module, _ in imports(path, package, root):
            top = module.split(".")[0]
            if top in ("tests", "benchmarks", "examples", "kernels", "calibrate"):
                wrong.append(f"{path} imports {module} (not a package of netsim)")
            elif mine == "kernels" and top != "netsim" and top not in NUMERICS:
                wrong.append(f"{path} imports {module}: kernels import only {sorted(NUMERICS)}")
            elif top == "netsim" and layer(module, root) not in LAYERS[mine] | {mine}:
                theirs = layer(module, root)
                wrong.append(
                    f"{path} ({mine}) imports {module} ({theirs}): {mine} imports {sorted(LAYERS[mine])}"
                )
    return wrong


def test_every_layer_imports_only_the_layers_below_it():
    wrong = layer_violations()
    assert not wrong, "\n".join(wrong)


def test_the_simgrid_peer_imports_only_the_standard_library_and_simgrid():
    """SimGrid's side of the benchmarks is timed as a process of its own: it reads the scenario as plain
    JSON and must not pay netsim's (and JAX's) start-up."""
    path = "benchmarks/simgrid_peer.py"
    found = {module.split(".")[0] for module, _ in imports(path, "")}
    assert "simgrid" in found, f"{path} no longer imports simgrid: the test would not notice a move"
    wrong = sorted(found - set(sys.stdlib_module_names) - {"__future__", "simgrid"})
    assert not wrong, f"{path} imports {wrong}: the peer's process must import nothing of netsim's"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_owner(module: str, names: list[str], root: Path = ROOT) -> list[tuple[str, str]]:
    """(owning package, what) for each private module or name an import takes."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if _private(part):
            return [(".".join(parts[:i]), module)]
    # a private name of a module belongs to the module's package; one of a package (a submodule), to it
    package = module if _is_package(module, root) else module.rpartition(".")[0]
    return [(package, f"{module}.{n}") for n in names if _private(n)]


def _is_package(module: str, root: Path = ROOT) -> bool:
    parts = module.split(".")
    if len(parts) >= 2 and f"netsim.{parts[1]}" in FOLDERS.values():
        folder = root / next(f for f, p in FOLDERS.items() if p == f"netsim.{parts[1]}") / Path(*parts[2:])
    else:
        folder = root / Path(*parts)
    return folder.is_dir()


def inside(package: str, owner: str) -> bool:
    """Whether `package` is `owner` or lies inside it (kernels and calibrate are packages of their own)."""
    roots = ("netsim.kernels", "netsim.calibrate")
    own_root = next((r for r in roots if package == r or package.startswith(r + ".")), "netsim")
    return package == owner or (package.startswith(owner + ".") and (owner + ".").startswith(own_root + "."))


def private_imports_across_packages(root: Path = ROOT):
    """(path, what it imports, its package, the package owning what) of each private import across packages."""
    for path, _, package in modules(root):
        for module, names in imports(path, package, root):
            if module.split(".")[0] != "netsim":
                continue
            for owner, what in private_owner(module, names, root):
                if not inside(package, owner):
                    yield path, what, package, owner


def test_no_private_import_across_packages():
    found = set()
    wrong = []
    for path, what, package, owner in private_imports_across_packages():
        allowed = (path, what) in ALLOWED_PRIVATE or (path, what.rpartition(".")[0]) in ALLOWED_PRIVATE
        if allowed:
            found.add((path, what) if (path, what) in ALLOWED_PRIVATE else (path, what.rpartition(".")[0]))
        else:
            wrong.append(f"{path} ({package}) imports {what}, private to {owner}: export a public name there")
    assert not wrong, "\n".join(wrong)
    assert found == ALLOWED_PRIVATE, f"allowlisted but gone (remove them): {sorted(ALLOWED_PRIVATE - found)}"


#: scripts that reach into netsim's internals on purpose: (file, private module or name)
SCRIPT_PRIVATE = {("benchmarks/vs_simgrid.py", "netsim.sweep._sweep")}  # times the sweep's own kernel inputs


def script_private_imports(root: Path = ROOT) -> list[tuple[str, str]]:
    """(file, private module or name) of each private netsim import in examples/ and benchmarks/."""
    found = []
    for path in sorted([*(root / "examples").rglob("*.py"), *(root / "benchmarks").rglob("*.py")]):
        relative = path.relative_to(root).as_posix()
        for module, names in imports(relative, "", root):
            if module.split(".")[0] == "netsim":
                found += [(relative, what) for _, what in private_owner(module, names, root)]
    return found


def test_examples_and_benchmarks_import_public_names():
    """Examples teach netsim's public API and benchmarks time it: neither imports a private module or
    name (a public one exists for each: netsim.checks, netsim.enable_compilation_cache, ...)."""
    found = script_private_imports()
    wrong = [
        f"{path} imports {what}: use a public name"
        for path, what in found
        if (path, what) not in SCRIPT_PRIVATE
    ]
    assert not wrong, "\n".join(wrong)
    assert set(found) >= SCRIPT_PRIVATE, (
        f"allowlisted but gone (remove them): {sorted(SCRIPT_PRIVATE - set(found))}"
    )


# vmap and shard_map, however imported (jax.vmap, from jax import vmap, equinox's filter_vmap, ...)
MAPPING = {"vmap", "pmap", "shard_map", "filter_vmap", "filter_pmap"}
#: the one module outside kernels/ that vmaps or shards: every batch of the engine or the latency model
RUNNER = "netsim/_runner.py"


def mappings(path: Path) -> list[int]:
    """Line numbers where a file names a vmap or shard_map (a call, a decorator or an import)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
        if name in MAPPING:
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom):
            lines += [node.lineno for a in node.names if a.name in MAPPING]
    return sorted(set(lines))


def test_only_the_runner_vmaps_or_shards():
    """Calibration, studies, the latency model and the benchmarks batch through the runner's entries
    (netsim.vmap_run, vmap_latency, jvp_columns, run_batch), so that every batch of the engine takes one
    road and gets the post-run check where it can. Kernels may vmap their own numerics. (examples/ show
    users vmapping their own models, which is not netsim's batching.)"""
    files = [ROOT / p for p, _, _ in modules() if not p.startswith("kernels/") and p != RUNNER]
    files += sorted((ROOT / "benchmarks").rglob("*.py"))
    wrong = [f"{f.relative_to(ROOT)}:{n}" for f in files for n in mappings(f)]
    assert not wrong, f"vmap or shard_map outside kernels/ and {RUNNER} (use the runner's entries): {wrong}"
    assert mappings(ROOT / RUNNER), "the runner maps nothing: the test would not notice a move"


# --- the checks catch what they are for: a small tree of the same shape, then one bad import at a time ---

#: a tree whose every import is allowed: own-package privates, a containing package's privates
#: (workloads -> netsim._checks), public names across packages, calibrate on netsim's public names
CLEAN_TREE = {
    "netsim/__init__.py": "",
    "netsim/_checks.py": "def to_json(x): ...\n",
    "netsim/_compile.py": "import numpy\n",
    "netsim/topology/__init__.py": "from ._mesh import mesh as mesh\n",
    "netsim/topology/_mesh.py": "from .._checks import to_json\n",
    "netsim/workloads/__init__.py": "from ._jobs import job_workload as job_workload\n",
    "netsim/workloads/_jobs.py": "from .._checks import to_json\nfrom ..topology import mesh\n",
    "netsim/studies/__init__.py": "",
    "netsim/studies/rings.py": "from ..workloads import job_workload\nfrom .._compile import bucket\n",
    "kernels/__init__.py": "import jax\nfrom .engine import run as run\n",
    "kernels/engine.py": "import jax.numpy as jnp\n",
    "calibrate/__init__.py": "import netsim\nfrom netsim.studies import rings\n",
}

#: one file added to (or replacing one of) CLEAN_TREE -> what the checks must report
BREAKS = {
    "upward": (
        "netsim/topology/_x.py",
        "from ..studies import rings",
        "(topology) imports netsim.studies (studies)",
    ),
    "core upward": (
        "netsim/_compile.py",
        "from .workloads import job_workload",
        "(core) imports netsim.workloads",
    ),
    "kernels import netsim": (
        "kernels/engine.py",
        "import netsim",
        "kernels/engine.py (kernels) imports netsim (core)",
    ),
    "kernels import scipy": (
        "kernels/engine.py",
        "import scipy.sparse",
        "imports scipy.sparse: kernels import only",
    ),
    "library imports a benchmark": (
        "netsim/studies/rings.py",
        "import benchmarks.engine",
        "(not a package of netsim)",
    ),
    "unlisted layer": ("netsim/extras/__init__.py", "", "layer 'extras' is not in the layer matrix"),
    "private module": (
        "netsim/studies/rings.py",
        "from ..workloads._jobs import job_workload",
        "imports netsim.workloads._jobs, private to netsim.workloads",
    ),
    "private name": (
        "netsim/studies/rings.py",
        "from ..workloads import _helper",
        "imports netsim.workloads._helper, private to netsim.workloads",
    ),
    "calibrate takes a private": (
        "calibrate/fit.py",
        "from netsim._checks import to_json",
        "calibrate/fit.py imports netsim._checks, private to netsim",
    ),
    "kernel internals": (
        "netsim/_compile.py",
        "from .kernels.engine import _advance",
        "imports netsim.kernels.engine._advance, private to netsim.kernels",
    ),
}


def findings(root: Path) -> list[str]:
    """What the layering and private-import tests report on the tree at `root`."""
    private = [
        f"{path} imports {what}, private to {owner}"
        for path, what, _, owner in private_imports_across_packages(root)
    ]
    return layer_violations(root) + private


def _write(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text + "\n")


def test_the_checks_pass_a_clean_tree(tmp_path):
    _write(tmp_path, CLEAN_TREE)
    assert findings(tmp_path) == []


@pytest.mark.parametrize("case", BREAKS)
def test_the_checks_catch_a_bad_import(tmp_path, case):
    path, line, expected = BREAKS[case]
    _write(tmp_path, CLEAN_TREE | {path: line})
    found = findings(tmp_path)
    assert len(found) == 1 and expected in found[0] and found[0].startswith(path), found


def test_the_script_check_catches_a_private_import(tmp_path):
    _write(tmp_path, {"examples/plot.py": "import netsim\nfrom netsim.checks import write_atomic"})
    assert script_private_imports(tmp_path) == []
    _write(
        tmp_path, {"benchmarks/run.py": "def main():\n    from netsim._cache import enable_compilation_cache"}
    )
    assert script_private_imports(tmp_path) == [("benchmarks/run.py", "netsim._cache")]


def test_the_mapping_check_sees_every_spelling(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        "import jax\nfrom jax import vmap\nimport equinox as eqx\nfrom jax.experimental.shard_map import shard_map\n"
        "a = jax.vmap(abs)\nb = eqx.filter_vmap(abs)\nc = jax.numpy.sum\n"
    )
    assert mappings(source) == [2, 4, 5, 6]


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


def test_the_checkout_maps_exactly_kernels_and_calibrate():
    """A notebook or REPL started in the checkout imports the source folder: netsim.kernels and
    netsim.calibrate resolve to kernels/ and calibrate/, nothing else of the root does, and JAX waits."""
    code = (
        "import sys, netsim\n"
        "assert not any(m == 'jax' or m.startswith('jax.') for m in sys.modules), 'import netsim imported JAX'\n"
        "import netsim.calibrate, netsim.kernels.engine\n"
        "print(netsim.kernels.__name__, netsim.calibrate.__name__, netsim.kernels.engine.__file__)\n"
        "for name in ('tests', 'benchmarks', 'examples', 'docs'):\n"
        "    try:\n"
        "        __import__('netsim.' + name)\n"
        "        print('imported', name)\n"
        "    except ModuleNotFoundError:\n"
        "        pass\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    kernels, calibrate, engine = p.stdout.split()
    assert (kernels, calibrate, Path(engine)) == (
        "netsim.kernels",
        "netsim.calibrate",
        ROOT / "kernels" / "engine.py",
    )


def test_pyproject_lists_every_package_on_disk():
    """A wheel holds only the packages pyproject names: one left out imports in the checkout and fails
    after `pip install .` (the editable install and the checkout finder would not notice)."""
    import tomllib

    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = {
        ".".join((FOLDERS[init.relative_to(ROOT).parts[0]], *init.relative_to(ROOT).parts[1:-1]))
        for folder in FOLDERS
        for init in (ROOT / folder).rglob("__init__.py")
    }
    assert set(setuptools["packages"]) == on_disk
    assert setuptools["package-dir"] == {package: folder for folder, package in FOLDERS.items()}
