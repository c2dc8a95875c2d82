"""``Model.fit``: a batch of fits of a model with named parameters, as ONE call of
:func:`fixedopt.least_squares` (the same solvers, statuses, lanes and Poisson estimator)
and :func:`fixedopt.covariance`; ties and derived parameters get their errors by
propagating the covariance through their expressions (``J C J^T``)."""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Mapping
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._driver import ahead, machine
from fixedopt._entry.covariance import covariance_ahead
from fixedopt._entry.fit_output import warn_if_not_estimated
from fixedopt._entry.minimize import least_squares, solved_least_squares
from fixedopt._inputs import arrays as host_arrays
from fixedopt._inputs.notices import warn_if_float64_dropped
from fixedopt._models import curves
from fixedopt._models.confidence import FitProblem
from fixedopt._models.layout import Arrays, Layout, arrays, initial_values, layout
from fixedopt._models.nan import apply_nan_policy, too_few_points
from fixedopt._models.parameters import Parameters, traced
from fixedopt._models.result import ModelResult
from fixedopt._results.covariance import AT_BOUND_DEFAULT, covariance_and


class Fittable(Protocol):
    """What a fit reads of a :class:`fixedopt.models.Model` (``Model.fit`` calls
    :func:`fit` with itself: this module does not import the model's)."""

    @property
    def param_names(self) -> tuple[str, ...]: ...

    @property
    def independent_vars(self) -> tuple[str, ...]: ...

    def curve(self, values: Mapping[str, Any], independent: Mapping[str, Any]) -> jax.Array: ...

    def make_params(self, **values: Any) -> Parameters: ...


@dataclasses.dataclass(frozen=True)
class _Residual:
    """``(model - data) * weights`` of ONE fit, from its vector ``p`` (lmfit's sign and
    weights); for a Poisson fit, the Pearson residual ``(mu - data) / sqrt(mu)``, ``mu``
    held constant, whose ``J^T J`` is the Fisher information. Hashed by the model and the
    layout: a new batch of the same shapes and names reuses the compiled solve."""

    model: Fittable
    plan: Layout
    independent: tuple[str, ...]
    weighted: bool
    tied: bool  # per-fit ties: the tie codes are an argument
    poisson: bool = False

    def curve(self, p: jax.Array, x: tuple[jax.Array, ...], codes: jax.Array | None) -> jax.Array:
        values = self.plan.values(p, codes, self.plan.required(self.model.param_names))
        return self.model.curve(values, dict(zip(self.independent, x)))

    def __call__(self, p: jax.Array, x: Any, data: jax.Array, *extra: jax.Array) -> jax.Array:
        weights, codes = self.unpack(extra)
        return self.of_curve(self.curve(p, x, codes), data, weights)

    def of_curve(self, mu: jax.Array, data: jax.Array, weights: jax.Array | None) -> jax.Array:
        """The residual of the curve ``mu`` (one fit, or a batch of them)."""
        if self.poisson:
            return (mu - data) / jnp.sqrt(jax.lax.stop_gradient(mu))
        return (mu - data) if weights is None else (mu - data) * weights

    def unpack(self, extra: tuple[jax.Array, ...]) -> tuple[jax.Array | None, jax.Array | None]:
        """``(weights, codes)`` from the ``args`` after the data (those present)."""
        given = iter(extra)
        weights = next(given) if self.weighted else None
        return weights, (next(given) if self.tied else None)


@dataclasses.dataclass(frozen=True)
class _Expected:
    """The expected counts ``mu`` of ONE fit, for ``least_squares(estimator="poisson")``
    (which holds the counts itself)."""

    residual: _Residual

    def __call__(self, p: jax.Array, x: Any, *extra: jax.Array) -> jax.Array:
        return self.residual.curve(p, x, self.residual.unpack(extra)[1])


