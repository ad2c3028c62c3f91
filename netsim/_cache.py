"""JAX's persistent compilation cache, on by default for the command line.

A `netsim run` is mostly start-up: importing JAX and compiling the engine for the scenario's padded shape
(1-5 s). The compiled engine depends only on the shape (netsim.Shape), so later runs of any scenario of that
shape load it from disk instead. Library users opt in with `enable_compilation_cache()`: a library does not
change JAX's global configuration behind its caller's back.
"""

from __future__ import annotations

import os
import sys

ENV = "NETSIM_CACHE_DIR"  # where compiled engines are kept; empty: no cache


def compilation_cache_dir() -> str | None:
    """The cache folder: $NETSIM_CACHE_DIR if set (empty disables the cache), else netsim/jax under
    $XDG_CACHE_HOME (default ~/.cache)."""
    if ENV in os.environ:
        return os.environ[ENV] or None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "netsim", "jax")


def enable_compilation_cache(path: str | os.PathLike | None = None) -> str | None:
    """Keeps JAX's compiled executables in `path` (default `compilation_cache_dir()`) across processes.

    Call before JAX's first compilation. Returns the folder, or None when disabled or not writable (then
    everything still works, only slower to start: the reason goes to stderr).
    """
    path = compilation_cache_dir() if path is None else os.fspath(path)
    if not path:
        return None
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        print(f"netsim: compilation cache disabled: cannot create {path!r} ({e.strerror})", file=sys.stderr)
        return None
    import jax

    jax.config.update("jax_compilation_cache_dir", path)
    # the engine compiles in 0.3-5 s; JAX's default keeps only compiles over 1 s
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.1)
    return path
