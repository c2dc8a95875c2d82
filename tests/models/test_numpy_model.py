"""A ``Model`` of a NumPy function, as an lmfit user writes one: it runs on the host
(``fixedopt.HostFunctionWarning``), its derivatives by finite differences. Reference:
lmfit's fit of the same function, one spectrum at a time, run to its optimum."""

import lmfit
import numpy as np
import pytest

import fixedopt
from fixedopt.models import GaussianModel, Model

X = np.linspace(-3.0, 3.0, 61)


def gauss(x, amplitude=1.0, center=0.0, sigma=1.0):
    return amplitude * np.exp(-((x - center) ** 2) / (2 * sigma**2))


def _data():
    rng = np.random.default_rng(0)
    rows = [gauss(X, 2.0, c, 0.7) + 0.02 * rng.standard_normal(X.size) for c in (0.3, -0.4)]
    return np.stack(rows)


def test_a_numpy_model_fits_as_lmfit_and_as_the_built_in_one():
    data = _data()
    model = Model(gauss)
    start = dict(amplitude=1.0, center=0.0, sigma=1.0)
    with pytest.warns(fixedopt.HostFunctionWarning, match=r"`func` \(gauss\)"):
        ours = model.fit(data, model.make_params(**start), x=X)
    assert ours.success.all()
    built_in = GaussianModel().fit(data, GaussianModel().make_params(**start), x=X)
    tight = dict(ftol=1e-15, xtol=1e-15, gtol=1e-15)
    for row in range(len(data)):
        theirs = lmfit.Model(gauss).fit(
            data[row], lmfit.Model(gauss).make_params(**start), x=X, fit_kws=tight
        )
        for name, param in theirs.params.items():
            assert ours.params[name].value[row] == pytest.approx(param.value, rel=1e-7)
            # both Jacobians are forward differences (lmfit's MINPACK steps, scipy's here)
            assert ours.params[name].stderr[row] == pytest.approx(param.stderr, rel=1e-5)
        for name in ("center", "sigma"):  # the built-in's amplitude is the peak's area
            assert ours.params[name].value[row] == pytest.approx(
                built_in.params[name].value[row], rel=1e-7
            )
    curve = np.asarray(model.eval(model.make_params(amplitude=2.0), x=X))
    np.testing.assert_allclose(curve, gauss(X, 2.0), rtol=1e-15)