def _fit_dtype(*given: Any) -> Any:
    """The dtype of the fit: JAX's promotion of the floating dtypes of the data, the
    independent variables and the weights (as ``curve_fit``'s; float32 data with float64
    ``x`` fits in float64 where 64-bit mode is on), the default float where none is."""
    kinds = [_dtype_of(a) for a in given]
    floats = [kind for kind in kinds if kind is not None and jnp.issubdtype(kind, jnp.floating)]
    if not floats:
        return jnp.result_type(float)
    return jax.dtypes.canonicalize_dtype(functools.reduce(jnp.promote_types, floats))


def _dtype_of(value: Any) -> Any:
    """``value``'s dtype (as NumPy reads a list), or None for a Python number (weak, as
    in JAX: ``weights=0.5`` keeps float32 data float32) or what is not an array (the
    argument's own check names it later)."""
    if isinstance(value, int | float):
        return None
    if hasattr(value, "dtype"):
        return value.dtype
    try:
        return np.asarray(value).dtype
    except (TypeError, ValueError):
        return None


def _data(data: Any, independent: dict[str, Any], weights: Any) -> jax.Array:
    """``data`` as a floating ``(B, m)`` array (a single fit is a batch of one) of the
    fit's dtype (:func:`_fit_dtype`); complex data is refused (its imaginary part would
    be dropped: no complex models here)."""
    array = host_arrays.numbers(data, "data")
    if jnp.issubdtype(array.dtype, jnp.complexfloating):
        raise TypeError(
            f"`data` must be real numbers, got {array.dtype}: fit the real and imaginary "
            "parts as two rows or two models (complex models are not supported)"
        )
    dtype = _fit_dtype(array, *independent.values(), *([] if weights is None else [weights]))
    if array.dtype != dtype:
        array = array.astype(dtype)
    if array.ndim not in (1, 2) or array.shape[-1] == 0 or array.shape[0] == 0:
        raise ValueError(f"`data` must have shape (m,) or (B, m) with B, m >= 1, got {array.shape}")
    return array[None] if array.ndim == 1 else array


def _independent(
    model: Fittable, given: dict[str, Any], data: jax.Array
) -> tuple[tuple[Any, ...], int | None]:
    """The independent variables in the model's order, and their batch axis (0 when
    every one is ``(B, m)``, one per fit; ``None`` when shared)."""
    missing = [v for v in model.independent_vars if v not in given]
    if missing:
        raise TypeError(f"fit needs the independent variables {missing} by keyword")
    xs = tuple(jnp.asarray(given[v], data.dtype) for v in model.independent_vars)
    per_fit = [x.ndim == 2 and x.shape == data.shape for x in xs]
    if any(per_fit) and not all(per_fit):
        raise ValueError("the independent variables must all be shared or all be one per fit")
    return xs, (0 if all(per_fit) else None)


def _check_curve(residual: _Residual, xs: tuple[Any, ...], x_axis: int | None,
                 data: jax.Array, arr: Arrays) -> None:  # fmt: skip
    """A ``ValueError`` naming the independent variables where the model's curve for
    one fit does not have the shape of a row of ``data`` (JAX's broadcasting error
    deep in the solve names neither)."""
    row = tuple(x[0] if x_axis == 0 else x for x in xs)
    codes = None if arr.codes is None else jax.ShapeDtypeStruct(arr.codes.shape[1:], jnp.int32)
    p = jax.ShapeDtypeStruct(arr.p0.shape[1:], data.dtype)
    shape = jax.eval_shape(residual.curve, p, row, codes).shape
    if shape != data.shape[1:]:
        given = ", ".join(
            f"`{v}` {tuple(x.shape)}" for v, x in zip(residual.independent, xs, strict=True)
        )
        raise ValueError(
            f"the model's curve at {given} has shape {shape}, a row of `data` "
            f"{tuple(data.shape[1:])}: the independent variables must be shared, with the "
            f"points of one row ({data.shape[1]}), or one per fit, with `data`'s shape "
            f"{tuple(data.shape)}"
        )


def _weights(weights: Any, data: jax.Array) -> jax.Array | None:
    if weights is None:
        return None
    array = jnp.asarray(weights, data.dtype)
    try:
        return jnp.broadcast_to(array, data.shape)
    except ValueError:
        raise ValueError(
            f"`weights` must broadcast to `data`'s shape {tuple(data.shape)}, got {array.shape}"
        ) from None


