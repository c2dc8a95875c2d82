"""The solver contract: what a solver receives (:class:`Problem`, :class:`StepContext`)
and what it returns (:class:`Step`), and its base class :class:`Solver`.

A solver is a small immutable object with ``init`` and ``step``; the one driver
(:mod:`fixedopt._driver.loop`) runs every solver, so batching, stopping rules, statuses and the
failure policy live in one place. Everything here is public (``fixedopt.Solver``,
``fixedopt.Step``, ``fixedopt.StepContext``, ``fixedopt.Problem``): a user can write a
solver of their own and pass it to ``minimize`` or ``least_squares``.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import ClassVar, Generic, NamedTuple, TypeVar

import jax
import jax.numpy as jnp

from fixedopt._derivatives.differentiation import IMPLICIT, Differentiation
from fixedopt._fixing.mask import active_set
from fixedopt._numerics import bounds, reduce

State = TypeVar("State")
ValueAndGrad = Callable[[jax.Array], tuple[jax.Array, jax.Array]]
ResidualAndJacobian = Callable[[jax.Array], tuple[jax.Array, jax.Array]]


class Problem(NamedTuple):
    """One row's problem, flat, as a solver sees it: ``x`` is a vector of ``n`` entries.

    fixedopt builds it (users never do): the objective is already masked, so the
    gradient and the Jacobian are exactly zero at fixed entries, and solvers never see
    pytrees, batch axes or unmasked gradients.

    Attributes:
      value_and_grad: ``x -> (value, grad)``, ``x`` and ``grad`` of shape ``(n,)``.
      fixed: ``(n,)`` boolean, ``True`` = fixed.
      fixed_values: ``(n,)``, the values of the fixed entries (the rest is ignored).
      lower, upper: ``(n,)`` bounds, both given or both ``None`` when there are none
        (static; ``has_bounds`` and ``project`` read ``lower``): a side without a bound
        holds ``-inf`` or ``inf``.
      residual_and_jacobian: ``x -> (r, J)``, ``r`` of shape ``(m,)`` and ``J`` of
        shape ``(m, n)`` with exact zero columns at fixed entries, for least squares;
        else ``None``.
      differentiate: how the solve is differentiated (``fixedopt.Implicit()`` or
        ``fixedopt.Unroll()``, static). It supplies the loop primitive and the ring
        buffer's slot access: a solver runs its inner loops with
        ``problem.differentiate.loop`` and is then right in either mode, without
        asking which.
      robust: ``residual_and_jacobian`` gives rescaled residuals and Jacobian (of a
        robust loss, or the Poisson likelihood's Fisher scoring; see
        ``fixedopt._objective.losses``), whose half sum of squares is not the objective (static).
      likelihood: the rescaled residuals are the Poisson likelihood's Pearson residuals
        ``(mu - y) / sqrt(mu)``, whose norm a bin of ``mu`` near 0 and ``y > 0`` makes
        far larger than the deviance's ``sqrt(2 f)``: MINPACK's cosine reads ``|r|`` as
        ``sqrt(2 f)`` (:func:`fixedopt._solvers.normal_equations.cosine_norm`; static).
      hessian_products: ``jax.jvp`` of ``value_and_grad`` gives Hessian-vector
        products (static); False for objectives written for the whole batch
        (``vectorized=True``), whose batching rule has no derivative rule.
    """

    value_and_grad: ValueAndGrad
    fixed: jax.Array
    fixed_values: jax.Array
    lower: jax.Array | None = None
    upper: jax.Array | None = None
    residual_and_jacobian: ResidualAndJacobian | None = None
    differentiate: Differentiation = IMPLICIT
    robust: bool = False
    hessian_products: bool = True
    likelihood: bool = False

    @property
    def has_bounds(self) -> bool:
        """Whether the problem has bounds (static: known when tracing)."""
        return self.lower is not None

    def residual_value(self, x: jax.Array, residual: jax.Array) -> jax.Array:
        """The objective at ``x``, given ``residual_and_jacobian(x)[0]``."""
        if self.robust:
            return self.value_and_grad(x)[0]
        return 0.5 * jnp.dot(residual, residual)

    def project(self, x: jax.Array) -> jax.Array:
        """``where(fixed, fixed_values, clip(x, lower, upper))``: fixed bit-identical."""
        if self.lower is not None:
            x = jnp.clip(x, self.lower, self.upper)
        return jnp.where(self.fixed, self.fixed_values, x)

    def free_part(self, v: jax.Array) -> jax.Array:
        """``v`` with fixed entries zeroed: differences and directions use it, so a
        NaN or infinite fixed value never enters an inner product."""
        return jnp.where(self.fixed, jnp.zeros_like(v), v)

    def projected_gradient(self, x: jax.Array, grad: jax.Array) -> jax.Array:
        """``x - clip(x - grad, lower, upper)`` on free entries (``grad`` itself inside
        the bounds: :func:`fixedopt._numerics.bounds.projected_gradient`), zero on
        fixed ones."""
        if self.lower is not None:
            upper = jnp.inf if self.upper is None else self.upper
            grad = bounds.projected_gradient(x, grad, self.lower, upper)
        return jnp.where(self.fixed, jnp.zeros_like(grad), grad)

    def grad_norm(self, x: jax.Array, grad: jax.Array) -> jax.Array:
        """Max-norm of the projected gradient over free entries (0 when all fixed)."""
        return reduce.largest(jnp.abs(self.projected_gradient(x, grad)), initial=0.0)

    def at_bound(self, x: jax.Array, grad: jax.Array, margin: jax.typing.ArrayLike) -> jax.Array:
        """Free entries within ``margin`` of a bound that the gradient pushes toward
        (fixedopt's one definition of the active set, also used for the implicit
        derivative, the covariances and the report). A side whose bound is None has none.

        Solvers treat these with a scaled gradient-projection step (Bertsekas'
        two-metric projection) and keep them out of their curvature model, so the
        "active set" is just one more mask on top of ``fixed``.
        """
        if self.lower is None and self.upper is None:
            return jnp.zeros_like(self.fixed)
        lower = jnp.full_like(x, -jnp.inf) if self.lower is None else self.lower
        upper = jnp.full_like(x, jnp.inf) if self.upper is None else self.upper
        return active_set(x, grad, self.fixed, lower, upper, margin)

    def movable(self, x: jax.Array, grad: jax.Array) -> jax.Array:
        """The entries a step along ``-grad`` can move: free, and not on a bound that the
        gradient pushes against (``at_bound(x, grad, 0.0)``: the projection holds
        those). The solvers' steps, first steps and checks work on these entries."""
        return ~self.fixed & ~self.at_bound(x, grad, 0.0)


