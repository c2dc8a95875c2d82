"""The built-in lineshapes against lmfit.lineshapes (to 1e-12 relative in float64) and
their parameter derivatives against central differences of lmfit's values."""

import jax
import jax.numpy as jnp
import lmfit.lineshapes as reference
import numpy as np
import pytest

from fixedopt.models import lineshapes

X = np.linspace(-6.0, 9.0, 61)
POSITIVE_X = np.linspace(0.05, 6.0, 41)


def biexponential_reference(x, amplitude1, decay1, amplitude2, decay2):
    first = reference.exponential(x, amplitude1, decay1)
    return first + reference.exponential(x, amplitude2, decay2)


# (our function, the independent reference, x, parameters in signature order, options)
CASES = {
    "constant": (lineshapes.constant, lambda x, c: c * np.ones_like(x), X, (1.7,), {}),
    "linear": (lineshapes.linear, reference.linear, X, (0.3, -1.2), {}),
    "parabolic": (lineshapes.parabolic, reference.parabolic, X, (0.2, -0.7, 1.1), {}),
    "exponential": (lineshapes.exponential, reference.exponential, X, (2.0, 3.0), {}),
    "biexponential": (lineshapes.biexponential, biexponential_reference, POSITIVE_X,
                      (2.0, 0.5, 1.0, 4.0), {}),
    "powerlaw": (lineshapes.powerlaw, reference.powerlaw, POSITIVE_X, (1.5, -1.3), {}),
    "gaussian": (lineshapes.gaussian, reference.gaussian, X, (3.0, 0.4, 1.3), {}),
    "lorentzian": (lineshapes.lorentzian, reference.lorentzian, X, (3.0, 0.4, 1.3), {}),
    "voigt": (lineshapes.voigt, reference.voigt, X, (3.0, 0.4, 0.9, 0.6), {}),
    "pvoigt": (lineshapes.pvoigt, reference.pvoigt, X, (3.0, 0.4, 1.3, 0.35), {}),
    "pearson7": (lineshapes.pearson7, reference.pearson7, X, (3.0, 0.4, 1.3, 1.7), {}),
    "damped_oscillator": (lineshapes.damped_oscillator, reference.damped_oscillator,
                          POSITIVE_X, (2.0, 2.5, 0.2), {}),
    "skewed_gaussian": (lineshapes.skewed_gaussian, reference.skewed_gaussian, X,
                        (3.0, 0.4, 1.3, 1.5), {}),
    **{f"step_{form}": (lineshapes.step, reference.step, X, (2.0, 0.5, 1.5), {"form": form})
       for form in ("linear", "atan", "erf", "logistic")},
    **{f"rectangle_{form}": (lineshapes.rectangle, reference.rectangle, X,
                             (2.0, -1.0, 0.8, 3.0, 1.4), {"form": form})
       for form in ("linear", "atan", "erf", "logistic")},
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_lineshape_equals_lmfit(name):
    ours, theirs, x, params, options = CASES[name]
    got = np.asarray(ours(jnp.asarray(x), *params, **options))
    expected = theirs(x, *params, **options)
    assert got.dtype == np.float64
    # 1e-12 relative; a sum of two terms of opposite sign (a rectangle's two edges) is
    # held to 1e-14 of its largest value where it cancels to nearly nothing.
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-14 * np.abs(expected).max())


def test_gaussian2d_equals_lmfit():
    x, y = np.meshgrid(np.linspace(-3, 4, 9), np.linspace(-2, 5, 8))
    params = (5.0, 0.3, 1.1, 0.9, 1.4)
    got = lineshapes.gaussian2d(jnp.asarray(x), jnp.asarray(y), *params)
    np.testing.assert_allclose(got, reference.gaussian2d(x, y, *params), rtol=1e-12)


def test_voigt_without_gamma_uses_sigma():
    got = lineshapes.voigt(jnp.asarray(X), 3.0, 0.4, 0.9)
    np.testing.assert_allclose(got, reference.voigt(X, 3.0, 0.4, 0.9), rtol=1e-12)


SMOOTH = [n for n in sorted(CASES) if n not in ("step_linear", "rectangle_linear")]


@pytest.mark.parametrize("name", SMOOTH)
def test_lineshape_derivatives_match_finite_differences(name):
    """d(curve)/d(parameter) by JAX against central differences of lmfit's curve."""
    ours, theirs, x, params, options = CASES[name]
    p = np.asarray(params, float)

    def curve(p):
        return ours(jnp.asarray(x), *p, **options)

    jac = np.asarray(jax.jit(jax.jacfwd(curve))(jnp.asarray(p)))
    for i in range(len(p)):
        step = 1e-6 * max(1.0, abs(p[i]))
        up, down = p.copy(), p.copy()
        up[i] += step
        down[i] -= step
        fd = (theirs(x, *up, **options) - theirs(x, *down, **options)) / (2 * step)
        scale = np.abs(fd).max() + 1e-300
        np.testing.assert_allclose(jac[:, i], fd, rtol=1e-6, atol=1e-7 * scale, err_msg=f"p[{i}]")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lineshapes_keep_the_dtype(dtype):
    x = jnp.asarray(X, dtype)
    for name in ("gaussian", "voigt", "pvoigt", "pearson7"):
        ours, _, _, params, _ = CASES[name]
        assert jax.jit(ours)(x, *(dtype(p) for p in params)).dtype == dtype, name


def test_an_unknown_step_form_is_named():
    with pytest.raises(ValueError, match="`form` must be one of"):
        lineshapes.step(jnp.asarray(X), form="cosine")
