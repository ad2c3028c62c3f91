import os

import jax

# No compilation cache in the tests' processes: never the user's (~/.cache/netsim), and not JAX's
# persistent cache in this long process either (with it on, XLA crashed serializing an executable late in
# a full run, at the same test twice, reproducible only after the whole suite). Tests
# of the cache name their own folder.
os.environ["NETSIM_CACHE_DIR"] = ""

# Simulated time is float64: the library refuses to run without x64, so every test enables it.
jax.config.update("jax_enable_x64", True)
# As equinox and diffrax test: no silent dtype or rank promotion anywhere in the library's numerics.
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")
