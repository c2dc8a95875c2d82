"""The one loop driver every solver runs in (the contract is :mod:`fixedopt._contract.solver`).

The driver owns everything but the solver's own iteration: the initial evaluation,
the failure policy (a row keeps its last accepted iterate; a failed step stops it
with a status saying why), the stopping rules, the status codes and the step count.
One row runs in one ``lax.while_loop`` (:func:`iterate`); a batch runs through lanes
(:mod:`fixedopt._driver.lanes`) that call :func:`start` and :func:`advance` for each row:
each row stops on its own (a stopped row keeps what it reports), and one row's NaN
cannot reach another row.
"""

from __future__ import annotations

from typing import Any, Generic, NamedTuple, TypeAlias, TypeVar

import jax
import jax.numpy as jnp

from fixedopt._contract.solver import Certificate, Problem, Solver, Step, StepContext
from fixedopt._contract.status import (
    CLAIMED,
    PENDING,
    RUNNING,
    Outcome,
    Reason,
    Status,
    accepted,
    busy,
    stop_status,
    stops,
)
from fixedopt._driver.leave_start import leave_start
from fixedopt._numerics import reduce
from fixedopt._solvers.certify import curvature_check, held_weakly

AnySolver = Solver[Any]  # the driver runs any solver; its state is opaque here


def secant_curvature(s: jax.Array, y: jax.Array, moved: jax.Array, gamma: jax.Array) -> jax.Array:
    """``s.y / y.y`` of the last step that moved with positive curvature, else
    ``gamma`` (the one before; ``inf`` before any)."""
    sy, yy = reduce.dot(s, y), reduce.dot(y, y)
    positive = moved & (sy > 0)
    return jnp.where(positive, sy / jnp.where(positive, yy, 1.0), gamma)


def objective_scale(value: jax.Array, initial_value: jax.Array, eps: jax.Array) -> jax.Array:
    """``max(|f|, eps (f0 - f))``, ``eps`` the square of the dtype's ``sqrt(eps)``
    (:attr:`Stopping.precision_squared`): the scale of ``f`` that the
    relative-reduction test (``ftol``) compares against.

    ``|f|`` alone leaves no scale at a minimum with ``f* = 0`` and a singular Hessian
    (a quartic): there the relative reduction per step tends to a constant and the
    test never passes, though ``f`` has fallen to the rounding level of the progress
    made. ``eps`` of that progress, ``f0 - f``, is a scale in the problem's own units
    (unchanged by an offset or a rescaling of ``f``). Where ``|f|`` is larger, nothing
    changes. The gradient tests keep ``|f|``: relative to this scale they would pass
    early on badly scaled problems (measured on the minimize status-truth suite).
    """
    return jnp.maximum(jnp.abs(value), eps * jnp.maximum(initial_value - value, 0.0))


class Tolerances(NamedTuple):
    """The relative tests' tolerances as a loop compares them: NaN where a test is off
    (a tolerance of 0, or NaN), so that ``measure <= tolerance`` is the whole test."""

    gtol: jax.Array
    ftol: jax.Array
    xtol: jax.Array


class Stopping(NamedTuple):
    """The stopping rules, as traced data: changing them does not recompile.

    ``strict`` holds the relative tolerances ``gtol``, ``ftol`` and ``xtol`` (see
    :class:`Reason`) as the tests compare them, ``loose`` the same raised to
    ``precision``: ``sqrt(eps)`` of the dtype, the tolerance of the test a row that can
    no longer progress must pass to count as converged. ``precision_squared`` is
    :func:`objective_scale`'s ``eps``. The loop reads only these derived tolerances:
    they are made with the rules (``fixedopt._entry.describe.stopping_rules``) on the
    host where the rules are, since a scalar that a loop derives from its invariant
    inputs is hoisted out of the loop as a kernel of its own, and a kernel costs
    XLA:CPU about 15 ms of compile however small (quad n = 64's solve: 199 -> 189
    kernels; ``docs/decisions.md``, "Where quad n = 64's compile goes"). Every field is
    in the dtype of ``x0`` but ``max_steps`` (int32).
    """

    abs_gtol: jax.Array
    max_steps: jax.Array
    precision: jax.Array
    strict: Tolerances
    loose: Tolerances
    precision_squared: jax.Array


