"""``curve_fit``: ``scipy.optimize.curve_fit``'s call, batched, with fixed parameters
per fit and a Poisson likelihood; a thin layer over ``least_squares`` and
``covariance``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from fixedopt._entry.minimize import least_squares
from fixedopt._inputs.checks import boolean, one_of
from fixedopt._inputs.validate import PyTree
from fixedopt._objective.arguments import hashable_function
from fixedopt._objective.fit_data import ESTIMATORS
from fixedopt._results.covariance import AT_BOUND, AT_BOUND_DEFAULT, Covariance, covariance
from fixedopt._results.solution import Solution

Model = Callable[..., Any]  # f(x, *params) -> the curve (one fit)


@dataclasses.dataclass(frozen=True)
class _Residual:
    """``f(x, *p) - y``: the residuals of one fit (hashed by ``f``)."""

    f: Model

    def __call__(self, p: jax.Array, x: PyTree, y: jax.Array) -> jax.Array:
        return jnp.asarray(self.f(x, *p)) - y


@dataclasses.dataclass(frozen=True)
class _Curve:
    """``f(x, *p)``: the model's expected counts (Poisson)."""

    f: Model

    def __call__(self, p: jax.Array, x: PyTree) -> jax.Array:
        return jnp.asarray(self.f(x, *p))