class StepContext(NamedTuple):
    """What the driver tells a solver's ``step`` besides the row's own data.

    ``active`` is False for a row of a batch that has already stopped: its results are
    discarded, and the solver should do no inner iterations for it (a line search makes
    no trials), so that it cannot lengthen the batch's loop. ``iteration`` is the
    number of steps every running row has taken; in a batch it is one unbatched scalar,
    which a solver may use to index its memory without a per-row gather.
    """

    active: jax.Array | bool
    iteration: jax.Array


class Step(NamedTuple, Generic[State]):
    """One iteration, as a solver reports it; the driver decides what the row keeps.

    ``outcome`` (an :class:`~fixedopt.Outcome` code) says what the step did: the
    driver moves the row to ``x`` (with ``value`` and ``grad``) if it is accepted
    (``ACCEPT``, ``ACCEPT_AND_STOP``), else keeps its last iterate; a stopping outcome
    stops the row: ``ACCEPT_AND_STOP`` and ``FAIL_FLAT`` as ``STALLED``,
    ``FAIL_NONFINITE`` as ``NONFINITE``, ``FAIL`` as ``LINESEARCH_FAILED`` — or as
    ``CONVERGED`` (reason ``PRECISION``) when the row is stationary to working
    precision. ``predicted`` and ``relative_step`` describe the step of the solver's
    model, ``inf`` where it has none: the driver's ``ftol`` and ``xtol`` tests read
    them (see :class:`fixedopt.Reason`).

    Attributes:
      x: ``(n,)``, the point the step proposes, fixed entries pinned (``problem.project``).
      value: the objective at ``x``.
      grad: ``(n,)``, its masked gradient.
      state: the solver's new state.
      outcome: ``()`` int, an :class:`~fixedopt.Outcome` code (``jnp.where`` on the codes,
        or ``fixedopt._contract.status.failure`` for a failed step).
      predicted: the model's predicted reduction of the objective, ``>= 0``.
      relative_step: ``|model step| / |x|`` over free entries (see :func:`relative_size`).
    """

    x: jax.Array
    value: jax.Array
    grad: jax.Array
    state: State
    outcome: jax.Array
    predicted: jax.Array
    relative_step: jax.Array


