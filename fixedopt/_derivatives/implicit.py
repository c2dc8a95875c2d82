"""Implicit differentiation of a solution, on the free block only.

At a solution ``x*`` of one row, the free entries satisfy ``grad_F f(x*; args,
values) = 0``, fixed entries equal ``values`` and bound-active entries sit on their
bound. Differentiating that system (the implicit function theorem) gives

    dx_free  = -H_FF^+ (d grad_F f / d(args, values)) . (dargs, dvalues)
    dx_fixed = dvalues,      dx_active = 0 (or dbound),

where ``H_FF`` is the Hessian on the free block. Where ``H_FF`` is nonsingular,
``H_FF^+`` is its inverse; where it is singular (a rank-deficient fit: two parameters
that only enter as a product or a sum, a parameter nothing depends on),
``H_FF^+`` is its pseudo-inverse in units scaled to a unit diagonal
(:func:`pseudo_inverse`): of all the ``dx_free`` that keep the gradient at zero to
first order, the one of least ``|D dx_free|``, ``D^2 = |diag H_FF|``. That is the
derivative of the solution a Levenberg–Marquardt solve with Moré's scaling (this
library's, MINPACK's) reaches from the same start on a linear problem, since its
steps never move along the flat directions; a parameter nothing depends on gets 0.
The dense system (up to :data:`DENSE_UP_TO` entries) is formed and decomposed; a
larger one is solved by conjugate gradients from 0 on Hessian-vector products (the
minimum-norm solution of a consistent singular system).

Rows never mix: each row's derivative is computed from its own data. A row whose
gradient or free-block Hessian at its ``x`` is not finite (NaN data: its solve stopped
``NONFINITE``) has no solution to differentiate: its free entries, ``value`` and
``grad_norm`` get derivative 0, through selects (never ``0 * nan``), so that a loss
that ignores such a row, or sums over the batch, stays finite; fixed entries still
follow their fixed values. The tangent computations are rematerialized
(``jax.checkpoint``): reverse mode keeps only the inputs of the rule and recomputes
the rest in its backward pass, so the forward pass compiles almost nothing.

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
from fixedopt._numerics import bounds

DENSE_UP_TO = 256  # free-block systems up to this size are solved densely

# ``(x, fixed, values, args) -> f``: flat ``(n,)`` x, mask and values, a ``()`` result.
RowObjective = Callable[[jax.Array, jax.Array, jax.Array, PyTree], jax.Array]
# ``(x, fixed, values, args) -> grad``: a row objective's gradient in ``x``, ``(n,)``.
RowGradient = Callable[[jax.Array, jax.Array, jax.Array, PyTree], jax.Array]
Matvec = Callable[[jax.Array], jax.Array]
Inverse = Callable[[jax.Array], jax.Array]  # u -> the free block's pseudo-inverse times u


def pseudo_inverse(hessian: jax.Array, frozen: jax.Array) -> tuple[Inverse, jax.Array]:
    """``u -> H_FF^+ u`` on the free block of ``hessian`` (zero on ``frozen`` entries),
    and whether it is defined (a finite ``H_FF``).

    ``H_FF`` is scaled to a unit diagonal first (``D^-1 H_FF D^-1``, ``D^2 = |diag|``),
    so that the rule does not depend on the parameters' units; eigenvalues of the
    scaled matrix at most ``eps * n`` times the largest in magnitude count as zero (the
    cut-off of :func:`fixedopt.hessian_covariance`). A free entry whose row of ``H_FF``
    is zero (a parameter the objective does not depend on) gets exactly 0. Where
    ``H_FF`` is nonsingular this is its inverse.

    Example:
      >>> import jax.numpy as jnp
      >>> hessian = jnp.array([[1.0, 2.0, 0.0], [2.0, 4.0, 0.0], [0.0, 0.0, 9.0]])
      >>> inverse, defined = pseudo_inverse(hessian, jnp.array([False, False, True]))
      >>> print(inverse(jnp.array([1.0, 2.0, 5.0])).round(6), bool(defined))
      [0.5  0.25 0.  ] True

    (``x0 + 2 x1 = 1``, the rank-deficient block's one equation, at the least
    ``x0^2 + 4 x1^2``: the Euclidean minimum norm would be ``[0.2, 0.4]``.)
    """
    free = ~frozen[:, None] & ~frozen[None, :]
    hessian = jnp.where(free, 0.5 * (hessian + hessian.T), 0.0)
    frozen = frozen | jnp.all(hessian == 0.0, axis=1)  # exactly 0 where nothing depends
    defined = jnp.all(jnp.isfinite(hessian))
    hessian = jnp.where(defined, hessian, 0.0)  # LAPACK never sees a NaN
    diagonal = jnp.abs(jnp.diagonal(hessian))
    unit = jnp.sqrt(jnp.where(diagonal > 0, diagonal, 1.0))
    eigenvalues, vectors = jnp.linalg.eigh(hessian / (unit[:, None] * unit[None, :]))
    largest = jnp.max(jnp.abs(eigenvalues))
    cutoff = jnp.finfo(hessian.dtype).eps * hessian.shape[0] * largest
    kept = jnp.abs(eigenvalues) > cutoff
    inverse_eigenvalues = jnp.where(kept, 1.0 / jnp.where(kept, eigenvalues, 1.0), 0.0)

    def solve(_: Matvec, u: jax.Array) -> jax.Array:
        # Frozen entries of u are ignored too: symmetric, so reverse mode (which solves
        # with its cotangent) gives exact zeros there as well.
        u = jnp.where(frozen, 0.0, u)
        coefficients = inverse_eigenvalues * (vectors.T @ (u / unit))
        solution: jax.Array = (vectors @ coefficients) / unit
        return jnp.where(frozen, 0.0, solution)

    def matvec(v: jax.Array) -> jax.Array:
        return hessian @ v

    def apply(u: jax.Array) -> jax.Array:
        # Differentiated as a linear solve (d(H^+ u) = H^+ (du - dH H^+ u)), not
        # through the eigendecomposition: eigh's derivative divides by the gaps between
        # eigenvalues, infinite where two are equal (a Hessian 2 I).
        solution: jax.Array = jax.lax.custom_linear_solve(matvec, u, solve, symmetric=True)
        return solution

    return apply, defined


def _cg_inverse(matvec: Matvec) -> Inverse:
    """``u -> H^+ u`` by conjugate gradients from 0 (the minimum-norm solution of a
    consistent singular system; 0 for ``u = 0``), as a ``custom_linear_solve``: reverse
    mode solves with the cotangent. Not ``jax.scipy.sparse.linalg.cg``: it passes ``u``
    and its start through one ``device_put``, which makes the start a tangent too, and
    reverse mode then cannot transpose the solve (JAX 0.10: ``NotImplementedError``,
    for every row of more than :data:`DENSE_UP_TO` entries)."""

    def apply(u: jax.Array) -> jax.Array:
        solution: jax.Array = jax.lax.custom_linear_solve(
            matvec, u, _conjugate_gradients, symmetric=True
        )
        return solution

    return apply


# Conjugate gradients' iterates: x, the residual, the direction, |residual|^2, trips.
_Iterates = tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]


def _conjugate_gradients(matvec: Matvec, b: jax.Array) -> jax.Array:
    """``x`` with ``matvec(x) = b`` by conjugate gradients from 0 (Hestenes and Stiefel,
    1952), until ``|b - matvec(x)| <= 1e-12 |b|`` or ``10 n`` iterations (as
    ``jax.scipy.sparse.linalg.cg(tol=1e-12)`` before). The residual starts as ``b``,
    with no product: ``b = 0`` (a row whose derivative is not defined, its Hessian
    NaN) gives 0; a residual that is not finite ends the loop."""
    limit = 1e-24 * jnp.vdot(b, b)
    most = 10 * b.shape[0]

    def going(state: _Iterates) -> jax.Array:
        return (state[3] > limit) & (state[4] < most)

    def trip(state: _Iterates) -> _Iterates:
        x, residual, direction, squared, trips = state
        product = matvec(direction)
        alpha = squared / jnp.vdot(direction, product)
        x, residual = x + alpha * direction, residual - alpha * product
        new_squared = jnp.vdot(residual, residual)
        direction = residual + (new_squared / squared) * direction
        return x, residual, direction, new_squared, trips + 1

    start: _Iterates = (jnp.zeros_like(b), b, b, jnp.vdot(b, b), jnp.zeros((), jnp.int32))
    solution: jax.Array = jax.lax.while_loop(going, trip, start)[0]
    return solution


def _gated(defined: jax.Array, tangents: PyTree) -> PyTree:
    """``tangents`` where ``defined``, else zeros (a select: in reverse mode, a row
    whose derivative is not defined passes back exact zeros, not ``0 * nan``)."""
    return jax.tree.map(
        lambda t: jnp.where(defined, t, 0.0) if jnp.issubdtype(t.dtype, jnp.inexact) else t,
        tangents,
    )


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def implicit_solution(
    gradient: RowGradient,
    x_star: jax.Array,
    held: jax.Array,
    values: jax.Array,
    args: PyTree,
) -> jax.Array:
    """``x_star``, with the implicit derivative with respect to ``values`` and ``args``.

    Args:
      gradient: ``(x, held, values, args) -> (n,)``, the row objective's gradient in
        ``x`` with its held entries read from ``values`` (not stopped: this is where
        their derivative flows). It must close over no traced value.
      x_star: the solution, ``(n,)``, not differentiated.
      held: fixed or bound-active entries at ``x_star``, ``(n,)`` bool.
      values: the values of the held entries, ``(n,)``.
      args: the objective's extra arguments.
    """
    del gradient, held, values, args
    return x_star


@implicit_solution.defjvp
def _implicit_solution_jvp(
    gradient: RowGradient, primals: Sequence[Any], tangents: Sequence[Any]
) -> tuple[jax.Array, jax.Array]:
    x_star, held, values, args = primals
    _, _, d_values, d_args = tangents
    # The solution and its tangent are returned as functions of the inputs (this rule
    # again), not as the solver's number: differentiated once more (``jax.hessian``),
    # they move with the inputs. At x_star's own number the second derivative through
    # the solution was a silent 0.
    x_again = implicit_solution(gradient, x_star, held, values, args)
    # Rematerialized: reverse mode keeps only the inputs, not the linearization's
    # intermediates (a program of their own to compile before the backward pass).
    tangent = jax.checkpoint(functools.partial(implicit_tangent, gradient))
    return x_again, tangent(x_again, held, values, args, d_values, d_args)


def implicit_tangent(
    row_gradient: RowGradient,
    x_star: jax.Array,
    held: jax.Array,
    values: jax.Array,
    args: PyTree,
    d_values: jax.Array,
    d_args: PyTree,
) -> jax.Array:
    """``dx`` at ``x_star`` for tangents ``d_values`` and ``d_args``: ``d_values`` on
    held entries, ``-H_FF^+ (d grad_F)`` on the free block, 0 there where the gradient or
    Hessian at ``x_star`` is not finite."""

    def gradient(x: jax.Array, values: jax.Array, args: PyTree) -> jax.Array:
        return row_gradient(x, held, values, args)

    def free_gradient(values: jax.Array, args: PyTree) -> jax.Array:
        return jnp.where(held, 0.0, gradient(x_star, values, args))

    defined = jnp.all(jnp.isfinite(free_gradient(values, args)))
    if x_star.shape[0] <= DENSE_UP_TO:
        hessian = jax.jacfwd(lambda x: gradient(x, values, args))(x_star)
        inverse, finite_hessian = pseudo_inverse(hessian, held)
        defined = defined & finite_hessian
    else:

        def matvec(u: jax.Array) -> jax.Array:  # blockdiag(H_FF, I) u
            free_u = jnp.where(held, 0.0, u)
            product = jax.jvp(lambda x: gradient(x, values, args), (x_star,), (free_u,))[1]
            return jnp.where(held, u, product)

        inverse = _cg_inverse(matvec)
    gated = _gated(defined, (d_values, d_args))
    d_gradient = jax.jvp(free_gradient, (values, args), gated)[1]
    d_free = jnp.where(defined & ~held, -inverse(d_gradient), 0.0)
    return jnp.where(held, d_values, d_free)


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
    defined = jnp.isfinite(primal)
    tangent = jax.checkpoint(lambda i, d: jax.jvp(function, i, _gated(defined, d))[1])(
        tuple(inputs), tuple(d_inputs)
    )
    again = with_derivative(function, primal, *inputs)  # differentiable again (see above)
    return again, jnp.where(defined, jnp.asarray(tangent, primal.dtype), 0.0)


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
    start: jax.Array | None = None  # the solve's starting point, where a rule reads it
    # The objective's gradient in x, where the objective has one cheaper to differentiate
    # than jax.grad's (least squares: fixedopt._objective.problem.differentiable_gradient).
    gradient: RowGradient | None = None


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
    objective, args, fixed, values, lower, upper, active = problem[:7]
    gradient = problem.gradient or jax.grad(objective)
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
    x = implicit_solution(gradient, x, held, held_values, args)
    value = with_derivative(objective, value, x, held, held_values, args)
    grad_norm_of = functools.partial(_projected_grad_norm, gradient, has_bounds)
    grad_norm = with_derivative(
        grad_norm_of, grad_norm, x, held, held_values, args, fixed, lower, upper
    )
    return x, value, grad_norm


def _projected_grad_norm(
    gradient: RowGradient,
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
    grad = gradient(x, held, held_values, args)
    if has_bounds:
        grad = bounds.projected_gradient(x, grad, lower, upper)
    return jnp.max(jnp.abs(jnp.where(fixed, 0.0, grad)), initial=0.0)
