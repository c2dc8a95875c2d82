"""``curve_fit``'s data checked as scipy checks them and shaped for the solve: ``p0``
(a scalar as one parameter; from ``f``'s signature when None), ``ydata``, ``xdata``
(shared by every fit, or one per fit in a batch), ``sigma`` (standard deviations, or
the Cholesky factor of a covariance), the points ``nan_policy="omit"`` leaves out
(:mod:`fixedopt._entry.fit_nan`), and scipy's refusal of more free parameters than
data points."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from fixedopt._entry.fit_keywords import feasible_start, start_outside
from fixedopt._entry.fit_nan import check_data, omit_one_fit, omit_rows
from fixedopt._entry.model import CurveFunction, output_shape, parameter_count
from fixedopt._inputs import arrays
from fixedopt._inputs.validate import PyTree, concrete_or_none
from fixedopt._objective.fit_data import representable

ModelFunction = Callable[..., Any]  # f(x, *params) -> the curve (one fit)


class Fit(NamedTuple):
    """The static choices of one ``curve_fit`` call."""

    model: CurveFunction
    method: str
    batched: bool
    poisson: bool


class Data(NamedTuple):
    """A fit's data, checked and shaped: what the solve and the covariance read."""

    p0: jax.Array
    args: tuple[Any, ...]  # (xdata, ydata[, cholesky factor])
    axes: Any  # the vmap axes of args (None without a batch)
    sigma: jax.Array | None  # 1-D weights (None for none or a 2-D sigma)
    whitened: bool  # a 2-D sigma: the residuals are whitened by its Cholesky factor
    fixed: Any
    outside: jax.Array | None  # traced starts outside the bounds, per row


def prepared(
    fit: Fit, xdata: Any, ydata: ArrayLike, p0: Any, sigma: Any, limits: Any,
    check_finite: bool, nan_policy: str | None, xdata_per_fit: bool | None, fixed: Any,
) -> Data:  # fmt: skip
    """The data of a fit, checked as scipy checks them and shaped for the solve."""
    y = arrays.numbers(ydata, "ydata")
    if y.size == 0:
        raise ValueError(f"`ydata` must not be empty! Got shape {tuple(y.shape)}")
    p0 = _start(fit.model.f, p0, limits, y, fit.batched)
    xdata = _xdata(xdata)
    p0, y = _parameters_and_data(p0, y, fit.batched, xdata)
    check_data(xdata, y, check_finite, nan_policy)
    if nan_policy == "omit" and not fit.batched:
        xdata, dropped, sigma = omit_one_fit(xdata, np.asarray(y), sigma)
        y = jnp.asarray(dropped, p0.dtype)
    per_fit = _xdata_per_fit(fit.model, xdata, y, p0, fit.batched, xdata_per_fit)
    x_one = jax.tree.map(arrays.one_row, xdata) if per_fit else xdata
    how = f"xdata of shape {_shapes(x_one)}" + (" (one fit's)" if per_fit else "")
    y_one = tuple(y.shape[1:] if fit.batched else y.shape)
    shape = output_shape(fit.model, x_one, arrays.one_row(p0) if fit.batched else p0, y_one, how)
    y = jnp.broadcast_to(y, (*y.shape[:1], *shape) if fit.batched else shape)
    fixed = fixed_mask(fixed, p0, fit.batched)
    _check_enough_data(p0, fixed, math.prod(shape), fit.batched)
    weights, factor = _weights(sigma, y, fit)
    if nan_policy == "omit" and fit.batched:
        xdata, y, weights = omit_rows(xdata, y, factor if factor is not None else weights, per_fit)
    args = (xdata, y) if factor is None else (xdata, y, factor)
    axes = ((0 if per_fit else None), *(0,) * (len(args) - 1)) if fit.batched else None
    outside = start_outside(p0, limits, fit.batched)
    return Data(p0, args, axes, weights, factor is not None, fixed, outside)


def _start(
    f: ModelFunction, p0: Any, limits: Any, ydata: jax.Array, batched: bool
) -> jax.Array | np.ndarray:
    """scipy's ``p0``: a scalar as one parameter; None from ``f``'s signature, at 1
    or inside the bounds (the same start for every fit of a batch)."""
    if p0 is not None:
        array = arrays.numbers(p0, "p0")
        return array[None] if array.ndim == 0 else array
    k = parameter_count(f)
    if limits is None:
        start = np.ones(k)
    else:
        lower, upper = (np.broadcast_to(np.asarray(b, float), (k,)) for b in limits)
        start = feasible_start(lower, upper)
    return np.broadcast_to(start, (ydata.shape[0], k)) if batched else start


