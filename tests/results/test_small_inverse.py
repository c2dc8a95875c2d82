"""The covariance's inverses of a small free block (the elementwise QR's and the normal
equations') against NumPy's, and their rank certificates against scipy's count of the
rank."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fixedopt._results import normal_inverse, small_inverse

_rng = np.random.default_rng(7)
# Both certified inverses: the elementwise QR, and the normal equations (summed wider).
INVERSES = {"qr": small_inverse.certified_inverse, "normal": normal_inverse.certified_inverse}


def _unit_columns(matrix):
    norms = np.linalg.norm(matrix, axis=0)
    return matrix / np.where(norms > 0, norms, 1.0)


# NumPy's inverse within 1e3 eps of well-conditioned blocks (cond < 10), certified far
# from the certificate's cut-off: nothing here rests on the backend's optimizations
# (conftest.py); the rank-deficient blocks below, apart by rounding, keep them.
@pytest.mark.fewer_optimizations
@pytest.mark.parametrize("inverse", list(INVERSES))
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
@pytest.mark.parametrize("n", [1, 3, 5, 8])
def test_the_inverse_of_a_full_rank_block_is_numpys(dtype, n, inverse):
    jacobian = _unit_columns(_rng.normal(size=(4 * n, n)))
    held = _rng.random(n) < 0.3
    free = ~held
    expected = np.zeros((n, n))
    block = jacobian[:, free]
    expected[np.ix_(free, free)] = np.linalg.inv(block.T @ block)
    found, certified = jax.jit(INVERSES[inverse])(jnp.asarray(jacobian, dtype), jnp.asarray(held))
    found = np.where(free[:, None] & free[None, :], np.asarray(found, float), 0.0)
    assert bool(certified)
    rtol = 1e3 * np.finfo(dtype).eps  # cond(J) of a random 4n x n unit-column J: < 10
    np.testing.assert_allclose(found, expected, rtol=rtol, atol=rtol * np.abs(expected).max())


@pytest.mark.parametrize("inverse", list(INVERSES))
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_a_block_that_scipy_counts_rank_deficient_is_not_certified(dtype, inverse):
    base = _rng.normal(size=(20, 3))
    collinear = np.column_stack([base, base[:, 0] + base[:, 1]])  # rank 3 of 4
    eps = np.finfo(dtype).eps  # a column apart by rounding only
    tiny = np.column_stack([base, base[:, 0] * (1 + eps * _rng.normal(size=20))])
    zero = np.column_stack([base, np.zeros(20)])
    for jacobian in (collinear, tiny, zero):
        jacobian = _unit_columns(jacobian)
        singular = np.linalg.svd(np.asarray(jnp.asarray(jacobian, dtype), float), compute_uv=False)
        assert singular[-1] <= eps * 20 * singular[0]  # scipy's cut-off
        _, certified = jax.jit(INVERSES[inverse])(jnp.asarray(jacobian, dtype), jnp.zeros(4, bool))
        assert not bool(certified)


def test_a_held_column_leaves_the_free_blocks_inverse_alone():
    """Holding the only collinear column restores a certified full rank."""
    base = _rng.normal(size=(20, 3))
    jacobian = _unit_columns(np.column_stack([base, base[:, 0] + base[:, 1]]))
    held = np.array([False, False, False, True])
    found, certified = small_inverse.certified_inverse(jnp.asarray(jacobian), jnp.asarray(held))
    assert bool(certified)
    block = jacobian[:, :3]
    np.testing.assert_allclose(
        np.asarray(found)[:3, :3], np.linalg.inv(block.T @ block), rtol=1e-10
    )