def _options(kwargs: dict[str, Any], data: Any, estimator: str) -> None:
    """Take out ``batched`` (lmfit's and fixedopt's word; a fit is always a batch here)
    and refuse the keywords of ``least_squares`` that change what the residual means."""
    batched = kwargs.pop("batched", None)
    if batched is False and np.ndim(data) != 1:
        raise ValueError(f"batched=False fits one curve: `data` must be 1-D, got {np.shape(data)}")
    if not (isinstance(estimator, str) and estimator in ("least_squares", "poisson")):
        raise ValueError(f"`estimator` must be 'least_squares' or 'poisson', got {estimator!r}")
    for name in ("counts", "sigma", "vectorized"):
        if name in kwargs:
            raise ValueError(
                f"`{name}` is not a keyword of Model.fit (weights=1/sigma weight the residual; "
                "with estimator='poisson', `data` are the counts)"
            )


# keywords of least_squares that Model.fit sets itself (from params, data, weights)
_SET_BY_FIT = {"residual_fun", "x0", "fixed", "args", "args_axes", "bounds", "fixed_values"}


def _refuse_unknown(model: Fittable, kwargs: dict[str, Any]) -> None:
    """A ``TypeError`` naming the keywords that are neither an independent variable of
    ``model`` nor a keyword of :func:`fixedopt.least_squares` (a misspelt ``x``)."""
    known = set(inspect.signature(least_squares).parameters) - _SET_BY_FIT
    unknown = sorted(set(kwargs) - known)
    if unknown:
        raise TypeError(
            f"Model.fit got unexpected keywords {unknown}: the independent variables of "
            f"{model!r} are {list(model.independent_vars)}; the other keywords are those "
            "of fixedopt.least_squares but x0, fixed, bounds and args (Model.fit makes them "
            "from `params` and `data`)"
        )


def _refuse_traced(given: dict[str, Any]) -> None:
    """:func:`fixedopt._models.parameters.traced` where an input of the fit is a JAX
    tracer (NumPy's conversion error deep inside named none of this)."""
    for name, value in given.items():
        if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(value)):
            raise traced(f"`{name}`")


def _check_points(plan: Layout, free: np.ndarray, points: int) -> None:
    """A ``ValueError`` where a fit has more free parameters than ``data`` has points
    (as ``curve_fit`` and lmfit's ``leastsq``; it had ended ``success`` at an arbitrary
    solution, its ``redchi`` negative)."""
    counts = free.sum(axis=1)
    if counts.max(initial=0) > points:
        row = int(np.argmax(counts))
        names = [name for name, varies in zip(plan.vector, free[row], strict=True) if varies]
        raise ValueError(
            f"fit {row} has {int(counts[row])} free parameters {names} but `data` has "
            f"{points} points per fit: it has no unique answer; give more points, or fix "
            "parameters in `params` (vary=False)"
        )


def _check_named(model: Fittable, params: Parameters) -> None:
    """A ``ValueError`` naming the model's parameters that ``params`` lacks."""
    missing = [n for n in model.param_names if n not in params]
    if missing:
        raise ValueError(
            f"`params` lack the model's parameters {missing} (it has {list(params)}): add "
            "them (params.add(name, value=...)), or start from model.make_params()"
        )


