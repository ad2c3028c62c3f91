"""Compiled engines kept on disk, on by default for the command line.

A `netsim run` is mostly start-up: importing JAX, then tracing, lowering and compiling the engine for the
scenario's padded shape (1-5 s). Two caches keep that work across processes, in one folder:

- netsim's executable cache (`executable`): the compiled engine itself, serialized after its first compile
  and loaded back (tens of ms) by later processes, which skip tracing and lowering as well as XLA's compile.
  Its files live in `executables/` and are named by a hash of everything that determines the executable
  (`executable_key`).
- JAX's persistent compilation cache, for everything else that compiles (sweeps, calibration, batches):
  it skips XLA's compile only.

Library users opt in with `enable_compilation_cache()`: a library does not change JAX's global configuration
behind its caller's back. Without it, `executable` keeps compiled engines in memory only, as jax.jit would.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import os
import pickle
import sys
from collections.abc import Callable
from typing import Any

ENV = "NETSIM_CACHE_DIR"  # where compiled engines are kept; empty: no cache
FORMAT = 1  # of the executable files; part of their key
_MEMORY = 64  # executables kept in memory per process (least recently used dropped)

_folder: str | None = None  # executables/ of the enabled cache; None: in memory only
_loaded: collections.OrderedDict[str, Callable] = collections.OrderedDict()


def compilation_cache_dir() -> str | None:
    """The cache folder: $NETSIM_CACHE_DIR if set (empty disables the cache), else netsim/jax under
    $XDG_CACHE_HOME (default ~/.cache)."""
    if ENV in os.environ:
        return os.environ[ENV] or None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "netsim", "jax")


def enable_compilation_cache(path: str | os.PathLike | None = None) -> str | None:
    """Keeps compiled engines in `path` (default `compilation_cache_dir()`) across processes: netsim's
    executable cache in `path`/executables and JAX's persistent compilation cache in `path`.

    Call before JAX's first compilation. Returns the folder, or None when disabled or not writable (then
    everything still works, only slower to start: the reason goes to stderr).
    """
    global _folder
    path = compilation_cache_dir() if path is None else os.fspath(path)
    if not path:
        return None
    executables = os.path.join(path, "executables")
    try:
        os.makedirs(executables, exist_ok=True)
    except OSError as e:
        print(
            f"netsim: compilation cache disabled: cannot create {executables!r} ({e.strerror})",
            file=sys.stderr,
        )
        return None
    import jax

    jax.config.update("jax_compilation_cache_dir", path)
    # the engine compiles in 0.3-5 s; JAX's default keeps only compiles over 1 s
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.1)
    _folder = executables
    return path


@functools.cache
def _sources_hash(*files: str) -> str:
    h = hashlib.sha256()
    for name in files:
        with open(name, "rb") as f:
            h.update(os.path.basename(name).encode() + b"\0" + f.read())
    return h.hexdigest()


def _code(fn: Callable) -> str:
    """A hash of the source files that define what `fn` computes: its own module's and netsim.kernels'."""
    from . import kernels

    folder = os.path.dirname(kernels.__file__)
    files = sorted(os.path.join(folder, x) for x in os.listdir(folder) if x.endswith(".py"))
    return _sources_hash(fn.__code__.co_filename, *files)


def executable_key(fn: Callable, args: tuple, static: dict[str, Any]) -> str:
    """The cache key of `jax.jit(fn)` on `args` with keywords `static`: a hash of the function (its name and
    the source files of its module and of netsim.kernels), the options, the arguments' pytree structure
    (classes and static fields) and leaf types (shape, dtype, weak type), the float64 mode, the jax and jaxlib
    versions, the backend (platform, its version, device kind) and the XLA settings in the environment
    (XLA_FLAGS, PJRT_NPROC)."""
    import jax
    import jaxlib
    import numpy as np

    leaves, tree = jax.tree.flatten(args)
    device = jax.devices()[0]
    parts = (
        FORMAT,
        f"{fn.__module__}.{fn.__qualname__}",
        _code(fn),
        sorted(static.items()),
        str(tree),
        [str(jax.typeof(x)) for x in leaves],
        str(jax.dtypes.canonicalize_dtype(np.float64)),
        jax.__version__,
        jaxlib.__version__,
        device.platform,
        device.client.platform_version,
        device.device_kind,
        os.environ.get("XLA_FLAGS", ""),
        os.environ.get("PJRT_NPROC", ""),
    )
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:32]


def executable(fn: Callable, args: tuple, static: dict[str, Any], out_tree: Callable[[], Any]) -> Callable:
    """`jax.jit(fn)` compiled for `args` (keywords `static`, fixed at compile time), as a function of the
    arguments that returns fn's output: from memory, else from the executable cache when enabled (skipping
    tracing, lowering and compiling), else compiled here (and stored for the next process).

    out_tree: gives the output's pytree structure (cheaply, e.g. by jax.eval_shape of a small function):
    serialized executables keep flat leaves only. A cache file that cannot be loaded is compiled again and
    replaced, with a note on stderr: never a wrong result, only a slower start.
    """
    import jax

    key = executable_key(fn, args, static)
    if key in _loaded:
        _loaded.move_to_end(key)
        return _loaded[key]
    tree, out = jax.tree.structure(args), out_tree()
    n_in, n_out = tree.num_leaves, out.num_leaves

    def flat(*leaves):  # serialized executables keep no custom pytrees: flat leaves in, flat leaves out
        return tuple(jax.tree.leaves(fn(*jax.tree.unflatten(tree, leaves), **static)))

    path = None if _folder is None else os.path.join(_folder, f"{key}.bin")
    compiled = _load(path, key, n_in, n_out) if path is not None and os.path.exists(path) else None
    if compiled is None:
        compiled = _compile(flat, args, fresh=path is not None)
        if path is not None:
            _store(path, key, n_in, compiled)

    def call(*a):
        return jax.tree.unflatten(out, compiled(*jax.tree.leaves(a)))

    _loaded[key] = call
    if len(_loaded) > _MEMORY:
        _loaded.popitem(last=False)
    return call


_hits: list[int] = []  # one entry per executable JAX's persistent cache served, once counting


def _count_hits(event: str, **_) -> None:
    if event == "/jax/compilation_cache/cache_hits":
        _hits.append(1)


def _compile(flat: Callable, args: tuple, *, fresh: bool) -> Any:
    """`jax.jit(flat)` compiled for `args`. fresh: compiled by XLA here, never an executable served by JAX's
    persistent cache, which serializes without its code (a later process could load it, then fail to run:
    "Function ... not found"): when JAX's cache serves it, compile again under a name of its own."""
    import jax

    leaves = jax.tree.leaves(args)
    if fresh and not _hits:
        jax.monitoring.register_event_listener(_count_hits)
        _hits.append(0)
    before = len(_hits)
    flat.__name__ = "netsim_engine"
    compiled = jax.jit(flat).lower(*leaves).compile()
    if fresh and len(_hits) > before:
        flat.__name__ = f"netsim_engine_{os.urandom(8).hex()}"  # a module JAX's cache has never seen
        compiled = jax.jit(flat).lower(*leaves).compile()
    return compiled


