"""The covariance's inverse from the normal equations against NumPy's, its rank
certificate against scipy's count, and its accuracy certificate: a row whose normal
matrix is too ill-conditioned for its dtype goes on to the QR."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fixedopt._results import normal_inverse, small_inverse

_rng = np.random.default_rng(11)


def _unit_columns(matrix):
    norms = np.linalg.norm(matrix, axis=0)
    return matrix / np.where(norms > 0, norms, 1.0)


def _conditioned(m, n, condition):
    """A unit-column ``(m, n)`` matrix of about this condition number."""
    left, _ = np.linalg.qr(_rng.normal(size=(m, n)))
    right, _ = np.linalg.qr(_rng.normal(size=(n, n)))
    return _unit_columns(left @ np.diag(np.geomspace(1.0, 1.0 / condition, n)) @ right)


_quick = jax.jit(small_inverse.certified_inverse)


def _inverse(dtype, jacobian, held):
    found, certified = jax.jit(normal_inverse.certified_inverse)(
        jnp.asarray(jacobian, dtype), jnp.asarray(held)
    )
    return np.asarray(found, float), bool(certified)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
@pytest.mark.parametrize("n", [1, 5, 8])
def test_the_inverse_of_a_full_rank_block_is_numpys(dtype, n):
    jacobian = _unit_columns(_rng.normal(size=(4 * n, n)))
    held = _rng.random(n) < 0.3
    free = ~held
    expected = np.zeros((n, n))
    block = jacobian[:, free]
    expected[np.ix_(free, free)] = np.linalg.inv(block.T @ block)
    found, certified = _inverse(dtype, jacobian, held)
    found = np.where(free[:, None] & free[None, :], found, 0.0)
    assert certified
    rtol = 1e3 * np.finfo(dtype).eps  # cond(J) of a random 4n x n unit-column J: < 10
    np.testing.assert_allclose(found, expected, rtol=rtol, atol=rtol * np.abs(expected).max())


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_a_block_that_scipy_counts_rank_deficient_is_not_certified(dtype):
    base = _rng.normal(size=(20, 3))
    collinear = np.column_stack([base, base[:, 0] + base[:, 1]])  # rank 3 of 4
    eps = np.finfo(dtype).eps  # a column apart by rounding only
    tiny = np.column_stack([base, base[:, 0] * (1 + eps * _rng.normal(size=20))])
    for jacobian in (collinear, tiny, np.column_stack([base, np.zeros(20)])):
        _, certified = _inverse(dtype, _unit_columns(jacobian), np.zeros(4, bool))
        assert not certified


def test_an_ill_conditioned_float64_block_goes_on_to_the_qr():
    """cond(J) = 1e5: the QR certifies it (its rank is full by scipy's count, its error
    eps cond(J)), the normal equations do not (their error bound, eps cond(J)^2 m, is
    above the target); at cond(J) = 30 both certify and agree to their bounds."""
    jacobian = _conditioned(25, 5, 1e5)
    held = np.zeros(5, bool)
    assert not _inverse(jnp.float64, jacobian, held)[1]
    assert bool(_quick(jnp.asarray(jacobian), jnp.asarray(held))[1])
    jacobian = _conditioned(25, 5, 30.0)
    found, certified = _inverse(jnp.float64, jacobian, held)
    quick, _ = _quick(jnp.asarray(jacobian), jnp.asarray(held))
    assert certified
    np.testing.assert_allclose(found, np.asarray(quick), rtol=1e-11, atol=1e-11 * found.max())


def test_float32_sums_in_float64_keep_the_qrs_accuracy():
    """In float32 the normal matrix is summed and factored in float64: at cond(J) = 1e3
    its inverse is as close to the exact one as the float32 QR's (the input's rounding,
    eps cond(J)^2 of the inverse's largest entry)."""
    jacobian = _conditioned(40, 5, 1e3)
    rounded = np.asarray(jnp.asarray(jacobian, jnp.float32), float)
    exact = np.linalg.inv(rounded.T @ rounded)
    found, certified = _inverse(jnp.float32, jacobian, np.zeros(5, bool))
    assert certified
    quick, _ = _quick(jnp.asarray(rounded, jnp.float32), jnp.zeros(5, bool))
    ours = np.abs(found - exact).max()
    assert ours <= max(
        2 * np.abs(np.asarray(quick, float) - exact).max(),
        4 * np.finfo(np.float32).eps * np.abs(exact).max(),
    )


def test_it_is_tried_where_its_sums_are_wider_or_float64():
    assert normal_inverse.pays(jnp.float32, 5) == jax.config.jax_enable_x64
    assert normal_inverse.pays(jnp.float64, 8)
    assert not normal_inverse.pays(jnp.float64, 9)
