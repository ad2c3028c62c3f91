import gc
import os

# Compiling is most of the suite's time: XLA's CPU backend at LLVM's -O0 compiles the engine ~40 % faster
# (tests/kernels/test_frontier.py: 49 -> 30 s) and runs each test's small shapes slower by less. It changes
# no semantics (no fast-math either way); checks of bit-identity compare runs made under the same flags (the
# tests' subprocesses inherit them). Set before JAX starts its backend; a user's own XLA_FLAGS are kept.
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_backend_optimization_level=0".strip()

# Compiling is also what a second run would repeat: JAX's persistent cache keeps every compiled executable
# in .pytest_cache/jax (git-ignored; ~20 MB for a run of new code, never pruned: JAX's size cap needs the
# filelock package) for the next run and for the tests' subprocesses, which inherit these variables. A
# fresh clone compiles everything once (benchmarks/RESULTS.md). A hit is the same executable, so no result
# changes. A caller's own JAX_COMPILATION_CACHE_DIR wins ("" turns the cache off).
os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR",
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".pytest_cache", "jax"),
)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.1")

import jax
import pytest

# No compilation cache in the tests' own process (never the user's ~/.cache/netsim); tests of the cache
# name their own folder.
os.environ["NETSIM_CACHE_DIR"] = ""

# Simulated time is float64: the library refuses to run without x64, so every test enables it.
jax.config.update("jax_enable_x64", True)
# As equinox and diffrax test: no silent dtype or rank promotion anywhere in the library's numerics.
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")


def _mappings() -> tuple[int, int]:
    """(memory mappings of this process, the kernel's limit on them); (0, 0) where /proc does not say."""
    try:
        with open("/proc/self/maps", "rb") as maps, open("/proc/sys/vm/max_map_count") as limit:
            return sum(1 for _ in maps), int(limit.read())
    except (OSError, ValueError):
        return 0, 0


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_code():
    """Frees the compiled executables once a module leaves this process past half of Linux's
    vm.max_map_count. XLA's CPU executables hold ~18 memory mappings each (200 small jits: 425 -> 3,997
    mappings); a whole run compiles thousands in one process, and past the limit (65,530 by default)
    XLA's next compile segfaults. Clearing after every module instead costs each module its recompiles."""
    yield
    used, limit = _mappings()
    if used > limit // 2:
        jax.clear_caches()
        gc.collect()
