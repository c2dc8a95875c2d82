"""Implicit differentiation of a solution, on the free block only.

At a solution ``x*`` of one row, the free entries satisfy ``grad_F f(x*; args,
values) = 0``, fixed entries equal ``values`` and bound-active entries sit on their
bound. Differentiating that system (the implicit function theorem) gives

    dx_free  = -H_FF^{-1} (d grad_F f / d(args, values)) . (dargs, dvalues)
    dx_fixed = dvalues,      dx_active = 0,

where ``H_FF`` is the Hessian on the free block. The fixed entries make the full
Hessian singular; here the system is ``blockdiag(H_FF, I)``, which is not. It is
solved densely for small problems and by conjugate gradients (Hessian-vector
products) for large ones, inside ``lax.custom_linear_solve`` so that reverse mode
transposes it. No iteration of the solver is differentiated.

:func:`implicit_result` is the whole rule for one row (``fixedopt.Implicit``): ``x``
by the implicit function theorem, ``value`` and ``grad_norm`` differentiated at that
``x`` (the envelope theorem, for ``value``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fixedopt._inputs.validate import PyTree

DENSE_UP_TO = 256  # free-block systems up to this size are solved densely

# ``(x, fixed, values, args) -> f``: flat ``(n,)`` x, mask and values, a ``()`` result.
RowObjective = Callable[[jax.Array, jax.Array, jax.Array, PyTree], jax.Array]
Matvec = Callable[[jax.Array], jax.Array]


def _dense_solve(matvec: Matvec, rhs: jax.Array) -> jax.Array:
    matrix = jax.jacfwd(matvec)(jnp.zeros_like(rhs))
    solution: jax.Array = jnp.linalg.solve(matrix, rhs)
    return solution


def _cg_solve(matvec: Matvec, rhs: jax.Array) -> jax.Array:
    solution: jax.Array = jax.scipy.sparse.linalg.cg(
        matvec, rhs, tol=1e-12, maxiter=10 * rhs.shape[0]
    )[0]
    return solution


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def implicit_solution(
    objective: RowObjective,
    x_star: jax.Array,
    fixed: jax.Array,
    frozen: jax.Array,
    values: jax.Array,
    args: PyTree,
) -> jax.Array:
    """``x_star``, with the implicit derivative with respect to ``values`` and ``args``.

    Args:
      objective: ``(x, fixed, values, args) -> scalar``, the row objective with its
        fixed entries read from ``values`` (not stopped: this is where their gradient
        flows). It must close over no traced value.
      x_star: the solution, ``(n,)``, not differentiated.
      fixed: the fixed mask, ``(n,)`` bool.
      frozen: fixed or bound-active entries at ``x_star``, ``(n,)`` bool.
      values: the fixed values, ``(n,)``.
      args: the objective's extra arguments.
    """
    del objective, fixed, frozen, values, args
    return x_star


@implicit_solution.defjvp
def _implicit_solution_jvp(
    objective: RowObjective, primals: Sequence[Any], tangents: Sequence[Any]
) -> tuple[jax.Array, jax.Array]:
    x_star, fixed, frozen, values, args = primals
    _, _, _, d_values, d_args = tangents

    def gradient(x: jax.Array, values: jax.Array, args: PyTree) -> jax.Array:
        grad: jax.Array = jax.grad(objective)(x, fixed, values, args)
        return grad

    def free_gradient(values: jax.Array, args: PyTree) -> jax.Array:
        return jnp.where(frozen, 0.0, gradient(x_star, values, args))

    _, d_gradient = jax.jvp(free_gradient, (values, args), (d_values, d_args))

    def matvec(u: jax.Array) -> jax.Array:  # blockdiag(H_FF, I) u
        free_u = jnp.where(frozen, 0.0, u)
        hessian_u = jax.jvp(lambda x: gradient(x, values, args), (x_star,), (free_u,))[1]
        return jnp.where(frozen, u, hessian_u)

    solve = _dense_solve if x_star.shape[0] <= DENSE_UP_TO else _cg_solve
    d_free = jax.lax.custom_linear_solve(matvec, -d_gradient, solve, symmetric=True)
    d_x = jnp.where(fixed, d_values, jnp.where(frozen, 0.0, d_free))
    return x_star, d_x


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def with_derivative(
    function: Callable[..., jax.Array], primal: jax.Array, *inputs: PyTree
) -> jax.Array:
    """``primal``, differentiated as ``function(*inputs)``.

    ``primal`` is what the solver computed (``function(*inputs)`` up to rounding);
    ``function`` runs only when a derivative is asked for. It must close over no
    traced value.
    """
    del function, inputs
    return primal


@with_derivative.defjvp
def _with_derivative_jvp(
    function: Callable[..., jax.Array], primals: Sequence[Any], tangents: Sequence[Any]
) -> tuple[jax.Array, jax.Array]:
    primal, *inputs = primals
    _, *d_inputs = tangents
    d_inputs = [_float0_for_ints(a, d) for a, d in zip(inputs, d_inputs)]
    _, tangent = jax.jvp(function, tuple(inputs), tuple(d_inputs))
    return primal, jnp.asarray(tangent, primal.dtype)


def _float0_for_ints(primal: PyTree, tangent: PyTree) -> PyTree:
    """Boolean and integer inputs take ``float0`` tangents."""
    return jax.tree.map(
        lambda p, t: (
            t
            if jnp.issubdtype(jnp.result_type(p), jnp.inexact)
            else np.zeros(jnp.shape(p), jax.dtypes.float0)
        ),
        primal,
        tangent,
    )


class DerivativeProblem(NamedTuple):
    """One row as the derivative rule sees it: its objective, not stopped, and its
    constraints, flat (``(n,)`` arrays)."""

    objective: RowObjective  # (x, fixed, values, args) -> f; closes over no traced value
    args: PyTree  # the objective's extra arguments
    fixed: jax.Array  # bool
    fixed_values: jax.Array
    lower: jax.Array | None  # None without bounds
    upper: jax.Array | None
    active: jax.Array  # bool: the active set at the solution (fixedopt._fixing.mask.active_set)


def implicit_result(
    problem: DerivativeProblem, x: jax.Array, value: jax.Array, grad_norm: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(x, value, grad_norm)`` of a row's solution with their true derivatives,
    computed only when differentiated.

    ``x`` gets the implicit derivative with respect to the fixed values, ``args``
    and the bounds: bound-active entries are held like fixed ones, at their
    bound, so ``dx/dbound`` is 1 there and the free block responds to it. ``value``
    and ``grad_norm`` are differentiated as the objective and the projected
    gradient's max-norm at that ``x`` (the envelope theorem, for ``value``).
    """
    objective, args, fixed, values, lower, upper, active = problem
    has_bounds = lower is not None and upper is not None
    active_lower = active_upper = jnp.zeros_like(fixed)
    if lower is None or upper is None:
        lower = upper = values  # unused without bounds
    else:
        active_lower = active & (x <= jax.lax.stop_gradient(lower))
        active_upper = active & (x >= jax.lax.stop_gradient(upper))
    held = fixed | active_lower | active_upper
    at_bound = jnp.where(active_lower, lower, jnp.where(active_upper, upper, 0.0))
    held_values = jnp.where(fixed, values, at_bound)
    x = implicit_solution(objective, x, held, held, held_values, args)
    value = with_derivative(objective, value, x, held, held_values, args)
    grad_norm_of = functools.partial(_projected_grad_norm, objective, has_bounds)
    grad_norm = with_derivative(
        grad_norm_of, grad_norm, x, held, held_values, args, fixed, lower, upper
    )
    return x, value, grad_norm


def _projected_grad_norm(
    objective: RowObjective,
    has_bounds: bool,
    x: jax.Array,
    held: jax.Array,
    held_values: jax.Array,
    args: PyTree,
    fixed: jax.Array,
    lower: jax.Array,
    upper: jax.Array,
) -> jax.Array:
    """The max-norm of the projected gradient over free entries (differentiable)."""
    grad = jax.grad(objective)(x, held, held_values, args)
    if has_bounds:
        grad = x - jnp.clip(x - grad, lower, upper)
    return jnp.max(jnp.abs(jnp.where(fixed, 0.0, grad)), initial=0.0)
