import gc
import os

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


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_code():
    """Frees each module's compiled executables once it is done. XLA's CPU executables hold ~18 memory
    mappings each (200 small jits: 425 -> 3,997 mappings in /proc/self/maps); a whole run compiles thousands
    in one process, and past Linux's vm.max_map_count (65,530) XLA's next compile segfaults."""
    yield
    jax.clear_caches()
    gc.collect()
