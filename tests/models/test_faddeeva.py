"""wofz against scipy.special.wofz (an independent implementation: the Faddeeva
package of S. G. Johnson), and its derivative against w'(z) = -2 z w + 2i/sqrt(pi)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special

from fixedopt.models import wofz

jitted_wofz = jax.jit(wofz)  # one program per shape and dtype, shared by the tests


def upper_half_plane(dtype, seed=0):
    """Points of the real line and the upper half plane, |z| from 1e-3 to 1e3, with
    rows on the real axis and just above it (the Voigt profile's wings)."""
    rng = np.random.default_rng(seed)
    parts = []
    for scale in (1e-3, 0.3, 1.0, 3.0, 6.0, 10.0, 30.0, 1e3):
        x = rng.uniform(-1.0, 1.0, 600) * scale
        y = rng.uniform(0.0, 1.0, 600) * scale
        y[:100] = 0.0
        y[100:200] *= 1e-8
        parts.append(x + 1j * y)
    z = np.concatenate([*parts, [0.0, 1j, 5.0 + 0j, 1e-12j]])
    return z.astype(dtype)


@pytest.mark.parametrize(("dtype", "limit"), [(np.complex128, 1e-13), (np.complex64, 1e-6)])
def test_wofz_matches_scipy_over_the_upper_half_plane(dtype, limit):
    z = upper_half_plane(dtype)
    reference = scipy.special.wofz(z.astype(np.complex128))
    got = np.asarray(jitted_wofz(jnp.asarray(z)))
    assert got.dtype == dtype
    relative = np.abs(got - reference) / np.abs(reference)
    assert relative.max() < limit, (relative.max(), z[np.argmax(relative)])


def test_the_real_part_keeps_its_relative_accuracy_in_the_wings():
    """Re w (the Voigt profile) is far smaller than |w| near the real axis at large x;
    it is a sum of positive terms here, so it stays accurate relative to itself."""
    z = upper_half_plane(np.complex128, seed=1)
    reference = scipy.special.wofz(z)
    normal = np.abs(reference.real) > np.finfo(np.float64).tiny  # not denormal
    got = np.asarray(jitted_wofz(jnp.asarray(z)))
    relative = np.abs(got.real - reference.real)[normal] / np.abs(reference.real[normal])
    assert relative.max() < 2e-13, relative.max()


def test_wofz_is_differentiable_and_vmaps():
    x = jnp.array([0.0, 0.7, -2.5, 8.0])
    y = jnp.array([0.0, 0.3, 1e-6, 2.0])

    def voigt_like(x, y):
        return jnp.real(wofz(jax.lax.complex(x, y)))

    dx, dy = jax.jit(jax.vmap(jax.grad(voigt_like, argnums=(0, 1))))(x, y)
    z = np.asarray(x) + 1j * np.asarray(y)
    slope = -2.0 * z * scipy.special.wofz(z) + 2j / np.sqrt(np.pi)  # w'(z), holomorphic
    np.testing.assert_allclose(dx, slope.real, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(dy, -slope.imag, rtol=1e-13, atol=1e-15)
    h = 1e-6  # and the finite differences of scipy's values
    fd = (scipy.special.wofz(z + h) - scipy.special.wofz(z - h)).real / (2 * h)
    np.testing.assert_allclose(dx, fd, rtol=1e-7, atol=1e-9)


def test_below_the_real_axis_wofz_reflects():
    rng = np.random.default_rng(2)
    z = rng.uniform(-3.0, 3.0, 200) - 1j * rng.uniform(0.0, 3.0, 200)
    got = np.asarray(jitted_wofz(jnp.asarray(z)))
    np.testing.assert_allclose(got, scipy.special.wofz(z), rtol=1e-12)
