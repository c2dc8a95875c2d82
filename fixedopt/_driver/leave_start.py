"""A start that met a convergence test but is no minimum (a maximum, a saddle point):
the row leaves it downhill along the direction of negative curvature its check found,
and the solver starts again from there (:func:`leave_start`, called by
:func:`fixedopt._driver.loop.certify` for a row at step 0).

A solver's own steps cannot leave such a point: its gradient is 0 (or its model sees
no curvature there, a Gauss–Newton model at a least-squares saddle), so every
direction it computes is 0 and every test it knows passes.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from fixedopt._contract.solver import Problem, Solver

# Trials along the check's step, each half the last: the step's length is the one at
# which the quadratic model would have lost |f|, which the true objective may not
# follow that far (1 - |x|^2 + |x|^4 from 0: back to f at the first trial).
TRIALS = 8


def leave_start(
    solver: Solver[Any],
    problem: Problem,
    leaving: jax.Array,
    x: jax.Array,
    value: jax.Array,
    step: jax.Array,
    solver_state: Any,
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array, Any]:
    """``(found, x, value, grad, solver_state)``: where ``leaving``, the first of
    ``TRIALS`` points ``project(x + step / 2^k)`` whose value is below ``value``, with
    the value, gradient and state ``solver.start`` gives there (``found`` True);
    else ``x``, ``value`` and ``solver_state`` unchanged (``grad`` then undefined:
    the caller keeps its own). The loop makes no trial for a row not ``leaving``."""

    def going(carry: tuple[Any, ...]) -> jax.Array:
        trials, found = carry[0], carry[1]
        goes: jax.Array = leaving & ~found & (trials < TRIALS)
        return goes

    def trial(carry: tuple[Any, ...]) -> tuple[Any, ...]:
        trials, _, *kept = carry
        fraction = jnp.asarray(0.5, x.dtype) ** trials.astype(x.dtype)
        point = problem.project(x + fraction * step)
        new_value, new_grad, new_state = solver.start(problem, point)
        lower = jnp.isfinite(new_value) & (new_value < value)
        tried = (point, new_value, new_grad, new_state)
        kept = jax.tree.map(lambda a, b: jnp.where(lower, a, b), tried, tuple(kept))
        return (trials + 1, lower, *kept)

    start = (jnp.zeros((), jnp.int32), jnp.zeros((), bool), x, value, jnp.zeros_like(x),
             solver_state)  # fmt: skip
    final: tuple[Any, ...] = problem.differentiate.loop(going, trial, start, TRIALS)
    _, found, x, value, grad, state = final
    return found, x, value, grad, state
