"""``minimize`` and ``least_squares``: validate, batch, and run the solver loop."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from fixedopt._contract.solver import Solver
from fixedopt._derivatives.differentiation import Differentiation
from fixedopt._driver.engine import Inputs, Plan, run
from fixedopt._driver.loop import Stopping
from fixedopt._entry.fit_keywords import jacobian
from fixedopt._entry.model import WithJacobian
from fixedopt._entry.options import Options, solve_options
from fixedopt._inputs.notices import warn_if_float64_dropped
from fixedopt._inputs.validate import (
    PyTree,
    batch_size,
    check_has_entries,
    check_params,
    check_start_in_bounds,
    check_values_in_bounds,
    fixed_arrays,
    normalize_bounds,
    normalize_values,
)
from fixedopt._objective.arguments import args_tuple, batched_args, check_solver, hashable_function
from fixedopt._objective.call_note import UserFunction
from fixedopt._objective.fit_data import fit_data
from fixedopt._objective.losses import split_data
from fixedopt._objective.reparam import split_indices
from fixedopt._objective.vectorized import check_rows_independent
from fixedopt._results.solution import Solution
from fixedopt._solvers.gauss_newton import LevenbergMarquardt
from fixedopt._solvers.lbfgs import LBFGS


def minimize(
    fun: Callable[..., Any],
    x0: Any,
    fixed: Any,
    *,
    fixed_values: Any = None,
    bounds: Any = None,
    solver: Solver[Any] | None = None,
    args: tuple[Any, ...] | list[Any] = (),
    batched: bool = False,
    args_axes: Any = None,
    strategy: str = "mask",
    gtol: float | None = None,
    ftol: float | None = None,
    xtol: float | None = None,
    abs_gtol: float = 0.0,
    max_steps: int = 1000,
    differentiate: str | Differentiation = "implicit",
    lanes: int | None = None,
    progress: bool | int | str = False,
    vectorized: bool = False,
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
      fixed_values: the values of the fixed entries, a tree like ``x0`` (scalars
        broadcast); by default the entries of ``x0``.
      bounds: ``None`` or ``(lower, upper)``, scalars or trees broadcastable to ``x0``;
        ``-inf``/``inf`` allowed. A start outside the bounds is projected first.
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
        solution, and no iteration is differentiated. ``fixedopt.Unroll()`` or
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
        cache (512 KiB; at most 4096), on an accelerator 65536; at most an eighth of
        the batch (at least 8 rows), so that slow rows overlap with others.
        ``lanes >= B`` runs the whole batch at once, as one ``vmap``.
      progress: with ``batched=True``, print every 10 steps (or every ``progress``
        steps, for an int) how many rows have stopped and the largest projected
        gradient among the rest; ``"bar"`` shows the same as a tqdm bar of rows
        stopped (``tqdm.auto``: a widget in a notebook; needs tqdm, e.g.
        ``pip install "fixedopt[progress]"``).
        A host callback that works under ``jit``. Off (the default), it adds nothing
        to the program.
      vectorized: with ``batched=True``, ``fun`` is written for many rows at once: every
        leaf of ``x`` and every per-row argument has a leading axis of rows, and it
        returns one value per row (``(rows,)``). The solver calls it once per
        evaluation on all its lanes, so ``fun`` can batch its own operations (a
        grouped convolution, an FFT). Rows must not interact; a quick check on the
        first three rows raises if changing one row changes another's output.

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
    solver = LBFGS() if solver is None else solver
    check_solver(solver, needs_residuals=False, caller="minimize")
    inputs = {"x0": x0, "fixed_values": fixed_values, "bounds": bounds, "args": args}
    warn_if_float64_dropped(inputs)
    options = solve_options(
        least_squares=False, batched=batched, args_axes=args_axes, strategy=strategy,
        differentiate=differentiate, gtol=gtol, ftol=ftol, xtol=xtol, abs_gtol=abs_gtol,
        max_steps=max_steps, lanes=lanes, progress=progress, vectorized=vectorized,
    )  # fmt: skip
    return _solve(fun, x0, fixed, fixed_values, bounds, solver, args, options)


def least_squares(
    residual_fun: Callable[..., Any],
    x0: Any,
    fixed: Any,
    *,
    fixed_values: Any = None,
    bounds: Any = None,
    solver: Solver[Any] | None = None,
    args: tuple[Any, ...] | list[Any] = (),
    batched: bool = False,
    args_axes: Any = None,
    strategy: str = "mask",
    gtol: float | None = None,
    ftol: float | None = None,
    xtol: float | None = None,
    abs_gtol: float = 0.0,
    max_steps: int = 1000,
    differentiate: str | Differentiation = "implicit",
    lanes: int | None = None,
    progress: bool | int | str = False,
    vectorized: bool = False,
    loss: str | Callable[[jax.Array], jax.Array] = "linear",
    f_scale: float = 1.0,
    sigma: ArrayLike | None = None,
    estimator: str = "least_squares",
    counts: ArrayLike | None = None,
    max_nfev: int | None = None,
    x_scale: str | None = None,
    jac: Callable[..., Any] | str | None = None,
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
    per row; traceable by JAX), or None or a finite-difference scheme (``"2-point"``,
    ``"3-point"``, ``"cs"``): JAX's exact derivative. ``docs/scipy.md`` lists the
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
    solver = LevenbergMarquardt() if solver is None else solver
    check_solver(solver, needs_residuals=True, caller="least_squares")
    inputs = {"x0": x0, "fixed_values": fixed_values, "bounds": bounds, "args": args}
    warn_if_float64_dropped(inputs | {"sigma": sigma, "counts": counts})
    residual_fun = hashable_function(residual_fun, "residual_fun")
    max_steps = _scipy_names(max_steps, max_nfev, x_scale)
    residual_fun = _with_jac(residual_fun, jac, x0)
    data = fit_data(
        residual_fun, x0, args_tuple(args), args_axes, batched, sigma=sigma,
        estimator=estimator, counts=counts, loss=loss, f_scale=f_scale,
    )  # fmt: skip
    residual_fun, args, args_axes = data.residual_fun, data.args, data.args_axes
    options = solve_options(
        least_squares=data.loss or True,  # a Loss is truthy
        batched=batched, args_axes=args_axes, strategy=strategy, differentiate=differentiate,
        gtol=gtol, ftol=ftol, xtol=xtol, abs_gtol=abs_gtol, max_steps=max_steps,
        lanes=lanes, progress=progress, vectorized=vectorized,
    )  # fmt: skip
    return _solve(residual_fun, x0, fixed, fixed_values, bounds, solver, args, options)


def _scipy_names(max_steps: int, max_nfev: int | None, x_scale: str | None) -> int:
    """``max_steps`` given as scipy's ``max_nfev``; ``x_scale`` checked."""
    if not (x_scale is None or (isinstance(x_scale, str) and x_scale == "jac")):
        raise ValueError(
            f"`x_scale` must be 'jac' (or None), got {x_scale!r}: Levenberg-Marquardt scales "
            "the parameters by the Jacobian's column norms (scipy's x_scale='jac')"
        )
    if max_nfev is None:
        return max_steps
    if max_steps != 1000:
        raise ValueError("give one of `max_steps` and `max_nfev` (the same limit)")
    return max_nfev


