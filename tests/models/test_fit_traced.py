"""``Model.fit`` under ``jax.grad``, ``jax.jit`` and ``jax.vmap``: its result is made on
the host, so a traced input is a ``TypeError`` naming the input and the way that is
differentiable (``curve_fit`` with the model's function), not NumPy's conversion error
from deep inside; and that way's derivative is the fit's (central differences of
``Model.fit`` itself, the closed form of a linear fit)."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt
from fixedopt.models import Model

X = np.linspace(0.0, 1.0, 12)
DATA = 2.0 * X + 1.0 + 0.1 * np.sin(7.0 * X)  # a line, not exactly: residuals not 0


def line(x, slope, intercept):
    return slope * x + intercept


MODEL = Model(line)
PARAMS = MODEL.make_params(slope=1.0, intercept=0.0)


def fitted(result):
    return jnp.asarray(result.values)


@pytest.mark.parametrize(
    ("name", "loss"),
    [
        ("`data`", lambda s: fitted(MODEL.fit(DATA * s, PARAMS, x=X)).sum()),
        ("`x`", lambda s: fitted(MODEL.fit(DATA, PARAMS, x=X * s)).sum()),
        ("`weights`", lambda s: fitted(MODEL.fit(DATA, PARAMS, x=X, weights=s)).sum()),
        (
            "`value` of parameter 'slope'",
            lambda s: fitted(MODEL.fit(DATA, MODEL.make_params(slope=s), x=X)).sum(),
        ),
    ],
)
@pytest.mark.parametrize("transform", [jax.grad, jax.jit, jax.vmap])
def test_a_traced_input_is_an_error_naming_it_and_the_differentiable_way(name, loss, transform):
    argument = jnp.ones(2) if transform is jax.vmap else 1.0
    message = f"Model.fit cannot run under jax.grad, jax.jit or jax.vmap ({name} is traced)"
    with pytest.raises(TypeError, match=re.escape(message)) as raised:
        transform(loss)(argument)
    assert "fixedopt.curve_fit" in str(raised.value)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_curve_fit_of_the_models_function_has_the_fits_derivative(dtype):
    """The way the error names: ``jax.grad`` of ``curve_fit(model.func, ...)``'s slope
    along a direction of the data equals the central difference of ``Model.fit``'s
    slope (a linear fit: exact but for rounding) and the closed form, the
    pseudo-inverse's row."""
    x, data = X.astype(dtype), DATA.astype(dtype)
    direction = np.cos(3.0 * X).astype(dtype)

    def slope(t):
        popt, _ = fixedopt.curve_fit(MODEL.func, x, data + t * direction, p0=[1.0, 0.0])
        return popt[0]

    with jax.enable_x64(dtype == np.float64):
        derivative = float(jax.grad(slope)(jnp.asarray(0.0, dtype)))
        step = 0.5  # linear in t: any step, the difference only rounds
        ends = [MODEL.fit(data + t * direction, PARAMS, x=x).values[0, 0] for t in (step, -step)]
    central = (ends[0] - ends[1]) / (2 * step)
    closed = np.linalg.pinv(np.stack([X, np.ones_like(X)], axis=1))[0] @ np.cos(3.0 * X)
    tolerance = 1e-4 if dtype == np.float32 else 1e-10  # the solve's rounding, x 10
    np.testing.assert_allclose(derivative, closed, rtol=tolerance)
    # the fits stop at their tolerances (scipy's 1e-8), not at the exact minimum: each
    # end within ~1e-8 of it, relative (6.8e-9 in float64 here)
    np.testing.assert_allclose(central, closed, rtol=max(tolerance, 1e-7))
