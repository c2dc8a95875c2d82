"""``minimize`` and ``least_squares``: validate, batch, and run the solver loop."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from fixedopt import _mask
from fixedopt._loop import Solver, iterate
from fixedopt._problem import Problem
from fixedopt._solution import Solution, Status
from fixedopt._solvers.gauss_newton import LevenbergMarquardt
from fixedopt._solvers.lbfgs import LBFGS

STRATEGIES = ("mask",)


def minimize(
    fun: Callable,
    x0: Any,
    fixed: Any,
    *,
    fixed_values: Any = None,
    bounds: Any = None,
    solver: Solver | None = None,
    args: tuple = (),
    batched: bool = False,
    strategy: str = "mask",
    gtol: float = 1e-6,
    ftol: float = 0.0,
    max_steps: int = 1000,
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
      args: extra positional arguments of ``fun``. With ``batched=True`` every array
        in ``args`` has the leading batch axis; Python scalars are shared.
      batched: solve one independent problem per row of the leading axis; each row
        converges and reports on its own. ``jax.vmap`` over an unbatched call agrees.
      strategy: ``"mask"`` (the objective is masked in place).
      gtol: a row converges when the max-norm of its projected gradient over free
        entries is at most ``gtol``.
      ftol: a row stops with ``Status.STALLED`` when a step decreases the objective by
        at most ``ftol * max(|f|, 1)``; 0 (the default) disables the test.
      max_steps: the iteration limit per row.

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
    _check_solver(solver, needs_residuals=False, caller="minimize")
    return _solve(
        fun, x0, fixed, fixed_values, bounds, solver, args, batched, strategy,
        gtol, ftol, max_steps, least_squares=False,
    )  # fmt: skip


def least_squares(
    residual_fun: Callable,
    x0: Any,
    fixed: Any,
    *,
    fixed_values: Any = None,
    bounds: Any = None,
    solver: Solver | None = None,
    args: tuple = (),
    batched: bool = False,
    strategy: str = "mask",
    gtol: float = 1e-6,
    ftol: float = 0.0,
    max_steps: int = 1000,
) -> Solution:
    """Minimize ``0.5 * sum(residual_fun(x, *args) ** 2)`` with fixed entries pinned.

    The same arguments and guarantees as :func:`fixedopt.minimize`; ``residual_fun``
    returns an array (any shape) of residuals for ONE problem. The default solver is
    :class:`fixedopt.LevenbergMarquardt`; :class:`fixedopt.GaussNewton` and every
    ``minimize`` solver work too. ``Solution.value`` follows scipy's convention,
    ``0.5 * sum(residuals**2)``.

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
    _check_solver(solver, needs_residuals=True, caller="least_squares")
    return _solve(
        residual_fun, x0, fixed, fixed_values, bounds, solver, args, batched, strategy,
        gtol, ftol, max_steps, least_squares=True,
    )  # fmt: skip


def _check_solver(solver, *, needs_residuals: bool, caller: str) -> None:
    if not isinstance(solver, Solver):
        raise TypeError(
            f"`solver` must be a fixedopt solver such as fixedopt.LBFGS(), got "
            f"{type(solver).__name__}; wrap an optax optimizer as fixedopt.Optax(...)"
        )
    if solver.needs_residuals and not needs_residuals:
        raise TypeError(
            f"`solver` {type(solver).__name__} needs residuals: use "
            f"fixedopt.least_squares instead of fixedopt.{caller}"
        )


def _check_options(strategy, gtol, ftol, max_steps) -> None:
    if strategy not in STRATEGIES:
        raise ValueError(f"`strategy` must be one of {STRATEGIES}, got {strategy!r}")
    for name, value in (("gtol", gtol), ("ftol", ftol)):
        if not (isinstance(value, (int, float)) and value >= 0):
            raise ValueError(f"`{name}` must be a number >= 0, got {value!r}")
    if not (isinstance(max_steps, int) and max_steps >= 0):
        raise ValueError(f"`max_steps` must be an int >= 0, got {max_steps!r}")


def _batch_size(x0, name: str = "x0") -> int:
    sizes = {}
    for path, leaf in jax.tree_util.tree_leaves_with_path(x0):
        if leaf.ndim == 0:
            raise ValueError(
                f"`{name}` leaf {jax.tree_util.keystr(path)} has no batch axis "
                "(batched=True needs a leading batch axis on every leaf), got shape ()"
            )
        sizes[jax.tree_util.keystr(path)] = leaf.shape[0]
    if len(set(sizes.values())) > 1:
        raise ValueError(f"`{name}` leaves disagree on the batch size: {sizes}")
    return next(iter(sizes.values()))