# The loop's own fields of a row's state: arrays in the loop (LoopState), None in what
# the loop reports of the row (fixedopt._driver.lane_layout.LastState).
Own = TypeVar("Own", jax.Array, None)


class RowState(NamedTuple, Generic[Own]):
    """A row's state in the loop (:data:`LoopState`), or what the loop reports of it
    (:data:`fixedopt._driver.lane_layout.LastState`): one definition of the fields. A
    report drops the loop's own fields (None) and holds, for the solver's state, the
    solver's ``J^T J`` at ``x`` where asked (:meth:`~fixedopt.Solver.normal_matrix`),
    else None."""

    x: jax.Array
    value: jax.Array
    grad: jax.Array
    grad_norm: jax.Array
    steps: jax.Array
    status: jax.Array
    reason: jax.Array
    gamma: Own  # secant curvature of the last good step (inf: none): gradient_measure's
    initial_value: Own  # f(x0), the scale of the last-resort PRECISION test
    doubted: Own  # f where the solver's certification last rejected a verdict (inf: never;
    # _doubt(dtype): never, but a verdict the first-order tests cannot vouch for: _doubted)
    solver_state: Any  # in a report: J^T J at x, or None
    flat_steps: Own  # accepted steps in a row that lowered neither f nor the gradient


LoopState: TypeAlias = RowState[jax.Array]  # a row's state in the loop


class Resume(NamedTuple):
    """Where a row's loop goes on from, per row (traced): a row sent back to the loop
    after its claim was shown wrong (``fixedopt._driver.after_loop``) keeps its steps,
    the value of its last rejected claim and ``f(x0)``; a fresh row has 0, ``inf`` and
    NaN (its own start's value). A row whose ``steps`` are ``max_steps`` takes none."""

    steps: jax.Array
    doubted: jax.Array
    initial_value: jax.Array


class Tests(NamedTuple):
    """The measures a row's convergence tests compare, at its current iterate."""

    grad_norm: jax.Array  # max-norm of the projected gradient (abs_gtol)
    gradient: jax.Array  # the solver's scale-invariant gradient measure (gtol)
    reduction: jax.Array  # max(actual, predicted) relative reduction (ftol); inf: none
    relative_step: jax.Array  # the model step relative to x (xtol); inf: none
    value_drop: jax.Array  # |f| / |f(x0)|: where f fell to rounding of its start


def _reason(tests: Tests, stopping: Stopping, loose: bool = False) -> jax.Array:
    """The first test met, as a :class:`Reason` code (NONE if none).

    With ``loose``, each relative tolerance is raised to ``stopping.precision``: the
    test of a row that can no longer progress (reported as PRECISION)."""

    tolerances = stopping.loose if loose else stopping.strict  # NaN: a test that is off
    met = [
        (tests.gradient <= tolerances.gtol, Reason.GTOL),
        (tests.reduction <= tolerances.ftol, Reason.FTOL),
        (tests.relative_step <= tolerances.xtol, Reason.XTOL),
        (tests.grad_norm <= stopping.abs_gtol, Reason.ABS_GTOL),
    ]
    if loose:  # an objective whose minimum is 0 at x = 0 leaves no relative scale:
        met.append((tests.value_drop <= jnp.finfo(tests.value_drop.dtype).eps, Reason.FTOL))
    reason = jnp.asarray(Reason.NONE, jnp.int32)
    for holds, code in reversed(met):
        reason = jnp.where(holds, Reason.PRECISION if loose else code, reason)
    return reason.astype(jnp.int32)


def _verdict(
    outcome: jax.Array, tests: Tests, steps: jax.Array, stopping: Stopping
) -> tuple[jax.Array, jax.Array]:
    """``(status, reason)`` of a row after a step whose outcome is ``outcome``.

    A step that failed (no acceptable point) took no step: only the gradient tests
    apply as such, and the model's step and predicted reduction decide, with the
    loose tolerance, whether the row is stationary to working precision."""
    failed = (outcome == Status.LINESEARCH_FAILED) | (outcome == Status.STALLED)
    strict = tests._replace(
        reduction=jnp.where(failed, jnp.inf, tests.reduction),
        relative_step=jnp.where(failed, jnp.inf, tests.relative_step),
    )
    reason = _reason(strict, stopping)
    reason = jnp.where(failed & (reason == Reason.NONE), _reason(tests, stopping, True), reason)
    reason = jnp.where(outcome == Status.NONFINITE, Reason.NONE, reason)
    status = jnp.where(steps >= stopping.max_steps, Status.MAX_STEPS, RUNNING)
    status = jnp.where(outcome != RUNNING, outcome, status)
    status = jnp.where(reason != Reason.NONE, Status.CONVERGED, status)
    return status.astype(jnp.int32), reason