@dataclasses.dataclass(frozen=True)
class _Pearson:
    """``(f(x, *p) - y) / sqrt(mu)``, ``mu`` held constant: its Jacobian is
    ``J_mu / sqrt(mu)``, so ``J^T J`` is the Poisson Fisher information."""

    f: Model

    def __call__(self, p: jax.Array, x: PyTree, y: jax.Array) -> jax.Array:
        mu = jnp.asarray(self.f(x, *p))
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
    f: Model,
    xdata: Any,
    ydata: ArrayLike,
    p0: ArrayLike,
    sigma: ArrayLike | None = None,
    absolute_sigma: bool | None = None,
    bounds: Any = (-np.inf, np.inf),
    *,
    fixed: Any = None,
    batched: bool = False,
    xdata_per_fit: bool | None = None,
    estimator: str = "least_squares",
    at_bound: str = AT_BOUND_DEFAULT,
    full_output: bool = False,
    **options: Any,
) -> tuple[jax.Array, jax.Array] | tuple[jax.Array, jax.Array, CurveFit]:
    """Fit ``ydata ≈ f(xdata, *params)`` as ``scipy.optimize.curve_fit`` does, for one
    curve or a batch of them, with fixed parameters per fit.

    A thin layer over :func:`fixedopt.least_squares` (Levenberg–Marquardt by default)
    and :func:`fixedopt.covariance`. A fit that fails (NaN in its ``ydata``, a model
    that turns non-finite) does not raise: its ``status`` says so (``full_output``),
    its ``popt`` is its last finite iterate and its ``pcov`` is NaN.

    Args:
      f: ``f(x, *params) -> array`` shaped like one fit's ``ydata``: ONE curve, with
        ``params`` scalars (scipy's convention); traceable by JAX.
      xdata: the independent variable, an array (or a tree of arrays) that ``f``
        receives as it is: shared by every fit, or with ``batched=True`` one per fit
        (leading batch axis; see ``xdata_per_fit``).
      ydata: the data, ``(m,)`` (any shape ``f`` returns), ``(B, m)`` batched. With
        ``estimator="poisson"``, the counts.
      p0: the start, ``(k,)``, or ``(B, k)`` batched. Required (``k`` comes from it).
      sigma: the standard deviation of each ``ydata`` value, broadcastable to
        ``ydata`` (``(m,)`` shared by every fit, or ``(B, m)``); positive. The fit
        minimizes the chi-square ``sum(((f - y) / sigma)**2)``. A 2-D covariance
        ``sigma`` is not supported.
      absolute_sigma: as in ``curve_fit``: ``sigma`` is absolute, ``pcov`` is not
        rescaled by the reduced chi-square ``s^2``. ``None`` (the default): ``False``
        for least squares (scipy's default), ``True`` for ``estimator="poisson"``
        (its ``pcov`` is the inverse Fisher information; ``False`` rescales it by
        the Pearson chi-square over ``dof``, for overdispersed counts).
      bounds: ``(lower, upper)``, scalars or ``(k,)`` arrays (``(B, k)`` per fit),
        ``-inf``/``inf`` allowed, or a ``scipy.optimize.Bounds``.
      fixed: the fixed parameters, a boolean ``(k,)`` or ``(B, k)`` mask (per fit);
        a fixed parameter keeps its value from ``p0``, bit-identical, and gets 0
        variance. A new mask never recompiles.
      batched: fit one curve per row of ``ydata`` and ``p0``; each converges and
        reports on its own.
      xdata_per_fit: with ``batched=True``, whether ``xdata`` has a leading batch
        axis (one x per fit). ``None`` (the default) decides by calling ``f`` on
        shapes: the reading whose curve is shaped like one fit's ``ydata`` (raises
        when both or neither are).
      estimator: ``"least_squares"`` (Gaussian noise) or ``"poisson"`` (counting
        data, maximum likelihood: ``f`` returns the expected counts, positive;
        see :func:`fixedopt.least_squares`).
      at_bound: how a bound-active parameter (on a bound that the gradient pushes
        against) enters ``pcov``: ``"free"`` (as in ``curve_fit``: it keeps its
        variance and its correlations) or ``"fixed"`` (0 variance, the other errors
        conditional on the bound); see :func:`fixedopt.covariance`. Flagged per fit in
        ``covariance.at_bound``.
      full_output: also return a :class:`fixedopt.CurveFit` with the statuses
        (unlike scipy's ``full_output``, whose 5-tuple it replaces).
      **options: any other keyword of :func:`fixedopt.least_squares` (``solver``,
        ``gtol``, ``xtol``, ``ftol``, ``max_steps``, ``loss``, ``progress``, ...).

    Returns:
      ``(popt, pcov)``, or ``(popt, pcov, result)`` with ``full_output=True``.

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
    if options.get("vectorized"):
        raise ValueError(
            "`vectorized=True`: curve_fit calls `f` for one fit at a time (its error bars "
            "too); write `f` for one fit, or call fixedopt.least_squares(..., vectorized=True)"
        )
    one_of("estimator", estimator, ESTIMATORS)
    one_of("at_bound", at_bound, AT_BOUND)
    p0, ydata = _parameters_and_data(p0, ydata, batched)
    xdata = _xdata(xdata)
    per_fit = _xdata_per_fit(f, xdata, ydata, p0, batched, xdata_per_fit)
    x_axis = 0 if per_fit else None
    fixed = False if fixed is None else fixed
    bounds = _bounds(bounds)
    poisson = estimator == "poisson"
    if absolute_sigma is None:
        absolute_sigma = poisson
    absolute_sigma = boolean("absolute_sigma", absolute_sigma)
    if sigma is not None:
        sigma = _sigma(sigma, ydata)
    axes = (x_axis, 0) if batched else None
    if poisson:
        if sigma is not None:
            raise ValueError("`sigma` has no effect with estimator='poisson': remove it")
        solution = least_squares(
            _Curve(f), p0, fixed, args=(xdata,), bounds=bounds, batched=batched,
            args_axes=axes[:1] if axes else None, estimator="poisson", counts=ydata, **options,
        )  # fmt: skip
        residual: Callable[..., Any] = _Pearson(f)
    else:
        residual = _Residual(f)
        solution = least_squares(
            residual, p0, fixed, args=(xdata, ydata), bounds=bounds, batched=batched,
            args_axes=axes, sigma=sigma, **options,
        )  # fmt: skip
    cov = covariance(  # the solution's own mask, bounds and active set
        solution, residual, args=(xdata, ydata), sigma=sigma, absolute_sigma=absolute_sigma,
        at_bound=at_bound, args_axes=axes,
    )  # fmt: skip
    popt, pcov = solution.x, cov.covariance
    if not full_output:
        return popt, pcov
    return popt, pcov, CurveFit(popt, pcov, cov.stderr, solution, cov)


def _parameters_and_data(
    p0: ArrayLike, ydata: ArrayLike, batched: bool
) -> tuple[jax.Array, jax.Array]:
    """``p0`` as a floating-point ``(k,)`` (``(B, k)``) array and ``ydata`` in its dtype."""
    p0 = jnp.asarray(p0)
    if not jnp.issubdtype(p0.dtype, jnp.floating):
        p0 = p0.astype(jnp.result_type(float))
    if p0.ndim != (2 if batched else 1) or p0.shape[-1] == 0:
        expected = "(B, k), one row per fit" if batched else "(k,)"
        raise ValueError(f"`p0` must have shape {expected} with k >= 1, got {tuple(p0.shape)}")
    ydata = jnp.asarray(ydata)
    if not (jnp.issubdtype(ydata.dtype, jnp.floating) or jnp.issubdtype(ydata.dtype, jnp.integer)):
        raise TypeError(f"`ydata` must be a real array, got dtype {ydata.dtype}")
    if batched and (ydata.ndim < 2 or ydata.shape[0] != p0.shape[0]):
        raise ValueError(
            f"`ydata` must have the leading batch axis of `p0` ({p0.shape[0]} fits) and "
            f"one fit's data after it, got shape {tuple(ydata.shape)}"
        )
    return p0, ydata.astype(p0.dtype)


def _xdata_per_fit(
    f: Model, xdata: PyTree, ydata: jax.Array, p0: jax.Array, batched: bool, given: bool | None
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
    readings = {False: xdata, True: jax.tree.map(lambda a: a[0], xdata) if could else None}
    matches = [per_fit for per_fit, x in readings.items() if x is not None]
    matches = [per_fit for per_fit in matches if _curve_shape(f, readings[per_fit], p0[0]) == one_y]
    if len(matches) != 1:
        what = "both readings" if matches else "neither reading"
        raise ValueError(
            f"`xdata` (shapes {[tuple(a.shape) for a in leaves]}): {what} (shared by every "
            f"fit, or one per fit) makes `f` return one fit's shape {one_y}; say which "
            "with xdata_per_fit=True or False"
        )
    return matches[0]


def _xdata(xdata: Any) -> PyTree:
    """``xdata`` as arrays: a list or tuple of numbers (or of equal-shape arrays) is one
    array, as NumPy reads it; any other tree keeps its structure."""
    if isinstance(xdata, (list, tuple)):
        try:
            return jnp.asarray(xdata)
        except (TypeError, ValueError):
            pass  # arrays of different shapes: a tree
    return jax.tree.map(jnp.asarray, xdata)


def _curve_shape(f: Model, x: PyTree, p: jax.Array) -> tuple[int, ...] | None:
    try:
        out = jax.eval_shape(lambda x, p: jnp.asarray(f(x, *p)), x, p)
    except Exception:  # a reading that f cannot take
        return None
    return tuple(out.shape)


def _bounds(bounds: Any) -> Any:
    """``None`` for scipy's default ``(-inf, inf)`` (no bounds: the faster program)."""
    if isinstance(bounds, tuple) and len(bounds) == 2:
        lower, upper = bounds
        unbounded = np.ndim(lower) == 0 and np.ndim(upper) == 0
        if unbounded and _is_inf(lower, -1) and _is_inf(upper, 1):
            return None
    return bounds


def _is_inf(value: Any, sign: int) -> bool:
    try:
        return bool(np.asarray(value) == sign * np.inf)
    except (TypeError, jax.errors.TracerArrayConversionError):
        return False


def _sigma(sigma: ArrayLike, ydata: jax.Array) -> jax.Array:
    """``sigma`` broadcast to ``ydata``'s shape, in its dtype."""
    array = jnp.asarray(sigma)
    try:
        return jnp.broadcast_to(array, ydata.shape).astype(ydata.dtype)
    except ValueError:
        raise ValueError(
            f"`sigma` must broadcast to `ydata`'s shape {tuple(ydata.shape)} (one standard "
            f"deviation per value; a 2-D covariance matrix is not supported), got shape "
            f"{tuple(array.shape)}"
        ) from None
