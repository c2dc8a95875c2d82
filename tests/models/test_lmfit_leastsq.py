"""Model.fit against lmfit's default method (``leastsq``, MINPACK) given the exact
Jacobian (``Dfun``) and tight tolerances: two pseudo-Voigt peaks and a line with
per-fit fixed parameters, bounds and a tie. At lmfit's defaults its values and errors
differ from these by up to ~3e-4 standard errors and ~1e-4 relative (its forward
differences, and a covariance from the Jacobian of the iterate before the last);
``benchmarks/models_vs_lmfit.py`` measures both. A parameter on its bound keeps its
error bar, as with lmfit's ``least_squares``."""

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fixedopt.models import LinearModel, PseudoVoigtModel, lineshapes

lmfit = pytest.importorskip("lmfit")

X = np.linspace(0.0, 30.0, 301)
NAMES = ("p1_amplitude", "p1_center", "p1_sigma", "p1_fraction", "p2_amplitude",
         "p2_center", "p2_sigma", "p2_fraction", "slope", "intercept")  # fmt: skip
TRUTH = (10.0, 10.0, 1.0, 0.3, 6.0, 18.0, 1.5, 0.6, 0.02, 0.5)
START = (8.0, 9.5, 1.2, 0.5, 5.0, 18.5, 1.2, 0.5, 0.0, 0.3)
BOUNDED = {"p1_amplitude": (0, np.inf), "p2_amplitude": (0, np.inf), "p1_sigma": (0, np.inf),
           "p2_sigma": (0, np.inf), "p1_fraction": (0, 1), "p2_fraction": (0, 1)}  # fmt: skip
KNOWN = [(), ("p1_fraction",), ("p2_center", "slope"), ("p1_fraction", "p2_fraction"), ()]
TIED = [True, False, False, True, False]
TIGHT = {"ftol": 1e-15, "xtol": 1e-15, "gtol": 1e-15}
Fits = tuple[Any, list[Any], Any]  # ours; lmfit leastsq per fit; lmfit least_squares, last fit


def curve(p: jax.Array) -> jax.Array:
    """The two peaks and the line, from the 10 parameters in ``NAMES``' order."""
    x = jnp.asarray(X)
    peaks: jax.Array = lineshapes.pvoigt(x, *p[:4]) + lineshapes.pvoigt(x, *p[4:8])
    return peaks + p[8] * x + p[9]


JACOBIAN = jax.jit(jax.jacfwd(curve))


def dfun(params: Any, *args: Any, **kwargs: Any) -> np.ndarray:
    """lmfit's ``Dfun``: the Jacobian of its residual ``data - model`` in the varied
    parameters; a tie ``p2_sigma = p1_sigma`` adds p2_sigma's column to p1_sigma's."""
    full = np.asarray(JACOBIAN(jnp.array([params[n].value for n in NAMES])))
    columns = {n: full[:, i] for i, n in enumerate(NAMES)}
    if params["p2_sigma"].expr:
        columns["p1_sigma"] = columns["p1_sigma"] + columns["p2_sigma"]
    free = [n for n, p in params.items() if p.vary and not p.expr]
    return -np.column_stack([columns[n] for n in free])


def spectra() -> np.ndarray:
    """The last spectrum's p1 is drawn with fraction -0.1: its fit ends on the bound 0."""
    rng = np.random.default_rng(3)
    rows = []
    for row, tied in enumerate(TIED):
        truth = np.array(TRUTH)
        truth[6] = truth[2] if tied else truth[6]
        truth[3] = -0.1 if row == len(TIED) - 1 else truth[3]
        rows.append(np.asarray(curve(jnp.asarray(truth))) + rng.normal(0, 0.05, X.size))
    return np.array(rows)