def fit(model: Fittable, data: Any, params: Parameters | None = None, *, weights: Any = None,
        estimator: str = "least_squares", nan_policy: str = "raise",
        **kwargs: Any) -> ModelResult:  # fmt: skip
    """Fit ``model`` to each row of ``data`` (lmfit's ``Model.fit``, batched).

    Args:
      model: a :class:`fixedopt.models.Model`.
      data: ``(B, m)`` (or ``(m,)``, a batch of one).
      params: :class:`fixedopt.models.Parameters` (each entry shared or one per row);
        by default ``model.make_params()``.
      weights: multiply the residual ``model - data`` (lmfit's convention: ``1/sigma``),
        broadcastable to ``data``.
      estimator: ``"least_squares"``, or ``"poisson"``: ``data`` are counts and the fit
        is Poisson maximum likelihood (:func:`fixedopt.least_squares`'s estimator; no
        ``weights``), its standard errors the inverse Fisher information (unscaled),
        ``chisqr`` Pearson's, ``aic`` and ``bic`` from the deviance.
      nan_policy: lmfit's: ``"raise"`` (NaN in ``data`` or ``weights`` is a
        ``ValueError``), ``"propagate"`` (a fit with a NaN stops with its own status),
        ``"omit"`` (each NaN point is left out of its fit: weight 0, not counted in
        ``ndata``; least squares only).
      **kwargs: the independent variables by name (``x=``, ``(m,)`` shared or
        ``(B, m)`` per row), and any keyword of :func:`fixedopt.least_squares`
        (``solver``, ``max_steps``, ``gtol``, ``ftol``, ``xtol``, ``lanes``, ...).

    Returns:
      A :class:`fixedopt.models.ModelResult`.
    """
    _refuse_traced({"data": data, "weights": weights, **kwargs})
    _options(kwargs, data, estimator)
    poisson = estimator == "poisson"
    given = {v: kwargs.pop(v) for v in model.independent_vars if v in kwargs}
    _refuse_unknown(model, kwargs)
    warn_if_float64_dropped({"data": data, "weights": weights, **given})
    data = _data(data, given, weights)
    xs, x_axis = _independent(model, given, data)
    if params is not None and not isinstance(params, Parameters):
        raise TypeError(f"`params` must be fixedopt.models.Parameters, got {type(params).__name__}")
    params = (params or model.make_params()).copy()
    _check_named(model, params)
    rows = params.rows()
    if rows not in (None, data.shape[0]):
        raise ValueError(f"`params` have {rows} rows (per-fit entries), `data` {data.shape[0]}")
    plan = layout(params, data.shape[0])
    if not plan.vector:
        raise ValueError("every parameter is tied (`expr`): nothing to fit")
    arr = arrays(params, plan, data.shape[0], data.dtype)
    _check_points(plan, ~np.asarray(arr.fixed), data.shape[1])
    w = _weights(weights, data)
    if poisson and w is not None:
        raise ValueError("`weights` have no effect with estimator='poisson': remove them")
    data, w, omitted = apply_nan_policy(nan_policy, data, w, poisson)
    codes = None if arr.codes is None else host_arrays.asarray(arr.codes)
    tied = codes is not None
    residual = _Residual(model, plan, model.independent_vars, w is not None, tied, poisson)
    _check_curve(residual, xs, x_axis, data, arr)
    extra = tuple(a for a in (w, codes) if a is not None)  # no None in args (it shifts args_axes)
    args, axes = (xs, data, *extra), (x_axis, 0, *(0 for _ in extra))
    problem = _problem(residual, args, axes, arr, kwargs)
    sigma = None if omitted is None else jnp.where(omitted, jnp.inf, 1.0)  # dof: kept points
    derived = curves.Computed(plan, residual) if plan.computed else None
    early = covariance_ahead(residual, arr.p0, problem.bounded, sigma, args, axes,
                             absolute_sigma=poisson, at_bound=AT_BOUND_DEFAULT,
                             pseudo_inverse=True, derived=derived)  # fmt: skip
    solve_args, options = problem.solve_inputs()
    solution = solved_least_squares(
        False, problem.fun, host_arrays.asarray(arr.p0), host_arrays.asarray(arr.fixed),
        args=solve_args, checked=early and functools.partial(ahead.soon, *early), **options,
    )  # fmt: skip
    solution = too_few_points(solution, omitted)
    ahead.wait_for(early and early[0])
    with machine.covariance_precision():
        cov, computed = covariance_and(derived, solution, residual, args=args, args_axes=axes,
                                       sigma=sigma, absolute_sigma=poisson,
                                       on_device=machine.covariance_on_device())  # fmt: skip
    warn_if_not_estimated(cov.covariance)
    result = _result(model, params, plan, arr, solution, cov.covariance, computed, problem,
                     omitted)  # fmt: skip
    return dataclasses.replace(result, rank_deficient=np.asarray(cov.rank_deficient))


