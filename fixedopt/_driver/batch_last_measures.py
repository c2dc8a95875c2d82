"""The reductions over a row's entries of :mod:`fixedopt._driver.batch_last`: the
measures of Levenberg–Marquardt and of the driver's tests with the batch last (``x``
and ``grad`` ``(n, B)``, ``J^T J`` ``(n, n, B)``, a row's scalars ``(B,)``), each the
formula of the function it names, its sums over axis 0 and unrolled over ``n``."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from fixedopt._contract.solver import Problem
from fixedopt._numerics import bounds, reduce
from fixedopt._solvers.levenberg_marquardt import LevenbergMarquardtState


def residual_norm(r: jax.Array, squared: jax.Array) -> jax.Array:
    """``normal_equations.residual_norm`` of ``r`` (``(m, B)``), ``squared = |r|^2``."""
    finfo = jnp.finfo(squared.dtype)
    in_range = (squared >= finfo.tiny / finfo.eps) & (squared <= finfo.max * finfo.eps)
    scaled = ~in_range & jnp.any(r != 0, axis=0)
    safe = jnp.where(scaled, r, 1.0)
    unit = reduce.power_of_two(jnp.max(jnp.abs(safe), axis=0, initial=0.0))
    scaled_norm = unit * jnp.sqrt(jnp.sum((safe / unit[None]) ** 2, axis=0))
    scaled_norm = scaled_norm.astype(squared.dtype)
    positive = squared > 0
    root = jnp.where(positive, jnp.sqrt(jnp.where(positive, squared, 1.0)), 0.0)
    return jnp.where(scaled, scaled_norm, root)


def diagonal(normal: jax.Array) -> jax.Array:
    """The diagonal ``(n, B)`` of ``J^T J`` (``(n, n, B)``)."""
    return jnp.stack([normal[i, i] for i in range(normal.shape[0])])


def grad_norm(problem: Problem, x: jax.Array, grad: jax.Array) -> jax.Array:
    """``Problem.grad_norm`` of every row."""
    return jnp.max(jnp.abs(problem.projected_gradient(x, grad)), axis=0, initial=0.0)


def cosine(problem: Problem, x: jax.Array, grad: jax.Array,
            state: LevenbergMarquardtState) -> jax.Array:  # fmt: skip
    """``LevenbergMarquardt.gradient_measure`` (``normal_equations.cosine``) of every row."""
    columns = problem.free_part(diagonal(state.normal).astype(x.dtype))
    magnitude = jnp.abs(problem.free_part(grad))
    denominator = jnp.sqrt(columns) * state.residual_norm[None]
    ratio = magnitude / jnp.where(magnitude == 0, 1.0, denominator)
    measure = jnp.where(magnitude == 0, 0.0, ratio)
    if problem.lower is not None:
        upper = jnp.inf if problem.upper is None else problem.upper
        step = -problem.free_part(grad) / jnp.where(columns > 0, columns, 1.0)
        share = bounds.box_share(x, step, problem.lower, upper)
        measure = jnp.where(share == 0, 0.0, measure * bounds.reduction_share(share))
    return jnp.max(measure, axis=0, initial=0.0)


def infeasible(problem: Problem) -> jax.Array:
    """``loop._infeasible`` of every row."""
    if problem.lower is None or problem.upper is None:
        return jnp.zeros(problem.fixed.shape[1:], bool)
    empty = ~(problem.lower <= problem.upper)
    values = problem.fixed_values
    outside = (values < problem.lower) | (values > problem.upper)
    return jnp.any(empty & ~problem.fixed, axis=0) | jnp.any(outside & problem.fixed, axis=0)


def solve(normal: jax.Array, grad: jax.Array, free: jax.Array, damping: Any,
           scale: jax.Array) -> jax.Array:  # fmt: skip
    """``normal_equations.normal_equations_step`` of every row: ``(J^T J + damping D^2)
    s = -g`` on the free entries, by the unrolled Cholesky factor of
    ``small_linalg.spd_solve`` on ``(B,)`` vectors."""
    n = grad.shape[0]
    damping = jnp.asarray(damping, normal.dtype)
    damping = damping[None] if damping.ndim else damping
    weight = jnp.maximum(damping * scale.astype(normal.dtype), jnp.finfo(normal.dtype).tiny)
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


def quadratic(normal: jax.Array, v: jax.Array) -> jax.Array:
    """``v . (J^T J) v`` of every row (``(B,)``)."""
    n = v.shape[0]
    return sum((v[i] * sum((normal[i, j] * v[j] for j in range(n)), jnp.zeros_like(v[0]))
                for i in range(n)), jnp.zeros_like(v[0]))  # fmt: skip


def relative_step(problem: Problem, x: jax.Array, step: jax.Array, scale: jax.Array) -> jax.Array:
    """``normal_equations.relative_step_size`` of every row."""
    d = jnp.sqrt(scale)
    ds, dx = d * step, problem.free_part(d * x)
    size = jnp.maximum(jnp.max(jnp.abs(ds), axis=0, initial=0.0),
                       jnp.max(jnp.abs(dx), axis=0, initial=0.0))  # fmt: skip
    unit = reduce.power_of_two(size)
    step_norm = jnp.sqrt(jnp.sum((ds / unit[None]) ** 2, axis=0))
    x_norm = jnp.sqrt(jnp.sum((dx / unit[None]) ** 2, axis=0))
    return jnp.where(step_norm == 0, 0.0, step_norm / x_norm)


def trapped(problem: Problem, x: jax.Array, trial: jax.Array, normal: jax.Array,
             trial_normal: jax.Array) -> jax.Array:  # fmt: skip
    """``levenberg_marquardt._trapped`` of every row (``(n, B)``)."""
    if problem.lower is None or problem.upper is None:
        return jnp.zeros(x.shape, bool)
    on_bound = (trial == problem.lower) | (trial == problem.upper)
    landed = on_bound & (trial != x) & ~problem.fixed
    column, trial_column = diagonal(normal), diagonal(trial_normal)
    vanished = (column != 0) & (trial_column == 0) & ~problem.fixed
    return landed & jnp.any(vanished, axis=0)[None]


def cauchy(normal: jax.Array, grad: jax.Array, free: jax.Array, scale: jax.Array,
            damping: float) -> jax.Array:  # fmt: skip
    """``normal_equations.cauchy_reduction`` of every row."""
    v = jnp.where(free & (scale > 0), grad / jnp.where(scale > 0, scale, 1.0), 0.0)
    gv = jnp.sum(grad * v, axis=0)
    curvature = quadratic(normal, v.astype(normal.dtype)).astype(gv.dtype) + damping * gv
    ratio = gv / jnp.where(curvature > 0, curvature, 1.0)
    return jnp.where(curvature > 0, 0.5 * gv * ratio, 0.0)
