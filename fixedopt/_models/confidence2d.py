"""``ModelResult.conf_interval2d``: lmfit's two-parameter confidence grid, batched.

For two fitted parameters ``a`` and ``b`` of a fit, each point ``(a_i, b_j)`` of an
``nx`` by ``ny`` grid is a fit with ``a`` and ``b`` held there and the other parameters
refitted from the best fit; the grid holds ``sqrt((chisqr_ij - chisqr_0) / redchi)``
(lmfit's ``conf_interval2d``: ``chisqr_0`` the smaller of the best fit's chi-square
and the grid's least, ``redchi`` the best fit's), or ``chisqr_ij`` itself with
``chi2_out``. A Poisson fit's grid is ``sqrt(deviance_ij - deviance_0)`` (Wilks, no
scale). Every point of every fit is one row of ONE batched ``least_squares``: lmfit
runs ``nx * ny`` fits one after the other for one fit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fixedopt._models.confidence import fit_problem, held_refit, picked_fits


def conf_interval2d(
    result: Any, x_name: str, y_name: str, nx: int = 10, ny: int = 10, limits: Any = None,
    nsigma: float = 5.0, chi2_out: bool = False, rows: Any = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """``(x, y, grid)``: ``x`` ``(B, nx)`` and ``y`` ``(B, ny)`` the grid's values of
    ``x_name`` and ``y_name`` in each fit, ``grid`` ``(B, ny, nx)`` (lmfit's layout,
    ``grid[:, j, i]`` at ``(x[:, i], y[:, j])``). ``limits``: lmfit's ``((x_upper,
    x_lower), (y_upper, y_lower))``, each a number or one per fit; by default the best
    value +/- ``nsigma`` standard errors. NaN rows: fits not in ``rows``, that did not
    converge, or in which either parameter is not fitted. A held value beyond a bound
    is held at the bound (as lmfit's parameters clip their values)."""
    vector = fit_problem(result, "conf_interval2d").residual.plan.vector
    unknown = [n for n in (x_name, y_name) if n not in vector]
    if unknown or x_name == y_name:
        raise ValueError("conf_interval2d holds two different fitted parameters; "
                         f"got {x_name!r} and {y_name!r} (fitted: {list(vector)})")  # fmt: skip
    for name, count in (("nx", nx), ("ny", ny)):
        if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 1:
            raise ValueError(f"conf_interval2d: {name} must be a positive integer, got {count!r}")
    columns = vector.index(x_name), vector.index(y_name)
    chosen = _chosen_fits(result, columns, rows)
    x_points, y_points = _axes(result, (x_name, y_name), nx, ny, limits, nsigma)
    grid = np.full((len(chosen), ny, nx), np.nan)
    fits = np.flatnonzero(chosen)
    if fits.size:
        chisqr = _held_fits(result, fits, columns, x_points[fits], y_points[fits])
        grid[fits] = chisqr if chi2_out else _sigmas(result, fits, chisqr)
    return x_points, y_points, grid


def _chosen_fits(result: Any, columns: tuple[int, int], rows: Any) -> np.ndarray:
    """``(B,)``: the fits in ``rows`` that converged with both ``columns`` fitted."""
    fitted = ~np.asarray(result.solution.fixed)[:, list(columns)].any(axis=1)
    return np.asarray(np.asarray(result.success) & fitted & picked_fits(result, rows))


def _axes(result: Any, names: tuple[str, str], nx: int, ny: int, limits: Any,
          nsigma: float) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Each fit's grid values ``(B, nx)`` and ``(B, ny)``, from ``lower`` to ``upper``."""
    rows = result.data.shape[0]
    points = []
    for axis, (name, count) in enumerate(zip(names, (nx, ny), strict=True)):
        if limits is None:
            best, error = result.best_values[name], result.stderr[name]
            pair = (best + nsigma * error, best - nsigma * error)
        else:
            pair = _limits(limits, axis, rows)
        points.append(np.linspace(pair[1], pair[0], count, axis=1))
    return points[0], points[1]


def _limits(limits: Any, axis: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """lmfit's ``limits[axis]``, ``(upper, lower)``, each broadcast to one per fit."""
    try:
        upper, lower = limits[axis]
        one_per_fit = (rows,)
        upper = np.broadcast_to(np.asarray(upper, float), one_per_fit)
        return upper, np.broadcast_to(np.asarray(lower, float), one_per_fit)
    except (TypeError, ValueError, IndexError) as error:
        raise ValueError(
            "conf_interval2d: `limits` must be ((x_upper, x_lower), (y_upper, y_lower)), "
            f"each a number or one per fit ({rows}); got {limits!r}"
        ) from error


def _held_fits(result: Any, fits: np.ndarray, columns: tuple[int, int], x_points: np.ndarray,
               y_points: np.ndarray) -> np.ndarray:  # fmt: skip
    """``(len(fits), ny, nx)``: chi-square (a Poisson fit's deviance) of every grid
    point of every fit in ``fits``, one batched solve."""
    ny, nx = y_points.shape[1], x_points.shape[1]
    job = np.repeat(fits, ny * nx)  # fit-major, then y, then x (the grid's layout)
    start = np.array(result.solution.x)[job]
    start[:, columns[0]] = np.tile(x_points, (1, ny)).ravel()
    start[:, columns[1]] = np.repeat(y_points, nx, axis=1).ravel()
    held = np.zeros(start.shape, bool)
    held[:, list(columns)] = True
    chisqr, _ = held_refit(result, job, held)(start)  # held values clipped into bounds
    return np.asarray(chisqr, float).reshape(len(fits), ny, nx)


def _sigmas(result: Any, fits: np.ndarray, chisqr: np.ndarray) -> np.ndarray:
    """lmfit's ``sqrt((chisqr - chisqr_0) / redchi)`` (a Poisson fit: the deviance, no
    scale), ``chisqr_0`` the least of the best fit's and the grid's."""
    poisson = result.estimator == "poisson"
    best = np.asarray(result.deviance if poisson else result.chisqr, float)[fits]
    scale = 1.0 if poisson else np.asarray(result.redchi, float)[fits][:, None, None]
    lowest = np.minimum(best, np.nanmin(chisqr, axis=(1, 2)))[:, None, None]
    return np.asarray(np.sqrt(np.maximum(chisqr - lowest, 0.0) / scale))