def _problem(residual: _Residual, args: tuple[Any, ...], axes: tuple[Any, ...], arr: Arrays,
             kwargs: dict[str, Any]) -> FitProblem:  # fmt: skip
    """What ``least_squares`` solves: the residual and its arguments, or for a Poisson
    fit the expected counts, whose arguments lack the counts (the solver holds them)."""
    bounds = (arr.lower, arr.upper, arr.bounded)
    if not residual.poisson:
        return FitProblem(residual, args, axes, residual, args, axes, None, *bounds, kwargs)
    (xs, counts, *extra), (x_axis, _, *extra_axes) = args, axes
    expected, solve_args, solve_axes = _Expected(residual), (xs, *extra), (x_axis, *extra_axes)
    solved = (expected, solve_args, solve_axes, counts)
    return FitProblem(residual, args, axes, *solved, *bounds, kwargs)


def _propagated(plan: Layout, x: np.ndarray, computed: Any,
                pcov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Every parameter's value ``(B, n)`` and their covariance ``J C J^T`` ``(B, n, n)``,
    with ``J`` the unit rows of the fitted parameters and, of the others, the
    derivatives of ``computed`` (``(values, jac)``, ``(B, c)`` and ``(B, c, k)``; None
    where no parameter is computed)."""
    batch, k = x.shape
    if computed is None:
        computed = np.zeros((batch, 0), x.dtype), np.zeros((batch, 0, k), x.dtype)
    computed, jac = (np.asarray(a, x.dtype) for a in computed)
    rows = {name: i for i, name in enumerate(plan.names)}
    fitted = [rows[name] for name in plan.vector]
    others = [rows[name] for name in plan.computed]
    # A name tied in some fits only is both fitted and computed: the computed value
    # and derivative (its own, where it is not tied) are written last.
    values = np.empty((batch, len(plan.names)), x.dtype)
    values[:, fitted] = x
    values[:, others] = computed
    full_jac = np.zeros((batch, len(plan.names), k), x.dtype)
    full_jac[:, fitted, np.arange(k)] = 1.0
    full_jac[:, others] = jac
    # A parameter the data cannot determine (inf variance) makes inf every error that
    # depends on it; 0 * inf is not spread as NaN through the product.
    undetermined = np.isinf(np.diagonal(pcov, axis1=1, axis2=2))
    finite = np.where(np.isinf(pcov), 0.0, pcov)
    propagated = full_jac @ finite @ full_jac.transpose(0, 2, 1)
    depends = np.any((full_jac != 0) & undetermined[:, None, :], axis=2)
    return values, np.where(depends[:, :, None] | depends[:, None, :], np.inf, propagated)


def _result(model: Fittable, params: Parameters, plan: Layout, arr: Arrays, solution: Any,
            pcov: jax.Array, computed: Any, problem: FitProblem,
            omitted: Any) -> ModelResult:  # fmt: skip
    data = problem.args[1]
    x = np.asarray(solution.x)
    values, full = _propagated(plan, x, computed, np.asarray(pcov, x.dtype))
    index = {name: i for i, name in enumerate(plan.names)}
    varying = ~np.asarray(solution.fixed)
    free_names = [[plan.vector[j] for j in np.flatnonzero(row)] for row in varying]
    return ModelResult(
        model=model, init_params=params, names=plan.names, index=index,
        values=values, covariance=full,
        data=np.asarray(data) if omitted is None else np.where(omitted, np.nan, data),
        start=np.asarray(arr.p0, data.dtype), solution=solution, varying=free_names,
        init_values=dict(initial_values(params, data.shape[0])),
        independent=dict(zip(model.independent_vars, (np.asarray(x) for x in problem.args[0]))),
        omitted=None if omitted is None else np.asarray(omitted),
        estimator="poisson" if problem.residual.poisson else "least_squares",
        problem=problem,
    )  # fmt: skip