def _infeasible(problem: Problem) -> jax.Array:
    """Empty or NaN bounds on a free entry, or a fixed value outside its bounds (as a
    concrete one raises: traced bounds or values cannot be checked earlier)."""
    if problem.lower is None or problem.upper is None:
        return jnp.zeros((), bool)
    empty = ~(problem.lower <= problem.upper)  # also True where either is NaN
    values = problem.fixed_values
    outside = (values < problem.lower) | (values > problem.upper)
    return reduce.any_true(empty & ~problem.fixed) | reduce.any_true(outside & problem.fixed)


def _start_outside(problem: Problem, x: jax.Array) -> jax.Array:
    """A least-squares start outside its bounds on a free entry (a traced one: a
    concrete one raises before the solve). ``minimize`` projects it, as scipy's
    L-BFGS-B does; ``least_squares`` does not move it, as scipy's does not."""
    if problem.residual_and_jacobian is None or problem.lower is None or problem.upper is None:
        return jnp.zeros((), bool)
    outside = (x < problem.lower) | (x > problem.upper)
    return reduce.any_true(outside & ~problem.fixed)


def start(solver: AnySolver, problem: Problem, x: jax.Array, stopping: Stopping,
          resume: Resume | None = None) -> LoopState:  # fmt: skip
    """Project the starting point, evaluate it, and give the row its first status
    (:func:`begin`); with ``resume``, the row's loop goes on from there (:class:`Resume`),
    and a claim of CONVERGED there ends it (:func:`claim`)."""
    value, grad, solver_state = solver.start(problem, problem.project(x))
    state = begin(solver, problem, x, value, grad, solver_state, stopping, resume)
    return state if resume is None else claim(solver, state)


def begin(
    solver: AnySolver,
    problem: Problem,
    given: jax.Array,
    value: jax.Array,
    grad: jax.Array,
    solver_state: Any,
    stopping: Stopping,
    resume: Resume | None = None,
) -> LoopState:
    """The row's first loop state from its start ``given`` and the objective's ``value``,
    ``grad`` and the solver's state at its projection (``solver.start`` there), with
    its first status
    (``INFEASIBLE`` where its bounds are empty or a least-squares start lies outside
    them: such a start is kept, and its value and gradient, not evaluated there, are
    NaN)."""
    outside = _start_outside(problem, given)
    x = problem.project(given)
    grad_norm = problem.grad_norm(x, grad)
    finite = jnp.isfinite(value) & reduce.all_true(jnp.isfinite(grad))
    outcome = jnp.where(finite, RUNNING, Status.NONFINITE)
    infinite = jnp.asarray(jnp.inf, value.dtype)
    gradient = solver.gradient_measure(problem, x, value, grad, solver_state, None)
    tests = Tests(grad_norm, gradient, infinite, infinite, infinite)
    zero = jnp.zeros((), jnp.int32)
    steps, doubted, initial_value = zero, infinite, value
    if resume is not None:
        steps, doubted = resume.steps.astype(jnp.int32), resume.doubted.astype(value.dtype)
        given = resume.initial_value.astype(value.dtype)
        initial_value = jnp.where(jnp.isnan(given), value, given)
    status, reason = _verdict(outcome, tests, steps, stopping)
    infeasible = _infeasible(problem) | outside
    status = jnp.where(infeasible, Status.INFEASIBLE, status).astype(jnp.int32)
    reason = jnp.where(infeasible, Reason.NONE, reason).astype(jnp.int32)
    # A start kept outside its bounds was not evaluated there: its row reports NaN.
    x = jnp.where(outside, given, x)
    value, grad, grad_norm = (jnp.where(outside, jnp.nan, a) for a in (value, grad, grad_norm))
    return LoopState(x, value, grad, grad_norm, steps, status, reason, infinite, initial_value,
                     doubted, solver_state, zero)  # fmt: skip


