"""``curve_fit``: ``scipy.optimize.curve_fit``'s call, batched, with fixed parameters
per fit and a Poisson likelihood; a thin layer over ``least_squares`` and
``covariance``."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from fixedopt._contract.status import Reason, Status
from fixedopt._driver import ahead, cache, machine
from fixedopt._entry.covariance import covariance_ahead
from fixedopt._entry.fit_inputs import Data, Fit, ModelFunction, prepared
from fixedopt._entry.fit_keywords import (
    bound_arrays,
    jacobian,
    least_squares_keywords,
    resolve_method,
    solve_keywords,
)
from fixedopt._entry.fit_nan import data_policy
from fixedopt._entry.fit_output import (
    ier_and_message,
    infodict,
    warn_if_not_estimated,
)
from fixedopt._entry.host_model import runnable
from fixedopt._entry.minimize import least_squares, solved_least_squares
from fixedopt._entry.model import CurveFunction
from fixedopt._inputs.checks import boolean, one_of
from fixedopt._inputs.notices import warn_if_float64_dropped
from fixedopt._inputs.validate import PyTree
from fixedopt._numerics import backends
from fixedopt._objective.arguments import hashable_function
from fixedopt._objective.call_note import Passed
from fixedopt._objective.fit_data import ESTIMATORS
from fixedopt._results import solver_covariance
from fixedopt._results.covariance import AT_BOUND, AT_BOUND_DEFAULT, Covariance
from fixedopt._results.solution import Solution

# what a message about the solve's function names: the user passed `f`, and a value
# to differentiate reaches it through `xdata` (curve_fit has no `args`)
_F = Passed("f", "`xdata` (a tuple such as `(x, c)` that `f` unpacks: `f(xdata, *params)`)")


@dataclasses.dataclass(frozen=True)
class _CurveResidual:
    """``f(x, *p) - y``: the residuals of one fit (hashed by the model)."""

    model: CurveFunction
    passed: ClassVar[Passed] = _F

    def __call__(self, p: jax.Array, x: PyTree, y: jax.Array) -> jax.Array:
        return self.model(x, p) - y


@dataclasses.dataclass(frozen=True)
class _Whitened:
    """``L^{-1} (f(x, *p) - y)`` with ``L`` the Cholesky factor of the data's
    covariance (scipy's 2-D ``sigma``): the residuals of a generalized least squares."""

    model: CurveFunction
    passed: ClassVar[Passed] = _F

    def __call__(self, p: jax.Array, x: PyTree, y: jax.Array, factor: jax.Array) -> jax.Array:
        residual = self.model(x, p) - y
        return jax.scipy.linalg.solve_triangular(factor, residual, lower=True)


@dataclasses.dataclass(frozen=True)
class _Curve:
    """``f(x, *p)``: the model's expected counts (Poisson)."""

    model: CurveFunction
    passed: ClassVar[Passed] = _F

    def __call__(self, p: jax.Array, x: PyTree) -> jax.Array:
        return self.model(x, p)


@dataclasses.dataclass(frozen=True)
class _Pearson:
    """``(f(x, *p) - y) / sqrt(mu)``, ``mu`` held constant: its Jacobian is
    ``J_mu / sqrt(mu)``, so ``J^T J`` is the Poisson Fisher information."""

    model: CurveFunction

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
    nan_unconverged: bool = False,
    **kwargs: Any,
) -> Any:
    """Fit ``ydata ≈ f(xdata, *params)`` as ``scipy.optimize.curve_fit`` does, keyword
    for keyword, for one curve or a batch of them, with fixed parameters per fit.

    A thin layer over :func:`fixedopt.least_squares` (Levenberg–Marquardt for every
    ``method``) and :func:`fixedopt.covariance`. A fit of a batch that fails (NaN in
    its ``ydata``, a model that turns non-finite) does not raise: its ``status`` says
    so (``result=True``), its ``popt`` is its last finite iterate (NaN with
    ``nan_unconverged=True``) and its ``pcov`` is NaN. The differences from scipy,
    each with its reason, are in ``docs/scipy.md``.

    Args:
      f: ``f(x, *params) -> array`` shaped like one fit's ``ydata``: ONE curve, with
        ``params`` scalars (scipy's convention); written with ``jax.numpy``, JAX traces
        it (compiled, exact derivatives). One JAX cannot trace (NumPy calls, a Python
        ``if`` on a parameter, state kept between calls) runs on the host through
        ``jax.pure_callback``, as scipy calls it, with scipy's finite differences
        (``fixedopt.HostFunctionWarning``, once).
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
      jac: ``jac(x, *params) -> (m, k)``, the model's Jacobian (a NumPy one runs on
        the host), or None or one of scipy's finite-difference schemes (``"2-point"``,
        ``"3-point"``, ``"cs"``): the exact derivative by JAX for a traceable ``f``,
        that scheme (None: ``"2-point"``) for one run on the host.
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
      nan_unconverged: return NaN in ``popt`` (the free parameters), ``pcov`` and
        ``perr`` of every fit that did not converge (``status != CONVERGED``: the
        iteration limit, a NaN wall, a start outside traced bounds), for maps where
        a last iterate would look like a value; fixed parameters keep theirs.
        ``False`` (the default): its last iterate, as scipy.
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
    if full_output and result:  # scipy's tests pass full_output=1
        raise ValueError(
            "give one of full_output=True (scipy's 5-tuple) and result=True "
            "((popt, pcov, CurveFit)): the CurveFit holds the solution's statuses and "
            "steps that full_output's infodict, mesg and ier describe"
        )
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
    model = CurveFunction(f, jacobian(jac, method))
    scheme = jac if isinstance(jac, str) else "2-point"
    model = runnable(model, scheme, xdata, p0, limits, batched)  # on the host if untraceable
    fit = Fit(model, method, batched, estimator == "poisson")
    data = prepared(fit, xdata, ydata, p0, sigma, limits, check_finite, nan_policy,
                    xdata_per_fit, fixed)  # fmt: skip
    if absolute_sigma is None:
        absolute_sigma = fit.poisson
    absolute_sigma = boolean("absolute_sigma", absolute_sigma)
    covariance: dict[str, Any] = dict(absolute_sigma=absolute_sigma, at_bound=at_bound,
                                      pseudo_inverse=method != "lm")  # fmt: skip
    early = _covariance_ahead(fit, data, limits, options, covariance)
    residual, solution = _solve(fit, data, limits, options, early)
    if boolean("nan_unconverged", nan_unconverged):  # before the covariance: NaN too
        solution = solution.unconverged_as_nan()
    ahead.wait_for(early and early[0])
    with machine.covariance_precision():
        cov = solver_covariance.fit_covariance(  # the solution's mask, bounds, active set
            solution, residual, args=data.args, sigma=data.sigma, args_axes=data.axes,
            on_device=machine.covariance_on_device(), **covariance,
        )  # fmt: skip
    solution = solution._replace(normal=None)  # the solver's J^T J: the covariance's only
    popt, pcov = solution.x, cov.covariance
    warn_if_not_estimated(pcov)
    if full_output:
        info = infodict(residual, solution, data.args, data.axes, data.sigma, method)
        ier, mesg = ier_and_message(solution, method)
        return popt, pcov, info, mesg, ier
    if result:
        return popt, pcov, CurveFit(popt, pcov, cov.stderr, solution, cov)
    return popt, pcov


def _solve(
    fit: Fit, data: Data, limits: Any, options: dict[str, Any], early: Any = None
) -> tuple[Callable[..., Any], Solution]:
    """The residual function of the fit and its solution; a row whose traced start
    lies outside its bounds is INFEASIBLE, its start returned. ``early``: the
    covariance program to compile ahead once the arguments are checked
    (:func:`_covariance_ahead`)."""
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
        residual = _residual(fit, data)
        # The solver's J^T J at x, for the covariance (solver_covariance), where it pays.
        normal = _normal_here(fit, data)
        checked = None if early is None else functools.partial(ahead.soon, *early)
        solution = solved_least_squares(
            normal, residual, data.p0, data.fixed, args=data.args, args_axes=data.axes,
            sigma=data.sigma, checked=checked, **common,
        )  # fmt: skip
    if data.outside is not None:
        solution = _infeasible_rows(solution, data.p0, data.outside)
    return residual, solution


def _normal_here(fit: Fit, data: Data) -> bool:
    """Whether the fit's solve reports its normal matrix for the covariance
    (:mod:`fixedopt._results.solver_covariance`): this machine's choice, and a small
    float64 block."""
    here = backends.defaults().normal_covariance
    return here and solver_covariance.pays(jnp.result_type(data.p0), jnp.shape(data.p0)[-1])


def _residual(fit: Fit, data: Data) -> Callable[..., Any]:
    """The residual function of a least-squares fit (not Poisson): its solve's and its
    covariance's."""
    return _Whitened(fit.model) if data.whitened else _CurveResidual(fit.model)


