"""``fit_xarray``: a model fitted along one dimension of an ``xarray.DataArray`` at every
index of its other dimensions (a map of spectra, a FLIM image of decays), as one batched
fit, returned as an ``xarray.Dataset`` with the map's dimensions and coordinates, as
``DataArray.curvefit`` does for scipy. xarray is imported only here."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from fixedopt._models.parameters import Parameters


def _xarray() -> Any:
    try:
        return importlib.import_module("xarray")
    except ImportError:
        raise ImportError("fit_xarray needs xarray: pip install 'fixedopt[models]'") from None


def fit_xarray(model: Any, data: Any, params: Parameters | None = None, *, dim: str,
               weights: Any = None, **kwargs: Any) -> Any:  # fmt: skip
    """Fit ``model`` along ``dim`` of the ``xarray.DataArray`` ``data`` at every index of
    its other dimensions.

    Args:
      model: a :class:`fixedopt.models.Model` of one independent variable.
      data: a ``DataArray`` with the dimension ``dim``; its coordinate along ``dim`` is
        ``x`` unless the independent variable is given by keyword.
      params: :class:`fixedopt.models.Parameters`; a per-pixel entry is 1-D, one value
        per pixel in C order over the other dimensions (``data.transpose(..., dim)``'s
        order; ``np.ravel`` of an array of the map's shape).
      dim: the dimension to fit along.
      weights: broadcastable to ``data`` (a ``DataArray`` is aligned to it).
      **kwargs: as :func:`fixedopt.models.fit`.

    Returns:
      An ``xarray.Dataset`` over the map's dimensions: each parameter and
      ``<name>_stderr``, ``chisqr``, ``redchi``, ``aic``, ``bic``, ``status``, ``success``,
      and ``best_fit`` over ``data``'s dimensions.
    """
    xr = _xarray()
    if dim not in data.dims:
        raise ValueError(f"`dim` must be one of the dimensions {data.dims}, got {dim!r}")
    map_dims = tuple(d for d in data.dims if d != dim)
    ordered = data.transpose(*map_dims, dim)
    map_shape = tuple(ordered.shape[:-1])
    rows = ordered.values.reshape(-1, ordered.shape[-1])
    (name,) = model.independent_vars
    kwargs.setdefault(name, np.asarray(data[dim].values))
    if weights is not None:
        weights = xr.DataArray(weights) if not hasattr(weights, "dims") else weights
        weights = weights.broadcast_like(ordered).transpose(*map_dims, dim).values
        weights = weights.reshape(rows.shape)
    result = model.fit(rows, params, weights=weights, **kwargs)
    coords = {d: ordered.coords[d] for d in map_dims if d in ordered.coords}

    def per_pixel(values: np.ndarray) -> Any:
        return xr.DataArray(np.reshape(values, map_shape), dims=map_dims, coords=coords)

    variables = {}
    for parameter in result.names:
        variables[parameter] = per_pixel(result.best_values[parameter])
        variables[parameter + "_stderr"] = per_pixel(result.stderr[parameter])
    for stat in ("chisqr", "redchi", "aic", "bic", "status", "success"):
        variables[stat] = per_pixel(getattr(result, stat))
    variables["best_fit"] = ordered.copy(data=result.best_fit.reshape(ordered.shape))
    return xr.Dataset(variables)