def _args_axes(args, batch: int):
    """``vmap`` axes for ``args``: 0 for arrays (checked), None for Python scalars."""
    if not isinstance(args, tuple):
        raise TypeError(f"`args` must be a tuple, got {type(args).__name__}")

    def axis(path, leaf):
        if not hasattr(leaf, "shape"):
            return None
        if leaf.ndim == 0 or leaf.shape[0] != batch:
            raise ValueError(
                f"`args`{jax.tree_util.keystr(path)} must have the leading batch axis of "
                f"size {batch} (the batch size of x0), got shape {tuple(leaf.shape)}"
            )
        return 0

    return jax.tree_util.tree_map_with_path(axis, args)


def _solve(fun, x0, fixed, fixed_values, bounds, solver, args, batched, strategy,
           gtol, ftol, max_steps, *, least_squares):  # fmt: skip
    _check_options(strategy, gtol, ftol, max_steps)
    _mask.check_params(x0, "x0")
    mask = _mask.normalize_fixed(fixed, x0, "fixed")
    mask = jax.tree.map(lambda m, leaf: jnp.broadcast_to(m, leaf.shape), mask, x0)
    values = x0 if fixed_values is None else _mask.normalize_values(fixed_values, x0)
    bounds = _mask.normalize_bounds(bounds, x0)
    _mask.check_values_in_bounds(mask, values, bounds)
    if batched:
        _args_axes(args, _batch_size(x0))  # validates before tracing
    return _run(
        fun, solver, least_squares, batched, x0, mask, values, bounds, args,
        jnp.asarray(gtol), jnp.asarray(ftol), jnp.asarray(max_steps, jnp.int32),
    )  # fmt: skip


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3))
def _run(fun, solver, least_squares, batched, x0, mask, values, bounds, args,
         gtol, ftol, max_steps):  # fmt: skip
    """Compiled once per (fun, solver, kind, batching, shapes); masks are data."""
    solve_row = functools.partial(_solve_row, fun, solver, least_squares)
    if not batched:
        return solve_row(x0, mask, values, bounds, args, gtol, ftol, max_steps)
    in_axes = (0, 0, 0, 0, _args_axes(args, _batch_size(x0)), None, None, None)
    return jax.vmap(solve_row, in_axes=in_axes)(
        x0, mask, values, bounds, args, gtol, ftol, max_steps
    )


def _solve_row(fun, solver, least_squares, x0, mask, values, bounds, args,
               gtol, ftol, max_steps) -> Solution:  # fmt: skip
    flat_x0, unravel = ravel_pytree(x0)
    flat_fixed = ravel_pytree(mask)[0]
    flat_values = ravel_pytree(values)[0]
    pinned = jax.lax.stop_gradient(flat_values)

    def call(flat_x):
        return fun(unravel(jnp.where(flat_fixed, pinned, flat_x)), *args)

    objective = _residual_problem(call, x0) if least_squares else _scalar_problem(call, x0)
    lower, upper = (None, None) if bounds is None else (ravel_pytree(b)[0] for b in bounds)
    problem = Problem(fixed=flat_fixed, fixed_values=flat_values, lower=lower, upper=upper,
                      **objective)  # fmt: skip
    final = iterate(solver, problem, flat_x0, gtol=gtol, ftol=ftol, max_steps=max_steps)
    return Solution(
        x=unravel(final.x),
        value=final.value,
        grad_norm=final.grad_norm,
        steps=final.steps,
        converged=final.status == Status.CONVERGED,
        status=final.status,
    )


def _scalar_problem(call, x0) -> dict:
    out = jax.eval_shape(call, ravel_pytree(x0)[0])
    if not (hasattr(out, "shape") and out.shape == () and jnp.issubdtype(out.dtype, jnp.floating)):
        raise ValueError(
            "`fun` must return a floating-point scalar for one problem, got "
            f"{getattr(out, 'dtype', type(out).__name__)} of shape {getattr(out, 'shape', '?')}"
        )
    return {"value_and_grad": jax.value_and_grad(call)}


def _residual_problem(call, x0) -> dict:
    flat_x0 = ravel_pytree(x0)[0]
    out = jax.eval_shape(call, flat_x0)
    if not (hasattr(out, "dtype") and jnp.issubdtype(out.dtype, jnp.floating)):
        raise ValueError(
            "`residual_fun` must return a floating-point array of residuals, got "
            f"{getattr(out, 'dtype', type(out).__name__)}"
        )
    # Forward mode when there are at least as many residuals as unknowns.
    jacobian_of = jax.jacfwd if out.size >= flat_x0.size else jax.jacrev

    def residual(flat_x):
        return jnp.ravel(call(flat_x))

    def value_and_grad(flat_x):
        r, pullback = jax.vjp(residual, flat_x)
        return 0.5 * jnp.dot(r, r), pullback(r)[0]

    def residual_and_jacobian(flat_x):
        def with_aux(x):
            r = residual(x)
            return r, r

        jacobian, r = jacobian_of(with_aux, has_aux=True)(flat_x)
        return r, jacobian

    return {
        "value_and_grad": value_and_grad,
        "residual_and_jacobian": residual_and_jacobian,
    }
