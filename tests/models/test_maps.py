"""fit_xarray: a map of spectra fitted along one dimension, each pixel against lmfit."""

import lmfit
import numpy as np
import pytest

from fixedopt.models import GaussianModel, LinearModel

xr = pytest.importorskip("xarray")


def test_a_map_of_spectra_fits_each_pixel_as_lmfit():
    energy = np.linspace(-5.0, 5.0, 41)
    rng = np.random.default_rng(5)
    centers = rng.uniform(-1.0, 1.0, (2, 3))
    clean = lmfit.lineshapes.gaussian(energy, 2.0, centers[..., None], 0.8) + 0.1
    data = xr.DataArray(
        clean + rng.normal(0, 0.01, clean.shape),
        dims=("row", "col", "energy"),
        coords={"row": [10, 20], "col": [1.0, 2.0, 3.0], "energy": energy},
    ).transpose("energy", "row", "col")  # the fitted dimension need not be last
    model = GaussianModel() + LinearModel()
    params = model.make_params(amplitude=1.5, center=0.0, sigma=1.0, slope=0.0, intercept=0.0)
    params["slope"].set(value=0.0, vary=False)
    fitted = model.fit_xarray(data, params, dim="energy")
    assert fitted["center"].dims == ("row", "col")
    np.testing.assert_array_equal(fitted["col"], [1.0, 2.0, 3.0])
    assert fitted["best_fit"].dims == ("row", "col", "energy")
    reference = lmfit.models.GaussianModel() + lmfit.models.LinearModel()
    for i, row in enumerate([10, 20]):
        for j in range(3):
            start = reference.make_params(amplitude=1.5, center=0.0, sigma=1.0, intercept=0.0)
            start["slope"].set(value=0.0, vary=False)
            spectrum = data.sel(row=row).isel(col=j).values
            kws = {"jac": "3-point", "xtol": 1e-15, "ftol": 1e-15, "gtol": 1e-15}
            fit = reference.fit(spectrum, start, x=energy, method="least_squares", fit_kws=kws)
            for name in ("amplitude", "center", "sigma", "intercept"):
                got = fitted[name].values[i, j], fitted[name + "_stderr"].values[i, j]
                assert got[0] == pytest.approx(fit.params[name].value, rel=1e-6), name
                assert got[1] == pytest.approx(fit.params[name].stderr, rel=1e-5), name
    assert bool(fitted["success"].all())