def _with_jac(fun: Callable[..., Any], jac: Any, x0: Any) -> Callable[..., Any]:
    """``fun`` with the Jacobian ``jac`` (scipy's ``jac``), or ``fun``."""
    jac = jacobian(jac, "trf")
    if jac is None:
        return fun
    if not (hasattr(x0, "shape") and len(x0.shape) in (1, 2)):
        raise TypeError("`jac` needs `x0` to be one array (n,) per row, not a tree")
    return WithJacobian(fun, hashable_function(jac, "jac"))


def _solve(
    fun: Callable[..., Any],
    x0: PyTree,
    fixed: Any,
    fixed_values: PyTree,
    bounds: Any,
    solver: Solver[Any],
    args: tuple[Any, ...] | list[Any],
    options: Options,
) -> Solution:
    """Validate the problem's data, then run the compiled solve."""
    if options.vectorized and getattr(solver, "scaling", None) == "hessian":
        raise ValueError(
            '`vectorized=True` cannot run LBFGS(scaling="hessian"): its Hessian-vector '
            "products at the start would send a batch of tangents through the "
            'objective\'s batching rule; use scaling="auto" or vectorized=False'
        )
    name = "residual_fun" if options.least_squares else "fun"
    fun = hashable_function(fun, name)
    args = args_tuple(args)
    check_params(x0, "x0")
    mask = fixed_arrays(fixed, x0)
    values = x0 if fixed_values is None else normalize_values(fixed_values, x0)
    bounds = normalize_bounds(bounds, x0)
    check_values_in_bounds(mask, values, bounds)
    if options.least_squares:  # minimize projects a start, as scipy's L-BFGS-B does
        check_start_in_bounds(mask, x0, bounds, options.batched)
    batch = batch_size(x0) if options.batched else 0
    check_has_entries(x0, options.batched)
    fun = UserFunction(fun, name, batch if options.batched else None)  # for the note on its errors
    batched = None
    if options.batched:
        batched = batched_args(args, options.args_axes, batch, {"x0": x0})
    if options.vectorized and batched is not None:
        fun_args = split_data(options.least_squares, args)[0]  # fun gets no Poisson counts
        check_rows_independent(fun, x0, fun_args, batched[: len(fun_args)])
    index = split_indices(mask, options.batched) if options.strategy == "split" else None
    plan = solve_plan(options, batch, batched)
    stopping = stopping_rules(options, x0)
    inputs = Inputs(x0, mask, values, bounds, args, index)
    solution: Solution = run(fun, solver, plan, inputs, stopping)
    return solution._replace(fixed=mask, bounds=bounds)


