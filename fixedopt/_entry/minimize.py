"""``minimize`` and ``least_squares``: validate, batch, and run the solver loop."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Unpack, cast

import jax
from jax.typing import ArrayLike

from fixedopt._entry.describe import SolveOptions, describe, least_squares_data, with_options
from fixedopt._entry.host_residuals import runnable_objective, runnable_residuals
from fixedopt._entry.row_mask import run_rows, where_rows
from fixedopt._inputs.checks import boolean
from fixedopt._results.solution import Solution


@with_options
def minimize(
    fun: Callable[..., Any],
    x0: Any,
    fixed: Any,
    *,
    jac: str | None = None,
    **options: Unpack[SolveOptions],
) -> Solution:
    """Minimize ``fun`` over ``x`` with fixed entries pinned and the rest in bounds.

    Args:
      fun: ``fun(x, *args) -> scalar``, for ONE problem. Shared constants are closed
        over; define ``fun`` once (a new function object compiles anew).
      x0: the starting point, an array or a pytree of floating-point arrays. With
        ``batched=True`` every leaf has a leading batch axis.
      fixed: the fixed mask (``True`` = fixed): a boolean array per leaf of ``x0``
        (same shape, batch axis included; rows may differ), a Python ``bool`` per leaf,
        a tree prefix of those, or a callable ``x0 -> mask``. A new mask with the same
        shapes never recompiles.
      jac: how the gradient of a ``fun`` JAX cannot trace is taken: ``fun`` written
        with NumPy (``np.exp``), with a Python ``if`` on a value, or keeping state
        runs on the host through ``jax.pure_callback`` (one Python call per problem
        and evaluation; a :class:`fixedopt.HostFunctionWarning` says so once), for
        ``x0`` of one array per problem, and its gradient is scipy's finite
        differences: ``"2-point"`` (None: scipy's default), ``"3-point"`` or
        ``"cs"``, their points within ``bounds`` shared by every row. A ``fun``
        JAX traces ignores ``jac``: its gradient is JAX's, exact.
      **options: the keywords below, shared with :func:`fixedopt.least_squares`.

    Keyword Args:
      fixed_values: the values of the fixed entries, a tree like ``x0`` (scalars
        broadcast); by default the entries of ``x0``.
      bounds: ``None`` or ``(lower, upper)``, scalars or trees broadcastable to ``x0``;
        ``-inf``/``inf`` allowed. ``minimize`` projects a start outside the bounds
        onto them (as scipy's L-BFGS-B); ``least_squares`` refuses one (a
        ``ValueError`` naming the row and the entry; traced, its row stops
        ``INFEASIBLE``), as ``scipy.optimize.least_squares``.
      solver: a solver object; default :class:`fixedopt.LBFGS`.
      args: a tuple of extra positional arguments of ``fun``. With ``batched=True``
        every array in ``args`` has the leading batch axis and Python scalars are
        shared, unless ``args_axes`` says otherwise.
      batched: solve one independent problem per row of the leading axis; each row
        converges and reports on its own. ``jax.vmap`` over an unbatched call agrees.
      args_axes: with ``batched=True``, which ``args`` are per row: a ``vmap``-style
        ``in_axes`` for ``args`` (a tuple prefix of it, each ``0`` for per-row or
        ``None`` for shared), e.g. ``args_axes=(0, None)`` shares the second argument
        with every row even when its length happens to equal the batch size. Left
        ``None``, every array is per row, and a batch size ``B`` that is also the
        length of another axis warns once, at trace time (``UserWarning``), naming
        the arguments read as per row that could be shared ones: if a non-leading
        axis of an array in ``args`` has length ``B`` (128 curves of 128 time bins:
        a shared time axis of 128 points would be split one value per row), every
        array argument; else if the trailing axis of ``x0`` has length ``B`` (3
        rows of 3 parameters), the 1-D arguments of length ``B`` (they could be one
        value per parameter). Giving ``args_axes`` silences it. It warns rather than
        requiring ``args_axes`` whenever shapes collide: that would break every
        per-row call that reads correctly today.
      strategy: ``"mask"`` (the default: the solver works on the full vector, the
        objective is masked in place) or ``"split"`` (index splitting: each row's free
        entries are packed into a vector padded to a power-of-two width and scattered
        back inside the objective; needs a concrete mask, and a new free count that
        crosses a power of two compiles anew). Same solvers, same ``Solution``.
      gtol: the scale-invariant gradient test: ``|g| sqrt(gamma / (2 |f|))`` at most
        ``gtol``, with ``gamma`` the curvature scale of the last step (its square
        estimates the relative gap ``(f - f*) / |f|``); least-squares solvers use
        the largest cosine between the residual and a free Jacobian column, as in
        MINPACK. ``None`` (the default): ``sqrt(eps)`` of the dtype of ``x0`` (1.5e-8
        in float64, 3.5e-4 in float32). Every test excludes fixed and
        bound-active entries; :class:`fixedopt.Reason` lists them.
      ftol: the relative-reduction test: both the actual and the predicted reduction
        of a step at most ``ftol * |f|``. ``None``: ``eps`` of the dtype (a reduction
        at the rounding level of ``f``; reductions are quadratic in the distance to
        the solution, so this asks for the digits ``gtol`` and ``xtol`` ask for).
      xtol: the relative-step test: the solver's model step at most ``xtol`` times
        ``|x|`` (scaled norms for least squares). ``None``: ``sqrt(eps)``.
      abs_gtol: the absolute test: the max-norm of the projected gradient over free
        entries at most ``abs_gtol`` (0, the default, only for an exactly zero
        gradient). Set ``gtol=ftol=xtol=0`` to use it alone.
      max_steps: the iteration limit per row (an int below ``2**31``).
      differentiate: how ``jax.grad``/``jax.jvp`` of ``Solution.x`` (and of ``value``
        and ``grad_norm``) with respect to ``fixed_values``, ``args`` and ``bounds``
        is computed. ``fixedopt.Implicit()`` or ``"implicit"`` (the default): by the
        implicit function theorem at the solution, solving one linear system on the
        free block (bound-active entries are held at their bound, so ``dx/dbound`` is
        1 there; ``value`` gets the envelope-theorem derivative) — exact at a converged
        solution, and no iteration is differentiated (a row that stopped unconverged,
        e.g. ``MAX_STEPS``, gets the formula at the point it stopped, without a
        warning: filter on ``status``; see ``docs/differentiation.md``). ``fixedopt.Unroll()`` or
        ``"unroll"``: through every iteration (loops become fixed-length scans of
        ``max_steps``: slower, memory grows with ``max_steps``; for comparison and for
        non-converged solves;
        ``fixedopt.Optax`` with an optimizer that has its own while loop, such as
        ``optax.lbfgs``, cannot be unrolled in reverse mode: it raises a
        ``ValueError`` when traced).
      lanes: with ``batched=True``, how many rows the solver loop advances at a time
        (``W``). When enough of them have stopped, their results are written out and
        those lanes take the next unsolved rows: one compiled loop whatever the batch
        size, working memory of ``W`` rows, and a slow row costs its own steps, not
        the batch's. A row's result does not depend on the other rows: the same bits
        as in any other batch solved with the same ``lanes``, and equal to rounding
        with another ``lanes`` (other machine code). ``None`` (the default): per
        backend; on a CPU as many rows as their loop state fits in half a core's L2
        cache (512 KiB; at least 64, at most 4096), on an accelerator 65536; at most
        an eighth of the batch (at least 8 rows), so that slow rows overlap with others.
        ``lanes >= B`` runs the whole batch at once, as one ``vmap``.
      progress: with ``batched=True``, show how many rows have stopped: ``True``, as a
        tqdm bar of rows stopped where tqdm is installed (``tqdm.auto``: a widget in a
        notebook; ``pip install "fixedopt[progress]"``), else as one line rewritten
        in place at most every 0.5 s; ``"bar"``, the bar (an error without tqdm); an
        int ``k``, a line every ``k`` steps with the largest projected gradient among
        the running rows (a log). A host callback that works under ``jit``; turning
        it on compiles the solve anew. Off (the default), it adds nothing to the
        program.
      where: with ``batched=True``, the rows to solve: a boolean ``(B,)`` known at
        trace time (NumPy's ``where=``). The other rows are not solved and spend no
        lane (the solve runs on the rows taken out of the batch): they report
        ``Status.SKIPPED``, NaN in their free entries (fixed entries keep their
        values), NaN ``value`` and ``grad_norm``, 0 steps, and a NaN covariance.
        ``None`` (the default): every row.
      nan_unconverged: return NaN in the free entries of ``x`` of every row that did
        not converge (any status but ``CONVERGED``: ``MAX_STEPS``, ``NONFINITE``,
        ``INFEASIBLE``, ...), instead of the iterate it stopped at; its
        :func:`fixedopt.covariance` is then NaN too. Fixed entries keep their values.
        ``False`` (the default): the last iterate (a plausible value in a map: filter
        on ``status``). See :meth:`fixedopt.Solution.unconverged_as_nan`.
      vectorized: with ``batched=True``, ``fun`` is written for many rows at once: every
        leaf of ``x`` and every per-row argument has a leading axis of rows, and it
        returns one value per row (``(rows,)``). The solver calls it once per
        evaluation on all its lanes, so ``fun`` can batch its own operations (a
        grouped convolution, an FFT). Rows must not interact; a check on the first
        16 rows raises if changing row 0 changes another's output (a check, not a
        proof: rows mixed only farther apart, or only in later rows, pass it).

    Returns:
      A :class:`fixedopt.Solution`; fixed entries of ``x`` are bit-identical to their
      fixed values (cast to the dtype of ``x0``).

    Example:
      >>> import jax.numpy as jnp
      >>> import fixedopt
      >>> def fun(x, target):
      ...     return jnp.sum((x - target) ** 2) + jnp.sum(jnp.diff(x) ** 2)
      >>> x0 = jnp.zeros((2, 3))
      >>> fixed = jnp.array([[True, False, False], [False, False, True]])
      >>> target = jnp.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
      >>> sol = fixedopt.minimize(fun, x0, fixed, args=(target,), batched=True)
      >>> print(sol.x.round(4))
      [[0.  1.4 2.2]
       [2.2 1.4 0. ]]
      >>> print(sol.converged)
      [ True  True]
    """
    given, nan = _without_nan_option(cast(dict[str, Any], options))
    where = given.pop("where", None)
    fun = runnable_objective(fun, jac, x0, given)  # on the host?
    plan, inputs = describe(fun, x0, fixed, given, caller="minimize")
    return _finished(run_rows(plan, inputs, where_rows(where, plan, inputs)), nan)


@with_options
def least_squares(
    residual_fun: Callable[..., Any],
    x0: Any,
    fixed: Any,
    *,
    loss: str | Callable[[jax.Array], jax.Array] = "linear",
    f_scale: float = 1.0,
    sigma: ArrayLike | None = None,
    estimator: str = "least_squares",
    counts: ArrayLike | None = None,
    max_nfev: int | None = None,
    x_scale: str | None = None,
    jac: Callable[..., Any] | str | None = None,
    **options: Unpack[SolveOptions],
) -> Solution:
    """Minimize ``0.5 * sum(residual_fun(x, *args) ** 2)`` with fixed entries pinned.

    The same arguments and guarantees as :func:`fixedopt.minimize`; ``residual_fun``
    returns an array (any shape) of residuals for ONE problem. The default solver is
    :class:`fixedopt.LevenbergMarquardt`; :class:`fixedopt.GaussNewton` and every
    ``minimize`` solver work too. ``Solution.value`` follows scipy's convention,
    ``0.5 * sum(residuals**2)``.

    ``loss`` (``"linear"``, ``"soft_l1"``, ``"huber"``, ``"cauchy"``, ``"arctan"``, or
    a callable ``rho(z)`` differentiated by JAX) and ``f_scale`` make the fit robust to
    outliers, as in ``scipy.optimize.least_squares``: the cost is
    ``0.5 * sum(f_scale**2 * rho((residuals / f_scale)**2))`` (that is
    ``Solution.value``), minimized by the same solvers on scipy's rescaled residuals
    and Jacobian (see ``fixedopt._objective.losses``).

    ``max_nfev`` is scipy's name for the iteration limit (``max_steps``: each
    iteration evaluates the residuals and their Jacobian once); ``x_scale`` accepts
    scipy's ``"jac"`` only, which is what Levenberg–Marquardt does (its steps are
    scaled by the Jacobian's column norms). ``jac``, as scipy's: a callable
    ``jac(x, *args) -> (m, n)``, the Jacobian of the residuals in ``x`` (a 1-D array
    per row), or None or a finite-difference scheme (``"2-point"``, ``"3-point"``,
    ``"cs"``): JAX's exact derivative. A ``residual_fun`` (or ``jac``) JAX cannot
    trace (NumPy calls, a Python ``if`` on a value) runs on the host through
    ``jax.pure_callback`` when ``x0`` is one array per problem, with that
    finite-difference scheme (None: ``"2-point"``) or the NumPy ``jac``
    (``fixedopt.HostFunctionWarning``, once). ``docs/scipy.md`` lists the
    differences from ``scipy.optimize.least_squares``.

    ``sigma`` (the standard deviation of each residual) fits the weighted residuals
    ``residual_fun(x, *args) / sigma``, as ``scipy.optimize.curve_fit``'s 1-D
    ``sigma``: an array that broadcasts to one row's residuals (with ``batched=True``,
    with the leading batch axis, or a scalar for every row); positive. It is data:
    a new ``sigma`` reuses the compiled solve. ``Solution.value`` is then half the
    chi-square.

    ``estimator="poisson"`` fits counting data by maximum likelihood: ``residual_fun``
    then returns the model's expected counts ``mu`` (positive), ``counts`` the
    observed counts (as ``sigma``: broadcasting to one row's output, a ``(5, 5)`` spot
    takes ``(5, 5)`` counts; ``residual_fun`` never receives them, with
    ``vectorized=True`` either), and the cost (``Solution.value``) is
    half the Poisson deviance ``sum(mu - y - y log(mu / y))``, minimized by the same
    solvers on the Fisher-scoring residuals ``(mu - y) / sqrt(mu)`` and Jacobian
    ``J_mu / sqrt(mu)`` (see ``fixedopt._objective.losses.Poisson``). Counts of 0 are allowed;
    NaN or negative counts, or a start where ``mu <= 0``, stop the row with
    ``Status.NONFINITE``. :func:`fixedopt.curve_fit` gives its error bars.

    Example:
      >>> import jax.numpy as jnp
      >>> import fixedopt
      >>> t = jnp.linspace(0.0, 1.0, 5)
      >>> line = lambda p, y: p[0] * t + p[1] - y
      >>> y = jnp.stack([2.0 * t + 1.0, -t + 4.0])
      >>> fixed = jnp.array([[False, True], [True, False]])  # row 0 knows its intercept
      >>> x0 = jnp.array([[0.0, 1.0], [-1.0, 0.0]])          # row 1 knows its slope
      >>> sol = fixedopt.least_squares(line, x0, fixed, args=(y,), batched=True)
      >>> print(sol.x.round(6))
      [[ 2.  1.]
       [-1.  4.]]
    """
    own = dict(loss=loss, f_scale=f_scale, sigma=sigma, estimator=estimator, counts=counts,
               max_nfev=max_nfev, x_scale=x_scale, jac=jac)  # fmt: skip
    return solved_least_squares(False, residual_fun, x0, fixed, **own, **options)


def solved_least_squares(
    normal: bool,
    residual_fun: Callable[..., Any],
    x0: Any,
    fixed: Any,
    *,
    checked: Any = None,  # a Callable[[], Any]: Any, as least_squares passes **own
    **options: Any,
) -> Solution:
    """:func:`least_squares` of these arguments (its own keywords read with its
    defaults, ``least_squares.__kwdefaults__``: one list serves both); with ``normal``,
    its ``Solution.normal`` holds the solver's ``J^T J`` at ``x`` where the solver has
    it (``curve_fit``'s covariance); ``checked()`` is called once every argument is
    checked, before the solve (``curve_fit``'s covariance compiled ahead)."""
    defaults = least_squares.__kwdefaults__ or {}
    own = {name: options.pop(name, default) for name, default in defaults.items()}
    given, nan = _without_nan_option(options)
    where = given.pop("where", None)
    residual_fun, own["jac"] = runnable_residuals(residual_fun, own["jac"], x0, given)  # host?
    residual_fun, fit_loss, given = least_squares_data(residual_fun, x0, given, **own)
    plan, inputs = describe(
        residual_fun, x0, fixed, given, caller="least_squares", loss=fit_loss,
        sigma=own["sigma"], counts=own["counts"],
    )  # fmt: skip
    plan = plan._replace(normal=normal)
    rows = where_rows(where, plan, inputs)
    if checked is not None:
        checked()
    return _finished(run_rows(plan, inputs, rows), nan)


def _without_nan_option(options: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """``options`` (the entry point's own ``**options`` dict, the call's one dict of
    keywords: changed in place) without ``nan_unconverged``, and its value (checked)."""
    return options, boolean("nan_unconverged", options.pop("nan_unconverged", False))


def _finished(solution: Solution, nan_unconverged: bool) -> Solution:
    """The solution as returned: NaN where rows did not converge, if asked."""
    return solution.unconverged_as_nan() if nan_unconverged else solution