def lmfit_fit(data: np.ndarray, row: int, method: str = "leastsq", **fit_kws: Any) -> Any:
    model = lmfit.models.PseudoVoigtModel(prefix="p1_")
    model = model + lmfit.models.PseudoVoigtModel(prefix="p2_") + lmfit.models.LinearModel()
    params = model.make_params(**dict(zip(NAMES, START)))
    for name, (low, high) in BOUNDED.items():
        params[name].set(min=low, max=high)
    for name in KNOWN[row]:
        params[name].set(value=TRUTH[NAMES.index(name)], vary=False)
    if TIED[row]:
        params["p2_sigma"].set(expr="p1_sigma")
    return model.fit(data, params, x=X, method=method, fit_kws={**TIGHT, **fit_kws})


@pytest.fixture(scope="module")
def fits() -> Fits:
    data = spectra()
    model = PseudoVoigtModel(prefix="p1_") + PseudoVoigtModel(prefix="p2_") + LinearModel()
    params = model.make_params(**dict(zip(NAMES, START)))
    for i, name in enumerate(NAMES):
        known = np.array([name in k for k in KNOWN])
        params[name].set(value=np.where(known, TRUTH[i], START[i]), vary=~known)
        if name in BOUNDED:
            params[name].set(min=BOUNDED[name][0], max=BOUNDED[name][1])
    params["p2_sigma"].set(expr=["p1_sigma" if tied else None for tied in TIED])
    ours = model.fit(data, params, x=X, **TIGHT)
    leastsq = [lmfit_fit(data[row], row, Dfun=dfun) for row in range(len(TIED))]
    return ours, leastsq, lmfit_fit(data[-1], len(TIED) - 1, "least_squares", jac=dfun)


def test_values_and_errors_equal_lmfit_leastsq_with_the_exact_jacobian(fits: Fits) -> None:
    ours, theirs, _ = fits
    assert ours.success.all()
    for row, reference in enumerate(theirs[:-1]):  # the last: a parameter on its bound
        assert reference.ier in (1, 2, 3, 4), row
        for name in NAMES:
            param = reference.params[name]
            value, error = ours.best_values[name][row], ours.stderr[name][row]
            if not param.stderr:  # fixed
                assert error == 0.0 and value == param.value, (row, name)
                continue
            assert abs(value - param.value) < 1e-6 * param.stderr, (row, name)
            assert value == pytest.approx(param.value, rel=1e-6), (row, name)
            assert error == pytest.approx(param.stderr, rel=1e-6), (row, name)


def test_degrees_of_freedom_and_statistics_equal_lmfits(fits: Fits) -> None:
    ours, theirs, _ = fits
    for row, reference in enumerate(theirs):
        assert (ours.ndata[row], ours.nvarys[row]) == (reference.ndata, reference.nvarys)
        assert ours.nfree[row] == reference.nfree  # fixed and tied parameters not counted
        assert ours.redchi[row] == pytest.approx(reference.redchi, rel=1e-9)
        assert ours.aic[row] == pytest.approx(reference.aic, rel=1e-9)


def test_a_tied_parameter_has_lmfits_value_and_error(fits: Fits) -> None:
    ours, theirs, _ = fits
    for row in np.flatnonzero(TIED):
        param = theirs[row].params["p2_sigma"]
        assert ours.best_values["p2_sigma"][row] == pytest.approx(param.value, rel=1e-9)
        assert ours.stderr["p2_sigma"][row] == pytest.approx(param.stderr, rel=1e-6)
        assert ours.stderr["p2_sigma"][row] == ours.stderr["p1_sigma"][row]


def test_a_parameter_on_its_bound_keeps_its_error_bar_as_lmfits_least_squares(fits: Fits) -> None:
    ours, _, bound = fits
    row = len(TIED) - 1
    assert ours.best_values["p1_fraction"][row] == 0.0
    assert abs(bound.params["p1_fraction"].value) < 1e-12
    for name in NAMES:
        param = bound.params[name]
        value, error = ours.best_values[name][row], ours.stderr[name][row]
        assert abs(value - param.value) < 1e-6 * param.stderr, name
        assert error == pytest.approx(param.stderr, rel=1e-6), name