class Solver(abc.ABC, Generic[State]):
    """Base of every solver: immutable configuration, ``init`` and ``step``.

    Subclass it as a frozen dataclass whose fields are the solver's options (they
    must be hashable: the solver is part of the compiled program's key). ``State``
    is the solver's own loop state: a pytree of arrays whose shapes and dtypes do not
    change from step to step (a ``NamedTuple``, say).

    Example:
      Projected gradient descent with a fixed step size, in a few lines:

      >>> import dataclasses
      >>> import jax.numpy as jnp
      >>> import fixedopt
      >>> from fixedopt import Outcome
      >>> @dataclasses.dataclass(frozen=True)
      ... class FixedStep(fixedopt.Solver[None]):
      ...     learning_rate: float = 0.1
      ...
      ...     def init(self, problem, x, value, grad):
      ...         return None
      ...
      ...     def step(self, problem, x, value, grad, state, context):
      ...         x_new = problem.project(x - self.learning_rate * grad)
      ...         value_new, grad_new = problem.value_and_grad(x_new)
      ...         finite = jnp.isfinite(value_new)
      ...         outcome = jnp.where(finite, Outcome.ACCEPT, Outcome.FAIL_NONFINITE)
      ...         no_model = jnp.asarray(jnp.inf, x.dtype)  # no ftol/xtol tests
      ...         return fixedopt.Step(x_new, value_new, grad_new, state, outcome,
      ...                              predicted=no_model, relative_step=no_model)
      >>> fun = lambda x: jnp.sum((x - 3.0) ** 2)
      >>> sol = fixedopt.minimize(fun, jnp.zeros(3), jnp.array([True, False, False]),
      ...                         solver=FixedStep(0.25))
      >>> print(sol.x.round(6), fixedopt.Status(int(sol.status)).name)
      [0. 3. 3.] CONVERGED
    """

    # True for least-squares solvers: they need ``problem.residual_and_jacobian``.
    needs_residuals: ClassVar[bool] = False
    # The objective's evaluations in a typical step (a line search's trials): a fact of
    # the method, as a step's cost in evaluations.
    evaluations_per_step: ClassVar[float] = 1.0
    # True where every step the solver accepts lowers ``f`` in exact arithmetic (a line
    # search's sufficient decrease, a trust region's reduction): the driver then stops a
    # row whose accepted steps lower neither ``f`` nor its gradient's norm
    # (``fixedopt._driver.loop.FLAT_STEPS`` of them in a row: rounding, not progress).
    # False for a method that may go uphill (a fixed learning rate, momentum).
    descends: ClassVar[bool] = False

    @abc.abstractmethod
    def init(self, problem: Problem, x: jax.Array, value: jax.Array, grad: jax.Array) -> State:
        """The solver's own state at the starting point ``x`` (projected, evaluated)."""

    def start(self, problem: Problem, x: jax.Array) -> tuple[jax.Array, jax.Array, State]:
        """``(value, grad, state)`` at the starting point ``x`` (projected): the
        objective's value and gradient there and the state ``init`` gives. A solver whose
        state holds more of the evaluation (a least-squares solver: the Jacobian,
        from which the gradient follows) overrides it to evaluate the objective once."""
        value, grad = problem.value_and_grad(x)
        return value, grad, self.init(problem, x, value, grad)

    @abc.abstractmethod
    def step(
        self,
        problem: Problem,
        x: jax.Array,
        value: jax.Array,
        grad: jax.Array,
        state: State,
        context: StepContext,
    ) -> Step[State]:
        """One iteration from ``x`` (see :class:`Step` and :class:`StepContext`)."""

    def gradient_measure(
        self,
        problem: Problem,
        x: jax.Array,
        value: jax.Array,
        grad: jax.Array,
        state: State,
        curvature: jax.Array | None,
    ) -> jax.Array:
        """The scale-invariant gradient measure that the ``gtol`` test compares.

        ``curvature`` is the driver's secant curvature of the row's last step (see
        :func:`secant_measure`), None at the starting point (no step yet). The default
        is :func:`secant_measure`; a solver with a better measure overrides this:
        least-squares solvers return MINPACK's residual–Jacobian cosine, and L-BFGS the
        larger of its model's Newton decrement and the secant measure, so that neither
        a poor quasi-Newton model nor a poor scalar curvature alone can declare
        convergence. An override reaches the secant measure as
        ``super().gradient_measure(...)``.
        """
        return secant_measure(problem, x, value, grad, curvature)

    def normal_matrix(self, state: State) -> jax.Array | None:
        """``J^T J`` of the residuals at the row's point, ``(n, n)``, where the state
        holds it (a least-squares solver's normal equations); None (the default) where
        it does not. The point is the row's current iterate, also after a step that
        is not its own (``StepContext.active`` False): the driver reports the matrix
        beside ``x`` for ``curve_fit``'s covariance
        (:mod:`fixedopt._results.solver_covariance`).
        """
        return None

    def certify(
        self, problem: Problem, x: jax.Array, value: jax.Array, grad: jax.Array, state: State
    ) -> Certificate[State] | None:
        """A check of a row that is about to stop ``CONVERGED``, from curvature the
        solver's model has not seen; None (the default) for none.

        Returns a :class:`Certificate`: a lower bound of the true Newton decrement
        ``g.H^-1 g`` at ``x`` (``inf`` where the curvature is not positive), the step
        it proposes, and the state the row goes on with if the verdict is shown wrong.
        The driver keeps the verdict only if ``decrement / 2``, the reduction a Newton
        step would still make, is within a hundredth of the documented accuracy
        (``sqrt(eps) max(|f|, eps (f0 - f))``), and, for a row that can no longer
        progress (``PRECISION``), if the step does not gain more than that either;
        L-BFGS, whose model never saw the directions its steps did not explore,
        certifies this way, and GradientDescent. A start that meets a test is
        checked too (by the driver's curvature check for a solver that does not
        override this); a row whose check shows negative curvature (``inf``) is
        moved by the driver along the step to a lower point, where the solver starts
        again (``start``).

        In a batch a row may wait some steps for its check: its steps meanwhile are
        inactive (``StepContext.active`` False), and the driver keeps its ``x``,
        ``value`` and ``grad`` but not its state. An inactive step must leave what
        ``certify`` reads of the state unchanged, or the row's result depends on how
        long it waited (L-BFGS writes no curvature pair).
        """
        return None


