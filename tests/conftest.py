import atexit
import os
import shutil
import tempfile

import jax

# Tests never touch the user's compilation cache (~/.cache/netsim): commands run in this process and the
# ones started from it share a cache of the session's own (a test that needs an empty one passes its own).
if "NETSIM_CACHE_DIR" not in os.environ:
    os.environ["NETSIM_CACHE_DIR"] = tempfile.mkdtemp(prefix="netsim-tests-")
    atexit.register(shutil.rmtree, os.environ["NETSIM_CACHE_DIR"], ignore_errors=True)

# Simulated time is float64: the library refuses to run without x64, so every test enables it.
jax.config.update("jax_enable_x64", True)
# As equinox and diffrax test: no silent dtype or rank promotion anywhere in the library's numerics.
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")