def _load(path: str, key: str, n_in: int, n_out: int) -> Callable | None:
    import jax
    from jax.experimental.serialize_executable import deserialize_and_load

    try:
        with open(path, "rb") as f:
            entry = pickle.load(f)
        if (entry["key"], entry["n_in"], entry["n_out"]) != (key, n_in, n_out):
            raise ValueError("made for other arguments")
        in_tree = jax.tree.structure((tuple(range(n_in)), {}))
        return deserialize_and_load(entry["payload"], in_tree, jax.tree.structure(tuple(range(n_out))))
    except Exception as e:  # a truncated, corrupt or foreign file: compile again rather than fail
        print(
            f"netsim: cached engine {path!r} could not be loaded ({type(e).__name__}: {e}); compiling it again",
            file=sys.stderr,
        )
        return None


def _store(path: str, key: str, n_in: int, compiled: Any) -> None:
    from jax.experimental.serialize_executable import serialize

    from ._checks import write_atomic

    try:
        payload, _, out_tree = serialize(compiled)
        entry = {"key": key, "n_in": n_in, "n_out": out_tree.num_leaves, "payload": payload}
        write_atomic(path, pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception as e:  # a full disk or an executable the backend cannot serialize: run uncached
        print(f"netsim: compiled engine not cached in {path!r} ({type(e).__name__}: {e})", file=sys.stderr)