def _relative_reduction(
    old_value: jax.Array, new_value: jax.Array, step: Step[Any], scale: jax.Array
) -> jax.Array:
    """MINPACK's ``ftol`` measure: the larger of the actual and the predicted
    reduction, relative to ``scale`` (:func:`objective_scale` at the old value);
    ``inf`` unless the step was accepted. After a failed step, the model's predicted
    reduction alone."""
    actual = old_value - new_value
    reduction = jnp.maximum(actual, step.predicted) / scale
    reduction = jnp.where(accepted(step.outcome) & (actual >= 0), reduction, jnp.inf)
    return jnp.where(stops(step.outcome), step.predicted / scale, reduction)


def advance(
    solver: AnySolver,
    problem: Problem,
    state: LoopState,
    stopping: Stopping,
    context: StepContext | None = None,
    check: bool = True,
) -> LoopState:
    """One iteration of one row: the solver's step, the failure policy, the new status.

    The row moves to the step's point only if the step's outcome accepts it, so it
    always holds its last finite iterate; a stopping outcome stops it with the status
    of :func:`~fixedopt._contract.status.stop_status`. A CONVERGED verdict is then checked
    (:func:`certify`, in a ``lax.cond``, where :func:`to_certify` says) unless ``check``
    is False (static): lanes check their rows together (``fixedopt._driver.lanes``).
    """
    context = StepContext(True, state.steps) if context is None else context
    step = solver.step(problem, state.x, state.value, state.grad, state.solver_state, context)
    moved = accepted(step.outcome)
    # A row of a batch that has stopped (not active) keeps its iterate too.
    moves = moved & context.active
    x, value, grad = (
        jnp.where(moves, new, old)
        for new, old in ((step.x, state.x), (step.value, state.value), (step.grad, state.grad))
    )
    grad_norm = problem.grad_norm(x, grad)
    s, y = problem.free_part(x - state.x), grad - state.grad
    gamma = secant_curvature(s, y, moved, state.gamma)
    scale = objective_scale(state.value, state.initial_value, stopping.precision_squared)
    tests = Tests(
        grad_norm=grad_norm,
        gradient=solver.gradient_measure(problem, x, value, grad, step.state, gamma),
        reduction=_relative_reduction(state.value, value, step, scale),
        relative_step=jnp.where(moved | stops(step.outcome), step.relative_step, jnp.inf),
        value_drop=jnp.abs(value) / jnp.abs(state.initial_value),
    )
    steps = state.steps + 1
    outcome, flat_steps = _rounding_only(solver, step.outcome, moved, state, value, grad_norm)
    status, reason = _verdict(stop_status(outcome), tests, steps, stopping)
    doubted = _doubted(solver, problem, state.doubted, x, value, grad, status, reason)
    new = LoopState(x, value, grad, grad_norm, steps, status, reason, gamma, state.initial_value,
                    doubted, step.state, flat_steps)  # fmt: skip
    if not (check and checks(solver)):
        return new
    checked: LoopState = jax.lax.cond(
        to_certify(solver, new), lambda: certify(solver, problem, new, stopping), lambda: new
    )
    return checked


def _doubt(dtype: Any) -> jax.Array:
    """The ``doubted`` value that marks a verdict to be checked without a rejected claim
    (:func:`_doubted`): the dtype's largest finite number, finite so that the row leaves
    the loop CLAIMED (:func:`to_certify`), above every value so that it reads as
    progress since."""
    return jnp.asarray(jnp.finfo(dtype).max, dtype)


def _weak_holds_checked(solver: AnySolver, problem: Problem) -> bool:
    """Whether a row's claims with an entry held weakly on a bound are checked (static):
    a least-squares solver's, which certifies nothing itself, on a bounded problem."""
    return solver.needs_residuals and not certifies(solver) and problem.has_bounds


