"""The covariance's inverse from the normal equations: its accuracy certificate (a row
whose normal matrix is too ill-conditioned for its dtype goes on to the QR) and where it
is tried. Against NumPy's inverse and scipy's count of the rank it is tested beside the
QR's in test_small_inverse.py."""

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._results import normal_inverse, small_inverse

_rng = np.random.default_rng(11)


def _conditioned(m, n, condition):
    """A unit-column ``(m, n)`` matrix of about this condition number."""
    left, _ = np.linalg.qr(_rng.normal(size=(m, n)))
    right, _ = np.linalg.qr(_rng.normal(size=(n, n)))
    matrix = left @ np.diag(np.geomspace(1.0, 1.0 / condition, n)) @ right
    return matrix / np.linalg.norm(matrix, axis=0)


_quick = jax.jit(small_inverse.certified_inverse)


def _inverse(dtype, jacobian, held):
    found, certified = jax.jit(normal_inverse.certified_inverse)(
        jnp.asarray(jacobian, dtype), jnp.asarray(held)
    )
    return np.asarray(found, float), bool(certified)


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
