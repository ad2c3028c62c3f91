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
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import netsim.calibrate

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


def modules():
    """(path relative to the repository root, module name, package name) of every library module."""
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            name = ".".join([package, *parts])
            yield path.relative_to(ROOT).as_posix(), name, name if is_package else name.rpartition(".")[0]


def imports(path: str, package: str):
    """(imported module, [names]) for every import in a file, relative imports resolved."""
    for node in ast.walk(ast.parse((ROOT / path).read_text())):
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


def layer(module: str) -> str | None:
    """The layer of a netsim module (None outside netsim)."""
    parts = module.split(".")
    if parts[0] != "netsim":
        return None
    if len(parts) == 1:
        return "core"
    top = parts[1]
    if top == "cli" or top.endswith("_cli"):
        return "cli"
    if top in ("kernels", "calibrate", "plots"):
        return top
    if (ROOT / "netsim" / top).is_dir():
        return top
    return "core"


def test_every_layer_imports_only_the_layers_below_it():
    wrong = []
    for path, name, package in modules():
        mine = layer(name)
        assert mine in LAYERS, f"{path}: layer {mine!r} is not in the layer matrix (tests/test_layering.py)"
        for module, _ in imports(path, package):
            top = module.split(".")[0]
            if top in ("tests", "benchmarks", "examples", "kernels", "calibrate"):
                wrong.append(f"{path} imports {module} (not a package of netsim)")
            elif mine == "kernels" and top != "netsim" and top not in NUMERICS:
                wrong.append(f"{path} imports {module}: kernels import only {sorted(NUMERICS)}")
            elif top == "netsim" and layer(module) not in LAYERS[mine] | {mine}:
                wrong.append(
                    f"{path} ({mine}) imports {module} ({layer(module)}): {mine} imports {sorted(LAYERS[mine])}"
                )
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


def private_owner(module: str, names: list[str]) -> list[tuple[str, str]]:
    """(owning package, what) for each private module or name an import takes."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if _private(part):
            return [(".".join(parts[:i]), module)]
    # a private name of a module belongs to the module's package; one of a package (a submodule), to it
    package = module if _is_package(module) else module.rpartition(".")[0]
    return [(package, f"{module}.{n}") for n in names if _private(n)]


def _is_package(module: str) -> bool:
    parts = module.split(".")
    if len(parts) >= 2 and f"netsim.{parts[1]}" in FOLDERS.values():
        folder = ROOT / next(f for f, p in FOLDERS.items() if p == f"netsim.{parts[1]}") / Path(*parts[2:])
    else:
        folder = ROOT / Path(*parts)
    return folder.is_dir()


def inside(package: str, owner: str) -> bool:
    """Whether `package` is `owner` or lies inside it (kernels and calibrate are packages of their own)."""
    roots = ("netsim.kernels", "netsim.calibrate")
    own_root = next((r for r in roots if package == r or package.startswith(r + ".")), "netsim")
    return package == owner or (package.startswith(owner + ".") and (owner + ".").startswith(own_root + "."))


def private_imports_across_packages():
    for path, _, package in modules():
        for module, names in imports(path, package):
            if module.split(".")[0] != "netsim":
                continue
            for owner, what in private_owner(module, names):
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