def _check_enough_data(p0: jax.Array, fixed: Any, points: int, batched: bool) -> None:
    """scipy's ``TypeError`` for more (free) parameters than data points, per fit
    where the mask is concrete."""
    mask = concrete_or_none(fixed)
    free = p0.shape[-1] - (np.sum(np.broadcast_to(mask, p0.shape), axis=-1) if mask is not None
                           else 0)  # fmt: skip
    over = np.flatnonzero(np.atleast_1d(free) > points)
    if over.size:
        row = f" (fit {int(over[0])})" if batched else ""
        n = int(np.atleast_1d(free)[over[0]])
        raise TypeError(
            f"The number of func parameters={n} must not exceed the number of data "
            f"points={points}{row}: a fit with more free parameters than data has no "
            "unique answer; give more data, or fix parameters (`fixed`)"
        )


def _weights(sigma: Any, ydata: jax.Array, fit: Fit) -> tuple[jax.Array | None, Any]:
    """``(sigma, factor)``: the standard deviations broadcast to ``ydata``, or the
    Cholesky factor of a covariance ``sigma`` (a diagonal one is its standard
    deviations)."""
    if sigma is None:
        return None, None
    array = sigma if isinstance(sigma, (jax.Array, jax.core.Tracer)) else np.asarray(sigma)
    m = ydata.shape[-1] if ydata.ndim else 1
    covariance_shape = (*ydata.shape[:1], m, m) if fit.batched else (m, m)
    if ydata.ndim == (2 if fit.batched else 1) and array.shape == covariance_shape and m > 1:
        return _covariance_factor(array, ydata.dtype)
    return _sigma(array, ydata), None


def _covariance_factor(sigma: Any, dtype: Any) -> tuple[jax.Array | None, Any]:
    """The Cholesky factor of a covariance ``sigma``, or its standard deviations if
    it is diagonal (concrete); ``ValueError`` as scipy where it is not positive
    definite."""
    sigma = sigma.astype(dtype)
    concrete = concrete_or_none(sigma)
    if concrete is not None:
        off = concrete - concrete * np.eye(concrete.shape[-1])
        if not np.any(off) and np.all(np.diagonal(concrete, 0, -2, -1) > 0):
            return jnp.sqrt(jnp.diagonal(sigma, 0, -2, -1)), None
    factor = jnp.linalg.cholesky(sigma)
    if concrete is not None and not np.all(np.isfinite(np.asarray(factor))):
        raise ValueError("`sigma` must be positive definite (a covariance matrix of ydata).")
    return None, factor


def _shapes(x: PyTree) -> Any:
    shapes = [tuple(np.shape(leaf)) for leaf in jax.tree.leaves(x)]
    return shapes[0] if len(shapes) == 1 else shapes


def _parameters_and_data(
    p0: ArrayLike, ydata: jax.Array, batched: bool, xdata: PyTree
) -> tuple[jax.Array, jax.Array]:
    """``p0`` as a floating-point ``(k,)`` (``(B, k)``) array and ``ydata`` in its
    dtype: JAX's promotion of ``p0``, ``ydata`` and ``xdata``'s floating-point arrays
    (a float32 ``p0`` with float64 data fits in float64, as ``p0 + ydata`` would
    compute). With ``batched=True`` a ``(k,)`` ``p0`` is every fit's start."""
    p0 = jnp.asarray(p0)
    if not (jnp.issubdtype(ydata.dtype, jnp.floating) or jnp.issubdtype(ydata.dtype, jnp.integer)):
        raise TypeError(f"`ydata` must be a real array, got dtype {ydata.dtype}")
    floating = [a.dtype for a in (p0, ydata, *jax.tree.leaves(xdata))
                if jnp.issubdtype(a.dtype, jnp.floating)]  # fmt: skip
    p0 = p0.astype(jnp.result_type(*floating) if floating else jnp.result_type(float))
    if batched and p0.ndim == 1 and ydata.ndim >= 2:  # one start shared by every fit
        p0 = arrays.broadcast_to(p0, (ydata.shape[0], *p0.shape))
    if p0.ndim != (2 if batched else 1) or p0.shape[-1] == 0:
        _wrong_start_shape(p0, ydata, batched)
    if batched and (ydata.ndim < 2 or ydata.shape[0] != p0.shape[0]):
        raise ValueError(
            f"`ydata` must have the leading batch axis of `p0` ({p0.shape[0]} fits) and "
            f"one fit's data after it, got shape {tuple(ydata.shape)}"
        )
    return p0, ydata.astype(p0.dtype)


def _wrong_start_shape(p0: jax.Array, ydata: jax.Array, batched: bool) -> None:
    """The ``ValueError`` of a ``p0`` of the wrong shape, with the likely fix."""
    expected = "(B, k), one row per fit, or (k,), every fit's" if batched else "(k,)"
    hint = ""
    if not batched and p0.ndim == 2 and ydata.ndim >= 2 and ydata.shape[0] == p0.shape[0]:
        hint = (f": {p0.shape[0]} starts and {ydata.shape[0]} rows of ydata read as "
                "many fits; pass batched=True to fit one curve per row")  # fmt: skip
    raise ValueError(f"`p0` must have shape {expected} with k >= 1, got {tuple(p0.shape)}{hint}")


