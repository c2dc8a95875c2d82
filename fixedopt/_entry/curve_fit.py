"""``curve_fit``: ``scipy.optimize.curve_fit``'s call, batched, with fixed parameters
per fit and a Poisson likelihood; a thin layer over ``least_squares`` and
``covariance``."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from fixedopt._contract.status import Reason, Status
from fixedopt._entry.fit_keywords import (
    bound_arrays,
    feasible_start,
    jacobian,
    least_squares_keywords,
    resolve_method,
    solve_keywords,
    start_outside,
)
from fixedopt._entry.fit_nan import check_data, data_policy, omit_one_fit, omit_rows
from fixedopt._entry.fit_output import (
    ier_and_message,
    infodict,
    warn_if_not_estimated,
)
from fixedopt._entry.minimize import least_squares
from fixedopt._entry.model import Model, output_shape, parameter_count
from fixedopt._inputs import arrays
from fixedopt._inputs.checks import boolean, one_of
from fixedopt._inputs.notices import warn_if_float64_dropped
from fixedopt._inputs.validate import PyTree, concrete_or_none
from fixedopt._objective.arguments import hashable_function
from fixedopt._objective.fit_data import ESTIMATORS
from fixedopt._results.covariance import AT_BOUND, AT_BOUND_DEFAULT, Covariance, covariance
from fixedopt._results.solution import Solution

ModelFunction = Callable[..., Any]  # f(x, *params) -> the curve (one fit)


@dataclasses.dataclass(frozen=True)
class _Residual:
    """``f(x, *p) - y``: the residuals of one fit (hashed by the model)."""

    model: Model

    def __call__(self, p: jax.Array, x: PyTree, y: jax.Array) -> jax.Array:
        return self.model(x, p) - y


@dataclasses.dataclass(frozen=True)
class _Whitened:
    """``L^{-1} (f(x, *p) - y)`` with ``L`` the Cholesky factor of the data's
    covariance (scipy's 2-D ``sigma``): the residuals of a generalized least squares."""

    model: Model

    def __call__(self, p: jax.Array, x: PyTree, y: jax.Array, factor: jax.Array) -> jax.Array:
        residual = self.model(x, p) - y
        return jax.scipy.linalg.solve_triangular(factor, residual, lower=True)


@dataclasses.dataclass(frozen=True)
class _Curve:
    """``f(x, *p)``: the model's expected counts (Poisson)."""

    model: Model

    def __call__(self, p: jax.Array, x: PyTree) -> jax.Array:
        return self.model(x, p)


@dataclasses.dataclass(frozen=True)
class _Pearson:
    """``(f(x, *p) - y) / sqrt(mu)``, ``mu`` held constant: its Jacobian is
    ``J_mu / sqrt(mu)``, so ``J^T J`` is the Poisson Fisher information."""

    model: Model

    def __call__(self, p: jax.Array, x: PyTree, y: jax.Array) -> jax.Array:
        mu = self.model(x, p)
        return (mu - y) / jnp.sqrt(jax.lax.stop_gradient(mu))


class CurveFit(NamedTuple):
    """The full result of :func:`fixedopt.curve_fit` (``full_output=True``).

    Attributes:
      popt: the fitted parameters, ``(k,)`` or ``(B, k)``.
      pcov: their covariance, ``(k, k)`` or ``(B, k, k)``; 0 on fixed parameters.
      perr: the standard errors ``sqrt(diag(pcov))``.
      solution: the :class:`fixedopt.Solution` of the fit: ``status``,
        ``converged``, ``steps``, ``value`` (half the chi-square, or half the
        Poisson deviance) per fit.
      covariance: the :class:`fixedopt.Covariance`: ``rank_deficient``, ``dof``,
        ``residual_variance``, ``at_bound`` (the parameters on a bound) per fit.
    """

    popt: jax.Array
    pcov: jax.Array
    perr: jax.Array
    solution: Solution
    covariance: Covariance


def curve_fit(
    f: ModelFunction,
    xdata: Any,
    ydata: ArrayLike,
    p0: ArrayLike | None = None,
    sigma: ArrayLike | None = None,
    absolute_sigma: bool | None = None,
    check_finite: bool | None = None,
    bounds: Any = (-np.inf, np.inf),
    method: str | None = None,
    jac: Callable[..., Any] | str | None = None,
    *,
    full_output: bool = False,
    nan_policy: str | None = None,
    fixed: Any = None,
    batched: bool = False,
    xdata_per_fit: bool | None = None,
    estimator: str = "least_squares",
    at_bound: str = AT_BOUND_DEFAULT,
    result: bool = False,
    **kwargs: Any,
) -> Any:
    """Fit ``ydata ≈ f(xdata, *params)`` as ``scipy.optimize.curve_fit`` does, keyword
    for keyword, for one curve or a batch of them, with fixed parameters per fit.

    A thin layer over :func:`fixedopt.least_squares` (Levenberg–Marquardt for every
    ``method``) and :func:`fixedopt.covariance`. A fit of a batch that fails (NaN in
    its ``ydata``, a model that turns non-finite) does not raise: its ``status`` says
    so (``result=True``), its ``popt`` is its last finite iterate and its ``pcov`` is
    NaN. The differences from scipy, each with its reason, are in ``docs/scipy.md``.

    Args:
      f: ``f(x, *params) -> array`` shaped like one fit's ``ydata``: ONE curve, with
        ``params`` scalars (scipy's convention); written with ``jax.numpy`` (JAX traces
        it: a NumPy-only ``f`` is a ``TypeError`` naming it).
      xdata: the independent variable, an array (or a tree of arrays, or None) that
        ``f`` receives as it is: shared by every fit, or with ``batched=True`` one per
        fit (leading batch axis; see ``xdata_per_fit``).
      ydata: the data, ``(m,)`` (any shape ``f`` returns; a scalar is broadcast to it,
        as in scipy), ``(B, m)`` batched. With ``estimator="poisson"``, the counts.
      p0: the start, ``(k,)`` or a scalar (``(B, k)`` batched). None (the default): as
        scipy, ``k`` from ``f``'s signature and every entry 1 (the middle of two finite
        bounds, 1 inside a single one). A start outside ``bounds`` is a ``ValueError``
        (a traced one stops its row with ``Status.INFEASIBLE``).
      sigma: the uncertainty of ``ydata``: a standard deviation per value
        (broadcastable to ``ydata``: a scalar, ``(m,)``, or ``(B, m)``), or the data's
        covariance matrix ``(m, m)`` (``(B, m, m)`` batched), as in scipy.
      absolute_sigma: as in ``curve_fit``: ``sigma`` is absolute, ``pcov`` is not
        rescaled by the reduced chi-square ``s^2``. ``None`` (the default): ``False``
        for least squares (scipy's default), ``True`` for ``estimator="poisson"``.
      check_finite: refuse NaN or inf in ``xdata``/``ydata`` (a ``ValueError``).
        None: True when ``nan_policy`` is None, as in scipy; False with
        ``batched=True``, where a fit with NaN data reports it and the others run.
      bounds: ``(lower, upper)``, scalars or ``(k,)`` arrays (``(B, k)`` per fit),
        ``-inf``/``inf`` allowed, or a ``scipy.optimize.Bounds``.
      method: ``"lm"``, ``"trf"`` or ``"dogbox"``; None: ``"lm"`` without bounds,
        ``"trf"`` with them (scipy's rule; ``"lm"`` refuses bounds). Each runs
        Levenberg–Marquardt; ``"lm"`` gives a rank-deficient fit an ``inf`` pcov
        (``leastsq``'s convention), the others the pseudo-inverse (``least_squares``').
      jac: ``jac(x, *params) -> (m, k)``, the model's Jacobian (traceable by JAX), or
        None or one of scipy's finite-difference schemes (``"2-point"``, ``"3-point"``,
        ``"cs"``): the exact derivative by JAX.
      full_output: return scipy's ``(popt, pcov, infodict, mesg, ier)``: ``infodict``
        with ``nfev`` and ``fvec`` (and with ``"lm"``: ``fjac``, ``ipvt``, ``qtf``), per
        fit; ``mesg`` and ``ier`` per fit (a list and an array in a batch).
      nan_policy: None, ``"raise"`` or ``"omit"`` (scipy's; ``"omit"`` leaves out each
        point whose ``ydata`` or ``xdata`` is NaN, per fit in a batch).
      fixed: the fixed parameters, a boolean ``(k,)`` or ``(B, k)`` mask (per fit);
        a fixed parameter keeps its value from ``p0``, bit-identical, and gets 0
        variance. A new mask never recompiles.
      batched: fit one curve per row of ``ydata`` and ``p0``; each converges and
        reports on its own.
      xdata_per_fit: with ``batched=True``, whether ``xdata`` has a leading batch
        axis (one x per fit). ``None`` (the default) decides by calling ``f`` on
        shapes: the reading whose curve is shaped like one fit's ``ydata``.
      estimator: ``"least_squares"`` (Gaussian noise) or ``"poisson"`` (counting
        data, maximum likelihood: ``f`` returns the expected counts, positive;
        see :func:`fixedopt.least_squares`).
      at_bound: how a bound-active parameter enters ``pcov``: ``"free"`` (as in
        ``curve_fit``) or ``"fixed"`` (0 variance, the other errors conditional on the
        bound); see :func:`fixedopt.covariance`.
      result: return ``(popt, pcov, result)`` with a :class:`fixedopt.CurveFit`: the
        statuses, the covariance's flags, the standard errors.
      **kwargs: scipy's solver keywords: ``maxfev`` or ``max_nfev`` (the iteration
        limit: one evaluation of the residuals and their Jacobian per iteration),
        ``ftol``, ``xtol``, ``gtol``, ``loss``, ``f_scale``, ``x_scale="jac"``, and
        ``epsfcn``/``diff_step`` (no effect: no finite differences); and any option of
        :func:`fixedopt.least_squares` (``solver``, ``max_steps``, ``progress``, ...).

    Returns:
      ``(popt, pcov)``; with ``full_output=True`` scipy's 5-tuple; with
      ``result=True``, ``(popt, pcov, CurveFit)``.

    Example:
      >>> import jax.numpy as jnp
      >>> import fixedopt
      >>> decay = lambda t, a, rate, c: a * jnp.exp(-rate * t) + c
      >>> t = jnp.linspace(0.0, 3.0, 30)
      >>> y = jnp.stack([decay(t, 2.0, 1.5, 0.1), decay(t, 1.0, 0.5, 0.3)])
      >>> p0 = jnp.array([[1.0, 1.0, 0.1], [1.0, 1.0, 0.0]])
      >>> fixed = jnp.array([[False, False, True], [False, False, False]])
      >>> popt, pcov = fixedopt.curve_fit(decay, t, y, p0, fixed=fixed, batched=True)
      >>> print(popt.round(6))
      [[2.  1.5 0.1]
       [1.  0.5 0.3]]
    """
    f = hashable_function(f, "f")
    options = solve_keywords(kwargs, least_squares_keywords(least_squares))
    if options.get("vectorized"):
        raise ValueError(
            "`vectorized=True`: curve_fit calls `f` for one fit at a time (its error bars "
            "too); write `f` for one fit, or call fixedopt.least_squares(..., vectorized=True)"
        )
    one_of("estimator", estimator, ESTIMATORS)
    one_of("at_bound", at_bound, AT_BOUND)
    inputs = {"xdata": xdata, "ydata": ydata, "p0": p0, "sigma": sigma, "bounds": bounds}
    warn_if_float64_dropped(inputs)
    check_finite, nan_policy = data_policy(check_finite, nan_policy, batched)
    limits = bound_arrays(bounds)
    method = resolve_method(method, limits is not None, options.get("loss"))
    model = Model(f, jacobian(jac, method))
    fit = _Fit(model, method, batched, estimator == "poisson")
    data = _prepared(fit, xdata, ydata, p0, sigma, limits, check_finite, nan_policy,
                     xdata_per_fit, fixed)  # fmt: skip
    if absolute_sigma is None:
        absolute_sigma = fit.poisson
    absolute_sigma = boolean("absolute_sigma", absolute_sigma)
    residual, solution = _solve(fit, data, limits, options)
    cov = covariance(  # the solution's own mask, bounds and active set
        solution, residual, args=data.args, sigma=data.sigma, absolute_sigma=absolute_sigma,
        at_bound=at_bound, args_axes=data.axes, pseudo_inverse=method != "lm",
    )  # fmt: skip
    popt, pcov = solution.x, cov.covariance
    warn_if_not_estimated(pcov)
    if full_output:
        info = infodict(residual, solution, data.args, data.axes, data.sigma, method)
        ier, mesg = ier_and_message(solution, method)
        return popt, pcov, info, mesg, ier
    if result:
        return popt, pcov, CurveFit(popt, pcov, cov.stderr, solution, cov)
    return popt, pcov


class _Fit(NamedTuple):
    """The static choices of one ``curve_fit`` call."""

    model: Model
    method: str
    batched: bool
    poisson: bool


class _Data(NamedTuple):
    """A fit's data, checked and shaped: what the solve and the covariance read."""

    p0: jax.Array
    args: tuple[Any, ...]  # (xdata, ydata[, cholesky factor])
    axes: Any  # the vmap axes of args (None without a batch)
    sigma: jax.Array | None  # 1-D weights (None for none or a 2-D sigma)
    whitened: bool  # a 2-D sigma: the residuals are whitened by its Cholesky factor
    fixed: Any
    outside: jax.Array | None  # traced starts outside the bounds, per row


def _prepared(
    fit: _Fit, xdata: Any, ydata: ArrayLike, p0: Any, sigma: Any, limits: Any,
    check_finite: bool, nan_policy: str | None, xdata_per_fit: bool | None, fixed: Any,
) -> _Data:  # fmt: skip
    """The data of a fit, checked as scipy checks them and shaped for the solve."""
    y = arrays.numbers(ydata, "ydata")
    if y.size == 0:
        raise ValueError(f"`ydata` must not be empty! Got shape {tuple(y.shape)}")
    p0 = _start(fit.model.f, p0, limits, y, fit.batched)
    p0, y = _parameters_and_data(p0, y, fit.batched)
    xdata = _xdata(xdata)
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
    fixed = False if fixed is None else fixed
    _check_enough_data(p0, fixed, math.prod(shape), fit.batched)
    weights, factor = _weights(sigma, y, fit)
    if nan_policy == "omit" and fit.batched:
        xdata, y, weights = omit_rows(xdata, y, factor if factor is not None else weights, per_fit)
    args = (xdata, y) if factor is None else (xdata, y, factor)
    axes = ((0 if per_fit else None), *(0,) * (len(args) - 1)) if fit.batched else None
    outside = start_outside(p0, limits, fit.batched)
    return _Data(p0, args, axes, weights, factor is not None, fixed, outside)


def _solve(
    fit: _Fit, data: _Data, limits: Any, options: dict[str, Any]
) -> tuple[Callable[..., Any], Solution]:
    """The residual function of the fit and its solution; a row whose traced start
    lies outside its bounds is INFEASIBLE, its start returned."""
    bounds = limits
    common = dict(bounds=bounds, batched=fit.batched, **options)
    if fit.poisson:
        if data.sigma is not None or data.whitened:
            raise ValueError("`sigma` has no effect with estimator='poisson': remove it")
        axes = data.axes[:1] if data.axes else None
        solution = least_squares(
            _Curve(fit.model), data.p0, data.fixed, args=data.args[:1], args_axes=axes,
            estimator="poisson", counts=data.args[1], **common,
        )  # fmt: skip
        residual: Callable[..., Any] = _Pearson(fit.model)
    else:
        residual = _Whitened(fit.model) if data.whitened else _Residual(fit.model)
        solution = least_squares(
            residual, data.p0, data.fixed, args=data.args, args_axes=data.axes,
            sigma=data.sigma, **common,
        )  # fmt: skip
    if data.outside is not None:
        solution = _infeasible_rows(solution, data.p0, data.outside)
    return residual, solution


def _infeasible_rows(solution: Solution, p0: jax.Array, outside: jax.Array) -> Solution:
    """Rows started outside their bounds: INFEASIBLE, ``x`` their start (no solve)."""
    status = jnp.where(outside, Status.INFEASIBLE, solution.status).astype(jnp.int32)
    return solution._replace(
        x=jnp.where(outside[..., None], p0, solution.x),
        status=status,
        reason=jnp.where(outside, Reason.NONE, solution.reason).astype(jnp.int32),
        converged=status == Status.CONVERGED,
    )


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


def _weights(sigma: Any, ydata: jax.Array, fit: _Fit) -> tuple[jax.Array | None, Any]:
    """``(sigma, factor)``: the standard deviations broadcast to ``ydata``, or the
    Cholesky factor of a covariance ``sigma`` (a diagonal one is its standard
    deviations)."""
    if sigma is None:
        return None, None
    array = jnp.asarray(sigma)
    m = ydata.shape[-1] if ydata.ndim else 1
    covariance_shape = (*ydata.shape[:1], m, m) if fit.batched else (m, m)
    if ydata.ndim == (2 if fit.batched else 1) and array.shape == covariance_shape and m > 1:
        return _covariance_factor(array, ydata.dtype)
    return _sigma(array, ydata), None


def _covariance_factor(sigma: jax.Array, dtype: Any) -> tuple[jax.Array | None, Any]:
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
    p0: ArrayLike, ydata: jax.Array, batched: bool
) -> tuple[jax.Array, jax.Array]:
    """``p0`` as a floating-point ``(k,)`` (``(B, k)``) array and ``ydata`` in its dtype."""
    p0 = jnp.asarray(p0)
    if not jnp.issubdtype(p0.dtype, jnp.floating):
        p0 = p0.astype(jnp.result_type(float))
    if p0.ndim != (2 if batched else 1) or p0.shape[-1] == 0:
        expected = "(B, k), one row per fit" if batched else "(k,)"
        raise ValueError(f"`p0` must have shape {expected} with k >= 1, got {tuple(p0.shape)}")
    if not (jnp.issubdtype(ydata.dtype, jnp.floating) or jnp.issubdtype(ydata.dtype, jnp.integer)):
        raise TypeError(f"`ydata` must be a real array, got dtype {ydata.dtype}")
    if batched and (ydata.ndim < 2 or ydata.shape[0] != p0.shape[0]):
        raise ValueError(
            f"`ydata` must have the leading batch axis of `p0` ({p0.shape[0]} fits) and "
            f"one fit's data after it, got shape {tuple(ydata.shape)}"
        )
    return p0, ydata.astype(p0.dtype)


def _xdata_per_fit(
    model: Model, xdata: PyTree, ydata: jax.Array, p0: jax.Array, batched: bool, given: bool | None
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
    if not matches:  # the mistake, named: f's failure or its shape under the shared reading
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
    model: Model, x: PyTree, p: jax.Array | jax.ShapeDtypeStruct
) -> tuple[int, ...] | None:
    """The shape of the curve under a reading of ``xdata``, None if ``f`` fails on it."""
    try:
        out = jax.eval_shape(model, x, p)
    except Exception:  # a reading that f cannot take
        return None
    return tuple(out.shape)


def _sigma(sigma: jax.Array, ydata: jax.Array) -> jax.Array:
    """``sigma`` broadcast to ``ydata``'s shape, in its dtype."""
    try:
        return jnp.broadcast_to(sigma, ydata.shape).astype(ydata.dtype)
    except ValueError:
        raise ValueError(
            f"`sigma` has incorrect shape {tuple(sigma.shape)}: it must broadcast to "
            f"`ydata`'s shape {tuple(ydata.shape)} (one standard deviation per value) or be "
            "the covariance matrix of one fit's ydata, (m, m) (batched: (B, m, m))"
        ) from None
