"""L-BFGS with fixed entries and bounds: every direction lives in the free subspace."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from fixedopt._linesearch import projected_backtracking
from fixedopt._loop import Solver, Step, failed_or_running
from fixedopt._problem import Problem


class LBFGSState(NamedTuple):
    s_history: jax.Array  # (memory_size, n), oldest first; unused rows are zero
    y_history: jax.Array
    gamma: jax.Array  # scale of the initial inverse Hessian, s.y / y.y of the last pair
    pairs: jax.Array  # how many curvature pairs have been stored (saturates)


def two_loop(grad, s_history, y_history, gamma):
    """``H @ grad`` for the L-BFGS inverse Hessian ``H`` (Nocedal 1980).

    Pairs with ``s.y <= 0`` (empty slots, or pairs whose curvature vanished once
    masked to the free subspace) get ``rho = 0`` and drop out, branch-free. The two
    loops are ``lax.scan``s: a small program, whatever the memory size.
    """
    sy = jnp.sum(s_history * y_history, axis=1)
    rho = jnp.where(sy > 0, 1.0 / jnp.where(sy > 0, sy, 1.0), 0.0)

    def newest_to_oldest(q, pair):
        s, y, rho = pair
        alpha = rho * jnp.dot(s, q)
        return q - alpha * y, alpha

    def oldest_to_newest(r, pair):
        s, y, rho, alpha = pair
        beta = rho * jnp.dot(y, r)
        return r + (alpha - beta) * s, None

    q, alphas = jax.lax.scan(newest_to_oldest, grad, (s_history, y_history, rho), reverse=True)
    r, _ = jax.lax.scan(oldest_to_newest, gamma * q, (s_history, y_history, rho, alphas))
    return r


@dataclasses.dataclass(frozen=True)
class LBFGS(Solver):
    """Limited-memory BFGS with fixed entries and box bounds (L-BFGS-B quality).

    Every row solves in its own free subspace: the search direction, the curvature
    pairs and the initial scaling are all computed with fixed entries masked out.
    Bounds use the two-metric projection of Bertsekas (1982): free entries at (or
    within a shrinking margin of) a bound that the gradient pushes against form the
    active set for this iteration; they take a scaled projected-gradient step while
    the others take the quasi-Newton step restricted to the rest, and a projected
    backtracking line search keeps every iterate feasible. The result is the
    stationary point that L-BFGS-B (Byrd, Lu, Nocedal, Zhu 1995) finds.

    Args:
      memory_size: number of curvature pairs kept.
      max_linesearch_steps: trials per line search before the row stops with
        ``Status.LINESEARCH_FAILED``.

    Example:
      >>> import jax.numpy as jnp
      >>> import fixedopt
      >>> fun = lambda x: jnp.sum((x - 3.0) ** 2) + x[0] * x[1]
      >>> x0 = jnp.array([1.0, 0.0, 0.0])
      >>> fixed = jnp.array([True, False, False])
      >>> sol = fixedopt.minimize(fun, x0, fixed, solver=fixedopt.LBFGS(memory_size=5))
      >>> print(sol.x.round(3), fixedopt.Status(int(sol.status)).name)
      [1.  2.5 3. ] CONVERGED
    """

    memory_size: int = 10
    max_linesearch_steps: int = 30

    def __post_init__(self):
        if not (isinstance(self.memory_size, int) and self.memory_size >= 1):
            raise ValueError(f"`memory_size` must be an int >= 1, got {self.memory_size!r}")
        if not (isinstance(self.max_linesearch_steps, int) and self.max_linesearch_steps >= 1):
            raise ValueError(
                f"`max_linesearch_steps` must be an int >= 1, got {self.max_linesearch_steps!r}"
            )

    def init(self, problem: Problem, x, value, grad) -> LBFGSState:
        history = jnp.zeros((self.memory_size, x.shape[0]), x.dtype)
        return LBFGSState(history, history, jnp.ones((), x.dtype), jnp.zeros((), jnp.int32))

    def step(self, problem: Problem, x, value, grad, state: LBFGSState) -> Step:
        margin = jnp.minimum(problem.grad_norm(x, grad), 1e-3)
        active = problem.at_bound(x, grad, margin)
        s_history, y_history = state.s_history, state.y_history
        if problem.has_bounds:  # without bounds, pairs are already zero on fixed entries
            free = ~problem.fixed & ~active
            s_history = jnp.where(free[None, :], s_history, 0.0)
            y_history = jnp.where(free[None, :], y_history, 0.0)
        quasi_newton = -two_loop(jnp.where(active, 0.0, grad), s_history, y_history, state.gamma)
        direction = jnp.where(active, -state.gamma * grad, quasi_newton)
        direction = jnp.where(problem.fixed, 0.0, direction)
        steepest = jnp.where(problem.fixed, 0.0, -state.gamma * grad)
        direction = jnp.where(jnp.dot(grad, direction) < 0, direction, steepest)
        first = state.pairs == 0
        grad_size = jnp.linalg.norm(jnp.where(problem.fixed, 0.0, grad))
        initial_step = jnp.where(first, jnp.minimum(1.0, 1.0 / grad_size), 1.0)

        def evaluate(x_trial):
            return (*problem.value_and_grad(x_trial), None)

        search = projected_backtracking(
            problem, evaluate, x, value, grad, direction, initial_step,
            max_steps=self.max_linesearch_steps,
        )  # fmt: skip
        accepted = search.accepted
        new_state = self._remember(state, search.x - x, search.grad - grad, accepted)
        keep = lambda new, old: jnp.where(accepted, new, old)
        return Step(
            x=keep(search.x, x),
            value=keep(search.value, value),
            grad=keep(search.grad, grad),
            state=new_state,
            outcome=failed_or_running(accepted, search.nonfinite),
            moved=accepted,
        )

    def _remember(self, state: LBFGSState, s, y, accepted) -> LBFGSState:
        """Append the pair ``(s, y)`` if it carries positive curvature."""
        sy, yy = jnp.dot(s, y), jnp.dot(y, y)
        good = accepted & (sy > jnp.finfo(s.dtype).eps * yy)
        push = lambda history, new: jnp.where(
            good, jnp.concatenate([history[1:], new[None]]), history
        )
        return LBFGSState(
            s_history=push(state.s_history, s),
            y_history=push(state.y_history, y),
            gamma=jnp.where(good, sy / jnp.where(good, yy, 1.0), state.gamma),
            pairs=jnp.minimum(state.pairs + good, self.memory_size).astype(jnp.int32),
        )
