import jax

# Simulated time is float64: the library refuses to run without x64, so every test enables it.
jax.config.update("jax_enable_x64", True)
