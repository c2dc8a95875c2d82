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