def fixed_mask(fixed: Any, p0: jax.Array, batched: bool) -> Any:
    """``curve_fit``'s ``fixed``: None (nothing fixed), a bool, or a mask that
    broadcasts to ``p0``, boolean or of 0/1 integers (as the models' ``vary``)."""
    if fixed is None or isinstance(fixed, (bool, np.bool_)):
        return bool(fixed)
    mask = arrays.numbers(fixed, "fixed")
    concrete = concrete_or_none(mask)
    if jnp.issubdtype(mask.dtype, jnp.integer) and concrete is not None:
        if not np.all((concrete == 0) | (concrete == 1)):
            raise TypeError(
                f"`fixed` must be boolean (True = fixed) or 0/1 integers, got values "
                f"{np.unique(concrete)[:5].tolist()}"
            )
        mask = arrays.asarray(concrete.astype(bool))
    if mask.dtype != jnp.bool_:
        raise TypeError(f"`fixed` must be boolean (True = fixed), got dtype {mask.dtype}")
    try:
        fits = np.broadcast_shapes(mask.shape, p0.shape) == tuple(p0.shape)
    except ValueError:
        fits = False
    if not fits:
        shape = "(k,) or (B, k), one row per fit" if batched else "(k,)"
        raise ValueError(
            f"`fixed` must have shape {shape}, one flag per parameter of `p0` (shape "
            f"{tuple(p0.shape)}), got shape {tuple(mask.shape)}"
        )
    return mask


def _xdata_per_fit(
    model: CurveFunction,
    xdata: PyTree,
    ydata: jax.Array,
    p0: jax.Array,
    batched: bool,
    given: bool | None,
) -> bool:
    """Whether ``xdata`` has the batch axis: ``given``, or the reading under which
    ``f`` returns one fit's shape."""
    if not batched:
        if given:
            raise ValueError("`xdata_per_fit` has no effect without batched=True: remove it")
        return False
    leaves = jax.tree.leaves(xdata)
    could = bool(leaves) and all(leaf.ndim >= 1 and leaf.shape[0] == p0.shape[0] for leaf in leaves)
    if given is not None:
        if given and not could:
            raise ValueError(
                f"`xdata` must have the leading batch axis of size {p0.shape[0]} with "
                "xdata_per_fit=True"
            )
        return given
    one_y = ydata.shape[1:]
    readings = {False: xdata, True: jax.tree.map(arrays.one_row, xdata) if could else None}
    matches = [per_fit for per_fit, x in readings.items() if x is not None]
    row = arrays.one_row(p0)
    shapes = {per_fit: _curve_shape(model, readings[per_fit], row) for per_fit in matches}
    matches = [per_fit for per_fit in matches if shapes[per_fit] == one_y]
    if not matches:  # the mistake, named: f's failure or its shape under the likely reading
        if could:  # a leading axis of the batch size: meant one per fit
            how = f"one fit's xdata of shape {_shapes(readings[True])} (xdata read per fit)"
            output_shape(model, readings[True], row, one_y, how)
        output_shape(model, xdata, row, one_y, f"xdata of shape {_shapes(xdata)} (shared)")
    if len(matches) != 1:
        raise ValueError(
            f"`xdata` (shapes {[tuple(a.shape) for a in leaves]}): both readings (shared by "
            f"every fit, or one per fit) make `f` return one fit's shape {one_y}; say which "
            "with xdata_per_fit=True or False"
        )
    return matches[0]


def _xdata(xdata: Any) -> PyTree:
    """``xdata`` as arrays: a list or tuple of numbers (or of equal-shape arrays) is one
    array, as NumPy reads it; any other tree keeps its structure."""
    if isinstance(xdata, (list, tuple)):
        try:
            return arrays.asarray(xdata)
        except (TypeError, ValueError):
            pass  # arrays of different shapes: a tree
    return jax.tree.map(lambda leaf: arrays.numbers(leaf, "xdata"), xdata)


def _curve_shape(
    model: CurveFunction, x: PyTree, p: jax.Array | jax.ShapeDtypeStruct
) -> tuple[int, ...] | None:
    """The shape of the curve under a reading of ``xdata``, None if ``f`` fails on it."""
    try:
        out = jax.eval_shape(model, x, p)
    except Exception:  # a reading that f cannot take
        return None
    return tuple(out.shape)


def _sigma(sigma: Any, ydata: jax.Array) -> jax.Array:
    """``sigma`` broadcast to ``ydata``'s shape, in its dtype (a value that the cast
    turns to 0 or inf is a ``ValueError``)."""
    try:
        shaped = (np if isinstance(sigma, np.ndarray) else jnp).broadcast_to(sigma, ydata.shape)
    except ValueError:
        raise ValueError(
            f"`sigma` has incorrect shape {tuple(sigma.shape)}: it must broadcast to "
            f"`ydata`'s shape {tuple(ydata.shape)} (one standard deviation per value) or be "
            "the covariance matrix of one fit's ydata, (m, m) (batched: (B, m, m))"
        ) from None
    return representable("sigma", shaped, ydata.dtype)
