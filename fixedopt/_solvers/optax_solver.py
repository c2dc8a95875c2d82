"""Any optax optimizer as a fixedopt solver, through ``keep_fixed``."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import optax

from fixedopt._contract.solver import Problem, Solver, Step, StepContext
from fixedopt._contract.status import Outcome
from fixedopt._fixing.keep_fixed import keep_fixed
from fixedopt._numerics import reduce
from fixedopt._solvers.linesearch import within_rounding


@dataclasses.dataclass(frozen=True)
class Optax(Solver[optax.OptState]):
    """Run any optax optimizer to a tolerance or a step count, fixed entries frozen.

    The optimizer is wrapped in :func:`fixedopt.keep_fixed`, receives the masked
    gradient and the extra arguments ``value``, ``grad`` and ``value_fn`` (so
    ``optax.lbfgs`` and its line search work), and every iterate is projected onto the
    bounds. A step that produces a non-finite objective stops the row with
    ``Status.NONFINITE`` at its last finite iterate.

    With ``differentiate="unroll"``, an optimizer whose update runs a
    ``lax.while_loop`` (``optax.lbfgs`` and the other optax line searches) raises a
    ``ValueError`` when the solve is traced: reverse-mode differentiation cannot pass
    a while loop. ``differentiate="implicit"`` differentiates any optimizer's
    converged solution.

    Create it once and reuse it: optax optimizers are pairs of closures, so two calls
    of ``optax.adam(0.1)`` give unequal objects, and a solve with a new
    ``fixedopt.Optax(optax.adam(0.1))`` compiles anew (the solver is part of the
    compiled program's key). Without a model of the objective, only the gradient
    tests apply (``gtol`` with the secant curvature, ``abs_gtol``); a row whose ``x``
    or ``f`` stops changing ends as STALLED, or CONVERGED if stationary to precision.

    Args:
      optimizer: an ``optax.GradientTransformation``.

    Example:
      >>> import jax.numpy as jnp, optax
      >>> import fixedopt
      >>> fun = lambda x: jnp.sum((x - 3.0) ** 2)
      >>> sol = fixedopt.minimize(fun, jnp.zeros(2), jnp.array([False, True]),
      ...                         solver=fixedopt.Optax(optax.lbfgs()))
      >>> print(sol.x.round(6))
      [3. 0.]
    """

    optimizer: optax.GradientTransformation

    def __post_init__(self) -> None:
        if not isinstance(self.optimizer, optax.GradientTransformation):
            raise TypeError(
                "`optimizer` must be an optax.GradientTransformation, "
                f"got {type(self.optimizer).__name__}"
            )

    def _wrapped(self, problem: Problem) -> optax.GradientTransformationExtraArgs:
        return keep_fixed(self.optimizer, problem.fixed)

    def init(
        self, problem: Problem, x: jax.Array, value: jax.Array, grad: jax.Array
    ) -> optax.OptState:
        return self._wrapped(problem).init(x)

    def step(
        self, problem: Problem, x: jax.Array, value: jax.Array, grad: jax.Array,
        state: optax.OptState, context: StepContext,
    ) -> Step[optax.OptState]:  # fmt: skip
        def value_fn(x_trial: jax.Array) -> jax.Array:
            return problem.value_and_grad(x_trial)[0]

        def update(grad: jax.Array, state: optax.OptState, x: jax.Array) -> Any:
            wrapped = self._wrapped(problem)
            return wrapped.update(grad, state, x, value=value, grad=grad, value_fn=value_fn)

        problem.differentiate.check_differentiable(
            update, grad, state, x, what="fixedopt.Optax", advice=_UNROLL_ADVICE
        )
        updates, new_state = update(grad, state, x)
        x_new = problem.project(optax.apply_updates(x, updates))
        value_new, grad_new = problem.value_and_grad(x_new)
        finite = jnp.isfinite(value_new) & reduce.all_true(jnp.isfinite(grad_new))
        moved = reduce.any_true(problem.free_part(x_new - x) != 0)
        # No progress at working precision: x or f no longer changes (a float32 row
        # near its minimum); the driver then decides whether it is stationary.
        flat = ~moved | within_rounding(value, value_new)
        outcome = jnp.where(flat, Outcome.ACCEPT_AND_STOP, Outcome.ACCEPT)
        outcome = jnp.where(finite, outcome, Outcome.FAIL_NONFINITE).astype(jnp.int32)
        no_model = jnp.asarray(jnp.inf, value.dtype)  # no ftol/xtol test without a model
        return Step(
            x=x_new,
            value=value_new,
            grad=grad_new,
            state=new_state,
            outcome=outcome,
            predicted=no_model,
            relative_step=no_model,
        )


# How to differentiate an optimizer whose update runs a while loop (optax.lbfgs and
# optax's other line searches do).
_UNROLL_ADVICE = (
    "optax.lbfgs and optax's other line searches run one in the optimizer's update. "
    'Use differentiate="implicit" (exact at a converged solution), or an optimizer '
    "without a line search such as optax.adam"
)