def _doubted(solver: AnySolver, problem: Problem, doubted: jax.Array, x: jax.Array,
             value: jax.Array, grad: jax.Array, status: jax.Array,
             reason: jax.Array) -> jax.Array:  # fmt: skip
    """``doubted``, or :func:`doubt` where a least-squares row's CONVERGED verdict (by a
    relative test) has an entry on a bound that the gradient holds too weakly for a
    first-order test to tell a minimum from a saddle
    (:func:`fixedopt._solvers.certify.held_weakly`): the check after the loop
    (:func:`certify`) then looks at the curvature with that entry free. A Gauss–Newton
    model sees no negative curvature: a Poisson peak's centre started on the end of its
    range stopped there CONVERGED, 1.4% to 11.5% of the deviance above where 1e-3
    inward led (docs/decisions.md, "Poisson peaks at a bound"). ``doubted`` itself
    (static) without bounds, for a solver that certifies and for ``minimize``'s."""
    if not _weak_holds_checked(solver, problem):
        return doubted
    converged = (status == Status.CONVERGED) & (reason != Reason.ABS_GTOL)
    weak = reduce.any_true(held_weakly(problem, x, value, grad))
    return jnp.where(converged & weak & ~jnp.isfinite(doubted), _doubt(value.dtype), doubted)


# Accepted steps in a row that lower neither ``f`` nor its gradient's norm after which a
# row of a descending solver stops (``Solver.descends``): its sufficient-decrease test is
# met by rounding alone. A float32 quad n = 64 row at abs_gtol 1e-3 (beyond its
# precision) repeated one value and gradient for 260 steps on the CPU and to max_steps
# (5,000) on a TPU (docs/decisions.md, "Steps that only round"). Not fewer: with 64-bit
# mode off, float32 Rosenbrock n = 64 rows crossing its valley at the floor of ``f`` (a
# change of ``f`` below its rounding) raise the gradient's norm for 4 to 8 or more steps
# in a row on their way to ``abs_gtol``: at 4, 218 of 1,024 rows stopped CONVERGED
# (PRECISION) with gradients up to 0.1, at 8 one of those 1,024, at 16 none of 16,384: a
# measured bound, not a proof (docs/decisions.md, "Flat steps in a valley"; the Gpufit
# protocol's and decay fits' statuses and bits are the same at 4 and 16).
FLAT_STEPS = 16


