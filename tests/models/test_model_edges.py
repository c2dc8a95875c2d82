"""Issue 63's edges of ``fixedopt.models``: a ``vary=False`` value outside its
``[min, max]`` is refused (never clipped), a mistyped ``make_params`` keyword and a
parameter missing from ``params`` are errors naming them."""

import re

import numpy as np
import pytest

from fixedopt.models import Model

X = np.linspace(0.0, 1.0, 10)


def line(x, slope, intercept):
    return slope * x + intercept


def test_a_fixed_value_outside_its_bounds_is_refused_not_clipped():
    """10 in [0.1, 3]: was clipped to 3 and reported a success."""
    model = Model(line)
    params = model.make_params(slope=1.0, intercept=dict(value=10.0, vary=False, min=0.1, max=3))
    message = (
        "parameter 'intercept' has vary=False and value 10.0 outside its [min, max] = [0.1, 3.0]"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        model.fit(2.0 * X + 1.0, params, x=X)
    params["intercept"].set(value=[1.0, 10.0], vary=[True, False])  # fit 1's only
    with pytest.raises(
        ValueError, match=re.escape("10.0 outside its [min, max] = [0.1, 3.0] (fit 1)")
    ):
        model.fit(np.stack([X, X]), params, x=X)
    params["intercept"].set(value=[1.0, 10.0], vary=True)  # free: a start, clipped as lmfit
    assert model.fit(np.stack([X, X]), params, x=X).success.all()


def test_a_mistyped_make_params_keyword_is_an_error():
    with pytest.raises(TypeError, match=re.escape("unknown parameter names ['slop']")):
        Model(line).make_params(slop=1.0)


def test_a_parameter_missing_from_params_is_named():
    model = Model(line)
    params = model.make_params(slope=1.0, intercept=0.0)
    del params["intercept"]
    with pytest.raises(
        ValueError, match=re.escape("`params` lack the model's parameters ['intercept']")
    ):
        model.fit(2.0 * X + 1.0, params, x=X)


def parabola(x, a, b, c):
    return a + b * x + c * x * x


def test_more_free_parameters_than_points_is_refused_as_curve_fit_refuses():
    """3 free parameters, 2 points: ended ``success`` at an arbitrary point of the
    solutions' line with a negative ``redchi``; ``curve_fit`` (and lmfit's ``leastsq``)
    refuse it. A parameter fixed (in one fit, or all) makes it well posed."""
    import fixedopt

    model, x, data = Model(parabola), X[:2], np.array([1.0, 3.0])
    with pytest.raises(TypeError, match="must not exceed the number of data points=2"):
        fixedopt.curve_fit(parabola, x, data, p0=[0.0, 0.0, 0.0])
    message = "fit 0 has 3 free parameters ['a', 'b', 'c'] but `data` has 2 points per fit"
    with pytest.raises(ValueError, match=re.escape(message)):
        model.fit(data, x=x)
    params = model.make_params(a=0.0, b=0.0, c=dict(value=0.0, vary=[False, True]))
    with pytest.raises(ValueError, match=re.escape("fit 1 has 3 free parameters")):
        model.fit(np.stack([data, data]), params, x=x)
    params["c"].set(vary=False)
    with pytest.warns(fixedopt.OptimizeWarning, match="no more data points than free"):
        result = model.fit(np.stack([data, data]), params, x=x)  # 2 free, 2 points: exact
    np.testing.assert_allclose(result.values[:, :2], [[1.0, 18.0]] * 2, rtol=1e-8)