class Certificate(NamedTuple, Generic[State]):
    """What :meth:`Solver.certify` says of a row about to stop CONVERGED."""

    decrement: jax.Array  # a lower bound of g.H^-1 g at x (inf: curvature not positive)
    step: jax.Array  # (n,): the step the check proposes (zero on fixed entries)
    state: State  # the solver state to go on with if the verdict is shown wrong


def secant_measure(
    problem: Problem,
    x: jax.Array,
    value: jax.Array,
    grad: jax.Array,
    curvature: jax.Array | None,
) -> jax.Array:
    """``|g| sqrt(gamma / (2 |f|))``, ``g`` the projected gradient over free entries and
    ``gamma = curvature`` the secant curvature scale ``s.y / y.y`` of the last step (the
    Barzilai–Borwein / L-BFGS initial scaling).

    Its square is the relative reduction a secant model predicts for a step to its
    minimum, an estimate of ``(f - f*) / |f|``; for a least-squares objective it is
    MINPACK's cosine between the residual and the Jacobian, with ``1 / gamma`` in
    place of the column norms. Unchanged when ``f`` or ``x`` is rescaled. ``inf``
    without positive curvature on the last step (``gamma = inf``), 0 for an exactly
    zero gradient. At the starting point (``curvature`` None: no step yet) only an
    exactly zero gradient passes: 0 there, else ``inf``.
    """
    if curvature is None:
        infinite = jnp.asarray(jnp.inf, value.dtype)
        return jnp.where(problem.grad_norm(x, grad) == 0, 0.0, infinite)
    size = reduce.norm(problem.projected_gradient(x, grad))
    measure = jnp.where(size == 0, 0.0, size * jnp.sqrt(curvature / (2.0 * jnp.abs(value))))
    return jnp.where(jnp.isnan(measure), jnp.inf, measure)


def relative_size(problem: Problem, step: jax.Array, x: jax.Array) -> jax.Array:
    """``max_i |step_i| / max(|x_i|, sqrt(eps) |x|_inf)`` over free entries.

    Entry by entry, so that a badly scaled problem (entries of very different sizes)
    cannot hide a large step of a small entry; entries near 0 are measured against
    ``sqrt(eps)`` times the largest entry. 0 for a zero step, ``inf`` where ``x`` is 0.
    """
    step, x = jnp.abs(problem.free_part(step)), jnp.abs(problem.free_part(x))
    floor = jnp.sqrt(jnp.finfo(x.dtype).eps) * reduce.largest(x, initial=0.0)
    scale = jnp.maximum(x, floor)
    ratio = jnp.where(step == 0, 0.0, step / jnp.where(scale > 0, scale, 0.0))
    return reduce.largest(ratio, initial=0.0)


def predicted_reduction(
    problem: Problem, grad: jax.Array, direction: jax.Array, valid: jax.Array
) -> jax.Array:
    """``-grad . direction / 2``, the reduction a quasi-Newton model predicts for its
    step ``direction = -H grad`` (``>= 0``); ``inf`` where the model is not ``valid``."""
    predicted = jnp.maximum(-0.5 * reduce.dot(grad, problem.free_part(direction)), 0.0)
    return jnp.where(valid, predicted, jnp.asarray(jnp.inf, grad.dtype))