def _rounding_only(
    solver: AnySolver,
    outcome: jax.Array,
    moved: jax.Array,
    state: LoopState,
    value: jax.Array,
    grad_norm: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """The step's outcome, ``ACCEPT_AND_STOP`` (no progress at working precision: the
    failure policy, then the loose test, decide) where it is the ``FLAT_STEPS``-th
    accepted step in a row of a descending solver to lower neither ``f`` nor the
    gradient's norm; and the count of such steps."""
    if not solver.descends:
        return outcome, state.flat_steps
    flat = moved & ~(value < state.value) & ~(grad_norm < state.grad_norm)
    flat_steps = jnp.where(flat, state.flat_steps + 1, 0).astype(jnp.int32)
    stop = flat_steps >= FLAT_STEPS
    return jnp.where(stop, Outcome.ACCEPT_AND_STOP, outcome).astype(jnp.int32), flat_steps


# The share of the documented accuracy that a certified verdict may leave: a Newton step
# from a CONVERGED row would still gain at most this share of it.
CERTIFY_SHARE = 0.01


def certifies(solver: AnySolver) -> bool:
    """Whether the solver checks a verdict before the driver stops a row (static)."""
    return type(solver).certify is not Solver.certify


def checks(solver: AnySolver) -> bool:
    """Whether the driver checks the solver's verdicts inside its loop (static): those
    it certifies, and the starts of a ``minimize`` solver that certifies nothing (by
    their curvature). Not a least-squares solver's starts: the check's second
    derivatives of the model grew every least-squares program by half and a new
    model's first call 1.7x (docs/decisions.md, "Stationary starts of least squares").
    A solve whose rows leave the loop to be checked after it (:class:`Resume` given,
    ``fixedopt._driver.after_loop``) checks every solver's in a program of its own."""
    return certifies(solver) or not solver.needs_residuals


def claim(solver: AnySolver, state: LoopState) -> LoopState:
    """``state``, CLAIMED (it leaves the loop) where its verdict is one the driver
    checks (:func:`to_certify`), checked after the loop."""
    return state._replace(status=jnp.where(to_certify(solver, state), CLAIMED, state.status))


def to_certify(solver: AnySolver, state: LoopState) -> jax.Array:
    """Whether the row's verdict is one the driver checks (:func:`certify`): CONVERGED
    by a relative test (the absolute ``abs_gtol`` is the user's own word), after a
    step where the solver certifies its verdicts; else at its start (step 0: a start
    may be a maximum or a saddle point, which no step has tested) and after a check
    has once rejected the row (a row that left a saddle point may reach another one,
    where a symmetric problem keeps it)."""
    converged = (state.status == Status.CONVERGED) & (state.reason != Reason.ABS_GTOL)
    if certifies(solver):
        return converged
    return converged & ((state.steps == 0) | jnp.isfinite(state.doubted))


def certify(solver: AnySolver, problem: Problem, state: LoopState, stopping: Stopping,
            after: bool = False) -> LoopState:  # fmt: skip
    """The row's CONVERGED verdict, checked by ``solver.certify``.

    The verdict holds if half the certified Newton decrement (the reduction a Newton
    step would still make) is within ``CERTIFY_SHARE`` of the documented accuracy,
    ``sqrt(eps) max(|f|, eps (f0 - f))``. A row that can no longer progress
    (PRECISION) must also not gain more than that by the step the check proposes,
    tried once here: a quadratic model can under-predict a curved valley's gap. Else
    the row goes on from the state the solver gives; a row shown wrong again without
    having lowered ``f`` since stops as STALLED (it cannot progress and is not
    stationary), or MAX_STEPS at the limit.

    A verdict at the start (step 0) is checked for curvature alone where the solver
    certifies nothing (:func:`fixedopt._solvers.certify.curvature_check`); a start
    shown no minimum is left along the check's step
    (:func:`fixedopt._driver.leave_start.leave_start`), counted as a step, or stops
    STALLED where no point along it is lower. ``after`` (static): the check after the
    loop (``fixedopt._driver.after_loop``), where every row shown wrong is left so, its
    solver to start again from the lower point.
    """
    # Not differentiated (Unroll): the check decides and steers; its linear algebra
    # (an elimination with pivots floored) has no useful derivative.
    inputs = jax.lax.stop_gradient((state.x, state.value, state.grad, state.solver_state))
    if certifies(solver):
        checked = solver.certify(problem, *inputs)
    else:  # a start (to_certify): its curvature only
        checked = Certificate(*curvature_check(problem, *inputs[:3]), state.solver_state)
    if checked is None:  # no check for this problem
        return state
    decrement, step, doubted_state = jax.lax.stop_gradient(checked)  # also the closure's
    scale = objective_scale(state.value, state.initial_value, stopping.precision_squared)
    allowed = CERTIFY_SHARE * stopping.precision * scale
    holds = 0.5 * decrement <= allowed
    if certifies(solver):  # a row that can no longer progress: its step tried too
        trial_value = problem.value_and_grad(problem.project(inputs[0] + step))[0]
        gains = jax.lax.stop_gradient(state.value - trial_value) > allowed  # False for NaN
        holds = holds & ((state.reason != Reason.PRECISION) | ~gains)
    progressed = state.value < state.doubted
    status = jnp.where(progressed, RUNNING, Status.STALLED)
    status = jnp.where(progressed & (state.steps >= stopping.max_steps), Status.MAX_STEPS, status)
    solver_state = jax.tree.map(
        lambda old, new: jnp.where(holds, old, new), state.solver_state, doubted_state
    )
    checked_state = state._replace(
        status=jnp.where(holds, state.status, status).astype(jnp.int32),
        reason=jnp.where(holds, state.reason, Reason.NONE).astype(jnp.int32),
        doubted=jnp.where(holds, state.doubted, state.value),
        solver_state=solver_state,
    )
    # A start, or a row whose check found negative curvature: no step of its solver
    # would leave a saddle point (its gradient there is 0).
    # Not a row whose max_steps are spent (at the limit after the loop: MAX_STEPS).
    leaving = ~holds & (after | (state.steps == 0) | jnp.isinf(decrement))
    leaving = leaving & (state.steps < stopping.max_steps)
    left = _left_start(solver, problem, checked_state, leaving, step, stopping, after)
    return _standing(solver, problem, state, left, leaving)


def _standing(solver: AnySolver, problem: Problem, claimed: LoopState, left: LoopState,
              leaving: jax.Array) -> LoopState:  # fmt: skip
    """``left``, or the ``claimed`` verdict itself where an entry of it is held weakly
    on a bound (:func:`fixedopt._solvers.certify.held_weakly`), the row has stepped and
    lowered ``f`` since its last rejected claim (if any), and no point along the check's
    step, into the box, is lower: the bound holds the row there after all (its
    gradient, however small, outweighs the negative curvature the check found at every
    trial's length). A least-squares solve's, after the loop (:func:`_doubted`)."""
    if not _weak_holds_checked(solver, problem):
        return left
    weak = reduce.any_true(held_weakly(problem, claimed.x, claimed.value, claimed.grad))
    progressed = (claimed.steps > 0) & (claimed.value < claimed.doubted)
    stood = weak & progressed & leaving & (left.steps == claimed.steps)  # none lower
    chosen: LoopState = jax.tree.map(lambda a, b: jnp.where(stood, a, b), claimed, left)
    return chosen


def _left_start(solver: AnySolver, problem: Problem, state: LoopState, leaving: jax.Array,
                step: jax.Array, stopping: Stopping, after: bool = False) -> LoopState:  # fmt: skip
    """``state``, or where ``leaving`` (a point shown no minimum), the row at the
    first lower point along ``step`` after one more step, RUNNING, or STALLED if none
    is lower; ``after`` (static), where none is lower, the status ``state`` has (its
    solver starts again there if it has progressed since its last rejected claim)."""
    found, x, value, grad, solver_state = leave_start(
        solver, problem, leaving, state.x, state.value, step, state.solver_state
    )
    moved = leaving & found
    steps = state.steps + 1
    going = jnp.where(steps >= stopping.max_steps, Status.MAX_STEPS, RUNNING)
    unmoved = state.status if after else jnp.where(leaving, Status.STALLED, state.status)
    status = jnp.where(moved, going, unmoved)
    left = state._replace(x=x, value=value, grad=grad, grad_norm=problem.grad_norm(x, grad),
                          steps=steps, solver_state=solver_state)  # fmt: skip
    chosen: LoopState = jax.tree.map(lambda a, b: jnp.where(moved, a, b), left, state)
    return chosen._replace(status=status.astype(jnp.int32))


def iterate(
    solver: AnySolver,
    problem: Problem,
    x: jax.Array,
    stopping: Stopping,
    max_trips: int | None = None,
    resume: Resume | None = None,
) -> LoopState:
    """Run ``solver`` on one row from ``x`` until its status is no longer RUNNING.

    The loop is ``problem.differentiate``'s; ``max_trips`` is ``max_steps`` where that
    loop needs a static trip count (``Differentiation.static_max_steps``), else None.
    With ``resume`` the row goes on from there (:class:`Resume`), and a verdict to be
    checked ends the loop, CLAIMED (:func:`claim`): its check comes after it
    (``fixedopt._driver.after_loop``), so the loop's program holds none.
    """
    if resume is not None:
        return problem.differentiate.loop(
            lambda state: busy(state.status),
            lambda state: claim(solver, advance(solver, problem, state, stopping, check=False)),
            start(solver, problem, x, stopping, resume), max_trips,
        )  # fmt: skip
    if not checks(solver):
        return problem.differentiate.loop(
            lambda state: busy(state.status),
            lambda state: advance(solver, problem, state, stopping),
            start(solver, problem, x, stopping), max_trips,
        )  # fmt: skip
    first = start(solver, problem, x, stopping)
    # A start that met a test waits, PENDING, for the loop's first trip to check it
    # (to_certify), so that the program holds one check, the trips'.
    first = first._replace(status=jnp.where(to_certify(solver, first), PENDING, first.status))

    def trip(state: LoopState) -> LoopState:
        waiting = state.status == PENDING
        stepped = advance(solver, problem, state, stopping, check=False)
        # A waiting start takes no step (the step computed here is dropped).
        stepped = jax.tree.map(lambda a, b: jnp.where(waiting, a, b),
                               state._replace(status=jnp.asarray(Status.CONVERGED, jnp.int32)),
                               stepped)  # fmt: skip
        checked: LoopState = jax.lax.cond(
            to_certify(solver, stepped),
            lambda: certify(solver, problem, stepped, stopping),
            lambda: stepped,
        )
        return checked

    final: LoopState = problem.differentiate.loop(
        lambda state: busy(state.status), trip, first, max_trips
    )
    return final
