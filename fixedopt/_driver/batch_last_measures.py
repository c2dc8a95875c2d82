"""The reductions over a row's entries of :mod:`fixedopt._driver.batch_last`: the
measures of Levenberg–Marquardt and of the driver's tests with the batch last (``x``
and ``grad`` ``(n, *B)``, ``J^T J`` ``(n, n, *B)``, a row's scalars ``B``-shaped), each
the formula of the function it names, its sums over axis 0 and unrolled over ``n``."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from fixedopt._contract.solver import Problem
from fixedopt._numerics import bounds


def diagonal(normal: jax.Array) -> jax.Array:
    """The diagonal ``(n, *B)`` of ``J^T J`` (``(n, n, *B)``)."""
    return jnp.stack([normal[i, i] for i in range(normal.shape[0])])


def grad_norm(problem: Problem, x: jax.Array, grad: jax.Array) -> jax.Array:
    """``Problem.grad_norm`` of every row."""
    return jnp.max(jnp.abs(problem.projected_gradient(x, grad)), axis=0, initial=0.0)


def cosine(problem: Problem, x: jax.Array, grad: jax.Array, normal: jax.Array,
           norm: jax.Array, walking: jax.Array) -> jax.Array:  # fmt: skip
    """``LevenbergMarquardt.gradient_measure`` (``normal_equations.cosine``, ``inf``
    while the row walks) of every row."""
    columns = problem.free_part(diagonal(normal).astype(x.dtype))
    magnitude = jnp.abs(problem.free_part(grad))
    denominator = jnp.sqrt(columns) * norm[None]
    ratio = magnitude / jnp.where(magnitude == 0, 1.0, denominator)
    measure = jnp.where(magnitude == 0, 0.0, ratio)
    if problem.lower is not None:
        upper = jnp.inf if problem.upper is None else problem.upper
        step = -problem.free_part(grad) / jnp.where(columns > 0, columns, 1.0)
        share = bounds.box_share(x, step, problem.lower, upper)
        measure = jnp.where(share == 0, 0.0, measure * bounds.reduction_share(share))
    return jnp.where(walking, jnp.inf, jnp.max(measure, axis=0, initial=0.0))


def infeasible(problem: Problem) -> jax.Array:
    """``loop._infeasible`` of every row."""
    if problem.lower is None or problem.upper is None:
        return jnp.zeros(problem.fixed.shape[1:], bool)
    empty = ~(problem.lower <= problem.upper)
    values = problem.fixed_values
    outside = (values < problem.lower) | (values > problem.upper)
    return jnp.any(empty & ~problem.fixed, axis=0) | jnp.any(outside & problem.fixed, axis=0)


def solve(normal: jax.Array, grad: jax.Array, free: jax.Array, damping: jax.Array,
          scale: jax.Array) -> jax.Array:  # fmt: skip
    """``normal_equations.normal_equations_step`` of every row: ``(J^T J + damping D^2)
    s = -g`` on the free entries, by the unrolled Cholesky factor of
    ``small_linalg.spd_solve`` on the batch's arrays, for each of the ``k`` dampings
    ``damping`` (``(k, *B)``: the damped and the undamped systems, traced once for
    both); the solutions ``(n, k, *B)``."""
    n = grad.shape[0]
    normal, grad, free, scale = normal[:, :, None], grad[:, None], free[:, None], scale[:, None]
    tiny = jnp.finfo(normal.dtype).tiny
    weight = [jnp.maximum(damping * scale[j].astype(normal.dtype), tiny) for j in range(n)]
    lower: list[list[jax.Array]] = [[] for _ in range(n)]
    for j in range(n):
        for i in range(j, n):
            entry = normal[i, j] + weight[j] if i == j else normal[i, j]
            entry = jnp.where(free[i] & free[j], entry, 0.0)
            if i == j:
                entry = entry + jnp.where(free[j], 0.0, 1.0)
            for k in range(j):
                entry = entry - lower[i][k] * lower[j][k]
            if i == j:
                lower[j].append(jnp.sqrt(entry))
                inverse = 1.0 / lower[j][j]
            else:
                lower[i].append(entry * inverse)
    rhs = jnp.where(free, -grad, 0.0).astype(normal.dtype)
    forward: list[jax.Array] = []
    for i in range(n):
        entry = rhs[i]
        for k in range(i):
            entry = entry - lower[i][k] * forward[k]
        forward.append(entry / lower[i][i])
    solution: list[Any] = [None] * n
    for i in reversed(range(n)):
        entry = forward[i]
        for k in reversed(range(i + 1, n)):
            entry = entry - lower[k][i] * solution[k]
        solution[i] = entry / lower[i][i]
    return jnp.where(free, jnp.stack(solution), 0.0).astype(grad.dtype)


def matvec(normal: jax.Array, v: jax.Array) -> jax.Array:
    """``(J^T J) v`` of every row (``(n, *B)``)."""
    n = v.shape[0]
    return jnp.stack([sum((normal[i, j] * v[j] for j in range(1, n)), normal[i, 0] * v[0])
                      for i in range(n)])  # fmt: skip


def trapped(problem: Problem, x: jax.Array, trial: jax.Array, normal: jax.Array,
            trial_normal: jax.Array) -> jax.Array:  # fmt: skip
    """``levenberg_marquardt._trapped`` of every row (``(n, *B)``)."""
    if problem.lower is None or problem.upper is None:
        return jnp.zeros(x.shape, bool)
    on_bound = (trial == problem.lower) | (trial == problem.upper)
    landed = on_bound & (trial != x) & ~problem.fixed
    column, trial_column = diagonal(normal), diagonal(trial_normal)
    vanished = (column != 0) & (trial_column == 0) & ~problem.fixed
    return landed & jnp.any(vanished, axis=0)[None]
