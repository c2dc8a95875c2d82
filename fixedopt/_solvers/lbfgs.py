"""L-BFGS with fixed entries and bounds: every direction lives in the free subspace."""

from __future__ import annotations

import dataclasses
import functools
from typing import ClassVar

import jax
import jax.numpy as jnp

from fixedopt._contract.solver import (
    Certificate,
    Problem,
    Solver,
    Step,
    StepContext,
    predicted_reduction,
    secant_measure,
)
from fixedopt._inputs.checks import one_of, positive_int, set_option
from fixedopt._numerics import reduce
from fixedopt._solvers.certify import HessianTimes, free_hessian_check
from fixedopt._solvers.lbfgs_memory import LBFGSState, pairs_in, remember, two_loop
from fixedopt._solvers.linesearch import (
    LineSearch,
    SearchStart,
    first_step,
    projected_backtracking,
    step_from_search,
)
from fixedopt._solvers.scaling import (
    SCALINGS,
    hessian_diagonal,
    initial_scale,
    measurable,
    model_validated,
    uses_diagonal,
)
from fixedopt._solvers.wolfe import hager_zhang

LINESEARCHES: dict[str, LineSearch] = {
    "backtracking": projected_backtracking,
    "hager-zhang": hager_zhang,
}


@dataclasses.dataclass(frozen=True)
class LBFGS(Solver[LBFGSState]):
    """Limited-memory BFGS with fixed entries and box bounds (L-BFGS-B quality).

    Every row solves in its own free subspace: the search direction, the curvature
    pairs and the initial scaling are all computed with fixed entries masked out.
    Bounds use the two-metric projection of Bertsekas (1982): free entries at (or
    near: :func:`held_by_margin`) a bound that the gradient pushes against form the
    active set for this iteration; they take a scaled projected-gradient step while
    the others take the quasi-Newton step restricted to the rest, and a projected
    backtracking line search keeps every iterate feasible. The result is the
    stationary point that L-BFGS-B (Byrd, Lu, Nocedal, Zhu 1995) finds.

    Args:
      memory_size: number of curvature pairs kept.
      linesearch: ``"backtracking"`` (projected backtracking to sufficient decrease,
        ``fixedopt._solvers.linesearch.projected_backtracking``), ``"hager-zhang"``
        (Wolfe conditions, ``fixedopt._solvers.wolfe.hager_zhang``; with bounds it
        backtracks too) or ``"auto"`` (the default: Hager–Zhang where the row has at
        most ``memory_size`` entries, else backtracking). Hager–Zhang's near-exact
        steps cut the step count where the memory holds the whole space (quad n = 8:
        6.0-6.1 steps a row against 13.9-14.5, and 1.45x-1.99x less time, B = 256 to
        16384) and the slowest row's on ill-conditioned problems, but cost more
        evaluations per step where rounding hides the slope (float32 rows of n = 32
        that cannot converge, 3x-4.6x the time); measured in
        ``docs/decisions.md``, "L-BFGS's line search by size".
      max_linesearch_steps: trials per line search before the row stops with
        ``Status.LINESEARCH_FAILED``.
      scaling: the initial inverse Hessian (see ``fixedopt/_solvers/scaling.py``):
        ``"scalar"`` (``gamma I``, Oren and Luenberger's ``s.y / y.y``), ``"diagonal"``
        (one scale per coordinate, learned from the curvature pairs by M1QN3's
        diagonal BFGS update), ``"auto"`` (the default: the diagonal where the free
        entries' learned scales span more than 100x, else the scalar), or
        ``"hessian"`` (the diagonal, started from the Hessian's diagonal at ``x0``:
        ``n`` Hessian-vector products per row at the start, for small badly scaled
        problems).

    Convergence is declared from the model only once the model has passed a test:
    the last step whose reduction could be measured took the model's full step and
    reduced ``f`` by within a factor 2 of the prediction, or the model predicts no
    reduction above ``f``'s rounding from the new point (the test its next step would
    pass whatever that step did: a row that an exact line search took to the minimizer
    stops there, not after a step in rounding noise; quad n = 8: 1.17x-1.28x faster,
    ``docs/decisions.md``, "Two L-BFGS rules: settle and reach"); the driver then stops the
    row only if :meth:`LBFGS.certify` confirms the verdict from the true Hessian.
    L-BFGS has no ``xtol`` test:
    the length of its model step is no bound on the distance to the minimizer (on
    the status-truth suite it passed ``xtol`` far from it on 20 of 228 rows, most of
    them on badly scaled fits), so ``xtol`` applies to the least-squares solvers.

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
    linesearch: str = "auto"
    scaling: str = "auto"
    # A step makes a line search's trials (through the lanes, the most of a trip: 4 to 5
    # at quad n = 8, 128 lanes) and the two-loop recursion: counted as 4 evaluations,
    # the lanes refill at a quarter of a step's cost: quad n = 8 1.15x-1.17x faster than
    # at 1, n = 512 1.06x, n = 32 and 64 the same (docs/decisions.md, "The lanes' refill cost").
    evaluations_per_step: ClassVar[float] = 4.0
    descends = True

    def __post_init__(self) -> None:
        set_option(self, "memory_size", positive_int("memory_size", self.memory_size))
        steps = positive_int("max_linesearch_steps", self.max_linesearch_steps)
        set_option(self, "max_linesearch_steps", steps)
        one_of("linesearch", self.linesearch, ("auto", *sorted(LINESEARCHES)))
        one_of("scaling", self.scaling, SCALINGS)

    def init(self, problem: Problem, x: jax.Array, value: jax.Array, grad: jax.Array) -> LBFGSState:
        history = jnp.zeros((self.memory_size, x.shape[0]), x.dtype)
        rho = jnp.zeros((self.memory_size,), x.dtype)
        gamma, pairs = jnp.ones((), x.dtype), jnp.zeros((), jnp.int32)
        diagonal = jnp.ones_like(x)
        if self._starts_from_hessian(x):
            diagonal = hessian_diagonal(problem, x)
        # No pairs yet: the direction is the steepest descent (the recursion would
        # return -gamma * grad, gamma = 1), without a recursion in the program;
        # scaled by the Hessian's diagonal where it is known and used.
        scale = initial_scale(self.scaling, gamma, diagonal, problem.fixed)
        direction = jnp.where(problem.fixed, 0.0, -scale * grad)
        validated = jnp.zeros((), bool)
        return LBFGSState(history, history, rho, gamma, pairs, direction, diagonal, validated)

    def gradient_measure(
        self,
        problem: Problem,
        x: jax.Array,
        value: jax.Array,
        grad: jax.Array,
        state: LBFGSState,
        curvature: jax.Array | None,
    ) -> jax.Array:
        """The larger of the model's measure (:meth:`LBFGS.model_measure`) and the secant
        measure (``fixedopt._contract.solver.secant_measure``); the secant measure alone at
        the starting point, where the model has no curvature pair. 0 where the projected
        gradient is exactly 0: stationary whatever the model (a near-exact line search
        lands there on a separable quadratic, before the model has passed its test)."""
        secant = secant_measure(problem, x, value, grad, curvature)
        if curvature is None:
            return secant
        measure = jnp.maximum(self.model_measure(problem, x, value, grad, state), secant)
        return jnp.where(problem.grad_norm(x, grad) == 0, 0.0, measure)

    def model_measure(
        self, problem: Problem, x: jax.Array, value: jax.Array, grad: jax.Array, state: LBFGSState
    ) -> jax.Array:
        """``sqrt(-g.d / (2|f|))`` with ``d = -H g`` the model's step: the square root
        of the relative reduction the L-BFGS model predicts (its Newton decrement),
        ``inf`` until the model has a curvature pair."""
        step = self._model_step(problem, x, state)
        predicted = predicted_reduction(problem, grad, step, self._trusted(state))
        # 0 for a zero gradient (the model then predicts 0), also where f = 0.
        return jnp.where(predicted == 0, 0.0, jnp.sqrt(predicted / jnp.abs(value)))

    def certify(
        self, problem: Problem, x: jax.Array, value: jax.Array, grad: jax.Array, state: LBFGSState
    ) -> Certificate[LBFGSState] | None:
        """The Newton decrement ``g.H^-1 g`` of the true Hessian at ``x`` (``inf`` where
        it has clearly negative curvature), and the state to go on with if it shows the
        model wrong (see :meth:`Solver.certify`): L-BFGS's model never saw the
        directions its steps did not explore (a soft parameter the first steps did
        not move), and only curvature measured along them can tell.

        ``free_hessian_check`` of ``fixedopt/_solvers/certify.py``: at most
        ``CERTIFY_FULL_N`` entries from the whole Hessian (``n`` Hessian-vector
        products), in float64 for a narrower row where JAX's x64 is on (a float32
        check cannot resolve a valley whose curvature is below float32's epsilon of the
        largest, and passes rows far from its bottom); above, a lower bound from a few
        conjugate-gradient iterations preconditioned by the model's own inverse Hessian
        (the two-loop recursion of its pairs). The row goes on along the Newton (or
        truncated-Newton, or negative-curvature) step, whose line search then stores
        a curvature pair along it; the model must pass its test again. Where the row's
        own gradient says that step goes uphill (rounding: a float32 gradient whose
        terms cancel, while the float64 check's says downhill), its line search takes
        the scaled steepest descent instead, but the check's trial and a row left
        after the loop (``fixedopt._driver.after_loop``) go along the check's step. None (no
        check) where the problem has no Hessian-vector products (``vectorized=True``).
        """
        if not problem.hessian_products:
            return None
        scale = initial_scale(self.scaling, state.gamma, state.diagonal, problem.fixed)

        def preconditioner(free: jax.Array) -> HessianTimes:
            s_history, y_history, rho = pairs_in(state, free)
            # The pairs' order matters little to a preconditioner: from slot 0.
            slot = jnp.zeros((), jnp.int32)
            return lambda r: two_loop(r, s_history, y_history, rho, slot, scale)

        decrement, step, negative = free_hessian_check(problem, x, value, grad, preconditioner)
        steepest = jnp.where(problem.fixed, 0.0, -scale * grad)
        # At a stationary point (a start) the step along negative curvature is kept.
        stationary = problem.grad_norm(x, grad) == 0
        # The line search needs descent by the row's own gradient: else its steepest step.
        descends = (reduce.dot(grad, step) < 0) | stationary
        direction = jnp.where(descends, step, steepest)
        # The check's own step is downhill by the check's gradient (g.step = -g.H^-1 g, in
        # float64 for a narrower row: wider_check), where the row's may be rounding (a
        # float32 gradient's component that cancels): it is the one tried and left along.
        downhill = (jnp.isfinite(decrement) & (decrement > 0)) | negative
        step = jnp.where(descends | downhill, step, steepest)
        # The memory is cleared: a row of lanes may wait for this check while the ring's
        # slot moves on (fixedopt._driver.lanes), and its next pairs must not depend on
        # how long (bit-identical results whoever its neighbours are).
        cleared = jnp.zeros_like(state.s_history)
        return Certificate(decrement, step, state._replace(
            s_history=cleared, y_history=cleared, rho=jnp.zeros_like(state.rho),
            direction=direction, validated=jnp.zeros((), bool),
        ))  # fmt: skip

    def _starts_from_hessian(self, x: jax.Array) -> bool:
        """Whether the diagonal starts from the Hessian's at ``x0`` (static)."""
        return self.scaling == "hessian"

    def _trusted(self, state: LBFGSState) -> jax.Array:
        """Whether the model's tests may stop the row: it has curvature information,
        and passed the test of its last measurable step (or the step failed: then the
        driver's test of a row that cannot progress decides)."""
        return (state.pairs > 0) & state.validated

    def _model_step(self, problem: Problem, x: jax.Array, state: LBFGSState) -> jax.Array:
        """The model's step as the bounds let it be taken (entries pressed against a
        bound do not move)."""
        if not problem.has_bounds:
            return state.direction
        return problem.free_part(problem.project(x + state.direction) - x)

    def _direction(
        self, problem: Problem, x: jax.Array, grad: jax.Array, state: LBFGSState, newest: jax.Array
    ) -> jax.Array:
        """The search direction ``-H grad`` at ``x``, in the free subspace.

        ``newest`` is the ring slot of the newest pair. Entries at a bound that the
        gradient pushes against take a scaled gradient step instead (two-metric
        projection), and a direction that is not a descent direction falls back to
        the scaled steepest descent.
        """
        scale = initial_scale(self.scaling, state.gamma, state.diagonal, problem.fixed)
        at_bound = held_by_margin(problem, x, grad, scale)
        s_history, y_history, rho = state.s_history, state.y_history, state.rho
        if problem.has_bounds:  # restrict the pairs to this iteration's free subspace
            s_history, y_history, rho = pairs_in(state, ~problem.fixed & ~at_bound)
        # Without bounds the pairs are already zero on fixed entries: no masking needed.
        recursion = functools.partial(two_loop, read=problem.differentiate.read_slot,
                                      write=problem.differentiate.write_slot)  # fmt: skip
        quasi_newton = -recursion(
            jnp.where(at_bound, 0.0, grad), s_history, y_history, rho, newest, scale
        )
        direction = jnp.where(at_bound, -scale * grad, quasi_newton)
        direction = jnp.where(problem.fixed, 0.0, direction)
        steepest = jnp.where(problem.fixed, 0.0, -scale * grad)
        return jnp.where(reduce.dot(grad, direction) < 0, direction, steepest)

    def step(
        self, problem: Problem, x: jax.Array, value: jax.Array, grad: jax.Array,
        state: LBFGSState, context: StepContext,
    ) -> Step[LBFGSState]:  # fmt: skip
        direction = state.direction
        first = first_step(problem, x, value, grad)
        if self._starts_from_hessian(x):  # where the diagonal is used: a scaled Newton step
            first = jnp.where(
                uses_diagonal(self.scaling, state.diagonal, problem.fixed), 1.0, first
            )
        initial_step = jnp.where(state.pairs == 0, first, 1.0)

        def evaluate(x_trial: jax.Array) -> tuple[jax.Array, jax.Array, None]:
            return (*problem.value_and_grad(x_trial), None)

        start = SearchStart(
            problem, evaluate, x, value, grad, direction, initial_step, context.active
        )
        search = self._linesearch(x.shape[0])(start, max_steps=self.max_linesearch_steps)
        slot = context.iteration % self.memory_size
        s = problem.free_part(search.x - x)
        # Entries held on a bound (the gradient pushes past it, margin 0) that the step
        # did not move: their y is rounding, left out of the pair's curvature test.
        held = problem.at_bound(x, grad, 0.0) & (s == 0) if problem.has_bounds else None
        new_state = remember(
            state, s, search.grad - grad, search.accepted, slot, self.memory_size,
            self._starts_from_hessian(x), context.active,
            problem.differentiate.read_slot, problem.differentiate.write_slot, held,
        )  # fmt: skip
        x_new = jnp.where(search.accepted, search.x, x)
        value_new = jnp.where(search.accepted, search.value, value)
        grad_new = jnp.where(search.accepted, search.grad, grad)
        validated = model_validated(problem, x, value, grad, direction, search.x, search.value)
        new_state = new_state._replace(
            direction=self._direction(problem, x_new, grad_new, new_state, slot)
        )
        model_step = self._model_step(problem, x_new, new_state)
        predicted = predicted_reduction(problem, grad_new, model_step, jnp.ones((), bool))
        # A model that predicts no measurable reduction from the new point passes now
        # the test its next step would pass whatever that step did (that step's
        # predicted reduction is at most this one: model_validated passes it).
        settled = ~measurable(predicted, value_new)
        new_state = new_state._replace(
            # A failed step leaves the verdict to the driver's test of a stuck row.
            validated=(state.pairs > 0)
            & ((search.accepted & validated) | ~search.accepted | settled),
        )
        # The driver's tests read the prediction of a trusted model only; no relative
        # step (no xtol test: see the class docstring).
        trusted = jnp.where(self._trusted(new_state), predicted, jnp.inf)
        return step_from_search(search, new_state, trusted, jnp.asarray(jnp.inf, x.dtype))

    def _linesearch(self, size: int) -> LineSearch:
        """The line search of a row of ``size`` entries (static): ``"auto"`` takes
        Hager–Zhang where the memory can hold the whole space."""
        name = self.linesearch
        if name == "auto":
            name = "hager-zhang" if size <= self.memory_size else "backtracking"
        return LINESEARCHES[name]


def held_by_margin(problem: Problem, x: jax.Array, grad: jax.Array, scale: jax.Array) -> jax.Array:
    """The entries the two-metric projection holds (Bertsekas 1982): free, the gradient
    pushing toward a bound that its scaled step ``scale |g|`` (``H0``'s) would reach, and
    within a thousandth of its box's width of it (an infinite width: no cap). Both are
    in the entry's own units: the margin ``min(|pg|_inf, 1e-3)`` this replaces held an
    entry whose box is narrower than 1e-3 anywhere in it, and in units 1e6 held none off
    its bound (docs/decisions.md, "L-BFGS's two-metric margin in the parameters' units")."""
    if problem.lower is None or problem.upper is None:
        return jnp.zeros_like(problem.fixed)
    margin = jnp.minimum(scale * jnp.abs(grad), 1e-3 * (problem.upper - problem.lower))
    return problem.at_bound(x, grad, margin)
