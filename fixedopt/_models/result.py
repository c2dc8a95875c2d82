"""``ModelResult``: the batch result of ``Model.fit``, with lmfit's names (``chisqr``,
``redchi``, ``aic``, ``bic``, ``best_values``, ``init_values``, ``fit_report``)."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._contract.status import Status
from fixedopt._models.curves import curves
from fixedopt._models.fitted import FittedParameters, covar, fitted_parameters, var_names
from fixedopt._models.parameters import Parameters


@dataclasses.dataclass(frozen=True)
class ModelResult:
    """The fits of a batch; every per-fit array has the leading batch axis ``B``.

    Attributes:
      model: the fitted model; ``init_params``: the parameters as given (lmfit's
        name; :attr:`params` holds the fitted ones).
      names: every parameter (fitted, fixed, tied, derived), in order.
      values: ``(B, n)`` best values of ``names`` (see :meth:`best_values`).
      covariance: ``(B, n, n)``, propagated to tied and derived parameters; 0 for fixed
        ones; NaN for a fit that failed; where the Jacobian is rank-deficient, the
        pseudo-inverse's (:func:`fixedopt.covariance`: 0 for a parameter the model
        does not depend on).
      data: ``(B, m)``, NaN at an omitted point.
      best_fit, init_fit, residual: ``(B, m)``, computed when first read (a fit whose
        curves nobody reads compiles no program for them); ``residual`` is
        ``(best_fit - data) * weights`` (Poisson: ``(best_fit - data) / sqrt(best_fit)``;
        0 at an omitted point).
      start: ``(B, k)``, the fitted parameters' starts (``init_fit``'s).
      solution: the :class:`fixedopt.Solution` (``status``, ``steps``, ...).
      varying: the varied parameters of each fit.
      init_values: ``{name: (B,)}`` as given.
      omitted: ``(B, m)``, the points ``nan_policy="omit"`` left out (None: none).
      estimator: ``"least_squares"`` or ``"poisson"``.
      problem: what the fit solved (for :meth:`conf_interval`'s profile fits).
      rank_deficient: ``(B,)``, the fits whose Jacobian has rank below their free
        parameters (a parameter the data cannot determine, or two that act alike):
        the parameters the data cannot determine have an ``inf`` error, the others
        the pseudo-inverse's (see :attr:`errorbars`).
    """

    model: Any
    init_params: Parameters
    names: tuple[str, ...]
    index: dict[str, int]
    values: np.ndarray
    covariance: np.ndarray
    data: np.ndarray
    start: np.ndarray
    solution: Any
    varying: list[list[str]]
    init_values: dict[str, np.ndarray]
    independent: dict[str, np.ndarray]
    omitted: np.ndarray | None = None
    estimator: str = "least_squares"
    problem: Any = dataclasses.field(default=None, repr=False, compare=False)
    rank_deficient: np.ndarray | None = None

    @functools.cached_property
    def _curves(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(best_fit, init_fit, residual)``, from the fit's own residual function."""
        if self.problem is None:
            raise ValueError(
                "best_fit, init_fit and residual are computed from the fit's problem: this "
                "ModelResult has none (problem=None); use the one Model.fit returns"
            )
        (xs, data, *extra), axes = self.problem.args, self.problem.axes
        start = jnp.asarray(self.start)
        found = curves(
            self.problem.residual, axes[0], self.solution.x, start, xs, data, tuple(extra)
        )
        return found[0], found[1], found[2]

    @property
    def best_fit(self) -> np.ndarray:
        """``(B, m)``: the model at the best values."""
        return self._curves[0]

    @property
    def init_fit(self) -> np.ndarray:
        """``(B, m)``: the model at the initial values."""
        return self._curves[1]

    @property
    def residual(self) -> np.ndarray:
        """``(B, m)``: the residual at the best values (see the class's doc)."""
        return self._curves[2]

    @property
    def errorbars(self) -> np.ndarray:
        """``(B,)``: whether each fit's uncertainties were estimated (lmfit's name):
        false where the Jacobian is rank-deficient (a parameter the data cannot
        determine has an ``inf`` error), or where they are not finite (a failed fit, no
        more points than free parameters)."""
        sd = np.diagonal(self.covariance, axis1=1, axis2=2)
        finite = np.asarray(np.all(np.isfinite(sd), axis=1))
        if self.rank_deficient is None:
            return finite
        return np.asarray(finite & ~self.rank_deficient)

    @property
    def params(self) -> FittedParameters:
        """lmfit's ``result.params``: ``params[name].value``, ``.stderr``, ``.correl``,
        ``.vary``, ``.init_value`` (one entry per fit), ``.expr``, ``.min``, ``.max``;
        ``params.valuesdict()``."""
        return fitted_parameters(self)

    @property
    def var_names(self) -> list[str]:
        """The varied parameters, in ``covar``'s order (the same in every fit)."""
        return var_names(self)

    @property
    def covar(self) -> np.ndarray:
        """``(B, v, v)``: the varied parameters' covariance (lmfit's ``covar``); see
        :attr:`covariance` for every parameter."""
        return covar(self)

    @property
    def best_values(self) -> dict[str, np.ndarray]:
        """``{name: (B,)}``: the best value of every parameter."""
        return {name: self.values[:, i] for name, i in self.index.items()}

    @property
    def stderr(self) -> dict[str, np.ndarray]:
        """``{name: (B,)}``: standard errors; 0 for a fixed parameter."""
        sd = np.sqrt(np.clip(np.diagonal(self.covariance, axis1=1, axis2=2), 0.0, None))
        return {name: sd[:, i] for name, i in self.index.items()}

    def correlation(self, a: str, b: str) -> np.ndarray:
        """``(B,)``: the correlation of parameters ``a`` and ``b`` (NaN where either
        has no variance)."""
        i, j = self.index[a], self.index[b]
        c = self.covariance
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray(c[:, i, j] / np.sqrt(c[:, i, i] * c[:, j, j]))

    @property
    def ndata(self) -> np.ndarray:
        """``(B,)``: the data points of each fit (those ``nan_policy="omit"`` kept)."""
        points = self.data.shape[1]
        if self.omitted is None:
            return np.full(self.data.shape[0], points)
        return np.asarray(points - self.omitted.sum(axis=1))

    @property
    def nvarys(self) -> np.ndarray:
        """``(B,)``: the varied parameters of each fit (neither fixed nor tied)."""
        return np.array([len(v) for v in self.varying])

    @property
    def nfree(self) -> np.ndarray:
        """``(B,)``: degrees of freedom, ``ndata - nvarys``."""
        return np.asarray(self.ndata - self.nvarys)

    @property
    def chisqr(self) -> np.ndarray:
        """``(B,)``: the sum of squared (weighted) residuals (Poisson: Pearson's
        chi-square). For a least-squares fit without a robust ``loss``, twice the
        solve's own ``value`` (``0.5 * sum(residual**2)``, the same sum): no curve is
        computed for it."""
        if (
            self.estimator == "least_squares"
            and self.problem is not None
            and self.problem.options.get("loss", "linear") == "linear"
        ):
            return np.asarray(2.0 * np.asarray(self.solution.value))
        return np.asarray(np.sum(self.residual**2, axis=1))

    @property
    def deviance(self) -> np.ndarray:
        """``(B,)``: a Poisson fit's deviance, ``2 sum(mu - y - y log(mu / y))`` (for
        least squares, ``chisqr``)."""
        if self.estimator != "poisson":
            return self.chisqr
        return np.asarray(2.0 * np.asarray(self.solution.value))

    @property
    def redchi(self) -> np.ndarray:
        """``(B,)``: the reduced chi-square, ``chisqr / nfree``."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(self.chisqr / self.nfree)

    @property
    def aic(self) -> np.ndarray:
        """Akaike's information criterion, ``n log(chisqr / n) + 2 nvarys`` (lmfit's;
        Poisson: ``deviance + 2 nvarys``, -2 log-likelihood up to a constant of the data)."""
        return np.asarray(self._fit_term() + 2 * self.nvarys)

    @property
    def bic(self) -> np.ndarray:
        """Bayesian information criterion, ``n log(chisqr / n) + log(n) nvarys``
        (Poisson: ``deviance + log(n) nvarys``)."""
        with np.errstate(divide="ignore", invalid="ignore"):  # a fit with no points left
            return np.asarray(self._fit_term() + np.log(self.ndata) * self.nvarys)

    def _fit_term(self) -> np.ndarray:
        """-2 log-likelihood up to a constant: ``n log(chisqr / n)`` or the deviance.
        A chi-square of 0 (data the model reproduces exactly) counts as ``1e-250 n``, as
        lmfit's: its ``aic`` and ``bic`` are finite, not ``-inf``."""
        if self.estimator == "poisson":
            return self.deviance
        floor = np.maximum(np.asarray(self.chisqr, float), 1e-250 * self.ndata)
        with np.errstate(divide="ignore", invalid="ignore"):  # a fit with no points left
            return np.asarray(self.ndata * np.log(floor / self.ndata)).astype(self.chisqr.dtype)

    @property
    def status(self) -> np.ndarray:
        """``(B,)``: each fit's :class:`fixedopt.Status` code."""
        return np.asarray(self.solution.status)

    @property
    def success(self) -> np.ndarray:
        """``(B,)``: whether each fit converged (``status == Status.CONVERGED``)."""
        return np.asarray(self.solution.converged)

    @property
    def nfev(self) -> np.ndarray:
        """The solver's steps per fit (one Jacobian each)."""
        return np.asarray(self.solution.steps)

    def eval(self, row: int | None = None, **independent: Any) -> Any:
        """The fitted model of each fit (or of ``row``), at the fit's own independent
        variables or at those given (shared by the fits)."""
        return self._evaluate(self.model.eval, self.check_row(row), independent)

    def eval_components(self, row: int | None = None, **independent: Any) -> Any:
        """Each component of the fitted model (keyed as :meth:`Model.eval_components`)."""
        return self._evaluate(self.model.eval_components, self.check_row(row), independent)

    def check_row(self, row: Any, name: str = "row") -> Any:
        """``row`` (``None``: every fit), or a ``ValueError`` where it indexes no fit."""
        rows = self.data.shape[0]
        if row is None:
            return None
        if not isinstance(row, int | np.integer) or isinstance(row, bool):
            raise TypeError(f"`{name}` must be an integer (a fit's index), got {row!r}")
        if not -rows <= row < rows:
            raise ValueError(f"`{name}` must index one of the {rows} fits, got {row}")
        return int(row)

    def _evaluate(self, what: Any, row: int | None, independent: dict[str, Any]) -> Any:
        per_fit = not independent and all(np.ndim(x) == 2 for x in self.independent.values())
        if not per_fit:
            return what(self._row_params(row), **(independent or self.independent))
        if row is not None:  # this fit's own x
            return what(self._row_params(row), **{k: x[row] for k, x in self.independent.items()})
        rows = [self._evaluate(what, r, {}) for r in range(self.data.shape[0])]
        return jax.tree.map(lambda *a: jnp.stack(a), *rows)

    def _row_params(self, row: int | None) -> Parameters:
        """The best values as fixed, untied parameters (of one row, or of all)."""
        take = slice(None) if row is None else row
        params = Parameters()
        for name, i in self.index.items():
            params.add(name, value=self.values[take, i], vary=False)
        return params

    def to_records(self) -> dict[str, np.ndarray]:
        """Columns: each parameter and ``<name>_stderr``, then ``chisqr``, ``redchi``,
        ``aic``, ``bic``, ``status``, ``success``, ``nfev``; one entry per fit."""
        columns: dict[str, np.ndarray] = {}
        for name in self.names:
            columns[name] = self.best_values[name]
            columns[name + "_stderr"] = self.stderr[name]
        for stat in ("chisqr", "redchi", "aic", "bic", "status", "success", "nfev"):
            columns[stat] = np.asarray(getattr(self, stat))
        return columns

    def to_dataframe(self) -> Any:
        """:meth:`to_records` as a ``pandas.DataFrame``, one row per fit (needs pandas:
        ``pip install fixedopt[models]``)."""
        try:
            import pandas
        except ImportError:
            raise ImportError(
                "to_dataframe needs pandas: pip install 'fixedopt[models]' (or use to_records())"
            ) from None
        frame = pandas.DataFrame(self.to_records())
        frame["status"] = [Status(int(s)).name for s in frame["status"]]
        return frame

    def eval_uncertainty(
        self, row: int | None = None, sigma: float = 1.0, **independent: Any
    ) -> Any:
        """The model's confidence band, ``(m,)`` for ``row`` or ``(B, m)``: lmfit's
        ``eval_uncertainty`` (``sigma`` standard errors, Student's t at ``nfree`` degrees
        of freedom; needs scipy), with exact derivatives; at the fit's own independent
        variables unless others are given."""
        from fixedopt._models.uncertainty import eval_uncertainty

        return eval_uncertainty(self, self.check_row(row), sigma, independent)

    def plot_fit(self, row: int = 0, ax: Any = None, show_init: bool = False) -> Any:
        """lmfit's ``plot_fit``: fit ``row``'s data and best fit (and start) on one
        matplotlib ``Axes`` (``ax``, or a new one), returned."""
        from fixedopt._models.plot import plot_fit

        return plot_fit(self, row, ax, show_init)

    def plot(self, row: int = 0, components: bool = True, initial: bool = False) -> Any:
        """A matplotlib figure of fit ``row``: residuals above; data, best fit and
        components below (lmfit's ``plot``)."""
        from fixedopt._models.plot import plot

        return plot(self, row, components, initial)

    def conf_interval(self, names: Any = None, sigmas: Any = (1, 2, 3), rtol: float = 1e-6,
                      maxiter: int = 30, rows: Any = None) -> Any:  # fmt: skip
        """lmfit's profile confidence intervals (F-test), every fit at once (a Poisson
        fit's: the profile likelihood's, where the deviance rises by ``chi2.ppf(prob, 1)``).

        Args:
          names: the parameters (by default every fitted one).
          sigmas: the levels, in standard deviations (below 1: probabilities).
          rtol: the tolerance on ``sqrt(chisqr(v) - chisqr)`` at a limit (relative to its
            target; or that quantity's rounding where coarser, as in float32).
          maxiter: search steps (each one batched solve of every fit, parameter, side
            and level).
          rows: the fits to profile (by default every fit).

        Returns:
          ``{name: (B, 2 * len(sigmas) + 1)}``: the lower limits (widest first), the best
          value, the upper limits; NaN where ``name`` is not fitted in a fit, +/-inf
          where its bound comes before the limit. Its ``probabilities`` are the columns'
          and its ``report(row)`` is lmfit's ``ci_report``.
        """
        from fixedopt._models.confidence import conf_interval

        return conf_interval(self, names, sigmas, rtol, maxiter, rows)

    def conf_interval2d(self, x_name: str, y_name: str, nx: int = 10, ny: int = 10,
                        limits: Any = None, nsigma: float = 5.0, chi2_out: bool = False,
                        rows: Any = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
        """lmfit's ``conf_interval2d`` for every fit at once: ``(x, y, grid)``, ``x``
        ``(B, nx)`` and ``y`` ``(B, ny)`` the values at which ``x_name`` and ``y_name``
        are held (the others refitted), ``grid`` ``(B, ny, nx)`` the distance from the
        best fit in standard deviations, ``sqrt((chisqr - chisqr_0) / redchi)``, or the
        chi-square itself (``chi2_out``). ``limits``: ``((x_upper, x_lower), (y_upper,
        y_lower))``, by default +/- ``nsigma`` standard errors; NaN where a parameter is
        not fitted, the fit did not converge, or it is not in ``rows``. All fits' grids
        are one batched solve.

        Example:
          >>> import numpy as np
          >>> from fixedopt.models import LinearModel
          >>> x = np.linspace(0.0, 1.0, 20)
          >>> data = 2.0 * x + 1.0 + np.random.default_rng(0).normal(0, 0.1, (3, 20))
          >>> model = LinearModel()
          >>> result = model.fit(data, model.make_params(slope=1.0, intercept=0.0), x=x)
          >>> xs, ys, grid = result.conf_interval2d("slope", "intercept", nx=5, ny=4)
          >>> xs.shape, ys.shape, grid.shape
          ((3, 5), (3, 4), (3, 4, 5))
        """
        from fixedopt._models.confidence2d import conf_interval2d

        return conf_interval2d(self, x_name, y_name, nx, ny, limits, nsigma, chi2_out, rows)

    def ci_report(self, row: int = 0, with_offset: bool = True, ndigits: int = 5,
                  **kwargs: Any) -> str:  # fmt: skip
        """lmfit's ``ci_report`` of fit ``row``, from :meth:`conf_interval` (``kwargs``):
        each limit as an offset from the best value, ``ndigits`` decimals."""
        return str(self.conf_interval(**kwargs).report(row, with_offset, ndigits))

    def fit_report(self, row: int = 0, min_correl: float = 0.1) -> str:
        """lmfit's ``fit_report`` for one fit."""
        from fixedopt._models.report import fit_report

        return fit_report(self, row, min_correl)