def _covariance_ahead(
    fit: Fit, data: Data, limits: Any, options: dict[str, Any], covariance: dict[str, Any]
) -> Any:
    """The covariance program of a batched least-squares fit, as ``(key, lower)`` for
    ``ahead.soon`` once the solve's arguments are checked: traced and lowered there,
    its XLA compile in fixedopt's thread while the caller traces and compiles the
    solve. Where the solve reports its normal matrix (a plain loss, the mask
    strategy), the program that inverts it, which reads nothing of the model
    (``docs/decisions.md``, "The covariance compiled from the call's start"); else,
    where the machine profile says so, the device path's, which evaluates the model's
    Jacobian (:func:`fixedopt._entry.covariance.covariance_ahead`, ``Model.fit``'s
    too). None where there is none to compile."""
    if fit.poisson or not fit.batched:
        return None
    plain = options.get("loss") in (None, "linear") and options.get("strategy") != "split"
    if plain and _normal_here(fit, data):
        # as the solve's first call would: the program's name reads it, and its compile the
        # persistent cache (a new process reads it there)
        cache.use_default_cache()
        return solver_covariance.early(data.p0, limits is not None, **covariance)
    return covariance_ahead(_residual(fit, data), data.p0, limits is not None, data.sigma,
                            data.args, data.axes, **covariance)  # fmt: skip


def _infeasible_rows(solution: Solution, p0: jax.Array, outside: jax.Array) -> Solution:
    """Rows started outside their bounds: INFEASIBLE, ``x`` their start (no solve);
    rows left out by ``where`` stay SKIPPED."""
    outside = outside & (solution.status != Status.SKIPPED)
    status = jnp.where(outside, Status.INFEASIBLE, solution.status).astype(jnp.int32)
    return solution._replace(
        x=jnp.where(outside[..., None], p0, solution.x),
        status=status,
        reason=jnp.where(outside, Reason.NONE, solution.reason).astype(jnp.int32),
        converged=status == Status.CONVERGED,
    )