def solve_plan(options: Options, batch: int, batched_args: tuple[bool, ...] | None) -> Plan:
    """The static choices of the compiled program, from ``options``, for a batch of
    ``batch`` rows."""
    return Plan(
        least_squares=options.least_squares,
        batched_args=batched_args,
        lanes=None if options.lanes is None else min(options.lanes, batch),
        backend=jax.default_backend(),
        vectorized=options.vectorized,
        differentiate=options.differentiate,
        max_trips=options.differentiate.static_max_steps(options.max_steps),
        progress=options.progress,
    )


def stopping_rules(options: Options, x0: PyTree) -> Stopping:
    """The traced stopping rules of ``options``, with defaults from the dtype of ``x0``.

    ``gtol`` and ``xtol`` default to ``sqrt(eps)``: both tests are linear in the
    distance to the solution, so they ask for about half the digits of the dtype.
    ``ftol`` compares reductions of ``f``, quadratic in that distance: it defaults
    to ``eps`` (a reduction at the rounding level of ``f``), which asks for the
    same digits. (MINPACK's ``sqrt(eps)`` for ``ftol`` stops least-squares fits
    in float32 with 1-2 correct digits on ill-conditioned problems.)
    """
    dtype = jnp.result_type(*jax.tree.leaves(x0))
    eps = float(jnp.finfo(dtype).eps)
    precision = math.sqrt(eps)
    gtol, ftol, xtol, abs_gtol = options.tolerances

    def as_array(value: float | jax.Array | None, default: float) -> jax.Array:
        return jnp.asarray(default if value is None else value, dtype)

    return Stopping(
        gtol=as_array(gtol, precision),
        ftol=as_array(ftol, eps),
        xtol=as_array(xtol, precision),
        abs_gtol=as_array(abs_gtol, 0.0),
        max_steps=jnp.asarray(options.max_steps, jnp.int32),
        precision=as_array(precision, precision),
    )
