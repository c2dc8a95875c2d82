"""SplineModel against lmfit's (scipy's splrep knots and splev values)."""

import jax
import jax.numpy as jnp
import lmfit
import numpy as np
import pytest
from scipy.interpolate import splrep

from fixedopt._models.spline import knot_vector, spline
from fixedopt.models import GaussianModel, SplineModel

XKNOTS = np.array([0.0, 1.0, 2.5, 4.0, 5.0, 7.0, 8.5, 10.0])
X = np.linspace(-1.0, 11.0, 121)  # beyond the end knots too: splev extrapolates


@pytest.mark.parametrize("count", [4, 5, 8, 13])
def test_knot_vector_is_splreps(count):
    xknots = np.sort(np.random.default_rng(count).uniform(0.0, 10.0, count))
    expected = splrep(xknots, np.ones(count), k=3)[0]
    np.testing.assert_array_equal(knot_vector(xknots), expected)


def test_values_and_basis_equal_lmfits():
    """Random coefficients, and each unit coefficient (the B-spline basis: the model's
    derivative in that coefficient, computed by JAX)."""
    ours, theirs = SplineModel(XKNOTS, prefix="bg_"), lmfit.models.SplineModel(XKNOTS, prefix="bg_")
    values = dict(zip(ours.param_names, np.random.default_rng(0).normal(size=len(XKNOTS))))
    got = ours.eval(ours.make_params(**values), x=jnp.asarray(X))
    expected = theirs.eval(theirs.make_params(**values), x=X)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-14 * np.abs(expected).max())

    curve = jax.jacfwd(lambda c: spline(jnp.asarray(X), ours.knots, c))
    basis = np.asarray(curve(jnp.asarray(list(values.values()))))
    for j, name in enumerate(ours.param_names):
        unit = {n: float(n == name) for n in ours.param_names}
        np.testing.assert_allclose(basis[:, j], theirs.eval(theirs.make_params(**unit), x=X),
                                   rtol=0, atol=1e-14)  # fmt: skip


def test_guess_equals_lmfits():
    data = 2.0 + np.sin(X) + 0.01 * np.random.default_rng(1).normal(size=X.size)
    expected = lmfit.models.SplineModel(XKNOTS).guess(data, x=X)
    got = SplineModel(XKNOTS).guess(data, X)
    for name, parameter in expected.items():
        assert float(got[name].value) == parameter.value


def test_a_baseline_under_a_peak_fits_as_lmfit():
    """A Gaussian on a spline baseline, three spectra, the middle one's second spline
    coefficient known (fixed): values equal to lmfit's row by row (1e-6 relative),
    the fixed one bit-identical."""
    rng = np.random.default_rng(2)
    data = (
        3.0 * np.exp(-((X - 5.0) ** 2) / 0.5) + 1.0 + 0.1 * X + 0.02 * rng.normal(size=(3, X.size))
    )
    ours = GaussianModel() + SplineModel(XKNOTS, prefix="bg_")
    start = {"amplitude": 2.0, "center": 4.8, "sigma": 0.6} | {f"bg_s{i}": 1.0 for i in range(8)}
    params = ours.make_params(**start)
    params["bg_s1"].vary = np.array([True, False, True])
    result = ours.fit(data, params, x=X)
    assert result.success.all() and result.best_values["bg_s1"][1] == 1.0
    theirs = lmfit.models.GaussianModel() + lmfit.models.SplineModel(XKNOTS, prefix="bg_")
    for row in (0, 2):
        fitted = theirs.fit(data[row], theirs.make_params(**start), x=X).params
        for name in ("amplitude", "center", "sigma", "bg_s3"):
            np.testing.assert_allclose(result.best_values[name][row], fitted[name].value, rtol=1e-6)


@pytest.mark.parametrize("xknots", [[0.0, 1.0, 2.0], [0.0, 2.0, 1.0, 3.0], np.arange(101.0)])
def test_bad_knots_are_refused(xknots):
    with pytest.raises(ValueError, match="xknots"):
        SplineModel(xknots)
