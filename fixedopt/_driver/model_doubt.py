"""Which least-squares verdicts the check after the loop looks at.

A least-squares solver's tests read first derivatives only: MINPACK's cosine (each
column of ``J`` against ``r``), the relative reduction and step of its model. Along a
long, curved valley of a large-residual fit (a fast bi-exponential T2 below the first
echo) the cosine is met short of the minimum; the Gauss-Newton model there predicts a
reduction far beyond what the verdict allows (1e-2 of the cost against 3.45e-6 in
float32), the true Hessian's Newton decrement a smaller one, still beyond it. So a
verdict the solver's own model doubts is checked after the loop by the true Hessian
(``fixedopt._driver.loop.certify``); one its model confirms stands, and the check's
program, with the model's second derivatives, is compiled only by a solve where some
row is doubted.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from fixedopt._contract.solver import Problem
from fixedopt._solvers import small_linalg
from fixedopt._solvers.normal_equations import normal_matrix


def normal_of(solver_state: Any) -> jax.Array | None:
    """``J^T J`` at the row's point from a least-squares solver's state (its
    ``normal``, or its ``jacobian``); None for a state that holds neither (static)."""
    normal = getattr(solver_state, "normal", None)
    if normal is not None:
        return jnp.asarray(normal)
    jacobian = getattr(solver_state, "jacobian", None)
    return None if jacobian is None else normal_matrix(jacobian)


def model_decrement(problem: Problem, x: jax.Array, grad: jax.Array,
                    normal: jax.Array) -> jax.Array:  # fmt: skip
    """The Gauss-Newton decrement ``g.(J^T J)^-1 g`` on the free entries (neither
    fixed nor pressed against a bound, as the true Hessian's check reads them), with a
    ridge of ``eps diag(J^T J)`` where ``J`` is rank-deficient: the reduction the
    solver's own model still predicts (twice)."""
    margin = jnp.minimum(problem.grad_norm(x, grad), 1e-3)
    free = ~problem.fixed & ~problem.at_bound(x, grad, margin)
    normal = normal.astype(jnp.promote_types(grad.dtype, jnp.float32))
    ridge = jnp.finfo(normal.dtype).eps * jnp.diagonal(normal)
    both = free[:, None] & free[None, :]
    matrix = jnp.where(both, normal + jnp.diag(ridge), jnp.eye(grad.shape[0], dtype=normal.dtype))
    g = jnp.where(free, grad, 0.0).astype(normal.dtype)
    # Rolled (one small loop): in every trip of the loop's program, the fewest kernels.
    return jnp.sum(g * small_linalg.eliminated_solve(matrix, g))
