"""The queueing formula against closed forms: M/D/1, M/M/1, the buffer bound and finite gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from netsim.kernels.queueing import mg1_wait, queueing_delay


@pytest.mark.parametrize("rho", [0.0, 0.1, 0.5, 0.9, 0.99])
def test_md1_and_mm1_closed_forms(rho):
    s = 2e-9
    md1 = rho * s / (2 * (1 - rho))  # M/D/1: half of M/M/1's wait
    mm1 = rho * s / (1 - rho)
    np.testing.assert_allclose(mg1_wait(rho, s, 0.0), md1, rtol=1e-12)
    np.testing.assert_allclose(mg1_wait(rho, s, 1.0), mm1, rtol=1e-12)


def test_saturated_resource_waits_its_buffer():
    assert np.isinf(mg1_wait(1.0, 1.0, 0.0))
    assert np.isinf(mg1_wait(1.5, 1.0, 0.0))
    np.testing.assert_allclose(queueing_delay(jnp.array([0.5, 1.0, 2.0]), 1.0, 0.0, 3.0), [0.5, 3.0, 3.0])


def test_gradients_finite_and_match_finite_differences():
    def f(rho, s, v, lim):
        return queueing_delay(rho, s, v, lim)

    args = (0.6, 1e-6, 0.3, 1.0)
    grads = jax.grad(f, argnums=(0, 1, 2, 3))(*args)
    for i, g in enumerate(grads):
        h = 1e-6 * max(abs(args[i]), 1e-9)
        up = list(args)
        dn = list(args)
        up[i] += h
        dn[i] -= h
        np.testing.assert_allclose(g, (f(*up) - f(*dn)) / (2 * h), rtol=1e-5, atol=1e-12)
    # a saturated lane (masked by the double where) still has finite gradients
    assert all(np.isfinite(g) for g in jax.grad(f, argnums=(0, 1, 2, 3))(1.0, 1e-6, 0.3, 1.0))
