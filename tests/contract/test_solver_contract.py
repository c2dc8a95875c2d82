"""The solver contract as a user meets it: a solver of one's own, run by the driver.

The driver, not the solver, owns the failure policy: a row moves only to a point whose
``outcome`` its solver accepted; a failed step stops the row with a status saying why,
at its last accepted iterate; fixed entries stay bit-identical; other rows never notice.
A solver that runs its inner loops with ``problem.differentiate.loop`` is differentiable
under ``Implicit()`` and ``Unroll()`` alike, without knowing which.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import fixedopt
from fixedopt import Outcome
from tests.helpers import assert_rows_identical, bits

# A failed step's status and last iterate, fixed bits, derivatives compared at 1e-7 and
# 2e-3, a program's loops as traced: nothing XLA's backend optimizations change
# (conftest.py).
pytestmark = pytest.mark.fewer_optimizations


@dataclasses.dataclass(frozen=True)
class Reckless(fixedopt.Solver[None]):
    """A fixed gradient step, proposed however bad it is: NaN entries included."""

    learning_rate: float = 0.4

    def init(self, problem, x, value, grad):
        return None

    def step(self, problem, x, value, grad, state, context):
        x_new = problem.project(x - self.learning_rate * grad)
        value_new, grad_new = problem.value_and_grad(x_new)
        finite = jnp.isfinite(value_new) & jnp.all(jnp.isfinite(grad_new))
        no_model = jnp.asarray(jnp.inf, x.dtype)
        return fixedopt.Step(
            jnp.where(finite, x_new, jnp.nan),  # a failed proposal is garbage
            value_new, grad_new, state,
            outcome=jnp.where(finite, Outcome.ACCEPT, Outcome.FAIL_NONFINITE),
            predicted=no_model, relative_step=no_model,
        )  # fmt: skip


def walled(x, target, wall):
    """A quadratic that is NaN beyond ``x[0] > wall``."""
    return jnp.where(x[0] > wall, jnp.nan, jnp.sum((x - target) ** 2))


def solve(x0, fixed, target, wall):
    return fixedopt.minimize(
        walled, x0, fixed, args=(target, wall), batched=True, solver=Reckless(), max_steps=200
    )


def test_a_failed_proposal_stops_its_row_at_its_last_accepted_iterate():
    rng = np.random.default_rng(0)
    x0, target = rng.normal(size=(6, 4)), rng.normal(size=(6, 4))
    fixed = rng.random((6, 4)) < 0.3
    fixed[:, 0] = False
    wall = np.full(6, np.inf)
    target[2, 0], x0[2, 0], wall[2] = 5.0, 0.0, 0.5  # row 2 walks into the NaN wall
    solution = solve(x0, fixed, target, wall)
    status, x = np.asarray(solution.status), np.asarray(solution.x)
    assert status[2] == fixedopt.Status.NONFINITE
    assert np.all(np.isfinite(x[2])) and x[2, 0] <= 0.5 and np.isfinite(solution.value[2])
    good = np.array([0, 1, 3, 4, 5])
    assert np.all(status[good] == fixedopt.Status.CONVERGED)
    alone = solve(x0[good], fixed[good], target[good], wall[good])
    assert_rows_identical(solution, alone, good)
    np.testing.assert_array_equal(bits(x)[fixed], bits(x0)[fixed])


def test_split_and_mask_give_the_same_derivatives_with_active_bounds():
    """``finish`` reuses the loop's last gradient, scattered back from the packed
    variables under ``strategy="split"``: the active set, hence ``dx/dbound`` and
    ``dx/dtarget``, must be the same as under ``strategy="mask"``."""
    rng = np.random.default_rng(1)
    fixed = jnp.asarray(rng.random((3, 5)) < 0.3)
    x0 = jnp.zeros((3, 5))
    target = jnp.asarray(rng.uniform(-2.0, 2.0, (3, 5)))  # some beyond the upper bound 1

    def fun(x, t):
        return jnp.sum((x - t) ** 2) + 0.1 * jnp.sum(x[1:] * x[:-1])

    def x_of(target, upper, strategy):
        return fixedopt.minimize(
            fun, x0, fixed, args=(target,), batched=True, bounds=(-1.5, upper),
            strategy=strategy,
        ).x  # fmt: skip

    upper = jnp.asarray(1.0)
    for argnum in (0, 1):
        mask, split = (
            jax.jacfwd(x_of, argnums=argnum)(target, upper, strategy)
            for strategy in ("mask", "split")
        )
        np.testing.assert_allclose(split, mask, atol=1e-7)
    assert np.any(np.asarray(jax.jacfwd(x_of, argnums=1)(target, upper, "mask")) != 0)


@dataclasses.dataclass(frozen=True)
class Newton(fixedopt.Solver[None]):
    """The README's example solver (``Writing a solver``), as written there: a Newton step
    on the free block with a step-halving loop run by ``problem.differentiate.loop``."""

    max_halvings: int = 20

    def init(self, problem, x, value, grad):
        return None

    def step(self, problem, x, value, grad, state, context):
        free = ~problem.fixed
        hessian = jax.hessian(lambda z: problem.value_and_grad(z)[0])(x)
        both_free = free[:, None] & free[None, :]
        system = jnp.where(both_free, hessian, jnp.eye(x.size))  # identity on fixed rows
        step = jnp.linalg.solve(system, -problem.free_part(grad))

        def value_at(t):
            return problem.value_and_grad(problem.project(x + t * step))[0]

        def too_long(carry):  # halve the step until f does not rise (a stopped row: never)
            _, value_t, halvings = carry
            return context.active & ~(value_t <= value) & (halvings < self.max_halvings)

        def halve(carry):
            t, _, halvings = carry
            return t / 2, value_at(t / 2), halvings + 1

        one = jnp.ones((), x.dtype)
        start = (one, value_at(one), jnp.zeros((), jnp.int32))
        t, _, _ = problem.differentiate.loop(too_long, halve, start, self.max_halvings)
        x_new = problem.project(x + t * step)
        value_new, grad_new = problem.value_and_grad(x_new)
        ok = jnp.isfinite(value_new) & (value_new <= value)
        failed = jnp.where(jnp.isfinite(value_new), Outcome.FAIL, Outcome.FAIL_NONFINITE)
        predicted = jnp.maximum(-0.5 * jnp.dot(grad, step), 0.0)  # the model's reduction
        return fixedopt.Step(
            x_new, value_new, grad_new, state, outcome=jnp.where(ok, Outcome.ACCEPT, failed),
            predicted=predicted, relative_step=jnp.max(jnp.abs(step)) / jnp.max(jnp.abs(x)),
        )  # fmt: skip


def test_the_readme_solver_is_differentiable_under_both_modes():
    """``x* = log(c)`` on free entries (``dx*/dc = 1/c``), 1 where fixed (0): the same
    derivative whether the solve is differentiated implicitly or by unrolling, the
    solver unchanged."""
    fun = lambda x, c: jnp.sum(jnp.exp(x) - c * x)
    x0 = jnp.full((3, 4), 2.5)
    c = jnp.linspace(0.5, 3.0, 12).reshape(3, 4)
    fixed = jnp.eye(3, 4, dtype=bool)

    def x_of(c, differentiate):
        return fixedopt.minimize(fun, x0, fixed, args=(c,), batched=True, solver=Newton(),
                                 max_steps=30, differentiate=differentiate).x  # fmt: skip

    expected = np.where(fixed, 0.0, 1.0 / np.asarray(c))
    for differentiate in (fixedopt.Implicit(), fixedopt.Unroll()):
        solution = fixedopt.minimize(fun, x0, fixed, args=(c,), batched=True, solver=Newton(),
                                     max_steps=30, differentiate=differentiate)  # fmt: skip
        assert bool(jnp.all(solution.converged)), differentiate
        np.testing.assert_allclose(solution.x[~fixed], jnp.log(c)[~fixed], rtol=1e-3)
        gradient = jax.grad(lambda c, mode=differentiate: jnp.sum(x_of(c, mode)))(c)
        np.testing.assert_allclose(gradient, expected, rtol=2e-3, err_msg=repr(differentiate))


def test_a_solver_that_asks_no_mode_runs_the_modes_loops():
    """The loop a solver gets from ``problem.differentiate`` is a ``while`` under
    ``Implicit()`` and a ``scan`` under ``Unroll()``: the step's program shows which."""

    def program(differentiate):
        def x_of(c):
            return fixedopt.minimize(lambda x, c: jnp.sum(jnp.exp(x) - c * x), jnp.ones(3),
                                     jnp.array([True, False, False]), args=(c,),
                                     solver=Newton(), max_steps=5,
                                     differentiate=differentiate).x  # fmt: skip

        return str(jax.make_jaxpr(x_of)(jnp.ones(3)))

    implicit, unrolled = program(fixedopt.Implicit()), program("unroll")
    # (the check of a start's curvature holds a short scan of its own in both programs:
    # fixedopt._solvers.certify, conjugate gradients)
    assert "while[" in implicit
    assert "scan[" in unrolled and "while[" not in unrolled


def test_movable_entries_are_free_and_not_held_on_a_bound():
    """``Problem.movable``: not fixed, and not on a bound that the gradient pushes
    against (the projection would hold it); a side without a bound (``inf``) holds none."""
    import jax.numpy as jnp

    from fixedopt import Problem

    x = jnp.array([0.0, 0.0, 1.0, 1.0, 0.5, 0.5])
    grad = jnp.array([1.0, -1.0, -1.0, 1.0, 1.0, 1.0])
    fixed = jnp.array([False, False, False, False, False, True])
    lower = jnp.array([0.0, 0.0, -jnp.inf, -jnp.inf, 0.0, 0.0])
    upper = jnp.array([1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    problem = Problem(lambda x: (0.0, x), fixed, x, lower, upper)
    # Entry 0 pushed below its lower bound, entry 2 above its upper: held; 1 and 3
    # pushed inward, 4 inside its box: movable; 5 fixed.
    assert problem.movable(x, grad).tolist() == [False, True, False, True, True, False]
    assert problem._replace(lower=None, upper=None).movable(x, grad).tolist() == [
        True, True, True, True, True, False,
    ]  # fmt: skip
